// C API: executable graphs saved to a file and loaded back (rtGraphExecSave, rtGraphExecLoad, rtGraphExecSetBuffer).
#include "capi/capi_common.hpp"
#include "graph/exec.hpp"
#include "graph/graph_file.hpp"

using namespace rt;

namespace {
std::shared_ptr<graph::GraphExec> find_exec(rtGraphExec_t exec) {
    auto x = runtime().graph_execs.find(reinterpret_cast<uint64_t>(exec));
    if (!x) fail(RT_ERROR_INVALID_HANDLE, "exec %p is not an executable graph (never made, or destroyed)",
                 static_cast<void*>(exec));
    return x;
}

void require_path(const char* path) {
    if (!path) fail(RT_ERROR_INVALID_VALUE, "path is NULL (expected the path of a saved graph file)");
    if (!*path) fail(RT_ERROR_INVALID_VALUE, "path is empty (expected the path of a saved graph file)");
}
}  // namespace

extern "C" {

RT_API rtError_t rtGraphExecSave(rtGraphExec_t exec, const char* path) {
    return capi_call("rtGraphExecSave", [&] {
        auto x = find_exec(exec);
        require_path(path);
        std::shared_ptr<graph::Program> program;
        {
            // Holding a reference, the program is ours to read: an update made meanwhile copies it (exec.hpp).
            std::lock_guard lock(x->mutex());
            program = x->program();
        }
        graph::file::save(*program, path);
    });
}

RT_API rtError_t rtGraphExecLoad(rtGraphExec_t* exec, const char* path) {
    return capi_call("rtGraphExecLoad", [&] {
        require_out(exec, "exec");
        require_path(path);
        auto x = std::make_shared<graph::GraphExec>(graph::file::load(path, runtime().current_device()), "rtGraphExecLoad");
        *exec = reinterpret_cast<rtGraphExec_t>(runtime().graph_execs.insert(std::move(x)));
    });
}

RT_API rtError_t rtGraphExecSetBuffer(rtGraphExec_t exec, const char* name, void* ptr, size_t bytes) {
    return capi_call("rtGraphExecSetBuffer", [&] {
        auto x = find_exec(exec);
        if (!name) fail(RT_ERROR_INVALID_VALUE, "name is NULL (expected the name of a buffer of the graph)");
        x->set_buffer(name, ptr, bytes);
    });
}

}  // extern "C"
