// Kernels on the cpu device: argument packing and execution over the executors.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cpu/cpu_executor.hpp"
#include "backends/cpu/cpu_kernel_abi.h"
#include "backends/cpu/cpu_module.hpp"

namespace rt::cpu {

/// Argument values copied at launch time (CUDA semantics: the caller's storage may change afterwards),
/// each in a 16-byte slot. Small argument lists live inline in the task record: no heap allocation on the
/// launch path. The layout follows from the kernel's parameter sizes, so only the bytes are stored.
class PackedArgs {
public:
    void pack(const std::vector<size_t>& sizes, void* const* args);
    /// Fills `out` (sizes.size() entries) with pointers to the stored values.
    void pointers(const std::vector<size_t>& sizes, void** out) const;

private:
    static size_t slot(size_t bytes) { return (bytes + 15) / 16 * 16; }
    static constexpr size_t kInlineBytes = 128;  // 8 arguments of up to 16 bytes
    const unsigned char* data() const { return heap_ ? heap_.get() : inline_; }

    alignas(16) unsigned char inline_[kInlineBytes];
    std::unique_ptr<unsigned char[]> heap_;
};

/// Prepares the calling thread to run kernel code (an alternate signal stack, so that a stack overflow can
/// be caught): executors call it when they start; run_kernel does it for any other thread on its first
/// launch. Idempotent.
void prepare_kernel_thread() noexcept;

/// Says that kernel work may start after a pause (a stream was scheduled after being idle): if the last
/// request is 1 ms old or more, the next launch re-verifies, with one syscall, that the runtime's trap
/// handlers are still installed and re-takes them if someone replaced them (passing on to that party what
/// is not a kernel trap). Thread-safe; a few ns when no check is due.
void request_trap_handler_check() noexcept;

/// Runs every work-group of a launch on the calling thread plus idle executors. A failed rt_assert or a
/// trap (SIGSEGV, SIGBUS, SIGFPE, SIGILL raised by the CPU inside the kernel, stack overflow included) ends
/// the failing piece at once and is reported to report.slot; never throws.
/// stream_min_bytes: see rt_cpu_launch.stream_min_bytes.
void run_kernel(Executor& executor, const CpuFunction& function, const backend::LaunchShape& shape,
                void* const* args, const backend::LaunchReport& report, unsigned long long stream_min_bytes) noexcept;

}  // namespace rt::cpu
