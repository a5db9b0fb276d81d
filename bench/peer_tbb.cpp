// peer_tbb.cpp — loads the oneTBB plugin (libruntime-bench-tbb.so) at run time and wraps its C table for the graph rows.
#include "peer_tbb.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "peer_opencl.hpp"  // PeerError

namespace rtbench {

namespace {

/// The directory of this executable (where the build and the wheel put the plugin), or "" when unknown.
std::string executable_dir() {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string() : exe.parent_path().string();
}

}  // namespace

std::unique_ptr<TbbPeer> TbbPeer::open(std::string* why_not) {
    auto fail = [&](const std::string& why) -> std::unique_ptr<TbbPeer> {
        if (why_not) *why_not = why;
        return nullptr;
    };
    // RUNTIME_BENCH_TBB_PLUGIN names another plugin (or a missing one, to test the no-peer path).
    const char* env = std::getenv("RUNTIME_BENCH_TBB_PLUGIN");
    std::string path;
    if (env && *env) {
        path = env;
    } else {
#ifndef RUNTIME_BENCH_HAVE_TBB
        return fail("runtime-bench-core was built without oneTBB (install libtbb-dev, e.g. scripts/setup.sh, and "
                    "reconfigure)");
#endif
        const std::string dir = executable_dir();
        path = (dir.empty() ? std::string(".") : dir) + "/" + kTbbPluginFile;
    }
    // Never dlclose'd: oneTBB's worker threads outlive the peer object.
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char* e = dlerror();
        return fail("cannot load the oneTBB plugin: " + std::string(e ? e : path.c_str()));
    }
    using Entry = const RtbenchTbbApi* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(lib, "rtbench_tbb_plugin"));
    if (!entry) return fail(path + " has no rtbench_tbb_plugin (not the oneTBB plugin)");
    const RtbenchTbbApi* api = entry();
    if (!api || api->abi != kTbbPluginAbi)
        return fail(path + ": plugin interface version " + std::to_string(api ? api->abi : 0) + ", expected " +
                    std::to_string(kTbbPluginAbi) + " (a stale build)");
    return std::unique_ptr<TbbPeer>(new TbbPeer(api, api->name()));
}

TbbPeer::~TbbPeer() = default;

TbbPeer::Graph TbbPeer::build(const GraphShape& shape, bool counting) {
    char err[256] = {0};
    void* g = api_->build(static_cast<int>(shape.kind), shape.nodes, counting ? 1 : 0, err, sizeof err);
    if (!g) throw PeerError(std::string("oneTBB flow_graph: ") + err);
    return Graph(api_, g);
}

TbbPeer::Graph::~Graph() {
    if (g_) api_->destroy(g_);
}

void TbbPeer::Graph::run() {
    char err[256] = {0};
    if (api_->run(g_, err, sizeof err) != 0) throw PeerError(std::string("oneTBB flow_graph: ") + err);
}

unsigned long long TbbPeer::Graph::counter() const { return api_->counter(g_); }

}  // namespace rtbench
