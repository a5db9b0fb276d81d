// fuzz_capi.cpp — libFuzzer harness: random sequences of C API calls with valid, stale and garbage arguments.
//
// Build and run (clang only; the library is built with ASan + UBSan alongside):
//   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DRUNTIME_BUILD_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
//   cmake --build build-fuzz --target fuzz_capi
//   build-fuzz/fuzz/fuzz_capi -max_total_time=45 -timeout=20 build-fuzz/fuzz/corpus fuzz/corpus
// scripts/test.sh runs exactly this as its `fuzz` phase. A crash leaves crash-<sha1> in the working
// directory; rerun it with `build-fuzz/fuzz/fuzz_capi crash-<sha1>`.
//
// Contract of the harness: every return code is accepted; what must never happen is a crash, a hang or
// a sanitizer report. So the harness only hands the runtime memory the runtime itself can validate
// (device pointers, live or stale or garbage, in device positions) or memory it really owns (its host
// arena, live pinned buffers) in host positions, with sizes bounded by what it owns: a garbage host
// pointer in a host position would make the runtime copy through it, which is the caller's fault and
// no finding. Kernels get only live buffers and an element count that fits them.
#include <runtime/runtime.h>

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr size_t kArenaBytes = 1 << 20;
constexpr size_t kMaxBuffer = 64 << 10;  // a valid device/pinned buffer is at most this large
constexpr int kBuffers = 8, kPinned = 4, kRegs = 2, kEvents = 4;
constexpr int kStreams = 3;  // slot 0 is the default stream (NULL), slots 1 and 2 are created
constexpr int kMaxOps = 96;  // a bounded sequence per input: no input runs long

alignas(256) unsigned char g_arena[kArenaBytes];  // host memory the harness owns for the whole process
rtFunction_t g_fill = nullptr;  // out[i] = v for i < n
rtFunction_t g_trap = nullptr;  // rt_assert(v != 7), then out[i] = v
rtDeviceProp g_prop{};

const char* const kSource = R"(
RT_KERNEL void fz_fill(int* out, int v, unsigned n) {
    size_t i = get_global_id(0) + get_global_size(0) * (get_global_id(1) + get_global_size(1) * get_global_id(2));
    if (i < n) out[i] = v;
}
RT_KERNEL void fz_trap(int* out, int v, unsigned n) {
    rt_assert(v != 7);
    size_t i = get_global_id(0);
    if (i < n) out[i] = v;
}
)";

/// Reads the fuzz input; past its end every read gives 0, so any prefix is a valid program.
struct Input {
    const uint8_t* p;
    size_t n;
    size_t at = 0;
    bool done() const { return at >= n; }
    uint8_t u8() { return at < n ? p[at++] : 0; }
    uint32_t u32() { return u8() | uint32_t{u8()} << 8 | uint32_t{u8()} << 16 | uint32_t{u8()} << 24; }
    uint64_t u64() { return u32() | uint64_t{u32()} << 32; }
    /// A size: mostly small, sometimes an edge that must be refused or wrap when added to a pointer.
    size_t size(size_t bound) {
        switch (u8() % 8) {
            case 0: return 0;
            case 1: return SIZE_MAX - u8();
            case 2: return bound + u8();  // just past what is owned
            default: return bound ? u32() % (bound + 1) : 0;
        }
    }
};

/// Buffer::used_by bit: a destroyed stream may still have work queued on it (cleared by rtDeviceSynchronize).
constexpr unsigned kDestroyedStream = 1u << 31;

// FUZZ_TRACE=1: every input's calls on stderr as they are made (to read what led to a report).
bool g_trace_on = std::getenv("FUZZ_TRACE") != nullptr;
void trace(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void trace(const char* fmt, ...) {
    if (!g_trace_on) return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "%s\n", line);  // immediately: the process may die in the next call
}


struct Buffer {
    void* p = nullptr;
    size_t bytes = 0;
    unsigned used_by = 0;  // streams (bit per slot) that may still have work queued on it
};

/// What a host function is told; owned by the input's state and freed after every stream has drained,
/// so a host function that is skipped (its stream failed) leaks nothing.
struct HostCtx {
    int action = 0;
    rtError_t code = RT_SUCCESS;
    rtStream_t other = nullptr;
    rtEvent_t event = nullptr;
};

void host_fn(void* user_data) {
    auto* c = static_cast<HostCtx*>(user_data);
    switch (c->action % 9) {
        case 0: break;
        case 1: rtHostFuncSetError(c->code == RT_SUCCESS ? RT_ERROR_LAUNCH_FAILED : c->code, "fuzz host function failed"); break;
        case 2: rtHostFuncSetError(RT_SUCCESS, nullptr); break;  // refused: not a failure code
        case 3: rtStreamQuery(c->other); break;
        case 4: rtEventQuery(c->event); rtEventRecord(c->event, c->other); break;
        case 5: { int d; rtGetDevice(&d); (void)rtGetLastErrorMessage(); } break;
        case 6: { rtMemStats st; rtMemGetStats(&st); rtMemEmptyCache(); } break;
        // Waits from queue context are refused (RT_ERROR_NOT_PERMITTED), never a hang.
        case 7: rtStreamSynchronize(c->other); rtEventSynchronize(c->event); rtDeviceSynchronize(); break;
        case 8: {  // frees defer to the timeline; an allocation under pressure does not wait for queues
            void* p = nullptr;
            if (rtMalloc(&p, 4096 + (c->code & 0xffff)) == RT_SUCCESS) rtFree(p);
            void* h = nullptr;
            if (rtMallocHost(&h, 4096) == RT_SUCCESS) rtFreeHost(h);
        } break;
    }
}

class Session {
public:
    explicit Session(Input& in) : in_(in) {}
    ~Session() { teardown(); }

    void run() {
        for (int op = 0; op < kMaxOps && !in_.done(); ++op) step(in_.u8());
    }

private:
    Input& in_;
    rtStream_t streams_[kStreams] = {};  // [0] stays NULL: the default stream
    rtEvent_t events_[kEvents] = {};
    Buffer dev_[kBuffers], pinned_[kPinned];
    struct Reg {
        void* p = nullptr;
    } regs_[kRegs];
    std::vector<uint64_t> stale_;  // handles and pointers that were valid once
    std::vector<std::unique_ptr<HostCtx>> ctxs_;

    int pick(int n) { return in_.u8() % n; }
    bool is_live(uint64_t v) const {
        for (const Buffer& b : dev_)
            if (b.p && reinterpret_cast<uintptr_t>(b.p) == v) return true;
        for (const Buffer& b : pinned_)
            if (b.p && reinterpret_cast<uintptr_t>(b.p) == v) return true;
        for (const Reg& r : regs_)
            if (r.p && reinterpret_cast<uintptr_t>(r.p) == v) return true;
        return false;
    }
    void forget_stream(int slot) {
        for (Buffer& b : dev_) b.used_by &= ~(1u << slot);
        for (Buffer& b : pinned_) b.used_by &= ~(1u << slot);
    }
    void forget_all() {
        for (Buffer& b : dev_) b.used_by = 0;
        for (Buffer& b : pinned_) b.used_by = 0;
    }
    uint64_t stale_or_garbage() {
        if (!stale_.empty() && in_.u8() % 2) {
            uint64_t v = stale_[in_.u8() % stale_.size()];
            // A freed address may have been handed out again: it is then a live buffer's, which a "stale" free
            // would release behind the harness's back (no runtime can tell that from a double free).
            if (!is_live(v)) return v;
        }
        switch (in_.u8() % 4) {
            case 0: return in_.u64();
            case 1: return 1;
            case 2: return reinterpret_cast<uintptr_t>(g_arena) + in_.u8();  // host memory, not the runtime's
            default: return UINT64_MAX;
        }
    }
    /// A stream slot (0..2; -1 for a stale or garbage handle written to *s).
    int stream(rtStream_t* s) {
        int k = pick(kStreams + 1);
        if (k < kStreams) {
            *s = streams_[k];
            return *s ? k : 0;  // a slot not created stands for the default stream
        }
        *s = reinterpret_cast<rtStream_t>(stale_or_garbage());
        return -1;
    }
    rtEvent_t event() {
        int k = pick(kEvents + 1);
        return k < kEvents ? events_[k] : reinterpret_cast<rtEvent_t>(stale_or_garbage());
    }
    /// A device-side operand: a live buffer (returned in *b), or a stale/garbage pointer the runtime must refuse.
    void* device_operand(Buffer** b, size_t* owned) {
        *b = nullptr;
        *owned = 0;
        if (in_.u8() % 4 == 0) return reinterpret_cast<void*>(stale_or_garbage());
        Buffer& d = dev_[pick(kBuffers)];
        if (!d.p) return reinterpret_cast<void*>(stale_or_garbage());
        size_t off = d.bytes ? in_.u32() % d.bytes : 0;
        *b = &d;
        *owned = d.bytes - off;
        return static_cast<char*>(d.p) + off;
    }
    /// A host-side operand the harness owns: the arena (registered or not) or a live pinned buffer.
    void* host_operand(Buffer** b, size_t* owned) {
        *b = nullptr;
        Buffer& h = pinned_[pick(kPinned)];
        if (h.p && in_.u8() % 2) {
            size_t off = in_.u32() % h.bytes;
            *b = &h;
            *owned = h.bytes - off;
            return static_cast<char*>(h.p) + off;
        }
        size_t off = in_.u32() % kArenaBytes;
        *owned = kArenaBytes - off;
        return g_arena + off;
    }
    /// Larger than anything the registry holds (buffers, the arena): a checked operand must refuse it.
    size_t huge() {
        switch (in_.u8() % 3) {
            case 0: return SIZE_MAX - in_.u8();
            case 1: return SIZE_MAX / 2 + in_.u8();
            default: return kArenaBytes + 1 + in_.u32();
        }
    }
    void mark(Buffer* b, int slot) {
        if (b) b->used_by |= slot >= 0 ? 1u << slot : 0u;
    }

    void step(uint8_t what) {
        trace("op %u", what % 24);
        switch (what % 24) {
            case 0: alloc(false); break;
            case 1: alloc(true); break;
            case 2: free_buffer(false); break;
            case 3: free_buffer(true); break;
            case 4: pinned_alloc(); break;
            case 5: pinned_free(); break;
            case 6: host_register(); break;
            case 7: host_unregister(); break;
            case 8: case 9: copy(); break;
            case 10: fill(); break;
            case 11: stream_create(); break;
            case 12: stream_destroy(); break;
            case 13: stream_sync(); break;
            case 14: { rtStream_t s; stream(&s); rtStreamQuery(s); } break;
            case 15: { rtStream_t s; stream(&s); rtStreamWaitEvent(s, event()); } break;
            case 16: event_op(); break;
            case 17: host_func(); break;
            case 18: case 19: launch(); break;
            case 20: pool(); break;
            case 21: garbage_calls(); break;
            case 22: if (rtDeviceSynchronize() || true) forget_all(); break;
            case 23: { size_t f, t; rtMemGetInfo(&f, &t); rtMemStats st; rtMemGetStats(&st); } break;
        }
    }

    void alloc(bool async) {
        Buffer& b = dev_[pick(kBuffers)];
        if (b.p) return;
        size_t bytes = in_.u8() % 8 == 0 ? in_.size(kMaxBuffer) : in_.u32() % (kMaxBuffer + 1);
        void* p = nullptr;
        rtError_t e;
        if (async) {
            rtStream_t s;
            int slot = stream(&s);
            e = rtMallocAsync(&p, bytes, s);
            if (e == RT_SUCCESS && p) b.used_by = slot >= 0 ? 1u << slot : 0u;
        } else {
            e = rtMalloc(&p, bytes);
            b.used_by = 0;
        }
        trace(" alloc %p %zu async %d = %d", p, bytes, async ? 1 : 0, static_cast<int>(e));
        if (e == RT_SUCCESS && p) {
            b.p = p;
            b.bytes = bytes;
        }
    }
    void free_buffer(bool async) {
        if (in_.u8() % 4 == 0) {  // a pointer the runtime must refuse (or NULL, a no-op)
            void* p = reinterpret_cast<void*>(stale_or_garbage());
            if (async) {
                rtStream_t s;
                stream(&s);
                rtFreeAsync(p, s);
            } else {
                rtFree(p);
            }
            return;
        }
        Buffer& b = dev_[pick(kBuffers)];
        if (!b.p) return;
        rtStream_t s;
        int slot = stream(&s);
        // rtFreeAsync on stream s is ordered after s's own work only: when another stream may still use the
        // buffer the well-behaved caller frees it with rtFree, which waits for (or defers past) every stream.
        rtError_t e = async && slot >= 0 && (b.used_by & ~(1u << slot)) == 0 ? rtFreeAsync(b.p, s) : rtFree(b.p);
        trace(" free %p used_by %x async %d slot %d = %d", b.p, b.used_by, async ? 1 : 0, slot, static_cast<int>(e));
        if (e == RT_SUCCESS) {
            stale_.push_back(reinterpret_cast<uintptr_t>(b.p));
            b = Buffer{};
        }
    }
    void pinned_alloc() {
        Buffer& b = pinned_[pick(kPinned)];
        if (b.p) return;
        size_t bytes = in_.u8() % 8 == 0 ? in_.size(kMaxBuffer) : in_.u32() % (kMaxBuffer + 1);
        void* p = nullptr;
        if (rtMallocHost(&p, bytes) == RT_SUCCESS && p) b = Buffer{p, bytes, 0};
    }
    void pinned_free() {
        if (in_.u8() % 4 == 0) {
            rtFreeHost(reinterpret_cast<void*>(stale_or_garbage()));
            return;
        }
        Buffer& b = pinned_[pick(kPinned)];
        if (b.p && rtFreeHost(b.p) == RT_SUCCESS) {  // waits for queued copies that use it
            stale_.push_back(reinterpret_cast<uintptr_t>(b.p));
            b = Buffer{};
        }
    }
    void host_register() {
        Reg& r = regs_[pick(kRegs)];
        if (r.p) return;
        size_t off = in_.u32() % kArenaBytes;
        size_t bytes = in_.size(kArenaBytes - off);  // past the arena or wrapping: must be refused
        unsigned flags = in_.u8() % 8 == 0 ? in_.u32() : RT_HOST_REGISTER_DEFAULT;
        if (bytes > kArenaBytes - off) {
            // Claims memory the harness does not own: only the refusal is of interest; undo a success at once.
            if (rtHostRegister(g_arena + off, bytes, flags) == RT_SUCCESS) rtHostUnregister(g_arena + off);
            return;
        }
        if (rtHostRegister(g_arena + off, bytes, flags) == RT_SUCCESS) r.p = g_arena + off;
    }
    void host_unregister() {
        if (in_.u8() % 4 == 0) {
            rtHostUnregister(reinterpret_cast<void*>(stale_or_garbage()));
            return;
        }
        Reg& r = regs_[pick(kRegs)];
        if (r.p && rtHostUnregister(r.p) == RT_SUCCESS) r.p = nullptr;
    }
    void copy() {
        int kind = pick(6);  // 0..4 and one value that is no rtMemcpyKind
        // An enum of 0..4 may hold 0..7 (its bits): 5..7 are the values no rtMemcpyKind names that C++ can pass.
        rtMemcpyKind k = static_cast<rtMemcpyKind>(kind == 5 ? 5 + in_.u8() % 3 : kind);
        bool async = in_.u8() % 2;
        rtStream_t s = nullptr;
        int slot = async ? stream(&s) : 0;
        Buffer *db = nullptr, *sb = nullptr;
        size_t dn = 0, sn = 0;
        void* dst;
        const void* src;
        // The runtime checks device-side operands (registry) and refuses device memory in a host position;
        // host positions of H2H/DEFAULT copies get harness-owned memory only.
        bool dst_dev = kind == RT_MEMCPY_HOST_TO_DEVICE || kind == RT_MEMCPY_DEVICE_TO_DEVICE;
        bool src_dev = kind == RT_MEMCPY_DEVICE_TO_HOST || kind == RT_MEMCPY_DEVICE_TO_DEVICE;
        bool checked = kind != RT_MEMCPY_HOST_TO_HOST && kind != RT_MEMCPY_DEFAULT && kind != 5;
        if (kind == RT_MEMCPY_DEFAULT || kind == 5) {
            dst = in_.u8() % 2 ? device_live(&db, &dn) : host_operand(&db, &dn);
            src = in_.u8() % 2 ? device_live(&sb, &sn) : host_operand(&sb, &sn);
        } else {
            dst = dst_dev ? device_operand(&db, &dn) : host_operand(&db, &dn);
            src = src_dev ? device_operand(&sb, &sn) : host_operand(&sb, &sn);
        }
        if (!db && dst_dev) dn = SIZE_MAX;  // stale/garbage device side: any size, the runtime refuses it
        if (!sb && src_dev) sn = SIZE_MAX;
        size_t bytes;
        if (dst_dev && src_dev) {
            bytes = in_.size(std::min({dn, sn, kMaxBuffer}));  // both sides bounded by the registry
        } else if (checked && (dst_dev || src_dev)) {
            // The device side is checked, the host side is not: a size is either within the host operand, or
            // larger than any memory the registry knows (> the arena) so that the device side must refuse it.
            size_t host_owned = dst_dev ? sn : dn;
            bytes = in_.u8() % 4 == 0 ? huge() : in_.u32() % (std::min(host_owned, kMaxBuffer) + 1);
        } else {
            bytes = in_.u32() % (std::min({dn, sn, kMaxBuffer}) + 1);
        }
        trace(" copy %p <- %p %zu kind %d async %d slot %d", dst, src, bytes, static_cast<int>(k), async ? 1 : 0, slot);
        rtError_t e = async ? rtMemcpyAsync(dst, src, bytes, k, s) : rtMemcpy(dst, src, bytes, k);
        trace(" = %d", static_cast<int>(e));
        if (async) {
            mark(db, slot);
            mark(sb, slot);
        }
    }
    /// A live device buffer, or the arena when there is none (DEFAULT copies infer the kind from the pointers).
    void* device_live(Buffer** b, size_t* owned) {
        Buffer& d = dev_[pick(kBuffers)];
        if (!d.p) return host_operand(b, owned);
        size_t off = d.bytes ? in_.u32() % d.bytes : 0;
        *b = &d;
        *owned = d.bytes - off;
        return static_cast<char*>(d.p) + off;
    }
    void fill() {
        Buffer* b = nullptr;
        size_t owned = 0;
        void* p = device_operand(&b, &owned);
        if (in_.u8() % 8 == 0) p = host_operand(&b, &owned), b = nullptr;  // host memory: refused
        size_t bytes = in_.size(b ? std::min(owned, kMaxBuffer) : kMaxBuffer);
        int value = static_cast<int>(in_.u32());
        if (in_.u8() % 2) {
            rtStream_t s;
            int slot = stream(&s);
            rtMemsetAsync(p, value, bytes, s);
            mark(b, slot);
        } else {
            rtMemset(p, value, bytes);
        }
    }
    void stream_create() {
        int k = 1 + pick(kStreams - 1);
        if (streams_[k]) return;
        unsigned flags = in_.u8() % 8 == 0 ? in_.u32() : in_.u8() % 2;
        rtStream_t s = nullptr;
        if (rtStreamCreateWithFlags(&s, flags) == RT_SUCCESS) streams_[k] = s;
    }
    void stream_destroy() {
        rtStream_t s;
        int slot = stream(&s);
        if (rtStreamDestroy(s) == RT_SUCCESS && slot > 0) {
            stale_.push_back(reinterpret_cast<uintptr_t>(s));
            streams_[slot] = nullptr;
            // rtStreamDestroy does not wait: the destroyed stream's queued work may still use the buffers, so
            // only rtFree (ordered after every stream, destroyed ones included) may free them now.
            for (Buffer& b : dev_)
                if (b.used_by & (1u << slot)) b.used_by = (b.used_by & ~(1u << slot)) | kDestroyedStream;
            for (Buffer& b : pinned_)
                if (b.used_by & (1u << slot)) b.used_by = (b.used_by & ~(1u << slot)) | kDestroyedStream;
        }
    }
    void stream_sync() {
        rtStream_t s;
        int slot = stream(&s);
        rtError_t e = rtStreamSynchronize(s);
        if (slot >= 0 && e != RT_ERROR_INVALID_HANDLE) forget_stream(slot);  // failed or not, it drained
    }
    void event_op() {
        switch (pick(7)) {
            case 0: {
                int k = pick(kEvents);
                if (events_[k]) return;
                unsigned flags = in_.u8() % 8 == 0 ? in_.u32() : in_.u8() % 4;
                rtEvent_t e = nullptr;
                if (rtEventCreateWithFlags(&e, flags) == RT_SUCCESS) events_[k] = e;
                return;
            }
            case 1: {
                int k = pick(kEvents);
                if (in_.u8() % 4 == 0) {
                    rtEventDestroy(reinterpret_cast<rtEvent_t>(stale_or_garbage()));
                } else if (events_[k] && rtEventDestroy(events_[k]) == RT_SUCCESS) {
                    stale_.push_back(reinterpret_cast<uintptr_t>(events_[k]));
                    events_[k] = nullptr;
                }
                return;
            }
            case 2: case 3: {
                rtStream_t s;
                stream(&s);
                rtEventRecord(event(), s);
                return;
            }
            case 4: rtEventQuery(event()); return;
            case 5: rtEventSynchronize(event()); return;
            case 6: {
                float ms = 0;
                rtEventElapsedTime(in_.u8() % 8 ? &ms : nullptr, event(), event());
                return;
            }
        }
    }
    void host_func() {
        rtStream_t s;
        stream(&s);
        auto c = std::make_unique<HostCtx>();
        c->action = in_.u8();
        c->code = static_cast<rtError_t>(in_.u8() % 12);
        stream(&c->other);
        c->event = event();
        rtHostFn_t fn = in_.u8() % 16 == 0 ? nullptr : host_fn;
        if (rtLaunchHostFunc(s, fn, c.get()) == RT_SUCCESS) ctxs_.push_back(std::move(c));
    }
    unsigned dim(int axis, bool grid) {
        switch (in_.u8() % 10) {
            case 0: return 0;
            case 1: return UINT32_MAX;
            case 2: return static_cast<unsigned>(grid ? g_prop.max_grid_size[axis] : g_prop.max_block_size[axis]) + 1;
            default: return 1 + in_.u8() % (grid ? 4 : 16);
        }
    }
    void launch() {
        Buffer& b = dev_[pick(kBuffers)];
        if (!b.p) return;  // kernels write: only a live buffer, never a stale or garbage one
        rtFunction_t f = in_.u8() % 2 ? g_fill : g_trap;
        if (in_.u8() % 8 == 0) f = reinterpret_cast<rtFunction_t>(stale_or_garbage());
        int* out = static_cast<int*>(b.p);
        int v = in_.u8() % 8;
        unsigned n = static_cast<unsigned>(std::min<size_t>(b.bytes / sizeof(int), in_.u32()));
        void* values[3] = {&out, &v, &n};
        void* args_buf[4] = {values[0], values[1], values[2], nullptr};
        if (in_.u8() % 8 == 0) args_buf[in_.u8() % 3] = nullptr;
        void** args = in_.u8() % 16 == 0 ? nullptr : args_buf;
        rtStream_t s;
        int slot = stream(&s);
        rtDim3 grid{dim(0, true), dim(1, true), dim(2, true)}, block{dim(0, false), dim(1, false), dim(2, false)};
        size_t shared = in_.u8() % 8 == 0 ? in_.u64() : in_.u8();
        if (in_.u8() % 2) {
            rtLaunchKernel(f, grid, block, args, shared, s);
        } else {
            size_t sizes[4] = {sizeof out, sizeof v, sizeof n, 8};
            if (in_.u8() % 4 == 0) sizes[in_.u8() % 3] = in_.u8();
            int num_args = in_.u8() % 4 == 0 ? static_cast<int>(in_.u8() % 6) - 2 : 3;  // -2..3
            // A config with room past it, so that sizes of a later (larger) rtLaunchConfig stay inside the object.
            struct {
                rtLaunchConfig c;
                unsigned char tail[64];
            } ext{};
            rtLaunchConfig& c = ext.c;
            c = RT_LAUNCH_CONFIG_INIT;
            c.grid = grid;
            c.block = block;
            c.shared_bytes = shared;
            c.stream = s;
            c.num_args = num_args;
            c.arg_sizes = in_.u8() % 2 ? sizes : nullptr;
            switch (in_.u8() % 16) {
                case 0:  // a prefix of the struct (too small, or an older version), or never set (implausible)
                    c.size = in_.u8() % 2 ? in_.u8() % sizeof c : size_t{4097} + in_.u64() % (size_t{1} << 40);
                    break;
                case 1: c.size = sizeof c + in_.u8() % sizeof ext.tail; break;          // later version, zero tail
                case 2:                                                                 // later version, a field set
                    c.size = sizeof c + 1 + in_.u8() % (sizeof ext.tail - 1);
                    ext.tail[in_.u8() % sizeof ext.tail] = in_.u8();
                    break;
                default: break;
            }
            if (in_.u8() % 4 == 0)
                for (unsigned long long& g : c.global) g = in_.u8() % 2 ? in_.u64() : in_.u8();
            rtLaunchKernelEx(f, in_.u8() % 32 == 0 ? nullptr : &c, args);
        }
        mark(&b, slot);
    }
    void pool() {
        size_t pool_size = in_.u8() % 4 == 0 ? in_.size(8 << 20) : (in_.u8() % 9) << 20;
        size_t block = in_.u8() % 4 == 0 ? in_.u64() : size_t{4096} << (in_.u8() % 10);
        unsigned flags = in_.u8() % 8 == 0 ? in_.u32() : in_.u8() % 2;
        switch (pick(3)) {
            case 0: {
                rtError_t e = rtEnablePoolAllocator(pool_size, block, flags);
                trace(" pool %zu %zu %x = %d", pool_size, block, flags, static_cast<int>(e));
            } break;
            case 1: { int on = in_.u8() % 2; trace(" reuse %d = %d", on, static_cast<int>(rtEnableMemoryReuse(on))); } break;
            case 2: trace(" empty cache = %d", static_cast<int>(rtMemEmptyCache())); break;
        }
    }
    /// Calls whose arguments are wholly garbage or NULL: each must be refused, never followed.
    void garbage_calls() {
        void* p = nullptr;
        switch (pick(8)) {
            case 0: rtMalloc(nullptr, in_.u32()); break;
            case 1: rtHostGetDevicePointer(in_.u8() % 2 ? &p : nullptr, reinterpret_cast<void*>(stale_or_garbage()), in_.u8() % 2); break;
            case 2: rtStreamCreate(nullptr); rtEventCreate(nullptr); break;
            case 3: rtModuleGetFunction(nullptr, nullptr, nullptr); rtModuleUnload(reinterpret_cast<rtModule_t>(stale_or_garbage())); break;
            case 4: { int c = in_.u8() % 5; size_t sz[4]; rtFunctionGetParamInfo(in_.u8() % 2 ? g_fill : reinterpret_cast<rtFunction_t>(stale_or_garbage()), &c, in_.u8() % 2 ? sz : nullptr); } break;
            case 5: rtHostFuncSetError(RT_ERROR_UNKNOWN, "outside a host function"); break;
            case 6: rtEnableZeroCopy(in_.u8() % 2); break;
            case 7: { int d = static_cast<int>(in_.u32()); rtDeviceProp prop; rtGetDeviceProperties(&prop, d); rtSetDevice(d); rtSetDevice(0); } break;
        }
    }

    /// Leaves nothing behind for the next input: every stream drained, every object released.
    void teardown() {
        rtDeviceSynchronize();
        for (int k = 1; k < kStreams; ++k)
            if (streams_[k]) rtStreamDestroy(streams_[k]);
        rtDeviceSynchronize();
        for (Buffer& b : dev_)
            if (b.p) rtFree(b.p);
        for (Buffer& b : pinned_)
            if (b.p) rtFreeHost(b.p);
        for (Reg& r : regs_)
            if (r.p) rtHostUnregister(r.p);
        for (rtEvent_t e : events_)
            if (e) rtEventDestroy(e);
        rtDeviceSynchronize();  // queued host functions have run (or were skipped): their contexts may go
        ctxs_.clear();
        rtEnableZeroCopy(0);
    }
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    if (rtInit(nullptr) != RT_SUCCESS || rtGetDeviceProperties(&g_prop, 0) != RT_SUCCESS) {
        std::fprintf(stderr, "fuzz_capi: rtInit failed: %s\n", rtGetLastErrorMessage());
        std::abort();
    }
    // Compiled once (the host compiler takes a while): inputs launch these kernels, never load source.
    rtModule_t m = nullptr;
    if (rtModuleLoadSource(&m, kSource, "-O1") != RT_SUCCESS || rtModuleGetFunction(&g_fill, m, "fz_fill") != RT_SUCCESS ||
        rtModuleGetFunction(&g_trap, m, "fz_trap") != RT_SUCCESS) {
        std::fprintf(stderr, "fuzz_capi: the kernels did not load: %s\n", rtGetLastErrorMessage());
        std::abort();
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    trace("---- input");
    Input in{data, size};
    Session(in).run();
    return 0;
}
