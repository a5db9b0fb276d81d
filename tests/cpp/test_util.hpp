// test_util.hpp — shared helpers of the C API tests: rtError_t assertions, a fixture over every device, gates and watchdogs.
#pragma once

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
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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

/// A host function that blocks its stream until the test opens it (or 20 s pass, so a failing
/// test never wedges an executor forever). State is shared-owned: the queued host function keeps
/// it alive even when the test returns early on a failed assertion.
class Gate {
public:
    struct State {
        std::atomic<bool> open{false};
        std::atomic<bool> entered{false};
        std::atomic<bool> left{false};
        std::atomic<bool> timed_out{false};
    };

    Gate() : state_(std::make_shared<State>()) {}
    /// Opens the gate: a test that exits early still lets the stream drain.
    ~Gate() { open(); }
    Gate(const Gate&) = delete;
    Gate& operator=(const Gate&) = delete;

    /// Queues the blocking host function on `stream`.
    rtError_t launch(rtStream_t stream) {
        auto* ref = new std::shared_ptr<State>(state_);
        rtError_t e = rtLaunchHostFunc(stream, &Gate::run, ref);
        if (e != RT_SUCCESS) delete ref;
        return e;
    }
    void open() { state_->open.store(true); }
    bool entered() const { return state_->entered.load(); }
    bool left() const { return state_->left.load(); }
    bool timed_out() const { return state_->timed_out.load(); }

private:
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

} // namespace rt_test

/// Instantiates a DeviceTest-derived suite once per device present at registration time.
#define RT_INSTANTIATE_DEVICE_TEST(Suite)                                                            \
    INSTANTIATE_TEST_SUITE_P(AllDevices, Suite, ::testing::ValuesIn(::rt_test::device_indices()), \
                             ::rt_test::device_param_name)
