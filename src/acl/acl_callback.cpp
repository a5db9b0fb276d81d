// acl_callback.cpp — callbacks run by report threads (aclrtSubscribeReport, aclrtLaunchCallback, aclrtProcessReport,
// aclrtUnSubscribeReport), aclrtLaunchHostFunc, and the per-stream table they share with capture (acl_model.cpp).
//
// The launch path (aclrtLaunchCallback) takes no lock and allocates nothing: the stream's subscription is found in a
// fixed open-addressing table read with atomic loads, the callback's record comes from a fixed pool (a lock-free
// stack that each launching thread empties into a cache of its own), and rtLaunchHostFunc queues a trampoline. When
// the stream gets there, the trampoline (on a runtime thread) hands the record to the report thread's queue and, for
// ACL_CALLBACK_BLOCK, waits until the callback has returned — that wait is the blocking AscendCL asks for: the
// stream's later work waits behind it.
#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <new>
#include <unordered_map>

#include "acl/acl.h"
#include "acl_internal.hpp"

namespace acl {

struct ReportQueue {
    uint64_t thread_id = 0;
    std::mutex mutex;
    std::condition_variable arrived;  // a record was queued (or the queue closed)
    std::condition_variable ran;      // a blocking callback returned (or the queue closed)
    std::deque<CallbackRecord*> items;
    bool closed = false;
    std::atomic<int> streams{0};  // streams subscribed to the thread (changed under g_table_mutex)
};

struct CallbackRecord {
    aclrtCallback fn = nullptr;
    void* user_data = nullptr;
    ReportQueue* queue = nullptr;
    bool block = false;
    bool from_heap = false;   // the pool was empty: allocated, deleted when released
    bool persistent = false;  // captured into a model: run at every replay, released with the model
    bool done = false;        // a blocking run has returned (guarded by queue->mutex)
    std::atomic<uint32_t> next{0};  // pool link: index + 1 of the next free record, 0 at the end
};

namespace {

// ---- the record pool

constexpr uint32_t kPoolSize = 4096;
CallbackRecord g_pool[kPoolSize];
// Head of the free stack: tag (high 32 bits, bumped by every change) | index + 1 (0: empty).
std::atomic<uint64_t> g_free_head{0};

// Each launching thread pops from a cache of its own (no atomic operation per launch) and refills it by taking the
// whole free stack in one exchange; releases (by report threads and trampolines) push onto the shared stack. Taking
// everything at once means no thread ever pops a single node from the shared stack, so the tag only orders pushes.
std::atomic<uint64_t> g_session{0};  // bumped by every aclInit: caches of an earlier session are dropped
thread_local uint32_t t_cache = 0;   // index + 1 of this thread's first cached record, 0: empty
thread_local uint64_t t_cache_session = 0;

CallbackRecord* pool_pop() noexcept {
    const uint64_t session = g_session.load(std::memory_order_relaxed);
    if (t_cache == 0 || t_cache_session != session) [[unlikely]] {
        t_cache_session = session;
        uint64_t head = g_free_head.load(std::memory_order_relaxed);
        while (!g_free_head.compare_exchange_weak(head, ((head >> 32) + 1) << 32, std::memory_order_acq_rel,
                                                  std::memory_order_relaxed)) {
        }
        t_cache = static_cast<uint32_t>(head);
        if (t_cache == 0) return nullptr;
    }
    CallbackRecord* r = &g_pool[t_cache - 1];
    t_cache = r->next.load(std::memory_order_relaxed);
    return r;
}

void pool_push(CallbackRecord* r) noexcept {
    const uint32_t index = static_cast<uint32_t>(r - g_pool) + 1;
    uint64_t head = g_free_head.load(std::memory_order_relaxed);
    for (;;) {
        r->next.store(static_cast<uint32_t>(head), std::memory_order_relaxed);
        const uint64_t replacement = ((head >> 32) + 1) << 32 | index;
        if (g_free_head.compare_exchange_weak(head, replacement, std::memory_order_release,
                                              std::memory_order_relaxed))
            return;
    }
}

CallbackRecord* acquire_record() noexcept {
    if (CallbackRecord* r = pool_pop()) [[likely]] {
        r->from_heap = false;
        return r;
    }
    auto* r = new (std::nothrow) CallbackRecord;
    if (r != nullptr) r->from_heap = true;
    return r;
}

void release_record(CallbackRecord* r) noexcept {
    if (r->from_heap) delete r;
    else pool_push(r);
}

// ---- the per-stream table: key = the stream handle's value (0 empty, 1 a removed entry)

constexpr size_t kTableSize = 4096;  // a power of two
constexpr uintptr_t kEmpty = 0, kRemoved = 1;

struct StreamEntry {
    std::atomic<uintptr_t> key{kEmpty};
    std::atomic<ReportQueue*> queue{nullptr};  // the subscribed thread's queue
    std::atomic<Model*> capture{nullptr};      // the model the stream is capturing into
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
            g_table[i].capture.store(nullptr, std::memory_order_relaxed);
            g_table[i].key.store(key, std::memory_order_release);
            return &g_table[i];
        }
    }
    return nullptr;
}

/// Removes an entry that has neither a subscription nor a capture (g_table_mutex held).
void drop_if_unused_locked(StreamEntry* e) noexcept {
    if (e->queue.load(std::memory_order_relaxed) == nullptr && e->capture.load(std::memory_order_relaxed) == nullptr)
        e->key.store(kRemoved, std::memory_order_release);
}

// ---- report queues, one per subscribed thread; kept until aclFinalize (records in flight point at them)

std::mutex g_queues_mutex;
std::unordered_map<uint64_t, std::unique_ptr<ReportQueue>> g_queues;
// Queues of earlier sessions: a report thread may still be inside aclrtProcessReport on one when aclFinalize runs (it
// wakes, finds the queue closed and returns), so they are never freed. A few per aclInit/aclFinalize cycle.
std::vector<std::unique_ptr<ReportQueue>> g_closed_queues;
// Records of destroyed models: replays may still be queued, so they are freed at aclFinalize.
std::vector<CallbackRecord*> g_retired;

inline uint64_t this_thread_id() noexcept { return static_cast<uint64_t>(pthread_self()); }

/// Runs on a runtime thread when the stream reaches the callback: hands the record to the report thread.
void trampoline(void* user_data) {
    auto* r = static_cast<CallbackRecord*>(user_data);
    ReportQueue* q = r->queue;
    const bool block = r->block;
    const bool persistent = r->persistent;
    {
        std::unique_lock lock(q->mutex);
        if (q->closed) {
            lock.unlock();
            if (!persistent) release_record(r);
            return;
        }
        r->done = false;
        q->items.push_back(r);
    }
    q->arrived.notify_one();
    if (!block) return;  // the report thread releases it
    std::unique_lock lock(q->mutex);
    q->ran.wait(lock, [&] { return r->done || q->closed; });
    lock.unlock();
    if (!persistent) release_record(r);
}

[[gnu::cold]] aclError check_report_timeout(int32_t timeout) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtProcessReport", "timeout %d ms is invalid: -1 (wait without limit) "
                "or a positive number of milliseconds", timeout);
}

}  // namespace

void init_callbacks() noexcept {
    g_session.fetch_add(1, std::memory_order_relaxed);
    // Link the whole pool (nothing is in flight before aclInit or after aclFinalize).
    for (uint32_t i = 0; i < kPoolSize; ++i) g_pool[i].next.store(i + 2 <= kPoolSize ? i + 2 : 0);
    g_free_head.store(1, std::memory_order_release);
}

void forget_stream(aclrtStream stream) noexcept {
    std::lock_guard lock(g_table_mutex);
    if (StreamEntry* e = find_entry(stream)) {
        if (ReportQueue* q = e->queue.load(std::memory_order_relaxed)) q->streams.fetch_sub(1);
        e->queue.store(nullptr, std::memory_order_release);
        e->capture.store(nullptr, std::memory_order_release);
        e->key.store(kRemoved, std::memory_order_release);
    }
}

bool set_stream_capture(aclrtStream stream, Model* model) noexcept {
    std::lock_guard lock(g_table_mutex);
    StreamEntry* e = model != nullptr ? find_or_add_entry_locked(stream) : find_entry(stream);
    if (e == nullptr) return model == nullptr;
    e->capture.store(model, std::memory_order_release);
    drop_if_unused_locked(e);
    return true;
}

Model* stream_capture(aclrtStream stream) noexcept {
    StreamEntry* e = find_entry(stream);
    return e != nullptr ? e->capture.load(std::memory_order_acquire) : nullptr;
}

void retire_model_records(Model* model) noexcept {
    std::lock_guard lock(g_queues_mutex);
    std::lock_guard model_lock(model->mutex);
    try {
        g_retired.insert(g_retired.end(), model->records.begin(), model->records.end());
    } catch (...) {
        return;  // out of memory: the records stay with the model object, which is leaked with them
    }
    model->records.clear();
}

void free_model_records(Model* model) noexcept {
    std::lock_guard model_lock(model->mutex);
    for (CallbackRecord* r : model->records) delete r;
    model->records.clear();
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
            e.capture.store(nullptr, std::memory_order_relaxed);
            e.key.store(kEmpty, std::memory_order_release);
        }
    }
    std::lock_guard lock(g_queues_mutex);
    for (auto& [id, q] : g_queues) {
        std::lock_guard ql(q->mutex);
        // Blocking records were released by their trampolines when the queue closed; persistent ones are models'.
        for (CallbackRecord* r : q->items)
            if (!r->persistent && !r->block) release_record(r);
        q->items.clear();
        try {
            g_closed_queues.push_back(std::move(q));
        } catch (...) {
            q.release();  // kept alive all the same
        }
    }
    g_queues.clear();
    for (CallbackRecord* r : g_retired) delete r;
    g_retired.clear();
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
    // A live stream handle: a query changes nothing and refuses stale or foreign handles.
    if (rtError_t e = rtStreamQuery(static_cast<rtStream_t>(stream));
        e == RT_ERROR_INVALID_HANDLE || e == RT_ERROR_INVALID_VALUE)
        return acl::fail_rt(e, api);
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
    acl::Model* model = entry->capture.load(std::memory_order_acquire);
    CallbackRecord* r;
    if (model == nullptr) [[likely]] {
        r = acl::acquire_record();
    } else {
        // Captured: the record serves every replay of the model, so it is the model's, not the pool's.
        r = new (std::nothrow) CallbackRecord;
        if (r != nullptr) {
            r->persistent = true;
            std::lock_guard lock(model->mutex);
            try {
                model->records.push_back(r);
            } catch (...) {
                delete r;
                r = nullptr;
            }
        }
    }
    if (r == nullptr) [[unlikely]]
        return acl::fail(ACL_ERROR_BAD_ALLOC, "aclrtLaunchCallback", "out of host memory for a callback");
    r->fn = fn;
    r->user_data = userData;
    r->queue = q;
    r->block = block == ACL_CALLBACK_BLOCK;
    if (rtError_t e = rtLaunchHostFunc(static_cast<rtStream_t>(stream), acl::trampoline, r); e != RT_SUCCESS)
        [[unlikely]] {
        if (!r->persistent) acl::release_record(r);
        return acl::fail_rt(e, "aclrtLaunchCallback");
    }
    return ACL_SUCCESS;
}

aclError aclrtProcessReport(int32_t timeout) {
    ACL_REQUIRE_INIT("aclrtProcessReport");
    if (timeout != -1 && timeout <= 0) return acl::check_report_timeout(timeout);
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
    }
    for (CallbackRecord* r : batch) {
        const bool block = r->block;
        const bool persistent = r->persistent;
        r->fn(r->user_data);
        if (block) {
            {
                std::lock_guard lock(q->mutex);
                r->done = true;
            }
            q->ran.notify_all();  // the trampoline releases it
        } else if (!persistent) {
            acl::release_record(r);
        }
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
    q->streams.fetch_sub(1);
    acl::drop_if_unused_locked(e);
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
