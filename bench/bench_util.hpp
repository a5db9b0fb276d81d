// bench_util.hpp — timing, statistics and the host memcpy baselines (1 and 2 threads) of runtime-bench-core.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace rtbench {

using Clock = std::chrono::steady_clock;

inline double seconds_between(Clock::time_point t0, Clock::time_point t1) {
    return std::chrono::duration<double>(t1 - t0).count();
}

/// Summary of repeated runs: median, fastest and slowest run, and how many runs.
struct Stat {
    double median = 0.0;
    double min = 0.0;
    double max = 0.0;
    std::size_t samples = 0;
};

/// Median/min/max of `v` (the median of an even count is the mean of the two middle values).
inline Stat summarize(std::vector<double> v) {
    Stat s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    s.median = (n % 2) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    s.min = v.front();
    s.max = v.back();
    s.samples = n;
    return s;
}

/// Seconds → microseconds, keeping the order (min stays the fastest).
inline Stat to_microseconds(const Stat& seconds) {
    return {seconds.median * 1e6, seconds.min * 1e6, seconds.max * 1e6, seconds.samples};
}

/// Seconds per copy of `bytes` → GB/s (1e9 bytes per second). The fastest copy is the max rate.
inline Stat to_gbps(const Stat& seconds, double bytes) {
    auto rate = [bytes](double s) { return s > 0 ? bytes / s / 1e9 : 0.0; };
    return {rate(seconds.median), rate(seconds.max), rate(seconds.min), seconds.samples};
}

/// `reps` individually timed calls of `op`; the Stat is over seconds per call.
template <class Op>
Stat time_each(int reps, Op&& op) {
    std::vector<double> secs;
    secs.reserve(static_cast<std::size_t>(reps));
    for (int r = 0; r < reps; ++r) {
        const auto t0 = Clock::now();
        op();
        secs.push_back(seconds_between(t0, Clock::now()));
    }
    return summarize(std::move(secs));
}

/// Same as time_each, but `op` times itself and returns seconds (for the 2-thread memcpy, whose
/// thread creation must stay outside the timed region).
template <class Op>
Stat time_self_timed(int reps, Op&& op) {
    std::vector<double> secs;
    secs.reserve(static_cast<std::size_t>(reps));
    for (int r = 0; r < reps; ++r) secs.push_back(op());
    return summarize(std::move(secs));
}

/// Keeps the compiler from eliding a copy whose destination is never read.
inline void clobber_memory() { asm volatile("" ::: "memory"); }

/// memcpy with non-temporal (streaming) stores for the aligned body: the bandwidth limit of a
/// big copy whatever glibc decides. glibc switches to streaming stores only above
/// x86_non_temporal_threshold (3/4 of the shared cache it detects: 192 MiB on this VM, whose cpuid
/// reports a 256 MiB L3), so a memcpy of a 128 MiB half or a 4 MiB piece takes the slower
/// temporal path. This baseline shows what a copy engine could reach.
inline void stream_copy(void* dst, const void* src, std::size_t n) {
#if defined(__SSE2__)
    auto* d = static_cast<char*>(dst);
    const auto* s = static_cast<const char*>(src);
    std::size_t head = (16 - reinterpret_cast<std::uintptr_t>(d) % 16) % 16;
    if (head > n) head = n;
    std::memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    const std::size_t body = n & ~static_cast<std::size_t>(63);
    for (std::size_t i = 0; i < body; i += 64) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
        const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
        const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
    }
    _mm_sfence();  // streaming stores are weakly ordered: publish them before returning
    std::memcpy(d + body, s + body, n - body);
#else
    std::memcpy(dst, src, n);
#endif
}

using CopyFn = void (*)(void*, const void*, std::size_t);
inline void plain_memcpy(void* d, const void* s, std::size_t n) { std::memcpy(d, s, n); }

/// One-thread baseline: `copy` (memcpy by default) on the calling thread.
inline double memcpy_1t_seconds(void* dst, const void* src, std::size_t n, CopyFn copy = plain_memcpy) {
    const auto t0 = Clock::now();
    copy(dst, src, n);
    clobber_memory();
    return seconds_between(t0, Clock::now());
}

/// Two-thread baseline: two std::threads each copy one half. The threads are created and have
/// reported ready BEFORE the clock starts; they are released by an atomic flag (they poll it with
/// yield so the main thread keeps a core to set it), and the main thread sleeps on an atomic wait
/// (futex) while they copy, so it does not steal one of the two cores. Returns seconds.
inline double memcpy_2t_seconds(void* dst, const void* src, std::size_t n, CopyFn copy = plain_memcpy) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::atomic<int> done{0};
    // Split on a 64-byte boundary so the two halves never share a cache line.
    const std::size_t half = (n / 2) & ~static_cast<std::size_t>(63);
    auto worker = [&](char* d, const char* s, std::size_t len) {
        ready.fetch_add(1, std::memory_order_release);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        copy(d, s, len);
        clobber_memory();
        if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == 2) done.notify_one();
    };
    char* d = static_cast<char*>(dst);
    const char* s = static_cast<const char*>(src);
    std::thread t0(worker, d, s, half);
    std::thread t1(worker, d + half, s + half, n - half);
    while (ready.load(std::memory_order_acquire) < 2) std::this_thread::yield();
    const auto start = Clock::now();
    go.store(true, std::memory_order_release);
    for (int v = done.load(std::memory_order_acquire); v < 2; v = done.load(std::memory_order_acquire))
        done.wait(v, std::memory_order_acquire);
    const double secs = seconds_between(start, Clock::now());
    t0.join();
    t1.join();
    return secs;
}

/// Deterministic, non-repeating fill so a copy of the wrong bytes or of part of a buffer is caught.
inline void fill_pattern(void* p, std::size_t n, std::uint64_t seed) {
    auto* b = static_cast<unsigned char*>(p);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const std::uint64_t v = (i / 8 + 1) * 0x9E3779B97F4A7C15ull ^ seed;
        std::memcpy(b + i, &v, 8);
    }
    for (; i < n; ++i) b[i] = static_cast<unsigned char>(i ^ seed);
}

/// JSON string escaping for the --json output.
inline std::string json_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += c;
                }
        }
    }
    return out;
}

}  // namespace rtbench
