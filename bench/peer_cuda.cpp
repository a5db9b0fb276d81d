// peer_cuda.cpp — runtime-bench-core on a cuda device: the runtime and the raw CUDA driver API side by side, in one process.
// Rows: launch + synchronize, 10,000 launches + one synchronize, pinned H2D/D2H and D2D copies of 256 MiB, and graph
// replays (a 1,000-kernel chain, a 1,000-node fan-out/fan-in, a 10-kernel chain + synchronize) against native CUDA
// graphs of the same nodes, each with the ratio to the raw driver and the target. The driver is dlopen'ed (libcuda.so.1 or
// $RUNTIME_CUDA_DRIVER_LIB) like the runtime's own shim; without CUDA headers at build time this section is absent.
#include "peer_cuda.hpp"

#include <runtime/runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#ifdef RUNTIME_BENCH_HAVE_CUDA
#include <cuda.h>
#include <dlfcn.h>
#endif

namespace rtbench {

#ifndef RUNTIME_BENCH_HAVE_CUDA
int run_cuda_peer(int, bool, bool) {
    std::fprintf(stderr, "runtime-bench-core: built without the CUDA headers: no cuda comparison\n");
    return 1;
}
#else
namespace {

using Clock = std::chrono::steady_clock;

struct Raw {
#define RT_RAW_(name) decltype(&::name) name = nullptr
    RT_RAW_(cuInit);
    RT_RAW_(cuDeviceGet);
    RT_RAW_(cuDevicePrimaryCtxRetain);
    RT_RAW_(cuCtxSetCurrent);
    RT_RAW_(cuStreamCreate);
    RT_RAW_(cuStreamDestroy);
    RT_RAW_(cuStreamSynchronize);
    RT_RAW_(cuModuleLoadData);
    RT_RAW_(cuModuleGetFunction);
    RT_RAW_(cuLaunchKernel);
    RT_RAW_(cuMemAlloc);
    RT_RAW_(cuMemFree);
    RT_RAW_(cuMemHostAlloc);
    RT_RAW_(cuMemFreeHost);
    RT_RAW_(cuMemcpyHtoDAsync);
    RT_RAW_(cuMemcpyDtoHAsync);
    RT_RAW_(cuMemcpyDtoDAsync);
    // graphs (optional: without them the graph rows say so)
    RT_RAW_(cuGraphCreate);
    RT_RAW_(cuGraphDestroy);
    RT_RAW_(cuGraphAddKernelNode);
    RT_RAW_(cuGraphInstantiateWithFlags);
    RT_RAW_(cuGraphLaunch);
    RT_RAW_(cuGraphExecDestroy);
#undef RT_RAW_
    bool graphs = false;
};

#define RT_STR2_(x) #x
#define RT_STR_(x) RT_STR2_(x)

bool open_raw(Raw& r, std::string& why) {
    const char* env = std::getenv("RUNTIME_CUDA_DRIVER_LIB");
    void* h = dlopen(env && *env ? env : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        why = dlerror();
        return false;
    }
    bool ok = true;
#define RT_SYM_(name) ok = ok && (r.name = reinterpret_cast<decltype(r.name)>(dlsym(h, RT_STR_(name)))) != nullptr
    RT_SYM_(cuInit);
    RT_SYM_(cuDeviceGet);
    RT_SYM_(cuDevicePrimaryCtxRetain);
    RT_SYM_(cuCtxSetCurrent);
    RT_SYM_(cuStreamCreate);
    RT_SYM_(cuStreamDestroy);
    RT_SYM_(cuStreamSynchronize);
    RT_SYM_(cuModuleLoadData);
    RT_SYM_(cuModuleGetFunction);
    RT_SYM_(cuLaunchKernel);
    RT_SYM_(cuMemAlloc);
    RT_SYM_(cuMemFree);
    RT_SYM_(cuMemHostAlloc);
    RT_SYM_(cuMemFreeHost);
    RT_SYM_(cuMemcpyHtoDAsync);
    RT_SYM_(cuMemcpyDtoHAsync);
    RT_SYM_(cuMemcpyDtoDAsync);
    bool graphs = true;
    auto opt = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
        graphs = graphs && fn;
    };
    opt(r.cuGraphCreate, RT_STR_(cuGraphCreate));
    opt(r.cuGraphDestroy, RT_STR_(cuGraphDestroy));
    opt(r.cuGraphAddKernelNode, RT_STR_(cuGraphAddKernelNode));
    opt(r.cuGraphInstantiateWithFlags, RT_STR_(cuGraphInstantiateWithFlags));
    opt(r.cuGraphLaunch, RT_STR_(cuGraphLaunch));
    opt(r.cuGraphExecDestroy, RT_STR_(cuGraphExecDestroy));
    r.graphs = graphs;
#undef RT_SYM_
    if (!ok) why = "a driver symbol is missing";
    return ok && r.cuInit(0) == CUDA_SUCCESS;
}

/// Stops the benchmark on any failure with the call's text.
#define RC_(call)                                                                                      \
    do {                                                                                               \
        rtError_t e_ = (call);                                                                         \
        if (e_ != RT_SUCCESS) {                                                                        \
            std::fprintf(stderr, "%s failed: %s: %s\n", #call, rtGetErrorName(e_), rtGetLastErrorMessage()); \
            std::exit(1);                                                                              \
        }                                                                                              \
    } while (0)
#define CC_(call)                                                                  \
    do {                                                                           \
        CUresult r_ = (call);                                                      \
        if (r_ != CUDA_SUCCESS) {                                                  \
            std::fprintf(stderr, "%s failed: CUresult %d\n", #call, static_cast<int>(r_)); \
            std::exit(1);                                                          \
        }                                                                          \
    } while (0)

/// Median of `runs` samples of fn() (seconds).
template <class F>
double median_of(int runs, F&& fn) {
    std::vector<double> v;
    for (int i = 0; i < runs; ++i) {
        auto t0 = Clock::now();
        fn();
        v.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

void row(const char* metric, double ours, double raw, const char* unit, bool higher_better, double target) {
    double ratio = ours / raw;
    bool ok = higher_better ? ratio >= target : ratio <= target;
    std::printf("%-34s %12.3f %12.3f %-6s %7.3fx  target %s%.2fx  %s\n", metric, ours, raw, unit, ratio,
                higher_better ? ">=" : "<=", target, ok ? "ok" : "MISSED");
}

const char* kEmptyPtx =
    ".version 7.0\n.target sm_50\n.address_size 64\n.visible .entry empty()\n{\n\tret;\n}\n";

/// The shape of a graph row: a chain (each node after the one before), or a fan-out/fan-in (one root, the others
/// after it, one join after all of them).
enum class Shape { chain, fan };

/// The dependencies of node `i` of `n` in `shape`, as indices.
std::vector<size_t> deps_of(Shape shape, size_t i, size_t n) {
    if (i == 0) return {};
    if (shape == Shape::chain || i < n - 1) return {shape == Shape::chain ? i - 1 : 0};
    std::vector<size_t> all;
    for (size_t j = 1; j < n - 1; ++j) all.push_back(j);
    return all;
}

/// One graph row: `n` empty one-thread kernels in `shape`, as an executable graph of the runtime (rtGraph*) and as
/// a native CUDA graph of the same nodes (raw driver); per replay, `reps` replays then one synchronize (`sync_each`:
/// a synchronize after every replay), the two alternated run by run.
void graph_row(const Raw& raw, const char* metric, Shape shape, size_t n, int runs, int reps, bool sync_each,
               rtFunction_t fn, CUfunction rfn, rtStream_t s, CUstream rs) {
    rtGraph_t g = nullptr;
    RC_(rtGraphCreate(&g, 0));
    std::vector<rtGraphNode_t> ours(n);
    rtKernelNodeParams kp{};
    kp.function = fn;
    kp.grid = rtDim3{1, 1, 1};
    kp.block = rtDim3{1, 1, 1};
    CUgraph rg = nullptr;
    CC_(raw.cuGraphCreate(&rg, 0));
    std::vector<CUgraphNode> theirs(n);
    CUDA_KERNEL_NODE_PARAMS rp{};
    rp.func = rfn;
    rp.gridDimX = rp.gridDimY = rp.gridDimZ = 1;
    rp.blockDimX = rp.blockDimY = rp.blockDimZ = 1;
    for (size_t i = 0; i < n; ++i) {
        std::vector<rtGraphNode_t> d;
        std::vector<CUgraphNode> rd;
        for (size_t j : deps_of(shape, i, n)) {
            d.push_back(ours[j]);
            rd.push_back(theirs[j]);
        }
        RC_(rtGraphAddKernelNode(&ours[i], g, d.data(), d.size(), &kp));
        CC_(raw.cuGraphAddKernelNode(&theirs[i], rg, rd.data(), rd.size(), &rp));
    }
    rtGraphExec_t x = nullptr;
    RC_(rtGraphInstantiate(&x, g, 0));
    CUgraphExec rx = nullptr;
    CC_(raw.cuGraphInstantiateWithFlags(&rx, rg, 0));
    auto ours_run = [&] {
        for (int i = 0; i < reps; ++i) {
            RC_(rtGraphLaunch(x, s));
            if (sync_each) RC_(rtStreamSynchronize(s));
        }
        RC_(rtStreamSynchronize(s));
    };
    auto raw_run = [&] {
        for (int i = 0; i < reps; ++i) {
            CC_(raw.cuGraphLaunch(rx, rs));
            if (sync_each) CC_(raw.cuStreamSynchronize(rs));
        }
        CC_(raw.cuStreamSynchronize(rs));
    };
    ours_run();  // warm-up both (first launches upload the graphs)
    raw_run();
    std::vector<double> a, b;
    for (int r = 0; r < runs; ++r) {
        a.push_back(median_of(1, ours_run));
        b.push_back(median_of(1, raw_run));
    }
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    row(metric, a[a.size() / 2] / reps * 1e6, b[b.size() / 2] / reps * 1e6, "us", false, 1.1);
    RC_(rtGraphExecDestroy(x));
    RC_(rtGraphDestroy(g));
    raw.cuGraphExecDestroy(rx);
    raw.cuGraphDestroy(rg);
}

}  // namespace

int run_cuda_peer(int device, bool quick, bool graphs_only) {
    rtDeviceProp prop{};
    RC_(rtGetDeviceProperties(&prop, device));
    RC_(rtSetDevice(device));
    Raw raw;
    std::string why;
    if (!open_raw(raw, why)) {
        std::fprintf(stderr, "runtime-bench-core: cannot open the CUDA driver for the raw peer: %s\n", why.c_str());
        return 1;
    }
    std::printf("cuda comparison on %s (device %d): the runtime vs the raw CUDA driver API, same process\n", prop.name,
                device);
    std::printf("%-34s %12s %12s %-6s %8s\n", "metric", "runtime", "raw driver", "unit", "ratio");

    // ---- runtime side
    rtModule_t mod = nullptr;
    RC_(rtModuleLoadSource(&mod, "RT_KERNEL void empty() {}\n", nullptr));
    rtFunction_t fn = nullptr;
    RC_(rtModuleGetFunction(&fn, mod, "empty"));
    rtStream_t s = nullptr;
    RC_(rtStreamCreate(&s));
    // ---- raw side, on the same primary context
    CUdevice dev;
    CUcontext ctx;
    CC_(raw.cuDeviceGet(&dev, prop.backend_ordinal));
    CC_(raw.cuDevicePrimaryCtxRetain(&ctx, dev));
    CC_(raw.cuCtxSetCurrent(ctx));
    CUmodule rmod;
    CUfunction rfn;
    CC_(raw.cuModuleLoadData(&rmod, kEmptyPtx));
    CC_(raw.cuModuleGetFunction(&rfn, rmod, "empty"));
    CUstream rs;
    CC_(raw.cuStreamCreate(&rs, CU_STREAM_NON_BLOCKING));

    const rtDim3 one{1, 1, 1};
    const int iters = quick ? 2000 : 10000, runs = quick ? 5 : 11, batch = 10000;
    // ---- graphs: the runtime's replay (lowered to a native CUDA graph) against the same nodes built with the driver
    auto graph_rows = [&] {
        if (!raw.graphs) {
            std::printf("(graph rows: the driver has no cuGraph* entry points)\n");
            return;
        }
        const int reps = quick ? 20 : 100;
        graph_row(raw, "graph replay, 1,000-kernel chain", Shape::chain, 1000, runs, reps, false, fn, rfn, s, rs);
        graph_row(raw, "graph replay, 1,000-node fan-out/in", Shape::fan, 1000, runs, reps, false, fn, rfn, s, rs);
        graph_row(raw, "graph of 10 kernels: launch + sync", Shape::chain, 10, runs, reps * 10, true, fn, rfn, s, rs);
    };
    if (graphs_only) {
        graph_rows();
        raw.cuStreamDestroy(rs);
        RC_(rtStreamDestroy(s));
        RC_(rtModuleUnload(mod));
        return 0;
    }
    for (int i = 0; i < 1000; ++i) {  // warm-up both
        RC_(rtLaunchKernel(fn, one, one, nullptr, 0, s));
        RC_(rtStreamSynchronize(s));
        CC_(raw.cuLaunchKernel(rfn, 1, 1, 1, 1, 1, 1, 0, rs, nullptr, nullptr));
        CC_(raw.cuStreamSynchronize(rs));
    }
    double ours = median_of(runs, [&] {
        for (int i = 0; i < iters; ++i) {
            RC_(rtLaunchKernel(fn, one, one, nullptr, 0, s));
            RC_(rtStreamSynchronize(s));
        }
    }) / iters * 1e6;
    double theirs = median_of(runs, [&] {
        for (int i = 0; i < iters; ++i) {
            CC_(raw.cuLaunchKernel(rfn, 1, 1, 1, 1, 1, 1, 0, rs, nullptr, nullptr));
            CC_(raw.cuStreamSynchronize(rs));
        }
    }) / iters * 1e6;
    row("launch + synchronize", ours, theirs, "us", false, 1.1);
    ours = median_of(runs, [&] {
        for (int i = 0; i < batch; ++i) RC_(rtLaunchKernel(fn, one, one, nullptr, 0, s));
        RC_(rtStreamSynchronize(s));
    }) / batch * 1e6;
    theirs = median_of(runs, [&] {
        for (int i = 0; i < batch; ++i) CC_(raw.cuLaunchKernel(rfn, 1, 1, 1, 1, 1, 1, 0, rs, nullptr, nullptr));
        CC_(raw.cuStreamSynchronize(rs));
    }) / batch * 1e6;
    row("10,000 launches + 1 sync (per op)", ours, theirs, "us", false, 1.1);
    graph_rows();

    // ---- copies: 256 MiB, pinned host memory on both sides
    const size_t n = size_t{256} << 20;
    const int reps = quick ? 5 : 11;
    void *host = nullptr, *d0 = nullptr, *d1 = nullptr;
    RC_(rtMallocHost(&host, n));
    RC_(rtMalloc(&d0, n));
    RC_(rtMalloc(&d1, n));
    void* rhost = nullptr;
    CUdeviceptr r0, r1;
    CC_(raw.cuMemHostAlloc(&rhost, n, CU_MEMHOSTALLOC_PORTABLE));
    CC_(raw.cuMemAlloc(&r0, n));
    CC_(raw.cuMemAlloc(&r1, n));
    std::fill_n(static_cast<char*>(host), n, 1);
    std::fill_n(static_cast<char*>(rhost), n, 1);
    auto gbps = [&](double seconds) { return static_cast<double>(n) / seconds / 1e9; };
    struct Copy {
        const char* name;
        rtMemcpyKind kind;
        void* dst;
        const void* src;
        double target;
    } copies[] = {{"pinned H2D 256 MiB", RT_MEMCPY_HOST_TO_DEVICE, d0, host, 0.95},
                  {"pinned D2H 256 MiB", RT_MEMCPY_DEVICE_TO_HOST, host, d0, 0.95},
                  {"D2D 256 MiB", RT_MEMCPY_DEVICE_TO_DEVICE, d1, d0, 0.95}};
    for (const Copy& c : copies) {
        auto once_ours = [&] {
            RC_(rtMemcpyAsync(c.dst, c.src, n, c.kind, s));
            RC_(rtStreamSynchronize(s));
        };
        auto once_raw = [&] {
            if (c.kind == RT_MEMCPY_HOST_TO_DEVICE) CC_(raw.cuMemcpyHtoDAsync(r0, rhost, n, rs));
            else if (c.kind == RT_MEMCPY_DEVICE_TO_HOST) CC_(raw.cuMemcpyDtoHAsync(rhost, r0, n, rs));
            else CC_(raw.cuMemcpyDtoDAsync(r1, r0, n, rs));
            CC_(raw.cuStreamSynchronize(rs));
        };
        once_ours();
        once_raw();
        // Alternate the two so clock and thermal drift hit both alike; best of each.
        double best_ours = 1e30, best_raw = 1e30;
        for (int i = 0; i < reps; ++i) {
            best_ours = std::min(best_ours, median_of(1, once_ours));
            best_raw = std::min(best_raw, median_of(1, once_raw));
        }
        row(c.name, gbps(best_ours), gbps(best_raw), "GB/s", true, c.target);
    }
    RC_(rtFree(d0));
    RC_(rtFree(d1));
    RC_(rtFreeHost(host));
    raw.cuMemFree(r0);
    raw.cuMemFree(r1);
    raw.cuMemFreeHost(rhost);
    raw.cuStreamDestroy(rs);
    RC_(rtStreamDestroy(s));
    RC_(rtModuleUnload(mod));
    std::printf("(out[i] = in[i] * 2 over 256M floats against CuPy: runtime-bench / bench/bench_python.py)\n");
    return 0;
}
#endif

}  // namespace rtbench
