// A loaded cpu kernel module (a shared object exporting the cpu kernel ABI), and the in-process module cache.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernel_abi.h"

namespace rt::cpu {

class CpuModule {
public:
    /// Compiles (or finds in the in-process / disk cache) and loads. Throws rt::Error.
    /// Thread-safe; concurrent calls with the same source compile once. The in-process cache keeps the
    /// module loaded, so a repeated call returns the same object.
    static std::shared_ptr<CpuModule> from_source(const std::string& source, const std::string& options);
    /// Loads a module built by runtime-compile (a .so exporting the ABI). Throws rt::Error.
    static std::shared_ptr<CpuModule> from_file(const std::string& path);
    ~CpuModule();  // dlclose

    CpuModule(const CpuModule&) = delete;
    CpuModule& operator=(const CpuModule&) = delete;

    /// nullptr if the module has no kernel of that name.
    const rt_cpu_kernel_info* find(const std::string& name) const;
    std::vector<std::string> kernel_names() const;
    /// The shared object this module was loaded from.
    const std::string& path() const { return path_; }

    /// Forgets the in-process cache (loaded modules stay alive while referenced); the next from_source
    /// goes to the disk cache. For tests and for dropping memory.
    static void clear_memory_cache();

private:
    CpuModule(void* handle, std::string path, const rt_cpu_kernel_info* kernels, int count);
    static std::shared_ptr<CpuModule> load(const std::string& path, bool from_cache);

    void* handle_;
    std::string path_;
    const rt_cpu_kernel_info* kernels_;
    int count_;
};

}  // namespace rt::cpu
