// test_hccl.cpp — the HCCL face (hccl/hccl.h): communicators from HcclCommInitAll and HcclCommInitRootInfo with one
// thread per device, as HCCL's own samples run them; exact results of every collective; HCCL's error codes.
#include <acl/acl.h>
#include <hccl/hccl.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

// HCCL puts each rank on a device of its own: the file asks for two cpu devices unless the environment says otherwise
// (read when the runtime starts, after static initialisation).
const bool kTwoDevices = ::setenv("RUNTIME_CPU_DEVICES", "2", 0) == 0;

class AclEnvironment : public ::testing::Environment {
public:
    void SetUp() override { ASSERT_EQ(aclInit(nullptr), ACL_SUCCESS); }
    void TearDown() override { EXPECT_EQ(aclFinalize(), ACL_SUCCESS); }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new AclEnvironment);

std::string recent_message() {
    const char* m = aclGetRecentErrMsg();
    return m ? m : "";
}

#define EXPECT_HCCL(code, expr)                                                                                        \
    do {                                                                                                               \
        const HcclResult got_ = (expr);                                                                                \
        EXPECT_EQ(got_, code) << #expr << " returned " << HcclGetErrorString(got_) << ": " << recent_message();       \
    } while (0)

int device_count() {
    uint32_t n = 0;
    EXPECT_EQ(aclrtGetDeviceCount(&n), ACL_SUCCESS);
    return static_cast<int>(n);
}

/// One rank's device, stream and device buffers, driven from its own thread as in HCCL's samples.
struct Rank {
    int32_t device = 0;
    HcclComm comm = nullptr;
    aclrtStream stream = nullptr;
    std::vector<void*> buffers;

    void* alloc(size_t bytes) {
        void* p = nullptr;
        EXPECT_EQ(aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
        buffers.push_back(p);
        return p;
    }
    template <class T> void* upload(const std::vector<T>& v) {
        void* p = alloc(v.size() * sizeof(T));
        EXPECT_EQ(aclrtMemcpy(p, v.size() * sizeof(T), v.data(), v.size() * sizeof(T), ACL_MEMCPY_HOST_TO_DEVICE),
                  ACL_SUCCESS);
        return p;
    }
    template <class T> std::vector<T> download(const void* p, size_t n) {
        std::vector<T> v(n);
        EXPECT_EQ(aclrtMemcpy(v.data(), n * sizeof(T), p, n * sizeof(T), ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
        return v;
    }
};

/// Runs body(rank) on n threads, thread r bound to device devices[r] with a stream of it; frees what it allocated.
void on_ranks(const std::vector<int32_t>& devices, const std::vector<HcclComm>& comms,
              const std::function<void(Rank&, int)>& body) {
    std::vector<std::thread> threads;
    for (size_t r = 0; r < devices.size(); ++r)
        threads.emplace_back([&, r] {
            Rank rank;
            rank.device = devices[r];
            rank.comm = comms[r];
            ASSERT_EQ(aclrtSetDevice(rank.device), ACL_SUCCESS);
            ASSERT_EQ(aclrtCreateStream(&rank.stream), ACL_SUCCESS);
            body(rank, static_cast<int>(r));
            EXPECT_EQ(aclrtDestroyStream(rank.stream), ACL_SUCCESS);
            for (void* p : rank.buffers) EXPECT_EQ(aclrtFree(p), ACL_SUCCESS);
        });
    for (auto& t : threads) t.join();
}

/// Two ranks of HcclCommInitAll on devices 0 and 1.
class HcclTwoRanks : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(kTwoDevices);
        if (device_count() < 2) GTEST_SKIP() << "needs two devices (RUNTIME_CPU_DEVICES=2)";
        ASSERT_EQ(HcclCommInitAll(2, devices.data(), comms.data()), HCCL_SUCCESS) << recent_message();
    }
    void TearDown() override {
        for (HcclComm c : comms)
            if (c) EXPECT_HCCL(HCCL_SUCCESS, HcclCommDestroy(c));
    }
    std::vector<int32_t> devices{0, 1};
    std::vector<HcclComm> comms{nullptr, nullptr};
};

TEST_F(HcclTwoRanks, RankSizeAndIdsFollowTheDeviceList) {
    for (uint32_t r = 0; r < 2; ++r) {
        uint32_t size = 0, id = 99;
        EXPECT_HCCL(HCCL_SUCCESS, HcclGetRankSize(comms[r], &size));
        EXPECT_HCCL(HCCL_SUCCESS, HcclGetRankId(comms[r], &id));
        EXPECT_EQ(size, 2u);
        EXPECT_EQ(id, r);
        HcclResult async = HCCL_E_INTERNAL;
        EXPECT_HCCL(HCCL_SUCCESS, HcclGetCommAsyncError(comms[r], &async));
        EXPECT_EQ(async, HCCL_SUCCESS);
    }
}

TEST_F(HcclTwoRanks, AllReduceSumAndMaxExact) {
    // int32 sum wraps modulo 2^32 as HCCL's does; float max picks per element.
    on_ranks(devices, comms, [](Rank& k, int r) {
        const std::vector<int32_t> a{1 + r, -7 * (r + 1), INT32_MAX, 1000 * r};
        const std::vector<float> b{r ? 2.5f : -1.0f, r ? -3.0f : -2.0f, 0.0f, r ? 7.25f : 7.5f};
        void* sa = k.upload(a);
        void* ra = k.alloc(a.size() * 4);
        void* sb = k.upload(b);
        void* rb = k.alloc(b.size() * 4);
        EXPECT_HCCL(HCCL_SUCCESS, HcclAllReduce(sa, ra, 4, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, k.comm, k.stream));
        EXPECT_HCCL(HCCL_SUCCESS, HcclAllReduce(sb, rb, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, k.comm, k.stream));
        ASSERT_EQ(aclrtSynchronizeStream(k.stream), ACL_SUCCESS);
        EXPECT_EQ(k.download<int32_t>(ra, 4), (std::vector<int32_t>{3, -21, -2, 1000}));
        EXPECT_EQ(k.download<float>(rb, 4), (std::vector<float>{2.5f, -2.0f, 0.0f, 7.5f}));
    });
}

TEST_F(HcclTwoRanks, BroadcastReduceGatherScatterAndAlltoAllExact) {
    on_ranks(devices, comms, [](Rank& k, int r) {
        // Broadcast from root 1, in place in buf.
        void* buf = k.upload(std::vector<int64_t>{r ? 11 : 0, r ? -12 : 0, r ? 13 : 0});
        EXPECT_HCCL(HCCL_SUCCESS, HcclBroadcast(buf, 3, HCCL_DATA_TYPE_INT64, 1, k.comm, k.stream));
        // Reduce (PROD) to root 0: recvBuf is only written there.
        void* rs = k.upload(std::vector<int32_t>{r + 2, -3, 5});
        void* rr = k.upload(std::vector<int32_t>{-1, -1, -1});
        EXPECT_HCCL(HCCL_SUCCESS, HcclReduce(rs, rr, 3, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_PROD, 0, k.comm, k.stream));
        // AllGather of 2 uint8 per rank.
        void* gs = k.upload(std::vector<uint8_t>{static_cast<uint8_t>(10 + r), static_cast<uint8_t>(20 + r)});
        void* gr = k.alloc(4);
        EXPECT_HCCL(HCCL_SUCCESS, HcclAllGather(gs, gr, 2, HCCL_DATA_TYPE_UINT8, k.comm, k.stream));
        // ReduceScatter (MIN) of 2 float per rank out of 4.
        void* ss = k.upload(std::vector<float>{1.0f + r, -1.0f * r, 4.0f - r, 0.5f});
        void* sr = k.alloc(8);
        EXPECT_HCCL(HCCL_SUCCESS,
                    HcclReduceScatter(ss, sr, 2, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MIN, k.comm, k.stream));
        // AlltoAll of one int32 to each rank.
        void* as = k.upload(std::vector<int32_t>{100 * r + 0, 100 * r + 1});
        void* ar = k.alloc(8);
        EXPECT_HCCL(HCCL_SUCCESS, HcclAlltoAll(as, 1, HCCL_DATA_TYPE_INT32, ar, 1, HCCL_DATA_TYPE_INT32, k.comm,
                                               k.stream));
        ASSERT_EQ(aclrtSynchronizeStream(k.stream), ACL_SUCCESS);
        EXPECT_EQ(k.download<int64_t>(buf, 3), (std::vector<int64_t>{11, -12, 13}));
        EXPECT_EQ(k.download<int32_t>(rr, 3), r == 0 ? (std::vector<int32_t>{6, 9, 25})
                                                     : (std::vector<int32_t>{-1, -1, -1}));
        EXPECT_EQ(k.download<uint8_t>(gr, 4), (std::vector<uint8_t>{10, 20, 11, 21}));
        EXPECT_EQ(k.download<float>(sr, 2),
                  r == 0 ? (std::vector<float>{1.0f, -1.0f}) : (std::vector<float>{3.0f, 0.5f}));
        EXPECT_EQ(k.download<int32_t>(ar, 2), (std::vector<int32_t>{0 + r, 100 + r}));
    });
}

TEST_F(HcclTwoRanks, SendRecvAndBarrier) {
    on_ranks(devices, comms, [](Rank& k, int r) {
        void* buf = k.upload(std::vector<uint32_t>{r ? 0u : 0xdeadbeefu, r ? 0u : 42u});
        if (r == 0) EXPECT_HCCL(HCCL_SUCCESS, HcclSend(buf, 2, HCCL_DATA_TYPE_UINT32, 1, k.comm, k.stream));
        else EXPECT_HCCL(HCCL_SUCCESS, HcclRecv(buf, 2, HCCL_DATA_TYPE_UINT32, 0, k.comm, k.stream));
        EXPECT_HCCL(HCCL_SUCCESS, HcclBarrier(k.comm, k.stream));
        ASSERT_EQ(aclrtSynchronizeStream(k.stream), ACL_SUCCESS);
        EXPECT_EQ(k.download<uint32_t>(buf, 2), (std::vector<uint32_t>{0xdeadbeefu, 42u}));
    });
}

TEST_F(HcclTwoRanks, TypesTheRuntimeLacksMoveAsBytesButAreNotReduced) {
    on_ranks(devices, comms, [](Rank& k, int r) {
        void* buf = k.upload(std::vector<int16_t>{static_cast<int16_t>(r ? 0 : -2), static_cast<int16_t>(r ? 0 : 300)});
        EXPECT_HCCL(HCCL_SUCCESS, HcclBroadcast(buf, 2, HCCL_DATA_TYPE_INT16, 0, k.comm, k.stream));
        ASSERT_EQ(aclrtSynchronizeStream(k.stream), ACL_SUCCESS);
        EXPECT_EQ(k.download<int16_t>(buf, 2), (std::vector<int16_t>{-2, 300}));
        void* out = k.alloc(4);
        EXPECT_HCCL(HCCL_E_NOT_SUPPORT,
                    HcclAllReduce(buf, out, 2, HCCL_DATA_TYPE_INT16, HCCL_REDUCE_SUM, k.comm, k.stream));
        EXPECT_NE(recent_message().find("HCCL_DATA_TYPE_INT16"), std::string::npos);
    });
}

TEST_F(HcclTwoRanks, RefusesBadArgumentsWithHcclCodes) {
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    void* a = nullptr;
    void* b = nullptr;
    ASSERT_EQ(aclrtMalloc(&a, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    ASSERT_EQ(aclrtMalloc(&b, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    HcclComm c = comms[0];
    EXPECT_HCCL(HCCL_E_PTR, HcclAllReduce(a, b, 4, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, nullptr, nullptr));
    EXPECT_NE(recent_message().find("comm is NULL"), std::string::npos);
    EXPECT_HCCL(HCCL_E_PTR, HcclAllReduce(nullptr, b, 4, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, c, nullptr));
    EXPECT_NE(recent_message().find("sendBuf is NULL"), std::string::npos);
    EXPECT_HCCL(HCCL_E_PARA, HcclAllReduce(a, b, 4, static_cast<HcclDataType>(13), HCCL_REDUCE_SUM, c, nullptr));
    EXPECT_NE(recent_message().find("dataType 13 is not an HcclDataType"), std::string::npos);
    EXPECT_HCCL(HCCL_E_PARA, HcclAllReduce(a, b, 4, HCCL_DATA_TYPE_INT32, static_cast<HcclReduceOp>(4), c, nullptr));
    EXPECT_NE(recent_message().find("op 4 is not an HcclReduceOp"), std::string::npos);
    EXPECT_HCCL(HCCL_E_PARA, HcclBroadcast(a, 4, HCCL_DATA_TYPE_INT32, 2, c, nullptr));
    EXPECT_NE(recent_message().find("root 2 is out of range (the communicator has ranks 0 .. 1)"), std::string::npos);
    EXPECT_HCCL(HCCL_E_PARA, HcclReduce(a, b, 4, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, 7, c, nullptr));
    EXPECT_HCCL(HCCL_E_PARA, HcclSend(a, 4, HCCL_DATA_TYPE_INT32, 5, c, nullptr));
    EXPECT_NE(recent_message().find("destRank 5"), std::string::npos);
    EXPECT_HCCL(HCCL_E_PARA, HcclRecv(a, 4, HCCL_DATA_TYPE_INT32, 2, c, nullptr));
    EXPECT_HCCL(HCCL_E_PARA, HcclAlltoAll(a, 2, HCCL_DATA_TYPE_INT32, b, 2, HCCL_DATA_TYPE_INT16, c, nullptr));
    EXPECT_NE(recent_message().find("not the same number of bytes"), std::string::npos);
    // A buffer the runtime cannot use (host memory of the test) is the runtime's refusal, mapped to HCCL_E_PARA.
    int32_t host[4] = {};
    EXPECT_HCCL(HCCL_E_PARA, HcclAllReduce(host, b, 4, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, c, nullptr));
    EXPECT_NE(recent_message().find("not device memory"), std::string::npos);
    uint32_t n = 0;
    HcclResult async = HCCL_SUCCESS;
    EXPECT_HCCL(HCCL_E_PTR, HcclGetRankSize(c, nullptr));
    EXPECT_HCCL(HCCL_E_PTR, HcclGetRankId(nullptr, &n));
    EXPECT_HCCL(HCCL_E_PTR, HcclGetCommAsyncError(c, nullptr));
    EXPECT_HCCL(HCCL_E_PTR, HcclGetCommAsyncError(nullptr, &async));
    EXPECT_HCCL(HCCL_E_PTR, HcclBarrier(nullptr, nullptr));
    EXPECT_HCCL(HCCL_E_PTR, HcclCommDestroy(nullptr));
    EXPECT_EQ(aclrtFree(a), ACL_SUCCESS);
    EXPECT_EQ(aclrtFree(b), ACL_SUCCESS);
}

TEST_F(HcclTwoRanks, MismatchedCountsFailEveryRanksStream) {
    on_ranks(devices, comms, [](Rank& k, int r) {
        void* s = k.alloc(16);
        void* d = k.alloc(16);
        EXPECT_HCCL(HCCL_SUCCESS, HcclAllReduce(s, d, r ? 4 : 2, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, k.comm,
                                                k.stream));
        EXPECT_NE(aclrtSynchronizeStream(k.stream), ACL_SUCCESS);
        EXPECT_NE(recent_message().find("count"), std::string::npos);
        // The communicator itself still works (only a timeout or an abort stops it).
        HcclResult async = HCCL_E_INTERNAL;
        EXPECT_HCCL(HCCL_SUCCESS, HcclGetCommAsyncError(k.comm, &async));
        EXPECT_EQ(async, HCCL_SUCCESS);
    });
}

TEST(HcclAsyncError, APeerThatNeverArrivesStopsTheCommunicator) {
    if (device_count() < 2) GTEST_SKIP() << "needs two devices (RUNTIME_CPU_DEVICES=2)";
    // The timeout is read when the communicator is made.
    const char* old = std::getenv("RUNTIME_COMM_TIMEOUT");
    const std::string saved = old ? old : "";
    ::setenv("RUNTIME_COMM_TIMEOUT", "0.2", 1);
    std::vector<int32_t> devices{0, 1};
    std::vector<HcclComm> comms(2, nullptr);
    const HcclResult made = HcclCommInitAll(2, devices.data(), comms.data());
    if (old) ::setenv("RUNTIME_COMM_TIMEOUT", saved.c_str(), 1);
    else ::unsetenv("RUNTIME_COMM_TIMEOUT");
    ASSERT_EQ(made, HCCL_SUCCESS) << recent_message();
    on_ranks({0}, {comms[0]}, [](Rank& k, int) {
        void* s = k.alloc(4);
        EXPECT_HCCL(HCCL_SUCCESS, HcclAllReduce(s, s, 1, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, k.comm, k.stream));
        EXPECT_NE(aclrtSynchronizeStream(k.stream), ACL_SUCCESS);
        recent_message();
        aclrtGetLastError(ACL_RT_THREAD_LEVEL);
        HcclResult async = HCCL_SUCCESS;
        EXPECT_HCCL(HCCL_SUCCESS, HcclGetCommAsyncError(k.comm, &async));
        EXPECT_EQ(async, HCCL_E_TIMEOUT);
        // The call succeeded: it records no failure of its own.
        EXPECT_EQ(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
        EXPECT_EQ(recent_message(), "");
        // Later collectives fail at once on the stopped communicator.
        EXPECT_HCCL(HCCL_SUCCESS, HcclBarrier(k.comm, k.stream));
        EXPECT_NE(aclrtSynchronizeStream(k.stream), ACL_SUCCESS);
    });
    for (HcclComm c : comms) EXPECT_HCCL(HCCL_SUCCESS, HcclCommDestroy(c));
}

TEST(HcclInit, InitAllRefusesBadDeviceLists) {
    std::vector<HcclComm> comms(2, nullptr);
    std::vector<int32_t> same{0, 0};
    EXPECT_HCCL(HCCL_E_PARA, HcclCommInitAll(2, same.data(), comms.data()));
    EXPECT_NE(recent_message().find("both device 0"), std::string::npos);
    std::vector<int32_t> missing{0, 999};
    EXPECT_HCCL(HCCL_E_PARA, HcclCommInitAll(2, missing.data(), comms.data()));
    EXPECT_NE(recent_message().find("devices[1] = 999 is not a device"), std::string::npos);
    EXPECT_HCCL(HCCL_E_PARA, HcclCommInitAll(0, same.data(), comms.data()));
    EXPECT_HCCL(HCCL_E_PTR, HcclCommInitAll(1, nullptr, comms.data()));
    EXPECT_HCCL(HCCL_E_PTR, HcclCommInitAll(1, same.data(), nullptr));
    EXPECT_EQ(comms[0], nullptr);
}

TEST(HcclInit, RootInfoOneThreadPerRank) {
    if (device_count() < 2) GTEST_SKIP() << "needs two devices (RUNTIME_CPU_DEVICES=2)";
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    HcclRootInfo root;
    ASSERT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS) << recent_message();
    std::vector<HcclComm> comms(2, nullptr);
    std::vector<std::thread> threads;
    for (uint32_t r = 0; r < 2; ++r)
        threads.emplace_back([&, r] {
            ASSERT_EQ(aclrtSetDevice(static_cast<int32_t>(r)), ACL_SUCCESS);
            EXPECT_HCCL(HCCL_SUCCESS, HcclCommInitRootInfo(2, &root, r, &comms[r]));
        });
    for (auto& t : threads) t.join();
    ASSERT_NE(comms[0], nullptr);
    ASSERT_NE(comms[1], nullptr);
    on_ranks({0, 1}, comms, [](Rank& k, int r) {
        uint32_t id = 9;
        EXPECT_HCCL(HCCL_SUCCESS, HcclGetRankId(k.comm, &id));
        EXPECT_EQ(id, static_cast<uint32_t>(r));
        void* s = k.upload(std::vector<double>{0.5 + r, -r * 2.0});
        void* d = k.alloc(16);
        EXPECT_HCCL(HCCL_SUCCESS, HcclAllReduce(s, d, 2, HCCL_DATA_TYPE_FP64, HCCL_REDUCE_SUM, k.comm, k.stream));
        ASSERT_EQ(aclrtSynchronizeStream(k.stream), ACL_SUCCESS);
        EXPECT_EQ(k.download<double>(d, 2), (std::vector<double>{2.0, -2.0}));
    });
    for (HcclComm c : comms) EXPECT_HCCL(HCCL_SUCCESS, HcclCommDestroy(c));
}

TEST(HcclInit, RootInfoRefusesBadArguments) {
    HcclRootInfo root;
    HcclComm comm = nullptr;
    EXPECT_HCCL(HCCL_E_PTR, HcclGetRootInfo(nullptr));
    std::memset(&root, 0x5a, sizeof root);
    EXPECT_HCCL(HCCL_E_PARA, HcclCommInitRootInfo(1, &root, 0, &comm));
    EXPECT_NE(recent_message().find("not made by HcclGetRootInfo"), std::string::npos);
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    ASSERT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
    EXPECT_HCCL(HCCL_E_PARA, HcclCommInitRootInfo(2, &root, 2, &comm));
    EXPECT_NE(recent_message().find("rank 2 is out of range"), std::string::npos);
    EXPECT_HCCL(HCCL_E_PARA, HcclCommInitRootInfo(0, &root, 0, &comm));
    EXPECT_HCCL(HCCL_E_PTR, HcclCommInitRootInfo(1, nullptr, 0, &comm));
    EXPECT_HCCL(HCCL_E_PTR, HcclCommInitRootInfo(1, &root, 0, nullptr));
    // One rank alone needs no peer: the communicator is made at once.
    EXPECT_HCCL(HCCL_SUCCESS, HcclCommInitRootInfo(1, &root, 0, &comm));
    EXPECT_HCCL(HCCL_SUCCESS, HcclCommDestroy(comm));
}

TEST(HcclErrors, ErrorStringsNameTheCodes) {
    EXPECT_STREQ(HcclGetErrorString(HCCL_SUCCESS), "HCCL_SUCCESS");
    EXPECT_STREQ(HcclGetErrorString(HCCL_E_PARA), "HCCL_E_PARA");
    EXPECT_STREQ(HcclGetErrorString(HCCL_E_NOT_SUPPORT), "HCCL_E_NOT_SUPPORT");
    EXPECT_STREQ(HcclGetErrorString(HCCL_E_REMOTE), "HCCL_E_REMOTE");
    EXPECT_STREQ(HcclGetErrorString(static_cast<HcclResult>(1234)), "HCCL_E_UNKNOWN");
    // HCCL's numeric values and sizes, which compiled programs depend on.
    EXPECT_EQ(HCCL_E_TIMEOUT, 9);
    EXPECT_EQ(HCCL_E_REMOTE, 21);
    EXPECT_EQ(HCCL_DATA_TYPE_UINT8, 7);
    EXPECT_EQ(HCCL_DATA_TYPE_BFP16, 11);
    EXPECT_EQ(HCCL_REDUCE_MIN, 3);
    EXPECT_EQ(sizeof(HcclRootInfo), 4108u);
}

}  // namespace

TEST(HcclContext, CallsThatUseADeviceNeedACurrentContext) {
    aclError last = ACL_SUCCESS;
    HcclResult root = HCCL_SUCCESS, reduce = HCCL_SUCCESS;
    std::string message;
    std::thread([&] {  // a new thread: no aclrtSetDevice, no context
        HcclRootInfo info;
        root = HcclGetRootInfo(&info);
        last = aclrtGetLastError(ACL_RT_THREAD_LEVEL);
        message = recent_message();
        int x = 0;
        reduce = HcclAllReduce(&x, &x, 1, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, reinterpret_cast<HcclComm>(&x),
                               nullptr);
    }).join();
    EXPECT_EQ(root, HCCL_E_RUNTIME);
    EXPECT_EQ(last, ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_NE(message.find("no current context"), std::string::npos) << message;
    EXPECT_EQ(reduce, HCCL_E_RUNTIME);
}

TEST(HcclAlltoAll, ByteCountsThatOverflowAreRefused) {
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    int x = 0;
    // 2^62 INT32 elements are 2^64 bytes: the size check must not wrap to 0 (and so match recvCount 0).
    EXPECT_HCCL(HCCL_E_PARA, HcclAlltoAll(&x, 1ull << 62, HCCL_DATA_TYPE_INT32, &x, 0, HCCL_DATA_TYPE_INT32,
                                          reinterpret_cast<HcclComm>(&x), nullptr));
    EXPECT_NE(recent_message().find("more bytes than the address space holds"), std::string::npos);
    EXPECT_EQ(aclrtResetDevice(0), ACL_SUCCESS);
}
