// test_comm_graph.cpp — collectives captured into graphs: each rank's graph replays its collectives at every launch
// (exact results over several launches, ordered with the graph's other nodes), fused exchanges, a rank that does not
// launch (timeout naming it and the graph node), the node in dumps, refused by the graph file.
#include <runtime/comm.h>
#include <runtime/graph.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "comm_test_util.hpp"
#include "test_util.hpp"

using namespace rt_test;

namespace {

/// Each rank's graph, captured on its own stream by `record(rank)`, instantiated.
struct RankGraphs {
    RankGraphs(const Ranks& ranks, const std::function<rtError_t(int)>& record) {
        for (int r = 0; r < ranks.size(); ++r) {
            rtStream_t s = ranks.streams[static_cast<size_t>(r)];
            EXPECT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_RELAXED));
            EXPECT_RT_OK(record(r)) << "rank " << r;
            rtGraph_t g = nullptr;
            EXPECT_RT_OK(rtStreamEndCapture(s, &g));
            graphs.push_back(g);
            rtGraphExec_t e = nullptr;
            if (g) {
                EXPECT_RT_OK(rtGraphInstantiate(&e, g, 0));
            }
            execs.push_back(e);
        }
    }
    ~RankGraphs() {
        for (rtGraphExec_t e : execs)
            if (e) rtGraphExecDestroy(e);
        for (rtGraph_t g : graphs)
            if (g) rtGraphDestroy(g);
    }
    std::vector<rtGraph_t> graphs;
    std::vector<rtGraphExec_t> execs;
};

std::vector<uint8_t> ints(const std::vector<int32_t>& v) {
    std::vector<uint8_t> out(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
}
std::vector<int32_t> as_ints(const std::vector<uint8_t>& b) {
    std::vector<int32_t> out(b.size() / 4);
    std::memcpy(out.data(), b.data(), b.size());
    return out;
}

}  // namespace

TEST(CommGraph, CapturedCollectivesReplayExactlyAtEveryLaunchOneToFourRanks) {
    // Per rank: all-reduce send -> recv, copy recv -> out, all-reduce out in place: out = n * (sum of the inputs),
    // which only holds if each node ran after the one before it. New inputs before every launch; an eager barrier
    // between launches advances the same sequence of collectives.
    constexpr size_t count = 37;
    for (int n = 1; n <= 4; ++n) {
        Ranks ranks(n);
        std::vector<std::unique_ptr<Buffer>> send, recv, out;
        for (int r = 0; r < n; ++r) {
            const int d = ranks.devices[static_cast<size_t>(r)];
            send.push_back(std::make_unique<Buffer>(d, count * 4));
            recv.push_back(std::make_unique<Buffer>(d, count * 4));
            out.push_back(std::make_unique<Buffer>(d, count * 4));
        }
        RankGraphs graphs(ranks, [&](int r) {
            const auto i = static_cast<size_t>(r);
            rtStream_t s = ranks.streams[i];
            rtError_t e = rtAllReduce(send[i]->ptr, recv[i]->ptr, count, RT_INT32, RT_REDUCE_SUM, ranks.comms[i], s);
            if (e != RT_SUCCESS) return e;
            e = rtMemcpyAsync(out[i]->ptr, recv[i]->ptr, count * 4, RT_MEMCPY_DEVICE_TO_DEVICE, s);
            if (e != RT_SUCCESS) return e;
            return rtAllReduce(out[i]->ptr, out[i]->ptr, count, RT_INT32, RT_REDUCE_SUM, ranks.comms[i], s);
        });
        // Capturing queued nothing: the buffers are untouched and no collective was numbered.
        size_t nodes = 0;
        ASSERT_RT_OK(rtGraphGetNodes(graphs.graphs[0], nullptr, &nodes));
        ASSERT_EQ(nodes, 3u);
        std::vector<rtGraphNode_t> list(nodes);
        ASSERT_RT_OK(rtGraphGetNodes(graphs.graphs[0], list.data(), &nodes));
        rtGraphNodeType type;
        ASSERT_RT_OK(rtGraphNodeGetType(list[0], &type));
        EXPECT_EQ(type, RT_GRAPH_NODE_TYPE_COLLECTIVE);
        for (int launch = 0; launch < 3; ++launch) {
            std::vector<int32_t> sum(count, 0);
            for (int r = 0; r < n; ++r) {
                std::vector<int32_t> in(count);
                for (size_t k = 0; k < count; ++k) in[k] = (launch + 1) * 1000 + r * 100 + static_cast<int32_t>(k);
                for (size_t k = 0; k < count; ++k) sum[k] += in[k];
                send[static_cast<size_t>(r)]->write(ints(in));
            }
            for (int r = 0; r < n; ++r)
                ASSERT_RT_OK(rtGraphLaunch(graphs.execs[static_cast<size_t>(r)], ranks.streams[static_cast<size_t>(r)]))
                    << "rank " << r << ", launch " << launch;
            for (int r = 0; r < n; ++r)
                ASSERT_RT_OK(rtCommBarrier(ranks.comms[static_cast<size_t>(r)], ranks.streams[static_cast<size_t>(r)]));
            for (rtError_t e : ranks.sync()) ASSERT_RT_OK(e) << "launch " << launch;
            std::vector<int32_t> times_n(sum);
            for (int32_t& v : times_n) v *= n;
            for (int r = 0; r < n; ++r) {
                EXPECT_EQ(as_ints(recv[static_cast<size_t>(r)]->read(count * 4)), sum)
                    << n << " ranks, rank " << r << ", launch " << launch;
                EXPECT_EQ(as_ints(out[static_cast<size_t>(r)]->read(count * 4)), times_n)
                    << n << " ranks, rank " << r << ", launch " << launch;
            }
        }
    }
}

TEST(CommGraph, AGroupedExchangeIsOneNodeReplayedEachLaunch) {
    // One thread drives both ranks: the sends and receives of each rank inside the group become one node.
    Ranks ranks(2);
    constexpr size_t count = 5;
    std::vector<std::unique_ptr<Buffer>> mine, theirs;
    for (int r = 0; r < 2; ++r) {
        mine.push_back(std::make_unique<Buffer>(ranks.devices[static_cast<size_t>(r)], count * 4));
        theirs.push_back(std::make_unique<Buffer>(ranks.devices[static_cast<size_t>(r)], count * 4));
    }
    for (rtStream_t s : ranks.streams) ASSERT_RT_OK(rtStreamBeginCapture(s, RT_STREAM_CAPTURE_MODE_RELAXED));
    ASSERT_RT_OK(rtGroupStart());
    for (int r = 0; r < 2; ++r) {
        const auto i = static_cast<size_t>(r);
        ASSERT_RT_OK(rtSend(mine[i]->ptr, count, RT_INT32, 1 - r, ranks.comms[i], ranks.streams[i]));
        ASSERT_RT_OK(rtRecv(theirs[i]->ptr, count, RT_INT32, 1 - r, ranks.comms[i], ranks.streams[i]));
    }
    ASSERT_RT_OK(rtGroupEnd());
    std::vector<rtGraph_t> graphs(2);
    std::vector<rtGraphExec_t> execs(2);
    for (size_t i = 0; i < 2; ++i) {
        ASSERT_RT_OK(rtStreamEndCapture(ranks.streams[i], &graphs[i]));
        size_t nodes = 0;
        ASSERT_RT_OK(rtGraphGetNodes(graphs[i], nullptr, &nodes));
        EXPECT_EQ(nodes, 1u) << "rank " << i;
        ASSERT_RT_OK(rtGraphInstantiate(&execs[i], graphs[i], 0));
    }
    for (int launch = 0; launch < 2; ++launch) {
        for (int r = 0; r < 2; ++r)
            mine[static_cast<size_t>(r)]->write(ints(std::vector<int32_t>(count, launch * 10 + r + 1)));
        for (size_t i = 0; i < 2; ++i) ASSERT_RT_OK(rtGraphLaunch(execs[i], ranks.streams[i]));
        for (rtError_t e : ranks.sync()) ASSERT_RT_OK(e);
        for (int r = 0; r < 2; ++r)
            EXPECT_EQ(as_ints(theirs[static_cast<size_t>(r)]->read(count * 4)),
                      std::vector<int32_t>(count, launch * 10 + (1 - r) + 1))
                << "rank " << r << ", launch " << launch;
    }
    for (size_t i = 0; i < 2; ++i) {
        rtGraphExecDestroy(execs[i]);
        rtGraphDestroy(graphs[i]);
    }
}

TEST(CommGraph, ARankThatDoesNotLaunchTimesOutNamingItAndTheNode) {
    EnvVar timeout("RUNTIME_COMM_TIMEOUT", "0.2");
    Ranks ranks(3);
    std::vector<std::unique_ptr<Buffer>> buf;
    for (int r = 0; r < 3; ++r) buf.push_back(std::make_unique<Buffer>(ranks.devices[static_cast<size_t>(r)], 16));
    RankGraphs graphs(ranks, [&](int r) {
        const auto i = static_cast<size_t>(r);
        return rtAllReduce(buf[i]->ptr, buf[i]->ptr, 4, RT_FLOAT32, RT_REDUCE_SUM, ranks.comms[i], ranks.streams[i]);
    });
    // Every rank launches once; then ranks 0 and 1 launch again, rank 2 does not.
    for (size_t i = 0; i < 3; ++i) ASSERT_RT_OK(rtGraphLaunch(graphs.execs[i], ranks.streams[i]));
    for (rtError_t e : ranks.sync()) ASSERT_RT_OK(e);
    for (size_t i = 0; i < 2; ++i) ASSERT_RT_OK(rtGraphLaunch(graphs.execs[i], ranks.streams[i]));
    for (int r = 0; r < 2; ++r) {
        EXPECT_RT_ERROR(RT_ERROR_TIMEOUT, rtStreamSynchronize(ranks.streams[static_cast<size_t>(r)]));
        const std::string m = last_message();
        EXPECT_NE(m.find("rtAllReduce (collective #2"), std::string::npos) << m;
        EXPECT_NE(m.find("rank " + std::to_string(r) + " of 3"), std::string::npos) << m;
        EXPECT_NE(m.find("node 0 of the graph launched as operation"), std::string::npos) << m;
        EXPECT_NE(m.find("waiting for rank 2 "), std::string::npos) << m;
    }
}

TEST(CommGraph, AnAbortFailsTheNextReplay) {
    EnvVar timeout("RUNTIME_COMM_TIMEOUT", "60");  // an abort that did not reach the replay would hang, not time out
    Ranks ranks(2);
    std::vector<std::unique_ptr<Buffer>> buf;
    for (int r = 0; r < 2; ++r) buf.push_back(std::make_unique<Buffer>(ranks.devices[static_cast<size_t>(r)], 16));
    RankGraphs graphs(ranks, [&](int r) {
        const auto i = static_cast<size_t>(r);
        return rtCommBarrier(ranks.comms[i], ranks.streams[i]);
    });
    ASSERT_RT_OK(rtGraphLaunch(graphs.execs[0], ranks.streams[0]));
    ASSERT_RT_OK(rtCommAbort(ranks.comms[1]));
    ranks.comms[1] = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_ILLEGAL_STATE, rtStreamSynchronize(ranks.streams[0]));
    const std::string m = last_message();
    EXPECT_NE(m.find("rtCommBarrier"), std::string::npos) << m;
    EXPECT_NE(m.find("aborted by rank 1"), std::string::npos) << m;
}

TEST(CommGraph, TheNodeIsNamedInDumpsAndRefusedByTheGraphFile) {
    Ranks ranks(1);
    Buffer a(ranks.devices[0], 64);
    RankGraphs graphs(ranks, [&](int) {
        return rtAllReduce(a.ptr, a.ptr, 16, RT_FLOAT32, RT_REDUCE_MAX, ranks.comms[0], ranks.streams[0]);
    });
    const std::string dot = ::testing::TempDir() + "comm_graph.dot";
    ASSERT_RT_OK(rtGraphDebugDotPrint(graphs.graphs[0], dot.c_str(), 0));
    std::stringstream text;
    text << std::ifstream(dot).rdbuf();
    std::remove(dot.c_str());
    EXPECT_NE(text.str().find("collective rtAllReduce 16 x RT_FLOAT32, rank 0 of 1"), std::string::npos) << text.str();
    const std::string file = ::testing::TempDir() + "comm_graph.rtgraph";
    EXPECT_RT_ERROR(RT_ERROR_NOT_SUPPORTED, rtGraphExecSave(graphs.execs[0], file.c_str()));
    EXPECT_NE(last_message().find("node 0 (collective rtAllReduce"), std::string::npos) << last_message();
    EXPECT_NE(last_message().find("which a saved graph cannot hold"), std::string::npos) << last_message();
}

TEST(CommGraph, ABadCollectiveIsRefusedWhileTheCaptureGoesOn) {
    // The operands are checked before the capture sees the call, as on any stream.
    Ranks ranks(2);
    Buffer a(ranks.devices[0], 4);
    ASSERT_RT_OK(rtStreamBeginCapture(ranks.streams[0], RT_STREAM_CAPTURE_MODE_RELAXED));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtAllReduce(a.ptr, a.ptr, 2, RT_INT32, RT_REDUCE_SUM, ranks.comms[0], ranks.streams[0]));
    EXPECT_NE(last_message().find("has 4 bytes to the end of its allocation, but the operation needs 8"),
              std::string::npos) << last_message();
    rtGraph_t g = nullptr;
    const rtError_t end = rtStreamEndCapture(ranks.streams[0], &g);
    if (g) rtGraphDestroy(g);
    // A refusal before queuing does not reach the capture: the capture goes on and ends with an empty graph.
    EXPECT_RT_OK(end);
}
