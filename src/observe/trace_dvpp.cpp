// DVPP operations in the trace (trace_dvpp.hpp): the record of an operation queued inside a DvppScope.
#include "observe/trace_dvpp.hpp"

namespace rt::trace {

namespace detail {
constinit thread_local const DvppWork* t_dvpp = nullptr;
}

Op* dvpp_op(Stream& stream, uint64_t op) noexcept {
    const DvppWork* work = detail::t_dvpp;
    if (!work) return nullptr;
    Op* t = stream_op(stream, Cat::dvpp, op);
    if (!t) return nullptr;
    t->name = work->name;
    t->bytes = work->bytes;
    t->grid[0] = work->src[0];
    t->grid[1] = work->src[1];
    t->block[0] = work->dst[0];
    t->block[1] = work->dst[1];
    t->id = work->image;
    t->kind = work->format;
    return t;
}

}  // namespace rt::trace
