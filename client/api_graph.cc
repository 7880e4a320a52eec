// Stream capture and CUDA graphs, kept in the client: while a stream captures, its kernel
// launches, copies, memsets and host functions are recorded (arguments by value, host buffers by
// reference, as CUDA does) instead of sent; launching the instantiated graph replays them in
// order on the launch stream.
#include <algorithm>
#include <atomic>
#include <map>
#include <queue>

#include "client/graph_child.h"
#include "client/graph_conditional.h"
#include "client/graph_order.h"
#include "client/graph_record.h"
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
  // A graph already: cuStreamGetCaptureInfo hands it out and the program may add nodes to it.
  ClientState::Get().Register(s->capture);
  return CUDA_SUCCESS;
}
RGPU_PER_THREAD_SAME_AS(cuStreamBeginCapture_v2_ptsz)

RGPU_IMPL(cuStreamBeginCaptureToGraph)
(CUstream s, CUgraph graph, const CUgraphNode* deps, const CUgraphEdgeData* edges, size_t n,
 CUstreamCaptureMode) {
  CUresult r = CheckStream(s);
  if (r != CUDA_SUCCESS) return r;
  if (!ClientState::Get().IsLive(graph) || graph->kind != ObjectKind::kGraph ||
      (n > 0 && deps == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; edges != nullptr && i < n; ++i) {
    if (edges[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT) {
      RGPU_LOG_WARN("cuStreamBeginCaptureToGraph: programmatic dependency edges are not supported");
      return CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  if (s->capture != nullptr || !graph->streams.empty()) return CUDA_ERROR_ILLEGAL_STATE;
  std::vector<CUgraphNode_st*> first;
  for (size_t i = 0; i < n; ++i) {
    bool of_graph = false;
    for (const GraphNode& node : graph->nodes) of_graph |= &node == deps[i] && !node.destroyed;
    if (!of_graph) return CUDA_ERROR_INVALID_VALUE;
    first.push_back(deps[i]);
  }
  s->capture = graph;
  graph->streams.push_back(s);
  graph->captured_into = true;
  graph->next_deps_set = true;  // the first captured node follows `deps` only
  graph->next_deps = std::move(first);
  s->capture_id = g_next_capture_id++;
  return CUDA_SUCCESS;
}
RGPU_PER_THREAD_SAME_AS(cuStreamBeginCaptureToGraph_ptsz)

RGPU_IMPL(cuStreamEndCapture)(CUstream s, CUgraph* graph) {
  CUresult r = CheckStream(s);
  if (r != CUDA_SUCCESS) return r;
  CUgraph_st* g;
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    if (s->capture == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
    g = s->capture;
    if (graph == nullptr && !g->captured_into) return CUDA_ERROR_INVALID_VALUE;
    // Every stream that joined the capture leaves it, and its events stop marking it.
    for (CUstream joined : g->streams) {
      if (ClientState::Get().IsLive(joined) && joined->capture == g) joined->capture = nullptr;
    }
    for (CUevent e : g->events) {
      if (ClientState::Get().IsLive(e) && e->captured_in == g) e->captured_in = nullptr;
    }
    g->streams.clear();
    g->events.clear();
    g->next_deps_set = false;
    g->next_deps.clear();
    if (g->captured_into) {
      // Into a graph the program made: it has it already.
      g->captured_into = false;
      if (graph != nullptr) *graph = g;
      return CUDA_SUCCESS;
    }
  }
  *graph = g;
  return CUDA_SUCCESS;
}
RGPU_PER_THREAD_SAME_AS(cuStreamEndCapture_ptsz)

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
RGPU_PER_THREAD_SAME_AS(cuStreamIsCapturing_ptsz)

RGPU_IMPL(cuStreamGetCaptureInfo_v3)
(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
 const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* num_deps) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r = rgpu_impl_cuStreamIsCapturing(s, &st);
  if (r != CUDA_SUCCESS) return r;
  if (status != nullptr) *status = st;
  if (deps != nullptr) *deps = nullptr;
  if (edges != nullptr) *edges = nullptr;  // every dependency is a plain one
  if (num_deps != nullptr) *num_deps = 0;
  if (st == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    CUgraph_st* g = s->capture;
    if (id != nullptr) *id = s->capture_id;
    if (graph != nullptr) *graph = g;
    // What the next captured node will depend on; valid until the capture's next call.
    g->info_deps = rgpu::client::NextCaptureDeps(*g);
    if (deps != nullptr) *deps = g->info_deps.empty() ? nullptr : g->info_deps.data();
    if (num_deps != nullptr) *num_deps = g->info_deps.size();
  } else if (graph != nullptr) {
    *graph = nullptr;
  }
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuStreamUpdateCaptureDependencies_v2)
(CUstream s, CUgraphNode* deps, const CUgraphEdgeData* edges, size_t n, unsigned int flags) {
  if (n > 0 && deps == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES && flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; edges != nullptr && i < n; ++i) {
    if (edges[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT) return CUDA_ERROR_NOT_SUPPORTED;
  }
  CUresult r = CheckStream(s);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  CUgraph_st* g = s->capture;
  if (g == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  std::vector<CUgraphNode_st*> next = flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES
                                          ? std::vector<CUgraphNode_st*>{}
                                          : rgpu::client::NextCaptureDeps(*g);
  for (size_t i = 0; i < n; ++i) {
    bool of_graph = false;
    for (const GraphNode& node : g->nodes) of_graph |= &node == deps[i] && !node.destroyed;
    if (!of_graph) return CUDA_ERROR_INVALID_VALUE;
    if (std::find(next.begin(), next.end(), deps[i]) == next.end()) next.push_back(deps[i]);
  }
  g->next_deps_set = true;
  g->next_deps = std::move(next);
  return CUDA_SUCCESS;
}
RGPU_PER_THREAD_SAME_AS(cuStreamUpdateCaptureDependencies_v2_ptsz)

extern "C" __attribute__((visibility("default"))) CUresult
rgpu_impl_cuStreamUpdateCaptureDependencies(CUstream s, CUgraphNode* deps, size_t n,
                                            unsigned int flags) {
  return rgpu_impl_cuStreamUpdateCaptureDependencies_v2(s, deps, nullptr, n, flags);
}
RGPU_PER_THREAD_SAME_AS(cuStreamUpdateCaptureDependencies_ptsz)
RGPU_PER_THREAD_SAME_AS(cuStreamGetCaptureInfo_v3_ptsz)

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
  if (!ClientState::Get().IsLive(graph) || graph->kind != ObjectKind::kGraph || graph->body) {
    return CUDA_ERROR_INVALID_VALUE;  // a conditional node's body goes with its node
  }
  ClientState::Get().Unregister(graph);
  for (const GraphNode& node : graph->nodes) ClientState::Get().Unregister(&node);
  delete graph;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuGraphInstantiateWithFlags)
(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ClientState::Get().IsLive(graph) || graph->kind != ObjectKind::kGraph) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto* e = new CUgraphExec_st();
  e->flags = flags;
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    CUresult r = rgpu::client::OrderGraph(*graph, &e->nodes, &e->conditional_handles);
    if (r != CUDA_SUCCESS) {
      delete e;
      return r;
    }
    rgpu::client::CollectUserObjects(*graph, &e->user_objects);
    std::sort(e->conditional_handles.begin(), e->conditional_handles.end());
    e->conditional_handles.erase(
        std::unique(e->conditional_handles.begin(), e->conditional_handles.end()),
        e->conditional_handles.end());
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
RGPU_PER_THREAD_SAME_AS(cuGraphInstantiateWithParams_ptsz)

RGPU_IMPL(cuGraphExecGetFlags)(CUgraphExec exec, cuuint64_t* flags) {
  if (flags == nullptr || !ClientState::Get().IsLive(exec) ||
      exec->kind != ObjectKind::kGraphExec) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Uploading is not a property of the executable graph.
  *flags = exec->flags & ~static_cast<unsigned long long>(CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuGraphExecDestroy)(CUgraphExec exec) {
  if (!ClientState::Get().IsLive(exec) || exec->kind != ObjectKind::kGraphExec) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  ClientState::Get().Unregister(exec);
  rgpu::client::ForgetServerGraphs(exec);
  // What it holds for its launches (user object references) goes once they have run. An error
  // that work left is returned, as any call may return one of earlier asynchronous work.
  const CUresult r = rgpu::client::SettleLaunches(exec);
  delete exec;
  return r;
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
  if (CUresult r = rgpu::client::AssignDefaults(exec->conditional_handles, stream);
      r != CUDA_SUCCESS) {
    return r;
  }
  return rgpu::client::LaunchExec(exec, stream);
}
RGPU_PER_THREAD_SAME_AS(cuGraphLaunch_ptsz)

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
RGPU_PER_THREAD_SAME_AS(cuStreamBeginCapture_ptsz)

extern "C" __attribute__((visibility("default"))) CUresult rgpu_impl_cuStreamGetCaptureInfo(
    CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id) {
  return rgpu_impl_cuStreamGetCaptureInfo_v3(s, status, id, nullptr, nullptr, nullptr, nullptr);
}
RGPU_PER_THREAD_SAME_AS(cuStreamGetCaptureInfo_ptsz)

extern "C" __attribute__((visibility("default"))) CUresult rgpu_impl_cuStreamGetCaptureInfo_v2(
    CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
    const CUgraphNode** deps, size_t* num_deps) {
  return rgpu_impl_cuStreamGetCaptureInfo_v3(s, status, id, graph, deps, nullptr, num_deps);
}
RGPU_PER_THREAD_SAME_AS(cuStreamGetCaptureInfo_v2_ptsz)

extern "C" __attribute__((visibility("default"))) CUresult rgpu_impl_cuGraphInstantiate_v2(
    CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log, size_t log_size) {
  if (error_node != nullptr) *error_node = nullptr;
  if (log != nullptr && log_size > 0) log[0] = '\0';
  return rgpu_impl_cuGraphInstantiateWithFlags(exec, graph, 0);
}
RGPU_SAME_AS(cuGraphInstantiate, cuGraphInstantiate_v2)

namespace rgpu::client {

std::vector<CUgraphNode_st*> NextCaptureDeps(const CUgraph_st& graph) {
  if (graph.next_deps_set) return graph.next_deps;
  for (auto it = graph.nodes.rbegin(); it != graph.nodes.rend(); ++it) {
    if (!it->destroyed) return {const_cast<CUgraphNode_st*>(&*it)};
  }
  return {};
}

CUresult OrderGraph(const CUgraph_st& graph, std::vector<GraphNode>* order,
                    std::vector<std::shared_ptr<ConditionalHandle>>* handles) {
  std::vector<std::shared_ptr<ConditionalHandle>> unused;
  if (handles == nullptr) handles = &unused;
  handles->insert(handles->end(), graph.conditional_handles.begin(),
                  graph.conditional_handles.end());
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
    if (copy.conditional != nullptr) {
      if (CUresult r = InstantiateConditional(copy, handles, &copy.replay); r != CUDA_SUCCESS) {
        order->clear();
        return r;
      }
    }
    if (copy.child != nullptr) {
      const std::shared_ptr<ChildGraph> child = copy.child;  // the graph node's: kept meanwhile
      if (CUresult r = InstantiateChild(*child->graph, &copy); r != CUDA_SUCCESS) {
        order->clear();
        return r;
      }
    }
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

// The calling thread's stream capture mode (cudaThreadExchangeStreamCaptureMode; NCCL sets it
// around its allocations). rgpu does not invalidate a capture for calls its mode calls unsafe
// (every mode behaves as CU_STREAM_CAPTURE_MODE_RELAXED does), so the mode is kept and handed
// back, and changes nothing a correct program sees.
namespace {
thread_local CUstreamCaptureMode t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
}  // namespace

RGPU_IMPL(cuThreadExchangeStreamCaptureMode)(CUstreamCaptureMode* mode) {
  if (mode == nullptr || *mode < CU_STREAM_CAPTURE_MODE_GLOBAL ||
      *mode > CU_STREAM_CAPTURE_MODE_RELAXED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::swap(*mode, t_capture_mode);
  return CUDA_SUCCESS;
}
