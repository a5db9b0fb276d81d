// rtInit's options: the core's own (backend=) and each backend's, routed to the backend that parses them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/registry.hpp"
#include "kernels/target.hpp"

namespace rt {

/// What a runtime is initialised with. Move-only: the backends' options are opaque objects they made.
struct InitOptions {
    /// The backend whose devices come first when it has any (device 0 is every thread's initial device);
    /// by default the registry's first (cpu).
    std::string first_backend;
    struct PerBackend {
        const backend::BackendEntry* entry;         ///< a built backend of the registry
        std::unique_ptr<backend::Options> options;  ///< made by entry->parse
    };
    /// One per built backend, in the registry's order.
    std::vector<PerBackend> backends;
    /// Modules loaded from source kept in process per kernel target (module_cache_limit=, $RUNTIME_MODULE_CACHE_LIMIT;
    /// src/kernels/target.hpp); 0: none kept.
    size_t module_cache_limit = kernels::ModuleCache::kDefaultLimit;
    /// What the null stream means (default_stream=legacy|per-thread, $RUNTIME_DEFAULT_STREAM): false (legacy, the
    /// default): each device's legacy default stream, which waits for every blocking stream and they for it; true: a
    /// stream of the calling thread's own, ordered with no other (CUDA's --default-stream per-thread).
    bool per_thread_default_stream = false;
    /// Whether runtime-smi's status file is kept ($RUNTIME_SMI; observe/usage.hpp). Environment only.
    bool publish_usage = true;

    /// True if both configure the same runtime (the same first backend, and every backend's options alike).
    bool same_as(const InitOptions& other) const;
};

/// Parses "key=value;..." over the environment's defaults. Keys: backend, module_cache_limit and default_stream (the core's), `<backend>.<key>` and the
/// older spellings each backend declares. Throws RT_ERROR_INVALID_VALUE: an unknown key (the message lists the
/// known ones), an item without '=', a bad value (the backend names the key and what it expects).
InitOptions parse_options(const char* text);

}  // namespace rt
