// peer_opencl.cpp — OpenCL implementation of the PoCL peer measured side by side by runtime-bench-core.
//
// Built with RUNTIME_BENCH_HAVE_OPENCL when CMake found OpenCL; without it, the same interface says
// at run time that the peer is missing (the benchmark itself has no #ifdef).
#include "peer_opencl.hpp"

#ifndef RUNTIME_BENCH_HAVE_OPENCL

namespace rtbench {
struct OpenClPeer::Impl {};
OpenClPeer::OpenClPeer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OpenClPeer::~OpenClPeer() = default;
std::unique_ptr<OpenClPeer> OpenClPeer::open(std::string* why_not) {
    if (why_not) *why_not = "OpenCL was not found when the benchmark was configured (no OpenCL headers/ICD loader)";
    return nullptr;
}
// Unreachable: open() never returns a peer in this build.
namespace {
[[noreturn]] void no_peer() { throw PeerError("built without OpenCL"); }
}  // namespace
const std::string& OpenClPeer::name() const { no_peer(); }
void OpenClPeer::reserve(std::size_t) { no_peer(); }
void OpenClPeer::write(int, const void*, std::size_t) { no_peer(); }
void OpenClPeer::read(int, void*, std::size_t) { no_peer(); }
void OpenClPeer::copy(int, int, std::size_t) { no_peer(); }
void OpenClPeer::finish() { no_peer(); }
void OpenClPeer::write_sync(int, const void*, std::size_t) { no_peer(); }
void OpenClPeer::read_sync(int, void*, std::size_t) { no_peer(); }
void OpenClPeer::zero(int, std::size_t) { no_peer(); }
void OpenClPeer::event_roundtrip(const void*, bool) { no_peer(); }
}  // namespace rtbench

#else  // RUNTIME_BENCH_HAVE_OPENCL

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>

#include <string>
#include <vector>

namespace rtbench {
namespace {

const char* cl_error_name(cl_int e) {
    switch (e) {
        case CL_SUCCESS: return "CL_SUCCESS";
        case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
        case CL_DEVICE_NOT_AVAILABLE: return "CL_DEVICE_NOT_AVAILABLE";
        case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
        case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
        case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
        case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
        case CL_INVALID_PLATFORM: return "CL_INVALID_PLATFORM";
        case CL_INVALID_DEVICE: return "CL_INVALID_DEVICE";
        case CL_INVALID_CONTEXT: return "CL_INVALID_CONTEXT";
        case CL_INVALID_COMMAND_QUEUE: return "CL_INVALID_COMMAND_QUEUE";
        case CL_INVALID_MEM_OBJECT: return "CL_INVALID_MEM_OBJECT";
        case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
        case CL_INVALID_EVENT_WAIT_LIST: return "CL_INVALID_EVENT_WAIT_LIST";
        case CL_INVALID_EVENT: return "CL_INVALID_EVENT";
        case CL_INVALID_OPERATION: return "CL_INVALID_OPERATION";
        case CL_MEM_COPY_OVERLAP: return "CL_MEM_COPY_OVERLAP";
        case -1001: return "CL_PLATFORM_NOT_FOUND_KHR (no OpenCL ICD/platform installed)";
        default: return "CL error";
    }
}

void check(cl_int e, const char* what) {
    if (e != CL_SUCCESS)
        throw PeerError(std::string(what) + " failed: " + cl_error_name(e) + " (" + std::to_string(e) + ")");
}

std::string platform_string(cl_platform_id p, cl_platform_info what) {
    std::size_t n = 0;
    if (clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "?";
    std::string s(n, '\0');
    clGetPlatformInfo(p, what, n, s.data(), nullptr);
    if (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
}

std::string device_string(cl_device_id d, cl_device_info what) {
    std::size_t n = 0;
    if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "?";
    std::string s(n, '\0');
    clGetDeviceInfo(d, what, n, s.data(), nullptr);
    if (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
}

}  // namespace

struct OpenClPeer::Impl {
    cl_context ctx = nullptr;
    cl_device_id dev = nullptr;
    cl_command_queue qa = nullptr;  // in-order (no out-of-order property), no profiling
    cl_command_queue qb = nullptr;
    cl_mem buf[2] = {nullptr, nullptr};
    std::size_t bytes = 0;
    std::string name;

    ~Impl() {
        for (cl_mem& b : buf)
            if (b) clReleaseMemObject(b);
        if (qa) clReleaseCommandQueue(qa);
        if (qb) clReleaseCommandQueue(qb);
        if (ctx) clReleaseContext(ctx);
    }
    cl_mem at(int i) const {
        if (i < 0 || i > 1 || !buf[i]) throw PeerError("OpenCL peer: buffer " + std::to_string(i) + " not reserved");
        return buf[i];
    }
};

OpenClPeer::OpenClPeer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OpenClPeer::~OpenClPeer() = default;

std::unique_ptr<OpenClPeer> OpenClPeer::open(std::string* why_not) {
    cl_uint np = 0;
    cl_int e = clGetPlatformIDs(0, nullptr, &np);
    if (e != CL_SUCCESS || np == 0) {
        if (why_not)
            *why_not = std::string("no OpenCL platform at run time (clGetPlatformIDs: ") + cl_error_name(e) +
                       ", " + std::to_string(np) + " platforms); install pocl-opencl-icd";
        return nullptr;
    }
    std::vector<cl_platform_id> plats(np);
    clGetPlatformIDs(np, plats.data(), nullptr);
    // Prefer a CPU device (the peer doing the same job on the same CPU), else any device.
    for (cl_device_type want : {static_cast<cl_device_type>(CL_DEVICE_TYPE_CPU),
                                static_cast<cl_device_type>(CL_DEVICE_TYPE_ALL)}) {
        for (cl_platform_id p : plats) {
            cl_device_id d = nullptr;
            cl_uint nd = 0;
            if (clGetDeviceIDs(p, want, 1, &d, &nd) != CL_SUCCESS || nd == 0) continue;
            auto impl = std::make_unique<Impl>();
            impl->dev = d;
            cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(p), 0};
            impl->ctx = clCreateContext(props, 1, &d, nullptr, nullptr, &e);
            if (e != CL_SUCCESS) continue;
            impl->qa = clCreateCommandQueueWithProperties(impl->ctx, d, nullptr, &e);
            if (e != CL_SUCCESS) continue;
            impl->qb = clCreateCommandQueueWithProperties(impl->ctx, d, nullptr, &e);
            if (e != CL_SUCCESS) continue;
            // The version string of PoCL lists its build options after a comma: keep the head only.
            std::string version = platform_string(p, CL_PLATFORM_VERSION);
            version = version.substr(0, version.find(','));
            while (!version.empty() && version.back() == ' ') version.pop_back();
            impl->name = version + " / " + device_string(d, CL_DEVICE_NAME);
            return std::unique_ptr<OpenClPeer>(new OpenClPeer(std::move(impl)));
        }
    }
    if (why_not) *why_not = "OpenCL platform(s) found but no usable device (context/queue creation failed)";
    return nullptr;
}

const std::string& OpenClPeer::name() const { return impl_->name; }

void OpenClPeer::reserve(std::size_t bytes) {
    for (cl_mem& b : impl_->buf) {
        if (b) clReleaseMemObject(b);
        b = nullptr;
    }
    impl_->bytes = 0;
    cl_int e = CL_SUCCESS;
    for (cl_mem& b : impl_->buf) {
        b = clCreateBuffer(impl_->ctx, CL_MEM_READ_WRITE, bytes, nullptr, &e);
        check(e, "clCreateBuffer");
    }
    impl_->bytes = bytes;
    // Commit the buffers' pages now so first-touch faults are not measured.
    zero(0, bytes);
    zero(1, bytes);
}

void OpenClPeer::write(int buf, const void* host, std::size_t n) {
    check(clEnqueueWriteBuffer(impl_->qa, impl_->at(buf), CL_FALSE, 0, n, host, 0, nullptr, nullptr),
          "clEnqueueWriteBuffer");
}

void OpenClPeer::read(int buf, void* host, std::size_t n) {
    check(clEnqueueReadBuffer(impl_->qa, impl_->at(buf), CL_FALSE, 0, n, host, 0, nullptr, nullptr),
          "clEnqueueReadBuffer");
}

void OpenClPeer::copy(int src_buf, int dst_buf, std::size_t n) {
    check(clEnqueueCopyBuffer(impl_->qa, impl_->at(src_buf), impl_->at(dst_buf), 0, 0, n, 0, nullptr, nullptr),
          "clEnqueueCopyBuffer");
}

void OpenClPeer::finish() { check(clFinish(impl_->qa), "clFinish"); }

void OpenClPeer::write_sync(int buf, const void* host, std::size_t n) {
    check(clEnqueueWriteBuffer(impl_->qa, impl_->at(buf), CL_TRUE, 0, n, host, 0, nullptr, nullptr),
          "clEnqueueWriteBuffer(blocking)");
}

void OpenClPeer::read_sync(int buf, void* host, std::size_t n) {
    check(clEnqueueReadBuffer(impl_->qa, impl_->at(buf), CL_TRUE, 0, n, host, 0, nullptr, nullptr),
          "clEnqueueReadBuffer(blocking)");
}

void OpenClPeer::zero(int buf, std::size_t n) {
    const cl_uchar z = 0;
    check(clEnqueueFillBuffer(impl_->qa, impl_->at(buf), &z, 1, 0, n, 0, nullptr, nullptr), "clEnqueueFillBuffer");
    finish();
}

void OpenClPeer::event_roundtrip(const void* host4, bool copy_on_a) {
    if (copy_on_a)
        check(clEnqueueWriteBuffer(impl_->qa, impl_->at(0), CL_FALSE, 0, 4, host4, 0, nullptr, nullptr),
              "clEnqueueWriteBuffer(A)");
    cl_event marker = nullptr;
    check(clEnqueueMarkerWithWaitList(impl_->qa, 0, nullptr, &marker), "clEnqueueMarkerWithWaitList(A)");
    const cl_int e =
        clEnqueueWriteBuffer(impl_->qb, impl_->at(1), CL_FALSE, 0, 4, host4, 1, &marker, nullptr);
    clReleaseEvent(marker);  // the queued write holds its own reference to the wait-list event
    check(e, "clEnqueueWriteBuffer(B waits marker)");
    check(clFinish(impl_->qb), "clFinish(B)");
}

}  // namespace rtbench

#endif  // RUNTIME_BENCH_HAVE_OPENCL
