// Graphs built node by node (cuGraphAdd*Node, cuGraphAddNode), their dependencies, parameters,
// clones and updates of executable graphs. Nodes are kept in the client like captured ones
// (api_graph.cc): an executable graph runs its nodes in an order that respects every dependency
// (a serial schedule is one a GPU may choose), each replayed on the launch stream. Each node
// keeps its parameters by value as CUDA documents them (kernel arguments are copied when added,
// as CUDA does; a child graph node owns a copy of its graph, client/graph_child.h); copies,
// memsets, host functions, event records and waits and child graphs are replayed through the
// same entry points a program would call. Changes to an executable graph's nodes follow the
// rules cuda.h documents for each, and first drop the server's recordings of the graph
// (client/graph_record.h). Everything here is answered in the client.
#include <algorithm>
#include <cstring>
#include <queue>

#include "client/graph_child.h"
#include "client/graph_conditional.h"
#include "client/graph_memory.h"
#include "client/graph_order.h"
#include "client/graph_record.h"
#include "client/impl.h"
#include "client/memory_map.h"

using rgpu::client::ChildGraph;
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

bool LiveExec(CUgraphExec exec) {
  return ClientState::Get().IsLive(exec) && exec->kind == ObjectKind::kGraphExec;
}

// The node of `exec` instantiated from `node`, which must still be a live node of its graph;
// null when there is none (objects_mutex held).
GraphNode* ExecNodeOf(CUgraphExec exec, CUgraphNode node) {
  CUgraph graph;
  if (!LiveNode(node, &graph)) return nullptr;
  for (GraphNode& n : exec->nodes) {
    if (n.origin == node && n.id == node->id) return &n;
  }
  return nullptr;
}

CUresult DoNothing(CUstream) { return CUDA_SUCCESS; }

// Enables or disables a node of an executable graph: disabled, it does nothing (an empty node).
void SetEnabled(GraphNode* node, bool enabled) {
  if (node->enabled == enabled) return;
  if (enabled) {
    node->replay = std::move(node->disabled_replay);
    node->recordable = node->disabled_recordable;
    node->disabled_replay = nullptr;
  } else {
    node->disabled_replay = std::move(node->replay);
    node->disabled_recordable = node->recordable;
    node->replay = DoNothing;
    node->recordable = true;
  }
  node->enabled = enabled;
}

// Gives `node` the parameters and work of `made` (just made by KernelNode, MemcpyNode, ...): it
// keeps its identity, its edges and, in an executable graph, whether it is enabled.
void TakeParams(GraphNode* node, GraphNode&& made) {
  node->params_known = made.params_known;
  node->kernel = std::move(made.kernel);
  node->copy = made.copy;
  node->memset = made.memset;
  node->ctx = made.ctx;
  node->host = made.host;
  node->event = made.event;
  node->mem_ops = std::move(made.mem_ops);
  node->mem_op_flags = made.mem_op_flags;
  rgpu::client::SetNodeWork(node, std::move(made.replay), made.recordable);
}

// Changes the node of executable graph `exec` made from `node`: `check` (objects_mutex held)
// may refuse the change (it checks the node's type too); then the server's recordings of `exec`
// are forgotten (they hold the old parameters) and `apply` changes the node.
template <typename Check, typename Apply>
CUresult UpdateExecNode(CUgraphExec exec, CUgraphNode node, Check check, Apply apply) {
  if (!LiveExec(exec)) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    GraphNode* n = ExecNodeOf(exec, node);
    if (n == nullptr) return CUDA_ERROR_INVALID_VALUE;  // not a node `exec` was made from
    if (CUresult r = check(*n); r != CUDA_SUCCESS) return r;
  }
  rgpu::client::ForgetServerGraphs(exec);
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  GraphNode* n = ExecNodeOf(exec, node);
  if (n == nullptr) return CUDA_ERROR_INVALID_VALUE;
  apply(n);
  return CUDA_SUCCESS;
}

// A check of UpdateExecNode that only requires the node's type.
auto OfType(CUgraphNodeType type) {
  return [type](const GraphNode& n) {
    return n.type == type ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  };
}

// The context of the device memory at `address`, as far as the client knows it (null: not
// device memory it knows).
CUctx_st* DeviceContextOf(CUdeviceptr address) {
  std::optional<rgpu::client::MemoryRange> range = rgpu::client::Memory().Find(address);
  return range && range->type == CU_MEMORYTYPE_DEVICE ? range->ctx : nullptr;
}

// Where an end of a copy lies, for the rules below: the context of its device memory.
CUctx_st* SourceContext(const CUDA_MEMCPY3D& c) {
  return c.srcMemoryType == CU_MEMORYTYPE_DEVICE || c.srcMemoryType == CU_MEMORYTYPE_UNIFIED
             ? DeviceContextOf(c.srcDevice)
             : nullptr;
}
CUctx_st* DestinationContext(const CUDA_MEMCPY3D& c) {
  return c.dstMemoryType == CU_MEMORYTYPE_DEVICE || c.dstMemoryType == CU_MEMORYTYPE_UNIFIED
             ? DeviceContextOf(c.dstDevice)
             : nullptr;
}

// cuGraphExecMemcpyNodeSetParams's rules: the copies before and after are 1-dimensional and not
// empty, their memory types are the same and their memory belongs to the same contexts (a
// captured copy, whose parameters were not kept, is checked on its own).
CUresult CheckMemcpyUpdate(const GraphNode& was, const CUDA_MEMCPY3D& now, CUcontext ctx) {
  if (now.WidthInBytes == 0 || now.Height != 1 || now.Depth != 1) return CUDA_ERROR_INVALID_VALUE;
  if (!was.params_known) return CUDA_SUCCESS;
  const CUDA_MEMCPY3D& c = was.copy;
  if (c.Height != 1 || c.Depth != 1 || c.srcMemoryType != now.srcMemoryType ||
      c.dstMemoryType != now.dstMemoryType || SourceContext(c) != SourceContext(now) ||
      DestinationContext(c) != DestinationContext(now) ||
      (was.ctx != nullptr && ctx != nullptr && was.ctx != ctx)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// cuGraphExecMemsetNodeSetParams's rules: the destination is the same kind of memory of the same
// context; a 2-dimensional memset keeps its shape, a 1-dimensional one stays 1-dimensional.
CUresult CheckMemsetUpdate(const GraphNode& was, const CUDA_MEMSET_NODE_PARAMS& now,
                           CUcontext ctx) {
  if (!was.params_known) return CUDA_SUCCESS;
  const CUDA_MEMSET_NODE_PARAMS& m = was.memset;
  if (m.height > 1) {
    if (now.width != m.width || now.height != m.height || now.elementSize != m.elementSize ||
        now.pitch != m.pitch) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  } else if (now.height != 1) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const std::optional<rgpu::client::MemoryRange> before = rgpu::client::Memory().Find(m.dst);
  const std::optional<rgpu::client::MemoryRange> after = rgpu::client::Memory().Find(now.dst);
  if (before.has_value() != after.has_value() ||
      (before && (before->type != after->type || before->ctx != after->ctx)) ||
      (was.ctx != nullptr && ctx != nullptr && was.ctx != ctx)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// cuGraphExecKernelNodeSetParams's rule: the function's context does not change.
CUresult CheckKernelUpdate(const GraphNode& was, const GraphKernel& now) {
  if (was.kernel != nullptr && was.kernel->ctx != now.ctx) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult CheckMemOpUpdate(const GraphNode& was, const GraphNode& now);

// Whether `want` has the topology of `have` (as many nodes, of the same types, added in the same
// order, with the same edges; the graphs of child graph nodes alike, recursively), and, for
// `exec_rules`, parameters an executable graph's nodes may take (the rules above). Memory
// alloc, free and conditional nodes cannot change. objects_mutex held.
CUresult SameShape(const CUgraph_st& have, const CUgraph_st& want, bool exec_rules) {
  const std::vector<GraphNode*> a = rgpu::client::LiveNodes(have);
  const std::vector<GraphNode*> b = rgpu::client::LiveNodes(want);
  if (a.size() != b.size()) return CUDA_ERROR_INVALID_VALUE;
  std::map<const GraphNode*, size_t> index_a, index_b;
  for (size_t i = 0; i < a.size(); ++i) {
    index_a[a[i]] = i;
    index_b[b[i]] = i;
  }
  auto edges = [](const GraphNode& n, const std::map<const GraphNode*, size_t>& index) {
    std::vector<size_t> from;
    for (const GraphNode* d : n.deps) {
      auto it = index.find(d);
      if (it != index.end()) from.push_back(it->second);
    }
    std::sort(from.begin(), from.end());
    return from;
  };
  for (size_t i = 0; i < a.size(); ++i) {
    const GraphNode& x = *a[i];
    const GraphNode& y = *b[i];
    if (x.type != y.type || edges(x, index_a) != edges(y, index_b)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult r = CUDA_SUCCESS;
    switch (x.type) {
      case CU_GRAPH_NODE_TYPE_GRAPH:
        // A captured graph launch has no graph of its own to compare.
        if (x.child == nullptr || y.child == nullptr) return CUDA_ERROR_INVALID_VALUE;
        r = SameShape(*x.child->graph, *y.child->graph, exec_rules);
        break;
      case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
      case CU_GRAPH_NODE_TYPE_MEM_FREE:
      case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return CUDA_ERROR_INVALID_VALUE;
      case CU_GRAPH_NODE_TYPE_KERNEL:
        if (exec_rules && y.kernel != nullptr) r = CheckKernelUpdate(x, *y.kernel);
        break;
      case CU_GRAPH_NODE_TYPE_MEMCPY:
        if (exec_rules && y.params_known) r = CheckMemcpyUpdate(x, y.copy, y.ctx);
        break;
      case CU_GRAPH_NODE_TYPE_MEMSET:
        if (exec_rules && y.params_known) r = CheckMemsetUpdate(x, y.memset, y.ctx);
        break;
      case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
        if (exec_rules && y.params_known) r = CheckMemOpUpdate(x, y);
        break;
      default:
        break;
    }
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

// Gives the nodes of `to` the parameters and work of their counterparts in `from`, a graph of the
// same shape (SameShape), recursively into child graphs. objects_mutex held.
void CopyParams(const CUgraph_st& from, CUgraph_st* to) {
  const std::vector<GraphNode*> a = rgpu::client::LiveNodes(*to);
  const std::vector<GraphNode*> b = rgpu::client::LiveNodes(from);
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    GraphNode made;
    made.params_known = b[i]->params_known;
    made.kernel = b[i]->kernel;
    made.copy = b[i]->copy;
    made.memset = b[i]->memset;
    made.ctx = b[i]->ctx;
    made.host = b[i]->host;
    made.event = b[i]->event;
    made.mem_ops = b[i]->mem_ops;
    made.mem_op_flags = b[i]->mem_op_flags;
    made.replay = b[i]->replay;
    made.recordable = b[i]->recordable;
    TakeParams(a[i], std::move(made));
    if (a[i]->child != nullptr && b[i]->child != nullptr) {
      CopyParams(*b[i]->child->graph, a[i]->child->graph);
    }
  }
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
  k->ctx = fn->ctx;
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
    if (!k->attrs.empty()) {
      CUlaunchConfig config = {};
      config.gridDimX = p.gridDimX;
      config.gridDimY = p.gridDimY;
      config.gridDimZ = p.gridDimZ;
      config.blockDimX = p.blockDimX;
      config.blockDimY = p.blockDimY;
      config.blockDimZ = p.blockDimZ;
      config.sharedMemBytes = p.sharedMemBytes;
      config.hStream = s;
      config.attrs = const_cast<CUlaunchAttribute*>(k->attrs.data());
      config.numAttrs = static_cast<unsigned>(k->attrs.size());
      return rgpu_impl_cuLaunchKernelEx(&config, p.func, nullptr,
                                        k->args.empty() ? nullptr : extra);
    }
    return rgpu_impl_cuLaunchKernel(p.func, p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX,
                                    p.blockDimY, p.blockDimZ, p.sharedMemBytes, s, nullptr,
                                    k->args.empty() ? nullptr : extra);
  };
}

// `k` with the launch attributes `attrs` instead of its own (its arguments copied: a
// GraphKernel's parameter pointers point into its own arguments).
std::shared_ptr<const GraphKernel> WithAttributes(const GraphKernel& k,
                                                  std::vector<CUlaunchAttribute> attrs) {
  auto made = std::make_shared<GraphKernel>();
  made->params = k.params;
  made->args = k.args;
  made->ctx = k.ctx;
  for (void* at : k.arg_ptrs) {
    made->arg_ptrs.push_back(made->args.data() + (static_cast<char*>(at) - k.args.data()));
  }
  made->params.kernelParams = made->arg_ptrs.empty() ? nullptr : made->arg_ptrs.data();
  made->attrs = std::move(attrs);
  return made;
}

// A node made anew for a kernel node that had attributes: it keeps them (setting a kernel node's
// parameters leaves its attributes as they were, as on the driver).
void KeepAttributes(const std::shared_ptr<const GraphKernel>& had, GraphNode* made) {
  if (had == nullptr || had->attrs.empty() || made->kernel == nullptr) return;
  made->kernel = WithAttributes(*made->kernel, had->attrs);
  made->replay = KernelReplay(made->kernel);
}

CUresult KernelNode(const CUDA_KERNEL_NODE_PARAMS* params, GraphNode* node) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<const GraphKernel> k;
  CUresult r = MakeKernel(*params, &k);
  if (r != CUDA_SUCCESS) return r;
  node->type = CU_GRAPH_NODE_TYPE_KERNEL;
  node->recordable = true;
  node->params_known = true;
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

// The context a memcpy or memset node runs in: the one given, else the current one.
CUcontext NodeContext(CUcontext ctx) {
  return ctx != nullptr ? ctx : rgpu::client::CurrentContext();
}

CUDA_MEMSET_NODE_PARAMS FromV2(const CUDA_MEMSET_NODE_PARAMS_v2& v2) {
  CUDA_MEMSET_NODE_PARAMS m = {};
  m.dst = v2.dst;
  m.pitch = v2.pitch;
  m.value = v2.value;
  m.elementSize = v2.elementSize;
  m.width = v2.width;
  m.height = v2.height;
  return m;
}

CUDA_BATCH_MEM_OP_NODE_PARAMS FromV2(const CUDA_BATCH_MEM_OP_NODE_PARAMS_v2& v2) {
  CUDA_BATCH_MEM_OP_NODE_PARAMS m = {};
  m.ctx = v2.ctx;
  m.count = v2.count;
  m.paramArray = v2.paramArray;
  m.flags = v2.flags;
  return m;
}

CUresult MemcpyNode(const CUDA_MEMCPY3D* copy, CUcontext ctx, GraphNode* node) {
  if (copy == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_MEMCPY3D c = *copy;
  node->type = CU_GRAPH_NODE_TYPE_MEMCPY;
  node->params_known = true;
  node->copy = c;
  node->ctx = NodeContext(ctx);
  // Between device memories only: host memory is read or written when the node runs.
  node->recordable =
      c.srcMemoryType == CU_MEMORYTYPE_DEVICE && c.dstMemoryType == CU_MEMORYTYPE_DEVICE;
  node->replay = [c](CUstream s) { return rgpu_impl_cuMemcpy3DAsync_v2(&c, s); };
  return CUDA_SUCCESS;
}

CUresult MemsetNode(const CUDA_MEMSET_NODE_PARAMS* params, CUcontext ctx, GraphNode* node) {
  if (params == nullptr || params->width == 0 || params->height == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const CUDA_MEMSET_NODE_PARAMS m = *params;
  if (m.elementSize != 1 && m.elementSize != 2 && m.elementSize != 4) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  node->type = CU_GRAPH_NODE_TYPE_MEMSET;
  node->recordable = true;
  node->params_known = true;
  node->memset = m;
  node->ctx = NodeContext(ctx);
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
  node->params_known = true;
  node->host = *params;
  node->replay = [fn, data](CUstream s) { return rgpu_impl_cuLaunchHostFunc(s, fn, data); };
  return CUDA_SUCCESS;
}

// A batch memory operation node: the operations of a cuStreamBatchMemOp in `params->ctx`,
// checked as the stream call checks them (and again when the node runs), each word device
// memory of that context, not managed memory.
CUresult BatchMemOpNode(const CUDA_BATCH_MEM_OP_NODE_PARAMS* params, GraphNode* node) {
  if (params == nullptr || rgpu::client::CheckContext(params->ctx) != CUDA_SUCCESS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::vector<rgpu::StreamMemOp> ops;
  const char* unsupported = nullptr;
  CUresult r = rgpu::DecodeStreamMemOps(params->count, params->paramArray, params->flags, &ops,
                                        &unsupported);
  if (r == CUDA_ERROR_NOT_SUPPORTED) {
    RGPU_LOG_WARN("cuGraphAddBatchMemOpNode: %s is not supported", unsupported);
  }
  if (r != CUDA_SUCCESS) return r;
  if (ops.empty()) return CUDA_ERROR_INVALID_VALUE;
  for (const rgpu::StreamMemOp& op : ops) {
    if ((r = rgpu::CheckStreamMemOp(op)) != CUDA_SUCCESS) return r;
    if (rgpu::client::IsManagedAddress(op.address) ||
        rgpu::client::CheckDeviceRange(params->ctx, op.address, op.wide ? 8 : 4) != CUDA_SUCCESS) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  node->type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
  node->params_known = true;
  node->ctx = params->ctx;
  node->mem_ops.assign(params->paramArray, params->paramArray + params->count);
  node->mem_op_flags = params->flags;
  node->replay = [ops](CUstream s) { return rgpu::client::SubmitStreamMemOps(s, ops); };
  return CUDA_SUCCESS;
}

// cuGraphExecBatchMemOpNodeSetParams's rule: the context, the number of operations and each
// one's kind stay; addresses, values and a wait's comparison may change (not its flush bit).
CUresult CheckMemOpUpdate(const GraphNode& was, const GraphNode& now) {
  if (was.type != CU_GRAPH_NODE_TYPE_BATCH_MEM_OP || !was.params_known) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (was.ctx != now.ctx || was.mem_ops.size() != now.mem_ops.size()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < was.mem_ops.size(); ++i) {
    const CUstreamBatchMemOpParams &a = was.mem_ops[i], &b = now.mem_ops[i];
    if (a.operation != b.operation) return CUDA_ERROR_INVALID_VALUE;
    const bool wait = a.operation == CU_STREAM_MEM_OP_WAIT_VALUE_32 ||
                      a.operation == CU_STREAM_MEM_OP_WAIT_VALUE_64;
    if (wait && ((a.waitValue.flags ^ b.waitValue.flags) & CU_STREAM_WAIT_VALUE_FLUSH) != 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

CUresult EventNode(CUgraphNodeType type, CUevent event, GraphNode* node) {
  if (!ClientState::Get().IsLive(event) || event->kind != ObjectKind::kEvent) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  node->type = type;
  node->recordable = true;
  node->params_known = true;
  node->event = event;
  if (type == CU_GRAPH_NODE_TYPE_EVENT_RECORD) {
    node->replay = [event](CUstream s) { return rgpu_impl_cuEventRecord(event, s); };
  } else {
    node->replay = [event](CUstream s) { return rgpu_impl_cuStreamWaitEvent(s, event, 0); };
  }
  return CUDA_SUCCESS;
}

// True when `graph` is `inner` or holds it in a child graph node, at any depth (objects_mutex
// held).
bool Holds(const CUgraph_st& graph, const CUgraph_st* inner) {
  if (&graph == inner) return true;
  for (const GraphNode* n : rgpu::client::LiveNodes(graph)) {
    if (n->child != nullptr && Holds(*n->child->graph, inner)) return true;
  }
  return false;
}

// A child graph node of `parent`: it owns a copy of `child` (which may not hold memory alloc, free
// or conditional nodes), or with CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE `child` itself (the caller
// gives it back with ChildGraph::Release if the node is not added after all). Its replay is made
// when a graph holding it is instantiated (OrderGraph).
CUresult ChildNode(CUgraph parent, CUgraph child, CUgraphChildGraphNodeOwnership ownership,
                   GraphNode* node) {
  if (!LiveGraph(child) || child == parent) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  if (ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) {
    // Not a graph another node owns, nor one a stream captures into, nor one that holds the
    // parent (it would own itself).
    if (child->body || !child->streams.empty() || Holds(*child, parent)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    node->child = rgpu::client::EmbedMoved(child);
  } else if (ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE) {
    for (const GraphNode* n : rgpu::client::LiveNodes(*child)) {
      if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || n->type == CU_GRAPH_NODE_TYPE_MEM_FREE ||
          n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    node->child = rgpu::client::EmbedCopy(*child, /*visible=*/true);
  } else {
    return CUDA_ERROR_INVALID_VALUE;
  }
  node->type = CU_GRAPH_NODE_TYPE_GRAPH;
  node->params_known = true;
  node->replay = [](CUstream) {
    return CUDA_ERROR_INVALID_VALUE;  // replayed only once instantiated (OrderGraph)
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

// Checks that `node` is a live node of a graph, of `type` (objects_mutex held).
CUresult NodeOfType(CUgraphNode node, CUgraphNodeType type) {
  CUgraph graph;
  return LiveNode(node, &graph) && node->type == type ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// Gives graph node `node`, of `type`, the parameters made with `make(args..., &made)`.
template <typename Make, typename... Args>
CUresult SetNode(CUgraphNode node, CUgraphNodeType type, Make make, Args... args) {
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    if (CUresult r = NodeOfType(node, type); r != CUDA_SUCCESS) return r;
  }
  GraphNode made;
  if (CUresult r = make(args..., &made); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  if (CUresult r = NodeOfType(node, type); r != CUDA_SUCCESS) return r;
  TakeParams(node, std::move(made));
  return CUDA_SUCCESS;
}

// For the getters: `node` is a live node of `type` whose parameters are known (objects_mutex
// held). A captured node keeps only its work: CUDA_ERROR_NOT_SUPPORTED.
CUresult KnownParams(CUgraphNode node, CUgraphNodeType type, const char* call) {
  if (CUresult r = NodeOfType(node, type); r != CUDA_SUCCESS) return r;
  if (!node->params_known) {
    RGPU_LOG_WARN("%s: the parameters of captured nodes are not kept", call);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_SUCCESS;
}

// The event of a new cuGraphEvent*NodeSetEvent.
CUresult CheckEvent(CUevent event) {
  return ClientState::Get().IsLive(event) && event->kind == ObjectKind::kEvent
             ? CUDA_SUCCESS
             : CUDA_ERROR_INVALID_HANDLE;
}

bool Toggleable(CUgraphNodeType type) {
  return type == CU_GRAPH_NODE_TYPE_KERNEL || type == CU_GRAPH_NODE_TYPE_MEMCPY ||
         type == CU_GRAPH_NODE_TYPE_MEMSET;
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
 CUcontext ctx) {
  return MakeAndAdd(out, graph, deps, n, MemcpyNode, copy, ctx);
}

RGPU_IMPL(cuGraphAddMemsetNode)
(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t n,
 const CUDA_MEMSET_NODE_PARAMS* params, CUcontext ctx) {
  return MakeAndAdd(out, graph, deps, n, MemsetNode, params, ctx);
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
  return MakeAndAdd(out, graph, deps, n, ChildNode, graph, child,
                    CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE);
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
      if (params->memcpy.flags != 0 || params->memcpy.reserved != 0) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      r = MemcpyNode(&params->memcpy.copyParams, params->memcpy.copyCtx, &node);
      break;
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      const CUDA_MEMSET_NODE_PARAMS m = FromV2(params->memset);
      r = MemsetNode(&m, params->memset.ctx, &node);
      break;
    }
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
      r = ChildNode(graph, params->graph.graph, params->graph.ownership, &node);
      if (r == CUDA_SUCCESS && params->graph.ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) {
        std::shared_ptr<ChildGraph> moved = node.child;
        r = AddNode(out, graph, deps, n, std::move(node));
        if (r != CUDA_SUCCESS) moved->Release();  // the program keeps its graph
        return r;
      }
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
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: {
      const CUDA_BATCH_MEM_OP_NODE_PARAMS m = FromV2(params->memOp);
      r = BatchMemOpNode(&m, &node);
      break;
    }
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
  std::shared_ptr<ChildGraph> child;  // a child graph node's graph goes once the lock is released
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  CUgraph graph;
  if (!LiveNode(node, &graph)) return CUDA_ERROR_INVALID_VALUE;
  node->destroyed = true;
  ClientState::Get().Unregister(node);
  node->replay = nullptr;
  node->kernel.reset();
  child = std::move(node->child);
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
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    if (CUresult r = NodeOfType(node, CU_GRAPH_NODE_TYPE_KERNEL); r != CUDA_SUCCESS) return r;
  }
  GraphNode made;
  if (CUresult r = KernelNode(params, &made); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  if (CUresult r = NodeOfType(node, CU_GRAPH_NODE_TYPE_KERNEL); r != CUDA_SUCCESS) return r;
  KeepAttributes(node->kernel, &made);
  TakeParams(node, std::move(made));
  return CUDA_SUCCESS;
}

namespace {

// The launch attributes a kernel node takes (CUkernelNodeAttrID); a device-updatable node is not
// offered (graphs are not updated from the device here).
CUresult CheckKernelNodeAttribute(CUkernelNodeAttrID id, const CUkernelNodeAttrValue& value) {
  switch (id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE:
      if (value.deviceUpdatableKernelNode.deviceUpdatable == 0) return CUDA_SUCCESS;
      RGPU_LOG_WARN(
          "cuGraphKernelNodeSetAttribute: device-updatable kernel nodes are not "
          "supported");
      return CUDA_ERROR_NOT_SUPPORTED;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// A kernel node whose launch is known (added as a node, not captured); objects_mutex held.
CUresult KnownKernelNode(CUgraphNode node, const char* call) {
  if (CUresult r = NodeOfType(node, CU_GRAPH_NODE_TYPE_KERNEL); r != CUDA_SUCCESS) return r;
  if (node->kernel == nullptr) {
    RGPU_LOG_WARN("%s: the launches of captured kernels are not kept", call);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_SUCCESS;
}

// Gives kernel node `node` the attributes `attrs` (objects_mutex held).
void SetKernelAttributes(CUgraphNode node, std::vector<CUlaunchAttribute> attrs) {
  GraphNode made;
  made.type = CU_GRAPH_NODE_TYPE_KERNEL;
  made.params_known = node->params_known;
  made.recordable = node->recordable;
  made.kernel = WithAttributes(*node->kernel, std::move(attrs));
  made.replay = KernelReplay(made.kernel);
  TakeParams(node, std::move(made));
}

}  // namespace

RGPU_IMPL(cuGraphKernelNodeSetAttribute)
(CUgraphNode node, CUkernelNodeAttrID id, const CUkernelNodeAttrValue* value) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckKernelNodeAttribute(id, *value); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  if (CUresult r = KnownKernelNode(node, "cuGraphKernelNodeSetAttribute"); r != CUDA_SUCCESS) {
    return r;
  }
  std::vector<CUlaunchAttribute> attrs = node->kernel->attrs;
  auto it = std::find_if(attrs.begin(), attrs.end(),
                         [id](const CUlaunchAttribute& a) { return a.id == id; });
  if (it == attrs.end()) it = attrs.insert(attrs.end(), CUlaunchAttribute{});
  it->id = id;
  it->value = *value;
  SetKernelAttributes(node, std::move(attrs));
  return CUDA_SUCCESS;
}

// An attribute never set reads as its default: all zero (no window, not cooperative, priority 0,
// no cluster shape, ...).
RGPU_IMPL(cuGraphKernelNodeGetAttribute)
(CUgraphNode node, CUkernelNodeAttrID id, CUkernelNodeAttrValue* value) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckKernelNodeAttribute(id, CUkernelNodeAttrValue{}); r != CUDA_SUCCESS) {
    return r;
  }
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  if (CUresult r = KnownKernelNode(node, "cuGraphKernelNodeGetAttribute"); r != CUDA_SUCCESS) {
    return r;
  }
  *value = CUkernelNodeAttrValue{};
  for (const CUlaunchAttribute& a : node->kernel->attrs) {
    if (a.id == id) *value = a.value;
  }
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuGraphKernelNodeCopyAttributes)(CUgraphNode dst, CUgraphNode src) {
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  if (CUresult r = KnownKernelNode(src, "cuGraphKernelNodeCopyAttributes"); r != CUDA_SUCCESS) {
    return r;
  }
  if (CUresult r = KnownKernelNode(dst, "cuGraphKernelNodeCopyAttributes"); r != CUDA_SUCCESS) {
    return r;
  }
  SetKernelAttributes(dst, src->kernel->attrs);
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
  if (!LiveExec(exec)) return CUDA_ERROR_INVALID_VALUE;
  GraphNode made;
  CUresult r = KernelNode(params, &made);
  if (r != CUDA_SUCCESS) return r;
  return UpdateExecNode(
      exec, node,
      [&](const GraphNode& n) {
        return n.type != CU_GRAPH_NODE_TYPE_KERNEL ? CUDA_ERROR_INVALID_VALUE
                                                   : CheckKernelUpdate(n, *made.kernel);
      },
      [&](GraphNode* n) {
        KeepAttributes(n->kernel, &made);
        TakeParams(n, std::move(made));
      });
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
  // The nodes and user object references replaced go once the launches made with them have run.
  if (CUresult settled = rgpu::client::SettleLaunches(exec); settled != CUDA_SUCCESS) {
    return settled;
  }
  std::vector<GraphNode> replaced;  // destroyed after the lock below
  rgpu::client::UserObjectRefs replaced_user_objects;
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
  for (size_t i = 0; i < order.size(); ++i) {
    SetEnabled(&order[i], exec->nodes[i].enabled);  // disabled nodes stay disabled
  }
  replaced.swap(exec->nodes);
  exec->nodes = std::move(order);
  // Its references become the new graph's, as CUDA clones them into the executable graph.
  replaced_user_objects.Swap(exec->user_objects);
  rgpu::client::CollectUserObjects(*graph, &exec->user_objects);
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
  {
    // Same nodes, same edges, child graphs copied too; each copy knows its node
    // (cuGraphNodeFindInClone).
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    rgpu::client::CloneGraph(*original, g, /*visible=*/true);
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
RGPU_PER_THREAD_SAME_AS(cuGraphUpload_ptsz)

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

// Parameters of a graph's nodes.

RGPU_IMPL(cuGraphMemcpyNodeGetParams)(CUgraphNode node, CUDA_MEMCPY3D* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  CUresult r = KnownParams(node, CU_GRAPH_NODE_TYPE_MEMCPY, "cuGraphMemcpyNodeGetParams");
  if (r == CUDA_SUCCESS) *params = node->copy;
  return r;
}

RGPU_IMPL(cuGraphMemcpyNodeSetParams)(CUgraphNode node, const CUDA_MEMCPY3D* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUcontext ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    if (CUresult r = NodeOfType(node, CU_GRAPH_NODE_TYPE_MEMCPY); r != CUDA_SUCCESS) return r;
    ctx = node->ctx;  // it keeps running where it ran
  }
  return SetNode(node, CU_GRAPH_NODE_TYPE_MEMCPY, MemcpyNode, params, ctx);
}

RGPU_IMPL(cuGraphMemsetNodeGetParams)(CUgraphNode node, CUDA_MEMSET_NODE_PARAMS* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  CUresult r = KnownParams(node, CU_GRAPH_NODE_TYPE_MEMSET, "cuGraphMemsetNodeGetParams");
  if (r == CUDA_SUCCESS) *params = node->memset;
  return r;
}

RGPU_IMPL(cuGraphMemsetNodeSetParams)(CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUcontext ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    if (CUresult r = NodeOfType(node, CU_GRAPH_NODE_TYPE_MEMSET); r != CUDA_SUCCESS) return r;
    ctx = node->ctx;
  }
  return SetNode(node, CU_GRAPH_NODE_TYPE_MEMSET, MemsetNode, params, ctx);
}

RGPU_IMPL(cuGraphHostNodeGetParams)(CUgraphNode node, CUDA_HOST_NODE_PARAMS* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  CUresult r = KnownParams(node, CU_GRAPH_NODE_TYPE_HOST, "cuGraphHostNodeGetParams");
  if (r == CUDA_SUCCESS) *params = node->host;
  return r;
}

RGPU_IMPL(cuGraphHostNodeSetParams)(CUgraphNode node, const CUDA_HOST_NODE_PARAMS* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return SetNode(node, CU_GRAPH_NODE_TYPE_HOST, HostNode, params);
}

RGPU_IMPL(cuGraphAddBatchMemOpNode)
(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, size_t n,
 const CUDA_BATCH_MEM_OP_NODE_PARAMS* params) {
  return MakeAndAdd(out, graph, deps, n, BatchMemOpNode, params);
}

// The operations handed out are the node's own, valid until its parameters change.
RGPU_IMPL(cuGraphBatchMemOpNodeGetParams)
(CUgraphNode node, CUDA_BATCH_MEM_OP_NODE_PARAMS* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  CUresult r = KnownParams(node, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, "cuGraphBatchMemOpNodeGetParams");
  if (r != CUDA_SUCCESS) return r;
  params->ctx = node->ctx;
  params->count = static_cast<unsigned>(node->mem_ops.size());
  params->paramArray = node->mem_ops.data();
  params->flags = node->mem_op_flags;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuGraphBatchMemOpNodeSetParams)
(CUgraphNode node, const CUDA_BATCH_MEM_OP_NODE_PARAMS* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return SetNode(node, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, BatchMemOpNode, params);
}

namespace {

CUresult GetEvent(CUgraphNode node, CUgraphNodeType type, CUevent* out, const char* call) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  CUresult r = KnownParams(node, type, call);
  if (r == CUDA_SUCCESS) *out = node->event;
  return r;
}

CUresult SetEvent(CUgraphNode node, CUgraphNodeType type, CUevent event) {
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    if (CUresult r = NodeOfType(node, type); r != CUDA_SUCCESS) return r;
  }
  if (CUresult r = CheckEvent(event); r != CUDA_SUCCESS) return r;
  return SetNode(node, type, EventNode, type, event);
}

}  // namespace

RGPU_IMPL(cuGraphEventRecordNodeGetEvent)(CUgraphNode node, CUevent* event) {
  return GetEvent(node, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event, "cuGraphEventRecordNodeGetEvent");
}

RGPU_IMPL(cuGraphEventRecordNodeSetEvent)(CUgraphNode node, CUevent event) {
  return SetEvent(node, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event);
}

RGPU_IMPL(cuGraphEventWaitNodeGetEvent)(CUgraphNode node, CUevent* event) {
  return GetEvent(node, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event, "cuGraphEventWaitNodeGetEvent");
}

RGPU_IMPL(cuGraphEventWaitNodeSetEvent)(CUgraphNode node, CUevent event) {
  return SetEvent(node, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event);
}

// The graph the node owns, not a copy: changes to it are changes to the node.
RGPU_IMPL(cuGraphChildGraphNodeGetGraph)(CUgraphNode node, CUgraph* graph) {
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  if (CUresult r = NodeOfType(node, CU_GRAPH_NODE_TYPE_GRAPH); r != CUDA_SUCCESS) return r;
  if (node->child == nullptr) {
    RGPU_LOG_WARN(
        "cuGraphChildGraphNodeGetGraph: the graph of a captured graph launch is not kept");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  *graph = node->child->graph;
  return CUDA_SUCCESS;
}

// The generic form: the parameters of a node of the types above and of kernels; a child graph
// node takes the parameters of a graph of the same shape into the graph it owns (whose handles
// stay valid).
RGPU_IMPL(cuGraphNodeSetParams)(CUgraphNode node, CUgraphNodeParams* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUgraphNodeType type;
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    CUgraph graph;
    if (!LiveNode(node, &graph)) return CUDA_ERROR_INVALID_VALUE;
    type = node->type;
  }
  if (params->type != type) return CUDA_ERROR_INVALID_VALUE;
  switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
      return rgpu_impl_cuGraphKernelNodeSetParams_v2(
          node, reinterpret_cast<const CUDA_KERNEL_NODE_PARAMS*>(&params->kernel));
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      if (params->memcpy.flags != 0 || params->memcpy.reserved != 0) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      return SetNode(node, type, MemcpyNode, &params->memcpy.copyParams, params->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      const CUDA_MEMSET_NODE_PARAMS m = FromV2(params->memset);
      return SetNode(node, type, MemsetNode, &m, params->memset.ctx);
    }
    case CU_GRAPH_NODE_TYPE_HOST:
      return SetNode(node, type, HostNode,
                     reinterpret_cast<const CUDA_HOST_NODE_PARAMS*>(&params->host));
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      return SetEvent(node, type, params->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      return SetEvent(node, type, params->eventWait.event);
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: {
      const CUDA_BATCH_MEM_OP_NODE_PARAMS m = FromV2(params->memOp);
      return SetNode(node, type, BatchMemOpNode, &m);
    }
    case CU_GRAPH_NODE_TYPE_EMPTY:
      return CUDA_SUCCESS;  // nothing to set
    case CU_GRAPH_NODE_TYPE_GRAPH: {
      CUgraph from = params->graph.graph;
      if (!LiveGraph(from) || params->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
      if (CUresult r = NodeOfType(node, type); r != CUDA_SUCCESS) return r;
      if (node->child == nullptr) return CUDA_ERROR_NOT_SUPPORTED;  // a captured graph launch
      if (from == node->child->graph) return CUDA_SUCCESS;
      if (CUresult r = SameShape(*node->child->graph, *from, /*exec_rules=*/false);
          r != CUDA_SUCCESS) {
        return r;
      }
      CopyParams(*from, node->child->graph);
      return CUDA_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      return CUDA_ERROR_NOT_SUPPORTED;  // as CUDA: their parameters cannot change
    default:
      RGPU_LOG_WARN("cuGraphNodeSetParams: node type %d is not supported", static_cast<int>(type));
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

// Parameters of an executable graph's nodes (its node made from `node`), within the changes
// cuda.h allows for each type.

RGPU_IMPL(cuGraphExecMemcpyNodeSetParams)
(CUgraphExec exec, CUgraphNode node, const CUDA_MEMCPY3D* copy, CUcontext ctx) {
  if (!LiveExec(exec) || copy == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ctx != nullptr && rgpu::client::CheckContext(ctx) != CUDA_SUCCESS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  GraphNode made;
  if (CUresult r = MemcpyNode(copy, ctx, &made); r != CUDA_SUCCESS) return r;
  return UpdateExecNode(
      exec, node,
      [&](const GraphNode& n) {
        return n.type != CU_GRAPH_NODE_TYPE_MEMCPY ? CUDA_ERROR_INVALID_VALUE
                                                   : CheckMemcpyUpdate(n, made.copy, made.ctx);
      },
      [&](GraphNode* n) { TakeParams(n, std::move(made)); });
}

RGPU_IMPL(cuGraphExecMemsetNodeSetParams)
(CUgraphExec exec, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS* params, CUcontext ctx) {
  if (!LiveExec(exec) || params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ctx != nullptr && rgpu::client::CheckContext(ctx) != CUDA_SUCCESS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  GraphNode made;
  if (CUresult r = MemsetNode(params, ctx, &made); r != CUDA_SUCCESS) return r;
  return UpdateExecNode(
      exec, node,
      [&](const GraphNode& n) {
        return n.type != CU_GRAPH_NODE_TYPE_MEMSET ? CUDA_ERROR_INVALID_VALUE
                                                   : CheckMemsetUpdate(n, made.memset, made.ctx);
      },
      [&](GraphNode* n) { TakeParams(n, std::move(made)); });
}

RGPU_IMPL(cuGraphExecHostNodeSetParams)
(CUgraphExec exec, CUgraphNode node, const CUDA_HOST_NODE_PARAMS* params) {
  if (!LiveExec(exec)) return CUDA_ERROR_INVALID_VALUE;
  GraphNode made;
  if (CUresult r = HostNode(params, &made); r != CUDA_SUCCESS) return r;
  return UpdateExecNode(exec, node, OfType(CU_GRAPH_NODE_TYPE_HOST),
                        [&](GraphNode* n) { TakeParams(n, std::move(made)); });
}

RGPU_IMPL(cuGraphExecBatchMemOpNodeSetParams)
(CUgraphExec exec, CUgraphNode node, const CUDA_BATCH_MEM_OP_NODE_PARAMS* params) {
  if (!LiveExec(exec)) return CUDA_ERROR_INVALID_VALUE;
  GraphNode made;
  if (CUresult r = BatchMemOpNode(params, &made); r != CUDA_SUCCESS) return r;
  return UpdateExecNode(
      exec, node, [&](const GraphNode& n) { return CheckMemOpUpdate(n, made); },
      [&](GraphNode* n) { TakeParams(n, std::move(made)); });
}

namespace {

CUresult SetExecEvent(CUgraphExec exec, CUgraphNode node, CUgraphNodeType type, CUevent event) {
  if (!LiveExec(exec)) return CUDA_ERROR_INVALID_VALUE;
  GraphNode made;
  if (CUresult r = EventNode(type, event, &made); r != CUDA_SUCCESS) return r;
  return UpdateExecNode(exec, node, OfType(type),
                        [&](GraphNode* n) { TakeParams(n, std::move(made)); });
}

}  // namespace

RGPU_IMPL(cuGraphExecEventRecordNodeSetEvent)(CUgraphExec exec, CUgraphNode node, CUevent event) {
  return SetExecEvent(exec, node, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event);
}

RGPU_IMPL(cuGraphExecEventWaitNodeSetEvent)(CUgraphExec exec, CUgraphNode node, CUevent event) {
  return SetExecEvent(exec, node, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event);
}

// The executable graph's child graph node runs a copy of `child` from now on: `child` must have
// the topology (and node order) of the graph instantiated there, and parameters its nodes may
// take (SameShape).
RGPU_IMPL(cuGraphExecChildGraphNodeSetParams)(CUgraphExec exec, CUgraphNode node, CUgraph child) {
  if (!LiveExec(exec) || !LiveGraph(child)) return CUDA_ERROR_INVALID_VALUE;
  GraphNode made;
  std::shared_ptr<ChildGraph> old;  // the copy replaced, destroyed once the lock is released
  // It goes once the launches made with it have run.
  if (CUresult settled = rgpu::client::SettleLaunches(exec); settled != CUDA_SUCCESS) {
    return settled;
  }
  return UpdateExecNode(
      exec, node,
      [&](const GraphNode& n) {
        if (n.type != CU_GRAPH_NODE_TYPE_GRAPH || n.child == nullptr) {
          return CUDA_ERROR_INVALID_VALUE;
        }
        if (CUresult r = SameShape(*n.child->graph, *child, /*exec_rules=*/true);
            r != CUDA_SUCCESS) {
          return r;
        }
        return rgpu::client::InstantiateChild(*child, &made);
      },
      [&](GraphNode* n) {
        old = std::move(n->child);
        n->child = std::move(made.child);
        rgpu::client::SetNodeWork(n, std::move(made.replay), made.recordable);
      });
}

// The generic form, by the node's type.
RGPU_IMPL(cuGraphExecNodeSetParams)
(CUgraphExec exec, CUgraphNode node, CUgraphNodeParams* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (params->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
      return rgpu_impl_cuGraphExecKernelNodeSetParams_v2(
          exec, node, reinterpret_cast<const CUDA_KERNEL_NODE_PARAMS*>(&params->kernel));
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      if (params->memcpy.flags != 0 || params->memcpy.reserved != 0) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      return rgpu_impl_cuGraphExecMemcpyNodeSetParams(exec, node, &params->memcpy.copyParams,
                                                      params->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      const CUDA_MEMSET_NODE_PARAMS m = FromV2(params->memset);
      return rgpu_impl_cuGraphExecMemsetNodeSetParams(exec, node, &m, params->memset.ctx);
    }
    case CU_GRAPH_NODE_TYPE_HOST:
      return rgpu_impl_cuGraphExecHostNodeSetParams(
          exec, node, reinterpret_cast<const CUDA_HOST_NODE_PARAMS*>(&params->host));
    case CU_GRAPH_NODE_TYPE_GRAPH:
      return rgpu_impl_cuGraphExecChildGraphNodeSetParams(exec, node, params->graph.graph);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      return rgpu_impl_cuGraphExecEventRecordNodeSetEvent(exec, node, params->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      return rgpu_impl_cuGraphExecEventWaitNodeSetEvent(exec, node, params->eventWait.event);
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: {
      const CUDA_BATCH_MEM_OP_NODE_PARAMS m = FromV2(params->memOp);
      return rgpu_impl_cuGraphExecBatchMemOpNodeSetParams(exec, node, &m);
    }
    case CU_GRAPH_NODE_TYPE_EMPTY: {
      if (!LiveExec(exec)) return CUDA_ERROR_INVALID_VALUE;
      std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
      const GraphNode* n = ExecNodeOf(exec, node);
      return n != nullptr && n->type == CU_GRAPH_NODE_TYPE_EMPTY ? CUDA_SUCCESS
                                                                 : CUDA_ERROR_INVALID_VALUE;
    }
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      return CUDA_ERROR_NOT_SUPPORTED;  // as CUDA: not for executable graphs
    default:
      RGPU_LOG_WARN("cuGraphExecNodeSetParams: node type %d is not supported",
                    static_cast<int>(params->type));
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

// A disabled node does nothing when the executable graph is launched; kernel, memcpy and memset
// nodes only, as CUDA.
RGPU_IMPL(cuGraphNodeSetEnabled)(CUgraphExec exec, CUgraphNode node, unsigned int enabled) {
  return UpdateExecNode(
      exec, node,
      [](const GraphNode& n) {
        return Toggleable(n.type) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
      },
      [enabled](GraphNode* n) { SetEnabled(n, enabled != 0); });
}

RGPU_IMPL(cuGraphNodeGetEnabled)(CUgraphExec exec, CUgraphNode node, unsigned int* enabled) {
  if (enabled == nullptr || !LiveExec(exec)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  const GraphNode* n = ExecNodeOf(exec, node);
  if (n == nullptr || !Toggleable(n->type)) return CUDA_ERROR_INVALID_VALUE;
  *enabled = n->enabled ? 1 : 0;
  return CUDA_SUCCESS;
}

// Topology: dependent nodes, edges, removing edges, and a node's copy in a clone.

RGPU_IMPL(cuGraphNodeGetDependentNodes_v2)
(CUgraphNode node, CUgraphNode* dependents, CUgraphEdgeData* edges, size_t* n) {
  if (n == nullptr || (edges != nullptr && dependents == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  CUgraph graph;
  if (!LiveNode(node, &graph)) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUgraphNode> found;
  for (GraphNode* other : rgpu::client::LiveNodes(*graph)) {
    if (std::find(other->deps.begin(), other->deps.end(), node) != other->deps.end()) {
      found.push_back(other);
    }
  }
  if (dependents != nullptr) {
    for (size_t i = 0; i < *n; ++i) {
      dependents[i] = i < found.size() ? found[i] : nullptr;
      if (edges != nullptr) edges[i] = CUgraphEdgeData{};  // every edge is a plain one
    }
  }
  *n = found.size();
  return CUDA_SUCCESS;
}

RGPU_REVISION_IMPL(cuGraphNodeGetDependentNodes)
(CUgraphNode node, CUgraphNode* dependents, size_t* n) {
  return rgpu_impl_cuGraphNodeGetDependentNodes_v2(node, dependents, nullptr, n);
}

RGPU_IMPL(cuGraphGetEdges_v2)
(CUgraph graph, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* edges, size_t* n) {
  if (n == nullptr || !LiveGraph(graph) || ((from == nullptr) != (to == nullptr)) ||
      (edges != nullptr && from == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  std::vector<std::pair<CUgraphNode, CUgraphNode>> found;
  for (GraphNode* node : rgpu::client::LiveNodes(*graph)) {
    for (CUgraphNode d : node->deps) {
      if (!d->destroyed) found.emplace_back(d, node);
    }
  }
  if (from != nullptr) {
    for (size_t i = 0; i < *n; ++i) {
      from[i] = i < found.size() ? found[i].first : nullptr;
      to[i] = i < found.size() ? found[i].second : nullptr;
      if (edges != nullptr) edges[i] = CUgraphEdgeData{};
    }
  }
  *n = found.size();
  return CUDA_SUCCESS;
}

RGPU_REVISION_IMPL(cuGraphGetEdges)(CUgraph graph, CUgraphNode* from, CUgraphNode* to, size_t* n) {
  return rgpu_impl_cuGraphGetEdges_v2(graph, from, to, nullptr, n);
}

// Every edge named must exist (with plain edge data, the only kind there is); none is removed
// otherwise. Not in graphs with memory alloc or free nodes, as CUDA.
RGPU_IMPL(cuGraphRemoveDependencies_v2)
(CUgraph graph, const CUgraphNode* from, const CUgraphNode* to, const CUgraphEdgeData* edges,
 size_t n) {
  if (!LiveGraph(graph) || (n > 0 && (from == nullptr || to == nullptr)) || !PlainEdges(edges, n)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  for (const GraphNode* node : rgpu::client::LiveNodes(*graph)) {
    if (node->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || node->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  std::vector<std::pair<CUgraphNode, CUgraphNode>> removing;
  for (size_t i = 0; i < n; ++i) {
    if (!NodeOf(graph, from[i]) || !NodeOf(graph, to[i])) return CUDA_ERROR_INVALID_VALUE;
    const auto& deps = to[i]->deps;
    const std::pair<CUgraphNode, CUgraphNode> edge(from[i], to[i]);
    if (std::find(deps.begin(), deps.end(), from[i]) == deps.end() ||
        std::find(removing.begin(), removing.end(), edge) != removing.end()) {
      return CUDA_ERROR_INVALID_VALUE;  // no such edge (or named twice)
    }
    removing.push_back(edge);
  }
  for (const auto& [a, b] : removing) std::erase(b->deps, a);
  return CUDA_SUCCESS;
}

RGPU_REVISION_IMPL(cuGraphRemoveDependencies)
(CUgraph graph, const CUgraphNode* from, const CUgraphNode* to, size_t n) {
  return rgpu_impl_cuGraphRemoveDependencies_v2(graph, from, to, nullptr, n);
}

RGPU_IMPL(cuGraphNodeFindInClone)(CUgraphNode* out, CUgraphNode original, CUgraph clone) {
  if (out == nullptr || !LiveGraph(clone)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  CUgraph graph;
  if (!LiveNode(original, &graph)) return CUDA_ERROR_INVALID_VALUE;
  for (GraphNode* n : rgpu::client::LiveNodes(*clone)) {
    if (n->cloned_from == original->id) {
      *out = n;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;  // not cloned into `clone`, or its copy was destroyed
}
