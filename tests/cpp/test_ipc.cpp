// test_ipc.cpp — rtIpc*: memory and events shared with a second process (this binary run again as a child).
#include "test_util.hpp"

#include <runtime/runtime.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

using namespace rt_test;

constexpr size_t kBytes = size_t{2} << 20;  // shareable on cpu (at least 1 MiB)
constexpr int kLimitMs = 30000;             // every wait across processes ends by then

constexpr const char* kSource = R"(
RT_KERNEL void scale(float* x, float a, uint32_t n) {
    size_t i = get_global_id(0);
    if (i < n) x[i] *= a;
}
)";

template <class Handle>
std::string to_hex(const Handle& h) {
    std::string s;
    char b[3];
    for (unsigned char c : h.reserved) {
        std::snprintf(b, sizeof b, "%02x", c);
        s += b;
    }
    return s;
}

template <class Handle>
Handle from_hex(const char* s) {
    Handle h{};
    for (size_t i = 0; s && i < sizeof h.reserved && s[2 * i] && s[2 * i + 1]; ++i)
        h.reserved[i] = static_cast<char>(std::stoi(std::string(s + 2 * i, 2), nullptr, 16));
    return h;
}

/// Reads one byte from `fd` within `ms`; -1 on timeout or end of file.
int read_byte(int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms) != 1) return -1;
    unsigned char c = 0;
    return ::read(fd, &c, 1) == 1 ? c : -1;
}

void write_byte(int fd, unsigned char c) { (void)!::write(fd, &c, 1); }

int int_env(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::atoi(v) : -1;
}

// ---------------------------------------------------------------- the child's side

int fail_child(const char* what, rtError_t e = RT_SUCCESS) {
    std::fprintf(stderr, "ipc child: %s (%s: %s)\n", what, rtGetErrorName(e), rtGetLastErrorMessage());
    return 1;
}

#define CHILD_OK(expr)                                 \
    do {                                               \
        rtError_t e_ = (expr);                         \
        if (e_ != RT_SUCCESS) return fail_child(#expr, e_); \
    } while (0)
#define CHILD_CHECK(cond)                           \
    do {                                            \
        if (!(cond)) return fail_child(#cond);      \
    } while (0)

/// The roles of the child (RT_TEST_IPC_CHILD); RT_TEST_IPC_DEVICE is the device, RT_TEST_IPC_MEM / _EVENT the
/// handles in hex, RT_TEST_IPC_IN / _OUT the pipe ends to the parent. Returns the exit code (0: all held).
int child_main(const std::string& role) {
    const int in = int_env("RT_TEST_IPC_IN"), out = int_env("RT_TEST_IPC_OUT");
    CHILD_OK(rtSetDevice(int_env("RT_TEST_IPC_DEVICE")));
    const auto mem = from_hex<rtIpcMemHandle_t>(std::getenv("RT_TEST_IPC_MEM"));
    const auto ev = from_hex<rtIpcEventHandle_t>(std::getenv("RT_TEST_IPC_EVENT"));
    const size_t offset = std::getenv("RT_TEST_IPC_OFFSET") ? std::stoul(std::getenv("RT_TEST_IPC_OFFSET")) : 0;
    if (role == "write") {  // writes a pattern through the opened pointer, and checks what it sees of it
        void* p = nullptr;
        CHILD_OK(rtIpcOpenMemHandle(&p, mem, RT_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
        rtPointerAttributes a{};
        CHILD_OK(rtPointerGetAttributes(&a, static_cast<char*>(p) + 100));
        CHILD_CHECK(a.type == RT_MEMORY_TYPE_DEVICE);
        CHILD_CHECK(a.device == int_env("RT_TEST_IPC_DEVICE"));
        CHILD_CHECK(a.base == p && a.size == kBytes);
        CHILD_CHECK(rtFree(p) == RT_ERROR_INVALID_VALUE);  // not this process's allocation
        CHILD_CHECK(std::strstr(rtGetLastErrorMessage(), "rtIpcCloseMemHandle") != nullptr);
        std::vector<unsigned char> data = pattern(kBytes, 7);
        CHILD_OK(rtMemcpy(p, data.data(), kBytes, RT_MEMCPY_HOST_TO_DEVICE));
        CHILD_OK(rtIpcCloseMemHandle(p));
        CHILD_CHECK(rtIpcCloseMemHandle(p) == RT_ERROR_INVALID_VALUE);  // closed already
        return 0;
    }
    if (role == "read-and-scale") {  // reads the parent's results, scales them by 3 with a kernel of its own
        void* p = nullptr;
        CHILD_OK(rtIpcOpenMemHandle(&p, mem, 0));
        const size_t n = kBytes / sizeof(float);
        std::vector<float> got(n);
        CHILD_OK(rtMemcpy(got.data(), p, kBytes, RT_MEMCPY_DEVICE_TO_HOST));
        for (size_t i = 0; i < n; ++i)
            if (got[i] != 2.0f * static_cast<float>(i % 1000)) return fail_child("the parent's results differ");
        // The offset the parent exported from: the handle gave the allocation's base (p), the data is as there.
        CHILD_CHECK(offset % sizeof(float) == 0 && offset < kBytes);
        rtModule_t m = nullptr;
        rtFunction_t f = nullptr;
        CHILD_OK(rtModuleLoadSource(&m, kSource, nullptr));
        CHILD_OK(rtModuleGetFunction(&f, m, "scale"));
        float* x = static_cast<float*>(p);
        float three = 3.0f;
        uint32_t count = static_cast<uint32_t>(n);
        void* args[] = {&x, &three, &count};
        CHILD_OK(rtLaunchKernel(f, rtDim3{count / 256, 1, 1}, rtDim3{256, 1, 1}, args, 0, nullptr));
        CHILD_OK(rtStreamSynchronize(nullptr));
        CHILD_OK(rtIpcCloseMemHandle(p));
        CHILD_OK(rtModuleUnload(m));
        return 0;
    }
    if (role == "export-unshareable") {  // started without RUNTIME_CPU_IPC_MEMORY: its memory cannot be exported
        void* p = nullptr;
        CHILD_OK(rtMalloc(&p, kBytes));
        rtIpcMemHandle_t h{};
        CHILD_CHECK(rtIpcGetMemHandle(&h, p) == RT_ERROR_NOT_SUPPORTED);
        CHILD_CHECK(std::strstr(rtGetLastErrorMessage(), "RUNTIME_CPU_IPC_MEMORY=1") != nullptr);
        CHILD_CHECK(std::strstr(rtGetLastErrorMessage(), "cpu.ipc_memory=1") != nullptr);
        CHILD_OK(rtFree(p));
        return 0;
    }
    if (role == "record") {  // fills the memory and records the event behind a gate the parent opens
        void* p = nullptr;
        rtEvent_t e = nullptr;
        rtStream_t s = nullptr;
        CHILD_OK(rtIpcOpenMemHandle(&p, mem, 0));
        CHILD_OK(rtIpcOpenEventHandle(&e, ev));
        CHILD_OK(rtStreamCreate(&s));
        static int gate_fd = -1;
        gate_fd = in;
        CHILD_OK(rtLaunchHostFunc(s, [](void*) { (void)read_byte(gate_fd, kLimitMs); }, nullptr));
        CHILD_OK(rtMemsetAsync(p, 0x5a, kBytes, s));
        CHILD_OK(rtEventRecord(e, s));
        CHILD_CHECK(rtEventQuery(e) == RT_ERROR_NOT_READY);
        write_byte(out, 'R');
        CHILD_OK(rtStreamSynchronizeWithTimeout(s, kLimitMs));
        CHILD_OK(rtEventSynchronize(e));
        CHILD_OK(rtEventQuery(e));
        CHILD_OK(rtStreamDestroy(s));
        CHILD_OK(rtEventDestroy(e));
        CHILD_OK(rtIpcCloseMemHandle(p));
        return 0;
    }
    if (role == "wait") {  // its stream waits for the parent's record, then reads what the parent wrote before it
        void* p = nullptr;
        rtEvent_t e = nullptr;
        rtStream_t s = nullptr;
        CHILD_OK(rtIpcOpenMemHandle(&p, mem, 0));
        CHILD_OK(rtIpcOpenEventHandle(&e, ev));
        CHILD_OK(rtStreamCreate(&s));
        CHILD_CHECK(rtEventQuery(e) == RT_ERROR_NOT_READY);  // the parent's stream is gated
        CHILD_OK(rtStreamWaitEvent(s, e));
        std::vector<unsigned char> got(kBytes, 0);
        CHILD_OK(rtMemcpyAsync(got.data(), p, kBytes, RT_MEMCPY_DEVICE_TO_HOST, s));
        CHILD_CHECK(rtStreamQuery(s) == RT_ERROR_NOT_READY);
        write_byte(out, 'W');  // the parent opens its gate now
        CHILD_OK(rtStreamSynchronizeWithTimeout(s, kLimitMs));
        for (unsigned char c : got)
            if (c != 0x33) return fail_child("the copy ran before the parent's record completed");
        CHILD_OK(rtEventSynchronize(e));
        CHILD_OK(rtStreamDestroy(s));
        CHILD_OK(rtEventDestroy(e));
        CHILD_OK(rtIpcCloseMemHandle(p));
        return 0;
    }
    if (role == "export-and-exit") {  // exports memory and an event, sends their handles, exits
        void* p = nullptr;
        rtEvent_t e = nullptr;
        CHILD_OK(rtMalloc(&p, kBytes));
        CHILD_OK(rtEventCreateWithFlags(&e, RT_EVENT_INTERPROCESS | RT_EVENT_DISABLE_TIMING));
        rtIpcMemHandle_t h{};
        rtIpcEventHandle_t he{};
        CHILD_OK(rtIpcGetMemHandle(&h, p));
        CHILD_OK(rtIpcGetEventHandle(&he, e));
        CHILD_CHECK(::write(out, &h, sizeof h) == sizeof h);
        CHILD_CHECK(::write(out, &he, sizeof he) == sizeof he);
        return 0;
    }
    if (role == "open-stale") {  // the handles name freed memory and a destroyed event
        void* p = reinterpret_cast<void*>(1);
        rtEvent_t e = nullptr;
        CHILD_CHECK(rtIpcOpenMemHandle(&p, mem, 0) == RT_ERROR_INVALID_VALUE);
        CHILD_CHECK(std::strstr(rtGetLastErrorMessage(), "freed") != nullptr);
        CHILD_CHECK(p == nullptr);
        CHILD_CHECK(rtIpcOpenEventHandle(&e, ev) == RT_ERROR_INVALID_VALUE);
        CHILD_CHECK(std::strstr(rtGetLastErrorMessage(), "destroyed") != nullptr);
        return 0;
    }
    if (role == "cpp") {  // the C++ face: IpcMemory and Event::from_ipc_handle
        try {
            runtime::IpcMemory m(mem);
            CHILD_CHECK(m.size() == kBytes);
            auto e = runtime::Event::from_ipc_handle(ev);
            runtime::Stream s;
            CHILD_OK(rtMemsetAsync(m.get(), 0x11, m.size(), s.native_handle()));
            e.record(s);
            CHILD_CHECK(e.synchronize_for(std::chrono::milliseconds(kLimitMs)));
            m.close();
            CHILD_CHECK(m.get() == nullptr);
        } catch (const runtime::Error& e) {
            return fail_child(e.what());
        }
        return 0;
    }
    std::fprintf(stderr, "ipc child: unknown role %s\n", role.c_str());
    return 2;
}

// The tests run this executable again with RT_TEST_IPC_CHILD set: the child runs its role before gtest starts (so no
// runtime state of the parent is copied into it) and leaves.
const bool g_ipc_child = [] {
    const char* role = std::getenv("RT_TEST_IPC_CHILD");
    if (!role) return true;
    const int rc = child_main(role);
    std::fflush(stderr);
    std::exit(rc);
}();

// ---------------------------------------------------------------- the parent's side

/// A child process of this binary in `role`, with pipes both ways; killed if still running when destroyed.
class Child {
public:
    Child(const std::string& role, int device, const std::vector<std::string>& env) {
        int to_child[2], to_parent[2];
        if (::pipe(to_child) != 0 || ::pipe(to_parent) != 0) return;
        std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
        std::string filter = "--gtest_filter=-*";
        err_path_ = ::testing::TempDir() + "rt_ipc_child_" + std::to_string(::getpid()) + "_" + role + ".txt";
        std::vector<std::string> vars;
        auto overridden = [&](const char* var) {  // a variable `env` sets: the child sees that value only
            for (const std::string& v : env)
                if (std::strncmp(var, v.c_str(), v.find('=') + 1) == 0) return true;
            return false;
        };
        for (char** e = environ; *e; ++e)
            if (std::strncmp(*e, "RT_TEST_IPC_", 12) != 0 && !overridden(*e)) vars.emplace_back(*e);
        vars.push_back("RT_TEST_IPC_CHILD=" + role);
        vars.push_back("RT_TEST_IPC_DEVICE=" + std::to_string(device));
        vars.push_back("RT_TEST_IPC_IN=" + std::to_string(to_child[0]));
        vars.push_back("RT_TEST_IPC_OUT=" + std::to_string(to_parent[1]));
        for (const std::string& v : env) vars.push_back(v);
        std::vector<char*> envp, argv{self.data(), filter.data(), nullptr};
        for (std::string& v : vars) envp.push_back(v.data());
        envp.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addclose(&actions, to_child[1]);
        posix_spawn_file_actions_addclose(&actions, to_parent[0]);
        if (posix_spawn(&pid_, self.c_str(), &actions, nullptr, argv.data(), envp.data()) != 0) pid_ = -1;
        posix_spawn_file_actions_destroy(&actions);
        ::close(to_child[0]);
        ::close(to_parent[1]);
        to_child_ = to_child[1];
        from_child_ = to_parent[0];
    }
    ~Child() {
        if (pid_ > 0 && !exited_) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        if (to_child_ >= 0) ::close(to_child_);
        if (from_child_ >= 0) ::close(from_child_);
        std::remove(err_path_.c_str());
    }
    bool started() const { return pid_ > 0; }
    int to_child() const { return to_child_; }
    int from_child() const { return from_child_; }
    /// Waits (bounded) for the child to exit; its exit code, or -1 if it was killed or had to be.
    int wait() {
        int status = 0;
        if (!wait_until([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; },
                        std::chrono::milliseconds(kLimitMs))) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, &status, 0);
            exited_ = true;
            return -1;
        }
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::string stderr_text() const {
        std::ifstream f(err_path_);
        std::stringstream s;
        s << f.rdbuf();
        return s.str();
    }

private:
    pid_t pid_ = -1;
    bool exited_ = false;
    int to_child_ = -1, from_child_ = -1;
    std::string err_path_;
};

class Ipc : public DeviceTest {
protected:
    void SetUp() override {
        DeviceTest::SetUp();
        rtDeviceProp p{};
        ASSERT_RT_OK(rtGetDeviceProperties(&p, device()));
        cpu_ = std::string(p.backend) == "cpu";
    }
    bool cpu_ = false;
};

TEST_P(Ipc, ChildWritesThroughTheOpenedPointerAndTheParentSeesIt) {
    if (!cpu_) GTEST_SKIP() << "IPC handles are a cpu-device feature (cuda: RT_ERROR_NOT_SUPPORTED, tested below)";
    DevBuf buf(kBytes);
    ASSERT_RT_OK(rtMemset(buf.get(), 0, kBytes));
    rtIpcMemHandle_t h{};
    ASSERT_RT_OK(rtIpcGetMemHandle(&h, buf.get()));
    Child child("write", device(), {"RT_TEST_IPC_MEM=" + to_hex(h)});
    ASSERT_TRUE(child.started());
    ASSERT_EQ(child.wait(), 0) << child.stderr_text();
    std::vector<unsigned char> got(kBytes);
    ASSERT_RT_OK(rtMemcpy(got.data(), buf.get(), kBytes, RT_MEMCPY_DEVICE_TO_HOST));
    auto want = pattern(kBytes, 7);
    EXPECT_EQ(first_mismatch(got.data(), want.data(), kBytes), -1);
}

TEST_P(Ipc, ParentsKernelResultsAreSeenAndScaledByTheChild) {
    if (!cpu_) GTEST_SKIP() << "cpu only";
    const size_t n = kBytes / sizeof(float);
    std::vector<float> host(n);
    for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 1000);
    DevBuf buf(kBytes);
    ASSERT_RT_OK(rtMemcpy(buf.get(), host.data(), kBytes, RT_MEMCPY_HOST_TO_DEVICE));
    rtModule_t m = nullptr;
    rtFunction_t f = nullptr;
    ASSERT_RT_OK(rtModuleLoadSource(&m, kSource, nullptr));
    ASSERT_RT_OK(rtModuleGetFunction(&f, m, "scale"));
    float* x = reinterpret_cast<float*>(buf.get());
    float two = 2.0f;
    uint32_t count = static_cast<uint32_t>(n);
    void* args[] = {&x, &two, &count};
    ASSERT_RT_OK(rtLaunchKernel(f, rtDim3{count / 256, 1, 1}, rtDim3{256, 1, 1}, args, 0, nullptr));
    ASSERT_RT_OK(rtStreamSynchronize(nullptr));
    // A pointer inside the allocation exports the whole allocation (the child gets its base).
    const size_t offset = 4096 + 64;
    rtIpcMemHandle_t h{}, h_base{};
    ASSERT_RT_OK(rtIpcGetMemHandle(&h, buf.get() + offset));
    ASSERT_RT_OK(rtIpcGetMemHandle(&h_base, buf.get()));
    EXPECT_EQ(std::memcmp(&h, &h_base, sizeof h), 0);
    Child child("read-and-scale", device(),
                {"RT_TEST_IPC_MEM=" + to_hex(h), "RT_TEST_IPC_OFFSET=" + std::to_string(offset)});
    ASSERT_TRUE(child.started());
    ASSERT_EQ(child.wait(), 0) << child.stderr_text();
    std::vector<float> got(n);
    ASSERT_RT_OK(rtMemcpy(got.data(), buf.get(), kBytes, RT_MEMCPY_DEVICE_TO_HOST));
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], 6.0f * static_cast<float>(i % 1000)) << "element " << i;
    EXPECT_RT_OK(rtModuleUnload(m));
}

TEST_P(Ipc, ParentsStreamWaitsForTheChildsRecord) {
    if (!cpu_) GTEST_SKIP() << "cpu only";
    DevBuf buf(kBytes);
    ASSERT_RT_OK(rtMemset(buf.get(), 0, kBytes));
    rtEvent_t e = nullptr;
    ASSERT_RT_OK(rtEventCreateWithFlags(&e, RT_EVENT_INTERPROCESS | RT_EVENT_DISABLE_TIMING));
    EXPECT_RT_OK(rtEventQuery(e));  // never recorded: complete
    rtIpcMemHandle_t h{};
    rtIpcEventHandle_t he{};
    ASSERT_RT_OK(rtIpcGetMemHandle(&h, buf.get()));
    ASSERT_RT_OK(rtIpcGetEventHandle(&he, e));
    Child child("record", device(), {"RT_TEST_IPC_MEM=" + to_hex(h), "RT_TEST_IPC_EVENT=" + to_hex(he)});
    ASSERT_TRUE(child.started());
    ASSERT_EQ(read_byte(child.from_child(), kLimitMs), 'R') << child.stderr_text();
    // The child recorded behind its gate: the record is pending here too.
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtEventQuery(e));
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreateWithFlags(&s, RT_STREAM_NON_BLOCKING));
    ASSERT_RT_OK(rtStreamWaitEvent(s, e));
    std::vector<unsigned char> got(kBytes, 0);
    ASSERT_RT_OK(rtMemcpyAsync(got.data(), buf.get(), kBytes, RT_MEMCPY_DEVICE_TO_HOST, s));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtStreamQuery(s));
    write_byte(child.to_child(), 'G');  // open the child's gate
    ASSERT_RT_OK(rtStreamSynchronizeWithTimeout(s, kLimitMs));
    for (size_t i = 0; i < kBytes; i += 4096) ASSERT_EQ(got[i], 0x5a) << "byte " << i;
    EXPECT_RT_OK(rtEventSynchronizeWithTimeout(e, kLimitMs));
    EXPECT_EQ(child.wait(), 0) << child.stderr_text();
    EXPECT_RT_OK(rtStreamDestroy(s));
    EXPECT_RT_OK(rtEventDestroy(e));
}

TEST_P(Ipc, ChildsStreamWaitsForTheParentsRecord) {
    if (!cpu_) GTEST_SKIP() << "cpu only";
    DevBuf buf(kBytes);
    ASSERT_RT_OK(rtMemset(buf.get(), 0, kBytes));
    rtEvent_t e = nullptr;
    ASSERT_RT_OK(rtEventCreateWithFlags(&e, RT_EVENT_INTERPROCESS | RT_EVENT_DISABLE_TIMING | RT_EVENT_BLOCKING_SYNC));
    rtStream_t s = nullptr;
    ASSERT_RT_OK(rtStreamCreateWithFlags(&s, RT_STREAM_NON_BLOCKING));
    Gate gate;
    ASSERT_RT_OK(gate.launch(s));
    ASSERT_RT_OK(rtMemsetAsync(buf.get(), 0x33, kBytes, s));
    ASSERT_RT_OK(rtEventRecord(e, s));
    rtIpcMemHandle_t h{};
    rtIpcEventHandle_t he{};
    ASSERT_RT_OK(rtIpcGetMemHandle(&h, buf.get()));
    ASSERT_RT_OK(rtIpcGetEventHandle(&he, e));
    Child child("wait", device(), {"RT_TEST_IPC_MEM=" + to_hex(h), "RT_TEST_IPC_EVENT=" + to_hex(he)});
    ASSERT_TRUE(child.started());
    const int got = read_byte(child.from_child(), kLimitMs);
    gate.open();
    ASSERT_EQ(got, 'W') << child.stderr_text();
    EXPECT_EQ(child.wait(), 0) << child.stderr_text();
    EXPECT_RT_OK(rtStreamSynchronize(s));
    EXPECT_RT_OK(rtStreamDestroy(s));
    EXPECT_RT_OK(rtEventDestroy(e));
}

TEST_P(Ipc, HandlesOfFreedMemoryAndDestroyedEventsAreRefused) {
    if (!cpu_) GTEST_SKIP() << "cpu only";
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, kBytes));
    rtEvent_t e = nullptr;
    ASSERT_RT_OK(rtEventCreateWithFlags(&e, RT_EVENT_INTERPROCESS | RT_EVENT_DISABLE_TIMING));
    rtIpcMemHandle_t h{};
    rtIpcEventHandle_t he{};
    ASSERT_RT_OK(rtIpcGetMemHandle(&h, p));
    ASSERT_RT_OK(rtIpcGetEventHandle(&he, e));
    ASSERT_RT_OK(rtFree(p));
    ASSERT_RT_OK(rtEventDestroy(e));
    ASSERT_RT_OK(rtDeviceSynchronize());  // the free is done (rtFree defers it behind queued work)
    Child child("open-stale", device(), {"RT_TEST_IPC_MEM=" + to_hex(h), "RT_TEST_IPC_EVENT=" + to_hex(he)});
    ASSERT_TRUE(child.started());
    EXPECT_EQ(child.wait(), 0) << child.stderr_text();
}

TEST_P(Ipc, MemoryIsShareableOnlyWhenTheRuntimeIsStartedSo) {
    if (!cpu_) GTEST_SKIP() << "cpu only";
    // This process runs with RUNTIME_CPU_IPC_MEMORY=1 (tests/CMakeLists.txt); a process without it refuses to export,
    // saying how to turn it on.
    Child child("export-unshareable", device(), {"RUNTIME_CPU_IPC_MEMORY=0"});
    ASSERT_TRUE(child.started());
    EXPECT_EQ(child.wait(), 0) << child.stderr_text();
}

TEST_P(Ipc, HandlesOfAnExitedProcessAreRefused) {
    if (!cpu_) GTEST_SKIP() << "cpu only";
    Child child("export-and-exit", device(), {});
    ASSERT_TRUE(child.started());
    ASSERT_EQ(child.wait(), 0) << child.stderr_text();
    rtIpcMemHandle_t h{};
    rtIpcEventHandle_t he{};
    ASSERT_EQ(::read(child.from_child(), &h, sizeof h), static_cast<ssize_t>(sizeof h));
    ASSERT_EQ(::read(child.from_child(), &he, sizeof he), static_cast<ssize_t>(sizeof he));
    void* p = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcOpenMemHandle(&p, h, 0));
    EXPECT_TRUE(contains(last_message(), "has exited"));
    rtEvent_t e = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcOpenEventHandle(&e, he));
    EXPECT_TRUE(contains(last_message(), "has exited"));
}

TEST_P(Ipc, BadInputsAreRefusedNamingWhatWasExpected) {
    if (!cpu_) {
        DevBuf buf(kBytes);
        rtIpcMemHandle_t h{};
        EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtIpcGetMemHandle(&h, buf.get()));
        rtEvent_t e = nullptr;
        EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED,
                        rtEventCreateWithFlags(&e, RT_EVENT_INTERPROCESS | RT_EVENT_DISABLE_TIMING));
        return;
    }
    DevBuf buf(kBytes);
    rtIpcMemHandle_t h{};
    // Null arguments.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcGetMemHandle(nullptr, buf.get()));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcGetMemHandle(&h, nullptr));
    EXPECT_TRUE(contains(last_message(), "NULL"));
    ASSERT_RT_OK(rtIpcGetMemHandle(&h, buf.get()));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcOpenMemHandle(nullptr, h, 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcCloseMemHandle(nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcGetEventHandle(nullptr, nullptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcOpenEventHandle(nullptr, rtIpcEventHandle_t{}));
    // Opened by the process that exported it: refused as CUDA does.
    void* p = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcOpenMemHandle(&p, h, 0));
    EXPECT_TRUE(contains(last_message(), "this process"));
    // Unknown flags.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcOpenMemHandle(&p, h, 0x10));
    EXPECT_TRUE(contains(last_message(), "RT_IPC_MEM_LAZY_ENABLE_PEER_ACCESS"));
    // Bytes that are no handle.
    rtIpcMemHandle_t junk{};
    std::memset(junk.reserved, 0x7f, sizeof junk.reserved);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcOpenMemHandle(&p, junk, 0));
    EXPECT_TRUE(contains(last_message(), "not an IPC handle"));
    rtIpcEventHandle_t junk_event{};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcOpenEventHandle(nullptr, junk_event));
    rtEvent_t e = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcOpenEventHandle(&e, junk_event));
    // A memory handle given as an event handle.
    rtIpcEventHandle_t as_event{};
    std::memcpy(&as_event, &h, sizeof h);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcOpenEventHandle(&e, as_event));
    EXPECT_TRUE(contains(last_message(), "memory handle"));
    // Closing what was not opened: rtMalloc memory, host memory, a pointer inside nothing.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcCloseMemHandle(buf.get()));
    EXPECT_TRUE(contains(last_message(), "rtIpcOpenMemHandle"));
    int local = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcCloseMemHandle(&local));
    // Memory that cannot be exported: host memory, small allocations, pooled memory.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcGetMemHandle(&h, &local));
    EXPECT_TRUE(contains(last_message(), "rtMalloc"));
    DevBuf small(4096);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcGetMemHandle(&h, small.get()));
    EXPECT_TRUE(contains(last_message(), "at least"));
    ASSERT_RT_OK(rtEnableMemoryReuse(1));  // the device's pool serves rtMalloc now
    void* pooled = nullptr;
    ASSERT_RT_OK(rtMalloc(&pooled, kBytes));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcGetMemHandle(&h, pooled));
    EXPECT_TRUE(contains(last_message(), "pool"));
    EXPECT_RT_OK(rtFree(pooled));
    ASSERT_RT_OK(rtEnableMemoryReuse(0));
    ASSERT_RT_OK(rtEnablePoolAllocator(0, 0, 0));  // no pool: rtMalloc is direct again
    // Events: without the interprocess flag; interprocess without DISABLE_TIMING; unknown flags.
    rtIpcEventHandle_t he{};
    ASSERT_RT_OK(rtEventCreateWithFlags(&e, RT_EVENT_DISABLE_TIMING));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcGetEventHandle(&he, e));
    EXPECT_TRUE(contains(last_message(), "RT_EVENT_INTERPROCESS"));
    EXPECT_RT_OK(rtEventDestroy(e));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEventCreateWithFlags(&e, RT_EVENT_INTERPROCESS));
    EXPECT_TRUE(contains(last_message(), "RT_EVENT_DISABLE_TIMING"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtEventCreateWithFlags(&e, 0x100));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtIpcGetEventHandle(&he, garbage_handle<rtEvent_t>()));
    // The own event handle, opened here.
    ASSERT_RT_OK(rtEventCreateWithFlags(&e, RT_EVENT_INTERPROCESS | RT_EVENT_DISABLE_TIMING));
    ASSERT_RT_OK(rtIpcGetEventHandle(&he, e));
    rtEvent_t again = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtIpcOpenEventHandle(&again, he));
    EXPECT_TRUE(contains(last_message(), "this process"));
    float ms = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtEventElapsedTime(&ms, e, e));
    // A graph cannot record or wait for an interprocess event.
    rtGraph_t g = nullptr;
    rtGraphNode_t node = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&g, 0));
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtGraphAddEventRecordNode(&node, g, nullptr, 0, e));
    EXPECT_TRUE(contains(last_message(), "RT_EVENT_INTERPROCESS"));
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtGraphAddEventWaitNode(&node, g, nullptr, 0, e));
    EXPECT_RT_OK(rtGraphDestroy(g));
    EXPECT_RT_OK(rtEventDestroy(e));
}

TEST_P(Ipc, InterprocessEventsWorkWithinOneProcessToo) {
    if (!cpu_) GTEST_SKIP() << "cpu only";
    rtEvent_t e = nullptr;
    ASSERT_RT_OK(rtEventCreateWithFlags(&e, RT_EVENT_INTERPROCESS | RT_EVENT_DISABLE_TIMING));
    rtStream_t a = nullptr, b = nullptr;
    ASSERT_RT_OK(rtStreamCreateWithFlags(&a, RT_STREAM_NON_BLOCKING));
    ASSERT_RT_OK(rtStreamCreateWithFlags(&b, RT_STREAM_NON_BLOCKING));
    DevBuf buf(kBytes);
    Gate gate;
    ASSERT_RT_OK(gate.launch(a));
    ASSERT_RT_OK(rtMemsetAsync(buf.get(), 0x44, kBytes, a));
    ASSERT_RT_OK(rtEventRecord(e, a));
    EXPECT_RT_ERROR(RT_ERROR_NOT_READY, rtEventQuery(e));
    ASSERT_RT_OK(rtStreamWaitEvent(b, e));
    std::vector<unsigned char> got(kBytes, 0);
    ASSERT_RT_OK(rtMemcpyAsync(got.data(), buf.get(), kBytes, RT_MEMCPY_DEVICE_TO_HOST, b));
    EXPECT_RT_ERROR(RT_ERROR_TIMEOUT, rtEventSynchronizeWithTimeout(e, 0));
    gate.open();
    ASSERT_RT_OK(rtStreamSynchronizeWithTimeout(b, kLimitMs));
    EXPECT_EQ(got[0], 0x44);
    EXPECT_EQ(got[kBytes - 1], 0x44);
    EXPECT_RT_OK(rtEventSynchronize(e));
    EXPECT_RT_OK(rtEventQuery(e));
    EXPECT_RT_OK(rtStreamDestroy(a));
    EXPECT_RT_OK(rtStreamDestroy(b));
    EXPECT_RT_OK(rtEventDestroy(e));
}

TEST_P(Ipc, TheCppFaceSharesMemoryAndEvents) {
    if (!cpu_) GTEST_SKIP() << "cpu only";
    DevBuf buf(kBytes);
    ASSERT_RT_OK(rtMemset(buf.get(), 0, kBytes));
    runtime::EventOptions options;
    options.enable_timing = false;
    options.interprocess = true;
    runtime::Event e(options);
    const rtIpcEventHandle_t he = e.ipc_handle();
    try {
        (void)runtime::Event::from_ipc_handle(he);
        ADD_FAILURE() << "opening the own event handle did not throw";
    } catch (const runtime::Error& error) {
        EXPECT_EQ(error.code(), RT_ERROR_INVALID_VALUE);
    }
    Child child("cpp", device(), {"RT_TEST_IPC_MEM=" + to_hex(runtime::ipc_mem_handle(buf.get())),
                                  "RT_TEST_IPC_EVENT=" + to_hex(he)});
    ASSERT_TRUE(child.started());
    ASSERT_EQ(child.wait(), 0) << child.stderr_text();
    EXPECT_TRUE(e.query());  // the child's record completed
    std::vector<unsigned char> got(kBytes);
    ASSERT_RT_OK(rtMemcpy(got.data(), buf.get(), kBytes, RT_MEMCPY_DEVICE_TO_HOST));
    EXPECT_EQ(got[0], 0x11);
    EXPECT_EQ(got[kBytes - 1], 0x11);
}

RT_INSTANTIATE_DEVICE_TEST(Ipc);

}  // namespace
