// test_usage.cpp — rtDeviceGetUsage (memory, streams, operations, kernels of the calling process) and runtime-smi's
// status file: written at rtInit, kept current, removed at rtFinalize; RUNTIME_SMI=0; bad settings; concurrency.
#include "test_util.hpp"

#include <runtime/profiler.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>

using namespace rt_test;

namespace {

RT_TEST_TEMP_CACHE_DIR("usage");

const char* const kSource = R"rtsrc(
RT_KERNEL void add(int32_t* data, int32_t n, int32_t delta) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) data[i] += delta;
}
)rtsrc";

rtDeviceUsage usage_of(int device) {
    rtDeviceUsage u;
    std::memset(&u, 0xAB, sizeof u);  // every field must be written
    EXPECT_RT_OK(rtDeviceGetUsage(device, &u));
    return u;
}

class UsageTest : public ::testing::TestWithParam<int> {
protected:
    int device() const { return GetParam(); }
    void SetUp() override { ASSERT_RT_OK(rtSetDevice(device())); }
};

TEST_P(UsageTest, NamesTheDeviceAndMatchesItsMemoryStats) {
    rtDeviceProp p{};
    ASSERT_RT_OK(rtGetDeviceProperties(&p, device()));
    void* keep = nullptr;
    ASSERT_RT_OK(rtMalloc(&keep, 4096));
    const rtDeviceUsage u = usage_of(device());
    rtMemStats m{};
    ASSERT_RT_OK(rtMemGetStats(&m));
    EXPECT_EQ(u.device, device());
    EXPECT_STREQ(u.name, p.name);
    EXPECT_STREQ(u.backend, p.backend);
    size_t free_bytes = 0, total = 0;
    ASSERT_RT_OK(rtMemGetInfo(&free_bytes, &total));
    EXPECT_EQ(u.memory_total, total);
    EXPECT_EQ(u.memory.allocated_bytes, m.allocated_bytes);
    EXPECT_EQ(u.memory.reserved_bytes, m.reserved_bytes);
    EXPECT_EQ(u.memory.num_allocs, m.num_allocs);
    EXPECT_EQ(u.memory.num_live_allocations, m.num_live_allocations);
    EXPECT_EQ(u.memory.pool_size, m.pool_size);
    EXPECT_GE(u.streams, 1u);  // the default stream
    for (uint64_t r : u.reserved) EXPECT_EQ(r, 0u);
    ASSERT_RT_OK(rtFree(keep));
}

TEST_P(UsageTest, CountsMemoryStreamsAndOperations) {
    ASSERT_RT_OK(rtDeviceSynchronize());
    const rtDeviceUsage before = usage_of(device());
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 1 << 20));
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    rtDeviceUsage now = usage_of(device());
    EXPECT_EQ(now.memory.allocated_bytes, before.memory.allocated_bytes + (1 << 20));
    EXPECT_EQ(now.streams, before.streams + 1);
    EXPECT_EQ(now.operations, before.operations);
    ASSERT_RT_OK(rtMemsetAsync(p, 1, 1 << 20, s));
    ASSERT_RT_OK(rtMemsetAsync(p, 2, 4096, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    ASSERT_RT_OK(rtMemsetAsync(p, 3, 4096, nullptr));  // the default stream's
    now = usage_of(device());
    EXPECT_EQ(now.operations, before.operations + 3);
    EXPECT_EQ(now.kernels_launched, before.kernels_launched);
    // A destroyed stream leaves the list once its work is done; what it ran stays counted.
    ASSERT_RT_OK(rtStreamDestroy(s));
    ASSERT_RT_OK(rtDeviceSynchronize());
    ASSERT_TRUE(wait_until([&] { return usage_of(device()).streams == before.streams; }));
    now = usage_of(device());
    EXPECT_EQ(now.operations, before.operations + 3);
    ASSERT_RT_OK(rtFree(p));
    ASSERT_RT_OK(rtDeviceSynchronize());
    EXPECT_EQ(usage_of(device()).memory.allocated_bytes, before.memory.allocated_bytes);
}

TEST_P(UsageTest, CountsKernelLaunchesAndEveryKernelNodeOfAGraphReplay) {
    if (!launches_execute(device())) GTEST_SKIP() << "kernels do not run on this device (fake driver)";
    rtModule_t module = nullptr;
    rtFunction_t add = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&module, kSource, nullptr));
    ASSERT_RT_OK(rtModuleGetFunction(&add, module, "add"));
    int32_t* data = nullptr;
    ASSERT_RT_OK(rtMalloc(reinterpret_cast<void**>(&data), 64 * sizeof(int32_t)));
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    int32_t n = 64, delta = 1;
    void* args[] = {&data, &n, &delta};
    const rtDeviceUsage before = usage_of(device());
    ASSERT_RT_OK(rtLaunchKernel(add, rtDim3{1, 1, 1}, rtDim3{64, 1, 1}, args, 0, s));
    ASSERT_RT_OK(rtLaunchKernel(add, rtDim3{1, 1, 1}, rtDim3{64, 1, 1}, args, 0, s));
    rtDeviceUsage now = usage_of(device());
    EXPECT_EQ(now.kernels_launched, before.kernels_launched + 2);
    EXPECT_EQ(now.operations, before.operations + 2);

    // Captured work is not queued: nothing counts until the graph is launched, and then each replay counts its two
    // kernel nodes and one operation (the launch).
    rtGraph_t graph = nullptr;
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    ASSERT_RT_OK(rtLaunchKernel(add, rtDim3{1, 1, 1}, rtDim3{64, 1, 1}, args, 0, s));
    ASSERT_RT_OK(rtMemsetAsync(data, 0, 4, s));
    ASSERT_RT_OK(rtLaunchKernel(add, rtDim3{1, 1, 1}, rtDim3{64, 1, 1}, args, 0, s));
    ASSERT_RT_OK(rtStreamEndCapture(s, &graph));
    EXPECT_EQ(usage_of(device()).kernels_launched, before.kernels_launched + 2);
    rtGraphExec_t exec = nullptr;
    ASSERT_RT_OK(rtGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < 3; ++i) ASSERT_RT_OK(rtGraphLaunch(exec, s));
    now = usage_of(device());
    EXPECT_EQ(now.kernels_launched, before.kernels_launched + 2 + 3 * 2);
    EXPECT_EQ(now.operations, before.operations + 2 + 3);
    ASSERT_RT_OK(rtStreamSynchronize(s));

    // A launch refused before it is queued counts nothing.
    void* missing[] = {&data, &n, nullptr};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, launch_ex(add, rtDim3{1, 1, 1}, rtDim3{64, 1, 1}, missing, 3, nullptr, 0, s));
    EXPECT_EQ(usage_of(device()).kernels_launched, now.kernels_launched);

    ASSERT_RT_OK(rtGraphExecDestroy(exec));
    ASSERT_RT_OK(rtGraphDestroy(graph));
    ASSERT_RT_OK(rtStreamDestroy(s));
    ASSERT_RT_OK(rtFree(data));
    ASSERT_RT_OK(rtModuleUnload(module));
}

// Launching threads and a reader at once (run under ThreadSanitizer too): the reader sees counts that never go
// back, and the total is exact.
TEST_P(UsageTest, ConcurrentOperationsAreCountedExactly) {
    Watchdog dog(60s, "concurrent usage");
    constexpr int kThreads = 4, kOps = 200;
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 4096 * kThreads));
    const rtDeviceUsage before = usage_of(device());
    std::atomic<bool> done{false};
    std::atomic<int> failures{0};
    std::thread reader([&] {
        uint64_t last = 0;
        while (!done.load()) {
            rtDeviceUsage u{};
            if (rtDeviceGetUsage(device(), &u) != RT_SUCCESS || u.operations < last) failures.fetch_add(1);
            last = u.operations;
        }
    });
    std::vector<std::thread> workers;
    for (int t = 0; t < kThreads; ++t)
        workers.emplace_back([&, t] {
            auto check = [&](rtError_t e) { return e == RT_SUCCESS || (failures.fetch_add(1), false); };
            rtStream_t s = nullptr;
            if (!check(rtSetDevice(device())) || !check(rtStreamCreate(&s))) return;
            for (int i = 0; i < kOps; ++i) check(rtMemsetAsync(static_cast<char*>(p) + 4096 * t, i, 4096, s));
            check(rtStreamDestroy(s));
        });
    for (auto& w : workers) w.join();
    done = true;
    reader.join();
    EXPECT_EQ(failures.load(), 0);
    ASSERT_RT_OK(rtDeviceSynchronize());
    EXPECT_EQ(usage_of(device()).operations, before.operations + kThreads * kOps);
    ASSERT_RT_OK(rtFree(p));
}

INSTANTIATE_TEST_SUITE_P(Devices, UsageTest, ::testing::ValuesIn(device_indices()), device_param_name);

TEST(UsageErrors, RefusesANullOutputAndDevicesThatDoNotExist) {
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtDeviceGetUsage(0, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtDeviceGetUsage: usage is NULL"));
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    rtDeviceUsage u{};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtDeviceGetUsage(-1, &u));
    EXPECT_TRUE(contains(last_message(), "device -1 does not exist"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtDeviceGetUsage(n, &u));
    EXPECT_TRUE(contains(last_message(), "device " + std::to_string(n) + " does not exist"));
}

// ---- the status file (these tests restart the runtime with their own environment)

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

class StatusFileTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_RT_OK(rtFinalize());
        std::string tmpl = "/tmp/rt-test-smi-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
        dir_ = tmpl;
        dir_var_.emplace("RUNTIME_SMI_DIR", dir_.c_str());
        path_ = dir_ + "/" + std::to_string(::getpid()) + ".json";
    }
    void TearDown() override {
        EXPECT_RT_OK(rtFinalize());
        dir_var_.reset();
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    size_t files() const {
        return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(dir_),
                                                 std::filesystem::directory_iterator()));
    }

    std::string dir_, path_;
    std::optional<EnvVar> dir_var_;
};

TEST_F(StatusFileTest, WrittenAtInitKeptCurrentRemovedAtFinalize) {
    EnvVar on("RUNTIME_SMI", nullptr);
    ASSERT_RT_OK(rtInit(nullptr));
    ASSERT_TRUE(exists(path_)) << path_;  // before rtInit returns
    std::string text = read_text(path_);
    EXPECT_TRUE(contains(text, "\"format\":\"runtime-smi/1\""));
    EXPECT_TRUE(contains(text, "\"pid\":" + std::to_string(::getpid()) + ","));
    EXPECT_TRUE(contains(text, "\"label\":\"cpu:0\""));
    EXPECT_TRUE(contains(text, "\"allocated_bytes\":0,"));
    ASSERT_RT_OK(rtSetDevice(0));
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 3 << 20));
    // Device 0's record comes first: its allocated_bytes is the first in the file.
    auto first_allocated = [&] {
        std::string t = read_text(path_);
        size_t at = t.find("\"allocated_bytes\":");
        return at == std::string::npos ? std::string() : t.substr(at, t.find(',', at) - at);
    };
    EXPECT_TRUE(wait_until([&] { return first_allocated() == "\"allocated_bytes\":3145728"; })) << first_allocated();
    EXPECT_EQ(files(), 1u);  // no temporary file left beside it
    ASSERT_RT_OK(rtFree(p));
    ASSERT_RT_OK(rtFinalize());
    EXPECT_FALSE(exists(path_));
    EXPECT_EQ(files(), 0u);
    // A new runtime publishes again, from zero.
    ASSERT_RT_OK(rtInit(nullptr));
    EXPECT_TRUE(exists(path_));
    EXPECT_TRUE(contains(read_text(path_), "\"operations\":0,"));
}

TEST_F(StatusFileTest, RuntimeSmiZeroPublishesNothing) {
    EnvVar off("RUNTIME_SMI", "0");
    ASSERT_RT_OK(rtInit(nullptr));
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 4096));
    rtDeviceUsage u{};
    ASSERT_RT_OK(rtDeviceGetUsage(0, &u));  // the counters are there all the same
    EXPECT_EQ(u.memory.allocated_bytes, 4096u);
    EXPECT_EQ(files(), 0u);
    ASSERT_RT_OK(rtFree(p));
}

TEST_F(StatusFileTest, BadRuntimeSmiIsRefusedNamingIt) {
    {
        EnvVar bad("RUNTIME_SMI", "yes");
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtInit(nullptr));
        EXPECT_TRUE(contains(last_message(), "RUNTIME_SMI='yes'"));
        EXPECT_TRUE(contains(last_message(), "expected 0"));
        int n = 0;
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGetDeviceCount(&n));  // the lazy start refuses it too
        EXPECT_EQ(files(), 0u);
    }
    EnvVar on("RUNTIME_SMI", "1");
    ASSERT_RT_OK(rtInit(nullptr));
    EXPECT_TRUE(exists(path_));
}

TEST_F(StatusFileTest, UnusableDirectoryLeavesTheRuntimeWorking) {
    EnvVar on("RUNTIME_SMI", nullptr);
    EnvVar missing("RUNTIME_SMI_DIR", (dir_ + "/no/such/parent").c_str());
    ASSERT_RT_OK(rtInit(nullptr));
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 4096));
    ASSERT_RT_OK(rtFree(p));
    EXPECT_EQ(files(), 0u);
}

}  // namespace
