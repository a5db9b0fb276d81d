// C API: communicators and collectives (comm.h). Checks every operand, then hands the call to src/comm.
#include <cstring>

#include "capi/capi_common.hpp"
#include "comm/comm.hpp"
#include "comm/reduce.hpp"
#include "core/checked_size.hpp"
#include "graph/capture.hpp"
#include "runtime/comm.h"

using namespace rt;
using comm::Call;
using comm::Kind;

namespace {

/// The C ABI may pass any integer as an enum: read its bytes, never load it as the enum.
template <class E>
int raw_value(const E& e) {
    int v;
    static_assert(sizeof v == sizeof e);
    std::memcpy(&v, &e, sizeof v);
    return v;
}

rtDataType check_type(const rtDataType& type) {
    const int t = raw_value(type);
    if (t < 0 || t >= comm::kDataTypes)
        fail(RT_ERROR_INVALID_VALUE, "datatype %d is out of range (expected an rtDataType: 0 .. 9, RT_INT8 .. RT_BFLOAT16)", t);
    return static_cast<rtDataType>(t);
}

rtReduceOp check_op(const rtReduceOp& op) {
    const int o = raw_value(op);
    if (o < 0 || o >= comm::kReduceOps)
        fail(RT_ERROR_INVALID_VALUE, "op %d is out of range (expected an rtReduceOp: RT_REDUCE_SUM .. RT_REDUCE_AVG)", o);
    return static_cast<rtReduceOp>(o);
}

void check_rank(const comm::Communicator& c, int r, const char* what) {
    if (r < 0 || r >= c.size())
        fail(RT_ERROR_INVALID_VALUE, "%s %d is out of range (the communicator has ranks 0 .. %d)", what, r, c.size() - 1);
}

/// `bytes` from `p` must be device memory of the rank's device (nothing checked for 0 bytes).
void check_buffer(const comm::Communicator& c, const void* p, size_t bytes, const char* role) {
    if (bytes == 0) return;
    const std::string& device = c.device().label();
    if (!p) fail(RT_ERROR_INVALID_VALUE, "%s is NULL (expected %zu bytes of device memory of %s)", role, bytes,
                 device.c_str());
    const PointerInfo info = runtime().registry.lookup(p);
    if (!info.allocation || info.allocation->kind != MemoryKind::device)
        fail(RT_ERROR_INVALID_VALUE, "%s %p is not device memory (expected memory from rtMalloc on %s, the device of "
             "%s)", role, p, device.c_str(), c.label().c_str());
    if (info.allocation->device != &c.device())
        fail(RT_ERROR_INVALID_VALUE, "%s %p is device memory of %s, but %s is on %s (a collective's buffers belong to "
             "its rank's device)", role, p, info.allocation->device->label().c_str(), c.label().c_str(), device.c_str());
    if (info.available < bytes)
        fail(RT_ERROR_INVALID_VALUE, "%s %p has %zu bytes to the end of its allocation, but the operation needs %zu",
             role, p, info.available, bytes);
}

/// send and recv may be the same (in place: recv == send + in_place_offset) or apart, but not overlap otherwise.
void check_overlap(const void* send, size_t send_bytes, const void* recv, size_t recv_bytes, ptrdiff_t in_place_offset,
                   const char* in_place_rule) {
    if (!send || !recv || !send_bytes || !recv_bytes) return;
    const auto s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
    if (r == s + static_cast<uintptr_t>(in_place_offset)) return;
    if (s < r + recv_bytes && r < s + send_bytes)
        fail(RT_ERROR_INVALID_VALUE, "sendbuff %p (%zu bytes) and recvbuff %p (%zu bytes) overlap without being in "
             "place (in place: %s)", send, send_bytes, recv, recv_bytes, in_place_rule);
}

/// Checks `call` for rank `c` and queues it (or keeps it, inside a group).
void submit(rtComm_t handle, Call call, rtStream_t stream_handle) {
    // Borrowed (no reference counts): the objects live through this call, and queued work keeps what it needs.
    auto borrowed = comm::borrow(handle);
    comm::Communicator* c = &comm::live(handle, borrowed.get());
    Runtime& r = runtime();
    auto borrowed_stream = r.streams.borrow(reinterpret_cast<uint64_t>(stream_handle));
    Stream* s = stream_handle ? &r.stream(stream_handle, borrowed_stream) : c->device().default_stream().get();
    if (&s->device() != &c->device())
        fail(RT_ERROR_INVALID_VALUE, "the stream belongs to %s, but %s is on %s (queue a rank's collectives on a stream "
             "of its device)", s->device().label().c_str(), c->label().c_str(), c->device().label().c_str());
    const int n = c->size();
    const size_t es = comm::element_size(call.type);
    const size_t bytes = checked_mul(call.count, es, "count * the element size");
    const size_t all = call.count ? checked_mul(bytes, static_cast<size_t>(n), "nranks * count * the element size") : 0;
    const bool root = call.root == c->rank();
    switch (call.kind) {
        case Kind::all_reduce:
            check_buffer(*c, call.send, bytes, "sendbuff");
            check_buffer(*c, call.recv, bytes, "recvbuff");
            check_overlap(call.send, bytes, call.recv, bytes, 0, "recvbuff == sendbuff");
            break;
        case Kind::broadcast:
            check_rank(*c, call.root, "root");
            if (call.root == c->rank()) check_buffer(*c, call.send, bytes, "sendbuff (of the root)");
            check_buffer(*c, call.recv, bytes, "recvbuff");
            if (root) check_overlap(call.send, bytes, call.recv, bytes, 0, "recvbuff == sendbuff");
            break;
        case Kind::reduce:
            check_rank(*c, call.root, "root");
            check_buffer(*c, call.send, bytes, "sendbuff");
            if (root) {
                check_buffer(*c, call.recv, bytes, "recvbuff (of the root)");
                check_overlap(call.send, bytes, call.recv, bytes, 0, "recvbuff == sendbuff");
            }
            break;
        case Kind::all_gather:
            check_buffer(*c, call.send, bytes, "sendbuff");
            check_buffer(*c, call.recv, all, "recvbuff (nranks * sendcount elements)");
            // In place: send == recv + rank * bytes, i.e. recv == send - rank * bytes.
            check_overlap(call.send, bytes, call.recv, all, -static_cast<ptrdiff_t>(bytes) * c->rank(),
                          "sendbuff == recvbuff + rank * sendcount");
            break;
        case Kind::reduce_scatter:
            check_buffer(*c, call.send, all, "sendbuff (nranks * recvcount elements)");
            check_buffer(*c, call.recv, bytes, "recvbuff");
            check_overlap(call.send, all, call.recv, bytes, static_cast<ptrdiff_t>(bytes) * c->rank(),
                          "recvbuff == sendbuff + rank * recvcount");
            break;
        case Kind::all_to_all:
            check_buffer(*c, call.send, all, "sendbuff (nranks * count elements)");
            check_buffer(*c, call.recv, all, "recvbuff (nranks * count elements)");
            check_overlap(call.send, all, call.recv, all, 0, "recvbuff == sendbuff");
            break;
        case Kind::send:
            check_rank(*c, call.root, "peer");
            check_buffer(*c, call.send, bytes, "sendbuff");
            break;
        case Kind::recv:
            check_rank(*c, call.root, "peer");
            check_buffer(*c, call.recv, bytes, "recvbuff");
            break;
        case Kind::barrier:
            break;
    }
    comm::submit(*c, call, *s, stream_handle);
}

}  // namespace

extern "C" {

RT_API rtError_t rtCommInitAll(rtComm_t* comms, int ndev, const int* devices) {
    return capi_call("rtCommInitAll", [&] {
        require_out(comms, "comms");
        if (ndev < 1) fail(RT_ERROR_INVALID_VALUE, "ndev %d must be at least 1", ndev);
        Runtime& r = runtime();
        std::vector<int> list;
        for (int i = 0; i < ndev; ++i) {
            const int d = devices ? devices[i] : i;
            if (d < 0 || d >= r.device_count())
                fail(RT_ERROR_INVALID_DEVICE, "devices[%d] = %d is not a device (the runtime has devices 0 .. %d)", i, d,
                     r.device_count() - 1);
            list.push_back(d);
        }
        auto created = comm::create_all(list);
        std::vector<rtComm_t> handles;
        try {
            for (auto& c : created) handles.push_back(comm::publish(std::move(c)));
        } catch (...) {
            for (rtComm_t h : handles) comm::unpublish(h);
            throw;
        }
        for (int i = 0; i < ndev; ++i) comms[i] = handles[static_cast<size_t>(i)];
    });
}

RT_API rtError_t rtCommGetUniqueId(rtCommUniqueId* unique_id) {
    return capi_call("rtCommGetUniqueId", [&] {
        require_out(unique_id, "unique_id");
        comm::make_unique_id(unique_id);
    });
}

RT_API rtError_t rtCommInitRank(rtComm_t* comm, int nranks, rtCommUniqueId unique_id, int rank) {
    return capi_call("rtCommInitRank", [&] {
        require_out(comm, "comm");
        if (comm::in_group())
            fail(RT_ERROR_NOT_SUPPORTED, "called between rtGroupStart and rtGroupEnd: it would wait for ranks this "
                 "thread has still to drive (one thread creating several ranks uses rtCommInitAll)");
        refuse_wait_in_queue_context("rtCommInitRank");
        const int device = current_device_index();
        runtime().device(device);
        *comm = comm::publish(comm::join_rank(unique_id, nranks, rank, device));
    });
}

RT_API rtError_t rtCommSplit(rtComm_t comm, int color, int key, rtComm_t* newcomm) {
    return capi_call("rtCommSplit", [&] {
        require_out(newcomm, "newcomm");
        if (color < 0 && color != RT_COMM_SPLIT_NOCOLOR)
            fail(RT_ERROR_INVALID_VALUE, "color %d is negative (expected a color >= 0 or RT_COMM_SPLIT_NOCOLOR)", color);
        auto c = comm::lookup(comm);
        auto wait = c->split(color, key);
        if (comm::in_group()) {
            *newcomm = nullptr;  // written by rtGroupEnd
            comm::keep_split(std::move(wait), newcomm);
            return;
        }
        refuse_wait_in_queue_context("rtCommSplit");
        auto made = comm::finish_split(wait);
        *newcomm = made ? comm::publish(std::move(made)) : nullptr;
    });
}

RT_API rtError_t rtCommCount(rtComm_t comm, int* count) {
    return capi_call("rtCommCount", [&] {
        require_out(count, "count");
        *count = comm::lookup(comm)->size();
    });
}

RT_API rtError_t rtCommUserRank(rtComm_t comm, int* rank) {
    return capi_call("rtCommUserRank", [&] {
        require_out(rank, "rank");
        *rank = comm::lookup(comm)->rank();
    });
}

RT_API rtError_t rtCommDevice(rtComm_t comm, int* device) {
    return capi_call("rtCommDevice", [&] {
        require_out(device, "device");
        *device = comm::lookup(comm)->device_index();
    });
}

RT_API rtError_t rtCommDestroy(rtComm_t comm) {
    return capi_call("rtCommDestroy", [&] {
        comm::lookup(comm);
        comm::unpublish(comm);  // queued parts keep what they use
    });
}

RT_API rtError_t rtCommAbort(rtComm_t comm) {
    return capi_call("rtCommAbort", [&] {
        auto c = comm::lookup(comm);
        comm::abort(*c);
        comm::unpublish(comm);
    });
}

RT_API rtError_t rtCommGetAsyncError(rtComm_t comm, rtError_t* async_error) {
    return capi_call("rtCommGetAsyncError", [&] {
        require_out(async_error, "async_error");
        std::string why;
        *async_error = comm::async_error(*comm::lookup(comm), &why);
        if (*async_error != RT_SUCCESS) set_last_error_message("rtCommGetAsyncError: " + why);
    });
}

RT_API rtError_t rtGroupStart(void) {
    return capi_call("rtGroupStart", [&] { comm::group_start(); });
}

RT_API rtError_t rtGroupEnd(void) {
    return capi_call("rtGroupEnd", [&] { comm::group_end(); });
}

RT_API rtError_t rtAllReduce(const void* sendbuff, void* recvbuff, size_t count, rtDataType datatype, rtReduceOp op,
                             rtComm_t comm, rtStream_t stream) {
    return capi_call("rtAllReduce", [&] {
        submit(comm, Call{Kind::all_reduce, sendbuff, recvbuff, count, check_type(datatype), check_op(op), 0},
               stream);
    });
}

RT_API rtError_t rtBroadcast(const void* sendbuff, void* recvbuff, size_t count, rtDataType datatype, int root,
                             rtComm_t comm, rtStream_t stream) {
    return capi_call("rtBroadcast", [&] {
        submit(comm, Call{Kind::broadcast, sendbuff, recvbuff, count, check_type(datatype), RT_REDUCE_SUM,
                                         root}, stream);
    });
}

RT_API rtError_t rtReduce(const void* sendbuff, void* recvbuff, size_t count, rtDataType datatype, rtReduceOp op,
                          int root, rtComm_t comm, rtStream_t stream) {
    return capi_call("rtReduce", [&] {
        submit(comm, Call{Kind::reduce, sendbuff, recvbuff, count, check_type(datatype), check_op(op), root},
               stream);
    });
}

RT_API rtError_t rtAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, rtDataType datatype,
                             rtComm_t comm, rtStream_t stream) {
    return capi_call("rtAllGather", [&] {
        submit(comm, Call{Kind::all_gather, sendbuff, recvbuff, sendcount, check_type(datatype),
                                         RT_REDUCE_SUM, 0}, stream);
    });
}

RT_API rtError_t rtReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, rtDataType datatype,
                                 rtReduceOp op, rtComm_t comm, rtStream_t stream) {
    return capi_call("rtReduceScatter", [&] {
        submit(comm, Call{Kind::reduce_scatter, sendbuff, recvbuff, recvcount, check_type(datatype),
                                             check_op(op), 0}, stream);
    });
}

RT_API rtError_t rtAlltoAll(const void* sendbuff, void* recvbuff, size_t count, rtDataType datatype, rtComm_t comm,
                            rtStream_t stream) {
    return capi_call("rtAlltoAll", [&] {
        submit(comm, Call{Kind::all_to_all, sendbuff, recvbuff, count, check_type(datatype), RT_REDUCE_SUM,
                                        0}, stream);
    });
}

RT_API rtError_t rtSend(const void* sendbuff, size_t count, rtDataType datatype, int peer, rtComm_t comm,
                        rtStream_t stream) {
    return capi_call("rtSend", [&] {
        submit(comm, Call{Kind::send, sendbuff, nullptr, count, check_type(datatype), RT_REDUCE_SUM, peer},
               stream);
    });
}

RT_API rtError_t rtRecv(void* recvbuff, size_t count, rtDataType datatype, int peer, rtComm_t comm, rtStream_t stream) {
    return capi_call("rtRecv", [&] {
        submit(comm, Call{Kind::recv, nullptr, recvbuff, count, check_type(datatype), RT_REDUCE_SUM, peer},
               stream);
    });
}

RT_API rtError_t rtCommBarrier(rtComm_t comm, rtStream_t stream) {
    return capi_call("rtCommBarrier", [&] {
        submit(comm, Call{Kind::barrier, nullptr, nullptr, 0, RT_INT8, RT_REDUCE_SUM, 0}, stream);
    });
}

}  // extern "C"
