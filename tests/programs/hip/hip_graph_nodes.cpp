// Graphs built node by node: memset -> device copy -> copy to the host -> host node, beside a
// child graph, an empty join node and event record and wait nodes, instantiated once and launched
// twice (the data and the host node's effect each time, nothing before a launch); the graph's
// nodes, roots, types and dependencies; dependencies added afterwards; a clone runs like the
// original; an executable graph takes a same-shaped graph's parameters (hipGraphExecUpdate) and
// refuses a different shape; destroyed nodes leave the graph. Kernel nodes name a __global__
// function by its host stub: where the device cannot run AMDGPU code (the software GPU) adding one
// is refused with hipErrorNoBinaryForGpu; where it can, the node runs and its parameters are read,
// changed in the graph and in the executable graph.
#include <string.h>

#include <atomic>
#include <vector>

#include "hip_check.h"

__global__ void fill(int* out, int value, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

namespace {

std::atomic<int> g_host_runs{0};
unsigned char* g_seen = nullptr;  // what the host node saw in the host copy
unsigned char* g_host = nullptr;

void HostNode(void* data) {
  g_host_runs.fetch_add(1);
  *static_cast<unsigned char*>(data) = g_host[0];
}

bool HasDependency(hipGraphNode_t node, hipGraphNode_t dep) {
  size_t count = 0;
  CHECK(hipGraphNodeGetDependencies(node, nullptr, &count));
  std::vector<hipGraphNode_t> deps(count);
  CHECK(hipGraphNodeGetDependencies(node, deps.data(), &count));
  for (hipGraphNode_t d : deps) {
    if (d == dep) return true;
  }
  return false;
}

// Kernel nodes, where the device runs AMDGPU code.
void KernelNodes(hipStream_t s) {
  const int n = 1024;
  int* out;
  CHECK(hipMalloc(reinterpret_cast<void**>(&out), n * sizeof(int)));
  hipGraph_t graph;
  CHECK(hipGraphCreate(&graph, 0));
  int value = 7, count = n;
  void* args[] = {&out, &value, &count};
  hipKernelNodeParams p;
  memset(&p, 0, sizeof p);
  p.func = reinterpret_cast<void*>(fill);
  p.gridDim = dim3(n / 256);
  p.blockDim = dim3(256);
  p.kernelParams = args;
  hipGraphNode_t k;
  hipError_t e = hipGraphAddKernelNode(&k, graph, nullptr, 0, &p);
  if (e == hipErrorNoBinaryForGpu) {
    EXPECT(hipGetLastError() == hipErrorNoBinaryForGpu);
    printf("kernel nodes: the device cannot run AMDGPU code (hipErrorNoBinaryForGpu)\n");
    CHECK(hipGraphDestroy(graph));
    CHECK(hipFree(out));
    return;
  }
  CHECK(e);
  hipGraphNodeType type;
  CHECK(hipGraphNodeGetType(k, &type));
  EXPECT(type == hipGraphNodeTypeKernel);
  hipKernelNodeParams got;
  CHECK(hipGraphKernelNodeGetParams(k, &got));
  EXPECT(got.func == reinterpret_cast<void*>(fill) && got.gridDim.x == n / 256 &&
         got.blockDim.x == 256);
  value = 8;  // the node copied its arguments when added
  hipGraphExec_t exec;
  CHECK(hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0));
  CHECK(hipGraphLaunch(exec, s));
  CHECK(hipStreamSynchronize(s));
  std::vector<int> host(n);
  CHECK(hipMemcpy(host.data(), out, n * sizeof(int), hipMemcpyDeviceToHost));
  for (int v : host) EXPECT(v == 7);
  // New arguments in the executable graph, then in the graph.
  value = 9;
  CHECK(hipGraphExecKernelNodeSetParams(exec, k, &p));
  CHECK(hipGraphLaunch(exec, s));
  CHECK(hipStreamSynchronize(s));
  CHECK(hipMemcpy(host.data(), out, n * sizeof(int), hipMemcpyDeviceToHost));
  for (int v : host) EXPECT(v == 9);
  value = 10;
  CHECK(hipGraphKernelNodeSetParams(k, &p));
  hipGraphExec_t again;
  CHECK(hipGraphInstantiate(&again, graph, nullptr, nullptr, 0));
  CHECK(hipGraphLaunch(again, s));
  CHECK(hipStreamSynchronize(s));
  CHECK(hipMemcpy(host.data(), out, n * sizeof(int), hipMemcpyDeviceToHost));
  for (int v : host) EXPECT(v == 10);
  CHECK(hipGraphExecDestroy(again));
  CHECK(hipGraphExecDestroy(exec));
  CHECK(hipGraphDestroy(graph));
  CHECK(hipFree(out));
  printf("kernel nodes: ran\n");
}

}  // namespace

int main() {
  const size_t n = 1 << 16;
  unsigned char *a, *b, *c;
  CHECK(hipMalloc(reinterpret_cast<void**>(&a), n));
  CHECK(hipMalloc(reinterpret_cast<void**>(&b), n));
  CHECK(hipMalloc(reinterpret_cast<void**>(&c), n));
  CHECK(hipMemset(a, 0, n));
  CHECK(hipMemset(b, 0, n));
  CHECK(hipMemset(c, 0, n));
  std::vector<unsigned char> host(n, 0), host_c(n, 0);
  g_host = host.data();
  unsigned char seen = 0;
  g_seen = &seen;
  hipStream_t s, side;
  CHECK(hipStreamCreate(&s));
  CHECK(hipStreamCreateWithFlags(&side, hipStreamNonBlocking));
  hipEvent_t recorded, gate;
  CHECK(hipEventCreateWithFlags(&recorded, hipEventDisableTiming));
  CHECK(hipEventCreateWithFlags(&gate, hipEventDisableTiming));

  hipGraph_t graph;
  CHECK(hipGraphCreate(&graph, 0));
  // set: a = 0x42 (32-bit elements, the first half), then the rest as bytes.
  hipMemsetParams set;
  memset(&set, 0, sizeof set);
  set.dst = a;
  set.elementSize = 4;
  set.value = 0x42424242u;
  set.width = n / 8;
  set.height = 1;
  hipGraphNode_t set_lo, set_hi, copy, down, host_node, join, record, wait;
  CHECK(hipGraphAddMemsetNode(&set_lo, graph, nullptr, 0, &set));
  set.dst = a + n / 2;
  set.elementSize = 1;
  set.value = 0x24;
  set.width = n / 2;
  CHECK(hipGraphAddMemsetNode(&set_hi, graph, nullptr, 0, &set));
  // An empty node joins both memsets; the side stream's work is waited for there too.
  hipGraphNode_t both[] = {set_lo, set_hi};
  CHECK(hipGraphAddEmptyNode(&join, graph, both, 2));
  CHECK(hipGraphAddEventWaitNode(&wait, graph, nullptr, 0, gate));
  CHECK(hipGraphAddDependencies(graph, &wait, &join, 1));
  // copy: b = a (a 3D copy of one slice), then down: host = b.
  hipMemcpy3DParms p3;
  memset(&p3, 0, sizeof p3);
  p3.srcPtr = make_hipPitchedPtr(a, n, n, 1);
  p3.dstPtr = make_hipPitchedPtr(b, n, n, 1);
  p3.extent = make_hipExtent(n, 1, 1);
  p3.kind = hipMemcpyDeviceToDevice;
  CHECK(hipGraphAddMemcpyNode(&copy, graph, &join, 1, &p3));
  CHECK(hipGraphAddMemcpyNode1D(&down, graph, &copy, 1, host.data(), b, n, hipMemcpyDeviceToHost));
  hipHostNodeParams hp = {HostNode, &seen};
  CHECK(hipGraphAddHostNode(&host_node, graph, &down, 1, &hp));
  CHECK(hipGraphAddEventRecordNode(&record, graph, &host_node, 1, recorded));
  // A child graph: c = b after the copy (its own memcpy node), with the default kind.
  hipGraph_t child;
  CHECK(hipGraphCreate(&child, 0));
  hipGraphNode_t child_copy, child_node;
  CHECK(hipGraphAddMemcpyNode1D(&child_copy, child, nullptr, 0, c, b, n, hipMemcpyDefault));
  CHECK(hipGraphAddChildGraphNode(&child_node, graph, &copy, 1, child));

  // The graph as built.
  size_t count = 0;
  CHECK(hipGraphGetNodes(graph, nullptr, &count));
  EXPECT(count == 9);
  CHECK(hipGraphGetRootNodes(graph, nullptr, &count));
  EXPECT(count == 3);  // the two memsets and the wait
  std::vector<hipGraphNode_t> roots(count);
  CHECK(hipGraphGetRootNodes(graph, roots.data(), &count));
  for (hipGraphNode_t r : roots) EXPECT(r == set_lo || r == set_hi || r == wait);
  hipGraphNodeType type;
  CHECK(hipGraphNodeGetType(set_lo, &type));
  EXPECT(type == hipGraphNodeTypeMemset);
  CHECK(hipGraphNodeGetType(copy, &type));
  EXPECT(type == hipGraphNodeTypeMemcpy);
  CHECK(hipGraphNodeGetType(host_node, &type));
  EXPECT(type == hipGraphNodeTypeHost);
  CHECK(hipGraphNodeGetType(join, &type));
  EXPECT(type == hipGraphNodeTypeEmpty);
  CHECK(hipGraphNodeGetType(child_node, &type));
  EXPECT(type == hipGraphNodeTypeGraph);
  CHECK(hipGraphNodeGetType(record, &type));
  EXPECT(type == hipGraphNodeTypeEventRecord);
  CHECK(hipGraphNodeGetType(wait, &type));
  EXPECT(type == hipGraphNodeTypeWaitEvent);
  EXPECT(HasDependency(join, set_lo) && HasDependency(join, set_hi) && HasDependency(join, wait));
  EXPECT(HasDependency(host_node, down) && !HasDependency(host_node, copy));

  hipGraphExec_t exec;
  CHECK(hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0));
  CHECK(hipDeviceSynchronize());
  for (size_t i = 0; i < n; i += 997) EXPECT(host[i] == 0);  // built, not run
  EXPECT(g_host_runs.load() == 0);
  for (int round = 1; round <= 2; ++round) {
    memset(host.data(), 0, n);
    seen = 0;
    CHECK(hipMemset(b, 0, n));
    CHECK(hipMemset(c, 0, n));
    CHECK(hipEventRecord(gate, side));
    CHECK(hipGraphLaunch(exec, s));
    CHECK(hipEventSynchronize(recorded));  // recorded after the host node
    EXPECT(g_host_runs.load() == round);
    EXPECT(seen == 0x42);
    CHECK(hipStreamSynchronize(s));
    CHECK(hipMemcpy(host_c.data(), c, n, hipMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) {
      const unsigned char expected = i < n / 2 ? 0x42 : 0x24;
      EXPECT(host[i] == expected && host_c[i] == expected);
    }
  }

  // A clone runs like the original.
  hipGraph_t clone;
  CHECK(hipGraphClone(&clone, graph));
  CHECK(hipGraphGetNodes(clone, nullptr, &count));
  EXPECT(count == 9);
  hipGraphExec_t clone_exec;
  CHECK(hipGraphInstantiate(&clone_exec, clone, nullptr, nullptr, 0));
  memset(host.data(), 0, n);
  CHECK(hipEventRecord(gate, side));
  CHECK(hipGraphLaunch(clone_exec, s));
  CHECK(hipStreamSynchronize(s));
  EXPECT(g_host_runs.load() == 3 && host[0] == 0x42 && host[n - 1] == 0x24);

  // An update from a graph of the same shape: the new memset value is used.
  hipGraph_t same;
  CHECK(hipGraphCreate(&same, 0));
  {
    hipMemsetParams m = set;
    m.dst = a;
    m.elementSize = 4;
    m.value = 0x77777777u;
    m.width = n / 8;
    hipGraphNode_t lo, hi, j, w, cp, dn, hn, rec, ch;
    CHECK(hipGraphAddMemsetNode(&lo, same, nullptr, 0, &m));
    m = set;
    m.value = 0x66;
    CHECK(hipGraphAddMemsetNode(&hi, same, nullptr, 0, &m));
    hipGraphNode_t pair[] = {lo, hi};
    CHECK(hipGraphAddEmptyNode(&j, same, pair, 2));
    CHECK(hipGraphAddEventWaitNode(&w, same, nullptr, 0, gate));
    CHECK(hipGraphAddDependencies(same, &w, &j, 1));
    CHECK(hipGraphAddMemcpyNode(&cp, same, &j, 1, &p3));
    CHECK(hipGraphAddMemcpyNode1D(&dn, same, &cp, 1, host.data(), b, n, hipMemcpyDeviceToHost));
    CHECK(hipGraphAddHostNode(&hn, same, &dn, 1, &hp));
    CHECK(hipGraphAddEventRecordNode(&rec, same, &hn, 1, recorded));
    CHECK(hipGraphAddChildGraphNode(&ch, same, &cp, 1, child));
  }
  hipGraphNode_t error_node = nullptr;
  hipGraphExecUpdateResult result = hipGraphExecUpdateError;
  CHECK(hipGraphExecUpdate(exec, same, &error_node, &result));
  EXPECT(result == hipGraphExecUpdateSuccess);
  CHECK(hipEventRecord(gate, side));
  CHECK(hipGraphLaunch(exec, s));
  CHECK(hipStreamSynchronize(s));
  EXPECT(host[0] == 0x77 && host[n - 1] == 0x66);
  // A different shape is refused, and the executable graph keeps what it had.
  CHECK(hipGraphDestroyNode(host_node));
  CHECK(hipGraphGetNodes(graph, nullptr, &count));
  EXPECT(count == 8);
  EXPECT(!HasDependency(record, host_node));
  EXPECT_ERROR(hipGraphExecUpdate(exec, graph, &error_node, &result),
               hipErrorGraphExecUpdateFailure);
  EXPECT(result == hipGraphExecUpdateErrorTopologyChanged);
  EXPECT(hipGetLastError() == hipErrorGraphExecUpdateFailure);
  const int runs = g_host_runs.load();
  CHECK(hipEventRecord(gate, side));
  CHECK(hipGraphLaunch(exec, s));
  CHECK(hipStreamSynchronize(s));
  EXPECT(g_host_runs.load() == runs + 1 && host[0] == 0x77);

  // Bad arguments.
  hipGraphNode_t none;
  EXPECT_ERROR(hipGraphAddEmptyNode(&none, nullptr, nullptr, 0), hipErrorInvalidValue);
  EXPECT_ERROR(hipGraphCreate(&clone, 1), hipErrorInvalidValue);
  EXPECT_ERROR(hipGraphAddMemcpyNode1D(&none, graph, nullptr, 0, c, b, n, (hipMemcpyKind)7),
               hipErrorInvalidMemcpyDirection);
  (void)hipGetLastError();

  KernelNodes(s);

  CHECK(hipGraphExecDestroy(clone_exec));
  CHECK(hipGraphExecDestroy(exec));
  CHECK(hipGraphDestroy(clone));
  CHECK(hipGraphDestroy(same));
  CHECK(hipGraphDestroy(graph));
  CHECK(hipGraphDestroy(child));
  CHECK(hipEventDestroy(recorded));
  CHECK(hipEventDestroy(gate));
  CHECK(hipStreamDestroy(s));
  CHECK(hipStreamDestroy(side));
  CHECK(hipFree(a));
  CHECK(hipFree(b));
  CHECK(hipFree(c));
  puts("hip_graph_nodes: ok");
  return 0;
}
