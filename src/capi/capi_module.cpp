// C API: modules (kernel source or precompiled files), kernel look-up and launches.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include <climits>
#include <cstdlib>

#include "capi/capi_common.hpp"
#include "core/module.hpp"
#include "kernels/target.hpp"

using namespace rt;

namespace {
std::shared_ptr<CoreModule> find_module(rtModule_t module) {
    auto m = runtime().modules.find(reinterpret_cast<uint64_t>(module));
    if (!m) fail(RT_ERROR_INVALID_HANDLE, "module %p is not a loaded module", static_cast<void*>(module));
    return m;
}

[[noreturn]] void refuse_function(rtFunction_t function) {
    fail(RT_ERROR_INVALID_HANDLE, "function %p is not a kernel of a loaded module (never looked up, or unloaded)",
         static_cast<void*>(function));
}

std::shared_ptr<CoreFunction> find_function(rtFunction_t function) {
    auto f = runtime().functions.find(reinterpret_cast<uint64_t>(function));
    if (!f) refuse_function(function);
    return f;
}

/// The first rtLaunchConfig's size (version 0.1: up to `global`); a caller's struct is never smaller.
constexpr size_t kLaunchConfigFirstSize = offsetof(rtLaunchConfig, global) + sizeof(rtLaunchConfig::global);
/// Larger sizes are taken for a `size` never set, not for a struct of a later version.
constexpr size_t kLaunchConfigMaxSize = 4096;

/// The caller's rtLaunchConfig as this library's: the bytes its `size` covers, fields past them 0. Refuses a size
/// below the first version's, an implausible one, and a larger struct that sets a field this library lacks.
rtLaunchConfig read_launch_config(const rtLaunchConfig* config) {
    if (!config) fail(RT_ERROR_INVALID_VALUE, "config is NULL (expected an rtLaunchConfig)");
    const size_t size = config->size;
    if (size < kLaunchConfigFirstSize)
        fail(RT_ERROR_INVALID_VALUE,
             "config->size = %zu is smaller than any rtLaunchConfig (at least %zu bytes; expected "
             "sizeof(rtLaunchConfig) = %zu: start from RT_LAUNCH_CONFIG_INIT)", size, kLaunchConfigFirstSize,
             sizeof(rtLaunchConfig));
    if (size > kLaunchConfigMaxSize)
        fail(RT_ERROR_INVALID_VALUE,
             "config->size = %zu is not the size of an rtLaunchConfig (this library's has %zu bytes, and no "
             "version more than %zu): was it set? (start from RT_LAUNCH_CONFIG_INIT)", size, sizeof(rtLaunchConfig),
             kLaunchConfigMaxSize);
    rtLaunchConfig c{};
    std::memcpy(&c, config, std::min(size, sizeof c));
    const auto* tail = reinterpret_cast<const unsigned char*>(config);
    for (size_t i = sizeof c; i < size; ++i)
        if (tail[i] != 0)
            fail(RT_ERROR_INVALID_VALUE,
                 "config->size = %zu, and byte %zu is not 0: the caller sets a field of a later rtLaunchConfig that "
                 "this library (version %d.%d.%d, %zu bytes) does not have; use a newer runtime library, or leave "
                 "that field 0", size, i, RUNTIME_VERSION_MAJOR, RUNTIME_VERSION_MINOR, RUNTIME_VERSION_PATCH,
                 sizeof c);
    c.size = sizeof c;
    return c;
}

rtModule_t insert_module(CoreDevice& device, std::shared_ptr<backend::Module> impl,
                         std::shared_ptr<const ModuleOrigin> origin) {
    return reinterpret_cast<rtModule_t>(
        runtime().modules.insert(std::make_shared<CoreModule>(device, std::move(impl), std::move(origin))));
}

void launch(rtFunction_t function, const backend::LaunchShape& shape, void** args, int num_args,
            const size_t* arg_sizes, rtStream_t stream) {
    // Borrowed, not counted: no reference-count traffic per launch. The queue keeps what it needs
    // alive past this call (backend::Queue::launch_impl).
    Runtime& r = runtime();
    auto f = r.functions.borrow(reinterpret_cast<uint64_t>(function));
    if (!f) refuse_function(function);
    auto borrowed_stream = r.streams.borrow(reinterpret_cast<uint64_t>(stream));
    Stream& s = r.stream(stream, borrowed_stream);
    launch_kernel(s, *f, shape, args, num_args, arg_sizes);
}
}  // namespace

rtModule_t rt::load_source_module(CoreDevice& d, const char* source, const char* options) {
    auto origin = std::make_shared<ModuleOrigin>();  // rtGraphExecSave rebuilds from this where code does not fit
    origin->has_source = true;
    origin->source = source;
    origin->options = options ? options : "";
    auto impl = d.impl().kernel_modules().load_source(d.impl().kernel_target(), origin->source, origin->options);
    return insert_module(d, std::move(impl), std::move(origin));
}

extern "C" {

RT_API rtError_t rtModuleLoadSource(rtModule_t* module, const char* source, const char* options) {
    return capi_call("rtModuleLoadSource", [&] {
        require_out(module, "module");
        if (!source) fail(RT_ERROR_INVALID_VALUE, "source is NULL (expected kernel source text)");
        *module = load_source_module(runtime().current_device(), source, options);
    });
}

RT_API rtError_t rtModuleLoadFile(rtModule_t* module, const char* path) {
    return capi_call("rtModuleLoadFile", [&] {
        require_out(module, "module");
        if (!path) fail(RT_ERROR_INVALID_VALUE, "path is NULL (expected the path of a precompiled module)");
        if (!*path) fail(RT_ERROR_INVALID_VALUE, "path is empty (expected the path of a precompiled module)");
        CoreDevice& d = runtime().current_device();
        auto origin = std::make_shared<ModuleOrigin>();  // no source: rtGraphExecSave saves the file's code only
        char resolved[PATH_MAX];  // the file as named now: a graph saved after a chdir still finds it
        origin->path = ::realpath(path, resolved) ? resolved : path;
        auto impl = d.impl().kernel_target().load(path, /*precompiled=*/true);
        *module = insert_module(d, std::move(impl), std::move(origin));
    });
}

RT_API rtError_t rtModuleGetFunction(rtFunction_t* function, rtModule_t module, const char* name) {
    return capi_call("rtModuleGetFunction", [&] {
        require_out(function, "function");
        if (!name) fail(RT_ERROR_INVALID_VALUE, "name is NULL (expected a kernel name)");
        *function = reinterpret_cast<rtFunction_t>(find_module(module)->function_handle(name));
    });
}

RT_API rtError_t rtModuleUnload(rtModule_t module) {
    return capi_call("rtModuleUnload", [&] {
        auto m = runtime().modules.erase(reinterpret_cast<uint64_t>(module));
        if (!m) fail(RT_ERROR_INVALID_HANDLE, "module %p is not a loaded module", static_cast<void*>(module));
        m->unload();  // queued launches hold the backend function, which keeps the code loaded until they ran
    });
}

RT_API rtError_t rtModuleGetGlobal(void** ptr, size_t* bytes, rtModule_t module, const char* name) {
    return capi_call("rtModuleGetGlobal", [&] {
        require_out(ptr, "ptr");
        if (!name) fail(RT_ERROR_INVALID_VALUE, "name is NULL (expected the name of an RT_GLOBAL variable)");
        const backend::Module::GlobalSymbol g = find_module(module)->global(name);
        *ptr = g.address;
        if (bytes) *bytes = g.bytes;
    });
}

RT_API rtError_t rtFunctionGetParamInfo(rtFunction_t function, int* count, size_t* sizes) {
    return capi_call("rtFunctionGetParamInfo", [&] {
        require_out(count, "count");
        auto f = find_function(function);
        int n = f->impl()->num_args();
        if (sizes) {
            if (n < 0) fail(RT_ERROR_NOT_SUPPORTED, "the backend does not know the parameters of this kernel");
            if (*count < n)
                fail(RT_ERROR_INVALID_VALUE, "sizes has room for %d entries but the kernel has %d parameters", *count, n);
            for (int i = 0; i < n; ++i) sizes[i] = f->impl()->arg_sizes()[static_cast<size_t>(i)];
        }
        *count = n;
    });
}


RT_API rtError_t rtLaunchKernelEx(rtFunction_t function, const rtLaunchConfig* config, void** args) {
    return capi_call("rtLaunchKernelEx", [&] {
        const rtLaunchConfig c = read_launch_config(config);
        if (c.num_args < -1)
            fail(RT_ERROR_INVALID_VALUE, "config->num_args = %d (expected the number of arguments, or -1 for not stated)",
                 c.num_args);
        launch(function,
               {{c.grid.x, c.grid.y, c.grid.z}, {c.block.x, c.block.y, c.block.z}, c.shared_bytes,
                {c.global[0], c.global[1], c.global[2]}},
               args, c.num_args, c.num_args >= 0 ? c.arg_sizes : nullptr, c.stream);
    });
}

RT_API rtError_t rtLaunchKernel(rtFunction_t function, rtDim3 grid, rtDim3 block, void** args, size_t shared_bytes,
                                rtStream_t stream) {
    return capi_call("rtLaunchKernel", [&] {
        launch(function, {{grid.x, grid.y, grid.z}, {block.x, block.y, block.z}, shared_bytes, {0, 0, 0}}, args, -1,
               nullptr, stream);
    });
}

}  // extern "C"
