// hccl.cpp — libhccl: the HCCL face (include/hccl/hccl.h) over the runtime's collectives (runtime/comm.h). Checks
// every argument with HCCL's codes, translates HCCL's element types and operators to the runtime's, and maps the
// runtime's errors back to HcclResult; messages go where aclGetRecentErrMsg finds them (acl_common.hpp).
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "acl_common.hpp"
#include "hccl/hccl.h"
#include "runtime/comm.h"

namespace {

/// The aclError recorded with a refusal (for aclrtGetLastError), so that both faces agree on what kind it was.
aclError acl_code(HcclResult code) {
    switch (code) {
    case HCCL_E_PARA:
    case HCCL_E_PTR: return ACL_ERROR_INVALID_PARAM;
    case HCCL_E_NOT_SUPPORT: return ACL_ERROR_FEATURE_UNSUPPORTED;
    case HCCL_E_MEMORY: return ACL_ERROR_BAD_ALLOC;
    case HCCL_E_TIMEOUT: return ACL_ERROR_RT_WAIT_TIMEOUT;
    default: return ACL_ERROR_INTERNAL_ERROR;
    }
}

/// Records "api: message" for aclGetRecentErrMsg (with acl_code(code) for aclrtGetLastError) and returns `code`.
[[gnu::cold, gnu::format(printf, 3, 4)]] HcclResult refuse(HcclResult code, const char* api, const char* format,
                                                            ...) noexcept {
    va_list args;
    va_start(args, format);
    acl::vfail(acl_code(code), api, format, args);
    va_end(args);
    return code;
}

/// HCCL's code for a runtime failure.
HcclResult from_rt(rtError_t e) {
    switch (e) {
    case RT_SUCCESS: return HCCL_SUCCESS;
    case RT_ERROR_INVALID_VALUE:
    case RT_ERROR_INVALID_DEVICE:
    case RT_ERROR_INVALID_HANDLE: return HCCL_E_PARA;
    case RT_ERROR_OUT_OF_MEMORY: return HCCL_E_MEMORY;
    case RT_ERROR_NOT_SUPPORTED: return HCCL_E_NOT_SUPPORT;
    case RT_ERROR_TIMEOUT: return HCCL_E_TIMEOUT;
    case RT_ERROR_ILLEGAL_STATE: return HCCL_E_REMOTE;  // the communicator was aborted or failed on another rank
    case RT_ERROR_NOT_INITIALIZED:
    case RT_ERROR_DEVICE_LOST: return HCCL_E_DRV;
    case RT_ERROR_NOT_PERMITTED:
    case RT_ERROR_LAUNCH_FAILED:
    case RT_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    case RT_ERROR_STREAM_CAPTURE_INVALIDATED:
    case RT_ERROR_STREAM_CAPTURE_UNJOINED:
    case RT_ERROR_STREAM_CAPTURE_IMPLICIT:
    case RT_ERROR_STREAM_CAPTURE_WRONG_THREAD:
    case RT_ERROR_STREAM_CAPTURE_ISOLATION: return HCCL_E_RUNTIME;
    default: return HCCL_E_INTERNAL;
    }
}

/// The result of an rt* call made for `api`: on failure, the runtime's message is kept and HCCL's code returned.
HcclResult check_rt(rtError_t e, const char* api) {
    if (e == RT_SUCCESS) [[likely]] return HCCL_SUCCESS;
    const HcclResult code = from_rt(e);
    acl::fail_rt(e, api, acl_code(code));
    return code;
}

/// An HCCL element type: its size, and the runtime's type when the runtime has it (reductions need one; data movement
/// of the others goes as bytes).
struct Type {
    size_t bytes = 0;  // 0: not an HcclDataType
    int rt = -1;       // an rtDataType, or -1
    const char* name = nullptr;
};

Type type_of(int t) {
    switch (t) {
    case HCCL_DATA_TYPE_INT8: return {1, RT_INT8, "HCCL_DATA_TYPE_INT8"};
    case HCCL_DATA_TYPE_INT16: return {2, -1, "HCCL_DATA_TYPE_INT16"};
    case HCCL_DATA_TYPE_INT32: return {4, RT_INT32, "HCCL_DATA_TYPE_INT32"};
    case HCCL_DATA_TYPE_FP16: return {2, RT_FLOAT16, "HCCL_DATA_TYPE_FP16"};
    case HCCL_DATA_TYPE_FP32: return {4, RT_FLOAT32, "HCCL_DATA_TYPE_FP32"};
    case HCCL_DATA_TYPE_INT64: return {8, RT_INT64, "HCCL_DATA_TYPE_INT64"};
    case HCCL_DATA_TYPE_UINT64: return {8, RT_UINT64, "HCCL_DATA_TYPE_UINT64"};
    case HCCL_DATA_TYPE_UINT8: return {1, RT_UINT8, "HCCL_DATA_TYPE_UINT8"};
    case HCCL_DATA_TYPE_UINT16: return {2, -1, "HCCL_DATA_TYPE_UINT16"};
    case HCCL_DATA_TYPE_UINT32: return {4, RT_UINT32, "HCCL_DATA_TYPE_UINT32"};
    case HCCL_DATA_TYPE_FP64: return {8, RT_FLOAT64, "HCCL_DATA_TYPE_FP64"};
    case HCCL_DATA_TYPE_BFP16: return {2, RT_BFLOAT16, "HCCL_DATA_TYPE_BFP16"};
    case HCCL_DATA_TYPE_INT128: return {16, -1, "HCCL_DATA_TYPE_INT128"};
    case HCCL_DATA_TYPE_HIF8: return {1, -1, "HCCL_DATA_TYPE_HIF8"};
    case HCCL_DATA_TYPE_FP8E4M3: return {1, -1, "HCCL_DATA_TYPE_FP8E4M3"};
    case HCCL_DATA_TYPE_FP8E5M2: return {1, -1, "HCCL_DATA_TYPE_FP8E5M2"};
    case HCCL_DATA_TYPE_FP8E8M0: return {1, -1, "HCCL_DATA_TYPE_FP8E8M0"};
    default: return {};
    }
}

constexpr const char* kTypes = "HCCL_DATA_TYPE_INT8 (0) .. HCCL_DATA_TYPE_INT128 (12), HCCL_DATA_TYPE_HIF8 (14) .. "
                               "HCCL_DATA_TYPE_FP8E8M0 (17)";

/// What a data-movement call hands the runtime: `count` elements of `type` (the HCCL type itself, or its bytes).
struct Moved {
    size_t count = 0;
    rtDataType type = RT_UINT8;
};

HcclResult movement_type(HcclDataType dataType, uint64_t count, const char* api, const char* what, Moved* out) {
    const int t = acl::enum_value(dataType);
    const Type info = type_of(t);
    if (!info.bytes)
        return refuse(HCCL_E_PARA, api, "%s %d is not an HcclDataType (expected %s)", what, t, kTypes);
    if (info.rt >= 0) {
        *out = {static_cast<size_t>(count), static_cast<rtDataType>(info.rt)};
        return HCCL_SUCCESS;
    }
    if (count > std::numeric_limits<size_t>::max() / info.bytes)
        return refuse(HCCL_E_PARA, api, "count %llu of %s is more bytes than the address space holds",
                      static_cast<unsigned long long>(count), info.name);
    *out = {static_cast<size_t>(count) * info.bytes, RT_UINT8};
    return HCCL_SUCCESS;
}

HcclResult reduction_type(HcclDataType dataType, const char* api, rtDataType* out) {
    const int t = acl::enum_value(dataType);
    const Type info = type_of(t);
    if (!info.bytes)
        return refuse(HCCL_E_PARA, api, "dataType %d is not an HcclDataType (expected %s)", t, kTypes);
    if (info.rt < 0)
        return refuse(HCCL_E_NOT_SUPPORT, api, "dataType %s is not reduced by this library (reductions take INT8, "
                      "UINT8, INT32, UINT32, INT64, UINT64, FP16, BFP16, FP32 and FP64; it can be broadcast, gathered "
                      "and sent)", info.name);
    *out = static_cast<rtDataType>(info.rt);
    return HCCL_SUCCESS;
}

HcclResult reduce_op(HcclReduceOp op, const char* api, rtReduceOp* out) {
    const int o = acl::enum_value(op);
    switch (o) {
    case HCCL_REDUCE_SUM: *out = RT_REDUCE_SUM; return HCCL_SUCCESS;
    case HCCL_REDUCE_PROD: *out = RT_REDUCE_PROD; return HCCL_SUCCESS;
    case HCCL_REDUCE_MAX: *out = RT_REDUCE_MAX; return HCCL_SUCCESS;
    case HCCL_REDUCE_MIN: *out = RT_REDUCE_MIN; return HCCL_SUCCESS;
    default:
        return refuse(HCCL_E_PARA, api, "op %d is not an HcclReduceOp (expected HCCL_REDUCE_SUM (0), "
                      "HCCL_REDUCE_PROD (1), HCCL_REDUCE_MAX (2) or HCCL_REDUCE_MIN (3))", o);
    }
}

/// A live communicator: *size and *rank of this handle.
HcclResult comm_info(HcclComm comm, const char* api, int* size, int* rank) {
    if (!comm) return refuse(HCCL_E_PTR, api, "comm is NULL (expected a communicator from HcclCommInitAll or "
                             "HcclCommInitRootInfo)");
    const auto c = static_cast<rtComm_t>(comm);
    if (HcclResult r = check_rt(rtCommCount(c, size), api)) return r;
    return check_rt(rtCommUserRank(c, rank), api);
}

HcclResult require_rank(uint32_t r, int size, const char* api, const char* what) {
    if (r >= static_cast<uint32_t>(size))
        return refuse(HCCL_E_PARA, api, "%s %u is out of range (the communicator has ranks 0 .. %d)", what, r,
                      size - 1);
    return HCCL_SUCCESS;
}

#define HCCL_REQUIRE_PTR(api, p)                                                                                       \
    do {                                                                                                               \
        if ((p) == nullptr) [[unlikely]]                                                                               \
            return refuse(HCCL_E_PTR, api, "%s is NULL", #p);                                                         \
    } while (0)

#define HCCL_TRY(expr)                                                                                                 \
    do {                                                                                                               \
        if (const HcclResult r_ = (expr); r_ != HCCL_SUCCESS) return r_;                                               \
    } while (0)

// HcclRootInfo carries the runtime's unique id after a tag, so that bytes that did not come from HcclGetRootInfo are
// recognised.
constexpr char kRootTag[16] = "runtime-hccl-v1";
static_assert(sizeof kRootTag + sizeof(rtCommUniqueId) <= sizeof(HcclRootInfo));

HcclResult require_init(const char* api) {
    if (!acl::initialised())
        return refuse(HCCL_E_RUNTIME, api, "AscendCL is not initialised: call aclInit (and aclrtSetDevice) first");
    return HCCL_SUCCESS;
}

/// AscendCL initialised and a current context on the calling thread (communicators and collectives use a device).
HcclResult require_device(const char* api) {
    HCCL_TRY(require_init(api));
    if (acl::require_context(api) != ACL_SUCCESS) return HCCL_E_RUNTIME;  // the message says what is missing
    return HCCL_SUCCESS;
}

}  // namespace

extern "C" {

HcclResult HcclGetRootInfo(HcclRootInfo* rootInfo) {
    constexpr const char* api = "HcclGetRootInfo";
    HCCL_TRY(require_init(api));
    HCCL_REQUIRE_PTR(api, rootInfo);
    HCCL_TRY(require_device(api));
    rtCommUniqueId id;
    HCCL_TRY(check_rt(rtCommGetUniqueId(&id), api));
    std::memset(rootInfo->internal, 0, sizeof rootInfo->internal);
    std::memcpy(rootInfo->internal, kRootTag, sizeof kRootTag);
    std::memcpy(rootInfo->internal + sizeof kRootTag, &id, sizeof id);
    return HCCL_SUCCESS;
}

HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo* rootInfo, uint32_t rank, HcclComm* comm) {
    constexpr const char* api = "HcclCommInitRootInfo";
    HCCL_TRY(require_init(api));
    HCCL_REQUIRE_PTR(api, rootInfo);
    HCCL_REQUIRE_PTR(api, comm);
    if (std::memcmp(rootInfo->internal, kRootTag, sizeof kRootTag) != 0)
        return refuse(HCCL_E_PARA, api, "rootInfo was not made by HcclGetRootInfo (hand every rank the bytes the root "
                      "rank's HcclGetRootInfo wrote)");
    if (nRanks < 1 || nRanks > static_cast<uint32_t>(std::numeric_limits<int>::max()))
        return refuse(HCCL_E_PARA, api, "nRanks %u is out of range (expected at least 1)", nRanks);
    if (rank >= nRanks)
        return refuse(HCCL_E_PARA, api, "rank %u is out of range (expected 0 .. nRanks - 1 = %u)", rank, nRanks - 1);
    HCCL_TRY(require_device(api));  // the rank's device is the calling thread's
    rtCommUniqueId id;
    std::memcpy(&id, rootInfo->internal + sizeof kRootTag, sizeof id);
    rtComm_t made = nullptr;
    HCCL_TRY(check_rt(rtCommInitRank(&made, static_cast<int>(nRanks), id, static_cast<int>(rank)), api));
    *comm = made;
    return HCCL_SUCCESS;
}

HcclResult HcclCommInitAll(uint32_t ndev, int32_t* devices, HcclComm* comms) {
    constexpr const char* api = "HcclCommInitAll";
    HCCL_TRY(require_init(api));  // names its devices: no current context needed
    HCCL_REQUIRE_PTR(api, devices);
    HCCL_REQUIRE_PTR(api, comms);
    int count = 0;
    HCCL_TRY(check_rt(rtGetDeviceCount(&count), api));
    if (ndev < 1 || ndev > static_cast<uint32_t>(count))
        return refuse(HCCL_E_PARA, api, "ndev %u is out of range (expected 1 .. %d, the number of devices)", ndev,
                      count);
    for (uint32_t i = 0; i < ndev; ++i) {
        if (devices[i] < 0 || devices[i] >= count)
            return refuse(HCCL_E_PARA, api, "devices[%u] = %d is not a device (the devices are 0 .. %d)", i, devices[i],
                          count - 1);
        for (uint32_t j = 0; j < i; ++j)
            if (devices[j] == devices[i])
                return refuse(HCCL_E_PARA, api, "devices[%u] and devices[%u] are both device %d (HCCL's rule: each "
                              "rank on a device of its own)", j, i, devices[i]);
    }
    static_assert(sizeof(int32_t) == sizeof(int));
    std::vector<rtComm_t> made(ndev);
    HCCL_TRY(check_rt(rtCommInitAll(made.data(), static_cast<int>(ndev), devices), api));
    for (uint32_t i = 0; i < ndev; ++i) comms[i] = made[i];
    return HCCL_SUCCESS;
}

HcclResult HcclGetRankSize(HcclComm comm, uint32_t* rankSize) {
    constexpr const char* api = "HcclGetRankSize";
    HCCL_REQUIRE_PTR(api, rankSize);
    int size = 0, rank = 0;
    HCCL_TRY(comm_info(comm, api, &size, &rank));
    *rankSize = static_cast<uint32_t>(size);
    return HCCL_SUCCESS;
}

HcclResult HcclGetRankId(HcclComm comm, uint32_t* rank) {
    constexpr const char* api = "HcclGetRankId";
    HCCL_REQUIRE_PTR(api, rank);
    int size = 0, me = 0;
    HCCL_TRY(comm_info(comm, api, &size, &me));
    *rank = static_cast<uint32_t>(me);
    return HCCL_SUCCESS;
}

HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult* asyncError) {
    constexpr const char* api = "HcclGetCommAsyncError";
    HCCL_REQUIRE_PTR(api, comm);
    HCCL_REQUIRE_PTR(api, asyncError);
    rtError_t e = RT_SUCCESS;
    HCCL_TRY(check_rt(rtCommGetAsyncError(static_cast<rtComm_t>(comm), &e), api));
    *asyncError = from_rt(e);  // the call itself succeeded: nothing is recorded as this thread's failure
    return HCCL_SUCCESS;
}

HcclResult HcclCommDestroy(HcclComm comm) {
    constexpr const char* api = "HcclCommDestroy";
    HCCL_REQUIRE_PTR(api, comm);
    return check_rt(rtCommDestroy(static_cast<rtComm_t>(comm)), api);
}

const char* HcclGetErrorString(HcclResult code) {
    switch (acl::enum_value(code)) {
    case HCCL_SUCCESS: return "HCCL_SUCCESS";
    case HCCL_E_PARA: return "HCCL_E_PARA";
    case HCCL_E_PTR: return "HCCL_E_PTR";
    case HCCL_E_MEMORY: return "HCCL_E_MEMORY";
    case HCCL_E_INTERNAL: return "HCCL_E_INTERNAL";
    case HCCL_E_NOT_SUPPORT: return "HCCL_E_NOT_SUPPORT";
    case HCCL_E_NOT_FOUND: return "HCCL_E_NOT_FOUND";
    case HCCL_E_UNAVAIL: return "HCCL_E_UNAVAIL";
    case HCCL_E_SYSCALL: return "HCCL_E_SYSCALL";
    case HCCL_E_TIMEOUT: return "HCCL_E_TIMEOUT";
    case HCCL_E_OPEN_FILE_FAILURE: return "HCCL_E_OPEN_FILE_FAILURE";
    case HCCL_E_TCP_CONNECT: return "HCCL_E_TCP_CONNECT";
    case HCCL_E_ROCE_CONNECT: return "HCCL_E_ROCE_CONNECT";
    case HCCL_E_TCP_TRANSFER: return "HCCL_E_TCP_TRANSFER";
    case HCCL_E_ROCE_TRANSFER: return "HCCL_E_ROCE_TRANSFER";
    case HCCL_E_RUNTIME: return "HCCL_E_RUNTIME";
    case HCCL_E_DRV: return "HCCL_E_DRV";
    case HCCL_E_PROFILING: return "HCCL_E_PROFILING";
    case HCCL_E_CCE: return "HCCL_E_CCE";
    case HCCL_E_NETWORK: return "HCCL_E_NETWORK";
    case HCCL_E_AGAIN: return "HCCL_E_AGAIN";
    case HCCL_E_REMOTE: return "HCCL_E_REMOTE";
    case HCCL_E_SUSPENDING: return "HCCL_E_SUSPENDING";
    default: return "HCCL_E_UNKNOWN";
    }
}

HcclResult HcclAllReduce(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType, HcclReduceOp op,
                         HcclComm comm, aclrtStream stream) {
    constexpr const char* api = "HcclAllReduce";
    HCCL_TRY(require_device(api));
    HCCL_REQUIRE_PTR(api, comm);
    HCCL_REQUIRE_PTR(api, sendBuf);
    HCCL_REQUIRE_PTR(api, recvBuf);
    rtDataType type = RT_INT8;
    rtReduceOp rop = RT_REDUCE_SUM;
    HCCL_TRY(reduction_type(dataType, api, &type));
    HCCL_TRY(reduce_op(op, api, &rop));
    return check_rt(rtAllReduce(sendBuf, recvBuf, count, type, rop, static_cast<rtComm_t>(comm),
                                static_cast<rtStream_t>(stream)), api);
}

HcclResult HcclBroadcast(void* buf, uint64_t count, HcclDataType dataType, uint32_t root, HcclComm comm,
                         aclrtStream stream) {
    constexpr const char* api = "HcclBroadcast";
    HCCL_TRY(require_device(api));
    HCCL_REQUIRE_PTR(api, buf);
    int size = 0, rank = 0;
    HCCL_TRY(comm_info(comm, api, &size, &rank));
    HCCL_TRY(require_rank(root, size, api, "root"));
    Moved m;
    HCCL_TRY(movement_type(dataType, count, api, "dataType", &m));
    return check_rt(rtBroadcast(buf, buf, m.count, m.type, static_cast<int>(root), static_cast<rtComm_t>(comm),
                                static_cast<rtStream_t>(stream)), api);
}

HcclResult HcclReduce(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType, HcclReduceOp op,
                      uint32_t root, HcclComm comm, aclrtStream stream) {
    constexpr const char* api = "HcclReduce";
    HCCL_TRY(require_device(api));
    HCCL_REQUIRE_PTR(api, sendBuf);
    int size = 0, rank = 0;
    HCCL_TRY(comm_info(comm, api, &size, &rank));
    HCCL_TRY(require_rank(root, size, api, "root"));
    if (rank == static_cast<int>(root)) HCCL_REQUIRE_PTR(api, recvBuf);
    rtDataType type = RT_INT8;
    rtReduceOp rop = RT_REDUCE_SUM;
    HCCL_TRY(reduction_type(dataType, api, &type));
    HCCL_TRY(reduce_op(op, api, &rop));
    return check_rt(rtReduce(sendBuf, recvBuf, count, type, rop, static_cast<int>(root), static_cast<rtComm_t>(comm),
                             static_cast<rtStream_t>(stream)), api);
}

HcclResult HcclAllGather(void* sendBuf, void* recvBuf, uint64_t sendCount, HcclDataType dataType, HcclComm comm,
                         aclrtStream stream) {
    constexpr const char* api = "HcclAllGather";
    HCCL_TRY(require_device(api));
    HCCL_REQUIRE_PTR(api, comm);
    HCCL_REQUIRE_PTR(api, sendBuf);
    HCCL_REQUIRE_PTR(api, recvBuf);
    Moved m;
    HCCL_TRY(movement_type(dataType, sendCount, api, "dataType", &m));
    return check_rt(rtAllGather(sendBuf, recvBuf, m.count, m.type, static_cast<rtComm_t>(comm),
                                static_cast<rtStream_t>(stream)), api);
}

HcclResult HcclReduceScatter(void* sendBuf, void* recvBuf, uint64_t recvCount, HcclDataType dataType,
                             HcclReduceOp op, HcclComm comm, aclrtStream stream) {
    constexpr const char* api = "HcclReduceScatter";
    HCCL_TRY(require_device(api));
    HCCL_REQUIRE_PTR(api, comm);
    HCCL_REQUIRE_PTR(api, sendBuf);
    HCCL_REQUIRE_PTR(api, recvBuf);
    rtDataType type = RT_INT8;
    rtReduceOp rop = RT_REDUCE_SUM;
    HCCL_TRY(reduction_type(dataType, api, &type));
    HCCL_TRY(reduce_op(op, api, &rop));
    return check_rt(rtReduceScatter(sendBuf, recvBuf, recvCount, type, rop, static_cast<rtComm_t>(comm),
                                    static_cast<rtStream_t>(stream)), api);
}

HcclResult HcclAlltoAll(const void* sendBuf, uint64_t sendCount, HcclDataType sendType, const void* recvBuf,
                        uint64_t recvCount, HcclDataType recvType, HcclComm comm, aclrtStream stream) {
    constexpr const char* api = "HcclAlltoAll";
    HCCL_TRY(require_device(api));
    HCCL_REQUIRE_PTR(api, comm);
    HCCL_REQUIRE_PTR(api, sendBuf);
    HCCL_REQUIRE_PTR(api, recvBuf);
    const Type s = type_of(acl::enum_value(sendType)), r = type_of(acl::enum_value(recvType));
    if (!s.bytes)
        return refuse(HCCL_E_PARA, api, "sendType %d is not an HcclDataType (expected %s)", acl::enum_value(sendType),
                      kTypes);
    if (!r.bytes)
        return refuse(HCCL_E_PARA, api, "recvType %d is not an HcclDataType (expected %s)", acl::enum_value(recvType),
                      kTypes);
    if (sendCount > std::numeric_limits<size_t>::max() / s.bytes)
        return refuse(HCCL_E_PARA, api, "sendCount %llu of %s is more bytes than the address space holds",
                      static_cast<unsigned long long>(sendCount), s.name);
    Moved m;
    HCCL_TRY(movement_type(sendType, sendCount, api, "sendType", &m));
    const size_t send_bytes = static_cast<size_t>(sendCount) * s.bytes;
    if (recvCount > std::numeric_limits<size_t>::max() / r.bytes || recvCount * r.bytes != send_bytes)
        return refuse(HCCL_E_PARA, api, "sendCount %llu of %s is %zu bytes per rank, but recvCount %llu of %s is not "
                      "the same number of bytes (every rank sends to each rank what it receives from each)",
                      static_cast<unsigned long long>(sendCount), s.name, send_bytes,
                      static_cast<unsigned long long>(recvCount), r.name);
    return check_rt(rtAlltoAll(sendBuf, const_cast<void*>(recvBuf), m.count, m.type, static_cast<rtComm_t>(comm),
                               static_cast<rtStream_t>(stream)), api);
}

HcclResult HcclSend(void* sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank, HcclComm comm,
                    aclrtStream stream) {
    constexpr const char* api = "HcclSend";
    HCCL_TRY(require_device(api));
    HCCL_REQUIRE_PTR(api, sendBuf);
    int size = 0, rank = 0;
    HCCL_TRY(comm_info(comm, api, &size, &rank));
    HCCL_TRY(require_rank(destRank, size, api, "destRank"));
    Moved m;
    HCCL_TRY(movement_type(dataType, count, api, "dataType", &m));
    return check_rt(rtSend(sendBuf, m.count, m.type, static_cast<int>(destRank), static_cast<rtComm_t>(comm),
                           static_cast<rtStream_t>(stream)), api);
}

HcclResult HcclRecv(void* recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank, HcclComm comm,
                    aclrtStream stream) {
    constexpr const char* api = "HcclRecv";
    HCCL_TRY(require_device(api));
    HCCL_REQUIRE_PTR(api, recvBuf);
    int size = 0, rank = 0;
    HCCL_TRY(comm_info(comm, api, &size, &rank));
    HCCL_TRY(require_rank(srcRank, size, api, "srcRank"));
    Moved m;
    HCCL_TRY(movement_type(dataType, count, api, "dataType", &m));
    return check_rt(rtRecv(recvBuf, m.count, m.type, static_cast<int>(srcRank), static_cast<rtComm_t>(comm),
                           static_cast<rtStream_t>(stream)), api);
}

HcclResult HcclBarrier(HcclComm comm, aclrtStream stream) {
    constexpr const char* api = "HcclBarrier";
    HCCL_TRY(require_device(api));
    HCCL_REQUIRE_PTR(api, comm);
    return check_rt(rtCommBarrier(static_cast<rtComm_t>(comm), static_cast<rtStream_t>(stream)), api);
}

}  // extern "C"
