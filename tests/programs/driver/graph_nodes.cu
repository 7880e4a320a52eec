// Graphs built node by node run their nodes after their dependencies and compute the right
// answer: memset, kernel, copy and host nodes; a clone; new kernel parameters in an executable
// graph; an update from a graph of the same shape, refused for another shape; launch attributes
// on kernel nodes (set, read, copied, kept across new parameters, a cooperative node run as
// one). A destroyed node, a node of another graph, a duplicate edge and a cycle are refused.
#include "check.h"

namespace {

void CUDA_CB CountCall(void* arg) { ++*static_cast<int*>(arg); }

}  // namespace

int main() {
  CUcontext ctx = InitContext();
  CUmodule m;
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CUfunction set_all, add_to;
  CHECK(cuModuleGetFunction(&set_all, m, "set_all"));
  CHECK(cuModuleGetFunction(&add_to, m, "add_to"));
  const int n = 1024;
  CUdeviceptr p, counter;
  CHECK(cuMemAlloc(&p, n * sizeof(int)));
  CHECK(cuMemAlloc(&counter, sizeof(int)));
  std::vector<int> host(n, -1);
  int calls = 0;

  CUgraph g;
  CHECK(cuGraphCreate(&g, 0));
  CUDA_MEMSET_NODE_PARAMS ms = {};
  ms.dst = counter;
  ms.value = 0;
  ms.elementSize = 4;
  ms.width = 1;
  ms.height = 1;
  CUgraphNode zero, fill, add, copy, host_node;
  CHECK(cuGraphAddMemsetNode(&zero, g, nullptr, 0, &ms, ctx));
  int value = 5, count = n;
  void* fill_args[] = {&p, &value, &count};
  CUDA_KERNEL_NODE_PARAMS kp = {};
  kp.func = set_all;
  kp.gridDimX = n / 128;
  kp.gridDimY = kp.gridDimZ = 1;
  kp.blockDimX = 128;
  kp.blockDimY = kp.blockDimZ = 1;
  kp.kernelParams = fill_args;
  CHECK(cuGraphAddKernelNode(&fill, g, nullptr, 0, &kp));
  value = 99;  // arguments were copied when the node was added
  int three = 3;
  void* add_args[] = {&counter, &three};
  CUDA_KERNEL_NODE_PARAMS ap = kp;
  ap.func = add_to;
  ap.gridDimX = 1;
  ap.blockDimX = 1;
  ap.kernelParams = add_args;
  CHECK(cuGraphAddKernelNode(&add, g, &zero, 1, &ap));
  CUDA_MEMCPY3D c = {};
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = p;
  c.dstMemoryType = CU_MEMORYTYPE_HOST;
  c.dstHost = host.data();
  c.WidthInBytes = n * sizeof(int);
  c.Height = 1;
  c.Depth = 1;
  CUgraphNode before_copy[] = {fill, add};
  CHECK(cuGraphAddMemcpyNode(&copy, g, before_copy, 2, &c, ctx));
  CUDA_HOST_NODE_PARAMS hp = {CountCall, &calls};
  CHECK(cuGraphAddHostNode(&host_node, g, &copy, 1, &hp));

  size_t roots = 0;
  CHECK(cuGraphGetRootNodes(g, nullptr, &roots));
  EXPECT_TRUE(roots == 2);
  size_t deps = 0;
  CHECK(cuGraphNodeGetDependencies(copy, nullptr, nullptr, &deps));
  EXPECT_TRUE(deps == 2);

  CUgraphExec exec;
  CHECK(cuGraphInstantiate(&exec, g, 0));
  for (int round = 0; round < 2; ++round) {
    CHECK(cuGraphLaunch(exec, nullptr));
    CHECK(cuCtxSynchronize());
    for (int i = 0; i < n; ++i) EXPECT_TRUE(host[i] == 5);
    int got = 0;
    CHECK(cuMemcpyDtoH(&got, counter, sizeof got));
    EXPECT_TRUE(got == 3);  // zeroed before each add
  }
  EXPECT_TRUE(calls == 2);

  // New parameters for the executable graph's fill.
  value = 8;
  CHECK(cuGraphExecKernelNodeSetParams(exec, fill, &kp));
  CHECK(cuGraphLaunch(exec, nullptr));
  CHECK(cuCtxSynchronize());
  for (int i = 0; i < n; ++i) EXPECT_TRUE(host[i] == 8);

  // A clone runs on its own; an update from it takes its parameters.
  CUgraph clone;
  CHECK(cuGraphClone(&clone, g));
  size_t nodes = 0;
  CHECK(cuGraphGetNodes(clone, nullptr, &nodes));
  EXPECT_TRUE(nodes == 5);
  CHECK(cuGraphExecUpdate(exec, clone, nullptr));  // fill with 5 again
  CHECK(cuGraphLaunch(exec, nullptr));
  CHECK(cuCtxSynchronize());
  for (int i = 0; i < n; ++i) EXPECT_TRUE(host[i] == 5);
  CUgraphNode extra;
  CHECK(cuGraphAddEmptyNode(&extra, clone, nullptr, 0));
  CUgraphExecUpdateResultInfo info = {};
  EXPECT_TRUE(cuGraphExecUpdate(exec, clone, &info) == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  EXPECT_TRUE(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);

  // Launch attributes on kernel nodes: set, read back (an unset one reads as 0), copied to
  // another node, kept when the node's parameters change; a cooperative node launches as one
  // (a grid too large to be co-resident is refused when its graph runs, and one that fits
  // computes the right answer).
  {
    CUgraph ag;
    CHECK(cuGraphCreate(&ag, 0));
    CUgraphNode first, second;
    value = 4;
    CHECK(cuGraphAddKernelNode(&first, ag, nullptr, 0, &kp));
    CHECK(cuGraphAddKernelNode(&second, ag, &first, 1, &kp));
    CUkernelNodeAttrValue v = {};
    CHECK(cuGraphKernelNodeGetAttribute(first, CU_KERNEL_NODE_ATTRIBUTE_PRIORITY, &v));
    EXPECT_TRUE(v.priority == 0);
    v.priority = -1;
    CHECK(cuGraphKernelNodeSetAttribute(first, CU_KERNEL_NODE_ATTRIBUTE_PRIORITY, &v));
    v = {};
    v.cooperative = 1;
    CHECK(cuGraphKernelNodeSetAttribute(first, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v));
    CHECK(cuGraphKernelNodeCopyAttributes(second, first));
    v = {};
    CHECK(cuGraphKernelNodeGetAttribute(second, CU_KERNEL_NODE_ATTRIBUTE_PRIORITY, &v));
    EXPECT_TRUE(v.priority == -1);
    CHECK(cuGraphKernelNodeGetAttribute(second, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v));
    EXPECT_TRUE(v.cooperative == 1);
    CUDA_KERNEL_NODE_PARAMS huge = kp;
    huge.gridDimX = 1u << 20;
    CHECK(cuGraphKernelNodeSetParams(second, &huge));
    CHECK(cuGraphKernelNodeGetAttribute(second, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v));
    EXPECT_TRUE(v.cooperative == 1);
    CUgraphExec aexec;
    CUresult r = cuGraphInstantiate(&aexec, ag, 0);
    if (r == CUDA_SUCCESS) {
      r = cuGraphLaunch(aexec, nullptr);
      if (r == CUDA_SUCCESS) r = cuCtxSynchronize();
      cuGraphExecDestroy(aexec);
    }
    EXPECT_TRUE(r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    CUDA_KERNEL_NODE_PARAMS fits = kp;
    fits.gridDimX = 1;
    value = 6;
    CHECK(cuGraphKernelNodeSetParams(second, &fits));
    CHECK(cuGraphInstantiate(&aexec, ag, 0));
    CHECK(cuGraphLaunch(aexec, nullptr));
    CHECK(cuCtxSynchronize());
    std::vector<int> got(n);
    CHECK(cuMemcpyDtoH(got.data(), p, n * sizeof(int)));
    for (int i = 0; i < n; ++i) EXPECT_TRUE(got[i] == (i < (int)kp.blockDimX ? 6 : 4));
    CHECK(cuGraphExecDestroy(aexec));
    EXPECT_TRUE(cuGraphKernelNodeSetAttribute(first, static_cast<CUkernelNodeAttrID>(99), &v) ==
                CUDA_ERROR_INVALID_VALUE);
    EXPECT_TRUE(cuGraphKernelNodeGetAttribute(zero, CU_KERNEL_NODE_ATTRIBUTE_PRIORITY, &v) ==
                CUDA_ERROR_INVALID_VALUE);  // a memset node
    CHECK(cuGraphDestroy(ag));
    value = 5;
  }

  // Refused: a node of another graph as a dependency, a duplicate edge, a destroyed node.
  CUgraphNode other;
  EXPECT_TRUE(cuGraphAddEmptyNode(&other, g, &extra, 1) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuGraphAddDependencies(g, &zero, &add, nullptr, 1) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cuGraphDestroyNode(host_node));
  CUgraphNodeType type;
  EXPECT_TRUE(cuGraphNodeGetType(host_node, &type) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuGraphAddEmptyNode(&other, g, &host_node, 1) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuGraphDestroyNode(host_node) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cuGraphGetNodes(g, nullptr, &nodes));
  EXPECT_TRUE(nodes == 4);
  // A cycle cannot be instantiated.
  CHECK(cuGraphAddDependencies(g, &copy, &zero, nullptr, 1));
  CUgraphExec cyclic;
  EXPECT_TRUE(cuGraphInstantiate(&cyclic, g, 0) != CUDA_SUCCESS);

  CHECK(cuGraphExecDestroy(exec));
  CHECK(cuGraphDestroy(clone));
  CHECK(cuGraphDestroy(g));
  EXPECT_TRUE(cuGraphNodeGetType(fill, &type) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cuMemFree(p));
  CHECK(cuMemFree(counter));
  CHECK(cuCtxDestroy(ctx));
  printf("graph_nodes: OK\n");
  return 0;
}
