// The cuda target: bounded kernels (exact global sizes), NVRTC into the disk cache, and loading images into a context.
#include "backends/cuda/cuda_target.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/cuda_fault_record.h"
#include "backends/cuda/nvrtc.hpp"
#include "core/error.hpp"
#include "kernels/disk_cache.hpp"
#include "kernels/prelude.hpp"
#include "observe/log.hpp"

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

// NVRTC has no C or C++ standard headers. What a kernel may take from the usual ones is built into NVRTC or the
// prelude, or given here: the limits of <climits>/<cfloat> (values of the LP64 ABI and IEEE-754 binary32/64, as
// the cpu target's headers have them), the dialect's math functions in namespace std for <cmath>, and the
// fixed-width types in namespace std for <cstdint>/<cstddef>. The other headers are empty.
constexpr const char* kLimitsHeader = R"(#ifndef RT_NVRTC_LIMITS_H_
#define RT_NVRTC_LIMITS_H_
#define CHAR_BIT 8
#define SCHAR_MIN (-128)
#define SCHAR_MAX 127
#define UCHAR_MAX 255
#define CHAR_MIN SCHAR_MIN
#define CHAR_MAX SCHAR_MAX
#define SHRT_MIN (-32767 - 1)
#define SHRT_MAX 32767
#define USHRT_MAX 65535
#define INT_MIN (-2147483647 - 1)
#define INT_MAX 2147483647
#define UINT_MAX 4294967295U
#define LONG_MIN (-9223372036854775807L - 1L)
#define LONG_MAX 9223372036854775807L
#define ULONG_MAX 18446744073709551615UL
#define LLONG_MIN (-9223372036854775807LL - 1LL)
#define LLONG_MAX 9223372036854775807LL
#define ULLONG_MAX 18446744073709551615ULL
#endif
)";
constexpr const char* kFloatHeader = R"(#ifndef RT_NVRTC_FLOAT_H_
#define RT_NVRTC_FLOAT_H_
#define FLT_RADIX 2
#define FLT_MANT_DIG 24
#define DBL_MANT_DIG 53
#define FLT_DIG 6
#define DBL_DIG 15
#define FLT_MIN_EXP (-125)
#define DBL_MIN_EXP (-1021)
#define FLT_MAX_EXP 128
#define DBL_MAX_EXP 1024
#define FLT_MIN_10_EXP (-37)
#define DBL_MIN_10_EXP (-307)
#define FLT_MAX_10_EXP 38
#define DBL_MAX_10_EXP 308
#define FLT_MAX 3.40282346638528859812e+38F
#define DBL_MAX 1.79769313486231570815e+308
#define FLT_MIN 1.17549435082228750797e-38F
#define DBL_MIN 2.22507385850720138309e-308
#define FLT_EPSILON 1.1920928955078125e-07F
#define DBL_EPSILON 2.22044604925031308085e-16
#define FLT_TRUE_MIN 1.40129846432481707092e-45F
#define DBL_TRUE_MIN 4.94065645841246544177e-324
#endif
)";
constexpr const char* kCmathHeader = R"(#ifndef RT_NVRTC_CMATH_
#define RT_NVRTC_CMATH_
namespace std {
using ::sqrt; using ::cbrt; using ::exp; using ::exp2; using ::expm1; using ::log; using ::log2; using ::log10;
using ::log1p; using ::sin; using ::cos; using ::tan; using ::asin; using ::acos; using ::atan; using ::atan2;
using ::sinh; using ::cosh; using ::tanh; using ::asinh; using ::acosh; using ::atanh; using ::pow; using ::fabs;
using ::floor; using ::ceil; using ::round; using ::trunc; using ::fmod; using ::fmin; using ::fmax; using ::fma;
using ::hypot; using ::erf; using ::erfc; using ::copysign; using ::isnan; using ::isinf; using ::isfinite;
using ::abs;
}
#endif
)";
constexpr const char* kCstdintHeader = R"(#ifndef RT_NVRTC_CSTDINT_
#define RT_NVRTC_CSTDINT_
namespace std {
using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t;
using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t;
}
#endif
)";
constexpr const char* kCstddefHeader = R"(#ifndef RT_NVRTC_CSTDDEF_
#define RT_NVRTC_CSTDDEF_
namespace std { using ::size_t; using ::ptrdiff_t; }
#endif
)";
constexpr const char* kEmptyHeader = "/* provided by NVRTC and the runtime's kernel prelude */\n";

/// The standard headers a kernel may include, as NVRTC gets them.
constexpr std::pair<const char*, const char*> kStandardHeaders[] = {
    {"math.h", kEmptyHeader},    {"cmath", kCmathHeader},     {"stdint.h", kEmptyHeader},
    {"cstdint", kCstdintHeader}, {"stddef.h", kEmptyHeader},  {"cstddef", kCstddefHeader},
    {"stdio.h", kEmptyHeader},   {"cstdio", kEmptyHeader},    {"float.h", kFloatHeader},
    {"cfloat", kFloatHeader},    {"limits.h", kLimitsHeader}, {"climits", kLimitsHeader}};

bool is_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// The CUDA toolkit's include directory (the one with cuda_fp16.h), or "": next to the NVRTC in use first (its
/// headers match it: <toolkit>/lib64/../include, <toolkit>/targets/<arch>/lib/../include, the pip wheel's
/// nvidia/<pkg>/lib/../include), then $CUDA_HOME, $CUDA_PATH and /usr/local/cuda.
std::string find_toolkit_include(const Nvrtc& n) {
    std::vector<std::string> candidates;
    Dl_info info{};
    if (n.available && n.nvrtcVersion && ::dladdr(reinterpret_cast<void*>(n.nvrtcVersion), &info) && info.dli_fname) {
        std::string lib = info.dli_fname;
        size_t slash = lib.rfind('/');
        if (slash != std::string::npos) candidates.push_back(lib.substr(0, slash) + "/../include");
    }
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
        if (const char* v = std::getenv(var); v && *v) candidates.push_back(std::string(v) + "/include");
    candidates.push_back("/usr/local/cuda/include");
    for (const std::string& dir : candidates) {
        if (!is_file(dir + "/cuda_fp16.h")) continue;
        char real[PATH_MAX];
        return ::realpath(dir.c_str(), real) ? std::string(real) : dir;
    }
    return {};
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

namespace {
std::string bounded_markers(const kernels::Program& program) {
    std::string out = "extern \"C\" __global__ void " + std::string(kBoundedMarker) + "() {}\n";
    for (const kernels::Program::EntryPoint& e : program.entry_points())
        out += "extern \"C\" __global__ void " + std::string(kBoundedKernelPrefix) + e.name + "() {}\n";
    for (const kernels::Program::EntryPoint& e : program.entry_points())
        if (program.kernels[e.kernel].form != kernels::GroupForm::none)
            out += "extern \"C\" __global__ void " + std::string(kGroupKernelPrefix) + e.name + "() {}\n";
    return out;
}

/// The trailer's end: its length in 8 hex digits, then this tag.
constexpr const char kMetaTag[] = "RTMETA1\n";
constexpr size_t kMetaTagSize = sizeof kMetaTag - 1;
}  // namespace

std::string append_image_meta(const std::string& image, const ImageMeta& meta) {
    if (meta.kernels.empty() && meta.globals.empty()) return image;
    std::string text = "\n";  // a PTX image stays text
    for (const auto& [name, lowered] : meta.kernels) text += "kernel " + name + " " + lowered + "\n";
    for (const std::string& g : meta.globals) text += "global " + g + "\n";
    return image + text + format("%08zx", text.size()) + kMetaTag;
}

bool split_image_meta(std::string& data, ImageMeta& meta) {
    const size_t tail = 8 + kMetaTagSize;
    if (data.size() < tail || data.compare(data.size() - kMetaTagSize, kMetaTagSize, kMetaTag) != 0) return false;
    const std::string digits = data.substr(data.size() - tail, 8);
    if (digits.find_first_not_of("0123456789abcdef") != std::string::npos) return false;
    const size_t length = std::stoul(digits, nullptr, 16);
    if (length > data.size() - tail) return false;
    const size_t start = data.size() - tail - length;
    const std::string text = data.substr(start, length);
    ImageMeta m;
    m.present = true;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        const size_t sp = line.find(' ');
        if (line.rfind("kernel ", 0) == 0) {
            const size_t sp2 = line.find(' ', sp + 1);
            if (sp2 == std::string::npos) return false;
            m.kernels.emplace_back(line.substr(sp + 1, sp2 - sp - 1), line.substr(sp2 + 1));
        } else if (line.rfind("global ", 0) == 0) {
            m.globals.push_back(line.substr(sp + 1));
        } else if (!line.empty()) {
            return false;
        }
    }
    data.resize(start);
    meta = std::move(m);
    return true;
}

std::string bounded_source(const kernels::Program& program) {
    // Insert back to front, so the offsets of earlier kernels stay valid; nothing inserted contains a newline.
    std::string text = program.source;
    for (auto k = program.kernels.rbegin(); k != program.kernels.rend(); ++k) {
        if (k->body_open != std::string::npos && k->form == kernels::GroupForm::none)
            text.insert(k->body_open + 1, " if (rt_outside_(rt_extent_)) return;");
        if (k->no_params)
            text.replace(k->params_open + 1, k->params_close - k->params_open - 1, "rt_extent_ rt_extent_");
        else
            text.insert(k->params_open + 1, "rt_extent_ rt_extent_, ");
        // A template cannot have C linkage: its instantiations are found by their lowered names (build()).
        if (k->is_template) text.replace(k->start, 9, "__global__");
    }
    // The fault record's pointer (rt_assert, cuda_fault_record.h) is defined once per program, set at module load.
    return "#define RT_CUDA_FAULT_RECORD_ 1\n#include \"runtime/kernel.h\"\n__device__ rt_cuda_fault_* " +
           std::string(RT_CUDA_FAULT_RECORD_SYMBOL) + " = nullptr;\n" + kernels::line_directive(program.name, 1) + text + "\n" +
           kernels::line_directive("<rt generated>", 1) + bounded_markers(program);
}

CudaTarget::CudaTarget(std::string arch, bool ptx, const Driver* driver, CUcontext ctx, CUdeviceptr fault_record)
    : arch_(std::move(arch)), ptx_(ptx), driver_(driver), ctx_(ctx), fault_record_(fault_record) {
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

const std::string& CudaTarget::toolkit_include() {
    static const std::string dir = find_toolkit_include(nvrtc());  // where NVRTC is does not change in a process
    return dir;
}

std::string CudaTarget::identity() const {
    // The standard headers given to NVRTC are part of the prelude; the toolkit's headers are found by directory.
    // So is what the target generates around a source (extent, guard, fault record, markers): a sample program's
    // bounded text stands for it, so a change to the generator gives new keys. The NVRTC arguments of a program
    // without options cover the fixed ones.
    static const std::string prelude = [] {
        kcache::Hasher h;
        h.add(kernel_prelude_text_digest()).add(kBoundedMarker).add(RT_CUDA_FAULT_RECORD_SYMBOL);
        for (const auto& [name, text] : kStandardHeaders) h.add(name).add(text);
        h.add(bounded_source(kernels::read_program("RT_KERNEL void k(int* p) { p[0] = 1; }", "", "sample")));
        return h.hex();
    }();
    const Nvrtc& n = nvrtc();
    std::string id = prelude + format("|nvrtc %d.%d|", n.major, n.minor) + arch_ + image_extension() + "|" + toolkit_include();
    kernels::Program none;
    for (const std::string& a : nvrtc_arguments(none)) id += "|" + a;
    return id;
}

std::vector<std::string> CudaTarget::nvrtc_arguments(const kernels::Program& program) const {
    const std::string gpu_arch = (emits_cubin() ? "sm_" : "compute_") + arch_.substr(arch_.find('_') + 1);
    std::vector<std::string> args = {"--gpu-architecture=" + gpu_arch, "-std=c++17", "-default-device",
                                     "--device-as-default-execution-space"};
    // The toolkit's own headers (cuda_fp16.h, ...), after the program's -I directories.
    const std::string& toolkit = toolkit_include();
    for (const std::string& o : program.options) {
        if (o == "-g") args.push_back("-lineinfo");
        else if (o.rfind("-O", 0) == 0 || o == "-fwrapv" || o.rfind("-mprefer-vector-width=", 0) == 0) continue;
        else args.push_back(o);
    }
    if (!toolkit.empty()) args.push_back("-I" + toolkit);
    return args;
}

double CudaTarget::build(const kernels::Program& program, const std::string& out) const {
    const Nvrtc& n = nvrtc();
    if (!n.available) fail(RT_ERROR_NOT_SUPPORTED, "cannot compile for cuda: %s", n.why.c_str());
    const bool cubin = emits_cubin();
    const std::vector<std::string> args = nvrtc_arguments(program);
    const std::string text = bounded_source(program);

    // The standard headers NVRTC lacks are given (kStandardHeaders; the cpu target compiles the same source with
    // the real ones). The prelude is a named header: the user's own `#include "runtime/kernel.h"` resolves to it
    // (and its include guard).
    const char* prelude = kernel_prelude_text();
    std::vector<const char*> header_sources = {prelude, prelude, prelude};
    std::vector<const char*> header_names = {"runtime/kernel.h", "kernel.h", "include/runtime/kernel.h"};
    for (const auto& [name, text] : kStandardHeaders) {
        header_sources.push_back(text);
        header_names.push_back(name);
    }
    ProgramGuard prog{n};
    const auto t0 = std::chrono::steady_clock::now();
    nvrtcResult r = n.nvrtcCreateProgram(&prog.p, text.c_str(), program.name.c_str(),
                                         static_cast<int>(header_names.size()), header_sources.data(), header_names.data());
    if (r != NVRTC_SUCCESS)
        fail(r == NVRTC_ERROR_OUT_OF_MEMORY ? RT_ERROR_OUT_OF_MEMORY : RT_ERROR_COMPILE_FAILED,
             "nvrtcCreateProgram failed: %s", nvrtc_error(n, r).c_str());
    // Kernel instantiations are named to NVRTC, which instantiates them and tells their lowered names.
    if (!program.instantiations.empty() && (!n.nvrtcAddNameExpression || !n.nvrtcGetLoweredName))
        fail(RT_ERROR_NOT_SUPPORTED, "compiling '%s' for cuda: kernel templates (RT_KERNEL_INSTANTIATE) need NVRTC's "
             "nvrtcAddNameExpression and nvrtcGetLoweredName, which %s lacks", program.name.c_str(), n.library.c_str());
    for (const kernels::Instantiation& i : program.instantiations)
        if ((r = n.nvrtcAddNameExpression(prog.p, i.expression.c_str())) != NVRTC_SUCCESS)
            fail(RT_ERROR_COMPILE_FAILED, "nvrtcAddNameExpression('%s') failed: %s", i.expression.c_str(),
                 nvrtc_error(n, r).c_str());
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    RT_LOG(kernels, debug, "running NVRTC %d.%d (%s) on '%s': %s", n.major, n.minor, n.library.c_str(),
           program.name.c_str(), kernels::join(args, " ").c_str());
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
    ImageMeta meta;
    for (const kernels::Instantiation& i : program.instantiations) {
        const char* lowered = nullptr;
        if ((r = n.nvrtcGetLoweredName(prog.p, i.expression.c_str(), &lowered)) != NVRTC_SUCCESS || !lowered)
            fail(RT_ERROR_COMPILE_FAILED, "NVRTC compiled '%s' but has no lowered name for the kernel '%s' (%s): %s",
                 program.name.c_str(), i.name.c_str(), i.expression.c_str(), nvrtc_error(n, r).c_str());
        meta.kernels.emplace_back(i.name, lowered);
    }
    meta.globals = program.globals;
    kcache::store_bytes(out, append_image_meta(image, meta));
    return seconds;
}

std::shared_ptr<backend::Module> CudaTarget::load(const std::string& path, bool precompiled) {
    if (!driver_) fail(RT_ERROR_NOT_SUPPORTED, "this cuda target compiles only (it has no device to load '%s' on)", path.c_str());
    if (path.empty()) fail(RT_ERROR_INVALID_VALUE, "cannot load cuda module: the path is empty");
    std::string data, why;
    if (!kcache::read_bytes(path, data, why)) {
        if (!precompiled) return nullptr;
        fail(RT_ERROR_INVALID_VALUE, "cannot load cuda module '%s': %s", path.c_str(), why.c_str());
    }
    ImageMeta meta;
    split_image_meta(data, meta);
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
        return std::make_shared<CudaModule>(*driver_, ctx_, data, fault_record_, meta);
    } catch (const Error& e) {
        if (!precompiled) return nullptr;  // a damaged entry, or one this driver no longer accepts: compiled over
        throw Error(e.code(), "cannot load cuda module '" + path + "': " + e.what());
    }
}

}  // namespace rt::cuda
