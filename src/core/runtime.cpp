// The process-wide runtime: options, lazy initialisation, device table, handle resolution.
#include "core/runtime.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "graph/capture.hpp"
#include "kernels/target.hpp"
#include "observe/log.hpp"
#include "observe/usage.hpp"

namespace rt {

namespace detail {
std::atomic<Runtime*> g_runtime{nullptr};
}
using detail::g_runtime;

namespace {
std::mutex g_init_mutex;
std::atomic<uint64_t> g_generations{0};  // runtimes created so far (Runtime::generation)
thread_local int t_current_device = 0;

bool parse_int(const std::string& text, int* out) {
    if (text.empty()) return false;
    char* end = nullptr;
    long v = std::strtol(text.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v > 1024) return false;
    *out = static_cast<int>(v);
    return true;
}

std::string trim(std::string s) {
    size_t b = s.find_first_not_of(" \t\n");
    size_t e = s.find_last_not_of(" \t\n");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}
}  // namespace

namespace {
std::atomic<uint64_t> g_device_serials{0};
}

CoreDevice::CoreDevice(int index, std::unique_ptr<backend::Device> impl, bool per_thread_default)
    : index_(index), impl_(std::move(impl)), per_thread_default_(per_thread_default), serial_(++g_device_serials) {
    label_ = impl_->info().backend + ":" + std::to_string(impl_->info().backend_ordinal);
    default_stream_ = std::make_shared<Stream>(*this, impl_->create_queue_impl(RT_STREAM_DEFAULT, 0), true);
    default_stream_->errors().set_origin("the default stream of " + label_);
    if (!per_thread_default_) default_stream_->make_legacy_default();
    streams_.push_back(default_stream_);
    memory_ = std::make_unique<DeviceMemory>(*this);
}

const std::shared_ptr<Stream>& CoreDevice::thread_default_stream() const {
    // Cached per thread by the device's serial (a device object of a later runtime may reuse an address).
    struct Cached {
        uint64_t serial;
        const std::shared_ptr<Stream>* stream;
    };
    thread_local std::vector<Cached> cache;
    for (const Cached& c : cache)
        if (c.serial == serial_) return *c.stream;
    auto* self = const_cast<CoreDevice*>(this);
    // Like CUDA's per-thread default stream: an ordinary stream of the thread, with no implicit ordering.
    auto s = std::make_shared<Stream>(*self, impl_->create_queue_impl(RT_STREAM_NON_BLOCKING, 0), false,
                                      RT_STREAM_NON_BLOCKING);
    s->errors().set_origin(format("the default stream of %s for thread %zu", label_.c_str(),
                                  std::hash<std::thread::id>{}(std::this_thread::get_id())));
    self->add_stream(s);
    const std::shared_ptr<Stream>* held;
    {
        std::lock_guard lock(thread_streams_mutex_);
        // A deque's elements stay put as it grows: the cached pointers stay valid until the device goes.
        thread_streams_.push_back(std::move(s));
        held = &thread_streams_.back();
    }
    cache.push_back({serial_, held});
    return *held;
}

// The pool goes before the streams that its pending frees refer to, and before the backend device.
CoreDevice::~CoreDevice() {
    memory_.reset();
    streams_.clear();
    thread_streams_.clear();
    default_stream_.reset();
}

std::vector<std::shared_ptr<Stream>> CoreDevice::streams() const {
    std::lock_guard lock(streams_mutex_);
    return streams_;
}

void CoreDevice::add_stream(std::shared_ptr<Stream> stream) {
    const bool joins = !per_thread_default_ && !stream->is_default() && stream->blocking();
    if (joins) stream->join_legacy(default_stream_.get());
    std::lock_guard lock(streams_mutex_);
    streams_.push_back(std::move(stream));
    if (joins) legacy_blocking_.fetch_add(1, std::memory_order_relaxed);
}

void CoreDevice::remove_stream(const Stream* stream) {
    std::lock_guard lock(streams_mutex_);
    std::erase_if(streams_, [&](const auto& s) {
        if (s.get() != stream) return false;
        retired_operations_ += s->operations();
        retired_kernels_ += s->kernels_launched();
        if (s->joined_legacy()) legacy_blocking_.fetch_sub(1, std::memory_order_relaxed);
        return true;
    });
}

CoreDevice::StreamCounts CoreDevice::stream_counts() const {
    std::lock_guard lock(streams_mutex_);
    StreamCounts c{static_cast<uint32_t>(streams_.size()), retired_operations_, retired_kernels_};
    for (const auto& s : streams_) {
        c.operations += s->operations();
        c.kernels_launched += s->kernels_launched();
    }
    return c;
}

bool CoreDevice::enable_peer(CoreDevice& peer) {
    std::lock_guard lock(peers_mutex_);
    if (std::find(peers_.begin(), peers_.end(), &peer) != peers_.end()) return false;
    impl_->enable_peer_access_impl(peer.impl());
    peers_.push_back(&peer);
    return true;
}

// Device order: the registry's (cpu, then cuda) — unless options.first_backend names a backend that has devices,
// which then come first (so device 0, every thread's initial device, is that backend's first).
Runtime::Runtime(InitOptions options)
    : options_(std::move(options)), generation_(++g_generations), timeline_(std::make_unique<Timeline>()) {
    for (const InitOptions::PerBackend& b : options_.backends) backends_.push_back(b.entry->create(*b.options));
    for (const auto& b : backends_) {
        if (b->device_count() > 0)
            RT_LOG(backend, info, "backend %s: %d device(s)%s%s", b->name(), b->device_count(),
                   b->unavailable_reason().empty() ? "" : "; ", b->unavailable_reason().c_str());
        else
            RT_LOG(backend, info, "backend %s: no devices: %s", b->name(), b->unavailable_reason().c_str());
    }
    for (const backend::BackendEntry& e : backend::registry().entries())
        if (!e.absent_reason.empty())
            RT_LOG(backend, info, "backend %s: not built: %s", e.name.c_str(), e.absent_reason.c_str());
    std::stable_partition(backends_.begin(), backends_.end(), [&](const auto& b) {
        return b->name() == options_.first_backend && b->device_count() > 0;
    });
    for (auto& b : backends_)
        for (int i = 0; i < b->device_count(); ++i)
            devices_.push_back(std::make_unique<CoreDevice>(static_cast<int>(devices_.size()), b->create_device(i),
                                                            options_.per_thread_default_stream));
    for (auto& d : devices_) d->impl().kernel_modules().set_limit(options_.module_cache_limit);
    trace::start_from_environment();
}

void Runtime::wait_all_idle() const {
    for (const auto& d : devices_)
        for (auto& s : d->streams()) s->wait_idle();
}

void Runtime::published() {
    if (options_.publish_usage) usage_ = observe::UsagePublisher::start(*this);
}

void Runtime::shutdown() {
    refuse_wait_in_queue_context("rtFinalize");
    if (usage_) usage_->stop();  // its thread reads the runtime, which is about to be unpublished
    // Executable graphs and graphs release through the timeline (arenas, rtStreamDeferRelease of a capture): they go
    // first, so that the waits below run those releases too — the graphs of captures under way included.
    graph::end_all_captures();
    clear_graphs();
    // Actions may queue work or defer more (a release dropping the last reference to memory): until quiet.
    do {
        wait_all_idle();
        timeline_->drain();
    } while (!timeline_->idle());
    wait_all_idle();
}

Runtime::~Runtime() {
    usage_.reset();
    // Nothing is pending after shutdown(): stop the thread, but keep the object until the backends (whose
    // executors may still be in notify_timeline) are gone.
    timeline_->stop();
    clear_graphs();  // none left after shutdown(); kept for a runtime that never ran it
    // Streams, events and memory belong to backend devices: release them before the devices go.
    events.clear();
    streams.clear();
    functions.clear();
    modules.clear();
    for (const Allocation& a : registry.take_all()) {
        // Pooled memory goes with its pool; registered host memory belongs to the user.
        if (a.module_global) continue;  // the module's memory, gone with its code
        if (a.ipc_opened) {             // another process's memory: only this mapping goes
            a.device->impl().ipc_close_impl(reinterpret_cast<void*>(a.base), a.size);
            continue;
        }
        if (a.kind == MemoryKind::device && !a.pooled)
            a.device->impl().free_impl(reinterpret_cast<void*>(a.base), a.size);
        else if (a.kind == MemoryKind::pinned_host)
            (a.host_owner ? a.host_owner : a.device)->impl().free_host_impl(reinterpret_cast<void*>(a.base), a.size);
    }
    devices_.clear();
    backends_.clear();
    timeline_.reset();
}

void Runtime::clear_graphs() {
    graph_execs.clear();
    graph_nodes.clear();  // aliasing references that keep their graphs alive
    graphs.clear();
}

CoreDevice& Runtime::device(int index) const {
    if (index < 0 || index >= device_count())
        fail(RT_ERROR_INVALID_DEVICE, "device %d does not exist (expected 0..%d; %d device(s) present)", index,
             device_count() - 1, device_count());
    return *devices_[static_cast<size_t>(index)];
}

CoreDevice& Runtime::current_device() const {
    int index = t_current_device;
    if (index >= device_count())
        fail(RT_ERROR_INVALID_DEVICE, "the current device %d no longer exists (%d device(s) present)", index,
             device_count());
    return *devices_[static_cast<size_t>(index)];
}

void Runtime::refuse_stream(rtStream_t handle) {
    fail(RT_ERROR_INVALID_HANDLE, "stream %p is not a live stream (never created, destroyed, or not a stream handle)",
         static_cast<void*>(handle));
}

int Runtime::find_device(const std::string& name) const {
    // "backend" or "backend:N", spaces allowed around the parts, case-insensitive backend.
    std::string text = trim(name), backend_name;
    size_t colon = text.find(':');
    backend_name = trim(text.substr(0, colon));
    for (char& c : backend_name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    int ordinal = 0;
    bool ok = !backend_name.empty();
    for (char c : backend_name) ok = ok && (std::isalpha(static_cast<unsigned char>(c)) || c == '_');
    if (ok && colon != std::string::npos) ok = parse_int(trim(text.substr(colon + 1)), &ordinal);
    std::string available;
    for (const auto& d : devices_) available += (available.empty() ? "" : ", ") + d->label();
    if (!ok)
        fail(RT_ERROR_INVALID_DEVICE, "'%s' is not a device name (expected backend or backend:N, e.g. cpu:0 or cuda:0; "
             "available: %s)", name.c_str(), available.c_str());
    for (const auto& d : devices_)
        if (d->info().backend == backend_name && d->info().backend_ordinal == ordinal) return d->index();
    for (const auto& b : backends_) {
        if (b->name() != backend_name) continue;
        if (b->device_count() == 0)
            fail(RT_ERROR_INVALID_DEVICE, "no device '%s': the %s backend has no devices (%s); available: %s",
                 name.c_str(), backend_name.c_str(), b->unavailable_reason().c_str(), available.c_str());
        // Devices left out (a GPU that failed to start) are why the ordinals may not run from 0.
        std::string why = b->unavailable_reason();
        if (why.empty()) why = format("%s:0..%d", backend_name.c_str(), b->device_count() - 1);
        fail(RT_ERROR_INVALID_DEVICE, "no device '%s': the %s backend has %d device(s) (%s); available: %s",
             name.c_str(), backend_name.c_str(), b->device_count(), why.c_str(), available.c_str());
    }
    if (const backend::BackendEntry* e = backend::registry().find(backend_name))
        fail(RT_ERROR_INVALID_DEVICE, "no device '%s': this build of the runtime has no %s backend (%s); available: %s",
             name.c_str(), backend_name.c_str(), e->absent_reason.c_str(), available.c_str());
    fail(RT_ERROR_INVALID_DEVICE, "no device '%s': unknown backend '%s' (expected %s); available: %s", name.c_str(),
         backend_name.c_str(), backend::registry().names().c_str(), available.c_str());
}

std::shared_ptr<Stream> Runtime::stream(rtStream_t handle) const {
    if (!handle) return current_device().default_stream();
    auto s = streams.find(reinterpret_cast<uint64_t>(handle));
    if (!s) refuse_stream(handle);
    return s;
}

Stream& Runtime::stream(rtStream_t handle, const StreamTable::Borrow& borrowed) const {
    if (!handle) return *current_device().default_stream();
    if (!borrowed) refuse_stream(handle);
    return *borrowed;
}

std::shared_ptr<Event> Runtime::event(rtEvent_t handle) const {
    if (!handle) fail(RT_ERROR_INVALID_HANDLE, "event is NULL (expected a handle from rtEventCreate)");
    auto e = events.find(reinterpret_cast<uint64_t>(handle));
    if (!e)
        fail(RT_ERROR_INVALID_HANDLE, "event %p is not a live event (never created, destroyed, or not an event handle)",
             static_cast<void*>(handle));
    return e;
}

Runtime& detail::create_runtime() {
    std::lock_guard lock(g_init_mutex);
    Runtime* r = g_runtime.load(std::memory_order_relaxed);
    if (!r) {
        r = new Runtime(parse_options(nullptr));
        g_runtime.store(r, std::memory_order_release);
        r->published();
    }
    return *r;
}

void init(const char* options) {
    InitOptions o = parse_options(options);
    std::lock_guard lock(g_init_mutex);
    Runtime* r = g_runtime.load(std::memory_order_relaxed);
    if (r) {
        if (options && *options && !r->options().same_as(o))
            fail(RT_ERROR_INVALID_VALUE,
                 "rtInit: the runtime is already initialised with other options; call rtFinalize first");
        return;
    }
    r = new Runtime(std::move(o));
    g_runtime.store(r, std::memory_order_release);
    r->published();
}

void finalize() {
    std::lock_guard lock(g_init_mutex);
    Runtime* r = g_runtime.load(std::memory_order_acquire);
    if (!r) return;
    r->shutdown();
    g_runtime.store(nullptr, std::memory_order_release);
    delete r;
    t_current_device = 0;
}

int& current_device_index() { return t_current_device; }

}  // namespace rt
