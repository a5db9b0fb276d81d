// test_module.cpp — modules through the C API: rtModuleLoadSource/LoadFile/GetFunction/Unload, rtFunctionGetParamInfo, the disk cache across processes.
#include "test_util.hpp"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

extern char** environ;

namespace fs = std::filesystem;
using namespace rt_test;

namespace {

// ------------------------------------------------------------------------------------------ helpers

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_text(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
}

/// Distinct for every call in every process: sources carrying it never hit the in-process module cache
/// left behind by an earlier test of the same process.
std::string unique_tag() {
    static std::atomic<int> counter{0};
    return std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
           std::to_string(Clock::now().time_since_epoch().count());
}

/// The kernel the cache tests and the child process use: out[i] = v + i for i < n.
std::string fill_source(const std::string& tag) {
    return "// cache test source " + tag +
           "\n"
           "RT_KERNEL void fill(int32_t* out, int32_t v, int32_t n) {\n"
           "    size_t i = get_global_id(0);\n"
           "    if (i < (size_t)n) out[i] = v + (int32_t)i;\n"
           "}\n";
}

/// Launches fill(out, v, n) on the default stream and returns `n` values read back; "" or the failure.
std::string run_fill(rtFunction_t f, int32_t v, int32_t n, std::vector<int32_t>& result) {
    void* d = nullptr;
    if (rtMalloc(&d, sizeof(int32_t) * static_cast<size_t>(n)) != RT_SUCCESS) return "rtMalloc: " + last_message();
    std::string err;
    void* args[] = {&d, &v, &n};
    if (rtLaunchKernel(f, rtDim3{static_cast<unsigned>((n + 63) / 64), 1, 1}, rtDim3{64, 1, 1}, args, 0, nullptr) !=
        RT_SUCCESS)
        err = "rtLaunchKernel: " + last_message();
    else if (rtStreamSynchronize(nullptr) != RT_SUCCESS)
        err = "rtStreamSynchronize: " + last_message();
    result.assign(static_cast<size_t>(n), -1);
    if (err.empty() && rtMemcpy(result.data(), d, sizeof(int32_t) * static_cast<size_t>(n), RT_MEMCPY_DEVICE_TO_HOST) !=
                           RT_SUCCESS)
        err = "rtMemcpy: " + last_message();
    rtFree(d);
    return err;
}

/// "" if result[i] == v + i for every i, else the first mismatch.
std::string check_fill(const std::vector<int32_t>& result, int32_t v) {
    for (size_t i = 0; i < result.size(); ++i)
        if (result[i] != v + static_cast<int32_t>(i))
            return "out[" + std::to_string(i) + "] = " + std::to_string(result[i]) + ", expected " +
                   std::to_string(v + static_cast<int32_t>(i));
    return "";
}

// ------------------------------------------------------------------------------------------ child process
// The cross-process tests run this executable again with RT_TEST_MODULE_CHILD set: before gtest starts,
// the child waits for RT_TEST_CHILD_GO (a file, if given), loads the source in RT_TEST_CHILD_SOURCE,
// writes its load time (µs) to RT_TEST_CHILD_OUT, launches `fill` and checks the result. Exit 0 = success.

int child_main() {
    const char* src_path = std::getenv("RT_TEST_CHILD_SOURCE");
    const char* out_path = std::getenv("RT_TEST_CHILD_OUT");
    const char* go = std::getenv("RT_TEST_CHILD_GO");
    if (!src_path || !out_path) {
        std::fprintf(stderr, "child: RT_TEST_CHILD_SOURCE / RT_TEST_CHILD_OUT missing\n");
        return 10;
    }
    if (go) {  // start barrier: both children compile at the same moment
        auto deadline = Clock::now() + 30s;
        while (::access(go, F_OK) != 0) {
            if (Clock::now() > deadline) return 11;
            std::this_thread::sleep_for(1ms);
        }
    }
    std::string source = read_text(src_path);
    // The device is started (a CUDA context is created) before the clock starts: only the module load is timed.
    void* warm = nullptr;
    if (rtSetDevice(0) != RT_SUCCESS || rtMalloc(&warm, 64) != RT_SUCCESS || rtFree(warm) != RT_SUCCESS) {
        std::fprintf(stderr, "child: device 0: %s\n", rtGetLastErrorMessage());
        return 16;
    }
    rtModule_t m = nullptr;
    auto t0 = Clock::now();
    rtError_t e = rtModuleLoadSource(&m, source.c_str(), nullptr);
    long long us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
    if (e != RT_SUCCESS) {
        std::fprintf(stderr, "child: rtModuleLoadSource: %s: %s\n", rtGetErrorName(e), rtGetLastErrorMessage());
        return 12;
    }
    write_text(out_path, std::to_string(us));
    rtFunction_t f = nullptr;
    if (rtModuleGetFunction(&f, m, "fill") != RT_SUCCESS) {
        std::fprintf(stderr, "child: rtModuleGetFunction: %s\n", rtGetLastErrorMessage());
        return 13;
    }
    std::vector<int32_t> result;
    int32_t v = static_cast<int32_t>(::getpid() % 1000) + 17;
    std::string err = run_fill(f, v, 1000, result);
    if (err.empty()) err = check_fill(result, v);
    if (!err.empty()) {
        std::fprintf(stderr, "child: %s\n", err.c_str());
        return 14;
    }
    return rtModuleUnload(m) == RT_SUCCESS ? 0 : 15;
}

// Runs before gtest's main (libruntime, a shared library, is initialised before this executable).
const bool g_child_hook = [] {
    if (std::getenv("RT_TEST_MODULE_CHILD")) {
        int rc = child_main();
        std::fflush(stdout);
        std::fflush(stderr);
        std::_Exit(rc);
    }
    return true;
}();

/// Starts this executable as a child with the extra environment `vars` (NAME=value); returns its pid or -1.
pid_t spawn_child(const std::vector<std::string>& vars) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    for (const std::string& v : vars) env.push_back(v);
    env.emplace_back("RT_TEST_MODULE_CHILD=1");
    std::vector<char*> envp;
    for (std::string& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string self = fs::read_symlink("/proc/self/exe").string();
    std::vector<char*> argv = {self.data(), nullptr};
    pid_t pid = -1;
    if (::posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), envp.data()) != 0) return -1;
    return pid;
}

/// Exit status of `pid` (-1 if it did not exit normally).
int wait_child(pid_t pid) {
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct CacheFile {
    ino_t inode = 0;
    int64_t mtime_ns = 0;
    bool operator==(const CacheFile& o) const { return inode == o.inode && mtime_ns == o.mtime_ns; }
};

/// Every file under `root` (recursively) → (inode, mtime): a recompiled entry gets a new inode.
std::map<std::string, CacheFile> snapshot(const std::string& root) {
    std::map<std::string, CacheFile> out;
    std::error_code ec;
    if (!fs::exists(root, ec)) return out;
    for (auto& e : fs::recursive_directory_iterator(root, ec)) {
        struct stat st {};
        if (!e.is_regular_file() || ::stat(e.path().c_str(), &st) != 0) continue;
        out[e.path().string()] = {st.st_ino, static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
    }
    return out;
}

/// Finished module entries (named *<ext> for one of `exts`, not a temporary *.tmp.* name) in the cache.
size_t count_entries(const std::map<std::string, CacheFile>& files, const std::vector<std::string>& exts) {
    size_t n = 0;
    for (auto& [path, f] : files) {
        std::string name = fs::path(path).filename().string();
        if (name.find(".tmp.") != std::string::npos) continue;
        for (const std::string& ext : exts)
            if (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0) ++n;
    }
    return n;
}

size_t temp_entries(const std::map<std::string, CacheFile>& files) {
    size_t n = 0;
    for (auto& [path, f] : files) n += fs::path(path).filename().string().find(".tmp.") != std::string::npos;
    return n;
}

size_t count_lines(const std::string& path) {
    std::string t = read_text(path);
    return static_cast<size_t>(std::count(t.begin(), t.end(), '\n'));
}

// ------------------------------------------------------------------------------------------ fixture

/// Each test: a fresh work directory with its own RUNTIME_CACHE_DIR (restored afterwards), a watchdog. The tests run
/// on device 0, cpu:0 or (the *_cuda reruns, RUNTIME_BACKEND=cuda) cuda:0; where the two kernel toolchains differ
/// (the compiler's diagnostics, cache entry names, how runs of the compiler are counted, -O) they branch on it.
class ModuleTest : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/rt-test-module-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        work_ = tmpl;
        cache_ = work_ + "/cache";
        save_env("RUNTIME_CACHE_DIR");
        save_env("RUNTIME_CXX");
        ::setenv("RUNTIME_CACHE_DIR", cache_.c_str(), 1);
        ASSERT_RT_OK(rtSetDevice(0));
        rtDeviceProp p{};
        ASSERT_RT_OK(rtGetDeviceProperties(&p, 0));
        cuda_ = std::strcmp(p.backend, "cuda") == 0;
        arch_ = "sm_" + std::to_string(p.compute_capability_major) + std::to_string(p.compute_capability_minor);
    }
    void TearDown() override {
        for (auto& [name, value] : saved_env_) {
            if (value.first) ::setenv(name.c_str(), value.second.c_str(), 1);
            else ::unsetenv(name.c_str());
        }
        std::error_code ec;
        fs::remove_all(work_, ec);
    }

    /// RUNTIME_CXX = a wrapper that appends a line to `log` for each compiler run, then runs the real one.
    std::string install_compiler_spy() {
        std::string log = work_ + "/compiler_runs.log";
        std::string spy = work_ + "/cxx-spy.sh";
        write_text(spy, "#!/bin/sh\n"
                        "echo run >> '" + log + "'\n"
                        "for c in c++ g++ clang++; do\n"
                        "  if command -v \"$c\" >/dev/null 2>&1; then exec \"$c\" \"$@\"; fi\n"
                        "done\n"
                        "exit 127\n");
        ::chmod(spy.c_str(), 0755);
        write_text(log, "");
        ::setenv("RUNTIME_CXX", spy.c_str(), 1);
        return log;
    }

    /// Finished module entries in the cache: cpu modules are shared objects, cuda ones cubins (PTX on old drivers).
    size_t module_entries(const std::map<std::string, CacheFile>& files) const {
        return count_entries(files, cuda_ ? std::vector<std::string>{".cubin", ".ptx"} : std::vector<std::string>{".so"});
    }
    /// How a diagnostic names line `n` of the user's source: GCC/Clang "name:5:", NVRTC "name(5): error".
    std::string line_mark(int n) const { return cuda_ ? "(" + std::to_string(n) + ")" : ":" + std::to_string(n) + ":"; }
    /// runtime-compile's arguments that pick the backend of device 0, and the extension of its output.
    std::string compile_backend() const { return cuda_ ? " --backend cuda --arch " + arch_ : ""; }
    std::string module_ext() const { return cuda_ ? ".cubin" : ".so"; }

    rtModule_t load(const std::string& src, const char* options = nullptr) {
        rtModule_t m = nullptr;
        rtError_t e = rtModuleLoadSource(&m, src.c_str(), options);
        EXPECT_RT_OK(e) << "options: " << (options ? options : "(null)");
        return e == RT_SUCCESS ? m : nullptr;
    }

    std::string work_, cache_;
    bool cuda_ = false;  ///< device 0 is a cuda device: NVRTC compiles (RUNTIME_CXX is not used, -O is ignored)
    std::string arch_;   ///< its sm_XY

private:
    void save_env(const char* name) {
        const char* v = std::getenv(name);
        saved_env_[name] = {v != nullptr, v ? v : ""};
    }
    std::map<std::string, std::pair<bool, std::string>> saved_env_;
    Watchdog watchdog_{std::chrono::milliseconds(50000), "module test"};
};

/// Reads out[0] of a kernel `k(int64_t* out)` after one launch.
int64_t run_scalar_kernel(rtModule_t m, const char* name) {
    rtFunction_t f = nullptr;
    EXPECT_RT_OK(rtModuleGetFunction(&f, m, name));
    DevBuf d(sizeof(int64_t));
    EXPECT_RT_OK(rtMemset(d.get(), 0xAB, sizeof(int64_t)));
    void* p = d.get();
    void* args[] = {&p};
    EXPECT_RT_OK(rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args, 0, nullptr));
    EXPECT_RT_OK(rtStreamSynchronize(nullptr));
    int64_t v = 0;
    EXPECT_RT_OK(rtMemcpy(&v, d.get(), sizeof v, RT_MEMCPY_DEVICE_TO_HOST));
    return v;
}

// ------------------------------------------------------------------------------------------ loading source

TEST_F(ModuleTest, LoadSourceLaunchAndUnload) {
    rtModule_t m = load(fill_source(unique_tag()));
    ASSERT_NE(m, nullptr);
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "fill"));
    ASSERT_NE(f, nullptr);
    rtFunction_t again = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&again, m, "fill"));
    EXPECT_EQ(f, again) << "repeated look-ups of one kernel give one handle";
    std::vector<int32_t> result;
    ASSERT_EQ(run_fill(f, 1234, 4099, result), "");
    EXPECT_EQ(check_fill(result, 1234), "");
    ASSERT_RT_OK(rtModuleUnload(m));
}

TEST_F(ModuleTest, DefineOptionChangesTheCompiledValue) {
    const std::string src = "// " + unique_tag() +
                            "\n#ifndef VALUE\n#define VALUE -1\n#endif\n"
                            "RT_KERNEL void k(int64_t* out) { out[0] = VALUE; }\n";
    int64_t a = 1000 + (::getpid() % 1000), b = -(a * 3 + 7);
    std::string opt_a = "-DVALUE=" + std::to_string(a), opt_b = "-D VALUE=" + std::to_string(b);
    rtModule_t ma = load(src, opt_a.c_str()), mb = load(src, opt_b.c_str()), mdef = load(src, nullptr),
               mu = load(src, ("-DVALUE=" + std::to_string(a) + " -UVALUE").c_str());
    ASSERT_TRUE(ma && mb && mdef && mu);
    EXPECT_EQ(run_scalar_kernel(ma, "k"), a);
    EXPECT_EQ(run_scalar_kernel(mb, "k"), b);
    EXPECT_EQ(run_scalar_kernel(mdef, "k"), -1);
    EXPECT_EQ(run_scalar_kernel(mu, "k"), -1) << "-U after -D must undefine the macro";
    for (rtModule_t m : {ma, mb, mdef, mu}) EXPECT_RT_OK(rtModuleUnload(m));
}

TEST_F(ModuleTest, OptimisationOptionsReachTheCompilerAndGIsAccepted) {
    // __OPTIMIZE__ is defined by GCC and Clang at -O1 and above, __OPTIMIZE_SIZE__ at -Os.
    const std::string src = "// " + unique_tag() +
                            "\nRT_KERNEL void k(int64_t* out) {\n"
                            "#if defined(__OPTIMIZE_SIZE__)\n    out[0] = 2;\n"
                            "#elif defined(__OPTIMIZE__)\n    out[0] = 1;\n"
                            "#else\n    out[0] = 0;\n#endif\n}\n";
    struct Case {
        const char* options;
        int64_t expected;
    } cases[] = {{"-O0", 0}, {"-O3", 1}, {"-O1", 1}, {"-Os", 2}, {nullptr, 1}, {"-O3 -O0", 0}, {"-g", 1}, {"-O0 -g", 0}};
    for (const Case& c : cases) {
        rtModule_t m = load(src, c.options);
        ASSERT_NE(m, nullptr);
        // NVRTC accepts -O and ignores it (docs/cuda.md): on cuda only acceptance and a working kernel are checked.
        const int64_t v = run_scalar_kernel(m, "k");
        if (cuda_) {
            EXPECT_TRUE(v >= 0 && v <= 2) << "the kernel ran; options: " << (c.options ? c.options : "(null)");
        } else {
            EXPECT_EQ(v, c.expected) << "options: " << (c.options ? c.options : "(null)");
        }
        EXPECT_RT_OK(rtModuleUnload(m));
    }
}

TEST_F(ModuleTest, IncludeDirectoryOption) {
    fs::create_directories(work_ + "/inc");
    int64_t v = 4242 + ::getpid() % 100;
    write_text(work_ + "/inc/rt_test_header.h", "#define FROM_HEADER " + std::to_string(v) + "\n");
    const std::string src = "// " + unique_tag() +
                            "\n#include \"rt_test_header.h\"\nRT_KERNEL void k(int64_t* out) { out[0] = FROM_HEADER; }\n";
    rtModule_t m = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_COMPILE_FAILED, rtModuleLoadSource(&m, src.c_str(), nullptr))
        << "the header is only reachable through -I";
    m = load(src, ("-I" + work_ + "/inc").c_str());
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(run_scalar_kernel(m, "k"), v);
    EXPECT_RT_OK(rtModuleUnload(m));
}

TEST_F(ModuleTest, CompileErrorNamesUserLineAndToken) {
    // The error is on line 5 of this source.
    const std::string src = "// " + unique_tag() +
                            "\n"                                             // line 1
                            "RT_KERNEL void broken(int32_t* out) {\n"        // line 2
                            "    size_t i = get_global_id(0);\n"             // line 3
                            "    out[i] = 1;\n"                              // line 4
                            "    out[i] += rt_undeclared_thing_xyz;\n"       // line 5
                            "}\n";
    rtModule_t m = reinterpret_cast<rtModule_t>(static_cast<uintptr_t>(0x77));
    ASSERT_RT_ERROR(RT_ERROR_COMPILE_FAILED, rtModuleLoadSource(&m, src.c_str(), nullptr));
    std::string msg = last_message();
    EXPECT_TRUE(contains(msg, "rt_undeclared_thing_xyz"));
    EXPECT_TRUE(contains(msg, line_mark(5))) << "the diagnostic must carry the user's line number (5)";
    EXPECT_TRUE(contains(msg, "broken")) << "the message names the module's kernels";
    EXPECT_EQ(m, reinterpret_cast<rtModule_t>(static_cast<uintptr_t>(0x77))) << "no handle written on failure";
    // A syntax error on line 3 of another source.
    const std::string src2 = "RT_KERNEL void k2(int32_t* out) {\n"
                             "    out[0] = 1;\n"
                             "    out[1] = 2 +* ;\n"
                             "}\n// " + unique_tag() + "\n";
    ASSERT_RT_ERROR(RT_ERROR_COMPILE_FAILED, rtModuleLoadSource(&m, src2.c_str(), nullptr));
    EXPECT_TRUE(contains(last_message(), line_mark(3)));
    // The runtime stays usable and the cache holds no failed entry.
    EXPECT_EQ(module_entries(snapshot(cache_)), 0u);
    rtModule_t ok = load(fill_source(unique_tag()));
    EXPECT_NE(ok, nullptr);
    if (ok) {
        EXPECT_RT_OK(rtModuleUnload(ok));
    }
}

TEST_F(ModuleTest, BadOptionsAreRefusedWithoutCompiling) {
    const std::string src = fill_source(unique_tag());
    const char* bad[] = {"; rm -rf /", "--evil", "-fplugin=/tmp/evil.so", "-O3 -o /tmp/x", "-D", "-D1X=2",
                         "-Dok=1 -Wl,-rpath,/tmp", "-I-dir", "-O9", "-D`id`=1", "-DX=1\n-o/tmp/y", "$(touch /tmp/z)"};
    for (const char* opt : bad) {
        rtModule_t m = nullptr;
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleLoadSource(&m, src.c_str(), opt)) << "options: " << opt;
        EXPECT_EQ(m, nullptr);
        // The message names the refused option (its first token) for the simple cases.
        if (std::string(opt) == "--evil") {
            EXPECT_TRUE(contains(last_message(), "--evil"));
        }
        if (std::string(opt) == "; rm -rf /") {
            EXPECT_TRUE(contains(last_message(), ";"));
        }
    }
    EXPECT_EQ(module_entries(snapshot(cache_)), 0u) << "a refused option must not compile anything";
}

TEST_F(ModuleTest, SourceWithoutKernelsIsRefused) {
    const char* sources[] = {"", "   \n", "RT_DEVICE int helper(int x) { return x + 1; }\n",
                             "// RT_KERNEL void commented_out(int* p) {}\n",
                             "static const char* s = \"RT_KERNEL void in_string(int* p) {}\";\n"};
    for (const char* src : sources) {
        rtModule_t m = nullptr;
        rtError_t e = rtModuleLoadSource(&m, src, nullptr);
        EXPECT_NE(e, RT_SUCCESS) << "source: " << src;
        EXPECT_EQ(e, RT_ERROR_INVALID_VALUE) << "source: " << src << " gave " << rtGetErrorName(e);
        EXPECT_TRUE(contains(last_message(), "kernel")) << "source: " << src;
        EXPECT_EQ(m, nullptr);
    }
}

TEST_F(ModuleTest, NullArguments) {
    const std::string src = fill_source(unique_tag());
    rtModule_t m = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleLoadSource(nullptr, src.c_str(), nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleLoadSource(&m, nullptr, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleLoadFile(nullptr, "/tmp/x.so"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleLoadFile(&m, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleLoadFile(&m, ""));
    ASSERT_RT_OK(rtModuleLoadSource(&m, src.c_str(), nullptr));
    rtFunction_t f = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleGetFunction(nullptr, m, "fill"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleGetFunction(&f, m, nullptr));
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "fill"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFunctionGetParamInfo(f, nullptr, nullptr));
    size_t sizes[3];
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFunctionGetParamInfo(f, nullptr, sizes));
    // A kernel with parameters launched with args = NULL.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, nullptr, 0, nullptr));
    EXPECT_TRUE(contains(last_message(), "fill"));
    // One NULL entry in args.
    int32_t v = 1, n = 1;
    void* args[] = {nullptr, &v, &n};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args, 0, nullptr));
    EXPECT_TRUE(contains(last_message(), "args[0]"));
    EXPECT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_RT_OK(rtModuleUnload(m));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtModuleUnload(nullptr));
}

TEST_F(ModuleTest, UnknownKernelNameListsTheModulesKernels) {
    const std::string src = "// " + unique_tag() +
                            "\nRT_KERNEL void alpha_kernel(int32_t* p) { p[0] = 1; }\n"
                            "RT_KERNEL void beta_kernel(int32_t* p) { p[0] = 2; }\n"
                            "RT_DEVICE int gamma_helper(int x) { return x; }\n";
    rtModule_t m = load(src);
    ASSERT_NE(m, nullptr);
    rtFunction_t f = reinterpret_cast<rtFunction_t>(static_cast<uintptr_t>(0x99));
    ASSERT_RT_ERROR(RT_ERROR_NOT_FOUND, rtModuleGetFunction(&f, m, "no_such_kernel"));
    std::string msg = last_message();
    EXPECT_TRUE(contains(msg, "no_such_kernel"));
    EXPECT_TRUE(contains(msg, "alpha_kernel"));
    EXPECT_TRUE(contains(msg, "beta_kernel"));
    EXPECT_EQ(msg.find("gamma_helper"), std::string::npos) << "an RT_DEVICE helper is not a kernel: " << msg;
    EXPECT_EQ(f, reinterpret_cast<rtFunction_t>(static_cast<uintptr_t>(0x99)));
    // A device helper, a prefix of a kernel name and the empty name are not kernels either.
    EXPECT_RT_ERROR(RT_ERROR_NOT_FOUND, rtModuleGetFunction(&f, m, "gamma_helper"));
    EXPECT_RT_ERROR(RT_ERROR_NOT_FOUND, rtModuleGetFunction(&f, m, "alpha"));
    rtError_t e = rtModuleGetFunction(&f, m, "");
    EXPECT_TRUE(e == RT_ERROR_NOT_FOUND || e == RT_ERROR_INVALID_VALUE) << rtGetErrorName(e);
    EXPECT_RT_OK(rtModuleGetFunction(&f, m, "beta_kernel"));
    EXPECT_RT_OK(rtModuleUnload(m));
}

TEST_F(ModuleTest, UnloadInvalidatesModuleAndFunctionsButQueuedLaunchesComplete) {
    rtModule_t m = load(fill_source(unique_tag()));
    ASSERT_NE(m, nullptr);
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "fill"));

    // A launch queued behind a closed gate, then the module unloaded: the launch still runs.
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    DevBuf d(sizeof(int32_t) * 256);
    ASSERT_RT_OK(rtMemset(d.get(), 0, d.size()));
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    void* p = d.get();
    int32_t v = 77, n = 256;
    void* args[] = {&p, &v, &n};
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{4, 1, 1}, rtDim3{64, 1, 1}, args, 0, s));
    ASSERT_RT_OK(rtModuleUnload(m));
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    std::vector<int32_t> result(256);
    ASSERT_RT_OK(rtMemcpy(result.data(), d.get(), d.size(), RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(check_fill(result, 77), "");

    rtFunction_t g = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtModuleGetFunction(&g, m, "fill"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args, 0, s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE,
                    launch_ex(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args, 3, nullptr, 0, s));
    int count = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtFunctionGetParamInfo(f, &count, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtModuleUnload(m)) << "double unload";
    EXPECT_RT_OK(rtStreamSynchronize(s)) << "refused calls leave no error on the stream";

    // Loading the same source again gives a working module (the in-process cache must not hand out
    // the unloaded handle's state).
    rtModule_t m2 = load(fill_source("again " + unique_tag()));
    ASSERT_NE(m2, nullptr);
    ASSERT_RT_OK(rtModuleGetFunction(&g, m2, "fill"));
    ASSERT_EQ(run_fill(g, 5, 100, result), "");
    EXPECT_EQ(check_fill(result, 5), "");
    EXPECT_RT_OK(rtModuleUnload(m2));
}

TEST_F(ModuleTest, GarbageHandlesAreRefused) {
    rtModule_t gm = garbage_handle<rtModule_t>();
    rtFunction_t gf = garbage_handle<rtFunction_t>();
    rtFunction_t f = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtModuleGetFunction(&f, gm, "fill"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtModuleGetFunction(&f, nullptr, "fill"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtModuleUnload(gm));
    int count = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtFunctionGetParamInfo(gf, &count, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtFunctionGetParamInfo(nullptr, &count, nullptr));
    int x = 0;
    void* args[] = {&x};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtLaunchKernel(gf, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args, 0, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtLaunchKernel(nullptr, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args, 0, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE,
                    launch_ex(gf, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args, 1, nullptr, 0, nullptr));
    // A module handle used as a function handle and vice versa.
    rtModule_t m = load(fill_source(unique_tag()));
    ASSERT_NE(m, nullptr);
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "fill"));
    if (reinterpret_cast<uintptr_t>(f) != reinterpret_cast<uintptr_t>(m)) {
        rtFunction_t g = nullptr;
        EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtModuleGetFunction(&g, reinterpret_cast<rtModule_t>(f), "fill"));
    }
    EXPECT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_RT_OK(rtModuleUnload(m));
}

// ------------------------------------------------------------------------------------------ parameters

TEST_F(ModuleTest, FunctionParamInfoCountsAndSizes) {
    struct Mixed {
        int8_t a;
        double b;
        int16_t c;
    };
    const std::string src = "// " + unique_tag() +
                            "\nstruct Mixed { int8_t a; double b; int16_t c; };\n"
                            "struct Big { int32_t v[33]; };\n"
                            "RT_KERNEL void none() {}\n"
                            "RT_KERNEL void several(int8_t a, double b, const float* p, Mixed m, uint16_t u, bool f,\n"
                            "                       Big big, int64_t* q) {}\n";
    rtModule_t m = load(src);
    ASSERT_NE(m, nullptr);
    rtFunction_t none = nullptr, several = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&none, m, "none"));
    ASSERT_RT_OK(rtModuleGetFunction(&several, m, "several"));

    int count = -5;
    ASSERT_RT_OK(rtFunctionGetParamInfo(none, &count, nullptr));
    EXPECT_EQ(count, 0);

    const std::vector<size_t> expected = {sizeof(int8_t), sizeof(double),   sizeof(const float*),   sizeof(Mixed),
                                          sizeof(uint16_t), sizeof(bool), sizeof(int32_t) * 33, sizeof(int64_t*)};
    count = 0;
    ASSERT_RT_OK(rtFunctionGetParamInfo(several, &count, nullptr));
    EXPECT_EQ(count, static_cast<int>(expected.size()));
    std::vector<size_t> sizes(expected.size() + 2, 0xdead);
    count = static_cast<int>(sizes.size());
    ASSERT_RT_OK(rtFunctionGetParamInfo(several, &count, sizes.data()));
    ASSERT_EQ(count, static_cast<int>(expected.size()));
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(sizes[i], expected[i]) << "parameter " << i;
    EXPECT_EQ(sizes[expected.size()], 0xdeadu) << "nothing written past the parameters";

    // Too little room.
    count = static_cast<int>(expected.size()) - 1;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFunctionGetParamInfo(several, &count, sizes.data()));

    // The sizes reported are the ones rtLaunchKernelEx checks against.
    int8_t a = 1;
    double b = 2;
    const float* p = nullptr;
    Mixed mx{};
    uint16_t u = 3;
    bool fl = true;
    int32_t big[33] = {};
    int64_t* q = nullptr;
    void* args[] = {&a, &b, &p, &mx, &u, &fl, big, &q};
    ASSERT_RT_OK(launch_ex(several, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args,
                                        static_cast<int>(expected.size()), sizes.data(), 0, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_RT_OK(rtModuleUnload(m));
}

// ------------------------------------------------------------------------------------------ many kernels

TEST_F(ModuleTest, ManyKernelsInOneModuleAreAllCallable) {
    constexpr int kKernels = 12;
    std::string src = "// " + unique_tag() + "\nRT_DEVICE int32_t shared_helper(int32_t i, int32_t k) { return i * (k + 1) + k; }\n";
    for (int k = 0; k < kKernels; ++k)
        src += "RT_KERNEL void kern_" + std::to_string(k) + "(int32_t* out, int32_t n) {\n"
               "    int32_t i = (int32_t)get_global_id(0);\n"
               "    if (i < n) out[i] = shared_helper(i, " + std::to_string(k) + ");\n}\n";
    rtModule_t m = load(src);
    ASSERT_NE(m, nullptr);

    const int32_t n = 1000;
    std::vector<DevBuf> bufs(kKernels);
    std::vector<rtFunction_t> fns(kKernels, nullptr);
    for (int k = 0; k < kKernels; ++k) {
        ASSERT_RT_OK(bufs[k].alloc(sizeof(int32_t) * n));
        ASSERT_RT_OK(rtModuleGetFunction(&fns[k], m, ("kern_" + std::to_string(k)).c_str()));
        for (int j = 0; j < k; ++j) EXPECT_NE(fns[k], fns[j]) << "kernels " << j << " and " << k << " share a handle";
        void* p = bufs[k].get();
        int32_t nn = n;
        void* args[] = {&p, &nn};
        ASSERT_RT_OK(rtLaunchKernel(fns[k], rtDim3{(n + 127) / 128, 1, 1}, rtDim3{128, 1, 1}, args, 0, nullptr));
    }
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    for (int k = 0; k < kKernels; ++k) {
        std::vector<int32_t> out(n);
        ASSERT_RT_OK(rtMemcpy(out.data(), bufs[k].get(), sizeof(int32_t) * n, RT_MEMCPY_DEVICE_TO_HOST));
        for (int32_t i = 0; i < n; ++i)
            ASSERT_EQ(out[i], i * (k + 1) + k) << "kernel kern_" << k << " item " << i;
    }
    // The NOT_FOUND message lists every kernel.
    rtFunction_t f = nullptr;
    ASSERT_RT_ERROR(RT_ERROR_NOT_FOUND, rtModuleGetFunction(&f, m, "kern_missing"));
    std::string msg = last_message();
    for (int k = 0; k < kKernels; ++k) EXPECT_TRUE(contains(msg, "kern_" + std::to_string(k)));
    EXPECT_RT_OK(rtModuleUnload(m));
}

// ------------------------------------------------------------------------------------------ precompiled modules

#ifdef RT_TEST_RUNTIME_COMPILE
TEST_F(ModuleTest, PrecompiledModuleFromRuntimeCompile) {
    std::string tag = unique_tag();
    std::string src_path = work_ + "/precompiled_kernel.cpp", so_path = work_ + "/out/precompiled_kernel" + module_ext();
    fs::create_directories(work_ + "/out");
    write_text(src_path, "// " + tag +
                             "\n#include <runtime/kernel.h>\n"
                             "#ifndef OFFSET\n#define OFFSET 0\n#endif\n"
                             "RT_KERNEL void fill(int32_t* out, int32_t v, int32_t n) {\n"
                             "    size_t i = get_global_id(0);\n"
                             "    if (i < (size_t)n) out[i] = v + (int32_t)i + OFFSET;\n"
                             "}\n"
                             "RT_KERNEL void other(int32_t* out) { out[0] = 3; }\n");
    const int32_t offset = 500 + ::getpid() % 100;
    std::string cmd = "'" RT_TEST_RUNTIME_COMPILE "' '" + src_path + "' -o '" + so_path + "'" + compile_backend() +
                      " -O2 -DOFFSET=" + std::to_string(offset) + " > '" + work_ + "/compile.log' 2>&1";
    int rc = std::system(cmd.c_str());
    ASSERT_EQ(rc, 0) << cmd << "\n" << read_text(work_ + "/compile.log");
    ASSERT_TRUE(fs::is_regular_file(so_path));

    // The module ships without its source and without the cache it was built through.
    fs::remove(src_path);
    std::error_code ec;
    fs::remove_all(cache_, ec);

    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadFile(&m, so_path.c_str()));
    rtFunction_t f = nullptr, other = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "fill"));
    ASSERT_RT_OK(rtModuleGetFunction(&other, m, "other"));
    int count = 0;
    ASSERT_RT_OK(rtFunctionGetParamInfo(f, &count, nullptr));
    EXPECT_EQ(count, 3);
    std::vector<int32_t> result;
    ASSERT_EQ(run_fill(f, 10, 777, result), "");
    EXPECT_EQ(check_fill(result, 10 + offset), "") << "the -D given to runtime-compile is compiled in";
    EXPECT_RT_ERROR(RT_ERROR_NOT_FOUND, rtModuleGetFunction(&other, m, "nope"));
    EXPECT_TRUE(contains(last_message(), "other"));
    EXPECT_TRUE(contains(last_message(), "fill"));
    EXPECT_RT_OK(rtModuleUnload(m));

    if (cuda_) {  // a cpu module (a host shared object) is never handed to the driver as a cubin
        write_text(src_path, "RT_KERNEL void host_only(int32_t* out) { out[0] = 1; }\n");
        const std::string host_so = work_ + "/out/host_only.so";
        cmd = "'" RT_TEST_RUNTIME_COMPILE "' '" + src_path + "' -o '" + host_so + "' > '" + work_ + "/compile.log' 2>&1";
        ASSERT_EQ(std::system(cmd.c_str()), 0) << read_text(work_ + "/compile.log");
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleLoadFile(&m, host_so.c_str()));
        EXPECT_TRUE(contains(last_message(), "a host shared object, not a cubin")) << last_message();
    }

    // runtime-compile refuses a source that does not compile, and says where.
    write_text(src_path, "RT_KERNEL void bad(int32_t* out) {\n    out[0] = nope_nope;\n}\n");
    cmd = "'" RT_TEST_RUNTIME_COMPILE "' '" + src_path + "' -o '" + work_ + "/out/bad" + module_ext() + "'" +
          compile_backend() + " > '" + work_ + "/compile.log' 2>&1";
    rc = std::system(cmd.c_str());
    EXPECT_NE(rc, 0);
    EXPECT_TRUE(contains(read_text(work_ + "/compile.log"), "nope_nope"));
    EXPECT_FALSE(fs::exists(work_ + "/out/bad" + module_ext()));
}
#else
#error "tests/CMakeLists.txt must define RT_TEST_RUNTIME_COMPILE (the path of the built runtime-compile)"
#endif

TEST_F(ModuleTest, LoadFileErrorsNameThePath) {
    std::string missing = work_ + "/does_not_exist_module.so";
    rtModule_t m = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleLoadFile(&m, missing.c_str()));
    EXPECT_TRUE(contains(last_message(), missing));
    EXPECT_EQ(m, nullptr);

    std::string text = work_ + "/notes.txt";
    write_text(text, "this is not a shared object\n");
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleLoadFile(&m, text.c_str()));
    EXPECT_TRUE(contains(last_message(), text));
    EXPECT_EQ(m, nullptr);

    std::string fake_so = work_ + "/fake.so";  // an ELF header and nothing else
    write_text(fake_so, std::string("\x7f" "ELF\x02\x01\x01", 7) + std::string(57, '\0'));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleLoadFile(&m, fake_so.c_str()));
    EXPECT_TRUE(contains(last_message(), fake_so));

    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleLoadFile(&m, work_.c_str())) << "a directory";
    EXPECT_TRUE(contains(last_message(), work_));
    EXPECT_EQ(m, nullptr);
}

// ------------------------------------------------------------------------------------------ disk cache

TEST_F(ModuleTest, DiskCacheHitFromASecondProcess) {
    std::string log = install_compiler_spy();
    std::string src = fill_source(unique_tag());
    std::string src_path = work_ + "/cached_source.cpp";
    write_text(src_path, src);

    // First load in this process: compiles once and stores one module entry.
    auto t0 = Clock::now();
    rtModule_t m = load(src);
    double cold_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    ASSERT_NE(m, nullptr);
    EXPECT_RT_OK(rtModuleUnload(m));
    if (!cuda_) {  // NVRTC runs in the process: no RUNTIME_CXX to count
        ASSERT_EQ(count_lines(log), 1u) << "the first load runs the compiler once";
    }
    auto before = snapshot(cache_);
    ASSERT_EQ(module_entries(before), 1u);
    EXPECT_EQ(temp_entries(before), 0u);

    // A fresh process loads the same source: it must use the cached module, not compile.
    std::string out = work_ + "/child.out";
    pid_t pid = spawn_child({"RT_TEST_CHILD_SOURCE=" + src_path, "RT_TEST_CHILD_OUT=" + out});
    ASSERT_GT(pid, 0);
    ASSERT_EQ(wait_child(pid), 0) << "the child failed (its stderr is above)";
    if (!cuda_) {  // NVRTC runs in the process: no RUNTIME_CXX to count
        EXPECT_EQ(count_lines(log), 1u) << "the second process ran the compiler";
    }
    auto after = snapshot(cache_);
    EXPECT_EQ(after, before) << "the cache directory changed: the entry was rewritten or a new one added";
    double child_us = std::atof(read_text(out).c_str());
    std::printf("cold load (compile) %.0f us, load in a fresh process %.0f us\n", cold_us, child_us);
    EXPECT_LT(child_us, cold_us) << "loading from the disk cache must be faster than compiling";
}

TEST_F(ModuleTest, TwoProcessesCompilingTheSameSourceAtOnce) {
    std::string log = install_compiler_spy();
    std::string src_path = work_ + "/concurrent_source.cpp";
    std::string src = fill_source(unique_tag());
    write_text(src_path, src);
    std::string go = work_ + "/go";

    pid_t a = spawn_child({"RT_TEST_CHILD_SOURCE=" + src_path, "RT_TEST_CHILD_OUT=" + work_ + "/a.out",
                           "RT_TEST_CHILD_GO=" + go});
    pid_t b = spawn_child({"RT_TEST_CHILD_SOURCE=" + src_path, "RT_TEST_CHILD_OUT=" + work_ + "/b.out",
                           "RT_TEST_CHILD_GO=" + go});
    ASSERT_GT(a, 0);
    ASSERT_GT(b, 0);
    std::this_thread::sleep_for(200ms);  // both children reach the barrier
    write_text(go, "go");
    int ra = wait_child(a), rb = wait_child(b);
    EXPECT_EQ(ra, 0);
    EXPECT_EQ(rb, 0);
    size_t runs = count_lines(log);
    if (!cuda_) {  // NVRTC runs in the process: no RUNTIME_CXX to count; the cache checks below still apply
        EXPECT_GE(runs, 1u);
        EXPECT_LE(runs, 2u);
    }
    auto files = snapshot(cache_);
    EXPECT_EQ(module_entries(files), 1u) << "both processes compiled the same source: exactly one module entry";
    EXPECT_EQ(temp_entries(files), 0u) << "no temporary file left behind";

    // This process now finds the entry too.
    rtModule_t m = load(src);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(count_lines(log), runs) << "a third load compiled again";
    EXPECT_EQ(snapshot(cache_), files) << "a third load rewrote the cache";
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "fill"));
    std::vector<int32_t> result;
    ASSERT_EQ(run_fill(f, -3, 500, result), "");
    EXPECT_EQ(check_fill(result, -3), "");
    EXPECT_RT_OK(rtModuleUnload(m));
}

TEST_F(ModuleTest, RepeatedLoadInOneProcessDoesNotRecompile) {
    std::string log = install_compiler_spy();
    std::string src = fill_source(unique_tag());
    std::vector<rtModule_t> mods;
    std::map<std::string, CacheFile> first;
    for (int i = 0; i < 5; ++i) {
        rtModule_t m = load(src);
        ASSERT_NE(m, nullptr);
        for (rtModule_t o : mods) EXPECT_NE(o, m) << "each load gives its own handle";
        mods.push_back(m);
        if (i == 0) first = snapshot(cache_);
    }
    if (!cuda_) {  // NVRTC runs in the process: no RUNTIME_CXX to count
        EXPECT_EQ(count_lines(log), 1u);
    }
    EXPECT_EQ(snapshot(cache_), first) << "a later load compiled again (the cache entry was rewritten)";
    // Unloading one module leaves the others working.
    ASSERT_RT_OK(rtModuleUnload(mods[0]));
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, mods[1], "fill"));
    std::vector<int32_t> result;
    ASSERT_EQ(run_fill(f, 9, 64, result), "");
    EXPECT_EQ(check_fill(result, 9), "");
    for (size_t i = 1; i < mods.size(); ++i) EXPECT_RT_OK(rtModuleUnload(mods[i]));
    // Different options are a different module: a second compile. (NVRTC ignores -O: on cuda a -D differs.)
    rtModule_t o = load(src, cuda_ ? "-DRT_TEST_OTHER_OPTIONS=1" : "-O1");
    ASSERT_NE(o, nullptr);
    if (!cuda_) {  // NVRTC runs in the process: no RUNTIME_CXX to count
        EXPECT_EQ(count_lines(log), 2u);
    }
    EXPECT_EQ(module_entries(snapshot(cache_)), 2u);
    EXPECT_RT_OK(rtModuleUnload(o));
}

}  // namespace
