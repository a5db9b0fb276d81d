// peer_opencl.cpp — OpenCL implementation of the PoCL peer of runtime-bench-core, with libOpenCL opened by dlopen at run time.
//
// No OpenCL header or library is needed to build it: the few types, constants and the ~25 entry
// points used are declared here (OpenCL 1.2/2.0 C ABI, stable since 2011) and looked up with dlsym
// in libOpenCL.so.1 (the ICD loader). A machine without it gets a peer that says why it is missing.
// cl_khr_command_buffer's entry points (provisional extension, the 0.9 ABI of Khronos' cl_ext.h) come from
// clGetExtensionFunctionAddressForPlatform, as extensions' do.
#include "peer_opencl.hpp"

#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace rtbench {
namespace {

// ---------------------------------------------------------------- the subset of <CL/cl.h> used

using cl_int = std::int32_t;
using cl_uint = std::uint32_t;
using cl_ulong = std::uint64_t;
using cl_bool = cl_uint;
using cl_bitfield = cl_ulong;
using cl_device_type = cl_bitfield;
using cl_mem_flags = cl_bitfield;
using cl_queue_properties = cl_bitfield;
using cl_platform_info = cl_uint;
using cl_device_info = cl_uint;
using cl_program_build_info = cl_uint;
using cl_context_properties = std::intptr_t;
using cl_platform_id = struct cl_platform_st*;
using cl_device_id = struct cl_device_st*;
using cl_context = struct cl_context_st*;
using cl_command_queue = struct cl_queue_st*;
using cl_mem = struct cl_mem_st*;
using cl_event = struct cl_event_st*;
using cl_program = struct cl_program_st*;
using cl_kernel = struct cl_kernel_st*;
using cl_properties = cl_ulong;
using cl_command_buffer_khr = struct cl_command_buffer_st*;
using cl_sync_point_khr = cl_uint;
using cl_mutable_command_khr = struct cl_mutable_command_st*;

constexpr cl_int CL_SUCCESS = 0;
constexpr cl_bool CL_FALSE = 0;
constexpr cl_bool CL_TRUE = 1;
constexpr cl_device_type CL_DEVICE_TYPE_CPU = 1 << 1;
constexpr cl_device_type CL_DEVICE_TYPE_ALL = 0xFFFFFFFF;
constexpr cl_platform_info CL_PLATFORM_VERSION = 0x0901;
constexpr cl_device_info CL_DEVICE_NAME = 0x102B;
constexpr cl_device_info CL_DEVICE_EXTENSIONS = 0x1030;
constexpr cl_device_info CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR = 0x12A9;
constexpr cl_bitfield CL_COMMAND_BUFFER_CAPABILITY_OUT_OF_ORDER_KHR = 1 << 3;
constexpr cl_queue_properties CL_QUEUE_PROPERTIES = 0x1093;
constexpr cl_queue_properties CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE = 1 << 0;
constexpr cl_context_properties CL_CONTEXT_PLATFORM = 0x1084;
constexpr cl_mem_flags CL_MEM_READ_WRITE = 1 << 0;
constexpr cl_program_build_info CL_PROGRAM_BUILD_LOG = 0x1183;

// The entry points, as X(name, return type, parameter list). CL_API_CALL is empty on Linux.
#define RTBENCH_CL_FUNCTIONS(X)                                                                                   \
    X(clGetPlatformIDs, cl_int, (cl_uint, cl_platform_id*, cl_uint*))                                             \
    X(clGetPlatformInfo, cl_int, (cl_platform_id, cl_platform_info, std::size_t, void*, std::size_t*))            \
    X(clGetDeviceIDs, cl_int, (cl_platform_id, cl_device_type, cl_uint, cl_device_id*, cl_uint*))                \
    X(clGetDeviceInfo, cl_int, (cl_device_id, cl_device_info, std::size_t, void*, std::size_t*))                  \
    X(clCreateContext, cl_context,                                                                                \
      (const cl_context_properties*, cl_uint, const cl_device_id*, void (*)(const char*, const void*, std::size_t, \
                                                                             void*),                              \
       void*, cl_int*))                                                                                           \
    X(clReleaseContext, cl_int, (cl_context))                                                                     \
    X(clCreateCommandQueueWithProperties, cl_command_queue,                                                       \
      (cl_context, cl_device_id, const cl_queue_properties*, cl_int*))                                            \
    X(clReleaseCommandQueue, cl_int, (cl_command_queue))                                                          \
    X(clCreateBuffer, cl_mem, (cl_context, cl_mem_flags, std::size_t, void*, cl_int*))                            \
    X(clReleaseMemObject, cl_int, (cl_mem))                                                                       \
    X(clEnqueueWriteBuffer, cl_int,                                                                               \
      (cl_command_queue, cl_mem, cl_bool, std::size_t, std::size_t, const void*, cl_uint, const cl_event*,        \
       cl_event*))                                                                                                \
    X(clEnqueueReadBuffer, cl_int,                                                                                \
      (cl_command_queue, cl_mem, cl_bool, std::size_t, std::size_t, void*, cl_uint, const cl_event*, cl_event*))  \
    X(clEnqueueCopyBuffer, cl_int,                                                                                \
      (cl_command_queue, cl_mem, cl_mem, std::size_t, std::size_t, std::size_t, cl_uint, const cl_event*,         \
       cl_event*))                                                                                                \
    X(clEnqueueFillBuffer, cl_int,                                                                                \
      (cl_command_queue, cl_mem, const void*, std::size_t, std::size_t, std::size_t, cl_uint, const cl_event*,    \
       cl_event*))                                                                                                \
    X(clEnqueueMarkerWithWaitList, cl_int, (cl_command_queue, cl_uint, const cl_event*, cl_event*))               \
    X(clReleaseEvent, cl_int, (cl_event))                                                                         \
    X(clFinish, cl_int, (cl_command_queue))                                                                       \
    X(clCreateProgramWithSource, cl_program, (cl_context, cl_uint, const char**, const std::size_t*, cl_int*))    \
    X(clBuildProgram, cl_int,                                                                                     \
      (cl_program, cl_uint, const cl_device_id*, const char*, void (*)(cl_program, void*), void*))                \
    X(clGetProgramBuildInfo, cl_int,                                                                              \
      (cl_program, cl_device_id, cl_program_build_info, std::size_t, void*, std::size_t*))                        \
    X(clReleaseProgram, cl_int, (cl_program))                                                                     \
    X(clCreateKernel, cl_kernel, (cl_program, const char*, cl_int*))                                              \
    X(clReleaseKernel, cl_int, (cl_kernel))                                                                       \
    X(clSetKernelArg, cl_int, (cl_kernel, cl_uint, std::size_t, const void*))                                     \
    X(clGetExtensionFunctionAddressForPlatform, void*, (cl_platform_id, const char*))                             \
    X(clEnqueueNDRangeKernel, cl_int,                                                                             \
      (cl_command_queue, cl_kernel, cl_uint, const std::size_t*, const std::size_t*, const std::size_t*, cl_uint,  \
       const cl_event*, cl_event*))

/// cl_khr_command_buffer's entry points used (nullptr where the platform has none).
struct CommandBufferApi {
    cl_command_buffer_khr (*create)(cl_uint, const cl_command_queue*, const cl_properties*, cl_int*) = nullptr;
    cl_int (*ndrange)(cl_command_buffer_khr, cl_command_queue, const cl_properties*, cl_kernel, cl_uint,
                      const std::size_t*, const std::size_t*, const std::size_t*, cl_uint, const cl_sync_point_khr*,
                      cl_sync_point_khr*, cl_mutable_command_khr*) = nullptr;
    cl_int (*finalize)(cl_command_buffer_khr) = nullptr;
    cl_int (*enqueue)(cl_uint, cl_command_queue*, cl_command_buffer_khr, cl_uint, const cl_event*, cl_event*) = nullptr;
    cl_int (*release)(cl_command_buffer_khr) = nullptr;
};

/// The dlopen'ed ICD loader: one function pointer per entry point. Never dlclose'd: PoCL's threads
/// and atexit handlers may outlive the peer object.
struct ClApi {
#define RTBENCH_CL_POINTER(name, ret, params) ret(*name) params = nullptr;
    RTBENCH_CL_FUNCTIONS(RTBENCH_CL_POINTER)
#undef RTBENCH_CL_POINTER
};

/// Loads libOpenCL once per process; nullptr with the reason when it or one of its symbols is missing.
const ClApi* cl_api(std::string* why_not) {
    static ClApi api;
    static std::string error;
    static const bool loaded = [] {
        void* lib = nullptr;
        std::string tried;
        // RUNTIME_BENCH_OPENCL_LIB names another ICD loader (or a missing one, to test the no-peer path).
        const char* env = std::getenv("RUNTIME_BENCH_OPENCL_LIB");
        std::vector<const char*> names = {"libOpenCL.so.1", "libOpenCL.so"};
        if (env && *env) names = {env};
        for (const char* name : names) {
            lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
            if (lib) break;
            const char* e = dlerror();
            tried += std::string(tried.empty() ? "" : "; ") + (e ? e : name);
        }
        if (!lib) {
            error = "cannot dlopen libOpenCL (" + tried + "); install ocl-icd-libopencl1 and pocl-opencl-icd";
            return false;
        }
#define RTBENCH_CL_LOAD(name, ret, params)                                                     \
    api.name = reinterpret_cast<ret(*) params>(dlsym(lib, #name));                             \
    if (!api.name) {                                                                           \
        error = "libOpenCL has no " #name " (an OpenCL 2.0 ICD loader is needed)";             \
        return false;                                                                          \
    }
        RTBENCH_CL_FUNCTIONS(RTBENCH_CL_LOAD)
#undef RTBENCH_CL_LOAD
        return true;
    }();
    if (!loaded) {
        if (why_not) *why_not = error;
        return nullptr;
    }
    return &api;
}

const char* cl_error_name(cl_int e) {
    switch (e) {
        case 0: return "CL_SUCCESS";
        case -1: return "CL_DEVICE_NOT_FOUND";
        case -2: return "CL_DEVICE_NOT_AVAILABLE";
        case -3: return "CL_COMPILER_NOT_AVAILABLE";
        case -4: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
        case -5: return "CL_OUT_OF_RESOURCES";
        case -6: return "CL_OUT_OF_HOST_MEMORY";
        case -8: return "CL_MEM_COPY_OVERLAP";
        case -11: return "CL_BUILD_PROGRAM_FAILURE";
        case -30: return "CL_INVALID_VALUE";
        case -32: return "CL_INVALID_PLATFORM";
        case -33: return "CL_INVALID_DEVICE";
        case -34: return "CL_INVALID_CONTEXT";
        case -36: return "CL_INVALID_COMMAND_QUEUE";
        case -38: return "CL_INVALID_MEM_OBJECT";
        case -43: return "CL_INVALID_BUILD_OPTIONS";
        case -44: return "CL_INVALID_PROGRAM";
        case -45: return "CL_INVALID_PROGRAM_EXECUTABLE";
        case -46: return "CL_INVALID_KERNEL_NAME";
        case -48: return "CL_INVALID_KERNEL";
        case -50: return "CL_INVALID_ARG_VALUE";
        case -51: return "CL_INVALID_ARG_SIZE";
        case -52: return "CL_INVALID_KERNEL_ARGS";
        case -54: return "CL_INVALID_WORK_GROUP_SIZE";
        case -57: return "CL_INVALID_EVENT_WAIT_LIST";
        case -58: return "CL_INVALID_EVENT";
        case -59: return "CL_INVALID_OPERATION";
        case -61: return "CL_INVALID_BUFFER_SIZE";
        case -63: return "CL_INVALID_GLOBAL_WORK_SIZE";
        case -1138: return "CL_INVALID_COMMAND_BUFFER_KHR";
        case -1139: return "CL_INVALID_SYNC_POINT_WAIT_LIST_KHR";
        case -1140: return "CL_INCOMPATIBLE_COMMAND_QUEUE_KHR";
        case -1001: return "CL_PLATFORM_NOT_FOUND_KHR (no OpenCL ICD/platform installed)";
        default: return "CL error";
    }
}

void check(cl_int e, const char* what) {
    if (e != CL_SUCCESS)
        throw PeerError(std::string(what) + " failed: " + cl_error_name(e) + " (" + std::to_string(e) + ")");
}

std::string platform_string(const ClApi& cl, cl_platform_id p, cl_platform_info what) {
    std::size_t n = 0;
    if (cl.clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "?";
    std::string s(n, '\0');
    cl.clGetPlatformInfo(p, what, n, s.data(), nullptr);
    if (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
}

std::string device_string(const ClApi& cl, cl_device_id d, cl_device_info what) {
    std::size_t n = 0;
    if (cl.clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "?";
    std::string s(n, '\0');
    cl.clGetDeviceInfo(d, what, n, s.data(), nullptr);
    if (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
}

/// Whether the space-separated `list` (an extension string) contains `word`.
bool has_word(const std::string& list, const std::string& word) {
    for (std::size_t at = list.find(word); at != std::string::npos; at = list.find(word, at + 1)) {
        const std::size_t end = at + word.size();
        if ((at == 0 || list[at - 1] == ' ') && (end == list.size() || list[end] == ' ')) return true;
    }
    return false;
}

}  // namespace

std::string unique_kernel_name(const std::string& tag) {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a: a stable identifier for the tag
    for (unsigned char c : tag) h = (h ^ c) * 1099511628211ull;
    char b[32];
    std::snprintf(b, sizeof b, "u_%016llx", static_cast<unsigned long long>(h));
    return b;
}

std::string opencl_kernel_source(const std::string& tag) {
    return "// " + tag + "\n__kernel void " + unique_kernel_name(tag) +
           "(void) {}\n"
           "__kernel void empty(void) {}\n"
           "__kernel void twice(__global const float* in, __global float* out, uint n) {\n"
           "    size_t i = get_global_id(0);\n"
           "    if (i < n) out[i] = in[i] * 2.0f;  /* the same guarded kernel as ours */\n"
           "}\n";
}

struct OpenClPeer::Impl {
    const ClApi* cl = nullptr;
    cl_platform_id platform = nullptr;
    cl_context ctx = nullptr;
    cl_device_id dev = nullptr;
    cl_command_queue qa = nullptr;  // in-order (no out-of-order property), no profiling
    cl_command_queue qb = nullptr;
    cl_mem buf[2] = {nullptr, nullptr};
    std::size_t bytes = 0;
    std::string name;
    cl_program program = nullptr;  // load_kernels()
    cl_kernel k_empty = nullptr;
    cl_kernel k_twice = nullptr;
    cl_program group_program = nullptr;  // load_group_kernels()
    std::vector<std::pair<std::string, cl_kernel>> group_kernels;
    std::vector<cl_mem> extra;  // add_buffer(): buffers 2, 3, ...
    // load_graph_kernels(): the graph rows' kernels, queue and counter, and the recorded command buffers.
    cl_command_queue qo = nullptr;  // out-of-order
    cl_program graph_program = nullptr;
    cl_kernel k_graph_empty = nullptr;
    cl_kernel k_graph_count = nullptr;
    cl_mem counter = nullptr;
    CommandBufferApi cb;
    std::string cb_missing;  // why there are no command buffers ("" when there are)
    std::vector<cl_command_buffer_khr> graphs;

    ~Impl() {
        for (cl_command_buffer_khr g : graphs) cb.release(g);
        if (k_graph_empty) cl->clReleaseKernel(k_graph_empty);
        if (k_graph_count) cl->clReleaseKernel(k_graph_count);
        if (graph_program) cl->clReleaseProgram(graph_program);
        if (counter) cl->clReleaseMemObject(counter);
        if (qo) cl->clReleaseCommandQueue(qo);
        for (auto& [name, k] : group_kernels) cl->clReleaseKernel(k);
        if (group_program) cl->clReleaseProgram(group_program);
        for (cl_mem m : extra) cl->clReleaseMemObject(m);
        if (k_empty) cl->clReleaseKernel(k_empty);
        if (k_twice) cl->clReleaseKernel(k_twice);
        if (program) cl->clReleaseProgram(program);
        for (cl_mem& b : buf)
            if (b) cl->clReleaseMemObject(b);
        if (qa) cl->clReleaseCommandQueue(qa);
        if (qb) cl->clReleaseCommandQueue(qb);
        if (ctx) cl->clReleaseContext(ctx);
    }
    cl_mem at(int i) const {
        if (i >= 2 && static_cast<std::size_t>(i - 2) < extra.size()) return extra[static_cast<std::size_t>(i - 2)];
        if (i < 0 || i > 1 || !buf[i]) throw PeerError("OpenCL peer: buffer " + std::to_string(i) + " not reserved");
        return buf[i];
    }
    /// Creates and builds a program from `source`; the build log is in the error on failure.
    cl_program build(const std::string& source) {
        cl_int e = CL_SUCCESS;
        const char* text = source.c_str();
        const std::size_t len = source.size();
        cl_program p = cl->clCreateProgramWithSource(ctx, 1, &text, &len, &e);
        check(e, "clCreateProgramWithSource");
        e = cl->clBuildProgram(p, 1, &dev, "", nullptr, nullptr);
        if (e != CL_SUCCESS) {
            std::string log(4096, '\0');
            std::size_t n = 0;
            cl->clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, log.size(), log.data(), &n);
            log.resize(n ? n - 1 : 0);
            cl->clReleaseProgram(p);
            throw PeerError(std::string("clBuildProgram failed: ") + cl_error_name(e) + ": " + log);
        }
        return p;
    }
    cl_kernel kernel(cl_program p, const char* name) {
        cl_int e = CL_SUCCESS;
        cl_kernel k = cl->clCreateKernel(p, name, &e);
        check(e, "clCreateKernel");
        return k;
    }
    void set_twice_args(cl_kernel k, cl_uint n) {
        cl_mem in = at(0), out = at(1);
        check(cl->clSetKernelArg(k, 0, sizeof in, &in), "clSetKernelArg(in)");
        check(cl->clSetKernelArg(k, 1, sizeof out, &out), "clSetKernelArg(out)");
        check(cl->clSetKernelArg(k, 2, sizeof n, &n), "clSetKernelArg(n)");
    }
};

OpenClPeer::OpenClPeer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OpenClPeer::~OpenClPeer() = default;

std::unique_ptr<OpenClPeer> OpenClPeer::open(std::string* why_not) {
    const ClApi* api = cl_api(why_not);
    if (!api) return nullptr;
    const ClApi& cl = *api;
    cl_uint np = 0;
    cl_int e = cl.clGetPlatformIDs(0, nullptr, &np);
    if (e != CL_SUCCESS || np == 0) {
        if (why_not)
            *why_not = std::string("no OpenCL platform at run time (clGetPlatformIDs: ") + cl_error_name(e) +
                       ", " + std::to_string(np) + " platforms); install pocl-opencl-icd";
        return nullptr;
    }
    std::vector<cl_platform_id> plats(np);
    cl.clGetPlatformIDs(np, plats.data(), nullptr);
    // Prefer a CPU device (the peer doing the same job on the same CPU), else any device.
    for (cl_device_type want : {CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_ALL}) {
        for (cl_platform_id p : plats) {
            cl_device_id d = nullptr;
            cl_uint nd = 0;
            if (cl.clGetDeviceIDs(p, want, 1, &d, &nd) != CL_SUCCESS || nd == 0) continue;
            auto impl = std::make_unique<Impl>();
            impl->cl = api;
            impl->platform = p;
            impl->dev = d;
            cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(p), 0};
            impl->ctx = cl.clCreateContext(props, 1, &d, nullptr, nullptr, &e);
            if (e != CL_SUCCESS) continue;
            impl->qa = cl.clCreateCommandQueueWithProperties(impl->ctx, d, nullptr, &e);
            if (e != CL_SUCCESS) continue;
            impl->qb = cl.clCreateCommandQueueWithProperties(impl->ctx, d, nullptr, &e);
            if (e != CL_SUCCESS) continue;
            // The version string of PoCL lists its build options after a comma: keep the head only.
            std::string version = platform_string(cl, p, CL_PLATFORM_VERSION);
            version = version.substr(0, version.find(','));
            while (!version.empty() && version.back() == ' ') version.pop_back();
            for (std::size_t at; (at = version.find("  ")) != std::string::npos;) version.erase(at, 1);
            impl->name = version + " / " + device_string(cl, d, CL_DEVICE_NAME);
            return std::unique_ptr<OpenClPeer>(new OpenClPeer(std::move(impl)));
        }
    }
    if (why_not) *why_not = "OpenCL platform(s) found but no usable device (context/queue creation failed)";
    return nullptr;
}

const std::string& OpenClPeer::name() const { return impl_->name; }

void OpenClPeer::reserve(std::size_t bytes) {
    const ClApi& cl = *impl_->cl;
    for (cl_mem& b : impl_->buf) {
        if (b) cl.clReleaseMemObject(b);
        b = nullptr;
    }
    impl_->bytes = 0;
    cl_int e = CL_SUCCESS;
    for (cl_mem& b : impl_->buf) {
        b = cl.clCreateBuffer(impl_->ctx, CL_MEM_READ_WRITE, bytes, nullptr, &e);
        check(e, "clCreateBuffer");
    }
    impl_->bytes = bytes;
    // Commit the buffers' pages now so first-touch faults are not measured.
    zero(0, bytes);
    zero(1, bytes);
}

void OpenClPeer::write(int buf, const void* host, std::size_t n) {
    check(impl_->cl->clEnqueueWriteBuffer(impl_->qa, impl_->at(buf), CL_FALSE, 0, n, host, 0, nullptr, nullptr),
          "clEnqueueWriteBuffer");
}

void OpenClPeer::read(int buf, void* host, std::size_t n) {
    check(impl_->cl->clEnqueueReadBuffer(impl_->qa, impl_->at(buf), CL_FALSE, 0, n, host, 0, nullptr, nullptr),
          "clEnqueueReadBuffer");
}

void OpenClPeer::copy(int src_buf, int dst_buf, std::size_t n) {
    check(impl_->cl->clEnqueueCopyBuffer(impl_->qa, impl_->at(src_buf), impl_->at(dst_buf), 0, 0, n, 0, nullptr,
                                         nullptr),
          "clEnqueueCopyBuffer");
}

void OpenClPeer::finish() { check(impl_->cl->clFinish(impl_->qa), "clFinish"); }

void OpenClPeer::write_sync(int buf, const void* host, std::size_t n) {
    check(impl_->cl->clEnqueueWriteBuffer(impl_->qa, impl_->at(buf), CL_TRUE, 0, n, host, 0, nullptr, nullptr),
          "clEnqueueWriteBuffer(blocking)");
}

void OpenClPeer::read_sync(int buf, void* host, std::size_t n) {
    check(impl_->cl->clEnqueueReadBuffer(impl_->qa, impl_->at(buf), CL_TRUE, 0, n, host, 0, nullptr, nullptr),
          "clEnqueueReadBuffer(blocking)");
}

void OpenClPeer::zero(int buf, std::size_t n) {
    const unsigned char z = 0;
    check(impl_->cl->clEnqueueFillBuffer(impl_->qa, impl_->at(buf), &z, 1, 0, n, 0, nullptr, nullptr),
          "clEnqueueFillBuffer");
    finish();
}

void OpenClPeer::event_roundtrip(const void* host4, bool copy_on_a) {
    const ClApi& cl = *impl_->cl;
    if (copy_on_a)
        check(cl.clEnqueueWriteBuffer(impl_->qa, impl_->at(0), CL_FALSE, 0, 4, host4, 0, nullptr, nullptr),
              "clEnqueueWriteBuffer(A)");
    cl_event marker = nullptr;
    check(cl.clEnqueueMarkerWithWaitList(impl_->qa, 0, nullptr, &marker), "clEnqueueMarkerWithWaitList(A)");
    const cl_int e = cl.clEnqueueWriteBuffer(impl_->qb, impl_->at(1), CL_FALSE, 0, 4, host4, 1, &marker, nullptr);
    cl.clReleaseEvent(marker);  // the queued write holds its own reference to the wait-list event
    check(e, "clEnqueueWriteBuffer(B waits marker)");
    check(cl.clFinish(impl_->qb), "clFinish(B)");
}

void OpenClPeer::load_kernels() {
    if (impl_->program) return;
    impl_->program = impl_->build(opencl_kernel_source("runtime-bench resident kernels"));
    impl_->k_empty = impl_->kernel(impl_->program, "empty");
    impl_->k_twice = impl_->kernel(impl_->program, "twice");
}

void OpenClPeer::launch_empty() {
    const std::size_t one = 1;
    check(impl_->cl->clEnqueueNDRangeKernel(impl_->qa, impl_->k_empty, 1, nullptr, &one, &one, 0, nullptr, nullptr),
          "clEnqueueNDRangeKernel(empty)");
}

void OpenClPeer::launch_twice(unsigned n, std::size_t local) {
    if (static_cast<std::size_t>(n) * 4 > impl_->bytes) throw PeerError("OpenCL peer: twice over more than the buffers");
    if (n % local != 0) throw PeerError("OpenCL peer: twice needs n to be a multiple of the work-group size");
    impl_->set_twice_args(impl_->k_twice, n);
    const std::size_t global = n;
    check(impl_->cl->clEnqueueNDRangeKernel(impl_->qa, impl_->k_twice, 1, nullptr, &global, &local, 0, nullptr,
                                            nullptr),
          "clEnqueueNDRangeKernel(twice)");
}

void OpenClPeer::load_group_kernels(const std::string& source) {
    if (impl_->group_program) return;
    impl_->group_program = impl_->build(source);
    for (const char* name : {"sum_groups", "matmul_tiled", "barriers_flat"})
        impl_->group_kernels.emplace_back(name, impl_->kernel(impl_->group_program, name));
}

int OpenClPeer::add_buffer(std::size_t bytes) {
    cl_int e = CL_SUCCESS;
    cl_mem m = impl_->cl->clCreateBuffer(impl_->ctx, CL_MEM_READ_WRITE, bytes, nullptr, &e);
    check(e, "clCreateBuffer");
    impl_->extra.push_back(m);
    return static_cast<int>(impl_->extra.size()) + 1;
}

void OpenClPeer::run_group_kernel(const std::string& name, const std::vector<Arg>& args, unsigned dims,
                                  const std::size_t* global, const std::size_t* local) {
    cl_kernel k = nullptr;
    for (auto& [n, kk] : impl_->group_kernels)
        if (n == name) k = kk;
    if (!k) throw PeerError("OpenCL peer: no group kernel '" + name + "' (load_group_kernels first)");
    for (cl_uint i = 0; i < args.size(); ++i) {
        if (args[i].buffer >= 0) {
            cl_mem m = impl_->at(args[i].buffer);
            check(impl_->cl->clSetKernelArg(k, i, sizeof m, &m), "clSetKernelArg(buffer)");
        } else {
            check(impl_->cl->clSetKernelArg(k, i, sizeof args[i].scalar, &args[i].scalar), "clSetKernelArg(scalar)");
        }
    }
    check(impl_->cl->clEnqueueNDRangeKernel(impl_->qa, k, dims, nullptr, global, local, 0, nullptr, nullptr),
          ("clEnqueueNDRangeKernel(" + name + ")").c_str());
}

void OpenClPeer::alloc_free(std::size_t bytes) {
    cl_int e = CL_SUCCESS;
    cl_mem m = impl_->cl->clCreateBuffer(impl_->ctx, CL_MEM_READ_WRITE, bytes, nullptr, &e);
    check(e, "clCreateBuffer");
    check(impl_->cl->clReleaseMemObject(m), "clReleaseMemObject");
}

double OpenClPeer::build_and_run_once_seconds(const std::string& source) {
    const auto t0 = std::chrono::steady_clock::now();
    cl_program p = impl_->build(source);
    cl_kernel k = nullptr;
    try {
        k = impl_->kernel(p, "twice");
        impl_->set_twice_args(k, 1);
        const std::size_t one = 1;
        check(impl_->cl->clEnqueueNDRangeKernel(impl_->qa, k, 1, nullptr, &one, &one, 0, nullptr, nullptr),
              "clEnqueueNDRangeKernel(twice, 1 item)");
        finish();
    } catch (...) {
        if (k) impl_->cl->clReleaseKernel(k);
        impl_->cl->clReleaseProgram(p);
        throw;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    impl_->cl->clReleaseKernel(k);
    impl_->cl->clReleaseProgram(p);
    return secs;
}

// ---------------------------------------------------------------- graphs of empty kernels

void OpenClPeer::load_graph_kernels() {
    Impl& m = *impl_;
    if (m.graph_program) return;
    const ClApi& cl = *m.cl;
    cl_int e = CL_SUCCESS;
    const cl_queue_properties ooo[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, 0};
    m.qo = cl.clCreateCommandQueueWithProperties(m.ctx, m.dev, ooo, &e);
    check(e, "clCreateCommandQueueWithProperties(out-of-order)");
    m.counter = cl.clCreateBuffer(m.ctx, CL_MEM_READ_WRITE, sizeof(cl_uint), nullptr, &e);
    check(e, "clCreateBuffer(graph counter)");
    m.graph_program = m.build(
        "__kernel void empty(void) {}\n"
        "__kernel void count(__global uint* c) { atomic_inc(c); }\n");
    m.k_graph_empty = m.kernel(m.graph_program, "empty");
    m.k_graph_count = m.kernel(m.graph_program, "count");
    check(cl.clSetKernelArg(m.k_graph_count, 0, sizeof m.counter, &m.counter), "clSetKernelArg(count)");
    reset_graph_counter();

    // The extension: named by the device, out-of-order command buffers, and every entry point used.
    const std::string ext = device_string(cl, m.dev, CL_DEVICE_EXTENSIONS);
    cl_bitfield caps = 0;
    auto entry = [&](const char* name) { return cl.clGetExtensionFunctionAddressForPlatform(m.platform, name); };
    if (!has_word(ext, "cl_khr_command_buffer")) {
        m.cb_missing = "the device does not expose cl_khr_command_buffer";
    } else if (cl.clGetDeviceInfo(m.dev, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR, sizeof caps, &caps, nullptr) !=
                   CL_SUCCESS ||
               !(caps & CL_COMMAND_BUFFER_CAPABILITY_OUT_OF_ORDER_KHR)) {
        m.cb_missing = "cl_khr_command_buffer without out-of-order command buffers";
    } else {
        m.cb.create = reinterpret_cast<decltype(m.cb.create)>(entry("clCreateCommandBufferKHR"));
        m.cb.ndrange = reinterpret_cast<decltype(m.cb.ndrange)>(entry("clCommandNDRangeKernelKHR"));
        m.cb.finalize = reinterpret_cast<decltype(m.cb.finalize)>(entry("clFinalizeCommandBufferKHR"));
        m.cb.enqueue = reinterpret_cast<decltype(m.cb.enqueue)>(entry("clEnqueueCommandBufferKHR"));
        m.cb.release = reinterpret_cast<decltype(m.cb.release)>(entry("clReleaseCommandBufferKHR"));
        if (!m.cb.create || !m.cb.ndrange || !m.cb.finalize || !m.cb.enqueue || !m.cb.release)
            m.cb_missing = "cl_khr_command_buffer is exposed but its entry points are not (clGetExtensionFunctionAddressForPlatform)";
    }
}

std::string OpenClPeer::command_buffer_missing() const {
    return impl_->graph_program ? impl_->cb_missing : std::string("load_graph_kernels() not called");
}

int OpenClPeer::record_graph(const GraphShape& shape, bool counting) {
    Impl& m = *impl_;
    if (!m.graph_program) throw PeerError("OpenCL peer: record_graph before load_graph_kernels");
    if (!m.cb_missing.empty()) throw PeerError("OpenCL peer: no command buffers: " + m.cb_missing);
    cl_int e = CL_SUCCESS;
    cl_command_buffer_khr g = m.cb.create(1, &m.qo, nullptr, &e);
    check(e, "clCreateCommandBufferKHR");
    m.graphs.push_back(g);  // released with the peer, also when recording fails below
    cl_kernel k = counting ? m.k_graph_count : m.k_graph_empty;
    const std::size_t one = 1;
    std::vector<cl_sync_point_khr> points(static_cast<std::size_t>(shape.nodes));
    std::vector<cl_sync_point_khr> waits;
    for (int i = 0; i < shape.nodes; ++i) {
        waits.clear();
        for (int d : shape.deps(i)) waits.push_back(points[static_cast<std::size_t>(d)]);
        check(m.cb.ndrange(g, nullptr, nullptr, k, 1, nullptr, &one, &one, static_cast<cl_uint>(waits.size()),
                           waits.empty() ? nullptr : waits.data(), &points[static_cast<std::size_t>(i)], nullptr),
              "clCommandNDRangeKernelKHR");
    }
    check(m.cb.finalize(g), "clFinalizeCommandBufferKHR");
    return static_cast<int>(m.graphs.size()) - 1;
}

void OpenClPeer::replay_graph(int index) {
    Impl& m = *impl_;
    if (index < 0 || static_cast<std::size_t>(index) >= m.graphs.size())
        throw PeerError("OpenCL peer: no recorded graph " + std::to_string(index));
    check(m.cb.enqueue(1, &m.qo, m.graphs[static_cast<std::size_t>(index)], 0, nullptr, nullptr),
          "clEnqueueCommandBufferKHR");
    check(m.cl->clFinish(m.qo), "clFinish(out-of-order queue)");
}

void OpenClPeer::run_graph_calls(const GraphShape& shape, bool counting) {
    Impl& m = *impl_;
    if (!m.graph_program) throw PeerError("OpenCL peer: run_graph_calls before load_graph_kernels");
    const ClApi& cl = *m.cl;
    cl_kernel k = counting ? m.k_graph_count : m.k_graph_empty;
    const std::size_t one = 1;
    if (shape.kind == GraphShape::Chain) {
        for (int i = 0; i < shape.nodes; ++i)
            check(cl.clEnqueueNDRangeKernel(m.qa, k, 1, nullptr, &one, &one, 0, nullptr, nullptr),
                  "clEnqueueNDRangeKernel(chain node)");
        check(cl.clFinish(m.qa), "clFinish");
        return;
    }
    std::vector<cl_event> events(static_cast<std::size_t>(shape.nodes), nullptr);
    std::vector<cl_event> waits;
    cl_int e = CL_SUCCESS;
    for (int i = 0; i < shape.nodes && e == CL_SUCCESS; ++i) {
        waits.clear();
        for (int d : shape.deps(i)) waits.push_back(events[static_cast<std::size_t>(d)]);
        e = cl.clEnqueueNDRangeKernel(m.qo, k, 1, nullptr, &one, &one, static_cast<cl_uint>(waits.size()),
                                      waits.empty() ? nullptr : waits.data(), &events[static_cast<std::size_t>(i)]);
    }
    const cl_int f = cl.clFinish(m.qo);
    for (cl_event ev : events)
        if (ev) cl.clReleaseEvent(ev);
    check(e, "clEnqueueNDRangeKernel(fan-out node)");
    check(f, "clFinish(out-of-order queue)");
}

unsigned OpenClPeer::graph_counter() {
    cl_uint v = 0;
    check(impl_->cl->clEnqueueReadBuffer(impl_->qa, impl_->counter, CL_TRUE, 0, sizeof v, &v, 0, nullptr, nullptr),
          "clEnqueueReadBuffer(graph counter)");
    return v;
}

void OpenClPeer::reset_graph_counter() {
    const cl_uint z = 0;
    check(impl_->cl->clEnqueueWriteBuffer(impl_->qa, impl_->counter, CL_TRUE, 0, sizeof z, &z, 0, nullptr, nullptr),
          "clEnqueueWriteBuffer(graph counter)");
}

}  // namespace rtbench
