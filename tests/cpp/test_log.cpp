// test_log.cpp — RUNTIME_LOG's grammar (levels, subsystems, refusals), the level filter, and the form of a line
// (src/observe/log.cpp is compiled into this test: the library keeps its copy hidden). The library's own lines, from
// the environment, are tested from Python (tests/python/test_log.py).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "observe/log.hpp"

namespace {

using rt::log::Level;
using rt::log::Subsystem;
using Levels = uint8_t[rt::log::kSubsystems];

constexpr uint8_t E = 0, W = 1, I = 2, D = 3;

std::vector<int> parsed(const char* spec) {
    Levels l = {9, 9, 9, 9, 9, 9, 9};
    std::string why;
    EXPECT_TRUE(rt::log::parse_spec(spec, l, &why)) << spec << ": " << why;
    return std::vector<int>(l, l + rt::log::kSubsystems);
}

std::string refusal(const char* spec) {
    Levels l = {9, 9, 9, 9, 9, 9, 9};
    std::string why;
    EXPECT_FALSE(rt::log::parse_spec(spec, l, &why)) << spec;
    for (uint8_t v : l) EXPECT_EQ(v, 9) << "a refused spec changed the levels: " << spec;
    return why;
}

/// Restores the default levels after each test (the levels are process-wide).
class Log : public ::testing::Test {
protected:
    void TearDown() override { ASSERT_TRUE(rt::log::configure(nullptr)); }
};

TEST_F(Log, SpecGrammar) {
    // order: core, backend, kernels, memory, graph, dvpp, comm
    EXPECT_EQ(parsed(""), (std::vector<int>{W, W, W, W, W, W, W}));
    EXPECT_EQ(parsed("  "), (std::vector<int>{W, W, W, W, W, W, W}));
    EXPECT_EQ(parsed("debug"), (std::vector<int>{D, D, D, D, D, D, D}));
    EXPECT_EQ(parsed("error"), (std::vector<int>{E, E, E, E, E, E, E}));
    EXPECT_EQ(parsed("kernels=debug"), (std::vector<int>{W, W, D, W, W, W, W}));
    EXPECT_EQ(parsed("warn,kernels=debug,memory=info"), (std::vector<int>{W, W, D, I, W, W, W}));
    // A subsystem's item wins over the bare level whatever the order; a later item for one subsystem wins.
    EXPECT_EQ(parsed("kernels=debug,error"), (std::vector<int>{E, E, D, E, E, E, E}));
    EXPECT_EQ(parsed("dvpp=info,dvpp=error, graph = debug ,backend=info"), (std::vector<int>{W, I, W, W, D, E, W}));
    EXPECT_EQ(parsed("comm=info"), (std::vector<int>{W, W, W, W, W, W, I}));
    EXPECT_EQ(parsed("info,warn"), (std::vector<int>{W, W, W, W, W, W, W}));
}

TEST_F(Log, BadSpecsAreRefusedNamingTheItem) {
    EXPECT_EQ(refusal("loud"), "item 'loud': 'loud' is not a level");
    EXPECT_EQ(refusal("kernels=loud"), "item 'kernels=loud': 'loud' is not a level");
    EXPECT_EQ(refusal("warn,kernel=debug"), "item 'kernel=debug': 'kernel' is not a subsystem");
    EXPECT_EQ(refusal("=debug"), "item '=debug': '' is not a subsystem");
    EXPECT_EQ(refusal("memory="), "item 'memory=': '' is not a level");
    EXPECT_EQ(refusal("DEBUG"), "item 'DEBUG': 'DEBUG' is not a level");  // the names are lower case
    EXPECT_EQ(refusal("warn,,info"), "an empty item");
    EXPECT_EQ(refusal("warn,"), "an empty item");
    EXPECT_EQ(refusal(","), "an empty item");
}

TEST_F(Log, LevelsFilter) {
    ASSERT_TRUE(rt::log::configure("warn,kernels=debug,memory=info"));
    EXPECT_TRUE(rt::log::enabled(Subsystem::kernels, Level::debug));
    EXPECT_TRUE(rt::log::enabled(Subsystem::memory, Level::info));
    EXPECT_FALSE(rt::log::enabled(Subsystem::memory, Level::debug));
    EXPECT_TRUE(rt::log::enabled(Subsystem::core, Level::warn));
    EXPECT_TRUE(rt::log::enabled(Subsystem::core, Level::error));
    EXPECT_FALSE(rt::log::enabled(Subsystem::core, Level::info));
    ASSERT_TRUE(rt::log::configure("error"));
    EXPECT_FALSE(rt::log::enabled(Subsystem::dvpp, Level::warn));
    EXPECT_TRUE(rt::log::enabled(Subsystem::dvpp, Level::error));
    ASSERT_TRUE(rt::log::configure(nullptr));  // the default: warnings and errors only
    for (int s = 0; s < rt::log::kSubsystems; ++s) {
        EXPECT_TRUE(rt::log::enabled(static_cast<Subsystem>(s), Level::warn));
        EXPECT_FALSE(rt::log::enabled(static_cast<Subsystem>(s), Level::info));
    }
}

TEST_F(Log, RtLogPrintsOnlyWhatItsLevelLetsThroughAndEvaluatesNothingElse) {
    ASSERT_TRUE(rt::log::configure("graph=info"));
    int evaluated = 0;
    auto arg = [&] { return ++evaluated; };
    ::testing::internal::CaptureStderr();
    RT_LOG(graph, debug, "hidden %d", arg());
    RT_LOG(graph, info, "shown %d", arg());
    RT_LOG(dvpp, info, "hidden %d", arg());
    RT_LOG(dvpp, warn, "a warning %d", arg());
    std::string out = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(evaluated, 2);
    std::regex line(R"(\[runtime \d\d:\d\d:\d\d\.\d{6} tid (\d+) (\w+) (\w+)\] (.*))");
    std::vector<std::string> lines;
    for (size_t at = 0, nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1)
        lines.push_back(out.substr(at, nl - at));
    ASSERT_EQ(lines.size(), 2u) << out;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(lines[0], m, line)) << lines[0];
    EXPECT_EQ(m[1].str(), std::to_string(::gettid()));
    EXPECT_EQ(m[2].str(), "graph");
    EXPECT_EQ(m[3].str(), "info");
    EXPECT_EQ(m[4].str(), "shown 1");
    ASSERT_TRUE(std::regex_match(lines[1], m, line)) << lines[1];
    EXPECT_EQ(m[2].str() + " " + m[3].str() + " " + m[4].str(), "dvpp warn a warning 2");
}

TEST_F(Log, ABadSpecPrintsOneWarningAndKeepsTheLevels) {
    ASSERT_TRUE(rt::log::configure("memory=debug"));
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(rt::log::configure("memory=loud,kernels=info"));
    std::string out = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_NE(out.find(" core warn] RUNTIME_LOG='memory=loud,kernels=info' is not understood (item 'memory=loud': "
                       "'loud' is not a level): ignored; expected LEVEL or SUBSYSTEM=LEVEL items separated by commas"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("error, warn, info, debug"), std::string::npos) << out;
    EXPECT_NE(out.find("core, backend, kernels, memory, graph, dvpp, comm"), std::string::npos) << out;
    EXPECT_TRUE(rt::log::enabled(Subsystem::memory, Level::debug));  // unchanged
    EXPECT_FALSE(rt::log::enabled(Subsystem::kernels, Level::info));
}

TEST_F(Log, LongLinesAreWrittenWhole) {
    ASSERT_TRUE(rt::log::configure("kernels=debug"));
    std::string big(5000, 'x');
    big += "END";
    ::testing::internal::CaptureStderr();
    RT_LOG(kernels, debug, "long: %s", big.c_str());
    std::string out = ::testing::internal::GetCapturedStderr();
    ASSERT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
    EXPECT_NE(out.find("] long: " + big + "\n"), std::string::npos);
}

TEST_F(Log, LinesOfConcurrentThreadsNeverInterleave) {
    ASSERT_TRUE(rt::log::configure("core=debug"));
    constexpr int kThreads = 4, kLines = 200;
    ::testing::internal::CaptureStderr();
    {
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t)
            threads.emplace_back([t] {
                for (int i = 0; i < kLines; ++i)
                    RT_LOG(core, debug, "thread %d line %d %s", t, i, std::string(300, 'a' + t).c_str());
            });
        for (auto& th : threads) th.join();
    }
    std::string out = ::testing::internal::GetCapturedStderr();
    std::regex line(R"(\[runtime \S+ tid \d+ core debug\] thread (\d) line (\d+) ([a-d]{300}))");
    int count = 0;
    std::vector<int> next(kThreads, 0);
    for (size_t at = 0, nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1, ++count) {
        std::string l = out.substr(at, nl - at);
        std::smatch m;
        ASSERT_TRUE(std::regex_match(l, m, line)) << l;
        int t = std::stoi(m[1].str());
        EXPECT_EQ(std::stoi(m[2].str()), next[t]++);  // each thread's lines in its order
        EXPECT_EQ(m[3].str(), std::string(300, 'a' + t));
    }
    EXPECT_EQ(count, kThreads * kLines);
}

TEST(LogNames, NamesAreTheSpecsWords) {
    EXPECT_STREQ(rt::log::subsystem_name(Subsystem::core), "core");
    EXPECT_STREQ(rt::log::subsystem_name(Subsystem::dvpp), "dvpp");
    EXPECT_STREQ(rt::log::subsystem_name(Subsystem::comm), "comm");
    EXPECT_STREQ(rt::log::level_name(Level::error), "error");
    EXPECT_STREQ(rt::log::level_name(Level::debug), "debug");
}

}  // namespace
