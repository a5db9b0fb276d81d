// The cuda target: bounded kernels (exact global sizes), NVRTC into the disk cache, and loading images into a context.
#include "backends/cuda/cuda_target.hpp"

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/nvrtc.hpp"
#include "core/error.hpp"
#include "kernels/disk_cache.hpp"
#include "kernels/prelude.hpp"

namespace rt::cuda {

namespace {

constexpr size_t kMaxLog = 32 * 1024;

std::string nvrtc_error(const Nvrtc& n, nvrtcResult r) {
    const char* s = n.nvrtcGetErrorString ? n.nvrtcGetErrorString(r) : nullptr;
    return s ? s : "NVRTC error " + std::to_string(static_cast<int>(r));
}

/// Destroys an NVRTC program on every path out of build().
struct ProgramGuard {
    const Nvrtc& n;
    nvrtcProgram p = nullptr;
    ~ProgramGuard() {
        if (p) n.nvrtcDestroyProgram(&p);
    }
};

bool read_file(const std::string& path, std::string& out, std::string& why) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        why = std::strerror(errno);
        return false;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    out = ss.str();
    return true;
}

enum class ImageKind { cubin, host_elf, ptx, fatbin, unknown };

constexpr unsigned kElfMachineCuda = 190;  // EM_CUDA: e_machine of a cubin

/// e_machine of an ELF image (the 16-bit field at offset 18, in the byte order of e_ident[EI_DATA]); 0 if too short.
unsigned elf_machine(const std::string& data) {
    if (data.size() < 20) return 0;
    const auto lo = static_cast<unsigned char>(data[18]), hi = static_cast<unsigned char>(data[19]);
    return data[5] == 2 /* ELFDATA2MSB */ ? (lo << 8 | hi) : (hi << 8 | lo);
}

/// Tells the three formats the driver loads apart by their first bytes, and an ELF file for another machine (a host
/// shared object, e.g. a cpu module from runtime-compile without --backend cuda) from a cubin.
ImageKind image_kind(const std::string& data) {
    if (data.size() >= 4 && std::memcmp(data.data(), "\x7f" "ELF", 4) == 0)
        return elf_machine(data) == kElfMachineCuda ? ImageKind::cubin : ImageKind::host_elf;
    if (data.size() >= 4 && static_cast<unsigned char>(data[0]) == 0x50 && static_cast<unsigned char>(data[1]) == 0xed &&
        static_cast<unsigned char>(data[2]) == 0x55 && static_cast<unsigned char>(data[3]) == 0xba)
        return ImageKind::fatbin;  // fatbinary magic 0xBA55ED50, little-endian
    if (data.find(".version") != std::string::npos && data.find(".target") != std::string::npos) return ImageKind::ptx;
    return ImageKind::unknown;
}

}  // namespace

std::string bounded_source(const kernels::Program& program) {
    // Insert back to front, so the offsets of earlier kernels stay valid; nothing inserted contains a newline.
    std::string text = program.source;
    for (auto k = program.kernels.rbegin(); k != program.kernels.rend(); ++k) {
        if (k->body_open != std::string::npos) text.insert(k->body_open + 1, " if (rt_outside_(rt_extent_)) return;");
        if (k->no_params)
            text.replace(k->params_open + 1, k->params_close - k->params_open - 1, "rt_extent_ rt_extent_");
        else
            text.insert(k->params_open + 1, "rt_extent_ rt_extent_, ");
    }
    return "#include \"runtime/kernel.h\"\n" + kernels::line_directive(program.name, 1) + text + "\n" +
           kernels::line_directive("<rt generated>", 1) + "extern \"C\" __global__ void " + kBoundedMarker + "() {}\n";
}

CudaTarget::CudaTarget(std::string arch, bool ptx, const Driver* driver, CUcontext ctx)
    : arch_(std::move(arch)), ptx_(ptx), driver_(driver), ctx_(ctx) {
    if (arch_.size() < 4 || (arch_.rfind("sm_", 0) != 0 && arch_.rfind("compute_", 0) != 0))
        fail(RT_ERROR_INVALID_VALUE, "cuda architecture '%s' is not of the form sm_XY (e.g. sm_90)", arch_.c_str());
}

bool CudaTarget::emits_cubin() const {
    // PTX is asked for with a virtual architecture; cubin needs nvrtcGetCUBIN (NVRTC 11.1+), and a driver that
    // reports kernel parameters (12.4+): a bounded kernel's arguments go after its extent, so their count must be
    // known, which older drivers tell only from PTX.
    const Nvrtc& n = nvrtc();
    if (driver_ && !driver_->cuFuncGetParamInfo) return false;
    return !ptx_ && arch_.rfind("sm_", 0) == 0 && (!n.available || (n.nvrtcGetCUBIN && n.nvrtcGetCUBINSize));
}

std::string CudaTarget::image_extension() const { return emits_cubin() ? ".cubin" : ".ptx"; }

std::string CudaTarget::identity() const {
    static const std::string prelude = kcache::Hasher().add(kernel_prelude_text()).add(kBoundedMarker).hex();
    const Nvrtc& n = nvrtc();
    return prelude + format("|nvrtc %d.%d|", n.major, n.minor) + arch_ + image_extension();
}

std::vector<std::string> CudaTarget::nvrtc_arguments(const kernels::Program& program) const {
    const std::string gpu_arch = (emits_cubin() ? "sm_" : "compute_") + arch_.substr(arch_.find('_') + 1);
    std::vector<std::string> args = {"--gpu-architecture=" + gpu_arch, "-std=c++17", "-default-device",
                                     "--device-as-default-execution-space"};
    for (const std::string& o : program.options) {
        if (o == "-g") args.push_back("-lineinfo");
        else if (o.rfind("-O", 0) == 0 || o == "-fwrapv") continue;
        else args.push_back(o);
    }
    return args;
}

double CudaTarget::build(const kernels::Program& program, const std::string& out) const {
    const Nvrtc& n = nvrtc();
    if (!n.available) fail(RT_ERROR_NOT_SUPPORTED, "cannot compile for cuda: %s", n.why.c_str());
    const bool cubin = emits_cubin();
    const std::vector<std::string> args = nvrtc_arguments(program);
    const std::string text = bounded_source(program);

    // NVRTC has no C or C++ standard headers. What a kernel may take from the usual ones — math functions, fixed-width
    // integers, size_t, printf — is built into NVRTC or the prelude, so those includes resolve to empty headers (the
    // cpu target compiles the same source with the real ones). The prelude is a named header: the user's own
    // `#include "runtime/kernel.h"` resolves to it (and its include guard).
    const char* prelude = kernel_prelude_text();
    static const char* const kEmptyHeaders[] = {"math.h", "cmath", "stdint.h", "cstdint", "stddef.h", "cstddef",
                                                "stdio.h", "cstdio", "float.h", "cfloat", "limits.h", "climits"};
    std::vector<const char*> header_sources = {prelude, prelude, prelude};
    std::vector<const char*> header_names = {"runtime/kernel.h", "kernel.h", "include/runtime/kernel.h"};
    for (const char* h : kEmptyHeaders) {
        header_sources.push_back("/* provided by NVRTC and the runtime's kernel prelude */\n");
        header_names.push_back(h);
    }
    ProgramGuard prog{n};
    const auto t0 = std::chrono::steady_clock::now();
    nvrtcResult r = n.nvrtcCreateProgram(&prog.p, text.c_str(), program.name.c_str(),
                                         static_cast<int>(header_names.size()), header_sources.data(), header_names.data());
    if (r != NVRTC_SUCCESS)
        fail(r == NVRTC_ERROR_OUT_OF_MEMORY ? RT_ERROR_OUT_OF_MEMORY : RT_ERROR_COMPILE_FAILED,
             "nvrtcCreateProgram failed: %s", nvrtc_error(n, r).c_str());
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    r = n.nvrtcCompileProgram(prog.p, static_cast<int>(argv.size()), argv.data());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r != NVRTC_SUCCESS) {
        std::string log;
        size_t log_size = 0;
        if (n.nvrtcGetProgramLogSize(prog.p, &log_size) == NVRTC_SUCCESS && log_size > 1) {
            log.assign(log_size, '\0');
            if (n.nvrtcGetProgramLog(prog.p, log.data()) == NVRTC_SUCCESS) {
                log.resize(log.find('\0') == std::string::npos ? log.size() : log.find('\0'));
                if (log.size() > kMaxLog) log = log.substr(0, kMaxLog) + "\n[diagnostics truncated]\n";
            }
        }
        fail(RT_ERROR_COMPILE_FAILED,
             "compiling cuda kernel module '%s' (kernels: %s; options: '%s'; %s) with NVRTC %d.%d failed: %s\n%s",
             program.name.c_str(), kernels::join(program.kernel_names()).c_str(), program.option_text.c_str(),
             args[0].c_str(), n.major, n.minor, nvrtc_error(n, r).c_str(), log.c_str());
    }
    std::string image;
    size_t size = 0;
    if (cubin) {
        if ((r = n.nvrtcGetCUBINSize(prog.p, &size)) == NVRTC_SUCCESS) {
            image.resize(size);
            r = n.nvrtcGetCUBIN(prog.p, image.data());
        }
    } else if ((r = n.nvrtcGetPTXSize(prog.p, &size)) == NVRTC_SUCCESS) {
        image.resize(size);
        r = n.nvrtcGetPTX(prog.p, image.data());
        if (!image.empty() && image.back() == '\0') image.pop_back();  // a text file; load() adds the NUL back
    }
    if (r != NVRTC_SUCCESS || image.empty())
        fail(RT_ERROR_COMPILE_FAILED, "NVRTC compiled '%s' but returned no %s: %s", program.name.c_str(),
             cubin ? "cubin" : "PTX", nvrtc_error(n, r).c_str());
    kcache::store_bytes(out, image);
    return seconds;
}

std::shared_ptr<backend::Module> CudaTarget::load(const std::string& path, bool precompiled) {
    if (!driver_) fail(RT_ERROR_NOT_SUPPORTED, "this cuda target compiles only (it has no device to load '%s' on)", path.c_str());
    if (path.empty()) fail(RT_ERROR_INVALID_VALUE, "cannot load cuda module: the path is empty");
    std::string data, why;
    if (!read_file(path, data, why)) {
        if (!precompiled) return nullptr;
        fail(RT_ERROR_INVALID_VALUE, "cannot load cuda module '%s': %s", path.c_str(), why.c_str());
    }
    const ImageKind kind = image_kind(data);
    if (kind == ImageKind::unknown) {
        if (!precompiled) return nullptr;
        fail(RT_ERROR_INVALID_VALUE,
             "cannot load cuda module '%s': not a cubin (ELF), PTX (text with .version/.target) or fatbin file "
             "(runtime-compile --backend cuda makes a cubin)", path.c_str());
    }
    if (kind == ImageKind::host_elf) {
        if (!precompiled) return nullptr;
        fail(RT_ERROR_INVALID_VALUE,
             "cannot load cuda module '%s': a host shared object, not a cubin (ELF e_machine %u, a cubin's is %u; "
             "runtime-compile --backend cuda makes a cubin)", path.c_str(), elf_machine(data), kElfMachineCuda);
    }
    if (kind == ImageKind::ptx) data.push_back('\0');  // cuModuleLoadData reads PTX as a C string
    make_current(*driver_, ctx_);
    try {
        return std::make_shared<CudaModule>(*driver_, ctx_, data);
    } catch (const Error& e) {
        if (!precompiled) return nullptr;  // a damaged entry, or one this driver no longer accepts: compiled over
        throw Error(e.code(), "cannot load cuda module '" + path + "': " + e.what());
    }
}

}  // namespace rt::cuda
