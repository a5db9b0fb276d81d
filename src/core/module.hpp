// Core modules and kernel functions: handles over backend modules, and launch validation.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backends/backend.hpp"
#include "core/memory_registry.hpp"

namespace rt {

class CoreDevice;
class Stream;

/// What a module was loaded from, kept for saved graphs (graph/graph_file.hpp). An rtModuleLoadSource module keeps
/// its source and options (its code can be rebuilt on any machine); an rtModuleLoadFile module its path (saved with
/// the file's code only, read when a graph is saved); a module of a loaded graph file that had no source, its code.
struct ModuleOrigin {
    bool has_source = false;
    std::string source;
    std::string options;
    std::string path;    ///< rtModuleLoadFile: the file it was loaded from
    std::string binary;  ///< a saved graph's module without source: its built code, as the file held it
};

class CoreModule {
public:
    CoreModule(CoreDevice& device, std::shared_ptr<backend::Module> impl,
               std::shared_ptr<const ModuleOrigin> origin = nullptr)
        : device_(device), impl_(std::move(impl)), origin_(std::move(origin)) {}
    CoreDevice& device() const { return device_; }
    backend::Module& impl() const { return *impl_; }
    /// What it was loaded from (null: unknown, e.g. a module made inside the library); its functions share it.
    const std::shared_ptr<const ModuleOrigin>& origin() const { return origin_; }

    /// The handle of kernel `name` (the same handle for repeated look-ups); throws NOT_FOUND listing the kernels.
    uint64_t function_handle(const std::string& name);
    /// Module unload: invalidates every function handle given out, and has the device's queues let go of its
    /// kernels once their queued launches have run (the code goes with the last reference: the in-process cache's,
    /// another handle's, or a queued launch's).
    void unload();
    ~CoreModule();

    /// The module global `name` (RT_GLOBAL): its device address and size, registered as device memory of the
    /// module's device for as long as this handle is loaded (copies accept it; rtFree refuses it). Unknown name:
    /// INVALID_VALUE listing the module's globals; after unload(): INVALID_HANDLE.
    backend::Module::GlobalSymbol global(const std::string& name);

private:
    void release_globals();  // mutex_ held
    CoreDevice& device_;
    std::shared_ptr<backend::Module> impl_;
    std::shared_ptr<const ModuleOrigin> origin_;
    std::mutex mutex_;
    std::unordered_map<std::string, uint64_t> functions_;
    std::unordered_map<std::string, backend::Module::GlobalSymbol> globals_;  // registered by global()
    MemoryRegistry* registry_ = nullptr;  // where they are registered (the destructor may run in the runtime's)
    bool unloaded_ = false;  // under mutex_: unload() ran
};

/// Always owned by a shared_ptr (CoreModule::function_handle): a graph node keeps the kernel it runs through
/// shared_from_this, whichever way it was handed the function (a handle, or a launch borrowing it).
class CoreFunction : public std::enable_shared_from_this<CoreFunction> {
public:
    CoreFunction(CoreDevice& device, std::shared_ptr<backend::Function> impl,
                 std::shared_ptr<const ModuleOrigin> origin = nullptr)
        : device_(device), impl_(std::move(impl)), origin_(std::move(origin)) {}
    CoreDevice& device() const { return device_; }
    const std::shared_ptr<backend::Function>& impl() const { return impl_; }
    /// Its module's origin (CoreModule::origin): kernels of the same module share one object.
    const std::shared_ptr<const ModuleOrigin>& origin() const { return origin_; }

private:
    CoreDevice& device_;
    std::shared_ptr<backend::Function> impl_;
    std::shared_ptr<const ModuleOrigin> origin_;
};

/// Validates a launch of `function` on a stream of `device`: shape, arity and argument sizes (num_args < 0: not
/// stated by the caller). Returns the shape with shape.global[d] == 0 replaced by grid[d]*block[d]. Throws.
backend::LaunchShape validate_launch(const CoreDevice& device, const CoreFunction& function, backend::LaunchShape shape,
                                     void* const* args, int num_args, const size_t* arg_sizes);
/// Checked mode (RUNTIME_CHECK_BOUNDS set to anything but "", 0, false, no, off; read once): validate_launch also
/// checks the kernel's pointer-sized arguments against the allocation registry (check_pointer_arguments).
bool check_bounds_enabled();
/// Refuses (RT_ERROR_INVALID_VALUE) a launch whose pointer-sized argument is memory freed earlier.
void check_pointer_arguments(const backend::Function& f, void* const* args, int arity);
/// Validates (validate_launch), then enqueues.
/// shape.global[d] == 0 stands for grid[d]*block[d]; it is filled in before the backend sees it.
void launch_kernel(Stream& stream, const CoreFunction& function, backend::LaunchShape shape, void* const* args,
                   int num_args, const size_t* arg_sizes);

}  // namespace rt
