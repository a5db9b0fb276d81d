// test_module_unload.cpp — rtModuleUnload: the code goes once queued launches have run; the in-process module cache is
// bounded (LRU, RUNTIME_MODULE_CACHE_LIMIT); 5,000 distinct modules in one process keep memory and mappings bounded.
#include <sys/stat.h>
#include <unistd.h>

#include <runtime/runtime.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "backends/cpu/cpu_module.hpp"
#include "backends/cpu/cpu_target.hpp"
#include "kernels/disk_cache.hpp"
#include "kernels/target.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using rt_test::Gate;
using rt_test::StreamGuard;

constexpr size_t kCacheLimit = 64;  // the library's in-process cache limit in this process (set below)

// Sanitizers keep freed memory in quarantine and add shadow memory: resident memory says nothing there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

/// A private kernel cache and the cache limit, set before the library reads them (at static initialisation: every
/// test of the file, and the whole file in one process, see the same).
struct Environment {
    std::string dir;
    Environment() {
        char tmpl[] = "/tmp/rt-unload-test-XXXXXX";
        dir = ::mkdtemp(tmpl);
        ::setenv("RUNTIME_CACHE_DIR", dir.c_str(), 1);
        ::setenv("RUNTIME_MODULE_CACHE_LIMIT", std::to_string(kCacheLimit).c_str(), 1);
    }
    ~Environment() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};
const Environment& env() {
    static Environment e;
    return e;
}
const bool kEnvironmentSet = (env(), true);

/// Distinct paths under `dir` of shared objects mapped into this process (" (deleted)" ones too).
size_t mapped_objects_under(const std::string& dir) {
    std::ifstream maps("/proc/self/maps");
    std::set<std::string> paths;
    std::string line;
    while (std::getline(maps, line)) {
        size_t p = line.find(dir);
        if (p == std::string::npos) continue;
        std::string path = line.substr(p);
        if (path.size() > 10 && path.compare(path.size() - 10, 10, " (deleted)") == 0) path.resize(path.size() - 10);
        if (path.find(".so") != std::string::npos) paths.insert(path);
    }
    return paths.size();
}

bool mapped(const std::string& path) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line))
        if (line.find(path) != std::string::npos) return true;
    return false;
}

/// VmRSS of this process in KiB.
long rss_kib() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
    return -1;
}

std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

const char* kPut = "RT_KERNEL void put(int32_t* out, int32_t v) { if (get_global_id(0) == 0) out[0] = v; }\n";

/// The disk-cache file rtModuleLoadSource uses for `source` (no options) on cpu, built if missing.
std::string cached_object(const std::string& source) {
    rtModule_t m = nullptr;
    EXPECT_RT_OK(rtModuleLoadSource(&m, source.c_str(), nullptr));
    EXPECT_RT_OK(rtModuleUnload(m));
    const std::string key =
        rt::kernels::cache_key(rt::cpu::cpu_target(), "kernel_source", source, rt::kernels::parse_options(""));
    return rt::kcache::entry_path("cpu", key, ".so");
}

/// A precompiled module file of its own (rtModuleLoadFile does not cache): a copy of put's object.
std::string module_file(const std::string& name) {
    static const std::string object = read_bytes(cached_object(kPut));
    std::string path = env().dir + "/" + name + ".so";
    rt::kcache::store_bytes(path, object);
    return path;
}

/// Runs put(out, v) on `stream` and returns what it wrote.
int32_t run_put(rtFunction_t f, int32_t v, rtStream_t stream = nullptr) {
    rt_test::DevBuf out(sizeof(int32_t));
    void* p = out.get();
    void* args[] = {&p, &v};
    EXPECT_RT_OK(rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args, 0, stream));
    EXPECT_RT_OK(rtStreamSynchronize(stream));
    int32_t got = -1;
    EXPECT_RT_OK(rtMemcpy(&got, p, sizeof got, RT_MEMCPY_DEVICE_TO_HOST));
    return got;
}

class ModuleUnload : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(kEnvironmentSet);
        ASSERT_RT_OK(rtSetDevice(0));
        rtDeviceProp prop{};
        ASSERT_RT_OK(rtGetDeviceProperties(&prop, 0));
        if (std::string(prop.backend) != "cpu") GTEST_SKIP() << "maps shared objects: cpu only (cuda: test_cuda_fake)";
    }
    rt_test::Watchdog watchdog_{std::chrono::milliseconds(60000), "ModuleUnload test"};
};

TEST_F(ModuleUnload, SecondUnloadAndStaleFunctionsAreInvalidHandles) {
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, kPut, nullptr));
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "put"));
    EXPECT_EQ(run_put(f, 7), 7);
    ASSERT_RT_OK(rtModuleUnload(m));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtModuleUnload(m));
    rtFunction_t again = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtModuleGetFunction(&again, m, "put"));
    int32_t v = 1;
    void* p = nullptr;
    void* args[] = {&p, &v};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args, 0, nullptr));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "unloaded")) << rt_test::last_message();
    int count = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtFunctionGetParamInfo(f, &count, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtModuleUnload(nullptr));
}

TEST_F(ModuleUnload, IdleUnloadReleasesTheCodeAtOnce) {
    const std::string path = module_file("idle");
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadFile(&m, path.c_str()));
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "put"));
    StreamGuard s;
    EXPECT_EQ(run_put(f, 11, s), 11);  // the stream keeps its last launched kernel past the launch
    EXPECT_TRUE(mapped(path));
    ASSERT_RT_OK(rtModuleUnload(m));
    EXPECT_FALSE(mapped(path)) << "nothing queued uses it: unloaded by rtModuleUnload";
}

TEST_F(ModuleUnload, QueuedLaunchKeepsTheCodeUntilItRan) {
    const std::string path = module_file("queued");
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadFile(&m, path.c_str()));
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "put"));
    StreamGuard s;
    rt_test::DevBuf out(sizeof(int32_t));
    void* p = out.get();
    int32_t v = 42;
    void* args[] = {&p, &v};
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args, 0, s));
    ASSERT_RT_OK(rtModuleUnload(m));  // never waits
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtModuleUnload(m));
    EXPECT_TRUE(mapped(path)) << "a queued launch still uses the code";
    ::unlink(path.c_str());  // the mapping outlives the file
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    int32_t got = 0;
    ASSERT_RT_OK(rtMemcpy(&got, p, sizeof got, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(got, 42);
    EXPECT_FALSE(mapped(path)) << "unloaded once the launch ran";
    EXPECT_FALSE(gate.timed_out());
}

TEST_F(ModuleUnload, CppModuleGoingOutOfScopeKeepsQueuedLaunches) {
    const std::string path = module_file("cpp");
    StreamGuard s;
    rt_test::DevBuf out(sizeof(int32_t));
    void* p = out.get();
    int32_t v = 5;
    void* args[] = {&p, &v};
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    {
        runtime::Module m = runtime::Module::from_file(path);
        ASSERT_RT_OK(rtLaunchKernel(m.kernel("put").native_handle(), rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args, 0, s));
    }
    EXPECT_TRUE(mapped(path));
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    int32_t got = 0;
    ASSERT_RT_OK(rtMemcpy(&got, p, sizeof got, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(got, 5);
    EXPECT_FALSE(mapped(path));
}

TEST_F(ModuleUnload, UnloadRacingWithLaunchesOnManyStreams) {
    // Launch loops on several streams while the module is loaded and unloaded again: every launch either is refused
    // (INVALID_HANDLE) or runs correctly; the code is never unloaded under a queued launch (ASan/TSan builds).
    const std::string path = module_file("race");
    constexpr int kThreads = 3, kRounds = 30;
    for (int round = 0; round < kRounds; ++round) {
        rtModule_t m = nullptr;
        ASSERT_RT_OK(rtModuleLoadFile(&m, path.c_str()));
        rtFunction_t f = nullptr;
        ASSERT_RT_OK(rtModuleGetFunction(&f, m, "put"));
        std::atomic<int> bad{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t)
            threads.emplace_back([&, t] {
                StreamGuard s;
                rt_test::DevBuf out(sizeof(int32_t));
                void* p = out.get();
                for (int i = 0; i < 20; ++i) {
                    int32_t v = t * 100 + i;
                    void* args[] = {&p, &v};
                    rtError_t e = rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args, 0, s);
                    if (e == RT_ERROR_INVALID_HANDLE) break;
                    if (e != RT_SUCCESS) ++bad;
                }
                if (rtStreamSynchronize(s) != RT_SUCCESS) ++bad;
            });
        std::this_thread::yield();
        ASSERT_RT_OK(rtModuleUnload(m));
        for (auto& th : threads) th.join();
        EXPECT_EQ(bad.load(), 0);
    }
    ASSERT_RT_OK(rtDeviceSynchronize());
}

// 5,000 distinct kernel sources in one process: compiling them would take minutes, so one module is compiled and
// its object planted in the private disk cache under the key of each source (what a compile would have written).
// Most are unloaded right after a launch; a window of handles is held while newer loads evict older modules from
// the in-process cache (limit kCacheLimit).
TEST_F(ModuleUnload, FiveThousandModulesKeepMemoryAndMappingsBounded) {
    constexpr int kModules = 5000, kHeldFrom = 4000, kHeldWindow = 100, kLaunchEvery = 50;
    const std::string object = read_bytes(cached_object(kPut));
    ASSERT_FALSE(object.empty());
    const std::string cache_dir = env().dir + "/cpu/";
    const std::vector<std::string> no_options;
    StreamGuard s;
    // Warm-up: the first launch allocates the executor's and the stream's memory.
    {
        rtModule_t m = nullptr;
        ASSERT_RT_OK(rtModuleLoadSource(&m, kPut, nullptr));
        rtFunction_t f = nullptr;
        ASSERT_RT_OK(rtModuleGetFunction(&f, m, "put"));
        EXPECT_EQ(run_put(f, 1, s), 1);
        ASSERT_RT_OK(rtModuleUnload(m));
    }
    const long rss_start = rss_kib();
    size_t max_mapped = 0;
    std::vector<rtModule_t> held;
    int launched = 0;
    for (int i = 0; i < kModules; ++i) {
        const std::string source = std::string(kPut) + "// distinct source #" + std::to_string(i) + "\n";
        const std::string key = rt::kernels::cache_key(rt::cpu::cpu_target(), "kernel_source", source, no_options);
        const std::string path = rt::kcache::entry_path("cpu", key, ".so");
        rt::kcache::store_bytes(path, object);
        rtModule_t m = nullptr;
        ASSERT_RT_OK(rtModuleLoadSource(&m, source.c_str(), nullptr)) << "module #" << i;
        ::unlink(path.c_str());  // keeps the disk small; a mapping outlives its file
        if (i % kLaunchEvery == 0) {
            rtFunction_t f = nullptr;
            ASSERT_RT_OK(rtModuleGetFunction(&f, m, "put"));
            ASSERT_EQ(run_put(f, i, s), i) << "module #" << i;
            ++launched;
        }
        if (i < kHeldFrom) {
            ASSERT_RT_OK(rtModuleUnload(m));
        } else {
            held.push_back(m);
            if (held.size() > static_cast<size_t>(kHeldWindow)) {
                ASSERT_RT_OK(rtModuleUnload(held.front()));
                held.erase(held.begin());
            }
        }
        if (i % 100 == 99) max_mapped = std::max(max_mapped, mapped_objects_under(cache_dir));
    }
    const size_t mapped_with_handles = mapped_objects_under(cache_dir);
    for (rtModule_t m : held) ASSERT_RT_OK(rtModuleUnload(m));
    const size_t mapped_end = mapped_objects_under(cache_dir);
    const long rss_end = rss_kib();
    std::printf("[ figures  ] %d modules loaded (%d launched), in-process cache limit %zu, %d handles held at the end: "
                "VmRSS %ld KiB at the start, %ld KiB at the end (%+ld KiB); cache objects mapped: at most %zu, %zu "
                "with the handles held, %zu after unloading them\n",
                kModules, launched, kCacheLimit, kHeldWindow, rss_start, rss_end, rss_end - rss_start, max_mapped,
                mapped_with_handles, mapped_end);
    // Bounds no run can miss: a module that is never unloaded costs ~20 KiB of RSS and one mapping.
    EXPECT_LE(max_mapped, kCacheLimit + kHeldWindow + 4);
    EXPECT_LE(mapped_end, kCacheLimit + 4);
    if (!kSanitized) {
        EXPECT_LT(rss_end - rss_start, 32 * 1024) << "5,000 modules leaked would be ~100 MiB";
    }
}

// ---------------------------------------------------------------------------------------- the cache itself (internal)

// The test's own copy of the toolchain (linked in, beside the library's): a cache over the cpu target. Sources are
// planted in the disk cache rather than compiled.
std::weak_ptr<rt::backend::Module> weak(const std::shared_ptr<rt::backend::Module>& m) { return m; }

std::string planted(const std::string& tag) {
    static const std::string object = read_bytes(cached_object(kPut));
    const std::string source = std::string(kPut) + "// " + tag + "\n";
    const std::string key = rt::kernels::cache_key(rt::cpu::cpu_target(), "kernel_source", source, {});
    rt::kcache::store_bytes(rt::kcache::entry_path("cpu", key, ".so"), object);
    return source;
}

TEST(ModuleCacheLimit, LeastRecentlyUsedGoFirstAndStayWhileHeld) {
    ASSERT_TRUE(kEnvironmentSet);
    rt::kernels::ModuleCache cache(2);
    auto& target = rt::cpu::cpu_target();
    const std::string sources[] = {planted("lru #0"), planted("lru #1"), planted("lru #2")};
    auto source = [&](int i) { return sources[i]; };
    auto a = cache.load_source(target, source(0), "");
    std::weak_ptr<rt::backend::Module> b = weak(cache.load_source(target, source(1), ""));
    EXPECT_EQ(cache.load_source(target, source(0), ""), a) << "a hit refreshes a";
    EXPECT_EQ(cache.size(), 2u);
    auto c = cache.load_source(target, source(2), "");  // evicts b, the least recently used
    EXPECT_EQ(cache.size(), 2u);
    EXPECT_TRUE(b.expired()) << "evicted and held by nobody: released";
    std::weak_ptr<rt::backend::Module> held_a = a;
    cache.set_limit(1);  // evicts a (c is newer), which the test still holds
    EXPECT_FALSE(held_a.expired());
    EXPECT_EQ(cache.load_source(target, source(2), ""), c);
    EXPECT_NE(cache.load_source(target, source(0), ""), nullptr);  // from the disk cache again
    a.reset();
    EXPECT_TRUE(held_a.expired());
    EXPECT_EQ(cache.size(), 1u);
}

TEST(ModuleCacheLimit, ZeroKeepsNothingInProcess) {
    ASSERT_TRUE(kEnvironmentSet);
    rt::kernels::ModuleCache cache(0);
    auto& target = rt::cpu::cpu_target();
    const std::string source = planted("uncached");
    auto first = cache.load_source(target, source, "");
    std::weak_ptr<rt::backend::Module> w = first;
    auto second = cache.load_source(target, source, "");
    EXPECT_NE(first, second) << "each load loads again (from the disk cache)";
    EXPECT_EQ(cache.size(), 0u);
    first.reset();
    EXPECT_TRUE(w.expired());
}

}  // namespace
