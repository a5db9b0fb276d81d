// test_init.cpp — rtInit / rtFinalize: options, bad options, re-initialisation, stale handles (own executable: it tears the runtime down).
#include "test_util.hpp"

namespace {

constexpr size_t kMiB = size_t(1) << 20;

/// Every test starts from a finalized runtime so option tests do not depend on test order.
class Init : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_RT_OK(rtFinalize()); }
    void TearDown() override { EXPECT_RT_OK(rtFinalize()); }
    rt_test::Watchdog watchdog_{std::chrono::milliseconds(45000), "init test"};  // below the CTest TIMEOUT (60 s)
};

int env_devices() {
    const char* e = std::getenv("RUNTIME_CPU_DEVICES");
    return e ? std::atoi(e) : 1;
}

TEST_F(Init, ImplicitInitialisationUsesEnvironmentDefaults) {
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));  // first call after finalize initialises
    EXPECT_EQ(n, env_devices());
}

TEST_F(Init, PerThreadDefaultStreamOrdersOnlyTheCallingThreadsWork) {
    ASSERT_RT_OK(rtInit("default_stream=per-thread"));
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));  // blocking, but there is no legacy default stream to wait for it
    rt_test::Gate on_stream, on_this_thread;
    ASSERT_RT_OK(on_stream.launch(s));
    ASSERT_RT_OK(on_this_thread.launch(nullptr));  // this thread's default stream is held
    void* d = nullptr;
    ASSERT_RT_OK(rtMalloc(&d, 64));
    std::vector<unsigned char> src(64, 9), got(64, 0);
    std::thread other([&] {  // another thread's NULL stream is its own: neither gate holds it up
        EXPECT_RT_OK(rtMemcpy(d, src.data(), 64, RT_MEMCPY_HOST_TO_DEVICE));
        EXPECT_RT_OK(rtMemcpy(got.data(), d, 64, RT_MEMCPY_DEVICE_TO_HOST));
    });
    other.join();
    EXPECT_EQ(got, src);
    EXPECT_FALSE(on_stream.left());
    EXPECT_FALSE(on_this_thread.left());
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtStreamQuery(nullptr)) << "this thread's NULL stream is the held one";
    on_this_thread.open();
    on_stream.open();
    EXPECT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_RT_OK(rtStreamSynchronize(s));
    EXPECT_RT_OK(rtStreamDestroy(s));
    EXPECT_RT_OK(rtFree(d));
}

TEST_F(Init, DefaultStreamOptionIsCheckedAndMustAgree) {
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("default_stream=per_thread"));
    const std::string m = rtGetLastErrorMessage();
    EXPECT_NE(m.find("default_stream='per_thread'"), std::string::npos) << m;
    EXPECT_NE(m.find("legacy or per-thread"), std::string::npos) << m;
    ASSERT_RT_OK(rtInit("default_stream=legacy"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("default_stream=per-thread"));  // differs from the live runtime
    ASSERT_RT_OK(rtFinalize());
    setenv("RUNTIME_DEFAULT_STREAM", "sometimes", 1);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit(nullptr));
    EXPECT_NE(std::string(rtGetLastErrorMessage()).find("RUNTIME_DEFAULT_STREAM"), std::string::npos)
        << rtGetLastErrorMessage();
    unsetenv("RUNTIME_DEFAULT_STREAM");
}

TEST_F(Init, NullAndEmptyOptionsUseDefaults) {
    ASSERT_RT_OK(rtInit(nullptr));
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    EXPECT_EQ(n, env_devices());
    ASSERT_RT_OK(rtFinalize());
    ASSERT_RT_OK(rtInit(""));
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    EXPECT_EQ(n, env_devices());
}

TEST_F(Init, OptionsSetDevicesMemoryAndExecutors) {
    ASSERT_RT_OK(rtInit("cpu_devices=3;cpu_memory=64M;executors=2"));
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    EXPECT_EQ(n, 3);
    for (int d = 0; d < n; ++d) {
        rtDeviceProp p;
        ASSERT_RT_OK(rtGetDeviceProperties(&p, d));
        EXPECT_EQ(p.total_memory, 64 * kMiB) << "device " << d;
        ASSERT_RT_OK(rtSetDevice(d));
        size_t free_b = 0, total_b = 0;
        ASSERT_RT_OK(rtMemGetInfo(&free_b, &total_b));
        EXPECT_EQ(total_b, 64 * kMiB);
    }
    ASSERT_RT_OK(rtSetDevice(0));
    // The capacity is enforced.
    void* p = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_OUT_OF_MEMORY, rtMalloc(&p, 65 * kMiB));
    ASSERT_RT_OK(rtMalloc(&p, 32 * kMiB));
    ASSERT_RT_OK(rtFree(p));
}

TEST_F(Init, StreamThresholdIsAnOptionOfTheRuntime) {
    ASSERT_RT_OK(rtInit("cpu_stream_min_bytes=0"));
    EXPECT_RT_OK(rtInit("cpu_stream_min_bytes=0"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("cpu_stream_min_bytes=32M"));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "already initialised"));
}

TEST_F(Init, MemorySuffixes) {
    struct Case {
        const char* options;
        size_t bytes;
    };
    for (const Case& c : {Case{"cpu_memory=1048576", kMiB}, Case{"cpu_memory=4096K", 4 * kMiB},
                          Case{"cpu_memory=8M", 8 * kMiB}, Case{"cpu_memory=1G", 1024 * kMiB}}) {
        ASSERT_RT_OK(rtInit(c.options)) << c.options;
        size_t free_b = 0, total_b = 0;
        ASSERT_RT_OK(rtMemGetInfo(&free_b, &total_b));
        EXPECT_EQ(total_b, c.bytes) << c.options;
        ASSERT_RT_OK(rtFinalize());
    }
}

TEST_F(Init, BadOptionsAreInvalidValue) {
    for (const char* bad : {"no_such_key=1", "cpu_devices", "cpu_devices=", "cpu_devices=abc", "cpu_devices=-1",
                            "cpu_memory=12Q", "cpu_memory=lots", "executors=x", "cpu_devices=2;bogus=3", "=5",
                            "cpu_stream_min_bytes=", "cpu_stream_min_bytes=-1", "cpu_stream_min_bytes=lots"}) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit(bad)) << "options \"" << bad << "\"";
        EXPECT_FALSE(rt_test::last_message().empty()) << bad;
        ASSERT_RT_OK(rtFinalize());
    }
    // The unknown key is named in the message.
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("frobnicate=1"));
    EXPECT_TRUE(rt_test::contains(rt_test::last_message(), "frobnicate"));
}

TEST_F(Init, FailedInitLeavesRuntimeUsable) {
    ASSERT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("no_such_key=1"));
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    EXPECT_GE(n, 1);
    std::atomic<bool> ran{false};
    ASSERT_RT_OK(rtLaunchHostFunc(nullptr, rt_test::set_flag, &ran));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_TRUE(ran.load());
}

TEST_F(Init, ReInitWithSameOptionsSucceedsWithDifferentOptionsFails) {
    ASSERT_RT_OK(rtInit("cpu_devices=2"));
    EXPECT_RT_OK(rtInit("cpu_devices=2"));
    EXPECT_RT_OK(rtInit(nullptr)) << "rtInit(NULL) while initialised should accept the current state";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("cpu_devices=3"));
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    EXPECT_EQ(n, 2) << "a rejected rtInit changed the configuration";
}

TEST_F(Init, OptionsAfterImplicitInitialisationThatDifferAreRejected) {
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));  // implicit init with defaults
    std::string opt = "cpu_devices=" + std::to_string(n + 1);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit(opt.c_str()));
}

TEST_F(Init, FinalizeWaitsForQueuedWork) {
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    int delay = 40;
    static std::atomic<bool> done;
    done = false;
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::sleep_ms, &delay));
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::set_flag, &done));
    ASSERT_RT_OK(rtFinalize());
    EXPECT_TRUE(done.load()) << "rtFinalize returned before queued work completed";
}

TEST_F(Init, HandlesFromBeforeFinalizeAreInvalid) {
    rtStream_t s = nullptr;
    rtEvent_t e = nullptr;
    void* d = nullptr;
    void* h = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    ASSERT_RT_OK(rtEventCreate(&e));
    ASSERT_RT_OK(rtMalloc(&d, 4096));
    ASSERT_RT_OK(rtMallocHost(&h, 4096));
    ASSERT_RT_OK(rtEventRecord(e, s));
    ASSERT_RT_OK(rtFinalize());

    // Later calls re-initialise; the old handles belong to nothing now.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamSynchronize(s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamQuery(s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamDestroy(s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventQuery(e));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventSynchronize(e));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventRecord(e, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventDestroy(e));
    std::vector<unsigned char> buf(16);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpy(d, buf.data(), 16, RT_MEMCPY_HOST_TO_DEVICE));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(d));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFreeHost(h));
    // The fresh runtime works.
    rtStream_t s2 = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s2));
    ASSERT_RT_OK(rtStreamSynchronize(s2));
    ASSERT_RT_OK(rtStreamDestroy(s2));
}

TEST_F(Init, FinalizeReleasesMemory) {
    ASSERT_RT_OK(rtInit("cpu_memory=64M"));
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 48 * kMiB));
    ASSERT_RT_OK(rtFinalize());
    ASSERT_RT_OK(rtInit("cpu_memory=64M"));
    size_t free_b = 0, total_b = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free_b, &total_b));
    EXPECT_GE(free_b + kMiB, total_b) << "memory from before rtFinalize is still charged";
    ASSERT_RT_OK(rtMalloc(&p, 48 * kMiB));
    ASSERT_RT_OK(rtFree(p));
}

TEST_F(Init, CurrentDeviceBeyondNewCountIsReset) {
    ASSERT_RT_OK(rtInit("cpu_devices=3"));
    ASSERT_RT_OK(rtSetDevice(2));
    ASSERT_RT_OK(rtFinalize());
    ASSERT_RT_OK(rtInit("cpu_devices=1"));
    // Device 2 no longer exists: this thread must not keep using it.
    void* p = nullptr;
    rtError_t r = rtMalloc(&p, 64);
    if (r == RT_SUCCESS) {
        int d = -1;
        EXPECT_RT_OK(rtGetDevice(&d));
        EXPECT_EQ(d, 0) << "current device survived finalize although it no longer exists";
        EXPECT_RT_OK(rtFree(p));
    } else {
        EXPECT_EQ(r, RT_ERROR_INVALID_DEVICE) << rtGetErrorName(r);
    }
}

TEST_F(Init, RepeatedInitFinalizeCycles) {
    for (int i = 0; i < 20; ++i) {
        ASSERT_RT_OK(rtInit("cpu_devices=2;executors=2")) << "cycle " << i;
        rtStream_t s = nullptr;
        ASSERT_RT_OK(rtStreamCreate(&s));
        std::atomic<bool> ran{false};
        ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::set_flag, &ran));
        ASSERT_RT_OK(rtStreamSynchronize(s));
        EXPECT_TRUE(ran.load());
        ASSERT_RT_OK(rtFinalize()) << "cycle " << i;
    }
}

TEST_F(Init, FinalizeTwiceIsHarmless) {
    ASSERT_RT_OK(rtFinalize());
    ASSERT_RT_OK(rtFinalize());
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    EXPECT_GE(n, 1);
}

// ------------------------------------------------------------------ each backend's own options (cpu.*, cuda.*)

using rt_test::contains;
using rt_test::EnvVar;
using rt_test::last_message;

int device_count() {
    int n = -1;
    EXPECT_RT_OK(rtGetDeviceCount(&n));
    return n;
}

size_t device_memory() {
    size_t free_b = 0, total_b = 0;
    EXPECT_RT_OK(rtMemGetInfo(&free_b, &total_b));
    return total_b;
}

TEST_F(Init, PrefixedOptionsSetDevicesMemoryAndExecutors) {
    ASSERT_RT_OK(rtInit("cpu.devices=3; cpu.memory=64M ;cpu.executors=2;cpu.stream_min_bytes=0"));
    EXPECT_EQ(device_count(), 3);
    for (int d = 0; d < 3; ++d) {
        rtDeviceProp p;
        ASSERT_RT_OK(rtGetDeviceProperties(&p, d));
        EXPECT_EQ(p.total_memory, 64 * kMiB) << "device " << d;
        EXPECT_STREQ(p.backend, "cpu");
    }
    void* p = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_OUT_OF_MEMORY, rtMalloc(&p, 65 * kMiB)) << "the capacity is enforced";
}

TEST_F(Init, OldSpellingsAreTheSameOptionsAsThePrefixedOnes) {
    struct Pair {
        const char* prefixed;
        const char* old;
        const char* different;
    };
    for (const Pair& p : {Pair{"cpu.devices=2", "cpu_devices=2", "cpu.devices=3"},
                          Pair{"cpu.memory=32M", "cpu_memory=32M", "cpu_memory=16M"},
                          Pair{"cpu.executors=2", "executors=2", "executors=3"},
                          Pair{"cpu.stream_min_bytes=4096", "cpu_stream_min_bytes=4K", "cpu.stream_min_bytes=0"}}) {
        ASSERT_RT_OK(rtInit(p.prefixed)) << p.prefixed;
        EXPECT_RT_OK(rtInit(p.old)) << p.old << " configures what " << p.prefixed << " does";
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit(p.different)) << p.different;
        EXPECT_TRUE(contains(last_message(), "already initialised")) << last_message();
        ASSERT_RT_OK(rtFinalize());
    }
}

TEST_F(Init, LaterSettingsOfOneOptionWinWhateverTheSpelling) {
    ASSERT_RT_OK(rtInit("cpu_devices=3;cpu.devices=2"));
    EXPECT_EQ(device_count(), 2);
    ASSERT_RT_OK(rtFinalize());
    ASSERT_RT_OK(rtInit("cpu.memory=8M;cpu_memory=16M"));
    EXPECT_EQ(device_memory(), 16 * kMiB);
}

TEST_F(Init, EnvironmentGivesTheDefaultsAndOptionsOverrideThem) {
    EnvVar devices("RUNTIME_CPU_DEVICES", "3");
    EnvVar memory("RUNTIME_CPU_MEMORY", "8M");
    EnvVar executors("RUNTIME_EXECUTORS", "2");
    EnvVar threshold("RUNTIME_CPU_STREAM_MIN_BYTES", "0");
    EXPECT_EQ(device_count(), 3) << "implicit initialisation reads the environment";
    EXPECT_EQ(device_memory(), 8 * kMiB);
    EXPECT_RT_OK(rtInit("cpu.devices=3")) << "the same as the environment's: accepted";
    ASSERT_RT_OK(rtFinalize());
    ASSERT_RT_OK(rtInit("cpu.devices=1;cpu_memory=16M"));
    EXPECT_EQ(device_count(), 1) << "rtInit's options win over the environment";
    EXPECT_EQ(device_memory(), 16 * kMiB);
}

TEST_F(Init, BadValuesNameTheKeyAsWrittenAndWhatIsExpected) {
    struct Case {
        const char* options;
        const char* said;      // the key and value as written
        const char* expected;  // what the value should have been
    };
    for (const Case& c : {Case{"cpu.devices=abc", "cpu.devices='abc'", "expected an integer 1..1024"},
                          Case{"cpu.devices=0", "cpu.devices='0'", "1..1024"},
                          Case{"cpu.devices=1025", "cpu.devices='1025'", "1..1024"},
                          Case{"cpu.devices=-1", "cpu.devices='-1'", "1..1024"},
                          Case{"cpu.devices=99999999999999999999", "cpu.devices='99999999999999999999'", "1..1024"},
                          Case{"cpu.devices=", "cpu.devices=''", "1..1024"},
                          Case{"cpu_devices=two", "cpu_devices='two'", "1..1024"},
                          Case{"cpu.memory=12Q", "cpu.memory='12Q'", "expected bytes"},
                          Case{"cpu.memory=0", "cpu.memory='0'", "expected bytes"},
                          Case{"cpu.memory=99999999999T", "cpu.memory='99999999999T'", "expected bytes"},
                          Case{"cpu_memory=lots", "cpu_memory='lots'", "expected bytes"},
                          Case{"cpu.executors=x", "cpu.executors='x'", "a thread count"},
                          Case{"executors=0", "executors='0'", "a thread count"},
                          Case{"cpu.stream_min_bytes=-1", "cpu.stream_min_bytes='-1'", "expected bytes"},
                          Case{"cpu_stream_min_bytes=lots", "cpu_stream_min_bytes='lots'", "expected bytes"}}) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit(c.options)) << c.options;
        std::string m = last_message();
        EXPECT_TRUE(contains(m, "rtInit: ")) << m;
        EXPECT_TRUE(contains(m, c.said)) << c.options << ": " << m;
        EXPECT_TRUE(contains(m, c.expected)) << c.options << ": " << m;
        ASSERT_RT_OK(rtFinalize());
    }
}

TEST_F(Init, BadEnvironmentValuesNameTheVariable) {
    for (const char* var : {"RUNTIME_CPU_DEVICES", "RUNTIME_CPU_MEMORY", "RUNTIME_EXECUTORS",
                            "RUNTIME_CPU_STREAM_MIN_BYTES"}) {
        EnvVar bad(var, "lots");
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit(nullptr)) << var;
        EXPECT_TRUE(contains(last_message(), std::string(var) + "='lots'")) << last_message();
        int n = 0;
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGetDeviceCount(&n)) << "implicit initialisation reads it too";
        EXPECT_TRUE(contains(last_message(), var)) << last_message();
    }
    EXPECT_GE(device_count(), 1) << "with the variables restored the runtime starts";
}

TEST_F(Init, UnknownKeysAreRefusedListingTheKnownOnes) {
    for (const char* bad : {"frobnicate=1", "cpu.bogus=1", "cpu.=1", ".devices=1", "CPU.devices=1", "cpu devices=1",
                            "cpu.devices.x=1", "devices=2", "tpu.devices=1", "cpu.cpu_devices=1"}) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit(bad)) << bad;
        std::string m = last_message();
        std::string key = std::string(bad).substr(0, std::string(bad).find('='));
        EXPECT_TRUE(contains(m, "unknown option '" + key + "'")) << bad << ": " << m;
        for (const char* known : {"backend", "cpu.devices", "cpu_devices", "cpu.memory", "cpu_memory", "cpu.executors",
                                  "executors", "cpu.stream_min_bytes", "cpu_stream_min_bytes"})
            EXPECT_TRUE(contains(m, known)) << "the known keys are listed (" << known << "): " << m;
        ASSERT_RT_OK(rtFinalize());
    }
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("cpu.devices"));
    EXPECT_TRUE(contains(last_message(), "has no value")) << last_message();
}

TEST_F(Init, ARefusedOptionChangesNothing) {
    ASSERT_RT_OK(rtInit("cpu.devices=2"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("cpu.devices=3;cpu.bogus=1"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("cpu.devices=2;cpu.memory=none"));
    EXPECT_EQ(device_count(), 2);
    ASSERT_RT_OK(rtFinalize());
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("cpu.devices=3;cpu.executors=0"));
    EXPECT_EQ(device_count(), env_devices()) << "the failed rtInit left no runtime behind: defaults";
}

TEST_F(Init, BackendIsTheCoresOptionAndNamesARegisteredBackend) {
    ASSERT_RT_OK(rtInit("backend=cpu"));
    rtDeviceProp p{};
    ASSERT_RT_OK(rtGetDeviceProperties(&p, 0));
    EXPECT_STREQ(p.backend, "cpu");
    EXPECT_RT_OK(rtInit("backend=cpu"));
    ASSERT_RT_OK(rtFinalize());
    EXPECT_GE(device_count(), 1);
    EXPECT_RT_OK(rtInit("backend=cpu")) << "the default puts the cpu devices first: the same configuration";
    ASSERT_RT_OK(rtFinalize());
    for (const char* bad : {"backend=tpu", "backend=", "backend=CPU", "cpu.backend=cpu"}) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit(bad)) << bad;
        EXPECT_FALSE(last_message().empty());
        ASSERT_RT_OK(rtFinalize());
    }
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("backend=tpu"));
    EXPECT_TRUE(contains(last_message(), "backend='tpu' is not a backend (expected cpu")) << last_message();
}

TEST_F(Init, CudaOptionsAreTheCudaBackendsWhetherOrNotItIsBuilt) {
    EnvVar driver("RUNTIME_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1");
    rtError_t r = rtInit("cuda.enable=0");
    if (r == RT_SUCCESS) {
        int d = 0;
        EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, "cuda:0"));
        EXPECT_TRUE(contains(last_message(), "disabled (rtInit: cuda.enable=0)")) << last_message();
        EXPECT_FALSE(contains(last_message(), "/nonexistent")) << "disabled, the driver is not even tried";
        EXPECT_EQ(device_count(), env_devices()) << "the cpu devices only";
    } else {
        EXPECT_EQ(r, RT_ERROR_INVALID_VALUE);
        EXPECT_TRUE(contains(last_message(), "this build of the runtime has no cuda backend")) << last_message();
    }
}

} // namespace

// The in-process module cache's bound (src/kernels/target.hpp) is the core's option.
TEST_F(Init, ModuleCacheLimitIsACoreOptionCheckedAtInit) {
    const char* src = "RT_KERNEL void cache_limit_probe(int* o) { o[0] = 1; }";
    ASSERT_RT_OK(rtInit("module_cache_limit=0"));
    rtModule_t a = nullptr, b = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&a, src, nullptr));
    ASSERT_RT_OK(rtModuleLoadSource(&b, src, nullptr));
    rtFunction_t fa = nullptr, fb = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&fa, a, "cache_limit_probe"));
    ASSERT_RT_OK(rtModuleGetFunction(&fb, b, "cache_limit_probe"));
    ASSERT_RT_OK(rtModuleUnload(a));
    ASSERT_RT_OK(rtModuleUnload(b));
    ASSERT_RT_OK(rtFinalize());

    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("module_cache_limit=lots"));
    EXPECT_TRUE(contains(last_message(), "module_cache_limit") && contains(last_message(), "a count of modules"))
        << last_message();
    {
        EnvVar limit("RUNTIME_MODULE_CACHE_LIMIT", "-3");
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit(nullptr));
        EXPECT_TRUE(contains(last_message(), "RUNTIME_MODULE_CACHE_LIMIT")) << last_message();
    }
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("colour=blue"));
    EXPECT_TRUE(contains(last_message(), "module_cache_limit")) << "listed among the known keys: " << last_message();
    ASSERT_RT_OK(rtInit("module_cache_limit=16"));
}
