// The process-wide runtime: options, lazy initialisation, device table, handle resolution.
#include "core/runtime.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace rt {

namespace detail {
std::atomic<Runtime*> g_runtime{nullptr};
}
using detail::g_runtime;

namespace {
std::mutex g_init_mutex;
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

void apply_option(backend::Options& o, const std::string& key, const std::string& value, const char* source) {
    if (key == "cpu_devices") {
        if (!parse_int(value, &o.cpu_devices) || o.cpu_devices < 1)
            fail(RT_ERROR_INVALID_VALUE, "%s: cpu_devices='%s' is not a device count (expected an integer 1..1024)",
                 source, value.c_str());
    } else if (key == "cpu_memory") {
        if (!parse_size(value, &o.cpu_memory) || o.cpu_memory == 0)
            fail(RT_ERROR_INVALID_VALUE, "%s: cpu_memory='%s' is not a size (expected bytes, e.g. 1048576, 512M, 2G)",
                 source, value.c_str());
    } else if (key == "cpu_stream_min_bytes") {
        if (!parse_size(value, &o.cpu_stream_min_bytes) || o.cpu_stream_min_bytes == backend::Options::kAuto)
            fail(RT_ERROR_INVALID_VALUE,
                 "%s: cpu_stream_min_bytes='%s' is not a size (expected bytes, e.g. 0, 4096, 32M)", source,
                 value.c_str());
    } else if (key == "executors") {
        if (!parse_int(value, &o.executors) || o.executors < 1)
            fail(RT_ERROR_INVALID_VALUE, "%s: executors='%s' is not a thread count (expected an integer 1..1024)",
                 source, value.c_str());
    } else if (key == "backend") {
        if (value != "cpu" && value != "cuda")
            fail(RT_ERROR_INVALID_VALUE, "%s: backend='%s' is not a backend (expected cpu or cuda)", source, value.c_str());
        o.backend = value;
    } else {
        fail(RT_ERROR_INVALID_VALUE, "%s: unknown option '%s' (known: cpu_devices, cpu_memory, cpu_stream_min_bytes, executors, backend)",
             source, key.c_str());
    }
}
}  // namespace

bool parse_size(const std::string& text, size_t* out) {
    if (text.empty() || !(text[0] >= '0' && text[0] <= '9')) return false;
    char* end = nullptr;
    unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    std::string suffix = end;
    unsigned shift = 0;
    if (suffix == "" || suffix == "B") shift = 0;
    else if (suffix == "K" || suffix == "k" || suffix == "KiB") shift = 10;
    else if (suffix == "M" || suffix == "m" || suffix == "MiB") shift = 20;
    else if (suffix == "G" || suffix == "g" || suffix == "GiB") shift = 30;
    else if (suffix == "T" || suffix == "t" || suffix == "TiB") shift = 40;
    else return false;
    if (shift && v > (~0ull >> shift)) return false;
    *out = static_cast<size_t>(v << shift);
    return true;
}

backend::Options parse_options(const char* text) {
    backend::Options o;
    if (const char* e = std::getenv("RUNTIME_CPU_DEVICES"); e && *e) apply_option(o, "cpu_devices", e, "RUNTIME_CPU_DEVICES");
    if (const char* e = std::getenv("RUNTIME_CPU_MEMORY"); e && *e) apply_option(o, "cpu_memory", e, "RUNTIME_CPU_MEMORY");
    if (const char* e = std::getenv("RUNTIME_CPU_STREAM_MIN_BYTES"); e && *e)
        apply_option(o, "cpu_stream_min_bytes", e, "RUNTIME_CPU_STREAM_MIN_BYTES");
    if (const char* e = std::getenv("RUNTIME_EXECUTORS"); e && *e) apply_option(o, "executors", e, "RUNTIME_EXECUTORS");
    if (const char* e = std::getenv("RUNTIME_BACKEND"); e && *e) apply_option(o, "backend", e, "RUNTIME_BACKEND");
    if (!text) return o;
    std::string all = text;
    size_t pos = 0;
    while (pos <= all.size()) {
        size_t end = all.find(';', pos);
        if (end == std::string::npos) end = all.size();
        std::string item = trim(all.substr(pos, end - pos));
        pos = end + 1;
        if (item.empty()) continue;
        size_t eq = item.find('=');
        if (eq == std::string::npos)
            fail(RT_ERROR_INVALID_VALUE, "rtInit: option '%s' has no value (expected key=value;key=value)", item.c_str());
        apply_option(o, trim(item.substr(0, eq)), trim(item.substr(eq + 1)), "rtInit");
    }
    return o;
}

CoreDevice::CoreDevice(int index, std::unique_ptr<backend::Device> impl)
    : index_(index), impl_(std::move(impl)) {
    label_ = impl_->info().backend + ":" + std::to_string(impl_->info().backend_ordinal);
    default_stream_ = std::make_shared<Stream>(*this, impl_->create_queue_impl(RT_STREAM_DEFAULT), true);
    default_stream_->errors().set_origin("the default stream of " + label_);
    streams_.push_back(default_stream_);
    memory_ = std::make_unique<DeviceMemory>(*this);
}

// The pool goes before the streams that its pending frees refer to, and before the backend device.
CoreDevice::~CoreDevice() {
    memory_.reset();
    streams_.clear();
    default_stream_.reset();
}

std::vector<std::shared_ptr<Stream>> CoreDevice::streams() const {
    std::lock_guard lock(streams_mutex_);
    return streams_;
}

void CoreDevice::add_stream(std::shared_ptr<Stream> stream) {
    std::lock_guard lock(streams_mutex_);
    streams_.push_back(std::move(stream));
}

void CoreDevice::remove_stream(const Stream* stream) {
    std::lock_guard lock(streams_mutex_);
    std::erase_if(streams_, [&](const auto& s) { return s.get() == stream; });
}

// Device order: the cpu devices, then the cuda devices — unless options.backend names a backend that has
// devices, which then come first (so device 0, every thread's initial device, is that backend's first).
Runtime::Runtime(const backend::Options& options) : options_(options), timeline_(std::make_unique<Timeline>()) {
    backends_.push_back(backend::make_cpu_backend(options_));
#ifdef RUNTIME_HAVE_CUDA
    backends_.push_back(backend::make_cuda_backend(options_));
#endif
    std::stable_partition(backends_.begin(), backends_.end(), [&](const auto& b) {
        return b->name() == options_.backend && b->device_count() > 0;
    });
    for (auto& b : backends_)
        for (int i = 0; i < b->device_count(); ++i)
            devices_.push_back(std::make_unique<CoreDevice>(static_cast<int>(devices_.size()), b->create_device(i)));
}

void Runtime::wait_all_idle() const {
    for (const auto& d : devices_)
        for (auto& s : d->streams()) s->wait_idle();
}

void Runtime::shutdown() {
    refuse_wait_in_queue_context("rtFinalize");
    // Actions may queue work or defer more (a release dropping the last reference to memory): until quiet.
    do {
        wait_all_idle();
        timeline_->drain();
    } while (!timeline_->idle());
    wait_all_idle();
}

Runtime::~Runtime() {
    // Nothing is pending after shutdown(): stop the thread, but keep the object until the backends (whose
    // executors may still be in notify_timeline) are gone.
    timeline_->stop();
    // Streams, events and memory belong to backend devices: release them before the devices go.
    events.clear();
    streams.clear();
    functions.clear();
    modules.clear();
    for (const Allocation& a : registry.take_all()) {
        // Pooled memory goes with its pool; registered host memory belongs to the user.
        if (a.kind == MemoryKind::device && !a.pooled)
            a.device->impl().free_impl(reinterpret_cast<void*>(a.base), a.size);
        else if (a.kind == MemoryKind::pinned_host)
            a.device->impl().free_host_impl(reinterpret_cast<void*>(a.base), a.size);
    }
    devices_.clear();
    backends_.clear();
    timeline_.reset();
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
        fail(RT_ERROR_INVALID_DEVICE, "no device '%s': the %s backend has %d device(s) (%s:0..%d); available: %s",
             name.c_str(), backend_name.c_str(), b->device_count(), backend_name.c_str(), b->device_count() - 1,
             available.c_str());
    }
    if (backend_name == "cuda")
        fail(RT_ERROR_INVALID_DEVICE, "no device '%s': this build of the runtime has no cuda backend (it was built with "
             "RUNTIME_WITH_CUDA=OFF, or without the CUDA headers); available: %s", name.c_str(), available.c_str());
    fail(RT_ERROR_INVALID_DEVICE, "no device '%s': unknown backend '%s' (backends: cpu, cuda); available: %s",
         name.c_str(), backend_name.c_str(), available.c_str());
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
    }
    return *r;
}

void init(const char* options) {
    backend::Options o = parse_options(options);
    std::lock_guard lock(g_init_mutex);
    Runtime* r = g_runtime.load(std::memory_order_relaxed);
    if (r) {
        const backend::Options& cur = r->options();
        if (options && *options &&
            (cur.cpu_devices != o.cpu_devices || cur.cpu_memory != o.cpu_memory || cur.executors != o.executors ||
             cur.cpu_stream_min_bytes != o.cpu_stream_min_bytes || cur.backend != o.backend))
            fail(RT_ERROR_INVALID_VALUE,
                 "rtInit: the runtime is already initialised with other options; call rtFinalize first");
        return;
    }
    g_runtime.store(new Runtime(o), std::memory_order_release);
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
