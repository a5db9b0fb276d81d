// test_cuda_shim.cpp — the cuda backend without a usable driver (no cuda devices, a reason for "cuda:0", device names and order, the rest works) and where the shims look for libnvrtc and libcuda.
// The driver library is pointed at a missing file (RUNTIME_CUDA_DRIVER_LIB), so these tests mean the same on machines
// with and without a GPU. The search tests lay copies of the fake driver and the fake NVRTC (tests/fake_cuda/) out in
// temporary folders shaped like a toolkit, a pip wheel and a driver installation.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "test_util.hpp"

#ifdef RUNTIME_HAVE_CUDA
#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/nvrtc.hpp"
#endif

namespace {

using rt_test::contains;
using rt_test::EnvVar;
using rt_test::last_message;

int cpu_devices_expected() {
    const char* e = std::getenv("RUNTIME_CPU_DEVICES");
    return e && *e ? std::atoi(e) : 1;
}

class CudaShim : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_RT_OK(rtFinalize()); }
    void TearDown() override { rtFinalize(); }
    EnvVar driver_{"RUNTIME_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1"};
    EnvVar backend_{"RUNTIME_BACKEND", nullptr};
};

TEST_F(CudaShim, MissingDriverLeavesOnlyCpuDevices) {
    int n = -1;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    EXPECT_EQ(n, cpu_devices_expected());
    for (int i = 0; i < n; ++i) {
        rtDeviceProp p{};
        ASSERT_RT_OK(rtGetDeviceProperties(&p, i));
        EXPECT_STREQ(p.backend, "cpu");
        EXPECT_EQ(p.backend_ordinal, i) << "cpu devices come first, in order";
    }
}

TEST_F(CudaShim, CudaDeviceNameSaysWhyCudaIsUnavailable) {
    int d = 42;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, "cuda:0"));
    EXPECT_EQ(d, 42) << "the output is untouched on failure";
    std::string m = last_message();
#ifdef RUNTIME_HAVE_CUDA
    EXPECT_TRUE(contains(m, "/nonexistent/libcuda.so.1")) << "the message names the driver library tried";
    EXPECT_TRUE(contains(m, "cannot be loaded"));
    EXPECT_TRUE(contains(m, "RUNTIME_CUDA_DRIVER_LIB")) << "and how to point at another one";
#else
    EXPECT_TRUE(contains(m, "no cuda backend"));
#endif
    EXPECT_TRUE(contains(m, "cpu:0")) << "and lists the devices present";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, "cuda"));
}

TEST_F(CudaShim, DisabledByEnvironmentSaysSo) {
#ifndef RUNTIME_HAVE_CUDA
    GTEST_SKIP() << "this build has no cuda backend";
#endif
    EnvVar off("RUNTIME_CUDA", "0");
    int d = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, "cuda:0"));
    EXPECT_TRUE(contains(last_message(), "RUNTIME_CUDA=0"));
}

TEST_F(CudaShim, CudaEnableZeroSaysSoWithoutOpeningTheDriver) {
#ifdef RUNTIME_HAVE_CUDA
    ASSERT_RT_OK(rtInit("cuda.enable=0"));
    int d = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, "cuda:0"));
    EXPECT_TRUE(contains(last_message(), "disabled (rtInit: cuda.enable=0)")) << last_message();
    EXPECT_FALSE(contains(last_message(), "/nonexistent")) << "the driver library is not tried";
#else
    // A build without the backend refuses its options, saying why.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("cuda.enable=0"));
    EXPECT_TRUE(contains(last_message(), "no cuda backend")) << last_message();
#endif
}

TEST_F(CudaShim, DeviceNamesResolveThroughOneParser) {
    int d = -1;
    ASSERT_RT_OK(rtGetDeviceByName(&d, "cpu:0"));
    EXPECT_EQ(d, 0);
    ASSERT_RT_OK(rtGetDeviceByName(&d, " CPU : 0 "));
    EXPECT_EQ(d, 0);
    ASSERT_RT_OK(rtGetDeviceByName(&d, "cpu"));
    EXPECT_EQ(d, 0);
    int n = cpu_devices_expected();
    std::string past = "cpu:" + std::to_string(n);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, past.c_str()));
    EXPECT_TRUE(contains(last_message(), "cpu:0.." + std::to_string(n - 1)));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, "tpu:0"));
    EXPECT_TRUE(contains(last_message(), "unknown backend 'tpu'"));
    for (const char* bad : {"", ":0", "cpu:", "cpu:x", "cpu:-1", "cpu:0:1", "cpu 0"}) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtGetDeviceByName(&d, bad)) << "'" << bad << "'";
        EXPECT_TRUE(contains(last_message(), "available: cpu:0")) << bad;
    }
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGetDeviceByName(&d, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGetDeviceByName(nullptr, "cpu:0"));
}

TEST_F(CudaShim, BackendOptionWithoutGpuKeepsCpuFirst) {
    ASSERT_RT_OK(rtInit("backend=cuda"));
    rtDeviceProp p{};
    ASSERT_RT_OK(rtGetDeviceProperties(&p, 0));
    EXPECT_STREQ(p.backend, "cpu") << "no cuda device: the order is unchanged, device 0 is cpu:0";
    int cur = -1;
    ASSERT_RT_OK(rtGetDevice(&cur));
    EXPECT_EQ(cur, 0);
    // A live runtime refuses a different backend choice, like any other option.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("backend=cpu"));
    ASSERT_RT_OK(rtFinalize());
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit("backend=tpu"));
    EXPECT_TRUE(contains(last_message(), "expected cpu or cuda"));
    {
        EnvVar env("RUNTIME_BACKEND", "gpu");
        int n = 0;
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGetDeviceCount(&n));
        EXPECT_TRUE(contains(last_message(), "RUNTIME_BACKEND"));
    }
    EnvVar env("RUNTIME_BACKEND", "cuda");
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    EXPECT_EQ(n, cpu_devices_expected());
}

TEST_F(CudaShim, EverythingElseWorksWithoutTheDriver) {
    const size_t n = 1 << 16;
    std::vector<unsigned char> src = rt_test::pattern(n, 7), back(n, 0);
    void* dev = nullptr;
    ASSERT_RT_OK(rtMalloc(&dev, n));
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    rtEvent_t e = nullptr;
    ASSERT_RT_OK(rtEventCreate(&e));
    ASSERT_RT_OK(rtMemcpyAsync(dev, src.data(), n, RT_MEMCPY_HOST_TO_DEVICE, s));
    ASSERT_RT_OK(rtEventRecord(e, s));
    ASSERT_RT_OK(rtStreamWaitEvent(nullptr, e));
    ASSERT_RT_OK(rtMemcpyAsync(back.data(), dev, n, RT_MEMCPY_DEVICE_TO_HOST, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    EXPECT_EQ(rt_test::first_mismatch(src.data(), back.data(), n), -1);
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, "RT_KERNEL void fill7(unsigned char* p, int n) {\n"
                                        "    int i = get_global_id(0); if (i < n) p[i] = 7; }\n", nullptr));
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "fill7"));
    int count = static_cast<int>(n);
    void* args[] = {&dev, &count};
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{static_cast<unsigned>(n / 256), 1, 1}, rtDim3{256, 1, 1}, args, 0, s));
    ASSERT_RT_OK(rtMemcpyAsync(back.data(), dev, n, RT_MEMCPY_DEVICE_TO_HOST, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    EXPECT_EQ(std::count(back.begin(), back.end(), 7), static_cast<long>(n));
    EXPECT_RT_OK(rtModuleUnload(m));
    EXPECT_RT_OK(rtEventDestroy(e));
    EXPECT_RT_OK(rtStreamDestroy(s));
    EXPECT_RT_OK(rtFree(dev));
}

// ------------------------------------------------------------------------------------------ library search

#ifdef RUNTIME_HAVE_CUDA
namespace fs = std::filesystem;

#if defined(__aarch64__)
constexpr const char* kTargetLib = "targets/sbsa-linux/lib";
#else
constexpr const char* kTargetLib = "targets/x86_64-linux/lib";
#endif

/// A scratch folder for laying out libraries, removed afterwards. Files are copies (never links) of the fakes, so
/// each is its own object for the loader, however many tests load "the same" library.
class LibrarySearch : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/rt-test-libsearch-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        root_ = tmpl;
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(root_, ec);
    }
    /// Copies `from` to root_/rel (creating folders); returns the new path.
    std::string put(const std::string& from, const std::string& rel) {
        const fs::path to = fs::path(root_) / rel;
        fs::create_directories(to.parent_path());
        fs::copy_file(from, to, fs::copy_options::overwrite_existing);
        return to.string();
    }
    std::string put_text(const std::string& rel, const std::string& text) {
        const fs::path to = fs::path(root_) / rel;
        fs::create_directories(to.parent_path());
        std::ofstream(to) << text;
        return to.string();
    }
    std::string root_;
};

TEST_F(LibrarySearch, NvrtcCandidatesFollowTheDocumentedOrder) {
    const std::string lib = RT_TEST_FAKE_NVRTC_LIB;
    const std::string major = std::to_string(CUDA_VERSION / 1000);
    const std::string a = put(lib, "explicit/libnvrtc.so." + major);
    const std::string b = put(lib, "home/lib64/libnvrtc.so." + major);
    const std::string c = put(lib, std::string("home/") + kTargetLib + "/libnvrtc.so.12");
    fs::create_directory_symlink("lib64", root_ + "/home/lib");  // the same files again: tried once
    const std::string d = put(lib, "fixed/lib64/libnvrtc.so");
    const std::string e = put(lib, "site/nvidia/cu13/lib/libnvrtc.so." + major);
    const std::string f = put(lib, "site/nvidia/cuda_nvrtc/lib/libnvrtc.so.12");
    put_text("site/nvidia/cu13/lib/README", "not a library name: never a candidate");

    rt::cuda::NvrtcSearch s;
    s.explicit_lib = root_ + "/explicit";  // a folder: searched first, then everything else
    s.toolkit_roots = {root_ + "/home", root_ + "/missing-toolkit"};
    s.loader = true;
    s.fixed_roots = {root_ + "/fixed"};
    s.python_packages = {root_ + "/site", root_ + "/no-such-site-packages"};
    std::vector<std::string> expected = {a, b, c, "libnvrtc.so." + major};  // the build's toolkit first
    for (const char* soname : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"})
        if (std::find(expected.begin(), expected.end(), soname) == expected.end()) expected.push_back(soname);
    for (const std::string& p : {d, e, f}) expected.push_back(p);
    EXPECT_EQ(rt::cuda::nvrtc_candidates(s), expected);

    const std::vector<std::string> folders = rt::cuda::nvrtc_search_folders(s);
    EXPECT_EQ(folders.front(), root_ + "/explicit");
    EXPECT_NE(std::find(folders.begin(), folders.end(), root_ + "/fixed/" + kTargetLib), folders.end())
        << "the toolkit's targets/ folder is searched";
    EXPECT_EQ(folders.back(), root_ + "/no-such-site-packages/nvidia/cuda_nvrtc/lib");

    s.loader = false;
    s.explicit_lib = a;  // a file: tried alone
    EXPECT_EQ(rt::cuda::nvrtc_candidates(s), std::vector<std::string>{a});
    s.explicit_lib = "libnvrtc.so.99";  // a soname: tried alone, by the loader
    EXPECT_EQ(rt::cuda::nvrtc_candidates(s), std::vector<std::string>{"libnvrtc.so.99"});
}

TEST_F(LibrarySearch, NvrtcFromAWheelPreloadsTheBuiltinsOfItsFolder) {
    const std::string major = std::to_string(CUDA_VERSION / 1000);
    // A toolkit folder whose "libnvrtc" is not a library: passed over, with the reason, for the wheel's.
    const std::string broken = put_text("toolkit/lib64/libnvrtc.so." + major, "not an ELF file\n");
    const std::string lib = put(RT_TEST_FAKE_NVRTC_LIB, "venv/site-packages/nvidia/cu13/lib/libnvrtc.so." + major);
    const std::string builtins =
        put(RT_TEST_FAKE_NVRTC_BUILTINS_LIB, "venv/site-packages/nvidia/cu13/lib/libnvrtc-builtins.so." + major + ".0");
    rt::cuda::NvrtcSearch s;
    s.toolkit_roots = {root_ + "/toolkit"};
    s.loader = false;
    s.python_packages = {root_ + "/venv/site-packages"};
    const std::vector<std::string> candidates = rt::cuda::nvrtc_candidates(s);
    ASSERT_EQ(candidates, (std::vector<std::string>{broken, lib}));
    ASSERT_EQ(::dlopen(builtins.c_str(), RTLD_NOW | RTLD_NOLOAD), nullptr) << "not loaded before the search";

    const rt::cuda::Nvrtc n = rt::cuda::load_nvrtc(candidates);
    ASSERT_TRUE(n.available) << n.why;
    EXPECT_EQ(n.library, lib);
    EXPECT_EQ(n.major, CUDA_VERSION / 1000);
    EXPECT_EQ(n.builtins, builtins) << "the builtins come from the folder NVRTC was loaded from";
    EXPECT_NE(::dlopen(builtins.c_str(), RTLD_NOW | RTLD_NOLOAD), nullptr);
    EXPECT_NE(::dlsym(RTLD_DEFAULT, "fake_nvrtc_builtins_marker"), nullptr)
        << "in the global scope, where NVRTC's own dlopen of the builtins soname finds it";

    const rt::cuda::Nvrtc none = rt::cuda::load_nvrtc({broken});
    EXPECT_FALSE(none.available);
    EXPECT_TRUE(contains(none.why, "cannot be loaded"));
    EXPECT_TRUE(contains(none.why, broken)) << "each candidate tried is named with its error";
}

TEST_F(LibrarySearch, PythonPackageFoldersAreFoundWithoutRunningPython) {
    // A library loaded from a site-packages folder (as the Python package's libruntime is) names that folder.
    const std::string loaded = put(RT_TEST_FAKE_NVRTC_BUILTINS_LIB, "py/lib/python3.12/site-packages/pkg/libthing.so");
    ASSERT_NE(::dlopen(loaded.c_str(), RTLD_NOW | RTLD_LOCAL), nullptr) << ::dlerror();
    fs::create_directories(root_ + "/venv/lib/python3.11/site-packages");
    fs::create_directories(root_ + "/conda/lib/python3.10/site-packages");
    EnvVar venv("VIRTUAL_ENV", (root_ + "/venv").c_str());
    EnvVar conda("CONDA_PREFIX", (root_ + "/conda").c_str());
    EnvVar path("PYTHONPATH", (root_ + "/pp1:" + root_ + "/pp2").c_str());
    EnvVar home("CUDA_HOME", (root_ + "/cuda-home").c_str());
    EnvVar cpath("CUDA_PATH", nullptr);
    EnvVar lib("RUNTIME_NVRTC_LIB", nullptr);
    const rt::cuda::NvrtcSearch s = rt::cuda::nvrtc_search_from_environment();
    auto has = [&](const std::string& p) {
        return std::find(s.python_packages.begin(), s.python_packages.end(), p) != s.python_packages.end();
    };
    EXPECT_TRUE(has(root_ + "/py/lib/python3.12/site-packages")) << "from the loaded library";
    EXPECT_TRUE(has(root_ + "/venv/lib/python3.11/site-packages")) << "$VIRTUAL_ENV";
    EXPECT_TRUE(has(root_ + "/conda/lib/python3.10/site-packages")) << "$CONDA_PREFIX";
    EXPECT_TRUE(has(root_ + "/pp1") && has(root_ + "/pp2")) << "$PYTHONPATH";
    EXPECT_EQ(s.toolkit_roots, std::vector<std::string>{root_ + "/cuda-home"});
    EXPECT_EQ(s.fixed_roots, std::vector<std::string>{"/usr/local/cuda"});
    EXPECT_TRUE(s.explicit_lib.empty());
}

TEST_F(LibrarySearch, DriverStubIsPassedOverForTheRealDriver) {
    const std::string stub = put(RT_TEST_FAKE_CUDA_LIB, "toolkit/lib64/stubs/libcuda.so.1");
    const std::string real = put(RT_TEST_FAKE_CUDA_LIB, "driver/libcuda.so.1");
    EnvVar code("FAKE_CUDA_CUINIT_RESULT", "34");  // CUDA_ERROR_STUB_LIBRARY, from the stub's folder only
    EnvVar in("FAKE_CUDA_CUINIT_RESULT_IN", (root_ + "/toolkit").c_str());
    rt::cuda::Driver d;
    rt::cuda::load_driver(d, stub, {root_ + "/absent/libcuda.so.1", real});
    ASSERT_TRUE(d.available) << d.why;
    EXPECT_EQ(d.library, real);
    EXPECT_GT(d.version, 0);
}

TEST_F(LibrarySearch, DriverFallbacksAreNamedWhenNoneWorks) {
    const std::string compat = put(RT_TEST_FAKE_CUDA_LIB, "cuda/compat/libcuda.so.1");
    const std::string other = put(RT_TEST_FAKE_CUDA_LIB, "lib64/libcuda.so.1");
    fs::create_symlink(compat, root_ + "/same.so.1");
    EnvVar code("FAKE_CUDA_CUINIT_RESULT", "803");  // CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, from every copy
    EnvVar in("FAKE_CUDA_CUINIT_RESULT_IN", nullptr);
    rt::cuda::Driver d;
    rt::cuda::load_driver(d, compat, {root_ + "/absent/libcuda.so.1", root_ + "/same.so.1", other});
    EXPECT_FALSE(d.available);
    EXPECT_TRUE(contains(d.why, compat)) << "the first library is named";
    EXPECT_TRUE(contains(d.why, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"));
    EXPECT_TRUE(contains(d.why, root_ + "/absent/libcuda.so.1 (absent)"));
    EXPECT_TRUE(contains(d.why, root_ + "/same.so.1 (the same file)"));
    EXPECT_TRUE(contains(d.why, other + " (cuInit of '" + other + "' failed"));

    // A driver that loads and says "no device" is the machine's answer: nothing else is tried.
    EnvVar none("FAKE_CUDA_CUINIT_RESULT", "100");
    rt::cuda::Driver e;
    rt::cuda::load_driver(e, put(RT_TEST_FAKE_CUDA_LIB, "nodev/libcuda.so.1"), {other});
    EXPECT_FALSE(e.available);
    EXPECT_TRUE(contains(e.why, "CUDA_ERROR_NO_DEVICE"));
    EXPECT_FALSE(contains(e.why, "also tried")) << e.why;

    // A first library that is missing altogether: the fallbacks are tried, and the hint says what to set.
    EnvVar ok("FAKE_CUDA_CUINIT_RESULT", nullptr);
    rt::cuda::Driver f;
    rt::cuda::load_driver(f, root_ + "/nothing/libcuda.so.1", {root_ + "/absent/libcuda.so.1"});
    EXPECT_FALSE(f.available);
    EXPECT_TRUE(contains(f.why, "cannot be loaded"));
    EXPECT_TRUE(contains(f.why, "also tried " + root_ + "/absent/libcuda.so.1 (absent)"));
    EXPECT_TRUE(contains(f.why, "RUNTIME_CUDA_DRIVER_LIB"));
    EXPECT_FALSE(rt::cuda::driver_fallbacks().empty());
    for (const std::string& p : rt::cuda::driver_fallbacks()) EXPECT_EQ(p.front(), '/') << p << " is absolute";
}
#endif  // RUNTIME_HAVE_CUDA

}  // namespace
