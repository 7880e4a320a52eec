// The order an executable graph runs its nodes in (client/api_graph.cc, api_graph_nodes.cc).
#pragma once

#include <cuda.h>

#include <memory>
#include <vector>

#include "client/objects.h"

namespace rgpu::client {

// Copies the live nodes of `graph` into *order so that every node comes after the nodes it
// depends on, and otherwise in the order they were added (captured work stays in capture order);
// each copy's `origin` is its node in `graph` and its dependencies are cleared; conditional
// nodes get their executable replay (client/graph_conditional.h), child graph nodes a private
// copy of their graph and its replay (client/graph_child.h), and the conditional handles
// of `graph` and its bodies are added to *handles (when not null). Caller holds objects_mutex.
// CUDA_ERROR_INVALID_VALUE when the dependencies form a cycle.
CUresult OrderGraph(const CUgraph_st& graph, std::vector<GraphNode>* order,
                    std::vector<std::shared_ptr<ConditionalHandle>>* handles = nullptr);

// The nodes the next node captured into `graph` depends on: those the program set
// (cuStreamBeginCaptureToGraph, cuStreamUpdateCaptureDependencies), else the last node. Caller
// holds objects_mutex.
std::vector<CUgraphNode_st*> NextCaptureDeps(const CUgraph_st& graph);

}  // namespace rgpu::client
