// How a kernel is compiled for cuda: the dialect source made bounded (exact global sizes), NVRTC, cuModuleLoadData.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_driver.hpp"
#include "kernels/target.hpp"

namespace rt::cuda {

/// The program NVRTC compiles for `program`: the prelude (as the header runtime/kernel.h), then the source with
/// every kernel bounded — a leading parameter `rt_extent_ rt_extent_` (the launch's exact global size, passed by
/// the queue ahead of the kernel's own arguments) and, first in its body, `if (rt_outside_(rt_extent_)) return;`,
/// both inserted on the kernel's own lines so diagnostics keep the source's line numbers — the definition of the
/// rt_assert record's pointer (RT_CUDA_FAULT_RECORD_SYMBOL, set when the module is loaded), and the marker kernel
/// that tells a module built so (kBoundedMarker).
std::string bounded_source(const kernels::Program& program);

/// What the cuda target records about a module beside the driver's image (issue 13): the lowered (mangled) names of
/// the kernel instantiations (RT_KERNEL_INSTANTIATE), looked up by their kernel names, and the module's RT_GLOBAL
/// names. Appended to the image file as a trailer (the driver never sees it: load() splits it off); an image
/// without instantiations or globals has none, and is the NVRTC output byte for byte.
struct ImageMeta {
    bool present = false;  ///< the image had a trailer
    std::vector<std::pair<std::string, std::string>> kernels;  ///< (kernel name, lowered name)
    std::vector<std::string> globals;
};
/// `image` with `meta` appended as a trailer (`image` itself when meta has no kernels and no globals).
std::string append_image_meta(const std::string& image, const ImageMeta& meta);
/// Splits the trailer off `data` (an image file's bytes) into `meta`; false (data untouched) when there is none.
bool split_image_meta(std::string& data, ImageMeta& meta);

/// The empty kernel every module the cuda target builds contains: a module without it (a foreign cubin or PTX)
/// follows CUDA's convention, takes no extent parameter, and cannot run fewer items than grid x block.
inline constexpr const char* kBoundedMarker = "rt_bounded_module_v1_";
/// With it, one empty kernel `<kBoundedKernelPrefix><name>` per kernel the front end found and bounded: only those
/// take the extent (a kernel the scan missed — one produced by a macro — follows CUDA's convention instead, so
/// its arguments are never shifted).
inline constexpr const char* kBoundedKernelPrefix = "rt_bounded_v1_";
/// (work-groups) One empty kernel `<kGroupKernelPrefix><name>` per kernel with barriers (rt_items or rt_barrier,
/// kernel.h): the core launches it over whole work-groups only. Such a kernel gets no `rt_outside_` test (every item
/// of a whole group is inside, and an early return before a barrier would leave the others waiting).
inline constexpr const char* kGroupKernelPrefix = "rt_group_v1_";

/// One per cuda device (its architecture and context), or without a driver for compiling only (runtime-compile).
class CudaTarget final : public kernels::Target {
public:
    /// `arch`: sm_XY (cubin, or PTX where NVRTC cannot emit cubin) or compute_XY (PTX); `ptx`: PTX in any case.
    /// Throws rt::Error(INVALID_VALUE) for an architecture not of that form.
    /// `fault_record`: the device address of the device's rt_assert record, set in every module loaded (0: none).
    explicit CudaTarget(std::string arch, bool ptx = false, const Driver* driver = nullptr, CUcontext ctx = nullptr,
                        CUdeviceptr fault_record = 0);
    const char* cache_name() const override { return "cuda"; }
    std::string image_extension() const override;
    std::string identity() const override;
    double build(const kernels::Program& program, const std::string& out) const override;
    std::shared_ptr<backend::Module> load(const std::string& path, bool precompiled) override;

    /// NVRTC's arguments for a program's options: -D/-U/-I pass through, -g becomes -lineinfo, -O levels and
    /// -fwrapv are dropped (NVRTC always optimises; code that needs wrapping spells it out); then -I<toolkit
    /// include> when one is found (toolkit_include).
    std::vector<std::string> nvrtc_arguments(const kernels::Program& program) const;
    const std::string& arch() const { return arch_; }
    /// The CUDA toolkit's include directory given to NVRTC (so kernels may include cuda_fp16.h and the like):
    /// the one next to the NVRTC library in use, else $CUDA_HOME/include, $CUDA_PATH/include or
    /// /usr/local/cuda/include — the first that has cuda_fp16.h; "" when none does. Part of identity(). Found once.
    static const std::string& toolkit_include();

private:
    bool emits_cubin() const;

    std::string arch_;
    bool ptx_;
    const Driver* driver_;
    CUcontext ctx_;
    CUdeviceptr fault_record_;
};

}  // namespace rt::cuda
