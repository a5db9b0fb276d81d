// test_graph_build.cpp — explicit graphs: every rtGraphAdd*Node with good and bad parameters, dependency errors, the
// node queries, clone, destroy, DOT output (parsed) and rtGraphBindName.
#include "test_util.hpp"

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

using namespace rt_test;

namespace {

const char* const kSource = R"rtsrc(
RT_KERNEL void scale(const float* in, float* out, int32_t n, float factor) {
    size_t i = get_global_id(0);
    if (i < (size_t)n) out[i] = in[i] * factor;
}
RT_KERNEL void nothing() {}
)rtsrc";

// ---------------------------------------------------------------- a small DOT parser (the subset DOT allows that
// rtGraphDebugDotPrint may write: digraph, subgraph, node/edge/graph attribute statements, ID = ID, node and edge
// statements with attribute lists; IDs, numerals and quoted strings with escapes). Throws on any syntax error.

struct Dot {
    std::map<std::string, std::map<std::string, std::string>> nodes;  // id -> attributes
    std::vector<std::pair<std::string, std::string>> edges;           // every edge, in order
    std::vector<std::map<std::string, std::string>> edge_attrs;
    std::map<std::string, std::set<std::string>> clusters;            // subgraph id -> node ids declared in it
    std::map<std::string, std::string> graph_attrs;                   // top-level ID = ID statements
};

class DotParser {
public:
    explicit DotParser(std::string text) : s_(std::move(text)) {}

    Dot parse() {
        expect_word("digraph");
        if (peek_kind() == Tok::id) next();
        expect("{");
        statements("");
        expect("}");
        skip_space();
        if (pos_ != s_.size()) error("text after the closing brace");
        return std::move(dot_);
    }

private:
    enum class Tok { id, symbol, end };
    struct Token {
        Tok kind;
        std::string text;
    };

    [[noreturn]] void error(const std::string& what) const {
        throw std::runtime_error("DOT syntax error at offset " + std::to_string(pos_) + ": " + what);
    }
    void skip_space() {
        while (pos_ < s_.size()) {
            if (std::isspace(static_cast<unsigned char>(s_[pos_]))) {
                ++pos_;
            } else if (s_.compare(pos_, 2, "//") == 0) {
                while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
            } else {
                break;
            }
        }
    }
    Token lex(bool consume) {
        skip_space();
        size_t p = pos_;
        Token t{Tok::end, ""};
        if (p >= s_.size()) return t;
        char c = s_[p];
        if (c == '"') {
            ++p;
            std::string v;
            while (true) {
                if (p >= s_.size()) error("unterminated string");
                char d = s_[p++];
                if (d == '"') break;
                if (d == '\\') {
                    if (p >= s_.size()) error("unterminated escape");
                    char e = s_[p++];
                    if (e == 'n') v += '\n';
                    else if (e == '"' || e == '\\') v += e;
                    else { v += '\\'; v += e; }
                    continue;
                }
                if (d == '\n') error("raw newline in a string");
                v += d;
            }
            t = {Tok::id, v};
        } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (c & 0x80)) {
            size_t b = p;
            while (p < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p])) || s_[p] == '_' || s_[p] == '.' ||
                                     (s_[p] & 0x80)))
                ++p;
            t = {Tok::id, s_.substr(b, p - b)};
        } else if (s_.compare(p, 2, "->") == 0) {
            p += 2;
            t = {Tok::symbol, "->"};
        } else if (std::string("{}[];,=").find(c) != std::string::npos) {
            ++p;
            t = {Tok::symbol, std::string(1, c)};
        } else {
            error(std::string("unexpected character '") + c + "'");
        }
        if (consume) pos_ = p;
        return t;
    }
    Token next() { return lex(true); }
    Token peek() { return lex(false); }
    Tok peek_kind() { return peek().kind; }
    bool peek_is(const char* sym) {
        Token t = peek();
        return t.kind == Tok::symbol && t.text == sym;
    }
    void expect(const char* sym) {
        Token t = next();
        if (t.kind != Tok::symbol || t.text != sym) error(std::string("expected '") + sym + "', got '" + t.text + "'");
    }
    void expect_word(const char* w) {
        Token t = next();
        if (t.kind != Tok::id || t.text != w) error(std::string("expected '") + w + "'");
    }
    std::string id() {
        Token t = next();
        if (t.kind != Tok::id) error("expected an ID, got '" + t.text + "'");
        return t.text;
    }
    std::map<std::string, std::string> attr_list() {
        std::map<std::string, std::string> a;
        while (peek_is("[")) {
            next();
            while (!peek_is("]")) {
                std::string k = id();
                expect("=");
                a[k] = id();
                if (peek_is(",") || peek_is(";")) next();
            }
            expect("]");
        }
        return a;
    }
    void statements(const std::string& cluster) {
        while (!peek_is("}")) {
            if (peek_kind() == Tok::end) error("unexpected end of text");
            std::string first = id();
            if (first == "subgraph") {
                std::string name = peek_kind() == Tok::id ? id() : "";
                expect("{");
                dot_.clusters[name];
                statements(name);
                expect("}");
            } else if (first == "graph" || first == "node" || first == "edge") {
                attr_list();
            } else if (peek_is("=")) {
                next();
                std::string v = id();
                if (cluster.empty()) dot_.graph_attrs[first] = v;
            } else {
                std::vector<std::string> chain{first};
                while (peek_is("->")) {
                    next();
                    chain.push_back(id());
                }
                auto attrs = attr_list();
                if (chain.size() == 1) {
                    dot_.nodes[first] = attrs;
                    if (!cluster.empty()) dot_.clusters[cluster].insert(first);
                } else {
                    for (size_t i = 1; i < chain.size(); ++i) {
                        dot_.edges.emplace_back(chain[i - 1], chain[i]);
                        dot_.edge_attrs.push_back(attrs);
                    }
                }
            }
            if (peek_is(";")) next();
        }
    }

    std::string s_;
    size_t pos_ = 0;
    Dot dot_;
};

std::string read_file(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// ---------------------------------------------------------------- fixture

class GraphBuild : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override {
        ASSERT_RT_OK(rtSetDevice(GetParam()));
        ASSERT_RT_OK(rtModuleLoadSource(&module_, kSource, nullptr));
        ASSERT_RT_OK(rtModuleGetFunction(&scale_, module_, "scale"));
        ASSERT_RT_OK(rtModuleGetFunction(&nothing_, module_, "nothing"));
        ASSERT_RT_OK(rtGraphCreate(&graph_, 0));
        ASSERT_RT_OK(rtMalloc(&dev_, kBytes));
        ASSERT_RT_OK(rtMalloc(&dev2_, kBytes));
    }
    void TearDown() override {
        if (graph_) {
            EXPECT_RT_OK(rtGraphDestroy(graph_));
        }
        rtFree(dev_);
        rtFree(dev2_);
        if (module_) {
            EXPECT_RT_OK(rtModuleUnload(module_));
        }
        for (const std::string& p : files_) std::remove(p.c_str());
    }

    size_t node_count(rtGraph_t g) {
        size_t n = 12345;
        EXPECT_RT_OK(rtGraphGetNodes(g, nullptr, &n));
        return n;
    }
    std::vector<rtGraphNode_t> nodes_of(rtGraph_t g) {
        size_t n = node_count(g);
        std::vector<rtGraphNode_t> v(n);
        EXPECT_RT_OK(rtGraphGetNodes(g, v.data(), &n));
        EXPECT_EQ(n, v.size());
        return v;
    }
    std::vector<rtGraphNode_t> deps_of(rtGraphNode_t node) {
        size_t n = 12345;
        EXPECT_RT_OK(rtGraphNodeGetDependencies(node, nullptr, &n));
        std::vector<rtGraphNode_t> v(n);
        EXPECT_RT_OK(rtGraphNodeGetDependencies(node, v.data(), &n));
        return v;
    }
    rtGraphNodeType type_of(rtGraphNode_t node) {
        rtGraphNodeType t = static_cast<rtGraphNodeType>(-1);
        EXPECT_RT_OK(rtGraphNodeGetType(node, &t));
        return t;
    }
    rtKernelNodeParams kernel_params(void** args) {
        rtKernelNodeParams p{};
        p.function = scale_;
        p.grid = {4, 1, 1};
        p.block = {64, 1, 1};
        p.args = args;
        return p;
    }
    rtGraphNode_t add_empty(rtGraph_t g, std::vector<rtGraphNode_t> deps = {}) {
        rtGraphNode_t n = nullptr;
        EXPECT_RT_OK(rtGraphAddEmptyNode(&n, g, deps.data(), deps.size()));
        return n;
    }
    /// The graph's DOT text, written through rtGraphDebugDotPrint, and parsed.
    Dot dot_of(rtGraph_t g, unsigned flags, std::string* text = nullptr) {
        std::string path = ::testing::TempDir() + "graph_build_" + std::to_string(::getpid()) + "_" +
                           std::to_string(files_.size()) + ".dot";
        files_.push_back(path);
        EXPECT_RT_OK(rtGraphDebugDotPrint(g, path.c_str(), flags));
        std::string t = read_file(path);
        if (text) *text = t;
        try {
            return DotParser(t).parse();
        } catch (const std::exception& e) {
            ADD_FAILURE() << e.what() << "\n" << t;
            return {};
        }
    }

    static constexpr size_t kBytes = 4096;
    rtModule_t module_ = nullptr;
    rtFunction_t scale_ = nullptr, nothing_ = nullptr;
    rtGraph_t graph_ = nullptr;
    void* dev_ = nullptr;
    void* dev2_ = nullptr;
    std::vector<std::string> files_;
    Watchdog watchdog_{std::chrono::milliseconds(60000), "graph build test"};
};

void noop_host(void*) {}

// ---------------------------------------------------------------- creation

TEST_P(GraphBuild, CreateRefusesNullOutAndFlags) {
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphCreate(nullptr, 0));
    rtGraph_t g = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphCreate(&g, 1));
    EXPECT_TRUE(contains(last_message(), "flags"));
    EXPECT_EQ(g, nullptr);
    EXPECT_EQ(node_count(graph_), 0u);
}

TEST_P(GraphBuild, GarbageGraphHandlesAreInvalidHandle) {
    rtGraphNode_t n = nullptr;
    const auto garbage = reinterpret_cast<rtGraph_t>(uintptr_t{0x1234});
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphAddEmptyNode(&n, garbage, nullptr, 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphAddEmptyNode(&n, nullptr, nullptr, 0));
    size_t count = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphGetNodes(garbage, nullptr, &count));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphDestroy(garbage));
    // A node handle is not a graph handle, nor the reverse.
    rtGraphNode_t e = add_empty(graph_);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphGetNodes(reinterpret_cast<rtGraph_t>(e), nullptr, &count));
    rtGraphNodeType t;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphNodeGetType(reinterpret_cast<rtGraphNode_t>(graph_), &t));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphNodeGetType(nullptr, &t));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphNodeGetType(e, nullptr));
}

// ---------------------------------------------------------------- every node type

TEST_P(GraphBuild, EveryNodeTypeIsAddedInOrderWithItsTypeAndDependencies) {
    rtEvent_t ev = nullptr;
    ASSERT_RT_OK(rtEventCreate(&ev));
    rtGraph_t child = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&child, 0));
    add_empty(child);

    int32_t n = 16;
    float factor = 2.0f;
    void* args[] = {&dev_, &dev2_, &n, &factor};
    rtKernelNodeParams kp = kernel_params(args);
    rtGraphNode_t k = nullptr, c = nullptr, s = nullptr, h = nullptr, e = nullptr, ch = nullptr, rec = nullptr,
                  wait = nullptr, al = nullptr, fr = nullptr;
    ASSERT_RT_OK(rtGraphAddKernelNode(&k, graph_, nullptr, 0, &kp));
    std::vector<unsigned char> host(kBytes);
    rtMemcpyNodeParams cp{dev_, host.data(), kBytes, RT_MEMCPY_HOST_TO_DEVICE};
    ASSERT_RT_OK(rtGraphAddMemcpyNode(&c, graph_, &k, 1, &cp));
    rtMemsetNodeParams sp{dev2_, 7, kBytes};
    ASSERT_RT_OK(rtGraphAddMemsetNode(&s, graph_, &k, 1, &sp));
    rtHostNodeParams hp{noop_host, nullptr};
    rtGraphNode_t cs[] = {c, s};
    ASSERT_RT_OK(rtGraphAddHostNode(&h, graph_, cs, 2, &hp));
    ASSERT_RT_OK(rtGraphAddEmptyNode(&e, graph_, &h, 1));
    ASSERT_RT_OK(rtGraphAddChildGraphNode(&ch, graph_, &e, 1, child));
    ASSERT_RT_OK(rtGraphAddEventRecordNode(&rec, graph_, &ch, 1, ev));
    ASSERT_RT_OK(rtGraphAddEventWaitNode(&wait, graph_, nullptr, 0, ev));
    rtMemAllocNodeParams ap{kBytes, nullptr};
    ASSERT_RT_OK(rtGraphAddMemAllocNode(&al, graph_, &wait, 1, &ap));
    ASSERT_NE(ap.ptr, nullptr);
    ASSERT_RT_OK(rtGraphAddMemFreeNode(&fr, graph_, &al, 1, ap.ptr));

    const std::vector<rtGraphNode_t> expected{k, c, s, h, e, ch, rec, wait, al, fr};
    EXPECT_EQ(nodes_of(graph_), expected);
    const rtGraphNodeType types[] = {RT_GRAPH_NODE_TYPE_KERNEL,       RT_GRAPH_NODE_TYPE_MEMCPY,
                                     RT_GRAPH_NODE_TYPE_MEMSET,       RT_GRAPH_NODE_TYPE_HOST,
                                     RT_GRAPH_NODE_TYPE_EMPTY,        RT_GRAPH_NODE_TYPE_GRAPH,
                                     RT_GRAPH_NODE_TYPE_EVENT_RECORD, RT_GRAPH_NODE_TYPE_WAIT_EVENT,
                                     RT_GRAPH_NODE_TYPE_MEM_ALLOC,    RT_GRAPH_NODE_TYPE_MEM_FREE};
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(type_of(expected[i]), types[i]) << "node " << i;
    EXPECT_TRUE(deps_of(k).empty());
    EXPECT_EQ(deps_of(c), std::vector<rtGraphNode_t>{k});
    EXPECT_EQ(deps_of(h), (std::vector<rtGraphNode_t>{c, s}));
    EXPECT_EQ(deps_of(fr), std::vector<rtGraphNode_t>{al});
    EXPECT_RT_OK(rtGraphDestroy(child));
    EXPECT_RT_OK(rtEventDestroy(ev));
    // The graph keeps what its nodes use: its child's copy and the event.
    EXPECT_EQ(type_of(ch), RT_GRAPH_NODE_TYPE_GRAPH);
    Dot d = dot_of(graph_, RT_GRAPH_DEBUG_DOT_FLAGS_VERBOSE);
    EXPECT_EQ(d.clusters.count("cluster_n5"), 1u);
}

TEST_P(GraphBuild, NullOutputNodeIsRefusedAndAddsNothing) {
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddEmptyNode(nullptr, graph_, nullptr, 0));
    EXPECT_TRUE(contains(last_message(), "node is NULL"));
    EXPECT_EQ(node_count(graph_), 0u);
}

TEST_P(GraphBuild, KernelNodeRefusesBadParamsAndAddsNothing) {
    int32_t n = 16;
    float factor = 2.0f;
    void* args[] = {&dev_, &dev2_, &n, &factor};
    rtGraphNode_t k = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddKernelNode(&k, graph_, nullptr, 0, nullptr));
    EXPECT_TRUE(contains(last_message(), "rtGraphAddKernelNode: params is NULL"));

    rtKernelNodeParams p = kernel_params(args);
    p.function = reinterpret_cast<rtFunction_t>(uintptr_t{0x77});
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphAddKernelNode(&k, graph_, nullptr, 0, &p));
    EXPECT_TRUE(contains(last_message(), "params->function"));

    p = kernel_params(args);
    p.grid.x = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddKernelNode(&k, graph_, nullptr, 0, &p));
    EXPECT_TRUE(contains(last_message(), "grid.x = 0"));

    p = kernel_params(nullptr);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddKernelNode(&k, graph_, nullptr, 0, &p));
    EXPECT_TRUE(contains(last_message(), "args is NULL"));

    void* holes[] = {&dev_, nullptr, &n, &factor};
    p = kernel_params(holes);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddKernelNode(&k, graph_, nullptr, 0, &p));
    EXPECT_TRUE(contains(last_message(), "args[1] is NULL"));

    p = kernel_params(args);
    p.global[0] = 4 * 64 + 1;  // more items than the grid has
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddKernelNode(&k, graph_, nullptr, 0, &p));
    EXPECT_TRUE(contains(last_message(), "global.x"));

    EXPECT_EQ(node_count(graph_), 0u);
    EXPECT_EQ(k, nullptr);

    // A kernel without parameters takes args NULL; a partial last block is allowed through global.
    p = kernel_params(nullptr);
    p.function = nothing_;
    p.global[0] = 200;
    EXPECT_RT_OK(rtGraphAddKernelNode(&k, graph_, nullptr, 0, &p));
    EXPECT_EQ(type_of(k), RT_GRAPH_NODE_TYPE_KERNEL);
}

TEST_P(GraphBuild, KernelNodeCopiesArgumentValuesWhenAdded) {
    int32_t n = 0x1234;
    float factor = 2.0f;
    void* args[] = {&dev_, &dev2_, &n, &factor};
    rtKernelNodeParams p = kernel_params(args);
    rtGraphNode_t k = nullptr;
    ASSERT_RT_OK(rtGraphAddKernelNode(&k, graph_, nullptr, 0, &p));
    n = 0x5678;  // read during the call only
    std::string text;
    Dot d = dot_of(graph_, RT_GRAPH_DEBUG_DOT_FLAGS_VERBOSE, &text);
    ASSERT_EQ(d.nodes.count("n0"), 1u) << text;
    const std::string& label = d.nodes["n0"]["label"];
    EXPECT_TRUE(contains(label, "node 0 (kernel 'scale')"));
    EXPECT_TRUE(contains(label, "grid 4x1x1, block 64x1x1"));
    EXPECT_TRUE(contains(label, "global 256x1x1"));
    EXPECT_TRUE(contains(label, "arg 2 (4 B): 0x1234"));
    EXPECT_FALSE(contains(label, "0x5678"));
    EXPECT_TRUE(contains(label, "arg 0 (8 B): " + ptr_text(dev_)));
    EXPECT_TRUE(contains(label, "arg 3 (4 B): 0x40000000"));  // 2.0f
}

TEST_P(GraphBuild, KernelOfAnotherDeviceIsRefused) {
    int count = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&count));
    const int other = (GetParam() + 1) % count;
    if (other == GetParam() || backend_of(other) != backend_of(GetParam())) GTEST_SKIP() << "one device";
    ASSERT_RT_OK(rtSetDevice(other));
    rtGraph_t g = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&g, 0));
    rtKernelNodeParams p = kernel_params(nullptr);
    p.function = nothing_;
    rtGraphNode_t k = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddKernelNode(&k, g, nullptr, 0, &p));
    EXPECT_TRUE(contains(last_message(), "the graph belongs to"));
    // Nor is a child graph of another device.
    rtGraphNode_t c = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddChildGraphNode(&c, g, nullptr, 0, graph_));
    EXPECT_EQ(node_count(g), 0u);
    EXPECT_RT_OK(rtGraphDestroy(g));
    ASSERT_RT_OK(rtSetDevice(GetParam()));
}

TEST_P(GraphBuild, MemcpyNodeChecksOperandsAsRtMemcpyAsync) {
    std::vector<unsigned char> host(2 * kBytes);
    rtGraphNode_t c = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemcpyNode(&c, graph_, nullptr, 0, nullptr));
    rtMemcpyNodeParams p{dev_, host.data(), kBytes, static_cast<rtMemcpyKind>(7)};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemcpyNode(&c, graph_, nullptr, 0, &p));
    EXPECT_TRUE(contains(last_message(), "kind 7 is not an rtMemcpyKind"));
    p = {nullptr, host.data(), kBytes, RT_MEMCPY_HOST_TO_DEVICE};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemcpyNode(&c, graph_, nullptr, 0, &p));
    EXPECT_TRUE(contains(last_message(), "destination is NULL"));
    p = {dev_, host.data(), kBytes + 1, RT_MEMCPY_HOST_TO_DEVICE};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemcpyNode(&c, graph_, nullptr, 0, &p));
    EXPECT_TRUE(contains(last_message(), "4097 bytes asked but only 4096 bytes available"));
    p = {host.data(), dev_, kBytes, RT_MEMCPY_HOST_TO_DEVICE};  // the wrong way round
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemcpyNode(&c, graph_, nullptr, 0, &p));
    EXPECT_TRUE(contains(last_message(), "needs a device destination"));
    void* freed = nullptr;
    ASSERT_RT_OK(rtMalloc(&freed, kBytes));
    ASSERT_RT_OK(rtFree(freed));
    p = {freed, host.data(), kBytes, RT_MEMCPY_HOST_TO_DEVICE};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemcpyNode(&c, graph_, nullptr, 0, &p));
    EXPECT_EQ(node_count(graph_), 0u);

    // DEFAULT is resolved from the operands; peer device memory and 0 bytes are accepted.
    p = {dev_, host.data(), kBytes, RT_MEMCPY_DEFAULT};
    ASSERT_RT_OK(rtGraphAddMemcpyNode(&c, graph_, nullptr, 0, &p));
    p = {host.data(), dev_, 16, RT_MEMCPY_DEFAULT};
    ASSERT_RT_OK(rtGraphAddMemcpyNode(&c, graph_, nullptr, 0, &p));
    p = {dev2_, dev_, kBytes, RT_MEMCPY_DEFAULT};
    ASSERT_RT_OK(rtGraphAddMemcpyNode(&c, graph_, nullptr, 0, &p));
    p = {nullptr, nullptr, 0, RT_MEMCPY_DEFAULT};
    ASSERT_RT_OK(rtGraphAddMemcpyNode(&c, graph_, nullptr, 0, &p));
    Dot d = dot_of(graph_, 0);
    EXPECT_TRUE(contains(d.nodes["n0"]["label"], "node 0 (memcpy host→device 4096 B)"));
    EXPECT_TRUE(contains(d.nodes["n1"]["label"], "node 1 (memcpy device→host 16 B)"));
    EXPECT_TRUE(contains(d.nodes["n2"]["label"], "node 2 (memcpy device→device 4096 B)"));
    EXPECT_TRUE(contains(d.nodes["n3"]["label"], "memcpy host→host 0 B"));
}

TEST_P(GraphBuild, MemsetNodeChecksOperandsAsRtMemsetAsync) {
    std::vector<unsigned char> host(kBytes);
    rtGraphNode_t s = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemsetNode(&s, graph_, nullptr, 0, nullptr));
    rtMemsetNodeParams p{host.data(), 1, kBytes};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemsetNode(&s, graph_, nullptr, 0, &p));
    EXPECT_TRUE(contains(last_message(), "expected device memory"));
    p = {nullptr, 1, kBytes};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemsetNode(&s, graph_, nullptr, 0, &p));
    p = {static_cast<char*>(dev_) + 1, 1, kBytes};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemsetNode(&s, graph_, nullptr, 0, &p));
    EXPECT_TRUE(contains(last_message(), "4096 bytes asked but only 4095 bytes available"));
    EXPECT_EQ(node_count(graph_), 0u);
    p = {dev_, 0x1ab, kBytes};  // the value is a byte
    ASSERT_RT_OK(rtGraphAddMemsetNode(&s, graph_, nullptr, 0, &p));
    Dot d = dot_of(graph_, 0);
    EXPECT_TRUE(contains(d.nodes["n0"]["label"], "node 0 (memset 4096 B)"));
    EXPECT_TRUE(contains(d.nodes["n0"]["label"], "value 0xab"));
}

TEST_P(GraphBuild, HostAndEventNodesRefuseBadParams) {
    rtGraphNode_t n = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddHostNode(&n, graph_, nullptr, 0, nullptr));
    rtHostNodeParams hp{nullptr, nullptr};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddHostNode(&n, graph_, nullptr, 0, &hp));
    EXPECT_TRUE(contains(last_message(), "params->fn is NULL"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphAddEventRecordNode(&n, graph_, nullptr, 0, nullptr));
    rtEvent_t ev = nullptr;
    ASSERT_RT_OK(rtEventCreate(&ev));
    ASSERT_RT_OK(rtEventDestroy(ev));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphAddEventWaitNode(&n, graph_, nullptr, 0, ev));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE,
                    rtGraphAddEventWaitNode(&n, graph_, nullptr, 0, reinterpret_cast<rtEvent_t>(graph_)));
    EXPECT_EQ(node_count(graph_), 0u);
}

TEST_P(GraphBuild, AllocNodesGetDistinctAlignedAddressesUsableByTheGraphOnly) {
    rtGraphNode_t a = nullptr, b = nullptr, n = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemAllocNode(&a, graph_, nullptr, 0, nullptr));
    rtMemAllocNodeParams zero{0, nullptr};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemAllocNode(&a, graph_, nullptr, 0, &zero));
    EXPECT_TRUE(contains(last_message(), "bytes is 0"));
    EXPECT_EQ(node_count(graph_), 0u);

    rtMemAllocNodeParams pa{1000, nullptr}, pb{kBytes, nullptr};
    ASSERT_RT_OK(rtGraphAddMemAllocNode(&a, graph_, nullptr, 0, &pa));
    ASSERT_RT_OK(rtGraphAddMemAllocNode(&b, graph_, nullptr, 0, &pb));
    ASSERT_NE(pa.ptr, nullptr);
    ASSERT_NE(pb.ptr, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(pa.ptr) % 256, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(pb.ptr) % 256, 0u);
    const auto lo_a = reinterpret_cast<uintptr_t>(pa.ptr), lo_b = reinterpret_cast<uintptr_t>(pb.ptr);
    EXPECT_TRUE(lo_a + 1000 < lo_b || lo_b + kBytes < lo_a) << "ranges overlap or touch";

    // Inside the graph: device memory of the graph's device, bounded by the node's size.
    std::vector<unsigned char> host(kBytes);
    rtMemcpyNodeParams cp{pa.ptr, host.data(), 1000, RT_MEMCPY_DEFAULT};
    ASSERT_RT_OK(rtGraphAddMemcpyNode(&n, graph_, &a, 1, &cp));
    Dot d = dot_of(graph_, 0);
    EXPECT_TRUE(contains(d.nodes["n2"]["label"], "memcpy host→device 1000 B"));
    cp = {static_cast<char*>(pa.ptr) + 8, host.data(), 1000, RT_MEMCPY_HOST_TO_DEVICE};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemcpyNode(&n, graph_, &a, 1, &cp));
    EXPECT_TRUE(contains(last_message(), "allocation node 0"));
    rtMemsetNodeParams sp{pb.ptr, 0, kBytes};
    ASSERT_RT_OK(rtGraphAddMemsetNode(&n, graph_, &b, 1, &sp));
    cp = {pb.ptr, pa.ptr, 1000, RT_MEMCPY_DEVICE_TO_DEVICE};
    ASSERT_RT_OK(rtGraphAddMemcpyNode(&n, graph_, nullptr, 0, &cp));

    // Outside it: refused, never dereferenced (the address space is reserved, never accessible).
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemcpyAsync(host.data(), pa.ptr, 16, RT_MEMCPY_DEFAULT, nullptr));
    EXPECT_TRUE(contains(last_message(), "graph's allocation node"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtMemset(pa.ptr, 0, 16));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtFree(pa.ptr));
    // And in another graph.
    rtGraph_t other = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&other, 0));
    cp = {pa.ptr, host.data(), 16, RT_MEMCPY_HOST_TO_DEVICE};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemcpyNode(&n, other, nullptr, 0, &cp));
    EXPECT_TRUE(contains(last_message(), "graph's allocation node"));
    EXPECT_EQ(node_count(other), 0u);
    EXPECT_RT_OK(rtGraphDestroy(other));
}

TEST_P(GraphBuild, FreeNodeFreesAnAllocationOfTheGraphOnceAfterIt) {
    rtGraphNode_t a = nullptr, f = nullptr, e = nullptr;
    rtMemAllocNodeParams pa{kBytes, nullptr};
    ASSERT_RT_OK(rtGraphAddMemAllocNode(&a, graph_, nullptr, 0, &pa));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemFreeNode(&f, graph_, &a, 1, nullptr));
    EXPECT_TRUE(contains(last_message(), "ptr is NULL"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemFreeNode(&f, graph_, &a, 1, dev_));
    EXPECT_TRUE(contains(last_message(), "not the address of an allocation node of this graph"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtGraphAddMemFreeNode(&f, graph_, &a, 1, static_cast<char*>(pa.ptr) + 256));
    EXPECT_TRUE(contains(last_message(), "256 bytes inside the memory of allocation node 0"));
    rtGraphNode_t unrelated = add_empty(graph_);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemFreeNode(&f, graph_, &unrelated, 1, pa.ptr));
    EXPECT_TRUE(contains(last_message(), "must run after allocation node 0"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemFreeNode(&f, graph_, nullptr, 0, pa.ptr));
    // Through another node is after it too.
    ASSERT_RT_OK(rtGraphAddEmptyNode(&e, graph_, &a, 1));
    ASSERT_RT_OK(rtGraphAddMemFreeNode(&f, graph_, &e, 1, pa.ptr));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemFreeNode(&f, graph_, &e, 1, pa.ptr));
    EXPECT_TRUE(contains(last_message(), "already freed by node 3"));
    // Another graph's allocation.
    rtGraph_t other = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&other, 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemFreeNode(&f, other, nullptr, 0, pa.ptr));
    EXPECT_TRUE(contains(last_message(), "another graph's allocation node"));
    EXPECT_RT_OK(rtGraphDestroy(other));
    EXPECT_EQ(node_count(graph_), 4u);
}

TEST_P(GraphBuild, ChildGraphIsACopyTakenWhenAdded) {
    rtGraph_t child = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&child, 0));
    rtGraphNode_t c0 = add_empty(child);
    add_empty(child, {c0});
    rtGraphNode_t ch = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphAddChildGraphNode(&ch, graph_, nullptr, 0, nullptr));
    ASSERT_RT_OK(rtGraphAddChildGraphNode(&ch, graph_, nullptr, 0, child));
    add_empty(child);  // not seen by the copy
    EXPECT_EQ(node_count(child), 3u);
    Dot d = dot_of(graph_, 0);
    EXPECT_TRUE(contains(d.nodes["n0"]["label"], "node 0 (child graph (2 nodes))"));
    EXPECT_EQ(d.clusters["cluster_n0"], (std::set<std::string>{"n0_0", "n0_1"}));
    EXPECT_TRUE(contains(d.nodes["n0_1"]["label"], "node 0.1 (empty)"));
    // A graph may take a copy of itself.
    rtGraphNode_t self = nullptr;
    ASSERT_RT_OK(rtGraphAddChildGraphNode(&self, graph_, &ch, 1, graph_));
    d = dot_of(graph_, 0);
    EXPECT_TRUE(contains(d.nodes["n1"]["label"], "child graph (1 node)"));
    EXPECT_EQ(d.clusters["cluster_n1"], std::set<std::string>{"n1_0"});  // a cluster per child, nested
    EXPECT_EQ(d.clusters["cluster_n1_0"], (std::set<std::string>{"n1_0_0", "n1_0_1"}));
    EXPECT_TRUE(contains(d.nodes["n1_0_1"]["label"], "node 1.0.1 (empty)"));
    // Children with memory nodes are refused (as CUDA's).
    rtMemAllocNodeParams ap{64, nullptr};
    rtGraphNode_t al = nullptr;
    ASSERT_RT_OK(rtGraphAddMemAllocNode(&al, child, nullptr, 0, &ap));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddChildGraphNode(&ch, graph_, nullptr, 0, child));
    EXPECT_TRUE(contains(last_message(), "allocation or free nodes"));
    EXPECT_EQ(node_count(graph_), 2u);
    EXPECT_RT_OK(rtGraphDestroy(child));
}

// ---------------------------------------------------------------- dependencies

TEST_P(GraphBuild, DependencyErrorsNameTheEntryAndAddNothing) {
    rtGraphNode_t a = add_empty(graph_), b = add_empty(graph_);
    rtGraphNode_t n = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddEmptyNode(&n, graph_, nullptr, 2));
    EXPECT_TRUE(contains(last_message(), "deps is NULL but ndeps is 2"));
    rtGraphNode_t garbage[] = {a, reinterpret_cast<rtGraphNode_t>(uintptr_t{0x4e00000000000001ull})};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddEmptyNode(&n, graph_, garbage, 2));
    EXPECT_TRUE(contains(last_message(), "deps[1]"));
    EXPECT_TRUE(contains(last_message(), "not a live node"));
    rtGraphNode_t dup[] = {a, b, a};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddEmptyNode(&n, graph_, dup, 3));
    EXPECT_TRUE(contains(last_message(), "deps[0] and deps[2] are the same node"));
    // Many dependencies (the sorted duplicate check).
    std::vector<rtGraphNode_t> many;
    for (int i = 0; i < 40; ++i) many.push_back(add_empty(graph_));
    many.push_back(many[17]);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddEmptyNode(&n, graph_, many.data(), many.size()));
    EXPECT_TRUE(contains(last_message(), "deps[17] and deps[40] are the same node"));
    many.pop_back();
    ASSERT_RT_OK(rtGraphAddEmptyNode(&n, graph_, many.data(), many.size()));
    EXPECT_EQ(deps_of(n).size(), 40u);

    rtGraph_t other = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&other, 0));
    rtGraphNode_t foreign = add_empty(other);
    rtGraphNode_t mixed[] = {a, foreign};
    const size_t before = node_count(graph_);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddEmptyNode(&n, graph_, mixed, 2));
    EXPECT_TRUE(contains(last_message(), "deps[1]"));
    EXPECT_TRUE(contains(last_message(), "another graph"));
    // The same checks for every kind of node, and before the params are looked at.
    std::vector<unsigned char> host(16);
    rtMemcpyNodeParams cp{dev_, host.data(), 16, RT_MEMCPY_HOST_TO_DEVICE};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemcpyNode(&n, graph_, mixed, 2, &cp));
    rtMemAllocNodeParams ap{64, nullptr};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemAllocNode(&n, graph_, dup, 3, &ap));
    EXPECT_EQ(ap.ptr, nullptr);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddChildGraphNode(&n, graph_, mixed, 2, other));
    // A node of a destroyed graph.
    EXPECT_RT_OK(rtGraphDestroy(other));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddEmptyNode(&n, graph_, &foreign, 1));
    EXPECT_TRUE(contains(last_message(), "not a live node"));
    EXPECT_EQ(node_count(graph_), before);
}

TEST_P(GraphBuild, GetNodesAndDependenciesFollowTheCapacityProtocol) {
    rtGraphNode_t a = add_empty(graph_), b = add_empty(graph_);
    rtGraphNode_t c = add_empty(graph_, {a, b});
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphGetNodes(graph_, nullptr, nullptr));
    size_t count = 0;
    ASSERT_RT_OK(rtGraphGetNodes(graph_, nullptr, &count));
    EXPECT_EQ(count, 3u);
    const auto sentinel = reinterpret_cast<rtGraphNode_t>(uintptr_t{0xdead});
    std::vector<rtGraphNode_t> out(5, sentinel);
    count = 2;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphGetNodes(graph_, out.data(), &count));
    EXPECT_TRUE(contains(last_message(), "*count = 2 but there are 3"));
    EXPECT_EQ(out, std::vector<rtGraphNode_t>(5, sentinel));  // none written
    count = 5;
    ASSERT_RT_OK(rtGraphGetNodes(graph_, out.data(), &count));
    EXPECT_EQ(count, 3u);
    EXPECT_EQ(out, (std::vector<rtGraphNode_t>{a, b, c, sentinel, sentinel}));

    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphNodeGetDependencies(c, nullptr, nullptr));
    count = 1;
    std::fill(out.begin(), out.end(), sentinel);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphNodeGetDependencies(c, out.data(), &count));
    EXPECT_EQ(out[0], sentinel);
    count = 2;
    ASSERT_RT_OK(rtGraphNodeGetDependencies(c, out.data(), &count));
    EXPECT_EQ(count, 2u);
    EXPECT_EQ(out[0], a);
    EXPECT_EQ(out[1], b);
    count = 9;
    ASSERT_RT_OK(rtGraphNodeGetDependencies(a, nullptr, &count));
    EXPECT_EQ(count, 0u);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphNodeGetDependencies(sentinel, nullptr, &count));
}

// ---------------------------------------------------------------- clone and destroy

TEST_P(GraphBuild, CloneHasTheSameNodesAndEdgesAndIsIndependent) {
    rtMemAllocNodeParams ap{kBytes, nullptr};
    rtGraphNode_t al = nullptr;
    ASSERT_RT_OK(rtGraphAddMemAllocNode(&al, graph_, nullptr, 0, &ap));
    rtMemsetNodeParams sp{ap.ptr, 3, kBytes};
    rtGraphNode_t s = nullptr;
    ASSERT_RT_OK(rtGraphAddMemsetNode(&s, graph_, &al, 1, &sp));
    rtGraphNode_t e = add_empty(graph_, {s});
    add_empty(graph_, {al, e});
    ASSERT_RT_OK(rtGraphBindName(graph_, "out", dev_, kBytes));

    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphClone(nullptr, graph_));
    rtGraph_t clone = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphClone(&clone, nullptr));
    ASSERT_RT_OK(rtGraphClone(&clone, graph_));
    const std::vector<rtGraphNode_t> on = nodes_of(graph_), cn = nodes_of(clone);
    ASSERT_EQ(cn.size(), on.size());
    for (size_t i = 0; i < on.size(); ++i) {
        EXPECT_NE(cn[i], on[i]) << "the clone has its own handles";
        EXPECT_EQ(type_of(cn[i]), type_of(on[i]));
        // Edges by position.
        std::vector<rtGraphNode_t> od = deps_of(on[i]), cd = deps_of(cn[i]);
        ASSERT_EQ(cd.size(), od.size());
        for (size_t j = 0; j < od.size(); ++j) {
            const size_t oi = std::find(on.begin(), on.end(), od[j]) - on.begin();
            EXPECT_EQ(cd[j], cn[oi]);
        }
    }
    std::string ot, ct;
    dot_of(graph_, RT_GRAPH_DEBUG_DOT_FLAGS_VERBOSE, &ot);
    dot_of(clone, RT_GRAPH_DEBUG_DOT_FLAGS_VERBOSE, &ct);
    EXPECT_EQ(ct, ot) << "same parameters, allocation addresses and names";

    // The clone's allocation is the same address: its own free node takes it; the original's is independent.
    rtGraphNode_t f = nullptr;
    ASSERT_RT_OK(rtGraphAddMemFreeNode(&f, clone, &cn[1], 1, ap.ptr));
    // A node of the original is not a node of the clone.
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddEmptyNode(&f, clone, &on[0], 1));
    EXPECT_TRUE(contains(last_message(), "another graph"));
    EXPECT_EQ(node_count(graph_), 4u);
    EXPECT_EQ(node_count(clone), 5u);
    add_empty(graph_);
    add_empty(graph_);
    EXPECT_EQ(node_count(clone), 5u);
    // A new allocation of the clone is its own, not the original's.
    rtMemAllocNodeParams ap2{64, nullptr};
    ASSERT_RT_OK(rtGraphAddMemAllocNode(&f, clone, nullptr, 0, &ap2));
    rtMemsetNodeParams sp2{ap2.ptr, 0, 64};
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphAddMemsetNode(&f, graph_, nullptr, 0, &sp2));
    // Destroying the original leaves the clone whole.
    EXPECT_RT_OK(rtGraphDestroy(graph_));
    graph_ = nullptr;
    EXPECT_EQ(node_count(clone), 6u);
    EXPECT_EQ(type_of(cn[1]), RT_GRAPH_NODE_TYPE_MEMSET);
    EXPECT_RT_OK(rtGraphDestroy(clone));
}

TEST_P(GraphBuild, DestroyInvalidatesTheGraphAndItsNodeHandles) {
    rtGraphNode_t a = add_empty(graph_);
    rtGraphNode_t b = add_empty(graph_, {a});
    ASSERT_RT_OK(rtGraphDestroy(graph_));
    rtGraphNodeType t;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphNodeGetType(a, &t));
    EXPECT_TRUE(contains(last_message(), "not a live graph node"));
    size_t count = 0;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphNodeGetDependencies(b, nullptr, &count));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphGetNodes(graph_, nullptr, &count));
    rtGraphNode_t n = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphAddEmptyNode(&n, graph_, nullptr, 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphDestroy(graph_));
    rtGraph_t clone = nullptr;
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphClone(&clone, graph_));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphDebugDotPrint(graph_, "/dev/null", 0));
    graph_ = nullptr;
    // New graphs never revive old handles.
    rtGraph_t g = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&g, 0));
    add_empty(g);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphNodeGetType(a, &t));
    EXPECT_RT_OK(rtGraphDestroy(g));
}

// ---------------------------------------------------------------- DOT

TEST_P(GraphBuild, DotOutputParsesWithANodePerNodeAndAnEdgePerDependency) {
    int32_t n = 16;
    float factor = 2.0f;
    void* args[] = {&dev_, &dev2_, &n, &factor};
    rtKernelNodeParams kp = kernel_params(args);
    rtGraphNode_t k = nullptr, c = nullptr, h = nullptr;
    ASSERT_RT_OK(rtGraphAddKernelNode(&k, graph_, nullptr, 0, &kp));
    std::vector<unsigned char> host(kBytes);
    rtMemcpyNodeParams cp{host.data(), dev2_, kBytes, RT_MEMCPY_DEVICE_TO_HOST};
    ASSERT_RT_OK(rtGraphAddMemcpyNode(&c, graph_, &k, 1, &cp));
    rtHostNodeParams hp{noop_host, &n};
    ASSERT_RT_OK(rtGraphAddHostNode(&h, graph_, &k, 1, &hp));
    rtGraphNode_t e = add_empty(graph_, {c, h});
    rtMemAllocNodeParams ap{512, nullptr};
    rtGraphNode_t al = nullptr, fr = nullptr;
    ASSERT_RT_OK(rtGraphAddMemAllocNode(&al, graph_, &e, 1, &ap));
    ASSERT_RT_OK(rtGraphAddMemFreeNode(&fr, graph_, &al, 1, ap.ptr));
    ASSERT_RT_OK(rtGraphBindName(graph_, "result", host.data(), kBytes));

    for (unsigned flags : {0u, RT_GRAPH_DEBUG_DOT_FLAGS_VERBOSE}) {
        SCOPED_TRACE(flags);
        std::string text;
        Dot d = dot_of(graph_, flags, &text);
        ASSERT_EQ(d.nodes.size(), 6u) << text;
        const std::vector<std::pair<std::string, std::string>> edges{
            {"n0", "n1"}, {"n0", "n2"}, {"n1", "n3"}, {"n2", "n3"}, {"n3", "n4"}, {"n4", "n5"}};
        EXPECT_EQ(d.edges, edges) << text;
        EXPECT_TRUE(contains(d.nodes["n0"]["label"], "node 0 (kernel 'scale')"));
        EXPECT_TRUE(contains(d.nodes["n1"]["label"], "node 1 (memcpy device→host 4096 B)"));
        EXPECT_TRUE(contains(d.nodes["n2"]["label"], "node 2 (host function)"));
        EXPECT_TRUE(contains(d.nodes["n3"]["label"], "node 3 (empty)"));
        EXPECT_TRUE(contains(d.nodes["n4"]["label"], "node 4 (alloc 512 B)"));
        EXPECT_TRUE(contains(d.nodes["n5"]["label"], "node 5 (free)"));
        EXPECT_TRUE(contains(d.graph_attrs["label"], "6 nodes"));
        const bool verbose = flags != 0;
        EXPECT_EQ(contains(d.nodes["n1"]["label"], "src " + ptr_text(dev2_)), verbose);
        EXPECT_EQ(contains(d.nodes["n2"]["label"], "user_data " + ptr_text(&n)), verbose);
        EXPECT_EQ(contains(d.nodes["n4"]["label"], "address " + ptr_text(ap.ptr)), verbose);
        EXPECT_EQ(contains(d.graph_attrs["label"], "buffer 'result'"), verbose);
        EXPECT_EQ(contains(d.nodes["n0"]["label"], "arg 2 (4 B): 0x10"), verbose);
        // Graphviz itself, where it is installed.
        if (std::system("command -v dot >/dev/null 2>&1") == 0) {
            const std::string cmd = "dot -Tcanon '" + files_.back() + "' >/dev/null";
            EXPECT_EQ(std::system(cmd.c_str()), 0) << text;
        }
    }
}

TEST_P(GraphBuild, DotPrintRefusesBadArguments) {
    add_empty(graph_);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphDebugDotPrint(graph_, nullptr, 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphDebugDotPrint(graph_, "", 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphDebugDotPrint(graph_, "/dev/null", 2));
    EXPECT_TRUE(contains(last_message(), "flags 0x2"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphDebugDotPrint(graph_, "/nonexistent-dir/x.dot", 0));
    EXPECT_TRUE(contains(last_message(), "/nonexistent-dir/x.dot"));
    EXPECT_RT_OK(rtGraphDebugDotPrint(graph_, "/dev/null", RT_GRAPH_DEBUG_DOT_FLAGS_VERBOSE));
    // An empty graph is a valid digraph too.
    rtGraph_t g = nullptr;
    ASSERT_RT_OK(rtGraphCreate(&g, 0));
    Dot d = dot_of(g, 0);
    EXPECT_TRUE(d.nodes.empty());
    EXPECT_RT_OK(rtGraphDestroy(g));
}

// ---------------------------------------------------------------- named buffers

TEST_P(GraphBuild, BindNameChecksNamesAndRanges) {
    std::vector<unsigned char> host(kBytes);
    EXPECT_RT_ERROR(RT_ERROR_INVALID_HANDLE, rtGraphBindName(nullptr, "in", dev_, kBytes));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphBindName(graph_, nullptr, dev_, kBytes));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphBindName(graph_, "", dev_, kBytes));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphBindName(graph_, std::string(64, 'a').c_str(), dev_, kBytes));
    EXPECT_TRUE(contains(last_message(), "64 characters"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphBindName(graph_, "in put", dev_, kBytes));
    EXPECT_TRUE(contains(last_message(), "character 2 (0x20)"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphBindName(graph_, "in/x", dev_, kBytes));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphBindName(graph_, "in", nullptr, kBytes));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphBindName(graph_, "in", dev_, 0));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphBindName(graph_, "in", dev_, kBytes + 1));
    EXPECT_TRUE(contains(last_message(), "only 4096 bytes available"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtGraphBindName(graph_, "in", reinterpret_cast<void*>(UINTPTR_MAX - 8), 64));
    EXPECT_TRUE(contains(last_message(), "wraps"));
    rtMemAllocNodeParams ap{kBytes, nullptr};
    rtGraphNode_t al = nullptr;
    ASSERT_RT_OK(rtGraphAddMemAllocNode(&al, graph_, nullptr, 0, &ap));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphBindName(graph_, "tmp", ap.ptr, 64));
    EXPECT_TRUE(contains(last_message(), "allocation node 0"));

    ASSERT_RT_OK(rtGraphBindName(graph_, "in", dev_, kBytes));
    ASSERT_RT_OK(rtGraphBindName(graph_, std::string(63, 'z').c_str(), host.data(), 1024));
    ASSERT_RT_OK(rtGraphBindName(graph_, "A.b-c_9", host.data() + 1024, 1024));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphBindName(graph_, "in", dev2_, kBytes));
    EXPECT_TRUE(contains(last_message(), "already has a buffer named 'in'"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE,
                    rtGraphBindName(graph_, "out", static_cast<char*>(dev_) + kBytes - 1, 1));
    EXPECT_TRUE(contains(last_message(), "overlaps buffer 'in'"));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphBindName(graph_, "out", host.data() + 1000, 48));
    EXPECT_TRUE(contains(last_message(), "overlaps"));
    // Adjacent ranges do not overlap.
    ASSERT_RT_OK(rtGraphBindName(graph_, "out", host.data() + 2048, 2048));
    Dot d = dot_of(graph_, RT_GRAPH_DEBUG_DOT_FLAGS_VERBOSE);
    EXPECT_TRUE(contains(d.graph_attrs["label"], "buffer 'in': " + ptr_text(dev_) + ", 4096 B"));
    EXPECT_TRUE(contains(d.graph_attrs["label"], "buffer 'A.b-c_9'"));
}

TEST_P(GraphBuild, BindNameRefusesDeviceMemoryOfAnotherDevice) {
    int count = 0;
    ASSERT_RT_OK(rtGetDeviceCount(&count));
    const int other = (GetParam() + 1) % count;
    if (other == GetParam()) GTEST_SKIP() << "one device";
    ASSERT_RT_OK(rtSetDevice(other));
    void* p = nullptr;
    ASSERT_RT_OK(rtMalloc(&p, 64));
    ASSERT_RT_OK(rtSetDevice(GetParam()));
    EXPECT_RT_ERROR(RT_ERROR_INVALID_VALUE, rtGraphBindName(graph_, "in", p, 64));
    EXPECT_TRUE(contains(last_message(), "device memory of"));
    EXPECT_RT_OK(rtFree(p));
}

INSTANTIATE_TEST_SUITE_P(AllDevices, GraphBuild, ::testing::ValuesIn(device_indices()), device_param_name);

}  // namespace
