// Graph memory nodes: an alloc node, a kernel writing the allocation, a copy out and a free node
// run correctly on every launch of the executable graph, at the same address; the allocation's
// address and size come back from the node; graph memory attributes follow it; a graph whose
// allocation is never freed cannot be launched a second time (its allocation is still live);
// cuMemAllocAsync/cuMemFreeAsync on a capturing stream make such nodes too.
#include <vector>

#include "check.h"

int main() {
  InitContext();
  CUmodule m;
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CUfunction set_all;
  CHECK(cuModuleGetFunction(&set_all, m, "set_all"));
  const int n = 1000;
  CUstream stream;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  std::vector<int> host(n);

  CUgraph graph;
  CHECK(cuGraphCreate(&graph, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS alloc = {};
  alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  alloc.poolProps.location.id = 0;
  alloc.bytesize = n * sizeof(int);
  CUgraphNode alloc_node, kernel_node, copy_node, free_node;
  CHECK(cuGraphAddMemAllocNode(&alloc_node, graph, nullptr, 0, &alloc));
  CUdeviceptr p = alloc.dptr;
  EXPECT_TRUE(p != 0);
  CUDA_MEM_ALLOC_NODE_PARAMS got = {};
  CHECK(cuGraphMemAllocNodeGetParams(alloc_node, &got));
  EXPECT_TRUE(got.dptr == p && got.bytesize == n * sizeof(int));
  int value = 0, count = n;
  void* params[] = {&p, &value, &count};
  CUDA_KERNEL_NODE_PARAMS k = {};
  k.func = set_all;
  k.gridDimX = (n + 255) / 256;
  k.gridDimY = k.gridDimZ = 1;
  k.blockDimX = 256;
  k.blockDimY = k.blockDimZ = 1;
  k.kernelParams = params;
  value = 41;
  CHECK(cuGraphAddKernelNode(&kernel_node, graph, &alloc_node, 1, &k));
  CUDA_MEMCPY3D copy = {};
  copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.srcDevice = p;
  copy.dstMemoryType = CU_MEMORYTYPE_HOST;
  copy.dstHost = host.data();
  copy.WidthInBytes = n * sizeof(int);
  copy.Height = copy.Depth = 1;
  CUcontext ctx;
  CHECK(cuCtxGetCurrent(&ctx));
  CHECK(cuGraphAddMemcpyNode(&copy_node, graph, &kernel_node, 1, &copy, ctx));
  CHECK(cuGraphAddMemFreeNode(&free_node, graph, &copy_node, 1, p));
  CUdeviceptr freed = 0;
  CHECK(cuGraphMemFreeNodeGetParams(free_node, &freed));
  EXPECT_TRUE(freed == p);
  EXPECT_TRUE(cuGraphAddMemFreeNode(&free_node, graph, nullptr, 0, p + 4) != CUDA_SUCCESS);
  CUgraphExec exec;
  CHECK(cuGraphInstantiate(&exec, graph, 0));
  CHECK(cuGraphDestroy(graph));  // the executable graph keeps the allocation
  for (int round = 0; round < 3; ++round) {
    host.assign(n, 0);
    CHECK(cuGraphLaunch(exec, stream));
    CHECK(cuStreamSynchronize(stream));
    for (int i = 0; i < n; ++i) EXPECT_TRUE(host[i] == 41);
  }
  cuuint64_t reserved = 0, used = 0;
  CHECK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved));
  CHECK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used));
  EXPECT_TRUE(reserved >= n * sizeof(int) && used == 0);
  CHECK(cuGraphExecDestroy(exec));
  CHECK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved));
  EXPECT_TRUE(reserved == 0);

  // Never freed: live after the first launch, so a second launch is refused.
  CHECK(cuGraphCreate(&graph, 0));
  CHECK(cuGraphAddMemAllocNode(&alloc_node, graph, nullptr, 0, &alloc));
  CHECK(cuGraphInstantiate(&exec, graph, 0));
  CHECK(cuGraphLaunch(exec, stream));
  CHECK(cuStreamSynchronize(stream));
  CHECK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used));
  EXPECT_TRUE(used == n * sizeof(int));
  EXPECT_TRUE(cuGraphLaunch(exec, stream) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cuMemFree(alloc.dptr));  // the program may free it itself
  CHECK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used));
  EXPECT_TRUE(used == 0);
  // ... and then launch the graph again (same address), and free it asynchronously this time.
  CHECK(cuGraphLaunch(exec, stream));
  CHECK(cuMemsetD32Async(alloc.dptr, 5, n, stream));
  CHECK(cuMemcpyDtoHAsync(host.data(), alloc.dptr, n * sizeof(int), stream));
  CHECK(cuMemFreeAsync(alloc.dptr, stream));
  CHECK(cuStreamSynchronize(stream));
  for (int i = 0; i < n; ++i) EXPECT_TRUE(host[i] == 5);
  EXPECT_TRUE(cuMemFree(alloc.dptr) == CUDA_ERROR_INVALID_VALUE);  // no longer live
  CHECK(cuGraphExecDestroy(exec));
  CHECK(cuGraphDestroy(graph));

  // Captured: cuMemAllocAsync and cuMemFreeAsync become memory nodes.
  CHECK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr q = 0;
  CHECK(cuMemAllocAsync(&q, n * sizeof(int), stream));
  value = 7;
  void* qparams[] = {&q, &value, &count};
  CHECK(cuLaunchKernel(set_all, (n + 255) / 256, 1, 1, 256, 1, 1, 0, stream, qparams, nullptr));
  CHECK(cuMemcpyDtoHAsync(host.data(), q, n * sizeof(int), stream));
  CHECK(cuMemFreeAsync(q, stream));
  CHECK(cuStreamEndCapture(stream, &graph));
  CHECK(cuGraphInstantiate(&exec, graph, 0));
  for (int round = 0; round < 2; ++round) {
    host.assign(n, 0);
    CHECK(cuGraphLaunch(exec, stream));
    CHECK(cuStreamSynchronize(stream));
    for (int i = 0; i < n; ++i) EXPECT_TRUE(host[i] == 7);
  }
  CHECK(cuGraphExecDestroy(exec));
  CHECK(cuGraphDestroy(graph));
  CHECK(cuStreamDestroy(stream));
  CHECK(cuModuleUnload(m));
  printf("graph_memory: OK\n");
  return 0;
}
