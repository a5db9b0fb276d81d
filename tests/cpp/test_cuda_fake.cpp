// test_cuda_fake.cpp — the cuda backend's wiring against the fake CUDA driver (tests/fake_cuda, a test double
// loaded through RUNTIME_CUDA_DRIVER_LIB): devices and properties, memory and its registry, copies, fills, streams,
// events, host functions, statistics, out of memory, modules (NVRTC cubins, PTX files), launches as the driver
// receives them, the sticky-fault path, and cross-backend misuse. No GPU: kernels run no code, so results of
// kernels are not checked here (the *_cuda reruns on a GPU do that).
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "../fake_cuda/fake_cuda.h"
#include "fake_cuda_api.hpp"
#include "test_util.hpp"

namespace {

using rt_test::contains;
using rt_test::EventGuard;
using rt_test::Gate;
using rt_test::last_message;
using rt_test::pattern;
using rt_test::StreamGuard;

constexpr int kIllegalAddress = 700;  // CUDA_ERROR_ILLEGAL_ADDRESS (the test does not include cuda.h)
constexpr int kUnknown = 999;         // CUDA_ERROR_UNKNOWN: what a context returns after an Xid fault

/// The fake's query API, from the library the runtime loaded (dlopen of the same path: the same instance).
struct Fake {
    fake_cuda_launch_count_fn launch_count = nullptr;
    fake_cuda_last_launch_fn last_launch = nullptr;
    fake_cuda_reset_launches_fn reset_launches = nullptr;
    fake_cuda_inject_fault_fn inject_fault = nullptr;
    fake_cuda_live_allocations_fn live_allocations = nullptr;
    fake_cuda_live_host_allocations_fn live_host_allocations = nullptr;
    fake_cuda_live_modules_fn live_modules = nullptr;
    fake_cuda_unsafe_unloads_fn unsafe_unloads = nullptr;
    fake_cuda_drain_fn drain = nullptr;
    fake_cuda_assert_next_launch_fn assert_next_launch = nullptr;
    fake_cuda_set_access_count_fn set_access_count = nullptr;
    fake_cuda_fail_next_map_fn fail_next_map = nullptr;
    fake_cuda_host_func_count_fn host_func_count = nullptr;
    bool loaded = false;
};

const Fake& fake() {
    static const Fake f = [] {
        Fake r;
        using rt_test::fake_cuda_symbol;
        r.loaded = fake_cuda_symbol(r.launch_count, "fake_cuda_launch_count") &
                   fake_cuda_symbol(r.last_launch, "fake_cuda_last_launch") &
                   fake_cuda_symbol(r.reset_launches, "fake_cuda_reset_launches") &
                   fake_cuda_symbol(r.inject_fault, "fake_cuda_inject_fault") &
                   fake_cuda_symbol(r.live_allocations, "fake_cuda_live_allocations") &
                   fake_cuda_symbol(r.live_host_allocations, "fake_cuda_live_host_allocations") &
                   fake_cuda_symbol(r.live_modules, "fake_cuda_live_modules") &
                   fake_cuda_symbol(r.unsafe_unloads, "fake_cuda_unsafe_unloads") &
                   fake_cuda_symbol(r.drain, "fake_cuda_drain") &
                   fake_cuda_symbol(r.assert_next_launch, "fake_cuda_assert_next_launch") &
                   fake_cuda_symbol(r.set_access_count, "fake_cuda_set_access_count") &
                   fake_cuda_symbol(r.fail_next_map, "fake_cuda_fail_next_map") &
                   fake_cuda_symbol(r.host_func_count, "fake_cuda_host_func_count");
        return r;
    }();
    return f;
}

int env_int(const char* name, int fallback) {
    const char* e = std::getenv(name);
    return e && *e ? std::atoi(e) : fallback;
}

/// Every test starts on a fresh runtime with cuda:0 current. The fake library comes from the CTest environment
/// (tests/CMakeLists.txt); without it (a build without the cuda backend) the tests skip saying so.
class FakeCuda : public ::testing::Test {
protected:
    void SetUp() override {
#ifndef RUNTIME_HAVE_CUDA
        GTEST_SKIP() << "this build has no cuda backend";
#endif
        if (!fake().loaded) GTEST_SKIP() << "RUNTIME_CUDA_DRIVER_LIB does not name the fake CUDA driver";
        ASSERT_RT_OK(rtFinalize());
        ASSERT_RT_OK(rtGetDeviceByName(&cuda_, "cuda:0")) << "the fake driver must provide cuda:0";
        ASSERT_RT_OK(rtGetDeviceByName(&cpu_, "cpu:0"));
        ASSERT_RT_OK(rtSetDevice(cuda_));
        fake().reset_launches();
    }
    void TearDown() override { rtFinalize(); }

    int cuda_ = -1, cpu_ = -1;
    rt_test::Watchdog watchdog_{std::chrono::milliseconds(45000), "FakeCuda test"};
};

const char* kKernels = R"(
RT_KERNEL void scale(float* x, float a, int32_t n) {
    int32_t i = (int32_t)get_global_id(0);
    if (i < n) x[i] *= a;
}
RT_KERNEL void noop() {}
)";

// A hand-written PTX module: two entries, one with (u64, u32) parameters. The fake reads `.param` lists, so
// launches of PTX functions are arity-checked as on a driver with cuFuncGetParamInfo.
const char* kPtx = R"(.version 8.0
.target sm_90
.address_size 64

.visible .entry add_k(
	.param .u64 add_k_param_0,
	.param .u32 add_k_param_1
)
{
	ret;
}

.visible .entry none_k()
{
	ret;
}
)";

std::string temp_file(const char* suffix, const std::string& contents) {
    std::string path = ::testing::TempDir() + "fake_cuda_" + std::to_string(::getpid()) + suffix;
    std::ofstream(path, std::ios::binary) << contents;
    return path;
}

// ------------------------------------------------------------------------------------------------ devices

TEST_F(FakeCuda, DevicesComeFromTheDriverAfterTheCpuDevices) {
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    int cpus = env_int("RUNTIME_CPU_DEVICES", 1), gpus = env_int("FAKE_CUDA_DEVICES", 1);
    EXPECT_EQ(n, cpus + gpus);
    EXPECT_EQ(cuda_, cpus) << "cuda devices follow the cpu devices";
    for (int i = 0; i < gpus; ++i) {
        rtDeviceProp p{};
        ASSERT_RT_OK(rtGetDeviceProperties(&p, cpus + i));
        std::string name = p.name;
        EXPECT_EQ(name, "cuda:" + std::to_string(i) + " (Fake CUDA Device (test double))");
        EXPECT_STREQ(p.backend, "cuda");
        EXPECT_EQ(p.backend_ordinal, i);
        EXPECT_EQ(p.device_index, cpus + i);
        EXPECT_EQ(p.total_memory, size_t(1) << 30);
        EXPECT_EQ(p.compute_units, 132);
        EXPECT_EQ(p.compute_capability_major, 9);
        EXPECT_EQ(p.compute_capability_minor, 0);
        EXPECT_EQ(p.max_threads_per_block, 1024);
        EXPECT_EQ(p.max_block_size[2], 64);
        EXPECT_EQ(p.max_grid_size[1], 65535);
        EXPECT_EQ(p.unified_addressing, 0) << "GPU memory is not host-addressable";
    }
    int d = -1;
    ASSERT_RT_OK(rtGetDeviceByName(&d, "cuda"));
    EXPECT_EQ(d, cuda_) << "\"cuda\" means cuda:0";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, ("cuda:" + std::to_string(gpus)).c_str()));
    EXPECT_TRUE(contains(last_message(), "cuda:0")) << "the message lists the devices present";
}

TEST_F(FakeCuda, BackendCudaPutsCudaDevicesFirst) {
    ASSERT_RT_OK(rtFinalize());
    ASSERT_RT_OK(rtInit("backend=cuda"));
    int d = -1;
    ASSERT_RT_OK(rtGetDeviceByName(&d, "cuda:0"));
    EXPECT_EQ(d, 0);
    rtDeviceProp p{};
    ASSERT_RT_OK(rtGetDeviceProperties(&p, 0));
    EXPECT_STREQ(p.backend, "cuda");
    int cur = -1;
    ASSERT_RT_OK(rtGetDevice(&cur));
    EXPECT_EQ(cur, 0) << "device 0, every thread's initial device, is cuda:0";
}

TEST_F(FakeCuda, CudaEnableZeroEnumeratesNoCudaDevice) {
    int gpus_and_cpus = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&gpus_and_cpus));
    ASSERT_RT_OK(rtFinalize());
    ASSERT_RT_OK(rtInit("cuda.enable=0"));
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    EXPECT_EQ(n, gpus_and_cpus - env_int("FAKE_CUDA_DEVICES", 1)) << "the cpu devices only";
    for (int i = 0; i < n; ++i) {
        rtDeviceProp p{};
        ASSERT_RT_OK(rtGetDeviceProperties(&p, i));
        EXPECT_STREQ(p.backend, "cpu");
    }
    int d = 42;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, "cuda:0"));
    EXPECT_EQ(d, 42);
    EXPECT_TRUE(contains(last_message(), "the cuda backend is disabled (rtInit: cuda.enable=0)")) << last_message();
    EXPECT_RT_OK(rtInit("cuda.enable=off")) << "another spelling of the same configuration";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("cuda.enable=1"));
    EXPECT_TRUE(contains(last_message(), "already initialised")) << last_message();

    // Enabled again (and first): the fake GPUs are back.
    ASSERT_RT_OK(rtFinalize());
    ASSERT_RT_OK(rtInit("cuda.enable=yes;backend=cuda"));
    rtDeviceProp p{};
    ASSERT_RT_OK(rtGetDeviceProperties(&p, 0));
    EXPECT_STREQ(p.backend, "cuda");
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    EXPECT_EQ(n, gpus_and_cpus);

    // Disabled, backend=cuda has no cuda device to put first.
    ASSERT_RT_OK(rtFinalize());
    ASSERT_RT_OK(rtInit("backend=cuda;cuda.enable=false"));
    ASSERT_RT_OK(rtGetDeviceProperties(&p, 0));
    EXPECT_STREQ(p.backend, "cpu");
}

TEST_F(FakeCuda, CudaEnableComesFromTheEnvironmentAndIsChecked) {
    ASSERT_RT_OK(rtFinalize());
    {
        rt_test::EnvVar off("RUNTIME_CUDA", "0");
        int d = 0;
        EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, "cuda:0"));
        EXPECT_TRUE(contains(last_message(), "disabled (RUNTIME_CUDA=0)")) << last_message();
        ASSERT_RT_OK(rtFinalize());
        ASSERT_RT_OK(rtInit("cuda.enable=1")) << "rtInit's option wins over the environment";
        ASSERT_RT_OK(rtGetDeviceByName(&d, "cuda:0"));
        ASSERT_RT_OK(rtFinalize());
    }
    for (const char* bad : {"cuda.enable=maybe", "cuda.enable=", "cuda.enable=2", "cuda.devices=1", "cuda_enable=0"}) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit(bad)) << bad;
        ASSERT_RT_OK(rtFinalize());
    }
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("cuda.enable=maybe"));
    EXPECT_TRUE(contains(last_message(), "rtInit: cuda.enable='maybe'")) << last_message();
    EXPECT_TRUE(contains(last_message(), "expected 1 or 0")) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("cuda.devices=1"));
    EXPECT_TRUE(contains(last_message(), "unknown option 'cuda.devices'")) << last_message();
    EXPECT_TRUE(contains(last_message(), "cuda.enable")) << "the known keys include the cuda backend's";
    {
        rt_test::EnvVar bad("RUNTIME_CUDA", "sometimes");
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit(nullptr));
        EXPECT_TRUE(contains(last_message(), "RUNTIME_CUDA='sometimes'")) << last_message();
    }
    int d = -1;
    EXPECT_RT_OK(rtGetDeviceByName(&d, "cuda:0")) << "the environment restored, the fake GPUs are there";
}

// ------------------------------------------------------------------------------------------------ memory

TEST_F(FakeCuda, MallocFreeGoThroughTheDriverAndTheRegistry) {
    int live = fake().live_allocations();
    size_t free0 = 0, total = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free0, &total));
    EXPECT_EQ(total, size_t(1) << 30);
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 3 << 20));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
    EXPECT_EQ(fake().live_allocations(), live + 1);
    size_t free1 = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free1, &total));
    EXPECT_EQ(free0 - free1, size_t(3) << 20) << "cuMemGetInfo reports the allocation";

    // The registry knows the allocation's bounds: copies past its end are refused before reaching the driver.
    std::vector<unsigned char> host((3 << 20) + 1);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpy(p, host.data(), host.size(), RT_MEMCPY_HOST_TO_DEVICE));
    EXPECT_TRUE(contains(last_message(), rt_test::ptr_text(p))) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtMemcpy(host.data(), static_cast<char*>(p) + 16, 3 << 20, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemset(static_cast<char*>(p) + 1, 0, 3 << 20));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(static_cast<char*>(p) + 8)) << "interior pointer";

    ASSERT_RT_OK(rtFree(p));
    EXPECT_EQ(fake().live_allocations(), live);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(p));
    EXPECT_FALSE(last_message().empty());
    int local = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(&local)) << "a pointer the runtime never allocated";
    EXPECT_EQ(fake().live_allocations(), live) << "nothing reached cuMemFree";
}

TEST_F(FakeCuda, PinnedHostMemoryComesFromTheDriver) {
    int live = fake().live_host_allocations();
    void* h = nullptr;
    ASSERT_RT_OK(rtMallocHost(&h, 1 << 16));
    EXPECT_EQ(fake().live_host_allocations(), live + 1);
    rt_test::DevBuf d(1 << 16);
    auto src = pattern(1 << 16, 7);
    std::memcpy(h, src.data(), src.size());
    ASSERT_RT_OK(rtMemcpy(d.get(), h, 1 << 16, RT_MEMCPY_DEFAULT));
    std::vector<unsigned char> back(1 << 16);
    ASSERT_RT_OK(rtMemcpy(back.data(), d.get(), back.size(), RT_MEMCPY_DEFAULT));
    EXPECT_EQ(rt_test::first_mismatch(back.data(), src.data(), src.size()), -1);
    ASSERT_RT_OK(rtFreeHost(h));
    EXPECT_EQ(fake().live_host_allocations(), live);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFreeHost(h));
}

// E1: rtMallocHost is pinned for CUDA (the driver's portable memory) whichever device is current; a lost GPU leaves
// the current device's own host memory.
TEST_F(FakeCuda, PinnedHostMemoryIsTheDriversWhicheverDeviceIsCurrent) {
    rt_test::DevBuf d(1 << 16);  // on cuda:0
    ASSERT_RT_OK(rtSetDevice(cpu_));
    int live = fake().live_host_allocations();
    void* h = nullptr;
    ASSERT_RT_OK(rtMallocHost(&h, 1 << 16));
    EXPECT_EQ(fake().live_host_allocations(), live + 1) << "cuMemHostAlloc, though cpu:0 is current";
    auto src = pattern(1 << 16, 5);
    std::memcpy(h, src.data(), src.size());
    // Host memory of cpu:0 to the registry (a cpu:0 host-to-host copy works), usable by cuda:0's copies.
    std::vector<unsigned char> copy(src.size());
    ASSERT_RT_OK(rtMemcpy(copy.data(), h, copy.size(), RT_MEMCPY_HOST_TO_HOST));
    EXPECT_EQ(rt_test::first_mismatch(copy.data(), src.data(), src.size()), -1);
    ASSERT_RT_OK(rtSetDevice(cuda_));
    ASSERT_RT_OK(rtMemcpy(d.get(), h, src.size(), RT_MEMCPY_HOST_TO_DEVICE));
    std::vector<unsigned char> back(src.size());
    ASSERT_RT_OK(rtMemcpy(back.data(), d.get(), back.size(), RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(rt_test::first_mismatch(back.data(), src.data(), src.size()), -1);
    ASSERT_RT_OK(rtSetDevice(cpu_));
    ASSERT_RT_OK(rtFreeHost(h));
    ASSERT_RT_OK(rtDeviceSynchronize());
    EXPECT_EQ(fake().live_host_allocations(), live) << "freed by the device that allocated it";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFreeHost(h));
}

void fault_behind_the_runtimes_back(rtStream_t s, rtModule_t* m, int code = kIllegalAddress);

// A lost GPU cannot pin: rtMallocHost from a cpu device takes another GPU's, else the cpu device's own host memory.
TEST_F(FakeCuda, PinnedHostMemoryFallsBackWhenTheGpuIsLost) {
    StreamGuard s;
    rtModule_t m = nullptr;
    ASSERT_NO_FATAL_FAILURE(fault_behind_the_runtimes_back(s, &m, kIllegalAddress));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    ASSERT_RT_OK(rtSetDevice(cpu_));
    int live = fake().live_host_allocations();
    void* h = nullptr;
    ASSERT_RT_OK(rtMallocHost(&h, 4096));
    const bool other_gpu = env_int("FAKE_CUDA_DEVICES", 1) > 1;  // cuda:1 can still pin it
    EXPECT_EQ(fake().live_host_allocations(), live + (other_gpu ? 1 : 0)) << "not from the lost GPU";
    std::memset(h, 1, 4096);
    ASSERT_RT_OK(rtFreeHost(h));
    rtModuleUnload(m);
}

TEST_F(FakeCuda, CopiesAndFillsRoundTripSynchronously) {
    const size_t n = 1 << 20;
    rt_test::DevBuf a(n), b(n);
    ASSERT_NE(a.get(), nullptr);
    auto src = pattern(n, 1);
    ASSERT_RT_OK(rtMemcpy(a.get(), src.data(), n, RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(rtMemcpy(b.get(), a.get(), n, RT_MEMCPY_DEVICE_TO_DEVICE));
    ASSERT_RT_OK(rtMemset(b.get() + 100, 0xAB, 1000));
    std::vector<unsigned char> back(n), host2(n);
    ASSERT_RT_OK(rtMemcpy(back.data(), b.get(), n, RT_MEMCPY_DEVICE_TO_HOST));
    auto want = src;
    std::memset(want.data() + 100, 0xAB, 1000);
    EXPECT_EQ(rt_test::first_mismatch(back.data(), want.data(), n), -1);
    // Host to host on a cuda stream: the backend's in-order host function.
    ASSERT_RT_OK(rtMemcpy(host2.data(), back.data(), n, RT_MEMCPY_HOST_TO_HOST));
    EXPECT_EQ(rt_test::first_mismatch(host2.data(), want.data(), n), -1);
}

TEST_F(FakeCuda, AsyncCopiesRunInStreamOrderAfterTheHost) {
    const size_t n = 256 << 10;
    rt_test::DevBuf a(n), b(n);
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    // Pinned host memory: copies with pageable memory are synchronous (PageableCopiesAreSynchronousAsOnAGpu).
    rt_test::HostBuf src(n), back(n);
    ASSERT_RT_OK(src.status());
    ASSERT_RT_OK(back.status());
    rt_test::fill_pattern(src.get(), n, 2);
    std::memset(back.get(), 0, n);
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtMemcpyAsync(a.get(), src.get(), n, RT_MEMCPY_HOST_TO_DEVICE, s));
    ASSERT_RT_OK(rtMemsetAsync(a.get(), 0x5A, 4096, s));
    ASSERT_RT_OK(rtMemcpyAsync(b.get(), a.get(), n, RT_MEMCPY_DEVICE_TO_DEVICE, s));
    ASSERT_RT_OK(rtMemcpyAsync(back.get(), b.get(), n, RT_MEMCPY_DEVICE_TO_HOST, s));
    ASSERT_TRUE(rt_test::wait_until([&] { return gate.entered(); }));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtStreamQuery(s)) << "the gate holds the stream: work is queued, not done";
    EXPECT_EQ(back.get()[0], 0) << "nothing ran past the gate";
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_RT_OK(rtStreamQuery(s));
    std::vector<unsigned char> want(src.get(), src.get() + n);
    std::memset(want.data(), 0x5A, 4096);
    EXPECT_EQ(rt_test::first_mismatch(back.get(), want.data(), n), -1);
}

TEST_F(FakeCuda, GatesAreHostFunctionsHereAndTheDeviceSideGateLaunches) {
    // The fake runs no kernel code, so rt_test::Gate is a host function on it; on a GPU it is the spin kernel, whose
    // launch (NVRTC compile, parameters, pinned flags) is checked here as far as the fake can.
    int dev = -1;
    ASSERT_RT_OK(rtGetDevice(&dev));
    EXPECT_FALSE(rt_test::launches_execute(dev));
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    {
        Gate gate;
        ASSERT_RT_OK(gate.launch(s));
        EXPECT_FALSE(gate.on_device());
        EXPECT_TRUE(rt_test::wait_until([&] { return gate.entered(); }));
        EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtStreamQuery(s));
        gate.open();
        ASSERT_RT_OK(rtStreamSynchronize(s));
    }
    fake().reset_launches();
    Gate gate;
    ASSERT_RT_OK(gate.launch_on_device(s, dev));
    EXPECT_TRUE(gate.on_device());
    ASSERT_RT_OK(rtStreamSynchronize(s));
    FakeCudaLaunch l{};
    ASSERT_EQ(fake().launch_count(), 1);
    ASSERT_EQ(fake().last_launch(&l), 1);
    EXPECT_STREQ(l.kernel, "rt_test_gate");
    EXPECT_EQ(l.grid[0] * l.grid[1] * l.grid[2] * l.block[0] * l.block[1] * l.block[2], 1u) << "one thread spins";
    ASSERT_EQ(l.num_params, 3) << "the extent, the flags, the timeout";
    EXPECT_NE(l.param_u64[1], 0u) << "the pinned flags";
    EXPECT_EQ(l.param_u64[2], 20000000000ull * static_cast<unsigned>(rt_test::Watchdog::scale())) << "20 s, in ns";
}

TEST_F(FakeCuda, PageableCopiesAreSynchronousAsOnAGpu) {
    // The driver's "API synchronization behavior", modelled by the fake at its strictest: a copy from pageable
    // memory reads the source at the call (staged), a copy into pageable memory returns once it has completed;
    // pinned memory (rtMallocHost) copies in stream order without blocking the caller.
    const size_t n = 4096;
    rt_test::DevBuf d(n);
    StreamGuard s;
    ASSERT_RT_OK(s.status());
    std::vector<unsigned char> pageable(n, 1);
    {
        Gate gate;
        ASSERT_RT_OK(gate.launch(s));
        ASSERT_RT_OK(rtMemcpyAsync(d.get(), pageable.data(), n, RT_MEMCPY_HOST_TO_DEVICE, s));
        std::memset(pageable.data(), 2, n);  // after the call: the copy already took the source
        gate.open();
        ASSERT_RT_OK(rtStreamSynchronize(s));
        std::vector<unsigned char> got(n, 0);
        ASSERT_RT_OK(rtMemcpy(got.data(), d.get(), n, RT_MEMCPY_DEVICE_TO_HOST));
        EXPECT_EQ(got, std::vector<unsigned char>(n, 1)) << "a pageable source is read at the call";
    }
    {
        Gate gate;
        ASSERT_RT_OK(gate.launch(s));
        std::atomic<bool> returned{false};
        std::atomic<rtError_t> result{RT_ERROR_UNKNOWN};
        std::thread t([&] {
            result = rtMemcpyAsync(pageable.data(), d.get(), n, RT_MEMCPY_DEVICE_TO_HOST, s);
            returned = true;
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        EXPECT_FALSE(returned.load()) << "a copy into pageable memory returned before it ran (the gate holds it)";
        gate.open();
        t.join();
        EXPECT_RT_OK(result.load());
        EXPECT_EQ(pageable, std::vector<unsigned char>(n, 1)) << "the data had arrived when the call returned";
        ASSERT_RT_OK(rtStreamSynchronize(s));
    }
    {
        rt_test::HostBuf pinned(n);
        ASSERT_RT_OK(pinned.status());
        std::memset(pinned.get(), 0, n);
        Gate gate;
        ASSERT_RT_OK(gate.launch(s));
        ASSERT_RT_OK(rtMemcpyAsync(pinned.get(), d.get(), n, RT_MEMCPY_DEVICE_TO_HOST, s));  // returns at once
        EXPECT_EQ(pinned.get()[0], 0);
        gate.open();
        ASSERT_RT_OK(rtStreamSynchronize(s));
        EXPECT_EQ(pinned.get()[n - 1], 1);
    }
}

TEST_F(FakeCuda, MemoryStatisticsAreExact) {
    rtMemStats s0{}, s1{}, s2{};
    ASSERT_RT_OK(rtMemGetStats(&s0));
    void* p = nullptr;
    void* q = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 1000));
    ASSERT_RT_OK(rtMalloc(&q, 5000));
    ASSERT_RT_OK(rtMemGetStats(&s1));
    EXPECT_EQ(s1.allocated_bytes - s0.allocated_bytes, 6000u);
    EXPECT_EQ(s1.num_allocs - s0.num_allocs, 2u);
    EXPECT_EQ(s1.num_live_allocations - s0.num_live_allocations, 2u);
    EXPECT_GE(s1.peak_allocated_bytes, s1.allocated_bytes);
    ASSERT_RT_OK(rtFree(p));
    ASSERT_RT_OK(rtFree(q));
    ASSERT_RT_OK(rtMemGetStats(&s2));
    EXPECT_EQ(s2.allocated_bytes, s0.allocated_bytes);
    EXPECT_EQ(s2.num_frees - s0.num_frees, 2u);
    EXPECT_EQ(s2.num_live_allocations, s0.num_live_allocations);
}

TEST_F(FakeCuda, OutOfMemoryIsReportedAndRecoverable) {
    rtMemStats s0{}, s1{};
    ASSERT_RT_OK(rtMemGetStats(&s0));
    void* big = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_OUT_OF_MEMORY, rtMalloc(&big, size_t(2) << 30));
    EXPECT_EQ(big, nullptr);
    std::string m = last_message();
    EXPECT_TRUE(contains(m, "cuda:0")) << m;
    ASSERT_RT_OK(rtMemGetStats(&s1));
    EXPECT_EQ(s1.num_ooms - s0.num_ooms, 1u);
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 1 << 20)) << "the device still allocates after an out-of-memory";
    ASSERT_RT_OK(rtFree(p));
}

TEST_F(FakeCuda, PoolAllocatorCommitsThroughVirtualMemory) {
    int live = fake().live_allocations();
    ASSERT_RT_OK(rtEnablePoolAllocator(64 << 20, 1 << 20, RT_POOL_DEFAULT));
    EXPECT_EQ(fake().live_allocations(), live) << "the pool reserves address space, it does not cuMemAlloc";
    const size_t n = 3 << 20;  // spans two 2 MiB chunks
    void* p = nullptr;
    void* q = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, n));
    ASSERT_RT_OK(rtMalloc(&q, 4096));
    rtMemStats st{};
    ASSERT_RT_OK(rtMemGetStats(&st));
    EXPECT_EQ(st.pool_size, size_t(64) << 20);
    auto src = pattern(n, 9);
    std::vector<unsigned char> back(n);
    ASSERT_RT_OK(rtMemcpy(p, src.data(), n, RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(rtMemset(q, 3, 4096));
    ASSERT_RT_OK(rtMemcpy(back.data(), p, n, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(rt_test::first_mismatch(back.data(), src.data(), n), -1);
    size_t free_used = 0, total = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free_used, &total));
    EXPECT_LT(free_used, total) << "committed chunks count against the device";
    ASSERT_RT_OK(rtFree(p));
    ASSERT_RT_OK(rtFree(q));
    ASSERT_RT_OK(rtMemEmptyCache());
    ASSERT_RT_OK(rtEnablePoolAllocator(0, 0, RT_POOL_DEFAULT));
    size_t free_after = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free_after, &total));
    EXPECT_EQ(free_after, total) << "every chunk was unmapped and released";
}

// E2: a run of new chunks is mapped chunk by chunk and made accessible by one cuMemSetAccess.
TEST_F(FakeCuda, PoolCommitsGrantAccessOncePerRunOfChunks) {
    ASSERT_RT_OK(rtEnablePoolAllocator(64 << 20, 1 << 20, RT_POOL_DEFAULT));
    const size_t n = 9 << 20;  // five 2 MiB chunks
    const int calls = fake().set_access_count();
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, n));
    EXPECT_EQ(fake().set_access_count() - calls, 1) << "one cuMemSetAccess over the run, not one per chunk";
    auto src = pattern(n, 4);
    std::vector<unsigned char> back(n);
    ASSERT_RT_OK(rtMemcpy(p, src.data(), n, RT_MEMCPY_HOST_TO_DEVICE)) << "every chunk of the run is accessible";
    ASSERT_RT_OK(rtMemcpy(back.data(), p, n, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(rt_test::first_mismatch(back.data(), src.data(), n), -1);
    ASSERT_RT_OK(rtFree(p));
    ASSERT_RT_OK(rtEnablePoolAllocator(0, 0, RT_POOL_DEFAULT));
    size_t free_after = 0, total = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free_after, &total));
    EXPECT_EQ(free_after, total) << "every chunk was unmapped and released";
}

// E2: only out of memory is "full"; another failure of a commit is reported as itself, and undone.
TEST_F(FakeCuda, PoolCommitFailuresOtherThanOutOfMemoryAreReported) {
    constexpr int kNotSupported = 801;  // CUDA_ERROR_NOT_SUPPORTED
    ASSERT_RT_OK(rtEnablePoolAllocator(64 << 20, 1 << 20, RT_POOL_DEFAULT));
    rtMemStats s0{}, s1{};
    ASSERT_RT_OK(rtMemGetStats(&s0));
    fake().fail_next_map(kNotSupported);
    void* p = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtMalloc(&p, 5 << 20));
    EXPECT_TRUE(contains(last_message(), "cuMemMap")) << last_message();
    EXPECT_TRUE(contains(last_message(), "CUDA_ERROR_NOT_SUPPORTED")) << last_message();
    ASSERT_RT_OK(rtMemGetStats(&s1));
    EXPECT_EQ(s1.num_ooms, s0.num_ooms) << "not counted as out of memory";
    size_t free_now = 0, total = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free_now, &total));
    EXPECT_EQ(free_now, total) << "the chunks mapped before the failure were released";
    ASSERT_RT_OK(rtMalloc(&p, 5 << 20)) << "the next commit works";
    ASSERT_RT_OK(rtMemset(p, 1, 5 << 20));
    ASSERT_RT_OK(rtFree(p));
    // Out of memory stays out of memory.
    ASSERT_RT_OK(rtEnablePoolAllocator(0, 0, RT_POOL_DEFAULT));
    ASSERT_RT_OK(rtEnablePoolAllocator(size_t(4) << 30, 1 << 20, RT_POOL_DEFAULT));
    EXPECT_RT_ERROR(RT_ERROR_OUT_OF_MEMORY, rtMalloc(&p, size_t(2) << 30));
    ASSERT_RT_OK(rtMemGetStats(&s1));
    EXPECT_EQ(s1.num_ooms, s0.num_ooms + 1);
}

// ------------------------------------------------------------------------------------------------ streams, events

// E5: a host-to-host copy between two pinned blocks goes to cuMemcpyAsync, not to the shared callback thread;
// pageable memory still goes through a host function (in stream order, without blocking the caller).
TEST_F(FakeCuda, HostToHostCopiesBetweenPinnedBlocksSkipTheCallbackThread) {
    const size_t n = 1 << 20;
    void* a = nullptr;
    void* b = nullptr;
    ASSERT_RT_OK(rtMallocHost(&a, n));
    ASSERT_RT_OK(rtMallocHost(&b, n));
    auto src = pattern(n, 6);
    std::memcpy(a, src.data(), n);
    StreamGuard s;
    const int calls = fake().host_func_count();
    ASSERT_RT_OK(rtMemcpyAsync(b, a, n, RT_MEMCPY_HOST_TO_HOST, s));
    ASSERT_RT_OK(rtMemcpyAsync(static_cast<char*>(b) + 16, a, n - 16, RT_MEMCPY_HOST_TO_HOST, s)) << "inside blocks";
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(fake().host_func_count(), calls) << "no host function for pinned memory";
    EXPECT_EQ(std::memcmp(b, src.data(), 16), 0);
    EXPECT_EQ(std::memcmp(static_cast<char*>(b) + 16, src.data(), n - 16), 0);
    std::vector<unsigned char> pageable(n, 0);
    ASSERT_RT_OK(rtMemcpyAsync(pageable.data(), a, n, RT_MEMCPY_HOST_TO_HOST, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(fake().host_func_count(), calls + 1) << "pageable memory: a host function";
    EXPECT_EQ(rt_test::first_mismatch(pageable.data(), src.data(), n), -1);
    ASSERT_RT_OK(rtFreeHost(a));
    ASSERT_RT_OK(rtFreeHost(b));
}

TEST_F(FakeCuda, EventsOrderTwoStreams) {
    const size_t n = 64 << 10;
    rt_test::DevBuf a(n), b(n);
    StreamGuard s1, s2;
    EventGuard e;
    ASSERT_RT_OK(e.status());
    rt_test::HostBuf src(n), back(n);  // pinned: pageable copies are synchronous
    ASSERT_RT_OK(src.status());
    ASSERT_RT_OK(back.status());
    rt_test::fill_pattern(src.get(), n, 3);
    std::memset(back.get(), 0, n);
    Gate gate;
    ASSERT_RT_OK(gate.launch(s1));
    ASSERT_RT_OK(rtMemcpyAsync(a.get(), src.get(), n, RT_MEMCPY_HOST_TO_DEVICE, s1));
    ASSERT_RT_OK(rtEventRecord(e, s1));
    ASSERT_RT_OK(rtStreamWaitEvent(s2, e));
    ASSERT_RT_OK(rtMemcpyAsync(b.get(), a.get(), n, RT_MEMCPY_DEVICE_TO_DEVICE, s2));
    ASSERT_RT_OK(rtMemcpyAsync(back.get(), b.get(), n, RT_MEMCPY_DEVICE_TO_HOST, s2));
    ASSERT_TRUE(rt_test::wait_until([&] { return gate.entered(); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtEventQuery(e));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtStreamQuery(s2)) << "s2 waits for s1's event";
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s2));
    EXPECT_RT_OK(rtEventQuery(e));
    EXPECT_EQ(rt_test::first_mismatch(back.get(), src.get(), n), -1) << "s2 copied after s1's upload";
}

// rtStreamWaitNativeStream: a runtime stream waits for another library's CUstream (DLPack / CUDA Array Interface
// interop), here one made with the fake driver's own cuStreamCreate and held back by a host function of its own.
TEST_F(FakeCuda, AStreamWaitsForAForeignCuStream) {
    using CuStreamCreate = int (*)(void**, unsigned);
    using CuStreamDestroy = int (*)(void*);
    using CuMemsetD8Async = int (*)(unsigned long long, unsigned char, size_t, void*);
    using CuLaunchHostFunc = int (*)(void*, void (*)(void*), void*);
    void* h = ::dlopen(std::getenv("RUNTIME_CUDA_DRIVER_LIB"), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr);
    auto create = reinterpret_cast<CuStreamCreate>(::dlsym(h, "cuStreamCreate"));
    auto destroy = reinterpret_cast<CuStreamDestroy>(::dlsym(h, "cuStreamDestroy_v2"));
    auto memset_async = reinterpret_cast<CuMemsetD8Async>(::dlsym(h, "cuMemsetD8Async"));
    auto host_func = reinterpret_cast<CuLaunchHostFunc>(::dlsym(h, "cuLaunchHostFunc"));
    ASSERT_TRUE(create && destroy && memset_async && host_func);
    const size_t n = 4096;
    rt_test::DevBuf a(n);  // a runtime call first: cuda:0's context is current on this thread
    rt_test::HostBuf back(n);  // pinned: the copy below needs no host function (the foreign one holds that thread)
    ASSERT_RT_OK(back.status());
    std::memset(back.get(), 0, n);
    StreamGuard ours;
    void* foreign = nullptr;
    ASSERT_EQ(create(&foreign, 0), 0);
    static std::atomic<bool> open;
    open = false;
    ASSERT_EQ(host_func(foreign, [](void*) { rt_test::wait_until([] { return open.load(); }); }, nullptr), 0);
    ASSERT_EQ(memset_async(reinterpret_cast<unsigned long long>(a.get()), 7, n, foreign), 0);
    ASSERT_RT_OK(rtStreamWaitNativeStream(ours, foreign));
    ASSERT_RT_OK(rtMemcpyAsync(back.get(), a.get(), n, RT_MEMCPY_DEVICE_TO_HOST, ours));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtStreamQuery(ours)) << "ours waits for the foreign stream's fill";
    open = true;
    ASSERT_RT_OK(rtStreamSynchronize(ours));
    EXPECT_EQ(static_cast<unsigned char*>(back.get())[0], 7);
    EXPECT_EQ(static_cast<unsigned char*>(back.get())[n - 1], 7) << "ours copied after the foreign fill";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamWaitNativeStream(ours, reinterpret_cast<void*>(0x12345)));
    EXPECT_TRUE(contains(last_message(), "cuEventRecord")) << last_message();
    ASSERT_RT_OK(rtStreamSynchronize(ours)) << "a refused wait leaves the stream usable";
    EXPECT_EQ(destroy(foreign), 0);
    ::dlclose(h);
}

TEST_F(FakeCuda, ElapsedTimeMeasuresTheWorkBetweenEvents) {
    StreamGuard s;
    EventGuard start, end, untimed(RT_EVENT_DISABLE_TIMING);
    ASSERT_RT_OK(rtEventRecord(start, s));
    int ms = 30;
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::sleep_ms, &ms));
    ASSERT_RT_OK(rtEventRecord(end, s));
    ASSERT_RT_OK(rtEventSynchronize(end));
    float elapsed = 0;
    ASSERT_RT_OK(rtEventElapsedTime(&elapsed, start, end));
    EXPECT_GE(elapsed, 25.0f);
    EXPECT_LT(elapsed, 5000.0f);
    ASSERT_RT_OK(rtEventRecord(untimed, s));
    ASSERT_RT_OK(rtEventSynchronize(untimed));
    EXPECT_NE(rtEventElapsedTime(&elapsed, start, untimed), RT_SUCCESS) << "an event without timing";
    EXPECT_FALSE(last_message().empty());
}

TEST_F(FakeCuda, HostFunctionsRunInOrderAndFailuresReachTheNextSynchronize) {
    StreamGuard s;
    struct Log {
        std::mutex m;
        std::vector<int> order;
    } log;
    struct Item {
        Log* log;
        int i;
    };
    std::vector<Item> items;
    for (int i = 0; i < 50; ++i) items.push_back({&log, i});
    for (auto& it : items)
        ASSERT_RT_OK(rtLaunchHostFunc(s, [](void* p) {
            auto* item = static_cast<Item*>(p);
            std::lock_guard lock(item->log->m);
            item->log->order.push_back(item->i);
        }, &it));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_EQ(log.order.size(), 50u);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(log.order[i], i);

    ASSERT_RT_OK(rtLaunchHostFunc(s, [](void*) { rtHostFuncSetError(RT_ERROR_INVALID_VALUE, "fake-host-boom"); },
                                  nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamSynchronize(s));
    EXPECT_TRUE(contains(last_message(), "fake-host-boom")) << last_message();
    std::atomic<bool> flag{false};
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::set_flag, &flag)) << "a host function's failure is not sticky";
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_TRUE(flag.load());
}

// The failure semantics on cuda: a host function's failure skips the host functions behind it, travels to an event
// recorded after it and to a stream waiting for that event ("dependency failed"); all usable after the report.
TEST_F(FakeCuda, HostFunctionFailureTravelsThroughEvents) {
    StreamGuard a, b, c;
    rtEvent_t e = nullptr, e2 = nullptr;
    ASSERT_RT_OK(rtEventCreate(&e));
    ASSERT_RT_OK(rtEventCreate(&e2));
    rt_test::Gate gate;
    std::atomic<bool> a_after{false}, b_after{false};
    ASSERT_RT_OK(gate.launch(a));
    ASSERT_RT_OK(rtLaunchHostFunc(a, [](void*) { rtHostFuncSetError(RT_ERROR_LAUNCH_FAILED, "cuda-producer-broke"); },
                                  nullptr));
    ASSERT_RT_OK(rtEventRecord(e, a));
    ASSERT_RT_OK(rtLaunchHostFunc(a, rt_test::set_flag, &a_after));
    ASSERT_RT_OK(rtStreamWaitEvent(b, e));
    ASSERT_RT_OK(rtEventRecord(e2, b));  // a second hop, right behind the wait: c waits for b, which waited for a
    ASSERT_RT_OK(rtStreamWaitEvent(c, e2));
    ASSERT_RT_OK(rtLaunchHostFunc(b, rt_test::set_flag, &b_after));
    gate.open();
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(c));
    EXPECT_TRUE(contains(last_message(), "cuda-producer-broke")) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtEventSynchronize(e));
    EXPECT_TRUE(contains(last_message(), "cuda-producer-broke")) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(b));
    EXPECT_TRUE(contains(last_message(), "dependency failed")) << last_message();
    EXPECT_FALSE(b_after.load());
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(a));
    EXPECT_TRUE(contains(last_message(), "skipped")) << last_message();
    EXPECT_FALSE(a_after.load());
    ASSERT_RT_OK(rtLaunchHostFunc(b, rt_test::set_flag, &b_after));
    EXPECT_RT_OK(rtStreamSynchronize(b));
    EXPECT_TRUE(b_after.load());
    EXPECT_RT_OK(rtEventDestroy(e));
    EXPECT_RT_OK(rtEventDestroy(e2));
}

// ------------------------------------------------------------------------------------------------ modules, launches

TEST_F(FakeCuda, SourceModulesCompileWithNvrtcAndLaunchesReachTheDriver) {
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, kKernels, nullptr));
    rtFunction_t f = nullptr, none = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "scale"));
    ASSERT_RT_OK(rtModuleGetFunction(&none, m, "noop"));
    rtFunction_t missing = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_NOT_FOUND, rtModuleGetFunction(&missing, m, "nope"));
    EXPECT_TRUE(contains(last_message(), "scale")) << "the message lists the module's kernels: " << last_message();

    rt_test::DevBuf x(4096);
    void* xp = x.get();
    float a = 2.0f;
    int32_t n = 1024;
    void* args[] = {&xp, &a, &n};
    StreamGuard s;
    int before = fake().launch_count();
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{3, 2, 1}, rtDim3{64, 2, 1}, args, 128, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(fake().launch_count(), before + 1);
    FakeCudaLaunch l{};
    ASSERT_TRUE(fake().last_launch(&l));
    EXPECT_STREQ(l.kernel, "scale");
    EXPECT_EQ(l.grid[0], 3u);
    EXPECT_EQ(l.grid[1], 2u);
    EXPECT_EQ(l.grid[2], 1u);
    EXPECT_EQ(l.block[0], 64u);
    EXPECT_EQ(l.block[1], 2u);
    EXPECT_EQ(l.shared_bytes, 128u);

    // Shapes beyond the device's limits are refused by the core before the driver sees them.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{2048, 1, 1}, args, 0, s));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtLaunchKernel(f, rtDim3{0, 1, 1}, rtDim3{1, 1, 1}, args, 0, s));
    EXPECT_EQ(fake().launch_count(), before + 1);
    ASSERT_RT_OK(rtLaunchKernel(none, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, nullptr, 0, nullptr));
    ASSERT_RT_OK(rtDeviceSynchronize());
    ASSERT_TRUE(fake().last_launch(&l));
    EXPECT_STREQ(l.kernel, "noop");
    ASSERT_RT_OK(rtModuleUnload(m));

    // A second load of the same source is served from the device's module cache.
    rtModule_t m2 = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m2, kKernels, nullptr));
    ASSERT_RT_OK(rtModuleUnload(m2));
}

// Module globals and kernel templates on cuda (issue 13): rtModuleGetGlobal gives the driver's cuModuleGetGlobal
// address, registered as device memory of the cuda device (copies round-trip; the fake zeroes globals instead of
// initialising them, and runs no kernel code); an instantiation is looked up by its kernel name, launched under its
// lowered name with the extent first.
TEST_F(FakeCuda, ModuleGlobalsAndKernelTemplatesReachTheDriver) {
    const char* src = R"(
RT_GLOBAL float gain = 2.0f;
RT_GLOBAL int32_t lut[8];
template <class T> RT_KERNEL void axpy(T a, const T* x, T* y) {
    size_t i = get_global_id(0);
    y[i] = a * x[i] * gain + y[i] + (T)lut[i % 8];
}
RT_KERNEL_INSTANTIATE(axpy_f64, axpy<double>);
RT_KERNEL void plain(float* x) { x[0] = gain; }
)";
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, src, nullptr));
    void* g = nullptr;
    size_t bytes = 0;
    ASSERT_RT_OK(rtModuleGetGlobal(&g, &bytes, m, "lut"));
    EXPECT_EQ(bytes, 32u);
    const int32_t lut[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ASSERT_RT_OK(rtMemcpy(g, lut, sizeof lut, RT_MEMCPY_HOST_TO_DEVICE));
    int32_t back[8] = {};
    ASSERT_RT_OK(rtMemcpy(back, g, sizeof back, RT_MEMCPY_DEFAULT));
    EXPECT_EQ(std::memcmp(back, lut, sizeof lut), 0);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleGetGlobal(&g, &bytes, m, "gian"));
    EXPECT_TRUE(contains(last_message(), "its globals: gain, lut")) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleGetGlobal(&g, &bytes, m, "rt_cuda_fault_record_"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(g));

    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "axpy_f64"));
    int count = 4;
    size_t sizes[4] = {};
    ASSERT_RT_OK(rtFunctionGetParamInfo(f, &count, sizes));
    EXPECT_EQ(count, 3) << "the extent is not the kernel's";
    EXPECT_EQ(sizes[0], 8u);
    rtFunction_t missing = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_NOT_FOUND, rtModuleGetFunction(&missing, m, "axpy"));
    EXPECT_TRUE(contains(last_message(), "axpy_f64")) << last_message();
    EXPECT_TRUE(contains(last_message(), "plain")) << last_message();
    rt_test::DevBuf x(800), y(800);
    double a = 3.0;
    void* xp = x.get();
    void* yp = y.get();
    void* args[] = {&a, &xp, &yp};
    ASSERT_RT_OK(rt_test::launch_ex(f, rtDim3{2, 1, 1}, rtDim3{64, 1, 1}, args, 3, nullptr, 0, nullptr, 100));
    ASSERT_RT_OK(rtDeviceSynchronize());
    FakeCudaLaunch l{};
    ASSERT_TRUE(fake().last_launch(&l));
    EXPECT_TRUE(contains(l.kernel, "axpy")) << l.kernel;
    EXPECT_NE(std::string(l.kernel), "axpy_f64") << "launched under its lowered name";

    ASSERT_RT_OK(rtModuleUnload(m));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtModuleGetGlobal(&g, &bytes, m, "lut"));
}

// The marker kernel of modules the cuda target builds (src/backends/cuda/cuda_target.hpp).
constexpr const char* kBoundedMarker = "rt_bounded_module_v1_";

// Exact global sizes on cuda: the cuda target gives every kernel the launch's extent as a leading parameter (and
// the test that returns for items past it); the queue passes it ahead of the user's arguments.
// A kernel the front end cannot see (produced by a macro) is not bounded: it gets its arguments as written, and an
// exact global size it cannot honour is refused, never shifted into its first parameter.
TEST_F(FakeCuda, KernelsTheFrontEndDidNotBoundKeepCudasConvention) {
    const char* src = "#define MAKE(name) RT_KERNEL void name(float* x) { x[0] = 1.0f; }\nMAKE(made)\n"
                      "RT_KERNEL void written(float* x) { x[0] = 2.0f; }\n";
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, src, nullptr));
    rtFunction_t made = nullptr, written = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&made, m, "made"));
    ASSERT_RT_OK(rtModuleGetFunction(&written, m, "written"));
    int count = 4;
    size_t sizes[4] = {};
    ASSERT_RT_OK(rtFunctionGetParamInfo(made, &count, sizes));
    EXPECT_EQ(count, 1);
    count = 4;
    ASSERT_RT_OK(rtFunctionGetParamInfo(written, &count, sizes));
    EXPECT_EQ(count, 1);
    rt_test::DevBuf x(4096);
    void* xp = x.get();
    void* args[] = {&xp};
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED,
                    rt_test::launch_ex(made, rtDim3{2, 1, 1}, rtDim3{32, 1, 1}, args, 1, nullptr, 0, nullptr, 40));
    ASSERT_RT_OK(rtLaunchKernel(made, rtDim3{1, 1, 1}, rtDim3{32, 1, 1}, args, 0, nullptr));
    ASSERT_RT_OK(rtDeviceSynchronize());
    FakeCudaLaunch l{};
    ASSERT_TRUE(fake().last_launch(&l));
    EXPECT_EQ(l.num_params, 1);
    EXPECT_EQ(l.param_u64[0], reinterpret_cast<uintptr_t>(xp)) << "the pointer is the first argument";
    ASSERT_RT_OK(rt_test::launch_ex(written, rtDim3{2, 1, 1}, rtDim3{32, 1, 1}, args, 1, nullptr, 0, nullptr, 40));
    ASSERT_RT_OK(rtDeviceSynchronize());
    ASSERT_TRUE(fake().last_launch(&l));
    EXPECT_EQ(l.num_params, 2);
    EXPECT_EQ(l.param_u64[0], 40u) << "the bounded kernel gets the extent first";
    ASSERT_RT_OK(rtModuleUnload(m));
}

TEST_F(FakeCuda, SourceKernelsGetTheExactGlobalSizeAheadOfTheirArguments) {
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, kKernels, nullptr));
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "scale"));
    int count = 8;
    size_t sizes[8] = {};
    ASSERT_RT_OK(rtFunctionGetParamInfo(f, &count, sizes));
    ASSERT_EQ(count, 3) << "the extent is the runtime's, not one of the kernel's parameters";
    EXPECT_EQ(sizes[0], sizeof(void*));
    EXPECT_EQ(sizes[1], sizeof(float));
    EXPECT_EQ(sizes[2], sizeof(int32_t));
    rtFunction_t marker = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_NOT_FOUND, rtModuleGetFunction(&marker, m, kBoundedMarker));
    EXPECT_TRUE(contains(last_message(), "(its kernels: scale, noop)") || contains(last_message(), "(its kernels: noop, scale)"))
        << "the marker is not listed: " << last_message();

    rt_test::DevBuf x(4096);
    void* xp = x.get();
    float a = 2.0f;
    int32_t n = 1000;
    void* args[] = {&xp, &a, &n};
    StreamGuard s;
    ASSERT_RT_OK(rt_test::launch_ex(f, rtDim3{4, 1, 1}, rtDim3{256, 1, 1}, args, 3, sizes, 0, s, 1000));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    FakeCudaLaunch l{};
    ASSERT_TRUE(fake().last_launch(&l));
    EXPECT_STREQ(l.kernel, "scale");
    EXPECT_EQ(l.num_params, 4);
    EXPECT_EQ(l.param_u64[0], 1000u) << "global.x comes first";
    EXPECT_EQ(l.param_u64[1], reinterpret_cast<uintptr_t>(xp));
    EXPECT_EQ(l.grid[0], 4u);
    // rtLaunchKernel: the extent is grid x block.
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{3, 2, 1}, rtDim3{64, 2, 1}, args, 0, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_TRUE(fake().last_launch(&l));
    EXPECT_EQ(l.param_u64[0], 192u);
    EXPECT_EQ(l.param_u64[2] & 0xffffffffu, 0x40000000u) << "a = 2.0f follows the pointer";
    ASSERT_RT_OK(rtModuleUnload(m));
}

// rtModuleUnload never waits: the CUmodule is unloaded once the streams have run the launches queued before (the
// fake reports an unload with launches of the module still queued).
TEST_F(FakeCuda, ModulesUnloadOnceTheirQueuedLaunchesRan) {
    std::string path = temp_file(".ptx", kPtx);
    const int live = fake().live_modules(), unsafe = fake().unsafe_unloads();
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadFile(&m, path.c_str()));
    EXPECT_EQ(fake().live_modules(), live + 1);
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "add_k"));
    rt_test::DevBuf x(256);
    void* xp = x.get();
    uint32_t v = 1;
    void* args[] = {&xp, &v};
    StreamGuard s;
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{32, 1, 1}, args, 0, s));
    ASSERT_RT_OK(rtModuleUnload(m));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtModuleUnload(m));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{32, 1, 1}, args, 0, s));
    EXPECT_EQ(fake().live_modules(), live + 1) << "a launch of it is still queued";
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronize(s));  // runs what became due on the timeline
    EXPECT_EQ(fake().live_modules(), live);
    EXPECT_EQ(fake().unsafe_unloads(), unsafe);

    // With nothing queued, the module goes at once (the stream's kept last kernel is let go of too).
    ASSERT_RT_OK(rtModuleLoadFile(&m, path.c_str()));
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "add_k"));
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{32, 1, 1}, args, 0, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_RT_OK(rtModuleUnload(m));
    EXPECT_EQ(fake().live_modules(), live);
    EXPECT_EQ(fake().unsafe_unloads(), unsafe);
    std::remove(path.c_str());
}

TEST_F(FakeCuda, PtxFilesLoadAndLaunchesAreArityChecked) {
    std::string path = temp_file(".ptx", kPtx);
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadFile(&m, path.c_str()));
    std::remove(path.c_str());
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "add_k"));
    rtFunction_t missing = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_NOT_FOUND, rtModuleGetFunction(&missing, m, "add"));
    EXPECT_TRUE(contains(last_message(), "none_k")) << last_message();
    int count = 0;
    size_t sizes[4] = {};
    count = 4;
    ASSERT_RT_OK(rtFunctionGetParamInfo(f, &count, sizes));
    ASSERT_EQ(count, 2);
    EXPECT_EQ(sizes[0], 8u);
    EXPECT_EQ(sizes[1], 4u);

    rt_test::DevBuf x(256);
    void* xp = x.get();
    uint32_t v = 42;
    void* args[] = {&xp, &v};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rt_test::launch_ex(f, rtDim3{1, 1, 1}, rtDim3{32, 1, 1}, args, 1, nullptr, 0, nullptr));
    size_t bad[] = {8, 8};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rt_test::launch_ex(f, rtDim3{1, 1, 1}, rtDim3{32, 1, 1}, args, 2, bad, 0, nullptr));
    size_t good[] = {8, 4};
    ASSERT_RT_OK(rt_test::launch_ex(f, rtDim3{4, 1, 1}, rtDim3{32, 1, 1}, args, 2, good, 0, nullptr));
    v = 7;  // the driver copied the values at the call
    ASSERT_RT_OK(rtDeviceSynchronize());
    FakeCudaLaunch l{};
    ASSERT_TRUE(fake().last_launch(&l));
    EXPECT_STREQ(l.kernel, "add_k");
    EXPECT_EQ(l.num_params, 2);
    EXPECT_EQ(l.param_u64[0], reinterpret_cast<uintptr_t>(xp));
    EXPECT_EQ(l.param_u64[1], 42u);
    EXPECT_EQ(l.grid[0], 4u);

    // A foreign module (no bounded entries) runs whole groups: an exact global size it cannot honour is refused.
    int before = fake().launch_count();
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED,
                    rt_test::launch_ex(f, rtDim3{2, 1, 1}, rtDim3{32, 1, 1}, args, 2, good, 0, nullptr, 40));
    EXPECT_TRUE(contains(last_message(), "add_k") && contains(last_message(), "runtime-compile")) << last_message();
    EXPECT_EQ(fake().launch_count(), before);
    ASSERT_RT_OK(rt_test::launch_ex(f, rtDim3{2, 1, 1}, rtDim3{32, 1, 1}, args, 2, good, 0, nullptr, 64));
    ASSERT_RT_OK(rtModuleUnload(m));
}

TEST_F(FakeCuda, ModuleFilesThatAreNotCudaImagesAreRefused) {
    std::string path = temp_file(".bin", "definitely not a module");
    rtModule_t m = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleLoadFile(&m, path.c_str()));
    EXPECT_TRUE(contains(last_message(), "not a cubin")) << last_message();
    std::remove(path.c_str());
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleLoadFile(&m, "/nonexistent/k.cubin"));
    // A host ELF (this test executable; a cpu module from runtime-compile is one too) is refused before the driver
    // sees it: its e_machine is not EM_CUDA.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleLoadFile(&m, "/proc/self/exe"));
    EXPECT_TRUE(contains(last_message(), "a host shared object, not a cubin")) << last_message();
    EXPECT_TRUE(contains(last_message(), "/proc/self/exe")) << last_message();
    EXPECT_EQ(m, nullptr);
}

// ------------------------------------------------------------------------------------------------ faults

TEST_F(FakeCuda, AsyncFaultIsReportedNamingTheKernelAndLosesTheDevice) {
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, kKernels, nullptr));
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "noop"));
    StreamGuard s;
    // The gate holds the stream until everything below is queued: otherwise the fault may already be seen by
    // the next enqueue (CUDA reports a sticky error at any call), and the test would depend on timing.
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    fake().inject_fault(kIllegalAddress);
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, nullptr, 0, s)) << "the launch is accepted";
    // Work queued behind the fault never runs (CUDA drops host functions after a context error): the runtime
    // must neither hang on it nor leak what it queued (LeakSanitizer checks the ASan run).
    std::atomic<bool> ran{false};
    ASSERT_RT_OK(rtLaunchHostFunc(s, rt_test::set_flag, &ran));
    std::vector<unsigned char> h1(64), h2(64);
    ASSERT_RT_OK(rtMemcpyAsync(h2.data(), h1.data(), 64, RT_MEMCPY_HOST_TO_HOST, s));
    gate.open();
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    EXPECT_FALSE(ran.load()) << "a host function queued after the fault does not run";
    std::string msg = last_message();
    EXPECT_TRUE(contains(msg, "kernel 'noop'")) << msg;
    EXPECT_TRUE(contains(msg, "CUDA_ERROR_ILLEGAL_ADDRESS")) << msg;
    EXPECT_TRUE(contains(msg, "an illegal memory access was encountered")) << msg;

    // The context is lost: every later operation on the device fails at once, quoting the fault.
    void* p = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_DEVICE_LOST, rtMalloc(&p, 256));
    EXPECT_TRUE(contains(last_message(), "unusable")) << last_message();
    EXPECT_TRUE(contains(last_message(), "noop")) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_DEVICE_LOST, rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, nullptr, 0, s));

    // Other devices go on working.
    ASSERT_RT_OK(rtSetDevice(cpu_));
    ASSERT_RT_OK(rtMalloc(&p, 256));
    ASSERT_RT_OK(rtMemset(p, 1, 256));
    ASSERT_RT_OK(rtFree(p));

    // rtFinalize + rtInit: a fresh context.
    ASSERT_RT_OK(rtSetDevice(cuda_));
    rtModuleUnload(m);
    rtStreamDestroy(s.get());  // may fail on the lost device; the runtime forgets it either way
    ASSERT_RT_OK(rtFinalize());
    ASSERT_RT_OK(rtInit(nullptr));
    ASSERT_RT_OK(rtSetDevice(cuda_));
    ASSERT_RT_OK(rtMalloc(&p, 256));
    ASSERT_RT_OK(rtMemset(p, 1, 256));
    ASSERT_RT_OK(rtDeviceSynchronize());
    ASSERT_RT_OK(rtFree(p));
}

/// Loads kKernels' noop, launches it on `s` with a fault injected, and waits until the fake ran it: the context is
/// then sticky, and the runtime has not looked yet.
void fault_behind_the_runtimes_back(rtStream_t s, rtModule_t* m, int code) {
    ASSERT_RT_OK(rtModuleLoadSource(m, kKernels, nullptr));
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, *m, "noop"));
    fake().inject_fault(code);
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, nullptr, 0, s));
    fake().drain();
}

TEST_F(FakeCuda, QueryReportsAnAsyncFaultOnTheFirstCall) {
    StreamGuard s;
    rtModule_t m = nullptr;
    ASSERT_NO_FATAL_FAILURE(fault_behind_the_runtimes_back(s, &m));
    // The fault happened on the GPU; the very first query finds it (not a second one).
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamQuery(s));
    EXPECT_TRUE(contains(last_message(), "kernel 'noop'")) << last_message();
    EXPECT_TRUE(contains(last_message(), "CUDA_ERROR_ILLEGAL_ADDRESS")) << last_message();
    // Reported once; the device is lost from then on.
    EXPECT_RT_ERROR(RT_ERROR_DEVICE_LOST, rtStreamQuery(s));
    EXPECT_TRUE(contains(last_message(), "unusable")) << last_message();
    rtModuleUnload(m);
}

// B1 + F4: a failed rt_assert on cuda writes the device's fault record and ends its thread (no trap): the launch
// fails at the next synchronize naming the expression, file and line, and the stream and the device go on.
TEST_F(FakeCuda, FailedAssertIsReportedAtTheNextSynchronizeAndTheDeviceStaysUsable) {
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, kKernels, nullptr));
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "noop"));
    StreamGuard s;
    fake().assert_next_launch("data[i] != 12345", "kernels.cu", 42);
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, nullptr, 0, s));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    std::string msg = last_message();
    EXPECT_TRUE(contains(msg, "rt_assert(data[i] != 12345) failed at kernels.cu:42")) << msg;
    EXPECT_TRUE(contains(msg, "kernel 'noop'")) << msg;
    EXPECT_TRUE(contains(msg, "cuda:0")) << msg;
    // Reported once: the same stream and the device work on.
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, nullptr, 0, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    rt_test::DevBuf buf(4096);
    ASSERT_RT_OK(rtMemsetAsync(buf.get(), 7, 4096, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    // A second failure is reported too (the record was cleared), this time by the first query.
    fake().assert_next_launch("n > 0", "other.cu", 7);
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, nullptr, 0, s));
    fake().drain();
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamQuery(s));
    EXPECT_TRUE(contains(last_message(), "rt_assert(n > 0) failed at other.cu:7")) << last_message();
    EXPECT_RT_OK(rtStreamQuery(s));
    ASSERT_RT_OK(rtModuleUnload(m));
}

// The record is the device's: a stream that launched no kernel does not take it; an event recorded behind the
// launch carries it, and the launching stream still reports it.
TEST_F(FakeCuda, FailedAssertGoesToStreamsThatLaunchedAndEventsBehindThem) {
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, kKernels, nullptr));
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "noop"));
    StreamGuard s, copies;
    EventGuard e;
    rt_test::DevBuf buf(4096);
    fake().assert_next_launch("x < 4", "k.cu", 3);
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, nullptr, 0, s));
    ASSERT_RT_OK(rtEventRecord(e, s));
    ASSERT_RT_OK(rtMemsetAsync(buf.get(), 1, 4096, copies));
    fake().drain();
    ASSERT_RT_OK(rtStreamSynchronize(copies)) << "a stream without kernels is not blamed";
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtEventSynchronize(e));
    EXPECT_TRUE(contains(last_message(), "rt_assert(x < 4) failed at k.cu:3")) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    EXPECT_TRUE(contains(last_message(), "kernel 'noop'")) << last_message();
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_RT_OK(rtModuleUnload(m));
}

// A kernel whose module has no record (a foreign PTX file) keeps the prelude's fallback, printf + __trap(): the
// context is lost, as on a GPU.
TEST_F(FakeCuda, FailedAssertWithoutARecordTrapsAndLosesTheDevice) {
    rtModule_t m = nullptr;
    const std::string path = temp_file(".ptx", kPtx);
    ASSERT_RT_OK(rtModuleLoadFile(&m, path.c_str()));
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "none_k"));
    StreamGuard s;
    fake().assert_next_launch("never", "x.cu", 1);
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{1, 1, 1}, rtDim3{1, 1, 1}, nullptr, 0, s));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    EXPECT_TRUE(contains(last_message(), "CUDA_ERROR_LAUNCH_FAILED")) << last_message();
    void* p = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_DEVICE_LOST, rtMalloc(&p, 256));
    EXPECT_TRUE(contains(last_message(), "unusable")) << last_message();
    rtModuleUnload(m);
    std::remove(path.c_str());
}

TEST_F(FakeCuda, StickyErrorsFromAnyCallMarkTheDeviceLost) {
    StreamGuard s;
    rt_test::DevBuf buf(256);
    rtModule_t m = nullptr;
    ASSERT_NO_FATAL_FAILURE(fault_behind_the_runtimes_back(s, &m));
    // No synchronize or query saw the fault: the allocation is the first call to meet the sticky error.
    void* p = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtMalloc(&p, 256));
    std::string msg = last_message();
    EXPECT_TRUE(contains(msg, "unusable") && contains(msg, "cuMemAlloc")) << msg;
    EXPECT_TRUE(contains(msg, "CUDA_ERROR_ILLEGAL_ADDRESS")) << msg;
    // The primary-context caveat of a fresh start is stated.
    EXPECT_TRUE(contains(msg, "last reference")) << msg;
    // Every later operation on the device fails at once with the same story.
    EXPECT_RT_ERROR(RT_ERROR_DEVICE_LOST, rtMemsetAsync(buf.get(), 0, 1, s));
    EXPECT_RT_ERROR(RT_ERROR_DEVICE_LOST, rtStreamQuery(s));
    EXPECT_TRUE(contains(last_message(), "unusable")) << last_message();
    rtModuleUnload(m);
}

TEST_F(FakeCuda, AnUnknownErrorIsStickyToo) {
    // CUDA_ERROR_UNKNOWN (999) is what a context returns after an Xid fault: it does not recover either.
    StreamGuard s;
    rtModule_t m = nullptr;
    ASSERT_NO_FATAL_FAILURE(fault_behind_the_runtimes_back(s, &m, kUnknown));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(s));
    void* p = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_DEVICE_LOST, rtMalloc(&p, 256));
    EXPECT_TRUE(contains(last_message(), "unusable")) << last_message();
    rtModuleUnload(m);
}

TEST_F(FakeCuda, ALostGpuDoesNotBreakPooledFreesOnOtherDevices) {
    StreamGuard s;
    rt_test::DevBuf queued(4096);
    rtModule_t m = nullptr;
    ASSERT_NO_FATAL_FAILURE(fault_behind_the_runtimes_back(s, &m));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamQuery(s));  // the device is lost now
    // rtFree of pooled memory takes the position of every stream of every device, the lost GPU's included.
    ASSERT_RT_OK(rtSetDevice(cpu_));
    ASSERT_RT_OK(rtEnableMemoryReuse(1));
    for (int round = 0; round < 3; ++round) {
        void* p = nullptr;
        ASSERT_RT_OK(rtMalloc(&p, 1 << 16));
        ASSERT_RT_OK(rtMemset(p, round, 1 << 16));
        ASSERT_RT_OK(rtFree(p)) << "round " << round;
    }
    rtMemStats st{};
    ASSERT_RT_OK(rtMemGetStats(&st));
    EXPECT_GE(st.num_cache_hits, 1u) << "pooled frees came back for reuse";
    if (env_int("FAKE_CUDA_DEVICES", 1) >= 2) {
        int cuda1 = -1;
        ASSERT_RT_OK(rtGetDeviceByName(&cuda1, "cuda:1"));
        ASSERT_RT_OK(rtSetDevice(cuda1));
        ASSERT_RT_OK(rtEnableMemoryReuse(1));
        void* p = nullptr;
        ASSERT_RT_OK(rtMalloc(&p, 1 << 16));
        ASSERT_RT_OK(rtFree(p));
        ASSERT_RT_OK(rtDeviceSynchronize());
    }
    ASSERT_RT_OK(rtSetDevice(cuda_));
    rtModuleUnload(m);
}

TEST_F(FakeCuda, AGpuThatFailsToStartIsLeftOutWithTheReason) {
    ASSERT_RT_OK(rtFinalize());
    ::setenv("FAKE_CUDA_FAIL_RETAIN", "0", 1);  // cuda:0 is in exclusive use elsewhere
    struct Unset {
        ~Unset() { ::unsetenv("FAKE_CUDA_FAIL_RETAIN"); }
    } unset;
    ASSERT_RT_OK(rtInit(nullptr)) << "one bad GPU does not take the runtime down";
    int d = -1;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, "cuda:0"));
    std::string msg = last_message();
    EXPECT_TRUE(contains(msg, "cuda:0 cannot be used") && contains(msg, "cuDevicePrimaryCtxRetain")) << msg;
    EXPECT_TRUE(contains(msg, "CUDA_ERROR_DEVICE_UNAVAILABLE") && contains(msg, "exclusive")) << msg;
    // The cpu devices work.
    ASSERT_RT_OK(rtGetDeviceByName(&d, "cpu:0"));
    ASSERT_RT_OK(rtSetDevice(d));
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 256));
    ASSERT_RT_OK(rtMemset(p, 1, 256));
    ASSERT_RT_OK(rtFree(p));
    if (env_int("FAKE_CUDA_DEVICES", 1) >= 2) {
        // So do the other GPUs, under their own names.
        ASSERT_RT_OK(rtGetDeviceByName(&d, "cuda:1"));
        ASSERT_RT_OK(rtSetDevice(d));
        ASSERT_RT_OK(rtMalloc(&p, 256));
        ASSERT_RT_OK(rtMemset(p, 1, 256));
        ASSERT_RT_OK(rtFree(p));
        rtDeviceProp prop{};
        ASSERT_RT_OK(rtGetDeviceProperties(&prop, d));
        EXPECT_TRUE(contains(prop.name, "cuda:1")) << prop.name;
    }
    // Once the GPU is free again, a fresh start has it.
    ::unsetenv("FAKE_CUDA_FAIL_RETAIN");
    ASSERT_RT_OK(rtFinalize());
    ASSERT_RT_OK(rtGetDeviceByName(&d, "cuda:0"));
}

// ------------------------------------------------------------------------------------------------ host functions

/// What a host function on a cuda stream found when it called the runtime.
struct InCallback {
    int cuda = -1, cpu = -1;
    rtStream_t stream = nullptr;
    void* to_free = nullptr;
    rtError_t set = RT_ERROR_UNKNOWN, malloc = RT_ERROR_UNKNOWN, fill = RT_ERROR_UNKNOWN, query = RT_ERROR_UNKNOWN;
    rtError_t sync = RT_ERROR_UNKNOWN, free = RT_ERROR_UNKNOWN, cpu_work = RT_ERROR_UNKNOWN;
    std::string malloc_message;
};

TEST_F(FakeCuda, CudaCallsFromAHostFunctionFailFastAndItsFreesAreDeferred) {
    StreamGuard s;
    void* d = nullptr;
    ASSERT_RT_OK(rtMalloc(&d, 4096));
    const int live = fake().live_allocations();
    InCallback in;
    in.cuda = cuda_;
    in.cpu = cpu_;
    in.stream = s;
    in.to_free = d;
    auto fn = [](void* p) {
        auto* in = static_cast<InCallback*>(p);
        in->set = rtSetDevice(in->cuda);
        void* x = nullptr;
        in->malloc = rtMalloc(&x, 256);
        in->malloc_message = rtGetLastErrorMessage();
        in->fill = rtMemsetAsync(in->to_free, 0, 64, in->stream);
        in->query = rtStreamQuery(in->stream);
        in->sync = rtStreamSynchronize(in->stream);
        in->free = rtFree(in->to_free);  // the C++ keep-alive idiom's free: must neither wait nor call CUDA here
        // Other backends are not the driver's: a cpu device works from here.
        in->cpu_work = rtSetDevice(in->cpu);
        void* c = nullptr;
        if (in->cpu_work == RT_SUCCESS) in->cpu_work = rtMalloc(&c, 256);
        if (in->cpu_work == RT_SUCCESS) in->cpu_work = rtFree(c);
    };
    ASSERT_RT_OK(rtLaunchHostFunc(s, fn, &in));
    ASSERT_RT_OK(rtStreamSynchronize(s)) << "the host function's refused calls do not fail the stream";
    EXPECT_RT_OK(in.set);
    EXPECT_EQ(in.malloc, RT_ERROR_NOT_PERMITTED) << in.malloc_message;
    EXPECT_TRUE(contains(in.malloc_message, "host function")) << in.malloc_message;
    EXPECT_EQ(in.fill, RT_ERROR_NOT_PERMITTED);
    EXPECT_EQ(in.query, RT_ERROR_NOT_PERMITTED);
    EXPECT_EQ(in.sync, RT_ERROR_NOT_PERMITTED);
    EXPECT_RT_OK(in.free);
    EXPECT_RT_OK(in.cpu_work);
    // The free happens on the runtime's own thread once the stream's work has run (a condition, not a delay).
    EXPECT_TRUE(rt_test::wait_until([&] { return fake().live_allocations() == live - 1; }, std::chrono::seconds(20)))
        << "the memory freed in the host function was never released";
    // The stream and device stay usable.
    rt_test::DevBuf after(256);
    ASSERT_RT_OK(rtMemsetAsync(after.get(), 3, 256, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
}

TEST_F(FakeCuda, StreamsAndEventsReleasedInAHostFunctionGoLater) {
    StreamGuard s;
    struct Handles {
        rtStream_t stream = nullptr;
        rtEvent_t event = nullptr;
        void* pinned = nullptr;
        rtError_t stream_destroy = RT_ERROR_UNKNOWN, event_destroy = RT_ERROR_UNKNOWN, free_host = RT_ERROR_UNKNOWN;
    } h;
    ASSERT_RT_OK(rtStreamCreate(&h.stream));
    ASSERT_RT_OK(rtEventCreate(&h.event));
    ASSERT_RT_OK(rtMallocHost(&h.pinned, 4096));
    const int live_host = fake().live_host_allocations();
    auto fn = [](void* p) {
        auto* h = static_cast<Handles*>(p);
        h->stream_destroy = rtStreamDestroy(h->stream);
        h->event_destroy = rtEventDestroy(h->event);
        h->free_host = rtFreeHost(h->pinned);
    };
    ASSERT_RT_OK(rtLaunchHostFunc(s, fn, &h));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_RT_OK(h.stream_destroy);
    EXPECT_RT_OK(h.event_destroy);
    EXPECT_RT_OK(h.free_host);
    EXPECT_TRUE(rt_test::wait_until([&] { return fake().live_host_allocations() == live_host - 1; },
                                    std::chrono::seconds(20)))
        << "pinned memory freed in the host function was never released";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtStreamQuery(h.stream));
}

TEST_F(FakeCuda, HostFunctionsOfAllStreamsRunOnOneDriverThread) {
    // As the driver does: one callback thread per context, whatever the stream (so a blocked host function holds up
    // every stream's host functions — the tests' gates must not rely on the opposite).
    StreamGuard a, b;
    struct Seen {
        std::mutex m;
        std::vector<std::thread::id> ids;
    } seen;
    auto note = [](void* p) {
        auto* s = static_cast<Seen*>(p);
        std::lock_guard lock(s->m);
        s->ids.push_back(std::this_thread::get_id());
    };
    for (int i = 0; i < 4; ++i) {
        ASSERT_RT_OK(rtLaunchHostFunc(a, note, &seen));
        ASSERT_RT_OK(rtLaunchHostFunc(b, note, &seen));
        ASSERT_RT_OK(rtLaunchHostFunc(nullptr, note, &seen));
    }
    ASSERT_RT_OK(rtDeviceSynchronize());
    ASSERT_EQ(seen.ids.size(), 12u);
    for (const std::thread::id& id : seen.ids) EXPECT_EQ(id, seen.ids[0]);
    EXPECT_NE(seen.ids[0], std::this_thread::get_id());
}

// ------------------------------------------------------------------------------------------------ module images

TEST_F(FakeCuda, PtxTheJitRefusesCarriesTheJitLog) {
    std::string ptx = kPtx;
    ptx.replace(ptx.find(".target sm_90"), 13, ".target sm_120");
    std::string path = temp_file(".ptx", ptx);
    rtModule_t m = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_COMPILE_FAILED, rtModuleLoadFile(&m, path.c_str()));
    std::string msg = last_message();
    std::remove(path.c_str());
    EXPECT_TRUE(contains(msg, "CUDA_ERROR_INVALID_PTX")) << msg;
    EXPECT_TRUE(contains(msg, "JIT's log") && contains(msg, ".target sm_120 is newer")) << msg;
    EXPECT_TRUE(contains(msg, path)) << msg;
}

TEST_F(FakeCuda, ACubinTheDriverCannotLoadIsAnInvalidValue) {
    // A CUDA ELF header (e_machine EM_CUDA = 190) with nothing behind it: the driver's INVALID_IMAGE.
    std::string elf(64, '\0');
    elf.replace(0, 4, "\x7f" "ELF");
    elf[4] = 2;   // 64-bit
    elf[5] = 1;   // little-endian
    elf[6] = 1;   // version
    elf[16] = 2;  // ET_EXEC
    elf[18] = static_cast<char>(190);
    std::string path = temp_file(".cubin", elf);
    rtModule_t m = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtModuleLoadFile(&m, path.c_str()));
    std::remove(path.c_str());
    EXPECT_TRUE(contains(last_message(), path)) << last_message();
}

// ------------------------------------------------------------------------------------------------ misuse

TEST_F(FakeCuda, CrossBackendMisuseIsRefusedWithMessages) {
    rt_test::DevBuf gpu(4096);
    ASSERT_NE(gpu.get(), nullptr);
    ASSERT_RT_OK(rtSetDevice(cpu_));
    StreamGuard cpu_stream;
    EventGuard cpu_event;
    std::vector<unsigned char> host(4096);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtMemcpyAsync(host.data(), gpu.get(), 4096, RT_MEMCPY_DEVICE_TO_HOST, cpu_stream));
    EXPECT_TRUE(contains(last_message(), "cannot reach")) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemsetAsync(gpu.get(), 0, 4096, cpu_stream));
    EXPECT_TRUE(contains(last_message(), "cannot fill")) << last_message();

    ASSERT_RT_OK(rtSetDevice(cuda_));
    StreamGuard cuda_stream;
    EventGuard cuda_event;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEventRecord(cpu_event, cuda_stream));
    EXPECT_FALSE(last_message().empty());
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamWaitEvent(cuda_stream, cpu_event));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEventRecord(cuda_event, cpu_stream));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamWaitEvent(cpu_stream, cuda_event));

    if (env_int("FAKE_CUDA_DEVICES", 1) >= 2) {
        // A cuda event is recorded only on streams of its own device; copies between GPUs are fine.
        int cuda1 = -1;
        ASSERT_RT_OK(rtGetDeviceByName(&cuda1, "cuda:1"));
        ASSERT_RT_OK(rtSetDevice(cuda1));
        StreamGuard s1;
        rt_test::DevBuf other(4096);
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEventRecord(cuda_event, s1));
        EXPECT_TRUE(contains(last_message(), "own device")) << last_message();
        auto src = pattern(4096, 5);
        ASSERT_RT_OK(rtMemcpy(gpu.get(), src.data(), 4096, RT_MEMCPY_HOST_TO_DEVICE));
        ASSERT_RT_OK(rtMemcpyAsync(other.get(), gpu.get(), 4096, RT_MEMCPY_DEVICE_TO_DEVICE, s1));
        ASSERT_RT_OK(rtMemcpyAsync(host.data(), other.get(), 4096, RT_MEMCPY_DEVICE_TO_HOST, s1));
        ASSERT_RT_OK(rtStreamSynchronize(s1));
        EXPECT_EQ(rt_test::first_mismatch(host.data(), src.data(), 4096), -1);
        ASSERT_RT_OK(rtSetDevice(cuda_));
    }
}

TEST_F(FakeCuda, CallsFromAnotherThreadMakeTheContextCurrent) {
    // The driver's current context is per thread: a thread that never touched cuda must still work.
    rt_test::DevBuf d(4096);
    auto src = pattern(4096, 11);
    std::vector<unsigned char> back(4096);
    rtError_t e1 = RT_ERROR_UNKNOWN, e2 = RT_ERROR_UNKNOWN, e3 = RT_ERROR_UNKNOWN;
    std::thread t([&] {
        e1 = rtSetDevice(cuda_);
        e2 = rtMemcpy(d.get(), src.data(), 4096, RT_MEMCPY_HOST_TO_DEVICE);
        void* p = nullptr;
        e3 = rtMalloc(&p, 512);
        if (e3 == RT_SUCCESS) e3 = rtFree(p);
    });
    t.join();
    EXPECT_RT_OK(e1);
    EXPECT_RT_OK(e2);
    EXPECT_RT_OK(e3);
    ASSERT_RT_OK(rtMemcpy(back.data(), d.get(), 4096, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(rt_test::first_mismatch(back.data(), src.data(), 4096), -1);
}

}  // namespace
