// User objects through the runtime, as a library that captures its work into the program's
// graph keeps its resources alive (NCCL does so): during a stream capture the library creates a
// user object and moves its reference to the graph being captured (cudaStreamGetCaptureInfo,
// cudaGraphRetainUserObject); the graph is instantiated and destroyed, the executable graph
// launched three times (its kernels' answer checked), and only once it is destroyed does the
// destructor run.
#include <atomic>
#include <chrono>
#include <thread>

#include "rt_check.h"

namespace {

std::atomic<int> g_freed{0};

void CUDART_CB FreeResource(void* resource) {
  delete static_cast<int*>(resource);
  g_freed.fetch_add(1);
}

__global__ void add_one(int* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}

bool FreedWithin(int times) {
  for (int i = 0; i < 1000 && g_freed.load() < times; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return g_freed.load() == times;
}

}  // namespace

int main() {
  const int n = 4096;
  int* d;
  CHECK(cudaMalloc(&d, n * sizeof(int)));
  CHECK(cudaMemset(d, 0, n * sizeof(int)));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  add_one<<<(n + 255) / 256, 256, 0, stream>>>(d, n);
  CHECK_LAUNCH();
  // The "library": its resource lives as long as the graph that uses it.
  cudaStreamCaptureStatus status;
  cudaGraph_t capturing = nullptr;
  CHECK(cudaStreamGetCaptureInfo(stream, &status, nullptr, &capturing));
  if (status != cudaStreamCaptureStatusActive || capturing == nullptr) {
    fprintf(stderr, "the stream is not capturing\n");
    return 1;
  }
  cudaUserObject_t object;
  CHECK(
      cudaUserObjectCreate(&object, new int(42), FreeResource, 1, cudaUserObjectNoDestructorSync));
  CHECK(cudaGraphRetainUserObject(capturing, object, 1, cudaGraphUserObjectMove));
  cudaGraph_t graph;
  CHECK(cudaStreamEndCapture(stream, &graph));

  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphDestroy(graph));
  for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(exec, stream));
  CHECK(cudaStreamSynchronize(stream));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (g_freed.load() != 0) {
    fprintf(stderr, "the resource was freed while the executable graph held it\n");
    return 1;
  }
  CHECK(cudaGraphExecDestroy(exec));
  if (!FreedWithin(1)) {
    fprintf(stderr, "the resource was not freed once the executable graph was destroyed\n");
    return 1;
  }
  int host[n];
  CHECK(cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    if (host[i] != 3) {
      fprintf(stderr, "x[%d] = %d, not 3\n", i, host[i]);
      return 1;
    }
  }
  CHECK(cudaStreamDestroy(stream));
  CHECK(cudaFree(d));
  printf("rt_user_objects: OK\n");
  return 0;
}
