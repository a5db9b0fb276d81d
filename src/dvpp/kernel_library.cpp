// The DVPP kernel library: each family's module built once per device and runtime lifetime, kernel look-up, and the
// 2-D launches of the pixel operations.
#include "dvpp/kernel_library.hpp"

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "capi/capi_common.hpp"
#include "core/error.hpp"
#include "core/runtime.hpp"

namespace rt::dvpp {

namespace {

constexpr int kFamilies = 4;

/// One family's module on one device, with the kernels looked up so far.
struct FamilyModule {
    std::mutex mutex;           // held while the module is built: callers for this device and family wait, no others
    rtModule_t module = nullptr;  // under mutex
    std::unordered_map<std::string, rtFunction_t> functions;  // under mutex
};

/// The modules of the live runtime, per (device, family). Its entries hold handles, which are valid only in the
/// runtime that made them: keyed by Runtime::generation, the whole table is dropped when the runtime it was filled
/// in has been finalized (rtFinalize released the modules themselves with every other handle).
class FamilyModules {
public:
    std::shared_ptr<FamilyModule> slot(uint64_t generation, int device, Family family) {
        std::lock_guard lock(mutex_);
        if (generation != generation_) {
            slots_.clear();
            generation_ = generation;
        }
        auto& s = slots_[static_cast<uint64_t>(device) * kFamilies + static_cast<uint64_t>(family)];
        if (!s) s = std::make_shared<FamilyModule>();
        return s;
    }

private:
    std::mutex mutex_;
    uint64_t generation_ = 0;
    std::unordered_map<uint64_t, std::shared_ptr<FamilyModule>> slots_;
};

/// Never destroyed: a DVPP call may come from a thread still running while static destructors run.
FamilyModules& family_modules() {
    static FamilyModules* modules = new FamilyModules;
    return *modules;
}

/// Ceiling of a / b, b > 0.
uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

rtFunction_t kernel(rtStream_t stream, Family family, const char* name) {
    Runtime& r = runtime();
    // The stream's device, whichever device is current for this thread: the module must be built for it.
    CoreDevice& device = r.stream(stream)->device();
    std::shared_ptr<FamilyModule> m = family_modules().slot(r.generation(), device.index(), family);
    std::lock_guard lock(m->mutex);
    if (!m->module) {
        try {
            // 512-bit vectors where the cpu has them: every pixel kernel runs faster with them (runtime-bench dvpp:
            // NV12 -> RGB 0.41 -> 0.29 ms, resize and batched crops 1.2-1.3x), unlike some other kernels (a tiled
            // matmul is slower), so the library asks for them rather than the cpu target for all.
            m->module = load_source_module(device, family_source(family), "-mprefer-vector-width=512");
        } catch (const Error& e) {
            throw Error(e.code(), format("the DVPP %s kernels failed to build for %s (a defect of the library): %s",
                                         family_name(family), device.label().c_str(), e.what()));
        }
    }
    auto it = m->functions.find(name);
    if (it != m->functions.end()) return it->second;
    rtFunction_t f = nullptr;
    check(rtModuleGetFunction(&f, m->module, name), "rtModuleGetFunction");
    m->functions.emplace(name, f);
    return f;
}

void launch_2d(rtStream_t stream, rtFunction_t function, uint32_t width, uint32_t height, void** args, int num_args) {
    if (width == 0 || height == 0) return;  // no work-item to run
    const backend::DeviceInfo& info = runtime().stream(stream)->device().info();
    uint64_t bx, by;
    if (info.host_addressable) {
        // The cpu device runs a group's rows one after the other, each row a vectorised loop along x, and spreads
        // groups over its executors: whole rows (split evenly when wider than a block may be), and for narrow
        // pictures several rows per group, so that a group is worth scheduling.
        const uint64_t max_x = std::max(1, info.max_block_size[0]);
        bx = ceil_div(width, ceil_div(width, max_x));
        by = bx >= 64 ? 1 : std::min<uint64_t>(height, std::max<uint64_t>(1, 256 / bx));
    } else {
        // A GPU: warps along x (coalesced rows), 256 threads a block.
        bx = std::min<uint64_t>(32, std::max(1, info.max_block_size[0]));
        by = 8;
    }
    const uint64_t max_items = std::max(1, info.max_threads_per_block);
    const uint64_t max_by = std::max(1, info.max_block_size[1]);
    by = std::min({by, max_by, std::max<uint64_t>(1, max_items / bx)});
    // Taller pictures than the grid's rows allow take more rows per group.
    const uint64_t max_gy = std::max(1, info.max_grid_size[1]);
    while (ceil_div(height, by) > max_gy && by * 2 <= max_by && bx * by * 2 <= max_items) by *= 2;
    const uint64_t gx = ceil_div(width, bx), gy = ceil_div(height, by);
    if (gy > max_gy || gx > static_cast<uint64_t>(std::max(1, info.max_grid_size[0])))
        fail(RT_ERROR_INVALID_VALUE, "a %ux%u picture is larger than a launch on %s can cover (%llu x %llu groups of "
             "%llu x %llu items)", width, height, runtime().stream(stream)->device().label().c_str(),
             static_cast<unsigned long long>(gx), static_cast<unsigned long long>(gy),
             static_cast<unsigned long long>(bx), static_cast<unsigned long long>(by));

    rtLaunchConfig c = RT_LAUNCH_CONFIG_INIT;
    c.grid = {static_cast<unsigned>(gx), static_cast<unsigned>(gy), 1};
    c.block = {static_cast<unsigned>(bx), static_cast<unsigned>(by), 1};
    c.stream = stream;
    c.num_args = num_args;
    c.global[0] = width;  // exact: the items past the picture never run, so kernels need no bounds test
    c.global[1] = height;
    c.global[2] = 1;
    check(rtLaunchKernelEx(function, &c, args), "rtLaunchKernelEx");
}

void check(rtError_t code, const char* api) {
    if (code == RT_SUCCESS) return;
    const char* message = rtGetLastErrorMessage();
    std::string m = message ? message : "";
    // The C API's messages start with their entry point already; say it once.
    if (m.rfind(api, 0) != 0) m = std::string(api) + ": " + m;
    throw Error(code, std::move(m));
}

}  // namespace rt::dvpp
