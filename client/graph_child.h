// Child graph nodes and clones (client/api_graph_nodes.cc). As CUDA documents it, a child graph
// node owns an embedded copy of the graph it was given (cuGraphAddChildGraphNode clones it; a
// node added with CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE takes the graph itself):
// cuGraphChildGraphNodeGetGraph hands that graph out, changes to it show in the node, and it goes
// with the node. An executable graph instantiates a private copy of it (so that later changes to
// the node's graph do not reach the executable graph, and cuGraphExecChildGraphNodeSetParams can
// check a new graph against what was instantiated).
#pragma once

#include <cuda.h>

#include <functional>
#include <memory>
#include <vector>

#include "client/objects.h"

namespace rgpu::client {

// A graph a node owns.
struct ChildGraph {
  CUgraph_st* graph = nullptr;  // marked `body`: cuGraphDestroy refuses it
  bool visible = false;         // its handle and its nodes' are registered with ClientState
  ChildGraph() = default;
  ChildGraph(const ChildGraph&) = delete;
  ChildGraph& operator=(const ChildGraph&) = delete;
  ~ChildGraph();  // destroys the graph (unregistering it and its nodes when visible)
  // Gives a moved graph back to the program (its node was not made after all).
  void Release();
};

// A deep copy of `from` in `to` (an empty graph): its live nodes with their edges and its
// conditional handles; the copies of child graph nodes own copies of their graphs. Each copy
// gets a new id and records the id of its node in `cloned_from`. `visible`: the copies (and the
// graphs of child nodes among them) are registered, as handles the program may use. Caller holds
// objects_mutex.
void CloneGraph(const CUgraph_st& from, CUgraph_st* to, bool visible);

// A new graph owned by a node: a copy of `from` (CloneGraph; objects_mutex held).
std::shared_ptr<ChildGraph> EmbedCopy(const CUgraph_st& from, bool visible);

// `graph` itself, moved into a node (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE): it stays registered.
std::shared_ptr<ChildGraph> EmbedMoved(CUgraph_st* graph);

// In an executable graph (OrderGraph, cuGraphExecChildGraphNodeSetParams): gives child graph node
// `node` a private copy of `graph` as its `child`, and the replay of that copy's nodes in order
// (with its recordable flag). objects_mutex held.
CUresult InstantiateChild(const CUgraph_st& graph, GraphNode* node);

// Gives `node` the work `replay` (and whether the server may keep it, client/graph_record.h); a
// disabled node of an executable graph keeps it for when it is enabled again.
void SetNodeWork(GraphNode* node, std::function<CUresult(CUstream)> replay, bool recordable);

// The live nodes of `graph` in the order they were added (objects_mutex held).
std::vector<GraphNode*> LiveNodes(const CUgraph_st& graph);

}  // namespace rgpu::client
