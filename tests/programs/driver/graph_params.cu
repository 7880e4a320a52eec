// Graph node parameters and topology: memcpy, memset, host, event and child graph nodes keep
// their parameters (get/set round trips, also through cuGraphNodeSetParams; a child graph node
// owns a copy of its graph); an executable graph whose memset, memcpy, host, event, kernel and
// child graph parameters change between launches computes the new results; disabled kernel and
// memset nodes do not run; edges, dependent nodes and their removal; cuGraphNodeFindInClone; and
// the errors for wrong node types, nodes of other graphs, destroyed nodes, null pointers and the
// changes CUDA refuses (topology, memory types, shapes).
#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "check.h"

#define EXPECT_ERROR(call, error)                                                   \
  do {                                                                              \
    CUresult expect_result_ = (call);                                               \
    if (expect_result_ != (error)) {                                                \
      fprintf(stderr, "%s:%d: %s returned %d, not %s\n", __FILE__, __LINE__, #call, \
              (int)expect_result_, #error);                                         \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

namespace {

const int kN = 256;

void CUDA_CB CountCall(void* arg) { ++*static_cast<int*>(arg); }

CUDA_MEMCPY3D DeviceToDevice(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  CUDA_MEMCPY3D c = {};
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = src;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = dst;
  c.WidthInBytes = bytes;
  c.Height = 1;
  c.Depth = 1;
  return c;
}

CUDA_MEMCPY3D DeviceToHost(void* dst, CUdeviceptr src, size_t bytes) {
  CUDA_MEMCPY3D c = DeviceToDevice(0, src, bytes);
  c.dstMemoryType = CU_MEMORYTYPE_HOST;
  c.dstHost = dst;
  return c;
}

CUDA_MEMSET_NODE_PARAMS Memset(CUdeviceptr dst, unsigned value, size_t count) {
  CUDA_MEMSET_NODE_PARAMS m = {};
  m.dst = dst;
  m.value = value;
  m.elementSize = 4;
  m.width = count;
  m.height = 1;
  return m;
}

CUDA_KERNEL_NODE_PARAMS Launch(CUfunction f, void** args, unsigned blocks, unsigned threads) {
  CUDA_KERNEL_NODE_PARAMS k = {};
  k.func = f;
  k.gridDimX = blocks;
  k.gridDimY = k.gridDimZ = 1;
  k.blockDimX = threads;
  k.blockDimY = k.blockDimZ = 1;
  k.kernelParams = args;
  return k;
}

std::vector<int> Read(CUdeviceptr p) {
  std::vector<int> v(kN);
  CHECK(cuMemcpyDtoH(v.data(), p, kN * sizeof(int)));
  return v;
}

bool All(const std::vector<int>& v, int x) {
  return std::all_of(v.begin(), v.end(), [x](int e) { return e == x; });
}

void Fill(CUdeviceptr p, int x) { CHECK(cuMemsetD32(p, static_cast<unsigned>(x), kN)); }

size_t CountNodes(CUgraph g) {
  size_t n = 0;
  CHECK(cuGraphGetNodes(g, nullptr, &n));
  return n;
}

std::set<std::pair<CUgraphNode, CUgraphNode>> Edges(CUgraph g) {
  size_t n = 0;
  CHECK(cuGraphGetEdges(g, nullptr, nullptr, nullptr, &n));
  std::vector<CUgraphNode> from(n + 2), to(n + 2);
  std::vector<CUgraphEdgeData> data(n + 2);
  memset(data.data(), 0xff, data.size() * sizeof(CUgraphEdgeData));
  size_t capacity = n + 2;
  CHECK(cuGraphGetEdges(g, from.data(), to.data(), data.data(), &capacity));
  EXPECT_TRUE(capacity == n);
  EXPECT_TRUE(from[n] == nullptr && to[n + 1] == nullptr);  // the rest is cleared
  std::set<std::pair<CUgraphNode, CUgraphNode>> edges;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(data[i].type == CU_GRAPH_DEPENDENCY_TYPE_DEFAULT && data[i].from_port == 0 &&
                data[i].to_port == 0);
    edges.insert({from[i], to[i]});
  }
  return edges;
}

std::set<CUgraphNode> Dependents(CUgraphNode node) {
  size_t n = 0;
  CHECK(cuGraphNodeGetDependentNodes(node, nullptr, nullptr, &n));
  std::vector<CUgraphNode> out(n + 1);
  std::vector<CUgraphEdgeData> data(n + 1);
  size_t capacity = n + 1;
  CHECK(cuGraphNodeGetDependentNodes(node, out.data(), data.data(), &capacity));
  EXPECT_TRUE(capacity == n && out[n] == nullptr);
  return std::set<CUgraphNode>(out.begin(), out.begin() + n);
}

}  // namespace

int main() {
  CUcontext ctx = InitContext();
  CUmodule m;
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CUfunction set_all;
  CHECK(cuModuleGetFunction(&set_all, m, "set_all"));
  CUdeviceptr a, b, c, d, e;
  for (CUdeviceptr* p : {&a, &b, &c, &d, &e}) CHECK(cuMemAlloc(p, kN * sizeof(int)));
  CUevent ev1, ev2, ev_start;
  CHECK(cuEventCreate(&ev1, 0));
  CHECK(cuEventCreate(&ev2, 0));
  CHECK(cuEventCreate(&ev_start, 0));
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  std::vector<int> host(kN, -1), host2(kN, -1);
  int calls = 0, calls2 = 0;
  const size_t bytes = kN * sizeof(int);

  // --- Parameters of a graph's nodes: each getter returns what was set. ---
  CUgraph g;
  CHECK(cuGraphCreate(&g, 0));
  CUgraphNode ms, cp, hn, er, ew, ch, kn;
  CUDA_MEMSET_NODE_PARAMS msp = Memset(a, 7, kN);
  CHECK(cuGraphAddMemsetNode(&ms, g, nullptr, 0, &msp, ctx));
  CUDA_MEMCPY3D cpp = DeviceToDevice(b, a, bytes);
  CHECK(cuGraphAddMemcpyNode(&cp, g, &ms, 1, &cpp, ctx));
  CUDA_HOST_NODE_PARAMS hp = {CountCall, &calls};
  CHECK(cuGraphAddHostNode(&hn, g, &cp, 1, &hp));
  CHECK(cuGraphAddEventRecordNode(&er, g, &hn, 1, ev1));
  CHECK(cuGraphAddEventWaitNode(&ew, g, nullptr, 0, ev_start));
  int three = 3, count = kN;
  void* kargs[] = {&d, &three, &count};
  CUDA_KERNEL_NODE_PARAMS kp = Launch(set_all, kargs, 1, kN);
  CHECK(cuGraphAddKernelNode(&kn, g, &ew, 1, &kp));
  CUgraph child;  // c = 5
  CHECK(cuGraphCreate(&child, 0));
  CUgraphNode child_ms;
  CUDA_MEMSET_NODE_PARAMS childp = Memset(c, 5, kN);
  CHECK(cuGraphAddMemsetNode(&child_ms, child, nullptr, 0, &childp, ctx));
  CHECK(cuGraphAddChildGraphNode(&ch, g, &cp, 1, child));

  CUDA_MEMSET_NODE_PARAMS got_ms;
  CHECK(cuGraphMemsetNodeGetParams(ms, &got_ms));
  EXPECT_TRUE(got_ms.dst == a && got_ms.value == 7 && got_ms.elementSize == 4 &&
              got_ms.width == kN && got_ms.height == 1);
  msp.value = 9;
  CHECK(cuGraphMemsetNodeSetParams(ms, &msp));
  CHECK(cuGraphMemsetNodeGetParams(ms, &got_ms));
  EXPECT_TRUE(got_ms.value == 9);
  CUDA_MEMCPY3D got_cp;
  CHECK(cuGraphMemcpyNodeGetParams(cp, &got_cp));
  EXPECT_TRUE(memcmp(&got_cp, &cpp, sizeof cpp) == 0);
  cpp.WidthInBytes = bytes / 2;
  CHECK(cuGraphMemcpyNodeSetParams(cp, &cpp));
  CHECK(cuGraphMemcpyNodeGetParams(cp, &got_cp));
  EXPECT_TRUE(got_cp.WidthInBytes == bytes / 2 && got_cp.srcDevice == a && got_cp.dstDevice == b);
  cpp.WidthInBytes = bytes;
  CHECK(cuGraphMemcpyNodeSetParams(cp, &cpp));
  CUDA_HOST_NODE_PARAMS got_hp;
  CHECK(cuGraphHostNodeGetParams(hn, &got_hp));
  EXPECT_TRUE(got_hp.fn == CountCall && got_hp.userData == &calls);
  CUDA_HOST_NODE_PARAMS hp2 = {CountCall, &calls2};
  CHECK(cuGraphHostNodeSetParams(hn, &hp2));
  CHECK(cuGraphHostNodeGetParams(hn, &got_hp));
  EXPECT_TRUE(got_hp.userData == &calls2);
  CUevent got_ev;
  CHECK(cuGraphEventRecordNodeGetEvent(er, &got_ev));
  EXPECT_TRUE(got_ev == ev1);
  CHECK(cuGraphEventRecordNodeSetEvent(er, ev2));
  CHECK(cuGraphEventRecordNodeGetEvent(er, &got_ev));
  EXPECT_TRUE(got_ev == ev2);
  CHECK(cuGraphEventWaitNodeGetEvent(ew, &got_ev));
  EXPECT_TRUE(got_ev == ev_start);
  CHECK(cuGraphEventWaitNodeSetEvent(ew, ev1));
  CHECK(cuGraphEventWaitNodeGetEvent(ew, &got_ev));
  EXPECT_TRUE(got_ev == ev1);
  CHECK(cuGraphEventWaitNodeSetEvent(ew, ev_start));

  // A child graph node owns a copy of its graph: later changes to the graph given do not reach
  // it, changes to the graph it hands out do, and the node keeps that graph.
  CUgraph embedded;
  CHECK(cuGraphChildGraphNodeGetGraph(ch, &embedded));
  EXPECT_TRUE(embedded != child && CountNodes(embedded) == 1);
  CUgraphNode extra;
  CHECK(cuGraphAddEmptyNode(&extra, child, &child_ms, 1));
  EXPECT_TRUE(CountNodes(embedded) == 1);
  EXPECT_ERROR(cuGraphDestroy(embedded), CUDA_ERROR_INVALID_VALUE);
  CUgraphNode embedded_ms;
  size_t one = 1;
  CHECK(cuGraphGetNodes(embedded, &embedded_ms, &one));
  CUDA_MEMSET_NODE_PARAMS six = Memset(c, 6, kN);
  CHECK(cuGraphMemsetNodeSetParams(embedded_ms, &six));

  // The graph as set: a = 9, b = a, calls2 counted, ev2 recorded, c = 6 (the embedded graph's),
  // d = 3.
  CUgraphExec exec;
  CHECK(cuGraphInstantiate(&exec, g, 0));
  for (CUdeviceptr p : {a, b, c, d}) Fill(p, -1);
  CHECK(cuEventRecord(ev_start, s));
  CHECK(cuGraphLaunch(exec, s));
  CHECK(cuStreamSynchronize(s));
  EXPECT_TRUE(All(Read(a), 9) && All(Read(b), 9) && All(Read(c), 6) && All(Read(d), 3));
  EXPECT_TRUE(calls == 0 && calls2 == 1);
  float ms_elapsed = 0;
  CHECK(cuEventElapsedTime(&ms_elapsed, ev_start, ev2));  // ev2 was recorded by the graph

  // The generic setter, for each type; a type other than the node's is refused.
  CUgraphNodeParams np = {};
  np.type = CU_GRAPH_NODE_TYPE_MEMSET;
  np.memset.dst = a;
  np.memset.value = 11;
  np.memset.elementSize = 4;
  np.memset.width = kN;
  np.memset.height = 1;
  np.memset.ctx = ctx;
  CHECK(cuGraphNodeSetParams(ms, &np));
  CHECK(cuGraphMemsetNodeGetParams(ms, &got_ms));
  EXPECT_TRUE(got_ms.value == 11);
  EXPECT_ERROR(cuGraphNodeSetParams(cp, &np), CUDA_ERROR_INVALID_VALUE);
  np = {};
  np.type = CU_GRAPH_NODE_TYPE_MEMCPY;
  np.memcpy.copyCtx = ctx;
  np.memcpy.copyParams = DeviceToDevice(e, a, bytes);
  CHECK(cuGraphNodeSetParams(cp, &np));
  CHECK(cuGraphMemcpyNodeGetParams(cp, &got_cp));
  EXPECT_TRUE(got_cp.dstDevice == e);
  np.memcpy.flags = 1;  // must be zero
  EXPECT_ERROR(cuGraphNodeSetParams(cp, &np), CUDA_ERROR_INVALID_VALUE);
  np = {};
  np.type = CU_GRAPH_NODE_TYPE_HOST;
  np.host.fn = CountCall;
  np.host.userData = &calls;
  CHECK(cuGraphNodeSetParams(hn, &np));
  CHECK(cuGraphHostNodeGetParams(hn, &got_hp));
  EXPECT_TRUE(got_hp.userData == &calls);
  np = {};
  np.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
  np.eventRecord.event = ev1;
  CHECK(cuGraphNodeSetParams(er, &np));
  CHECK(cuGraphEventRecordNodeGetEvent(er, &got_ev));
  EXPECT_TRUE(got_ev == ev1);
  np = {};
  np.type = CU_GRAPH_NODE_TYPE_WAIT_EVENT;
  np.eventWait.event = ev2;
  CHECK(cuGraphNodeSetParams(ew, &np));
  CHECK(cuGraphEventWaitNodeGetEvent(ew, &got_ev));
  EXPECT_TRUE(got_ev == ev2);
  int four = 4;
  void* kargs4[] = {&d, &four, &count};
  np = {};
  np.type = CU_GRAPH_NODE_TYPE_KERNEL;
  np.kernel.func = set_all;
  np.kernel.gridDimX = np.kernel.gridDimY = np.kernel.gridDimZ = 1;
  np.kernel.blockDimX = kN;
  np.kernel.blockDimY = np.kernel.blockDimZ = 1;
  np.kernel.kernelParams = kargs4;
  CHECK(cuGraphNodeSetParams(kn, &np));
  CUDA_KERNEL_NODE_PARAMS got_kp;
  CHECK(cuGraphKernelNodeGetParams(kn, &got_kp));
  EXPECT_TRUE(got_kp.func == set_all && *static_cast<int*>(got_kp.kernelParams[1]) == 4);
  // A child graph node takes the parameters of a graph of the same shape into its own graph (its
  // handle stays); another shape is refused.
  CUgraph same;
  CHECK(cuGraphCreate(&same, 0));
  CUgraphNode same_ms;
  CUDA_MEMSET_NODE_PARAMS twelve = Memset(c, 12, kN);
  CHECK(cuGraphAddMemsetNode(&same_ms, same, nullptr, 0, &twelve, ctx));
  np = {};
  np.type = CU_GRAPH_NODE_TYPE_GRAPH;
  np.graph.graph = same;
  CHECK(cuGraphNodeSetParams(ch, &np));
  CUgraph embedded_now;
  CHECK(cuGraphChildGraphNodeGetGraph(ch, &embedded_now));
  EXPECT_TRUE(embedded_now == embedded);
  CHECK(cuGraphMemsetNodeGetParams(embedded_ms, &got_ms));
  EXPECT_TRUE(got_ms.value == 12);
  np.graph.graph = child;  // two nodes now
  EXPECT_ERROR(cuGraphNodeSetParams(ch, &np), CUDA_ERROR_INVALID_VALUE);
  np = {};
  np.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
  EXPECT_ERROR(cuGraphNodeSetParams(ms, &np), CUDA_ERROR_INVALID_VALUE);  // not its type
  EXPECT_ERROR(cuGraphNodeSetParams(ms, nullptr), CUDA_ERROR_INVALID_VALUE);
  // The executable graph made before is not changed by any of this.
  for (CUdeviceptr p : {a, b, c, d, e}) Fill(p, -1);
  CHECK(cuEventRecord(ev_start, s));
  CHECK(cuGraphLaunch(exec, s));
  CHECK(cuStreamSynchronize(s));
  EXPECT_TRUE(All(Read(a), 9) && All(Read(b), 9) && All(Read(c), 6) && All(Read(d), 3) &&
              All(Read(e), -1));
  EXPECT_TRUE(calls == 0 && calls2 == 2);
  // A new one runs the new parameters.
  CUgraphExec exec2;
  CHECK(cuGraphInstantiate(&exec2, g, 0));
  for (CUdeviceptr p : {a, b, c, d, e}) Fill(p, -1);
  CHECK(cuEventRecord(ev2, s));
  CHECK(cuGraphLaunch(exec2, s));
  CHECK(cuStreamSynchronize(s));
  EXPECT_TRUE(All(Read(a), 11) && All(Read(b), -1) && All(Read(c), 12) && All(Read(d), 4) &&
              All(Read(e), 11));
  EXPECT_TRUE(calls == 1 && calls2 == 2);
  CHECK(cuGraphExecDestroy(exec2));

  // Refused: wrong node types, null pointers, bad events, a destroyed node.
  EXPECT_ERROR(cuGraphMemsetNodeGetParams(cp, &got_ms), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphMemcpyNodeGetParams(ms, &got_cp), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphMemcpyNodeSetParams(hn, &cpp), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphHostNodeSetParams(ms, &hp), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphHostNodeGetParams(er, &got_hp), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphEventRecordNodeGetEvent(ew, &got_ev), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphEventWaitNodeSetEvent(er, ev1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphChildGraphNodeGetGraph(ms, &embedded_now), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphMemsetNodeGetParams(ms, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphMemsetNodeSetParams(ms, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphChildGraphNodeGetGraph(ch, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphEventRecordNodeGetEvent(er, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphEventRecordNodeSetEvent(er, nullptr), CUDA_ERROR_INVALID_HANDLE);
  CUDA_MEMSET_NODE_PARAMS bad = Memset(a, 1, kN);
  bad.elementSize = 3;
  EXPECT_ERROR(cuGraphMemsetNodeSetParams(ms, &bad), CUDA_ERROR_INVALID_VALUE);
  CUDA_HOST_NODE_PARAMS no_fn = {nullptr, nullptr};
  EXPECT_ERROR(cuGraphHostNodeSetParams(hn, &no_fn), CUDA_ERROR_INVALID_VALUE);

  // --- An executable graph's parameters, changed between launches. ---
  // `exec` (instantiated above) runs: ms a = 9; cp b = a; hn calls2; er ev2; ew ev_start;
  // kn d = 3; ch c = 6.
  CUevent ev3;  // never recorded yet
  CHECK(cuEventCreate(&ev3, 0));
  CUDA_MEMSET_NODE_PARAMS m21 = Memset(a, 21, kN);
  CHECK(cuGraphExecMemsetNodeSetParams(exec, ms, &m21, ctx));
  CUDA_MEMCPY3D to_e = DeviceToDevice(e, a, bytes);
  CHECK(cuGraphExecMemcpyNodeSetParams(exec, cp, &to_e, ctx));
  CHECK(cuGraphExecHostNodeSetParams(exec, hn, &hp));  // calls
  CHECK(cuGraphExecEventRecordNodeSetEvent(exec, er, ev3));
  CHECK(cuGraphExecEventWaitNodeSetEvent(exec, ew, ev1));
  CUgraphNodeParams kernel_np = {};
  kernel_np.type = CU_GRAPH_NODE_TYPE_KERNEL;
  kernel_np.kernel.func = set_all;
  kernel_np.kernel.gridDimX = kernel_np.kernel.gridDimY = kernel_np.kernel.gridDimZ = 1;
  kernel_np.kernel.blockDimX = kN;
  kernel_np.kernel.blockDimY = kernel_np.kernel.blockDimZ = 1;
  kernel_np.kernel.kernelParams = kargs4;  // d = 4
  CHECK(cuGraphExecNodeSetParams(exec, kn, &kernel_np));
  CHECK(cuGraphExecChildGraphNodeSetParams(exec, ch, same));  // c = 12
  for (CUdeviceptr p : {a, b, c, d, e}) Fill(p, -1);
  int calls_before = calls, calls2_before = calls2;
  CHECK(cuEventRecord(ev_start, s));
  CHECK(cuGraphLaunch(exec, s));
  CHECK(cuStreamSynchronize(s));
  EXPECT_TRUE(All(Read(a), 21) && All(Read(b), -1) && All(Read(e), 21) && All(Read(c), 12) &&
              All(Read(d), 4));
  EXPECT_TRUE(calls == calls_before + 1 && calls2 == calls2_before);
  CHECK(cuEventElapsedTime(&ms_elapsed, ev_start, ev3));  // recorded by the graph now

  // The generic form, for each type.
  np = {};
  np.type = CU_GRAPH_NODE_TYPE_MEMSET;
  np.memset.dst = a;
  np.memset.value = 22;
  np.memset.elementSize = 4;
  np.memset.width = kN;
  np.memset.height = 1;
  CHECK(cuGraphExecNodeSetParams(exec, ms, &np));
  np = {};
  np.type = CU_GRAPH_NODE_TYPE_MEMCPY;
  np.memcpy.copyParams = DeviceToDevice(b, a, bytes);
  CHECK(cuGraphExecNodeSetParams(exec, cp, &np));
  np = {};
  np.type = CU_GRAPH_NODE_TYPE_HOST;
  np.host.fn = CountCall;
  np.host.userData = &calls2;
  CHECK(cuGraphExecNodeSetParams(exec, hn, &np));
  np = {};
  np.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
  np.eventRecord.event = ev2;
  CHECK(cuGraphExecNodeSetParams(exec, er, &np));
  np = {};
  np.type = CU_GRAPH_NODE_TYPE_WAIT_EVENT;
  np.eventWait.event = ev_start;
  CHECK(cuGraphExecNodeSetParams(exec, ew, &np));
  CUgraph same13;
  CHECK(cuGraphClone(&same13, same));
  CUgraphNode same13_ms;
  CHECK(cuGraphNodeFindInClone(&same13_ms, same_ms, same13));
  CUDA_MEMSET_NODE_PARAMS thirteen = Memset(c, 13, kN);
  CHECK(cuGraphMemsetNodeSetParams(same13_ms, &thirteen));
  np = {};
  np.type = CU_GRAPH_NODE_TYPE_GRAPH;
  np.graph.graph = same13;
  CHECK(cuGraphExecNodeSetParams(exec, ch, &np));
  for (CUdeviceptr p : {a, b, c, d, e}) Fill(p, -1);
  calls_before = calls;
  calls2_before = calls2;
  CHECK(cuEventRecord(ev_start, s));
  CHECK(cuGraphLaunch(exec, s));
  CHECK(cuStreamSynchronize(s));
  EXPECT_TRUE(All(Read(a), 22) && All(Read(b), 22) && All(Read(e), -1) && All(Read(c), 13) &&
              All(Read(d), 4));
  EXPECT_TRUE(calls == calls_before && calls2 == calls2_before + 1);

  // Disabled kernel and memset nodes do nothing; new parameters of a disabled node wait for it
  // to be enabled again.
  unsigned enabled = 7;
  CHECK(cuGraphNodeGetEnabled(exec, kn, &enabled));
  EXPECT_TRUE(enabled == 1);
  CHECK(cuGraphNodeSetEnabled(exec, kn, 0));
  CHECK(cuGraphNodeSetEnabled(exec, ms, 0));
  CHECK(cuGraphNodeGetEnabled(exec, kn, &enabled));
  EXPECT_TRUE(enabled == 0);
  int five = 5;
  void* kargs5[] = {&d, &five, &count};
  CUDA_KERNEL_NODE_PARAMS kp5 = Launch(set_all, kargs5, 1, kN);
  CHECK(cuGraphExecKernelNodeSetParams(exec, kn, &kp5));
  for (CUdeviceptr p : {a, b, c, d, e}) Fill(p, -1);
  Fill(a, 77);
  CHECK(cuEventRecord(ev_start, s));
  CHECK(cuGraphLaunch(exec, s));
  CHECK(cuStreamSynchronize(s));
  EXPECT_TRUE(All(Read(a), 77) && All(Read(b), 77) && All(Read(c), 13) && All(Read(d), -1));
  CHECK(cuGraphNodeSetEnabled(exec, kn, 1));
  CHECK(cuGraphNodeGetEnabled(exec, kn, &enabled));
  EXPECT_TRUE(enabled == 1);
  CHECK(cuEventRecord(ev_start, s));
  CHECK(cuGraphLaunch(exec, s));
  CHECK(cuStreamSynchronize(s));
  EXPECT_TRUE(All(Read(a), 77) && All(Read(d), 5));
  CHECK(cuGraphNodeSetEnabled(exec, ms, 1));
  CHECK(cuEventRecord(ev_start, s));
  CHECK(cuGraphLaunch(exec, s));
  CHECK(cuStreamSynchronize(s));
  EXPECT_TRUE(All(Read(a), 22) && All(Read(b), 22));
  // Only kernel, memcpy and memset nodes can be disabled.
  EXPECT_ERROR(cuGraphNodeSetEnabled(exec, hn, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphNodeGetEnabled(exec, ch, &enabled), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphNodeGetEnabled(exec, kn, nullptr), CUDA_ERROR_INVALID_VALUE);
  CHECK(cuGraphNodeSetEnabled(exec, cp, 0));
  CHECK(cuGraphNodeSetEnabled(exec, cp, 1));

  // Changes CUDA refuses, and the executable graph runs on as it was.
  CUDA_MEMSET_NODE_PARAMS tall = Memset(a, 1, kN / 4);
  tall.height = 4;
  tall.pitch = kN;
  EXPECT_ERROR(cuGraphExecMemsetNodeSetParams(exec, ms, &tall, ctx), CUDA_ERROR_INVALID_VALUE);
  CUDA_MEMSET_NODE_PARAMS on_host = Memset(reinterpret_cast<CUdeviceptr>(host.data()), 1, kN);
  EXPECT_ERROR(cuGraphExecMemsetNodeSetParams(exec, ms, &on_host, ctx), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphExecMemsetNodeSetParams(exec, cp, &m21, ctx), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphExecMemsetNodeSetParams(exec, ms, nullptr, ctx), CUDA_ERROR_INVALID_VALUE);
  CUDA_MEMCPY3D down = DeviceToHost(host.data(), a, bytes);
  EXPECT_ERROR(cuGraphExecMemcpyNodeSetParams(exec, cp, &down, ctx),
               CUDA_ERROR_INVALID_VALUE);  // another memory type
  CUDA_MEMCPY3D rows = DeviceToDevice(b, a, bytes / 2);
  rows.Height = 2;
  rows.srcPitch = rows.dstPitch = bytes / 2;
  EXPECT_ERROR(cuGraphExecMemcpyNodeSetParams(exec, cp, &rows, ctx), CUDA_ERROR_INVALID_VALUE);
  CUDA_MEMCPY3D empty = DeviceToDevice(b, a, 0);
  EXPECT_ERROR(cuGraphExecMemcpyNodeSetParams(exec, cp, &empty, ctx), CUDA_ERROR_INVALID_VALUE);
  CUDA_MEMCPY3D unmapped = DeviceToDevice(reinterpret_cast<CUdeviceptr>(host2.data()), a, bytes);
  EXPECT_ERROR(cuGraphExecMemcpyNodeSetParams(exec, cp, &unmapped, ctx),
               CUDA_ERROR_INVALID_VALUE);  // not memory of the same context
  EXPECT_ERROR(cuGraphExecHostNodeSetParams(exec, ms, &hp), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphExecHostNodeSetParams(exec, hn, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphExecEventRecordNodeSetEvent(exec, ew, ev1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphExecEventWaitNodeSetEvent(exec, er, ev1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphExecEventRecordNodeSetEvent(exec, er, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphExecKernelNodeSetParams(exec, hn, &kp5), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphExecChildGraphNodeSetParams(exec, ms, same), CUDA_ERROR_INVALID_VALUE);
  // A child graph of another topology: more nodes, another type, or a shape a memset may not
  // take.
  EXPECT_ERROR(cuGraphExecChildGraphNodeSetParams(exec, ch, child), CUDA_ERROR_INVALID_VALUE);
  CUgraph other_type;
  CHECK(cuGraphCreate(&other_type, 0));
  CUgraphNode other_kn;
  CHECK(cuGraphAddKernelNode(&other_kn, other_type, nullptr, 0, &kp));
  EXPECT_ERROR(cuGraphExecChildGraphNodeSetParams(exec, ch, other_type), CUDA_ERROR_INVALID_VALUE);
  CUgraph other_shape;
  CHECK(cuGraphCreate(&other_shape, 0));
  CUgraphNode other_ms;
  CHECK(cuGraphAddMemsetNode(&other_ms, other_shape, nullptr, 0, &tall, ctx));
  EXPECT_ERROR(cuGraphExecChildGraphNodeSetParams(exec, ch, other_shape), CUDA_ERROR_INVALID_VALUE);
  np = {};
  np.type = CU_GRAPH_NODE_TYPE_EMPTY;
  EXPECT_ERROR(cuGraphExecNodeSetParams(exec, ms, &np), CUDA_ERROR_INVALID_VALUE);
  np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  EXPECT_ERROR(cuGraphExecNodeSetParams(exec, ms, &np), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_ERROR(cuGraphExecNodeSetParams(exec, ms, nullptr), CUDA_ERROR_INVALID_VALUE);
  // A node of another graph.
  EXPECT_ERROR(cuGraphExecMemsetNodeSetParams(exec, other_ms, &m21, ctx), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphNodeSetEnabled(exec, other_kn, 0), CUDA_ERROR_INVALID_VALUE);
  for (CUdeviceptr p : {a, b, c, d, e}) Fill(p, -1);
  CHECK(cuEventRecord(ev_start, s));
  CHECK(cuGraphLaunch(exec, s));
  CHECK(cuStreamSynchronize(s));
  EXPECT_TRUE(All(Read(a), 22) && All(Read(b), 22) && All(Read(c), 13) && All(Read(d), 5));

  // Copies to and from host memory, and a 2-dimensional memset that keeps its shape.
  CUgraph g2;
  CHECK(cuGraphCreate(&g2, 0));
  CUgraphNode set2d, to_host;
  CUDA_MEMSET_NODE_PARAMS m2d = Memset(a, 31, kN / 4);
  m2d.height = 4;
  m2d.pitch = bytes / 4;
  CHECK(cuGraphAddMemsetNode(&set2d, g2, nullptr, 0, &m2d, ctx));
  CHECK(cuGraphAddMemcpyNode(&to_host, g2, &set2d, 1, &down, ctx));
  CUgraphExec exec_host;
  CHECK(
      cuGraphInstantiateWithFlags(&exec_host, g2, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
  CHECK(cuGraphLaunch(exec_host, s));
  CHECK(cuStreamSynchronize(s));
  EXPECT_TRUE(All(host, 31) && All(host2, -1));
  CUDA_MEMCPY3D down2 = DeviceToHost(host2.data(), b, bytes);
  CHECK(cuGraphExecMemcpyNodeSetParams(exec_host, to_host, &down2, ctx));
  CUDA_MEMSET_NODE_PARAMS m2d_b = m2d;
  m2d_b.dst = b;
  m2d_b.value = 32;
  CHECK(cuGraphExecMemsetNodeSetParams(exec_host, set2d, &m2d_b, ctx));
  CUDA_MEMSET_NODE_PARAMS m2d_wide = m2d_b;
  m2d_wide.width = kN / 8;
  EXPECT_ERROR(cuGraphExecMemsetNodeSetParams(exec_host, set2d, &m2d_wide, ctx),
               CUDA_ERROR_INVALID_VALUE);
  CUDA_MEMCPY3D up = to_e;  // device to device: another memory type
  EXPECT_ERROR(cuGraphExecMemcpyNodeSetParams(exec_host, to_host, &up, ctx),
               CUDA_ERROR_INVALID_VALUE);
  std::fill(host.begin(), host.end(), -1);
  CHECK(cuGraphLaunch(exec_host, s));
  CHECK(cuStreamSynchronize(s));
  EXPECT_TRUE(All(host, -1) && All(host2, 32));
  // A disabled memcpy between host and device does nothing either.
  CHECK(cuGraphNodeSetEnabled(exec_host, to_host, 0));
  std::fill(host2.begin(), host2.end(), -1);
  CHECK(cuGraphLaunch(exec_host, s));
  CHECK(cuStreamSynchronize(s));
  EXPECT_TRUE(All(host2, -1));

  // The flags an executable graph was instantiated with (uploading is not one of them).
  cuuint64_t flags = 99;
  CHECK(cuGraphExecGetFlags(exec, &flags));
  EXPECT_TRUE(flags == 0);
  CHECK(cuGraphExecGetFlags(exec_host, &flags));
  EXPECT_TRUE(flags == CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
  CUDA_GRAPH_INSTANTIATE_PARAMS ip = {};
  ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  ip.hUploadStream = s;
  CUgraphExec exec_flags;
  CHECK(cuGraphInstantiateWithParams(&exec_flags, g2, &ip));
  CHECK(cuGraphExecGetFlags(exec_flags, &flags));
  EXPECT_TRUE(flags == CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);
  EXPECT_ERROR(cuGraphExecGetFlags(exec_flags, nullptr), CUDA_ERROR_INVALID_VALUE);
  CHECK(cuGraphExecDestroy(exec_flags));

  // A destroyed node names nothing any more.
  CHECK(cuGraphDestroyNode(kn));
  EXPECT_ERROR(cuGraphExecKernelNodeSetParams(exec, kn, &kp5), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphNodeSetEnabled(exec, kn, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphKernelNodeGetParams(kn, &got_kp), CUDA_ERROR_INVALID_VALUE);
  CHECK(cuGraphDestroyNode(ch));
  EXPECT_ERROR(cuGraphChildGraphNodeGetGraph(ch, &embedded_now), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphGetNodes(embedded, nullptr, &one), CUDA_ERROR_INVALID_VALUE);  // gone too
  // The executable graph still runs what it was given.
  for (CUdeviceptr p : {a, b, c, d, e}) Fill(p, -1);
  CHECK(cuEventRecord(ev_start, s));
  CHECK(cuGraphLaunch(exec, s));
  CHECK(cuStreamSynchronize(s));
  EXPECT_TRUE(All(Read(a), 22) && All(Read(c), 13) && All(Read(d), 5));

  // --- Topology: edges, dependent nodes, removing edges. ---
  CUgraph t;
  CHECK(cuGraphCreate(&t, 0));
  CUgraphNode n0, n1, n2, n3;
  CHECK(cuGraphAddEmptyNode(&n0, t, nullptr, 0));
  CHECK(cuGraphAddEmptyNode(&n1, t, &n0, 1));
  CHECK(cuGraphAddEmptyNode(&n2, t, &n0, 1));
  CUgraphNode both[] = {n1, n2};
  CHECK(cuGraphAddEmptyNode(&n3, t, both, 2));
  using Edge = std::pair<CUgraphNode, CUgraphNode>;
  EXPECT_TRUE(Edges(t) == (std::set<Edge>{{n0, n1}, {n0, n2}, {n1, n3}, {n2, n3}}));
  EXPECT_TRUE(Dependents(n0) == (std::set<CUgraphNode>{n1, n2}));
  EXPECT_TRUE(Dependents(n1) == (std::set<CUgraphNode>{n3}));
  EXPECT_TRUE(Dependents(n3).empty());
  CUgraphNode from_n0, to_n0;
  size_t n_edges = 1;
  CHECK(cuGraphGetEdges(t, &from_n0, &to_n0, nullptr, &n_edges));  // room for one of four
  EXPECT_TRUE(n_edges == 4 && from_n0 != nullptr);
  CHECK(cuGraphRemoveDependencies(t, &n0, &n1, nullptr, 1));
  EXPECT_TRUE(Edges(t) == (std::set<Edge>{{n0, n2}, {n1, n3}, {n2, n3}}));
  EXPECT_TRUE(Dependents(n0) == (std::set<CUgraphNode>{n2}));
  size_t roots = 0;
  CHECK(cuGraphGetRootNodes(t, nullptr, &roots));
  EXPECT_TRUE(roots == 2);
  // Every edge named must exist; none is removed otherwise.
  CUgraphNode rm_from[] = {n0, n0}, rm_to[] = {n2, n3};
  EXPECT_ERROR(cuGraphRemoveDependencies(t, rm_from, rm_to, nullptr, 2), CUDA_ERROR_INVALID_VALUE);
  CUgraphNode twice_from[] = {n1, n1}, twice_to[] = {n3, n3};
  EXPECT_ERROR(cuGraphRemoveDependencies(t, twice_from, twice_to, nullptr, 2),
               CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(Edges(t).size() == 3);
  EXPECT_ERROR(cuGraphRemoveDependencies(t, &n0, &other_kn, nullptr, 1), CUDA_ERROR_INVALID_VALUE);
  CUgraphEdgeData programmatic = {};
  programmatic.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
  EXPECT_ERROR(cuGraphRemoveDependencies(t, &n0, &n2, &programmatic, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphRemoveDependencies(t, nullptr, nullptr, nullptr, 1),
               CUDA_ERROR_INVALID_VALUE);
  CHECK(cuGraphRemoveDependencies(t, nullptr, nullptr, nullptr, 0));
  // Bad queries.
  EXPECT_ERROR(cuGraphGetEdges(t, nullptr, nullptr, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphGetEdges(t, &from_n0, nullptr, nullptr, &n_edges), CUDA_ERROR_INVALID_VALUE);
  CUgraphEdgeData data;
  EXPECT_ERROR(cuGraphGetEdges(t, nullptr, nullptr, &data, &n_edges), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphNodeGetDependentNodes(n0, nullptr, nullptr, nullptr),
               CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphNodeGetDependentNodes(n0, nullptr, &data, &n_edges),
               CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphGetEdges(nullptr, nullptr, nullptr, nullptr, &n_edges),
               CUDA_ERROR_INVALID_VALUE);
  // The revisions without edge data, as the driver's table hands them to older programs.
  typedef CUresult (*GetEdgesV1)(CUgraph, CUgraphNode*, CUgraphNode*, size_t*);
  typedef CUresult (*DependentsV1)(CUgraphNode, CUgraphNode*, size_t*);
  typedef CUresult (*RemoveV1)(CUgraph, const CUgraphNode*, const CUgraphNode*, size_t);
  void* fn = nullptr;
  CUdriverProcAddressQueryResult found;
  CHECK(cuGetProcAddress("cuGraphGetEdges", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &found));
  size_t legacy_n = 0;
  CHECK(reinterpret_cast<GetEdgesV1>(fn)(t, nullptr, nullptr, &legacy_n));
  EXPECT_TRUE(legacy_n == 3);
  CHECK(cuGetProcAddress("cuGraphNodeGetDependentNodes", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT,
                         &found));
  CUgraphNode dependent = nullptr;
  legacy_n = 1;
  CHECK(reinterpret_cast<DependentsV1>(fn)(n0, &dependent, &legacy_n));
  EXPECT_TRUE(legacy_n == 1 && dependent == n2);
  CHECK(cuGetProcAddress("cuGraphRemoveDependencies", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT,
                         &found));
  CHECK(reinterpret_cast<RemoveV1>(fn)(t, &n0, &n2, 1));
  EXPECT_TRUE(Edges(t) == (std::set<Edge>{{n1, n3}, {n2, n3}}));
  CHECK(cuGraphAddDependencies(t, &n0, &n1, nullptr, 1));  // back again
  // Not in a graph with memory alloc or free nodes.
  CUgraph with_alloc;
  CHECK(cuGraphCreate(&with_alloc, 0));
  CUgraphNode before_alloc, alloc;
  CHECK(cuGraphAddEmptyNode(&before_alloc, with_alloc, nullptr, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS alloc_params = {};
  alloc_params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  alloc_params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  alloc_params.poolProps.location.id = 0;
  alloc_params.bytesize = 4096;
  CHECK(cuGraphAddMemAllocNode(&alloc, with_alloc, &before_alloc, 1, &alloc_params));
  EXPECT_ERROR(cuGraphRemoveDependencies(with_alloc, &before_alloc, &alloc, nullptr, 1),
               CUDA_ERROR_INVALID_VALUE);
  // ... nor as a child graph copied into a node.
  CUgraphNode bad_child;
  EXPECT_ERROR(cuGraphAddChildGraphNode(&bad_child, t, nullptr, 0, with_alloc),
               CUDA_ERROR_INVALID_VALUE);

  // --- Clones: each node's copy, also in the graphs of child graph nodes. ---
  CUgraph with_child;
  CHECK(cuGraphCreate(&with_child, 0));
  CUgraphNode wc_child, wc_after;
  CHECK(cuGraphAddChildGraphNode(&wc_child, with_child, nullptr, 0, same));
  CHECK(cuGraphAddEmptyNode(&wc_after, with_child, &wc_child, 1));
  CUgraph clone;
  CHECK(cuGraphClone(&clone, with_child));
  CUgraphNode cloned_child, cloned_after;
  CHECK(cuGraphNodeFindInClone(&cloned_child, wc_child, clone));
  CHECK(cuGraphNodeFindInClone(&cloned_after, wc_after, clone));
  EXPECT_TRUE(cloned_child != wc_child && cloned_after != wc_after);
  CUgraphNodeType type;
  CHECK(cuGraphNodeGetType(cloned_child, &type));
  EXPECT_TRUE(type == CU_GRAPH_NODE_TYPE_GRAPH);
  EXPECT_TRUE(Dependents(cloned_child) == (std::set<CUgraphNode>{cloned_after}));
  CUgraph original_embedded, cloned_embedded;
  CHECK(cuGraphChildGraphNodeGetGraph(wc_child, &original_embedded));
  CHECK(cuGraphChildGraphNodeGetGraph(cloned_child, &cloned_embedded));
  EXPECT_TRUE(original_embedded != cloned_embedded);  // copied too
  CUgraphNode original_inner, cloned_inner;
  one = 1;
  CHECK(cuGraphGetNodes(original_embedded, &original_inner, &one));
  CHECK(cuGraphNodeFindInClone(&cloned_inner, original_inner, cloned_embedded));
  CHECK(cuGraphMemsetNodeGetParams(cloned_inner, &got_ms));
  EXPECT_TRUE(got_ms.dst == c && got_ms.value == 12);
  // Not found: a node added after cloning, a graph that is not a clone of it, a copy destroyed.
  CUgraphNode later, found_node;
  CHECK(cuGraphAddEmptyNode(&later, with_child, nullptr, 0));
  EXPECT_ERROR(cuGraphNodeFindInClone(&found_node, later, clone), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphNodeFindInClone(&found_node, wc_child, t), CUDA_ERROR_INVALID_VALUE);
  CHECK(cuGraphDestroyNode(cloned_after));
  EXPECT_ERROR(cuGraphNodeFindInClone(&found_node, wc_after, clone), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphNodeFindInClone(nullptr, wc_child, clone), CUDA_ERROR_INVALID_VALUE);
  EXPECT_ERROR(cuGraphNodeFindInClone(&found_node, wc_child, nullptr), CUDA_ERROR_INVALID_VALUE);

  // --- A child graph moved into its node: the node owns that very graph. ---
  CUgraph moved, parent;
  CHECK(cuGraphCreate(&moved, 0));
  CHECK(cuGraphCreate(&parent, 0));
  CUgraphNode moved_ms, moved_node;
  CUDA_MEMSET_NODE_PARAMS m41 = Memset(e, 41, kN);
  CHECK(cuGraphAddMemsetNode(&moved_ms, moved, nullptr, 0, &m41, ctx));
  np = {};
  np.type = CU_GRAPH_NODE_TYPE_GRAPH;
  np.graph.graph = moved;
  np.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
  EXPECT_ERROR(cuGraphAddNode(&moved_node, parent, &n0, nullptr, 1, &np),
               CUDA_ERROR_INVALID_VALUE);  // a node of another graph: not moved
  EXPECT_TRUE(CountNodes(moved) == 1);
  CHECK(cuGraphAddNode(&moved_node, parent, nullptr, nullptr, 0, &np));
  CUgraph owned;
  CHECK(cuGraphChildGraphNodeGetGraph(moved_node, &owned));
  EXPECT_TRUE(owned == moved);
  EXPECT_ERROR(cuGraphDestroy(moved), CUDA_ERROR_INVALID_VALUE);
  CUgraphNode twice;
  EXPECT_ERROR(cuGraphAddNode(&twice, t, nullptr, nullptr, 0, &np), CUDA_ERROR_INVALID_VALUE);
  CUgraphExec exec_moved;
  CHECK(cuGraphInstantiate(&exec_moved, parent, 0));
  Fill(e, -1);
  CHECK(cuGraphLaunch(exec_moved, s));
  CHECK(cuStreamSynchronize(s));
  EXPECT_TRUE(All(Read(e), 41));
  CHECK(cuGraphExecDestroy(exec_moved));
  CHECK(cuGraphDestroy(parent));
  EXPECT_ERROR(cuGraphGetNodes(moved, nullptr, &one), CUDA_ERROR_INVALID_VALUE);  // went with it

  // --- Captured nodes keep only their work: their parameters can be set, not read back. ---
  CUgraph captured;
  CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CHECK(cuMemsetD32Async(a, 50, kN, s));
  CHECK(cuStreamEndCapture(s, &captured));
  CUgraphNode captured_ms;
  one = 1;
  CHECK(cuGraphGetNodes(captured, &captured_ms, &one));
  EXPECT_ERROR(cuGraphMemsetNodeGetParams(captured_ms, &got_ms), CUDA_ERROR_NOT_SUPPORTED);
  CUgraphExec exec_captured;
  CHECK(cuGraphInstantiate(&exec_captured, captured, 0));
  CUDA_MEMSET_NODE_PARAMS m51 = Memset(a, 51, kN);
  CHECK(cuGraphExecMemsetNodeSetParams(exec_captured, captured_ms, &m51, ctx));
  CHECK(cuGraphLaunch(exec_captured, s));
  CHECK(cuStreamSynchronize(s));
  EXPECT_TRUE(All(Read(a), 51));
  CUDA_MEMSET_NODE_PARAMS m52 = Memset(a, 52, kN);
  CHECK(cuGraphMemsetNodeSetParams(captured_ms, &m52));
  CHECK(cuGraphMemsetNodeGetParams(captured_ms, &got_ms));
  EXPECT_TRUE(got_ms.value == 52);

  CHECK(cuGraphExecDestroy(exec_captured));
  CHECK(cuGraphExecDestroy(exec_host));
  CHECK(cuGraphExecDestroy(exec));
  for (CUgraph graph : {captured, clone, with_child, with_alloc, t, g2, other_shape, other_type,
                        same13, same, child, g}) {
    CHECK(cuGraphDestroy(graph));
  }
  for (CUevent event : {ev1, ev2, ev3, ev_start}) CHECK(cuEventDestroy(event));
  CHECK(cuStreamDestroy(s));
  for (CUdeviceptr p : {a, b, c, d, e}) CHECK(cuMemFree(p));
  CHECK(cuCtxDestroy(ctx));
  printf("graph_params: OK\n");
  return 0;
}
