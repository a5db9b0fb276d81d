// test_cpu_isa.cpp — cpu modules record the instruction sets they were built for: runtime-compile --isa (baseline,
// several variants in one file, the best picked at load), refusals naming missing features before any code runs.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/cpu/cpu_isa.hpp"
#include "backends/cpu/cpu_module.hpp"
#include "backends/cpu/cpu_target.hpp"
#include "core/error.hpp"
#include "kernels/disk_cache.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using rt_test::contains;
using rt_test::last_message;

const char* kSource =
    "#include <runtime/kernel.h>\n"
    "RT_KERNEL void axpb(const float* x, float* y, float a, float b, int32_t n) {\n"
    "    int32_t i = (int32_t)get_global_id(0);\n"
    "    if (i < n) y[i] = a * x[i] + b;\n"
    "}\n";

/// A private cache and work directory for the process.
struct Work {
    std::string dir;
    Work() {
        char tmpl[] = "/tmp/rt-isa-test-XXXXXX";
        dir = ::mkdtemp(tmpl);
        ::setenv("RUNTIME_CACHE_DIR", (dir + "/cache").c_str(), 1);
        std::ofstream(dir + "/axpb.cpp") << kSource;
    }
    ~Work() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};
const Work& work() {
    static Work w;
    return w;
}

std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/// Builds kSource with the internal target for `isa` (a parse_isa list) into the cache; returns the module's path.
std::string build(const std::string& isa) {
    rt::cpu::CpuTarget target(rt::cpu::parse_isa(isa));
    return rt::kernels::compile(target, rt::kernels::read_program(kSource, "", "axpb.cpp")).path;
}

/// Runs runtime-compile on axpb.cpp; returns its exit status (output in `log`).
int runtime_compile(const std::string& args, const std::string& out, std::string& log) {
    const std::string log_path = work().dir + "/compile.log";
    const std::string cmd = "'" RT_TEST_RUNTIME_COMPILE "' '" + work().dir + "/axpb.cpp' -o '" + out + "' " + args +
                            " > '" + log_path + "' 2>&1";
    int rc = std::system(cmd.c_str());
    log = read_bytes(log_path);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/// Loads `path` with rtModuleLoadFile and checks what axpb computes.
void expect_runs(const std::string& path) {
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadFile(&m, path.c_str()));
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "axpb"));
    constexpr int32_t n = 1000;
    rt_test::DevBuf x(n * sizeof(float)), y(n * sizeof(float));
    std::vector<float> host(n);
    for (int32_t i = 0; i < n; ++i) host[static_cast<size_t>(i)] = static_cast<float>(i);
    ASSERT_RT_OK(rtMemcpy(x.get(), host.data(), n * sizeof(float), RT_MEMCPY_HOST_TO_DEVICE));
    void* xp = x.get();
    void* yp = y.get();
    float a = 3.0f, b = 0.5f;
    int32_t count = n;
    void* args[] = {&xp, &yp, &a, &b, &count};
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{8, 1, 1}, rtDim3{128, 1, 1}, args, 0, nullptr));
    ASSERT_RT_OK(rtMemcpy(host.data(), yp, n * sizeof(float), RT_MEMCPY_DEVICE_TO_HOST));
    for (int32_t i = 0; i < n; ++i) ASSERT_EQ(host[static_cast<size_t>(i)], 3.0f * static_cast<float>(i) + 0.5f) << i;
    ASSERT_RT_OK(rtModuleUnload(m));
}

/// The x86-64 level this machine reaches, checked with the compiler's own CPU detection (not the runtime's table).
std::string host_level() {
#if defined(__x86_64__)
    __builtin_cpu_init();
    const bool v2 = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("ssse3");
    const bool v3 = v2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("bmi");
    const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                    __builtin_cpu_supports("avx512vl");
    return v4 ? "x86-64-v4" : v3 ? "x86-64-v3" : v2 ? "x86-64-v2" : "x86-64";
#else
    return "";
#endif
}

/// The host compilers to build with: the default (clang++ first) and g++ when it is on PATH.
std::vector<std::string> compilers() {
    std::vector<std::string> out = {""};
    if (std::system("command -v g++ > /dev/null 2>&1") == 0) out.push_back("g++");
    return out;
}

/// Sets $RUNTIME_CXX for a scope ("" unsets it).
struct CompilerScope {
    explicit CompilerScope(const std::string& cxx) {
        if (cxx.empty()) ::unsetenv("RUNTIME_CXX");
        else ::setenv("RUNTIME_CXX", cxx.c_str(), 1);
    }
    ~CompilerScope() { ::unsetenv("RUNTIME_CXX"); }
};

class CpuIsa : public ::testing::Test {
protected:
    void SetUp() override {
#if !defined(__x86_64__)
        GTEST_SKIP() << "the instruction-set variants are x86-64's";
#endif
        (void)work();
        ASSERT_RT_OK(rtSetDevice(0));
        rtDeviceProp prop{};
        ASSERT_RT_OK(rtGetDeviceProperties(&prop, 0));
        if (std::string(prop.backend) != "cpu") GTEST_SKIP() << "cpu modules";
    }
    rt_test::Watchdog watchdog_{std::chrono::milliseconds(60000), "CpuIsa test"};
};

TEST_F(CpuIsa, ParseIsaOrdersLevelsAndRefusesMalformedLists) {
    using V = std::vector<std::string>;
    EXPECT_EQ(rt::cpu::parse_isa("native"), V{"native"});
    EXPECT_EQ(rt::cpu::parse_isa("x86-64-v4,x86-64-v2,x86-64-v3,x86-64-v2"), (V{"x86-64-v2", "x86-64-v3", "x86-64-v4"}));
    EXPECT_EQ(rt::cpu::parse_isa("znver1,x86-64-v2"), (V{"znver1", "x86-64-v2"})) << "other names keep their order";
    for (const char* bad : {"", "x86-64-v2,", ",native", "-mavx", "native;rm", "a b"}) {
        try {
            rt::cpu::parse_isa(bad);
            ADD_FAILURE() << "'" << bad << "' was accepted";
        } catch (const rt::Error& e) {
            EXPECT_EQ(e.code(), RT_ERROR_INVALID_VALUE);
            EXPECT_TRUE(contains(e.what(), "--isa")) << e.what();
        }
    }
}

TEST_F(CpuIsa, IsaIsPartOfTheTargetIdentity) {
    rt::cpu::CpuTarget native, v2(rt::cpu::parse_isa("x86-64-v2")), multi(rt::cpu::parse_isa("x86-64-v2,x86-64-v3"));
    const std::vector<std::string> none;
    const std::string a = rt::kernels::cache_key(native, "k", kSource, none);
    EXPECT_NE(a, rt::kernels::cache_key(v2, "k", kSource, none));
    EXPECT_NE(rt::kernels::cache_key(v2, "k", kSource, none), rt::kernels::cache_key(multi, "k", kSource, none));
    EXPECT_EQ(a, rt::kernels::cache_key(rt::cpu::cpu_target(), "k", kSource, none)) << "the JIT's target is native";
}

TEST_F(CpuIsa, ModulesRecordWhatTheirCompilerTargeted) {
    for (const std::string& cxx : compilers()) {
        CompilerScope scope(cxx);
        std::string why;
        const auto v2 = rt::cpu::read_isa_records(build("x86-64-v2"), why);
        ASSERT_EQ(v2.size(), 1u) << why;
        EXPECT_EQ(v2[0].name, "x86-64-v2");
        for (const char* f : {"sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16"})
            EXPECT_NE(std::find(v2[0].features.begin(), v2[0].features.end(), f), v2[0].features.end()) << cxx << " " << f;
        EXPECT_EQ(std::find(v2[0].features.begin(), v2[0].features.end(), "avx"), v2[0].features.end()) << cxx;
        // native: everything it records, this machine has.
        const auto native = rt::cpu::read_isa_records(build("native"), why);
        ASSERT_EQ(native.size(), 1u) << why;
        for (const std::string& f : native[0].features) EXPECT_TRUE(rt::cpu::host_supports(f)) << cxx << " " << f;
    }
}

TEST_F(CpuIsa, BaselineModuleFromRuntimeCompileLoadsAndRuns) {
    const std::string out = work().dir + "/axpb_v2.so";
    std::string log;
    ASSERT_EQ(runtime_compile("--isa x86-64-v2 -O2", out, log), 0) << log;
    EXPECT_TRUE(contains(log, "x86-64-v2")) << log;
    expect_runs(out);
    EXPECT_EQ(rt::cpu::CpuModule::from_file(out)->variant(), "x86-64-v2");
}

TEST_F(CpuIsa, MultiVariantModulePicksTheBestThisMachineSupports) {
    const std::string expected = host_level();
    ASSERT_FALSE(expected.empty());
    if (expected == "x86-64") GTEST_SKIP() << "this machine is below x86-64-v2";
    for (const std::string& cxx : compilers()) {
        CompilerScope scope(cxx);
        const std::string out = work().dir + "/axpb_multi" + cxx + ".so";
        std::string log;
        ASSERT_EQ(runtime_compile("--isa=x86-64-v4,x86-64-v3,x86-64-v2", out, log), 0) << cxx << ": " << log;
        std::string why;
        const auto variants = rt::cpu::read_isa_records(out, why);
        ASSERT_EQ(variants.size(), 3u) << why;
        EXPECT_EQ(variants[0].name, "x86-64-v2") << "the baseline comes first";
        EXPECT_EQ(rt::cpu::CpuModule::from_file(out)->variant(), expected) << cxx;
        expect_runs(out);
    }
}

/// An -march whose features this machine does not all have, and the first it lacks; "" when it has them all.
std::pair<std::string, std::string> foreign_isa() {
    for (const char* isa : {"znver1", "bdver1", "sapphirerapids", "x86-64-v4", "x86-64-v3"}) {
        std::string why;
        const auto records = rt::cpu::read_isa_records(build(isa), why);
        if (records.empty()) continue;
        for (const std::string& f : records[0].features)
            if (!rt::cpu::host_supports(f)) return {isa, f};
    }
    return {};
}

TEST_F(CpuIsa, ModuleNeedingAFeatureThisMachineLacksIsNotSupportedNamingIt) {
    const auto [isa, feature] = foreign_isa();
    if (isa.empty()) GTEST_SKIP() << "this machine has every feature of the -march values tried";
    const std::string out = work().dir + "/axpb_foreign.so";
    std::string log;
    ASSERT_EQ(runtime_compile("--isa " + isa, out, log), 0) << "built for other machines, with a note: " << log;
    EXPECT_TRUE(contains(log, "cannot run it") && contains(log, feature)) << log;
    rtModule_t m = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtModuleLoadFile(&m, out.c_str()));
    EXPECT_TRUE(contains(last_message(), feature) && contains(last_message(), isa) &&
                contains(last_message(), "--isa"))
        << last_message();
}

TEST_F(CpuIsa, FeatureUnknownToThisRuntimeIsRefused) {
    // A module from a newer runtime may record a feature this one cannot check: it is refused, never run.
    std::string object = read_bytes(build("x86-64-v2"));
    const size_t record = object.find("rt-cpu-isa 0 x86-64-v2:");
    ASSERT_NE(record, std::string::npos);
    const size_t sse3 = object.find(" sse3", record);
    ASSERT_NE(sse3, std::string::npos);
    object.replace(sse3, 5, " zzz9");
    const std::string out = work().dir + "/axpb_unknown.so";
    rt::kcache::store_bytes(out, object);
    rtModule_t m = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtModuleLoadFile(&m, out.c_str()));
    EXPECT_TRUE(contains(last_message(), "zzz9") && contains(last_message(), "unknown to this runtime")) << last_message();
}

}  // namespace
