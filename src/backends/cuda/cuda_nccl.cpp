// NCCL for collectives on cuda devices: libnccl.so.2 opened with dlopen (where pip's nvidia-nccl-cu12/-cu13 put it
// too), comm.h's calls mapped to NCCL's of the same shape on the rank's CUstream.
#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <atomic>
#include <map>
#include <mutex>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/nvrtc.hpp"
#include "comm/comm.hpp"
#include "comm/reduce.hpp"
#include "core/error.hpp"
#include "observe/log.hpp"

namespace rt::cuda {

namespace {

// ---- NCCL's public API as nccl.h declares it (the types and values we use; NCCL 2.x ABI).
using ncclComm_t = struct ncclComm*;
constexpr size_t kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct ncclUniqueId {
    char internal[kNcclUniqueIdBytes];
};
using ncclResult_t = int;  // ncclSuccess = 0, then ncclUnhandledCudaError, ncclSystemError, ncclInternalError,
                           // ncclInvalidArgument, ncclInvalidUsage, ncclRemoteError, ncclInProgress
constexpr ncclResult_t ncclSuccess = 0;
constexpr ncclResult_t ncclInvalidArgument = 4;
constexpr ncclResult_t ncclInvalidUsage = 5;
constexpr ncclResult_t ncclInProgress = 7;
using ncclDataType_t = int;  // ncclInt8 0, ncclUint8 1, ncclInt32 2, ncclUint32 3, ncclInt64 4, ncclUint64 5,
                             // ncclFloat16 6, ncclFloat32 7, ncclFloat64 8, ncclBfloat16 9
using ncclRedOp_t = int;     // ncclSum 0, ncclProd 1, ncclMax 2, ncclMin 3, ncclAvg 4

struct Nccl {
    const char* (*ncclGetErrorString)(ncclResult_t) = nullptr;
    const char* (*ncclGetLastError)(ncclComm_t) = nullptr;  // optional (2.13+)
    ncclResult_t (*ncclGetVersion)(int*) = nullptr;
    ncclResult_t (*ncclGetUniqueId)(ncclUniqueId*) = nullptr;
    ncclResult_t (*ncclCommInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
    ncclResult_t (*ncclCommInitAll)(ncclComm_t*, int, const int*) = nullptr;
    ncclResult_t (*ncclCommDestroy)(ncclComm_t) = nullptr;
    ncclResult_t (*ncclCommAbort)(ncclComm_t) = nullptr;
    ncclResult_t (*ncclCommGetAsyncError)(ncclComm_t, ncclResult_t*) = nullptr;
    ncclResult_t (*ncclCommCount)(ncclComm_t, int*) = nullptr;
    ncclResult_t (*ncclCommUserRank)(ncclComm_t, int*) = nullptr;
    ncclResult_t (*ncclCommSplit)(ncclComm_t, int, int, ncclComm_t*, void*) = nullptr;  // optional (2.18+)
    ncclResult_t (*ncclAllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, CUstream) = nullptr;
    ncclResult_t (*ncclBroadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, CUstream) = nullptr;
    ncclResult_t (*ncclReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, CUstream) = nullptr;
    ncclResult_t (*ncclAllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, CUstream) = nullptr;
    ncclResult_t (*ncclReduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, CUstream) = nullptr;
    ncclResult_t (*ncclSend)(const void*, size_t, ncclDataType_t, int, ncclComm_t, CUstream) = nullptr;
    ncclResult_t (*ncclRecv)(void*, size_t, ncclDataType_t, int, ncclComm_t, CUstream) = nullptr;
    ncclResult_t (*ncclGroupStart)() = nullptr;
    ncclResult_t (*ncclGroupEnd)() = nullptr;
    std::string library;  ///< the file opened
    int version = 0;
    std::string why;      ///< empty when loaded
};

bool is_file(const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// $RUNTIME_NCCL_LIB alone when set; else libnccl.so.2 by soname (the loader's search), then under every Python
/// package folder (NvrtcSearch's: pip's nvidia-nccl-cu12/-cu13 wheels install nvidia/nccl/lib/libnccl.so.2).
std::vector<std::string> candidates() {
    if (const char* e = std::getenv("RUNTIME_NCCL_LIB"); e && *e) return {e};
    std::vector<std::string> out = {"libnccl.so.2"};
    for (const std::string& folder : nvrtc_search_from_environment().python_packages)
        for (const char* sub : {"/nvidia/nccl/lib/libnccl.so.2", "/nvidia/cu13/lib/libnccl.so.2"})
            if (is_file(folder + sub)) out.push_back(folder + sub);
    return out;
}

Nccl load() {
    Nccl n;
    std::string tried;
    for (const std::string& lib : candidates()) {
        void* h = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char* err = ::dlerror();
            tried += (tried.empty() ? "" : "; ") + lib + ": " + (err ? err : "dlopen failed");
            continue;
        }
        std::string missing;
        auto resolve = [&](auto& fn, const char* symbol, bool required) {
            void* p = ::dlsym(h, symbol);
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
            if (!p && required) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
        };
#define RT_NCCL_(name) resolve(n.name, #name, true)
        RT_NCCL_(ncclGetErrorString);
        RT_NCCL_(ncclGetVersion);
        RT_NCCL_(ncclGetUniqueId);
        RT_NCCL_(ncclCommInitRank);
        RT_NCCL_(ncclCommInitAll);
        RT_NCCL_(ncclCommDestroy);
        RT_NCCL_(ncclCommAbort);
        RT_NCCL_(ncclCommGetAsyncError);
        RT_NCCL_(ncclCommCount);
        RT_NCCL_(ncclCommUserRank);
        RT_NCCL_(ncclAllReduce);
        RT_NCCL_(ncclBroadcast);
        RT_NCCL_(ncclReduce);
        RT_NCCL_(ncclAllGather);
        RT_NCCL_(ncclReduceScatter);
        RT_NCCL_(ncclSend);
        RT_NCCL_(ncclRecv);
        RT_NCCL_(ncclGroupStart);
        RT_NCCL_(ncclGroupEnd);
#undef RT_NCCL_
        resolve(n.ncclGetLastError, "ncclGetLastError", false);
        resolve(n.ncclCommSplit, "ncclCommSplit", false);
        if (!missing.empty()) {
            tried += (tried.empty() ? "" : "; ") + lib + ": lacks " + missing;
            ::dlclose(h);
            continue;
        }
        n.library = lib;
        n.ncclGetVersion(&n.version);
        RT_LOG(backend, info, "NCCL %d from '%s'", n.version, lib.c_str());
        return n;
    }
    n.why = "collectives on cuda devices use NCCL, and libnccl.so.2 cannot be loaded (" + tried +
            "): install NCCL (PyPI: pip install nvidia-nccl-cu12, or -cu13) or name the library in RUNTIME_NCCL_LIB";
    return n;
}

/// NCCL for this process: loaded once per distinct $RUNTIME_NCCL_LIB (a failure too), never closed.
const Nccl& nccl() {
    static std::mutex mutex;
    static std::map<std::string, Nccl> loaded;
    std::lock_guard lock(mutex);
    const char* e = std::getenv("RUNTIME_NCCL_LIB");
    auto [it, fresh] = loaded.try_emplace(e ? e : "");
    if (fresh) it->second = load();
    return it->second;
}

/// Throws for a failed NCCL call: INVALID_VALUE for NCCL's argument and usage errors, LAUNCH_FAILED otherwise.
void check(const Nccl& n, ncclResult_t r, const char* call, ncclComm_t comm = nullptr) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    const char* last = n.ncclGetLastError ? n.ncclGetLastError(comm) : nullptr;
    fail(r == ncclInvalidArgument || r == ncclInvalidUsage ? RT_ERROR_INVALID_VALUE : RT_ERROR_LAUNCH_FAILED,
         "%s failed: %s (ncclResult_t %d)%s%s", call, n.ncclGetErrorString(r), r, last && *last ? ": " : "",
         last ? last : "");
}

ncclDataType_t nccl_type(rtDataType t) {
    switch (t) {
        case RT_INT8: return 0;
        case RT_UINT8: return 1;
        case RT_INT32: return 2;
        case RT_UINT32: return 3;
        case RT_INT64: return 4;
        case RT_UINT64: return 5;
        case RT_FLOAT16: return 6;
        case RT_FLOAT32: return 7;
        case RT_FLOAT64: return 8;
        case RT_BFLOAT16: return 9;
    }
    fail(RT_ERROR_INVALID_VALUE, "datatype %d has no NCCL counterpart", static_cast<int>(t));
}

ncclRedOp_t nccl_op(rtReduceOp op) {
    switch (op) {
        case RT_REDUCE_SUM: return 0;
        case RT_REDUCE_PROD: return 1;
        case RT_REDUCE_MAX: return 2;
        case RT_REDUCE_MIN: return 3;
        case RT_REDUCE_AVG: return 4;
    }
    fail(RT_ERROR_INVALID_VALUE, "op %d has no NCCL counterpart", static_cast<int>(op));
}

class NcclComm final : public backend::NativeComm {
public:
    /// `scratch`: 256 bytes of device memory of `device` (the barrier's word), owned from now on. `comm` may be null
    /// until a split in an NCCL group writes it (shape_impl reads it then).
    NcclComm(const Nccl& n, ncclComm_t comm, int nranks, backend::Device& device, void* scratch)
        : n_(n), comm_(comm), nranks_(nranks), device_(device), scratch_(scratch) {}
    ~NcclComm() override {
        // ncclCommDestroy completes the communicator's queued operations first: the scratch word is free after it.
        if (comm_ && !aborted_) n_.ncclCommDestroy(comm_);
        device_.free_impl(scratch_, kScratchBytes);
    }
    static constexpr size_t kScratchBytes = 256;

    void collective_impl(const comm::Call& c, backend::Queue& queue) override {
        if (aborted_) fail(RT_ERROR_ILLEGAL_STATE, "the NCCL communicator was aborted (rtCommAbort)");
        const ncclDataType_t t = nccl_type(c.type);
        static_cast<CudaQueue&>(queue).native_work([&](CUstream s) {
            switch (c.kind) {
                case comm::Kind::all_reduce:
                    check(n_, n_.ncclAllReduce(c.send, c.recv, c.count, t, nccl_op(c.op), comm_, s), "ncclAllReduce", comm_);
                    break;
                case comm::Kind::broadcast:
                    check(n_, n_.ncclBroadcast(c.send, c.recv, c.count, t, c.root, comm_, s), "ncclBroadcast", comm_);
                    break;
                case comm::Kind::reduce:
                    check(n_, n_.ncclReduce(c.send, c.recv, c.count, t, nccl_op(c.op), c.root, comm_, s), "ncclReduce",
                          comm_);
                    break;
                case comm::Kind::all_gather:
                    check(n_, n_.ncclAllGather(c.send, c.recv, c.count, t, comm_, s), "ncclAllGather", comm_);
                    break;
                case comm::Kind::reduce_scatter:
                    check(n_, n_.ncclReduceScatter(c.send, c.recv, c.count, t, nccl_op(c.op), comm_, s),
                          "ncclReduceScatter", comm_);
                    break;
                case comm::Kind::all_to_all: {
                    // NCCL has no all-to-all: a send and a receive per peer, one group.
                    const size_t bytes = c.count * comm::element_size(c.type);
                    check(n_, n_.ncclGroupStart(), "ncclGroupStart");
                    for (int p = 0; p < nranks_; ++p) {
                        const size_t at = static_cast<size_t>(p) * bytes;
                        const ncclResult_t sr = n_.ncclSend(static_cast<const char*>(c.send) + at, c.count, t, p, comm_, s);
                        const ncclResult_t rr =
                            sr == ncclSuccess ? n_.ncclRecv(static_cast<char*>(c.recv) + at, c.count, t, p, comm_, s) : sr;
                        if (sr != ncclSuccess || rr != ncclSuccess) {
                            n_.ncclGroupEnd();
                            check(n_, sr != ncclSuccess ? sr : rr, sr != ncclSuccess ? "ncclSend" : "ncclRecv", comm_);
                        }
                    }
                    check(n_, n_.ncclGroupEnd(), "ncclGroupEnd", comm_);
                    break;
                }
                case comm::Kind::send:
                    check(n_, n_.ncclSend(c.send, c.count, t, c.root, comm_, s), "ncclSend", comm_);
                    break;
                case comm::Kind::recv:
                    check(n_, n_.ncclRecv(c.recv, c.count, t, c.root, comm_, s), "ncclRecv", comm_);
                    break;
                case comm::Kind::barrier:
                    // NCCL has no barrier: a 1-element all-reduce of a scratch word in device memory of the rank.
                    check(n_, n_.ncclAllReduce(scratch(), scratch(), 1, 2 /* ncclInt32 */, 0, comm_, s), "ncclAllReduce",
                          comm_);
                    break;
            }
        });
    }
    void abort_impl() noexcept override {
        if (aborted_.exchange(true)) return;
        n_.ncclCommAbort(comm_);
    }
    std::unique_ptr<backend::NativeComm> split_impl(int color, int key) override {
        if (aborted_) fail(RT_ERROR_ILLEGAL_STATE, "the NCCL communicator was aborted (rtCommAbort)");
        if (!n_.ncclCommSplit)
            fail(RT_ERROR_NOT_SUPPORTED, "rtCommSplit of an NCCL communicator needs ncclCommSplit (NCCL 2.18 or later); "
                 "%s is NCCL %d", n_.library.c_str(), n_.version);
        void* scratch = device_.allocate_impl(kScratchBytes);
        if (!scratch)
            fail(RT_ERROR_OUT_OF_MEMORY, "no device memory for a communicator's barrier word (%zu bytes)", kScratchBytes);
        auto made = std::make_unique<NcclComm>(n_, nullptr, 0, device_, scratch);
        static_cast<CudaDevice&>(device_).enter();
        // NCCL_SPLIT_NOCOLOR is -1, as RT_COMM_SPLIT_NOCOLOR; a null config: the parent's. In a group NCCL writes the
        // handle now and makes it ready at ncclGroupEnd.
        check(n_, n_.ncclCommSplit(comm_, color, key, &made->comm_, nullptr), "ncclCommSplit", comm_);
        return made;
    }
    bool shape_impl(int* rank, int* count) override {
        if (!comm_) return false;
        check(n_, n_.ncclCommUserRank(comm_, rank), "ncclCommUserRank", comm_);
        check(n_, n_.ncclCommCount(comm_, count), "ncclCommCount", comm_);
        nranks_ = *count;
        return true;
    }
    rtError_t async_error_impl(std::string* why) override {
        if (aborted_) {
            if (why) *why = "the NCCL communicator was aborted (rtCommAbort)";
            return RT_ERROR_ILLEGAL_STATE;
        }
        ncclResult_t r = ncclSuccess;
        check(n_, n_.ncclCommGetAsyncError(comm_, &r), "ncclCommGetAsyncError", comm_);
        if (r == ncclSuccess || r == ncclInProgress) return RT_SUCCESS;
        if (why) *why = format("NCCL reports an asynchronous error: %s (ncclResult_t %d)", n_.ncclGetErrorString(r), r);
        return RT_ERROR_LAUNCH_FAILED;
    }
private:
    void* scratch() const { return scratch_; }
    const Nccl& n_;
    ncclComm_t comm_;
    int nranks_;  // set by shape_impl for a split's communicator
    backend::Device& device_;
    void* const scratch_;
    std::atomic<bool> aborted_{false};
};

class NcclLibrary final : public backend::NativeCollectives {
public:
    explicit NcclLibrary(const Nccl& n) : n_(n) {}
    const char* name() const override { return "NCCL"; }
    std::vector<std::unique_ptr<backend::NativeComm>> init_all_impl(const std::vector<backend::Device*>& devices) override {
        std::vector<int> list;
        for (backend::Device* d : devices) list.push_back(static_cast<CudaDevice*>(d)->ordinal());
        std::vector<ncclComm_t> comms(devices.size());
        check(n_, n_.ncclCommInitAll(comms.data(), static_cast<int>(list.size()), list.data()), "ncclCommInitAll");
        std::vector<std::unique_ptr<backend::NativeComm>> out;
        for (size_t i = 0; i < comms.size(); ++i) out.push_back(make(comms[i], static_cast<int>(comms.size()), *devices[i]));
        return out;
    }
    void unique_id_impl(void* id, size_t bytes) override {
        if (bytes < kNcclUniqueIdBytes) fail(RT_ERROR_INVALID_VALUE, "an NCCL unique id needs %zu bytes", kNcclUniqueIdBytes);
        ncclUniqueId u;
        check(n_, n_.ncclGetUniqueId(&u), "ncclGetUniqueId");
        std::memcpy(id, u.internal, kNcclUniqueIdBytes);
    }
    std::unique_ptr<backend::NativeComm> init_rank_impl(int nranks, const void* id, size_t bytes, int rank,
                                                        backend::Device& device) override {
        if (bytes < kNcclUniqueIdBytes) fail(RT_ERROR_INVALID_VALUE, "an NCCL unique id needs %zu bytes", kNcclUniqueIdBytes);
        ncclUniqueId u;
        std::memcpy(u.internal, id, kNcclUniqueIdBytes);
        static_cast<CudaDevice&>(device).enter();  // ncclCommInitRank joins on the current device
        ncclComm_t c = nullptr;
        check(n_, n_.ncclCommInitRank(&c, nranks, u, rank), "ncclCommInitRank");
        return make(c, nranks, device);
    }
    void group_start_impl() override { check(n_, n_.ncclGroupStart(), "ncclGroupStart"); }
    void group_end_impl() override { check(n_, n_.ncclGroupEnd(), "ncclGroupEnd"); }

private:
    std::unique_ptr<backend::NativeComm> make(ncclComm_t c, int nranks, backend::Device& device) {
        void* scratch = device.allocate_impl(NcclComm::kScratchBytes);
        if (!scratch) {
            n_.ncclCommAbort(c);
            fail(RT_ERROR_OUT_OF_MEMORY, "no device memory for a communicator's barrier word (%zu bytes)",
                 NcclComm::kScratchBytes);
        }
        return std::make_unique<NcclComm>(n_, c, nranks, device, scratch);
    }
    const Nccl& n_;
};

}  // namespace

backend::NativeCollectives* CudaDevice::collectives_impl() {
    const Nccl& n = nccl();
    if (!n.why.empty()) fail(RT_ERROR_NOT_SUPPORTED, "%s", n.why.c_str());
    static std::mutex mutex;
    static std::map<const Nccl*, std::unique_ptr<NcclLibrary>> libraries;
    std::lock_guard lock(mutex);
    auto& lib = libraries[&n];
    if (!lib) lib = std::make_unique<NcclLibrary>(n);
    return lib.get();
}

}  // namespace rt::cuda
