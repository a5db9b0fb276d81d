// Helpers of the C++ API tests (runtime.hpp): exceptions checked by code and message, bounded polling, devices.
#pragma once

#include <runtime/runtime.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

// Asserts that `stmt` throws runtime::Error with `expected_code` and a "NAME: detail" message.
#define EXPECT_RT_ERROR(stmt, expected_code)                                                       \
    do {                                                                                           \
        try {                                                                                      \
            stmt;                                                                                  \
            ADD_FAILURE() << #stmt " did not throw";                                               \
        } catch (const runtime::Error& e_) {                                                       \
            EXPECT_EQ(e_.code(), expected_code) << e_.what();                                      \
            const std::string prefix_ = std::string(rtGetErrorName(expected_code)) + ": ";         \
            EXPECT_EQ(std::string(e_.what()).rfind(prefix_, 0), 0u) << e_.what();                  \
            EXPECT_GT(std::string(e_.what()).size(), prefix_.size()) << "empty detail";            \
        }                                                                                          \
    } while (0)

namespace rt_cpp_test {

// Polls `pred` until true or 10 s pass (a bounded wait, not a timing assertion).
template <class P> bool eventually(P pred) {
    using namespace std::chrono_literals;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

inline std::vector<int> all_devices() {
    std::vector<int> d(static_cast<std::size_t>(runtime::device_count()));
    std::iota(d.begin(), d.end(), 0);
    return d;
}

}  // namespace rt_cpp_test
