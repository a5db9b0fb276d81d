// comm_test_util.hpp — what the collectives' test files share: ranks of rtCommInitAll over the process's cpu devices,
// each with a stream, and device buffers.
#pragma once

#include <runtime/comm.h>
#include <runtime/runtime.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "test_util.hpp"

namespace rt_test {

/// The cpu devices of the process (RUNTIME_CPU_DEVICES gives several).
inline std::vector<int> cpu_devices() {
    int n = 0;
    EXPECT_EQ(rtGetDeviceCount(&n), RT_SUCCESS);
    std::vector<int> out;
    for (int d = 0; d < n; ++d) {
        rtDeviceProp p;
        if (rtGetDeviceProperties(&p, d) == RT_SUCCESS && std::strcmp(p.backend, "cpu") == 0) out.push_back(d);
    }
    return out;
}

/// n ranks from rtCommInitAll, rank i on cpu device i mod (the count), each with a stream of its device. Non-blocking
/// streams, as NCCL's users make them: the legacy default stream (Buffer's rtMemcpy) would wait for a collective
/// parked until a rank that the waiting thread itself is to start.
struct Ranks {
    explicit Ranks(int n) {
        const std::vector<int> cpus = cpu_devices();
        for (int i = 0; i < n; ++i) devices.push_back(cpus[static_cast<size_t>(i) % cpus.size()]);
        comms.resize(static_cast<size_t>(n));
        EXPECT_EQ(rtCommInitAll(comms.data(), n, devices.data()), RT_SUCCESS) << last_message();
        for (int d : devices) {
            EXPECT_EQ(rtSetDevice(d), RT_SUCCESS);
            rtStream_t s = nullptr;
            EXPECT_EQ(rtStreamCreateWithFlags(&s, RT_STREAM_NON_BLOCKING), RT_SUCCESS);
            streams.push_back(s);
        }
        rtSetDevice(devices[0]);
    }
    ~Ranks() {
        for (rtComm_t c : comms)
            if (c) rtCommDestroy(c);
        for (rtStream_t s : streams) rtStreamDestroy(s);
    }
    int size() const { return static_cast<int>(comms.size()); }
    /// Synchronizes every rank's stream; returns their results.
    std::vector<rtError_t> sync() const {
        std::vector<rtError_t> out;
        for (rtStream_t s : streams) out.push_back(rtStreamSynchronize(s));
        return out;
    }
    std::vector<int> devices;
    std::vector<rtComm_t> comms;
    std::vector<rtStream_t> streams;
};

/// Device memory of `device`, freed at scope end.
struct Buffer {
    Buffer(int device, size_t bytes) : size(bytes) {
        rtSetDevice(device);
        EXPECT_EQ(rtMalloc(&ptr, bytes ? bytes : 1), RT_SUCCESS);
    }
    ~Buffer() { rtFree(ptr); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    void* ptr = nullptr;
    size_t size;
    void write(const std::vector<uint8_t>& bytes) const {
        if (!bytes.empty()) {
            EXPECT_EQ(rtMemcpy(ptr, bytes.data(), bytes.size(), RT_MEMCPY_HOST_TO_DEVICE), RT_SUCCESS);
        }
    }
    std::vector<uint8_t> read(size_t bytes, size_t offset = 0) const {
        std::vector<uint8_t> out(bytes);
        if (bytes) {
            EXPECT_EQ(rtMemcpy(out.data(), static_cast<char*>(ptr) + offset, bytes, RT_MEMCPY_DEVICE_TO_HOST), RT_SUCCESS);
        }
        return out;
    }
};

}  // namespace rt_test
