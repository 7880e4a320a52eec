// Graphs built node by node (hipGraphCreate, hipGraphAdd*Node, dependencies, queries, clones,
// kernel node parameters and updates of executable graphs) on the driver's graphs; graphs made by
// stream capture are in graph.cc, and both are instantiated and launched there. Kernel nodes name
// their kernel by host stub, as hipLaunchKernel does; memcpy nodes take hipMemcpy3DParms, as
// hipMemcpy3D does; memset nodes are translated; host nodes, events and child graphs pass through.
#include <string.h>

#include <vector>

#include "interpose/hip/runtime.h"

namespace h = rgpu::hip;
using h::Activate;
using h::Error;
using h::InContext;
using h::Ret;

static_assert(sizeof(h::HostNodeParams) == sizeof(CUDA_HOST_NODE_PARAMS) &&
              offsetof(h::HostNodeParams, userData) == offsetof(CUDA_HOST_NODE_PARAMS, userData));
static_assert(CU_GRAPH_NODE_TYPE_KERNEL + 1 == h::kGraphNodeTypeKernel &&
              CU_GRAPH_NODE_TYPE_MEMCPY + 1 == h::kGraphNodeTypeMemcpy &&
              CU_GRAPH_NODE_TYPE_MEMSET + 1 == h::kGraphNodeTypeMemset &&
              CU_GRAPH_NODE_TYPE_HOST + 1 == h::kGraphNodeTypeHost &&
              CU_GRAPH_NODE_TYPE_GRAPH + 1 == h::kGraphNodeTypeGraph &&
              CU_GRAPH_NODE_TYPE_EMPTY + 1 == h::kGraphNodeTypeEmpty &&
              CU_GRAPH_NODE_TYPE_WAIT_EVENT + 1 == h::kGraphNodeTypeWaitEvent &&
              CU_GRAPH_NODE_TYPE_EVENT_RECORD + 1 == h::kGraphNodeTypeEventRecord);
// hipGraphExecUpdateResult has the driver's values (abi_check.cc checks HIP's side).
static_assert(CU_GRAPH_EXEC_UPDATE_SUCCESS == 0 && CU_GRAPH_EXEC_UPDATE_ERROR == 1 &&
              CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED == 2 &&
              CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED == 3 &&
              CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED == 4 &&
              CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED == 5 &&
              CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED == 6 &&
              CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE == 7);

namespace {

// The driver's parameters for a kernel node: the stub's function in the current device, HIP's
// `extra` translated (`extra_storage` holds it while the driver copies the arguments).
Error DriverKernel(const h::KernelNodeParams* p, CUDA_KERNEL_NODE_PARAMS* out,
                   std::vector<void*>* extra_storage) {
  if (p == nullptr || p->func == nullptr) return h::hipErrorInvalidValue;
  CUfunction f;
  Error e = h::FunctionOfStub(p->func, &f);
  if (e != h::hipSuccess) return e;
  if ((e = h::DriverExtra(p->extra, extra_storage)) != h::hipSuccess) return e;
  memset(out, 0, sizeof *out);
  out->func = f;
  out->gridDimX = p->gridDim.x;
  out->gridDimY = p->gridDim.y;
  out->gridDimZ = p->gridDim.z;
  out->blockDimX = p->blockDim.x;
  out->blockDimY = p->blockDim.y;
  out->blockDimZ = p->blockDim.z;
  out->sharedMemBytes = p->sharedMemBytes;
  out->kernelParams = p->kernelParams;
  out->extra = p->extra != nullptr ? extra_storage->data() : nullptr;
  return h::hipSuccess;
}

// A copy node's description: memory types follow the copy's kind.
CUDA_MEMCPY3D Copy1D(void* dst, const void* src, size_t bytes, int kind) {
  h::Memcpy3DParms p;
  memset(&p, 0, sizeof p);
  p.srcPtr = h::PitchedPtr{const_cast<void*>(src), bytes, bytes, 1};
  p.dstPtr = h::PitchedPtr{dst, bytes, bytes, 1};
  p.extent = h::Extent{bytes, 1, 1};
  p.kind = kind;
  CUDA_MEMCPY3D c;
  memset(&c, 0, sizeof c);
  h::DriverCopy3D(p, &c);  // cannot fail without arrays once the kind is checked
  return c;
}

// The current device's primary context, made current (memcpy and memset nodes name one).
Error CurrentContext(CUcontext* ctx) {
  int device;
  Error e = Activate(&device);
  if (e != h::hipSuccess) return e;
  return h::PrimaryContext(device, ctx);
}

}  // namespace

HIP_API(hipGraphCreate)(CUgraph* graph, unsigned int flags)->Error {
  if (graph == nullptr || flags != 0) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuGraphCreate)(graph, flags); });
}

HIP_API(hipGraphAddKernelNode)
(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t n,
 const h::KernelNodeParams* params)
    ->Error {
  if (node == nullptr || graph == nullptr) return Ret(h::hipErrorInvalidValue);
  CUDA_KERNEL_NODE_PARAMS cu;
  std::vector<void*> extra;
  Error e = DriverKernel(params, &cu, &extra);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuGraphAddKernelNode_v2)(node, graph, deps, n, &cu));
}

HIP_API(hipGraphAddMemcpyNode)
(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t n, const h::Memcpy3DParms* p)
    ->Error {
  if (node == nullptr || graph == nullptr || p == nullptr) return Ret(h::hipErrorInvalidValue);
  CUcontext ctx;
  Error e = CurrentContext(&ctx);
  if (e != h::hipSuccess) return Ret(e);
  CUDA_MEMCPY3D c;
  if ((e = h::DriverCopy3D(*p, &c)) != h::hipSuccess) return Ret(e);
  return Ret(CU(cuGraphAddMemcpyNode)(node, graph, deps, n, &c, ctx));
}

HIP_API(hipGraphAddMemcpyNode1D)
(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t n, void* dst, const void* src,
 size_t bytes, int kind)
    ->Error {
  if (node == nullptr || graph == nullptr || dst == nullptr || src == nullptr || bytes == 0) {
    return Ret(h::hipErrorInvalidValue);
  }
  if (kind < h::kHostToHost || kind > h::kDefault) return Ret(h::hipErrorInvalidMemcpyDirection);
  CUcontext ctx;
  Error e = CurrentContext(&ctx);
  if (e != h::hipSuccess) return Ret(e);
  const CUDA_MEMCPY3D c = Copy1D(dst, src, bytes, kind);
  return Ret(CU(cuGraphAddMemcpyNode)(node, graph, deps, n, &c, ctx));
}

HIP_API(hipGraphAddMemsetNode)
(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t n, const h::MemsetParams* p)
    ->Error {
  if (node == nullptr || graph == nullptr || p == nullptr) return Ret(h::hipErrorInvalidValue);
  CUcontext ctx;
  Error e = CurrentContext(&ctx);
  if (e != h::hipSuccess) return Ret(e);
  CUDA_MEMSET_NODE_PARAMS cu;
  memset(&cu, 0, sizeof cu);
  cu.dst = reinterpret_cast<CUdeviceptr>(p->dst);
  cu.pitch = p->pitch;
  cu.value = p->value;
  cu.elementSize = p->elementSize;
  cu.width = p->width;
  cu.height = p->height;
  return Ret(CU(cuGraphAddMemsetNode)(node, graph, deps, n, &cu, ctx));
}

HIP_API(hipGraphAddHostNode)
(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t n, const h::HostNodeParams* p)
    ->Error {
  if (node == nullptr || graph == nullptr || p == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] {
    return CU(cuGraphAddHostNode)(node, graph, deps, n,
                                  reinterpret_cast<const CUDA_HOST_NODE_PARAMS*>(p));
  });
}

HIP_API(hipGraphAddEmptyNode)
(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t n)->Error {
  if (node == nullptr || graph == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuGraphAddEmptyNode)(node, graph, deps, n); });
}

HIP_API(hipGraphAddChildGraphNode)
(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t n, CUgraph child)->Error {
  if (node == nullptr || graph == nullptr || child == nullptr) {
    return Ret(h::hipErrorInvalidValue);
  }
  return InContext([&] { return CU(cuGraphAddChildGraphNode)(node, graph, deps, n, child); });
}

HIP_API(hipGraphAddEventRecordNode)
(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t n, CUevent event)->Error {
  if (node == nullptr || graph == nullptr || event == nullptr) {
    return Ret(h::hipErrorInvalidValue);
  }
  return InContext([&] { return CU(cuGraphAddEventRecordNode)(node, graph, deps, n, event); });
}

HIP_API(hipGraphAddEventWaitNode)
(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t n, CUevent event)->Error {
  if (node == nullptr || graph == nullptr || event == nullptr) {
    return Ret(h::hipErrorInvalidValue);
  }
  return InContext([&] { return CU(cuGraphAddEventWaitNode)(node, graph, deps, n, event); });
}

HIP_API(hipGraphAddDependencies)
(CUgraph graph, const CUgraphNode* from, const CUgraphNode* to, size_t n)->Error {
  if (graph == nullptr || (n > 0 && (from == nullptr || to == nullptr))) {
    return Ret(h::hipErrorInvalidValue);
  }
  return InContext([&] { return CU(cuGraphAddDependencies_v2)(graph, from, to, nullptr, n); });
}

HIP_API(hipGraphGetRootNodes)(CUgraph graph, CUgraphNode* nodes, size_t* count)->Error {
  if (graph == nullptr || count == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuGraphGetRootNodes)(graph, nodes, count); });
}

HIP_API(hipGraphNodeGetDependencies)(CUgraphNode node, CUgraphNode* deps, size_t* count)->Error {
  if (node == nullptr || count == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuGraphNodeGetDependencies_v2)(node, deps, nullptr, count); });
}

HIP_API(hipGraphNodeGetType)(CUgraphNode node, int* type)->Error {
  if (node == nullptr || type == nullptr) return Ret(h::hipErrorInvalidValue);
  CUgraphNodeType cu;
  Error e = InContext([&] { return CU(cuGraphNodeGetType)(node, &cu); });
  if (e != h::hipSuccess) return e;
  // HIP 5.2 numbers the driver's first eight types from 1; it has no names for the others
  // (memory allocation and free nodes that capture of hipMallocAsync makes, ...).
  *type = cu <= CU_GRAPH_NODE_TYPE_EVENT_RECORD ? static_cast<int>(cu) + 1 : h::kGraphNodeTypeCount;
  return h::hipSuccess;
}

HIP_API(hipGraphDestroyNode)(CUgraphNode node)->Error {
  if (node == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuGraphDestroyNode)(node); });
}

HIP_API(hipGraphClone)(CUgraph* clone, CUgraph original)->Error {
  if (clone == nullptr || original == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuGraphClone)(clone, original); });
}

HIP_API(hipGraphKernelNodeGetParams)(CUgraphNode node, h::KernelNodeParams* p)->Error {
  if (node == nullptr || p == nullptr) return Ret(h::hipErrorInvalidValue);
  CUDA_KERNEL_NODE_PARAMS cu;
  Error e = InContext([&] { return CU(cuGraphKernelNodeGetParams_v2)(node, &cu); });
  if (e != h::hipSuccess) return e;
  memset(p, 0, sizeof *p);
  p->func = const_cast<void*>(h::StubOfFunction(cu.func));
  p->gridDim = h::Dim3{cu.gridDimX, cu.gridDimY, cu.gridDimZ};
  p->blockDim = h::Dim3{cu.blockDimX, cu.blockDimY, cu.blockDimZ};
  p->sharedMemBytes = cu.sharedMemBytes;
  p->kernelParams = cu.kernelParams;  // the node's own copy of the arguments
  p->extra = nullptr;
  return h::hipSuccess;
}

HIP_API(hipGraphKernelNodeSetParams)(CUgraphNode node, const h::KernelNodeParams* p)->Error {
  if (node == nullptr) return Ret(h::hipErrorInvalidValue);
  CUDA_KERNEL_NODE_PARAMS cu;
  std::vector<void*> extra;
  Error e = DriverKernel(p, &cu, &extra);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuGraphKernelNodeSetParams_v2)(node, &cu));
}

HIP_API(hipGraphExecKernelNodeSetParams)
(CUgraphExec exec, CUgraphNode node, const h::KernelNodeParams* p)->Error {
  if (exec == nullptr || node == nullptr) return Ret(h::hipErrorInvalidValue);
  CUDA_KERNEL_NODE_PARAMS cu;
  std::vector<void*> extra;
  Error e = DriverKernel(p, &cu, &extra);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuGraphExecKernelNodeSetParams_v2)(exec, node, &cu));
}

HIP_API(hipGraphExecUpdate)
(CUgraphExec exec, CUgraph graph, CUgraphNode* error_node, int* result)->Error {
  if (exec == nullptr || graph == nullptr || error_node == nullptr || result == nullptr) {
    return Ret(h::hipErrorInvalidValue);
  }
  CUgraphExecUpdateResultInfo info;
  memset(&info, 0, sizeof info);
  Error e = InContext([&] { return CU(cuGraphExecUpdate_v2)(exec, graph, &info); });
  *error_node = info.errorNode;
  *result = e != h::hipSuccess && info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS
                ? CU_GRAPH_EXEC_UPDATE_ERROR
                : info.result;
  return e;
}
