// Collectives across processes (the MPI transport), run under mpirun -np 2 / -np 4: exact checks of every
// collective x data type x op, bitwise equality with the in-process result, faults (a stopped rank, abort,
// mismatched calls, a killed rank) and bad input. Prints each failed check and exits non-zero.
//   test_comm_mpi collectives | faults | hierarchical | killed | finalize
// hierarchical: 2 ranks per process, each driven by its own thread on its own cpu device (rank = local * processes +
// world rank, so every process' ranks interleave with the others').
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mpi_check.hpp"
#include "runtime/comm.h"
#include "runtime/runtime.h"

namespace {

// The communicator size of the calling thread (hierarchical: one thread per rank), and its device; its rank is
// mpi_check::g_rank.
using mpi_check::g_failures;
using mpi_check::g_rank;
thread_local int g_size = 1, g_device = 0;
#define OK(call) CHECK((call) == RT_SUCCESS, "%s: %s", #call, rtGetLastErrorMessage())

size_t esize(rtDataType t) {
    switch (t) {
        case RT_INT8: case RT_UINT8: return 1;
        case RT_FLOAT16: case RT_BFLOAT16: return 2;
        case RT_INT32: case RT_UINT32: case RT_FLOAT32: return 4;
        default: return 8;
    }
}
bool is_signed(rtDataType t) { return t == RT_INT8 || t == RT_INT32 || t == RT_INT64 || t >= RT_FLOAT16; }

// Small integers only: exact in every type, so the conversions need no rounding.
uint16_t half_of(float f) {
    if (f == 0) return 0;
    uint32_t b;
    std::memcpy(&b, &f, 4);
    const uint32_t sign = (b >> 16) & 0x8000, exp = (b >> 23) & 0xff, man = b & 0x7fffff;
    return static_cast<uint16_t>(sign | ((exp - 127 + 15) << 10) | (man >> 13));
}
float float_of_half(uint16_t h) {
    const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    uint32_t b = exp == 0 && man == 0 ? sign : sign | ((exp - 15 + 127) << 23) | (man << 13);
    if (exp == 0 && man != 0) return (h & 0x8000 ? -1.f : 1.f) * std::ldexp(static_cast<float>(man), -24);
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}
void put(rtDataType t, void* p, size_t i, double v) {
    char* c = static_cast<char*>(p) + i * esize(t);
    switch (t) {
        case RT_INT8: { int8_t x = static_cast<int8_t>(v); std::memcpy(c, &x, 1); break; }
        case RT_UINT8: { uint8_t x = static_cast<uint8_t>(v); std::memcpy(c, &x, 1); break; }
        case RT_INT32: { int32_t x = static_cast<int32_t>(v); std::memcpy(c, &x, 4); break; }
        case RT_UINT32: { uint32_t x = static_cast<uint32_t>(v); std::memcpy(c, &x, 4); break; }
        case RT_INT64: { int64_t x = static_cast<int64_t>(v); std::memcpy(c, &x, 8); break; }
        case RT_UINT64: { uint64_t x = static_cast<uint64_t>(v); std::memcpy(c, &x, 8); break; }
        case RT_FLOAT16: { uint16_t x = half_of(static_cast<float>(v)); std::memcpy(c, &x, 2); break; }
        case RT_BFLOAT16: { float f = static_cast<float>(v); uint32_t b; std::memcpy(&b, &f, 4); uint16_t x = static_cast<uint16_t>(b >> 16); std::memcpy(c, &x, 2); break; }
        case RT_FLOAT32: { float x = static_cast<float>(v); std::memcpy(c, &x, 4); break; }
        case RT_FLOAT64: std::memcpy(c, &v, 8); break;
    }
}
double get(rtDataType t, const void* p, size_t i) {
    const char* c = static_cast<const char*>(p) + i * esize(t);
    switch (t) {
        case RT_INT8: { int8_t x; std::memcpy(&x, c, 1); return x; }
        case RT_UINT8: { uint8_t x; std::memcpy(&x, c, 1); return x; }
        case RT_INT32: { int32_t x; std::memcpy(&x, c, 4); return x; }
        case RT_UINT32: { uint32_t x; std::memcpy(&x, c, 4); return x; }
        case RT_INT64: { int64_t x; std::memcpy(&x, c, 8); return static_cast<double>(x); }
        case RT_UINT64: { uint64_t x; std::memcpy(&x, c, 8); return static_cast<double>(x); }
        case RT_FLOAT16: { uint16_t x; std::memcpy(&x, c, 2); return float_of_half(x); }
        case RT_BFLOAT16: { uint16_t x; std::memcpy(&x, c, 2); uint32_t b = uint32_t{x} << 16; float f; std::memcpy(&f, &b, 4); return f; }
        case RT_FLOAT32: { float x; std::memcpy(&x, c, 4); return x; }
        case RT_FLOAT64: { double x; std::memcpy(&x, c, 8); return x; }
    }
    return 0;
}

/// Rank r's element i for `op`: values whose reduction is exact in any order (nccl-tests' idea); AVG's sum is a
/// multiple of the (even) number of ranks.
double value(rtReduceOp op, rtDataType t, int r, size_t i) {
    switch (op) {
        case RT_REDUCE_SUM: return static_cast<double>((static_cast<size_t>(r) + i) % 5 + 1);
        case RT_REDUCE_PROD: return static_cast<double>((static_cast<size_t>(r) + i) % 2 + 1);
        case RT_REDUCE_AVG: return static_cast<double>(i % 5 + 1) + (r % 2 == 0 ? 1 : -1);
        default: return static_cast<double>((static_cast<size_t>(r) * 3 + i) % 11) - (is_signed(t) ? 5 : 0);
    }
}
double reduced(rtReduceOp op, rtDataType t, size_t i) {
    double acc = value(op, t, 0, i);
    for (int r = 1; r < g_size; ++r) {
        const double v = value(op, t, r, i);
        switch (op) {
            case RT_REDUCE_SUM: case RT_REDUCE_AVG: acc += v; break;
            case RT_REDUCE_PROD: acc *= v; break;
            case RT_REDUCE_MAX: acc = std::max(acc, v); break;
            case RT_REDUCE_MIN: acc = std::min(acc, v); break;
        }
    }
    return op == RT_REDUCE_AVG ? acc / g_size : acc;
}

/// Device memory of `bytes` (at least 1), and host copies in and out.
struct Buf {
    void* d = nullptr;
    size_t bytes;
    explicit Buf(size_t n) : bytes(n ? n : 1) { OK(rtMalloc(&d, bytes)); }
    ~Buf() { rtFree(d); }
    void load(const std::vector<char>& h) { if (!h.empty()) OK(rtMemcpy(d, h.data(), h.size(), RT_MEMCPY_HOST_TO_DEVICE)); }
    std::vector<char> read(size_t n) const {
        std::vector<char> h(n);
        if (n) OK(rtMemcpy(h.data(), d, n, RT_MEMCPY_DEVICE_TO_HOST));
        return h;
    }
};

const rtDataType kTypes[] = {RT_INT8, RT_UINT8, RT_INT32, RT_UINT32, RT_INT64, RT_UINT64, RT_FLOAT16, RT_BFLOAT16, RT_FLOAT32, RT_FLOAT64};
const rtReduceOp kOps[] = {RT_REDUCE_SUM, RT_REDUCE_PROD, RT_REDUCE_MAX, RT_REDUCE_MIN, RT_REDUCE_AVG};

bool contains(const char* s, const char* part) { return s && std::strstr(s, part); }

/// Whether this process maps a communicator's shared segment (a memfd named "rt-comm-<token>").
int shared_segments() {
    FILE* f = std::fopen("/proc/self/maps", "r");
    if (!f) return -1;
    char line[512];
    int n = 0;
    while (std::fgets(line, sizeof line, f))
        if (contains(line, "memfd:rt-comm-")) ++n;
    std::fclose(f);
    return n;
}

/// RUNTIME_COMM_SHM=0: the run without the shared segment (collectives as MPI messages).
bool shm_off() {
    const char* v = std::getenv("RUNTIME_COMM_SHM");
    return v && std::strcmp(v, "0") == 0;
}

rtComm_t make_comm(int nranks_override = 0) {
    rtCommUniqueId id{};
    if (g_rank == 0) OK(rtCommGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    rtComm_t c = nullptr;
    OK(rtCommInitRank(&c, nranks_override ? nranks_override : g_size, id, g_rank));
    return c;
}

int wrong(const std::vector<char>& got, rtDataType t, size_t n, const std::function<double(size_t)>& want) {
    int bad = 0;
    for (size_t i = 0; i < n; ++i)
        if (get(t, got.data(), i) != want(i)) ++bad;
    return bad;
}

/// Every collective for `types` x `ops` at counts 0, 1, 37, 4100, 300001, in and out of place; sends and receives between
/// rank r and r + stride for each of `strides`.
void collectives(rtComm_t comm, rtStream_t s, const std::vector<rtDataType>& types, const std::vector<rtReduceOp>& ops,
                 const std::vector<int>& strides) {
    const int n = g_size, r = g_rank;
    // 4100: the shared segment's one-round path for 1- and 2-byte types, its chunked path for wider ones (16 KiB).
    const size_t counts[] = {0, 1, 37, 4100, 300001};  // the last: past one message, several rounds of the large path
    for (rtDataType t : types)
        for (size_t count : counts) {
            const size_t es = esize(t), B = count * es;
            auto fill = [&](rtReduceOp op, size_t elems, auto idx) {
                std::vector<char> h(elems * es);
                for (size_t i = 0; i < elems; ++i) put(t, h.data(), i, value(op, t, r, idx(i)));
                return h;
            };
            for (int inplace = 0; inplace < 2; ++inplace) {
                const char* where = inplace ? "in place" : "out of place";
                for (rtReduceOp op : ops) {
                    auto same = [](size_t i) { return i; };
                    {  // all_reduce
                        Buf a(B), b(B);
                        a.load(fill(op, count, same));
                        OK(rtAllReduce(a.d, inplace ? a.d : b.d, count, t, op, comm, s));
                        OK(rtStreamSynchronize(s));
                        const int w = wrong((inplace ? a : b).read(B), t, count, [&](size_t i) { return reduced(op, t, i); });
                        CHECK(w == 0, "rtAllReduce type %d op %d count %zu %s: %d wrong", t, op, count, where, w);
                    }
                    {  // reduce to root n-1
                        Buf a(B), b(B);
                        a.load(fill(op, count, same));
                        OK(rtReduce(a.d, inplace ? a.d : b.d, count, t, op, n - 1, comm, s));
                        OK(rtStreamSynchronize(s));
                        if (r == n - 1) {
                            const int w = wrong((inplace ? a : b).read(B), t, count, [&](size_t i) { return reduced(op, t, i); });
                            CHECK(w == 0, "rtReduce type %d op %d count %zu %s: %d wrong", t, op, count, where, w);
                        }
                    }
                    {  // reduce_scatter: element i of block k is global element k*count+i
                        Buf a(B * n), b(B);
                        a.load(fill(op, count * n, same));
                        void* out = inplace ? static_cast<char*>(a.d) + r * B : b.d;
                        OK(rtReduceScatter(a.d, out, count, t, op, comm, s));
                        OK(rtStreamSynchronize(s));
                        std::vector<char> got(B);
                        if (B) OK(rtMemcpy(got.data(), out, B, RT_MEMCPY_DEVICE_TO_HOST));
                        const int w = wrong(got, t, count, [&](size_t i) { return reduced(op, t, r * count + i); });
                        CHECK(w == 0, "rtReduceScatter type %d op %d count %zu %s: %d wrong", t, op, count, where, w);
                    }
                }
                auto mark = [&](int rank, size_t i) { return static_cast<double>((static_cast<size_t>(rank) * 7 + i) % 13); };
                {  // broadcast from root 1 % n
                    const int root = 1 % n;
                    Buf a(B), b(B);
                    std::vector<char> h(B);
                    for (size_t i = 0; i < count; ++i) put(t, h.data(), i, mark(r, i));
                    a.load(h);
                    OK(rtBroadcast(a.d, inplace ? a.d : b.d, count, t, root, comm, s));
                    OK(rtStreamSynchronize(s));
                    const int w = wrong((inplace ? a : b).read(B), t, count, [&](size_t i) { return mark(root, i); });
                    CHECK(w == 0, "rtBroadcast type %d count %zu %s: %d wrong", t, count, where, w);
                }
                {  // all_gather
                    Buf a(B), b(B * n);
                    std::vector<char> h(B);
                    for (size_t i = 0; i < count; ++i) put(t, h.data(), i, mark(r, i));
                    const void* in = a.d;
                    if (inplace) {
                        OK(rtMemcpy(static_cast<char*>(b.d) + r * B, h.data(), B, RT_MEMCPY_HOST_TO_DEVICE));
                        in = static_cast<char*>(b.d) + r * B;
                    } else {
                        a.load(h);
                    }
                    OK(rtAllGather(in, b.d, count, t, comm, s));
                    OK(rtStreamSynchronize(s));
                    const int w = wrong(b.read(B * n), t, count * n, [&](size_t j) { return mark(static_cast<int>(j / (count ? count : 1)), j % (count ? count : 1)); });
                    CHECK(w == 0, "rtAllGather type %d count %zu %s: %d wrong", t, count, where, w);
                }
                {  // all_to_all: block k of rank r's send = mark(r*n+k); receiver r's block k = sender k's block r
                    Buf a(B * n), b(B * n);
                    std::vector<char> h(B * n);
                    for (int k = 0; k < n; ++k)
                        for (size_t i = 0; i < count; ++i) put(t, h.data(), k * count + i, mark(r * n + k, i));
                    a.load(h);
                    OK(rtAlltoAll(a.d, inplace ? a.d : b.d, count, t, comm, s));
                    OK(rtStreamSynchronize(s));
                    const size_t c1 = count ? count : 1;
                    const int w = wrong((inplace ? a : b).read(B * n), t, count * n, [&](size_t j) {
                        return mark(static_cast<int>(j / c1) * n + r, j % c1);
                    });
                    CHECK(w == 0, "rtAlltoAll type %d count %zu %s: %d wrong", t, count, where, w);
                }
            }
            for (int stride : strides) {  // send/recv around the ring, in a group (every rank sends and receives)
                Buf a(B), b(B);
                std::vector<char> h(B);
                for (size_t i = 0; i < count; ++i) put(t, h.data(), i, static_cast<double>((r + i) % 9));
                a.load(h);
                const int to = (r + stride) % n, from = (r + n - stride) % n;
                OK(rtGroupStart());
                OK(rtSend(a.d, count, t, to, comm, s));
                OK(rtRecv(b.d, count, t, from, comm, s));
                OK(rtGroupEnd());
                OK(rtStreamSynchronize(s));
                const int w = wrong(b.read(B), t, count, [&](size_t i) { return static_cast<double>((from + i) % 9); });
                CHECK(w == 0, "rtSend/rtRecv type %d count %zu stride %d: %d wrong", t, count, stride, w);
            }
        }
    OK(rtCommBarrier(comm, s));
    OK(rtStreamSynchronize(s));
}

/// Random floats (their sum depends on the order): the result across processes equals, bit for bit, the result of
/// the same ranks in one process (rtCommInitAll over n cpu devices, RUNTIME_CPU_DEVICES).
void bitwise(rtComm_t comm, rtStream_t s) {
    int ndev = 0;
    rtGetDeviceCount(&ndev);
    CHECK(ndev >= g_size, "need RUNTIME_CPU_DEVICES >= %d, have %d devices", g_size, ndev);
    if (ndev < g_size) return;
    for (rtDataType t : {RT_FLOAT32, RT_FLOAT16, RT_BFLOAT16, RT_FLOAT64})
        for (size_t count : {size_t{5}, size_t{1000}, size_t{1} << 20})
            for (rtReduceOp op : {RT_REDUCE_SUM, RT_REDUCE_AVG}) {
                const size_t B = count * esize(t);
                auto input = [&](int rank) {
                    std::mt19937 gen(static_cast<unsigned>(rank * 7919 + count));
                    std::uniform_real_distribution<double> d(-1000, 1000);
                    std::vector<char> h(B);
                    for (size_t i = 0; i < count; ++i) {
                        double v = d(gen);
                        if (t == RT_FLOAT16) {  // any half value: a random bit pattern that is finite
                            uint16_t x = static_cast<uint16_t>(gen());
                            if (((x >> 10) & 0x1f) == 0x1f) x &= 0xbfff;
                            std::memcpy(h.data() + i * 2, &x, 2);
                            continue;
                        }
                        if (t == RT_BFLOAT16) {
                            float f = static_cast<float>(v) * 1.37f;
                            uint32_t b;
                            std::memcpy(&b, &f, 4);
                            uint16_t x = static_cast<uint16_t>(b >> 16);
                            std::memcpy(h.data() + i * 2, &x, 2);
                            continue;
                        }
                        put(t, h.data(), i, t == RT_FLOAT32 ? static_cast<float>(v) * 1.0001f : v * 1.000000001);
                    }
                    return h;
                };
                Buf mine(B);
                mine.load(input(g_rank));
                OK(rtAllReduce(mine.d, mine.d, count, t, op, comm, s));
                OK(rtStreamSynchronize(s));
                const std::vector<char> across = mine.read(B);
                // The same ranks in this process.
                std::vector<int> devs;
                for (int k = 0; k < g_size; ++k) devs.push_back(k);
                std::vector<rtComm_t> local(static_cast<size_t>(g_size));
                OK(rtCommInitAll(local.data(), g_size, devs.data()));
                std::vector<void*> bufs(static_cast<size_t>(g_size));
                std::vector<rtStream_t> streams(static_cast<size_t>(g_size));
                for (int k = 0; k < g_size; ++k) {
                    OK(rtSetDevice(k));
                    OK(rtStreamCreateWithFlags(&streams[k], RT_STREAM_NON_BLOCKING));
                    OK(rtMalloc(&bufs[k], B));
                    auto h = input(k);
                    OK(rtMemcpy(bufs[k], h.data(), B, RT_MEMCPY_HOST_TO_DEVICE));
                }
                for (int k = 0; k < g_size; ++k) OK(rtAllReduce(bufs[k], bufs[k], count, t, op, local[k], streams[k]));
                for (int k = 0; k < g_size; ++k) OK(rtStreamSynchronize(streams[k]));
                std::vector<char> in_process(B);
                OK(rtMemcpy(in_process.data(), bufs[0], B, RT_MEMCPY_DEVICE_TO_HOST));
                CHECK(std::memcmp(in_process.data(), across.data(), B) == 0,
                      "type %d op %d count %zu: the result across processes differs from the in-process one", t, op, count);
                for (int k = 0; k < g_size; ++k) {
                    rtFree(bufs[k]);
                    rtStreamDestroy(streams[k]);
                    rtCommDestroy(local[k]);
                }
                OK(rtSetDevice(g_device));
            }
}


/// Small collectives on an idle stream start at their call (with a shared segment): the call never waits for a late
/// peer, a call whose peers are there already finishes within it, and stream order holds either way (an event behind
/// a pending one, a host function ahead of one). Each all-reduce sums rank + 1 (rank 0 also checks the result on a
/// second stream ordered by an event).
void started_at_call(rtComm_t comm, rtStream_t s) {
    const float want = static_cast<float>(g_size * (g_size + 1) / 2);
    Buf a(sizeof(float)), b(sizeof(float));
    auto set = [&](float v) { a.load(std::vector<char>(reinterpret_cast<char*>(&v), reinterpret_cast<char*>(&v) + 4)); };
    auto value = [](const Buf& x) {
        float v = 0;
        std::memcpy(&v, x.read(sizeof v).data(), sizeof v);
        return v;
    };
    // 1. A late peer: the others call only once rank 0's call has returned (they wait for its broadcast), so rank 0's
    //    call cannot have waited for them; its stream is busy until they come.
    rtStream_t other = nullptr;
    rtEvent_t done = nullptr;
    OK(rtStreamCreateWithFlags(&other, RT_STREAM_NON_BLOCKING));
    OK(rtEventCreate(&done));
    set(static_cast<float>(g_rank + 1));
    int go = 0;
    if (g_rank == 0) {
        OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, comm, s));
        CHECK(rtStreamQuery(s) == RT_ERROR_NOT_READY, "an all-reduce whose peers have not called it is not complete");
        OK(rtEventRecord(done, s));
        OK(rtStreamWaitEvent(other, done));
        OK(rtMemcpyAsync(b.d, a.d, sizeof(float), RT_MEMCPY_DEVICE_TO_DEVICE, other));
        go = 1;
    }
    MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (g_rank != 0) OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, comm, s));
    OK(rtStreamSynchronize(s));
    CHECK(value(a) == want, "a late peer: all-reduce gave %g, expected %g", value(a), want);
    if (g_rank == 0) {
        OK(rtStreamSynchronize(other));
        CHECK(value(b) == want, "a copy ordered after the pending all-reduce by an event read %g", value(b));
    }
    // 2. Peers there already: rank 0 calls after every other rank's call has returned (the barrier); with a shared
    //    segment its call finds their contributions and finishes within it. Rank 0 calls on a stream that never had
    //    work: right after a synchronize returns, the thread that ran a stream's last task may not have marked it idle
    //    yet, and a collective on a stream that is not idle is queued.
    rtStream_t fresh = nullptr;
    OK(rtStreamCreateWithFlags(&fresh, RT_STREAM_NON_BLOCKING));
    set(static_cast<float>(g_rank + 1));
    if (g_rank != 0) OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, comm, s));
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) {
        OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, comm, fresh));
        if (!shm_off() && !std::getenv("RUNTIME_TRACE"))  // a traced collective is always queued (its span)
            CHECK(rtStreamQuery(fresh) == RT_SUCCESS, "an all-reduce whose peers had called it finishes within the call");
        OK(rtStreamSynchronize(fresh));
    }
    OK(rtStreamDestroy(fresh));
    OK(rtStreamSynchronize(s));
    CHECK(value(a) == want, "peers there already: all-reduce gave %g, expected %g", value(a), want);
    // 3. A busy stream: a host function ahead of the all-reduce writes its input once released (after the call), so
    //    a collective that ran at its call would sum stale inputs.
    struct Gate {
        std::atomic<bool> open{false};
        float* in;
        float value;
    } gate{{}, static_cast<float*>(a.d), static_cast<float>(g_rank + 1)};
    set(-100.0f);
    OK(rtLaunchHostFunc(s, [](void* p) {
        auto* g = static_cast<Gate*>(p);
        while (!g->open.load()) std::this_thread::yield();
        *g->in = g->value;  // cpu device memory is host memory
    }, &gate));
    OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, comm, s));
    gate.open.store(true);
    OK(rtStreamSynchronize(s));
    CHECK(value(a) == want, "behind a host function: all-reduce gave %g, expected %g", value(a), want);
    // 4. Ranks that only write (a broadcast's root, a reduce's other ranks) do not wait for their peers with a shared
    //    segment. Rank 0 broadcasts 6 values before any other rank calls (they wait for its MPI message): its first
    //    completes (its stream synchronizes) before they call; the ones that would reuse a slot the peers have not read
    //    yet (a rank has 4) wait for the peers' calls; each value arrives intact. (Without a segment every rank waits
    //    for all: that synchronize would wait for the peers, which wait for rank 0.)
    constexpr int kAhead = 6;
    std::vector<std::unique_ptr<Buf>> bufs;
    for (int k = 0; k < kAhead; ++k) bufs.push_back(std::make_unique<Buf>(sizeof(float)));
    auto put = [](Buf& x, float v) { x.load(std::vector<char>(reinterpret_cast<char*>(&v), reinterpret_cast<char*>(&v) + 4)); };
    // (Filled before the calls: a synchronous copy waits for the stream's pending broadcasts.)
    for (int k = 0; k < kAhead; ++k) put(*bufs[static_cast<size_t>(k)], g_rank == 0 ? 10.0f + static_cast<float>(k) : -1.0f);
    go = 0;
    if (g_rank == 0) {
        for (int k = 0; k < kAhead; ++k) {
            OK(rtBroadcast(bufs[static_cast<size_t>(k)]->d, bufs[static_cast<size_t>(k)]->d, 1, RT_FLOAT32, 0, comm, s));
            if (k == 0 && !shm_off())
                CHECK(rtStreamSynchronize(s) == RT_SUCCESS, "a broadcast's root completes before its peers call: %s",
                      rtGetLastErrorMessage());
        }
        go = 1;
    }
    MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (g_rank != 0)
        for (int k = 0; k < kAhead; ++k)
            OK(rtBroadcast(bufs[static_cast<size_t>(k)]->d, bufs[static_cast<size_t>(k)]->d, 1, RT_FLOAT32, 0, comm, s));
    OK(rtStreamSynchronize(s));
    for (int k = 0; k < kAhead; ++k)
        CHECK(value(*bufs[static_cast<size_t>(k)]) == 10.0f + static_cast<float>(k),
              "broadcast %d of a root ahead of its peers: got %g", k, value(*bufs[static_cast<size_t>(k)]));
    //    A reduce to rank 0: the other ranks call first and (with a segment) complete before rank 0 calls; it gets
    //    the sum.
    set(static_cast<float>(g_rank + 1));
    put(b, 0.0f);
    if (g_rank != 0) {
        OK(rtReduce(a.d, b.d, 1, RT_FLOAT32, RT_REDUCE_SUM, 0, comm, s));
        if (!shm_off())
            CHECK(rtStreamSynchronize(s) == RT_SUCCESS, "a reduce's other ranks complete before its root calls: %s",
                  rtGetLastErrorMessage());
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) OK(rtReduce(a.d, b.d, 1, RT_FLOAT32, RT_REDUCE_SUM, 0, comm, s));
    OK(rtStreamSynchronize(s));
    if (g_rank == 0) CHECK(value(b) == want, "a reduce whose other ranks called first gave %g, expected %g", value(b), want);
    OK(rtEventDestroy(done));
    OK(rtStreamDestroy(other));
}

/// 2 ranks per process from 2 threads: the collectives and bitwise checks of `collectives` mode, a send/receive
/// between the two ranks of one process too, and rtCommSplit (within a process, across processes, without a color).
void hierarchical() {
    const int processes = g_size, world = g_rank;
    constexpr int kLocal = 2;
    rtCommUniqueId id{};
    if (world == 0) OK(rtCommGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    // Thread `local`'s rank of `id`: its numbers, its device, a stream *s, and its communicator (null if refused).
    // Non-blocking: the other thread's synchronous copies (the legacy default stream of this device, in the
    // in-process reference of `bitwise`) must not wait for this rank's collectives, which wait for that thread.
    auto join_local = [&](int local, rtStream_t* s) {
        g_rank = local * processes + world;
        g_size = kLocal * processes;
        g_device = local;
        OK(rtSetDevice(local));
        *s = nullptr;
        OK(rtStreamCreateWithFlags(s, RT_STREAM_NON_BLOCKING));
        rtComm_t comm = nullptr;
        OK(rtCommInitRank(&comm, g_size, id, g_rank));
        return comm;
    };
    auto rank_main = [&](int local) {
        rtStream_t s = nullptr;
        rtComm_t comm = join_local(local, &s);
        if (!comm) return;
        int count = 0, rank = -1;
        OK(rtCommCount(comm, &count));
        OK(rtCommUserRank(comm, &rank));
        CHECK(count == g_size && rank == g_rank, "count %d rank %d", count, rank);
        // One segment per process (its leader takes part for both ranks), unless RUNTIME_COMM_SHM=0.
        const int segments = shared_segments();
        CHECK(segments == (shm_off() ? 0 : 1), "shared segments mapped: %d (RUNTIME_COMM_SHM=%s)", segments,
              shm_off() ? "0" : "unset");
        collectives(comm, s, {RT_INT32, RT_FLOAT16, RT_BFLOAT16, RT_FLOAT32}, {RT_REDUCE_SUM, RT_REDUCE_MAX, RT_REDUCE_AVG},
                    {1, processes});
        bitwise(comm, s);
        // rtCommSplit: new communicators within a process (an in-process clique), one rank per process, several per
        // process, and without a color. Each checks its size and rank, and works (the sum of 1 and of the new ranks).
        const int local_index = g_rank / processes;
        auto split = [&](int color, int key, int want_count, int want_rank, const char* what) {
            rtComm_t part = nullptr;
            OK(rtCommSplit(comm, color, key, &part));
            if (want_count == 0) {
                CHECK(part == nullptr, "%s: no color gives no communicator", what);
                return;
            }
            if (!part) {
                CHECK(false, "%s: no communicator", what);
                return;
            }
            int n = 0, r = -1;
            OK(rtCommCount(part, &n));
            OK(rtCommUserRank(part, &r));
            CHECK(n == want_count && r == want_rank, "%s: count %d rank %d (expected %d, %d)", what, n, r, want_count,
                  want_rank);
            float v[2] = {1.0f, static_cast<float>(r)};
            Buf b(sizeof v);
            b.load(std::vector<char>(reinterpret_cast<char*>(v), reinterpret_cast<char*>(v) + sizeof v));
            OK(rtAllReduce(b.d, b.d, 2, RT_FLOAT32, RT_REDUCE_SUM, part, s));
            OK(rtStreamSynchronize(s));
            const std::vector<char> out = b.read(sizeof v);
            std::memcpy(v, out.data(), sizeof v);
            CHECK(v[0] == static_cast<float>(n) && v[1] == static_cast<float>(n * (n - 1) / 2),
                  "%s: all_reduce over the split gave %g, %g", what, v[0], v[1]);
            OK(rtCommDestroy(part));
        };
        split(world % 2, g_rank, kLocal, local_index, "by process");                       // each process alone
        split(local_index, -g_rank, processes, processes - 1 - world, "one rank per process");
        split(0, -g_rank, g_size, g_size - 1 - g_rank, "all, keys reversed");               // hierarchical again
        split(local_index == 1 ? RT_COMM_SPLIT_NOCOLOR : 0, 0, local_index == 1 ? 0 : processes, world, "no color");
        OK(rtCommDestroy(comm));
        OK(rtStreamDestroy(s));
    };
    std::vector<std::thread> threads;
    for (int l = 0; l < kLocal; ++l) threads.emplace_back(rank_main, l);
    for (auto& t : threads) t.join();
    threads.clear();

    // A missing local rank: the last rank (a local rank of the last process) never calls the all-reduce. Its process'
    // other rank fails naming it (the local watchdog), and so do the other processes (the notice, or their own
    // timeout naming that process' ranks). RUNTIME_COMM_TIMEOUT is read at creation: 1 s for this communicator.
    MPI_Barrier(MPI_COMM_WORLD);
    setenv("RUNTIME_COMM_TIMEOUT", "1", 1);
    if (world == 0) OK(rtCommGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    auto missing_main = [&](int local) {
        rtStream_t s = nullptr;
        rtComm_t comm = join_local(local, &s);
        if (!comm) return;
        Buf a(sizeof(float));
        if (g_rank != g_size - 1) {
            OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, comm, s));
            const rtError_t e = rtStreamSynchronize(s);
            const char* m = rtGetLastErrorMessage();
            CHECK(e == RT_ERROR_TIMEOUT && contains(m, "rtAllReduce") && contains(m, "3 (RUNTIME_COMM_TIMEOUT)"),
                  "a missing local rank: got %d (%s)", e, m);
        }
        OK(rtCommDestroy(comm));
        OK(rtStreamDestroy(s));
    };
    for (int l = 0; l < kLocal; ++l) threads.emplace_back(missing_main, l);
    for (auto& t : threads) t.join();
    unsetenv("RUNTIME_COMM_TIMEOUT");
}

void faults(rtStream_t s) {
    // RUNTIME_COMM_TIMEOUT is small here (set by the test's environment).
    std::vector<int> pids(static_cast<size_t>(g_size));
    const int pid = static_cast<int>(::getpid());
    MPI_Allgather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, MPI_COMM_WORLD);
    float x = 1.0f;
    Buf a(sizeof x);
    a.load(std::vector<char>(reinterpret_cast<char*>(&x), reinterpret_cast<char*>(&x) + sizeof x));
    {  // a stopped rank: the others fail within the timeout naming it, the operation and its number
        rtComm_t c = make_comm();
        OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, c, s));
        OK(rtStreamSynchronize(s));  // collective #1 works
        if (g_rank == 1) ::raise(SIGSTOP);  // rank 0 wakes it once it has seen the timeout
        if (g_rank != 1) {
            OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, c, s));
            const rtError_t e = rtStreamSynchronize(s);
            const char* m = rtGetLastErrorMessage();
            CHECK(e == RT_ERROR_TIMEOUT, "a stopped peer: got %d (%s)", e, m);
            CHECK(contains(m, "rank 1") && contains(m, "rtAllReduce") && contains(m, "collective #2"),
                  "the timeout names the rank, the operation and its number: %s", m);
            rtError_t async = RT_SUCCESS;
            OK(rtCommGetAsyncError(c, &async));
            CHECK(async == RT_ERROR_TIMEOUT, "rtCommGetAsyncError after the timeout: %d", async);
            // The communicator is dead: later collectives fail at once.
            OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, c, s));
            CHECK(rtStreamSynchronize(s) == RT_ERROR_TIMEOUT, "a later collective on the failed communicator");
            if (g_rank == 0) ::kill(pids[1], SIGCONT);
        } else {
            // Resumed: collective #2 may still complete here (rank 0's part had arrived before it gave up), but
            // rank 0 takes no further part: collective #3 fails (rank 0's notice, or this rank's own timeout).
            OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, c, s));
            const rtError_t e2 = rtStreamSynchronize(s);
            CHECK(e2 == RT_SUCCESS || e2 == RT_ERROR_TIMEOUT, "the resumed rank: got %d (%s)", e2, rtGetLastErrorMessage());
            OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, c, s));
            const rtError_t e3 = rtStreamSynchronize(s);
            CHECK(e3 == RT_ERROR_TIMEOUT, "the resumed rank's next collective: got %d (%s)", e3, rtGetLastErrorMessage());
        }
        OK(rtCommDestroy(c));
    }
    {  // the process stays usable: a new communicator works
        rtComm_t c = make_comm();
        Buf b(sizeof(float));
        b.load(std::vector<char>(reinterpret_cast<char*>(&x), reinterpret_cast<char*>(&x) + sizeof x));
        OK(rtAllReduce(b.d, b.d, 1, RT_FLOAT32, RT_REDUCE_SUM, c, s));
        OK(rtStreamSynchronize(s));
        float y = 0;
        OK(rtMemcpy(&y, b.d, sizeof y, RT_MEMCPY_DEVICE_TO_HOST));
        CHECK(y == static_cast<float>(g_size), "all_reduce after a failure: %g", y);
        OK(rtCommDestroy(c));
    }
    {  // abort: rank 0 aborts while its collective waits for rank 1; rank 1's fails as aborted, not as timed out
        rtComm_t c = make_comm();
        MPI_Barrier(MPI_COMM_WORLD);
        if (g_rank == 0) {
            OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, c, s));
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            OK(rtCommAbort(c));
            const rtError_t e = rtStreamSynchronize(s);
            CHECK(e == RT_ERROR_ILLEGAL_STATE, "abort: got %d (%s)", e, rtGetLastErrorMessage());
        }
        MPI_Barrier(MPI_COMM_WORLD);  // rank 0 has aborted
        if (g_rank != 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the notice has arrived
            OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, c, s));
            const rtError_t e = rtStreamSynchronize(s);
            const char* m = rtGetLastErrorMessage();
            CHECK(e == RT_ERROR_ILLEGAL_STATE && contains(m, "aborted by rank 0"), "peer of an abort: %d (%s)", e, m);
            OK(rtCommDestroy(c));
        }
    }
    {  // mismatched counts fail on every rank, naming both
        rtComm_t c = make_comm();
        Buf b(16);
        OK(rtAllReduce(b.d, b.d, g_rank == 0 ? 2 : 3, RT_FLOAT32, RT_REDUCE_SUM, c, s));
        const rtError_t e = rtStreamSynchronize(s);
        const char* m = rtGetLastErrorMessage();
        CHECK(e == RT_ERROR_INVALID_VALUE && contains(m, "count"), "mismatched counts: %d (%s)", e, m);
        OK(rtCommDestroy(c));
    }
    {  // a mismatched broadcast fails its receivers at once; with a shared segment its root returned before they
       // called (it only writes), and its next collective fails naming the broadcast and both counts
        rtComm_t c = make_comm();
        Buf b(16);
        OK(rtBroadcast(b.d, b.d, g_rank == 0 ? 2 : 3, RT_FLOAT32, 0, c, s));
        rtError_t e = rtStreamSynchronize(s);
        std::string m = rtGetLastErrorMessage();
        // Every rank's rtCommGetAsyncError reports it once the receivers have seen it (the root's from the failure
        // record the receivers left in the segment, with nothing of its own in flight).
        MPI_Barrier(MPI_COMM_WORLD);
        rtError_t async = RT_SUCCESS;
        OK(rtCommGetAsyncError(c, &async));
        const std::string am = rtGetLastErrorMessage();
        CHECK(async == RT_ERROR_INVALID_VALUE && contains(am.c_str(), "passed count 2") &&
                  contains(am.c_str(), "passed count 3"), "rtCommGetAsyncError after a mismatched broadcast: %d (%s)",
              async, am.c_str());
        if (g_rank == 0 && !shm_off()) {
            CHECK(e == RT_SUCCESS, "a broadcast's root does not wait for its peers: %d (%s)", e, m.c_str());
            OK(rtAllReduce(b.d, b.d, 1, RT_FLOAT32, RT_REDUCE_SUM, c, s));
            e = rtStreamSynchronize(s);
            m = rtGetLastErrorMessage();
            CHECK(e == RT_ERROR_INVALID_VALUE && contains(m.c_str(), "rtAllReduce (collective #2 of communicator") &&
                      contains(m.c_str(), "collective #1") && contains(m.c_str(), "passed count 2") &&
                      contains(m.c_str(), "passed count 3"),
                  "the next collective of a mismatched broadcast's root: %d (%s)", e, m.c_str());
        } else {
            CHECK(e == RT_ERROR_INVALID_VALUE && contains(m.c_str(), "rtBroadcast (collective #1 of communicator") &&
                      contains(m.c_str(), "passed count 2") && contains(m.c_str(), "passed count 3"),
                  "mismatched broadcast counts: %d (%s)", e, m.c_str());
        }
        OK(rtCommDestroy(c));
    }
    {  // counts on both sides of the one-round limit (8 B and 32 KiB: the shared segment's two paths, whose headers
       // lie in different places) fail on every rank with the real difference, naming the operation
        rtComm_t c = make_comm();
        Buf b(32768);
        const size_t count = g_rank == 0 ? 2 : 8192;
        OK(rtAllReduce(b.d, b.d, count, RT_FLOAT32, RT_REDUCE_SUM, c, s));
        const rtError_t e = rtStreamSynchronize(s);
        const char* m = rtGetLastErrorMessage();
        CHECK(e == RT_ERROR_INVALID_VALUE && contains(m, "passed count 2") && contains(m, "passed count 8192") &&
                  contains(m, "rtAllReduce (collective #1 of communicator"),
              "counts across the one-round limit: %d (%s)", e, m);
        OK(rtCommDestroy(c));
    }
    {  // bad input: rank out of range (refused at once), nranks that differ between ranks (refused on every rank)
        rtCommUniqueId id{};
        if (g_rank == 0) OK(rtCommGetUniqueId(&id));
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
        rtComm_t c = nullptr;
        CHECK(rtCommInitRank(&c, g_size, id, g_size) == RT_ERROR_INVALID_VALUE, "rank out of range");
        CHECK(contains(rtGetLastErrorMessage(), "out of range"), "%s", rtGetLastErrorMessage());
        if (g_rank == 0) OK(rtCommGetUniqueId(&id));
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
        const rtError_t e = rtCommInitRank(&c, g_rank == 0 ? g_size : g_size + 1, id, g_rank);
        CHECK(e == RT_ERROR_INVALID_VALUE && contains(rtGetLastErrorMessage(), "nranks"), "nranks mismatch: %d (%s)", e,
              rtGetLastErrorMessage());
    }
    {  // RUNTIME_COMM_SHM other than 0 or 1: refused on every rank (read before the bootstrap), naming the variable
        const char* old = std::getenv("RUNTIME_COMM_SHM");
        const std::string saved = old ? old : "";
        setenv("RUNTIME_COMM_SHM", "yes please", 1);
        rtCommUniqueId id{};
        if (g_rank == 0) OK(rtCommGetUniqueId(&id));
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
        rtComm_t c = nullptr;
        const rtError_t e = rtCommInitRank(&c, g_size, id, g_rank);
        CHECK(e == RT_ERROR_INVALID_VALUE && contains(rtGetLastErrorMessage(), "RUNTIME_COMM_SHM"),
              "RUNTIME_COMM_SHM=\"yes please\": %d (%s)", e, rtGetLastErrorMessage());
        if (old) setenv("RUNTIME_COMM_SHM", saved.c_str(), 1);
        else unsetenv("RUNTIME_COMM_SHM");
    }
    {  // split: even and odd ranks
        rtComm_t c = make_comm(), half = nullptr;
        OK(rtCommSplit(c, g_rank % 2, -g_rank, &half));
        int count = 0, rank = -1;
        OK(rtCommCount(half, &count));
        OK(rtCommUserRank(half, &rank));
        CHECK(count == (g_size + 1 - g_rank % 2) / 2, "split count %d", count);
        Buf b(sizeof(float));
        b.load(std::vector<char>(reinterpret_cast<char*>(&x), reinterpret_cast<char*>(&x) + sizeof x));
        OK(rtAllReduce(b.d, b.d, 1, RT_FLOAT32, RT_REDUCE_SUM, half, s));
        OK(rtStreamSynchronize(s));
        float y = 0;
        OK(rtMemcpy(&y, b.d, sizeof y, RT_MEMCPY_DEVICE_TO_HOST));
        CHECK(y == static_cast<float>(count), "all_reduce over the split: %g", y);
        CHECK(rank == count - 1 - g_rank / 2, "split rank %d (keys order the ranks)", rank);
        OK(rtCommDestroy(half));
        OK(rtCommDestroy(c));
    }
}

/// A rank killed (SIGKILL) after the communicator worked: the survivors' next collective fails within
/// RUNTIME_COMM_TIMEOUT naming the dead rank, the operation and its number, and the runtime stays usable. Open MPI
/// (without ULFM) cannot finalize beside a dead process, so each survivor prints its verdict and leaves with _exit;
/// CTest reads the verdict (mpirun's own status reports the killed process).
[[noreturn]] void killed(rtStream_t s) {
    float x = 1.0f;
    Buf a(sizeof x);
    a.load(std::vector<char>(reinterpret_cast<char*>(&x), reinterpret_cast<char*>(&x) + sizeof x));
    rtComm_t c = make_comm();
    OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, c, s));
    OK(rtStreamSynchronize(s));
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 1) ::raise(SIGKILL);
    OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, c, s));
    const rtError_t e = rtStreamSynchronize(s);
    const std::string m = rtGetLastErrorMessage();
    CHECK(e == RT_ERROR_TIMEOUT && contains(m.c_str(), "rank 1") && contains(m.c_str(), "rtAllReduce") &&
              contains(m.c_str(), "collective #2"),
          "a killed peer: got %d (%s)", e, m.c_str());
    rtError_t async = RT_SUCCESS;
    OK(rtCommGetAsyncError(c, &async));
    CHECK(async == RT_ERROR_TIMEOUT, "rtCommGetAsyncError after the timeout: %d", async);
    OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, c, s));  // refused by the failed communicator, not hung
    CHECK(rtStreamSynchronize(s) == RT_ERROR_TIMEOUT, "a later collective on the failed communicator");
    OK(rtCommAbort(c));
    // Still usable: a communicator over this process' own devices works.
    rtComm_t local = nullptr;
    const int device = 0;
    OK(rtCommInitAll(&local, 1, &device));
    float y = 3.0f;
    a.load(std::vector<char>(reinterpret_cast<char*>(&y), reinterpret_cast<char*>(&y) + sizeof y));
    OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, local, s));
    OK(rtStreamSynchronize(s));
    const std::vector<char> out = a.read(sizeof y);
    std::memcpy(&y, out.data(), sizeof y);
    CHECK(y == 3.0f, "a collective after the failure: %g", y);
    OK(rtCommDestroy(local));
    std::printf("test_comm_mpi killed, rank %d: %s\n", g_rank, g_failures.load() ? "FAILED" : "ok");
    std::fflush(stdout);
    ::_exit(g_failures.load() ? 1 : 0);
}

/// The program finalizes MPI while rank 0's all-reduce waits for rank 1 (which never calls it): MPI_Finalize fails it
/// (its stream's synchronize reports it, not hangs), and afterwards the runtime refuses what would need MPI. Each rank
/// prints its verdict (MPI cannot gather them any more); the exit code says.
int finalize_pending(rtStream_t s) {
    rtComm_t c = make_comm();
    Buf a(sizeof(float));
    if (g_rank == 0) OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, c, s));
    MPI_Finalize();
    if (g_rank == 0) {
        const rtError_t e = rtStreamSynchronize(s);
        const char* m = rtGetLastErrorMessage();
        CHECK(e == RT_ERROR_NOT_SUPPORTED && contains(m, "rtAllReduce") && contains(m, "MPI_Finalize"),
              "a collective in flight at MPI_Finalize: %d (%s)", e, m);
    }
    OK(rtAllReduce(a.d, a.d, 1, RT_FLOAT32, RT_REDUCE_SUM, c, s));
    const rtError_t e = rtStreamSynchronize(s);
    CHECK(e == RT_ERROR_NOT_SUPPORTED && contains(rtGetLastErrorMessage(), "MPI_Finalize"),
          "a collective after MPI_Finalize: %d (%s)", e, rtGetLastErrorMessage());
    rtCommUniqueId id{};
    CHECK(rtCommGetUniqueId(&id) == RT_ERROR_NOT_SUPPORTED && contains(rtGetLastErrorMessage(), "MPI_Finalize"),
          "rtCommGetUniqueId after MPI_Finalize: %s", rtGetLastErrorMessage());
    OK(rtCommDestroy(c));
    OK(rtStreamDestroy(s));
    std::printf("test_comm_mpi finalize, rank %d: %s\n", g_rank, g_failures.load() ? "FAILED" : "ok");
    return g_failures.load() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    const std::string mode = argc > 1 ? argv[1] : "collectives";
    OK(rtSetDevice(0));
    rtStream_t s = nullptr;
    OK(rtStreamCreate(&s));
    if (mode == "finalize") return finalize_pending(s);
    if (mode == "collectives") {
        rtComm_t comm = make_comm();
        int count = 0, rank = -1;
        OK(rtCommCount(comm, &count));
        OK(rtCommUserRank(comm, &rank));
        CHECK(count == g_size && rank == g_rank, "count %d rank %d", count, rank);
        // Every rank is on this host: the collectives go through a shared segment, unless RUNTIME_COMM_SHM=0.
        const int segments = shared_segments();
        CHECK(segments == (shm_off() ? 0 : 1), "shared segments mapped: %d (RUNTIME_COMM_SHM=%s)", segments,
              shm_off() ? "0" : "unset");
        collectives(comm, s, std::vector<rtDataType>(std::begin(kTypes), std::end(kTypes)),
                    std::vector<rtReduceOp>(std::begin(kOps), std::end(kOps)), {1});
        bitwise(comm, s);
        started_at_call(comm, s);
        OK(rtCommDestroy(comm));
    } else if (mode == "faults") {
        faults(s);
    } else if (mode == "hierarchical") {
        hierarchical();
    } else if (mode == "killed") {
        killed(s);
    }
    rtStreamDestroy(s);
    int total = 0, mine = g_failures.load();
    MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) std::printf("test_comm_mpi %s on %d processes: %s (%d failed checks)\n", mode.c_str(), g_size, total ? "FAILED" : "ok", total);
    MPI_Finalize();
    return total ? 1 : 0;
}
