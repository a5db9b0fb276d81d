// peer_opencl.hpp — the OpenCL (PoCL) peer of runtime-bench-core: the same copies and event hand-offs via OpenCL.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>

namespace rtbench {

/// Thrown by every OpenCL peer call that fails; the message names the OpenCL call and its error.
struct PeerError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// One OpenCL device with two in-order queues (A, B) and two device buffers (0, 1).
/// Copies on queue A are the peer of `rtMemcpyAsync` on one stream; clFinish is the peer of
/// rtStreamSynchronize. Not thread-safe; used from the benchmark's main thread only.
class OpenClPeer {
public:
    /// The first OpenCL platform that has a device (CPU devices preferred); nullptr with the
    /// reason in `why_not` when there is none (no ICD, no platform, no device).
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

private:
    struct Impl;
    explicit OpenClPeer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace rtbench
