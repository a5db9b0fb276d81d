// runtime.hpp — the C++ API: RAII handles and exceptions, header-only over the C API (runtime.h).
//
// The C ABI in runtime.h stays the only exported surface; everything here is inline. Conventions:
//  - every failing C call becomes a runtime::Error carrying the rtError_t (see check());
//  - handles (Stream, Event, DeviceBuffer, PinnedBuffer) are move-only owners; a moved-from
//    handle is empty and its destructor does nothing;
//  - destructors never throw: they release the resource and ignore late errors, like the C++
//    standard library's own RAII types;
//  - all functions are as thread-safe as the C calls they wrap (the whole C API is thread-safe);
//    a single handle object must not be moved/assigned while another thread uses it.
#ifndef RUNTIME_RUNTIME_HPP
#define RUNTIME_RUNTIME_HPP

#include <runtime/runtime.h>

#include <array>
#include <concepts>
#include <cstddef>
#include <exception>
#include <memory>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

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

/// Options of an Event; designated-initialiser friendly: Event({.enable_timing = false}).
struct EventOptions {
    bool enable_timing = true;  ///< timestamps for elapsed_ms (off = cheaper records)
    bool blocking_sync = false; ///< synchronize() parks at once instead of spinning first
};

/// A marker in a stream's work; move-only owner of an rtEvent_t.
class Event {
public:
    /// Creates an event; never recorded = already complete.
    explicit Event(EventOptions options = {}) {
        unsigned flags = RT_EVENT_DEFAULT;
        if (!options.enable_timing) flags |= RT_EVENT_DISABLE_TIMING;
        if (options.blocking_sync) flags |= RT_EVENT_BLOCKING_SYNC;
        check(rtEventCreateWithFlags(&handle_, flags));
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
    /// Milliseconds from this event's record to `end`'s; both completed and timed.
    float elapsed_ms(const Event& end) const {
        float ms = 0.0f;
        check(rtEventElapsedTime(&ms, handle_, end.handle_));
        return ms;
    }

private:
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

template <class... Args> void Stream::launch(const Kernel& kernel, const LaunchConfig& config, Args&&... args) {
    rtLaunchConfig c = RT_LAUNCH_CONFIG_INIT;  // size set, every other field 0; the fields by name
    c.grid = config.grid;
    c.block = config.block;
    c.shared_bytes = config.shared_bytes;
    c.stream = handle_;
    c.num_args = static_cast<int>(sizeof...(Args));
    for (int d = 0; d < 3; ++d) c.global[d] = config.global[static_cast<std::size_t>(d)];
    if constexpr (sizeof...(Args) == 0) {
        check(rtLaunchKernelEx(kernel.native_handle(), &c, nullptr));
    } else {
        // Materialise each converted argument so its address is stable for the call (the library
        // copies the values before returning).
        auto values = std::tuple{detail::kernel_arg(args)...};
        std::apply(
            [&](auto&... v) {
                void* ptrs[] = {const_cast<void*>(static_cast<const void*>(&v))...};
                const std::size_t sizes[] = {sizeof(v)...};
                c.arg_sizes = sizes;
                check(rtLaunchKernelEx(kernel.native_handle(), &c, ptrs));
            },
            values);
    }
}

} // namespace runtime

#endif // RUNTIME_RUNTIME_HPP
