// How a kernel is compiled for cpu: the host C++ compiler, the generated translation unit, loading the shared object.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/target.hpp"

namespace rt::cpu {

/// The host compiler the cpu target runs: $RUNTIME_CXX (a name on PATH or a path), else clang++ (it vectorises
/// the item loops of guarded kernels with masked stores, which GCC does not), else c++, g++.
struct HostCompiler {
    std::string path;      ///< the executable as found (a path); run by that name
    std::string identity;  ///< path, size and mtime of the executable, and the host CPU's identity
    bool clang = false;    ///< the executable is clang's driver (it takes -nostdlib++)
};
/// Resolved once per process (again only if $RUNTIME_CXX changes); no subprocess. Thread-safe.
/// Throws rt::Error(COMPILE_FAILED) when no compiler is found.
HostCompiler host_compiler();

/// The translation unit compiled for `program` as variant `index` of its module, for the instruction set `isa` (a
/// -march value): the cpu kernel ABI, the prelude, the source's includes, the source inside
/// `struct rt_module_ : rt_kernel_base_ { ... };`, the entry code (cpu_entry.h), one entry per kernel, the kernel
/// table (rt_cpu_module_kernels, or rt_cpu_module_kernels_v<index> past variant 0) and the ISA record (cpu_isa.hpp).
/// Diagnostics and rt_assert report lines of program.name (via #line).
std::string generate_translation_unit(const kernels::Program& program, int index = 0, const std::string& isa = "native");

/// The instruction sets of a target, from runtime-compile's --isa: "native" (this machine's, the JIT's), a -march
/// value such as "x86-64-v2", or a comma-separated list of them (one module holding a variant per entry; the x86-64
/// levels are put in ascending order, and the first is the baseline every machine that loads it must support).
/// Throws rt::Error(INVALID_VALUE) for an empty or malformed list.
std::vector<std::string> parse_isa(const std::string& list);

/// The cpu target: one for all cpu devices (they share code), and for runtime-compile.
class CpuTarget final : public kernels::Target {
public:
    /// `isa`: from parse_isa (the JIT's: {"native"}).
    explicit CpuTarget(std::vector<std::string> isa = {"native"}) : isa_(std::move(isa)) {}
    const char* cache_name() const override { return "cpu"; }
    std::string image_extension() const override { return ".so"; }
    std::string identity() const override;
    /// One compiler run per variant (in parallel), linked into one shared object when there are several.
    double build(const kernels::Program& program, const std::string& out) const override;
    std::shared_ptr<backend::Module> load(const std::string& path, bool precompiled) override;
    const std::vector<std::string>& isa() const { return isa_; }

private:
    std::vector<std::string> isa_;
    mutable std::mutex identity_mutex_;
    mutable std::string identity_compiler_;  // the compiler identity identity_ was built for
    mutable std::string identity_;
};

/// The process's cpu target and its in-process module cache.
CpuTarget& cpu_target();
kernels::ModuleCache& cpu_modules();

}  // namespace rt::cpu
