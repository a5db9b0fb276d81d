// Usage counters of this process's devices and the status file runtime-smi reads (docs/observability.md).
#include "observe/usage.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <mutex>

#include "core/error.hpp"
#include "core/runtime.hpp"

namespace rt::observe {

namespace {

constexpr auto kPeriod = std::chrono::milliseconds(100);
constexpr const char* kDefaultDirectory = "/dev/shm/runtime-smi";
constexpr size_t kCommandLimit = 256;  // bytes of the command line kept in the file

void copy_text(char* out, size_t size, const std::string& text) {
    std::snprintf(out, size, "%s", text.c_str());
}

/// `text` as a JSON string. Bytes outside printable ASCII become '?' (a command line need not be UTF-8, and the
/// file must stay valid JSON); quotes and backslashes are escaped.
void append_string(std::string& out, const std::string& text) {
    out += '"';
    for (unsigned char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else {
            out += (c >= 0x20 && c < 0x7F) ? static_cast<char>(c) : '?';
        }
    }
    out += '"';
}

void append_field(std::string& out, const char* key, unsigned long long value, bool comma = true) {
    if (comma) out += ',';
    out += '"';
    out += key;
    out += "\":";
    out += std::to_string(value);
}

std::string read_file(const char* path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Field 22 of /proc/self/stat (starttime, clock ticks after boot); 0 if unreadable. runtime-smi compares it with
/// /proc/<pid>/stat's to tell this process from a later one that reuses its pid.
unsigned long long own_start_time() {
    const std::string stat = read_file("/proc/self/stat");
    size_t p = stat.rfind(')');  // the command name before it may hold spaces and parentheses
    if (p == std::string::npos) return 0;
    const char* s = stat.c_str() + p + 1;
    for (int field = 3; field < 22; ++field) {  // skip state (3) .. itrealvalue (21)
        while (*s == ' ') ++s;
        while (*s && *s != ' ') ++s;
    }
    return std::strtoull(s, nullptr, 10);
}

/// The command line, arguments separated by spaces, cut at kCommandLimit bytes.
std::string own_command() {
    std::string cmd = read_file("/proc/self/cmdline");
    if (cmd.size() > kCommandLimit) cmd.resize(kCommandLimit);
    while (!cmd.empty() && cmd.back() == '\0') cmd.pop_back();
    for (char& c : cmd)
        if (c == '\0') c = ' ';
    return cmd;
}

/// The devices part of the file: what changes are detected on.
std::string describe_devices(Runtime& runtime) {
    std::string out = "[";
    for (int i = 0; i < runtime.device_count(); ++i) {
        CoreDevice& d = runtime.device(i);
        const rtDeviceUsage u = device_usage(d);
        const rtMemStats& m = u.memory;
        if (i) out += ",\n ";
        out += '{';
        append_field(out, "device", static_cast<unsigned long long>(u.device), false);
        out += ",\"label\":";
        append_string(out, d.label());
        out += ",\"name\":";
        append_string(out, u.name);
        out += ",\"backend\":";
        append_string(out, u.backend);
        append_field(out, "memory_total", u.memory_total);
        out += ",\"memory\":{";
        append_field(out, "allocated_bytes", m.allocated_bytes, false);
        append_field(out, "reserved_bytes", m.reserved_bytes);
        append_field(out, "peak_allocated_bytes", m.peak_allocated_bytes);
        append_field(out, "peak_reserved_bytes", m.peak_reserved_bytes);
        append_field(out, "num_allocs", m.num_allocs);
        append_field(out, "num_frees", m.num_frees);
        append_field(out, "num_cache_hits", m.num_cache_hits);
        append_field(out, "num_cache_misses", m.num_cache_misses);
        append_field(out, "num_ooms", m.num_ooms);
        append_field(out, "largest_free_block", m.largest_free_block);
        append_field(out, "pool_size", m.pool_size);
        append_field(out, "num_elided_copies", m.num_elided_copies);
        append_field(out, "elided_copy_bytes", m.elided_copy_bytes);
        append_field(out, "num_live_allocations", m.num_live_allocations);
        out += '}';
        append_field(out, "streams", u.streams);
        append_field(out, "operations", u.operations);
        append_field(out, "kernels_launched", u.kernels_launched);
        out += '}';
    }
    out += ']';
    return out;
}

/// Creates `dir` if absent. The shared default directory is made sticky and writable by everyone (as /tmp), so that
/// every user's processes can publish there and only remove their own files.
bool make_directory(const std::string& dir, bool shared) {
    if (::mkdir(dir.c_str(), 0777) == 0) {
        if (shared) ::chmod(dir.c_str(), 01777);
        return true;
    }
    struct stat st{};
    return errno == EEXIST && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool write_all(int fd, const std::string& text) {
    const char* p = text.data();
    size_t left = text.size();
    while (left) {
        ssize_t n = ::write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        left -= static_cast<size_t>(n);
    }
    return true;
}

// The publisher of the live runtime, for the exit handler: a program that ends without rtFinalize still removes its
// file. (A killed one cannot: runtime-smi recognises and removes such files.)
std::mutex g_live_mutex;
UsagePublisher* g_live = nullptr;

void stop_at_exit() {
    UsagePublisher* p;
    {
        std::lock_guard lock(g_live_mutex);
        p = g_live;
        g_live = nullptr;
    }
    if (p) p->stop();
}

}  // namespace

rtDeviceUsage device_usage(CoreDevice& device) {
    rtDeviceUsage u{};
    u.device = device.index();
    copy_text(u.name, sizeof u.name, device.info().name);
    copy_text(u.backend, sizeof u.backend, device.info().backend);
    u.memory_total = device.info().total_memory;
    u.memory = device.memory().stats();  // first: it runs due stream teardowns, which the counts below then show
    const CoreDevice::StreamCounts c = device.stream_counts();
    u.streams = c.streams;
    u.operations = c.operations;
    u.kernels_launched = c.kernels_launched;
    return u;
}

bool publishing_enabled() {
    const char* v = std::getenv("RUNTIME_SMI");
    if (!v || !*v || std::strcmp(v, "1") == 0) return true;
    if (std::strcmp(v, "0") == 0) return false;
    fail(RT_ERROR_INVALID_VALUE, "RUNTIME_SMI='%s' is not a valid setting (expected 0: no status file for runtime-smi, "
         "or 1: the default)", v);
}

std::string status_directory() {
    const char* v = std::getenv("RUNTIME_SMI_DIR");
    return v && *v ? std::string(v) : std::string(kDefaultDirectory);
}

UsagePublisher::UsagePublisher(Runtime& runtime, std::string directory)
    : runtime_(runtime),
      directory_(std::move(directory)),
      path_(directory_ + "/" + std::to_string(::getpid()) + ".json"),
      temp_path_(directory_ + "/." + std::to_string(::getpid()) + ".json.tmp"),
      pid_(static_cast<int>(::getpid())),
      start_time_(own_start_time()),
      command_(own_command()) {}

std::unique_ptr<UsagePublisher> UsagePublisher::start(Runtime& runtime) noexcept {
    try {
        std::string dir = status_directory();
        if (!make_directory(dir, dir == kDefaultDirectory)) return nullptr;
        auto p = std::make_unique<UsagePublisher>(runtime, std::move(dir));
        // The first file is written before rtInit returns: a process is listed as soon as it uses the runtime.
        if (!p->write_if_changed(describe_devices(runtime))) return nullptr;
        p->thread_ = std::make_unique<std::thread>([raw = p.get()] { raw->thread_main(); });
        static std::once_flag registered;
        std::call_once(registered, [] { std::atexit(stop_at_exit); });
        std::lock_guard lock(g_live_mutex);
        g_live = p.get();
        return p;
    } catch (...) {
        return nullptr;  // out of memory, no thread: no status file (a destroyed p removed what it wrote)
    }
}

UsagePublisher::~UsagePublisher() { stop(); }

void UsagePublisher::stop() noexcept {
    {
        std::lock_guard lock(g_live_mutex);
        if (g_live == this) g_live = nullptr;
    }
    if (stopped_.exchange(true)) return;
    if (static_cast<int>(::getpid()) != pid_) {
        // A forked child: the thread is the parent's, the file too. Kept reachable and never destroyed (a joinable
        // std::thread's destructor terminates; a dropped pointer is a leak to LeakSanitizer).
        static auto* orphans = new std::vector<std::pair<std::unique_ptr<std::thread>, std::unique_ptr<Wakeup>>>();
        orphans->emplace_back(std::move(thread_), std::move(wakeup_));
        return;
    }
    if (thread_) {
        {
            std::lock_guard lock(wakeup_->mutex);
            wakeup_->stop = true;
        }
        wakeup_->cv.notify_all();
        thread_->join();
        thread_.reset();
    }
    ::unlink(path_.c_str());
    ::unlink(temp_path_.c_str());
}

void UsagePublisher::thread_main() {
    Wakeup& w = *wakeup_;
    std::unique_lock lock(w.mutex);
    while (!w.cv.wait_for(lock, kPeriod, [&w] { return w.stop; })) {
        lock.unlock();
        try {
            write_if_changed(describe_devices(runtime_));
        } catch (...) {
            // Out of memory, or a device's statistics refused: the file keeps its last figures; next period retries.
        }
        lock.lock();
    }
}

bool UsagePublisher::write_if_changed(const std::string& devices) {
    if (devices == written_) return true;
    std::string text = "{\"format\":\"runtime-smi/1\"";
    append_field(text, "pid", static_cast<unsigned long long>(pid_));
    append_field(text, "start_time", start_time_);
    text += ",\"command\":";
    append_string(text, command_);
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
    append_field(text, "updated_ms", static_cast<unsigned long long>(now));
    text += ",\n\"devices\":";
    text += devices;
    text += "}\n";
    // A whole new file renamed over the old one: readers see the previous or the next, never a mix.
    int fd = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno == ENOENT && make_directory(directory_, directory_ == kDefaultDirectory))  // removed by hand
        fd = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return false;
    const bool ok = write_all(fd, text);
    ::close(fd);
    if (!ok || ::rename(temp_path_.c_str(), path_.c_str()) != 0) {
        ::unlink(temp_path_.c_str());
        return false;
    }
    written_ = devices;
    return true;
}

}  // namespace rt::observe
