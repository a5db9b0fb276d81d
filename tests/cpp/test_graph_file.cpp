// test_graph_file.cpp — saved executable graphs: rtGraphExecSave, then rtGraphExecLoad in a fresh process (this
// executable run again as a child) with new buffers bound gives the original's results; kernels' saved code is used
// where it fits and rebuilt where it does not; refusals at save; truncated, damaged and foreign files refused.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "test_util.hpp"

extern char** environ;

using namespace rt_test;
namespace fs = std::filesystem;

namespace {

constexpr unsigned kN = 1000;  // items: not a multiple of the block, so the saved `global` matters
constexpr size_t kBytes = kN * sizeof(float);
constexpr size_t kHeader = 40;  // graph_file.hpp

const char* const kSource = R"(
RT_KERNEL void gf_scale(float* tmp, const float* in, float factor, unsigned n) {
    size_t i = get_global_id(0);
    if (i < n) tmp[i] += in[i] * factor;
}
RT_KERNEL void gf_combine(float* out, const float* tmp, const float* in, float bias, unsigned n) {
    size_t i = get_global_id(0);
    if (i < n) out[i] = tmp[i] * in[i] + bias;
}
)";

std::vector<float> make_input() {
    std::vector<float> v(kN);
    for (unsigned i = 0; i < kN; ++i) v[i] = 0.25f * static_cast<float>(i % 97) - 7.0f;
    return v;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_file(const std::string& path, const std::string& data) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

/// The file with its header's checksum made right again (after a change): FNV-1a 64 over bytes 0..31 and the body.
std::string with_checksum(std::string f) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < f.size(); i = i + 1 == 32 ? kHeader : i + 1) {
        h ^= static_cast<uint8_t>(f[i]);
        h *= 0x100000001b3ull;
    }
    for (int i = 0; i < 8; ++i) f[32 + i] = static_cast<char>(h >> (8 * i));
    return f;
}

uint32_t get32(const std::string& f, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(f[at + i])) << (8 * i);
    return v;
}
void put32(std::string& f, size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) f[at + i] = static_cast<char>(v >> (8 * i));
}

/// Byte offset of the module count in the body (after the backend and build identity strings).
size_t module_count_offset(const std::string& f) {
    size_t at = kHeader;
    at += 4 + get32(f, at);
    at += 4 + get32(f, at);
    return at;
}

// ------------------------------------------------------------------------------------------ the child process

/// `test_graph_file --graph-file-child <graph> <results>`: loads the graph, binds fresh buffers (at other addresses
/// than the parent's), launches it and writes the "result" (host) and "output" (device) buffers to <results>.
/// Exit status 0, or 2 with the failure on stderr.
int child_main(const char* graph, const char* results) {
    ::alarm(60);  // never outlives a parent that gave up
    auto check = [](rtError_t e, const char* what) {
        if (e == RT_SUCCESS) return;
        std::fprintf(stderr, "child: %s: %s: %s\n", what, rtGetErrorName(e), rtGetLastErrorMessage());
        std::exit(2);
    };
    rtGraphExec_t exec = nullptr;
    check(rtGraphExecLoad(&exec, graph), "rtGraphExecLoad");
    void *pad = nullptr, *in = nullptr, *out = nullptr;
    check(rtMalloc(&pad, 3 * 4096), "rtMalloc");  // the buffers land elsewhere than in the parent
    check(rtMalloc(&in, kBytes), "rtMalloc");
    check(rtMalloc(&out, kBytes), "rtMalloc");
    const std::vector<float> input = make_input();
    std::vector<float> result(kN, -1.0f), output(kN, -1.0f);
    check(rtMemcpy(in, input.data(), kBytes, RT_MEMCPY_HOST_TO_DEVICE), "rtMemcpy");
    check(rtGraphExecSetBuffer(exec, "input", in, kBytes), "rtGraphExecSetBuffer input");
    check(rtGraphExecSetBuffer(exec, "output", out, kBytes), "rtGraphExecSetBuffer output");
    check(rtGraphExecSetBuffer(exec, "result", result.data(), kBytes), "rtGraphExecSetBuffer result");
    check(rtGraphLaunch(exec, nullptr), "rtGraphLaunch");
    check(rtStreamSynchronize(nullptr), "rtStreamSynchronize");
    check(rtMemcpy(output.data(), out, kBytes, RT_MEMCPY_DEVICE_TO_HOST), "rtMemcpy");
    std::string bytes(reinterpret_cast<const char*>(result.data()), kBytes);
    bytes.append(reinterpret_cast<const char*>(output.data()), kBytes);
    write_file(results, bytes);
    check(rtGraphExecDestroy(exec), "rtGraphExecDestroy");
    return 0;
}

/// What a child run gave: exit status, its stdout+stderr, and the results file.
struct ChildRun {
    int status = -1;
    std::string log;
    std::string results;
};

/// Runs this executable as a child on `graph`, with the environment changed by `env` (value null: unset).
ChildRun run_child(const std::string& graph, const std::string& work,
                   const std::map<std::string, const char*>& env = {}) {
    static int counter = 0;
    const std::string results = work + "/child-results-" + std::to_string(counter) + ".bin";
    const std::string log = work + "/child-log-" + std::to_string(counter++) + ".txt";
    // Everything the child needs is prepared before fork: between fork and exec it only calls dup2 and execve.
    std::vector<std::string> envs;
    for (char** e = environ; *e; ++e) {
        std::string entry = *e;
        if (!env.count(entry.substr(0, entry.find('=')))) envs.push_back(entry);
    }
    for (auto& [name, value] : env)
        if (value) envs.push_back(name + "=" + value);
    std::vector<char*> envp;
    for (std::string& s : envs) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string self = fs::read_symlink("/proc/self/exe").string();
    std::string flag = "--graph-file-child";
    std::string g = graph, r = results;
    char* argv[] = {self.data(), flag.data(), g.data(), r.data(), nullptr};
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ChildRun run;
    if (fd < 0) return run;
    pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::execve(self.c_str(), argv, envp.data());
        ::_exit(127);
    }
    ::close(fd);
    int status = 0;
    if (pid > 0 && ::waitpid(pid, &status, 0) == pid) run.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    run.log = read_file(log);
    run.results = read_file(results);
    return run;
}

// ------------------------------------------------------------------------------------------ fixture

/// A pipeline graph over three named buffers: "input" (device), "output" (device) and "result" (host), with a
/// temporary of an allocation node (the arena):
///   alloc tmp → fill tmp (0x3f bytes) → gf_scale (tmp += in * 1.5) → gf_combine (out = tmp * in - 2) →
///   copy out → result (device to host), free tmp after gf_combine.
struct Pipeline {
    void* in = nullptr;
    void* out = nullptr;
    std::vector<float> result = std::vector<float>(kN, -1.0f);
    rtGraph_t graph = nullptr;
    rtGraphExec_t exec = nullptr;
};

class GraphFileTest : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/rt-test-graph-file-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        work_ = tmpl;
        cache_env_ = std::make_unique<EnvVar>("RUNTIME_CACHE_DIR", (work_ + "/cache").c_str());
        cxx_env_ = std::make_unique<EnvVar>("RUNTIME_CXX", std::getenv("RUNTIME_CXX"));
        ASSERT_RT_OK(rtSetDevice(0));
        cpu_ = backend_of(0) == "cpu";
    }
    void TearDown() override {
        if (pipe_.exec) { EXPECT_RT_OK(rtGraphExecDestroy(pipe_.exec)); }
        if (pipe_.graph) { EXPECT_RT_OK(rtGraphDestroy(pipe_.graph)); }
        if (pipe_.in) { EXPECT_RT_OK(rtFree(pipe_.in)); }
        if (pipe_.out) { EXPECT_RT_OK(rtFree(pipe_.out)); }
        for (rtModule_t m : modules_) EXPECT_RT_OK(rtModuleUnload(m));
        cxx_env_.reset();
        cache_env_.reset();
        std::error_code ec;
        fs::remove_all(work_, ec);
    }

    /// RUNTIME_CXX = `name`, a wrapper in its own folder that appends a line to its log per compiler run, then runs
    /// the compiler the runtime would choose (a different path: another build identity). Returns the script's path.
    std::string compiler_spy(const std::string& name) {
        const std::string dir = work_ + "/" + name;
        fs::create_directories(dir);
        const std::string spy = dir + "/cxx", log = dir + "/runs.log";
        write_file(spy, "#!/bin/sh\n"
                        "echo run >> '" + log + "'\n"
                        "for c in clang++ c++ g++; do\n"
                        "  if command -v \"$c\" >/dev/null 2>&1; then exec \"$c\" \"$@\"; fi\n"
                        "done\n"
                        "exit 127\n");
        ::chmod(spy.c_str(), 0755);
        write_file(log, "");
        return spy;
    }
    std::string spy_log(const std::string& name) { return read_file(work_ + "/" + name + "/runs.log"); }

    rtModule_t load_module() {
        rtModule_t m = nullptr;
        EXPECT_RT_OK(rtModuleLoadSource(&m, kSource, "-O1"));
        if (m) modules_.push_back(m);
        return m;
    }

    /// Builds, instantiates and launches the pipeline with kernels of `module`; `p->result` and `original_` hold what
    /// it computed (result, then output).
    void build_pipeline(Pipeline* p, rtModule_t module) {
        ASSERT_RT_OK(rtMalloc(&p->in, kBytes));
        ASSERT_RT_OK(rtMalloc(&p->out, kBytes));
        const std::vector<float> input = make_input();
        ASSERT_RT_OK(rtMemcpy(p->in, input.data(), kBytes, RT_MEMCPY_HOST_TO_DEVICE));
        p->graph = pipeline_graph(*p, module, -2.0f);
        ASSERT_NE(p->graph, nullptr);
        ASSERT_RT_OK(rtGraphInstantiate(&p->exec, p->graph, 0));
        ASSERT_RT_OK(rtGraphLaunch(p->exec, nullptr));
        ASSERT_RT_OK(rtStreamSynchronize(nullptr));
        std::vector<float> output(kN);
        ASSERT_RT_OK(rtMemcpy(output.data(), p->out, kBytes, RT_MEMCPY_DEVICE_TO_HOST));
        original_.assign(reinterpret_cast<const char*>(p->result.data()), kBytes);
        original_.append(reinterpret_cast<const char*>(output.data()), kBytes);
        for (unsigned i = 0; i < kN; i += 37) ASSERT_FLOAT_EQ(p->result[i], expected(i, -2.0f)) << "item " << i;
    }

    /// What the pipeline computes for item i: tmp = the bytes 0x3f + in * 1.5, out = tmp * in + bias.
    static float expected(unsigned i, float bias) {
        float fill_value = 0;
        const uint32_t bits = 0x3f3f3f3fu;
        std::memcpy(&fill_value, &bits, 4);
        const float in = make_input()[i];
        return (fill_value + in * 1.5f) * in + bias;
    }

    /// The pipeline's graph over the buffers of `p`, with kernels of `module`; null after a failure.
    static rtGraph_t pipeline_graph(const Pipeline& p, rtModule_t module, float bias) {
        rtGraph_t g = nullptr;
        rtFunction_t scale = nullptr, combine = nullptr;
        rtGraphNode_t alloc = nullptr, fill = nullptr, k1 = nullptr, k2 = nullptr, copy = nullptr, free_node = nullptr;
        rtMemAllocNodeParams ap{kBytes, nullptr};
        float factor = 1.5f;
        unsigned n = kN;
        void* in = p.in;
        void* out = p.out;
        void* result = const_cast<float*>(p.result.data());
        bool ok = rtModuleGetFunction(&scale, module, "gf_scale") == RT_SUCCESS &&
                  rtModuleGetFunction(&combine, module, "gf_combine") == RT_SUCCESS && rtGraphCreate(&g, 0) == RT_SUCCESS;
        ok = ok && rtGraphBindName(g, "input", in, kBytes) == RT_SUCCESS &&
             rtGraphBindName(g, "output", out, kBytes) == RT_SUCCESS &&
             rtGraphBindName(g, "result", result, kBytes) == RT_SUCCESS &&
             rtGraphAddMemAllocNode(&alloc, g, nullptr, 0, &ap) == RT_SUCCESS;
        void* tmp = ap.ptr;
        rtMemsetNodeParams fp{tmp, 0x3f, kBytes};
        void* a1[] = {&tmp, &in, &factor, &n};
        rtKernelNodeParams kp1{scale, rtDim3{(kN + 127) / 128, 1, 1}, rtDim3{128, 1, 1}, 0, a1, {kN, 0, 0}};
        void* a2[] = {&out, &tmp, &in, &bias, &n};
        rtKernelNodeParams kp2{combine, rtDim3{(kN + 63) / 64, 1, 1}, rtDim3{64, 1, 1}, 0, a2, {0, 0, 0}};
        rtMemcpyNodeParams cp{result, out, kBytes, RT_MEMCPY_DEVICE_TO_HOST};
        ok = ok && rtGraphAddMemsetNode(&fill, g, &alloc, 1, &fp) == RT_SUCCESS &&
             rtGraphAddKernelNode(&k1, g, &fill, 1, &kp1) == RT_SUCCESS &&
             rtGraphAddKernelNode(&k2, g, &k1, 1, &kp2) == RT_SUCCESS &&
             rtGraphAddMemcpyNode(&copy, g, &k2, 1, &cp) == RT_SUCCESS &&
             rtGraphAddMemFreeNode(&free_node, g, &k2, 1, tmp) == RT_SUCCESS;
        EXPECT_TRUE(ok) << last_message();
        if (!ok && g) rtGraphDestroy(g);
        return ok ? g : nullptr;
    }

    /// The pipeline saved to a file of the work folder.
    std::string save(rtGraphExec_t exec, const std::string& name = "pipeline.rtg") {
        const std::string path = work_ + "/" + name;
        EXPECT_RT_OK(rtGraphExecSave(exec, path.c_str()));
        return path;
    }

    /// rtGraphExecLoad of `bytes` (written to a file): the code, and the message if it failed.
    rtError_t load_bytes(const std::string& bytes, std::string* message = nullptr) {
        const std::string path = work_ + "/crafted.rtg";
        write_file(path, bytes);
        rtGraphExec_t x = nullptr;
        rtError_t e = rtGraphExecLoad(&x, path.c_str());
        if (message) *message = e == RT_SUCCESS ? "" : last_message();
        if (e == RT_SUCCESS) {
            EXPECT_RT_OK(rtGraphExecDestroy(x));
        } else {
            EXPECT_EQ(x, nullptr);
        }
        return e;
    }

    std::string work_;
    bool cpu_ = true;
    std::string original_;  // what the original pipeline computed: result, then output
    std::vector<rtModule_t> modules_;
    Pipeline pipe_;  // the test's pipeline (build_pipeline), released by TearDown
    std::unique_ptr<EnvVar> cache_env_, cxx_env_;
    Watchdog watchdog_{std::chrono::milliseconds(120000), "graph file test"};
};

// ------------------------------------------------------------------------------------------ save → load → launch

TEST_F(GraphFileTest, SavedGraphGivesTheSameResultsInAFreshProcess) {
    Pipeline& p = pipe_;
    build_pipeline(&p, load_module());
    const std::string file = save(p.exec);
    ChildRun run = run_child(file, work_);
    ASSERT_EQ(run.status, 0) << run.log;
    ASSERT_EQ(run.results.size(), original_.size());
    EXPECT_TRUE(run.results == original_) << "the loaded graph computed other values than the original";
    // Replayed by the core instead of the backend's lowering: the same.
    ChildRun replay = run_child(file, work_, {{"RUNTIME_GRAPH_LOWERING", "0"}});
    ASSERT_EQ(replay.status, 0) << replay.log;
    EXPECT_TRUE(replay.results == original_);
}

TEST_F(GraphFileTest, ALoadedGraphTakesAnUpdateFromAGraphOfTheSameShape) {
    rtModule_t m = load_module();
    Pipeline& p = pipe_;
    build_pipeline(&p, m);
    const std::string file = save(p.exec);
    rtGraphExec_t x = nullptr;
    ASSERT_RT_OK(rtGraphExecLoad(&x, file.c_str()));
    DevBuf in(kBytes), out(kBytes);
    const std::vector<float> input = make_input();
    std::vector<float> result(kN, -1.0f);
    ASSERT_RT_OK(rtMemcpy(in.get(), input.data(), kBytes, RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(rtGraphExecSetBuffer(x, "input", in.get(), kBytes));
    ASSERT_RT_OK(rtGraphExecSetBuffer(x, "output", out.get(), kBytes));
    ASSERT_RT_OK(rtGraphExecSetBuffer(x, "result", result.data(), kBytes));
    // The saved structure (nodes, edges, allocations) is what rtGraphExecUpdate compares a graph with.
    rtGraph_t g = pipeline_graph(p, m, 5.0f);
    ASSERT_NE(g, nullptr);
    rtGraphExecUpdateResult why = RT_GRAPH_EXEC_UPDATE_ERROR;
    ASSERT_RT_OK(rtGraphExecUpdate(x, g, &why));
    EXPECT_EQ(why, RT_GRAPH_EXEC_UPDATE_SUCCESS);
    ASSERT_RT_OK(rtGraphLaunch(x, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    for (unsigned i = 0; i < kN; i += 37) ASSERT_FLOAT_EQ(result[i], expected(i, 5.0f)) << "item " << i;
    // A graph of another shape is refused, naming what differs.
    rtGraph_t other = nullptr;
    rtGraphNode_t e = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&other, 0));
    ASSERT_RT_OK(rtGraphAddEmptyNode(&e, other, nullptr, 0));
    EXPECT_RT_ERROR(RT_ERROR_GRAPH_EXEC_UPDATE_FAILURE, rtGraphExecUpdate(x, other, &why));
    EXPECT_EQ(why, RT_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    ASSERT_RT_OK(rtGraphDestroy(other));
    ASSERT_RT_OK(rtGraphDestroy(g));
    ASSERT_RT_OK(rtGraphExecDestroy(x));
}

TEST_F(GraphFileTest, LoadedInTheSameProcessWithNewBuffersGivesTheSameResults) {
    Pipeline& p = pipe_;
    build_pipeline(&p, load_module());
    const std::string file = save(p.exec);
    rtGraphExec_t x = nullptr;
    ASSERT_RT_OK(rtGraphExecLoad(&x, file.c_str()));
    rtGraphMemoryInfo a{}, b{};
    ASSERT_RT_OK(rtGraphExecGetMemoryInfo(p.exec, &a));
    ASSERT_RT_OK(rtGraphExecGetMemoryInfo(x, &b));
    EXPECT_EQ(a.arena_bytes, b.arena_bytes);
    EXPECT_EQ(a.allocated_bytes, b.allocated_bytes);
    EXPECT_EQ(a.allocations, b.allocations);
    DevBuf in(kBytes), out(kBytes);
    const std::vector<float> input = make_input();
    std::vector<float> result(kN, -1.0f), output(kN);
    ASSERT_RT_OK(rtMemcpy(in.get(), input.data(), kBytes, RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(rtGraphExecSetBuffer(x, "input", in.get(), kBytes));
    ASSERT_RT_OK(rtGraphExecSetBuffer(x, "output", out.get(), kBytes));
    ASSERT_RT_OK(rtGraphExecSetBuffer(x, "result", result.data(), kBytes));
    ASSERT_RT_OK(rtGraphLaunch(x, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    ASSERT_RT_OK(rtMemcpy(output.data(), out.get(), kBytes, RT_MEMCPY_DEVICE_TO_HOST));
    std::string got(reinterpret_cast<const char*>(result.data()), kBytes);
    got.append(reinterpret_cast<const char*>(output.data()), kBytes);
    EXPECT_TRUE(got == original_);
    // The original is untouched by the loaded one's launches: its buffers still hold its own results.
    EXPECT_EQ(std::memcmp(p.result.data(), original_.data(), kBytes), 0);
    ASSERT_RT_OK(rtGraphExecDestroy(x));
}

TEST_F(GraphFileTest, ALoadedGraphSavesToTheSameFile) {
    Pipeline& p = pipe_;
    build_pipeline(&p, load_module());
    const std::string file = save(p.exec);
    rtGraphExec_t x = nullptr;
    ASSERT_RT_OK(rtGraphExecLoad(&x, file.c_str()));
    const std::string again = save(x, "again.rtg");
    EXPECT_TRUE(read_file(file) == read_file(again)) << "saving a loaded graph changed the file";
    ASSERT_RT_OK(rtGraphExecDestroy(x));
}

TEST_F(GraphFileTest, SavedCodeIsUsedWhereTheTargetMatchesAndRebuiltFromSourceWhereNot) {
    if (!cpu_) GTEST_SKIP() << "counts runs of the cpu target's host compiler";
    // Built with spy "a": the file's build identity names that compiler.
    ::setenv("RUNTIME_CXX", compiler_spy("a").c_str(), 1);
    const std::string spy_b = compiler_spy("b");
    Pipeline& p = pipe_;
    build_pipeline(&p, load_module());
    const std::string file = save(p.exec);
    ASSERT_FALSE(spy_log("a").empty()) << "the module was built with spy a";

    // Same compiler, an empty kernel cache: the saved code is loaded, nothing is compiled.
    const std::string log_a_before = spy_log("a");
    ChildRun same = run_child(file, work_, {{"RUNTIME_CACHE_DIR", (work_ + "/cache-same").c_str()}});
    ASSERT_EQ(same.status, 0) << same.log;
    EXPECT_TRUE(same.results == original_);
    EXPECT_EQ(spy_log("a"), log_a_before) << "the child compiled although the saved code fits";

    // Another compiler (another build identity): the kernels are rebuilt from the saved source.
    ChildRun other = run_child(file, work_, {{"RUNTIME_CXX", spy_b.c_str()},
                                             {"RUNTIME_CACHE_DIR", (work_ + "/cache-other").c_str()}});
    ASSERT_EQ(other.status, 0) << other.log;
    EXPECT_TRUE(other.results == original_);
    EXPECT_FALSE(spy_log("b").empty()) << "the child did not rebuild the kernels for its own target";

    // No compiler at all (the identity cannot be known): the saved code of the same backend is tried, and loads.
    ChildRun none = run_child(file, work_, {{"RUNTIME_CXX", "/nonexistent/c++"},
                                            {"RUNTIME_CACHE_DIR", (work_ + "/cache-none").c_str()}});
    ASSERT_EQ(none.status, 0) << none.log;
    EXPECT_TRUE(none.results == original_);
}

TEST_F(GraphFileTest, KernelsOfAModuleFileAreSavedWithTheFilesCode) {
    if (!cpu_) GTEST_SKIP() << "uses the cpu kernel cache's shared objects as module files";
    // A compiler of its own: the module is built into this test's kernel cache, whatever this process loaded before.
    ::setenv("RUNTIME_CXX", compiler_spy("build").c_str(), 1);
    ASSERT_NE(load_module(), nullptr);
    std::string built;
    for (const auto& e : fs::directory_iterator(work_ + "/cache/cpu"))
        if (e.path().extension() == ".so" && e.path().filename().string().find(".tmp.") == std::string::npos)
            built = e.path().string();
    ASSERT_FALSE(built.empty()) << "no module in the kernel cache";
    const std::string module_file = work_ + "/module.so";
    fs::copy_file(built, module_file);
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadFile(&m, module_file.c_str()));
    modules_.push_back(m);
    Pipeline& p = pipe_;
    build_pipeline(&p, m);
    const std::string file = save(p.exec);
    // Another target identity and no source: the file's code is still loaded (the target checks it fits).
    ChildRun run = run_child(file, work_, {{"RUNTIME_CXX", compiler_spy("c").c_str()},
                                           {"RUNTIME_CACHE_DIR", (work_ + "/cache-c").c_str()}});
    ASSERT_EQ(run.status, 0) << run.log;
    EXPECT_TRUE(run.results == original_);
    EXPECT_TRUE(spy_log("c").empty()) << "a module without source was compiled";

    // The module file gone before the save: its code cannot be had, and the message says why.
    fs::remove(module_file);
    const std::string path = work_ + "/gone.rtg";
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtGraphExecSave(p.exec, path.c_str()));
    EXPECT_TRUE(contains(last_message(), "rtModuleLoadFile"));
    EXPECT_TRUE(contains(last_message(), module_file));
    EXPECT_FALSE(fs::exists(path));
}

// ------------------------------------------------------------------------------------------ named buffers

TEST_F(GraphFileTest, NamedBuffersMustBeBoundAndLargeEnough) {
    Pipeline& p = pipe_;
    build_pipeline(&p, load_module());
    const std::string file = save(p.exec);
    rtGraphExec_t x = nullptr;
    ASSERT_RT_OK(rtGraphExecLoad(&x, file.c_str()));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphLaunch(x, nullptr));
    EXPECT_TRUE(contains(last_message(), "input")) << "the first unbound buffer is named";

    DevBuf in(kBytes), out(kBytes), small(kBytes / 2);
    std::vector<float> result(kN);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecSetBuffer(x, "output", small.get(), kBytes / 2));
    EXPECT_TRUE(contains(last_message(), "output"));
    EXPECT_TRUE(contains(last_message(), std::to_string(kBytes)));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecSetBuffer(x, "nosuch", out.get(), kBytes));
    EXPECT_TRUE(contains(last_message(), "nosuch"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecSetBuffer(x, nullptr, out.get(), kBytes));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphExecSetBuffer(nullptr, "output", out.get(), kBytes));

    ASSERT_RT_OK(rtGraphExecSetBuffer(x, "input", in.get(), kBytes));
    ASSERT_RT_OK(rtGraphExecSetBuffer(x, "output", out.get(), kBytes));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphLaunch(x, nullptr));
    EXPECT_TRUE(contains(last_message(), "result")) << "one buffer is still unbound";
    ASSERT_RT_OK(rtGraphExecSetBuffer(x, "result", result.data(), kBytes));
    ASSERT_RT_OK(rtGraphLaunch(x, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    ASSERT_RT_OK(rtGraphExecDestroy(x));
}

TEST_F(GraphFileTest, ACapturedGraphSavesAndLoads) {
    // Stream capture (what most graphs come from): a temporary of rtMallocAsync, a fill, a kernel, a copy out.
    rtModule_t m = load_module();
    rtFunction_t scale = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&scale, m, "gf_scale"));
    DevBuf in(kBytes), out(kBytes);
    const std::vector<float> input = make_input();
    ASSERT_RT_OK(rtMemcpy(in.get(), input.data(), kBytes, RT_MEMCPY_HOST_TO_DEVICE));
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&s));
    ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_GLOBAL));
    void* tmp = nullptr;
    ASSERT_RT_OK(rtMallocAsync(&tmp, kBytes, s));
    ASSERT_RT_OK(rtMemsetAsync(tmp, 0, kBytes, s));
    void* src = in.get();
    float factor = 3.0f;
    unsigned n = kN;
    void* args[] = {&tmp, &src, &factor, &n};
    ASSERT_RT_OK(rtLaunchKernel(scale, rtDim3{(kN + 255) / 256, 1, 1}, rtDim3{256, 1, 1}, args, 0, s));
    ASSERT_RT_OK(rtMemcpyAsync(out.get(), tmp, kBytes, RT_MEMCPY_DEVICE_TO_DEVICE, s));
    ASSERT_RT_OK(rtFreeAsync(tmp, s));
    rtGraph_t g = nullptr;
    ASSERT_RT_OK(rtStreamEndCapture(s, &g));
    ASSERT_RT_OK(rtGraphBindName(g, "in", in.get(), kBytes));
    ASSERT_RT_OK(rtGraphBindName(g, "out", out.get(), kBytes));
    rtGraphExec_t exec = nullptr;
    ASSERT_RT_OK(rtGraphInstantiate(&exec, g, 0));
    const std::string file = save(exec, "captured.rtg");
    ASSERT_RT_OK(rtGraphExecDestroy(exec));
    ASSERT_RT_OK(rtGraphDestroy(g));

    rtGraphExec_t x = nullptr;
    ASSERT_RT_OK(rtGraphExecLoad(&x, file.c_str()));
    DevBuf in2(kBytes), out2(kBytes);
    ASSERT_RT_OK(rtMemcpy(in2.get(), input.data(), kBytes, RT_MEMCPY_HOST_TO_DEVICE));
    ASSERT_RT_OK(rtGraphExecSetBuffer(x, "in", in2.get(), kBytes));
    ASSERT_RT_OK(rtGraphExecSetBuffer(x, "out", out2.get(), kBytes));
    ASSERT_RT_OK(rtGraphLaunch(x, s));
    ASSERT_RT_OK(rtStreamSynchronize(s));
    std::vector<float> got(kN);
    ASSERT_RT_OK(rtMemcpy(got.data(), out2.get(), kBytes, RT_MEMCPY_DEVICE_TO_HOST));
    for (unsigned i = 0; i < kN; ++i) ASSERT_EQ(got[i], input[i] * 3.0f) << "item " << i;
    ASSERT_RT_OK(rtGraphExecDestroy(x));
    ASSERT_RT_OK(rtStreamDestroy(s));
}

TEST_F(GraphFileTest, CopiesOfNothingNeedNoOperands) {
    // A copy and a fill of 0 bytes do nothing (their operands are not looked at, as CUDA's): saved, loaded and run.
    DevBuf a(256);
    rtGraph_t g = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&g, 0));
    ASSERT_RT_OK(rtGraphBindName(g, "a", a.get(), 256));
    rtGraphNode_t n1 = nullptr, n2 = nullptr, n3 = nullptr;
    rtMemcpyNodeParams nothing{nullptr, nullptr, 0, RT_MEMCPY_DEVICE_TO_DEVICE};
    ASSERT_RT_OK(rtGraphAddMemcpyNode(&n1, g, nullptr, 0, &nothing));
    rtMemsetNodeParams none{nullptr, 1, 0};
    ASSERT_RT_OK(rtGraphAddMemsetNode(&n2, g, &n1, 1, &none));
    rtMemsetNodeParams fill{a.get(), 9, 256};
    ASSERT_RT_OK(rtGraphAddMemsetNode(&n3, g, &n2, 1, &fill));
    rtGraphExec_t exec = nullptr;
    ASSERT_RT_OK(rtGraphInstantiate(&exec, g, 0));
    const std::string file = save(exec, "nothing.rtg");
    ASSERT_RT_OK(rtGraphExecDestroy(exec));
    ASSERT_RT_OK(rtGraphDestroy(g));
    rtGraphExec_t x = nullptr;
    ASSERT_RT_OK(rtGraphExecLoad(&x, file.c_str()));
    DevBuf b(256);
    ASSERT_RT_OK(rtGraphExecSetBuffer(x, "a", b.get(), 256));
    ASSERT_RT_OK(rtGraphLaunch(x, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    std::vector<unsigned char> host(256);
    ASSERT_RT_OK(rtMemcpy(host.data(), b.get(), 256, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(std::count(host.begin(), host.end(), 9), 256);
    ASSERT_RT_OK(rtGraphExecDestroy(x));
}

// ------------------------------------------------------------------------------------------ files refused

TEST_F(GraphFileTest, EveryTruncationIsRefused) {
    Pipeline& p = pipe_;
    build_pipeline(&p, load_module());
    const std::string file = save(p.exec);
    const std::string bytes = read_file(file);
    ASSERT_GT(bytes.size(), kHeader + 1000) << "the file holds the kernels' code";
    // One file cut shorter and shorter: every prefix of the real file, from all but one byte to none.
    const std::string path = work_ + "/cut.rtg";
    write_file(path, bytes);
    int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    size_t refused = 0;
    for (size_t len = bytes.size(); len-- > 0;) {
        ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(len)), 0);
        rtGraphExec_t x = nullptr;
        rtError_t e = rtGraphExecLoad(&x, path.c_str());
        if (e == RT_SUCCESS) rtGraphExecDestroy(x);
        ASSERT_EQ(e, RT_ERROR_INVALID_VALUE) << "a prefix of " << len << " bytes: " << last_message();
        ASSERT_EQ(x, nullptr);
        const std::string m = last_message();
        ASSERT_TRUE(contains(m, len == 0 ? "empty" : "truncated")) << len << " bytes";
        ASSERT_TRUE(contains(m, path)) << "the message names the file";
        ++refused;
    }
    ::close(fd);
    EXPECT_EQ(refused, bytes.size());
}

TEST_F(GraphFileTest, DamagedFilesAreRefusedWithAMessage) {
    Pipeline& p = pipe_;
    build_pipeline(&p, load_module());
    const std::string bytes = read_file(save(p.exec));
    std::string m;
    // Every header byte, and body bytes at a stride (the checksum covers every one of them).
    std::vector<size_t> positions;
    for (size_t i = 0; i < kHeader; ++i) positions.push_back(i);
    for (size_t i = kHeader; i < bytes.size(); i += 997) positions.push_back(i);
    positions.push_back(bytes.size() - 1);
    for (size_t at : positions) {
        std::string damaged = bytes;
        damaged[at] = static_cast<char>(damaged[at] ^ 0x10);
        ASSERT_EQ(load_bytes(damaged, &m), RT_ERROR_INVALID_VALUE) << "byte " << at;
        // What each part of the header says when it is wrong; the checksum covers the rest.
        const char* expected = at < 8 ? "not a saved graph" : at < 12 ? "format version" : at < 18 ? "checksum"
                             : at < 24 ? "reserved" : at < 32 ? "announces" : "checksum";
        EXPECT_TRUE(contains(m, expected)) << "byte " << at << ": " << m;
    }
    // Bytes appended.
    ASSERT_EQ(load_bytes(bytes + "xyz", &m), RT_ERROR_INVALID_VALUE);
    EXPECT_TRUE(contains(m, "corrupted")) << m;
}

TEST_F(GraphFileTest, ForeignFilesAndOtherVersionsAreRefused) {
    Pipeline& p = pipe_;
    build_pipeline(&p, load_module());
    const std::string bytes = read_file(save(p.exec));
    std::string m;
    ASSERT_EQ(load_bytes(std::string("PK\x03\x04 a zip archive, not a graph", 32), &m), RT_ERROR_INVALID_VALUE);
    EXPECT_TRUE(contains(m, "not a saved graph")) << m;
    EXPECT_TRUE(contains(m, "50 4b 03 04")) << "the bytes seen are shown: " << m;
    ASSERT_EQ(load_bytes("", &m), RT_ERROR_INVALID_VALUE);
    EXPECT_TRUE(contains(m, "empty")) << m;

    std::string v2 = bytes;
    put32(v2, 8, 2);
    ASSERT_EQ(load_bytes(v2, &m), RT_ERROR_INVALID_VALUE);
    EXPECT_TRUE(contains(m, "format version 2")) << m;
    EXPECT_TRUE(contains(m, "reads format version 1")) << m;

    rtGraphExec_t x = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecLoad(&x, (work_ + "/absent.rtg").c_str()));
    EXPECT_TRUE(contains(last_message(), "absent.rtg"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecLoad(&x, work_.c_str()));
    EXPECT_TRUE(contains(last_message(), "not a regular file"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecLoad(&x, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecLoad(&x, ""));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecLoad(nullptr, (work_ + "/pipeline.rtg").c_str()));
    EXPECT_EQ(x, nullptr);
}

TEST_F(GraphFileTest, DamagedBodiesWithAValidChecksumAreRefusedOrLoad) {
    // A graph without kernels (copies, fills, allocations): every byte of its body changed, the checksum repaired,
    // so the body's own checks are reached. Each change is refused with a message or gives a graph that loads.
    DevBuf a(4096), b(4096);
    rtGraph_t g = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&g, 0));
    ASSERT_RT_OK(rtGraphBindName(g, "a", a.get(), 4096));
    ASSERT_RT_OK(rtGraphBindName(g, "b", b.get(), 4096));
    rtGraphNode_t n1 = nullptr, n2 = nullptr, n3 = nullptr, n4 = nullptr, n5 = nullptr;
    rtMemAllocNodeParams ap{1024, nullptr};
    ASSERT_RT_OK(rtGraphAddMemAllocNode(&n1, g, nullptr, 0, &ap));
    rtMemsetNodeParams fp{ap.ptr, 7, 1024};
    ASSERT_RT_OK(rtGraphAddMemsetNode(&n2, g, &n1, 1, &fp));
    rtMemcpyNodeParams cp{a.get() + 100, ap.ptr, 1024, RT_MEMCPY_DEVICE_TO_DEVICE};
    ASSERT_RT_OK(rtGraphAddMemcpyNode(&n3, g, &n2, 1, &cp));
    rtMemcpyNodeParams cp2{b.get(), a.get(), 2048, RT_MEMCPY_DEVICE_TO_DEVICE};
    ASSERT_RT_OK(rtGraphAddMemcpyNode(&n4, g, &n3, 1, &cp2));
    ASSERT_RT_OK(rtGraphAddMemFreeNode(&n5, g, &n3, 1, ap.ptr));
    rtGraphExec_t exec = nullptr;
    ASSERT_RT_OK(rtGraphInstantiate(&exec, g, 0));
    const std::string bytes = read_file(save(exec, "small.rtg"));
    ASSERT_RT_OK(rtGraphExecDestroy(exec));
    ASSERT_RT_OK(rtGraphDestroy(g));
    ASSERT_EQ(load_bytes(bytes), RT_SUCCESS) << last_message();

    size_t refused = 0, loaded = 0;
    for (size_t at = kHeader; at < bytes.size(); ++at)
        for (int flip : {0x01, 0x80, 0xff}) {
            std::string damaged = bytes;
            damaged[at] = static_cast<char>(damaged[at] ^ flip);
            std::string m;
            rtError_t e = load_bytes(with_checksum(damaged), &m);
            ASSERT_TRUE(e == RT_SUCCESS || e == RT_ERROR_INVALID_VALUE || e == RT_ERROR_OUT_OF_MEMORY)
                << "byte " << at << " ^ " << flip << ": " << rtGetErrorName(e) << ": " << m;
            if (e == RT_SUCCESS) {
                ++loaded;
            } else {
                ++refused;
                ASSERT_FALSE(m.empty());
            }
        }
    EXPECT_GT(refused, 0u);
    EXPECT_GT(loaded, 0u) << "changes to labels and the build identity leave a graph that loads";

    // A count that cannot fit what is left is refused before anything is allocated for it.
    std::string huge = bytes;
    put32(huge, module_count_offset(huge), 0xffffffffu);
    std::string m;
    ASSERT_EQ(load_bytes(with_checksum(huge), &m), RT_ERROR_INVALID_VALUE);
    EXPECT_TRUE(contains(m, "module count")) << m;
}

// ------------------------------------------------------------------------------------------ refused at save

TEST_F(GraphFileTest, SaveRefusesADevicePointerOutsideTheArenaAndTheNamedBuffers) {
    rtModule_t m = load_module();
    rtFunction_t scale = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&scale, m, "gf_scale"));
    DevBuf raw(kBytes), named(kBytes);
    rtGraph_t g = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&g, 0));
    ASSERT_RT_OK(rtGraphBindName(g, "named", named.get(), kBytes));
    void* tmp = raw.get();
    void* in = named.get();
    float factor = 2.0f;
    unsigned n = kN;
    void* args[] = {&tmp, &in, &factor, &n};
    rtKernelNodeParams kp{scale, rtDim3{kN, 1, 1}, rtDim3{1, 1, 1}, 0, args, {0, 0, 0}};
    rtGraphNode_t k = nullptr;
    ASSERT_RT_OK(rtGraphAddKernelNode(&k, g, nullptr, 0, &kp));
    rtGraphExec_t exec = nullptr;
    ASSERT_RT_OK(rtGraphInstantiate(&exec, g, 0));
    const std::string path = work_ + "/refused.rtg";
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtGraphExecSave(exec, path.c_str()));
    EXPECT_TRUE(contains(last_message(), "node 0")) << last_message();
    EXPECT_TRUE(contains(last_message(), "gf_scale")) << last_message();
    EXPECT_TRUE(contains(last_message(), ptr_text(raw.get()))) << last_message();
    EXPECT_TRUE(contains(last_message(), "argument 0")) << last_message();
    EXPECT_FALSE(fs::exists(path)) << "nothing is written when the save is refused";
    ASSERT_RT_OK(rtGraphExecDestroy(exec));
    ASSERT_RT_OK(rtGraphDestroy(g));

    // A copy from device memory that is not named, and one from unnamed host memory.
    std::vector<char> host(kBytes);
    for (int which = 0; which < 2; ++which) {
        ASSERT_RT_OK(rtGraphCreate(&g, 0));
        ASSERT_RT_OK(rtGraphBindName(g, "named", named.get(), kBytes));
        rtMemcpyNodeParams cp = which == 0
            ? rtMemcpyNodeParams{named.get(), raw.get(), 64, RT_MEMCPY_DEVICE_TO_DEVICE}
            : rtMemcpyNodeParams{named.get(), host.data(), 64, RT_MEMCPY_HOST_TO_DEVICE};
        rtGraphNode_t e = nullptr, c = nullptr;
        ASSERT_RT_OK(rtGraphAddEmptyNode(&e, g, nullptr, 0));
        ASSERT_RT_OK(rtGraphAddMemcpyNode(&c, g, &e, 1, &cp));
        ASSERT_RT_OK(rtGraphInstantiate(&exec, g, 0));
        EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtGraphExecSave(exec, path.c_str()));
        EXPECT_TRUE(contains(last_message(), "node 1")) << last_message();
        EXPECT_TRUE(contains(last_message(), "source")) << last_message();
        EXPECT_TRUE(contains(last_message(), ptr_text(which == 0 ? static_cast<void*>(raw.get()) : host.data()))) << last_message();
        ASSERT_RT_OK(rtGraphExecDestroy(exec));
        ASSERT_RT_OK(rtGraphDestroy(g));
    }
}

void host_step(void*) {}

TEST_F(GraphFileTest, SaveRefusesHostAndEventNodes) {
    const std::string path = work_ + "/refused.rtg";
    rtGraph_t g = nullptr;
    rtGraphExec_t exec = nullptr;
    rtGraphNode_t n = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&g, 0));
    rtHostNodeParams hp{host_step, nullptr};
    ASSERT_RT_OK(rtGraphAddHostNode(&n, g, nullptr, 0, &hp));
    ASSERT_RT_OK(rtGraphInstantiate(&exec, g, 0));
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtGraphExecSave(exec, path.c_str()));
    EXPECT_TRUE(contains(last_message(), "node 0")) << last_message();
    EXPECT_TRUE(contains(last_message(), "host function")) << last_message();
    ASSERT_RT_OK(rtGraphExecDestroy(exec));
    ASSERT_RT_OK(rtGraphDestroy(g));

    rtEvent_t ev = nullptr;
    ASSERT_RT_OK(rtEventCreate(&ev));
    ASSERT_RT_OK(rtGraphCreate(&g, 0));
    ASSERT_RT_OK(rtGraphAddEventRecordNode(&n, g, nullptr, 0, ev));
    ASSERT_RT_OK(rtGraphInstantiate(&exec, g, 0));
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtGraphExecSave(exec, path.c_str()));
    EXPECT_TRUE(contains(last_message(), "event")) << last_message();
    ASSERT_RT_OK(rtGraphExecDestroy(exec));
    ASSERT_RT_OK(rtGraphDestroy(g));
    ASSERT_RT_OK(rtEventDestroy(ev));
    EXPECT_FALSE(fs::exists(path));

    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphExecSave(nullptr, path.c_str()));
}

TEST_F(GraphFileTest, SaveToAnUnwritablePathIsRefused) {
    Pipeline& p = pipe_;
    build_pipeline(&p, load_module());
    const std::string path = work_ + "/no/such/folder/graph.rtg";
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecSave(p.exec, path.c_str()));
    EXPECT_TRUE(contains(last_message(), path)) << last_message();
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecSave(p.exec, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphExecSave(p.exec, ""));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 4 && std::strcmp(argv[1], "--graph-file-child") == 0) return child_main(argv[2], argv[3]);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}

// A kernel argument one past a named buffer's end (an "end" pointer) moves with the buffer when it is re-bound.
TEST_F(GraphFileTest, AnEndPointerOfANamedBufferFollowsItsRebinding) {
    if (!cpu_) GTEST_SKIP() << "checks what a kernel computes (the fake driver runs no kernels)";
    rtModule_t m = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, R"(
RT_KERNEL void gf_span(float* begin, float* end, unsigned expect) {
    rt_assert(static_cast<unsigned>(end - begin) == expect);
    for (float* p = begin; p != end; ++p) *p = 3.0f;
})", nullptr));
    modules_.push_back(m);
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "gf_span"));
    DevBuf a(kBytes), b(kBytes);
    ASSERT_RT_OK(rtMemset(a.get(), 0, kBytes));
    ASSERT_RT_OK(rtMemset(b.get(), 0, kBytes));
    rtGraph_t g = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&g, 0));
    ASSERT_RT_OK(rtGraphBindName(g, "buf", a.get(), kBytes));
    float* begin = reinterpret_cast<float*>(a.get());
    float* end = begin + kN;
    unsigned n = kN;
    void* args[] = {&begin, &end, &n};
    rtKernelNodeParams kp{};
    kp.function = f;
    kp.grid = {1, 1, 1};
    kp.block = {1, 1, 1};
    kp.args = args;
    rtGraphNode_t k = nullptr;
    ASSERT_RT_OK(rtGraphAddKernelNode(&k, g, nullptr, 0, &kp));
    rtGraphExec_t x = nullptr;
    ASSERT_RT_OK(rtGraphInstantiate(&x, g, 0));
    ASSERT_RT_OK(rtGraphExecSetBuffer(x, "buf", b.get(), kBytes));
    ASSERT_RT_OK(rtGraphLaunch(x, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr)) << "the end pointer was left at the first buffer's end";
    std::vector<float> va(kN), vb(kN);
    ASSERT_RT_OK(rtMemcpy(va.data(), a.get(), kBytes, RT_MEMCPY_DEVICE_TO_HOST));
    ASSERT_RT_OK(rtMemcpy(vb.data(), b.get(), kBytes, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(va, std::vector<float>(kN, 0.0f)) << "the first buffer was written after the rebinding";
    EXPECT_EQ(vb, std::vector<float>(kN, 3.0f));
    ASSERT_RT_OK(rtGraphExecDestroy(x));
    ASSERT_RT_OK(rtGraphDestroy(g));
}
