// What this process uses of each device (rtDeviceGetUsage), and the status file that shows it to runtime-smi.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/profiler.h"

namespace rt {
class CoreDevice;
class Runtime;
}  // namespace rt

namespace rt::observe {

/// The usage of `device` now: its memory statistics (rtMemGetStats), live streams, and the operations and kernel
/// launches queued on its streams since the runtime started. Thread-safe; never waits for queued work.
rtDeviceUsage device_usage(CoreDevice& device);

/// Whether RUNTIME_SMI asks for the status file: unset, empty or "1" yes, "0" no. Throws RT_ERROR_INVALID_VALUE
/// naming the variable and the accepted values for anything else (read with the other variables at rtInit).
bool publishing_enabled();

/// The directory of the status files: $RUNTIME_SMI_DIR if set and not empty, else /dev/shm/runtime-smi.
std::string status_directory();

/// Keeps <status_directory()>/<pid>.json current for one runtime: a thread looks every ~100 ms and rewrites the file
/// (a new file renamed over the old, so a reader never sees half of one) only when a figure changed. stop() — or
/// the process's exit handler, for a program that never calls rtFinalize — removes the file. The format is
/// docs/observability.md's ("runtime-smi").
class UsagePublisher {
public:
    /// Starts publishing the devices of `runtime`, which must already be the published runtime (runtime() returns
    /// it: the thread reads memory statistics through it). Null when the directory cannot be made or written, or
    /// the thread cannot start: the status file is a convenience, never a reason for rtInit to fail.
    static std::unique_ptr<UsagePublisher> start(Runtime& runtime) noexcept;
    ~UsagePublisher();  ///< stop()
    UsagePublisher(const UsagePublisher&) = delete;
    UsagePublisher& operator=(const UsagePublisher&) = delete;

    /// Stops the thread and removes the file; idempotent. Must be called before the runtime stops being published
    /// (Runtime::shutdown). In a forked child (another pid) it leaves the parent's file and thread alone.
    void stop() noexcept;
    /// The file this publisher writes.
    const std::string& path() const { return path_; }

    UsagePublisher(Runtime& runtime, std::string directory);  // use start()

private:
    void thread_main();
    /// Writes the file if `text` differs from what was written last; false if it could not be written.
    bool write_if_changed(const std::string& text);

    Runtime& runtime_;
    const std::string directory_;
    const std::string path_;
    const std::string temp_path_;
    const int pid_;
    const unsigned long long start_time_;  // /proc/<pid>/stat's starttime: tells this process from a reused pid
    const std::string command_;
    std::string written_;  // the devices part of the last file written (the thread's only)
    std::atomic<bool> stopped_{false};  // stop() ran: finalize and the exit handler may both call it
    struct Wakeup {
        std::mutex mutex;  // guards stop; held for no wait
        std::condition_variable cv;
        bool stop = false;
    };
    // Both leaked in a forked child, where the thread does not exist: joining it, or destroying a condition
    // variable that the parent's thread waited on, would never return.
    std::unique_ptr<Wakeup> wakeup_ = std::make_unique<Wakeup>();
    std::unique_ptr<std::thread> thread_;
};

}  // namespace rt::observe
