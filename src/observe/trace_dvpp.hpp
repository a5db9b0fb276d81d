// DVPP operations in the trace: the host functions and kernels a DVPP call queues are recorded as `dvpp` spans named
// for the call's work ("jpeg decode", "resize") rather than as the anonymous host functions and kernels that carry it.
#pragma once

#include <cstdint>

#include "observe/trace.hpp"

namespace rt {
class Stream;
}

namespace rt::trace {

/// What the operations a DVPP call queues next on this thread do. The call fills it (and may change the per-image
/// fields between the operations it queues); the records take a copy when each operation is queued.
struct DvppWork {
    const char* name = "";     ///< a string literal: "jpeg decode", "resize", ...
    uint64_t bytes = 0;        ///< the bytes of the output picture (an encode: of the picture it reads)
    uint32_t src[2] = {};      ///< the width and height read: a crop's, else the source picture's (a decode: the
                               ///< encoded image's, before scale)
    uint32_t dst[2] = {};      ///< the width and height written: a paste rectangle's, else the output picture's
    uint64_t image = 0;        ///< the image (picture, crop) of a batch call the operation works on; 0 otherwise
    const char* format = nullptr;  ///< the output picture's pixel format ("NV12"), static text
};

namespace detail {
extern constinit thread_local const DvppWork* t_dvpp;
}

/// Makes `work` describe the host functions and kernels this thread queues while the scope lives. Only while a
/// trace is written (one branch on trace::on() otherwise); scopes do not nest (the inner one wins until it ends).
class DvppScope {
public:
    explicit DvppScope(const DvppWork& work) noexcept {
        if (on()) [[unlikely]] {
            previous_ = detail::t_dvpp;
            detail::t_dvpp = &work;
            set_ = true;
        }
    }
    ~DvppScope() {
        if (set_) [[unlikely]] detail::t_dvpp = previous_;
    }
    DvppScope(const DvppScope&) = delete;
    DvppScope& operator=(const DvppScope&) = delete;

private:
    const DvppWork* previous_ = nullptr;
    bool set_ = false;
};

/// The record of operation `op` of `stream` when this thread is inside a DvppScope: a `dvpp` span carrying the
/// scope's work (Op::name, bytes; src in grid[0..1], dst in block[0..1], image in id, format in kind), else null.
/// The core's describe of a host function and of a kernel launch asks it first (so only while on()).
Op* dvpp_op(Stream& stream, uint64_t op) noexcept;

}  // namespace rt::trace
