// Open MPI's C API, opened with dlopen at run time (libmpi.so.40): the functions and predefined handles the transport
// uses, declared for Open MPI's ABI (handles are pointers to its global objects), so libruntime never links libmpi.
#pragma once

#include <cstddef>
#include <string>

namespace rt::comm::mpi {

// Open MPI's handle types are pointers to opaque structs; only their identity matters here.
using Comm = void*;
using Datatype = void*;
using Request = void*;
using Message = void*;
using Errhandler = void*;

/// MPI_Status as Open MPI lays it out (mpi.h: struct ompi_status_public_t).
struct Status {
    int source;
    int tag;
    int error;
    int cancelled;
    size_t ucount;
};

inline constexpr int kSuccess = 0;             // MPI_SUCCESS
inline constexpr int kAnySource = -1;          // MPI_ANY_SOURCE
inline constexpr int kThreadMultiple = 3;      // MPI_THREAD_MULTIPLE
inline constexpr int kTagUbKey = 0;            // MPI_TAG_UB (first of Open MPI's predefined attribute keys)
inline constexpr int kMaxProcessorName = 256;  // MPI_MAX_PROCESSOR_NAME

/// The resolved library. Every call but the queries below is thread-safe only at MPI_THREAD_MULTIPLE (which the
/// transport requires, see docs/comm.md "Threads").
struct Api {
    int (*Initialized)(int*) = nullptr;
    int (*Finalized)(int*) = nullptr;
    int (*Init_thread)(int*, char***, int, int*) = nullptr;
    int (*Query_thread)(int*) = nullptr;
    int (*Finalize)() = nullptr;
    int (*Comm_rank)(Comm, int*) = nullptr;
    int (*Comm_size)(Comm, int*) = nullptr;
    int (*Comm_get_attr)(Comm, int, void*, int*) = nullptr;
    int (*Get_processor_name)(char*, int*) = nullptr;
    int (*Isend)(const void*, int, Datatype, int, int, Comm, Request*) = nullptr;
    int (*Irecv)(void*, int, Datatype, int, int, Comm, Request*) = nullptr;
    int (*Test)(Request*, int*, Status*) = nullptr;
    int (*Cancel)(Request*) = nullptr;
    int (*Request_free)(Request*) = nullptr;
    int (*Iprobe)(int, int, Comm, int*, Status*) = nullptr;
    int (*Improbe)(int, int, Comm, int*, Message*, Status*) = nullptr;
    int (*Mrecv)(void*, int, Datatype, Message*, Status*) = nullptr;
    int (*Get_count)(const Status*, Datatype, int*) = nullptr;
    int (*Error_string)(int, char*, int*) = nullptr;
    int (*Comm_create_keyval)(int (*)(Comm, int, void*, void*, void*, int*), int (*)(Comm, int, void*, void*), int*,
                              void*) = nullptr;
    int (*Comm_set_attr)(Comm, int, void*) = nullptr;
    Comm world = nullptr;        // MPI_COMM_WORLD (&ompi_mpi_comm_world)
    Comm self = nullptr;         // MPI_COMM_SELF (&ompi_mpi_comm_self)
    Datatype byte = nullptr;     // MPI_BYTE (&ompi_mpi_byte)
    Request request_null = nullptr;  // MPI_REQUEST_NULL (&ompi_request_null)
    std::string library;         // the file opened
    int world_rank = -1, world_size = 0;
    int tag_ub = 0;              // MPI_TAG_UB of MPI_COMM_WORLD
    bool we_initialized = false; // MPI_Finalize runs at exit only then
};

/// True when this process was started by Open MPI's launcher (mpirun / mpiexec set OMPI_COMM_WORLD_SIZE) with more
/// than one process: rtCommGetUniqueId then makes ids of the MPI transport.
bool launched_by_mpirun();

/// Opens libmpi (RUNTIME_MPI_LIB, default libmpi.so.40), initialises MPI at MPI_THREAD_MULTIPLE unless the program
/// did (then it must have asked for MPI_THREAD_MULTIPLE), once per process. Throws NOT_SUPPORTED naming what is
/// missing. Thread-safe.
Api& api();

/// "MPI_Isend failed: MPI_ERR_TRUNCATE: message truncated" for a failed call's code.
std::string describe(const char* call, int code);

}  // namespace rt::comm::mpi

namespace rt::comm::mpi {
/// Stops the transport's progress thread (mpi_transport.cpp); called before MPI_Finalize: the runtime's at exit, or
/// the program's own (through an attribute of MPI_COMM_SELF, which MPI_Finalize deletes first).
void stop_progress();
}  // namespace rt::comm::mpi
