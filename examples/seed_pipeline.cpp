// runtime-seed-pipeline — the seed's data flow with the C++ API: pinned host array → H2D on stream 1
// → event → stream 2 waits, runs the work, D2H → one synchronize → verify; prints timings.
//
// Usage: runtime-seed-pipeline [--repeat N]   (default 3 passes; pass 1 includes warm-up costs)
// Exit status: 0 correct, 1 wrong result or runtime error, 2 bad usage / no usable device.
#include <runtime/runtime.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kRows = 1024, kCols = 1024, kCount = kRows * kCols;

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
double gbps(std::size_t bytes, double ms) { return ms > 0 ? bytes / (ms * 1e6) : 0.0; }

// The input value of element i: exact in float, and doubling it is exact, so checks are equality.
float input_value(std::size_t i) { return static_cast<float>(static_cast<int>(i % 4093) - 2000) * 0.25f; }

struct PassTimes {
    float h2d, handoff, work, d2h, device_total; // event-timed, ms
    double enqueue, sync_wait, wall;              // host wall clock, ms
    std::size_t wrong;
};

// One pass of the seed pipeline over buffers that live across passes.
PassTimes run_pass(runtime::PinnedBuffer<float>& host, runtime::PinnedBuffer<float>& result,
                   runtime::DeviceBuffer<float>& dev, runtime::Stream& s1, runtime::Stream& s2) {
    runtime::Event start, h2d_done, work_begin, work_end, end;
    std::fill(result.begin(), result.end(), -1.0f);

    const auto t0 = Clock::now();
    // Stream 1: host → device, then mark "data is on the device".
    s1.record(start);
    dev.copy_from_host(host, s1);
    s1.record(h2d_done);
    // Stream 2: wait for the data (no host blocking), run the work, copy back.
    s2.wait(h2d_done);
    s2.record(work_begin);
    // The work: double every element in place. On a unified-addressing device (cpu) device memory
    // is host-addressable, so a host function can be the "kernel" until JIT kernels land.
    s2.launch_host_func([p = dev.data(), n = dev.size()] {
        for (std::size_t i = 0; i < n; ++i) p[i] *= 2.0f;
    });
    s2.record(work_end);
    dev.copy_to_host(result, s2);
    s2.record(end);
    const double enqueue = ms_since(t0);

    const auto t1 = Clock::now();
    s2.synchronize(); // the ONE synchronize: stream 1's work is ordered before it by the event
    const double sync_wait = ms_since(t1);
    const double wall = ms_since(t0);

    PassTimes t{};
    t.h2d = start.elapsed_ms(h2d_done);
    t.handoff = h2d_done.elapsed_ms(work_begin);
    t.work = work_begin.elapsed_ms(work_end);
    t.d2h = work_end.elapsed_ms(end);
    t.device_total = start.elapsed_ms(end);
    t.enqueue = enqueue;
    t.sync_wait = sync_wait;
    t.wall = wall;

    for (std::size_t i = 0; i < kCount; ++i) {
        if (result[i] != 2.0f * input_value(i)) {
            if (t.wrong < 5)
                std::fprintf(stderr, "  wrong: result[%zu] = %g, expected %g\n", i,
                             static_cast<double>(result[i]), 2.0 * input_value(i));
            ++t.wrong;
        }
    }
    return t;
}

int pick_device() {
    const int current = runtime::current_device();
    if (runtime::device_properties(current).unified_addressing) return current;
    std::printf("note: device %d (%s) does not have unified addressing: its memory is not "
                "host-addressable, so the host-function work cannot run there\n",
                current, runtime::device_properties(current).name.c_str());
    for (int d = 0; d < runtime::device_count(); ++d)
        if (runtime::device_properties(d).unified_addressing) {
            std::printf("note: using device %d instead\n", d);
            return d;
        }
    return -1;
}

} // namespace

int main(int argc, char** argv) {
    int repeat = 3;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
            repeat = std::atoi(argv[++i]);
        } else {
            std::fprintf(stderr, "usage: %s [--repeat N]\n", argv[0]);
            return 2;
        }
    }
    if (repeat < 1) repeat = 1;

    try {
        const auto t_init = Clock::now();
        runtime::init();
        const double init_ms = ms_since(t_init);
        const int device = pick_device();
        if (device < 0) {
            std::fprintf(stderr, "error: no device with unified addressing; the pipeline needs one\n");
            return 2;
        }
        runtime::set_device(device);

        const auto props = runtime::device_properties(device);
        const auto mem = runtime::mem_info();
        std::printf("runtime-seed-pipeline: %d device(s), init %.3f ms\n", runtime::device_count(), init_ms);
        std::printf("device %d: %s\n", device, props.name.c_str());
        std::printf("  backend %s, %d compute units, memory %.2f GiB total / %.2f GiB free, unified addressing %s\n",
                    props.backend.c_str(), props.compute_units, props.total_memory / 1073741824.0,
                    mem.free / 1073741824.0, props.unified_addressing ? "yes" : "no");

        const auto t_setup = Clock::now();
        runtime::PinnedBuffer<float> host(kCount), result(kCount);
        for (std::size_t i = 0; i < kCount; ++i) host[i] = input_value(i);
        runtime::DeviceBuffer<float> dev(kCount);
        runtime::Stream s1, s2;
        const double setup_ms = ms_since(t_setup);
        const std::size_t bytes = dev.bytes();
        std::printf("data: %zux%zu float32 (%.1f MiB), pinned host in/out, 1 device buffer, 2 streams "
                    "(setup %.3f ms)\n",
                    kRows, kCols, bytes / 1048576.0, setup_ms);
        std::printf("flow: s1[H2D] -> event -> s2.wait -> s2[work: x*=2 host func] -> s2[D2H] -> "
                    "s2.synchronize (once) -> verify %zu elements\n\n",
                    kCount);

        std::printf("%-6s %10s %10s %10s %10s %10s %10s | %10s %10s %10s  %s\n", "pass", "H2D ms", "H2D GB/s",
                    "handoff", "work ms", "D2H ms", "D2H GB/s", "enqueue", "sync wait", "wall ms", "result");
        std::size_t wrong_total = 0;
        for (int pass = 1; pass <= repeat; ++pass) {
            const PassTimes t = run_pass(host, result, dev, s1, s2);
            wrong_total += t.wrong;
            std::printf("%-6s %10.3f %10.2f %10.3f %10.3f %10.3f %10.2f | %10.3f %10.3f %10.3f  %s\n",
                        (std::to_string(pass) + (pass == 1 ? "*" : "")).c_str(), t.h2d, gbps(bytes, t.h2d),
                        t.handoff, t.work, t.d2h, gbps(bytes, t.d2h), t.enqueue, t.sync_wait, t.wall,
                        t.wrong ? ("WRONG (" + std::to_string(t.wrong) + ")").c_str() : "ok");
        }
        std::printf("\n* pass 1 includes first-touch and warm-up costs. Event times (H2D..D2H) are device-side\n"
                    "  (elapsed_ms between records); enqueue/sync wait/wall are host wall clock.\n");
        if (wrong_total != 0) {
            std::printf("FAILED: %zu wrong elements\n", wrong_total);
            return 1;
        }
        std::printf("OK: every element equals 2 * input in all %d pass(es)\n", repeat);
        return 0;
    } catch (const runtime::Error& e) {
        std::fprintf(stderr, "runtime error: %s\n", e.what());
        return 1;
    }
}
