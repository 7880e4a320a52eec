// Stream capture and CUDA graphs, kept in the client: while a stream captures, its kernel
// launches, copies, memsets and host functions are recorded (arguments by value, host buffers by
// reference, as CUDA does) instead of sent; launching the instantiated graph replays them in
// order on the launch stream.
#include <algorithm>
#include <atomic>
#include <map>
#include <queue>

#include "client/graph_order.h"
#include "client/impl.h"

using rgpu::client::ClientState;
using rgpu::client::GraphNode;
using rgpu::client::ObjectKind;

namespace {

CUresult CheckStream(CUstream s) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  if (s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (!ClientState::Get().IsLive(s) || s->kind != ObjectKind::kStream) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  return CUDA_SUCCESS;
}

std::atomic<uint64_t> g_next_capture_id{1};

}  // namespace

RGPU_IMPL(cuStreamBeginCapture_v2)(CUstream s, CUstreamCaptureMode mode) {
  CUresult r = CheckStream(s);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  if (s->capture != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  s->capture = new CUgraph_st();
  s->capture->streams.push_back(s);
  s->capture_id = g_next_capture_id++;
  return CUDA_SUCCESS;
}
RGPU_SAME_AS(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture_v2)

RGPU_IMPL(cuStreamEndCapture)(CUstream s, CUgraph* graph) {
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckStream(s);
  if (r != CUDA_SUCCESS) return r;
  CUgraph_st* g;
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    if (s->capture == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
    g = s->capture;
    // Every stream that joined the capture leaves it, and its events stop marking it.
    for (CUstream joined : g->streams) {
      if (ClientState::Get().IsLive(joined) && joined->capture == g) joined->capture = nullptr;
    }
    for (CUevent e : g->events) {
      if (ClientState::Get().IsLive(e) && e->captured_in == g) e->captured_in = nullptr;
    }
    g->streams.clear();
    g->events.clear();
  }
  ClientState::Get().Register(g);
  *graph = g;
  return CUDA_SUCCESS;
}
RGPU_SAME_AS(cuStreamEndCapture_ptsz, cuStreamEndCapture)

RGPU_IMPL(cuStreamIsCapturing)(CUstream s, CUstreamCaptureStatus* status) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
    return ClientState::Get().CheckInitialized();
  }
  CUresult r = CheckStream(s);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  if (s->capture != nullptr) *status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}
RGPU_SAME_AS(cuStreamIsCapturing_ptsz, cuStreamIsCapturing)

RGPU_IMPL(cuStreamGetCaptureInfo_v3)
(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
 const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* num_deps) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r = rgpu_impl_cuStreamIsCapturing(s, &st);
  if (r != CUDA_SUCCESS) return r;
  if (status != nullptr) *status = st;
  if (st == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    if (id != nullptr) *id = s->capture_id;
    if (graph != nullptr) *graph = s->capture;
  } else if (graph != nullptr) {
    *graph = nullptr;
  }
  // Graph nodes are not exposed as handles.
  if (deps != nullptr) *deps = nullptr;
  if (edges != nullptr) *edges = nullptr;
  if (num_deps != nullptr) *num_deps = 0;
  return CUDA_SUCCESS;
}
RGPU_SAME_AS(cuStreamGetCaptureInfo_v3_ptsz, cuStreamGetCaptureInfo_v3)

RGPU_IMPL(cuGraphCreate)(CUgraph* graph, unsigned int flags) {
  if (graph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  auto* g = new CUgraph_st();
  ClientState::Get().Register(g);
  *graph = g;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuGraphDestroy)(CUgraph graph) {
  if (!ClientState::Get().IsLive(graph) || graph->kind != ObjectKind::kGraph) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  ClientState::Get().Unregister(graph);
  for (const GraphNode& node : graph->nodes) ClientState::Get().Unregister(&node);
  delete graph;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuGraphInstantiateWithFlags)(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ClientState::Get().IsLive(graph) || graph->kind != ObjectKind::kGraph) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto* e = new CUgraphExec_st();
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    CUresult r = rgpu::client::OrderGraph(*graph, &e->nodes);
    if (r != CUDA_SUCCESS) {
      delete e;
      return r;
    }
  }
  ClientState::Get().Register(e);
  *exec = e;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuGraphInstantiateWithParams)
(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  CUresult r = rgpu_impl_cuGraphInstantiateWithFlags(exec, graph, params ? params->flags : 0);
  if (params != nullptr) {
    params->result_out =
        r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    params->hErrNode_out = nullptr;
  }
  return r;
}
RGPU_SAME_AS(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams)

RGPU_IMPL(cuGraphExecDestroy)(CUgraphExec exec) {
  if (!ClientState::Get().IsLive(exec) || exec->kind != ObjectKind::kGraphExec) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  ClientState::Get().Unregister(exec);
  delete exec;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuGraphLaunch)(CUgraphExec exec, CUstream stream) {
  if (!ClientState::Get().IsLive(exec) || exec->kind != ObjectKind::kGraphExec) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // A graph launched into a capturing stream becomes part of that capture.
  if (rgpu::client::Defer(stream, CU_GRAPH_NODE_TYPE_GRAPH,
                          [exec](CUstream s) { return rgpu_impl_cuGraphLaunch(exec, s); })) {
    return CUDA_SUCCESS;
  }
  for (const GraphNode& node : exec->nodes) {
    CUresult r = node.replay(stream);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}
RGPU_SAME_AS(cuGraphLaunch_ptsz, cuGraphLaunch)

RGPU_IMPL(cuGraphGetNodes)(CUgraph graph, CUgraphNode* nodes, size_t* count) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ClientState::Get().IsLive(graph) || graph->kind != ObjectKind::kGraph) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  std::vector<CUgraphNode> live;
  for (GraphNode& node : graph->nodes) {
    if (!node.destroyed) live.push_back(&node);
  }
  if (nodes != nullptr) {
    for (size_t i = 0; i < *count; ++i) nodes[i] = i < live.size() ? live[i] : nullptr;
  }
  *count = live.size();
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuGraphNodeGetType)(CUgraphNode node, CUgraphNodeType* type) {
  if (type == nullptr || !ClientState::Get().IsLive(node)) return CUDA_ERROR_INVALID_VALUE;
  *type = node->type;
  return CUDA_SUCCESS;
}

// Earlier ABI revisions.
extern "C" __attribute__((visibility("default"))) CUresult rgpu_impl_cuStreamBeginCapture(
    CUstream s) {
  return rgpu_impl_cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
}
RGPU_SAME_AS(cuStreamBeginCapture_ptsz, cuStreamBeginCapture)

extern "C" __attribute__((visibility("default"))) CUresult rgpu_impl_cuStreamGetCaptureInfo(
    CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id) {
  return rgpu_impl_cuStreamGetCaptureInfo_v3(s, status, id, nullptr, nullptr, nullptr, nullptr);
}
RGPU_SAME_AS(cuStreamGetCaptureInfo_ptsz, cuStreamGetCaptureInfo)

extern "C" __attribute__((visibility("default"))) CUresult rgpu_impl_cuStreamGetCaptureInfo_v2(
    CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
    const CUgraphNode** deps, size_t* num_deps) {
  return rgpu_impl_cuStreamGetCaptureInfo_v3(s, status, id, graph, deps, nullptr, num_deps);
}
RGPU_SAME_AS(cuStreamGetCaptureInfo_v2_ptsz, cuStreamGetCaptureInfo_v2)

extern "C" __attribute__((visibility("default"))) CUresult rgpu_impl_cuGraphInstantiate_v2(
    CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log, size_t log_size) {
  if (error_node != nullptr) *error_node = nullptr;
  if (log != nullptr && log_size > 0) log[0] = '\0';
  return rgpu_impl_cuGraphInstantiateWithFlags(exec, graph, 0);
}
RGPU_SAME_AS(cuGraphInstantiate, cuGraphInstantiate_v2)

namespace rgpu::client {

CUresult OrderGraph(const CUgraph_st& graph, std::vector<GraphNode>* order) {
  // Kahn's algorithm, always taking the earliest-added node whose dependencies have all run.
  std::map<const GraphNode*, size_t> index;
  std::vector<const GraphNode*> nodes;
  for (const GraphNode& n : graph.nodes) {
    if (n.destroyed) continue;
    index[&n] = nodes.size();
    nodes.push_back(&n);
  }
  std::vector<size_t> waiting(nodes.size(), 0);
  std::vector<std::vector<size_t>> dependents(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const GraphNode* d : nodes[i]->deps) {
      auto it = index.find(d);
      if (it == index.end()) continue;  // a destroyed node
      ++waiting[i];
      dependents[it->second].push_back(i);
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (waiting[i] == 0) ready.push(i);
  }
  order->clear();
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    GraphNode copy = *nodes[i];
    copy.origin = nodes[i];
    copy.graph = nullptr;
    copy.deps.clear();
    order->push_back(std::move(copy));
    for (size_t j : dependents[i]) {
      if (--waiting[j] == 0) ready.push(j);
    }
  }
  if (order->size() != nodes.size()) {
    order->clear();
    return CUDA_ERROR_INVALID_VALUE;  // a cycle
  }
  return CUDA_SUCCESS;
}

}  // namespace rgpu::client
