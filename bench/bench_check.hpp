// bench_check.hpp — how runtime-bench-core's files check runtime calls and report wrong results: a failure ends the benchmark.
#pragma once

#include <runtime/runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace rtbench {

/// Any failing runtime call ends the benchmark (exit 1): a benchmark of a broken runtime is meaningless.
inline void rt_check(rtError_t e, const char* call, const char* file, int line) {
    if (e == RT_SUCCESS) return;
    std::fprintf(stderr, "runtime-bench-core: %s:%d: %s failed: %s: %s\n", file, line, call, rtGetErrorName(e),
                 rtGetLastErrorMessage());
    std::exit(1);
}
#define RT_CHECK(call) ::rtbench::rt_check((call), #call, __FILE__, __LINE__)

/// Our side computed a wrong result (exit 2): a fast-but-wrong runtime must not look good.
[[noreturn]] inline void verification_failed(const std::string& metric, const std::string& what) {
    std::fprintf(stderr, "runtime-bench-core: VERIFICATION FAILED for %s: %s\n", metric.c_str(), what.c_str());
    std::exit(2);
}

}  // namespace rtbench
