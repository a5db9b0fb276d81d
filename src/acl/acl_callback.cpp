// acl_callback.cpp — callbacks run by report threads (aclrtSubscribeReport, aclrtLaunchCallback, aclrtProcessReport,
// aclrtUnSubscribeReport), aclrtLaunchHostFunc, and the per-stream subscription table.
//
// The launch path (aclrtLaunchCallback) takes no lock: the stream's subscription is found in a fixed open-addressing
// table read with atomic loads, the callback's record comes from a pool (a lock-free stack of indices that each
// launching thread takes from in bounded batches), and rtLaunchHostFunc queues a trampoline. When the stream gets
// there, the trampoline (on a runtime thread) hands the record to the report thread's queue and, for
// ACL_CALLBACK_BLOCK, waits until the callback has returned: the stream's later work waits behind it. That wait holds
// a runtime thread (the runtime has no operation that makes a stream wait for a signal given later from outside);
// aclFinalize ends it (acl_rt.h, docs/ascendcl.md).
//
// A callback launched on a capturing stream (the stream that began an aclmdlRICaptureBegin capture or one that joined
// it; captures begun with the runtime's own rtStreamBeginCapture are not AscendCL's and are not looked for) belongs to
// the capture's graph: its description is released by the runtime when the graph and its executable graphs are gone
// (rtStreamDeferRelease), and each replay runs it with a record of its own taken from the pool.
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "acl/acl.h"
#include "acl_internal.hpp"

namespace acl {

struct CallbackRecord;

struct ReportQueue {
    uint64_t thread_id = 0;
    std::mutex mutex;
    std::condition_variable arrived;  // a record was queued (or the queue closed)
    std::condition_variable ran;      // a blocking callback returned (or the queue closed)
    std::deque<CallbackRecord*> items;
    bool closed = false;
    std::atomic<int> streams{0};  // streams subscribed to the thread (changed under g_table_mutex)
};

/// Where a record is between its trampoline and its report thread (guarded by its queue's mutex). A NO_BLOCK record
/// belongs to the queue once queued and is released by whoever takes it out; a BLOCK record is released by its
/// trampoline once kDone, or by the report thread when the trampoline gave up waiting (kAbandoned, at aclFinalize).
enum class RecordState : uint8_t { kQueued, kTaken, kDone, kAbandoned };

struct CallbackRecord {
    aclrtCallback fn = nullptr;
    void* user_data = nullptr;
    ReportQueue* queue = nullptr;
    bool block = false;
    RecordState state = RecordState::kQueued;
    uint64_t session = 0;           // the aclInit session it was taken from the pool in
    uint32_t index1 = 0;            // its own index + 1 in the pool
    std::atomic<uint32_t> next{0};  // pool link: index + 1 of the next free record, 0 at the end
};

/// A callback captured into a model: what every replay runs. Owned by the capture's graph (rtStreamDeferRelease).
struct CapturedCallback {
    aclrtCallback fn;
    void* user_data;
    ReportQueue* queue;
    bool block;
};

namespace {

// ---- the record pool: chunks of records addressed by index + 1, never freed (a record's memory stays valid for the
// lock-free stack's readers); a chunk is added when the pool runs dry.

constexpr uint32_t kChunk = 1024;
constexpr uint32_t kMaxChunks = 4096;  // at most 4M callbacks in flight at once
constexpr uint32_t kBatch = 32;        // records a thread takes from the shared stack at once
std::atomic<CallbackRecord*> g_chunks[kMaxChunks];
std::atomic<uint32_t> g_chunk_count{0};
std::mutex g_pool_mutex;  // serialises growth, the relinking at aclInit and returns of exiting threads' caches
// Head of the free stack: tag (high 32 bits, bumped by every change: no ABA) | index + 1 (0: empty).
std::atomic<uint64_t> g_free_head{0};
std::atomic<uint64_t> g_session{0};  // bumped by every aclInit, which relinks the whole pool

inline CallbackRecord& record_at(uint32_t index1) noexcept {
    const uint32_t i = index1 - 1;
    return g_chunks[i / kChunk].load(std::memory_order_acquire)[i % kChunk];
}

/// Pushes the list first .. last (linked through next) onto the shared stack.
void push_list(uint32_t first, uint32_t last) noexcept {
    uint64_t head = g_free_head.load(std::memory_order_relaxed);
    for (;;) {
        record_at(last).next.store(static_cast<uint32_t>(head), std::memory_order_relaxed);
        const uint64_t replacement = ((head >> 32) + 1) << 32 | first;
        if (g_free_head.compare_exchange_weak(head, replacement, std::memory_order_release, std::memory_order_relaxed))
            return;
    }
}

/// Pops one record's index + 1 from the shared stack (0: empty). A popped record's next may be read after another
/// thread took it: the tag makes that CAS fail, and the memory is never freed.
uint32_t pop_shared() noexcept {
    uint64_t head = g_free_head.load(std::memory_order_acquire);
    for (;;) {
        const uint32_t index1 = static_cast<uint32_t>(head);
        if (index1 == 0) return 0;
        const uint32_t next = record_at(index1).next.load(std::memory_order_relaxed);
        if (g_free_head.compare_exchange_weak(head, ((head >> 32) + 1) << 32 | next, std::memory_order_acq_rel,
                                              std::memory_order_acquire))
            return index1;
    }
}

/// Links the records of chunk `c` into one list and pushes it (g_pool_mutex held).
void push_chunk_locked(uint32_t c) noexcept {
    CallbackRecord* base = g_chunks[c].load(std::memory_order_relaxed);
    const uint32_t first = c * kChunk + 1;
    for (uint32_t i = 0; i + 1 < kChunk; ++i) base[i].next.store(first + i + 1, std::memory_order_relaxed);
    push_list(first, first + kChunk - 1);
}

/// Adds a chunk to the pool; false when the pool is at its bound or out of memory.
bool grow() noexcept {
    std::lock_guard lock(g_pool_mutex);
    if (g_free_head.load(std::memory_order_acquire) & 0xFFFFFFFFu) return true;  // another thread refilled it
    const uint32_t c = g_chunk_count.load(std::memory_order_relaxed);
    if (c == kMaxChunks) return false;
    auto* chunk = new (std::nothrow) CallbackRecord[kChunk];
    if (chunk == nullptr) return false;
    for (uint32_t i = 0; i < kChunk; ++i) chunk[i].index1 = c * kChunk + i + 1;
    g_chunks[c].store(chunk, std::memory_order_release);
    g_chunk_count.store(c + 1, std::memory_order_release);
    push_chunk_locked(c);
    return true;
}

/// The calling thread's records taken from the shared stack: launching pops from here without an atomic operation.
/// Returned to the shared stack when the thread exits (unless an aclInit has relinked the pool since).
struct ThreadCache {
    uint32_t head = 0;  // index + 1 of the first cached record, 0: empty
    uint64_t session = 0;
    ~ThreadCache() {
        if (head == 0) return;
        std::lock_guard lock(g_pool_mutex);
        if (session != g_session.load(std::memory_order_relaxed)) return;
        uint32_t last = head;
        while (uint32_t n = record_at(last).next.load(std::memory_order_relaxed)) last = n;
        push_list(head, last);
    }
};
thread_local ThreadCache t_cache;

CallbackRecord* acquire_record() noexcept {
    ThreadCache& cache = t_cache;
    const uint64_t session = g_session.load(std::memory_order_relaxed);
    if (cache.head == 0 || cache.session != session) [[unlikely]] {
        cache.session = session;
        cache.head = 0;
        uint32_t last = 0;
        for (int attempt = 0; attempt < 2 && cache.head == 0; ++attempt) {
            for (uint32_t n = 0; n < kBatch; ++n) {
                const uint32_t index1 = pop_shared();
                if (index1 == 0) break;
                record_at(index1).next.store(0, std::memory_order_relaxed);
                if (last == 0) cache.head = index1;
                else record_at(last).next.store(index1, std::memory_order_relaxed);
                last = index1;
            }
            if (cache.head == 0 && !grow()) return nullptr;
        }
        if (cache.head == 0) return nullptr;
    }
    CallbackRecord* r = &record_at(cache.head);
    cache.head = r->next.load(std::memory_order_relaxed);
    r->session = session;
    return r;
}

void release_record(CallbackRecord* r) noexcept {
    // A record of an earlier session is free already: aclInit relinked the whole pool.
    if (r->session != g_session.load(std::memory_order_relaxed)) return;
    r->next.store(0, std::memory_order_relaxed);
    push_list(r->index1, r->index1);
}

// ---- the per-stream table: key = the stream handle's value (0 empty, 1 a removed entry)

constexpr size_t kTableSize = 4096;  // a power of two
constexpr uintptr_t kEmpty = 0, kRemoved = 1;

struct StreamEntry {
    std::atomic<uintptr_t> key{kEmpty};
    std::atomic<ReportQueue*> queue{nullptr};  // the subscribed thread's queue
};
StreamEntry g_table[kTableSize];
std::mutex g_table_mutex;  // serialises writers; readers take no lock

inline size_t slot_of(uintptr_t key) noexcept {
    uint64_t h = static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(h >> 52) & (kTableSize - 1);
}

StreamEntry* find_entry(aclrtStream stream) noexcept {
    const uintptr_t key = reinterpret_cast<uintptr_t>(stream);
    size_t i = slot_of(key);
    for (size_t n = 0; n < kTableSize; ++n, i = (i + 1) & (kTableSize - 1)) {
        const uintptr_t k = g_table[i].key.load(std::memory_order_acquire);
        if (k == key) return &g_table[i];
        if (k == kEmpty) return nullptr;
    }
    return nullptr;
}

/// The entry of `stream`, made if missing (g_table_mutex held); nullptr when the table is full.
StreamEntry* find_or_add_entry_locked(aclrtStream stream) noexcept {
    if (StreamEntry* e = find_entry(stream)) return e;
    const uintptr_t key = reinterpret_cast<uintptr_t>(stream);
    size_t i = slot_of(key);
    for (size_t n = 0; n < kTableSize; ++n, i = (i + 1) & (kTableSize - 1)) {
        const uintptr_t k = g_table[i].key.load(std::memory_order_relaxed);
        if (k == kEmpty || k == kRemoved) {
            g_table[i].queue.store(nullptr, std::memory_order_relaxed);
            g_table[i].key.store(key, std::memory_order_release);
            return &g_table[i];
        }
    }
    return nullptr;
}


// ---- report queues, one per subscribed thread; kept until aclFinalize (records in flight point at them)

std::mutex g_queues_mutex;
std::unordered_map<uint64_t, std::unique_ptr<ReportQueue>> g_queues;
// Queues of earlier sessions: a report thread may still be inside aclrtProcessReport on one when aclFinalize runs (it
// wakes, finds the queue closed and returns), so they are never freed. A few per aclInit/aclFinalize cycle.
std::vector<std::unique_ptr<ReportQueue>> g_closed_queues;
inline uint64_t this_thread_id() noexcept { return static_cast<uint64_t>(pthread_self()); }

/// Hands `r` to its report thread and, for a BLOCK callback, waits until it has returned or aclFinalize closed the
/// queue. Runs on a runtime thread when the stream reaches the callback.
void deliver(CallbackRecord* r) noexcept {
    ReportQueue* q = r->queue;
    const bool block = r->block;
    std::unique_lock lock(q->mutex);
    if (q->closed) {
        lock.unlock();
        release_record(r);
        return;
    }
    r->state = RecordState::kQueued;
    try {
        q->items.push_back(r);
    } catch (...) {
        lock.unlock();
        release_record(r);
        rtHostFuncSetError(RT_ERROR_OUT_OF_MEMORY, "aclrtLaunchCallback: out of host memory to queue the callback");
        return;
    }
    lock.unlock();
    q->arrived.notify_one();
    if (!block) return;  // the queue owns it now
    lock.lock();
    q->ran.wait(lock, [&] { return r->state == RecordState::kDone || q->closed; });
    switch (r->state) {
    case RecordState::kDone: break;
    case RecordState::kQueued:  // closed before a report thread took it: it never runs
        q->items.erase(std::find(q->items.begin(), q->items.end(), r));
        break;
    default:  // closed while its callback runs: the report thread releases it when the callback returns
        r->state = RecordState::kAbandoned;
        return;
    }
    lock.unlock();
    release_record(r);
}

void trampoline(void* user_data) { deliver(static_cast<CallbackRecord*>(user_data)); }

/// A replay of a captured callback: a record of its own for this run.
void captured_trampoline(void* user_data) {
    const auto* c = static_cast<const CapturedCallback*>(user_data);
    CallbackRecord* r = acquire_record();
    if (r == nullptr) {
        rtHostFuncSetError(RT_ERROR_OUT_OF_MEMORY, "aclrtLaunchCallback: out of host memory for a captured callback");
        return;
    }
    r->fn = c->fn;
    r->user_data = c->user_data;
    r->queue = c->queue;
    r->block = c->block;
    deliver(r);
}

void delete_captured(void* user_data) { delete static_cast<CapturedCallback*>(user_data); }

}  // namespace

void init_callbacks() noexcept {
    // Every record is free before aclInit (aclFinalize has drained every stream): relink them all into one stack.
    std::lock_guard lock(g_pool_mutex);
    g_session.fetch_add(1, std::memory_order_relaxed);
    g_free_head.store(((g_free_head.load(std::memory_order_relaxed) >> 32) + 1) << 32, std::memory_order_release);
    const uint32_t n = g_chunk_count.load(std::memory_order_relaxed);
    for (uint32_t c = 0; c < n; ++c) push_chunk_locked(c);
}

void forget_stream(aclrtStream stream) noexcept {
    std::lock_guard lock(g_table_mutex);
    if (StreamEntry* e = find_entry(stream)) {
        if (ReportQueue* q = e->queue.load(std::memory_order_relaxed)) q->streams.fetch_sub(1);
        e->queue.store(nullptr, std::memory_order_release);
        e->key.store(kRemoved, std::memory_order_release);
    }
}

void close_report_queues() noexcept {
    std::lock_guard lock(g_queues_mutex);
    for (auto& [id, q] : g_queues) {
        {
            std::lock_guard ql(q->mutex);
            q->closed = true;
        }
        q->arrived.notify_all();
        q->ran.notify_all();
    }
}

void reopen_report_queues() noexcept {
    std::lock_guard lock(g_queues_mutex);
    for (auto& [id, q] : g_queues) {
        std::lock_guard ql(q->mutex);
        q->closed = false;
    }
}

void reset_callbacks() noexcept {
    {
        std::lock_guard lock(g_table_mutex);
        for (auto& e : g_table) {
            e.queue.store(nullptr, std::memory_order_relaxed);
            e.key.store(kEmpty, std::memory_order_release);
        }
    }
    std::lock_guard lock(g_queues_mutex);
    for (auto& [id, q] : g_queues) {
        std::lock_guard ql(q->mutex);
        // Only NO_BLOCK records are left: a BLOCK record's trampoline took it out when the queue closed.
        for (CallbackRecord* r : q->items) release_record(r);
        q->items.clear();
        try {
            g_closed_queues.push_back(std::move(q));
        } catch (...) {
            q.release();  // kept alive all the same
        }
    }
    g_queues.clear();
}

}  // namespace acl

using acl::CallbackRecord;
using acl::ReportQueue;

extern "C" {

aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream) {
    const char* api = "aclrtSubscribeReport";
    ACL_REQUIRE_INIT(api);
    if (stream == nullptr)
        return acl::fail(ACL_ERROR_INVALID_PARAM, api, "stream is NULL: subscribe a stream made by aclrtCreateStream");
    if (aclError e = acl::check_stream(stream, api); e != ACL_SUCCESS) return e;
    ReportQueue* q = nullptr;
    {
        std::lock_guard lock(acl::g_queues_mutex);
        auto& slot = acl::g_queues[threadId];
        if (!slot) {
            slot.reset(new (std::nothrow) ReportQueue);
            if (!slot) return acl::fail(ACL_ERROR_BAD_ALLOC, api, "out of host memory for a report queue");
            slot->thread_id = threadId;
        }
        q = slot.get();
    }
    std::lock_guard lock(acl::g_table_mutex);
    acl::StreamEntry* e = acl::find_or_add_entry_locked(stream);
    if (e == nullptr)
        return acl::fail(ACL_ERROR_RT_OVER_LIMIT, api, "too many streams subscribed or capturing at once (%zu)",
                         acl::kTableSize);
    ReportQueue* bound = e->queue.load(std::memory_order_relaxed);
    if (bound != nullptr) {
        return acl::fail(ACL_ERROR_RT_STREAM_SUBSCRIBE, api, "stream %p is subscribed already, by thread %llu "
                         "(aclrtUnSubscribeReport first)", stream, static_cast<unsigned long long>(bound->thread_id));
    }
    e->queue.store(q, std::memory_order_release);
    q->streams.fetch_add(1);
    return ACL_SUCCESS;
}

aclError aclrtLaunchCallback(aclrtCallback fn, void* userData, aclrtCallbackBlockType blockType, aclrtStream stream) {
    ACL_REQUIRE_INIT("aclrtLaunchCallback");
    if (fn == nullptr) [[unlikely]]
        return acl::fail(ACL_ERROR_INVALID_PARAM, "aclrtLaunchCallback", "fn is NULL");
    const int block = acl::enum_value(blockType);
    if (block != ACL_CALLBACK_NO_BLOCK && block != ACL_CALLBACK_BLOCK) [[unlikely]]
        return acl::fail(ACL_ERROR_INVALID_PARAM, "aclrtLaunchCallback", "blockType %d is neither "
                         "ACL_CALLBACK_NO_BLOCK (0) nor ACL_CALLBACK_BLOCK (1)", block);
    acl::StreamEntry* entry = acl::find_entry(stream);
    ReportQueue* q = entry != nullptr ? entry->queue.load(std::memory_order_acquire) : nullptr;
    if (q == nullptr) [[unlikely]]
        return acl::fail(ACL_ERROR_RT_STREAM_NO_CB_REG, "aclrtLaunchCallback", "stream %p has no report thread: "
                         "aclrtSubscribeReport it first", stream);
    const auto s = static_cast<rtStream_t>(stream);
    // Asked of the runtime while a capture is open: a stream that joined a capture (by waiting for an event recorded
    // in it) captures too. With none open (acl::g_open_captures), no stream can be capturing.
    rtStreamCaptureStatus capturing = RT_STREAM_CAPTURE_STATUS_NONE;
    if (acl::g_open_captures.load() != 0) [[unlikely]] {
        if (rtError_t e = rtStreamGetCaptureInfo(s, &capturing, nullptr); e != RT_SUCCESS) [[unlikely]]
            return acl::fail_rt(e, "aclrtLaunchCallback");
    }
    if (capturing == RT_STREAM_CAPTURE_STATUS_NONE) [[likely]] {
        CallbackRecord* r = acl::acquire_record();
        if (r == nullptr) [[unlikely]]
            return acl::fail(ACL_ERROR_BAD_ALLOC, "aclrtLaunchCallback", "out of host memory for a callback");
        r->fn = fn;
        r->user_data = userData;
        r->queue = q;
        r->block = block == ACL_CALLBACK_BLOCK;
        if (rtError_t e = rtLaunchHostFunc(s, acl::trampoline, r); e != RT_SUCCESS) [[unlikely]] {
            acl::release_record(r);
            return acl::fail_rt(e, "aclrtLaunchCallback");
        }
        return ACL_SUCCESS;
    }
    // Captured: the description serves every replay, and the capture's graph releases it when it goes.
    auto* c = new (std::nothrow) acl::CapturedCallback{fn, userData, q, block == ACL_CALLBACK_BLOCK};
    if (c == nullptr) return acl::fail(ACL_ERROR_BAD_ALLOC, "aclrtLaunchCallback", "out of host memory for a callback");
    if (rtError_t e = rtStreamDeferRelease(s, acl::delete_captured, c); e != RT_SUCCESS) {
        delete c;
        return acl::fail_rt(e, "aclrtLaunchCallback");
    }
    if (rtError_t e = rtLaunchHostFunc(s, acl::captured_trampoline, c); e != RT_SUCCESS)
        return acl::fail_rt(e, "aclrtLaunchCallback");  // c goes with the capture's graph
    return ACL_SUCCESS;
}

aclError aclrtProcessReport(int32_t timeout) {
    ACL_REQUIRE_INIT("aclrtProcessReport");
    if (aclError e = acl::check_timeout(timeout, "aclrtProcessReport"); e != ACL_SUCCESS) return e;
    ReportQueue* q = nullptr;
    {
        std::lock_guard lock(acl::g_queues_mutex);
        auto it = acl::g_queues.find(acl::this_thread_id());
        if (it != acl::g_queues.end()) q = it->second.get();
    }
    bool has_items = false;
    if (q != nullptr) {
        std::lock_guard lock(q->mutex);
        has_items = !q->items.empty();
    }
    // Unsubscribed from every stream: callbacks that reached it before still run; otherwise there is nothing to wait for.
    if (q == nullptr || (q->streams.load() == 0 && !has_items))
        return acl::fail(ACL_ERROR_RT_THREAD_SUBSCRIBE, "aclrtProcessReport", "the calling thread (%llu) has no "
                         "stream subscribed to it (aclrtSubscribeReport)",
                         static_cast<unsigned long long>(acl::this_thread_id()));
    std::deque<CallbackRecord*> batch;
    {
        std::unique_lock lock(q->mutex);
        auto ready = [&] { return !q->items.empty() || q->closed; };
        if (timeout == -1) q->arrived.wait(lock, ready);
        else if (!q->arrived.wait_for(lock, std::chrono::milliseconds(timeout), ready))
            return acl::fail(ACL_ERROR_RT_REPORT_TIMEOUT, "aclrtProcessReport", "no callback arrived within %d ms",
                             timeout);
        if (q->items.empty())  // closed by aclFinalize
            return acl::not_initialised("aclrtProcessReport");
        batch.swap(q->items);
        for (CallbackRecord* r : batch) r->state = acl::RecordState::kTaken;
    }
    for (CallbackRecord* r : batch) {
        r->fn(r->user_data);
        if (!r->block) {
            acl::release_record(r);
            continue;
        }
        bool abandoned;
        {
            std::lock_guard lock(q->mutex);
            abandoned = r->state == acl::RecordState::kAbandoned;
            if (!abandoned) r->state = acl::RecordState::kDone;
        }
        if (abandoned) acl::release_record(r);  // its trampoline returned at aclFinalize
        else q->ran.notify_all();               // its trampoline releases it
    }
    return ACL_SUCCESS;
}

aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream) {
    ACL_REQUIRE_INIT("aclrtUnSubscribeReport");
    std::lock_guard lock(acl::g_table_mutex);
    acl::StreamEntry* e = acl::find_entry(stream);
    ReportQueue* q = e != nullptr ? e->queue.load(std::memory_order_relaxed) : nullptr;
    if (q == nullptr || q->thread_id != threadId) {
        return acl::fail(ACL_ERROR_RT_STREAM_SUBSCRIBE, "aclrtUnSubscribeReport", "stream %p is not subscribed to "
                         "thread %llu", stream, static_cast<unsigned long long>(threadId));
    }
    e->queue.store(nullptr, std::memory_order_release);
    e->key.store(acl::kRemoved, std::memory_order_release);
    q->streams.fetch_sub(1);
    return ACL_SUCCESS;
}

aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void* args) {
    ACL_REQUIRE_INIT("aclrtLaunchHostFunc");
    if (fn == nullptr) [[unlikely]]
        return acl::fail(ACL_ERROR_INVALID_PARAM, "aclrtLaunchHostFunc", "fn is NULL");
    if (stream == nullptr) ACL_REQUIRE_CONTEXT("aclrtLaunchHostFunc");
    if (rtError_t e = rtLaunchHostFunc(static_cast<rtStream_t>(stream), fn, args); e != RT_SUCCESS) [[unlikely]]
        return acl::fail_rt(e, "aclrtLaunchHostFunc");
    return ACL_SUCCESS;
}

}  // extern "C"
