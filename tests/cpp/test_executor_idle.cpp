// The cpu executor parks when idle: streams alive and nothing queued cost no CPU time.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <thread>
#include <vector>

#include "runtime/runtime.h"

namespace {

double process_cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

void touch(void*) {}

TEST(ExecutorIdle, ParksWithinAMillisecondAndBurnsNoCpu) {
    std::vector<rtStream_t> streams(4);
    for (auto& s : streams) ASSERT_EQ(rtStreamCreate(&s), RT_SUCCESS);
    // Wake every executor with work on every stream, then let it drain.
    for (int round = 0; round < 100; ++round)
        for (auto s : streams) ASSERT_EQ(rtLaunchHostFunc(s, touch, nullptr), RT_SUCCESS);
    ASSERT_EQ(rtDeviceSynchronize(), RT_SUCCESS);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // spin budget is 50 µs; 5 ms is ample

    double cpu0 = process_cpu_seconds();
    auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double cpu = process_cpu_seconds() - cpu0;
    // A spinning executor would burn ~wall seconds per thread; parked threads burn ~0.
    EXPECT_LT(cpu, 0.05 * wall) << "executors used " << cpu << " s of CPU in " << wall << " s of idle time";

    for (auto s : streams) ASSERT_EQ(rtStreamDestroy(s), RT_SUCCESS);
}

}  // namespace
