// test_util.hpp — shared helpers of the C API tests: rtError_t assertions, a fixture over every device, gates and watchdogs.
#pragma once

#include <dlfcn.h>
#include <runtime/runtime.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../fake_cuda/fake_cuda.h"

namespace rt_test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

/// Predicate-formatter: success iff `actual == expected`; on mismatch prints both names and the
/// thread's last error message, so a failing CI log says what the library complained about.
inline ::testing::AssertionResult rt_result_is(const char* expected_text, const char* expr_text,
                                               rtError_t expected, rtError_t actual) {
    if (actual == expected) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << expr_text << "\n  returned " << rtGetErrorName(actual) << " (" << static_cast<int>(actual) << ")"
           << "\n  expected " << rtGetErrorName(expected) << " (" << expected_text << ")"
           << "\n  last error message: \"" << rtGetLastErrorMessage() << "\"";
}

} // namespace rt_test

#define ASSERT_RT_OK(expr) ASSERT_PRED_FORMAT2(::rt_test::rt_result_is, RT_SUCCESS, (expr))
#define EXPECT_RT_OK(expr) EXPECT_PRED_FORMAT2(::rt_test::rt_result_is, RT_SUCCESS, (expr))
#define ASSERT_RT_ERROR(code, expr) ASSERT_PRED_FORMAT2(::rt_test::rt_result_is, (code), (expr))
#define EXPECT_RT_ERROR(code, expr) EXPECT_PRED_FORMAT2(::rt_test::rt_result_is, (code), (expr))

namespace rt_test {

/// The last error message of this thread as a std::string (never null).
/// rtLaunchKernelEx with the fields spelled as arguments (global: 0 = grid * block per dimension).
inline rtError_t launch_ex(rtFunction_t f, rtDim3 grid, rtDim3 block, void** args, int num_args,
                           const size_t* arg_sizes, size_t shared_bytes, rtStream_t stream,
                           unsigned long long gx = 0, unsigned long long gy = 0, unsigned long long gz = 0) {
    rtLaunchConfig c = RT_LAUNCH_CONFIG_INIT;
    c.grid = grid;
    c.block = block;
    c.shared_bytes = shared_bytes;
    c.stream = stream;
    c.num_args = num_args;
    c.arg_sizes = arg_sizes;
    c.global[0] = gx;
    c.global[1] = gy;
    c.global[2] = gz;
    return rtLaunchKernelEx(f, &c, args);
}

/// Sets (value) or unsets (nullptr) an environment variable for a scope, then restores it.
class EnvVar {
public:
    EnvVar(const char* name, const char* value) : name_(name) {
        const char* old = std::getenv(name);
        had_ = old != nullptr;
        if (had_) old_ = old;
        if (value) ::setenv(name, value, 1);
        else ::unsetenv(name);
    }
    ~EnvVar() {
        if (had_) ::setenv(name_.c_str(), old_.c_str(), 1);
        else ::unsetenv(name_.c_str());
    }
    EnvVar(const EnvVar&) = delete;
    EnvVar& operator=(const EnvVar&) = delete;

private:
    std::string name_, old_;
    bool had_ = false;
};

inline std::string last_message() {
    const char* m = rtGetLastErrorMessage();
    return m ? std::string(m) : std::string("<null rtGetLastErrorMessage>");
}

/// The pointer as "%p" prints it: the form the library's messages must use to name an operand.
/// RT_TEST_WORK_SCALE (4 under the sanitizers, tests/CMakeLists.txt): `n` steps of a randomised or large-buffer test
/// become n / scale, never fewer than `at_least` (what the test needs to reach the paths it exists for).
inline size_t scaled(size_t n, size_t at_least = 1) {
    const char* s = std::getenv("RT_TEST_WORK_SCALE");
    const long v = s ? std::atol(s) : 1;
    const size_t m = v > 1 ? n / static_cast<size_t>(v) : n;
    return m > at_least ? m : at_least;
}

inline std::string ptr_text(const void* p) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%p", p);
    return buf;
}

/// Gtest assertion helper: `haystack` contains `needle`.
inline ::testing::AssertionResult contains(const std::string& haystack, const std::string& needle) {
    if (haystack.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "\"" << haystack << "\" does not contain \"" << needle << "\"";
}

/// The devices a device-parametrized suite runs on, chosen when tests are registered (after InitGoogleTest, so
/// the environment set by CTest is honoured):
///   RUNTIME_TEST_DEVICE unset: every cpu device (RUNTIME_CPU_DEVICES of them);
///   RUNTIME_TEST_DEVICE=cuda:0 (any device name): that device only — the *_cuda CTest reruns;
///   RUNTIME_TEST_DEVICE=all: every device of every backend.
/// An empty list makes gtest report the suite as uninstantiated, which fails the run: a broken
/// rtGetDeviceCount, or a named device that is absent, cannot pass silently.
inline std::vector<int> device_indices() {
    int n = 0;
    if (rtGetDeviceCount(&n) != RT_SUCCESS || n <= 0) {
        std::fprintf(stderr, "rt_test: rtGetDeviceCount failed or returned %d: %s\n", n, rtGetLastErrorMessage());
        return {};
    }
    const char* want = std::getenv("RUNTIME_TEST_DEVICE");
    std::vector<int> v;
    if (want && *want && std::strcmp(want, "all") != 0) {
        int d = -1;
        if (rtGetDeviceByName(&d, want) != RT_SUCCESS) {
            std::fprintf(stderr, "rt_test: RUNTIME_TEST_DEVICE=%s: %s\n", want, rtGetLastErrorMessage());
            return {};
        }
        v.push_back(d);
        return v;
    }
    for (int i = 0; i < n; ++i) {
        rtDeviceProp p{};
        if (rtGetDeviceProperties(&p, i) != RT_SUCCESS) return {};
        if ((want && *want) || std::strcmp(p.backend, "cpu") == 0) v.push_back(i);
    }
    return v;
}

inline std::string device_param_name(const ::testing::TestParamInfo<int>& info) {
    return "dev" + std::to_string(info.param);
}

/// Kills the process when a test exceeds its deadline: a deadlock in the library must fail the
/// test (crash with a message) rather than hang CTest until its own, coarser TIMEOUT.
class Watchdog {
public:
    explicit Watchdog(std::chrono::milliseconds limit, std::string what = "test")
        : what_(std::move(what)), thread_([this, limit] {
              std::unique_lock<std::mutex> lock(mutex_);
              if (!cv_.wait_for(lock, limit * scale(), [this] { return done_; })) {
                  std::fprintf(stderr, "\nWATCHDOG: %s did not finish within %lld ms: deadlock or lost wake-up\n",
                               what_.c_str(), static_cast<long long>((limit * scale()).count()));
                  std::fflush(stderr);
                  std::_Exit(99);
              }
          }) {}
    ~Watchdog() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            done_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

    /// RT_TEST_TIME_SCALE (e.g. 4 under ThreadSanitizer) stretches every deadline.
    static int scale() {
        const char* s = std::getenv("RT_TEST_TIME_SCALE");
        int v = s ? std::atoi(s) : 1;
        return v > 0 ? v : 1;
    }

private:
    std::string what_;
    std::mutex mutex_;
    std::condition_variable cv_;
    bool done_ = false;
    std::thread thread_;
};

/// Polls `pred` until it holds or `limit` passes; returns whether it held.
inline bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds limit = 10s) {
    auto deadline = Clock::now() + limit * Watchdog::scale();
    while (!pred()) {
        if (Clock::now() > deadline) return false;
        std::this_thread::sleep_for(100us);
    }
    return true;
}

/// The backend of `device` ("cpu", "cuda"; "" if it cannot be queried).
inline std::string backend_of(int device) {
    rtDeviceProp p{};
    if (rtGetDeviceProperties(&p, device) != RT_SUCCESS) return "";
    return p.backend;
}

/// The current device, or -1.
inline int current_device() {
    int d = -1;
    return rtGetDevice(&d) == RT_SUCCESS ? d : -1;
}

/// Whether the cuda backend runs on the fake driver (tests/fake_cuda), which records launches but runs no kernel
/// code: it answers fake_cuda_launches_execute() with 0. The library the runtime loaded is the one
/// RUNTIME_CUDA_DRIVER_LIB names (dlopen of the same path reaches the same instance; RTLD_NOLOAD loads nothing).
inline bool cuda_is_the_fake_driver() {
    const char* lib = std::getenv("RUNTIME_CUDA_DRIVER_LIB");
    if (!lib || !*lib) return false;
    void* h = ::dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h) return false;
    auto f = reinterpret_cast<fake_cuda_launches_execute_fn>(::dlsym(h, "fake_cuda_launches_execute"));
    bool fake = f && f() == 0;
    ::dlclose(h);
    return fake;
}

/// Whether kernels launched on `device` run their code (every device but those of the fake CUDA driver).
inline bool launches_execute(int device) { return backend_of(device) != "cuda" || !cuda_is_the_fake_driver(); }

/// Whether asynchronous copies with pageable host memory (not from rtMallocHost) run in stream order on `device`,
/// reading and writing host memory when the stream reaches them. cpu: yes. cuda: no — the driver may read a pageable
/// source at the call and returns from a copy into pageable memory only once it has completed (docs/cuda.md), so a
/// pageable copy queued behind blocked work blocks the thread that would unblock it. Tests that queue copies behind
/// a Gate use pinned memory (HostBuf) there.
inline bool pageable_copies_are_stream_ordered(int device) { return backend_of(device) == "cpu"; }

/// A point in a stream that holds back everything queued behind it until the test opens it (or 20 s pass, so a
/// failing test never wedges a stream forever).
///  - On cuda devices whose kernels run (a GPU), it is a device-side spin: a one-thread kernel that polls a word of
///    pinned host memory (rtMallocHost) until the host stores 1 there. It blocks its stream only — CUDA may run the
///    host functions of all streams of a context on one thread ("may be serialized"), so a blocking host function
///    would hold up every other stream's host functions too.
///  - Elsewhere (cpu, and the fake CUDA driver, which runs no kernel code) it is a host function that spins.
/// Either way the state (opened, entered, left, timed out) outlives the test: a test that returns early on a failed
/// assertion still lets the stream drain. Tests that need host-function semantics specifically use host functions
/// of their own.
class Gate {
public:
    struct State {
        std::atomic<bool> open{false};
        std::atomic<bool> entered{false};
        std::atomic<bool> left{false};
        std::atomic<bool> timed_out{false};
    };

    Gate() : state_(std::make_shared<State>()) {}
    /// Opens the gate: a test that exits early still lets the stream drain. Pinned memory goes once the work queued
    /// before the free has run (rtFreeHost), the gate kernel included.
    ~Gate() {
        open();
        if (flags_) rtFreeHost(flags_);
    }
    Gate(const Gate&) = delete;
    Gate& operator=(const Gate&) = delete;

    /// Queues the gate on `stream`, a stream of `device` (-1: the current device, whose default stream NULL is).
    rtError_t launch(rtStream_t stream, int device = -1) {
        if (device < 0) device = current_device();
        if (backend_of(device) == "cuda" && launches_execute(device)) return launch_on_device(stream, device);
        auto* ref = new std::shared_ptr<State>(state_);
        rtError_t e = rtLaunchHostFunc(stream, &Gate::run, ref);
        if (e != RT_SUCCESS) delete ref;
        return e;
    }
    void open() {
        state_->open.store(true);
        if (flags_) std::atomic_ref<int>(flags_[kOpen]).store(1);
    }
    bool entered() const { return state_->entered.load() || flag(kEntered); }
    bool left() const { return state_->left.load() || flag(kLeft); }
    bool timed_out() const { return state_->timed_out.load() || flag(kTimedOut); }
    /// Whether this gate is the device-side kernel (a host function otherwise).
    bool on_device() const { return flags_ != nullptr; }

    /// The gate kernel (compiled for cuda only; test_cuda_compiler compiles it with the suite's other sources).
    static constexpr const char* kSource = R"(
RT_DEVICE unsigned long long rt_test_now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
// flags: [0] opened by the host, [1] entered, [2] left, [3] timed out. Volatile: every poll reads host memory.
RT_KERNEL void rt_test_gate(volatile int* flags, unsigned long long timeout_ns) {
    flags[1] = 1;
    __threadfence_system();
    unsigned long long start = rt_test_now_ns();
    while (!flags[0]) {
        if (rt_test_now_ns() - start > timeout_ns) {
            flags[3] = 1;
            break;
        }
        __nanosleep(1000);
    }
    __threadfence_system();
    flags[2] = 1;
    __threadfence_system();
}
)";

    /// Queues the device-side gate kernel on `stream` of the cuda device `device`, whatever launch() would pick: for
    /// tests of the gate itself (on the fake driver the kernel is launched but runs nothing, so it does not hold).
    rtError_t launch_on_device(rtStream_t stream, int device) {
        int previous = current_device();
        rtError_t e = rtSetDevice(device);  // the module and the pinned words for the stream's device
        if (e != RT_SUCCESS) return e;
        if (!flags_) {
            void* p = nullptr;
            e = rtMallocHost(&p, kFlags * sizeof(int));
            if (e == RT_SUCCESS) {
                flags_ = static_cast<int*>(p);
                std::memset(flags_, 0, kFlags * sizeof(int));
                if (state_->open.load()) flags_[kOpen] = 1;
            }
        }
        rtModule_t m = nullptr;
        if (e == RT_SUCCESS) e = rtModuleLoadSource(&m, kSource, nullptr);  // cached after the first gate
        rtFunction_t f = nullptr;
        if (e == RT_SUCCESS) e = rtModuleGetFunction(&f, m, "rt_test_gate");
        if (e == RT_SUCCESS) {
            void* flags = flags_;
            unsigned long long timeout_ns = 20000000000ull * static_cast<unsigned long long>(Watchdog::scale());
            void* args[] = {&flags, &timeout_ns};
            e = rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args, 0, stream);
        }
        if (m) rtModuleUnload(m);  // the queued launch keeps the code until it has run
        if (previous >= 0) rtSetDevice(previous);
        return e;
    }

private:
    enum { kOpen, kEntered, kLeft, kTimedOut, kFlags };
    bool flag(int i) const { return flags_ && std::atomic_ref<int>(flags_[i]).load() != 0; }

    static void run(void* p) {
        std::unique_ptr<std::shared_ptr<State>> ref(static_cast<std::shared_ptr<State>*>(p));
        State& s = **ref;
        s.entered.store(true);
        auto deadline = Clock::now() + 20s * Watchdog::scale();
        while (!s.open.load()) {
            if (Clock::now() > deadline) {
                s.timed_out.store(true);
                break;
            }
            std::this_thread::sleep_for(100us);
        }
        s.left.store(true);
    }
    std::shared_ptr<State> state_;
    int* flags_ = nullptr;  // the device-side gate's pinned words (rtMallocHost), once launched as a kernel
};

/// Host function that sets an atomic<bool>.
inline void set_flag(void* p) { static_cast<std::atomic<bool>*>(p)->store(true); }

/// Host function that sleeps for *(int*)p milliseconds.
inline void sleep_ms(void* p) { std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<int*>(p))); }

/// Deterministic byte pattern distinct per (seed, index): detects shifted, truncated or stale copies.
inline void fill_pattern(void* dst, size_t n, uint32_t seed) {
    auto* b = static_cast<unsigned char*>(dst);
    uint32_t x = seed * 2654435761u + 0x9E3779B9u;
    for (size_t i = 0; i < n; ++i) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b[i] = static_cast<unsigned char>(x);
    }
}

inline std::vector<unsigned char> pattern(size_t n, uint32_t seed) {
    std::vector<unsigned char> v(n);
    fill_pattern(v.data(), n, seed);
    return v;
}

/// Index of the first differing byte, or -1: a readable failure for large buffers.
inline long long first_mismatch(const void* a, const void* b, size_t n) {
    if (std::memcmp(a, b, n) == 0) return -1;
    auto* x = static_cast<const unsigned char*>(a);
    auto* y = static_cast<const unsigned char*>(b);
    for (size_t i = 0; i < n; ++i)
        if (x[i] != y[i]) return static_cast<long long>(i);
    return -1;
}

/// A handle value that was never produced by the library: must be rejected, never dereferenced.
template <class Handle>
inline Handle garbage_handle() {
    return reinterpret_cast<Handle>(static_cast<uintptr_t>(0x1234));
}

/// Fixture over every device: sets the parameter as the thread's current device and guards the
/// test with a watchdog.
class DeviceTest : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override { ASSERT_RT_OK(rtSetDevice(GetParam())); }
    int device() const { return GetParam(); }

private:
    // Below the per-test CTest TIMEOUT (60 s) so a hang reports itself with the test name.
    Watchdog watchdog_{std::chrono::milliseconds(45000),
                       ::testing::UnitTest::GetInstance()->current_test_info()
                           ? ::testing::UnitTest::GetInstance()->current_test_info()->name()
                           : "test"};
};

/// Device memory freed at scope exit (tests that fail mid-way do not leak into later tests).
class DevBuf {
public:
    DevBuf() = default;
    explicit DevBuf(size_t n) { alloc(n); }
    ~DevBuf() { reset(); }
    DevBuf(const DevBuf&) = delete;
    DevBuf& operator=(const DevBuf&) = delete;
    rtError_t alloc(size_t n) {
        reset();
        size_ = n;
        return rtMalloc(&ptr_, n);
    }
    void reset() {
        if (ptr_) rtFree(ptr_);
        ptr_ = nullptr;
    }
    /// Forget the pointer without freeing it (the test frees it itself).
    void* release() {
        void* p = ptr_;
        ptr_ = nullptr;
        return p;
    }
    unsigned char* get() const { return static_cast<unsigned char*>(ptr_); }
    size_t size() const { return size_; }

private:
    void* ptr_ = nullptr;
    size_t size_ = 0;
};

/// Pinned host memory freed at scope exit.
class HostBuf {
public:
    explicit HostBuf(size_t n) : size_(n) { err_ = rtMallocHost(&ptr_, n); }
    ~HostBuf() {
        if (ptr_) rtFreeHost(ptr_);
    }
    HostBuf(const HostBuf&) = delete;
    HostBuf& operator=(const HostBuf&) = delete;
    rtError_t status() const { return err_; }
    unsigned char* get() const { return static_cast<unsigned char*>(ptr_); }
    size_t size() const { return size_; }

private:
    void* ptr_ = nullptr;
    size_t size_;
    rtError_t err_;
};

/// Stream destroyed at scope exit.
class StreamGuard {
public:
    StreamGuard() { err_ = rtStreamCreate(&s_); }
    /// rtStreamCreateWithFlags: RT_STREAM_NON_BLOCKING for a stream that the legacy default stream (rtMemcpy,
    /// rtMemset) does not wait for.
    explicit StreamGuard(unsigned flags) { err_ = rtStreamCreateWithFlags(&s_, flags); }
    ~StreamGuard() {
        if (s_) rtStreamDestroy(s_);
    }
    StreamGuard(const StreamGuard&) = delete;
    StreamGuard& operator=(const StreamGuard&) = delete;
    rtError_t status() const { return err_; }
    rtStream_t get() const { return s_; }
    operator rtStream_t() const { return s_; }

private:
    rtStream_t s_ = nullptr;
    rtError_t err_;
};

/// Event destroyed at scope exit.
class EventGuard {
public:
    explicit EventGuard(unsigned flags = RT_EVENT_DEFAULT) { err_ = rtEventCreateWithFlags(&e_, flags); }
    ~EventGuard() {
        if (e_) rtEventDestroy(e_);
    }
    EventGuard(const EventGuard&) = delete;
    EventGuard& operator=(const EventGuard&) = delete;
    rtError_t status() const { return err_; }
    rtEvent_t get() const { return e_; }
    operator rtEvent_t() const { return e_; }

private:
    rtEvent_t e_ = nullptr;
    rtError_t err_;
};

/// A graph destroyed at scope exit. Created empty (status() says how that went) unless told `nullptr`, for a graph
/// that a call fills in through out() (rtStreamEndCapture, rtGraphClone).
class GraphGuard {
public:
    GraphGuard() { err_ = rtGraphCreate(&g_, 0); }
    explicit GraphGuard(std::nullptr_t) {}
    ~GraphGuard() {
        if (g_) rtGraphDestroy(g_);
    }
    GraphGuard(const GraphGuard&) = delete;
    GraphGuard& operator=(const GraphGuard&) = delete;
    rtError_t status() const { return err_; }
    /// Where a call writes a graph (the one held so far is destroyed first).
    rtGraph_t* out() {
        if (g_) rtGraphDestroy(std::exchange(g_, nullptr));
        return &g_;
    }
    operator rtGraph_t() const { return g_; }
    rtGraph_t release() { return std::exchange(g_, nullptr); }

private:
    rtGraph_t g_ = nullptr;
    rtError_t err_ = RT_SUCCESS;
};

/// An executable graph destroyed at scope exit.
class ExecGuard {
public:
    ExecGuard() = default;
    ~ExecGuard() {
        if (x_) rtGraphExecDestroy(x_);
    }
    ExecGuard(const ExecGuard&) = delete;
    ExecGuard& operator=(const ExecGuard&) = delete;
    rtGraphExec_t* out() {
        if (x_) rtGraphExecDestroy(std::exchange(x_, nullptr));
        return &x_;
    }
    operator rtGraphExec_t() const { return x_; }
    rtGraphExec_t release() { return std::exchange(x_, nullptr); }

private:
    rtGraphExec_t x_ = nullptr;
};

} // namespace rt_test

/// Instantiates a DeviceTest-derived suite once per device present at registration time.
#define RT_INSTANTIATE_DEVICE_TEST(Suite)                                                            \
    INSTANTIATE_TEST_SUITE_P(AllDevices, Suite, ::testing::ValuesIn(::rt_test::device_indices()), \
                             ::rt_test::device_param_name)

namespace rt_test {

/// Makes the test process compile kernels into its own empty cache directory (removed at exit), never a user's:
/// `RT_TEST_TEMP_CACHE_DIR("kernel-launch");` at namespace scope of a test file.
class TempCacheDir : public ::testing::Environment {
public:
    explicit TempCacheDir(std::string tag) : tag_(std::move(tag)) {}
    void SetUp() override {
        std::string tmpl = "/tmp/rt-test-" + tag_ + "-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
        dir_ = tmpl;
        ::setenv("RUNTIME_CACHE_DIR", dir_.c_str(), 1);
    }
    void TearDown() override {
        std::error_code ec;
        if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
    }

private:
    std::string tag_, dir_;
};

}  // namespace rt_test

#define RT_TEST_TEMP_CACHE_DIR(tag)                                                  \
    ::testing::Environment* const rt_test_temp_cache_dir_ [[maybe_unused]] = \
        ::testing::AddGlobalTestEnvironment(new ::rt_test::TempCacheDir(tag))
