// Core modules and kernel functions: function handles per module, and launch validation above the backends.
#include "core/module.hpp"

#include <cctype>
#include <cstdlib>
#include <cstring>

#include "core/runtime.hpp"
#include "core/stream.hpp"
#include "graph/capture.hpp"
#include "observe/trace_dvpp.hpp"

namespace rt {

uint64_t CoreModule::function_handle(const std::string& name) {
    std::lock_guard lock(mutex_);
    // Looked up by a thread that found the module just before another unloaded it: no handle outlives the unload.
    if (unloaded_) fail(RT_ERROR_INVALID_HANDLE, "the module was unloaded (while '%s' was being looked up)", name.c_str());
    auto it = functions_.find(name);
    if (it != functions_.end()) return it->second;
    std::shared_ptr<backend::Function> f = impl_->get_function_impl(name);
    if (!f) {
        std::string names;
        for (const std::string& n : impl_->kernel_names()) names += (names.empty() ? "" : ", ") + n;
        fail(RT_ERROR_NOT_FOUND, "the module has no kernel named '%s' (its kernels: %s)", name.c_str(),
             names.empty() ? "none" : names.c_str());
    }
    uint64_t handle = runtime().functions.insert(std::make_shared<CoreFunction>(device_, std::move(f), origin_));
    functions_.emplace(name, handle);
    return handle;
}

backend::Module::GlobalSymbol CoreModule::global(const std::string& name) {
    std::lock_guard lock(mutex_);
    if (unloaded_) fail(RT_ERROR_INVALID_HANDLE, "the module was unloaded (while global '%s' was being looked up)", name.c_str());
    auto it = globals_.find(name);
    if (it != globals_.end()) return it->second;
    backend::Module::GlobalSymbol g;
    if (!impl_->find_global(name, g) || !g.address || g.bytes == 0) {
        const std::vector<std::string> names = impl_->global_names();
        std::string list;
        for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
        fail(RT_ERROR_INVALID_VALUE, "the module has no global named '%s' (%s%s)", name.c_str(),
             names.empty() ? "it declares no RT_GLOBAL variable" : "its globals: ", list.c_str());
    }
    // Loads of one source share the module, hence its globals: the registry counts the handles that registered them.
    Allocation a;
    a.base = reinterpret_cast<uintptr_t>(g.address);
    a.size = g.bytes;
    a.kind = MemoryKind::device;
    a.device = &device_;
    a.module_global = true;
    registry_ = &runtime().registry;
    registry_->retain_module_global(a);
    globals_.emplace(name, g);
    return g;
}

void CoreModule::release_globals() {
    for (auto& [name, g] : globals_) registry_->release_module_global(reinterpret_cast<uintptr_t>(g.address));
    globals_.clear();
}

CoreModule::~CoreModule() {
    std::lock_guard lock(mutex_);
    release_globals();
}

void CoreModule::unload() {
    {
        std::lock_guard lock(mutex_);
        unloaded_ = true;
        release_globals();
        for (auto& [name, handle] : functions_) runtime().functions.erase(handle);
        functions_.clear();
    }
    // A launch racing with the erase above holds the function until its queue has it; the queues then drop what
    // they keep past their launches (outside any lock of ours: the last reference may unload the code).
    for (const std::shared_ptr<Stream>& s : device_.streams()) s->queue().release_kernels_impl();
}

backend::LaunchShape validate_launch(const CoreDevice& device, const CoreFunction& function, backend::LaunchShape shape,
                                     void* const* args, int num_args, const size_t* arg_sizes) {
    const backend::Function& f = *function.impl();
    const char* name = f.name().c_str();
    if (&device != &function.device())
        fail(RT_ERROR_INVALID_VALUE, "kernel '%s' was loaded for %s but the stream belongs to %s", name,
             function.device().label().c_str(), device.label().c_str());
    const backend::DeviceInfo& info = device.info();
    static const char* const axis[3] = {"x", "y", "z"};
    const unsigned* grid = shape.grid;
    const unsigned* block = shape.block;
    unsigned long long threads = 1;
    for (int d = 0; d < 3; ++d) {
        if (grid[d] == 0 || grid[d] > static_cast<unsigned>(info.max_grid_size[d]))
            fail(RT_ERROR_INVALID_VALUE, "kernel '%s': grid.%s = %u is out of range (expected 1..%d on %s)", name, axis[d],
                 grid[d], info.max_grid_size[d], device.label().c_str());
        if (block[d] == 0 || block[d] > static_cast<unsigned>(info.max_block_size[d]))
            fail(RT_ERROR_INVALID_VALUE, "kernel '%s': block.%s = %u is out of range (expected 1..%d on %s)", name,
                 axis[d], block[d], info.max_block_size[d], device.label().c_str());
        threads *= block[d];
        const unsigned long long full = 1ull * grid[d] * block[d];
        if (shape.global[d] == 0) {
            shape.global[d] = full;
        } else if (shape.global[d] > full || shape.global[d] <= full - block[d]) {
            fail(RT_ERROR_INVALID_VALUE,
                 "kernel '%s': global.%s = %llu does not fit grid.%s = %u blocks of %u (expected %llu..%llu, or 0 for "
                 "all %llu)",
                 name, axis[d], shape.global[d], axis[d], grid[d], block[d], full - block[d] + 1, full, full);
        }
    }
    if (threads > static_cast<unsigned long long>(info.max_threads_per_block))
        fail(RT_ERROR_INVALID_VALUE, "kernel '%s': a block of %u x %u x %u = %llu threads exceeds the limit of %d", name,
             block[0], block[1], block[2], threads, info.max_threads_per_block);
    // Work-groups: barrier kernels run whole groups only (a partial group would wait for items that never run), and
    // a group's local memory is its arrays plus the dynamic bytes.
    if (f.uses_barriers())
        for (int d = 0; d < 3; ++d)
            if (shape.global[d] != 1ull * grid[d] * block[d]) {
                const unsigned long long below = 1ull * (grid[d] - 1) * block[d], above = 1ull * grid[d] * block[d];
                const std::string sizes = below > 0 ? format("%llu or %llu", below, above) : format("%llu", above);
                fail(RT_ERROR_INVALID_VALUE,
                     "kernel '%s' uses work-group barriers (rt_items or rt_barrier), so it runs whole work-groups only: "
                     "global.%s = %llu is not a multiple of block.%s = %u (launch %s items)",
                     name, axis[d], shape.global[d], axis[d], block[d], sizes.c_str());
            }
    if (const size_t own = f.static_local_bytes(); own + shape.shared_bytes > info.max_shared_bytes)
        fail(RT_ERROR_INVALID_VALUE,
             "kernel '%s' needs %zu bytes of local memory per work-group (%zu in its RT_LOCAL arrays + %zu dynamic "
             "shared_bytes), more than the %zu bytes %s has (rtDeviceProp.local_memory_per_group)",
             name, own + shape.shared_bytes, own, shape.shared_bytes, info.max_shared_bytes,
             device.label().c_str());
    int arity = f.num_args();
    if (num_args >= 0 && arity >= 0 && num_args != arity)
        fail(RT_ERROR_INVALID_VALUE, "kernel '%s' takes %d argument(s) but %d were given", name, arity, num_args);
    if (arity > 0 && !args)
        fail(RT_ERROR_INVALID_VALUE, "kernel '%s' takes %d argument(s) but args is NULL", name, arity);
    for (int i = 0; i < arity; ++i)
        if (!args[i]) fail(RT_ERROR_INVALID_VALUE, "kernel '%s': args[%d] is NULL (expected a pointer to the value)", name, i);
    if (arg_sizes && arity >= 0 && num_args >= 0) {
        const std::vector<size_t>& sizes = f.arg_sizes();
        for (int i = 0; i < arity && i < static_cast<int>(sizes.size()); ++i)
            if (arg_sizes[i] != sizes[static_cast<size_t>(i)])
                fail(RT_ERROR_INVALID_VALUE, "kernel '%s': argument %d has %zu bytes but the parameter has %zu", name, i,
                     arg_sizes[i], sizes[static_cast<size_t>(i)]);
    }
    if (check_bounds_enabled()) check_pointer_arguments(f, args, arity);
    return shape;
}

bool check_bounds_enabled() {
    static const bool on = [] {
        const char* v = std::getenv("RUNTIME_CHECK_BOUNDS");
        if (!v) return false;
        std::string s(v);
        for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return !(s.empty() || s == "0" || s == "false" || s == "no" || s == "off");
    }();
    return on;
}

/// Checked mode in C/C++. A kernel's signature gives only its parameters' sizes (not which are pointers, nor their
/// element types), so what can be checked is what an 8-byte value that is an address says of itself: one at the
/// start of memory freed recently (and not inside a live allocation) is a use after free, refused before it runs.
void check_pointer_arguments(const backend::Function& f, void* const* args, int arity) {
    const std::vector<size_t>& sizes = f.arg_sizes();
    for (int i = 0; i < arity && i < static_cast<int>(sizes.size()); ++i) {
        if (sizes[static_cast<size_t>(i)] != sizeof(void*)) continue;
        void* p = nullptr;
        std::memcpy(&p, args[i], sizeof p);
        if (!p || runtime().registry.lookup(p).allocation) continue;
        if (runtime().registry.recently_freed(p))
            fail(RT_ERROR_INVALID_VALUE, "kernel '%s': argument %d is %p, memory already freed (rtFree); checked mode "
                 "(RUNTIME_CHECK_BOUNDS) refuses the launch", f.name().c_str(), i, p);
    }
}

void launch_kernel(Stream& stream, const CoreFunction& function, backend::LaunchShape shape, void* const* args,
                   int num_args, const size_t* arg_sizes) {
    if (stream.capture() && graph::capture_kernel(stream, function, shape, args, num_args, arg_sizes)) return;
    shape = validate_launch(stream.device(), function, shape, args, num_args, arg_sizes);
    const uint64_t op = stream.next_op();
    trace::enqueue([&] {  // a DVPP call's kernel is a span named for its work (trace_dvpp.hpp)
                       trace::Op* d = trace::dvpp_op(stream, op);
                       return d ? d : trace::kernel_op(stream, op, function.impl()->name(), shape);
                   },
                   [&](const trace::Key& traced) {
                       stream.queue().launch_impl(function.impl(), shape, args, backend::LaunchReport{&stream.errors(), op},
                                                  traced);
                   });
    stream.count_kernels();
}

}  // namespace rt
