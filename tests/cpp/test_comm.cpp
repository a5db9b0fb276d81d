// test_comm.cpp — collectives (comm.h): communicators, exact results of every collective x type x op, determinism,
// stream ordering, timeouts, abort and refused input. Ranks go round the cpu devices the process has.
#include <runtime/comm.h>
#include <runtime/profiler.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <future>
#include <random>

#include "comm_test_util.hpp"
#include "test_util.hpp"
#include "trace_json.hpp"

using namespace rt_test;

namespace {

const rtDataType kTypes[] = {RT_INT8,   RT_UINT8,   RT_INT32,   RT_UINT32,  RT_INT64,
                             RT_UINT64, RT_FLOAT16, RT_FLOAT32, RT_FLOAT64, RT_BFLOAT16};
const rtReduceOp kOps[] = {RT_REDUCE_SUM, RT_REDUCE_PROD, RT_REDUCE_MAX, RT_REDUCE_MIN, RT_REDUCE_AVG};

bool is_signed(rtDataType t) { return t == RT_INT8 || t == RT_INT32 || t == RT_INT64 || t >= RT_FLOAT16; }

uint16_t half_bits(double v) {
    const _Float16 h = static_cast<_Float16>(v);
    uint16_t b;
    std::memcpy(&b, &h, 2);
    return b;
}

/// `v` (an integer small enough to be exact in every type) stored as `t`.
void encode(rtDataType t, double v, uint8_t* out) {
    const auto i = static_cast<int64_t>(v);
    switch (t) {
        case RT_INT8: case RT_UINT8: { const auto x = static_cast<uint8_t>(i); std::memcpy(out, &x, 1); break; }
        case RT_INT32: case RT_UINT32: { const auto x = static_cast<uint32_t>(i); std::memcpy(out, &x, 4); break; }
        case RT_INT64: case RT_UINT64: { const auto x = static_cast<uint64_t>(i); std::memcpy(out, &x, 8); break; }
        case RT_FLOAT16: { const uint16_t x = half_bits(v); std::memcpy(out, &x, 2); break; }
        case RT_BFLOAT16: {
            const auto f = static_cast<float>(v);
            uint32_t b;
            std::memcpy(&b, &f, 4);
            const auto x = static_cast<uint16_t>(b >> 16);  // exact for the small integers used here
            std::memcpy(out, &x, 2);
            break;
        }
        case RT_FLOAT32: { const auto x = static_cast<float>(v); std::memcpy(out, &x, 4); break; }
        case RT_FLOAT64: std::memcpy(out, &v, 8); break;
    }
}

/// nccl-tests' idea: inputs for which every order of reduction gives the same, exact, result.
/// SUM/MAX/MIN: small integers (non-negative for unsigned types); PROD: 1, 2 and -1; AVG: values whose sum over the
/// ranks is n times an integer.
double input(rtDataType t, rtReduceOp op, int n, int rank, size_t i) {
    const int a = static_cast<int>((static_cast<size_t>(rank) * 7 + i * 3) % 9);
    switch (op) {
        case RT_REDUCE_PROD: {
            const int k = static_cast<int>((static_cast<size_t>(rank) + i) % 3);
            return k == 0 ? 1 : k == 1 ? 2 : (is_signed(t) ? -1 : 1);
        }
        case RT_REDUCE_AVG: return 4 + static_cast<double>(i % 5) + 2 * rank - (n - 1);
        default: return is_signed(t) ? a - 4 : a;
    }
}

double expected(rtDataType t, rtReduceOp op, int n, size_t i) {
    double acc = input(t, op, n, 0, i);
    for (int r = 1; r < n; ++r) {
        const double v = input(t, op, n, r, i);
        switch (op) {
            case RT_REDUCE_SUM: case RT_REDUCE_AVG: acc += v; break;
            case RT_REDUCE_PROD: acc *= v; break;
            case RT_REDUCE_MAX: acc = std::max(acc, v); break;
            case RT_REDUCE_MIN: acc = std::min(acc, v); break;
        }
    }
    return op == RT_REDUCE_AVG ? acc / n : acc;
}

std::vector<uint8_t> encoded(rtDataType t, size_t count, const std::function<double(size_t)>& value) {
    const size_t es = rtDataTypeSize(t);
    std::vector<uint8_t> out(count * es);
    for (size_t i = 0; i < count; ++i) encode(t, value(i), &out[i * es]);
    return out;
}

/// The first element where `got` differs from `want` (both of type t), in words; empty when equal. #wrong counted.
std::string compare(rtDataType t, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
    const size_t es = rtDataTypeSize(t);
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < want.size() / es; ++i)
        if (std::memcmp(&got[i * es], &want[i * es], es) != 0 && wrong++ == 0) first = i;
    if (!wrong) return {};
    return std::to_string(wrong) + " wrong elements, the first at index " + std::to_string(first);
}

/// Counts 0, 1, odd, and large; the large one (slow to prepare and check) for a cross-section of the matrix: every type
/// with SUM, every op with FLOAT32 and FLOAT16, and (data movement, op < 0) one type of each element size.
std::vector<size_t> counts(rtDataType t, int op) {
    const bool large = op < 0 ? (t == RT_INT8 || t == RT_FLOAT16 || t == RT_FLOAT32 || t == RT_FLOAT64)
                              : (op == RT_REDUCE_SUM || t == RT_FLOAT32 || t == RT_FLOAT16);
    if (!large) return {0, 1, 7, 1027};
    return {0, 1, 7, 1027, scaled(100003, 20000)};
}

std::string where(const char* what, rtDataType t, rtReduceOp op, int n, size_t count, bool in_place) {
    return std::string(what) + " type " + std::to_string(t) + " op " + std::to_string(op) + " ranks " +
           std::to_string(n) + " count " + std::to_string(count) + (in_place ? " in place" : "");
}

}  // namespace

// ---------------------------------------------------------------- communicators

TEST(CommInit, InitAllQueriesEachRank) {
    for (int n = 1; n <= 4; ++n) {
        Ranks ranks(n);
        for (int r = 0; r < n; ++r) {
            int count = 0, rank = -1, device = -1;
            ASSERT_RT_OK(rtCommCount(ranks.comms[static_cast<size_t>(r)], &count));
            ASSERT_RT_OK(rtCommUserRank(ranks.comms[static_cast<size_t>(r)], &rank));
            ASSERT_RT_OK(rtCommDevice(ranks.comms[static_cast<size_t>(r)], &device));
            EXPECT_EQ(count, n);
            EXPECT_EQ(rank, r);
            EXPECT_EQ(device, ranks.devices[static_cast<size_t>(r)]);
            rtError_t async = RT_ERROR_UNKNOWN;
            ASSERT_RT_OK(rtCommGetAsyncError(ranks.comms[static_cast<size_t>(r)], &async));
            EXPECT_EQ(async, RT_SUCCESS);
        }
    }
}

TEST(CommInit, NullDevicesMeansTheFirstDevices) {
    rtComm_t c = nullptr;
    ASSERT_RT_OK(rtCommInitAll(&c, 1, nullptr));
    int device = -1;
    ASSERT_RT_OK(rtCommDevice(c, &device));
    EXPECT_EQ(device, 0);
    ASSERT_RT_OK(rtCommDestroy(c));
}

TEST(CommInit, RefusesBadArguments) {
    rtComm_t c[2] = {};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtCommInitAll(nullptr, 1, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtCommInitAll(c, 0, nullptr));
    EXPECT_NE(last_message().find("ndev 0"), std::string::npos) << last_message();
    const int bad[2] = {0, 999};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_DEVICE, rtCommInitAll(c, 2, bad));
    EXPECT_NE(last_message().find("devices[1] = 999"), std::string::npos) << last_message();
    int v = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtCommCount(nullptr, &v));
    ASSERT_RT_OK(rtCommInitAll(c, 1, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtCommCount(c[0], nullptr));
    ASSERT_RT_OK(rtCommDestroy(c[0]));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtCommCount(c[0], &v));
    EXPECT_NE(last_message().find("not a live communicator"), std::string::npos) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtCommDestroy(c[0]));
}

TEST(CommInitRank, OneThreadPerRank) {
    for (int n = 1; n <= 4; ++n) {
        rtCommUniqueId id;
        ASSERT_RT_OK(rtCommGetUniqueId(&id));
        const std::vector<int> cpus = cpu_devices();
        std::vector<std::thread> threads;
        std::vector<int> failures(static_cast<size_t>(n), 0);
        for (int r = 0; r < n; ++r)
            threads.emplace_back([&, r] {
                const int device = cpus[static_cast<size_t>(r) % cpus.size()];
                rtSetDevice(device);
                rtComm_t c = nullptr;
                if (rtCommInitRank(&c, n, id, r) != RT_SUCCESS) {
                    failures[static_cast<size_t>(r)] = 1;
                    return;
                }
                int rank = -1, count = 0, dev = -1;
                rtCommUserRank(c, &rank);
                rtCommCount(c, &count);
                rtCommDevice(c, &dev);
                Buffer buf(device, 64 * sizeof(int32_t));
                buf.write(encoded(RT_INT32, 64, [&](size_t i) { return static_cast<double>(r + 1) * (i + 1); }));
                rtStream_t s = nullptr;
                rtStreamCreateWithFlags(&s, RT_STREAM_NON_BLOCKING);  // see Ranks
                if (rank != r || count != n || dev != device ||
                    rtAllReduce(buf.ptr, buf.ptr, 64, RT_INT32, RT_REDUCE_SUM, c, s) != RT_SUCCESS ||
                    rtStreamSynchronize(s) != RT_SUCCESS)
                    failures[static_cast<size_t>(r)] = 2;
                else if (!compare(RT_INT32, buf.read(64 * 4),
                                  encoded(RT_INT32, 64, [&](size_t i) { return n * (n + 1) / 2.0 * (i + 1); })).empty())
                    failures[static_cast<size_t>(r)] = 3;
                rtStreamDestroy(s);
                rtCommDestroy(c);
            });
        for (auto& t : threads) t.join();
        for (int r = 0; r < n; ++r) EXPECT_EQ(failures[static_cast<size_t>(r)], 0) << "rank " << r << " of " << n;
    }
}

TEST(CommInitRank, RefusesBadIdsRanksAndCounts) {
    rtCommUniqueId id;
    std::memset(&id, 0, sizeof id);
    rtComm_t c = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtCommInitRank(&c, 1, id, 0));
    EXPECT_NE(last_message().find("not an id made by rtCommGetUniqueId"), std::string::npos) << last_message();
    ASSERT_RT_OK(rtCommGetUniqueId(&id));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtCommInitRank(&c, 2, id, 2));
    EXPECT_NE(last_message().find("rank 2 is out of range"), std::string::npos) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtCommInitRank(&c, 0, id, 0));
    ASSERT_RT_OK(rtGroupStart());
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtCommInitRank(&c, 1, id, 0));
    ASSERT_RT_OK(rtGroupEnd());
}

TEST(CommInitRank, TimesOutNamingTheMissingRanks) {
    EnvVar timeout("RUNTIME_COMM_TIMEOUT", "0.2");
    rtCommUniqueId id;
    ASSERT_RT_OK(rtCommGetUniqueId(&id));
    rtComm_t c = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_TIMEOUT, rtCommInitRank(&c, 3, id, 1));
    EXPECT_NE(last_message().find("waiting for ranks 0, 2"), std::string::npos) << last_message();
}

TEST(CommInitRank, MismatchedRankCountsAreRefusedForEveryRank) {
    // Far longer than the test: whichever rank joins first is still waiting when the other comes, and both are
    // refused at once (a timeout would fail the test's time, not its checks: the results say which happened).
    EnvVar timeout("RUNTIME_COMM_TIMEOUT", "600");
    rtCommUniqueId id;
    ASSERT_RT_OK(rtCommGetUniqueId(&id));
    rtError_t first = RT_SUCCESS;
    std::string first_message;
    std::thread t([&] {
        rtComm_t c = nullptr;
        first = rtCommInitRank(&c, 2, id, 0);
        first_message = rtGetLastErrorMessage();
    });
    rtComm_t c = nullptr;
    const rtError_t second = rtCommInitRank(&c, 3, id, 1);
    const std::string second_message = rtGetLastErrorMessage();
    t.join();
    EXPECT_EQ(first, RT_ERROR_INVALID_VALUE) << first_message;
    EXPECT_EQ(second, RT_ERROR_INVALID_VALUE) << second_message;
    for (const std::string& m : {first_message, second_message}) EXPECT_NE(m.find("passed nranks"), std::string::npos) << m;
}

TEST(CommSplit, ByColorOrderedByKey) {
    Ranks ranks(4);
    rtComm_t split[4] = {};
    ASSERT_RT_OK(rtGroupStart());
    for (int r = 0; r < 4; ++r)
        ASSERT_RT_OK(rtCommSplit(ranks.comms[static_cast<size_t>(r)], r == 3 ? RT_COMM_SPLIT_NOCOLOR : r % 2, -r,
                                 &split[r]));
    ASSERT_RT_OK(rtGroupEnd());
    EXPECT_EQ(split[3], nullptr);
    // color 0: ranks 0 and 2, keys 0 and -2: old rank 2 comes first.
    int rank = -1, count = 0, device = -1;
    ASSERT_RT_OK(rtCommUserRank(split[2], &rank));
    EXPECT_EQ(rank, 0);
    ASSERT_RT_OK(rtCommUserRank(split[0], &rank));
    EXPECT_EQ(rank, 1);
    ASSERT_RT_OK(rtCommCount(split[0], &count));
    EXPECT_EQ(count, 2);
    ASSERT_RT_OK(rtCommCount(split[1], &count));
    EXPECT_EQ(count, 1);
    ASSERT_RT_OK(rtCommDevice(split[2], &device));
    EXPECT_EQ(device, ranks.devices[2]);
    // The new communicator works: sum over old ranks 0 and 2.
    Buffer a(ranks.devices[0], 4), b(ranks.devices[2], 4);
    a.write(encoded(RT_INT32, 1, [](size_t) { return 5; }));
    b.write(encoded(RT_INT32, 1, [](size_t) { return 7; }));
    ASSERT_RT_OK(rtGroupStart());
    ASSERT_RT_OK(rtAllReduce(a.ptr, a.ptr, 1, RT_INT32, RT_REDUCE_SUM, split[0], ranks.streams[0]));
    ASSERT_RT_OK(rtAllReduce(b.ptr, b.ptr, 1, RT_INT32, RT_REDUCE_SUM, split[2], ranks.streams[2]));
    ASSERT_RT_OK(rtGroupEnd());
    for (rtError_t e : ranks.sync()) EXPECT_RT_OK(e);
    EXPECT_EQ(compare(RT_INT32, a.read(4), encoded(RT_INT32, 1, [](size_t) { return 12; })), "");
    EXPECT_EQ(compare(RT_INT32, b.read(4), encoded(RT_INT32, 1, [](size_t) { return 12; })), "");
    for (rtComm_t c : split)
        if (c) {
            ASSERT_RT_OK(rtCommDestroy(c));
        }
    rtComm_t out = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtCommSplit(ranks.comms[0], -5, 0, &out));
}

TEST(CommGroup, EndWithoutStartIsRefused) {
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGroupEnd());
    EXPECT_NE(last_message().find("without a matching rtGroupStart"), std::string::npos) << last_message();
}

// ---------------------------------------------------------------- exact results

namespace {
/// Runs one collective on every rank of `ranks` (in a group), with per-rank send/recv buffers prepared by the caller.
void run_all(const Ranks& ranks, const std::function<rtError_t(int)>& call) {
    ASSERT_RT_OK(rtGroupStart());
    for (int r = 0; r < ranks.size(); ++r) ASSERT_RT_OK(call(r)) << "rank " << r;
    ASSERT_RT_OK(rtGroupEnd());
    for (rtError_t e : ranks.sync()) ASSERT_RT_OK(e);
}
}  // namespace

TEST(CommExact, AllReduceReduceEveryTypeOpCountAndRankCount) {
    for (int n = 1; n <= 4; ++n) {
        Ranks ranks(n);
        for (rtDataType t : kTypes)
            for (rtReduceOp op : kOps)
                for (size_t count : counts(t, op))
                    for (int in_place = 0; in_place < 2; ++in_place)
                        for (int kind = 0; kind < 2; ++kind) {  // 0: all-reduce, 1: reduce to root n - 1
                            const size_t bytes = count * rtDataTypeSize(t);
                            std::vector<std::unique_ptr<Buffer>> send, recv;
                            for (int r = 0; r < n; ++r) {
                                send.push_back(std::make_unique<Buffer>(ranks.devices[static_cast<size_t>(r)], bytes));
                                recv.push_back(std::make_unique<Buffer>(ranks.devices[static_cast<size_t>(r)], bytes));
                                send.back()->write(encoded(t, count, [&](size_t i) { return input(t, op, n, r, i); }));
                            }
                            const int root = n - 1;
                            run_all(ranks, [&](int r) {
                                void* s = send[static_cast<size_t>(r)]->ptr;
                                void* d = in_place ? s : recv[static_cast<size_t>(r)]->ptr;
                                return kind == 0 ? rtAllReduce(s, d, count, t, op, ranks.comms[static_cast<size_t>(r)],
                                                               ranks.streams[static_cast<size_t>(r)])
                                                 : rtReduce(s, d, count, t, op, root, ranks.comms[static_cast<size_t>(r)],
                                                            ranks.streams[static_cast<size_t>(r)]);
                            });
                            const auto want = encoded(t, count, [&](size_t i) { return expected(t, op, n, i); });
                            for (int r = 0; r < n; ++r) {
                                if (kind == 1 && r != root) continue;
                                const Buffer& out = in_place ? *send[static_cast<size_t>(r)] : *recv[static_cast<size_t>(r)];
                                ASSERT_EQ(compare(t, out.read(bytes), want), "")
                                    << where(kind ? "reduce" : "all-reduce", t, op, n, count, in_place) << " rank " << r;
                            }
                        }
    }
}

TEST(CommExact, ReduceScatterEveryTypeOpCountAndRankCount) {
    for (int n = 1; n <= 4; ++n) {
        Ranks ranks(n);
        for (rtDataType t : kTypes)
            for (rtReduceOp op : kOps)
                for (size_t count : counts(t, op))
                    for (int in_place = 0; in_place < 2; ++in_place) {
                        const size_t es = rtDataTypeSize(t), bytes = count * es;
                        std::vector<std::unique_ptr<Buffer>> send, recv;
                        for (int r = 0; r < n; ++r) {
                            send.push_back(std::make_unique<Buffer>(ranks.devices[static_cast<size_t>(r)], bytes * n));
                            recv.push_back(std::make_unique<Buffer>(ranks.devices[static_cast<size_t>(r)], bytes));
                            send.back()->write(encoded(t, count * n, [&](size_t i) { return input(t, op, n, r, i); }));
                        }
                        run_all(ranks, [&](int r) {
                            char* s = static_cast<char*>(send[static_cast<size_t>(r)]->ptr);
                            void* d = in_place ? s + r * bytes : recv[static_cast<size_t>(r)]->ptr;
                            return rtReduceScatter(s, d, count, t, op, ranks.comms[static_cast<size_t>(r)],
                                                   ranks.streams[static_cast<size_t>(r)]);
                        });
                        for (int r = 0; r < n; ++r) {
                            const auto want = encoded(t, count, [&](size_t i) { return expected(t, op, n, r * count + i); });
                            const auto got = in_place ? send[static_cast<size_t>(r)]->read(bytes, r * bytes)
                                                      : recv[static_cast<size_t>(r)]->read(bytes);
                            ASSERT_EQ(compare(t, got, want), "") << where("reduce-scatter", t, op, n, count, in_place)
                                                                 << " rank " << r;
                        }
                    }
    }
}

TEST(CommExact, DataMovementEveryTypeCountAndRankCount) {
    // broadcast, all-gather, all-to-all and send/receive move bits: every type, every count, in and out of place.
    for (int n = 1; n <= 4; ++n) {
        Ranks ranks(n);
        for (rtDataType t : kTypes)
            for (size_t count : counts(t, -1))
                for (int in_place = 0; in_place < 2; ++in_place) {
                    const size_t es = rtDataTypeSize(t), bytes = count * es;
                    auto value = [&](int r, size_t i) { return static_cast<double>((r * 31 + static_cast<int>(i % 97)) % 100); };
                    std::vector<std::unique_ptr<Buffer>> send, recv;
                    for (int r = 0; r < n; ++r) {
                        send.push_back(std::make_unique<Buffer>(ranks.devices[static_cast<size_t>(r)], bytes * n));
                        recv.push_back(std::make_unique<Buffer>(ranks.devices[static_cast<size_t>(r)], bytes * n));
                    }
                    auto fill = [&] {
                        for (int r = 0; r < n; ++r)
                            send[static_cast<size_t>(r)]->write(encoded(t, count * n, [&](size_t i) { return value(r, i); }));
                    };
                    const std::string ctx = where("", t, RT_REDUCE_SUM, n, count, in_place);
                    // broadcast from the last rank
                    fill();
                    const int root = n - 1;
                    run_all(ranks, [&](int r) {
                        void* s = send[static_cast<size_t>(r)]->ptr;
                        return rtBroadcast(s, in_place ? s : recv[static_cast<size_t>(r)]->ptr, count, t, root,
                                           ranks.comms[static_cast<size_t>(r)], ranks.streams[static_cast<size_t>(r)]);
                    });
                    for (int r = 0; r < n; ++r)
                        ASSERT_EQ(compare(t, (in_place ? send : recv)[static_cast<size_t>(r)]->read(bytes),
                                          encoded(t, count, [&](size_t i) { return value(root, i); })), "")
                            << "broadcast" << ctx << " rank " << r;
                    // all-gather (in place: send == recv + rank * bytes)
                    fill();
                    for (int r = 0; r < n && in_place; ++r)  // each rank's block already in its place
                        recv[static_cast<size_t>(r)]->write([&] {
                            auto all = std::vector<uint8_t>(bytes * n);
                            auto mine = encoded(t, count, [&](size_t i) { return value(r, i); });
                            std::copy(mine.begin(), mine.end(), all.begin() + static_cast<ptrdiff_t>(r * bytes));
                            return all;
                        }());
                    run_all(ranks, [&](int r) {
                        char* d = static_cast<char*>(recv[static_cast<size_t>(r)]->ptr);
                        const void* s = in_place ? d + r * bytes : send[static_cast<size_t>(r)]->ptr;
                        return rtAllGather(s, d, count, t, ranks.comms[static_cast<size_t>(r)],
                                           ranks.streams[static_cast<size_t>(r)]);
                    });
                    for (int r = 0; r < n; ++r)
                        ASSERT_EQ(compare(t, recv[static_cast<size_t>(r)]->read(bytes * n),
                                          encoded(t, count * n, [&](size_t i) { return value(static_cast<int>(i / (count ? count : 1)), i % (count ? count : 1)); })), "")
                            << "all-gather" << ctx << " rank " << r;
                    // all-to-all
                    fill();
                    run_all(ranks, [&](int r) {
                        void* s = send[static_cast<size_t>(r)]->ptr;
                        return rtAlltoAll(s, in_place ? s : recv[static_cast<size_t>(r)]->ptr, count, t,
                                          ranks.comms[static_cast<size_t>(r)], ranks.streams[static_cast<size_t>(r)]);
                    });
                    for (int r = 0; r < n; ++r)
                        ASSERT_EQ(compare(t, (in_place ? send : recv)[static_cast<size_t>(r)]->read(bytes * n),
                                          encoded(t, count * n, [&](size_t i) {
                                              const size_t c = count ? count : 1;
                                              return value(static_cast<int>(i / c), r * count + i % c);
                                          })), "")
                            << "all-to-all" << ctx << " rank " << r;
                    // send/receive round a ring: rank r sends to r + 1 (both directions in one group per rank).
                    fill();
                    run_all(ranks, [&](int r) {
                        const size_t ur = static_cast<size_t>(r);
                        rtError_t e = rtSend(send[ur]->ptr, count, t, (r + 1) % n, ranks.comms[ur], ranks.streams[ur]);
                        return e != RT_SUCCESS ? e : rtRecv(recv[ur]->ptr, count, t, (r + n - 1) % n, ranks.comms[ur],
                                                            ranks.streams[ur]);
                    });
                    for (int r = 0; r < n; ++r)
                        ASSERT_EQ(compare(t, recv[static_cast<size_t>(r)]->read(bytes),
                                          encoded(t, count, [&](size_t i) { return value((r + n - 1) % n, i); })), "")
                            << "send/recv" << ctx << " rank " << r;
                }
    }
}

TEST(CommExact, IntegerAverageTruncatesAndSumsWrap) {
    Ranks ranks(3);
    std::vector<std::unique_ptr<Buffer>> b;
    const int8_t v[3] = {100, 100, -7};  // sum 193 wraps to -63 in int8; -63 / 3 = -21
    for (int r = 0; r < 3; ++r) {
        b.push_back(std::make_unique<Buffer>(ranks.devices[static_cast<size_t>(r)], 2));
        const uint8_t bytes[2] = {static_cast<uint8_t>(v[r]), static_cast<uint8_t>(v[r])};
        b.back()->write({bytes[0], bytes[1]});
    }
    ASSERT_RT_OK(rtGroupStart());
    for (int r = 0; r < 3; ++r) {
        char* p = static_cast<char*>(b[static_cast<size_t>(r)]->ptr);
        ASSERT_RT_OK(rtAllReduce(p, p, 1, RT_INT8, RT_REDUCE_SUM, ranks.comms[static_cast<size_t>(r)],
                                 ranks.streams[static_cast<size_t>(r)]));
        ASSERT_RT_OK(rtAllReduce(p + 1, p + 1, 1, RT_INT8, RT_REDUCE_AVG, ranks.comms[static_cast<size_t>(r)],
                                 ranks.streams[static_cast<size_t>(r)]));
    }
    ASSERT_RT_OK(rtGroupEnd());
    for (rtError_t e : ranks.sync()) ASSERT_RT_OK(e);
    for (int r = 0; r < 3; ++r) {
        auto got = b[static_cast<size_t>(r)]->read(2);
        EXPECT_EQ(static_cast<int8_t>(got[0]), -63);
        EXPECT_EQ(static_cast<int8_t>(got[1]), -21);
    }
}

// ---------------------------------------------------------------- determinism and rounding

TEST(CommDeterminism, FloatSumIsRankOrderWhateverTheCount) {
    // Random floats: the sum depends on the order. Every element must be ((x0 + x1) + x2) + x3 exactly, for counts that
    // cut the work into different pieces.
    const int n = 4;
    Ranks ranks(n);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1e4f, 1e4f);
    for (size_t count : {size_t{1}, size_t{4099}, scaled(600011, 100000)}) {
        std::vector<std::vector<float>> in(n, std::vector<float>(count));
        std::vector<std::unique_ptr<Buffer>> b;
        for (int r = 0; r < n; ++r) {
            for (auto& x : in[static_cast<size_t>(r)]) x = dist(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 20));
            b.push_back(std::make_unique<Buffer>(ranks.devices[static_cast<size_t>(r)], count * 4));
            std::vector<uint8_t> bytes(count * 4);
            std::memcpy(bytes.data(), in[static_cast<size_t>(r)].data(), bytes.size());
            b.back()->write(bytes);
        }
        run_all(ranks, [&](int r) {
            void* p = b[static_cast<size_t>(r)]->ptr;
            return rtAllReduce(p, p, count, RT_FLOAT32, RT_REDUCE_SUM, ranks.comms[static_cast<size_t>(r)],
                               ranks.streams[static_cast<size_t>(r)]);
        });
        std::vector<uint8_t> want(count * 4);
        for (size_t i = 0; i < count; ++i) {
            volatile float acc = in[0][i];
            for (int r = 1; r < n; ++r) acc = acc + in[static_cast<size_t>(r)][i];
            const float a = acc;
            std::memcpy(&want[i * 4], &a, 4);
        }
        for (int r = 0; r < n; ++r)
            ASSERT_EQ(compare(RT_FLOAT32, b[static_cast<size_t>(r)]->read(count * 4), want), "") << "count " << count;
    }
}

TEST(CommDeterminism, HalfAccumulatesInFloatAndRoundsOnce) {
    const int n = 3;
    Ranks ranks(n);
    const size_t count = 5000;
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
    std::vector<std::vector<_Float16>> in(n, std::vector<_Float16>(count));
    std::vector<std::unique_ptr<Buffer>> b;
    for (int r = 0; r < n; ++r) {
        for (auto& x : in[static_cast<size_t>(r)]) x = static_cast<_Float16>(dist(rng));
        b.push_back(std::make_unique<Buffer>(ranks.devices[static_cast<size_t>(r)], count * 2));
        std::vector<uint8_t> bytes(count * 2);
        std::memcpy(bytes.data(), in[static_cast<size_t>(r)].data(), bytes.size());
        b.back()->write(bytes);
    }
    run_all(ranks, [&](int r) {
        void* p = b[static_cast<size_t>(r)]->ptr;
        return rtAllReduce(p, p, count, RT_FLOAT16, RT_REDUCE_AVG, ranks.comms[static_cast<size_t>(r)],
                           ranks.streams[static_cast<size_t>(r)]);
    });
    std::vector<uint8_t> want(count * 2);
    for (size_t i = 0; i < count; ++i) {
        volatile float acc = static_cast<float>(in[0][i]);
        for (int r = 1; r < n; ++r) acc = acc + static_cast<float>(in[static_cast<size_t>(r)][i]);
        const _Float16 h = static_cast<_Float16>(acc / static_cast<float>(n));
        std::memcpy(&want[i * 2], &h, 2);
    }
    for (int r = 0; r < n; ++r) ASSERT_EQ(compare(RT_FLOAT16, b[static_cast<size_t>(r)]->read(count * 2), want), "");
}

// ---------------------------------------------------------------- stream semantics

namespace {
struct HostGate {
    std::promise<void> open;
    std::shared_future<void> opened = open.get_future().share();
    void* buffer = nullptr;
};
void wait_gate_then_write(void* p) {
    auto* g = static_cast<HostGate*>(p);
    g->opened.wait();
    const int32_t v = 40;
    std::memcpy(g->buffer, &v, 4);  // cpu device memory is host-addressable
}
}  // namespace

TEST(CommStream, OrderedAfterEarlierWorkAndBeforeLaterWork) {
    Ranks ranks(2);
    Buffer a(ranks.devices[0], 4), b(ranks.devices[1], 4);
    a.write(encoded(RT_INT32, 1, [](size_t) { return 1; }));
    b.write(encoded(RT_INT32, 1, [](size_t) { return 2; }));
    HostGate gate;
    gate.buffer = a.ptr;
    rtEvent_t done = nullptr;
    rtSetDevice(ranks.devices[1]);
    ASSERT_RT_OK(rtEventCreate(&done));
    // Rank 0: a host function (held by the gate) writes its input before the collective runs.
    ASSERT_RT_OK(rtLaunchHostFunc(ranks.streams[0], wait_gate_then_write, &gate));
    ASSERT_RT_OK(rtAllReduce(a.ptr, a.ptr, 1, RT_INT32, RT_REDUCE_SUM, ranks.comms[0], ranks.streams[0]));
    ASSERT_RT_OK(rtAllReduce(b.ptr, b.ptr, 1, RT_INT32, RT_REDUCE_SUM, ranks.comms[1], ranks.streams[1]));
    ASSERT_RT_OK(rtEventRecord(done, ranks.streams[1]));
    // Rank 1's stream waits for rank 0, which waits for the gate: nothing after the collective is complete.
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtEventQuery(done));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtStreamQuery(ranks.streams[1]));
    gate.open.set_value();
    ASSERT_RT_OK(rtEventSynchronize(done));
    EXPECT_EQ(compare(RT_INT32, b.read(4), encoded(RT_INT32, 1, [](size_t) { return 42; })), "");
    for (rtError_t e : ranks.sync()) EXPECT_RT_OK(e);
    EXPECT_EQ(compare(RT_INT32, a.read(4), encoded(RT_INT32, 1, [](size_t) { return 42; })), "");
    rtEventDestroy(done);
}

TEST(CommStream, ATracedCollectiveIsASpanOnEachRanksStream) {
    Ranks ranks(2);
    Buffer a(ranks.devices[0], 4 * 1000), b(ranks.devices[1], 4 * 1000);
    const std::string path = rt_test::trace_json::temp_path("comm");
    ASSERT_RT_OK(rtProfilerStart(path.c_str(), RT_PROFILER_DEFAULT));
    for (int i = 0; i < 2; ++i) {  // two, so the sequence numbers tell them apart
        ASSERT_RT_OK(rtAllReduce(a.ptr, a.ptr, 1000, RT_FLOAT32, RT_REDUCE_SUM, ranks.comms[0], ranks.streams[0]));
        ASSERT_RT_OK(rtAllReduce(b.ptr, b.ptr, 1000, RT_FLOAT32, RT_REDUCE_SUM, ranks.comms[1], ranks.streams[1]));
    }
    for (rtError_t e : ranks.sync()) ASSERT_RT_OK(e);
    ASSERT_RT_OK(rtProfilerStop());
    const std::vector<rt_test::trace_json::Json> events = rt_test::trace_json::read_trace(path);
    std::remove(path.c_str());
    const std::vector<const rt_test::trace_json::Json*> spans = rt_test::trace_json::select(events, "X", "collective");
    ASSERT_EQ(spans.size(), 4u);
    std::map<double, std::vector<const rt_test::trace_json::Json*>> by_tid;
    for (const rt_test::trace_json::Json* e : spans) {
        const rt_test::trace_json::Json& args = (*e)["args"];
        EXPECT_EQ((*e)["name"].str(), "all_reduce");
        EXPECT_EQ(args["bytes"].n, 4000);
        EXPECT_EQ(args["ranks"].n, 2);
        EXPECT_EQ(args["type"].str(), "RT_FLOAT32");
        EXPECT_EQ(args["status"].str(), "ok");
        by_tid[(*e)["tid"].n].push_back(e);
    }
    ASSERT_EQ(by_tid.size(), 2u);  // one track per rank's stream
    for (auto& [tid, list] : by_tid) {
        ASSERT_EQ(list.size(), 2u);
        std::sort(list.begin(), list.end(), [](auto* x, auto* y) { return (*x)["ts"].n < (*y)["ts"].n; });
        EXPECT_EQ((*list[0])["args"]["sequence"].n, 1);
        EXPECT_EQ((*list[1])["args"]["sequence"].n, 2);
        EXPECT_EQ((*list[0])["args"]["rank"].n, (*list[1])["args"]["rank"].n);
        // In stream order, not overlapping.
        EXPECT_LE((*list[0])["ts"].n + (*list[0])["dur"].n, (*list[1])["ts"].n + 1e-3);
    }
}

TEST(CommStream, CountZeroIsANoOpThatStillMeetsThePeers) {
    Ranks ranks(2);
    run_all(ranks, [&](int r) {
        return rtAllReduce(nullptr, nullptr, 0, RT_FLOAT32, RT_REDUCE_SUM, ranks.comms[static_cast<size_t>(r)],
                           ranks.streams[static_cast<size_t>(r)]);
    });
    run_all(ranks, [&](int r) {
        return rtCommBarrier(ranks.comms[static_cast<size_t>(r)], ranks.streams[static_cast<size_t>(r)]);
    });
}

TEST(CommStream, NullStreamIsTheRanksDeviceDefaultStream) {
    // Two ranks on one device would share its default stream: rank 1's part would queue behind rank 0's, which
    // waits for it (a timeout). Two devices give two default streams.
    if (cpu_devices().size() < 2) GTEST_SKIP() << "needs two cpu devices (RUNTIME_CPU_DEVICES=2)";
    Ranks ranks(2);
    Buffer a(ranks.devices[0], 4), b(ranks.devices[1], 4);
    a.write(encoded(RT_INT32, 1, [](size_t) { return 3; }));
    b.write(encoded(RT_INT32, 1, [](size_t) { return 4; }));
    rtSetDevice(ranks.devices[0]);  // the current device is rank 0's for both calls
    ASSERT_RT_OK(rtAllReduce(a.ptr, a.ptr, 1, RT_INT32, RT_REDUCE_MAX, ranks.comms[0], nullptr));
    ASSERT_RT_OK(rtAllReduce(b.ptr, b.ptr, 1, RT_INT32, RT_REDUCE_MAX, ranks.comms[1], nullptr));
    ASSERT_RT_OK(rtDeviceSynchronize());
    for (int d : ranks.devices) {
        rtSetDevice(d);
        ASSERT_RT_OK(rtDeviceSynchronize());
    }
    EXPECT_EQ(compare(RT_INT32, a.read(4), encoded(RT_INT32, 1, [](size_t) { return 4; })), "");
    EXPECT_EQ(compare(RT_INT32, b.read(4), encoded(RT_INT32, 1, [](size_t) { return 4; })), "");
}

TEST(CommStream, ExchangeInAGroupDoesNotWaitForItself) {
    // Both ranks send first and receive second: in one group each rank's pair runs as one step.
    Ranks ranks(2);
    Buffer s0(ranks.devices[0], 64), r0(ranks.devices[0], 64), s1(ranks.devices[1], 64), r1(ranks.devices[1], 64);
    s0.write(std::vector<uint8_t>(64, 0xa0));
    s1.write(std::vector<uint8_t>(64, 0xb1));
    ASSERT_RT_OK(rtGroupStart());
    ASSERT_RT_OK(rtSend(s0.ptr, 64, RT_UINT8, 1, ranks.comms[0], ranks.streams[0]));
    ASSERT_RT_OK(rtRecv(r0.ptr, 64, RT_UINT8, 1, ranks.comms[0], ranks.streams[0]));
    ASSERT_RT_OK(rtSend(s1.ptr, 64, RT_UINT8, 0, ranks.comms[1], ranks.streams[1]));
    ASSERT_RT_OK(rtRecv(r1.ptr, 64, RT_UINT8, 0, ranks.comms[1], ranks.streams[1]));
    ASSERT_RT_OK(rtGroupEnd());
    for (rtError_t e : ranks.sync()) ASSERT_RT_OK(e);
    EXPECT_EQ(r0.read(64), std::vector<uint8_t>(64, 0xb1));
    EXPECT_EQ(r1.read(64), std::vector<uint8_t>(64, 0xa0));
}

TEST(CommStream, AFailedStreamFailsThePeersInsteadOfHanging) {
    Ranks ranks(2);
    Buffer a(ranks.devices[0], 4), b(ranks.devices[1], 4);
    ASSERT_RT_OK(rtLaunchHostFunc(ranks.streams[0], [](void*) { rtHostFuncSetError(RT_ERROR_LAUNCH_FAILED, "boom"); },
                                  nullptr));
    ASSERT_RT_OK(rtAllReduce(a.ptr, a.ptr, 1, RT_INT32, RT_REDUCE_SUM, ranks.comms[0], ranks.streams[0]));
    ASSERT_RT_OK(rtAllReduce(b.ptr, b.ptr, 1, RT_INT32, RT_REDUCE_SUM, ranks.comms[1], ranks.streams[1]));
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(ranks.streams[1]));
    EXPECT_NE(last_message().find("the stream of rank 0 held an unreported failure"), std::string::npos)
        << last_message();
    EXPECT_NE(last_message().find("rtAllReduce (collective #1"), std::string::npos) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_LAUNCH_FAILED, rtStreamSynchronize(ranks.streams[0]));
    EXPECT_NE(last_message().find("boom"), std::string::npos) << last_message();
    // The communicator is still good.
    run_all(ranks, [&](int r) {
        return rtCommBarrier(ranks.comms[static_cast<size_t>(r)], ranks.streams[static_cast<size_t>(r)]);
    });
}

// ---------------------------------------------------------------- faults

TEST(CommFault, AMissingRankTimesOutNamingItAndTheOperation) {
    EnvVar timeout("RUNTIME_COMM_TIMEOUT", "0.2");
    Ranks ranks(3);
    Buffer a(ranks.devices[0], 16), b(ranks.devices[1], 16);
    ASSERT_RT_OK(rtCommBarrier(ranks.comms[0], ranks.streams[0]));
    ASSERT_RT_OK(rtCommBarrier(ranks.comms[1], ranks.streams[1]));
    ASSERT_RT_OK(rtCommBarrier(ranks.comms[2], ranks.streams[2]));
    ASSERT_RT_OK(rtAllReduce(a.ptr, a.ptr, 4, RT_FLOAT32, RT_REDUCE_SUM, ranks.comms[0], ranks.streams[0]));
    ASSERT_RT_OK(rtAllReduce(b.ptr, b.ptr, 4, RT_FLOAT32, RT_REDUCE_SUM, ranks.comms[1], ranks.streams[1]));
    for (int r = 0; r < 2; ++r) {
        EXPECT_RT_ERROR(RT_ERROR_TIMEOUT, rtStreamSynchronize(ranks.streams[static_cast<size_t>(r)]));
        const std::string m = last_message();
        EXPECT_NE(m.find("rtAllReduce (collective #2"), std::string::npos) << m;
        EXPECT_NE(m.find("rank " + std::to_string(r) + " of 3"), std::string::npos) << m;
        EXPECT_NE(m.find("waiting for rank 2 "), std::string::npos) << m;
    }
    rtError_t async = RT_SUCCESS;
    ASSERT_RT_OK(rtCommGetAsyncError(ranks.comms[2], &async));
    EXPECT_EQ(async, RT_ERROR_TIMEOUT);
    EXPECT_NE(last_message().find("waiting for rank 2"), std::string::npos) << last_message();
    // The late rank fails at once; the runtime and new communicators are fine.
    Buffer c(ranks.devices[2], 16);
    ASSERT_RT_OK(rtAllReduce(c.ptr, c.ptr, 4, RT_FLOAT32, RT_REDUCE_SUM, ranks.comms[2], ranks.streams[2]));
    EXPECT_RT_ERROR(RT_ERROR_TIMEOUT, rtStreamSynchronize(ranks.streams[2]));
    EXPECT_NE(last_message().find("failed earlier"), std::string::npos) << last_message();
    Ranks fresh(2);
    run_all(fresh, [&](int r) {
        return rtCommBarrier(fresh.comms[static_cast<size_t>(r)], fresh.streams[static_cast<size_t>(r)]);
    });
}

TEST(CommFault, AbortFailsParkedAndQueuedCollectivesPromptly) {
    EnvVar timeout("RUNTIME_COMM_TIMEOUT", "60");  // an abort that did not work would show as a hang, not a timeout
    Ranks ranks(2);
    Buffer a(ranks.devices[0], 16);
    ASSERT_RT_OK(rtAllReduce(a.ptr, a.ptr, 4, RT_FLOAT32, RT_REDUCE_SUM, ranks.comms[0], ranks.streams[0]));
    ASSERT_RT_OK(rtCommBarrier(ranks.comms[0], ranks.streams[0]));
    ASSERT_RT_OK(rtCommAbort(ranks.comms[1]));
    ranks.comms[1] = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_ILLEGAL_STATE, rtStreamSynchronize(ranks.streams[0]));
    EXPECT_NE(last_message().find("aborted by rank 1"), std::string::npos) << last_message();
    rtError_t async = RT_SUCCESS;
    ASSERT_RT_OK(rtCommGetAsyncError(ranks.comms[0], &async));
    EXPECT_EQ(async, RT_ERROR_ILLEGAL_STATE);
    // Queued after the abort: fails when reached.
    ASSERT_RT_OK(rtCommBarrier(ranks.comms[0], ranks.streams[0]));
    EXPECT_RT_ERROR(RT_ERROR_ILLEGAL_STATE, rtStreamSynchronize(ranks.streams[0]));
    // The other streams still work.
    ASSERT_RT_OK(rtMemsetAsync(a.ptr, 0, 16, ranks.streams[0]));
    ASSERT_RT_OK(rtStreamSynchronize(ranks.streams[0]));
}

TEST(CommFault, MismatchedCountsFailEveryRankNamingBoth) {
    Ranks ranks(2);
    Buffer a(ranks.devices[0], 400), b(ranks.devices[1], 400);
    ASSERT_RT_OK(rtAllReduce(a.ptr, a.ptr, 100, RT_FLOAT32, RT_REDUCE_SUM, ranks.comms[0], ranks.streams[0]));
    ASSERT_RT_OK(rtAllReduce(b.ptr, b.ptr, 50, RT_FLOAT32, RT_REDUCE_SUM, ranks.comms[1], ranks.streams[1]));
    for (rtStream_t s : ranks.streams) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamSynchronize(s));
        EXPECT_NE(last_message().find("rank 0 passed count 100 but rank 1 passed count 50"), std::string::npos)
            << last_message();
    }
    ASSERT_RT_OK(rtAllReduce(a.ptr, a.ptr, 1, RT_FLOAT32, RT_REDUCE_SUM, ranks.comms[0], ranks.streams[0]));
    ASSERT_RT_OK(rtBroadcast(b.ptr, b.ptr, 1, RT_FLOAT32, 0, ranks.comms[1], ranks.streams[1]));
    for (rtStream_t s : ranks.streams) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamSynchronize(s));
        EXPECT_NE(last_message().find("rank 0 called rtAllReduce but rank 1 called rtBroadcast"), std::string::npos)
            << last_message();
    }
    ASSERT_RT_OK(rtSend(a.ptr, 10, RT_FLOAT32, 1, ranks.comms[0], ranks.streams[0]));
    ASSERT_RT_OK(rtRecv(b.ptr, 10, RT_INT32, 0, ranks.comms[1], ranks.streams[1]));
    for (rtStream_t s : ranks.streams) {
        EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtStreamSynchronize(s));
        EXPECT_NE(last_message().find("rank 0 sends 10 elements of RT_FLOAT32 but rank 1 receives 10 elements of "
                                      "RT_INT32"), std::string::npos) << last_message();
    }
}

TEST(CommFault, BadInputIsRefusedBeforeAnythingIsQueued) {
    Ranks ranks(2);
    Buffer a(ranks.devices[0], 64);
    rtComm_t c = ranks.comms[0];
    rtStream_t s = ranks.streams[0];
    auto refused = [&](rtError_t code, rtError_t got, const char* words) {
        EXPECT_EQ(got, code) << words;
        EXPECT_NE(last_message().find(words), std::string::npos) << last_message();
    };
    refused(RT_ERROR_INVALID_HANDLE, rtAllReduce(a.ptr, a.ptr, 4, RT_FLOAT32, RT_REDUCE_SUM, nullptr, s), "comm is NULL");
    refused(RT_ERROR_INVALID_VALUE, rtAllReduce(a.ptr, a.ptr, 4, static_cast<rtDataType>(99), RT_REDUCE_SUM, c, s),
            "datatype 99 is out of range");
    refused(RT_ERROR_INVALID_VALUE, rtAllReduce(a.ptr, a.ptr, 4, RT_FLOAT32, static_cast<rtReduceOp>(-1), c, s),
            "op -1 is out of range");
    refused(RT_ERROR_INVALID_VALUE, rtBroadcast(a.ptr, a.ptr, 4, RT_FLOAT32, 2, c, s), "root 2 is out of range");
    refused(RT_ERROR_INVALID_VALUE, rtSend(a.ptr, 4, RT_FLOAT32, -1, c, s), "peer -1 is out of range");
    refused(RT_ERROR_INVALID_VALUE, rtAllReduce(a.ptr, a.ptr, 17, RT_FLOAT32, RT_REDUCE_SUM, c, s),
            "has 64 bytes to the end of its allocation, but the operation needs 68");
    std::vector<float> host(16);
    refused(RT_ERROR_INVALID_VALUE, rtAllReduce(host.data(), a.ptr, 4, RT_FLOAT32, RT_REDUCE_SUM, c, s),
            "is not device memory");
    refused(RT_ERROR_INVALID_VALUE, rtAllReduce(a.ptr, nullptr, 4, RT_FLOAT32, RT_REDUCE_SUM, c, s), "recvbuff is NULL");
    refused(RT_ERROR_INVALID_VALUE,
            rtAllReduce(a.ptr, static_cast<char*>(a.ptr) + 4, 4, RT_FLOAT32, RT_REDUCE_SUM, c, s),
            "overlap without being in place");
    {
        Buffer g(ranks.devices[1], 64);  // rank 1 in place means send == recv + 1 * 16 bytes, not send == recv
        refused(RT_ERROR_INVALID_VALUE, rtAllGather(g.ptr, g.ptr, 4, RT_FLOAT32, ranks.comms[1], ranks.streams[1]),
                "in place: sendbuff == recvbuff + rank * sendcount");
    }
    if (ranks.devices[0] != ranks.devices[1]) {
        Buffer other(ranks.devices[1], 64);
        refused(RT_ERROR_INVALID_VALUE, rtAllReduce(other.ptr, other.ptr, 4, RT_FLOAT32, RT_REDUCE_SUM, c, s),
                "a collective's buffers belong to its rank's device");
        refused(RT_ERROR_INVALID_VALUE, rtAllReduce(a.ptr, a.ptr, 4, RT_FLOAT32, RT_REDUCE_SUM, c, ranks.streams[1]),
                "queue a rank's collectives on a stream of its device");
    }
    rtComm_t dead = nullptr;
    ASSERT_RT_OK(rtCommInitAll(&dead, 1, nullptr));
    ASSERT_RT_OK(rtCommDestroy(dead));
    refused(RT_ERROR_INVALID_HANDLE, rtCommBarrier(dead, nullptr), "not a live communicator");
    // Nothing was queued: the communicator's first collective still pairs with rank 1's first.
    run_all(ranks, [&](int r) {
        return rtCommBarrier(ranks.comms[static_cast<size_t>(r)], ranks.streams[static_cast<size_t>(r)]);
    });
    EXPECT_RT_OK(rtStreamQuery(s));
}

TEST(CommFault, AnExchangeOutsideAGroupWaitsForItselfUntilTheTimeout) {
    // Both ranks send first: each send waits for a receive queued behind the other's send (NCCL would hang; here the
    // timeout names the message). In a group the same calls run (ExchangeInAGroupDoesNotWaitForItself).
    EnvVar timeout("RUNTIME_COMM_TIMEOUT", "0.2");
    Ranks ranks(2);
    Buffer s0(ranks.devices[0], 64), r0(ranks.devices[0], 64), s1(ranks.devices[1], 64), r1(ranks.devices[1], 64);
    ASSERT_RT_OK(rtSend(s0.ptr, 64, RT_UINT8, 1, ranks.comms[0], ranks.streams[0]));
    ASSERT_RT_OK(rtRecv(r0.ptr, 64, RT_UINT8, 1, ranks.comms[0], ranks.streams[0]));
    ASSERT_RT_OK(rtSend(s1.ptr, 64, RT_UINT8, 0, ranks.comms[1], ranks.streams[1]));
    ASSERT_RT_OK(rtRecv(r1.ptr, 64, RT_UINT8, 0, ranks.comms[1], ranks.streams[1]));
    EXPECT_RT_ERROR(RT_ERROR_TIMEOUT, rtStreamSynchronize(ranks.streams[0]));
    EXPECT_NE(last_message().find("rtSend to rank 1 (message #1 from rank 0 to rank 1"), std::string::npos)
        << last_message();
    EXPECT_RT_ERROR(RT_ERROR_TIMEOUT, rtStreamSynchronize(ranks.streams[1]));
}

TEST(CommFault, DestroyingARankLetsItsQueuedCollectivesRun) {
    Ranks ranks(2);
    Buffer a(ranks.devices[0], 4), b(ranks.devices[1], 4);
    a.write(encoded(RT_INT32, 1, [](size_t) { return 20; }));
    b.write(encoded(RT_INT32, 1, [](size_t) { return 22; }));
    ASSERT_RT_OK(rtAllReduce(a.ptr, a.ptr, 1, RT_INT32, RT_REDUCE_SUM, ranks.comms[0], ranks.streams[0]));
    ASSERT_RT_OK(rtCommDestroy(ranks.comms[0]));  // before its peer has even called
    ranks.comms[0] = nullptr;
    ASSERT_RT_OK(rtAllReduce(b.ptr, b.ptr, 1, RT_INT32, RT_REDUCE_SUM, ranks.comms[1], ranks.streams[1]));
    for (rtError_t e : ranks.sync()) ASSERT_RT_OK(e);
    EXPECT_EQ(compare(RT_INT32, a.read(4), encoded(RT_INT32, 1, [](size_t) { return 42; })), "");
    EXPECT_EQ(compare(RT_INT32, b.read(4), encoded(RT_INT32, 1, [](size_t) { return 42; })), "");
}

TEST(CommFault, BadTimeoutValueIsRefused) {
    EnvVar timeout("RUNTIME_COMM_TIMEOUT", "soon");
    rtComm_t c = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtCommInitAll(&c, 1, nullptr));
    EXPECT_NE(last_message().find("RUNTIME_COMM_TIMEOUT='soon' is not a positive number of seconds"), std::string::npos)
        << last_message();
}

TEST(CommExact, LargeAllReduceWrittenPastTheCache) {
    // 2 ranks x 8 MiB + 20 B: past the size from which the output is written with streaming stores (local.cpp);
    // not scaled down under the sanitizers (the path is what the test is for). In and out of place.
    Ranks ranks(2);
    const size_t count = (size_t{8} << 20) / 4 + 5, bytes = count * 4;
    for (int in_place = 0; in_place < 2; ++in_place) {
        std::vector<std::unique_ptr<Buffer>> send, recv;
        for (int r = 0; r < 2; ++r) {
            send.push_back(std::make_unique<Buffer>(ranks.devices[static_cast<size_t>(r)], bytes));
            recv.push_back(std::make_unique<Buffer>(ranks.devices[static_cast<size_t>(r)], bytes));
            send.back()->write(encoded(RT_FLOAT32, count, [&](size_t i) { return input(RT_FLOAT32, RT_REDUCE_SUM, 2, r, i); }));
        }
        run_all(ranks, [&](int r) {
            void* s = send[static_cast<size_t>(r)]->ptr;
            return rtAllReduce(s, in_place ? s : recv[static_cast<size_t>(r)]->ptr, count, RT_FLOAT32, RT_REDUCE_SUM,
                               ranks.comms[static_cast<size_t>(r)], ranks.streams[static_cast<size_t>(r)]);
        });
        const auto want = encoded(RT_FLOAT32, count, [&](size_t i) { return expected(RT_FLOAT32, RT_REDUCE_SUM, 2, i); });
        for (int r = 0; r < 2; ++r)
            ASSERT_EQ(compare(RT_FLOAT32, (in_place ? send : recv)[static_cast<size_t>(r)]->read(bytes), want), "")
                << "rank " << r << (in_place ? " in place" : "");
    }
}
