// runtime.hpp — the C++ API: RAII handles and exceptions, header-only over the C API (runtime.h).
//
// The C ABI in runtime.h stays the only exported surface; everything here is inline. Conventions:
//  - every failing C call becomes a runtime::Error carrying the rtError_t (see check());
//  - handles (Stream, Event, DeviceBuffer, PinnedBuffer, Module, Graph, GraphExec) are move-only owners; a moved-from
//    handle is empty and its destructor does nothing;
//  - destructors never throw: they release the resource and ignore late errors, like the C++
//    standard library's own RAII types;
//  - all functions are as thread-safe as the C calls they wrap (the whole C API is thread-safe);
//    a single handle object must not be moved/assigned while another thread uses it.
#ifndef RUNTIME_RUNTIME_HPP
#define RUNTIME_RUNTIME_HPP

#include <runtime/runtime.h>

#include <array>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <memory>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace runtime {

// ------------------------------------------------------------------------------------- errors

/// A failed runtime call: code() is the C error, what() is "RT_ERROR_X: <detail>".
class Error : public std::runtime_error {
public:
    /// Builds the message from the code's name and `detail` (the code's description if empty).
    Error(rtError_t code, std::string_view detail)
        : std::runtime_error(compose(code, detail)), code_(code) {}
    /// The C error code.
    rtError_t code() const noexcept { return code_; }
    /// The code's constant name, e.g. "RT_ERROR_INVALID_VALUE".
    const char* name() const noexcept { return rtGetErrorName(code_); }

private:
    static std::string compose(rtError_t code, std::string_view detail) {
        std::string msg = rtGetErrorName(code);
        msg += ": ";
        msg += detail.empty() ? std::string_view(rtGetErrorString(code)) : detail;
        return msg;
    }
    rtError_t code_;
};

/// Throws Error(code, rtGetLastErrorMessage()) unless `code` is RT_SUCCESS. NOT_READY is an error
/// here: query methods test for it before calling check().
inline void check(rtError_t code) {
    if (code != RT_SUCCESS) throw Error(code, rtGetLastErrorMessage());
}

namespace detail {
/// count * sizeof(T) in bytes, or Error(RT_ERROR_INVALID_VALUE) naming `what` and the count when it overflows.
template <class T> std::size_t element_bytes(std::size_t count, const char* what) {
    std::size_t bytes;
    if (__builtin_mul_overflow(count, sizeof(T), &bytes))
        throw Error(RT_ERROR_INVALID_VALUE, std::string(what) + ": " + std::to_string(count) + " elements of " +
                                                std::to_string(sizeof(T)) + " bytes overflow size_t");
    return bytes;
}
} // namespace detail

// ------------------------------------------------------------------------------------- devices

/// Initialise explicitly; optional (every call initialises with defaults). `options` is
/// "key=value;..." (backend, and each backend's own keys: cpu.devices, cpu.memory, cpu.executors,
/// cpu.stream_min_bytes, cuda.enable; see rtInit); empty means defaults/environment.
inline void init(std::string_view options = {}) {
    const std::string opts(options);
    check(rtInit(opts.empty() ? nullptr : opts.c_str()));
}
/// Waits for all work and releases every resource; live handles become invalid (their
/// destructors then do nothing harmful). Not concurrent with other calls.
inline void finalize() { check(rtFinalize()); }

/// Number of devices over all backends.
inline int device_count() {
    int n = 0;
    check(rtGetDeviceCount(&n));
    return n;
}
/// Selects the calling thread's current device.
inline void set_device(int device) { check(rtSetDevice(device)); }
/// The calling thread's current device (0 unless set_device was called).
inline int current_device() {
    int d = 0;
    check(rtGetDevice(&d));
    return d;
}

namespace detail {
/// A timeout for the C API's int milliseconds: negative waits without limit, longer ones are capped.
inline int timeout_ms(std::chrono::milliseconds t) {
    if (t.count() < 0) return -1;
    return t.count() > 0x7fffffff ? 0x7fffffff : static_cast<int>(t.count());
}
}  // namespace detail

/// What a device is and can do (a value copy of rtDeviceProp).
struct DeviceProperties {
    std::string name;             ///< e.g. "cpu:0 (Intel(R) Xeon(R) ...)"
    std::string backend;          ///< "cpu" or "cuda"
    std::size_t total_memory = 0; ///< bytes
    int compute_units = 0;        ///< cores (cpu) or multiprocessors (cuda)
    int device_index = 0;         ///< the index set_device takes
    int backend_ordinal = 0;      ///< index among the devices of the same backend
    int max_threads_per_block = 0;
    std::array<int, 3> max_grid_size{};
    std::array<int, 3> max_block_size{};
    int compute_capability_major = 0; ///< 0 on cpu
    int compute_capability_minor = 0;
    bool unified_addressing = false; ///< device memory is host-addressable (true on cpu)
    size_t local_memory_per_group = 0; ///< bytes of RT_LOCAL arrays + shared_bytes one work-group may use
    size_t max_local_memory_per_group = 0; ///< the most local memory a work-group can be given (opt-in maximum)
    std::array<unsigned char, 16> uuid{};  ///< stable identity of the device
    int subgroup_size = 0;                 ///< warp size (1 on cpu)
    int clock_rate_khz = 0;
    int memory_bus_width = 0;              ///< bits
    int l2_cache_bytes = 0;
    bool concurrent_kernels = false;
    bool managed_memory = false;           ///< ManagedBuffer / rtMallocManaged work
};

/// Properties of `device`.
inline DeviceProperties device_properties(int device) {
    rtDeviceProp p{};
    check(rtGetDeviceProperties(&p, device));
    DeviceProperties r;
    r.name = p.name;
    r.backend = p.backend;
    r.total_memory = p.total_memory;
    r.compute_units = p.compute_units;
    r.device_index = p.device_index;
    r.backend_ordinal = p.backend_ordinal;
    r.max_threads_per_block = p.max_threads_per_block;
    for (int i = 0; i < 3; ++i) {
        r.max_grid_size[i] = p.max_grid_size[i];
        r.max_block_size[i] = p.max_block_size[i];
    }
    r.compute_capability_major = p.compute_capability_major;
    r.compute_capability_minor = p.compute_capability_minor;
    r.unified_addressing = p.unified_addressing != 0;
    r.local_memory_per_group = p.local_memory_per_group;
    r.max_local_memory_per_group = p.max_local_memory_per_group;
    for (int i = 0; i < 16; ++i) r.uuid[i] = p.uuid[i];
    r.subgroup_size = p.subgroup_size;
    r.clock_rate_khz = p.clock_rate_khz;
    r.memory_bus_width = p.memory_bus_width;
    r.l2_cache_bytes = p.l2_cache_bytes;
    r.concurrent_kernels = p.concurrent_kernels != 0;
    r.managed_memory = p.managed_memory != 0;
    return r;
}
/// Properties of the current device.
inline DeviceProperties device_properties() { return device_properties(current_device()); }

/// Waits for all streams of the current device; throws its first asynchronous failure.
inline void synchronize() { check(rtDeviceSynchronize()); }

/// Free and total bytes of the current device.
struct MemInfo {
    std::size_t free = 0;
    std::size_t total = 0;
};
/// Memory of the current device.
inline MemInfo mem_info() {
    MemInfo m;
    check(rtMemGetInfo(&m.free, &m.total));
    return m;
}

// ------------------------------------------------------------------------------------- buffers

template <class T> class DeviceBuffer;

namespace detail {
/// Anything that views contiguous, sized memory: std::span, std::vector, std::array, PinnedBuffer.
template <class R>
concept contiguous_sized = std::ranges::contiguous_range<R> && std::ranges::sized_range<R>;

template <class T> std::span<T> as_span(DeviceBuffer<T>& b) noexcept { return b.span(); }
template <class T> std::span<const T> as_span(const DeviceBuffer<T>& b) noexcept { return b.span(); }
template <contiguous_sized R> auto as_span(R&& r) noexcept {
    return std::span(std::ranges::data(r), std::ranges::size(r));
}
template <class B> using element_of = typename decltype(as_span(std::declval<B&>()))::element_type;

/// Runs a callable queued as a host function (owned by the stream: see host_release).
template <class F> void host_trampoline(void* user_data) noexcept {
    F* fn = static_cast<F*>(user_data);
    try {
        (*fn)();
    } catch (const std::exception& e) {
        rtHostFuncSetError(RT_ERROR_LAUNCH_FAILED, e.what());
    } catch (...) {
        rtHostFuncSetError(RT_ERROR_LAUNCH_FAILED, "host function threw a non-std::exception");
    }
}
/// Destroys the callable once the stream has passed its host function — run, or skipped behind a failure.
template <class F> void host_release(void* user_data) noexcept { delete static_cast<F*>(user_data); }
} // namespace detail

/// A typed buffer: a DeviceBuffer<T>, or any contiguous sized range (span, vector, PinnedBuffer).
template <class B>
concept buffer = requires(B& b) { detail::as_span(b); };

// ------------------------------------------------------------------------------------- launches

/// Extent of a launch in up to three dimensions; an integer converts to a 1-D extent.
struct Dim3 {
    unsigned x = 1, y = 1, z = 1;
    constexpr Dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) noexcept : x(x_), y(y_), z(z_) {}
    constexpr operator rtDim3() const noexcept { return rtDim3{x, y, z}; }
};
/// Shape of a kernel launch: s.launch(k, {.grid = n / 256, .block = 256}, args...).
struct LaunchConfig {
    Dim3 grid;                    ///< work-groups per dimension
    Dim3 block;                   ///< work-items per work-group
    std::size_t shared_bytes = 0; ///< dynamic work-group local memory
    /// Exact work-items per dimension (the items past it never run), 0 = grid * block (rtLaunchConfig::global).
    std::array<unsigned long long, 3> global{};
};

class Kernel;

// ------------------------------------------------------------------------------------- events

class Stream;
class Graph;

/// Options of an Event; designated-initialiser friendly: Event({.enable_timing = false}).
struct EventOptions {
    bool enable_timing = true;  ///< timestamps for elapsed_ms (off = cheaper records)
    bool blocking_sync = false; ///< synchronize() parks at once instead of spinning first
    bool interprocess = false;  ///< shareable with other processes (ipc_handle); needs enable_timing = false
};

/// A marker in a stream's work; move-only owner of an rtEvent_t.
class Event {
public:
    /// Creates an event; never recorded = already complete.
    explicit Event(EventOptions options = {}) {
        unsigned flags = RT_EVENT_DEFAULT;
        if (!options.enable_timing) flags |= RT_EVENT_DISABLE_TIMING;
        if (options.blocking_sync) flags |= RT_EVENT_BLOCKING_SYNC;
        if (options.interprocess) flags |= RT_EVENT_INTERPROCESS;
        check(rtEventCreateWithFlags(&handle_, flags));
    }
    /// The event another process exported (Event::ipc_handle there): records in either process are seen by both.
    static Event from_ipc_handle(const rtIpcEventHandle_t& handle) {
        Event e(nullptr);
        check(rtIpcOpenEventHandle(&e.handle_, handle));
        return e;
    }
    /// A handle another process opens with from_ipc_handle (an event made with interprocess = true).
    rtIpcEventHandle_t ipc_handle() const {
        rtIpcEventHandle_t h{};
        check(rtIpcGetEventHandle(&h, handle_));
        return h;
    }
    Event(Event&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
    Event& operator=(Event&& o) noexcept {
        if (this != &o) {
            reset();
            handle_ = std::exchange(o.handle_, nullptr);
        }
        return *this;
    }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    ~Event() { reset(); }

    /// The C handle (null after a move); ownership stays here.
    rtEvent_t native_handle() const noexcept { return handle_; }

    /// Captures the work queued so far on `stream`.
    void record(Stream& stream);
    /// Captures the work queued so far on the current device's default stream.
    void record() { check(rtEventRecord(handle_, nullptr)); }
    /// True if the captured work has completed (or the event was never recorded).
    bool query() const {
        const rtError_t e = rtEventQuery(handle_);
        if (e == RT_ERROR_NOT_READY) return false;
        check(e);
        return true;
    }
    /// Blocks until the captured work has completed.
    void synchronize() const { check(rtEventSynchronize(handle_)); }
    /// synchronize() that gives up after `timeout`: false if the record has not completed by then.
    bool synchronize_for(std::chrono::milliseconds timeout) const;
    /// Milliseconds from this event's record to `end`'s; both completed and timed.
    float elapsed_ms(const Event& end) const {
        float ms = 0.0f;
        check(rtEventElapsedTime(&ms, handle_, end.handle_));
        return ms;
    }

private:
    explicit Event(std::nullptr_t) noexcept {}
    void reset() noexcept {
        if (handle_) rtEventDestroy(std::exchange(handle_, nullptr));
    }
    rtEvent_t handle_ = nullptr;
};

// ------------------------------------------------------------------------------------- streams

/// An in-order asynchronous queue; move-only owner of an rtStream_t, or a non-owning view of the
/// default stream. Every enqueueing method returns before the work is done.
class Stream {
public:
    /// Creates a stream on the current device.
    Stream() { check(rtStreamCreate(&handle_)); }
    /// Non-owning view of the current device's default stream (the NULL stream), resolved at
    /// each call, so it follows set_device.
    static Stream default_stream() noexcept { return Stream(nullptr, false); }
    /// A stream of `priority` (numerically lower runs first; clamped into stream_priority_range()).
    static Stream with_priority(int priority, unsigned flags = RT_STREAM_DEFAULT) {
        rtStream_t h = nullptr;
        check(rtStreamCreateWithPriority(&h, flags, priority));
        return Stream(h, true);
    }

    Stream(Stream&& o) noexcept
        : handle_(std::exchange(o.handle_, nullptr)), owned_(std::exchange(o.owned_, false)) {}
    Stream& operator=(Stream&& o) noexcept {
        if (this != &o) {
            reset();
            handle_ = std::exchange(o.handle_, nullptr);
            owned_ = std::exchange(o.owned_, false);
        }
        return *this;
    }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    /// Waits for the queued work, then releases the stream (a pending async error is dropped).
    ~Stream() { reset(); }

    /// The C handle; null for the default stream (and after a move).
    rtStream_t native_handle() const noexcept { return handle_; }
    /// True for a view of the default stream.
    bool is_default() const noexcept { return handle_ == nullptr; }

    /// Blocks until all queued work completed; throws the first async failure since the last
    /// synchronize/query (which clears it, so the stream is usable again).
    void synchronize() { check(rtStreamSynchronize(handle_)); }
    /// True if all queued work completed, false if not yet; throws a pending async failure.
    bool query() {
        const rtError_t e = rtStreamQuery(handle_);
        if (e == RT_ERROR_NOT_READY) return false;
        check(e);
        return true;
    }
    /// synchronize() that gives up after `timeout`: false if the work has not completed by then (it stays queued).
    bool synchronize_for(std::chrono::milliseconds timeout) {
        const rtError_t e = rtStreamSynchronizeWithTimeout(handle_, detail::timeout_ms(timeout));
        if (e == RT_ERROR_TIMEOUT) return false;
        check(e);
        return true;
    }
    /// The priority the stream was created with.
    int priority() const {
        int p = 0;
        check(rtStreamGetPriority(handle_, &p));
        return p;
    }
    /// Async copy of `height` rows of `width` bytes, row i from src + i*spitch to dst + i*dpitch.
    void copy_2d(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
                 std::size_t height, rtMemcpyKind kind = RT_MEMCPY_DEFAULT) {
        check(rtMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, handle_));
    }
    /// Async 3-D copy (rtMemcpy3DAsync).
    void copy_3d(const rtMemcpy3DParms& parms) { check(rtMemcpy3DAsync(&parms, handle_)); }
    /// Async fill of `height` rows of `width` bytes, `pitch` apart.
    void memset_2d(void* dst, std::size_t pitch, int value, std::size_t width, std::size_t height) {
        check(rtMemset2DAsync(dst, pitch, value, width, height, handle_));
    }
    /// Async peer copy between devices (rtMemcpyPeerAsync).
    void copy_peer(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes) {
        check(rtMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, handle_));
    }
    /// Stream-ordered hint that managed memory will be used on `device` (RT_CPU_DEVICE_ID: the host).
    void prefetch(const void* ptr, std::size_t bytes, int device) {
        check(rtMemPrefetchAsync(ptr, bytes, device, handle_));
    }
    /// Work queued after this waits for `event`'s latest record; never blocks the host.
    void wait(const Event& event) { check(rtStreamWaitEvent(handle_, event.native_handle())); }
    /// Records `event` here: it completes when the work queued so far has.
    void record(Event& event) { check(rtEventRecord(event.native_handle(), handle_)); }

    /// Async copy of `bytes` bytes; `kind` defaults to inference from the operands.
    void copy(void* dst, const void* src, std::size_t bytes, rtMemcpyKind kind = RT_MEMCPY_DEFAULT) {
        check(rtMemcpyAsync(dst, src, bytes, kind, handle_));
    }
    /// Async typed copy of all of `src` into the front of `dst` (device or host buffers); throws
    /// RT_ERROR_INVALID_VALUE if `dst` is smaller. Host memory must stay alive until it is done.
    template <buffer Dst, buffer Src>
        requires std::same_as<detail::element_of<Dst>, std::remove_const_t<detail::element_of<Dst>>> &&
                 std::same_as<std::remove_const_t<detail::element_of<Dst>>,
                              std::remove_const_t<detail::element_of<Src>>>
    void copy(Dst&& dst, Src&& src) {
        auto d = detail::as_span(dst);
        auto s = detail::as_span(src);
        if (d.size() < s.size())
            throw Error(RT_ERROR_INVALID_VALUE,
                        "copy: destination holds " + std::to_string(d.size()) + " elements, source has " +
                            std::to_string(s.size()));
        copy(d.data(), s.data(), s.size_bytes());
    }
    /// Async memset of `bytes` bytes of device memory to (unsigned char)value.
    void memset(void* dst, int value, std::size_t bytes) { check(rtMemsetAsync(dst, value, bytes, handle_)); }
    /// Async memset of a whole device buffer.
    template <buffer B> void memset(B&& dst, int value) {
        auto d = detail::as_span(dst);
        memset(d.data(), value, d.size_bytes());
    }
    /// Queues any callable `f()` to run on a runtime thread after the preceding work. `f` is moved
    /// to the heap and destroyed once the stream has passed it (it ran, or was skipped behind a failure),
    /// on a runtime thread; an exception from it marks the stream failed (RT_ERROR_LAUNCH_FAILED with the
    /// exception's what()), thrown by the next synchronize/query. `f` (and its destructor) must not wait for
    /// queued work: such calls fail with RT_ERROR_NOT_PERMITTED there.
    template <class F>
        requires std::invocable<std::decay_t<F>&>
    void launch_host_func(F&& f) {
        using Fn = std::decay_t<F>;
        auto box = std::make_unique<Fn>(std::forward<F>(f));
        check(rtLaunchHostFunc(handle_, &detail::host_trampoline<Fn>, box.get()));
        // Owned by the stream from here; if even that cannot be queued, leaking beats freeing it under the
        // queued host function.
        check(rtStreamDeferRelease(handle_, &detail::host_release<Fn>, box.release()));
    }
    /// Queues `kernel` over config.grid x config.block work-items with `args` (DeviceBuffer<T>
    /// arguments pass their device pointer; others are copied by value at the call). Arity and
    /// argument sizes are checked by the library against the kernel's parameters.
    template <class... Args> void launch(const Kernel& kernel, const LaunchConfig& config, Args&&... args);

    /// Starts capturing: the work queued on this stream from now on becomes nodes of a graph instead of running,
    /// until end_capture() (rtStreamBeginCapture; `mode` says which calls the capture forbids meanwhile).
    void begin_capture(rtStreamCaptureMode mode = RT_STREAM_CAPTURE_MODE_GLOBAL) {
        check(rtStreamBeginCapture(handle_, mode));
    }
    /// Ends the capture and returns its graph; an invalidated or unjoined capture throws (the capture is over
    /// either way, and the stream usable again).
    Graph end_capture();
    /// begin_capture(mode), `body()`, end_capture(): the graph of what `body` queued. If `body` throws, the capture
    /// is ended, its graph dropped, and the exception rethrown.
    template <class F>
        requires std::invocable<F&>
    Graph capture(F&& body, rtStreamCaptureMode mode = RT_STREAM_CAPTURE_MODE_GLOBAL);
    /// Whether the stream is capturing (RT_STREAM_CAPTURE_STATUS_ACTIVE, or _INVALIDATED after an error broke the
    /// capture) or not (_NONE).
    rtStreamCaptureStatus capture_status() const {
        rtStreamCaptureStatus status = RT_STREAM_CAPTURE_STATUS_NONE;
        check(rtStreamGetCaptureInfo(handle_, &status, nullptr));
        return status;
    }

private:
    Stream(rtStream_t handle, bool owned) noexcept : handle_(handle), owned_(owned) {}
    void reset() noexcept {
        if (owned_ && handle_) rtStreamDestroy(handle_);
        handle_ = nullptr;
        owned_ = false;
    }
    rtStream_t handle_ = nullptr;
    bool owned_ = true;
};

inline void Event::record(Stream& stream) { check(rtEventRecord(handle_, stream.native_handle())); }

inline bool Event::synchronize_for(std::chrono::milliseconds timeout) const {
    const rtError_t e = rtEventSynchronizeWithTimeout(handle_, detail::timeout_ms(timeout));
    if (e == RT_ERROR_TIMEOUT) return false;
    check(e);
    return true;
}

// ------------------------------------------------------------------------------------- memory

/// `count` elements of device memory on the current device; move-only owner (rtMalloc/rtFree).
/// Not a host range: data()/span() are device pointers, only dereferenceable on the host when
/// device_properties().unified_addressing.
template <class T> class DeviceBuffer {
    static_assert(std::is_trivially_copyable_v<T>, "device memory holds trivially copyable types");

public:
    /// Empty buffer (no allocation).
    DeviceBuffer() noexcept = default;
    /// Allocates `count` uninitialised elements (count 0 allocates nothing).
    explicit DeviceBuffer(std::size_t count) : size_(count) {
        void* p = nullptr;
        check(rtMalloc(&p, detail::element_bytes<T>(count, "DeviceBuffer")));
        data_ = static_cast<T*>(p);
    }
    DeviceBuffer(DeviceBuffer&& o) noexcept
        : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        if (this != &o) {
            reset();
            data_ = std::exchange(o.data_, nullptr);
            size_ = std::exchange(o.size_, 0);
        }
        return *this;
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    /// Waits for the device's queued work (which may still use the buffer), then frees.
    ~DeviceBuffer() { reset(); }

    std::size_t size() const noexcept { return size_; }
    std::size_t bytes() const noexcept { return size_ * sizeof(T); }
    bool empty() const noexcept { return size_ == 0; }
    T* data() noexcept { return data_; }
    const T* data() const noexcept { return data_; }
    /// Device-memory view, for copies and subranges (span().subspan(offset, n)).
    std::span<T> span() noexcept { return {data_, size_}; }
    std::span<const T> span() const noexcept { return {data_, size_}; }

    /// Synchronous H2D of `src` into the front of the buffer (overruns rejected by the library).
    void copy_from_host(std::span<const T> src) {
        check(rtMemcpy(data_, src.data(), src.size_bytes(), RT_MEMCPY_HOST_TO_DEVICE));
    }
    /// Synchronous D2H of the first dst.size() elements into `dst`.
    void copy_to_host(std::span<T> dst) const {
        check(rtMemcpy(dst.data(), data_, dst.size_bytes(), RT_MEMCPY_DEVICE_TO_HOST));
    }
    /// Async H2D on `stream`; `src` must stay alive and unchanged until the copy is done.
    void copy_from_host(std::span<const T> src, Stream& stream) {
        stream.copy(data_, src.data(), src.size_bytes(), RT_MEMCPY_HOST_TO_DEVICE);
    }
    /// Async D2H on `stream`; `dst` must stay alive until the copy is done.
    void copy_to_host(std::span<T> dst, Stream& stream) const {
        stream.copy(dst.data(), data_, dst.size_bytes(), RT_MEMCPY_DEVICE_TO_HOST);
    }

private:
    void reset() noexcept {
        if (data_) rtFree(std::exchange(data_, nullptr));
        size_ = 0;
    }
    T* data_ = nullptr;
    std::size_t size_ = 0;
};

/// `count` elements of managed memory (rtMallocManaged/rtFree): the host and the current device use the same
/// address, so it is a contiguous host range too. Move-only.
template <class T> class ManagedBuffer {
    static_assert(std::is_trivially_copyable_v<T>, "managed memory holds trivially copyable types");

public:
    ManagedBuffer() noexcept = default;
    explicit ManagedBuffer(std::size_t count, unsigned flags = RT_MEM_ATTACH_GLOBAL) : size_(count) {
        void* p = nullptr;
        check(rtMallocManaged(&p, detail::element_bytes<T>(count, "ManagedBuffer"), flags));
        data_ = static_cast<T*>(p);
    }
    ManagedBuffer(ManagedBuffer&& o) noexcept
        : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    ManagedBuffer& operator=(ManagedBuffer&& o) noexcept {
        if (this != &o) {
            reset();
            data_ = std::exchange(o.data_, nullptr);
            size_ = std::exchange(o.size_, 0);
        }
        return *this;
    }
    ManagedBuffer(const ManagedBuffer&) = delete;
    ManagedBuffer& operator=(const ManagedBuffer&) = delete;
    ~ManagedBuffer() { reset(); }

    T* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
    T* begin() const noexcept { return data_; }
    T* end() const noexcept { return data_ + size_; }
    T& operator[](std::size_t i) const noexcept { return data_[i]; }
    std::span<T> span() const noexcept { return {data_, size_}; }
    operator std::span<T>() const noexcept { return span(); }

private:
    void reset() noexcept {
        if (data_) rtFree(std::exchange(data_, nullptr));
        size_ = 0;
    }
    T* data_ = nullptr;
    std::size_t size_ = 0;
};

/// `count` elements of page-locked host memory (rtMallocHost/rtFreeHost); move-only, and a
/// contiguous range, so it converts to std::span<T> and works with std::ranges algorithms.
template <class T> class PinnedBuffer {
    static_assert(std::is_trivially_copyable_v<T>, "pinned memory holds trivially copyable types");

public:
    PinnedBuffer() noexcept = default;
    /// Allocates `count` uninitialised elements.
    explicit PinnedBuffer(std::size_t count) : size_(count) {
        void* p = nullptr;
        if (count != 0) check(rtMallocHost(&p, detail::element_bytes<T>(count, "PinnedBuffer")));
        data_ = static_cast<T*>(p);
    }
    PinnedBuffer(PinnedBuffer&& o) noexcept
        : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
        if (this != &o) {
            reset();
            data_ = std::exchange(o.data_, nullptr);
            size_ = std::exchange(o.size_, 0);
        }
        return *this;
    }
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    ~PinnedBuffer() { reset(); }

    std::size_t size() const noexcept { return size_; }
    std::size_t bytes() const noexcept { return size_ * sizeof(T); }
    bool empty() const noexcept { return size_ == 0; }
    T* data() noexcept { return data_; }
    const T* data() const noexcept { return data_; }
    T* begin() noexcept { return data_; }
    T* end() noexcept { return data_ + size_; }
    const T* begin() const noexcept { return data_; }
    const T* end() const noexcept { return data_ + size_; }
    T& operator[](std::size_t i) noexcept { return data_[i]; }
    const T& operator[](std::size_t i) const noexcept { return data_[i]; }
    std::span<T> span() noexcept { return {data_, size_}; }
    std::span<const T> span() const noexcept { return {data_, size_}; }

private:
    void reset() noexcept {
        if (data_) rtFreeHost(std::exchange(data_, nullptr));
        size_ = 0;
    }
    T* data_ = nullptr;
    std::size_t size_ = 0;
};

// ------------------------------------------------------------------------------------- kernels

/// A kernel of a loaded Module: a non-owning handle, valid while its Module is alive.
class Kernel {
public:
    explicit Kernel(rtFunction_t handle) noexcept : handle_(handle) {}
    rtFunction_t native_handle() const noexcept { return handle_; }
    /// Number of parameters the kernel takes.
    int num_params() const {
        int n = 0;
        check(rtFunctionGetParamInfo(handle_, &n, nullptr));
        return n;
    }
    /// rtFuncGetAttributes: local memory, group-size limit, parameters.
    rtFuncAttributes attributes() const {
        rtFuncAttributes a{};
        check(rtFuncGetAttributes(&a, handle_));
        return a;
    }
    /// Work-groups of `block_size` items resident per compute unit at once.
    int max_active_groups(int block_size, std::size_t shared_bytes = 0) const {
        int n = 0;
        check(rtOccupancyMaxActiveBlocksPerMultiprocessor(&n, handle_, block_size, shared_bytes));
        return n;
    }
    struct BlockSuggestion {
        int min_grid_size = 0; ///< groups that fill the device
        int block_size = 0;    ///< items per group with the best occupancy
    };
    /// rtOccupancyMaxPotentialBlockSize (`limit` 0: the device's).
    BlockSuggestion max_potential_block_size(std::size_t shared_bytes = 0, int limit = 0) const {
        BlockSuggestion s;
        check(rtOccupancyMaxPotentialBlockSize(&s.min_grid_size, &s.block_size, handle_, shared_bytes, limit));
        return s;
    }

private:
    rtFunction_t handle_;
};

/// Compiled kernels for the current device; move-only owner of an rtModule_t.
class Module {
public:
    /// Compiles kernel-dialect source (cached in memory and on disk); a compile error throws
    /// RT_ERROR_COMPILE_FAILED whose message carries the compiler's diagnostics. `options`:
    /// space-separated -O0..-O3, -g, -DNAME[=V], -UNAME, -I<dir>.
    static Module from_source(std::string_view source, std::string_view options = {}) {
        const std::string src(source), opts(options);
        rtModule_t m = nullptr;
        check(rtModuleLoadSource(&m, src.c_str(), opts.empty() ? nullptr : opts.c_str()));
        return Module(m);
    }
    /// Loads a precompiled module (runtime-compile's output).
    static Module from_file(const std::string& path) {
        rtModule_t m = nullptr;
        check(rtModuleLoadFile(&m, path.c_str()));
        return Module(m);
    }
    Module(Module&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
    Module& operator=(Module&& o) noexcept {
        if (this != &o) {
            reset();
            handle_ = std::exchange(o.handle_, nullptr);
        }
        return *this;
    }
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;
    /// Unloads; launches already queued still complete.
    ~Module() { reset(); }

    rtModule_t native_handle() const noexcept { return handle_; }
    /// The RT_KERNEL function `name`; RT_ERROR_NOT_FOUND lists the module's kernels.
    Kernel kernel(const std::string& name) const {
        rtFunction_t f = nullptr;
        check(rtModuleGetFunction(&f, handle_, name.c_str()));
        return Kernel(f);
    }
    /// A module-scope variable (RT_GLOBAL): its device address and size (rtModuleGetGlobal).
    struct Global {
        void* ptr;
        size_t bytes;
    };
    /// The module global `name`, device memory for copies while the module is loaded; an unknown name throws
    /// RT_ERROR_INVALID_VALUE listing the module's globals.
    Global global(const std::string& name) const {
        Global g{nullptr, 0};
        check(rtModuleGetGlobal(&g.ptr, &g.bytes, handle_, name.c_str()));
        return g;
    }

private:
    explicit Module(rtModule_t handle) noexcept : handle_(handle) {}
    void reset() noexcept {
        if (handle_) rtModuleUnload(std::exchange(handle_, nullptr));
    }
    rtModule_t handle_ = nullptr;
};

namespace detail {
/// How a C++ argument reaches a kernel parameter: buffers as their device pointer, others by value.
template <class T> T* kernel_arg(DeviceBuffer<T>& b) noexcept { return b.data(); }
template <class T> const T* kernel_arg(const DeviceBuffer<T>& b) noexcept { return b.data(); }
template <class T> const T& kernel_arg(const T& v) noexcept {
    static_assert(std::is_trivially_copyable_v<T>, "kernel arguments are copied bytewise");
    return v;
}
} // namespace detail

namespace detail {
/// Calls `f(ptrs, sizes)` with the address and size of each converted argument (kernel_arg), materialised so
/// their addresses are stable for the call (the library copies the values before returning); nullptrs when
/// there are none.
template <class F, class... Args> void with_kernel_args(F&& f, Args&&... args) {
    if constexpr (sizeof...(Args) == 0) {
        f(static_cast<void**>(nullptr), static_cast<const std::size_t*>(nullptr));
    } else {
        auto values = std::tuple{kernel_arg(args)...};
        std::apply(
            [&](auto&... v) {
                void* ptrs[] = {const_cast<void*>(static_cast<const void*>(&v))...};
                const std::size_t sizes[] = {sizeof(v)...};
                f(ptrs, sizes);
            },
            values);
    }
}
} // namespace detail

template <class... Args> void Stream::launch(const Kernel& kernel, const LaunchConfig& config, Args&&... args) {
    rtLaunchConfig c = RT_LAUNCH_CONFIG_INIT;  // size set, every other field 0; the fields by name
    c.grid = config.grid;
    c.block = config.block;
    c.shared_bytes = config.shared_bytes;
    c.stream = handle_;
    c.num_args = static_cast<int>(sizeof...(Args));
    for (int d = 0; d < 3; ++d) c.global[d] = config.global[static_cast<std::size_t>(d)];
    detail::with_kernel_args(
        [&](void** ptrs, const std::size_t* sizes) {
            c.arg_sizes = sizes;
            check(rtLaunchKernelEx(kernel.native_handle(), &c, ptrs));
        },
        std::forward<Args>(args)...);
}

// ------------------------------------------------------------------------------------- graphs
//
// A Graph is a set of operations with dependencies (graph.h): captured from a stream (Stream::capture,
// begin_capture/end_capture) or built node by node. GraphExec is a graph checked, memory-planned and ready to
// launch as one operation of a stream, again and again. Both are move-only owners.

/// A node of a Graph: a non-owning handle, valid while its graph is alive.
class GraphNode {
public:
    explicit GraphNode(rtGraphNode_t handle) noexcept : handle_(handle) {}
    rtGraphNode_t native_handle() const noexcept { return handle_; }
    /// Its kind (RT_GRAPH_NODE_TYPE_KERNEL, _MEMCPY, ...).
    rtGraphNodeType type() const {
        rtGraphNodeType t = RT_GRAPH_NODE_TYPE_EMPTY;
        check(rtGraphNodeGetType(handle_, &t));
        return t;
    }
    /// The nodes it runs after.
    std::vector<GraphNode> dependencies() const;
    friend bool operator==(const GraphNode&, const GraphNode&) = default;

private:
    rtGraphNode_t handle_;
};

namespace detail {
/// A list of nodes as the C calls take them: `count` handles read by `get(out, &count)` (rtGraphGetNodes,
/// rtGraphNodeGetDependencies), asked twice: the number, then the handles.
template <class Get> std::vector<GraphNode> node_list(Get&& get) {
    std::size_t count = 0;
    check(get(static_cast<rtGraphNode_t*>(nullptr), &count));
    std::vector<rtGraphNode_t> raw(count);
    if (count) check(get(raw.data(), &count));
    std::vector<GraphNode> nodes;
    nodes.reserve(count);
    for (std::size_t i = 0; i < count; ++i) nodes.emplace_back(raw[i]);
    return nodes;
}
} // namespace detail

inline std::vector<GraphNode> GraphNode::dependencies() const {
    return detail::node_list(
        [&](rtGraphNode_t* out, std::size_t* n) { return rtGraphNodeGetDependencies(handle_, out, n); });
}

/// The nodes a new node runs after: `{a, b}`, or any range of GraphNode (a vector, graph.nodes()).
class Dependencies {
public:
    Dependencies() = default;
    Dependencies(std::initializer_list<GraphNode> nodes) { assign(nodes); }
    template <std::ranges::input_range R>
        requires std::same_as<std::ranges::range_value_t<R>, GraphNode>
    Dependencies(const R& nodes) { assign(nodes); }
    const rtGraphNode_t* data() const noexcept { return handles_.empty() ? nullptr : handles_.data(); }
    std::size_t size() const noexcept { return handles_.size(); }

private:
    template <class R> void assign(const R& nodes) {
        for (const GraphNode& n : nodes) handles_.push_back(n.native_handle());
    }
    std::vector<rtGraphNode_t> handles_;
};

/// An allocation node and the address it gives its graph (valid in the graph's own nodes: graph.h).
struct GraphAllocation {
    GraphNode node;
    void* ptr;
};

/// The planned memory of an executable graph (rtGraphMemoryInfo).
struct GraphMemoryInfo {
    std::size_t arena_bytes = 0;     ///< device memory held for its allocation nodes
    std::size_t allocated_bytes = 0; ///< the sum of their sizes
    std::size_t allocations = 0;     ///< their number
};

/// A refused GraphExec::update: code() is RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE, result() what differed, what()
/// names the first node that differs.
class GraphUpdateError : public Error {
public:
    GraphUpdateError(rtGraphExecUpdateResult result, std::string_view detail)
        : Error(RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE, detail), result_(result) {}
    rtGraphExecUpdateResult result() const noexcept { return result_; }

private:
    rtGraphExecUpdateResult result_;
};

class GraphExec;

namespace detail {
/// Checks `n` arguments of `sizes` bytes against `kernel`'s parameters: a kernel node copies its arguments by the
/// kernel's parameter sizes (rtKernelNodeParams has no sizes), so a wrong count or size is refused here.
inline void check_node_args(const Kernel& kernel, const std::size_t* sizes, std::size_t n) {
    int count = 0;
    check(rtFunctionGetParamInfo(kernel.native_handle(), &count, nullptr));
    std::vector<std::size_t> want(static_cast<std::size_t>(count > 0 ? count : 0));
    if (count > 0) check(rtFunctionGetParamInfo(kernel.native_handle(), &count, want.data()));
    if (want.size() != n)
        throw Error(RT_ERROR_INVALID_VALUE, "kernel node: the kernel takes " + std::to_string(want.size()) +
                                                " argument(s), got " + std::to_string(n));
    for (std::size_t i = 0; i < n; ++i)
        if (want[i] != sizes[i])
            throw Error(RT_ERROR_INVALID_VALUE, "kernel node: argument " + std::to_string(i) + " is " +
                                                    std::to_string(sizes[i]) + " bytes, the kernel's parameter " +
                                                    std::to_string(want[i]));
}
/// rtKernelNodeParams of a launch shape (the argument pointers set by the caller).
inline rtKernelNodeParams kernel_node_params(const Kernel& kernel, const LaunchConfig& config) {
    rtKernelNodeParams p{};
    p.function = kernel.native_handle();
    p.grid = config.grid;
    p.block = config.block;
    p.shared_bytes = config.shared_bytes;
    for (int d = 0; d < 3; ++d) p.global[d] = config.global[static_cast<std::size_t>(d)];
    return p;
}
} // namespace detail

/// A graph of operations; move-only owner of an rtGraph_t. Not thread-safe: one thread at a time builds a graph
/// (as CUDA's). Operands are checked when a node is added, as the stream call of the same kind checks them.
class Graph {
public:
    /// An empty graph on the current device.
    Graph() { check(rtGraphCreate(&handle_, 0)); }
    /// Takes ownership of `handle` (e.g. from rtStreamEndCapture).
    static Graph adopt(rtGraph_t handle) noexcept { return Graph(handle); }
    Graph(Graph&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
    Graph& operator=(Graph&& o) noexcept {
        if (this != &o) {
            reset();
            handle_ = std::exchange(o.handle_, nullptr);
        }
        return *this;
    }
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;
    /// Executable graphs made from it are not affected.
    ~Graph() { reset(); }

    rtGraph_t native_handle() const noexcept { return handle_; }
    /// A deep copy (same nodes, parameters, edges and names; its own node handles).
    Graph clone() const {
        rtGraph_t c = nullptr;
        check(rtGraphClone(&c, handle_));
        return Graph(c);
    }
    /// The nodes in the order they were added.
    std::vector<GraphNode> nodes() const {
        return detail::node_list([&](rtGraphNode_t* out, std::size_t* n) { return rtGraphGetNodes(handle_, out, n); });
    }
    std::size_t size() const {
        std::size_t n = 0;
        check(rtGraphGetNodes(handle_, nullptr, &n));
        return n;
    }

    /// A node that does nothing (a join point).
    GraphNode add_empty(const Dependencies& deps = {}) {
        return added([&](rtGraphNode_t* n) { return rtGraphAddEmptyNode(n, handle_, deps.data(), deps.size()); });
    }
    /// A copy of `bytes` bytes (rtMemcpyAsync's operands).
    GraphNode add_copy(void* dst, const void* src, std::size_t bytes, rtMemcpyKind kind = RT_MEMCPY_DEFAULT,
                       const Dependencies& deps = {}) {
        const rtMemcpyNodeParams p{dst, src, bytes, kind};
        return added([&](rtGraphNode_t* n) { return rtGraphAddMemcpyNode(n, handle_, deps.data(), deps.size(), &p); });
    }
    /// A fill of `bytes` bytes of device memory with (unsigned char)value.
    GraphNode add_memset(void* dst, int value, std::size_t bytes, const Dependencies& deps = {}) {
        const rtMemsetNodeParams p{dst, value, bytes};
        return added([&](rtGraphNode_t* n) { return rtGraphAddMemsetNode(n, handle_, deps.data(), deps.size(), &p); });
    }
    /// A launch of `kernel` (arguments as Stream::launch takes them, copied now; their count and sizes must match
    /// the kernel's parameters).
    template <class... Args>
    GraphNode add_kernel(const Kernel& kernel, const LaunchConfig& config, const Dependencies& deps, Args&&... args) {
        rtKernelNodeParams p = detail::kernel_node_params(kernel, config);
        rtGraphNode_t node = nullptr;
        detail::with_kernel_args(
            [&](void** ptrs, const std::size_t* sizes) {
                detail::check_node_args(kernel, sizes, sizeof...(Args));
                p.args = ptrs;
                check(rtGraphAddKernelNode(&node, handle_, deps.data(), deps.size(), &p));
            },
            std::forward<Args>(args)...);
        return GraphNode(node);
    }
    /// A call of `fn(user_data)` on a runtime thread (as rtLaunchHostFunc). The graph does not own `user_data`:
    /// it must outlive every launch (callables that the graph owns: capture Stream::launch_host_func).
    GraphNode add_host(rtHostFn_t fn, void* user_data, const Dependencies& deps = {}) {
        const rtHostNodeParams p{fn, user_data};
        return added([&](rtGraphNode_t* n) { return rtGraphAddHostNode(n, handle_, deps.data(), deps.size(), &p); });
    }
    /// A node running a copy of `child` taken now.
    GraphNode add_child(const Graph& child, const Dependencies& deps = {}) {
        return added([&](rtGraphNode_t* n) {
            return rtGraphAddChildGraphNode(n, handle_, deps.data(), deps.size(), child.handle_);
        });
    }
    /// Records `event` when the node runs.
    GraphNode add_event_record(Event& event, const Dependencies& deps = {}) {
        return added([&](rtGraphNode_t* n) {
            return rtGraphAddEventRecordNode(n, handle_, deps.data(), deps.size(), event.native_handle());
        });
    }
    /// Waits for `event`'s record current at the launch.
    GraphNode add_event_wait(const Event& event, const Dependencies& deps = {}) {
        return added([&](rtGraphNode_t* n) {
            return rtGraphAddEventWaitNode(n, handle_, deps.data(), deps.size(), event.native_handle());
        });
    }
    /// An allocation of `bytes` from the executable graph's arena; its address is the graph's (graph.h).
    GraphAllocation add_alloc(std::size_t bytes, const Dependencies& deps = {}) {
        rtMemAllocNodeParams p{bytes, nullptr};
        GraphNode node = added([&](rtGraphNode_t* n) {
            return rtGraphAddMemAllocNode(n, handle_, deps.data(), deps.size(), &p);
        });
        return {node, p.ptr};
    }
    /// Frees `ptr`, the address of an allocation node of this graph.
    GraphNode add_free(void* ptr, const Dependencies& deps = {}) {
        return added(
            [&](rtGraphNode_t* n) { return rtGraphAddMemFreeNode(n, handle_, deps.data(), deps.size(), ptr); });
    }

    /// Names the external buffer [ptr, ptr + bytes) for GraphExec::save and GraphExec::set_buffer.
    void bind_name(const std::string& name, void* ptr, std::size_t bytes) {
        check(rtGraphBindName(handle_, name.c_str(), ptr, bytes));
    }
    template <class T> void bind_name(const std::string& name, DeviceBuffer<T>& buffer) {
        bind_name(name, buffer.data(), buffer.bytes());
    }
    /// Writes the graph in Graphviz DOT to `path` (`verbose`: every parameter of every node).
    void to_dot(const std::string& path, bool verbose = false) const {
        check(rtGraphDebugDotPrint(handle_, path.c_str(), verbose ? RT_GRAPH_DEBUG_DOT_FLAGS_VERBOSE : 0u));
    }
    /// Checks, plans and prepares the graph to launch (rtGraphInstantiate).
    GraphExec instantiate() const;

private:
    explicit Graph(rtGraph_t handle) noexcept : handle_(handle) {}
    template <class Add> GraphNode added(Add&& add) {
        rtGraphNode_t node = nullptr;
        check(add(&node));
        return GraphNode(node);
    }
    void reset() noexcept {
        if (handle_) rtGraphDestroy(std::exchange(handle_, nullptr));
    }
    rtGraph_t handle_ = nullptr;
};

/// An executable graph: move-only owner of an rtGraphExec_t. Launches of one executable graph run one at a time,
/// in the order they were made, whichever their streams.
class GraphExec {
public:
    /// Instantiates `graph` (which it does not depend on afterwards).
    explicit GraphExec(const Graph& graph) { check(rtGraphInstantiate(&handle_, graph.native_handle(), 0)); }
    /// An executable graph saved by save(), on the current device; bind its named buffers (set_buffer) before
    /// launching it.
    static GraphExec load(const std::string& path) {
        rtGraphExec_t e = nullptr;
        check(rtGraphExecLoad(&e, path.c_str()));
        return GraphExec(e);
    }
    GraphExec(GraphExec&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
    GraphExec& operator=(GraphExec&& o) noexcept {
        if (this != &o) {
            reset();
            handle_ = std::exchange(o.handle_, nullptr);
        }
        return *this;
    }
    GraphExec(const GraphExec&) = delete;
    GraphExec& operator=(const GraphExec&) = delete;
    /// Returns at once; the executable graph goes once its launches have completed.
    ~GraphExec() { reset(); }

    rtGraphExec_t native_handle() const noexcept { return handle_; }

    /// Launches it on `stream`: one operation of the stream (a failed node fails it, named by the stream's next
    /// synchronize).
    void launch(Stream& stream) { check(rtGraphLaunch(handle_, stream.native_handle())); }
    /// Makes it ready to launch on `stream` without launching it (optional).
    void upload(Stream& stream) { check(rtGraphUpload(handle_, stream.native_handle())); }
    /// Takes the parameters of every node of `graph` (same nodes and edges as the graph it was made from) for the
    /// next launches; refused: GraphUpdateError, and this executable graph is unchanged.
    void update(const Graph& graph) {
        rtGraphExecUpdateResult result = RT_GRAPH_EXEC_UPDATE_SUCCESS;
        const rtError_t e = rtGraphExecUpdate(handle_, graph.native_handle(), &result);
        if (e == RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE) throw GraphUpdateError(result, rtGetLastErrorMessage());
        check(e);
    }
    /// New parameters of kernel node `node` (of the graph it was made from) for the next launches; the kernel may
    /// change to another of the same device.
    template <class... Args>
    void set_kernel_params(GraphNode node, const Kernel& kernel, const LaunchConfig& config, Args&&... args) {
        rtKernelNodeParams p = detail::kernel_node_params(kernel, config);
        detail::with_kernel_args(
            [&](void** ptrs, const std::size_t* sizes) {
                detail::check_node_args(kernel, sizes, sizeof...(Args));
                p.args = ptrs;
                check(rtGraphExecKernelNodeSetParams(handle_, node.native_handle(), &p));
            },
            std::forward<Args>(args)...);
    }
    /// New operands of copy node `node` for the next launches.
    void set_copy_params(GraphNode node, void* dst, const void* src, std::size_t bytes,
                         rtMemcpyKind kind = RT_MEMCPY_DEFAULT) {
        const rtMemcpyNodeParams p{dst, src, bytes, kind};
        check(rtGraphExecMemcpyNodeSetParams(handle_, node.native_handle(), &p));
    }
    /// Binds the named buffer `name` to [ptr, ptr + bytes) for the next launches.
    void set_buffer(const std::string& name, void* ptr, std::size_t bytes) {
        check(rtGraphExecSetBuffer(handle_, name.c_str(), ptr, bytes));
    }
    template <class T> void set_buffer(const std::string& name, DeviceBuffer<T>& buffer) {
        set_buffer(name, buffer.data(), buffer.bytes());
    }
    /// Writes it to `path` (kernels, memory plan, named buffers); device pointers outside named buffers and
    /// allocation nodes, and host functions, cannot be saved (RT_ERROR_NOT_SUPPORTED naming the node).
    void save(const std::string& path) const { check(rtGraphExecSave(handle_, path.c_str())); }
    /// Its arena against the sum of its allocations.
    GraphMemoryInfo memory_info() const {
        rtGraphMemoryInfo m{};
        check(rtGraphExecGetMemoryInfo(handle_, &m));
        return GraphMemoryInfo{m.arena_bytes, m.allocated_bytes, m.allocations};
    }

private:
    explicit GraphExec(rtGraphExec_t handle) noexcept : handle_(handle) {}
    void reset() noexcept {
        if (handle_) rtGraphExecDestroy(std::exchange(handle_, nullptr));
    }
    rtGraphExec_t handle_ = nullptr;
};

inline GraphExec Graph::instantiate() const { return GraphExec(*this); }

inline Graph Stream::end_capture() {
    rtGraph_t g = nullptr;
    check(rtStreamEndCapture(handle_, &g));
    return Graph::adopt(g);
}

template <class F>
    requires std::invocable<F&>
Graph Stream::capture(F&& body, rtStreamCaptureMode mode) {
    begin_capture(mode);
    try {
        body();
    } catch (...) {
        rtGraph_t g = nullptr;
        if (rtStreamEndCapture(handle_, &g) == RT_SUCCESS) rtGraphDestroy(g);
        throw;
    }
    return end_capture();
}

// ------------------------------------------------------------------------------------- the CUDA-level API (issue 20)

/// What the runtime knows about `ptr` (unknown memory: RT_MEMORY_TYPE_UNREGISTERED).
inline rtPointerAttributes pointer_attributes(const void* ptr) {
    rtPointerAttributes a{};
    check(rtPointerGetAttributes(&a, ptr));
    return a;
}
/// One attribute of `device` (rtDeviceGetAttribute).
inline int device_attribute(rtDeviceAttr attr, int device) {
    int v = 0;
    check(rtDeviceGetAttribute(&v, attr, device));
    return v;
}
inline int device_attribute(rtDeviceAttr attr) { return device_attribute(attr, current_device()); }

struct PriorityRange {
    int least = 0;    ///< the default priority
    int greatest = 0; ///< the most urgent (numerically lowest)
};
/// The stream priorities of the current device.
inline PriorityRange stream_priority_range() {
    PriorityRange r;
    check(rtDeviceGetStreamPriorityRange(&r.least, &r.greatest));
    return r;
}

/// Whether `device`'s kernels can use memory of `peer`.
inline bool can_access_peer(int device, int peer) {
    int can = 0;
    check(rtDeviceCanAccessPeer(&can, device, peer));
    return can != 0;
}
/// Lets the current device's kernels use memory of `peer` (throws if it cannot, or already does).
inline void enable_peer_access(int peer) { check(rtDeviceEnablePeerAccess(peer, 0)); }
/// Synchronous peer copy (rtMemcpyPeer).
inline void copy_peer(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes) {
    check(rtMemcpyPeer(dst, dst_device, src, src_device, bytes));
}

// ---- inter-process handles (docs/memory.md "Sharing memory and events between processes")

/// A handle to the device allocation `ptr` lies in, for another process's IpcMemory (rtIpcGetMemHandle).
inline rtIpcMemHandle_t ipc_mem_handle(void* ptr) {
    rtIpcMemHandle_t h{};
    check(rtIpcGetMemHandle(&h, ptr));
    return h;
}

/// Device memory another process exported, mapped while this object lives (rtIpcOpenMemHandle; the destructor
/// closes it). Move-only.
class IpcMemory {
public:
    IpcMemory() noexcept = default;
    explicit IpcMemory(const rtIpcMemHandle_t& handle, unsigned flags = 0) {
        check(rtIpcOpenMemHandle(&data_, handle, flags));
    }
    IpcMemory(IpcMemory&& o) noexcept : data_(std::exchange(o.data_, nullptr)) {}
    IpcMemory& operator=(IpcMemory&& o) noexcept {
        if (this != &o) {
            reset();
            data_ = std::exchange(o.data_, nullptr);
        }
        return *this;
    }
    IpcMemory(const IpcMemory&) = delete;
    IpcMemory& operator=(const IpcMemory&) = delete;
    ~IpcMemory() { reset(); }

    /// The allocation's base in this process (null after a move or close).
    void* get() const noexcept { return data_; }
    /// Its size in bytes.
    std::size_t size() const { return data_ ? pointer_attributes(data_).size : 0; }
    /// Unmaps it now (once the work queued so far has run), reporting a failure.
    void close() {
        if (data_) check(rtIpcCloseMemHandle(std::exchange(data_, nullptr)));
    }

private:
    void reset() noexcept {
        if (data_) rtIpcCloseMemHandle(std::exchange(data_, nullptr));
    }
    void* data_ = nullptr;
};

/// A pitched 2-D allocation (rtMallocPitch): `height` rows of `width` bytes, `pitch` apart. Move-only owner.
class PitchedBuffer {
public:
    PitchedBuffer() noexcept = default;
    PitchedBuffer(std::size_t width, std::size_t height) : width_(width), height_(height) {
        check(rtMallocPitch(&data_, &pitch_, width, height));
    }
    PitchedBuffer(PitchedBuffer&& o) noexcept
        : data_(std::exchange(o.data_, nullptr)), pitch_(std::exchange(o.pitch_, 0)), width_(std::exchange(o.width_, 0)),
          height_(std::exchange(o.height_, 0)) {}
    PitchedBuffer& operator=(PitchedBuffer&& o) noexcept {
        if (this != &o) {
            reset();
            data_ = std::exchange(o.data_, nullptr);
            pitch_ = std::exchange(o.pitch_, 0);
            width_ = std::exchange(o.width_, 0);
            height_ = std::exchange(o.height_, 0);
        }
        return *this;
    }
    PitchedBuffer(const PitchedBuffer&) = delete;
    PitchedBuffer& operator=(const PitchedBuffer&) = delete;
    ~PitchedBuffer() { reset(); }

    void* data() const noexcept { return data_; }
    std::size_t pitch() const noexcept { return pitch_; }
    std::size_t width() const noexcept { return width_; }
    std::size_t height() const noexcept { return height_; }
    /// As rtMemcpy3D takes it (one slice of `height` rows).
    rtPitchedPtr pitched_ptr() const noexcept { return make_rtPitchedPtr(data_, pitch_, width_, height_); }

private:
    void reset() noexcept {
        if (data_) rtFree(std::exchange(data_, nullptr));
    }
    void* data_ = nullptr;
    std::size_t pitch_ = 0, width_ = 0, height_ = 0;
};

/// Destroys the current device's streams, events, modules and allocations (rtDeviceReset): every RAII object of
/// them must be gone or abandoned first — their destructors would release handles that no longer exist.
inline void device_reset() { check(rtDeviceReset()); }

// ---- memory pool objects (rtMemPool_t)

/// What a created pool is made with (rtMemPoolProps).
struct MemPoolOptions {
    int device = -1;            ///< -1: the current device
    std::size_t max_size = 0;   ///< address space it may use; 0: the device's memory
    std::uint64_t release_threshold = 0;  ///< bytes it keeps reserved at a synchronize (CUDA's default: 0)
};

/// A memory pool (rtMemPool_t). Made with options, it owns a created pool and destroys it (memory still allocated
/// from it stays valid; the pool goes once that is freed). default_pool() and current() give views that own nothing.
/// Move-only.
class MemPool {
public:
    explicit MemPool(MemPoolOptions options = {}) : device_(options.device < 0 ? current_device() : options.device) {
        rtMemPoolProps props{};
        props.alloc_type = RT_MEM_ALLOCATION_TYPE_PINNED;
        props.handle_types = RT_MEM_HANDLE_TYPE_NONE;
        props.location.type = RT_MEM_LOCATION_TYPE_DEVICE;
        props.location.id = device_;
        props.max_size = options.max_size;
        check(rtMemPoolCreate(&handle_, &props));
        owned_ = true;
        if (options.release_threshold) set_release_threshold(options.release_threshold);
    }
    /// The device's default pool (the allocator the enable_* switches configure); owns nothing.
    static MemPool default_pool(int device) {
        rtMemPool_t h = nullptr;
        check(rtDeviceGetDefaultMemPool(&h, device));
        return MemPool(h, device);
    }
    /// The pool rtMallocAsync uses on `device` now; owns nothing.
    static MemPool current(int device) {
        rtMemPool_t h = nullptr;
        check(rtDeviceGetMemPool(&h, device));
        return MemPool(h, device);
    }
    MemPool(MemPool&& o) noexcept
        : handle_(std::exchange(o.handle_, nullptr)), device_(o.device_), owned_(std::exchange(o.owned_, false)) {}
    MemPool& operator=(MemPool&& o) noexcept {
        if (this != &o) {
            reset();
            handle_ = std::exchange(o.handle_, nullptr);
            device_ = o.device_;
            owned_ = std::exchange(o.owned_, false);
        }
        return *this;
    }
    MemPool(const MemPool&) = delete;
    MemPool& operator=(const MemPool&) = delete;
    ~MemPool() { reset(); }

    rtMemPool_t native_handle() const noexcept { return handle_; }
    int device() const noexcept { return device_; }
    bool owns() const noexcept { return owned_; }

    /// Stream-ordered allocation from this pool on `stream` (of the pool's device); free it with free_async().
    void* allocate(std::size_t bytes, Stream& stream);
    /// Makes this the pool rtMallocAsync uses on its device.
    void make_current() const { check(rtDeviceSetMemPool(device_, handle_)); }
    /// Returns unused reserved memory to the system until at most `keep` bytes stay reserved.
    void trim_to(std::size_t keep) const { check(rtMemPoolTrimTo(handle_, keep)); }

    std::uint64_t release_threshold() const { return u64(RT_MEMPOOL_ATTR_RELEASE_THRESHOLD); }
    void set_release_threshold(std::uint64_t bytes) const { set_u64(RT_MEMPOOL_ATTR_RELEASE_THRESHOLD, bytes); }
    std::uint64_t reserved() const { return u64(RT_MEMPOOL_ATTR_RESERVED_MEM_CURRENT); }
    std::uint64_t reserved_high() const { return u64(RT_MEMPOOL_ATTR_RESERVED_MEM_HIGH); }
    std::uint64_t used() const { return u64(RT_MEMPOOL_ATTR_USED_MEM_CURRENT); }
    std::uint64_t used_high() const { return u64(RT_MEMPOOL_ATTR_USED_MEM_HIGH); }
    /// Both high-water marks restart from the current values.
    void reset_high_marks() const {
        set_u64(RT_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0);
        set_u64(RT_MEMPOOL_ATTR_USED_MEM_HIGH, 0);
    }
    /// One of the reuse attributes (RT_MEMPOOL_ATTR_REUSE_*).
    bool reuse(rtMemPoolAttr attr) const {
        int v = 0;
        check(rtMemPoolGetAttribute(handle_, attr, &v));
        return v != 0;
    }
    void set_reuse(rtMemPoolAttr attr, bool on) const {
        int v = on ? 1 : 0;
        check(rtMemPoolSetAttribute(handle_, attr, &v));
    }

private:
    MemPool(rtMemPool_t h, int device) noexcept : handle_(h), device_(device) {}
    std::uint64_t u64(rtMemPoolAttr attr) const {
        std::uint64_t v = 0;
        check(rtMemPoolGetAttribute(handle_, attr, &v));
        return v;
    }
    void set_u64(rtMemPoolAttr attr, std::uint64_t v) const { check(rtMemPoolSetAttribute(handle_, attr, &v)); }
    void reset() noexcept {
        if (handle_ && owned_) rtMemPoolDestroy(handle_);
        handle_ = nullptr;
        owned_ = false;
    }
    rtMemPool_t handle_ = nullptr;
    int device_ = 0;
    bool owned_ = false;
};

inline void* MemPool::allocate(std::size_t bytes, Stream& stream) {
    void* p = nullptr;
    check(rtMallocFromPoolAsync(&p, bytes, handle_, stream.native_handle()));
    return p;
}

/// Stream-ordered free (rtFreeAsync) of memory from a pool: back to the pool it came from.
inline void free_async(void* ptr, Stream& stream) { check(rtFreeAsync(ptr, stream.native_handle())); }

} // namespace runtime

#endif // RUNTIME_RUNTIME_HPP
