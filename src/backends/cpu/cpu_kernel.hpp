// Kernels on the cpu device: backend Module/Function over loaded shared objects, argument packing, execution.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cpu/cpu_executor.hpp"
#include "backends/cpu/cpu_kernel_abi.h"

namespace rt::cpu {

class CpuModule;

class CpuFunction final : public backend::Function {
public:
    CpuFunction(std::shared_ptr<CpuModule> module, const rt_cpu_kernel_info* info);
    const std::string& name() const override { return name_; }
    int num_args() const override { return info_->num_args; }
    const std::vector<size_t>& arg_sizes() const override { return sizes_; }
    rt_cpu_entry entry() const { return info_->entry; }

private:
    std::shared_ptr<CpuModule> module_;  // keeps the code loaded while launches are queued
    const rt_cpu_kernel_info* info_;
    std::string name_;
    std::vector<size_t> sizes_;
};

class CpuKernelModule final : public backend::Module {
public:
    explicit CpuKernelModule(std::shared_ptr<CpuModule> module) : module_(std::move(module)) {}
    std::shared_ptr<backend::Function> get_function_impl(const std::string& name) override;
    std::vector<std::string> kernel_names() const override;

private:
    std::shared_ptr<CpuModule> module_;
};

/// Argument values copied at launch time (CUDA semantics: the caller's storage may change afterwards).
/// Small argument lists live inline in the task record: no heap allocation on the launch path.
class PackedArgs {
public:
    void pack(const std::vector<size_t>& sizes, void* const* args);
    /// Fills `out` (sizes.size() entries) with pointers to the stored values.
    void pointers(void** out) const;
    size_t count() const { return offsets_count_; }

private:
    static constexpr size_t kInlineBytes = 128;  // 8 arguments of up to 16 bytes
    static constexpr size_t kInlineArgs = 12;
    unsigned char* data() { return heap_ ? heap_.get() : inline_; }
    const unsigned char* data() const { return heap_ ? heap_.get() : inline_; }

    alignas(16) unsigned char inline_[kInlineBytes];
    std::unique_ptr<unsigned char[]> heap_;
    uint32_t offsets_inline_[kInlineArgs];
    std::unique_ptr<uint32_t[]> offsets_heap_;
    size_t offsets_count_ = 0;
};

/// Runs every work-group of a launch on the calling thread plus idle executors. A failed rt_assert or a
/// trap (SIGSEGV, SIGBUS, SIGFPE, SIGILL inside the kernel) is reported to report.slot; never throws.
void run_kernel(Executor& executor, const CpuFunction& function, const backend::LaunchShape& shape,
                void* const* args, const backend::LaunchReport& report) noexcept;

}  // namespace rt::cpu
