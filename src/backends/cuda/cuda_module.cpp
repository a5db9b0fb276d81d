// cuda modules and functions: CUmodule loading (cubin, PTX, fatbin), kernel names, parameter sizes.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>

#include "backends/cuda/cuda_backend.hpp"
#include "core/error.hpp"

namespace rt::cuda {

namespace {

/// Kernel names of a PTX text: the identifiers after `.entry` (drivers before 12.4 cannot enumerate).
std::vector<std::string> ptx_entries(const std::string& ptx) {
    std::vector<std::string> names;
    for (size_t p = ptx.find(".entry"); p != std::string::npos; p = ptx.find(".entry", p + 6)) {
        size_t i = p + 6;
        while (i < ptx.size() && (ptx[i] == ' ' || ptx[i] == '\t')) ++i;
        size_t start = i;
        while (i < ptx.size() && (std::isalnum(static_cast<unsigned char>(ptx[i])) || ptx[i] == '_' || ptx[i] == '$')) ++i;
        if (i > start) names.push_back(ptx.substr(start, i - start));
    }
    return names;
}

/// Parameter sizes of kernel `name` from its PTX `.entry name( .param ... )` list; false if not found or not understood.
bool ptx_param_sizes(const std::string& ptx, const std::string& name, std::vector<size_t>& sizes) {
    size_t p = 0;
    for (;;) {
        p = ptx.find(".entry " + name, p);
        if (p == std::string::npos) return false;
        p += 7 + name.size();
        if (p < ptx.size() && (std::isalnum(static_cast<unsigned char>(ptx[p])) || ptx[p] == '_' || ptx[p] == '$')) continue;
        break;
    }
    const size_t open = ptx.find('(', p), close = ptx.find(')', p);
    sizes.clear();
    if (open == std::string::npos || close == std::string::npos || close < open) {
        return ptx.find('{', p) != std::string::npos && (open == std::string::npos || ptx.find('{', p) < open);  // no list
    }
    std::string list = ptx.substr(open + 1, close - open - 1);
    for (size_t q = list.find(".param"); q != std::string::npos; q = list.find(".param", q + 6)) {
        size_t end = list.find(',', q);
        std::string decl = list.substr(q, end == std::string::npos ? std::string::npos : end - q);
        size_t elem = 0;
        for (const char* t : {".u64", ".s64", ".b64", ".f64"}) if (decl.find(t) != std::string::npos) elem = 8;
        for (const char* t : {".u32", ".s32", ".b32", ".f32"}) if (!elem && decl.find(t) != std::string::npos) elem = 4;
        for (const char* t : {".u16", ".s16", ".b16", ".f16"}) if (!elem && decl.find(t) != std::string::npos) elem = 2;
        for (const char* t : {".u8", ".s8", ".b8"}) if (!elem && decl.find(t) != std::string::npos) elem = 1;
        if (!elem) return false;
        size_t count = 1, b = decl.find('[');
        if (b != std::string::npos) count = std::strtoull(decl.c_str() + b + 1, nullptr, 10);
        sizes.push_back(elem * count);
    }
    return true;
}

}  // namespace

ModuleImage::~ModuleImage() {
    if (!module) return;
    // Launches of this module may still be queued on any stream of the context: unload only after them. The
    // device outlives the timeline's actions (the runtime drains it before devices go).
    const Driver* d = &driver;
    backend::defer_after_queued_work([d, c = ctx, m = module] {
        CUcontext cur = nullptr;
        if (d->cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != c) d->cuCtxSetCurrent(c);
        d->cuModuleUnload(m);
    });  // false (out of memory): the module stays loaded until the context goes, never unloaded early
}

CudaFunction::CudaFunction(std::shared_ptr<ModuleImage> image, CUfunction fn, std::string name, bool bounded,
                           const std::string& ptx, const std::string& symbol)
    : image_(std::move(image)), fn_(fn), name_(std::move(name)), bounded_(bounded) {
    const Driver& d = image_->driver;
    int shared = 0;
    if (d.cuFuncGetAttribute && d.cuFuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn_) == CUDA_SUCCESS &&
        shared > 0)
        static_local_bytes_ = static_cast<size_t>(shared);
    bool known = d.cuFuncGetParamInfo != nullptr;
    for (size_t i = 0; known && i < 4096; ++i) {
        size_t offset = 0, size = 0;
        CUresult r = d.cuFuncGetParamInfo(fn_, i, &offset, &size);
        if (r == CUDA_ERROR_INVALID_VALUE) break;  // past the last parameter
        if (r != CUDA_SUCCESS) {
            sizes_.clear();  // not known after all
            known = false;
        } else {
            sizes_.push_back(size);
        }
    }
    // Older drivers, or cubins they cannot describe: the PTX text's parameter list, when the image is PTX.
    if (!known && !(ptx.empty() || !ptx_param_sizes(ptx, symbol, sizes_))) known = true;
    if (!known) {
        // CUDA's convention without an arity check, possible only without an extent to put first.
        if (bounded_) fail(RT_ERROR_NOT_SUPPORTED, "kernel '%s': this CUDA driver cannot report its parameters "
                                                   "(cuFuncGetParamInfo, driver 12.4+), which a bounded kernel needs "
                                                   "(the cuda target emits PTX for such drivers)", name_.c_str());
        return;
    }
    if (bounded_) {
        if (sizes_.empty()) return;  // no extent parameter reported: not known after all
        sizes_.erase(sizes_.begin());
    }
    num_args_ = static_cast<int>(sizes_.size());
}

CudaModule::CudaModule(const Driver& d, CUcontext ctx, const std::string& image, CUdeviceptr fault_record,
                       ImageMeta meta)
    : image_(new ModuleImage{d, ctx, nullptr}), meta_(std::move(meta)) {
    const bool text = std::strlen(image.c_str()) + 1 >= image.size();
    if (text && d.cuModuleLoadDataEx) {
        // PTX is compiled by the driver's JIT here: ask for its error log, which says what it rejected and where.
        char log[8192] = {};
        CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
        void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof log - 1))};
        CUresult r = d.cuModuleLoadDataEx(&image_->module, image.data(), 2, options, values);
        if (r != CUDA_SUCCESS) {
            log[sizeof log - 1] = '\0';
            try {
                throw_driver_error(d, r, "cuModuleLoadDataEx (PTX)");
            } catch (const Error& e) {
                if (!log[0]) throw;
                throw Error(e.code(), std::string(e.what()) + "; the PTX JIT's log:\n" + log);
            }
        }
    } else {
        CU_CHECK(d, cuModuleLoadData(&image_->module, image.data()));
    }
    CUfunction marker = nullptr;
    bounded_ = d.cuModuleGetFunction(&marker, image_->module, kBoundedMarker) == CUDA_SUCCESS;
    if (bounded_ && fault_record) {
        // Where a failed rt_assert writes (kernel.h): set once, before any launch of the module.
        CUdeviceptr global = 0;
        size_t bytes = 0;
        CUresult r = d.cuModuleGetGlobal(&global, &bytes, image_->module, RT_CUDA_FAULT_RECORD_SYMBOL);
        if (r == CUDA_SUCCESS && bytes == sizeof fault_record)
            CU_CHECK(d, cuMemcpyHtoD(global, &fault_record, sizeof fault_record));
        else if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_FOUND)  // not found: a module without rt_assert's record
            throw_driver_error(d, r, "cuModuleGetGlobal (" RT_CUDA_FAULT_RECORD_SYMBOL ")");
    }
    unsigned count = 0;
    if (d.cuModuleGetFunctionCount && d.cuModuleEnumerateFunctions && d.cuFuncGetName &&
        d.cuModuleGetFunctionCount(&count, image_->module) == CUDA_SUCCESS && count > 0) {
        std::vector<CUfunction> fns(count);
        if (d.cuModuleEnumerateFunctions(fns.data(), count, image_->module) == CUDA_SUCCESS) {
            for (CUfunction f : fns) {
                const char* n = nullptr;
                if (d.cuFuncGetName(&n, f) == CUDA_SUCCESS && n) names_.emplace_back(n);
            }
        }
    }
    if (text) ptx_ = image.c_str();
    if (names_.empty() && text) names_ = ptx_entries(image);
    std::erase_if(names_, [](const std::string& n) {
        return n == kBoundedMarker || n.rfind(kBoundedKernelPrefix, 0) == 0 ||
               n.rfind(kGroupKernelPrefix, 0) == 0;  // the runtime's, not kernels
    });
    // Kernel instantiations go by their kernel names, not their lowered ones.
    for (const auto& [name, lowered] : meta_.kernels) {
        auto it = std::find(names_.begin(), names_.end(), lowered);
        if (it != names_.end()) *it = name;
        else if (std::find(names_.begin(), names_.end(), name) == names_.end()) names_.push_back(name);
    }
}

bool CudaModule::find_global(const std::string& name, GlobalSymbol& out) {
    if (name.rfind("rt_", 0) == 0) return false;
    if (meta_.present && std::find(meta_.globals.begin(), meta_.globals.end(), name) == meta_.globals.end()) return false;
    std::lock_guard lock(mutex_);
    const Driver& d = image_->driver;
    CUcontext cur = nullptr;
    if (d.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != image_->ctx) CU_CHECK(d, cuCtxSetCurrent(image_->ctx));
    CUdeviceptr p = 0;
    size_t bytes = 0;
    CUresult r = d.cuModuleGetGlobal(&p, &bytes, image_->module, name.c_str());
    if (r == CUDA_ERROR_NOT_FOUND) return false;
    if (r != CUDA_SUCCESS) throw_driver_error(d, r, "cuModuleGetGlobal");
    out.address = reinterpret_cast<void*>(static_cast<uintptr_t>(p));
    out.bytes = bytes;
    return true;
}

std::shared_ptr<backend::Function> CudaModule::get_function_impl(const std::string& name) {
    std::lock_guard lock(mutex_);
    auto it = functions_.find(name);
    if (it != functions_.end()) return it->second;
    const Driver& d = image_->driver;
    CUcontext cur = nullptr;
    if (d.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != image_->ctx) CU_CHECK(d, cuCtxSetCurrent(image_->ctx));
    if (name == kBoundedMarker || name.rfind(kBoundedKernelPrefix, 0) == 0 || name.rfind(kGroupKernelPrefix, 0) == 0)
        return nullptr;  // the runtime's
    std::string symbol = name;
    for (const auto& [kernel, lowered] : meta_.kernels)
        if (kernel == name) symbol = lowered;
    CUfunction fn = nullptr;
    CUresult r = d.cuModuleGetFunction(&fn, image_->module, symbol.c_str());
    if (r == CUDA_ERROR_NOT_FOUND) return nullptr;  // the core lists the module's kernels
    if (r != CUDA_SUCCESS) throw_driver_error(d, r, "cuModuleGetFunction");
    CUfunction marker = nullptr;  // this kernel takes the extent only if the target bounded it
    const bool bounded =
        bounded_ && d.cuModuleGetFunction(&marker, image_->module, (kBoundedKernelPrefix + name).c_str()) == CUDA_SUCCESS;
    auto f = std::make_shared<CudaFunction>(image_, fn, name, bounded, ptx_, symbol);
    f->set_groups(bounded_ &&
                  d.cuModuleGetFunction(&marker, image_->module, (kGroupKernelPrefix + name).c_str()) == CUDA_SUCCESS);
    functions_.emplace(name, f);
    return f;
}

}  // namespace rt::cuda
