// Kernels on the cpu device: work-groups spread over the executors; faults caught and reported on the stream.
#include "backends/cpu/cpu_kernel.hpp"

#include <pthread.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <time.h>
#include <unistd.h>

#include <csetjmp>
#include <csignal>
#include <cstring>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "backends/cpu/cpu_sanitizer.hpp"
#ifdef RT_CPU_TSAN_
#include <sanitizer/tsan_interface.h>
#endif
#ifdef RT_CPU_ASAN_
#include <sanitizer/common_interface_defs.h>
#endif

#include "backends/cpu/cpu_fiber.hpp"
#include "backends/cpu/cpu_module.hpp"
#include "core/error.hpp"

namespace rt::cpu {

// ---------------------------------------------------------------- argument packing

void PackedArgs::pack(const std::vector<size_t>& sizes, void* const* args) {
    size_t total = 0;
    for (size_t s : sizes) total += slot(s);
    unsigned char* out = inline_;
    if (total > kInlineBytes) {
        heap_.reset(new unsigned char[total]);
        out = heap_.get();
    } else if (heap_) {
        heap_.reset();  // packed again with fewer bytes (a graph node's update): data() must be inline_ again
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
        std::memcpy(out, args[i], sizes[i]);
        out += slot(sizes[i]);
    }
}

void PackedArgs::pointers(const std::vector<size_t>& sizes, void** out) const {
    auto* p = const_cast<unsigned char*>(data());
    for (size_t i = 0; i < sizes.size(); ++i) {
        out[i] = p;
        p += slot(sizes[i]);
    }
}

// ---------------------------------------------------------------- traps

namespace {

constexpr int kTrapSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
// Our handler needs well under a page; a chained handler (a crash reporter printing a trace) needs more.
constexpr size_t kAltStackBytes = 64 * 1024;
// An alternate stack the thread already has (a sanitizer's, Python's faulthandler's) is kept from this size.
constexpr size_t kKeepAltStackBytes = 16 * 1024;
// A SIGSEGV whose address or stack pointer lies this close to (or past) the low end of the thread's stack
// is a stack overflow.
constexpr uintptr_t kOverflowSlack = 64 * 1024;

/// A thread that runs kernel code. The signal handler finds it by pthread_self() in a list that only grows
/// (records are reused by later threads, never freed): the handler reads no thread_local, because in a
/// dlopen'ed library a first thread_local access on a thread may allocate (not async-signal-safe).
struct TrapThread {
    std::atomic<pthread_t> owner{0};         // 0: free for the next thread
    std::atomic<sigjmp_buf*> jump{nullptr};  // the recovery point while kernel code runs, else null
    int signal = 0;                          // why the last jump happened: the signal, 0 for rt_assert
    void* address = nullptr;
    bool overflow = false;
    uintptr_t stack_lo = 0;   // lowest address of the thread's stack (above its guard)
    void* alt = nullptr;      // our alternate signal stack (a guard page, then kAltStackBytes), kept for reuse
    bool alt_installed = false;
    TrapThread* next = nullptr;
    // ---- work-groups: the fibers of the flat form (kept for reuse, by later threads too)
    uintptr_t fiber_lo = 0;             // lowest address of the running fiber's stack; 0 outside fibers
    struct FiberGroup* fibers = nullptr;
};
std::atomic<TrapThread*> g_threads{nullptr};
// Default TLS model (global-dynamic): libruntime may itself be dlopen'ed (Python), where initial-exec TLS
// would draw on the static TLS surplus. Read once per piece of a launch (a few ns), never in the handler.
thread_local TrapThread* t_trap = nullptr;
pthread_key_t g_release_key;

// The disposition each trap signal had before ours: the handler passes on what is not a kernel trap.
// Entries are immutable once published (a handler on another thread may be reading the previous one).
std::atomic<const struct sigaction*> g_previous[NSIG];
std::mutex g_install_mutex;
std::vector<std::unique_ptr<struct sigaction>>* g_previous_store;  // owns every entry ever published
std::atomic<bool> g_installed{false};
// Handler verification: Executor::schedule bumps `requested` when a stream starts running after being idle,
// at most once per kCheckIntervalNs; the next launch re-checks the handlers (a syscall) if it moved since.
// Not at every stream start: the check costs ~0.1 us, a fifth of a whole launch + synchronize round trip,
// and such a round trip starts its stream every time.
constexpr int64_t kCheckIntervalNs = 1'000'000;
std::atomic<uint64_t> g_check_requested{0};
std::atomic<uint64_t> g_checked{0};
std::atomic<int64_t> g_last_request_ns{INT64_MIN / 2};
// The thread passing a signal on: a chained handler that calls ours back (it saved ours as its
// previous) gets the default action instead of an endless loop.
std::atomic<pthread_t> g_chaining{0};

void trap_handler(int sig, siginfo_t* info, void* context);
void tsan_leave_fiber(TrapThread* t);

bool near_stack_limit(const TrapThread* t, const void* address, const void* context) {
    const uintptr_t lo = t->fiber_lo ? t->fiber_lo : t->stack_lo;  // a fiber's stack while one runs
    if (!lo) return false;
    uintptr_t a = reinterpret_cast<uintptr_t>(address);
    if (a + kOverflowSlack >= lo && a < lo + kOverflowSlack) return true;
    uintptr_t sp = 0;
#if defined(__x86_64__)
    if (context) sp = static_cast<uintptr_t>(static_cast<const ucontext_t*>(context)->uc_mcontext.gregs[REG_RSP]);
#elif defined(__aarch64__)
    if (context) sp = static_cast<uintptr_t>(static_cast<const ucontext_t*>(context)->uc_mcontext.sp);
#endif
    return sp && sp < lo + kOverflowSlack;  // a huge frame moved the stack pointer below the stack
}

/// What the previous disposition does with a signal that is not a kernel trap.
void pass_on(int sig, siginfo_t* info, void* context) {
    const bool sent = !info || info->si_code <= 0;  // kill/tgkill/sigqueue: returning would drop it
    const pthread_t self = pthread_self();
    pthread_t idle = 0;
    const bool looped = g_chaining.load(std::memory_order_relaxed) == self;
    const struct sigaction* prev = g_previous[sig].load(std::memory_order_acquire);
    if (prev && !looped) {
        const bool guarded = g_chaining.compare_exchange_strong(idle, self);
        bool called = true;
        if ((prev->sa_flags & SA_SIGINFO) && prev->sa_sigaction) prev->sa_sigaction(sig, info, context);
        else if (!(prev->sa_flags & SA_SIGINFO) && prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN)
            prev->sa_handler(sig);
        else called = false;
        if (guarded) g_chaining.store(0, std::memory_order_relaxed);
        if (called) return;
        if (prev->sa_handler == SIG_IGN && sent) return;
    }
    // The default action. A fault re-executes its instruction on return and then gets it; a sent signal
    // is raised again (not blocked: SA_NODEFER).
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    if (sent) raise(sig);
}

void trap_handler(int sig, siginfo_t* info, void* context) {
    // Only a fault of the CPU (si_code > 0: SEGV_MAPERR, FPE_INTDIV, SI_KERNEL, ...) on a thread inside
    // kernel code is a kernel trap; a signal sent from outside is passed on even then.
    if (info && info->si_code > 0) {
        const pthread_t self = pthread_self();
        for (TrapThread* t = g_threads.load(std::memory_order_acquire); t; t = t->next) {
            if (t->owner.load(std::memory_order_relaxed) != self) continue;
            sigjmp_buf* jump = t->jump.load(std::memory_order_relaxed);
            if (!jump) break;
            t->signal = sig;
            t->address = info->si_addr;
            t->overflow = sig == SIGSEGV && near_stack_limit(t, info->si_addr, context);
            if (t->fiber_lo) tsan_leave_fiber(t);  // (TSan: the jump must come from the state that set it)
            siglongjmp(*jump, 1);
        }
    }
    pass_on(sig, info, context);
}

/// Installs the trap handlers where they are not (first launch, or someone replaced them since),
/// remembering the replaced disposition to pass on what is not a kernel trap.
void install_trap_handlers() noexcept {
    std::lock_guard lock(g_install_mutex);
    if (!g_previous_store) g_previous_store = new (std::nothrow) std::vector<std::unique_ptr<struct sigaction>>();
    struct sigaction ours {};
    ours.sa_sigaction = trap_handler;
    // SA_ONSTACK: a stack overflow leaves no stack to run the handler on but the alternate one.
    ours.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    for (int sig : kTrapSignals) {
        struct sigaction current {};
        if (sigaction(sig, nullptr, &current) != 0) continue;
        if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == trap_handler) continue;
        if (!g_previous_store) continue;
        try {
            g_previous_store->push_back(std::make_unique<struct sigaction>(current));
        } catch (...) {
            continue;  // out of memory: leave the other party's handler in place
        }
        g_previous[sig].store(g_previous_store->back().get(), std::memory_order_release);
        sigaction(sig, &ours, nullptr);
    }
    g_installed.store(true, std::memory_order_release);
}

bool is_ours(int sig) {
    struct sigaction current {};
    return sigaction(sig, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == trap_handler;
}

/// Once per launch: install on the first, re-verify after a stream was idle (see g_check_requested).
/// The check reads SIGSEGV's disposition only (one syscall): whoever takes over fault signals (a crash
/// reporter, faulthandler, a JVM) takes SIGSEGV with them; when it was taken, all four are re-taken.
void ensure_trap_handlers() noexcept {
    const uint64_t requested = g_check_requested.load(std::memory_order_acquire);
    const bool installed = g_installed.load(std::memory_order_acquire);
    if (installed && g_checked.load(std::memory_order_acquire) == requested) return;
    // Marked checked only once the check is done: a launch that finds it marked runs after the re-take.
    if (!installed || !is_ours(SIGSEGV)) install_trap_handlers();
    g_checked.store(requested, std::memory_order_release);
}

void release_fiber_pages(TrapThread* t);

/// Thread exit: give up our alternate stack (it is reused by a later thread) and the record; the pages of its fiber
/// stacks are released (the mappings stay, for the record's next thread).
void release_thread(void* p) {
    auto* t = static_cast<TrapThread*>(p);
    release_fiber_pages(t);
    if (t->alt_installed) {
        stack_t current {};
        if (sigaltstack(nullptr, &current) == 0 && current.ss_sp == static_cast<char*>(t->alt) + getpagesize()) {
            stack_t off {};
            off.ss_flags = SS_DISABLE;
            sigaltstack(&off, nullptr);
        }
        t->alt_installed = false;
    }
    t_trap = nullptr;
    t->owner.store(0, std::memory_order_release);
}

/// The calling thread's record, with an alternate signal stack; null only when out of memory.
TrapThread* attach_thread() noexcept {
    static std::once_flag key_once;
    static bool key_ok = false;
    std::call_once(key_once, [] { key_ok = pthread_key_create(&g_release_key, release_thread) == 0; });
    const pthread_t self = pthread_self();
    TrapThread* t = nullptr;
    for (TrapThread* c = g_threads.load(std::memory_order_acquire); c && !t; c = c->next) {
        pthread_t expected = 0;
        if (c->owner.load(std::memory_order_relaxed) == 0 && c->owner.compare_exchange_strong(expected, self)) t = c;
    }
    if (!t) {
        t = new (std::nothrow) TrapThread;
        if (!t) return nullptr;
        t->owner.store(self, std::memory_order_relaxed);
        t->next = g_threads.load(std::memory_order_relaxed);
        while (!g_threads.compare_exchange_weak(t->next, t, std::memory_order_release, std::memory_order_relaxed)) {
        }
    }
    t->jump.store(nullptr, std::memory_order_relaxed);
    t->stack_lo = 0;
    pthread_attr_t attr;
    if (pthread_getattr_np(self, &attr) == 0) {
        void* base = nullptr;
        size_t size = 0;
        if (pthread_attr_getstack(&attr, &base, &size) == 0) t->stack_lo = reinterpret_cast<uintptr_t>(base);
        pthread_attr_destroy(&attr);
    }
    stack_t current {};
    const bool has_alt = sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE) &&
                         current.ss_size >= kKeepAltStackBytes;
    if (!has_alt) {
        const size_t page = static_cast<size_t>(getpagesize());
        if (!t->alt) {
            void* m = mmap(nullptr, page + kAltStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m != MAP_FAILED) {
                mprotect(m, page, PROT_NONE);  // guard: a handler overrunning its stack faults, not corrupts
                t->alt = m;
            }
        }
        if (t->alt) {
            stack_t ss {};
            ss.ss_sp = static_cast<char*>(t->alt) + page;
            ss.ss_size = kAltStackBytes;
            t->alt_installed = sigaltstack(&ss, nullptr) == 0;
        }
    }
    if (key_ok) pthread_setspecific(g_release_key, t);
    t_trap = t;
    return t;
}

// ---------------------------------------------------------------- work-groups: fibers of the flat form

/// t->signal after a group whose items did not all reach the same barriers, and after a group whose fiber stacks
/// could not be mapped.
constexpr int kDivergentBarrier = -1;
constexpr int kNoFiberStacks = -2;

/// The fibers of one thread and the group they run. Items run in turn (0, 1, ..., n-1); a barrier switches to the
/// next item, the last item's to the first: a round. At the end of a round every item either waits at a barrier
/// (the next round starts) or has ended (the group is done); a mix is a divergent barrier, which fails the launch.
struct FiberGroup {
    std::vector<FiberStack> stacks;  // one per item of the largest group run so far
    void* main_sp = nullptr;         // the thread's own context while fibers run
    void* main_fake = nullptr;       // ASan: its fake stack
    const void* main_bottom = nullptr;
    size_t main_size = 0;
    void* main_tsan = nullptr;
    TrapThread* thread = nullptr;
    void (*item)(void*, unsigned) = nullptr;
    void* ctx = nullptr;
    unsigned n = 0, current = 0, ended = 0;
    enum class Outcome { running, done, divergent, abandoned } outcome = Outcome::running;
    // A divergent group, for the report.
    unsigned long long group = 0;
    unsigned ended_items = 0, waiting_items = 0;
};

/// Switches from item `from` (-1: the thread's own context) to item `to` (-1: the thread), telling the sanitizers;
/// `from_done`: `from` is never resumed (ASan drops its fake stack).
void fiber_switch(FiberGroup& g, int from, int to, bool from_done) {
    void** save = from < 0 ? &g.main_sp : &g.stacks[static_cast<size_t>(from)].sp;
    FiberStack* target = to < 0 ? nullptr : &g.stacks[static_cast<size_t>(to)];
    g.thread->fiber_lo = target ? target->lo : 0;
#ifdef RT_CPU_ASAN_
    void** fake = from_done ? nullptr : from < 0 ? &g.main_fake : &g.stacks[static_cast<size_t>(from)].fake_stack;
    __sanitizer_start_switch_fiber(fake, target ? reinterpret_cast<const void*>(target->lo) : g.main_bottom,
                                   target ? target->bytes : g.main_size);
#else
    (void)from_done;
#endif
#ifdef RT_CPU_TSAN_
    __tsan_switch_to_fiber(target ? target->tsan : g.main_tsan, 0);
#endif
    rt_fiber_switch_(save, target ? target->sp : g.main_sp);
#ifdef RT_CPU_ASAN_
    // Resumed: the saved fake stack is the running one again (a fiber left at a barrier keeps it saved, which
    // prepare_fiber then drops).
    void*& resumed = from < 0 ? g.main_fake : g.stacks[static_cast<size_t>(from)].fake_stack;
    __sanitizer_finish_switch_fiber(resumed, nullptr, nullptr);
    resumed = nullptr;
#endif
}

/// Item `me` gives the thread to the next item (end of a round: see FiberGroup).
void fiber_next(FiberGroup& g, unsigned me, bool done) {
    unsigned next = me + 1;
    if (next == g.n) {
        if (g.ended == g.n) {
            g.outcome = FiberGroup::Outcome::done;
            fiber_switch(g, static_cast<int>(me), -1, true);
            return;  // not reached
        }
        if (g.ended > 0) {
            g.outcome = FiberGroup::Outcome::divergent;
            g.ended_items = g.ended;
            g.waiting_items = g.n - g.ended;
            fiber_switch(g, static_cast<int>(me), -1, true);
            return;
        }
        next = 0;
    }
    if (next == me) return;  // a group of one item: its barriers return at once
    g.current = next;
    fiber_switch(g, static_cast<int>(me), static_cast<int>(next), done);
}

void fiber_entry(void* p) {
    FiberGroup& g = *static_cast<FiberGroup*>(p);
#ifdef RT_CPU_ASAN_
    __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
    // An ended fiber is never resumed (run_group_fibers re-prepares it for the next group): the loop does not repeat.
    for (;;) {
        const unsigned me = g.current;
        g.item(g.ctx, me);
        ++g.ended;
        fiber_next(g, me, true);
    }
}

/// rt_cpu_launch.barrier: the running item waits for its group.
void group_barrier(void* ctx) {
    FiberGroup& g = *static_cast<FiberGroup*>(ctx);
    fiber_next(g, g.current, false);
}

FiberGroup* fiber_group(TrapThread* t) noexcept {
    if (!t->fibers) {
        t->fibers = new (std::nothrow) FiberGroup;
        if (!t->fibers) return nullptr;
    }
    t->fibers->thread = t;
    return t->fibers;
}

[[noreturn]] void end_piece(TrapThread* t, int signal) {
    t->signal = signal;
    siglongjmp(*t->jump.load(std::memory_order_relaxed), 1);
}

/// rt_cpu_launch.run_fibers (cpu_kernel_abi.h), on the thread's own stack inside run_guarded.
void run_group_fibers(const rt_cpu_launch* L, unsigned long long group, void (*item)(void*, unsigned), void* ctx) {
    TrapThread* t = t_trap;
    FiberGroup& g = *static_cast<FiberGroup*>(L->group_ctx);
    const unsigned n = L->block[0] * L->block[1] * L->block[2];
    while (g.stacks.size() < n) {
        FiberStack s;
        if (!allocate_fiber_stack(s)) {
            g.n = n;
            end_piece(t, kNoFiberStacks);
        }
        g.stacks.push_back(s);
    }
    for (unsigned i = 0; i < n; ++i) {
        prepare_fiber(g.stacks[i], fiber_entry, &g);
#ifdef RT_CPU_TSAN_
        // A fresh TSan state per item and group: an ended item never returns through the frames TSan saw entered,
        // and one left by a trap still counts itself inside the signal handler.
        if (g.stacks[i].tsan) __tsan_destroy_fiber(g.stacks[i].tsan);
        g.stacks[i].tsan = __tsan_create_fiber(0);
#endif
    }
    g.item = item;
    g.ctx = ctx;
    g.n = n;
    g.current = g.ended = 0;
    g.group = group;
    g.outcome = FiberGroup::Outcome::running;
#ifdef RT_CPU_TSAN_
    g.main_tsan = __tsan_get_current_fiber();
#endif
#ifdef RT_CPU_ASAN_
    if (!g.main_bottom) {
        pthread_attr_t attr;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            void* base = nullptr;
            size_t size = 0;
            if (pthread_attr_getstack(&attr, &base, &size) == 0) g.main_bottom = base, g.main_size = size;
            pthread_attr_destroy(&attr);
        }
    }
#endif
    fiber_switch(g, -1, 0, false);
    switch (g.outcome) {
        case FiberGroup::Outcome::done: return;
        case FiberGroup::Outcome::divergent: end_piece(t, kDivergentBarrier);
        case FiberGroup::Outcome::abandoned: end_piece(t, 0);  // an rt_assert or rt_barrier() failed (it claimed the fault)
        case FiberGroup::Outcome::running: break;
    }
    __builtin_trap();  // every item switches back with an outcome
}

/// The touched pages of the thread's fiber stacks go back to the system (MADV_DONTNEED; the mappings stay): after a
/// group that failed (a trap may have been a deep recursion, and its items' frames are abandoned) and at thread exit.
/// Stacks of groups that end normally are kept as they are: their next group touches the same pages.
void release_fiber_pages(TrapThread* t) {
    if (!t->fibers) return;
    for (FiberStack& s : t->fibers->stacks) release_fiber_stack_pages(s);
}

/// In the trap handler, about to jump from a fiber to the thread's own stack: TSan's current state becomes the
/// thread's again, where the jump buffer was set (the fiber's state is replaced when its group is next prepared).
void tsan_leave_fiber(TrapThread* t) {
#ifdef RT_CPU_TSAN_
    if (t->fibers && t->fibers->main_tsan) __tsan_switch_to_fiber(t->fibers->main_tsan, 0);
#else
    (void)t;
#endif
}

/// After a trap inside a fiber (the handler jumped to the thread's own stack): the sanitizers are told.
void left_fibers(TrapThread* t) {
    if (!t->fiber_lo) return;
    t->fiber_lo = 0;
#ifdef RT_CPU_ASAN_
    if (t->fibers) {
        // The trapping item's fake stack is the running one: dropped; the thread's own comes back.
        __sanitizer_start_switch_fiber(nullptr, t->fibers->main_bottom, t->fibers->main_size);
        __sanitizer_finish_switch_fiber(t->fibers->main_fake, nullptr, nullptr);
        t->fibers->main_fake = nullptr;
    }
#endif
}

/// Ends the calling work-item's piece of the launch: the failing rt_assert's fault->abandon.
void abandon_piece() {
    TrapThread* t = t_trap;
    if (t && t->fiber_lo && t->fibers) {  // inside a fiber: back to the thread's stack first, which then ends the piece
        FiberGroup& g = *t->fibers;
        g.outcome = FiberGroup::Outcome::abandoned;
        fiber_switch(g, static_cast<int>(g.current), -1, true);
    }
    sigjmp_buf* jump = t ? t->jump.load(std::memory_order_relaxed) : nullptr;
    if (!jump) return;  // not inside run_guarded: the item runs on (the assert is still recorded)
    t->signal = 0;
    siglongjmp(*jump, 1);
}

const char* describe_signal(int sig) {
    switch (sig) {
        case SIGSEGV: return "SIGSEGV (invalid memory access)";
        case SIGBUS: return "SIGBUS (misaligned or unmapped memory access)";
        case SIGFPE: return "SIGFPE (arithmetic fault, e.g. integer division by zero)";
        case SIGILL: return "SIGILL (illegal instruction)";
    }
    return "a signal";
}

/// Runs the entry on thread record `t`; returns false if it trapped or an rt_assert failed (t->signal says
/// which).
bool run_guarded(TrapThread* t, rt_cpu_entry entry, rt_cpu_launch* launch, void* const* args) {
    sigjmp_buf jump;
    sigjmp_buf* outer = t->jump.load(std::memory_order_relaxed);
    // The mask is not saved (that is a syscall per launch). After a trap, unblock the trap signals
    // explicitly: whoever ran the handler (a sanitizer's wrapper with a full mask, a chained handler) may
    // have left them blocked, and a second trap while blocked would kill the process.
    if (sigsetjmp(jump, 0) != 0) {
        left_fibers(t);
        t->jump.store(outer, std::memory_order_relaxed);
        if (t->signal > 0) {
            sigset_t traps;
            sigemptyset(&traps);
            for (int sig : kTrapSignals) sigaddset(&traps, sig);
            pthread_sigmask(SIG_UNBLOCK, &traps, nullptr);
        }
        return false;
    }
    t->jump.store(&jump, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the handler sees the jump before kernel code runs
    entry(launch, args);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t->jump.store(outer, std::memory_order_relaxed);
    return true;
}

}  // namespace

void prepare_kernel_thread() noexcept {
    if (!t_trap) attach_thread();
}

void request_trap_handler_check() noexcept {
    // The coarse clock: ~4 ns (the precise one ~16 ns); its tick (1-4 ms) is fine for this interval.
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    const int64_t now = static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
    if (now - g_last_request_ns.load(std::memory_order_relaxed) < kCheckIntervalNs) return;
    g_last_request_ns.store(now, std::memory_order_relaxed);
    g_check_requested.fetch_add(1, std::memory_order_release);
}

// ---------------------------------------------------------------- execution

void run_kernel(Executor& executor, const CpuFunction& function, const backend::LaunchShape& shape,
                void* const* args, const backend::LaunchReport& report, unsigned long long stream_min_bytes) noexcept {
    ensure_trap_handlers();
    rt_cpu_fault fault{};
    fault.abandon = abandon_piece;
    // Written only by the piece that claimed fault.failed for a trap; read after every piece is done.
    int trap_signal = 0;
    void* trap_address = nullptr;
    bool trap_overflow = false;
    bool no_memory = false;
    unsigned long long divergent_group = 0;  // (work-groups) the group, and how many of its items ended / waited
    unsigned divergent_ended = 0, divergent_waiting = 0;
    const bool flat = function.group_form() == RT_CPU_GROUP_BARRIER;

    unsigned long long groups = 1ull * shape.grid[0] * shape.grid[1] * shape.grid[2];
    unsigned long long items_per_group = 1ull * shape.block[0] * shape.block[1] * shape.block[2];
    // Pieces of whole groups: ~8 per executor balances uneven groups; at least ~16K items keeps the
    // per-piece overhead (a few atomics) negligible.
    size_t threads = static_cast<size_t>(executor.thread_count());  // parallel_for's participants at most
    size_t grain = groups == 1 ? 1
                               : std::max<size_t>(groups / (threads * 8), (16384 + items_per_group - 1) / items_per_group);
    // A whole number of pieces per thread: 3 pieces on 2 threads leave one thread doing two thirds of the launch.
    if (groups > grain && threads > 1) {
        const size_t pieces = ((groups + grain - 1) / grain + threads - 1) / threads * threads;
        grain = (groups + pieces - 1) / pieces;
    }
    rt_cpu_entry entry = function.entry();

    auto piece = [&](size_t begin, size_t end) {
        if (__atomic_load_n(&fault.failed, __ATOMIC_RELAXED)) return;
        rt_cpu_launch launch{};
        if (shape.shared_bytes) {
            thread_local std::unique_ptr<unsigned char[]> shared_memory;
            thread_local size_t shared_capacity = 0;
            if (shape.shared_bytes > shared_capacity) {
                shared_memory.reset(new unsigned char[shape.shared_bytes]);
                shared_capacity = shape.shared_bytes;
            }
            launch.shared_memory = shared_memory.get();
        }
        for (int d = 0; d < 3; ++d) {
            launch.grid[d] = shape.grid[d];
            launch.block[d] = shape.block[d];
            launch.global[d] = shape.global[d];
        }
        launch.group_begin = begin;
        launch.group_end = end;
        launch.fault = &fault;
        launch.shared_bytes = shape.shared_bytes;
        launch.stream_min_bytes = stream_min_bytes;
        TrapThread* t = t_trap;
        if (!t && !(t = attach_thread())) {
            if (__atomic_exchange_n(&fault.failed, 1, __ATOMIC_ACQ_REL) == 0) no_memory = true;
            return;
        }
        if (flat) {
            FiberGroup* g = fibers_supported() ? fiber_group(t) : nullptr;
            if (!g) {
                if (__atomic_exchange_n(&fault.failed, 1, __ATOMIC_ACQ_REL) == 0) no_memory = true;
                return;
            }
            launch.run_fibers = run_group_fibers;
            launch.barrier = group_barrier;
            launch.group_ctx = g;
        }
        // A failed rt_assert claimed the fault itself; a trap claims it here (the first failure is reported).
        if (!run_guarded(t, entry, &launch, args)) {
            if (t->signal && __atomic_exchange_n(&fault.failed, 1, __ATOMIC_ACQ_REL) == 0) {
                trap_signal = t->signal;
                trap_address = t->address;
                trap_overflow = t->overflow;
                if (t->signal == kDivergentBarrier) {
                    divergent_group = t->fibers->group;
                    divergent_ended = t->fibers->ended_items;
                    divergent_waiting = t->fibers->waiting_items;
                }
            }
            if (flat) release_fiber_pages(t);
        }
    };
    if (flat) {
        // The groups of a flat kernel share its static RT_LOCAL arrays (cpu_target.cpp): one at a time, in one piece.
        std::lock_guard lock(function.flat_launch_mutex());
        piece(0, groups);
    } else if (groups <= grain) {
        piece(0, groups);  // one piece: no pool round trip
    } else {
        executor.parallel_for(groups, grain, piece);
    }

    if (!__atomic_load_n(&fault.failed, __ATOMIC_ACQUIRE)) return;
    try {
        std::string what;
        if (no_memory)
            what = flat && !fibers_supported()
                       ? "could not run: kernels with rt_barrier() need fibers, which this architecture lacks in the "
                         "runtime (use rt_items blocks)"
                       : "could not run: out of memory preparing the thread's trap handling";
        else if (trap_signal == kNoFiberStacks)
            what = format("could not run: out of memory mapping the fiber stacks of a work-group of %u items",
                          shape.block[0] * shape.block[1] * shape.block[2]);
        else if (trap_signal == kDivergentBarrier) {
            const unsigned long long gx = shape.grid[0], gy = shape.grid[1];
            what = format("failed: in work-group (%llu,%llu,%llu), %u work-item(s) ended while %u waited at rt_barrier() "
                          "(a barrier in divergent control flow: every item of a group must reach the same barriers)",
                          divergent_group % gx, divergent_group / gx % gy, divergent_group / (gx * gy),
                          divergent_ended, divergent_waiting);
        } else if (trap_overflow && flat)
            what = format("trapped: stack overflow (%s at address %p; the work-items of a kernel with rt_barrier() run "
                          "on fiber stacks of %zu KiB each)", describe_signal(trap_signal), trap_address,
                          fiber_stack_bytes() >> 10);
        else if (trap_overflow)
            what = format("trapped: stack overflow (%s at address %p; kernel code runs on the runtime's threads "
                          "with their default stack size)", describe_signal(trap_signal), trap_address);
        else if (trap_signal)
            what = format("trapped: %s at address %p", describe_signal(trap_signal), trap_address);
        else if (__atomic_load_n(&fault.failed, __ATOMIC_ACQUIRE) == RT_CPU_FAULT_UNSEEN_BARRIER)
            what = format("failed: rt_barrier() at %s:%d in kernel '%s', which the front end did not see as using "
                          "barriers (written through a macro? write rt_barrier() out in the kernel body)",
                          fault.file ? fault.file : "?", fault.line, function.name().c_str());
        else
            what = format("rt_assert(%s) failed at %s:%d", fault.expr ? fault.expr : "?", fault.file ? fault.file : "?",
                          fault.line);
        report.slot->set(RT_ERROR_LAUNCH_FAILED,
                         format("kernel '%s' (%s) %s", function.name().c_str(),
                                backend::describe_operation(report.op_index, report.graph_node).c_str(), what.c_str()));
    } catch (...) {
        report.slot->set(RT_ERROR_LAUNCH_FAILED, {});
    }
}

}  // namespace rt::cpu
