// Graphs made by stream capture: the work a stream would have run becomes a graph, instantiated
// and launched as a whole (the client records and replays it). Capture modes and statuses have
// the driver's values.
#include "interpose/hip/runtime.h"

namespace h = rgpu::hip;
using h::Activate;
using h::Error;
using h::Ret;

using h::InContext;

HIP_API(hipStreamBeginCapture)(CUstream s, int mode)->Error {
  if (mode < CU_STREAM_CAPTURE_MODE_GLOBAL || mode > CU_STREAM_CAPTURE_MODE_RELAXED) {
    return Ret(h::hipErrorInvalidValue);
  }
  return InContext(
      [&] { return CU(cuStreamBeginCapture_v2)(s, static_cast<CUstreamCaptureMode>(mode)); });
}

HIP_API(hipStreamEndCapture)(CUstream s, CUgraph* graph)->Error {
  return InContext([&] { return CU(cuStreamEndCapture)(s, graph); });
}

HIP_API(hipStreamIsCapturing)(CUstream s, CUstreamCaptureStatus* status)->Error {
  return InContext([&] { return CU(cuStreamIsCapturing)(s, status); });
}

HIP_API(hipGraphInstantiateWithFlags)
(CUgraphExec* exec, CUgraph graph, unsigned long long flags)->Error {
  if (graph == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuGraphInstantiateWithFlags)(exec, graph, flags); });
}

HIP_API(hipGraphInstantiate)
(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log, size_t log_size)->Error {
  if (error_node != nullptr) *error_node = nullptr;
  if (log != nullptr && log_size > 0) log[0] = '\0';
  return rgpu_hip_hipGraphInstantiateWithFlags(exec, graph, 0);
}

HIP_API(hipGraphLaunch)(CUgraphExec exec, CUstream s)->Error {
  if (exec == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuGraphLaunch)(exec, s); });
}

HIP_API(hipGraphExecDestroy)(CUgraphExec exec)->Error {
  if (exec == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuGraphExecDestroy)(exec); });
}

HIP_API(hipGraphDestroy)(CUgraph graph)->Error {
  if (graph == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuGraphDestroy)(graph); });
}

HIP_API(hipGraphGetNodes)(CUgraph graph, CUgraphNode* nodes, size_t* count)->Error {
  if (graph == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuGraphGetNodes)(graph, nodes, count); });
}
