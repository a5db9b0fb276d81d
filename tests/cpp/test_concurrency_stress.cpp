// test_concurrency_stress.cpp — host threads (1,2,4,8) × streams × events × host functions × async copies, checking data and order, with timeouts.
#include "test_util.hpp"

#include <stdlib.h>

#include <filesystem>
#include <mutex>
#include <thread>

namespace {

using namespace std::chrono_literals;

constexpr int kStreamsPerThread = 4;
constexpr int kIterations = 80;

/// Everything the host functions of one ring slot record: iteration numbers in execution order.
struct Log {
    std::mutex m;
    std::vector<int> seen;
};
struct LogCall {
    Log* log;
    int iteration;
};
void log_iteration(void* p) {
    auto* c = static_cast<LogCall*>(p);
    std::lock_guard<std::mutex> lock(c->log->m);
    c->log->seen.push_back(c->iteration);
}

struct FailCall {
    std::string message;
};
void fail_host_fn(void* p) { (void)rtHostFuncSetError(RT_ERROR_LAUNCH_FAILED, static_cast<FailCall*>(p)->message.c_str()); }

size_t bytes_for(int thread) { return 16 * 1024 + static_cast<size_t>(thread) * 7; }

/// One worker: a ring of streams where slot k uploads on stream k and is moved (D2D) and downloaded
/// on stream k+1 after an event; stream k re-uses its upload buffer only after an event that says
/// the move finished. Any missing or misplaced wait corrupts data or the per-slot iteration order.
/// Returns an empty string on success, else what went wrong.
std::string worker(int thread, int device, bool inject_error) {
    auto fail = [&](const std::string& what, rtError_t e) {
        return "thread " + std::to_string(thread) + ": " + what + " -> " + rtGetErrorName(e) + " (" +
               rtGetLastErrorMessage() + ")";
    };
#define W_CHECK(expr)                                         \
    do {                                                      \
        rtError_t e_ = (expr);                                \
        if (e_ != RT_SUCCESS) return fail(#expr, e_);         \
    } while (0)

    W_CHECK(rtSetDevice(device));
    const size_t n = bytes_for(thread);
    constexpr int S = kStreamsPerThread;
    rtStream_t streams[S] = {};
    rtEvent_t uploaded[S] = {}, moved[S] = {};
    void* up_buf[S] = {};
    void* mid_buf[S] = {};
    for (int k = 0; k < S; ++k) {
        W_CHECK(rtStreamCreateWithFlags(&streams[k], k % 2 ? RT_STREAM_NON_BLOCKING : RT_STREAM_DEFAULT));
        W_CHECK(rtEventCreateWithFlags(&uploaded[k], RT_EVENT_DISABLE_TIMING));
        W_CHECK(rtEventCreate(&moved[k]));
        W_CHECK(rtMalloc(&up_buf[k], n));
        W_CHECK(rtMalloc(&mid_buf[k], n));
    }
    std::vector<std::vector<unsigned char>> in(static_cast<size_t>(kIterations * S)), out(in.size());
    std::vector<Log> logs(S);
    std::vector<LogCall> calls(in.size());
    FailCall failure{"stress-failure-of-thread-" + std::to_string(thread)};
    for (size_t i = 0; i < in.size(); ++i) {
        in[i] = rt_test::pattern(n, static_cast<uint32_t>(thread * 100003 + static_cast<int>(i)));
        out[i].assign(n, 0);
    }

    for (int it = 0; it < kIterations; ++it) {
        for (int k = 0; k < S; ++k) {
            size_t slot = static_cast<size_t>(it * S + k);
            rtStream_t producer = streams[k], consumer = streams[(k + 1) % S];
            // Do not overwrite up_buf[k] before the previous iteration's move out of it is done.
            W_CHECK(rtStreamWaitEvent(producer, moved[k]));
            W_CHECK(rtMemcpyAsync(up_buf[k], in[slot].data(), n, RT_MEMCPY_HOST_TO_DEVICE, producer));
            W_CHECK(rtEventRecord(uploaded[k], producer));
            W_CHECK(rtStreamWaitEvent(consumer, uploaded[k]));
            W_CHECK(rtMemcpyAsync(mid_buf[k], up_buf[k], n, RT_MEMCPY_DEVICE_TO_DEVICE, consumer));
            W_CHECK(rtEventRecord(moved[k], consumer));
            calls[slot] = {&logs[static_cast<size_t>(k)], it};
            W_CHECK(rtLaunchHostFunc(consumer, log_iteration, &calls[slot]));
            // Through a scratch buffer freed at once, while the two copies that use it are still queued: the
            // timeline returns it only after them (a free that did not wait would corrupt or crash them).
            void* scratch = nullptr;
            W_CHECK(rtMalloc(&scratch, n));
            W_CHECK(rtMemcpyAsync(scratch, mid_buf[k], n, RT_MEMCPY_DEVICE_TO_DEVICE, consumer));
            W_CHECK(rtMemcpyAsync(out[slot].data(), scratch, n, RT_MEMCPY_DEVICE_TO_HOST, consumer));
            W_CHECK(rtFree(scratch));
        }
        if (inject_error && it == kIterations / 2) W_CHECK(rtLaunchHostFunc(streams[0], fail_host_fn, &failure));
        // Polling while work is in flight is allowed; a thread that injects a failure does not poll: a query
        // reports (and clears) a stream's failure, after which it runs work again (the exact counts below
        // would depend on when).
        if (it % 10 == 0 && !inject_error) {
            rtError_t q = rtStreamQuery(streams[S - 1]);
            if (q != RT_SUCCESS && q != RT_ERROR_NOT_READY && q != RT_ERROR_LAUNCH_FAILED) return fail("rtStreamQuery", q);
            // A failure travels along its own thread's ring through the events, never to another thread's streams.
            if (q == RT_ERROR_LAUNCH_FAILED)
                return fail("rtStreamQuery reported an error of another thread's stream", q);
        }
    }

    for (int k = 0; k < S; ++k) {
        rtError_t e = rtStreamSynchronize(streams[k]);
        if (inject_error && k == 0) {
            if (e != RT_ERROR_LAUNCH_FAILED) return fail("synchronize of the failed stream", e);
            if (std::string(rtGetLastErrorMessage()).find(failure.message) == std::string::npos)
                return "thread " + std::to_string(thread) + ": message lacks \"" + failure.message + "\": " +
                       rtGetLastErrorMessage();
            W_CHECK(rtStreamSynchronize(streams[k]));  // reported once, then clean
        } else if (inject_error && e == RT_ERROR_LAUNCH_FAILED) {
            // A consumer of the failed stream fails too, saying so.
            if (std::string(rtGetLastErrorMessage()).find("dependency failed") == std::string::npos ||
                std::string(rtGetLastErrorMessage()).find(failure.message) == std::string::npos)
                return "thread " + std::to_string(thread) + ": stream " + std::to_string(k) +
                       " failed without naming the dependency: " + rtGetLastErrorMessage();
            W_CHECK(rtStreamSynchronize(streams[k]));
        } else if (e != RT_SUCCESS) {
            return fail("rtStreamSynchronize(stream " + std::to_string(k) + ")", e);
        }
    }
    // With a failure injected after iteration kIterations/2 on streams[0], that iteration and those before it
    // are exact; in every later iteration the failure reaches each stream of the ring (through the events it
    // records) before that stream's host function and copy out, so all of those are skipped.
    const size_t ran = inject_error ? static_cast<size_t>(kIterations / 2 + 1) : static_cast<size_t>(kIterations);
    const size_t checked = ran * S;
    for (size_t i = checked; i < in.size(); ++i)
        if (rt_test::first_mismatch(out[i].data(), in[i].data(), n) == -1)
            return "thread " + std::to_string(thread) + ": slot " + std::to_string(i) + " was copied out after the failure";
    for (size_t i = 0; i < checked; ++i) {
        long long bad = rt_test::first_mismatch(out[i].data(), in[i].data(), n);
        if (bad >= 0)
            return "thread " + std::to_string(thread) + ": slot " + std::to_string(i) + " differs at byte " +
                   std::to_string(bad);
    }
    for (int k = 0; k < S; ++k) {
        const auto& seen = logs[static_cast<size_t>(k)].seen;
        if (seen.size() != ran)
            return "thread " + std::to_string(thread) + ": ring slot " + std::to_string(k) + " ran " +
                   std::to_string(seen.size()) + " host functions (expected " + std::to_string(ran) + ")";
        for (int it = 0; it < static_cast<int>(seen.size()); ++it)
            if (seen[static_cast<size_t>(it)] != it)
                return "thread " + std::to_string(thread) + ": ring slot " + std::to_string(k) +
                       " host functions out of order at " + std::to_string(it);
    }
    for (int k = 0; k < S; ++k) {
        W_CHECK(rtStreamDestroy(streams[k]));
        W_CHECK(rtEventDestroy(uploaded[k]));
        W_CHECK(rtEventDestroy(moved[k]));
        W_CHECK(rtFree(up_buf[k]));
        W_CHECK(rtFree(mid_buf[k]));
    }
#undef W_CHECK
    return {};
}

/// Runs `body(thread_index)` on `threads` threads started together; collects their failure strings.
std::vector<std::string> run_threads(int threads, const std::function<std::string(int)>& body) {
    std::vector<std::string> results(static_cast<size_t>(threads));
    std::atomic<int> ready{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            ++ready;
            while (ready.load() < threads) std::this_thread::yield();  // start together: maximise overlap
            results[static_cast<size_t>(t)] = body(t);
        });
    for (auto& th : pool) th.join();
    std::vector<std::string> failures;
    for (auto& r : results)
        if (!r.empty()) failures.push_back(r);
    return failures;
}

int device_count() {
    int n = 1;
    (void)rtGetDeviceCount(&n);
    return n < 1 ? 1 : n;
}

class Stress : public ::testing::TestWithParam<int> {
protected:
    // A deadlock anywhere below kills the process with a message instead of hanging CTest.
    rt_test::Watchdog watchdog_{90s, "concurrency stress"};  // below the CTest TIMEOUT (120 s)
};

TEST_P(Stress, StreamRingsWithEventsCopiesAndHostFunctions) {
    int devices = device_count();
    auto failures = run_threads(GetParam(), [devices](int t) { return worker(t, t % devices, false); });
    for (auto& f : failures) ADD_FAILURE() << f;
}

TEST_P(Stress, AsyncErrorsStayOnTheirStreams) {
    int devices = device_count();
    // Odd threads inject a host-function failure; even threads must see clean streams throughout.
    auto failures = run_threads(GetParam(), [devices](int t) { return worker(t, t % devices, t % 2 == 1); });
    for (auto& f : failures) ADD_FAILURE() << f;
}

TEST_P(Stress, SharedStreamKeepsEachSubmittersOrder) {
    // All threads submit to one stream; work from one thread must run in that thread's order.
    constexpr int kPerThread = 2000;
    const int threads = GetParam();
    rtStream_t shared = nullptr;
    ASSERT_RT_OK(rtStreamCreate(&shared));
    struct Entry {
        std::vector<int>* log;
        int value;
    };
    std::vector<std::vector<int>> logs(static_cast<size_t>(threads));
    std::vector<std::vector<Entry>> entries(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t) {
        auto& e = entries[static_cast<size_t>(t)];
        for (int i = 0; i < kPerThread; ++i) e.push_back({&logs[static_cast<size_t>(t)], i});
    }
    // Each log is written only by host functions of the one stream: in order, never concurrently.
    auto push = [](void* p) {
        auto* e = static_cast<Entry*>(p);
        e->log->push_back(e->value);
    };
    auto failures = run_threads(threads, [&](int t) -> std::string {
        for (int i = 0; i < kPerThread; ++i) {
            rtError_t r = rtLaunchHostFunc(shared, push, &entries[static_cast<size_t>(t)][static_cast<size_t>(i)]);
            if (r != RT_SUCCESS) return std::string("rtLaunchHostFunc: ") + rtGetErrorName(r);
        }
        return {};
    });
    for (auto& f : failures) ADD_FAILURE() << f;
    ASSERT_RT_OK(rtStreamSynchronize(shared));
    for (int t = 0; t < threads; ++t) {
        const auto& log = logs[static_cast<size_t>(t)];
        ASSERT_EQ(log.size(), static_cast<size_t>(kPerThread)) << "thread " << t;
        for (int i = 0; i < kPerThread; ++i) ASSERT_EQ(log[static_cast<size_t>(i)], i) << "thread " << t;
    }
    ASSERT_RT_OK(rtStreamDestroy(shared));
}

TEST_P(Stress, CrossThreadEventsOrderOtherThreadsStreams) {
    // Thread u repeatedly marks round r done (in a host function on its stream), records its event
    // and then publishes r on the host. Thread t (downstream of u) reads the published round R,
    // waits on u's event and queues a check: when the check runs, u's progress must be >= R
    // (the wait saw the record of round R or a later one).
    const int threads = GetParam();
    constexpr int kRounds = 60;
    std::vector<rtEvent_t> events(static_cast<size_t>(threads));
    std::vector<std::atomic<int>> progress(static_cast<size_t>(threads));
    std::vector<std::atomic<int>> published(static_cast<size_t>(threads));
    for (auto& e : events) ASSERT_RT_OK(rtEventCreate(&e));
    for (auto& p : progress) p = -1;
    for (auto& p : published) p = -1;
    std::mutex violations_m;
    std::vector<std::string> violations;
    struct Mark {
        std::atomic<int>* progress;
        int round;
    };
    struct Check {
        std::atomic<int>* upstream_progress;
        int expected_at_least;
        std::mutex* m;
        std::vector<std::string>* violations;
        int thread;
        int round;
    };
    std::vector<std::vector<Mark>> marks(static_cast<size_t>(threads), std::vector<Mark>(kRounds));
    std::vector<std::vector<Check>> checks(static_cast<size_t>(threads), std::vector<Check>(kRounds));
    auto failures = run_threads(threads, [&](int t) -> std::string {
        rtStream_t s = nullptr;
        if (rtStreamCreate(&s) != RT_SUCCESS) return "rtStreamCreate";
        const auto me = static_cast<size_t>(t);
        const auto up = static_cast<size_t>((t + threads - 1) % threads);
        for (int r = 0; r < kRounds; ++r) {
            auto& mark = marks[me][static_cast<size_t>(r)];
            mark = {&progress[me], r};
            rtError_t e = rtLaunchHostFunc(s, [](void* p) {
                auto* m = static_cast<Mark*>(p);
                std::this_thread::sleep_for(std::chrono::microseconds(200));
                m->progress->store(m->round);
            }, &mark);
            if (e != RT_SUCCESS) return std::string("rtLaunchHostFunc(mark): ") + rtGetErrorName(e);
            if ((e = rtEventRecord(events[me], s)) != RT_SUCCESS) return std::string("rtEventRecord: ") + rtGetErrorName(e);
            published[me].store(r);
            // With one thread, upstream is this thread: the check is then plain in-order execution.
            int expected = published[up].load();
            if ((e = rtStreamWaitEvent(s, events[up])) != RT_SUCCESS) return std::string("rtStreamWaitEvent: ") + rtGetErrorName(e);
            auto& check = checks[me][static_cast<size_t>(r)];
            check = {&progress[up], expected, &violations_m, &violations, t, r};
            e = rtLaunchHostFunc(s, [](void* p) {
                auto* c = static_cast<Check*>(p);
                int got = c->upstream_progress->load();
                if (got < c->expected_at_least) {
                    std::lock_guard<std::mutex> lock(*c->m);
                    c->violations->push_back("thread " + std::to_string(c->thread) + " round " + std::to_string(c->round) +
                                             ": ran past a wait for upstream round " + std::to_string(c->expected_at_least) +
                                             " while upstream had only finished round " + std::to_string(got));
                }
            }, &check);
            if (e != RT_SUCCESS) return std::string("rtLaunchHostFunc(check): ") + rtGetErrorName(e);
        }
        rtError_t e = rtStreamSynchronize(s);
        if (e != RT_SUCCESS) return std::string("rtStreamSynchronize: ") + rtGetErrorName(e);
        if ((e = rtStreamDestroy(s)) != RT_SUCCESS) return std::string("rtStreamDestroy: ") + rtGetErrorName(e);
        return {};
    });
    for (auto& f : failures) ADD_FAILURE() << f;
    for (auto& v : violations) ADD_FAILURE() << v;
    for (int t = 0; t < threads; ++t) EXPECT_EQ(progress[static_cast<size_t>(t)].load(), kRounds - 1);
    for (auto& e : events) EXPECT_RT_OK(rtEventQuery(e));
    for (auto& e : events) EXPECT_RT_OK(rtEventDestroy(e));
}

TEST_P(Stress, HandleChurnWhileWorkIsInFlight) {
    // Creating/destroying streams and events and allocating/freeing memory on some threads while
    // others run work: the handle tables and the registry must stay consistent.
    const int threads = GetParam();
    std::atomic<bool> stop{false};
    auto failures = run_threads(threads + 1, [&](int t) -> std::string {
        if (t == threads) {  // the churner
            for (int i = 0; i < 200; ++i) {
                rtStream_t s = nullptr;
                rtEvent_t e = nullptr;
                void* p = nullptr;
                if (rtStreamCreate(&s) != RT_SUCCESS) return "churn: rtStreamCreate";
                if (rtEventCreate(&e) != RT_SUCCESS) return "churn: rtEventCreate";
                if (rtMalloc(&p, 4096) != RT_SUCCESS) return "churn: rtMalloc";
                if (rtEventRecord(e, s) != RT_SUCCESS) return "churn: rtEventRecord";
                if (rtStreamDestroy(s) != RT_SUCCESS) return "churn: rtStreamDestroy";
                if (rtEventDestroy(e) != RT_SUCCESS) return "churn: rtEventDestroy";
                if (rtFree(p) != RT_SUCCESS) return "churn: rtFree";
                // A destroyed handle must be rejected, not crash, even while others create handles.
                rtError_t r = rtStreamQuery(s);
                if (r != RT_ERROR_INVALID_HANDLE && r != RT_SUCCESS) return std::string("churn: stale query ") + rtGetErrorName(r);
            }
            stop = true;
            return {};
        }
        rtStream_t s = nullptr;
        if (rtStreamCreate(&s) != RT_SUCCESS) return "rtStreamCreate";
        std::vector<unsigned char> a = rt_test::pattern(4096, static_cast<uint32_t>(t)), b(4096);
        void* d = nullptr;
        if (rtMalloc(&d, 4096) != RT_SUCCESS) return "rtMalloc";
        int rounds = 0;
        while (!stop.load() || rounds < 10) {
            std::fill(b.begin(), b.end(), 0);
            if (rtMemcpyAsync(d, a.data(), 4096, RT_MEMCPY_HOST_TO_DEVICE, s) != RT_SUCCESS) return "H2D";
            if (rtMemcpyAsync(b.data(), d, 4096, RT_MEMCPY_DEVICE_TO_HOST, s) != RT_SUCCESS) return "D2H";
            if (rtStreamSynchronize(s) != RT_SUCCESS) return "sync";
            if (b != a) return "data mismatch in round " + std::to_string(rounds);
            ++rounds;
        }
        if (rtFree(d) != RT_SUCCESS) return "rtFree";
        if (rtStreamDestroy(s) != RT_SUCCESS) return "rtStreamDestroy";
        return {};
    });
    for (auto& f : failures) ADD_FAILURE() << f;
}

TEST_P(Stress, LaunchesWhileTheirStreamsAndModulesAreDestroyed) {
    // Launches resolve handles without a lock or reference count, so destroying a stream or unloading a
    // module while other threads launch on it must either refuse the launch or run it, never crash
    // (ThreadSanitizer and AddressSanitizer builds check the borrowed objects' lifetimes).
    const int threads = GetParam();
    std::atomic<rtStream_t> stream{nullptr};
    std::atomic<rtFunction_t> function{nullptr};
    std::atomic<bool> stop{false};
    const char* source = "RT_KERNEL void empty() {}\n";
    char cache[] = "/tmp/rt-test-stress-cache-XXXXXX";  // never the user's kernel cache
    ASSERT_NE(::mkdtemp(cache), nullptr);
    ::setenv("RUNTIME_CACHE_DIR", cache, 1);
    auto failures = run_threads(threads + 1, [&](int t) -> std::string {
        if (t == threads) {  // the churner: a new stream and module every round, the old ones destroyed
            for (int i = 0; i < 100; ++i) {
                rtStream_t s = nullptr;
                rtModule_t m = nullptr;
                rtFunction_t f = nullptr;
                if (rtStreamCreate(&s) != RT_SUCCESS) return "churn: rtStreamCreate";
                if (rtModuleLoadSource(&m, source, nullptr) != RT_SUCCESS) return "churn: rtModuleLoadSource";
                if (rtModuleGetFunction(&f, m, "empty") != RT_SUCCESS) return "churn: rtModuleGetFunction";
                rtStream_t old_s = stream.exchange(s);
                function.store(f);
                std::this_thread::sleep_for(std::chrono::microseconds(200));
                if (old_s && rtStreamDestroy(old_s) != RT_SUCCESS) return "churn: rtStreamDestroy";
                if (rtModuleUnload(m) != RT_SUCCESS) return "churn: rtModuleUnload";
            }
            stop = true;
            if (rtStreamDestroy(stream.exchange(nullptr)) != RT_SUCCESS) return "churn: last rtStreamDestroy";
            return {};
        }
        const rtDim3 one{1, 1, 1};
        long launched = 0;
        while (!stop.load()) {
            rtFunction_t f = function.load();
            rtStream_t s = stream.load();
            if (!f || !s) continue;
            rtError_t e = rtLaunchKernel(f, one, one, nullptr, 0, s);
            if (e == RT_SUCCESS) ++launched;
            else if (e != RT_ERROR_INVALID_HANDLE) return std::string("launch: ") + rtGetErrorName(e);
        }
        (void)launched;
        return {};
    });
    for (auto& f : failures) ADD_FAILURE() << f;
    EXPECT_RT_OK(rtDeviceSynchronize());
    std::error_code ec;
    std::filesystem::remove_all(cache, ec);
}

TEST(StressLarge, SplitCopiesFromTwoThreads) {
    // Copies ≥ 64 MiB are cut into chunks shared by the executors; two at once must not mix chunks
    // up. Not swept over thread counts: 3 × 64 MiB per thread, and ThreadSanitizer time.
    rt_test::Watchdog watchdog{std::chrono::seconds(90), "large split copies"};
    const int threads = 2;
    const size_t n = (64u << 20) + 4099;
    int devices = device_count();
    auto failures = run_threads(threads, [&](int t) -> std::string {
        if (rtSetDevice(t % devices) != RT_SUCCESS) return "rtSetDevice";
        rtStream_t s = nullptr;
        void* d = nullptr;
        if (rtStreamCreate(&s) != RT_SUCCESS) return "rtStreamCreate";
        if (rtMalloc(&d, n) != RT_SUCCESS) return std::string("rtMalloc: ") + rtGetLastErrorMessage();
        std::vector<unsigned char> in(n), out(n, 0);
        // A 65521-byte (prime) tile: cheap to fill even under TSan, and no power-of-two chunk size
        // lines up with it, so swapped or shifted chunks still mismatch.
        const size_t tile = 65521;
        rt_test::fill_pattern(in.data(), tile, static_cast<uint32_t>(7000 + t));
        for (size_t off = tile; off < n; off += tile) std::memcpy(in.data() + off, in.data(), std::min(tile, n - off));
        std::string result;
        if (rtMemcpyAsync(d, in.data(), n, RT_MEMCPY_HOST_TO_DEVICE, s) != RT_SUCCESS ||
            rtMemcpyAsync(out.data(), d, n, RT_MEMCPY_DEVICE_TO_HOST, s) != RT_SUCCESS)
            result = std::string("rtMemcpyAsync: ") + rtGetLastErrorMessage();
        else if (rtStreamSynchronize(s) != RT_SUCCESS)
            result = std::string("rtStreamSynchronize: ") + rtGetLastErrorMessage();
        else if (long long bad = rt_test::first_mismatch(out.data(), in.data(), n); bad >= 0)
            result = "thread " + std::to_string(t) + ": differs at byte " + std::to_string(bad);
        (void)rtFree(d);
        (void)rtStreamDestroy(s);
        return result;
    });
    for (auto& f : failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Threads, Stress, ::testing::Values(1, 2, 4, 8),
                         [](const ::testing::TestParamInfo<int>& i) { return std::to_string(i.param) + "threads"; });

} // namespace
