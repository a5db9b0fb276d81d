// test_kernel_traps.cpp — kernel faults on the cpu backend: rt_assert stops its work-item, stack overflow, foreign signal handlers, signals sent from outside, TLS of loaded code.
#include "test_util.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

using namespace rt_test;

namespace {

// cpu only at run time; the suite's kernel sources also compile under NVRTC (test_cuda_compiler), hence the
// #if around what is host-only (pthread_self, a 64 MiB frame).
const char* const kSource = R"rtsrc(
#if !defined(__CUDACC__)
#include <pthread.h>
#endif

// Item `bad` fails its assert; the store after it must not happen for it.
RT_KERNEL void assert_then_store(int32_t* out, int32_t bad) {
    size_t i = get_global_id(0);
    rt_assert(i != (size_t)bad);
    out[i] = 1;
}

// Unbounded recursion: not a tail call (the result is used after it), each frame keeps a volatile array.
RT_DEVICE int32_t deep(int32_t n, volatile int32_t* sink) {
    volatile char pad[512];
    pad[n & 511] = (char)n;
    *sink = n;
    return deep(n + 1, sink) + pad[(n * 7) & 511];
}
RT_KERNEL void recurse(int32_t* sink) { sink[1] = deep(0, sink); }

// A 64 MiB local array touched from its top down, a page at a time (as stack-clash probing does): the
// touches walk off the low end of any thread's stack into its guard.
RT_KERNEL void huge_frame(int32_t* out) {
#if !defined(__CUDACC__)
    volatile char big[64 << 20];
    for (long k = (long)sizeof(big) - 1; k >= 0; k -= 4096) big[k] = 1;
    out[0] = big[0];
#endif
}

RT_KERNEL void null_write(int32_t* p, int32_t v) {
    if (get_global_id(0) == 0) p[0] = v;
}

RT_KERNEL void store_one(int32_t* out) { out[get_global_id(0)] = 1; }

// Publishes its thread, then spins until flags[0] is set (the host's gate).
RT_KERNEL void wait_for_flag(int32_t* flags, uint64_t* thread) {
#if !defined(__CUDACC__)
    *thread = (uint64_t)pthread_self();
#endif
    atomic_exchange(&flags[1], 1);
    while (atomic_add(&flags[0], 0) == 0) {
    }
}
)rtsrc";

/// Every test process compiles into its own empty cache directory (removed at exit); the TLS test reads
/// the modules the cache wrote there.
class CacheDirEnvironment : public ::testing::Environment {
public:
    void SetUp() override {
        // A death-test child (a re-execution of this binary) shares its parent's directory and leaves it.
        if (const char* parent = std::getenv("RT_TEST_KERNEL_TRAPS_CACHE")) {
            dir_ = parent;
            return;
        }
        char tmpl[] = "/tmp/rt-test-kernel-traps-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        owned_ = true;
        ::setenv("RUNTIME_CACHE_DIR", dir_.c_str(), 1);
        ::setenv("RT_TEST_KERNEL_TRAPS_CACHE", dir_.c_str(), 1);
    }
    void TearDown() override {
        std::error_code ec;
        if (owned_) std::filesystem::remove_all(dir_, ec);
    }
    const std::string& dir() const { return dir_; }

private:
    std::string dir_;
    bool owned_ = false;
};
auto* const g_cache_env =
    static_cast<CacheDirEnvironment*>(::testing::AddGlobalTestEnvironment(new CacheDirEnvironment));

constexpr rtDim3 dim(unsigned x) { return rtDim3{x, 1, 1}; }

bool is_cpu(int device) {
    rtDeviceProp p{};
    return rtGetDeviceProperties(&p, device) == RT_SUCCESS && std::strcmp(p.backend, "cpu") == 0;
}

/// The module of kSource and its kernels on the current device.
class Kernels {
public:
    Kernels() { status_ = rtModuleLoadSource(&module_, kSource, nullptr); }
    ~Kernels() {
        if (module_) rtModuleUnload(module_);
    }
    rtError_t status() const { return status_; }
    rtFunction_t fn(const char* name) {
        rtFunction_t f = nullptr;
        EXPECT_RT_OK(rtModuleGetFunction(&f, module_, name)) << name;
        return f;
    }

private:
    rtModule_t module_ = nullptr;
    rtError_t status_;
};

/// One launch of store_one over 64 items on `s`, then its result checked: the stream still works.
void expect_stream_works(Kernels& k, rtStream_t s) {
    DevBuf out(sizeof(int32_t) * 64);
    ASSERT_RT_OK(rtMemset(out.get(), 0, out.size()));
    void* p = out.get();
    void* args[] = {&p};
    ASSERT_RT_OK(rtLaunchKernel(k.fn("store_one"), dim(2), dim(32), args, 0, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    std::vector<int32_t> r(64);
    ASSERT_RT_OK(rtMemcpy(r.data(), out.get(), out.size(), RT_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < 64; ++i) ASSERT_EQ(r[i], 1) << i;
}

class KernelTraps : public DeviceTest {
protected:
    void SetUp() override {
        DeviceTest::SetUp();
        if (HasFatalFailure()) return;
        if (!is_cpu(device())) GTEST_SKIP() << "trap recovery is the cpu backend's";
        kernels_ = std::make_unique<Kernels>();
        ASSERT_RT_OK(kernels_->status());
    }
    rtFunction_t fn(const char* name) { return kernels_->fn(name); }
    std::unique_ptr<Kernels> kernels_;
};

TEST_P(KernelTraps, FailedAssertStopsItsWorkItem) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    for (unsigned groups : {1u, 8u}) {  // one piece on the calling thread; pieces over the executors
        const int32_t n = static_cast<int32_t>(groups * 64);
        DevBuf out(sizeof(int32_t) * n);
        ASSERT_RT_OK(rtMemset(out.get(), 0, out.size()));
        void* p = out.get();
        int32_t bad = 10;
        void* args[] = {&p, &bad};
        ASSERT_RT_OK(rtLaunchKernel(fn("assert_then_store"), dim(groups), dim(64), args, 0, s));
        ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
        const std::string msg = last_message();
        EXPECT_TRUE(contains(msg, "assert_then_store"));
        EXPECT_TRUE(contains(msg, "rt_assert(i != (size_t)bad)"));
        const std::string src = kSource;
        const auto line = 1 + std::count(src.begin(), src.begin() + static_cast<long>(src.find("rt_assert(i")), '\n');
        EXPECT_TRUE(contains(msg, ":" + std::to_string(line))) << "the assert's line in the source";
        std::vector<int32_t> r(n);
        ASSERT_RT_OK(rtMemcpy(r.data(), out.get(), out.size(), RT_MEMCPY_DEVICE_TO_HOST));
        EXPECT_EQ(r[bad], 0) << "the store after the failed rt_assert ran";
        for (int32_t i = 0; i < bad; ++i) EXPECT_EQ(r[i], 1) << "item " << i << " before the failing one";
        expect_stream_works(*kernels_, s);
    }
}

TEST_P(KernelTraps, StackOverflowIsReportedAndTheStreamStaysUsable) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    DevBuf sink(sizeof(int32_t) * 2);
    void* p = sink.get();
    void* args[] = {&p};
    // Twice each: the thread that recovered (its alternate stack, its signal mask) recovers again.
    for (const char* name : {"recurse", "recurse", "huge_frame", "huge_frame"}) {
        ASSERT_RT_OK(rtLaunchKernel(fn(name), dim(1), dim(1), args, 0, s));
        ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s)) << name;
        const std::string msg = last_message();
        EXPECT_TRUE(contains(msg, name));
        EXPECT_TRUE(contains(msg, "stack overflow"));
        expect_stream_works(*kernels_, s);
    }
}

TEST_P(KernelTraps, AnInvalidAccessIsNotCalledAStackOverflow) {
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    int32_t* null = nullptr;
    int32_t v = 1;
    void* args[] = {&null, &v};
    ASSERT_RT_OK(rtLaunchKernel(fn("null_write"), dim(1), dim(32), args, 0, s));
    ASSERT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    const std::string msg = last_message();
    EXPECT_TRUE(contains(msg, "SIGSEGV"));
    EXPECT_FALSE(contains(msg, "stack overflow")) << msg;
}

RT_INSTANTIATE_DEVICE_TEST(KernelTraps);

// ------------------------------------------------------------------------------------------ in a child process

// The tests below change the process's signal dispositions or expect it to die: each runs in a fresh
// child (gtest's "threadsafe" death tests re-execute this binary for the one test), on device 0.

/// Exit codes of the children: 0 all held; otherwise the first check that failed (its reason on stderr).
[[noreturn]] void child_fail(int code, const std::string& why) {
    std::fprintf(stderr, "child check %d failed: %s\n", code, why.c_str());
    std::fflush(stderr);
    std::_Exit(code);
}

std::atomic<int> g_foreign_calls{0};
std::atomic<int> g_foreign_code{0};
sigjmp_buf g_foreign_jump;
std::atomic<bool> g_foreign_jump_set{false};

/// A handler another party installs: counts, remembers si_code, escapes a fault the test provoked, and
/// lets any other fault kill the process (as a crash reporter does); a sent signal is only counted.
void foreign_handler(int sig, siginfo_t* info, void*) {
    g_foreign_calls.fetch_add(1);
    g_foreign_code.store(info ? info->si_code : 1000);
    if (g_foreign_jump_set.exchange(false)) siglongjmp(g_foreign_jump, 1);
    if (info && info->si_code > 0) signal(sig, SIG_DFL);  // the fault re-executes and kills
}

void install_foreign_handler() {
    struct sigaction sa {};
    sa.sa_sigaction = foreign_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, nullptr) != 0) child_fail(90, "sigaction");
}

/// null_write through a null pointer on `s`: returns the synchronize's result, message in *msg.
rtError_t launch_null_write(Kernels& k, rtStream_t s, std::string* msg) {
    int32_t* null = nullptr;
    int32_t v = 1;
    void* args[] = {&null, &v};
    if (rtLaunchKernel(k.fn("null_write"), dim(1), dim(32), args, 0, s) != RT_SUCCESS) child_fail(91, last_message());
    rtError_t e = rtStreamSynchronize(s);
    *msg = last_message();
    return e;
}

void foreign_handler_after_first_launch_child() {
    if (rtSetDevice(0) != RT_SUCCESS || !is_cpu(0)) std::_Exit(0);  // nothing to check off the cpu backend
    Kernels k;
    if (k.status() != RT_SUCCESS) child_fail(1, last_message());
    StreamGuard s;
    std::string msg;
    // The first launch installs the runtime's handlers.
    if (launch_null_write(k, s, &msg) != RT_ERROR_LAUNCH_FAILED) child_fail(2, "first trap not reported: " + msg);
    // Now another party (a crash reporter, faulthandler) takes SIGSEGV. The runtime looks again at the
    // first stream start 1 ms (on CLOCK_MONOTONIC_COARSE) after its last look: no gate can stand in for
    // that interval, so the child sleeps past it (plus two ticks of that clock).
    install_foreign_handler();
    timespec tick{};
    clock_getres(CLOCK_MONOTONIC_COARSE, &tick);
    std::this_thread::sleep_for(std::chrono::milliseconds(1) + 2 * std::chrono::nanoseconds(tick.tv_nsec) +
                                2 * std::chrono::seconds(tick.tv_sec));
    if (launch_null_write(k, s, &msg) != RT_ERROR_LAUNCH_FAILED || msg.find("SIGSEGV") == std::string::npos)
        child_fail(3, "trap after the foreign handler not reported: " + msg);
    if (g_foreign_calls.load() != 0) child_fail(4, "the foreign handler saw a kernel trap");
    // A fault outside kernels (a store to an inaccessible page: a fault, not undefined behaviour that a
    // sanitizer would report first) still reaches the foreign handler.
    void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) child_fail(9, "mmap");
    if (sigsetjmp(g_foreign_jump, 1) == 0) {
        g_foreign_jump_set.store(true);
        *static_cast<volatile int*>(page) = 1;
        child_fail(5, "no fault");
    }
    if (g_foreign_calls.load() != 1) child_fail(6, "the foreign handler did not get the fault outside kernels");
    if (g_foreign_code.load() <= 0) child_fail(7, "the foreign handler got a wrong si_code");
    // And the runtime still recovers afterwards.
    if (launch_null_write(k, s, &msg) != RT_ERROR_LAUNCH_FAILED) child_fail(8, "third trap not reported: " + msg);
    std::_Exit(0);
}

TEST(KernelTrapsChild, ForeignHandlerInstalledAfterTheFirstLaunch) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(foreign_handler_after_first_launch_child(), ::testing::ExitedWithCode(0), "");
}

/// Runs wait_for_flag on an executor, sends SIGSEGV to that thread with pthread_kill (si_code SI_TKILL),
/// waits until the previous handler got it, then opens the kernel's gate; returns the synchronize's result.
rtError_t signal_a_running_kernel() {
    Kernels k;
    if (k.status() != RT_SUCCESS) child_fail(20, last_message());
    StreamGuard s;
    DevBuf flags(sizeof(int32_t) * 2), thread(sizeof(uint64_t));
    if (rtMemset(flags.get(), 0, flags.size()) != RT_SUCCESS) child_fail(21, last_message());
    void* pf = flags.get();
    void* pt = thread.get();
    void* args[] = {&pf, &pt};
    if (rtLaunchKernel(k.fn("wait_for_flag"), dim(1), dim(1), args, 0, s) != RT_SUCCESS) child_fail(22, last_message());
    // Device memory of the cpu backend is host memory: the test reads and opens the kernel's gate directly.
    auto* f = reinterpret_cast<int32_t*>(flags.get());
    if (!wait_until([&] { return __atomic_load_n(&f[1], __ATOMIC_SEQ_CST) != 0; }))
        child_fail(23, "the kernel did not start");
    const auto target = static_cast<pthread_t>(*reinterpret_cast<volatile uint64_t*>(thread.get()));
    if (pthread_kill(target, SIGSEGV) != 0) child_fail(24, "pthread_kill");
    if (!wait_until([] { return g_foreign_calls.load() > 0; }))
        child_fail(25, "the signal did not reach the previous handler");
    __atomic_store_n(&f[0], 1, __ATOMIC_SEQ_CST);
    return rtStreamSynchronize(s);
}

void sent_signal_goes_to_previous_handler_child() {
    if (rtSetDevice(0) != RT_SUCCESS || !is_cpu(0)) std::_Exit(0);
    install_foreign_handler();  // before the runtime's: it is what the runtime passes other signals on to
    if (rtError_t e = signal_a_running_kernel(); e != RT_SUCCESS)
        child_fail(26, std::string("a sent signal was reported as a kernel failure: ") + rtGetErrorName(e) + ": " +
                           last_message());
    if (g_foreign_code.load() != SI_TKILL) child_fail(27, "si_code " + std::to_string(g_foreign_code.load()));
    std::_Exit(0);
}

TEST(KernelTrapsChild, SignalSentToAKernelThreadGoesToThePreviousHandler) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(sent_signal_goes_to_previous_handler_child(), ::testing::ExitedWithCode(0), "");
}

void sent_signal_default_action_child() {
    if (rtSetDevice(0) != RT_SUCCESS || !is_cpu(0)) {
        raise(SIGSEGV);  // what the check below expects, off the cpu backend
    }
    signal_a_running_kernel();  // the default action kills the process before the previous handler counts
    child_fail(30, "the process survived a SIGSEGV sent with the default disposition");
}

TEST(KernelTrapsChild, SignalSentToAKernelThreadGetsTheDefaultAction) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // The sanitizer's deadly-signal handler was there before the runtime's (ASan), or stands behind the
    // default action (TSan): it reports the signal and ends the process.
    EXPECT_DEATH(sent_signal_default_action_child(), "Sanitizer: SEGV");
#else
    EXPECT_EXIT(sent_signal_default_action_child(), ::testing::KilledBySignal(SIGSEGV), "");
#endif
}

// ------------------------------------------------------------------------------------------ TLS of loaded code

/// Whether the ELF shared object at `path` has DF_STATIC_TLS in its dynamic section: set by the linker when
/// the object uses initial-exec TLS, which dlopen can only satisfy from the static TLS surplus.
::testing::AssertionResult uses_static_tls(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (bytes.size() < sizeof(Elf64_Ehdr)) return ::testing::AssertionFailure() << path << ": not readable";
    Elf64_Ehdr eh;
    std::memcpy(&eh, bytes.data(), sizeof eh);
    if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64)
        return ::testing::AssertionFailure() << path << ": not a 64-bit ELF file";
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
        Elf64_Phdr ph;
        const size_t at = eh.e_phoff + size_t(i) * eh.e_phentsize;
        if (at + sizeof ph > bytes.size()) break;
        std::memcpy(&ph, bytes.data() + at, sizeof ph);
        if (ph.p_type != PT_DYNAMIC) continue;
        for (size_t d = ph.p_offset; d + sizeof(Elf64_Dyn) <= ph.p_offset + ph.p_filesz && d + sizeof(Elf64_Dyn) <= bytes.size();
             d += sizeof(Elf64_Dyn)) {
            Elf64_Dyn dyn;
            std::memcpy(&dyn, bytes.data() + d, sizeof dyn);
            if (dyn.d_tag == DT_NULL) break;
            if (dyn.d_tag == DT_FLAGS && (dyn.d_un.d_val & DF_STATIC_TLS))
                return ::testing::AssertionSuccess() << path << " has DF_STATIC_TLS";
        }
        return ::testing::AssertionFailure() << path << " has no DF_STATIC_TLS";
    }
    return ::testing::AssertionFailure() << path << " has no dynamic section";
}

TEST(KernelTrapsTls, LibruntimeUsesNoStaticTls) {
    Dl_info info{};
    ASSERT_NE(dladdr(reinterpret_cast<void*>(&rtGetDeviceCount), &info), 0);
    ASSERT_NE(info.dli_fname, nullptr);
    EXPECT_FALSE(uses_static_tls(info.dli_fname)) << "libruntime may be dlopen'ed (Python)";
}

TEST(KernelTrapsTls, KernelModulesUseNoStaticTls) {
    ASSERT_RT_OK(rtSetDevice(0));
    if (!is_cpu(0)) GTEST_SKIP() << "cpu kernel modules only";
    Kernels k;
    ASSERT_RT_OK(k.status());
    int modules = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(g_cache_env->dir())) {
        if (!e.is_regular_file() || e.path().extension() != ".so") continue;
        ++modules;
        EXPECT_FALSE(uses_static_tls(e.path().string()));
    }
    EXPECT_GT(modules, 0) << "no module in the cache directory " << g_cache_env->dir();
}

}  // namespace
