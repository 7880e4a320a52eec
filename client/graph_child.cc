#include "client/graph_child.h"

#include <algorithm>
#include <map>

#include "client/graph_conditional.h"
#include "client/graph_order.h"
#include "client/impl.h"

namespace rgpu::client {

ChildGraph::~ChildGraph() {
  if (graph == nullptr) return;
  if (visible) {
    ClientState::Get().Unregister(graph);
    for (const GraphNode& n : graph->nodes) ClientState::Get().Unregister(&n);
  }
  delete graph;  // the graphs of its own child nodes go with their nodes
}

void ChildGraph::Release() {
  if (graph != nullptr) graph->body = false;
  graph = nullptr;
}

std::vector<GraphNode*> LiveNodes(const CUgraph_st& graph) {
  std::vector<GraphNode*> live;
  for (const GraphNode& n : graph.nodes) {
    if (!n.destroyed) live.push_back(const_cast<GraphNode*>(&n));
  }
  return live;
}

void CloneGraph(const CUgraph_st& from, CUgraph_st* to, bool visible) {
  to->conditional_handles = from.conditional_handles;
  to->user_objects.CopyFrom(from.user_objects);  // a clone owns references of its own
  std::map<const GraphNode*, GraphNode*> copy_of;
  for (const GraphNode* n : LiveNodes(from)) {
    GraphNode c = *n;
    c.graph = to;
    c.id = NewGraphNodeId();
    c.cloned_from = n->id;
    c.origin = nullptr;
    if (n->child != nullptr) c.child = EmbedCopy(*n->child->graph, visible);
    to->nodes.push_back(std::move(c));
    copy_of[n] = &to->nodes.back();
    if (visible) ClientState::Get().Register(&to->nodes.back());
  }
  // Same edges, between the copies.
  for (GraphNode& n : to->nodes) {
    std::vector<CUgraphNode_st*> deps;
    for (CUgraphNode_st* d : n.deps) {
      auto it = copy_of.find(d);
      if (it != copy_of.end()) deps.push_back(it->second);
    }
    n.deps = std::move(deps);
  }
}

std::shared_ptr<ChildGraph> EmbedCopy(const CUgraph_st& from, bool visible) {
  auto c = std::make_shared<ChildGraph>();
  c->graph = new CUgraph_st();
  c->graph->body = true;
  c->visible = visible;
  CloneGraph(from, c->graph, visible);
  if (visible) ClientState::Get().Register(c->graph);
  return c;
}

std::shared_ptr<ChildGraph> EmbedMoved(CUgraph_st* graph) {
  auto c = std::make_shared<ChildGraph>();
  c->graph = graph;
  c->graph->body = true;
  c->visible = true;
  return c;
}

void SetNodeWork(GraphNode* node, std::function<CUresult(CUstream)> replay, bool recordable) {
  if (node->enabled) {
    node->replay = std::move(replay);
    node->recordable = recordable;
  } else {
    node->disabled_replay = std::move(replay);
    node->disabled_recordable = recordable;
  }
}

CUresult InstantiateChild(const CUgraph_st& graph, GraphNode* node) {
  std::shared_ptr<ChildGraph> copy = EmbedCopy(graph, /*visible=*/false);
  std::vector<GraphNode> order;
  std::vector<std::shared_ptr<ConditionalHandle>> handles;
  if (CUresult r = OrderGraph(*copy->graph, &order, &handles); r != CUDA_SUCCESS) return r;
  const bool recordable =
      std::all_of(order.begin(), order.end(), [](const GraphNode& n) { return n.recordable; });
  std::function<CUresult(CUstream)> replay = [order = std::move(order),
                                              handles = std::move(handles)](CUstream s) {
    if (CUresult r = AssignDefaults(handles, s); r != CUDA_SUCCESS) return r;
    for (const GraphNode& n : order) {
      if (CUresult r = n.replay(s); r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
  };
  node->child = std::move(copy);
  SetNodeWork(node, std::move(replay), recordable);
  return CUDA_SUCCESS;
}

}  // namespace rgpu::client
