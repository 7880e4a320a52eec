// User objects (cuUserObjectCreate, cuGraphRetainUserObject): a destructor runs once every
// reference is released, not before: the program's own (retained and released), a graph's (moved
// to it, or new), a clone's, and an executable graph's, which instantiation takes and which stay
// until the launches made with them have run (the destructor finds the stream idle, behind a long
// kernel), as do those an update of it replaces. Releasing more than is held, and the calls' bad
// arguments, are refused.
#include <atomic>
#include <chrono>
#include <thread>

#include "check.h"

namespace {

std::atomic<int> g_destroyed[4];

// Destructors may not call CUDA: this one notes that it ran, and the program looks at the rest.
void CUDA_CB Destroy(void* which) { g_destroyed[reinterpret_cast<uintptr_t>(which)].fetch_add(1); }

// Waits up to 10 s for destructor `which` to have run `times` times.
bool RanWithin(int which, int times) {
  for (int i = 0; i < 1000 && g_destroyed[which].load() < times; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return g_destroyed[which].load() == times;
}

// Gives destructors that should not run a moment to show that they do not.
bool StillAlive(int which) {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return g_destroyed[which].load() == 0;
}

void* Tag(uintptr_t which) { return reinterpret_cast<void*>(which); }

}  // namespace

int main() {
  InitContext();
  CUuserObject object;
  EXPECT_TRUE(cuUserObjectCreate(&object, Tag(0), Destroy, 1, 0) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuUserObjectCreate(&object, Tag(0), Destroy, 0, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) ==
              CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuUserObjectCreate(&object, Tag(0), nullptr, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) ==
              CUDA_ERROR_INVALID_VALUE);

  // The program's references: one at creation, two retained, three released.
  CHECK(cuUserObjectCreate(&object, Tag(0), Destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  CHECK(cuUserObjectRetain(object, 2));
  EXPECT_TRUE(cuUserObjectRetain(object, 0) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cuUserObjectRelease(object, 2));
  EXPECT_TRUE(StillAlive(0));
  CHECK(cuUserObjectRelease(object, 1));
  EXPECT_TRUE(RanWithin(0, 1));

  // A graph's references, new ones and moved ones, and a clone's.
  CUuserObject shared;
  CHECK(cuUserObjectCreate(&shared, Tag(1), Destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  CUgraph graph, clone;
  CHECK(cuGraphCreate(&graph, 0));
  CHECK(cuGraphRetainUserObject(graph, shared, 2, 0));  // the graph's own two
  EXPECT_TRUE(cuGraphRetainUserObject(graph, shared, 1, 7) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuGraphReleaseUserObject(graph, shared, 3) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cuGraphReleaseUserObject(graph, shared, 1));
  CHECK(cuGraphRetainUserObject(graph, shared, 1, CU_GRAPH_USER_OBJECT_MOVE));  // the program's
  CUgraphNode empty;
  CHECK(cuGraphAddEmptyNode(&empty, graph, nullptr, 0));
  CHECK(cuGraphClone(&clone, graph));
  CHECK(cuGraphDestroy(graph));
  EXPECT_TRUE(StillAlive(1));  // the clone holds two
  CHECK(cuGraphDestroy(clone));
  EXPECT_TRUE(RanWithin(1, 1));

  // An executable graph's, held for its launches: a long kernel runs in it.
  CUmodule module;
  CHECK(cuModuleLoad(&module, RGPU_KERNELS_FATBIN));
  CUfunction spin;
  CHECK(cuModuleGetFunction(&spin, module, "spin"));
  CUdeviceptr sink;
  CHECK(cuMemAlloc(&sink, sizeof(unsigned)));
  CUuserObject held;
  CHECK(cuUserObjectCreate(&held, Tag(2), Destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  CHECK(cuGraphCreate(&graph, 0));
  CHECK(cuGraphRetainUserObject(graph, held, 1, CU_GRAPH_USER_OBJECT_MOVE));
  int iters = 8000000;  // about 0.1 s on the software GPU, a few ms on a GPU
  void* args[] = {&iters, &sink};
  CUDA_KERNEL_NODE_PARAMS kernel = {};
  kernel.func = spin;
  kernel.gridDimX = kernel.gridDimY = kernel.gridDimZ = 1;
  kernel.blockDimX = 32;
  kernel.blockDimY = kernel.blockDimZ = 1;
  kernel.kernelParams = args;
  CUgraphNode node;
  CHECK(cuGraphAddKernelNode(&node, graph, nullptr, 0, &kernel));
  CUgraphExec exec;
  CHECK(cuGraphInstantiate(&exec, graph, 0));
  CHECK(cuGraphDestroy(graph));
  EXPECT_TRUE(StillAlive(2));  // the executable graph holds it
  CUstream stream;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CHECK(cuGraphLaunch(exec, stream));
  CHECK(cuGraphExecDestroy(exec));
  EXPECT_TRUE(RanWithin(2, 1));
  // The launch had run by the time the destructor did.
  EXPECT_TRUE(cuStreamQuery(stream) == CUDA_SUCCESS);

  // An update lets go of the references it replaces only after the launches made with them.
  CUuserObject replaced;
  CHECK(cuUserObjectCreate(&replaced, Tag(3), Destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  CUgraph before, after;
  CHECK(cuGraphCreate(&before, 0));
  CHECK(cuGraphRetainUserObject(before, replaced, 1, CU_GRAPH_USER_OBJECT_MOVE));
  CHECK(cuGraphAddKernelNode(&node, before, nullptr, 0, &kernel));
  CHECK(cuGraphCreate(&after, 0));
  CHECK(cuGraphAddKernelNode(&node, after, nullptr, 0, &kernel));
  CHECK(cuGraphInstantiate(&exec, before, 0));
  CHECK(cuGraphDestroy(before));
  CHECK(cuGraphLaunch(exec, stream));
  CUgraphExecUpdateResultInfo update = {};
  CHECK(cuGraphExecUpdate(exec, after, &update));
  EXPECT_TRUE(RanWithin(3, 1));
  EXPECT_TRUE(cuStreamQuery(stream) == CUDA_SUCCESS);
  CHECK(cuGraphExecDestroy(exec));
  CHECK(cuGraphDestroy(after));

  CHECK(cuStreamDestroy(stream));
  CHECK(cuMemFree(sink));
  printf("user_objects: OK\n");
  return 0;
}
