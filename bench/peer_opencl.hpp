// peer_opencl.hpp — the OpenCL (PoCL) peer of runtime-bench-core: the same copies, event hand-offs, kernels and builds via OpenCL.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "graph_shape.hpp"

namespace rtbench {

/// Thrown by every OpenCL peer call that fails; the message names the OpenCL call and its error.
struct PeerError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// "u_<hash of tag>": the name of an extra empty kernel that makes a source unique. A comment is
/// not enough: PoCL hashes the preprocessed source, which has no comments.
std::string unique_kernel_name(const std::string& tag);

/// The OpenCL C source of the peer's kernels: `empty()` and `twice(in, out, n)` (out[i] = in[i] * 2),
/// plus an empty kernel named unique_kernel_name(tag), so a new tag defeats every cache.
std::string opencl_kernel_source(const std::string& tag);

/// One OpenCL device with two in-order queues (A, B) and two device buffers (0, 1).
/// Copies on queue A are the peer of `rtMemcpyAsync` on one stream; clFinish is the peer of
/// rtStreamSynchronize. libOpenCL is opened with dlopen at run time (no link-time dependency), so
/// the benchmark runs on machines without OpenCL. Not thread-safe; used from the main thread only.
class OpenClPeer {
public:
    /// The first OpenCL platform that has a device (CPU devices preferred); nullptr with the
    /// reason in `why_not` when there is none (no libOpenCL, no ICD/platform, no device).
    static std::unique_ptr<OpenClPeer> open(std::string* why_not);
    ~OpenClPeer();
    OpenClPeer(const OpenClPeer&) = delete;
    OpenClPeer& operator=(const OpenClPeer&) = delete;

    /// "OpenCL 3.0 PoCL ... / pthread-haswell-..." — platform version and device name.
    const std::string& name() const;
    /// (Re)allocates buffers 0 and 1 with `bytes` each; throws PeerError (e.g. above max alloc size).
    void reserve(std::size_t bytes);

    /// Non-blocking enqueues on queue A (host memory must stay valid until finish()).
    void write(int buf, const void* host, std::size_t n);
    void read(int buf, void* host, std::size_t n);
    void copy(int src_buf, int dst_buf, std::size_t n);
    /// clFinish(queue A).
    void finish();

    /// Blocking helpers for verification (not timed).
    void write_sync(int buf, const void* host, std::size_t n);
    void read_sync(int buf, void* host, std::size_t n);
    void zero(int buf, std::size_t n);

    /// One event round trip: [4-byte write host4 → buffer 0 on queue A if copy_on_a], marker on A,
    /// 4-byte write host4 → buffer 1 on queue B waiting for the marker, clFinish(B).
    void event_roundtrip(const void* host4, bool copy_on_a);

    /// Builds opencl_kernel_source("resident") once and keeps its kernels (untimed set-up).
    void load_kernels();
    /// Enqueues the empty kernel over 1 work-item on queue A (no finish).
    void launch_empty();
    /// Enqueues twice(buffer 0 → buffer 1, n floats) on queue A, work-groups of `local` items
    /// (global size rounded up to a multiple of it), no finish.
    void launch_twice(unsigned n, std::size_t local);
    /// clCreateBuffer(`bytes`) + clReleaseMemObject: the peer of rtMalloc + rtFree.
    void alloc_free(std::size_t bytes);
    /// Seconds from clCreateProgramWithSource(source) through clBuildProgram, clCreateKernel("twice")
    /// and a first launch over 1 work-item to clFinish: until the kernel has run once (PoCL generates
    /// a kernel's work-group code at its first launch, so the build alone would flatter it).
    /// Needs buffers 0 and 1 (reserve). The program is released afterwards.
    double build_and_run_once_seconds(const std::string& source);

    // ---- work-group kernels (bench/kernels/work_groups.cl)
    /// Builds `source` once (later calls do nothing) and keeps its kernels by name.
    void load_group_kernels(const std::string& source);
    /// A buffer of its own (index 2, 3, ...: write_sync/read_sync take it); the peer keeps it until destroyed.
    int add_buffer(std::size_t bytes);
    /// An argument of run_group_kernel: a buffer (its index), or the bytes of a scalar.
    struct Arg {
        int buffer = -1;
        unsigned scalar = 0;
    };
    /// Enqueues kernel `name` on queue A over global[0..dims) items in groups of local[0..dims), no finish.
    void run_group_kernel(const std::string& name, const std::vector<Arg>& args, unsigned dims,
                          const std::size_t* global, const std::size_t* local);

    // ---- graphs of empty kernels (the graph peer rows, bench_graph_peers.cpp)
    /// Empty when the device has cl_khr_command_buffer with out-of-order command buffers and the platform gives its
    /// entry points; otherwise why not (the rows then measure run_graph_calls alone).
    std::string command_buffer_missing() const;
    /// Builds the graph kernels once: `empty()` and `count(c)` (an atomic increment of one uint).
    void load_graph_kernels();
    /// Records `shape` into a new command buffer on the out-of-order queue, one command per node (`empty()`, or
    /// `count` of the graph counter when `counting`), one sync point per edge, and finalizes it. Returns its index.
    int record_graph(const GraphShape& shape, bool counting);
    /// clEnqueueCommandBufferKHR of recorded graph `index`, then clFinish.
    void replay_graph(int index);
    /// The same nodes enqueued one call at a time, then clFinish: a chain on in-order queue A (the queue orders it),
    /// a fan-out on the out-of-order queue, each node waiting for its dependencies' events.
    void run_graph_calls(const GraphShape& shape, bool counting);
    /// The graph counter (blocking read; 0 before the first counting run), and its reset to 0.
    unsigned graph_counter();
    void reset_graph_counter();

private:
    struct Impl;
    explicit OpenClPeer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace rtbench
