// fake_nccl.cpp — a test double of libnccl.so.2 (RUNTIME_NCCL_LIB): NCCL's entry points with its C ABI, recording
// every call and its arguments as one text line, moving no data. Tests read the record through fake_nccl_log() and
// make a named call fail with fake_nccl_fail().
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

namespace {
std::mutex g_mutex;
std::string g_log;
std::string g_fail_call;  // the next call of this name returns g_fail_result
int g_fail_result = 0;
int g_async = 0;          // what ncclCommGetAsyncError reports
int g_next_comm = 0;

struct FakeComm {
    int rank;
    int nranks;
    int device;
    int world;  // the communicator its ranks share (ncclCommInitAll's, or a split's); -1: ncclCommInitRank's (unknown)
};
FakeComm g_comms[64];
int g_next_world = 0;

/// ncclCommSplit's calls of one parent communicator, until all its ranks have called (then each gets its new one).
struct SplitCall {
    FakeComm* parent;
    int color, key;
    void** out;
};
std::vector<SplitCall> g_splits;

void record(const char* fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    std::lock_guard lock(g_mutex);
    g_log += line;
    g_log += '\n';
}

/// The result of call `name`: the failure armed for it (once), else success.
int result_of(const char* name) {
    std::lock_guard lock(g_mutex);
    if (g_fail_call == name) {
        g_fail_call.clear();
        return g_fail_result;
    }
    return 0;
}

FakeComm* new_comm_locked(int rank, int nranks, int device, int world) {
    FakeComm* c = &g_comms[g_next_comm++ % 64];
    *c = {rank, nranks, device, world};
    return c;
}
FakeComm* new_comm(int rank, int nranks, int device, int world) {
    std::lock_guard lock(g_mutex);
    return new_comm_locked(rank, nranks, device, world);
}

int rank_of(void* comm) { return comm ? static_cast<FakeComm*>(comm)->rank : -1; }
}  // namespace

extern "C" {

// ---- the test's side
const char* fake_nccl_log() {
    static thread_local std::string copy;
    std::lock_guard lock(g_mutex);
    copy = g_log;
    return copy.c_str();
}
void fake_nccl_reset() {
    std::lock_guard lock(g_mutex);
    g_log.clear();
    g_fail_call.clear();
    g_async = 0;
}
void fake_nccl_fail(const char* call, int result) {
    std::lock_guard lock(g_mutex);
    g_fail_call = call;
    g_fail_result = result;
}
void fake_nccl_set_async_error(int result) {
    std::lock_guard lock(g_mutex);
    g_async = result;
}

// ---- NCCL's API (nccl.h's signatures; types as their C ABI: enums are int, streams and comms pointers)
struct FakeUniqueId {
    char internal[128];
};

const char* ncclGetErrorString(int r) {
    switch (r) {
        case 0: return "no error";
        case 2: return "unhandled system error (fake)";
        case 4: return "invalid argument (fake)";
        default: return "some NCCL error (fake)";
    }
}
const char* ncclGetLastError(void*) { return "the fake's last error"; }
int ncclGetVersion(int* v) {
    *v = 22005;
    return 0;
}
int ncclGetUniqueId(FakeUniqueId* id) {
    std::memset(id->internal, 0, sizeof id->internal);
    std::memcpy(id->internal, "fake-nccl-id", 12);
    record("ncclGetUniqueId");
    return result_of("ncclGetUniqueId");
}
int ncclCommInitRank(void** comm, int nranks, FakeUniqueId id, int rank) {
    record("ncclCommInitRank nranks=%d rank=%d id=%.12s", nranks, rank, id.internal);
    if (int r = result_of("ncclCommInitRank")) return r;
    *comm = new_comm(rank, nranks, -1, -1);
    return 0;
}
int ncclCommInitAll(void** comms, int ndev, const int* devlist) {
    std::string list;
    for (int i = 0; i < ndev; ++i) {
        if (i) list += ',';
        list += std::to_string(devlist[i]);
    }
    record("ncclCommInitAll ndev=%d devlist=%s", ndev, list.c_str());
    if (int r = result_of("ncclCommInitAll")) return r;
    int world;
    {
        std::lock_guard lock(g_mutex);
        world = g_next_world++;
    }
    for (int i = 0; i < ndev; ++i) comms[i] = new_comm(i, ndev, devlist[i], world);
    return 0;
}
int ncclCommDestroy(void* comm) {
    record("ncclCommDestroy rank=%d", rank_of(comm));
    return 0;
}
int ncclCommAbort(void* comm) {
    record("ncclCommAbort rank=%d", rank_of(comm));
    return 0;
}
int ncclCommCount(void* comm, int* count) {
    *count = static_cast<FakeComm*>(comm)->nranks;
    return 0;
}
int ncclCommUserRank(void* comm, int* rank) {
    *rank = static_cast<FakeComm*>(comm)->rank;
    return 0;
}
/// NCCL's split, resolved when the last rank of the parent calls (NCCL's own blocks until then outside a group): per
/// color (-1: none), the ranks ordered by (key, parent rank). Splits of ncclCommInitRank's communicators never resolve.
int ncclCommSplit(void* comm, int color, int key, void** newcomm, void* config) {
    auto* parent = static_cast<FakeComm*>(comm);
    record("ncclCommSplit rank=%d color=%d key=%d config=%p", rank_of(comm), color, key, config);
    if (int r = result_of("ncclCommSplit")) return r;
    std::lock_guard lock(g_mutex);
    *newcomm = nullptr;
    g_splits.push_back({parent, color, key, newcomm});
    std::vector<SplitCall> mine;
    for (const SplitCall& s : g_splits)
        if (parent->world >= 0 && s.parent->world == parent->world) mine.push_back(s);
    if (static_cast<int>(mine.size()) < parent->nranks) return 0;
    g_splits.erase(std::remove_if(g_splits.begin(), g_splits.end(),
                                  [&](const SplitCall& s) { return s.parent->world == parent->world; }),
                   g_splits.end());
    std::stable_sort(mine.begin(), mine.end(), [](const SplitCall& a, const SplitCall& b) {
        return a.key != b.key ? a.key < b.key : a.parent->rank < b.parent->rank;
    });
    for (const SplitCall& s : mine) {
        if (s.color < 0 || *s.out) continue;
        const int world = g_next_world++;
        int n = 0;
        for (const SplitCall& t : mine) n += t.color == s.color;
        int i = 0;
        for (const SplitCall& t : mine)
            if (t.color == s.color) *t.out = new_comm_locked(i++, n, t.parent->device, world);
    }
    return 0;
}
int ncclCommGetAsyncError(void* comm, int* async) {
    std::lock_guard lock(g_mutex);
    (void)comm;
    *async = g_async;
    return 0;
}
int ncclAllReduce(const void* s, void* r, size_t n, int t, int op, void* comm, void* stream) {
    record("ncclAllReduce send=%p recv=%p count=%zu type=%d op=%d rank=%d stream=%p", s, r, n, t, op, rank_of(comm), stream);
    return result_of("ncclAllReduce");
}
int ncclBroadcast(const void* s, void* r, size_t n, int t, int root, void* comm, void* stream) {
    record("ncclBroadcast send=%p recv=%p count=%zu type=%d root=%d rank=%d stream=%p", s, r, n, t, root, rank_of(comm),
           stream);
    return result_of("ncclBroadcast");
}
int ncclReduce(const void* s, void* r, size_t n, int t, int op, int root, void* comm, void* stream) {
    record("ncclReduce send=%p recv=%p count=%zu type=%d op=%d root=%d rank=%d stream=%p", s, r, n, t, op, root,
           rank_of(comm), stream);
    return result_of("ncclReduce");
}
int ncclAllGather(const void* s, void* r, size_t n, int t, void* comm, void* stream) {
    record("ncclAllGather send=%p recv=%p count=%zu type=%d rank=%d stream=%p", s, r, n, t, rank_of(comm), stream);
    return result_of("ncclAllGather");
}
int ncclReduceScatter(const void* s, void* r, size_t n, int t, int op, void* comm, void* stream) {
    record("ncclReduceScatter send=%p recv=%p count=%zu type=%d op=%d rank=%d stream=%p", s, r, n, t, op, rank_of(comm),
           stream);
    return result_of("ncclReduceScatter");
}
int ncclSend(const void* s, size_t n, int t, int peer, void* comm, void* stream) {
    record("ncclSend send=%p count=%zu type=%d peer=%d rank=%d stream=%p", s, n, t, peer, rank_of(comm), stream);
    return result_of("ncclSend");
}
int ncclRecv(void* r, size_t n, int t, int peer, void* comm, void* stream) {
    record("ncclRecv recv=%p count=%zu type=%d peer=%d rank=%d stream=%p", r, n, t, peer, rank_of(comm), stream);
    return result_of("ncclRecv");
}
int ncclGroupStart() {
    record("ncclGroupStart");
    return result_of("ncclGroupStart");
}
int ncclGroupEnd() {
    record("ncclGroupEnd");
    return result_of("ncclGroupEnd");
}

}  // extern "C"
