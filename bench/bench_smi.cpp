// runtime-bench-smi — what publishing the runtime-smi status file costs: operations per second with RUNTIME_SMI on
// and =0 in the same process (rtInit .. rtFinalize in turn, run by run), and how long a change takes to reach the
// file (docs/observability.md, "runtime-smi").
#include <runtime/runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"

using namespace rtbench;

namespace {

#define CHECK(call)                                                                                        \
    do {                                                                                                  \
        rtError_t e_ = (call);                                                                            \
        if (e_ != RT_SUCCESS) {                                                                           \
            std::fprintf(stderr, "runtime-bench-smi: %s failed: %s\n", #call, rtGetLastErrorMessage()); \
            std::exit(1);                                                                                 \
        }                                                                                                 \
    } while (0)

constexpr int kLaunches = 20000;  // per batch: empty launches, then one synchronize
constexpr int kAllocs = 20000;    // per batch: rtMalloc + rtFree pairs (each changes the published figures)

struct Batches {
    double launch_ns = 0;  // per launch
    double alloc_ns = 0;   // per rtMalloc + rtFree pair
};

/// One runtime with RUNTIME_SMI=`smi`: a batch of launches and a batch of allocations, after a warm-up of each.
Batches measure(bool smi, const std::string& directory) {
    ::setenv("RUNTIME_SMI", smi ? "1" : "0", 1);
    ::setenv("RUNTIME_SMI_DIR", directory.c_str(), 1);
    CHECK(rtInit(nullptr));
    rtModule_t module = nullptr;
    CHECK(rtModuleLoadSource(&module, "RT_KERNEL void empty() {}\n", nullptr));
    rtFunction_t empty = nullptr;
    CHECK(rtModuleGetFunction(&empty, module, "empty"));
    rtStream_t stream = nullptr;
    CHECK(rtStreamCreate(&stream));
    const rtDim3 one{1, 1, 1};
    auto launches = [&] {
        const auto t0 = Clock::now();
        for (int i = 0; i < kLaunches; ++i) CHECK(rtLaunchKernel(empty, one, one, nullptr, 0, stream));
        CHECK(rtStreamSynchronize(stream));
        return seconds_between(t0, Clock::now()) * 1e9 / kLaunches;
    };
    auto allocs = [&] {
        const auto t0 = Clock::now();
        for (int i = 0; i < kAllocs; ++i) {
            void* p = nullptr;
            CHECK(rtMalloc(&p, 4096));
            CHECK(rtFree(p));
        }
        return seconds_between(t0, Clock::now()) * 1e9 / kAllocs;
    };
    launches();
    allocs();
    Batches b;
    b.launch_ns = launches();
    b.alloc_ns = allocs();
    CHECK(rtStreamDestroy(stream));
    CHECK(rtFinalize());
    return b;
}

/// The allocated_bytes of device 0 in the status file at `path`, or -1 when it cannot be read.
long long published_allocated(const std::string& path) {
    std::ifstream f(path);
    if (!f) return -1;
    std::stringstream text;
    text << f.rdbuf();
    const std::string s = text.str();
    const char* key = "\"allocated_bytes\":";
    const size_t at = s.find(key);
    if (at == std::string::npos) return -1;
    return std::atoll(s.c_str() + at + std::strlen(key));
}

/// Milliseconds from an allocation to the status file showing it, `trials` times (RUNTIME_SMI on), each at a new
/// phase of the publisher's period (a pause of 0..~100 ms before the allocation).
std::vector<double> latencies(const std::string& directory, int trials) {
    ::setenv("RUNTIME_SMI", "1", 1);
    ::setenv("RUNTIME_SMI_DIR", directory.c_str(), 1);
    CHECK(rtInit(nullptr));
    const std::string path = directory + "/" + std::to_string(::getpid()) + ".json";
    std::vector<void*> held;
    std::vector<double> ms;
    for (int i = 0; i < trials; ++i) {
        std::this_thread::sleep_for(std::chrono::microseconds(7919 * (i % 13)));
        void* p = nullptr;
        CHECK(rtMalloc(&p, (size_t(i) + 1) << 16));
        const auto t0 = Clock::now();
        held.push_back(p);
        rtMemStats stats{};
        CHECK(rtMemGetStats(&stats));
        const long long want = static_cast<long long>(stats.allocated_bytes);
        while (published_allocated(path) != want) {
            if (seconds_between(t0, Clock::now()) > 5) {
                std::fprintf(stderr, "runtime-bench-smi: %s never showed %lld allocated bytes\n", path.c_str(), want);
                std::exit(1);
            }
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        ms.push_back(seconds_between(t0, Clock::now()) * 1e3);
    }
    for (void* p : held) CHECK(rtFree(p));
    CHECK(rtFinalize());
    return ms;
}

}  // namespace

int main(int argc, char** argv) {
    int runs = 7, trials = 40;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--quick") == 0) {
            runs = 3;
            trials = 13;
        } else {
            std::fprintf(stderr, "usage: runtime-bench-smi [--quick]\n");
            return 2;
        }
    }
    const std::string directory =
        (std::filesystem::temp_directory_path() / ("runtime-bench-smi-" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(directory);
    std::vector<double> on_launch, off_launch, on_alloc, off_alloc, launch_ratio, alloc_ratio;
    measure(true, directory);  // warm-up: the kernel in the disk cache, the pages of the allocator touched
    for (int r = 0; r < runs; ++r) {
        // Run by run in turn, the order alternating: drift of the machine falls on both sides.
        const bool on_first = r % 2 == 0;
        const Batches a = measure(on_first, directory), b = measure(!on_first, directory);
        const Batches& on = on_first ? a : b;
        const Batches& off = on_first ? b : a;
        on_launch.push_back(on.launch_ns);
        off_launch.push_back(off.launch_ns);
        on_alloc.push_back(on.alloc_ns);
        off_alloc.push_back(off.alloc_ns);
        launch_ratio.push_back(on.launch_ns / off.launch_ns);
        alloc_ratio.push_back(on.alloc_ns / off.alloc_ns);
    }
    const std::vector<double> ms = latencies(directory, trials);
    std::filesystem::remove_all(directory);

    auto row = [](const char* metric, const char* unit, const std::vector<double>& v) {
        const Stat s = summarize(v);
        std::printf("%-32s %10.3f %10.3f %10.3f  %-5s (%zu runs)\n", metric, s.median, s.min, s.max, unit, s.samples);
    };
    std::printf("runtime-bench-smi: RUNTIME_SMI=1 vs RUNTIME_SMI=0, %d runs each in turn; %d launches and %d "
                "rtMalloc+rtFree of 4 KiB per batch\n", runs, kLaunches, kAllocs);
    std::printf("%-32s %10s %10s %10s\n", "metric", "median", "min", "max");
    row("smi_launch_on", "ns", on_launch);
    row("smi_launch_off", "ns", off_launch);
    row("smi_launch_ratio", "x", launch_ratio);
    row("smi_alloc_free_on", "ns", on_alloc);
    row("smi_alloc_free_off", "ns", off_alloc);
    row("smi_alloc_free_ratio", "x", alloc_ratio);
    row("smi_update_latency", "ms", ms);
    return 0;
}
