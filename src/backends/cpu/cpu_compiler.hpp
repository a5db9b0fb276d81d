// cpu kernel compiler: kernel source + options → generated C++ translation unit → shared object in the disk cache.
#pragma once

#include <string>
#include <vector>

namespace rt::cpu {

/// The host compiler the cpu backend runs: $RUNTIME_CXX (a name on PATH or a path), else c++, g++, clang++.
struct HostCompiler {
    std::string path;      ///< resolved (realpath) executable
    std::string identity;  ///< path, size and mtime of the executable, and the host CPU's identity
};
/// Resolved once per process (again only if $RUNTIME_CXX changes); no subprocess. Thread-safe.
/// Throws rt::Error(COMPILE_FAILED) when no compiler is found.
HostCompiler host_compiler();

/// Validates a user option string (whitespace-separated): -O0..-O3, -Os, -g, -DNAME[=VALUE], -UNAME,
/// -IDIR (or "-D NAME", "-I DIR"). Anything else: rt::Error(INVALID_VALUE) naming the option.
std::vector<std::string> parse_options(const std::string& options);

/// Names of the kernels (`RT_KERNEL void name(`) outside comments and literals, in source order.
/// A name defined twice: rt::Error(INVALID_VALUE).
std::vector<std::string> find_kernel_names(const std::string& source);

/// The translation unit compiled for `source` (see include/runtime/kernel.h for its shape).
/// `source_name` is the file name diagnostics and rt_assert report (via #line).
std::string generate_translation_unit(const std::string& source, const std::string& source_name,
                                      const std::vector<std::string>& kernels);

struct CompileResult {
    std::string path;             ///< <cache>/cpu/<key>.so
    std::string key;              ///< 32 hex digits
    std::vector<std::string> kernels;
    bool from_cache = false;      ///< true when the file existed and nothing was compiled
    double compile_seconds = 0;   ///< compiler run time (0 on a cache hit)
};

/// Compiles `source` into the disk cache unless an entry for the same key exists (`force`: compile
/// anyway and replace it). Thread- and process-safe: a finished entry appears atomically.
/// Errors: no kernel or a bad option: INVALID_VALUE; compiler diagnostics: COMPILE_FAILED, with the
/// diagnostics (lines of `source_name`) and the kernel names in the message.
CompileResult compile(const std::string& source, const std::string& options,
                      const std::string& source_name = "kernel_source", bool force = false);

}  // namespace rt::cpu
