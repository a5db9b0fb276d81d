// A core event: the backend's native event plus the flags and record state the core checks.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "backends/backend.hpp"
#include "observe/trace.hpp"

namespace rt {

class CoreDevice;
namespace graph {
struct Node;
}

class Event {
public:
    Event(CoreDevice& device, std::unique_ptr<backend::Event> impl, unsigned flags)
        : device_(device), impl_(std::move(impl)), flags_(flags) {}

    CoreDevice& device() const { return device_; }
    backend::Event& impl() const { return *impl_; }
    bool timing() const { return (flags_ & RT_EVENT_DISABLE_TIMING) == 0; }
    /// RT_EVENT_INTERPROCESS: impl() is an ipc::SharedEvent (core/ipc.hpp), recorded and waited for by ipc::record/wait.
    bool interprocess() const { return (flags_ & RT_EVENT_INTERPROCESS) != 0; }
    bool recorded() const { return recorded_.load(std::memory_order_acquire); }
    /// A real record (a stream's, or a graph launch's record of an EVENT_RECORD node): ends a captured record.
    void mark_recorded() {
        capture_id_.store(0, std::memory_order_relaxed);
        recorded_.store(true, std::memory_order_release);
    }

    /// Whether the last record was made in a stream capture (graph/capture.hpp): a node of that capture's graph,
    /// not work of a stream — waits join the capture, synchronize/query refuse (RT_ERROR_CAPTURED_EVENT). One
    /// load: the check every wait, synchronize and query of an event makes.
    bool captured() const { return capture_id_.load(std::memory_order_acquire) != 0; }
    /// The capture of that record (0: none). The frontier is what a wait for it depends on; both are written and
    /// the frontier is read under the capture lock only (its nodes are valid while that capture is active).
    uint64_t capture_id() const { return capture_id_.load(std::memory_order_acquire); }
    const std::vector<graph::Node*>& capture_frontier() const { return capture_frontier_; }
    void mark_captured(uint64_t capture_id, std::vector<graph::Node*> frontier) {
        capture_frontier_ = std::move(frontier);
        capture_id_.store(capture_id, std::memory_order_release);
    }

    /// The event's id in traces (args "event"), and the flow id of its latest traced record (0: none), which a traced
    /// wait ends its arrow at (observe/trace.cpp).
    uint64_t trace_id() const { return trace_id_; }
    std::atomic<uint64_t> trace_flow{0};

private:
    const uint64_t trace_id_ = trace::next_id();
    CoreDevice& device_;
    std::unique_ptr<backend::Event> impl_;
    unsigned flags_;
    std::atomic<bool> recorded_{false};
    std::atomic<uint64_t> capture_id_{0};
    std::vector<graph::Node*> capture_frontier_;
};

}  // namespace rt
