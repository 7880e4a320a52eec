// Conditional graph nodes (CU_GRAPH_NODE_TYPE_CONDITIONAL: IF, WHILE, SWITCH) for graphs replayed
// by the client (api_graph.cc). A conditional handle is a 32-bit word of device memory in its
// context; kernels set it with cudaGraphSetConditional, which the software GPU implements as a
// store to that word (softgpu/README.md). When the executable graph reaches the node, the client
// reads the word in stream order and replays the body graph(s) it selects, as a GPU's scheduler
// would: one round trip per evaluation. NVIDIA's driver resolves cudaGraphSetConditional to its
// own handles, so on other backends handles are refused (CUDA_ERROR_NOT_SUPPORTED).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "client/objects.h"

namespace rgpu::client {

// A handle (cuGraphConditionalHandleCreate). Its word is freed with the last graph, node or
// executable graph holding it.
struct ConditionalHandle {
  CUdeviceptr dptr = 0;
  CUctx_st* ctx = nullptr;
  uint64_t ctx_generation = 0;  // a primary context reset since frees the word with it
  uint32_t default_value = 0;
  bool assign_default = false;  // CU_GRAPH_COND_ASSIGN_DEFAULT: set at every launch
  ConditionalHandle() = default;
  ConditionalHandle(const ConditionalHandle&) = delete;
  ConditionalHandle& operator=(const ConditionalHandle&) = delete;
  ~ConditionalHandle();
};

// A conditional node's kind, handle and body graphs (made with the node, owned by it).
struct ConditionalBody {
  CUgraphConditionalNodeType type = CU_GRAPH_COND_TYPE_IF;
  std::shared_ptr<ConditionalHandle> handle;
  std::vector<CUgraph_st*> bodies;
  ConditionalBody() = default;
  ConditionalBody(const ConditionalBody&) = delete;
  ConditionalBody& operator=(const ConditionalBody&) = delete;
  ~ConditionalBody();  // destroys the body graphs
};

// Makes the handle of a new conditional node in `graph`, in `ctx`.
CUresult CreateConditionalHandle(CUgraph_st* graph, CUctx_st* ctx, unsigned default_value,
                                 unsigned flags, CUgraphConditionalHandle* out);

// Makes a conditional node from `params` (its handle one that cuGraphConditionalHandleCreate
// made and a graph still holds): its body graphs are made and returned in params->phGraph_out.
// objects_mutex not held.
CUresult ConditionalNode(CUDA_CONDITIONAL_NODE_PARAMS* params, GraphNode* node);

// In an executable graph (OrderGraph): the replay of conditional node `node` with its bodies
// as they are now, each ordered; the handles they and `node` use are added to *handles.
// objects_mutex held.
CUresult InstantiateConditional(const GraphNode& node,
                                std::vector<std::shared_ptr<ConditionalHandle>>* handles,
                                std::function<CUresult(CUstream)>* replay);

// At a launch of an executable graph: the handles that take their default value do, in stream
// order on `stream`.
CUresult AssignDefaults(const std::vector<std::shared_ptr<ConditionalHandle>>& handles,
                        CUstream stream);

}  // namespace rgpu::client
