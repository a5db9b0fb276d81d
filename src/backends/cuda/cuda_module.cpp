// cuda modules and functions: CUmodule loading (cubin, PTX, fatbin), kernel names, parameter sizes.
#include <cctype>
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

}  // namespace

ModuleImage::~ModuleImage() {
    if (!module) return;
    // Launches of this module may still be queued on any stream of the context: unload only after them.
    CUcontext cur = nullptr;
    if (driver.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != ctx) driver.cuCtxSetCurrent(ctx);
    driver.cuCtxSynchronize();
    driver.cuModuleUnload(module);
}

CudaFunction::CudaFunction(std::shared_ptr<ModuleImage> image, CUfunction fn, std::string name)
    : image_(std::move(image)), fn_(fn), name_(std::move(name)) {
    const Driver& d = image_->driver;
    if (!d.cuFuncGetParamInfo) return;  // older driver: CUDA's convention without an arity check
    for (size_t i = 0; i < 4096; ++i) {
        size_t offset = 0, size = 0;
        CUresult r = d.cuFuncGetParamInfo(fn_, i, &offset, &size);
        if (r == CUDA_ERROR_INVALID_VALUE) break;  // past the last parameter
        if (r != CUDA_SUCCESS) {
            sizes_.clear();  // not known after all
            return;
        }
        sizes_.push_back(size);
    }
    num_args_ = static_cast<int>(sizes_.size());
}

CudaModule::CudaModule(const Driver& d, CUcontext ctx, const std::string& image, std::vector<std::string> names)
    : image_(new ModuleImage{d, ctx, nullptr}), names_(std::move(names)) {
    CU_CHECK(d, cuModuleLoadData(&image_->module, image.data()));
    if (!names_.empty()) return;
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
    if (names_.empty() && std::strlen(image.c_str()) + 1 >= image.size()) names_ = ptx_entries(image);  // text only
}

std::shared_ptr<backend::Function> CudaModule::get_function_impl(const std::string& name) {
    std::lock_guard lock(mutex_);
    auto it = functions_.find(name);
    if (it != functions_.end()) return it->second;
    const Driver& d = image_->driver;
    CUcontext cur = nullptr;
    if (d.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != image_->ctx) CU_CHECK(d, cuCtxSetCurrent(image_->ctx));
    CUfunction fn = nullptr;
    CUresult r = d.cuModuleGetFunction(&fn, image_->module, name.c_str());
    if (r == CUDA_ERROR_NOT_FOUND) return nullptr;  // the core lists the module's kernels
    if (r != CUDA_SUCCESS) throw_driver_error(d, r, "cuModuleGetFunction");
    auto f = std::make_shared<CudaFunction>(image_, fn, name);
    functions_.emplace(name, f);
    return f;
}

}  // namespace rt::cuda
