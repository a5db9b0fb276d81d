// fuzz_graph_file.cpp — libFuzzer harness for the saved-graph loader (rtGraphExecLoad).
//
// Build and run as fuzz_capi (fuzz_capi.cpp), with its own seeds (files written by rtGraphExecSave):
//   cmake --build build-fuzz --target fuzz_graph_file
//   build-fuzz/fuzz/fuzz_graph_file -max_total_time=45 -timeout=20 build-fuzz/fuzz/corpus_graph_file \
//       fuzz/corpus_graph_file
// scripts/test.sh runs it in its `fuzz` phase after fuzz_capi.
//
// An input is one flag byte and a file. Flag bit 0 set: the harness repairs the file's header first (magic, format
// version, body length and checksum: graph_file.hpp), so mutations reach the body's parser instead of stopping at the
// checksum; clear: the file is loaded as it is. Contract: every input is refused with RT_ERROR_INVALID_VALUE (or
// COMPILE_FAILED / OUT_OF_MEMORY for what the file asks of this machine) or loads; a file that loads can be
// launched (its named buffers unbound: refused), saved and loaded again (failing that aborts: a finding).
//
// Kernel code in a file is code, trusted as rtModuleLoadFile trusts a module, so the harness never loads it: the
// host compiler is /bin/false (RUNTIME_CXX), which makes this process's build identity differ from every seed's, so
// saved code never fits and every rebuild fails at once; and inputs with a module saved without source (whose code
// the loader tries whatever its identity) are skipped. What loads holds copies, fills and allocations only, whose
// every operand the loader confines to the arena and named buffers; device memory is capped (RUNTIME_CPU_MEMORY) so
// a large arena is refused instead of filled.
#include <runtime/runtime.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::string g_dir;  // this process's scratch directory

constexpr size_t kHeaderBytes = 40;

/// FNV-1a 64 over bytes 0..31 and the body: the header's checksum.
uint64_t checksum(const std::vector<uint8_t>& file) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < file.size(); ++i) {
        if (i == 32) i = kHeaderBytes;
        if (i == file.size()) break;
        h ^= file[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void put_le(uint8_t* p, uint64_t v, int n) {
    for (int i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t get_le(const uint8_t* p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return v;
}

/// True if the body's module table (graph_file.hpp) can be read and holds a module without source (flag 0).
bool has_module_without_source(const std::vector<uint8_t>& file) {
    size_t at = kHeaderBytes;
    auto skip = [&](int len_bytes) {
        if (file.size() - at < static_cast<size_t>(len_bytes)) return false;
        uint64_t n = get_le(file.data() + at, len_bytes);
        at += static_cast<size_t>(len_bytes);
        if (n > file.size() - at) return false;
        at += static_cast<size_t>(n);
        return true;
    };
    if (file.size() < kHeaderBytes || !skip(4) || !skip(4) || file.size() - at < 4) return false;
    const uint64_t modules = get_le(file.data() + at, 4);
    at += 4;
    for (uint64_t i = 0; i < modules && at < file.size(); ++i) {
        if (file[at++] == 0) return true;
        if (!skip(4) || !skip(4) || !skip(4) || !skip(8)) return false;
    }
    return false;
}

bool write_file(const std::string& path, const uint8_t* data, size_t size) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    size_t done = 0;
    while (done < size) {
        ssize_t n = ::write(fd, data + done, size - done);
        if (n <= 0) break;
        done += static_cast<size_t>(n);
    }
    ::close(fd);
    return done == size;
}

[[noreturn]] void finding(const char* what, rtError_t e) {
    std::fprintf(stderr, "fuzz_graph_file: %s (error %d): %s\n", what, static_cast<int>(e), rtGetLastErrorMessage());
    std::abort();
}

bool expected_refusal(rtError_t e) {
    return e == RT_ERROR_INVALID_VALUE || e == RT_ERROR_COMPILE_FAILED || e == RT_ERROR_OUT_OF_MEMORY ||
           e == RT_ERROR_NOT_SUPPORTED;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    char tmpl[] = "/tmp/fuzz-graph-file-XXXXXX";
    if (!::mkdtemp(tmpl)) {
        std::perror("fuzz_graph_file: mkdtemp");
        std::abort();
    }
    g_dir = tmpl;
    if (::access("/bin/false", X_OK) != 0) {
        std::fprintf(stderr, "fuzz_graph_file: /bin/false is needed as the host compiler that never builds\n");
        std::abort();
    }
    ::setenv("RUNTIME_CXX", "/bin/false", 1);
    ::setenv("RUNTIME_CPU_MEMORY", "64M", 1);
    if (!std::getenv("RUNTIME_CACHE_DIR")) ::setenv("RUNTIME_CACHE_DIR", (g_dir + "/cache").c_str(), 1);
    if (rtInit(nullptr) != RT_SUCCESS) {
        std::fprintf(stderr, "fuzz_graph_file: rtInit failed: %s\n", rtGetLastErrorMessage());
        std::abort();
    }
    std::atexit([] {
        std::string cmd = "rm -rf '" + g_dir + "'";
        if (std::system(cmd.c_str()) != 0) {}
    });
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const bool repair = data[0] & 1;
    std::vector<uint8_t> file(data + 1, data + size);
    if (repair && file.size() >= kHeaderBytes) {
        std::memcpy(file.data(), "RTGRAPH", 8);
        put_le(file.data() + 8, 1, 4);
        std::memset(file.data() + 18, 0, 6);
        put_le(file.data() + 24, file.size() - kHeaderBytes, 8);
        put_le(file.data() + 32, checksum(file), 8);
    }
    if (has_module_without_source(file)) return 0;
    const std::string path = g_dir + "/input.rtg", again = g_dir + "/again.rtg";
    if (!write_file(path, file.data(), file.size())) return 0;

    rtGraphExec_t exec = nullptr;
    rtError_t e = rtGraphExecLoad(&exec, path.c_str());
    if (e != RT_SUCCESS) {
        if (!expected_refusal(e)) finding("rtGraphExecLoad failed with an unexpected code", e);
        if (!rtGetLastErrorMessage()[0]) finding("rtGraphExecLoad failed without a message", e);
        return 0;
    }
    // Launched with every named buffer unbound: refused if it has any, else it runs on the arena alone.
    e = rtGraphLaunch(exec, nullptr);
    if (e == RT_SUCCESS) {
        e = rtStreamSynchronize(nullptr);
        if (e != RT_SUCCESS) finding("a loaded graph failed when launched", e);
    } else if (e != RT_ERROR_INVALID_VALUE) {
        finding("rtGraphLaunch of a loaded graph failed with an unexpected code", e);
    }
    // Whatever loads saves and loads again (its arena may not fit beside the first one's: memory is capped).
    e = rtGraphExecSave(exec, again.c_str());
    if (e != RT_SUCCESS) finding("a loaded graph cannot be saved again", e);
    if (rtGraphExecDestroy(exec) != RT_SUCCESS) finding("rtGraphExecDestroy failed", RT_ERROR_UNKNOWN);
    rtGraphExec_t reloaded = nullptr;
    e = rtGraphExecLoad(&reloaded, again.c_str());
    if (e != RT_SUCCESS && e != RT_ERROR_OUT_OF_MEMORY) finding("a graph saved from a loaded one does not load", e);
    if (e == RT_SUCCESS && rtGraphExecDestroy(reloaded) != RT_SUCCESS) finding("rtGraphExecDestroy failed", e);
    return 0;
}
