// Stream capture and graphs: a memcpy (pinned host -> device), a memset, two kernels and a memcpy
// back are captured from a stream into a graph (checking the capture status and that nothing ran
// during capture), the graph has the expected nodes, is instantiated and launched twice with new
// host input between the launches (each launch re-reads the pinned input), and results are checked
// after each launch; also a graph with a fork/join across two streams via events.
#include "rt_check.h"

__global__ void Twice(const int* x, int* tmp, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) tmp[i] += 2 * x[i];  // tmp is zeroed by the captured memset
}

__global__ void Accumulate(const int* tmp, int* acc, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) acc[i] += tmp[i];
}

__global__ void AddConst(int* p, int n, int v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += v;
}

int main() {
  const int n = 8192;
  int *h_x = nullptr, *h_out = nullptr;
  CHECK(cudaMallocHost(&h_x, n * sizeof(int)));
  CHECK(cudaMallocHost(&h_out, n * sizeof(int)));
  int *x = nullptr, *tmp = nullptr, *acc = nullptr;
  CHECK(cudaMalloc(&x, n * sizeof(int)));
  CHECK(cudaMalloc(&tmp, n * sizeof(int)));
  CHECK(cudaMalloc(&acc, n * sizeof(int)));
  CHECK(cudaMemset(acc, 0, n * sizeof(int)));
  CHECK(cudaMemset(tmp, 0x7F, n * sizeof(int)));  // garbage the graph's memset must clear
  for (int i = 0; i < n; ++i) h_x[i] = i % 1000, h_out[i] = -1;
  CHECK(cudaDeviceSynchronize());

  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CHECK(cudaStreamIsCapturing(s, &status));
  EXPECT(status == cudaStreamCaptureStatusNone, "capturing before begin");

  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CHECK(cudaStreamIsCapturing(s, &status));
  EXPECT(status == cudaStreamCaptureStatusActive, "capture status %d", (int)status);
  CHECK(cudaMemcpyAsync(x, h_x, n * sizeof(int), cudaMemcpyHostToDevice, s));
  CHECK(cudaMemsetAsync(tmp, 0, n * sizeof(int), s));
  Twice<<<n / 256, 256, 0, s>>>(x, tmp, n);
  CHECK_LAUNCH();
  Accumulate<<<n / 256, 256, 0, s>>>(tmp, acc, n);
  CHECK_LAUNCH();
  CHECK(cudaMemcpyAsync(h_out, acc, n * sizeof(int), cudaMemcpyDeviceToHost, s));
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(s, &graph));
  CHECK(cudaStreamIsCapturing(s, &status));
  EXPECT(status == cudaStreamCaptureStatusNone, "still capturing after end");
  EXPECT(graph != nullptr, "no graph");

  // Nothing ran while capturing.
  CHECK(cudaDeviceSynchronize());
  for (int i = 0; i < n; ++i)
    EXPECT(h_out[i] == -1, "capture executed work: out[%d] = %d", i, h_out[i]);

  size_t nodes = 0;
  CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
  EXPECT(nodes == 5, "graph has %zu nodes, want 5", nodes);
  cudaGraphExec_t exec = nullptr;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaStreamSynchronize(s));
  for (int i = 0; i < n; ++i)
    EXPECT(h_out[i] == 2 * (i % 1000), "launch 1: out[%d] = %d", i, h_out[i]);

  // The second launch copies the new host input again and accumulates on top.
  for (int i = 0; i < n; ++i) h_x[i] = 3 * i - 5;
  CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaStreamSynchronize(s));
  for (int i = 0; i < n; ++i) {
    int want = 2 * (i % 1000) + 2 * (3 * i - 5);
    EXPECT(h_out[i] == want, "launch 2: out[%d] = %d, want %d", i, h_out[i], want);
  }

  // Fork/join: s forks to s2 through an event, both add, s joins s2 before copying back.
  cudaStream_t s2;
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CHECK(cudaEventRecord(fork, s));
  CHECK(cudaStreamWaitEvent(s2, fork, 0));
  CHECK(cudaStreamIsCapturing(s2, &status));  // s2 joined the capture through the event
  EXPECT(status == cudaStreamCaptureStatusActive, "forked stream capture status %d", (int)status);
  AddConst<<<n / 256, 256, 0, s>>>(acc, n / 2, 1);
  CHECK_LAUNCH();
  AddConst<<<n / 256, 256, 0, s2>>>(acc + n / 2, n / 2, 100);
  CHECK_LAUNCH();
  CHECK(cudaEventRecord(join, s2));
  CHECK(cudaStreamWaitEvent(s, join, 0));
  CHECK(cudaMemcpyAsync(h_out, acc, n * sizeof(int), cudaMemcpyDeviceToHost, s));
  cudaGraph_t forked = nullptr;
  CHECK(cudaStreamEndCapture(s, &forked));
  CHECK(cudaStreamIsCapturing(s2, &status));
  EXPECT(status == cudaStreamCaptureStatusNone, "forked stream still capturing");
  // Neither branch ran during capture.
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(h_out, acc, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    int base = 2 * (i % 1000) + 2 * (3 * i - 5);
    EXPECT(h_out[i] == base, "fork/join capture executed work: acc[%d] = %d, want %d", i, h_out[i],
           base);
  }
  CHECK(cudaGraphGetNodes(forked, nullptr, &nodes));
  EXPECT(nodes >= 3, "fork/join graph has %zu nodes", nodes);
  cudaGraphExec_t forked_exec = nullptr;
  CHECK(cudaGraphInstantiate(&forked_exec, forked, 0));
  for (int launch = 1; launch <= 2; ++launch) {
    CHECK(cudaGraphLaunch(forked_exec, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < n; ++i) {
      int base = 2 * (i % 1000) + 2 * (3 * i - 5);
      int want = base + launch * (i < n / 2 ? 1 : 100);
      EXPECT(h_out[i] == want, "fork/join launch %d: out[%d] = %d, want %d", launch, i, h_out[i],
             want);
    }
  }

  // The first graph's nodes, by type (node handles of a captured graph).
  cudaGraphNode_t list[5];
  nodes = 5;
  CHECK(cudaGraphGetNodes(graph, list, &nodes));
  int kernels = 0, memcpys = 0, memsets = 0;
  for (size_t k = 0; k < nodes; ++k) {
    cudaGraphNodeType type;
    CHECK(cudaGraphNodeGetType(list[k], &type));
    kernels += type == cudaGraphNodeTypeKernel;
    memcpys += type == cudaGraphNodeTypeMemcpy;
    memsets += type == cudaGraphNodeTypeMemset;
  }
  EXPECT(kernels == 2 && memcpys == 2 && memsets == 1,
         "node types: %d kernels %d memcpys %d memsets", kernels, memcpys, memsets);

  CHECK(cudaGraphExecDestroy(forked_exec));
  CHECK(cudaGraphDestroy(forked));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaEventDestroy(fork));
  CHECK(cudaEventDestroy(join));
  CHECK(cudaStreamDestroy(s2));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(x));
  CHECK(cudaFree(tmp));
  CHECK(cudaFree(acc));
  CHECK(cudaFreeHost(h_x));
  CHECK(cudaFreeHost(h_out));
  printf("rt_graph_capture: OK\n");
  return 0;
}
