// runtime-seed-pipeline — the seed's data flow with the C++ API: pinned host array → H2D on stream 1
// → event → stream 2 waits, runs the seed's JIT-compiled kernel (output[i] = input[i] * 2), D2H → one
// synchronize → verify; prints timings.
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

// The seed's kernel ("Kernel 执行"), in the kernel dialect: compiled once, cached on disk.
constexpr const char* kSeedKernel = R"(
RT_KERNEL void my_kernel(const float* input_data, float* output_data, int size) {
    int idx = get_global_id(0);
    if (idx < size) output_data[idx] = input_data[idx] * 2.0f;
}
)";
constexpr unsigned kBlock = 256;

// One pass of the seed pipeline over buffers that live across passes.
PassTimes run_pass(runtime::PinnedBuffer<float>& host, runtime::PinnedBuffer<float>& result,
                   runtime::DeviceBuffer<float>& dev, runtime::DeviceBuffer<float>& out,
                   const runtime::Kernel& kernel, runtime::Stream& s1, runtime::Stream& s2) {
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
    // The work: the seed's kernel, one work-item per element.
    const unsigned groups = static_cast<unsigned>((dev.size() + kBlock - 1) / kBlock);
    s2.launch(kernel, {.grid = groups, .block = kBlock}, dev, out, static_cast<int>(dev.size()));
    s2.record(work_end);
    out.copy_to_host(result, s2);
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
        const int device = runtime::current_device();

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
        runtime::DeviceBuffer<float> dev(kCount), out(kCount);
        runtime::Stream s1, s2;
        const double setup_ms = ms_since(t_setup);
        const auto t_compile = Clock::now();
        const runtime::Module module = runtime::Module::from_source(kSeedKernel);
        const runtime::Kernel kernel = module.kernel("my_kernel");
        std::printf("kernel: my_kernel loaded in %.3f ms (compiled, or from the disk cache)\n", ms_since(t_compile));
        const std::size_t bytes = dev.bytes();
        std::printf("data: %zux%zu float32 (%.1f MiB), pinned host in/out, 2 device buffers, 2 streams "
                    "(setup %.3f ms)\n",
                    kRows, kCols, bytes / 1048576.0, setup_ms);
        std::printf("flow: s1[H2D] -> event -> s2.wait -> s2[kernel: out = in * 2] -> s2[D2H] -> "
                    "s2.synchronize (once) -> verify %zu elements\n\n",
                    kCount);

        std::printf("%-6s %10s %10s %10s %10s %10s %10s | %10s %10s %10s  %s\n", "pass", "H2D ms", "H2D GB/s",
                    "handoff", "work ms", "D2H ms", "D2H GB/s", "enqueue", "sync wait", "wall ms", "result");
        std::size_t wrong_total = 0;
        for (int pass = 1; pass <= repeat; ++pass) {
            const PassTimes t = run_pass(host, result, dev, out, kernel, s1, s2);
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
