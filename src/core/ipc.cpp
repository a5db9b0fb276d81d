// Inter-process handles: shareable files opened through /proc/<pid>/fd, interprocess events over a shared page, and
// the defaults of the backends' IPC hooks.
#include "core/ipc.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/stream.hpp"
#include "graph/capture.hpp"

namespace rt {

// ---- the backends' optional hooks
namespace backend {
void Device::ipc_export_impl(void* base, size_t bytes, unsigned char* payload) {
    (void)bytes, (void)payload;
    fail(RT_ERROR_NOT_SUPPORTED, "%s memory (%p) cannot be exported to another process: the %s backend has no IPC "
         "handles", info().backend.c_str(), base, info().backend.c_str());
}
void* Device::ipc_open_impl(const unsigned char* payload, int pid, size_t* bytes) {
    (void)payload, (void)pid, (void)bytes;
    fail(RT_ERROR_NOT_SUPPORTED, "the %s backend cannot open IPC memory handles", info().backend.c_str());
}
}  // namespace backend

namespace ipc {

namespace {
constexpr uint32_t kEventMagic = 0x52544576;  // "RTEv"

uint64_t next_token() {
    static const uint64_t seed = [] {
        uint64_t s = 0;
        if (getrandom(&s, sizeof s, 0) != static_cast<ssize_t>(sizeof s))
            s = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
        return s ^ (static_cast<uint64_t>(getpid()) << 32);
    }();
    static std::atomic<uint64_t> counter{0};
    return seed + 0x9e3779b97f4a7c15ull * (counter.fetch_add(1) + 1);  // distinct per file of this process
}

std::string file_name(uint64_t token) {
    char name[40];
    std::snprintf(name, sizeof name, "rt-ipc-%016llx", static_cast<unsigned long long>(token));
    return name;
}

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
    // Not FUTEX_PRIVATE: the word lies in memory shared with other processes.
    return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}
}  // namespace

SharedFile create_shared_file(size_t bytes) {
    SharedFile f;
    f.token = next_token();
    f.fd = static_cast<int>(syscall(SYS_memfd_create, file_name(f.token).c_str(), MFD_CLOEXEC));
    if (f.fd < 0) return f;
    if (ftruncate(f.fd, static_cast<off_t>(bytes)) != 0) {
        const int saved = errno;
        close(f.fd);
        f.fd = -1;
        errno = saved;
    }
    return f;
}

bool process_alive(int pid) {
    if (pid <= 0) return false;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE* f = std::fopen(path, "r");
    if (!f) return false;
    char buf[512];
    size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = 0;
    const char* paren = std::strrchr(buf, ')');  // the state follows the command name, which may hold spaces
    if (!paren || paren[1] != ' ') return true;
    return paren[2] != 'Z' && paren[2] != 'X';
}

int open_peer_file(int pid, int fd, uint64_t token, const char* what) {
    if (pid <= 0 || fd < 0)
        fail(RT_ERROR_INVALID_VALUE, "the handle is not a handle of this runtime (pid %d, descriptor %d)", pid, fd);
    if (!process_alive(pid))
        fail(RT_ERROR_INVALID_VALUE, "the process that exported the %s (pid %d) has exited: a handle is valid only "
             "while its exporter runs", what, pid);
    char path[64], target[256];
    std::snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n < 0) {
        const int err = errno;
        if (err == EACCES || err == EPERM)
            fail(RT_ERROR_INVALID_VALUE, "not permitted to open the %s exported by pid %d (%s: %s): the opener must "
                 "run as the same user and be allowed to inspect it (ptrace read access)", what, pid, path,
                 std::strerror(err));
        if (!process_alive(pid))
            fail(RT_ERROR_INVALID_VALUE, "the process that exported the %s (pid %d) has exited", what, pid);
        fail(RT_ERROR_INVALID_VALUE, "the %s of this handle is gone: pid %d freed (or destroyed) it", what, pid);
    }
    target[n] = 0;
    const std::string expected = "/memfd:" + file_name(token);
    if (std::strncmp(target, expected.c_str(), expected.size()) != 0)
        fail(RT_ERROR_INVALID_VALUE, "the %s of this handle is gone: pid %d freed (or destroyed) it, and its "
             "descriptor %d now names another file", what, pid, fd);
    int out = open(path, O_RDWR | O_CLOEXEC);
    if (out < 0) {
        const int err = errno;
        fail(RT_ERROR_INVALID_VALUE, "cannot open the %s exported by pid %d (%s: %s)%s", what, pid, path,
             std::strerror(err), err == EACCES || err == EPERM ? ": the opener must run as the same user" : "");
    }
    // Between the check and the open the exporter may have released it: the file opened must be the one named.
    std::snprintf(path, sizeof path, "/proc/self/fd/%d", out);
    n = readlink(path, target, sizeof target - 1);
    if (n < 0 || (target[n] = 0, std::strncmp(target, expected.c_str(), expected.size()) != 0)) {
        close(out);
        fail(RT_ERROR_INVALID_VALUE, "the %s of this handle is gone: pid %d freed (or destroyed) it while it was "
             "being opened", what, pid);
    }
    return out;
}

// ---- interprocess events

SharedEvent::Mapping::~Mapping() {
    if (state) munmap(state, sizeof(SharedEventState));
    if (fd >= 0) close(fd);
}

namespace {
SharedEventState* map_state(int fd) {
    void* p = mmap(nullptr, sizeof(SharedEventState), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? nullptr : static_cast<SharedEventState*>(p);
}
}  // namespace

std::unique_ptr<SharedEvent> SharedEvent::create() {
    auto mapping = std::make_shared<Mapping>();
    SharedFile f = create_shared_file(sizeof(SharedEventState));
    if (f.fd < 0)
        fail(RT_ERROR_OUT_OF_MEMORY, "cannot create the shared state of an interprocess event (memfd_create: %s)",
             std::strerror(errno));
    mapping->fd = f.fd;
    mapping->token = f.token;
    mapping->state = map_state(f.fd);
    if (!mapping->state)
        fail(RT_ERROR_OUT_OF_MEMORY, "cannot map the shared state of an interprocess event: %s", std::strerror(errno));
    mapping->state->magic = kEventMagic;  // the file is zero-filled: every counter starts at 0
    std::unique_ptr<SharedEvent> e(new SharedEvent());
    e->mapping_ = std::move(mapping);
    return e;
}

std::unique_ptr<SharedEvent> SharedEvent::open(const unsigned char* payload, int exporter_pid) {
    int32_t fd;
    uint64_t token;
    std::memcpy(&fd, payload, sizeof fd);
    std::memcpy(&token, payload + 8, sizeof token);
    auto mapping = std::make_shared<Mapping>();
    mapping->fd = open_peer_file(exporter_pid, fd, token, "event");
    struct stat st{};
    if (fstat(mapping->fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(SharedEventState))
        fail(RT_ERROR_INVALID_VALUE, "the event handle of pid %d names a file that is not an event's state",
             exporter_pid);
    mapping->token = token;
    mapping->state = map_state(mapping->fd);
    if (!mapping->state)
        fail(RT_ERROR_OUT_OF_MEMORY, "cannot map the shared state of the event of pid %d: %s", exporter_pid,
             std::strerror(errno));
    if (mapping->state->magic != kEventMagic)
        fail(RT_ERROR_INVALID_VALUE, "the event handle of pid %d names a file that is not an event's state",
             exporter_pid);
    std::unique_ptr<SharedEvent> e(new SharedEvent());
    e->mapping_ = std::move(mapping);
    e->opened_ = true;
    return e;
}

SharedEvent::~SharedEvent() = default;

void SharedEvent::export_payload(unsigned char* payload) const {
    const int32_t fd = mapping_->fd;
    std::memcpy(payload, &fd, sizeof fd);
    std::memcpy(payload + 8, &mapping_->token, sizeof mapping_->token);
}

bool SharedEvent::query_impl() {
    const SharedEventState& s = *mapping_->state;
    return s.completed.load(std::memory_order_acquire) >= s.recorded.load(std::memory_order_acquire);
}

bool SharedEvent::wait_for(int64_t timeout_ns) {
    SharedEventState& s = *mapping_->state;
    const uint64_t target = s.recorded.load(std::memory_order_acquire);
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
        const uint32_t seen = s.wake.load(std::memory_order_acquire);
        if (s.completed.load(std::memory_order_acquire) >= target) return true;
        const int32_t recorder = s.recorder.load(std::memory_order_relaxed);
        if (recorder != getpid() && recorder > 0 && !process_alive(recorder) &&
            s.completed.load(std::memory_order_acquire) < target)
            fail(RT_ERROR_LAUNCH_FAILED, "the process that recorded the event (pid %d) exited before the record "
                 "completed", recorder);
        int64_t slice = 20'000'000;  // wake up now and then to see whether the recording process still lives
        if (timeout_ns >= 0) {
            const int64_t spent = std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::steady_clock::now() - start).count();
            if (spent >= timeout_ns) return false;
            slice = std::min(slice, timeout_ns - spent);
        }
        timespec ts{static_cast<time_t>(slice / 1'000'000'000), static_cast<long>(slice % 1'000'000'000)};
        futex(&s.wake, FUTEX_WAIT, seen, &ts);
    }
}

void SharedEvent::synchronize_impl() { wait_for(-1); }

float SharedEvent::elapsed_ms_impl(backend::Event& end) {
    (void)end;
    fail(RT_ERROR_INVALID_HANDLE, "an interprocess event records no time (RT_EVENT_DISABLE_TIMING)");
}

namespace {

/// The record's completion, queued on the recording stream: publishes the sequence number and wakes the waiters.
struct Completion {
    std::shared_ptr<SharedEvent::Mapping> mapping;
    uint64_t sequence;
    static void run(void* user) {
        std::unique_ptr<Completion> c(static_cast<Completion*>(user));
        SharedEventState& s = *c->mapping->state;
        uint64_t done = s.completed.load(std::memory_order_relaxed);
        while (done < c->sequence &&
               !s.completed.compare_exchange_weak(done, c->sequence, std::memory_order_acq_rel)) {
        }
        s.wake.fetch_add(1, std::memory_order_acq_rel);
        futex(&s.wake, FUTEX_WAKE, INT_MAX, nullptr);
    }
};

/// Streams parked on interprocess events (their queues' joint steps), resumed by one thread that polls the shared
/// counters: another process's completion cannot call into this one.
class Watcher {
public:
    struct Pending {
        std::shared_ptr<SharedEvent::Mapping> mapping;
        uint64_t target;
        std::function<void()> resume;
    };

    static Watcher& get() {
        static Watcher watcher;
        return watcher;
    }
    /// At exit: the streams still parked are let go (their work runs) rather than left to hang the teardown.
    ~Watcher() {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        cv_.notify_all();
        if (thread_.joinable()) thread_.join();
        for (auto& p : pending_) p.resume();
    }
    void add(Pending p) {
        std::lock_guard lock(mutex_);
        pending_.push_back(std::move(p));
        if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
        cv_.notify_all();
    }

private:
    static bool due(const Pending& p, bool check_recorder) {
        const SharedEventState& s = *p.mapping->state;
        if (s.completed.load(std::memory_order_acquire) >= p.target) return true;
        // A recording process that exited never completes its record: the wait ends (docs/memory.md).
        if (!check_recorder) return false;
        const int32_t recorder = s.recorder.load(std::memory_order_relaxed);
        return recorder > 0 && recorder != getpid() && !process_alive(recorder);
    }
    void loop() {
        std::unique_lock lock(mutex_);
        auto idle = std::chrono::microseconds(50);
        while (!stop_) {
            if (pending_.empty()) {
                cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
                idle = std::chrono::microseconds(50);
                continue;
            }
            std::vector<Pending> ready, waiting;
            const bool check_recorder = ++polls_ % 64 == 0;  // reads /proc: now and then only
            for (auto& p : pending_) (due(p, check_recorder) ? ready : waiting).push_back(std::move(p));
            pending_ = std::move(waiting);
            if (!ready.empty()) {
                lock.unlock();
                for (auto& p : ready) p.resume();  // never under the lock: resume runs queue code
                ready.clear();
                lock.lock();
                idle = std::chrono::microseconds(50);
                continue;
            }
            // Polls back off up to 2 ms while nothing completes (the cost of a wait across processes).
            cv_.wait_for(lock, idle);
            idle = std::min<std::chrono::microseconds>(idle * 2, std::chrono::microseconds(2000));
        }
    }

    std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<Pending> pending_;
    std::thread thread_;
    bool stop_ = false;
    uint64_t polls_ = 0;
};

class WaitStep final : public backend::JointStep {
public:
    WaitStep(std::shared_ptr<SharedEvent::Mapping> mapping, uint64_t target)
        : mapping_(std::move(mapping)), target_(target) {}
    void arrive_impl(int participant, backend::Workers& workers, std::function<void()> resume) noexcept override {
        (void)participant, (void)workers;
        if (mapping_->state->completed.load(std::memory_order_acquire) >= target_) {
            resume();
            return;
        }
        try {
            Watcher::get().add({mapping_, target_, resume});
        } catch (...) {
            resume();  // out of memory: the wait is lost rather than the stream parked for ever
        }
    }

private:
    std::shared_ptr<SharedEvent::Mapping> mapping_;
    uint64_t target_;
};

}  // namespace

void record(SharedEvent& event, Stream& stream, const char* api) {
    if (stream.capture()) graph::refuse_on_capturing(stream, api, "an interprocess event cannot be recorded in a graph");
    SharedEventState& s = event.state();
    auto completion = std::make_unique<Completion>(Completion{event.mapping(), 0});
    stream.next_op();
    completion->sequence = s.recorded.fetch_add(1, std::memory_order_acq_rel) + 1;
    s.recorder.store(getpid(), std::memory_order_relaxed);
    // Internal (no error slot): runs even behind a failure of the stream, so no other process waits for ever.
    try {
        stream.queue().host_call_impl(backend::HostCall{&Completion::run, completion.get(), nullptr, 0}, trace::Key{});
    } catch (...) {
        Completion::run(completion.release());  // not queued (out of memory): the record must not stay pending
        throw;
    }
    completion.release();
}

void wait(SharedEvent& event, Stream& stream, const char* api) {
    if (stream.capture()) graph::refuse_on_capturing(stream, api, "a graph cannot wait for an interprocess event");
    const uint64_t target = event.state().recorded.load(std::memory_order_acquire);
    if (target == 0 || event.state().completed.load(std::memory_order_acquire) >= target) return;
    stream.next_op();
    stream.queue().joint_impl(std::make_shared<WaitStep>(event.mapping(), target), 0, trace::Key{});
}

}  // namespace ipc
}  // namespace rt
