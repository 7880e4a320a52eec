// Graphs built node by node (cuGraphAdd*Node, cuGraphAddNode), their dependencies, parameters,
// clones and updates of executable graphs. Nodes are kept in the client like captured ones
// (api_graph.cc): an executable graph runs its nodes in an order that respects every dependency
// (a serial schedule is one a GPU may choose), each replayed on the launch stream. Kernel nodes
// copy their arguments by value when added, as CUDA does; copies, memsets, host functions,
// event records and waits and child graphs are replayed through the same entry points a
// program would call.
#include <algorithm>
#include <cstring>
#include <queue>

#include "client/graph_conditional.h"
#include "client/graph_memory.h"
#include "client/graph_order.h"
#include "client/graph_record.h"
#include "client/impl.h"

using rgpu::client::ClientState;
using rgpu::client::GraphKernel;
using rgpu::client::GraphNode;
using rgpu::client::ObjectKind;

// Earlier ABI revisions whose names cuda.h maps to the current ones (cuGraphAddKernelNode is
// cuGraphAddKernelNode_v2 to a program compiled today): defined under their exported names.
#define RGPU_REVISION_IMPL(name) \
  extern "C" __attribute__((visibility("default"))) CUresult rgpu_impl_##name

namespace {

// Edge data other than a plain dependency (programmatic launch edges) is not supported.
bool PlainEdges(const CUgraphEdgeData* edges, size_t n) {
  if (edges == nullptr) return true;
  for (size_t i = 0; i < n; ++i) {
    if (edges[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT || edges[i].from_port != 0 ||
        edges[i].to_port != 0) {
      return false;
    }
  }
  return true;
}

bool LiveGraph(CUgraph g) { return ClientState::Get().IsLive(g) && g->kind == ObjectKind::kGraph; }

// True when `node` is a live node of `graph` (objects_mutex held).
bool NodeOf(CUgraph graph, CUgraphNode node) {
  if (node == nullptr) return false;
  for (const GraphNode& n : graph->nodes) {
    if (&n == node) return !n.destroyed;
  }
  return false;
}

// A live node (every node of a graph is registered with ClientState while it lives); its graph
// in *graph.
bool LiveNode(CUgraphNode node, CUgraph* graph) {
  if (!ClientState::Get().IsLive(node) || node->destroyed || node->graph == nullptr) return false;
  *graph = node->graph;
  return true;
}

// Adds a node of `type` to `graph` after `deps`; *out receives it.
CUresult AddNode(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t num_deps,
                 GraphNode node) {
  if (out == nullptr || (num_deps > 0 && deps == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  if (!LiveGraph(graph)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  for (size_t i = 0; i < num_deps; ++i) {
    if (!NodeOf(graph, deps[i])) return CUDA_ERROR_INVALID_VALUE;
    if (std::find(node.deps.begin(), node.deps.end(), deps[i]) != node.deps.end()) {
      return CUDA_ERROR_INVALID_VALUE;  // the same dependency twice
    }
    node.deps.push_back(deps[i]);
  }
  node.graph = graph;
  graph->nodes.push_back(std::move(node));
  *out = &graph->nodes.back();
  ClientState::Get().Register(*out);
  return CUDA_SUCCESS;
}

// Packs a kernel node's arguments by value, with the function's parameter layout.
CUresult MakeKernel(const CUDA_KERNEL_NODE_PARAMS& p, std::shared_ptr<const GraphKernel>* out) {
  CUfunction f = p.func != nullptr ? p.func : reinterpret_cast<CUfunction>(p.kern);
  CUfunc_st* fn;
  CUresult r = rgpu::client::ResolveFunction(f, &fn);
  if (r != CUDA_SUCCESS) return r;
  auto k = std::make_shared<GraphKernel>();
  k->params = p;
  k->params.func = f;
  k->params.kern = nullptr;
  r = rgpu::client::PackArguments(fn, p.kernelParams, p.extra, &k->args);
  if (r != CUDA_SUCCESS) return r;
  for (const auto& slot : fn->params) k->arg_ptrs.push_back(&k->args[slot.offset]);
  k->params.kernelParams = k->arg_ptrs.empty() ? nullptr : k->arg_ptrs.data();
  k->params.extra = nullptr;
  *out = std::move(k);
  return CUDA_SUCCESS;
}

std::function<CUresult(CUstream)> KernelReplay(std::shared_ptr<const GraphKernel> k) {
  return [k](CUstream s) {
    const CUDA_KERNEL_NODE_PARAMS& p = k->params;
    size_t size = k->args.size();
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, const_cast<char*>(k->args.data()),
                     CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    return rgpu_impl_cuLaunchKernel(p.func, p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX,
                                    p.blockDimY, p.blockDimZ, p.sharedMemBytes, s, nullptr,
                                    k->args.empty() ? nullptr : extra);
  };
}

CUresult KernelNode(const CUDA_KERNEL_NODE_PARAMS* params, GraphNode* node) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<const GraphKernel> k;
  CUresult r = MakeKernel(*params, &k);
  if (r != CUDA_SUCCESS) return r;
  node->type = CU_GRAPH_NODE_TYPE_KERNEL;
  node->recordable = true;
  node->kernel = k;
  node->replay = KernelReplay(k);
  return CUDA_SUCCESS;
}

CUDA_KERNEL_NODE_PARAMS FromV1(const CUDA_KERNEL_NODE_PARAMS_v1& v1) {
  CUDA_KERNEL_NODE_PARAMS p = {};
  p.func = v1.func;
  p.gridDimX = v1.gridDimX;
  p.gridDimY = v1.gridDimY;
  p.gridDimZ = v1.gridDimZ;
  p.blockDimX = v1.blockDimX;
  p.blockDimY = v1.blockDimY;
  p.blockDimZ = v1.blockDimZ;
  p.sharedMemBytes = v1.sharedMemBytes;
  p.kernelParams = v1.kernelParams;
  p.extra = v1.extra;
  return p;
}

CUresult MemcpyNode(const CUDA_MEMCPY3D* copy, GraphNode* node) {
  if (copy == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_MEMCPY3D c = *copy;
  node->type = CU_GRAPH_NODE_TYPE_MEMCPY;
  // Between device memories only: host memory is read or written when the node runs.
  node->recordable =
      c.srcMemoryType == CU_MEMORYTYPE_DEVICE && c.dstMemoryType == CU_MEMORYTYPE_DEVICE;
  node->replay = [c](CUstream s) { return rgpu_impl_cuMemcpy3DAsync_v2(&c, s); };
  return CUDA_SUCCESS;
}

CUresult MemsetNode(const CUDA_MEMSET_NODE_PARAMS* params, GraphNode* node) {
  if (params == nullptr || params->width == 0 || params->height == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const CUDA_MEMSET_NODE_PARAMS m = *params;
  if (m.elementSize != 1 && m.elementSize != 2 && m.elementSize != 4) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  node->type = CU_GRAPH_NODE_TYPE_MEMSET;
  node->recordable = true;
  node->replay = [m](CUstream s) -> CUresult {
    const size_t pitch = m.height == 1 ? m.width * m.elementSize : m.pitch;
    switch (m.elementSize) {
      case 1:
        return rgpu_impl_cuMemsetD2D8Async(m.dst, pitch, static_cast<unsigned char>(m.value),
                                           m.width, m.height, s);
      case 2:
        return rgpu_impl_cuMemsetD2D16Async(m.dst, pitch, static_cast<unsigned short>(m.value),
                                            m.width, m.height, s);
      default:
        return rgpu_impl_cuMemsetD2D32Async(m.dst, pitch, m.value, m.width, m.height, s);
    }
  };
  return CUDA_SUCCESS;
}

CUresult HostNode(const CUDA_HOST_NODE_PARAMS* params, GraphNode* node) {
  if (params == nullptr || params->fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUhostFn fn = params->fn;
  void* data = params->userData;
  node->type = CU_GRAPH_NODE_TYPE_HOST;
  node->replay = [fn, data](CUstream s) { return rgpu_impl_cuLaunchHostFunc(s, fn, data); };
  return CUDA_SUCCESS;
}

CUresult EventNode(CUgraphNodeType type, CUevent event, GraphNode* node) {
  if (!ClientState::Get().IsLive(event) || event->kind != ObjectKind::kEvent) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  node->type = type;
  node->recordable = true;
  if (type == CU_GRAPH_NODE_TYPE_EVENT_RECORD) {
    node->replay = [event](CUstream s) { return rgpu_impl_cuEventRecord(event, s); };
  } else {
    node->replay = [event](CUstream s) { return rgpu_impl_cuStreamWaitEvent(s, event, 0); };
  }
  return CUDA_SUCCESS;
}

CUresult ChildNode(CUgraph child, GraphNode* node) {
  if (!LiveGraph(child)) return CUDA_ERROR_INVALID_VALUE;
  std::vector<GraphNode> order;
  std::vector<std::shared_ptr<rgpu::client::ConditionalHandle>> handles;
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    CUresult r = rgpu::client::OrderGraph(*child, &order, &handles);
    if (r != CUDA_SUCCESS) return r;
  }
  node->type = CU_GRAPH_NODE_TYPE_GRAPH;
  node->recordable =
      std::all_of(order.begin(), order.end(), [](const GraphNode& n) { return n.recordable; });
  node->replay = [order = std::move(order), handles = std::move(handles)](CUstream s) {
    if (CUresult r = rgpu::client::AssignDefaults(handles, s); r != CUDA_SUCCESS) return r;
    for (const GraphNode& n : order) {
      if (CUresult r = n.replay(s); r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
  };
  return CUDA_SUCCESS;
}

// A memory alloc node: the allocation is made now, in the current context, on its device.
CUresult MemAllocNode(CUDA_MEM_ALLOC_NODE_PARAMS* params, GraphNode* node) {
  if (params == nullptr || params->bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  const CUmemPoolProps& props = params->poolProps;
  if (props.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props.location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (props.handleTypes != CU_MEM_HANDLE_TYPE_NONE) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  if (CUresult r = rgpu::client::RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  if (props.location.id != ctx->device) {
    RGPU_LOG_WARN("cuGraphAddMemAllocNode: memory of a device other than the context's");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  for (size_t i = 0; i < params->accessDescCount; ++i) {
    const CUmemAccessDesc& d = params->accessDescs[i];
    if (d.location.type != CU_MEM_LOCATION_TYPE_DEVICE || d.location.id != ctx->device) {
      RGPU_LOG_WARN("cuGraphAddMemAllocNode: peer access to graph memory is not supported");
      return CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  std::shared_ptr<rgpu::client::GraphAllocation> a;
  if (CUresult r = rgpu::client::GraphAllocation::Make(params->bytesize, &a); r != CUDA_SUCCESS) {
    return r;
  }
  params->dptr = a->dptr();
  node->type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  node->replay = [a](CUstream) { return a->Begin(); };
  node->allocation = std::move(a);
  return CUDA_SUCCESS;
}

// A memory free node: `dptr` must be a graph allocation.
CUresult MemFreeNode(CUdeviceptr dptr, GraphNode* node) {
  std::shared_ptr<rgpu::client::GraphAllocation> a = rgpu::client::FindGraphAllocation(dptr);
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  node->type = CU_GRAPH_NODE_TYPE_MEM_FREE;
  node->replay = [a](CUstream) { return a->End(); };
  node->allocation = std::move(a);
  return CUDA_SUCCESS;
}

// Makes a node with `make(args..., &node)` and adds it to `graph` after `deps`.
template <typename Make, typename... Args>
CUresult MakeAndAdd(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t n, Make make,
                    Args... args) {
  GraphNode node;
  CUresult r = make(args..., &node);
  return r != CUDA_SUCCESS ? r : AddNode(out, graph, deps, n, std::move(node));
}

}  // namespace

RGPU_IMPL(cuGraphAddKernelNode_v2)
(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t n,
 const CUDA_KERNEL_NODE_PARAMS* params) {
  return MakeAndAdd(out, graph, deps, n, KernelNode, params);
}

RGPU_REVISION_IMPL(cuGraphAddKernelNode)
(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t n,
 const CUDA_KERNEL_NODE_PARAMS_v1* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_KERNEL_NODE_PARAMS p = FromV1(*params);
  return rgpu_impl_cuGraphAddKernelNode_v2(out, graph, deps, n, &p);
}

RGPU_IMPL(cuGraphAddMemcpyNode)
(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t n, const CUDA_MEMCPY3D* copy,
 CUcontext) {
  return MakeAndAdd(out, graph, deps, n, MemcpyNode, copy);
}

RGPU_IMPL(cuGraphAddMemsetNode)
(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t n,
 const CUDA_MEMSET_NODE_PARAMS* params, CUcontext) {
  return MakeAndAdd(out, graph, deps, n, MemsetNode, params);
}

RGPU_IMPL(cuGraphAddHostNode)
(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t n,
 const CUDA_HOST_NODE_PARAMS* params) {
  return MakeAndAdd(out, graph, deps, n, HostNode, params);
}

RGPU_IMPL(cuGraphAddEmptyNode)
(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t n) {
  GraphNode node;
  node.type = CU_GRAPH_NODE_TYPE_EMPTY;
  node.recordable = true;
  node.replay = [](CUstream) { return CUDA_SUCCESS; };
  return AddNode(out, graph, deps, n, std::move(node));
}

RGPU_IMPL(cuGraphAddEventRecordNode)
(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t n, CUevent event) {
  return MakeAndAdd(out, graph, deps, n, EventNode, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event);
}

RGPU_IMPL(cuGraphAddEventWaitNode)
(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t n, CUevent event) {
  return MakeAndAdd(out, graph, deps, n, EventNode, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event);
}

RGPU_IMPL(cuGraphAddChildGraphNode)
(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t n, CUgraph child) {
  if (child == graph) return CUDA_ERROR_INVALID_VALUE;
  return MakeAndAdd(out, graph, deps, n, ChildNode, child);
}

RGPU_IMPL(cuGraphAddMemAllocNode)
(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t n,
 CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  if (out == nullptr || !LiveGraph(graph)) return CUDA_ERROR_INVALID_VALUE;
  return MakeAndAdd(out, graph, deps, n, MemAllocNode, params);
}

RGPU_IMPL(cuGraphAddMemFreeNode)
(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t n, CUdeviceptr dptr) {
  if (out == nullptr || !LiveGraph(graph)) return CUDA_ERROR_INVALID_VALUE;
  return MakeAndAdd(out, graph, deps, n, MemFreeNode, dptr);
}

RGPU_IMPL(cuGraphMemAllocNodeGetParams)(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  CUgraph graph;
  if (params == nullptr || !LiveNode(node, &graph) || node->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC ||
      node->allocation == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *params = {};
  params->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  params->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  params->poolProps.location.id = node->allocation->device();
  params->bytesize = node->allocation->bytes();
  params->dptr = node->allocation->dptr();
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuGraphMemFreeNodeGetParams)(CUgraphNode node, CUdeviceptr* dptr) {
  CUgraph graph;
  if (dptr == nullptr || !LiveNode(node, &graph) || node->type != CU_GRAPH_NODE_TYPE_MEM_FREE ||
      node->allocation == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *dptr = node->allocation->dptr();
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuDeviceGetGraphMemAttribute)(CUdevice dev, CUgraphMem_attribute attr, void* value) {
  if (CUresult r = ClientState::Get().CheckInitialized(); r != CUDA_SUCCESS) return r;
  if (value == nullptr || dev < 0 || dev >= ClientState::Get().device_count()) {
    return dev < 0 || dev >= ClientState::Get().device_count() ? CUDA_ERROR_INVALID_DEVICE
                                                               : CUDA_ERROR_INVALID_VALUE;
  }
  const rgpu::client::GraphMemoryFigures f = rgpu::client::GraphMemory(dev);
  cuuint64_t* out = static_cast<cuuint64_t*>(value);
  switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
      *out = f.used;
      return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
      *out = f.used_high;
      return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
      *out = f.reserved;
      return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
      *out = f.reserved_high;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

RGPU_IMPL(cuDeviceSetGraphMemAttribute)(CUdevice dev, CUgraphMem_attribute attr, void* value) {
  if (CUresult r = ClientState::Get().CheckInitialized(); r != CUDA_SUCCESS) return r;
  if (dev < 0 || dev >= ClientState::Get().device_count()) return CUDA_ERROR_INVALID_DEVICE;
  // Only the high-water marks can be set, and only to 0 (a reset to the current figures).
  if (value == nullptr || *static_cast<cuuint64_t*>(value) != 0 ||
      (attr != CU_GRAPH_MEM_ATTR_USED_MEM_HIGH && attr != CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  rgpu::client::ResetGraphMemoryHighs(dev);
  return CUDA_SUCCESS;
}

// Graph memory is held only by the graph allocations that exist (each has its own memory, kept
// for its graphs): there is no unused graph memory to release.
RGPU_IMPL(cuDeviceGraphMemTrim)(CUdevice dev) {
  if (CUresult r = ClientState::Get().CheckInitialized(); r != CUDA_SUCCESS) return r;
  return dev < 0 || dev >= ClientState::Get().device_count() ? CUDA_ERROR_INVALID_DEVICE
                                                             : CUDA_SUCCESS;
}

// The generic form: the node types above by their parameters; others are not supported.
RGPU_IMPL(cuGraphAddNode_v2)
(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, const CUgraphEdgeData* edges, size_t n,
 CUgraphNodeParams* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!PlainEdges(edges, n)) {
    RGPU_LOG_WARN("cuGraphAddNode: programmatic dependency edges are not supported");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  GraphNode node;
  CUresult r;
  switch (params->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
      r = KernelNode(reinterpret_cast<const CUDA_KERNEL_NODE_PARAMS*>(&params->kernel), &node);
      break;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      r = MemcpyNode(&params->memcpy.copyParams, &node);
      break;
    case CU_GRAPH_NODE_TYPE_MEMSET:
      r = MemsetNode(reinterpret_cast<const CUDA_MEMSET_NODE_PARAMS*>(&params->memset), &node);
      break;
    case CU_GRAPH_NODE_TYPE_HOST:
      r = HostNode(reinterpret_cast<const CUDA_HOST_NODE_PARAMS*>(&params->host), &node);
      break;
    case CU_GRAPH_NODE_TYPE_EMPTY:
      return rgpu_impl_cuGraphAddEmptyNode(out, graph, deps, n);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      r = EventNode(params->type, params->eventRecord.event, &node);
      break;
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      r = EventNode(params->type, params->eventWait.event, &node);
      break;
    case CU_GRAPH_NODE_TYPE_GRAPH:
      r = ChildNode(params->graph.graph, &node);
      break;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
      r = MemAllocNode(reinterpret_cast<CUDA_MEM_ALLOC_NODE_PARAMS*>(&params->alloc), &node);
      break;
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      r = MemFreeNode(params->free.dptr, &node);
      break;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
      if (!LiveGraph(graph)) return CUDA_ERROR_INVALID_VALUE;
      r = rgpu::client::ConditionalNode(&params->conditional, &node);
      break;
    default:
      RGPU_LOG_WARN("cuGraphAddNode: node type %d is not supported yet",
                    static_cast<int>(params->type));
      return CUDA_ERROR_NOT_SUPPORTED;
  }
  return r != CUDA_SUCCESS ? r : AddNode(out, graph, deps, n, std::move(node));
}

RGPU_REVISION_IMPL(cuGraphAddNode)
(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t n, CUgraphNodeParams* params) {
  return rgpu_impl_cuGraphAddNode_v2(out, graph, deps, nullptr, n, params);
}

RGPU_REVISION_IMPL(cuGraphAddDependencies)
(CUgraph graph, const CUgraphNode* from, const CUgraphNode* to, size_t n) {
  if (!LiveGraph(graph) || (n > 0 && (from == nullptr || to == nullptr))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  for (size_t i = 0; i < n; ++i) {
    if (!NodeOf(graph, from[i]) || !NodeOf(graph, to[i]) || from[i] == to[i]) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    auto& deps = to[i]->deps;
    if (std::find(deps.begin(), deps.end(), from[i]) != deps.end()) return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < n; ++i) to[i]->deps.push_back(from[i]);
  return CUDA_SUCCESS;
}

RGPU_REVISION_IMPL(cuGraphNodeGetDependencies)(CUgraphNode node, CUgraphNode* deps, size_t* n) {
  if (n == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  CUgraph graph;
  if (!LiveNode(node, &graph)) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUgraphNode> live;
  for (CUgraphNode d : node->deps) {
    if (!d->destroyed) live.push_back(d);
  }
  if (deps != nullptr) {
    for (size_t i = 0; i < *n; ++i) deps[i] = i < live.size() ? live[i] : nullptr;
  }
  *n = live.size();
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuGraphGetRootNodes)(CUgraph graph, CUgraphNode* roots, size_t* n) {
  if (n == nullptr || !LiveGraph(graph)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  std::vector<CUgraphNode> found;
  for (GraphNode& node : graph->nodes) {
    if (node.destroyed) continue;
    const bool root = std::none_of(node.deps.begin(), node.deps.end(),
                                   [](CUgraphNode d) { return !d->destroyed; });
    if (root) found.push_back(&node);
  }
  if (roots != nullptr) {
    for (size_t i = 0; i < *n; ++i) roots[i] = i < found.size() ? found[i] : nullptr;
  }
  *n = found.size();
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuGraphDestroyNode)(CUgraphNode node) {
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  CUgraph graph;
  if (!LiveNode(node, &graph)) return CUDA_ERROR_INVALID_VALUE;
  node->destroyed = true;
  ClientState::Get().Unregister(node);
  node->replay = nullptr;
  node->kernel.reset();
  // Its edges go with it.
  for (GraphNode& other : graph->nodes) std::erase(other.deps, node);
  node->deps.clear();
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuGraphKernelNodeGetParams_v2)(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  CUgraph graph;
  if (!LiveNode(node, &graph) || node->type != CU_GRAPH_NODE_TYPE_KERNEL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (node->kernel == nullptr) {
    RGPU_LOG_WARN("cuGraphKernelNodeGetParams: parameters of captured kernels are not kept");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  *params = node->kernel->params;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuGraphKernelNodeSetParams_v2)(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* params) {
  GraphNode made;
  CUresult r = KernelNode(params, &made);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  CUgraph graph;
  if (!LiveNode(node, &graph) || node->type != CU_GRAPH_NODE_TYPE_KERNEL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  node->kernel = made.kernel;
  node->replay = std::move(made.replay);
  return CUDA_SUCCESS;
}

RGPU_REVISION_IMPL(cuGraphKernelNodeGetParams)
(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS_v1* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS p;
  CUresult r = rgpu_impl_cuGraphKernelNodeGetParams_v2(node, &p);
  if (r != CUDA_SUCCESS) return r;
  *params = {p.func,      p.gridDimX,  p.gridDimY,       p.gridDimZ,     p.blockDimX,
             p.blockDimY, p.blockDimZ, p.sharedMemBytes, p.kernelParams, p.extra};
  return CUDA_SUCCESS;
}

RGPU_REVISION_IMPL(cuGraphKernelNodeSetParams)
(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_KERNEL_NODE_PARAMS p = FromV1(*params);
  return rgpu_impl_cuGraphKernelNodeSetParams_v2(node, &p);
}

RGPU_IMPL(cuGraphExecKernelNodeSetParams_v2)
(CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* params) {
  if (!ClientState::Get().IsLive(exec) || exec->kind != ObjectKind::kGraphExec) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  GraphNode made;
  CUresult r = KernelNode(params, &made);
  if (r != CUDA_SUCCESS) return r;
  rgpu::client::ForgetServerGraphs(exec);  // the server's recordings hold the old parameters
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  for (GraphNode& n : exec->nodes) {
    if (n.origin != node) continue;
    if (n.type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
    n.kernel = made.kernel;
    n.replay = std::move(made.replay);
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;  // not a node this executable graph was made from
}

RGPU_REVISION_IMPL(cuGraphExecKernelNodeSetParams)
(CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_KERNEL_NODE_PARAMS p = FromV1(*params);
  return rgpu_impl_cuGraphExecKernelNodeSetParams_v2(exec, node, &p);
}

// An executable graph takes the parameters of `graph` when both have the same nodes, of the same
// types, in the same dependency order; otherwise it is left as it was.
RGPU_IMPL(cuGraphExecUpdate_v2)
(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo* info) {
  if (!ClientState::Get().IsLive(exec) || exec->kind != ObjectKind::kGraphExec ||
      !LiveGraph(graph)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::vector<GraphNode> order;
  rgpu::client::ForgetServerGraphs(exec);  // the server's recordings hold the old parameters
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  CUresult r = rgpu::client::OrderGraph(*graph, &order);
  if (r != CUDA_SUCCESS) return r;
  CUgraphExecUpdateResult result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  CUgraphNode error_node = nullptr;
  if (order.size() != exec->nodes.size()) {
    result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
  } else {
    for (size_t i = 0; i < order.size(); ++i) {
      if (order[i].type != exec->nodes[i].type) {
        result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        error_node = const_cast<CUgraphNode>(order[i].origin);
        break;
      }
    }
  }
  if (info != nullptr) {
    info->result = result;
    info->errorNode = error_node;
    info->errorFromNode = nullptr;
  }
  if (result != CU_GRAPH_EXEC_UPDATE_SUCCESS) return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  exec->nodes = std::move(order);
  return CUDA_SUCCESS;
}

RGPU_REVISION_IMPL(cuGraphExecUpdate)
(CUgraphExec exec, CUgraph graph, CUgraphNode* error_node, CUgraphExecUpdateResult* result) {
  CUgraphExecUpdateResultInfo info = {};
  CUresult r = rgpu_impl_cuGraphExecUpdate_v2(exec, graph, &info);
  if (error_node != nullptr) *error_node = info.errorNode;
  if (result != nullptr) *result = info.result;
  return r;
}

RGPU_IMPL(cuGraphClone)(CUgraph* clone, CUgraph original) {
  if (clone == nullptr || !LiveGraph(original)) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    for (const GraphNode& n : original->nodes) {
      if (n.conditional != nullptr && !n.destroyed) {
        RGPU_LOG_WARN("cuGraphClone: graphs with conditional nodes cannot be cloned yet");
        return CUDA_ERROR_NOT_SUPPORTED;
      }
    }
  }
  auto* g = new CUgraph_st();
  g->conditional_handles = original->conditional_handles;
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    // Same nodes, same edges, mapped onto the copies.
    std::map<const CUgraphNode_st*, CUgraphNode_st*> copy_of;
    for (const GraphNode& n : original->nodes) {
      g->nodes.push_back(n);
      g->nodes.back().graph = g;
      copy_of[&n] = &g->nodes.back();
      if (!n.destroyed) ClientState::Get().Register(&g->nodes.back());
    }
    for (GraphNode& n : g->nodes) {
      for (CUgraphNode& d : n.deps) d = copy_of[d];
    }
  }
  ClientState::Get().Register(g);
  *clone = g;
  return CUDA_SUCCESS;
}

// Uploading prepares a launch on a GPU; here every launch sends its work as it goes, so there is
// nothing to prepare beyond checking the handles.
RGPU_IMPL(cuGraphUpload)(CUgraphExec exec, CUstream stream) {
  if (!ClientState::Get().IsLive(exec) || exec->kind != ObjectKind::kGraphExec) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUctx_st* ctx;
  uint64_t remote = 0;
  return rgpu::client::ResolveStream(stream, &ctx, &remote);
}
RGPU_SAME_AS(cuGraphUpload_ptsz, cuGraphUpload)

RGPU_IMPL(cuGraphAddDependencies_v2)
(CUgraph graph, const CUgraphNode* from, const CUgraphNode* to, const CUgraphEdgeData* edges,
 size_t n) {
  if (!PlainEdges(edges, n)) {
    RGPU_LOG_WARN("cuGraphAddDependencies: programmatic dependency edges are not supported");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return rgpu_impl_cuGraphAddDependencies(graph, from, to, n);
}

RGPU_IMPL(cuGraphNodeGetDependencies_v2)
(CUgraphNode node, CUgraphNode* deps, CUgraphEdgeData* edges, size_t* n) {
  if (n == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const size_t capacity = *n;
  CUresult r = rgpu_impl_cuGraphNodeGetDependencies(node, deps, n);
  if (r == CUDA_SUCCESS && edges != nullptr && deps != nullptr) {
    for (size_t i = 0; i < capacity; ++i) edges[i] = CUgraphEdgeData{};  // all plain
  }
  return r;
}

RGPU_IMPL(cuGraphConditionalHandleCreate)
(CUgraphConditionalHandle* out, CUgraph graph, CUcontext ctx, unsigned int default_value,
 unsigned int flags) {
  if (out == nullptr || !LiveGraph(graph)) return CUDA_ERROR_INVALID_VALUE;
  if (ctx == nullptr) {
    if (CUresult r = rgpu::client::RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  } else if (CUresult r = rgpu::client::CheckContext(ctx); r != CUDA_SUCCESS) {
    return r;
  }
  return rgpu::client::CreateConditionalHandle(graph, ctx, default_value, flags, out);
}
