// test_comm_nccl_fake.cpp — collectives on cuda devices go to NCCL: run against the fake driver's two GPUs and the
// fake NCCL (tests/fake_cuda/fake_nccl.cpp, RUNTIME_NCCL_LIB), which records each call with its arguments. Checks the
// call of each collective, the data type and op values, the stream passed, group bracketing, ids, abort, errors,
// a captured collective replayed as NCCL calls, and the message without the library.
#include <dlfcn.h>
#include <runtime/comm.h>
#include <runtime/graph.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.hpp"

using namespace rt_test;

namespace {

/// The fake NCCL's test functions (the instance the runtime loaded: same path, same handle).
struct FakeNccl {
    const char* (*log)() = nullptr;
    void (*reset)() = nullptr;
    void (*fail)(const char*, int) = nullptr;
    void (*set_async_error)(int) = nullptr;
    FakeNccl() {
        const char* lib = std::getenv("RUNTIME_NCCL_LIB");
        void* h = lib ? ::dlopen(lib, RTLD_NOW | RTLD_LOCAL) : nullptr;
        if (!h) return;
        log = reinterpret_cast<const char* (*)()>(::dlsym(h, "fake_nccl_log"));
        reset = reinterpret_cast<void (*)()>(::dlsym(h, "fake_nccl_reset"));
        fail = reinterpret_cast<void (*)(const char*, int)>(::dlsym(h, "fake_nccl_fail"));
        set_async_error = reinterpret_cast<void (*)(int)>(::dlsym(h, "fake_nccl_set_async_error"));
    }
    bool usable() const { return log && reset && fail && set_async_error; }
    std::vector<std::string> lines() const {
        std::vector<std::string> out;
        std::istringstream in(log());
        for (std::string l; std::getline(in, l);) out.push_back(l);
        return out;
    }
};

std::vector<int> cuda_devices() {
    int n = 0;
    EXPECT_EQ(rtGetDeviceCount(&n), RT_SUCCESS);
    std::vector<int> out;
    for (int d = 0; d < n; ++d) {
        rtDeviceProp p;
        if (rtGetDeviceProperties(&p, d) == RT_SUCCESS && std::strcmp(p.backend, "cuda") == 0) out.push_back(d);
    }
    return out;
}

/// The value of `key=` in a recorded line ("" if none).
std::string field(const std::string& line, const std::string& key) {
    const size_t at = line.find(" " + key + "=");
    if (at == std::string::npos) return "";
    const size_t b = at + key.size() + 2;
    return line.substr(b, line.find(' ', b) - b);
}

std::string ptr(const void* p) {
    char s[32];
    std::snprintf(s, sizeof s, "%p", p);
    return s;
}

class CommNccl : public ::testing::Test {
protected:
    void SetUp() override {
        devices = cuda_devices();
        if (devices.size() < 2) GTEST_SKIP() << "needs two (fake) cuda devices: ctest runs this file with the fake "
                                                "driver (FAKE_CUDA_DEVICES=2) and the fake NCCL";
        if (!fake.usable()) GTEST_SKIP() << "RUNTIME_NCCL_LIB is not the fake NCCL";
        fake.reset();
        comms.resize(2);
        ASSERT_RT_OK(rtCommInitAll(comms.data(), 2, devices.data()));
        for (int d : devices) {
            ASSERT_RT_OK(rtSetDevice(d));
            rtStream_t s = nullptr;
            ASSERT_RT_OK(rtStreamCreate(&s));
            streams.push_back(s);
            void* p = nullptr;
            ASSERT_RT_OK(rtMalloc(&p, 4096));
            bufs.push_back(p);
            ASSERT_RT_OK(rtMalloc(&p, 4096));
            outs.push_back(p);
        }
        ASSERT_RT_OK(rtSetDevice(devices[0]));
    }
    void TearDown() override {
        for (rtComm_t c : comms)
            if (c) rtCommDestroy(c);
        for (rtStream_t s : streams) rtStreamDestroy(s);
        for (void* p : bufs) rtFree(p);
        for (void* p : outs) rtFree(p);
    }
    FakeNccl fake;
    std::vector<int> devices;
    std::vector<rtComm_t> comms;
    std::vector<rtStream_t> streams;
    std::vector<void*> bufs, outs;
};

}  // namespace

TEST_F(CommNccl, InitAllIsNcclCommInitAllOverTheDeviceOrdinals) {
    const auto lines = fake.lines();
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines[0], "ncclCommInitAll ndev=2 devlist=0,1");
    int count = 0, rank = -1, device = -1;
    ASSERT_RT_OK(rtCommCount(comms[1], &count));
    ASSERT_RT_OK(rtCommUserRank(comms[1], &rank));
    ASSERT_RT_OK(rtCommDevice(comms[1], &device));
    EXPECT_EQ(count, 2);
    EXPECT_EQ(rank, 1);
    EXPECT_EQ(device, devices[1]);
}

TEST_F(CommNccl, EachCollectiveIsTheNcclCallOfTheSameShapeOnTheRanksStream) {
    fake.reset();
    ASSERT_RT_OK(rtGroupStart());
    for (size_t r = 0; r < 2; ++r) {
        ASSERT_RT_OK(rtAllReduce(bufs[r], outs[r], 10, RT_FLOAT32, RT_REDUCE_MAX, comms[r], streams[r]));
        ASSERT_RT_OK(rtBroadcast(bufs[r], outs[r], 11, RT_INT64, 1, comms[r], streams[r]));
        ASSERT_RT_OK(rtReduce(bufs[r], outs[r], 12, RT_UINT8, RT_REDUCE_PROD, 0, comms[r], streams[r]));
        ASSERT_RT_OK(rtAllGather(bufs[r], outs[r], 13, RT_BFLOAT16, comms[r], streams[r]));
        ASSERT_RT_OK(rtReduceScatter(bufs[r], outs[r], 14, RT_FLOAT16, RT_REDUCE_AVG, comms[r], streams[r]));
        ASSERT_RT_OK(rtAlltoAll(bufs[r], outs[r], 3, RT_INT32, comms[r], streams[r]));
        ASSERT_RT_OK(rtCommBarrier(comms[r], streams[r]));
    }
    ASSERT_RT_OK(rtGroupEnd());
    const auto l = fake.lines();
    // One group around everything the thread called; per rank its calls in order, all-to-all a group of its own.
    ASSERT_EQ(l.size(), 2u + 2 * (5 + 2 + 4 + 1)) << fake.log();
    EXPECT_EQ(l.front(), "ncclGroupStart");
    EXPECT_EQ(l.back(), "ncclGroupEnd");
    std::string stream_of[2];
    for (size_t r = 0; r < 2; ++r) {
        const size_t b = 1 + r * 12;
        const std::string rank = std::to_string(r);
        EXPECT_EQ(l[b].rfind("ncclAllReduce ", 0), 0u) << l[b];
        EXPECT_EQ(field(l[b], "send"), ptr(bufs[r]));
        EXPECT_EQ(field(l[b], "recv"), ptr(outs[r]));
        EXPECT_EQ(field(l[b], "count"), "10");
        EXPECT_EQ(field(l[b], "type"), "7");  // ncclFloat32
        EXPECT_EQ(field(l[b], "op"), "2");    // ncclMax
        EXPECT_EQ(field(l[b], "rank"), rank);
        stream_of[r] = field(l[b], "stream");
        EXPECT_NE(stream_of[r], "(nil)");
        EXPECT_EQ(l[b + 1].rfind("ncclBroadcast ", 0), 0u) << l[b + 1];
        EXPECT_EQ(field(l[b + 1], "root"), "1");
        EXPECT_EQ(field(l[b + 1], "type"), "4");  // ncclInt64
        EXPECT_EQ(l[b + 2].rfind("ncclReduce ", 0), 0u) << l[b + 2];
        EXPECT_EQ(field(l[b + 2], "type"), "1");  // ncclUint8
        EXPECT_EQ(field(l[b + 2], "op"), "1");    // ncclProd
        EXPECT_EQ(field(l[b + 2], "root"), "0");
        EXPECT_EQ(l[b + 3].rfind("ncclAllGather ", 0), 0u) << l[b + 3];
        EXPECT_EQ(field(l[b + 3], "count"), "13");  // sendcount, as NCCL's
        EXPECT_EQ(field(l[b + 3], "type"), "9");    // ncclBfloat16
        EXPECT_EQ(l[b + 4].rfind("ncclReduceScatter ", 0), 0u) << l[b + 4];
        EXPECT_EQ(field(l[b + 4], "count"), "14");  // recvcount
        EXPECT_EQ(field(l[b + 4], "type"), "6");    // ncclFloat16
        EXPECT_EQ(field(l[b + 4], "op"), "4");      // ncclAvg
        EXPECT_EQ(l[b + 5], "ncclGroupStart");
        for (int p = 0; p < 2; ++p) {
            const std::string& s = l[b + 6 + 2 * static_cast<size_t>(p)];
            const std::string& v = l[b + 7 + 2 * static_cast<size_t>(p)];
            EXPECT_EQ(s.rfind("ncclSend ", 0), 0u) << s;
            EXPECT_EQ(field(s, "peer"), std::to_string(p));
            EXPECT_EQ(field(s, "send"), ptr(static_cast<char*>(bufs[r]) + p * 12));
            EXPECT_EQ(v.rfind("ncclRecv ", 0), 0u) << v;
            EXPECT_EQ(field(v, "recv"), ptr(static_cast<char*>(outs[r]) + p * 12));
            EXPECT_EQ(field(v, "count"), "3");
        }
        EXPECT_EQ(l[b + 10], "ncclGroupEnd");
        EXPECT_EQ(l[b + 11].rfind("ncclAllReduce ", 0), 0u) << l[b + 11];  // the barrier: one int32
        EXPECT_EQ(field(l[b + 11], "count"), "1");
        EXPECT_EQ(field(l[b + 11], "type"), "2");
        for (size_t k = b; k < b + 12; ++k)
            if (l[k].find("stream=") != std::string::npos) {
                EXPECT_EQ(field(l[k], "stream"), stream_of[r]) << l[k];
            }
    }
    EXPECT_NE(stream_of[0], stream_of[1]);  // each rank's own stream
    for (rtStream_t s : streams) ASSERT_RT_OK(rtStreamSynchronize(s));
}

TEST_F(CommNccl, EveryDataTypeAndOpHasNcclsValue) {
    const rtDataType types[] = {RT_INT8, RT_UINT8, RT_INT32, RT_UINT32, RT_INT64,
                                RT_UINT64, RT_FLOAT16, RT_FLOAT32, RT_FLOAT64, RT_BFLOAT16};
    const char* nccl_types[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
    const rtReduceOp ops[] = {RT_REDUCE_SUM, RT_REDUCE_PROD, RT_REDUCE_MAX, RT_REDUCE_MIN, RT_REDUCE_AVG};
    const char* nccl_ops[] = {"0", "1", "2", "3", "4"};
    for (size_t t = 0; t < 10; ++t)
        for (size_t o = 0; o < 5; ++o) {
            fake.reset();
            ASSERT_RT_OK(rtGroupStart());
            for (size_t r = 0; r < 2; ++r)
                ASSERT_RT_OK(rtAllReduce(bufs[r], bufs[r], 2, types[t], ops[o], comms[r], streams[r]));
            ASSERT_RT_OK(rtGroupEnd());
            const auto l = fake.lines();
            ASSERT_EQ(l.size(), 4u);
            EXPECT_EQ(field(l[1], "type"), nccl_types[t]) << "rtDataType " << types[t];
            EXPECT_EQ(field(l[1], "op"), nccl_ops[o]) << "rtReduceOp " << ops[o];
        }
}

TEST_F(CommNccl, AFailedNcclCallIsReturnedNamingItAndAsyncErrorsAreReported) {
    fake.fail("ncclAllReduce", 4);  // ncclInvalidArgument
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtAllReduce(bufs[0], bufs[0], 2, RT_INT32, RT_REDUCE_SUM, comms[0], streams[0]));
    EXPECT_NE(last_message().find("ncclAllReduce failed: invalid argument (fake) (ncclResult_t 4): the fake's last error"),
              std::string::npos) << last_message();
    fake.fail("ncclGroupEnd", 2);  // ncclSystemError: at rtGroupEnd
    ASSERT_RT_OK(rtGroupStart());
    ASSERT_RT_OK(rtCommBarrier(comms[0], streams[0]));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtGroupEnd());
    EXPECT_NE(last_message().find("ncclGroupEnd failed"), std::string::npos) << last_message();
    rtError_t async = RT_ERROR_INVALID_VALUE;
    ASSERT_RT_OK(rtCommGetAsyncError(comms[0], &async));
    EXPECT_EQ(async, RT_SUCCESS);
    fake.set_async_error(6);  // ncclRemoteError
    ASSERT_RT_OK(rtCommGetAsyncError(comms[0], &async));
    EXPECT_EQ(async, RT_ERROR_LAUNCH_FAILED);
    EXPECT_NE(last_message().find("NCCL reports an asynchronous error"), std::string::npos) << last_message();
}

TEST_F(CommNccl, AbortAndDestroyReachNccl) {
    fake.reset();
    ASSERT_RT_OK(rtCommAbort(comms[1]));
    comms[1] = nullptr;
    ASSERT_RT_OK(rtCommDestroy(comms[0]));
    comms[0] = nullptr;
    const auto l = fake.lines();
    ASSERT_EQ(l.size(), 2u) << fake.log();
    EXPECT_EQ(l[0], "ncclCommAbort rank=1");
    EXPECT_EQ(l[1], "ncclCommDestroy rank=0");
}

TEST_F(CommNccl, UniqueIdAndInitRankAreNcclsAndAnInProcessIdIsRefused) {
    fake.reset();
    ASSERT_RT_OK(rtSetDevice(devices[1]));
    rtCommUniqueId id;
    ASSERT_RT_OK(rtCommGetUniqueId(&id));
    EXPECT_EQ(std::memcmp(id.internal, "fake-nccl-id", 12), 0);  // NCCL's own 128 bytes
    rtComm_t c = nullptr;
    ASSERT_RT_OK(rtCommInitRank(&c, 1, id, 0));
    const auto l = fake.lines();
    ASSERT_EQ(l.size(), 2u) << fake.log();
    EXPECT_EQ(l[0], "ncclGetUniqueId");
    EXPECT_EQ(l[1], "ncclCommInitRank nranks=1 rank=0 id=fake-nccl-id");
    int device = -1;
    ASSERT_RT_OK(rtCommDevice(c, &device));
    EXPECT_EQ(device, devices[1]);
    ASSERT_RT_OK(rtCommDestroy(c));
    // An id of the in-process rendezvous (made with a cpu device current) on a cuda device.
    int n = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&n));
    int cpu = -1;
    for (int d = 0; d < n && cpu < 0; ++d) {
        rtDeviceProp p;
        if (rtGetDeviceProperties(&p, d) == RT_SUCCESS && std::strcmp(p.backend, "cpu") == 0) cpu = d;
    }
    ASSERT_GE(cpu, 0);
    ASSERT_RT_OK(rtSetDevice(cpu));
    ASSERT_RT_OK(rtCommGetUniqueId(&id));
    ASSERT_RT_OK(rtSetDevice(devices[0]));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtCommInitRank(&c, 1, id, 0));
    EXPECT_NE(last_message().find("uses NCCL"), std::string::npos) << last_message();
}

TEST_F(CommNccl, SplitIsNcclCommSplitInsideTheGroupOfItsRanks) {
    // One thread splits both ranks: in a group (NCCL's rule), the new communicators exist after rtGroupEnd.
    fake.reset();
    rtComm_t split[2] = {nullptr, nullptr};
    ASSERT_RT_OK(rtGroupStart());
    ASSERT_RT_OK(rtCommSplit(comms[0], 5, 1, &split[0]));
    ASSERT_RT_OK(rtCommSplit(comms[1], 5, 0, &split[1]));
    EXPECT_EQ(split[0], nullptr);  // written by rtGroupEnd
    ASSERT_RT_OK(rtGroupEnd());
    const auto l = fake.lines();
    ASSERT_EQ(l.size(), 4u) << fake.log();
    EXPECT_EQ(l[0], "ncclGroupStart");
    EXPECT_EQ(l[1], "ncclCommSplit rank=0 color=5 key=1 config=(nil)");
    EXPECT_EQ(l[2], "ncclCommSplit rank=1 color=5 key=0 config=(nil)");
    EXPECT_EQ(l[3], "ncclGroupEnd");
    ASSERT_NE(split[0], nullptr);
    ASSERT_NE(split[1], nullptr);
    for (int r = 0; r < 2; ++r) {  // the keys reverse the ranks; each keeps its device
        int count = 0, rank = -1, device = -1;
        ASSERT_RT_OK(rtCommCount(split[r], &count));
        ASSERT_RT_OK(rtCommUserRank(split[r], &rank));
        ASSERT_RT_OK(rtCommDevice(split[r], &device));
        EXPECT_EQ(count, 2);
        EXPECT_EQ(rank, 1 - r);
        EXPECT_EQ(device, devices[static_cast<size_t>(r)]);
    }
    // A collective on the new communicator is NCCL's call on the split's handle (its rank there).
    fake.reset();
    ASSERT_RT_OK(rtGroupStart());
    for (int r = 0; r < 2; ++r)
        ASSERT_RT_OK(rtAllReduce(bufs[static_cast<size_t>(r)], outs[static_cast<size_t>(r)], 3, RT_INT32, RT_REDUCE_SUM,
                                 split[r], streams[static_cast<size_t>(r)]));
    ASSERT_RT_OK(rtGroupEnd());
    const auto c = fake.lines();
    ASSERT_EQ(c.size(), 4u) << fake.log();
    EXPECT_EQ(field(c[1], "rank"), "1");
    EXPECT_EQ(field(c[1], "recv"), ptr(outs[0]));
    EXPECT_EQ(field(c[2], "rank"), "0");
    for (rtComm_t s : split) ASSERT_RT_OK(rtCommDestroy(s));
}

TEST_F(CommNccl, SplitWithoutAColorGivesNoCommunicator) {
    rtComm_t split[2] = {nullptr, nullptr};
    ASSERT_RT_OK(rtGroupStart());
    ASSERT_RT_OK(rtCommSplit(comms[0], 0, 0, &split[0]));
    ASSERT_RT_OK(rtCommSplit(comms[1], RT_COMM_SPLIT_NOCOLOR, 0, &split[1]));
    ASSERT_RT_OK(rtGroupEnd());
    ASSERT_NE(split[0], nullptr);
    EXPECT_EQ(split[1], nullptr);
    int count = 0;
    ASSERT_RT_OK(rtCommCount(split[0], &count));
    EXPECT_EQ(count, 1);
    ASSERT_RT_OK(rtCommDestroy(split[0]));
}

TEST_F(CommNccl, SplitOutsideAGroupBlocksLikeNcclsOwn) {
    // A one-rank communicator: its split completes in the call (more ranks: one thread each, as NCCL requires).
    rtComm_t one = nullptr, split = nullptr;
    ASSERT_RT_OK(rtCommInitAll(&one, 1, devices.data()));
    ASSERT_RT_OK(rtCommSplit(one, 2, 7, &split));
    ASSERT_NE(split, nullptr);
    int count = 0, rank = -1;
    ASSERT_RT_OK(rtCommCount(split, &count));
    ASSERT_RT_OK(rtCommUserRank(split, &rank));
    EXPECT_EQ(count, 1);
    EXPECT_EQ(rank, 0);
    ASSERT_RT_OK(rtCommDestroy(split));
    ASSERT_RT_OK(rtCommDestroy(one));
}

TEST_F(CommNccl, AFailedSplitNamesNcclCommSplit) {
    rtComm_t split = nullptr;
    fake.fail("ncclCommSplit", 4 /* ncclInvalidArgument */);
    rtComm_t one = nullptr;
    ASSERT_RT_OK(rtCommInitAll(&one, 1, devices.data()));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtCommSplit(one, 0, 0, &split));
    EXPECT_NE(last_message().find("ncclCommSplit"), std::string::npos) << last_message();
    EXPECT_EQ(split, nullptr);
    // In a group the failure is rtGroupEnd's, and the group's NCCL bracket is closed.
    fake.reset();
    fake.fail("ncclCommSplit", 4);
    ASSERT_RT_OK(rtGroupStart());
    ASSERT_RT_OK(rtCommSplit(one, 0, 0, &split));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGroupEnd());
    EXPECT_NE(last_message().find("ncclCommSplit"), std::string::npos) << last_message();
    EXPECT_EQ(split, nullptr);
    const auto l = fake.lines();
    ASSERT_FALSE(l.empty());
    EXPECT_EQ(l.back(), "ncclGroupEnd");
    ASSERT_RT_OK(rtCommDestroy(one));
}

TEST_F(CommNccl, ACapturedCollectiveIsAnNcclCallAtEachLaunch) {
    ASSERT_RT_OK(rtStreamBeginCapture(streams[0], RT_STREAM_CAPTURE_MODE_RELAXED));
    ASSERT_RT_OK(rtAllReduce(bufs[0], outs[0], 8, RT_FLOAT32, RT_REDUCE_SUM, comms[0], streams[0]));
    rtGraph_t g = nullptr;
    ASSERT_RT_OK(rtStreamEndCapture(streams[0], &g));
    rtGraphExec_t e = nullptr;
    ASSERT_RT_OK(rtGraphInstantiate(&e, g, 0));
    fake.reset();
    EXPECT_EQ(fake.lines().size(), 0u);  // captured, not called
    ASSERT_RT_OK(rtGraphLaunch(e, streams[0]));
    ASSERT_RT_OK(rtGraphLaunch(e, streams[0]));
    ASSERT_RT_OK(rtStreamSynchronize(streams[0]));
    const auto l = fake.lines();
    ASSERT_EQ(l.size(), 2u) << fake.log();
    for (const std::string& line : l) {
        EXPECT_EQ(line.rfind("ncclAllReduce ", 0), 0u) << line;
        EXPECT_EQ(field(line, "count"), "8");
        EXPECT_EQ(field(line, "recv"), ptr(outs[0]));
    }
    rtGraphExecDestroy(e);
    rtGraphDestroy(g);
}

TEST(CommNcclMissing, WithoutTheLibraryTheErrorNamesItAndThePackage) {
    const std::vector<int> devices = cuda_devices();
    if (devices.empty()) GTEST_SKIP() << "no (fake) cuda device";
    EnvVar lib("RUNTIME_NCCL_LIB", "/nonexistent/libnccl.so.2");
    rtComm_t c = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtCommInitAll(&c, 1, devices.data()));
    const std::string m = last_message();
    EXPECT_NE(m.find("libnccl.so.2 cannot be loaded (/nonexistent/libnccl.so.2: "), std::string::npos) << m;
    EXPECT_NE(m.find("pip install nvidia-nccl-cu12"), std::string::npos) << m;
    EXPECT_NE(m.find("cuda:"), std::string::npos) << m;  // the device
}
