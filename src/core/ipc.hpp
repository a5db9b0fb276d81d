// Inter-process handles (rtIpc*): the handle's wire format, shareable files another process opens, and the shared
// state of interprocess events.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backends/backend.hpp"

namespace rt {

class CoreDevice;
class Event;
class Stream;

namespace ipc {

/// The bytes of a handle (rtIpcMemHandle_t / rtIpcEventHandle_t: 64 bytes) that the backend or the event fills.
constexpr size_t kPayloadBytes = 40;

/// A file of this process that another process of the same user can open while this one lives: a memfd whose name
/// carries a token, so an opener can tell it from whatever file later reuses the descriptor's number.
struct SharedFile {
    int fd = -1;
    uint64_t token = 0;
};

/// Creates a shared file of `bytes` (O_CLOEXEC); fd -1 (errno set) if the system refuses.
SharedFile create_shared_file(size_t bytes);
/// Opens (read-write) file descriptor `fd` of process `pid`, checking that it is still the file of `token`. Throws
/// INVALID_VALUE naming what went wrong (`what`: "memory", "event"): the process exited, the file was released (the
/// memory freed, the event destroyed), no permission.
int open_peer_file(int pid, int fd, uint64_t token, const char* what);
/// Whether process `pid` is running (not exited, not a zombie).
bool process_alive(int pid);

/// The state an interprocess event shares between processes: a page of a shared file.
struct SharedEventState {
    uint32_t magic;
    std::atomic<uint32_t> wake;        ///< futex word: bumped by every completion
    std::atomic<uint64_t> recorded;    ///< sequence number of the latest record (0: never recorded)
    std::atomic<uint64_t> completed;   ///< highest record sequence that completed
    std::atomic<int32_t> recorder;     ///< pid of the process that made the latest record
};

/// An interprocess event (RT_EVENT_INTERPROCESS), as the backend event of a core Event: query and synchronize read
/// the shared state, so they see records made in any process; ipc::record and ipc::wait queue its records and waits.
class SharedEvent final : public backend::Event {
public:
    /// A new event (exported by this process).
    static std::unique_ptr<SharedEvent> create();
    /// The event of a handle exported by another process (throws INVALID_VALUE naming what is wrong).
    static std::unique_ptr<SharedEvent> open(const unsigned char* payload, int exporter_pid);
    ~SharedEvent() override;

    bool query_impl() override;
    void synchronize_impl() override;
    /// Waits at most `timeout_ns` (negative: without limit) for the latest record; false on timeout. Throws
    /// LAUNCH_FAILED when the process that made the record exited before it completed.
    bool wait_for(int64_t timeout_ns);
    float elapsed_ms_impl(backend::Event& end) override;
    /// Fills a handle's payload (pid is the caller's: the handle's header carries it).
    void export_payload(unsigned char* payload) const;
    bool opened() const { return opened_; }

    /// The mapping of the shared state: queued records and waits hold it, so the event may be destroyed meanwhile.
    struct Mapping {
        SharedEventState* state = nullptr;
        int fd = -1;
        uint64_t token = 0;
        ~Mapping();
    };
    const std::shared_ptr<Mapping>& mapping() const { return mapping_; }
    SharedEventState& state() const { return *mapping_->state; }

private:
    SharedEvent() = default;
    std::shared_ptr<Mapping> mapping_;
    bool opened_ = false;
};

/// rtEventCreateWithFlags(RT_EVENT_INTERPROCESS | ...) on `device`: checks the flags and the device (capi_ipc.cpp).
std::unique_ptr<backend::Event> create_event(CoreDevice& device, unsigned flags);
/// rtEventRecord of an interprocess event on `stream`: a new record the event completes when the stream gets here.
/// Refused in a stream capture (a graph cannot publish to another process).
void record(SharedEvent& event, Stream& stream, const char* api);
/// rtStreamWaitEvent of an interprocess event: work queued on `stream` after this waits for its latest record
/// (made in any process). Refused in a stream capture.
void wait(SharedEvent& event, Stream& stream, const char* api);

}  // namespace ipc
}  // namespace rt
