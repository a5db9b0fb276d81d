// test_cuda_compiler.cpp — the cuda kernel compiler without a GPU: NVRTC through the shim, cubin/PTX, diagnostics, disk cache.
// Every kernel source of the C++ test suite (raw string literals with RT_KERNEL in tests/cpp/*.cpp, and
// rt_test::Gate's device-side kernel in test_util.hpp) must compile for
// sm_90 — the dialect's CUDA branch is checked on every CI run, not only on GPU machines. Skipped (visibly) when the
// build has no cuda backend or NVRTC cannot be loaded.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <sstream>

#include "test_util.hpp"

#ifdef RUNTIME_HAVE_CUDA
#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/cuda_target.hpp"
#include "backends/cuda/nvrtc.hpp"
#include "core/error.hpp"
#include "dvpp/kernel_library.hpp"

namespace {

using rt_test::contains;

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/// Scratch kernel cache for the whole file: tests never touch ~/.cache/runtime.
class CacheDir : public ::testing::Environment {
public:
    void SetUp() override {
        char tmpl[] = "/tmp/rt-cuda-cache.XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        path = tmpl;
        ::setenv("RUNTIME_CACHE_DIR", path.c_str(), 1);
    }
    void TearDown() override { std::system(("rm -rf '" + path + "'").c_str()); }
    static inline std::string path;
};
::testing::Environment* const g_cache = ::testing::AddGlobalTestEnvironment(new CacheDir);

/// What the cuda target put in the disk cache for one compilation, with the image read back.
struct CudaCompileResult {
    std::string image, path, key;
    bool cubin = false, from_cache = false;
    std::vector<std::string> kernels;
    double compile_seconds = 0;
};
CudaCompileResult compile(const std::string& source, const std::string& options, const std::string& arch,
                          const std::string& name = "kernel_source", bool ptx = false, bool force = false) {
    rt::cuda::CudaTarget target(arch, ptx);
    rt::kernels::Image image = rt::kernels::compile(target, rt::kernels::read_program(source, options, name), force);
    CudaCompileResult r;
    r.image = read_text(image.path);
    r.path = image.path;
    r.key = image.key;
    r.cubin = target.image_extension() == ".cubin";
    r.from_cache = image.from_cache;
    r.kernels = image.kernels;
    r.compile_seconds = image.compile_seconds;
    return r;
}

class CudaCompiler : public ::testing::Test {
protected:
    void SetUp() override {
        const rt::cuda::Nvrtc& n = rt::cuda::nvrtc();
        if (!n.available) GTEST_SKIP() << "NVRTC not loadable here: " << n.why;
    }
};

constexpr const char* kScale = R"(#include "runtime/kernel.h"
RT_DEVICE float twice(float x) { return x * 2.0f; }
RT_KERNEL void scale(const float* in, float* out, int n) {
    int i = get_global_id(0);
    if (i < n) out[i] = twice(in[i]);
}
)";

/// Raw string literals R"delim( … )delim" in `text` that contain RT_KERNEL, with their file line.
std::vector<std::pair<int, std::string>> kernel_literals(const std::string& text) {
    std::vector<std::pair<int, std::string>> out;
    for (size_t p = text.find("R\""); p != std::string::npos; p = text.find("R\"", p + 2)) {
        if (p > 0 && (std::isalnum(static_cast<unsigned char>(text[p - 1])) || text[p - 1] == '_')) continue;
        size_t open = text.find('(', p + 2);
        if (open == std::string::npos || open - (p + 2) > 16) continue;
        std::string delim = text.substr(p + 2, open - (p + 2));
        size_t close = text.find(")" + delim + "\"", open + 1);
        if (close == std::string::npos) continue;
        std::string body = text.substr(open + 1, close - open - 1);
        if (body.find("RT_KERNEL") != std::string::npos)
            out.emplace_back(1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(p), '\n')), body);
        p = close;
    }
    return out;
}

TEST_F(CudaCompiler, EveryKernelSourceOfTheTestSuiteCompilesForSm90) {
    std::string dir = RT_TEST_SOURCE_DIR;
    DIR* d = ::opendir(dir.c_str());
    ASSERT_NE(d, nullptr) << dir;
    std::vector<std::string> files;
    while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if ((n.rfind("test_", 0) == 0 && n.size() > 4 && n.compare(n.size() - 4, 4, ".cpp") == 0) ||
            n == "test_util.hpp")  // rt_test::Gate's device-side kernel
            files.push_back(n);
    }
    ::closedir(d);
    std::sort(files.begin(), files.end());
    int compiled = 0, expected_failures = 0;
    for (const std::string& f : files) {
        for (const auto& [line, source] : kernel_literals(read_text(dir + "/" + f))) {
            SCOPED_TRACE(f + ":" + std::to_string(line));
            // Sources a test means to be rejected say so (compile errors, duplicate kernels, missing kernels).
            bool meant_bad = source.find("RT_TEST_EXPECT_COMPILE_ERROR") != std::string::npos;
            try {
                CudaCompileResult r = compile(source, "", "sm_90", f + ":" + std::to_string(line));
                EXPECT_FALSE(meant_bad);
                ASSERT_TRUE(r.cubin);
                ASSERT_GE(r.image.size(), 4u);
                EXPECT_EQ(r.image.compare(0, 4, "\x7f" "ELF"), 0) << "not a cubin";
                EXPECT_FALSE(r.kernels.empty());
                ++compiled;
            } catch (const rt::Error& e) {
                if (meant_bad) ++expected_failures;
                else ADD_FAILURE() << "code " << rtGetErrorName(e.code()) << ": " << e.what();
            }
        }
    }
    // The suite has a dozen kernel sources (test_kernel_launch's big one, the C++ API's, the pool's, the compiler's).
    EXPECT_GE(compiled, 5) << "the scan found too few kernel sources; did the tests move?";
    std::printf("compiled %d kernel sources of the test suite for sm_90 (%d meant to fail)\n", compiled, expected_failures);
}

// DVPP's kernels are shipped inside the library and built on the user's machine: every family must build for a GPU
// here, on every CI run, not first on a user's GPU.
TEST_F(CudaCompiler, EveryDvppKernelFamilyCompilesForSm90) {
    using rt::dvpp::Family;
    for (Family f : {Family::resize, Family::color, Family::normalize, Family::preprocess}) {
        const std::string name = std::string("dvpp ") + rt::dvpp::family_name(f);
        SCOPED_TRACE(name);
        try {
            CudaCompileResult r = compile(rt::dvpp::family_source(f), "", "sm_90", name);
            ASSERT_TRUE(r.cubin);
            EXPECT_EQ(r.image.compare(0, 4, "\x7f" "ELF"), 0) << "not a cubin";
            EXPECT_FALSE(r.kernels.empty());
        } catch (const rt::Error& e) {
            ADD_FAILURE() << "code " << rtGetErrorName(e.code()) << ": " << e.what();
        }
    }
}

TEST_F(CudaCompiler, CubinAndPtxForSm90) {
    CudaCompileResult c = compile(kScale, "", "sm_90");
    ASSERT_TRUE(c.cubin);
    EXPECT_EQ(c.image.compare(0, 4, "\x7f" "ELF"), 0);
    EXPECT_EQ(c.kernels, std::vector<std::string>{"scale"});
    EXPECT_TRUE(contains(c.path, "/cuda/")) << c.path;
    EXPECT_EQ(c.path.substr(c.path.size() - 6), ".cubin");

    CudaCompileResult p = compile(kScale, "", "sm_90", "kernel_source", /*ptx=*/true);
    ASSERT_FALSE(p.cubin);
    EXPECT_TRUE(contains(p.image, ".target sm_90"));
    EXPECT_TRUE(contains(p.image, ".entry scale"));
    EXPECT_NE(p.image.back(), '\0') << "a PTX file is text (the loader adds the NUL cuModuleLoadData needs)";
    EXPECT_NE(c.key, p.key);
}

// Kernel templates (issue 13): the instantiation is compiled by name expression, and its lowered name is recorded in
// the image's trailer with the module's globals; the driver gets the image without the trailer.
TEST_F(CudaCompiler, KernelInstantiationsAndGlobalsAreRecordedBesideTheImage) {
    const std::string src = "RT_GLOBAL float gain = 1.0f;\n"
                            "template <class T> RT_KERNEL void axpy(T a, const T* x, T* y) { y[0] = a * x[0] * gain; }\n"
                            "RT_KERNEL_INSTANTIATE(axpy_f32, axpy<float>);\nRT_KERNEL_INSTANTIATE(axpy_f64, axpy< double >);\n";
    for (bool ptx : {false, true}) {
        CudaCompileResult r = compile(src, "", "sm_90", "kernel_source", ptx);
        EXPECT_EQ(r.kernels, (std::vector<std::string>{"axpy_f32", "axpy_f64"}));
        std::string data = r.image;
        rt::cuda::ImageMeta meta;
        ASSERT_TRUE(rt::cuda::split_image_meta(data, meta));
        EXPECT_TRUE(meta.present);
        ASSERT_EQ(meta.kernels.size(), 2u);
        EXPECT_EQ(meta.kernels[0].first, "axpy_f32");
        EXPECT_EQ(meta.kernels[1].first, "axpy_f64");
        EXPECT_EQ(meta.kernels[0].second.rfind("_Z", 0), 0u) << meta.kernels[0].second;  // a mangled name
        EXPECT_NE(meta.kernels[0].second, meta.kernels[1].second);
        EXPECT_EQ(meta.globals, std::vector<std::string>{"gain"});
        EXPECT_TRUE(contains(data, meta.kernels[1].second)) << "the lowered name is the image's symbol";
        if (ptx) {
            EXPECT_TRUE(contains(data, ".global .align 4 .f32 gain = ")) << "an unmangled __device__ variable";
            EXPECT_EQ(data.find("RTMETA1"), std::string::npos);
        } else {
            EXPECT_EQ(data.compare(0, 4, "\x7f" "ELF"), 0);
        }
    }
    // A source without either has no trailer: the image is NVRTC's output.
    std::string plain = compile(kScale, "", "sm_90").image;
    rt::cuda::ImageMeta none;
    EXPECT_FALSE(rt::cuda::split_image_meta(plain, none));
    // A damaged trailer is not one.
    std::string bad = "image\nkernel a b\n00000010RTMETA1\n";
    EXPECT_FALSE(rt::cuda::split_image_meta(bad, none));
    EXPECT_EQ(bad, "image\nkernel a b\n00000010RTMETA1\n");
}

TEST(CudaTarget, BoundedSourceGivesKernelTemplatesCxxLinkage) {
    const std::string src = "template <class T>\nRT_KERNEL void t(T* o) {\n    o[0] = 1;\n}\nRT_KERNEL_INSTANTIATE(t_i, t<int>);\n";
    const std::string text = rt::cuda::bounded_source(rt::kernels::read_program(src, "", "k.cu"));
    EXPECT_TRUE(contains(text, "__global__ void t(rt_extent_ rt_extent_, T* o) { if (rt_outside_(rt_extent_)) return;"))
        << text;
    EXPECT_TRUE(contains(text, "rt_bounded_v1_t_i()")) << "the marker goes by the instantiation's name";
    EXPECT_FALSE(contains(text, "rt_bounded_v1_t()"));
}

// Exact global sizes: every kernel gets the extent first and returns for the items past it; line numbers stay.
TEST(CudaTarget, BoundedSourceAddsTheExtentOnTheKernelsOwnLines) {
    const std::string src = "RT_KERNEL void k(int* o, int n) {\n    o[0] = n;\n}\n"
                            "RT_KERNEL void e() {}\nRT_KERNEL void v( void ) {}\nRT_KERNEL void c(/* none, ) */) {}\n"
                            "// RT_KERNEL void commented(int x) {}\n";
    rt::kernels::Program p = rt::kernels::read_program(src, "", "b.cu");
    ASSERT_EQ(p.kernel_names(), (std::vector<std::string>{"k", "e", "v", "c"}));
    const std::string text = rt::cuda::bounded_source(p);
    EXPECT_TRUE(contains(text, "RT_KERNEL void k(rt_extent_ rt_extent_, int* o, int n) { if (rt_outside_(rt_extent_)) return;\n"))
        << text;
    EXPECT_TRUE(contains(text, "void e(rt_extent_ rt_extent_) { if (rt_outside_(rt_extent_)) return;}")) << text;
    EXPECT_TRUE(contains(text, "void v(rt_extent_ rt_extent_) {")) << text;
    EXPECT_TRUE(contains(text, "void c(rt_extent_ rt_extent_) {")) << text;
    EXPECT_TRUE(contains(text, "// RT_KERNEL void commented(int x) {}")) << "comments are left alone: " << text;
    EXPECT_TRUE(contains(text, rt::cuda::kBoundedMarker));
    const std::string directive = "#line 1 \"b.cu\"\n";
    const size_t body = text.find(directive) + directive.size();
    ASSERT_NE(body, std::string::npos + directive.size()) << text;
    const size_t end = text.find("#line 1 \"<rt generated>\"");
    ASSERT_NE(end, std::string::npos);
    EXPECT_EQ(std::count(text.begin() + static_cast<long>(body), text.begin() + static_cast<long>(end), '\n'),
              std::count(src.begin(), src.end(), '\n') + 1)
        << "the source keeps its line count, so diagnostics keep its line numbers";
}

TEST_F(CudaCompiler, KernelsTakeTheExtentAsTheirFirstParameter) {
    CudaCompileResult p = compile(kScale, "", "sm_90", "kernel_source", /*ptx=*/true);
    const size_t entry = p.image.find(".entry scale(");
    ASSERT_NE(entry, std::string::npos) << p.image;
    EXPECT_TRUE(contains(p.image.substr(entry, 200), ".b8 scale_param_0[24]")) << "three 64-bit sizes first: " << p.image;
    EXPECT_TRUE(contains(p.image, std::string(".entry ") + rt::cuda::kBoundedMarker));
}

TEST_F(CudaCompiler, DialectBuiltinsMathAtomicsAndAssertCompile) {
    const char* src = R"(
RT_KERNEL void everything(float* f, double* d, int32_t* i, uint32_t* u, int64_t* l, uint64_t* ul, size_t n) {
    size_t g = get_global_id(0) + get_local_id(1) + get_group_id(2) + get_global_size(0) + get_local_size(1) + get_num_groups(2);
    if (g >= n) return;
    f[0] = sqrt(f[1]) + rsqrt(f[2]) + cbrt(f[3]) + exp(f[4]) + exp2(f[5]) + expm1(f[6]) + log(f[7]) + log2(f[8])
         + log10(f[9]) + log1p(f[10]) + sin(f[11]) + cos(f[12]) + tan(f[13]) + asin(f[14]) + acos(f[15]) + atan(f[16])
         + atan2(f[1], f[2]) + sinh(f[3]) + cosh(f[4]) + tanh(f[5]) + asinh(f[6]) + acosh(f[7]) + atanh(f[8])
         + pow(f[1], f[2]) + fabs(f[3]) + floor(f[4]) + ceil(f[5]) + round(f[6]) + trunc(f[7]) + fmod(f[1], f[2])
         + fmin(f[1], f[2]) + fmax(f[1], f[2]) + fma(f[1], f[2], f[3]) + hypot(f[1], f[2]) + erf(f[3]) + erfc(f[4])
         + copysign(f[1], f[2]) + (isnan(f[1]) ? 1.0f : 0.0f) + (isinf(f[2]) ? 1.0f : 0.0f) + (isfinite(f[3]) ? 1.0f : 0.0f)
         + abs(f[4]) + min(f[1], f[2]) + max(f[1], f[2]);
    d[0] = sqrt(d[1]) + pow(d[2], d[3]) + abs(d[4]) + fma(d[1], d[2], d[3]);
    i[0] = abs(i[1]) + min(i[2], i[3]) + max(i[2], i[3]);
    atomic_add(f, 1.0f); atomic_add(d, 1.0); atomic_add(i, 1); atomic_add(u, 1u); atomic_add(l, (int64_t)1); atomic_add(ul, (uint64_t)1);
    atomic_min(f, 1.0f); atomic_min(d, 1.0); atomic_min(i, 1); atomic_min(u, 1u); atomic_min(l, (int64_t)1); atomic_min(ul, (uint64_t)1);
    atomic_max(f, 1.0f); atomic_max(d, 1.0); atomic_max(i, 1); atomic_max(u, 1u); atomic_max(l, (int64_t)1); atomic_max(ul, (uint64_t)1);
    atomic_cas(f, 1.0f, 2.0f); atomic_cas(d, 1.0, 2.0); atomic_cas(i, 1, 2); atomic_cas(u, 1u, 2u); atomic_cas(l, (int64_t)1, (int64_t)2); atomic_cas(ul, (uint64_t)1, (uint64_t)2);
    atomic_exchange(f, 1.0f); atomic_exchange(d, 1.0); atomic_exchange(i, 1); atomic_exchange(u, 1u); atomic_exchange(l, (int64_t)1); atomic_exchange(ul, (uint64_t)1);
    rt_assert(g < n);
}
)";
    CudaCompileResult r = compile(src, "-O3 -g -DUNUSED=1", "sm_90");
    EXPECT_TRUE(r.cubin);
    EXPECT_EQ(r.kernels, std::vector<std::string>{"everything"});
}

/// Compiles `source` on cpu:0 through the public API; the error code (and message in `why`).
rtError_t compile_on_cpu(const char* source, std::string* why = nullptr) {
    int cpu = -1;
    if (rtError_t e = rtGetDeviceByName(&cpu, "cpu:0")) return e;
    if (rtError_t e = rtSetDevice(cpu)) return e;
    rtModule_t m = nullptr;
    rtError_t e = rtModuleLoadSource(&m, source, nullptr);
    if (why) *why = rtGetLastErrorMessage();
    if (e == RT_SUCCESS) rtModuleUnload(m);
    return e;
}

// What a kernel takes from the standard headers, and the prelude's constants, on both backends.
constexpr const char* kStandardHeaders = R"(#include <climits>
#include <limits.h>
#include <cfloat>
#include <float.h>
#include <cmath>
#include <math.h>
#include <cstdint>
#include <cstddef>
RT_KERNEL void limits_and_math(float* f, double* d, int32_t* i, int64_t* l, uint32_t* u, std::size_t n) {
    std::int32_t k = (std::int32_t)get_global_id(0);
    if ((std::size_t)k >= n) return;
    i[k] = INT_MAX - SHRT_MAX + CHAR_BIT + (INT_MIN < 0 ? 0 : 1);
    u[k] = UINT_MAX - (uint32_t)UCHAR_MAX;
    l[k] = LLONG_MAX / 2 + LONG_MIN / 4 + (int64_t)(ULLONG_MAX >> 60);
    f[k] = FLT_MAX * 0.5f + FLT_MIN + FLT_EPSILON + std::sqrt(f[k]) + std::fabs(f[k]) + std::fmax(f[k], 1.0f)
         + std::pow(f[k], 2.0f) + (std::isnan(f[k]) ? 1.0f : 0.0f) + (std::isinf(f[k]) ? RT_INFF : RT_NANF);
    d[k] = DBL_MAX * 0.5 + DBL_MIN + DBL_EPSILON + std::exp(d[k]) + std::abs(d[k]) + (d[k] > 0 ? RT_INF : -RT_INF)
         + (std::isfinite(d[k]) ? 0.0 : RT_NAN);
}
)";

TEST_F(CudaCompiler, StandardLimitsMathAndInfNanCompileOnBothBackends) {
    CudaCompileResult r = compile(kStandardHeaders, "", "sm_90");
    EXPECT_TRUE(r.cubin);
    EXPECT_EQ(r.kernels, std::vector<std::string>{"limits_and_math"});
    std::string why;
    EXPECT_EQ(compile_on_cpu(kStandardHeaders, &why), RT_SUCCESS) << why;
}

// RT_TEST_EXPECT_COMPILE_ERROR: min/max of two types are refused on every backend.
constexpr const char* kMixedMinMax = R"(// RT_TEST_EXPECT_COMPILE_ERROR
RT_KERNEL void mixed(float* out, int n) {
    size_t i = get_global_id(0);
    out[i] = (float)min(i, n);
}
)";

TEST_F(CudaCompiler, MixedTypeMinMaxIsRefusedOnBothBackends) {
    try {
        compile(kMixedMinMax, "", "sm_90");
        ADD_FAILURE() << "NVRTC accepted min(size_t, int)";
    } catch (const rt::Error& e) {
        EXPECT_EQ(e.code(), RT_ERROR_COMPILE_FAILED);
        EXPECT_TRUE(contains(e.what(), "min")) << e.what();
    }
    std::string why;
    EXPECT_EQ(compile_on_cpu(kMixedMinMax, &why), RT_ERROR_COMPILE_FAILED) << "cpu must refuse what CUDA refuses";
    EXPECT_TRUE(contains(why, "deleted")) << why;
    // One type, by a cast, compiles on both.
    const char* fixed = "RT_KERNEL void fixed(float* out, int n) {\n"
                        "    size_t i = get_global_id(0);\n"
                        "    out[i] = (float)min(i, (size_t)n) + max(1.0f, out[i]);\n"
                        "}\n";
    EXPECT_TRUE(compile(fixed, "", "sm_90").cubin);
    EXPECT_EQ(compile_on_cpu(fixed, &why), RT_SUCCESS) << why;
}

TEST_F(CudaCompiler, ToolkitHeadersAreIncludable) {
    const std::string& inc = rt::cuda::CudaTarget::toolkit_include();
    if (inc.empty()) GTEST_SKIP() << "no CUDA toolkit headers found (CUDA_HOME, CUDA_PATH, /usr/local/cuda, next to NVRTC)";
    const char* src = "#ifdef __CUDACC__\n"
                      "#include <cuda_fp16.h>\n"
                      "#endif\n"
                      "RT_KERNEL void halves(float* out) {\n"
                      "#ifdef __CUDACC__\n"
                      "    out[get_global_id(0)] = __half2float(__float2half(out[get_global_id(0)]));\n"
                      "#endif\n"
                      "}\n";
    EXPECT_TRUE(compile(src, "", "sm_90").cubin);
    rt::cuda::CudaTarget target("sm_90");
    EXPECT_TRUE(contains(target.identity(), inc)) << "the include directory is part of the target's identity";
    std::vector<std::string> args = target.nvrtc_arguments(rt::kernels::read_program(kScale, "-I/tmp/mine", "k"));
    ASSERT_FALSE(args.empty());
    EXPECT_EQ(args.back(), "-I" + inc) << "the toolkit's directory comes after the program's own";
    EXPECT_NE(std::find(args.begin(), args.end(), "-I/tmp/mine"), args.end());
}

TEST(CudaDriver, TranslateCoversTheErrorsTheBackendMeets) {
    using rt::cuda::translate;
    EXPECT_EQ(translate(CUDA_ERROR_NOT_INITIALIZED), RT_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(translate(CUDA_ERROR_DEINITIALIZED), RT_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(translate(CUDA_ERROR_ECC_UNCORRECTABLE), RT_ERROR_DEVICE_LOST);
    EXPECT_EQ(translate(CUDA_ERROR_DEVICE_UNAVAILABLE), RT_ERROR_INVALID_DEVICE);
    EXPECT_EQ(translate(CUDA_ERROR_NOT_PERMITTED), RT_ERROR_NOT_PERMITTED);
    EXPECT_EQ(translate(CUDA_ERROR_NOT_SUPPORTED), RT_ERROR_NOT_SUPPORTED);
    EXPECT_EQ(translate(CUDA_ERROR_INVALID_IMAGE), RT_ERROR_INVALID_VALUE);
    EXPECT_EQ(translate(CUDA_ERROR_NO_BINARY_FOR_GPU), RT_ERROR_INVALID_VALUE);
    EXPECT_EQ(translate(CUDA_ERROR_INVALID_PTX), RT_ERROR_COMPILE_FAILED);
    EXPECT_EQ(translate(CUDA_ERROR_UNKNOWN), RT_ERROR_LAUNCH_FAILED);
    EXPECT_TRUE(rt::cuda::is_sticky(CUDA_ERROR_UNKNOWN));
    EXPECT_TRUE(rt::cuda::is_sticky(CUDA_ERROR_ILLEGAL_ADDRESS));
    EXPECT_FALSE(rt::cuda::is_sticky(CUDA_ERROR_NOT_PERMITTED));
    // The message says what the error means here (a driver without functions: the number stands for the name).
    rt::cuda::Driver none;
    try {
        rt::cuda::throw_driver_error(none, CUDA_ERROR_NOT_PERMITTED, "cuMemAlloc");
        ADD_FAILURE() << "did not throw";
    } catch (const rt::Error& e) {
        EXPECT_EQ(e.code(), RT_ERROR_NOT_PERMITTED);
        EXPECT_TRUE(contains(e.what(), "cuMemAlloc failed: CUDA error 800")) << e.what();
        EXPECT_TRUE(contains(e.what(), "host function")) << e.what();
    }
}

TEST_F(CudaCompiler, CompileErrorCarriesNvrtcLogWithUserLines) {
    const char* src = "RT_KERNEL void broken(float* o) {\n"
                      "    o[0] = 1.0f;\n"
                      "    undefined_helper(o);\n"
                      "}\n";
    try {
        compile(src, "", "sm_90", "broken.cu");
        FAIL() << "compiled a source with an undefined identifier";
    } catch (const rt::Error& e) {
        EXPECT_EQ(e.code(), RT_ERROR_COMPILE_FAILED);
        std::string m = e.what();
        EXPECT_TRUE(contains(m, "broken.cu(3)")) << "diagnostics must carry the source's own line 3";
        EXPECT_TRUE(contains(m, "undefined_helper"));
        EXPECT_TRUE(contains(m, "kernels: broken"));
        EXPECT_TRUE(contains(m, "sm_90"));
        EXPECT_TRUE(contains(m, "NVRTC"));
    }
}

TEST_F(CudaCompiler, BadInputIsRefusedWithTheReason) {
    auto code_of = [](auto&& f) {
        try {
            f();
        } catch (const rt::Error& e) {
            return std::make_pair(e.code(), std::string(e.what()));
        }
        return std::make_pair(RT_SUCCESS, std::string());
    };
    auto r = code_of([] { compile(kScale, "-fno-such-flag", "sm_90"); });
    EXPECT_EQ(r.first, RT_ERROR_INVALID_VALUE);
    EXPECT_TRUE(contains(r.second, "-fno-such-flag"));
    r = code_of([] { compile("int x;\n", "", "sm_90"); });
    EXPECT_EQ(r.first, RT_ERROR_INVALID_VALUE);
    EXPECT_TRUE(contains(r.second, "no kernel"));
    r = code_of([] { compile(kScale, "", "gfx90a"); });
    EXPECT_EQ(r.first, RT_ERROR_INVALID_VALUE);
    EXPECT_TRUE(contains(r.second, "sm_XY"));
    r = code_of([] { compile(kScale, "", "sm_1"); });
    EXPECT_NE(r.first, RT_SUCCESS) << "an architecture NVRTC does not know must fail";
}

TEST_F(CudaCompiler, DiskCacheHitsOnTheSecondCompileAndKeysSeparateInputs) {
    std::string src = std::string(kScale) + "// cache test " + std::to_string(::getpid()) + "\n";
    CudaCompileResult a = compile(src, "", "sm_90");
    EXPECT_FALSE(a.from_cache);
    EXPECT_GT(a.compile_seconds, 0.0);
    struct stat st {};
    ASSERT_EQ(::stat(a.path.c_str(), &st), 0) << a.path;
    EXPECT_EQ(static_cast<size_t>(st.st_size), a.image.size());
    EXPECT_EQ(a.path.rfind(CacheDir::path, 0), 0u) << "the entry must live under RUNTIME_CACHE_DIR";

    CudaCompileResult b = compile(src, "", "sm_90");
    EXPECT_TRUE(b.from_cache);
    EXPECT_EQ(b.key, a.key);
    EXPECT_EQ(b.image, a.image);

    EXPECT_NE(compile(src, "", "sm_80").key, a.key) << "the architecture is part of the key";
    EXPECT_NE(compile(src, "-DX=1", "sm_90").key, a.key) << "options are part of the key";
    CudaCompileResult forced = compile(src, "", "sm_90", "kernel_source", false, /*force=*/true);
    EXPECT_FALSE(forced.from_cache);
    EXPECT_EQ(forced.key, a.key);
}

TEST_F(CudaCompiler, RuntimeCompileToolTargetsCuda) {
    std::string dir = CacheDir::path + "/tool";
    ::mkdir(dir.c_str(), 0755);
    { std::ofstream(dir + "/k.cu") << kScale; }
    std::string tool = RT_TEST_RUNTIME_COMPILE;
    ASSERT_EQ(std::system((tool + " " + dir + "/k.cu -o " + dir + "/k.cubin --backend cuda --arch sm_90 > /dev/null").c_str()), 0);
    std::string cubin = read_text(dir + "/k.cubin");
    ASSERT_GE(cubin.size(), 4u);
    EXPECT_EQ(cubin.compare(0, 4, "\x7f" "ELF"), 0);
    ASSERT_EQ(std::system((tool + " " + dir + "/k.cu -o " + dir + "/k.ptx --backend=cuda > /dev/null").c_str()), 0);
    std::string ptx = read_text(dir + "/k.ptx");
    EXPECT_TRUE(contains(ptx, ".entry scale"));
    EXPECT_TRUE(contains(ptx, ".target sm_90")) << "--arch defaults to sm_90";
    { std::ofstream(dir + "/bad.cu") << "RT_KERNEL void bad() { nope(); }\n"; }
    EXPECT_NE(std::system((tool + " " + dir + "/bad.cu -o " + dir + "/bad.cubin --backend cuda 2> /dev/null").c_str()), 0);
}

TEST(CudaCompilerShim, MissingNvrtcIsNotSupportedWithTheReason) {
    const char* old = std::getenv("RUNTIME_NVRTC_LIB");
    std::string saved = old ? old : "";
    ::setenv("RUNTIME_NVRTC_LIB", "/nonexistent/libnvrtc.so.13", 1);
    try {
        compile(kScale, "", "sm_90");
        ADD_FAILURE() << "compiled without NVRTC";
    } catch (const rt::Error& e) {
        EXPECT_EQ(e.code(), RT_ERROR_NOT_SUPPORTED);
        EXPECT_TRUE(contains(e.what(), "/nonexistent/libnvrtc.so.13"));
        EXPECT_TRUE(contains(e.what(), "cannot be loaded"));
    }
    if (old) ::setenv("RUNTIME_NVRTC_LIB", saved.c_str(), 1);
    else ::unsetenv("RUNTIME_NVRTC_LIB");
}

}  // namespace

#else
TEST(CudaCompiler, SkippedWithoutTheCudaBackend) { GTEST_SKIP() << "this build has no cuda backend (RUNTIME_WITH_CUDA)"; }
#endif
