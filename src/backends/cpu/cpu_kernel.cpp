// Kernels on the cpu device: work-groups spread over the executors; faults caught and reported on the stream.
#include "backends/cpu/cpu_kernel.hpp"

#include <pthread.h>

#include <csetjmp>
#include <csignal>
#include <cstring>
#include <atomic>
#include <mutex>

#include "backends/cpu/cpu_module.hpp"
#include "core/error.hpp"

namespace rt::cpu {

// ---------------------------------------------------------------- module and function objects

CpuFunction::CpuFunction(std::shared_ptr<CpuModule> module, const rt_cpu_kernel_info* info)
    : module_(std::move(module)), info_(info), name_(info->name), sizes_(info->arg_sizes, info->arg_sizes + info->num_args) {}

std::shared_ptr<backend::Function> CpuKernelModule::get_function_impl(const std::string& name) {
    const rt_cpu_kernel_info* info = module_->find(name);
    if (!info) return nullptr;
    return std::make_shared<CpuFunction>(module_, info);
}

std::vector<std::string> CpuKernelModule::kernel_names() const { return module_->kernel_names(); }

// ---------------------------------------------------------------- argument packing

void PackedArgs::pack(const std::vector<size_t>& sizes, void* const* args) {
    size_t total = 0;
    for (size_t s : sizes) total += slot(s);
    unsigned char* out = inline_;
    if (total > kInlineBytes) {
        heap_.reset(new unsigned char[total]);
        out = heap_.get();
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

// Initial-exec TLS: touched twice per launch, and a dozen bytes fit the static TLS surplus that
// dlopen (Python) draws on; the default model costs a __tls_get_addr call per access.
#define RT_FAST_TLS __attribute__((tls_model("initial-exec")))
thread_local sigjmp_buf* t_trap_jump RT_FAST_TLS = nullptr;
thread_local int t_trap_signal RT_FAST_TLS = 0;
thread_local void* t_trap_address RT_FAST_TLS = nullptr;

constexpr int kTrapSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
struct sigaction g_previous[64];

void trap_handler(int sig, siginfo_t* info, void* context) {
    if (t_trap_jump) {  // inside a kernel on this thread: abandon the work-group
        t_trap_signal = sig;
        t_trap_address = info ? info->si_addr : nullptr;
        siglongjmp(*t_trap_jump, 1);
    }
    // Not a kernel fault: hand it to whoever handled it before us (or the default action).
    const struct sigaction& prev = g_previous[sig];
    if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
        prev.sa_sigaction(sig, info, context);
    } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
        prev.sa_handler(sig);
    } else {
        signal(sig, SIG_DFL);  // returning re-executes the faulting instruction under the default action
    }
}

void install_trap_handlers() {
    // Checked on every launch: one acquire load, not std::call_once (which costs a TLS look-up per call).
    static std::atomic<bool> installed{false};
    if (installed.load(std::memory_order_acquire)) return;
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa {};
        sa.sa_sigaction = trap_handler;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        for (int sig : kTrapSignals) sigaction(sig, &sa, &g_previous[sig]);
        installed.store(true, std::memory_order_release);
    });
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

/// Runs the entry; returns false (after recording the trap in launch->fault) if it trapped.
bool run_guarded(rt_cpu_entry entry, rt_cpu_launch* launch, void* const* args) {
    sigjmp_buf jump;
    // The mask is not saved (that is a syscall per launch). After a trap, unblock the trap signals
    // explicitly: whoever ran the handler (SA_NODEFER, or a sanitizer's wrapper with a full mask) may
    // have left them blocked, and a second trap while blocked would kill the process.
    if (sigsetjmp(jump, 0) != 0) {
        t_trap_jump = nullptr;
        sigset_t traps;
        sigemptyset(&traps);
        for (int sig : kTrapSignals) sigaddset(&traps, sig);
        pthread_sigmask(SIG_UNBLOCK, &traps, nullptr);
        return false;
    }
    t_trap_jump = &jump;
    entry(launch, args);
    t_trap_jump = nullptr;
    return true;
}

}  // namespace

// ---------------------------------------------------------------- execution

void run_kernel(Executor& executor, const CpuFunction& function, const backend::LaunchShape& shape,
                void* const* args, const backend::LaunchReport& report, unsigned long long stream_min_bytes) noexcept {
    install_trap_handlers();
    rt_cpu_fault fault{};
    std::atomic<int> trap_signal{0};
    void* trap_address = nullptr;

    unsigned long long groups = 1ull * shape.grid[0] * shape.grid[1] * shape.grid[2];
    unsigned long long items_per_group = 1ull * shape.block[0] * shape.block[1] * shape.block[2];
    // Pieces of whole groups: ~8 per executor balances uneven groups; at least ~16K items keeps the
    // per-piece overhead (a few atomics) negligible.
    size_t threads = static_cast<size_t>(executor.thread_count());  // parallel_for's participants at most
    size_t grain = groups == 1 ? 1
                               : std::max<size_t>(groups / (threads * 8), (16384 + items_per_group - 1) / items_per_group);
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
        if (!run_guarded(entry, &launch, args)) {
            int expected = 0;
            if (trap_signal.compare_exchange_strong(expected, t_trap_signal)) trap_address = t_trap_address;
            __atomic_store_n(&fault.failed, 1, __ATOMIC_RELEASE);
        }
    };
    if (groups <= grain) piece(0, groups);  // one piece: no pool round trip
    else executor.parallel_for(groups, grain, piece);

    if (!__atomic_load_n(&fault.failed, __ATOMIC_ACQUIRE)) return;
    try {
        std::string what;
        if (int sig = trap_signal.load())
            what = format("trapped: %s at address %p", describe_signal(sig), trap_address);
        else
            what = format("rt_assert(%s) failed at %s:%d", fault.expr ? fault.expr : "?", fault.file ? fault.file : "?",
                          fault.line);
        report.slot->set(RT_ERROR_LAUNCH_FAILED,
                         format("kernel '%s' (operation #%llu on the stream) %s", function.name().c_str(),
                                static_cast<unsigned long long>(report.op_index), what.c_str()));
    } catch (...) {
        report.slot->set(RT_ERROR_LAUNCH_FAILED, {});
    }
}

}  // namespace rt::cpu
