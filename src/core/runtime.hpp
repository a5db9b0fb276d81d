// The process-wide runtime: backends, devices, handle tables and the allocation registry; created on first use.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/device.hpp"
#include "core/event.hpp"
#include "core/handle_table.hpp"
#include "core/memory_registry.hpp"
#include "core/module.hpp"
#include "core/options.hpp"
#include "core/stream.hpp"
#include "core/timeline.hpp"

namespace rt {

namespace graph {
class Graph;
struct Node;
class GraphExec;
}  // namespace graph
namespace observe {
class UsagePublisher;
}

class Runtime {
public:
    explicit Runtime(InitOptions options);
    ~Runtime();  ///< releases everything; shutdown() ran first

    /// Waits for all work and runs every deferred action; the runtime is still published (actions may call the
    /// API). Refused in queue context.
    void shutdown();
    /// Called once this runtime is the published one (runtime() returns it): starts what reads it from another
    /// thread (runtime-smi's status file, observe/usage.hpp).
    void published();
    /// "When these streams get here": deferred frees, stream teardown, releases (rtStreamDeferRelease).
    Timeline& timeline() { return *timeline_; }

    const InitOptions& options() const { return options_; }
    /// This runtime's number among the runtimes of the process (1, 2, ... — one per rtInit .. rtFinalize): what
    /// caches of handles key by, since handle values (and this object's address) repeat across lifetimes.
    uint64_t generation() const { return generation_; }
    int device_count() const { return static_cast<int>(devices_.size()); }
    /// The device with this index; throws RT_ERROR_INVALID_DEVICE naming the valid range.
    CoreDevice& device(int index) const;
    /// The index of the device named "cpu:0", "cuda:1" or "cuda" (ordinal 0). Throws INVALID_DEVICE naming the
    /// devices present, and saying why when the backend has none (e.g. the CUDA driver cannot be loaded).
    int find_device(const std::string& name) const;
    /// The calling thread's current device.
    CoreDevice& current_device() const;

    /// Waits until every stream of every device has run what it has queued (without reporting failures):
    /// memory about to be released may be used by any queued work, peer copies included.
    void wait_all_idle() const;

    using StreamTable = HandleTable<Stream, 0x53>;
    /// The stream behind a C handle (null = the current device's default stream); throws INVALID_HANDLE.
    std::shared_ptr<Stream> stream(rtStream_t handle) const;
    /// The same without a reference count, for the launch path: `borrowed` = streams.borrow(handle),
    /// which keeps the stream alive while it lives.
    Stream& stream(rtStream_t handle, const StreamTable::Borrow& borrowed) const;
    std::shared_ptr<Event> event(rtEvent_t handle) const;

    StreamTable streams;                // 'S'
    HandleTable<Event, 0x45> events;    // 'E'
    HandleTable<CoreModule, 0x4D> modules;      // 'M'
    HandleTable<CoreFunction, 0x46> functions;  // 'F'
    HandleTable<graph::Graph, 0x47> graphs;           // 'G' (graph/graph.hpp)
    HandleTable<graph::Node, 0x4E> graph_nodes;       // 'N': aliasing references into their graph's nodes
    HandleTable<graph::GraphExec, 0x58> graph_execs;  // 'X' (graph/exec.hpp)
    MemoryRegistry registry;

private:
    [[noreturn]] static void refuse_stream(rtStream_t handle);
    /// Drops every graph, node and executable graph handle (teardown).
    void clear_graphs();

    InitOptions options_;
    const uint64_t generation_;
    std::vector<std::unique_ptr<backend::Backend>> backends_;
    std::vector<std::unique_ptr<CoreDevice>> devices_;
    std::unique_ptr<Timeline> timeline_;  // released before the devices its actions refer to
    std::unique_ptr<observe::UsagePublisher> usage_;  // null when RUNTIME_SMI=0; stopped before the runtime goes
};

namespace detail {
extern std::atomic<Runtime*> g_runtime;
Runtime& create_runtime();
}  // namespace detail

/// The runtime, initialised with defaults (environment variables) on first use. Inline: every API call
/// starts here, and the common case is one load.
inline Runtime& runtime() {
    Runtime* r = detail::g_runtime.load(std::memory_order_acquire);
    return r ? *r : detail::create_runtime();
}
/// Initialises with `options` ("key=value;..."); refuses options that differ from a live runtime's.
void init(const char* options);
/// Tears the runtime down; the next call to runtime() creates a new one.
void finalize();

/// The calling thread's current device index (rtSetDevice).
int& current_device_index();

}  // namespace rt
