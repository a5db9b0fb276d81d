// Node parameters, validated once for every way a node is made (rtGraphAdd*Node, stream capture, exec updates):
// the same checks as the stream calls of the same kind, with a graph's allocation nodes counted as device memory.
// Also the one wording of a node in messages, DOT output and program labels.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "graph/graph.hpp"

namespace rt::graph {

/// A kernel node's params: validate_launch against the graph's device (shape, arity, argument sizes), the kernel's
/// parameters known (NOT_SUPPORTED otherwise: their values could not be copied), and the argument values copied
/// (args[i] points at argument i; each copied with the function's parameter size, 8-byte aligned, or 16 for
/// arguments of 16 bytes or more). `num_args` < 0 / `arg_sizes` null: not stated by the caller (as validate_launch).
/// `function` must be owned by a shared_ptr (every CoreFunction is: CoreModule::function_handle). Throws.
KernelParams make_kernel_params(const Graph& graph, const CoreFunction& function, backend::LaunchShape shape,
                                void* const* args, int num_args = -1, const size_t* arg_sizes = nullptr);

/// A copy node's params: rtMemcpyAsync's checks (core/memory.hpp check_copy) on a queue of the graph's device, with
/// addresses inside the graph's allocation nodes taken as device memory of the graph's device. `kind` is the C
/// ABI's int (validated); DEFAULT is resolved. 0 bytes: accepted, elided (as rtMemcpyAsync). `api` names the caller.
MemoryParams make_copy_params(const Graph& graph, void* dst, const void* src, size_t bytes, int kind, const char* api);
/// A fill node's params: rtMemsetAsync's checks, as make_copy_params. `value` is taken as a byte (value & 0xff).
MemoryParams make_fill_params(const Graph& graph, void* dst, int value, size_t bytes, const char* api);

/// A MEM_ALLOC node of `bytes` (> 0, else INVALID_VALUE) with a fresh provisional address of the graph (node->address).
std::unique_ptr<Node> make_alloc_node(Graph& graph, size_t bytes, const char* api);
/// A MEM_FREE node for `ptr`, which must be the address of a MEM_ALLOC node of `graph` that no other free node
/// frees and that `deps` reach (the free runs after the allocation): INVALID_VALUE saying which rule failed.
std::unique_ptr<Node> make_free_node(const Graph& graph, void* ptr, const std::vector<Node*>& deps, const char* api);

/// make_kernel_params for the C API's rtKernelNodeParams (`params` non-null): its function handle looked up
/// (INVALID_HANDLE if it is none), its shape taken as given.
KernelParams make_kernel_params(const Graph& graph, const rtKernelNodeParams& params);

/// "host→device": a copy's direction in labels and messages.
const char* copy_direction(backend::CopyKind kind);
/// What a node is, in words: "kernel 'scale'", "memcpy host→device 4096 B", "memset 4096 B", "host function",
/// "child graph (3 nodes)", "empty", "event record", "event wait", "alloc 4096 B", "free".
std::string node_kind_text(const Node& node);
/// The label of a node in messages and DOT output: "node 3 (kernel 'scale')". `id` replaces the node's index (a
/// flattened child node: "4.1").
std::string node_label(const Node& node);
std::string node_label(const Node& node, std::string_view id);
/// The name of a node type: "kernel", "memcpy", ... ("node type 42" for a value that is none).
const char* node_type_name(rtGraphNodeType type);

}  // namespace rt::graph
