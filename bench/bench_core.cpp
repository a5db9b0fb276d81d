// bench_core.cpp — runtime-bench-core: copy latency, events, kernels, JIT, allocation and bandwidth of the runtime vs OpenCL (PoCL) and memcpy.
//
// Every figure is the median of repeated runs, with the fastest and slowest run. Latency rows are
// enqueue + synchronize of one 4-byte operation (a run = many back-to-back iterations, its figure
// the mean per iteration); bandwidth rows are one 256 MiB copy + synchronize per run. Kernel rows:
// empty-kernel launch + synchronize, 20,000 launches + one synchronize, out[i] = in[i] * 2 over 16M
// floats, and the JIT: cold compile (unique source, fresh cache directory), load from the disk cache
// in a fresh process (the benchmark re-executes itself with --jit-child and reports the child's
// measured time), and reload of the same source in the same process. Ours and the
// peer alternate run by run, so both see the same load on a shared machine. Every runtime call is
// checked (failure: error name + last message, exit 1) and every metric's data is verified once
// (exit 2), so a fast-but-wrong runtime cannot look good. Peer failures do not stop the run: the
// peer cell says why it is missing.
//
// Graph rows: replay of 1,000 empty kernels as a chain and as a fan-out / fan-in (per node) next to the same kernels
// launched one call at a time, instantiate of 1,000 nodes, one kernel node update, a whole-graph update; then the
// same DAGs against their peers (PoCL replaying a cl_khr_command_buffer, oneTBB flow_graph, PoCL one call at a time)
// and the seed's pipeline as a graph vs streams (bench_graph_peers.cpp).
//
// Usage: runtime-bench-core [--quick] [--json] [--sweep] [--device N|cpu:0] [--list-devices] [--only groups|graphs|trace]

#include <runtime/profiler.h>
#include <runtime/runtime.h>

#include <unistd.h>

#include "bench_check.hpp"
#include "bench_graph_peers.hpp"
#include "bench_util.hpp"
#include "peer_cuda.hpp"
#include "peer_opencl.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace rtbench {
namespace {

/// Lets spinning executor/worker threads of the previous measurement (ours or PoCL's) park before
/// the next one starts, so one side's idle spinners do not steal a core from the other.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

// ---------------------------------------------------------------- configuration and results

struct Config {
    bool quick = false;
    bool json = false;
    bool sweep = false;
    bool only_groups = false;  // --only groups: the work-group rows alone
    bool only_graphs = false;  // --only graphs: the graph rows alone
    bool only_trace = false;   // --only trace: batched_launch and the trace's cost rows alone
    int device = 0;
    int lat_runs = 25;     // runs per latency metric
    int lat_iters = 200;   // iterations per run (25 x 200 = 5000 timed iterations)
    int lat_warmup = 500;  // untimed iterations first
    int bw_reps = 10;      // timed 256 MiB copies per bandwidth metric
    std::size_t bw_bytes = std::size_t(256) << 20;
    int batch_runs = 11;   // runs of 20,000 launches + one synchronize
    int kernel_runs = 15;  // timed out = in * 2 launches over 16M floats
    int alloc_iters = 200; // rtMalloc + rtFree pairs per run (lat_runs runs)
    int jit_reps = 7;      // cold compiles, fresh-process cached loads (each side)
    int reload_runs = 15;  // same-process reloads: runs (ours: mean of 10 per run; peer: 1)
    int group_runs = 11;   // timed runs of each work-group kernel row (the flat sum: a third)
    int graph_runs = 11;   // timed runs of each graph row
};

enum class Better { Lower, Higher };

/// One table row / JSON record.
struct Row {
    std::string metric;   // JSON name, e.g. "H2D_latency"
    std::string label;    // table label
    std::string unit;     // "us" or "GB/s"
    Better better = Better::Lower;
    std::optional<Stat> ours;
    std::optional<Stat> peer;
    std::string peer_note;  // why there is no peer figure
    std::string seed;       // the seed's reference figure, as text
    std::string target;     // the target, as text
    std::string verdict;    // target met? (bandwidth rows; latency rows compare with max_us)
    double max_us = 0;      // latency target, microseconds
    std::size_t bytes = 0;  // sweep records only
    std::string peer_name;  // this row's peer when it is not the OpenCL peer as a whole (JSON "peer")
    std::vector<PeerCell> others;  // further peers of the row: a line each under it, each its own ratio
};

std::string fmt_num(double v) {
    char b[32];
    if (v >= 1000) std::snprintf(b, sizeof b, "%.0f", v);
    else if (v >= 100) std::snprintf(b, sizeof b, "%.1f", v);
    else if (v >= 0.1 || v == 0) std::snprintf(b, sizeof b, "%.2f", v);
    else std::snprintf(b, sizeof b, "%.2g", v);  // sweep rates of tiny copies: keep two digits
    return b;
}

/// Seconds → milliseconds.
inline Stat to_milliseconds(const Stat& seconds) {
    return {seconds.median * 1e3, seconds.min * 1e3, seconds.max * 1e3, seconds.samples};
}

/// Single-quoted for /bin/sh (popen of the fresh-process JIT child).
std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

/// The runtime's kernels, in the kernel dialect: the same kernels as opencl_kernel_source(tag).
std::string kernel_source(const std::string& tag) {
    return "// " + tag + "\nRT_KERNEL void " + unique_kernel_name(tag) +
           "() {}\n"
           "RT_KERNEL void empty() {}\n"
           "RT_KERNEL void twice(const float* in, float* out, unsigned n) {\n"
           "    size_t i = get_global_id(0);\n"
           "    if (i < n) out[i] = in[i] * 2.0f;  /* CUDA-style: launched over whole groups */\n"
           "}\n";
}

/// Loads `tag`'s kernels, runs `twice` over 1 item (in → out) on `s` and synchronizes: the seconds that took
/// (what the JIT rows time); the unload after it is not timed.
double load_and_run_twice_once(const std::string& tag, void* in, void* out, rtStream_t s) {
    const std::string src = kernel_source(tag);
    unsigned one = 1;
    void* args[] = {&in, &out, &one};
    const auto t0 = Clock::now();
    rtModule_t m = nullptr;
    rtFunction_t f = nullptr;
    RT_CHECK(rtModuleLoadSource(&m, src.c_str(), nullptr));
    RT_CHECK(rtModuleGetFunction(&f, m, "twice"));
    RT_CHECK(rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, args, 0, s));
    RT_CHECK(rtStreamSynchronize(s));
    const double secs = seconds_between(t0, Clock::now());
    RT_CHECK(rtModuleUnload(m));
    return secs;
}

/// Number of regular files under `dir` (recursively): a disk-cache load must not add any.
std::size_t count_files(const std::string& dir) {
    std::error_code ec;
    std::size_t n = 0;
    for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
        if (it->is_regular_file(ec)) ++n;
    return n;
}

/// "yes"/"NO" when the row has a target, else "".
std::string verdict_of(const Row& r) {
    if (!r.verdict.empty()) return r.verdict;
    if (r.ours && r.max_us > 0) return r.ours->median <= r.max_us ? "yes" : "NO";
    return "";
}

std::string fmt_stat(const std::optional<Stat>& s) {
    if (!s) return "-";
    return fmt_num(s->median) + " [" + fmt_num(s->min) + ", " + fmt_num(s->max) + "]";
}

/// >1 means ours is better: peer/ours for times, ours/peer for rates.
std::optional<double> ratio(const Row& r, const std::optional<Stat>& peer) {
    if (!r.ours || !peer || r.ours->median <= 0 || peer->median <= 0) return std::nullopt;
    return r.better == Better::Lower ? peer->median / r.ours->median : r.ours->median / peer->median;
}
std::optional<double> ratio(const Row& r) { return ratio(r, r.peer); }

// ---------------------------------------------------------------- the benchmark

class Bench {
public:
    explicit Bench(Config cfg) : cfg_(cfg) {}
    int run();

private:
    void setup();
    void teardown();
    void latency_rows();
    void kernel_rows();
    void group_rows();
    void graph_rows();
    void bandwidth_rows();
    void sweep_rows();
    void graph_peer_rows();
    /// Runs this executable again as `--jit-child side tag`; returns the child's measured seconds,
    /// or nullopt (with the reason in *why) when it failed.
    std::optional<double> run_jit_child(const char* side, const std::string& tag, std::string* why) const;
    /// Loads `tag`'s source, gets "twice", runs it over 1 item (d_a_ → d_b_) and synchronizes:
    /// seconds until the kernel has run once. The module is unloaded afterwards (untimed).
    double ours_load_and_run_once(const std::string& tag);
    void print_table() const;
    void print_sweep() const;
    void print_json() const;

    // One copy of `kind` on stream_ + synchronize (the timed operation of latency and bandwidth rows).
    void ours_copy_sync(void* dst, const void* src, std::size_t n, rtMemcpyKind kind) {
        RT_CHECK(rtMemcpyAsync(dst, src, n, kind, stream_));
        RT_CHECK(rtStreamSynchronize(stream_));
    }
    std::uint32_t next_token() { return ++token_ * 2654435761u + 0x1234567u; }

    /// Runs one untimed peer step (warm-up, verification). False if there is no peer, it failed
    /// before, or it fails now (the reason goes into the row; the runtime's figures stand alone).
    template <class F>
    bool peer_step(Row& r, F&& f) {
        if (!peer_) {
            r.peer_note = "missing: " + peer_missing_;
            return false;
        }
        if (!r.peer_note.empty()) return false;
        try {
            f(*peer_);
            return true;
        } catch (const PeerError& e) {
            r.peer_note = std::string("error: ") + e.what();
            std::fprintf(stderr, "runtime-bench-core: peer %s: %s\n", r.metric.c_str(), e.what());
            return false;
        }
    }

    /// Alternates ours and the peer run by run (ours, peer, ours, peer, ...) so both see the same
    /// machine load: on a shared 2-core machine the load drifts over seconds, and measuring one side
    /// after the other would compare different machines. Each callable returns one run's seconds.
    /// Between sides a short sleep lets the other side's spinning threads park.
    template <class OursRun, class PeerRun>
    void alternate(Row& r, int runs, OursRun&& ours_run, PeerRun&& peer_run, std::vector<double>& ours,
                   std::vector<double>& peer) {
        for (int i = 0; i < runs; ++i) {
            ours.push_back(ours_run());
            double secs = 0;
            if (peer_step(r, [&](OpenClPeer& p) {
                    pause_between();
                    secs = peer_run(p);
                }))
                peer.push_back(secs);
            pause_between();
        }
        if (!r.peer_note.empty()) peer.clear();
    }
    static void pause_between() { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }

    /// Runs of `iters` back-to-back operations per side, alternating sides (see alternate), each run
    /// re-warmed untimed first: after the other side ran, worker threads have parked, and one futex wake
    /// is not the steady-state cost either side is measured for. Seconds per operation into o / q.
    template <class OursOp, class PeerOp>
    void per_op_runs(Row& r, int runs, int iters, int min_rewarm, OursOp&& ours_op, PeerOp&& peer_op,
                     std::vector<double>& o, std::vector<double>& q) {
        const int rewarm = std::max(min_rewarm, iters / 10);
        alternate(
            r, runs,
            [&] {
                for (int i = 0; i < rewarm; ++i) ours_op();
                const auto t0 = Clock::now();
                for (int i = 0; i < iters; ++i) ours_op();
                return seconds_between(t0, Clock::now()) / iters;
            },
            [&](OpenClPeer& p) {
                for (int i = 0; i < rewarm; ++i) peer_op(p);
                const auto t0 = Clock::now();
                for (int i = 0; i < iters; ++i) peer_op(p);
                return seconds_between(t0, Clock::now()) / iters;
            },
            o, q);
    }

    Config cfg_;
    rtDeviceProp prop_{};
    std::string device_name_;
    std::unique_ptr<OpenClPeer> peer_;
    std::string peer_name_;
    std::string peer_missing_;  // non-empty when there is no peer: why

    rtStream_t stream_ = nullptr;  // a created stream, never the default one
    rtStream_t sa_ = nullptr, sb_ = nullptr;
    rtEvent_t ev_ = nullptr;
    void* h_pin_small_ = nullptr;            // rtMallocHost, 4 KiB
    unsigned char* h_page_small_ = nullptr;  // pageable (operator new), 4 KiB
    void* d_a_ = nullptr;  // device buffers of bw_bytes; latency rows use their first bytes
    void* d_b_ = nullptr;
    void* h_src_ = nullptr;  // pinned, bw_bytes, pattern-filled
    void* h_dst_ = nullptr;  // pinned, bw_bytes
    std::uint32_t token_ = 0;

    std::string tmp_root_;       // this run's temporary directory (both caches), removed at the end
    std::string ours_cache_;     // RUNTIME_CACHE_DIR for every compile of this run (fresh, empty)
    std::string nonce_;          // makes this run's JIT sources unique
    rtModule_t module_ = nullptr;  // resident kernels (kernel_source("resident"))
    rtFunction_t f_empty_ = nullptr;
    rtFunction_t f_twice_ = nullptr;

    std::vector<Row> rows_;
    std::vector<Row> sweep_;
    Stat memcpy2t_gbps_{};
    double best_host_copy_gbps_ = 0;  // best median of the four host-copy baselines
    std::string load_start_;
};

void Bench::setup() {
    int count = 0;
    RT_CHECK(rtGetDeviceCount(&count));
    if (cfg_.device < 0 || cfg_.device >= count) {
        std::fprintf(stderr, "runtime-bench-core: --device %d: %d device(s) present (0..%d)\n", cfg_.device, count,
                     count - 1);
        std::exit(1);
    }
    RT_CHECK(rtSetDevice(cfg_.device));
    RT_CHECK(rtGetDeviceProperties(&prop_, cfg_.device));
    device_name_ = prop_.name;

    // Fresh, empty kernel caches for this run, set before the runtime's first compile and before
    // PoCL initialises (it reads POCL_CACHE_DIR once): cold compiles are really cold, and the
    // fresh-process children (which inherit the environment) load from these caches.
    char tmpl[] = "/tmp/runtime-bench-XXXXXX";
    if (!mkdtemp(tmpl)) {
        std::perror("runtime-bench-core: mkdtemp");
        std::exit(1);
    }
    tmp_root_ = tmpl;
    ours_cache_ = tmp_root_ + "/runtime-cache";
    const std::string pocl_cache = tmp_root_ + "/pocl-cache";
    std::filesystem::create_directories(ours_cache_);
    std::filesystem::create_directories(pocl_cache);
    setenv("RUNTIME_CACHE_DIR", ours_cache_.c_str(), 1);
    setenv("POCL_CACHE_DIR", pocl_cache.c_str(), 1);
    nonce_ = std::to_string(getpid()) + "-" +
             std::to_string(std::chrono::system_clock::now().time_since_epoch().count());

    std::string why;
    peer_ = OpenClPeer::open(&why);
    if (peer_) {
        peer_name_ = peer_->name();
        try {
            peer_->reserve(cfg_.bw_bytes);
        } catch (const PeerError& e) {
            peer_missing_ = std::string("the OpenCL device cannot hold the benchmark's buffers: ") + e.what();
            peer_.reset();
        }
    } else {
        peer_missing_ = why;
    }
    if (!peer_missing_.empty())
        std::fprintf(stderr, "runtime-bench-core: peer OpenCL (PoCL) missing: %s\n", peer_missing_.c_str());

    RT_CHECK(rtStreamCreate(&stream_));
    RT_CHECK(rtStreamCreate(&sa_));
    RT_CHECK(rtStreamCreate(&sb_));
    // Sync-only event, as a CUDA user would create it; OpenCL's marker takes no timestamp either.
    RT_CHECK(rtEventCreateWithFlags(&ev_, RT_EVENT_DISABLE_TIMING));

    RT_CHECK(rtMallocHost(&h_pin_small_, 4096));
    std::memset(h_pin_small_, 0, 4096);
    h_page_small_ = new unsigned char[4096]();
    RT_CHECK(rtMalloc(&d_a_, cfg_.bw_bytes));
    RT_CHECK(rtMalloc(&d_b_, cfg_.bw_bytes));
    RT_CHECK(rtMallocHost(&h_src_, cfg_.bw_bytes));
    RT_CHECK(rtMallocHost(&h_dst_, cfg_.bw_bytes));
    // Touch everything before any timing: page faults are not what we measure.
    fill_pattern(h_src_, cfg_.bw_bytes, 0xC0FFEEull);
    std::memset(h_dst_, 0, cfg_.bw_bytes);
    RT_CHECK(rtMemset(d_a_, 0, cfg_.bw_bytes));
    RT_CHECK(rtMemset(d_b_, 0, cfg_.bw_bytes));
    RT_CHECK(rtDeviceSynchronize());
}

void Bench::teardown() {
    RT_CHECK(rtDeviceSynchronize());
    RT_CHECK(rtEventDestroy(ev_));
    RT_CHECK(rtStreamDestroy(stream_));
    RT_CHECK(rtStreamDestroy(sa_));
    RT_CHECK(rtStreamDestroy(sb_));
    RT_CHECK(rtFree(d_a_));
    RT_CHECK(rtFree(d_b_));
    RT_CHECK(rtFreeHost(h_src_));
    RT_CHECK(rtFreeHost(h_dst_));
    RT_CHECK(rtFreeHost(h_pin_small_));
    delete[] h_page_small_;
    if (module_) RT_CHECK(rtModuleUnload(module_));
    peer_.reset();
    std::error_code ec;
    std::filesystem::remove_all(tmp_root_, ec);
}

// ---- 1. 4-byte copy latency

void Bench::latency_rows() {
    const int W = cfg_.lat_warmup, R = cfg_.lat_runs, I = cfg_.lat_iters;
    struct HostKind {
        const char* suffix;
        const char* label;
        unsigned char* p;
    };
    const HostKind hosts[] = {{"", "pinned", static_cast<unsigned char*>(h_pin_small_)},
                              {"_pageable", "pageable", h_page_small_}};
    unsigned char* const da = static_cast<unsigned char*>(d_a_);
    unsigned char* const db = static_cast<unsigned char*>(d_b_);

    // One latency row: warm-up both sides, alternate timed batches of I iterations, verify both.
    auto measure = [&](Row& r, auto&& ours_op, auto&& peer_op, auto&& ours_verify, auto&& peer_verify) {
        r.unit = "us";
        r.better = Better::Lower;
        if (r.max_us == 0) r.max_us = 2.0;
        char t[32];
        std::snprintf(t, sizeof t, "<= %g us", r.max_us);
        r.target = t;
        for (int i = 0; i < W; ++i) ours_op();
        peer_step(r, [&](OpenClPeer& p) {
            for (int i = 0; i < W; ++i) peer_op(p);
        });
        std::vector<double> o, q;
        per_op_runs(r, R, I, 10, ours_op, peer_op, o, q);
        r.ours = to_microseconds(summarize(o));
        if (!q.empty()) r.peer = to_microseconds(summarize(q));
        ours_verify();
        peer_step(r, peer_verify);
    };

    // H2D: host → d_a. Verification: a fresh token must arrive on the device.
    for (const HostKind& h : hosts) {
        Row r;
        r.metric = std::string("H2D_latency") + h.suffix;
        r.label = std::string("H2D 4 B copy+sync (") + h.label + ")";
        r.seed = "15 us";
        measure(
            r, [&] { ours_copy_sync(da, h.p, 4, RT_MEMCPY_HOST_TO_DEVICE); },
            [&](OpenClPeer& p) {
                p.write(0, h.p, 4);
                p.finish();
            },
            [&] {
                const std::uint32_t tok = next_token();
                std::memcpy(h.p, &tok, 4);
                ours_copy_sync(da, h.p, 4, RT_MEMCPY_HOST_TO_DEVICE);
                std::uint32_t got = 0;
                RT_CHECK(rtMemcpy(&got, da, 4, RT_MEMCPY_DEVICE_TO_HOST));
                if (got != tok)
                    verification_failed(r.metric, "device holds " + std::to_string(got) + ", expected " + std::to_string(tok));
            },
            [&](OpenClPeer& p) {
                const std::uint32_t tok = next_token();
                std::memcpy(h.p, &tok, 4);
                p.write(0, h.p, 4);
                p.finish();
                std::uint32_t got = 0;
                p.read_sync(0, &got, 4);
                if (got != tok) verification_failed("peer " + r.metric, "OpenCL buffer holds a wrong value");
            });
        rows_.push_back(std::move(r));
    }

    // D2H: d_a → host. Verification: a fresh token put on the device must arrive on the host.
    for (const HostKind& h : hosts) {
        Row r;
        r.metric = std::string("D2H_latency") + h.suffix;
        r.label = std::string("D2H 4 B copy+sync (") + h.label + ")";
        r.seed = "15 us";
        measure(
            r, [&] { ours_copy_sync(h.p, da, 4, RT_MEMCPY_DEVICE_TO_HOST); },
            [&](OpenClPeer& p) {
                p.read(0, h.p, 4);
                p.finish();
            },
            [&] {
                const std::uint32_t tok = next_token();
                RT_CHECK(rtMemcpy(da, &tok, 4, RT_MEMCPY_HOST_TO_DEVICE));
                std::memset(h.p, 0, 4);
                ours_copy_sync(h.p, da, 4, RT_MEMCPY_DEVICE_TO_HOST);
                if (std::memcmp(h.p, &tok, 4) != 0) verification_failed(r.metric, "host holds a wrong value");
            },
            [&](OpenClPeer& p) {
                const std::uint32_t tok = next_token();
                p.write_sync(0, &tok, 4);
                std::memset(h.p, 0, 4);
                p.read(0, h.p, 4);
                p.finish();
                if (std::memcmp(h.p, &tok, 4) != 0) verification_failed("peer " + r.metric, "host holds a wrong value");
            });
        rows_.push_back(std::move(r));
    }

    // D2D: d_a → d_b.
    {
        Row r;
        r.metric = "D2D_latency";
        r.label = "D2D 4 B copy+sync";
        r.seed = "2 us";
        measure(
            r, [&] { ours_copy_sync(db, da, 4, RT_MEMCPY_DEVICE_TO_DEVICE); },
            [&](OpenClPeer& p) {
                p.copy(0, 1, 4);
                p.finish();
            },
            [&] {
                const std::uint32_t tok = next_token();
                RT_CHECK(rtMemcpy(da, &tok, 4, RT_MEMCPY_HOST_TO_DEVICE));
                ours_copy_sync(db, da, 4, RT_MEMCPY_DEVICE_TO_DEVICE);
                std::uint32_t got = 0;
                RT_CHECK(rtMemcpy(&got, db, 4, RT_MEMCPY_DEVICE_TO_HOST));
                if (got != tok)
                    verification_failed(r.metric, "destination holds " + std::to_string(got) + ", expected " + std::to_string(tok));
            },
            [&](OpenClPeer& p) {
                const std::uint32_t tok = next_token();
                p.write_sync(0, &tok, 4);
                p.copy(0, 1, 4);
                p.finish();
                std::uint32_t got = 0;
                p.read_sync(1, &got, 4);
                if (got != tok) verification_failed("peer " + r.metric, "destination buffer holds a wrong value");
            });
        rows_.push_back(std::move(r));
    }

    // ---- 2. event round trip: [4 B copy on A] record(A) → wait(B) → 4 B copy on B → synchronize(B)
    unsigned char* const h = static_cast<unsigned char*>(h_pin_small_);
    for (bool copy_on_a : {true, false}) {
        Row r;
        r.metric = copy_on_a ? "event_roundtrip" : "event_roundtrip_empty";
        r.label = copy_on_a ? "event round trip (4 B copy on A)" : "event round trip (empty A)";
        r.seed = "-";
        r.max_us = 3.0;
        auto once = [&] {
            if (copy_on_a) RT_CHECK(rtMemcpyAsync(da, h, 4, RT_MEMCPY_HOST_TO_DEVICE, sa_));
            RT_CHECK(rtEventRecord(ev_, sa_));
            RT_CHECK(rtStreamWaitEvent(sb_, ev_));
            RT_CHECK(rtMemcpyAsync(db, h, 4, RT_MEMCPY_HOST_TO_DEVICE, sb_));
            RT_CHECK(rtStreamSynchronize(sb_));
        };
        measure(
            r, once, [&](OpenClPeer& p) { p.event_roundtrip(h, copy_on_a); },
            [&] {  // both copies carried a fresh token; the event completed before B's copy ran
                RT_CHECK(rtStreamSynchronize(sa_));
                const std::uint32_t tok = next_token();
                std::memcpy(h, &tok, 4);
                once();
                std::uint32_t got = 0;
                RT_CHECK(rtMemcpy(&got, db, 4, RT_MEMCPY_DEVICE_TO_HOST));
                if (got != tok) verification_failed(r.metric, "the copy on B did not arrive");
                const rtError_t q = rtEventQuery(ev_);
                if (q != RT_SUCCESS)
                    verification_failed(r.metric, std::string("rtEventQuery after B completed returned ") + rtGetErrorName(q));
                RT_CHECK(rtStreamSynchronize(sa_));
                if (copy_on_a) {
                    RT_CHECK(rtMemcpy(&got, da, 4, RT_MEMCPY_DEVICE_TO_HOST));
                    if (got != tok) verification_failed(r.metric, "the copy on A did not arrive");
                }
            },
            [&](OpenClPeer& p) {
                p.finish();
                const std::uint32_t tok = next_token();
                std::memcpy(h, &tok, 4);
                p.event_roundtrip(h, copy_on_a);
                p.finish();
                std::uint32_t got = 0;
                p.read_sync(1, &got, 4);
                if (got != tok) verification_failed("peer " + r.metric, "the copy on queue B did not arrive");
            });
        rows_.push_back(std::move(r));
    }
    settle();
}

// ---- 3. kernels: launch latency, batched launches, out = in * 2 over 16M floats, allocation, JIT

double Bench::ours_load_and_run_once(const std::string& tag) {
    return load_and_run_twice_once(tag, d_a_, d_b_, stream_);
}

std::optional<double> Bench::run_jit_child(const char* side, const std::string& tag, std::string* why) const {
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        *why = "cannot find this executable (/proc/self/exe)";
        return std::nullopt;
    }
    exe[n] = '\0';
    const std::string cmd = shell_quote(exe) + " --jit-child " + side + " " + shell_quote(tag) + " --device " +
                            std::to_string(cfg_.device);
    std::FILE* p = popen(cmd.c_str(), "r");
    if (!p) {
        *why = "popen failed";
        return std::nullopt;
    }
    char line[128] = {0};
    const bool got = std::fgets(line, sizeof line, p) != nullptr;
    const int status = pclose(p);
    if (status != 0 || !got) {
        *why = std::string("fresh-process child (") + side + ") exited with status " + std::to_string(status);
        return std::nullopt;
    }
    return std::strtod(line, nullptr);
}

// ---------------------------------------------------------------- graphs

/// The graph rows' kernels: an empty one, and two that check what a replay did (a chain's order, a fan's count).
const char* graph_kernel_source() {
    return "// runtime-bench-core graph kernels\n"
           "RT_KERNEL void empty() {}\n"
           "RT_KERNEL void step(unsigned* c, unsigned i) {\n"
           "    if (c[0] == i) c[0] = i + 1; else c[1] = 1;  /* a chain runs in order */\n"
           "}\n"
           "RT_KERNEL void count(unsigned* c) { atomic_inc(c); }\n";
}

/// A chain of `n` kernel nodes (`params` each; args may differ per node through `set`), or a fan-out / fan-in: one
/// node, n nodes after it, one node after those (n + 2 nodes).
template <class Set>
rtGraph_t build_graph(unsigned n, bool fan, rtKernelNodeParams params, Set&& set) {
    rtGraph_t g = nullptr;
    RT_CHECK(rtGraphCreate(&g, 0));
    rtGraphNode_t prev = nullptr;
    auto add = [&](unsigned i, const rtGraphNode_t* deps, std::size_t ndeps) {
        set(params, i);
        rtGraphNode_t node = nullptr;
        RT_CHECK(rtGraphAddKernelNode(&node, g, deps, ndeps, &params));
        return node;
    };
    if (!fan) {
        for (unsigned i = 0; i < n; ++i) prev = add(i, prev ? &prev : nullptr, prev ? 1 : 0);
        return g;
    }
    const rtGraphNode_t root = add(0, nullptr, 0);
    std::vector<rtGraphNode_t> middle(n);
    for (unsigned i = 0; i < n; ++i) middle[i] = add(i + 1, &root, 1);
    add(n + 1, middle.data(), middle.size());
    return g;
}

// graph_chain_1000 / graph_fan_1000: an executable graph of 1,000 empty kernels (a chain; a fan-out / fan-in)
// launched 100 times + one synchronize, per node; next to each, the same kernels launched one call at a time (+ one
// synchronize), per launch. graph_instantiate_1000: rtGraphInstantiate of the 1,000-node chain (its destruction
// untimed). graph_kernel_node_update: rtGraphExecKernelNodeSetParams of one node of it, no launch in flight.
// graph_exec_update_1000: rtGraphExecUpdate of it from a graph of the same 1,000 nodes.
void Bench::graph_rows() {
    std::fprintf(stderr, "runtime-bench-core: graphs (replay of 1,000 kernels, instantiate, update) ...\n");
    constexpr unsigned kNodes = 1000;
    constexpr int kLaunches = 100;  // launches per timed run of a replay row
    rtModule_t module = nullptr;
    RT_CHECK(rtModuleLoadSource(&module, graph_kernel_source(), nullptr));
    rtFunction_t f_empty = nullptr, f_step = nullptr, f_count = nullptr;
    RT_CHECK(rtModuleGetFunction(&f_empty, module, "empty"));
    RT_CHECK(rtModuleGetFunction(&f_step, module, "step"));
    RT_CHECK(rtModuleGetFunction(&f_count, module, "count"));
    rtKernelNodeParams params{};
    params.grid = rtDim3{1, 1, 1};
    params.block = rtDim3{1, 1, 1};
    auto empty_params = [&](rtKernelNodeParams& p, unsigned) {
        p.function = f_empty;
        p.args = nullptr;
    };
    void* d_check = nullptr;
    RT_CHECK(rtMalloc(&d_check, 2 * sizeof(unsigned)));
    auto set_target = [](Row& r, double limit) {
        char t[48];
        std::snprintf(t, sizeof t, "<= %g %s", limit, r.unit.c_str());
        r.target = t;
        if (r.ours) r.verdict = r.ours->median <= limit ? "yes" : "NO";
    };
    // Runs of `op` (which does `per_run` units of work), seconds per unit, as a Stat in `scale` units.
    auto measure = [&](int runs, double per_run, double scale, auto&& op) {
        std::vector<double> v;
        for (int i = 0; i < runs; ++i) {
            const auto t0 = Clock::now();
            op();
            v.push_back(seconds_between(t0, Clock::now()) / per_run);
        }
        Stat st = summarize(v);
        return Stat{st.median * scale, st.min * scale, st.max * scale, st.samples};
    };

    for (const bool fan : {false, true}) {
        const unsigned total = kNodes;                      // nodes of the graph
        const unsigned middle = fan ? kNodes - 2 : kNodes;  // the fan: 998 in the middle, one on each end
        // Verified once: the chain runs in order, the fan runs every node once.
        {
            unsigned zero[2] = {0, 0};
            RT_CHECK(rtMemcpy(d_check, zero, sizeof zero, RT_MEMCPY_HOST_TO_DEVICE));
            std::vector<unsigned> index(total + 2);
            void* args_step[2] = {&d_check, nullptr};
            void* args_count[1] = {&d_check};
            rtGraph_t g = build_graph(middle, fan, params, [&](rtKernelNodeParams& p, unsigned i) {
                index[i] = i;
                args_step[1] = &index[i];
                p.function = fan ? f_count : f_step;
                p.args = fan ? args_count : args_step;
            });
            rtGraphExec_t x = nullptr;
            RT_CHECK(rtGraphInstantiate(&x, g, 0));
            RT_CHECK(rtGraphLaunch(x, stream_));
            RT_CHECK(rtStreamSynchronize(stream_));
            unsigned got[2] = {0, 0};
            RT_CHECK(rtMemcpy(got, d_check, sizeof got, RT_MEMCPY_DEVICE_TO_HOST));
            const char* metric = fan ? "graph_fan_1000" : "graph_chain_1000";
            if (got[0] != total || got[1] != 0)
                verification_failed(metric, "a replay of " + std::to_string(total) + " nodes counted " +
                                                std::to_string(got[0]) + (got[1] ? " out of order" : ""));
            RT_CHECK(rtGraphExecDestroy(x));
            RT_CHECK(rtGraphDestroy(g));
        }
        rtGraph_t g = build_graph(middle, fan, params, empty_params);
        rtGraphExec_t x = nullptr;
        RT_CHECK(rtGraphInstantiate(&x, g, 0));
        Row r;
        r.metric = fan ? "graph_fan_1000" : "graph_chain_1000";
        r.label = fan ? "graph replay, 1,000-node fan-out/in, per node" : "graph replay, 1,000-kernel chain, per node";
        r.unit = "ns";
        r.seed = "-";
        auto replay = [&] {
            for (int i = 0; i < kLaunches; ++i) RT_CHECK(rtGraphLaunch(x, stream_));
            RT_CHECK(rtStreamSynchronize(stream_));
        };
        replay();  // warm-up
        r.ours = measure(cfg_.graph_runs, double(kLaunches) * total, 1e9, replay);
        set_target(r, 50);
        rows_.push_back(std::move(r));
        RT_CHECK(rtGraphExecDestroy(x));
        RT_CHECK(rtGraphDestroy(g));
        settle();

        Row s;
        s.metric = fan ? "stream_fan_1000" : "stream_chain_1000";
        s.label = "  the same 1,000 kernels, one call each";
        s.unit = "ns";
        s.seed = "-";
        const rtDim3 one{1, 1, 1};
        auto calls = [&] {
            for (unsigned i = 0; i < total; ++i) RT_CHECK(rtLaunchKernel(f_empty, one, one, nullptr, 0, stream_));
            RT_CHECK(rtStreamSynchronize(stream_));
        };
        constexpr int kRounds = 10;  // rounds of 1,000 calls + synchronize per timed run
        calls();
        s.ours = measure(cfg_.graph_runs, double(kRounds) * total, 1e9, [&] {
            for (int i = 0; i < kRounds; ++i) calls();
        });
        rows_.push_back(std::move(s));
        settle();
    }

    // Instantiate, parameter update, whole-graph update: the 1,000-kernel chain.
    {
        rtGraph_t g = build_graph(kNodes, false, params, empty_params);
        rtGraph_t same = build_graph(kNodes, false, params, empty_params);
        rtGraphExec_t x = nullptr;
        Row r;
        r.metric = "graph_instantiate_1000";
        r.label = "instantiate a 1,000-node graph";
        r.unit = "us";
        r.seed = "-";
        std::vector<double> v;
        for (int i = 0; i < cfg_.graph_runs; ++i) {
            const auto t0 = Clock::now();
            RT_CHECK(rtGraphInstantiate(&x, g, 0));
            v.push_back(seconds_between(t0, Clock::now()));
            RT_CHECK(rtGraphExecDestroy(x));
        }
        r.ours = to_microseconds(summarize(v));
        set_target(r, 1000);
        rows_.push_back(std::move(r));

        RT_CHECK(rtGraphInstantiate(&x, g, 0));
        std::vector<rtGraphNode_t> nodes(kNodes);
        std::size_t count = kNodes;
        RT_CHECK(rtGraphGetNodes(g, nodes.data(), &count));
        constexpr int kUpdates = 1000;
        Row u;
        u.metric = "graph_kernel_node_update";
        u.label = "kernel node parameter update";
        u.unit = "us";
        u.seed = "-";
        rtKernelNodeParams p = params;
        empty_params(p, 0);
        RT_CHECK(rtStreamSynchronize(stream_));  // no launch in flight: updates change the program in place
        u.ours = measure(cfg_.graph_runs, kUpdates, 1e6, [&] {
            for (int i = 0; i < kUpdates; ++i)
                RT_CHECK(rtGraphExecKernelNodeSetParams(x, nodes[static_cast<std::size_t>(i) % kNodes], &p));
        });
        set_target(u, 0.5);
        rows_.push_back(std::move(u));

        Row w;
        w.metric = "graph_exec_update_1000";
        w.label = "whole-graph update, 1,000 nodes";
        w.unit = "us";
        w.seed = "-";
        rtGraphExecUpdateResult result = RT_GRAPH_EXEC_UPDATE_ERROR;
        w.ours = measure(cfg_.graph_runs, 1, 1e6, [&] { RT_CHECK(rtGraphExecUpdate(x, same, &result)); });
        if (result != RT_GRAPH_EXEC_UPDATE_SUCCESS)
            verification_failed(w.metric, "rtGraphExecUpdate of an identical graph returned result " +
                                              std::to_string(static_cast<int>(result)));
        set_target(w, 100);
        rows_.push_back(std::move(w));
        // The updated exec still replays.
        RT_CHECK(rtGraphLaunch(x, stream_));
        RT_CHECK(rtStreamSynchronize(stream_));
        RT_CHECK(rtGraphExecDestroy(x));
        RT_CHECK(rtGraphDestroy(g));
        RT_CHECK(rtGraphDestroy(same));
    }
    RT_CHECK(rtFree(d_check));
    RT_CHECK(rtModuleUnload(module));
    settle();
}

// ---------------------------------------------------------------- work-group kernels

std::string read_kernel_file(const char* name) {
    const std::string path = std::string(RUNTIME_BENCH_KERNEL_DIR) + "/" + name;
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "runtime-bench-core: cannot read %s\n", path.c_str());
        std::exit(1);
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// group_sum_16M: 16M floats summed by sum_groups (bench/kernels/work_groups.cpp; the PoCL peer: work_groups.cl's),
// two launches (1024 groups of 256 -> 1024 partial sums -> 1 group) + one synchronize. group_sum_16M_flat: the same
// with the flat form (rt_barrier: fibers on cpu) against the same OpenCL kernel. group_matmul_1024: C = A B of
// 1024 x 1024 floats with 16 x 16 tiles in local memory (matmul_tiled), one launch + synchronize, and its GFLOP/s.
void Bench::group_rows() {
    std::fprintf(stderr, "runtime-bench-core: work-group kernels (sum 16M with local memory, tiled matmul 1024) ...\n");
    rtModule_t module = nullptr;
    RT_CHECK(rtModuleLoadSource(&module, read_kernel_file("work_groups.cpp").c_str(), nullptr));
    rtFunction_t f_sum = nullptr, f_sum_flat = nullptr, f_matmul = nullptr;
    RT_CHECK(rtModuleGetFunction(&f_sum, module, "sum_groups"));
    RT_CHECK(rtModuleGetFunction(&f_sum_flat, module, "sum_groups_flat"));
    RT_CHECK(rtModuleGetFunction(&f_matmul, module, "matmul_tiled"));
    Row probe;
    probe.metric = "group kernels";
    peer_step(probe, [&](OpenClPeer& p) { p.load_group_kernels(read_kernel_file("work_groups.cl")); });
    const std::string peer_error = probe.peer_note;

    // ---- sums
    constexpr unsigned kN = 16u << 20, kGroup = 256, kGroups = 1024;
    std::vector<float> in(kN);
    double want = 0;
    for (unsigned i = 0; i < kN; ++i) {
        in[i] = static_cast<float>(i % 1000) * 0.001f - 0.4995f;  // small partial sums: float stays close
        want += in[i];
    }
    void *d_in = nullptr, *d_part = nullptr, *d_total = nullptr;
    RT_CHECK(rtMalloc(&d_in, std::size_t(kN) * 4));
    RT_CHECK(rtMalloc(&d_part, kGroups * 4));
    RT_CHECK(rtMalloc(&d_total, 4));
    RT_CHECK(rtMemcpy(d_in, in.data(), std::size_t(kN) * 4, RT_MEMCPY_HOST_TO_DEVICE));
    int p_in = -1, p_part = -1, p_total = -1;
    peer_step(probe, [&](OpenClPeer& p) {
        p_in = p.add_buffer(std::size_t(kN) * 4);
        p_part = p.add_buffer(kGroups * 4);
        p_total = p.add_buffer(4);
        p.write_sync(p_in, in.data(), std::size_t(kN) * 4);
    });
    auto ours_sum = [&](rtFunction_t f) {
        unsigned n = kN, parts = kGroups;
        void* a1[] = {&d_in, &d_part, &n};
        void* a2[] = {&d_part, &d_total, &parts};
        const auto t0 = Clock::now();
        RT_CHECK(rtLaunchKernel(f, rtDim3{kGroups, 1, 1}, rtDim3{kGroup, 1, 1}, a1, 0, stream_));
        RT_CHECK(rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{kGroup, 1, 1}, a2, 0, stream_));
        RT_CHECK(rtStreamSynchronize(stream_));
        return seconds_between(t0, Clock::now());
    };
    auto peer_sum = [&](OpenClPeer& p) {
        const std::size_t g1 = std::size_t(kGroups) * kGroup, g2 = kGroup, l = kGroup;
        const auto t0 = Clock::now();
        p.run_group_kernel("sum_groups", {{p_in, 0}, {p_part, 0}, {-1, kN}}, 1, &g1, &l);
        p.run_group_kernel("sum_groups", {{p_part, 0}, {p_total, 0}, {-1, kGroups}}, 1, &g2, &l);
        p.finish();
        return seconds_between(t0, Clock::now());
    };
    auto check_sum = [&](const std::string& who, float got) {
        if (std::fabs(got - want) > 1e-3 * static_cast<double>(kN) * 1e-3 + 1.0)
            verification_failed(who, "the sum is " + std::to_string(got) + ", expected " + std::to_string(want));
    };
    for (const bool flat : {false, true}) {
        Row r;
        r.metric = flat ? "group_sum_16M_flat" : "group_sum_16M";
        r.label = flat ? "sum 16M f32, local tree, rt_barrier form" : "sum 16M f32, local tree + 2nd pass";
        r.unit = "ms";
        r.seed = "-";
        r.target = flat ? "- (fibers)" : ">= peer";
        r.peer_note = peer_error;
        rtFunction_t f = flat ? f_sum_flat : f_sum;
        ours_sum(f);  // warm-up (and the first launch's fiber stacks)
        peer_step(r, [&](OpenClPeer& p) { peer_sum(p); });
        std::vector<double> o, q;
        alternate(r, flat ? std::max(3, cfg_.group_runs / 3) : cfg_.group_runs, [&] { return ours_sum(f); }, peer_sum, o,
                  q);
        float got = 0;
        RT_CHECK(rtMemcpy(&got, d_total, 4, RT_MEMCPY_DEVICE_TO_HOST));
        check_sum(r.metric, got);
        peer_step(r, [&](OpenClPeer& p) {
            float pg = 0;
            p.read_sync(p_total, &pg, 4);
            check_sum("peer " + r.metric, pg);
        });
        r.ours = to_milliseconds(summarize(o));
        if (!q.empty()) r.peer = to_milliseconds(summarize(q));
        if (r.peer && !flat) r.verdict = r.ours->median <= r.peer->median ? "yes" : "NO";
        rows_.push_back(std::move(r));
        settle();
    }
    RT_CHECK(rtFree(d_in));
    RT_CHECK(rtFree(d_part));
    RT_CHECK(rtFree(d_total));

    // ---- tiled matrix product
    {
        constexpr unsigned kM = 1024, kTile = 16;
        const std::size_t bytes = std::size_t(kM) * kM * 4;
        std::vector<float> A(std::size_t(kM) * kM), B(A.size()), C(A.size());
        for (std::size_t i = 0; i < A.size(); ++i) {
            A[i] = static_cast<float>(static_cast<int>(i % 7) - 3);  // small integers: the products are exact
            B[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
        }
        void *dA = nullptr, *dB = nullptr, *dC = nullptr;
        RT_CHECK(rtMalloc(&dA, bytes));
        RT_CHECK(rtMalloc(&dB, bytes));
        RT_CHECK(rtMalloc(&dC, bytes));
        RT_CHECK(rtMemcpy(dA, A.data(), bytes, RT_MEMCPY_HOST_TO_DEVICE));
        RT_CHECK(rtMemcpy(dB, B.data(), bytes, RT_MEMCPY_HOST_TO_DEVICE));
        int pA = -1, pB = -1, pC = -1;
        Row r;
        r.metric = "group_matmul_1024";
        r.label = "matmul 1024^2 f32, 16x16 local tiles";
        r.unit = "ms";
        r.seed = "-";
        r.target = ">= peer";
        r.peer_note = peer_error;
        peer_step(r, [&](OpenClPeer& p) {
            pA = p.add_buffer(bytes);
            pB = p.add_buffer(bytes);
            pC = p.add_buffer(bytes);
            p.write_sync(pA, A.data(), bytes);
            p.write_sync(pB, B.data(), bytes);
        });
        unsigned n = kM;
        void* args[] = {&dA, &dB, &dC, &n};
        auto ours_run = [&] {
            const auto t0 = Clock::now();
            RT_CHECK(rtLaunchKernel(f_matmul, rtDim3{kM / kTile, kM / kTile, 1}, rtDim3{kTile, kTile, 1}, args, 0, stream_));
            RT_CHECK(rtStreamSynchronize(stream_));
            return seconds_between(t0, Clock::now());
        };
        auto peer_run = [&](OpenClPeer& p) {
            const std::size_t g[2] = {kM, kM}, l[2] = {kTile, kTile};
            const auto t0 = Clock::now();
            p.run_group_kernel("matmul_tiled", {{pA, 0}, {pB, 0}, {pC, 0}, {-1, kM}}, 2, g, l);
            p.finish();
            return seconds_between(t0, Clock::now());
        };
        ours_run();
        peer_step(r, [&](OpenClPeer& p) { peer_run(p); });
        std::vector<double> o, q;
        alternate(r, cfg_.group_runs, ours_run, peer_run, o, q);
        // 512 sampled elements against the host's product.
        auto verify = [&](const std::string& who) {
            for (unsigned s = 0; s < 512; ++s) {
                const std::size_t i = (s * 2654435761u) % kM, j = (s * 40503u + 17) % kM;
                double e = 0;
                for (unsigned k = 0; k < kM; ++k) e += double(A[i * kM + k]) * B[std::size_t(k) * kM + j];
                if (C[i * kM + j] != static_cast<float>(e))
                    verification_failed(who, "C[" + std::to_string(i) + "][" + std::to_string(j) + "] = " +
                                                 std::to_string(C[i * kM + j]) + ", expected " + std::to_string(e));
            }
        };
        RT_CHECK(rtMemcpy(C.data(), dC, bytes, RT_MEMCPY_DEVICE_TO_HOST));
        verify(r.metric);
        peer_step(r, [&](OpenClPeer& p) {
            std::fill(C.begin(), C.end(), 0.0f);
            p.read_sync(pC, C.data(), bytes);
            verify("peer " + r.metric);
        });
        const Stat os = summarize(o);
        r.ours = to_milliseconds(os);
        if (!q.empty()) r.peer = to_milliseconds(summarize(q));
        if (r.peer) r.verdict = r.ours->median <= r.peer->median ? "yes" : "NO";
        Row fl;
        fl.metric = "group_matmul_1024_gflops";
        fl.label = "matmul 1024^2 f32, tiled (2n^3 flop)";
        fl.unit = "GFLOP/s";
        fl.better = Better::Higher;
        fl.seed = "-";
        fl.target = ">= peer";
        fl.peer_note = r.peer_note;
        const double flop = 2.0 * kM * kM * kM;
        fl.ours = to_gbps(os, flop);
        if (!q.empty()) fl.peer = to_gbps(summarize(q), flop);
        if (fl.peer) fl.verdict = fl.ours->median >= fl.peer->median ? "yes" : "NO";
        rows_.push_back(std::move(r));
        rows_.push_back(std::move(fl));
        RT_CHECK(rtFree(dA));
        RT_CHECK(rtFree(dB));
        RT_CHECK(rtFree(dC));
    }
    // ---- the flat form's barrier: ns per item per barrier (256-item groups, 64 barriers each)
    {
        constexpr unsigned kGroupsB = 64, kRounds = 64;
        Row r;
        r.metric = "group_barrier_cost";
        r.label = "rt_barrier, per item per barrier";
        r.unit = "ns";
        r.seed = "-";
        r.target = "-";
        r.peer_note = peer_error;
        rtFunction_t f = nullptr;
        RT_CHECK(rtModuleGetFunction(&f, module, "barriers_flat"));
        void* d_out = nullptr;
        RT_CHECK(rtMalloc(&d_out, kGroupsB * kGroup * 4));
        int p_out = -1;
        peer_step(r, [&](OpenClPeer& p) { p_out = p.add_buffer(kGroupsB * kGroup * 4); });
        unsigned rounds = kRounds;
        void* args[] = {&d_out, &rounds};
        const double per = 1e9 / (double(kGroupsB) * kGroup * kRounds);  // seconds -> ns per item-barrier
        auto ours_run = [&] {
            const auto t0 = Clock::now();
            RT_CHECK(rtLaunchKernel(f, rtDim3{kGroupsB, 1, 1}, rtDim3{kGroup, 1, 1}, args, 0, stream_));
            RT_CHECK(rtStreamSynchronize(stream_));
            return seconds_between(t0, Clock::now());
        };
        auto peer_run = [&](OpenClPeer& p) {
            const std::size_t g = std::size_t(kGroupsB) * kGroup, l = kGroup;
            const auto t0 = Clock::now();
            p.run_group_kernel("barriers_flat", {{p_out, 0}, {-1, kRounds}}, 1, &g, &l);
            p.finish();
            return seconds_between(t0, Clock::now());
        };
        ours_run();
        peer_step(r, [&](OpenClPeer& p) { peer_run(p); });
        std::vector<double> o, q;
        alternate(r, cfg_.group_runs, ours_run, peer_run, o, q);
        for (double& v : o) v *= per;
        for (double& v : q) v *= per;
        r.ours = summarize(o);
        if (!q.empty()) r.peer = summarize(q);
        rows_.push_back(std::move(r));
        RT_CHECK(rtFree(d_out));
    }
    RT_CHECK(rtModuleUnload(module));
    settle();
}

void Bench::kernel_rows() {
    std::fprintf(stderr, "runtime-bench-core: kernels (launch latency, batched launches, out = in * 2, JIT) ...\n");
    // Resident kernels (untimed): ours and the peer's.
    {
        const std::string src = kernel_source("runtime-bench resident kernels " + nonce_);
        RT_CHECK(rtModuleLoadSource(&module_, src.c_str(), nullptr));
        RT_CHECK(rtModuleGetFunction(&f_empty_, module_, "empty"));
        RT_CHECK(rtModuleGetFunction(&f_twice_, module_, "twice"));
    }
    Row probe;  // collects a peer build failure before any row exists
    probe.metric = "kernels";
    peer_step(probe, [&](OpenClPeer& p) { p.load_kernels(); });
    const std::string peer_kernels_error = probe.peer_note;
    // A peer whose kernels do not build cannot run the kernel rows: each row says why.
    auto peer_ok = [&](Row& r) {
        if (!peer_kernels_error.empty() && r.peer_note.empty()) r.peer_note = peer_kernels_error;
    };
    const rtDim3 one{1, 1, 1};
    auto ours_empty = [&] { RT_CHECK(rtLaunchKernel(f_empty_, one, one, nullptr, 0, stream_)); };
    auto set_verdict_max = [](Row& r, double limit, const char* unit) {
        char t[48];
        std::snprintf(t, sizeof t, "<= %g %s", limit, unit);
        r.target = t;
        if (r.ours) r.verdict = r.ours->median <= limit ? "yes" : "NO";
    };

    // launch_latency: empty kernel over 1 work-item, launch + synchronize.
    if (!cfg_.only_trace) {
        Row r;
        r.metric = "launch_latency";
        r.label = "empty kernel launch+sync (1 item)";
        r.unit = "us";
        r.seed = "-";
        peer_ok(r);
        for (int i = 0; i < cfg_.lat_warmup; ++i) {
            ours_empty();
            RT_CHECK(rtStreamSynchronize(stream_));
        }
        std::vector<double> o, q;
        per_op_runs(
            r, cfg_.lat_runs, cfg_.lat_iters, 5,
            [&] {
                ours_empty();
                RT_CHECK(rtStreamSynchronize(stream_));
            },
            [&](OpenClPeer& p) {
                p.launch_empty();
                p.finish();
            },
            o, q);
        r.ours = to_microseconds(summarize(o));
        if (!q.empty()) r.peer = to_microseconds(summarize(q));
        set_verdict_max(r, 3.0, "us");
        rows_.push_back(std::move(r));
    }

    // batched_launch: 20,000 empty launches then one synchronize; seconds per launch.
    {
        constexpr int kBatch = 20000;
        Row r;
        r.metric = "batched_launch";
        r.label = "20,000 launches + 1 sync, per launch";
        r.unit = "us";
        r.seed = "-";
        peer_ok(r);
        std::vector<double> o, q;
        auto ours_batch = [&] {
            const auto t0 = Clock::now();
            for (int i = 0; i < kBatch; ++i) ours_empty();
            RT_CHECK(rtStreamSynchronize(stream_));
            return seconds_between(t0, Clock::now()) / kBatch;
        };
        auto peer_batch = [&](OpenClPeer& p) {
            const auto t0 = Clock::now();
            for (int i = 0; i < kBatch; ++i) p.launch_empty();
            p.finish();
            return seconds_between(t0, Clock::now()) / kBatch;
        };
        ours_batch();  // warm-up: the stream's ring reaches its steady size
        peer_step(r, [&](OpenClPeer& p) { peer_batch(p); });
        alternate(r, cfg_.batch_runs, ours_batch, peer_batch, o, q);
        r.ours = to_microseconds(summarize(o));
        if (!q.empty()) r.peer = to_microseconds(summarize(q));
        set_verdict_max(r, 0.3, "us");
        rows_.push_back(std::move(r));
        settle();
    }

    // batched_launch_traced: batched_launch while the timeline trace is written (rtProfilerStart with the default
    // flags: api spans and memory counters too), its peer the same batches with the trace off, run by run in turn;
    // trace_cost_per_launch: what the trace adds to one launch (on minus off), target <= 100 ns. The off side is the
    // library as every program runs it: one branch per operation (batched_launch measures the same).
    {
        constexpr int kBatch = 20000;
        const std::string trace_path =
            (std::filesystem::temp_directory_path() / ("runtime-bench-trace-" + std::to_string(::getpid()) + ".json"))
                .string();
        // The process's CPU time over the same interval as well: what the trace costs the machine per launch (every
        // thread: the queuing one, the executors' spinning, and the writer's formatting when a flush falls inside the
        // batch), blind to other processes taking the cores. Informational: the target is the operation's own cost.
        auto cpu_seconds = [] {
            timespec t;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
            return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
        };
        std::vector<double> on, off, cpu_on, cpu_off;
        auto batch = [&](bool traced) {
            if (traced) RT_CHECK(rtProfilerStart(trace_path.c_str(), RT_PROFILER_DEFAULT));
            const double c0 = cpu_seconds();
            const auto t0 = Clock::now();
            for (int i = 0; i < kBatch; ++i) ours_empty();
            RT_CHECK(rtStreamSynchronize(stream_));
            const double per = seconds_between(t0, Clock::now()) / kBatch;
            (traced ? cpu_on : cpu_off).push_back((cpu_seconds() - c0) / kBatch);
            if (traced) RT_CHECK(rtProfilerStop());  // not timed: the writer formats the batch
            return per;
        };
        batch(true);
        batch(false);
        cpu_on.clear();
        cpu_off.clear();
        for (int i = 0; i < cfg_.batch_runs; ++i) {
            off.push_back(batch(false));
            pause_between();
            on.push_back(batch(true));
            pause_between();
        }
        std::remove(trace_path.c_str());
        Row r;
        r.metric = "batched_launch_traced";
        r.label = "20,000 launches + 1 sync, trace on, per launch";
        r.unit = "us";
        r.seed = "-";
        r.ours = to_microseconds(summarize(on));
        r.peer = to_microseconds(summarize(off));
        r.peer_name = "the same launches, trace off";
        rows_.push_back(std::move(r));
        Row c;
        c.metric = "trace_cost_per_launch";
        c.label = "trace on minus off, per launch";
        c.unit = "ns";
        c.seed = "-";
        std::vector<double> diffs;  // run by run: each traced batch against the untraced batch just before it
        for (size_t i = 0; i < on.size(); ++i) diffs.push_back((on[i] - off[i]) * 1e9);
        c.ours = summarize(diffs);
        set_verdict_max(c, 100.0, "ns");
        rows_.push_back(std::move(c));
        Row u;
        u.metric = "trace_cpu_cost_per_launch";
        u.label = "trace on minus off, CPU time of all threads, per launch";
        u.unit = "ns";
        u.seed = "-";
        std::vector<double> cpu_diffs;
        for (size_t i = 0; i < cpu_on.size(); ++i) cpu_diffs.push_back((cpu_on[i] - cpu_off[i]) * 1e9);
        u.ours = summarize(cpu_diffs);
        rows_.push_back(std::move(u));
        settle();
    }

    if (cfg_.only_trace) return;

    // kernel_twice_16M: out[i] = in[i] * 2 over 16M floats, blocks of 256, the CUDA-style guarded kernel; ms and GB/s
    // (read + write). Launched with an exact global size (rtLaunchKernelEx) and, as a CUDA user would, over grid x
    // block (rtLaunchKernel: kernel_twice_16M_grid); PoCL runs the same guarded kernel over the same NDRange.
    for (const bool grid_launch : {false, true}) {
        constexpr unsigned kN = 16u << 20;
        constexpr unsigned kBlock = 256;
        const std::size_t nbytes = std::size_t(kN) * sizeof(float);
        std::vector<float> in(kN), out(kN);
        for (unsigned i = 0; i < kN; ++i) in[i] = static_cast<float>(i % 8191) * 0.25f - 1000.0f;
        RT_CHECK(rtMemcpy(d_a_, in.data(), nbytes, RT_MEMCPY_HOST_TO_DEVICE));
        RT_CHECK(rtMemset(d_b_, 0, nbytes));
        Row r;
        r.metric = grid_launch ? "kernel_twice_16M_grid" : "kernel_twice_16M";
        r.label = grid_launch ? "guarded out = in * 2, 16M, grid x block" : "out = in * 2, 16M floats, launch+sync";
        r.unit = "ms";
        r.seed = "-";
        peer_ok(r);
        unsigned n = kN;
        void* args[] = {&d_a_, &d_b_, &n};
        // Exactly kN items (the OpenCL peer's NDRange is kN too).
        rtLaunchConfig config = RT_LAUNCH_CONFIG_INIT;
        config.grid = rtDim3{kN / kBlock, 1, 1};
        config.block = rtDim3{kBlock, 1, 1};
        config.stream = stream_;
        config.num_args = 3;
        config.global[0] = kN;
        config.global[1] = config.global[2] = 1;
        auto ours_run = [&] {
            const auto t0 = Clock::now();
            if (grid_launch) RT_CHECK(rtLaunchKernel(f_twice_, config.grid, config.block, args, 0, stream_));
            else RT_CHECK(rtLaunchKernelEx(f_twice_, &config, args));
            RT_CHECK(rtStreamSynchronize(stream_));
            return seconds_between(t0, Clock::now());
        };
        auto peer_run = [&](OpenClPeer& p) {
            const auto t0 = Clock::now();
            p.launch_twice(kN, kBlock);
            p.finish();
            return seconds_between(t0, Clock::now());
        };
        ours_run();  // warm-up
        peer_step(r, [&](OpenClPeer& p) {
            p.write_sync(0, in.data(), nbytes);
            p.zero(1, nbytes);
            peer_run(p);
        });
        std::vector<double> o, q;
        alternate(r, cfg_.kernel_runs, ours_run, peer_run, o, q);
        auto verify = [&](const char* who) {
            for (unsigned i = 0; i < kN; ++i)
                if (out[i] != in[i] * 2.0f)
                    verification_failed(std::string(who) + r.metric, "out[" + std::to_string(i) + "] = " +
                                                                         std::to_string(out[i]) + ", expected " +
                                                                         std::to_string(in[i] * 2.0f));
        };
        RT_CHECK(rtMemcpy(out.data(), d_b_, nbytes, RT_MEMCPY_DEVICE_TO_HOST));
        verify("");
        peer_step(r, [&](OpenClPeer& p) {
            std::fill(out.begin(), out.end(), 0.0f);
            p.read_sync(1, out.data(), nbytes);
            verify("peer ");
        });
        const Stat os = summarize(o);
        r.ours = to_milliseconds(os);
        if (!q.empty()) r.peer = to_milliseconds(summarize(q));
        r.target = "<= peer";
        if (r.peer) r.verdict = r.ours->median <= r.peer->median ? "yes" : "NO";
        Row bw;
        bw.metric = grid_launch ? "kernel_twice_16M_grid_bandwidth" : "kernel_twice_16M_bandwidth";
        bw.label = grid_launch ? "guarded out = in * 2, grid x block" : "out = in * 2, 16M floats (read+write)";
        bw.unit = "GB/s";
        bw.better = Better::Higher;
        bw.seed = "-";
        bw.target = ">= peer";
        bw.peer_note = r.peer_note;
        bw.ours = to_gbps(os, 2.0 * static_cast<double>(nbytes));
        if (!q.empty()) bw.peer = to_gbps(summarize(q), 2.0 * static_cast<double>(nbytes));
        if (bw.peer) bw.verdict = bw.ours->median >= bw.peer->median ? "yes" : "NO";
        rows_.push_back(std::move(r));
        rows_.push_back(std::move(bw));
        settle();
    }

    // alloc_free: rtMalloc + rtFree of 1 MiB from the pool with reuse on, the seed's
    // enable_pool_allocator + enable_memory_reuse (peer: clCreateBuffer + clReleaseMemObject).
    // alloc_free_plain: the same without a pool (every allocation from the system).
    {
        constexpr std::size_t kBytes = std::size_t(1) << 20;
        Row r;
        r.metric = "alloc_free";
        r.label = "alloc + free 1 MiB, pooled (PoCL: lazy)";
        r.unit = "us";
        r.seed = "-";
        r.target = "-";
        std::vector<double> o, q;
        auto ours_op = [&] {
            void* p = nullptr;
            RT_CHECK(rtMalloc(&p, kBytes));
            if (!p) verification_failed(r.metric, "rtMalloc returned NULL for 1 MiB");
            RT_CHECK(rtFree(p));
        };
        RT_CHECK(rtEnablePoolAllocator(std::size_t{4} << 30, std::size_t{2} << 20, RT_POOL_DEFAULT));
        RT_CHECK(rtEnableMemoryReuse(1));
        per_op_runs(r, cfg_.lat_runs, cfg_.alloc_iters, 5, ours_op, [&](OpenClPeer& p) { p.alloc_free(kBytes); }, o, q);
        RT_CHECK(rtEnableMemoryReuse(0));
        RT_CHECK(rtEnablePoolAllocator(0, 0, RT_POOL_DEFAULT));
        r.ours = to_microseconds(summarize(o));
        if (!q.empty()) r.peer = to_microseconds(summarize(q));
        rows_.push_back(std::move(r));

        Row plain;
        plain.metric = "alloc_free_plain";
        plain.label = "alloc + free 1 MiB, no pool";
        plain.unit = "us";
        plain.seed = "-";
        plain.target = "-";
        std::vector<double> po, pq;
        per_op_runs(plain, cfg_.lat_runs, cfg_.alloc_iters, 5, ours_op, [&](OpenClPeer& p) { p.alloc_free(kBytes); }, po, pq);
        plain.ours = to_microseconds(summarize(po));
        if (!pq.empty()) plain.peer = to_microseconds(summarize(pq));
        rows_.push_back(std::move(plain));
        settle();
    }

    // jit_cold: a source never seen (unique comment) in a fresh cache directory; until it has run once.
    std::vector<std::string> ours_tags, peer_tags;
    {
        std::fprintf(stderr, "runtime-bench-core: JIT cold compiles (%d each side) ...\n", cfg_.jit_reps);
        Row r;
        r.metric = "jit_cold";
        r.label = "JIT cold: compile + 1st run (new src)";
        r.unit = "ms";
        r.seed = "-";
        peer_ok(r);
        std::vector<double> o, q;
        int oi = 0, pi = 0;  // repetition numbers of each side: every source is new
        alternate(
            r, cfg_.jit_reps,
            [&] {
                ours_tags.push_back("runtime-bench jit ours " + nonce_ + " " + std::to_string(oi++));
                const std::size_t files_before = count_files(ours_cache_);
                const double s = ours_load_and_run_once(ours_tags.back());
                if (count_files(ours_cache_) <= files_before)
                    std::fprintf(stderr, "runtime-bench-core: note: jit_cold wrote nothing to RUNTIME_CACHE_DIR=%s\n",
                                 ours_cache_.c_str());
                return s;
            },
            [&](OpenClPeer& p) {
                peer_tags.push_back("runtime-bench jit pocl " + nonce_ + " " + std::to_string(pi++));
                return p.build_and_run_once_seconds(opencl_kernel_source(peer_tags.back()));
            },
            o, q);
        // The last launch wrote 2 * in[0] to out[0].
        float got[2] = {0, 0};
        RT_CHECK(rtMemcpy(got, d_b_, sizeof got, RT_MEMCPY_DEVICE_TO_HOST));
        float in0 = 0;
        RT_CHECK(rtMemcpy(&in0, d_a_, sizeof in0, RT_MEMCPY_DEVICE_TO_HOST));
        if (got[0] != in0 * 2.0f) verification_failed(r.metric, "the freshly compiled kernel computed a wrong out[0]");
        r.ours = to_milliseconds(summarize(o));
        if (!q.empty()) r.peer = to_milliseconds(summarize(q));
        set_verdict_max(r, 500, "ms");
        rows_.push_back(std::move(r));
    }

    // jit_cached: a FRESH process loads one of those sources from the disk cache (the child runs
    // this executable with --jit-child and prints its own measured time; process start-up and
    // runtime/OpenCL initialisation are outside it).
    {
        std::fprintf(stderr, "runtime-bench-core: JIT cached loads in fresh processes ...\n");
        Row r;
        r.metric = "jit_cached";
        r.label = "JIT disk-cache load + 1st run, new proc";
        r.unit = "ms";
        r.seed = "-";
        peer_ok(r);
        std::vector<double> o, q;
        std::size_t oi = 0, pi = 0;
        alternate(
            r, cfg_.jit_reps,
            [&] {
                const std::string& tag = ours_tags[oi++ % ours_tags.size()];
                const std::size_t files_before = count_files(ours_cache_);
                std::string why;
                const auto s = run_jit_child("ours", tag, &why);
                if (!s) verification_failed(r.metric, why);
                if (count_files(ours_cache_) > files_before)
                    std::fprintf(stderr, "runtime-bench-core: note: jit_cached child wrote to the cache: not a pure hit\n");
                return *s;
            },
            [&](OpenClPeer&) -> double {
                const std::string& tag = peer_tags[pi++ % peer_tags.size()];
                std::string why;
                const auto s = run_jit_child("pocl", tag, &why);
                if (!s) throw PeerError(why);
                return *s;
            },
            o, q);
        r.ours = to_milliseconds(summarize(o));
        if (!q.empty()) r.peer = to_milliseconds(summarize(q));
        set_verdict_max(r, 5, "ms");
        rows_.push_back(std::move(r));
    }

    // jit_reload: the same source again in the same process (the in-process module cache).
    {
        Row r;
        r.metric = "jit_reload";
        r.label = "JIT reload same src + 1st run, same proc";
        r.unit = "us";
        r.seed = "-";
        peer_ok(r);
        const std::string tag = ours_tags.front();
        const std::string peer_tag = peer_tags.empty() ? std::string() : peer_tags.front();
        std::vector<double> o, q;
        constexpr int kReloads = 10;
        alternate(
            r, cfg_.reload_runs,
            [&] {
                double sum = 0;
                for (int k = 0; k < kReloads; ++k) sum += ours_load_and_run_once(tag);
                return sum / kReloads;
            },
            [&](OpenClPeer& p) { return p.build_and_run_once_seconds(opencl_kernel_source(peer_tag)); }, o, q);
        r.ours = to_microseconds(summarize(o));
        if (!q.empty()) r.peer = to_microseconds(summarize(q));
        set_verdict_max(r, 50, "us");
        rows_.push_back(std::move(r));
    }
    settle();
}

/// The fresh process of jit_cached: initialise (untimed), then load `tag`'s source from the disk
/// cache, get its kernel, run it once over 1 item and synchronize (timed); print seconds on stdout.
/// Exit 0 ok, 1 failure, 2 wrong result.
int jit_child(const std::string& side, const std::string& tag, int device) {
    if (side == "ours") {
        RT_CHECK(rtSetDevice(device));
        rtStream_t s = nullptr;
        RT_CHECK(rtStreamCreate(&s));
        void* d_in = nullptr;
        void* d_out = nullptr;
        RT_CHECK(rtMalloc(&d_in, 256));
        RT_CHECK(rtMalloc(&d_out, 256));
        const float x = 21.5f;
        RT_CHECK(rtMemcpy(d_in, &x, sizeof x, RT_MEMCPY_HOST_TO_DEVICE));
        RT_CHECK(rtMemset(d_out, 0, 256));
        const double secs = load_and_run_twice_once(tag, d_in, d_out, s);
        float y = 0;
        RT_CHECK(rtMemcpy(&y, d_out, sizeof y, RT_MEMCPY_DEVICE_TO_HOST));
        if (y != 43.0f) verification_failed("jit_cached", "the cached kernel computed " + std::to_string(y));
        std::printf("%.9g\n", secs);
        return 0;
    }
    if (side == "pocl") {
        std::string why;
        auto peer = OpenClPeer::open(&why);
        if (!peer) {
            std::fprintf(stderr, "runtime-bench-core --jit-child: peer missing: %s\n", why.c_str());
            return 1;
        }
        try {
            peer->reserve(4096);
            const float x = 21.5f;
            peer->write_sync(0, &x, sizeof x);
            const double secs = peer->build_and_run_once_seconds(opencl_kernel_source(tag));
            float y = 0;
            peer->read_sync(1, &y, sizeof y);
            if (y != 43.0f) verification_failed("peer jit_cached", "the cached kernel computed " + std::to_string(y));
            std::printf("%.9g\n", secs);
        } catch (const PeerError& e) {
            std::fprintf(stderr, "runtime-bench-core --jit-child: %s\n", e.what());
            return 1;
        }
        return 0;
    }
    std::fprintf(stderr, "runtime-bench-core: --jit-child expects 'ours' or 'pocl', got '%s'\n", side.c_str());
    return 1;
}

// ---- 4. 256 MiB bandwidth vs PoCL and vs host-copy baselines

void Bench::bandwidth_rows() {
    const std::size_t n = cfg_.bw_bytes;
    const int reps = cfg_.bw_reps;
    const double bytes = static_cast<double>(n);
    char sizebuf[32];
    std::snprintf(sizebuf, sizeof sizebuf, "%zu MiB", n >> 20);

    // Host-copy baselines first: the reference the target is expressed in.
    struct Base {
        const char* metric;
        const char* label;
        int threads;
        CopyFn copy;
    };
    const Base bases[] = {{"memcpy_1t", "memcpy 1 thread ", 1, plain_memcpy},
                          {"memcpy_2t", "memcpy 2 threads ", 2, plain_memcpy},
                          {"stream_copy_1t", "streaming-store copy 1 thread ", 1, stream_copy},
                          {"stream_copy_2t", "streaming-store copy 2 thr ", 2, stream_copy}};
    std::vector<Row> base_rows;
    for (const Base& b : bases) {
        Row r;
        r.metric = b.metric;
        r.label = std::string(b.label) + sizebuf;
        r.unit = "GB/s";
        r.better = Better::Higher;
        r.seed = "-";
        r.target = "(baseline)";
        r.peer_note = "-";
        auto once = [&] {
            return b.threads == 1 ? memcpy_1t_seconds(h_dst_, h_src_, n, b.copy)
                                  : memcpy_2t_seconds(h_dst_, h_src_, n, b.copy);
        };
        std::memset(h_dst_, 0, n);
        once();  // warm-up
        r.ours = to_gbps(time_self_timed(reps, once), bytes);
        if (std::memcmp(h_dst_, h_src_, n) != 0) verification_failed(r.metric, "host copy differs");
        best_host_copy_gbps_ = std::max(best_host_copy_gbps_, r.ours->median);
        if (r.metric == "memcpy_2t") memcpy2t_gbps_ = *r.ours;
        base_rows.push_back(std::move(r));
    }
    settle();

    struct Dir {
        const char* metric;
        const char* label;
        const char* seed;
        rtMemcpyKind kind;
    };
    const Dir dirs[] = {{"H2D_bandwidth", "H2D", "12.5 GB/s", RT_MEMCPY_HOST_TO_DEVICE},
                        {"D2H_bandwidth", "D2H", "12.5 GB/s", RT_MEMCPY_DEVICE_TO_HOST},
                        {"D2D_bandwidth", "D2D", "450 GB/s", RT_MEMCPY_DEVICE_TO_DEVICE}};
    for (const Dir& d : dirs) {
        Row r;
        r.metric = d.metric;
        r.label = std::string(d.label) + " copy+sync " + sizebuf + " (pinned)";
        r.unit = "GB/s";
        r.better = Better::Higher;
        r.seed = d.seed;
        r.target = ">= 0.9 x memcpy 2t";
        const std::string dir = d.label;
        void* dst = dir == "H2D" ? d_a_ : dir == "D2H" ? h_dst_ : d_b_;
        const void* src = dir == "H2D" ? h_src_ : d_a_;
        const int peer_dst = dir == "H2D" ? 0 : 1;  // OpenCL buffer written by H2D / D2D
        auto peer_op = [&](OpenClPeer& p) {
            if (dir == "H2D") p.write(0, h_src_, n);
            else if (dir == "D2H") p.read(0, h_dst_, n);
            else p.copy(0, 1, n);
            p.finish();
        };

        // Clear the destinations so the verification below proves these copies wrote them.
        if (dir == "D2H") std::memset(h_dst_, 0, n);
        else RT_CHECK(rtMemset(dst, 0, n));
        RT_CHECK(rtDeviceSynchronize());
        ours_copy_sync(dst, src, n, d.kind);  // warm-up
        std::vector<double> o, q;
        if (dir == "D2H") {
            // Both sides write h_dst: time ours alone, verify, then the peer alone.
            o.reserve(static_cast<std::size_t>(reps));
            for (int i = 0; i < reps; ++i) {
                const auto t0 = Clock::now();
                ours_copy_sync(dst, src, n, d.kind);
                o.push_back(seconds_between(t0, Clock::now()));
            }
        } else {
            peer_step(r, [&](OpenClPeer& p) {
                p.zero(peer_dst, n);
                peer_op(p);  // warm-up
            });
            alternate(
                r, reps,
                [&] {
                    const auto t0 = Clock::now();
                    ours_copy_sync(dst, src, n, d.kind);
                    return seconds_between(t0, Clock::now());
                },
                [&](OpenClPeer& p) {
                    const auto t0 = Clock::now();
                    peer_op(p);
                    return seconds_between(t0, Clock::now());
                },
                o, q);
        }
        r.ours = to_gbps(summarize(o), bytes);
        // Verify ours: the destination equals the pattern (d_a holds it since the H2D row).
        if (dir != "D2H") {
            std::memset(h_dst_, 0, n);
            RT_CHECK(rtMemcpy(h_dst_, dst, n, RT_MEMCPY_DEVICE_TO_HOST));
        }
        if (std::memcmp(h_dst_, h_src_, n) != 0) verification_failed(r.metric, "destination differs from source");
        if (dir == "D2H") {
            peer_step(r, [&](OpenClPeer& p) {
                std::memset(h_dst_, 0, n);
                peer_op(p);  // warm-up
                for (int i = 0; i < reps; ++i) {
                    const auto t0 = Clock::now();
                    peer_op(p);
                    q.push_back(seconds_between(t0, Clock::now()));
                }
                if (std::memcmp(h_dst_, h_src_, n) != 0) verification_failed("peer " + r.metric, "host differs");
            });
        } else {
            peer_step(r, [&](OpenClPeer& p) {
                std::memset(h_dst_, 0, n);
                p.read_sync(peer_dst, h_dst_, n);
                if (std::memcmp(h_dst_, h_src_, n) != 0) verification_failed("peer " + r.metric, "buffer differs");
            });
        }
        if (!q.empty() && r.peer_note.empty()) r.peer = to_gbps(summarize(q), bytes);
        const double vs = r.ours->median / memcpy2t_gbps_.median;
        char v[64];
        std::snprintf(v, sizeof v, "%s (%.2fx 2t)", vs >= 0.9 ? "yes" : "NO", vs);
        r.verdict = v;
        rows_.push_back(std::move(r));
        settle();
    }
    for (Row& r : base_rows) rows_.push_back(std::move(r));
}

// ---- 5. bandwidth vs size (--sweep): 4 B … bw_bytes in x4 steps

void Bench::sweep_rows() {
    for (std::size_t n = 4; n <= cfg_.bw_bytes; n *= 4) {
        // Enough repetitions for a stable median without making 256 MiB points slow.
        int reps = n <= (64u << 10) ? 300 : n <= (4u << 20) ? 40 : 7;
        if (cfg_.quick) reps = std::max(3, reps / 5);
        const double bytes = static_cast<double>(n);
        struct Dir {
            const char* name;
            rtMemcpyKind kind;
        };
        for (const Dir& d : {Dir{"H2D", RT_MEMCPY_HOST_TO_DEVICE}, Dir{"D2H", RT_MEMCPY_DEVICE_TO_HOST},
                             Dir{"D2D", RT_MEMCPY_DEVICE_TO_DEVICE}}) {
            Row r;
            r.metric = std::string(d.name) + "_bandwidth_sweep";
            r.unit = "GB/s";
            r.better = Better::Higher;
            r.bytes = n;
            const std::string dir = d.name;
            void* dst = dir == "H2D" ? d_a_ : dir == "D2H" ? h_dst_ : d_b_;
            const void* src = dir == "H2D" ? h_src_ : d_a_;
            ours_copy_sync(dst, src, n, d.kind);
            r.ours = to_gbps(time_each(reps, [&] { ours_copy_sync(dst, src, n, d.kind); }), bytes);
            // Verify the prefix against the pattern (d_a holds it: H2D ran first at this size).
            if (dir != "D2H") RT_CHECK(rtMemcpy(h_dst_, dst, n, RT_MEMCPY_DEVICE_TO_HOST));
            if (std::memcmp(h_dst_, h_src_, n) != 0) verification_failed(r.metric, "destination differs at " + std::to_string(n) + " B");
            // The sweep measures one side after the other per size (not alternated): it is for
            // plots of shape, the table above is the like-for-like comparison.
            peer_step(r, [&](OpenClPeer& p) {
                auto op = [&] {
                    if (dir == "H2D") p.write(0, h_src_, n);
                    else if (dir == "D2H") p.read(0, h_dst_, n);
                    else p.copy(0, 1, n);
                    p.finish();
                };
                pause_between();
                op();
                r.peer = to_gbps(time_each(reps, op), bytes);
            });
            sweep_.push_back(std::move(r));
        }
        for (int threads : {1, 2}) {
            Row r;
            r.metric = threads == 1 ? "memcpy_1t_sweep" : "memcpy_2t_sweep";
            r.unit = "GB/s";
            r.better = Better::Higher;
            r.bytes = n;  // (no peer for memcpy rows; the sweep table prints its own columns)
            // Thread creation (untimed) makes 2-thread points costly in wall time: fewer reps.
            const int mreps = threads == 1 ? reps : std::min(reps, 50);
            r.ours = to_gbps(time_self_timed(mreps, [&] {
                                 return threads == 1 ? memcpy_1t_seconds(h_dst_, h_src_, n)
                                                     : memcpy_2t_seconds(h_dst_, h_src_, n);
                             }),
                             bytes);
            sweep_.push_back(std::move(r));
        }
        settle();
    }
}

// ---- graph rows against their peers (bench_graph_peers.cpp)

void Bench::graph_peer_rows() {
    std::fprintf(stderr, "runtime-bench-core: graphs vs PoCL command buffers, oneTBB flow_graph, streams ...\n");
    GraphPeerOptions o;
    o.runs = cfg_.graph_runs;
    for (GraphPeerRow& g : rtbench::graph_peer_rows(o, peer_.get(), peer_missing_)) {
        Row r;
        r.metric = g.metric;
        r.label = g.label;
        r.unit = g.unit;
        r.seed = std::string("-");  // (not = "-": GCC 12's -Wrestrict misfires on it here, GCC bug 105329)
        r.ours = g.ours;
        r.peer = g.peer.stat;
        r.peer_name = g.peer.name;
        r.peer_note = g.peer.note;
        r.others = std::move(g.others);
        r.target = g.target;
        r.verdict = g.verdict;
        rows_.push_back(std::move(r));
    }
    settle();
}

// ---------------------------------------------------------------- output

/// The 1-minute load average: the machine is shared, and a busy machine explains noisy figures.
std::string load_average() {
    std::FILE* f = std::fopen("/proc/loadavg", "r");
    if (!f) return "?";
    char buf[64] = {0};
    const bool ok = std::fgets(buf, sizeof buf, f) != nullptr;
    std::fclose(f);
    if (!ok) return "?";
    std::string s(buf);
    return s.substr(0, s.find(' '));
}

void Bench::print_table() const {
    std::printf("runtime-bench-core: device %d = %s [backend %s, %d compute units]\n", cfg_.device,
                device_name_.c_str(), prop_.backend, prop_.compute_units);
    std::printf("peer: %s\n", peer_missing_.empty() ? peer_name_.c_str()
                                                   : ("OpenCL (PoCL) MISSING: " + peer_missing_).c_str());
    std::printf("each cell: median [min, max] over %d runs of %d iterations (latency) / %d copies (bandwidth)%s\n",
                cfg_.lat_runs, cfg_.lat_iters, cfg_.bw_reps, cfg_.quick ? " (--quick)" : "");
    std::printf("load average (1 min): %s at start, %s at end; on a busy 2-core machine figures are noisy\n",
                load_start_.c_str(), load_average().c_str());
    std::printf("ratio: ours vs peer, >1 means ours is better (peer/ours for us, ours/peer for GB/s)\n\n");
    const char* hdr = "%-41s %-5s %-26s %-26s %-8s %-10s %-19s %s\n";
    std::printf(hdr, "metric", "unit", "ours", "peer (PoCL)", "ratio", "seed ref", "target", "met");
    std::printf("%s\n", std::string(153, '-').c_str());
    for (const Row& r : rows_) {
        // A missing or failed peer gets a short cell; the reason is printed under the table.
        std::string peer = r.peer                               ? fmt_stat(r.peer)
                           : r.peer_note.rfind("error", 0) == 0 ? "error (see below)"
                           : r.peer_note.rfind("missing", 0) == 0 ? "missing"
                                                                  : "-";
        auto q = ratio(r);
        std::string rat = q ? fmt_num(*q) + "x" : "-";
        const std::string verdict = verdict_of(r);
        std::printf(hdr, r.label.c_str(), r.unit.c_str(), fmt_stat(r.ours).c_str(), peer.c_str(), rat.c_str(),
                    r.seed.c_str(), r.target.c_str(), verdict.c_str());
        for (const PeerCell& o : r.others) {
            const auto q2 = ratio(r, o.stat);
            const std::string cell = o.stat ? fmt_stat(o.stat) : o.note.rfind("error", 0) == 0 ? "error (see below)"
                                                                                               : "missing";
            std::printf(hdr, ("  + " + o.name.substr(0, o.name.find(' '))).c_str(), r.unit.c_str(), "", cell.c_str(),
                        q2 ? (fmt_num(*q2) + "x").c_str() : "-", "", "", "");
        }
    }
    if (best_host_copy_gbps_ > 0) {
        std::printf("\nbest host copy baseline: %s GB/s; ours reaches", fmt_num(best_host_copy_gbps_).c_str());
        for (const Row& r : rows_)
            if (r.metric.find("_bandwidth") != std::string::npos && r.ours)
                std::printf(" %s %.2fx", r.metric.substr(0, 3).c_str(), r.ours->median / best_host_copy_gbps_);
        std::printf(" of it\n");
    }
    if (!peer_missing_.empty()) std::printf("\nnote: peer OpenCL (PoCL) missing: %s\n", peer_missing_.c_str());
    // Rows with peers of their own: what each peer is (once per peer), and why one has no figure.
    std::vector<std::string> described;
    auto describe = [&](const std::string& what) {
        if (std::find(described.begin(), described.end(), what) != described.end()) return;
        described.push_back(what);
        std::printf("note: %s\n", what.c_str());
    };
    const std::string pocl_missing = "missing: " + peer_missing_;  // already said above
    for (const Row& r : rows_) {
        if (r.peer_note.rfind("error", 0) == 0) std::printf("note: peer %s: %s\n", r.metric.c_str(), r.peer_note.c_str());
        else if (!r.peer_name.empty() && !r.peer_note.empty() && r.peer_note != pocl_missing)
            std::printf("note: peer %s: %s\n", r.metric.c_str(), r.peer_note.c_str());
        if (!r.peer_name.empty() && r.peer) describe("peer (PoCL) of " + r.metric + ": " + r.peer_name);
        for (const PeerCell& o : r.others) {
            if (o.stat) describe("+ " + o.name);
            else if (o.note != pocl_missing) describe(r.metric + ": + " + o.name + ": " + o.note);
        }
    }
}

void Bench::print_sweep() const {
    std::printf("\nbandwidth vs size (GB/s, median of per-copy enqueue+sync; small sizes show latency, and\n"
                "memcpy2t at small sizes shows the release of two waiting threads, not the copy)\n");
    std::printf("%12s %9s %9s %9s %9s %9s %9s %9s %9s\n", "bytes", "ours H2D", "ours D2H", "ours D2D", "PoCL H2D",
                "PoCL D2H", "PoCL D2D", "memcpy1t", "memcpy2t");
    // 5 records per size, in the order H2D, D2H, D2D, memcpy 1t, memcpy 2t.
    for (std::size_t i = 0; i + 5 <= sweep_.size(); i += 5) {
        auto v = [](const std::optional<Stat>& s) { return s ? fmt_num(s->median) : std::string("-"); };
        std::printf("%12zu %9s %9s %9s %9s %9s %9s %9s %9s\n", sweep_[i].bytes, v(sweep_[i].ours).c_str(),
                    v(sweep_[i + 1].ours).c_str(), v(sweep_[i + 2].ours).c_str(), v(sweep_[i].peer).c_str(),
                    v(sweep_[i + 1].peer).c_str(), v(sweep_[i + 2].peer).c_str(), v(sweep_[i + 3].ours).c_str(),
                    v(sweep_[i + 4].ours).c_str());
    }
}

void Bench::print_json() const {
    const std::string dev = json_escape(std::string(prop_.backend) + ":" + std::to_string(prop_.backend_ordinal));
    const std::string dev_name = json_escape(device_name_);
    const std::string peer = peer_missing_.empty() ? json_escape(peer_name_) : std::string();
    auto num = [](double v) {
        char b[40];
        std::snprintf(b, sizeof b, "%.6g", v);
        return std::string(b);
    };
    std::printf("[\n");
    bool first = true;
    auto emit = [&](const Row& r) {
        const std::string row_peer = r.peer_name.empty() ? peer : json_escape(r.peer_name);
        std::printf("%s  {\"metric\": \"%s\", \"device\": \"%s\", \"value\": %s, \"unit\": \"%s\", \"min\": %s, "
                    "\"max\": %s, \"peer\": %s, \"peer_value\": %s",
                    first ? "" : ",\n", r.metric.c_str(), dev.c_str(), r.ours ? num(r.ours->median).c_str() : "null",
                    r.unit.c_str(), r.ours ? num(r.ours->min).c_str() : "null",
                    r.ours ? num(r.ours->max).c_str() : "null",
                    r.peer ? ("\"" + row_peer + "\"").c_str() : "null", r.peer ? num(r.peer->median).c_str() : "null");
        if (r.peer) std::printf(", \"peer_min\": %s, \"peer_max\": %s", num(r.peer->min).c_str(), num(r.peer->max).c_str());
        if (r.bytes) std::printf(", \"bytes\": %zu", r.bytes);
        std::printf(", \"device_name\": \"%s\", \"label\": \"%s\", \"seed\": \"%s\", \"target\": \"%s\", \"met\": \"%s\"",
                    dev_name.c_str(), json_escape(r.label).c_str(), json_escape(r.seed).c_str(),
                    json_escape(r.target).c_str(), json_escape(verdict_of(r)).c_str());
        if (!r.peer && !r.peer_note.empty() && r.peer_note != "-")
            std::printf(", \"peer_note\": \"%s\"", json_escape(r.peer_note).c_str());
        if (!r.others.empty()) {
            // The same records as runtime-bench's numpy peer: {peer, value, min, max}, or {peer, note}.
            std::printf(", \"other_peers\": [");
            for (std::size_t i = 0; i < r.others.size(); ++i) {
                const PeerCell& o = r.others[i];
                std::printf("%s{\"peer\": \"%s\"", i ? ", " : "", json_escape(o.name).c_str());
                if (o.stat)
                    std::printf(", \"value\": %s, \"min\": %s, \"max\": %s", num(o.stat->median).c_str(),
                                num(o.stat->min).c_str(), num(o.stat->max).c_str());
                else
                    std::printf(", \"value\": null, \"note\": \"%s\"", json_escape(o.note).c_str());
                std::printf("}");
            }
            std::printf("]");
        }
        std::printf("}");
        first = false;
    };
    for (const Row& r : rows_) emit(r);
    for (const Row& r : sweep_) emit(r);
    std::printf("\n]\n");
}

int Bench::run() {
    load_start_ = load_average();
    setup();
    // Progress goes to stderr (stdout carries the table or the JSON).
    std::fprintf(stderr, "runtime-bench-core: measuring on %s: copy latency and event round trips ...\n",
                 device_name_.c_str());
    const bool all = !cfg_.only_groups && !cfg_.only_graphs && !cfg_.only_trace;
    if (all) latency_rows();  // includes the event round trips
    if (all || cfg_.only_trace) kernel_rows();
    if (all || cfg_.only_groups) group_rows();
    if (all || cfg_.only_graphs) {
        graph_rows();
        graph_peer_rows();
    }
    if (all) {
        std::fprintf(stderr, "runtime-bench-core: 256 MiB bandwidth ...\n");
        bandwidth_rows();
    }
    if (cfg_.sweep && all) {
        std::fprintf(stderr, "runtime-bench-core: bandwidth sweep 4 B .. 256 MiB ...\n");
        sweep_rows();
    }
    teardown();
    if (cfg_.json) {
        print_json();
    } else {
        print_table();
        if (cfg_.sweep) print_sweep();
    }
    std::fflush(stdout);
    return 0;
}

/// `--list-devices`: a JSON array of {"index", "device" ("cpu:0"), "name", "backend"}.
int list_devices() {
    int count = 0;
    RT_CHECK(rtGetDeviceCount(&count));
    std::printf("[");
    for (int i = 0; i < count; ++i) {
        rtDeviceProp p{};
        RT_CHECK(rtGetDeviceProperties(&p, i));
        std::printf("%s\n  {\"index\": %d, \"device\": \"%s:%d\", \"name\": \"%s\", \"backend\": \"%s\"}",
                    i ? "," : "", i, json_escape(p.backend).c_str(), p.backend_ordinal, json_escape(p.name).c_str(),
                    json_escape(p.backend).c_str());
    }
    std::printf("\n]\n");
    return 0;
}

/// `--device`: an index ("0") or a device string ("cpu:0", "cuda:1"); -1 (message printed) if unknown.
int parse_device(const std::string& spec) {
    char* end = nullptr;
    const long d = std::strtol(spec.c_str(), &end, 10);
    if (!spec.empty() && end && *end == '\0') {
        if (d >= 0 && d <= 1 << 20) return static_cast<int>(d);
    } else {
        int count = 0;
        RT_CHECK(rtGetDeviceCount(&count));
        std::string known;
        for (int i = 0; i < count; ++i) {
            rtDeviceProp p{};
            RT_CHECK(rtGetDeviceProperties(&p, i));
            const std::string name = std::string(p.backend) + ":" + std::to_string(p.backend_ordinal);
            if (spec == name || (spec == p.backend && p.backend_ordinal == 0)) return i;
            known += (known.empty() ? "" : ", ") + name;
        }
        std::fprintf(stderr, "runtime-bench-core: --device '%s': no such device (available: %s)\n", spec.c_str(),
                     known.c_str());
        return -1;
    }
    std::fprintf(stderr, "runtime-bench-core: --device expects an index or a device like cpu:0, got '%s'\n",
                 spec.c_str());
    return -1;
}

void usage(const char* argv0) {
    std::printf(
        "usage: %s [--quick] [--json] [--sweep] [--device N|cpu:0] [--list-devices] [--only groups|graphs|trace]\n"
        "  --quick     fewer repetitions (< 40 s)\n"
        "  --json      print an array of records {metric, device, value, unit, min, max, peer, peer_value}\n"
        "  --sweep     also measure bandwidth for 4 B .. 256 MiB in x4 steps (ours, PoCL, memcpy)\n"
        "  --device N  runtime device index or device string like cpu:0 (default 0)\n"
        "  --list-devices  print the devices as JSON and exit\n"
        "  --only trace    only batched_launch and the trace's cost rows (batched_launch_traced,\n"
        "                  trace_cost_per_launch)\n"
        "  --only groups   only the work-group kernel rows (bench/kernels/work_groups.{cpp,cl})\n"
        "  --only graphs   only the graph rows (replay of 1,000 kernels, instantiate, updates; against PoCL's\n"
        "                  command buffer, oneTBB flow_graph; the seed pipeline as a graph vs streams)\n"
        "exit status: 0 ok, 1 a runtime call failed (its error name and message are printed), 2 wrong data\n",
        argv0);
}

}  // namespace
}  // namespace rtbench

int main(int argc, char** argv) {
    // Hidden: the fresh process of jit_cached (run by the benchmark itself).
    if (argc >= 4 && std::string(argv[1]) == "--jit-child") {
        const int device = argc >= 6 && std::string(argv[4]) == "--device" ? std::atoi(argv[5]) : 0;
        return rtbench::jit_child(argv[2], argv[3], device);
    }
    rtbench::Config cfg;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--quick") {
            cfg.quick = true;
        } else if (a == "--json") {
            cfg.json = true;
        } else if (a == "--sweep") {
            cfg.sweep = true;
        } else if (a == "--only" && i + 1 < argc && std::string(argv[i + 1]) == "groups") {
            cfg.only_groups = true;
            ++i;
        } else if (a == "--only" && i + 1 < argc && std::string(argv[i + 1]) == "graphs") {
            cfg.only_graphs = true;
            ++i;
        } else if (a == "--only" && i + 1 < argc && std::string(argv[i + 1]) == "trace") {
            cfg.only_trace = true;
            ++i;
        } else if (a == "--list-devices") {
            return rtbench::list_devices();
        } else if (a == "--device" && i + 1 < argc) {
            const int d = rtbench::parse_device(argv[++i]);
            if (d < 0) return 1;
            cfg.device = d;
        } else if (a == "--help" || a == "-h") {
            rtbench::usage(argv[0]);
            return 0;
        } else {
            std::fprintf(stderr, "runtime-bench-core: unknown argument '%s'\n", a.c_str());
            rtbench::usage(argv[0]);
            return 1;
        }
    }
    if (cfg.quick) {
        cfg.lat_runs = 9;
        cfg.lat_iters = 100;
        cfg.lat_warmup = 200;
        cfg.bw_reps = 4;
        cfg.batch_runs = 5;
        cfg.kernel_runs = 5;
        cfg.alloc_iters = 100;
        cfg.jit_reps = 3;
        cfg.reload_runs = 5;
        cfg.group_runs = 5;
        cfg.graph_runs = 5;
    }
    // A cuda device is compared with the raw driver API (peer_cuda.cpp); the cpu rows and the PoCL peer are for cpu.
    rtDeviceProp prop{};
    if (rtGetDeviceProperties(&prop, cfg.device) == RT_SUCCESS && std::string(prop.backend) == "cuda")
        return rtbench::run_cuda_peer(cfg.device, cfg.quick, cfg.only_graphs);
    return rtbench::Bench(cfg).run();
}
