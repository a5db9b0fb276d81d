// A loaded cpu kernel module (a shared object exporting the cpu kernel ABI), its backend Module and Functions.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cpu/cpu_kernel_abi.h"

namespace rt::cpu {

class CpuModule {
public:
    /// Loads a module built by runtime-compile (a .so exporting the ABI). Throws rt::Error.
    static std::shared_ptr<CpuModule> from_file(const std::string& path);
    ~CpuModule();  // dlclose

    CpuModule(const CpuModule&) = delete;
    CpuModule& operator=(const CpuModule&) = delete;

    /// nullptr if the module has no kernel of that name.
    const rt_cpu_kernel_info* find(const std::string& name) const;
    std::vector<std::string> kernel_names() const;
    /// The module's RT_GLOBAL variables (rt_cpu_module_globals), nullptr if none of that name.
    const rt_cpu_global_info* find_global(const std::string& name) const;
    std::vector<std::string> global_names() const;
    /// The shared object this module was loaded from.
    const std::string& path() const { return path_; }
    /// The instruction set of the variant loaded ("native", "x86-64-v3", ...: the best of the module's variants
    /// this machine supports).
    const std::string& variant() const { return variant_; }

    /// Loads a shared object; one that is not a valid module: nullptr when `from_cache` (the caller compiles
    /// over it), else rt::Error naming the file and why: NOT_SUPPORTED when this machine lacks CPU features its
    /// baseline variant needs (checked before any of its code runs), else INVALID_VALUE.
    static std::shared_ptr<CpuModule> load(const std::string& path, bool from_cache);

    /// Held by a launch of one of this module's flat kernels (rt_barrier) while its groups run: their RT_LOCAL
    /// arrays are static storage of the loaded image, so one group of them runs at a time in the process.
    std::mutex& flat_launch_mutex() { return flat_launch_mutex_; }

private:
    CpuModule(void* handle, std::string path, const rt_cpu_kernel_info* kernels, int count, std::string variant);

    void* handle_;
    std::string path_;
    const rt_cpu_kernel_info* kernels_;
    int count_;
    std::string variant_;
    const rt_cpu_global_info* globals_ = nullptr;
    int global_count_ = 0;
    std::mutex flat_launch_mutex_;
};

class CpuFunction final : public backend::Function {
public:
    CpuFunction(std::shared_ptr<CpuModule> module, const rt_cpu_kernel_info* info);
    const std::string& name() const override { return name_; }
    int num_args() const override { return info_->num_args; }
    const std::vector<size_t>& arg_sizes() const override { return sizes_; }
    rt_cpu_entry entry() const { return info_->entry; }
    bool uses_barriers() const override { return info_->group_form != RT_CPU_GROUP_NONE; }
    size_t static_local_bytes() const override { return static_cast<size_t>(info_->local_bytes); }
    int group_form() const { return info_->group_form; }
    std::mutex& flat_launch_mutex() const { return module_->flat_launch_mutex(); }

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
    bool find_global(const std::string& name, GlobalSymbol& out) override;
    std::vector<std::string> global_names() const override { return module_->global_names(); }
    const std::shared_ptr<CpuModule>& module() const { return module_; }

private:
    std::shared_ptr<CpuModule> module_;
};

}  // namespace rt::cpu
