// The dlopen shim over Open MPI's libmpi: resolves the API and the predefined handles, initialises MPI once, and
// finalises it at exit when the runtime initialised it.
#include "comm/mpi_api.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/error.hpp"
#include "observe/log.hpp"

namespace rt::comm::mpi {

bool launched_by_mpirun() {
    const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
    return size && std::atoi(size) > 1;
}

namespace {

Api g_api;
std::once_flag g_once;
std::string g_why;  // why api() is unavailable (empty: available)

void finalize_at_exit() {
    stop_progress();
    int finalized = 0;
    g_api.Finalized(&finalized);
    if (!finalized) g_api.Finalize();
}

int no_copy(Comm, int, void*, void*, void*, int* flag) {
    *flag = 0;  // MPI_Comm_dup of MPI_COMM_SELF does not take the attribute
    return kSuccess;
}

std::atomic<bool> g_finalized{false};  // the program's MPI_Finalize has begun: no new MPI call from the runtime

int stop_at_finalize(Comm, int, void*, void*) {
    stop_progress();  // fails what is in flight (MPI still works inside this callback)
    g_finalized.store(true, std::memory_order_release);
    return kSuccess;
}

/// Fills g_api or sets g_why. Never throws.
void load() {
    const char* env = std::getenv("RUNTIME_MPI_LIB");
    const std::string library = env && *env ? env : "libmpi.so.40";
    // RTLD_GLOBAL: Open MPI's components (dlopen'ed by libmpi itself) resolve libmpi's symbols globally.
    void* h = ::dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        const char* err = ::dlerror();
        g_why = "Open MPI's library '" + library + "' cannot be loaded (" + (err ? err : "dlopen failed") +
                "; Debian: apt-get install libopenmpi-dev openmpi-bin, or set RUNTIME_MPI_LIB)";
        return;
    }
    g_api.library = library;
    std::string missing;
    auto resolve = [&](auto& fn, const char* symbol) {
        void* p = ::dlsym(h, symbol);
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
        if (!p) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
    };
#define RT_MPI_(name) resolve(g_api.name, "MPI_" #name)
    RT_MPI_(Initialized);
    RT_MPI_(Finalized);
    RT_MPI_(Init_thread);
    RT_MPI_(Query_thread);
    RT_MPI_(Finalize);
    RT_MPI_(Comm_rank);
    RT_MPI_(Comm_size);
    RT_MPI_(Comm_get_attr);
    RT_MPI_(Get_processor_name);
    RT_MPI_(Isend);
    RT_MPI_(Irecv);
    RT_MPI_(Test);
    RT_MPI_(Cancel);
    RT_MPI_(Request_free);
    RT_MPI_(Iprobe);
    RT_MPI_(Improbe);
    RT_MPI_(Mrecv);
    RT_MPI_(Get_count);
    RT_MPI_(Error_string);
    RT_MPI_(Comm_create_keyval);
    RT_MPI_(Comm_set_attr);
#undef RT_MPI_
    // Open MPI's predefined handles are the addresses of its global objects (mpi.h: OMPI_PREDEFINED_GLOBAL). Looked
    // up in the global scope first: a program linked against libmpi holds copies of them (copy relocations), which
    // libmpi itself then uses; libmpi's own definitions are the fallback (nothing else has them).
    auto global = [h](const char* symbol) {
        void* p = ::dlsym(RTLD_DEFAULT, symbol);
        return p ? p : ::dlsym(h, symbol);
    };
    g_api.world = global("ompi_mpi_comm_world");
    g_api.self = global("ompi_mpi_comm_self");
    g_api.byte = global("ompi_mpi_byte");
    g_api.request_null = global("ompi_request_null");
    if (!g_api.world) missing += ", ompi_mpi_comm_world";
    if (!g_api.self) missing += ", ompi_mpi_comm_self";
    if (!g_api.byte) missing += ", ompi_mpi_byte";
    if (!g_api.request_null) missing += ", ompi_request_null";
    if (!missing.empty()) {
        g_why = "'" + library + "' is not Open MPI 3.x/4.x (libmpi.so.40): it lacks " + missing;
        return;
    }
    int initialized = 0, finalized = 0;
    g_api.Initialized(&initialized);
    g_api.Finalized(&finalized);
    if (finalized) {
        g_why = "MPI was finalized already (MPI_Finalize): no communicator across processes can be made";
        return;
    }
    int provided = 0;
    if (!initialized) {
        // MPI_THREAD_MULTIPLE: the progress thread and the thread calling rtCommInitRank/rtCommSplit call MPI, and the
        // program may call MPI from its own threads at the same time.
        if (int rc = g_api.Init_thread(nullptr, nullptr, kThreadMultiple, &provided); rc != kSuccess) {
            g_why = describe("MPI_Init_thread", rc);
            return;
        }
        g_api.we_initialized = true;
        std::atexit(finalize_at_exit);
    } else {
        g_api.Query_thread(&provided);
    }
    if (provided < kThreadMultiple) {
        g_why = "MPI was initialised with thread level " + std::to_string(provided) +
                ", not MPI_THREAD_MULTIPLE (3): the runtime calls MPI from its own progress thread; call "
                "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) (mpi4py does by default), or let the runtime initialise "
                "MPI";
        return;
    }
    // MPI_Finalize deletes MPI_COMM_SELF's attributes before anything else: the progress thread stops there, so a
    // program that finalizes MPI itself never has it call MPI afterwards (a failure notice still being sent).
    int keyval = 0;
    if (g_api.Comm_create_keyval(no_copy, stop_at_finalize, &keyval, nullptr) != kSuccess ||
        g_api.Comm_set_attr(g_api.self, keyval, nullptr) != kSuccess)
        RT_LOG(comm, warn, "MPI_Comm_create_keyval/MPI_Comm_set_attr on MPI_COMM_SELF failed: the progress thread "
               "will not stop at the program's MPI_Finalize (finalize MPI only once collectives have completed)");
    g_api.Comm_rank(g_api.world, &g_api.world_rank);
    g_api.Comm_size(g_api.world, &g_api.world_size);
    int* ub = nullptr;
    int flag = 0;
    if (g_api.Comm_get_attr(g_api.world, kTagUbKey, &ub, &flag) == kSuccess && flag && ub) g_api.tag_ub = *ub;
    if (g_api.tag_ub < (1 << 20)) {
        g_why = "MPI_TAG_UB is " + std::to_string(g_api.tag_ub) + ": the transport needs tags up to at least 2^20";
        return;
    }
}

}  // namespace

Api& api() {
    std::call_once(g_once, load);
    if (!g_why.empty()) fail(RT_ERROR_NOT_SUPPORTED, "%s", g_why.c_str());
    if (g_finalized.load(std::memory_order_acquire))
        fail(RT_ERROR_NOT_SUPPORTED, "MPI was finalized (MPI_Finalize): no communicator across processes can be made "
             "or used any more");
    return g_api;
}

std::string describe(const char* call, int code) {
    std::string s = std::string(call) + " failed with MPI error " + std::to_string(code);
    if (g_api.Error_string) {
        char text[512];
        int len = 0;
        if (g_api.Error_string(code, text, &len) == kSuccess && len > 0) s += std::string(" (") + std::string(text, len) + ")";
    }
    return s;
}

}  // namespace rt::comm::mpi
