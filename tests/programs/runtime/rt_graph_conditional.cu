// Conditional graph nodes: kernels set a conditional handle with cudaGraphSetConditional and the
// graph runs the IF body (or the ELSE body), a WHILE body until the handle is 0, or the SWITCH
// body the handle selects; a handle made with cudaGraphCondAssignDefault takes its default at
// every launch; a body is filled by capture (cudaStreamBeginCaptureToGraph), and a WHILE node
// is added to a graph being captured (cudaStreamGetCaptureInfo gives the capture's dependencies,
// cudaStreamUpdateCaptureDependencies continues the capture after the node). Every body kernel
// counts its runs, and the counts are compared with what the conditions select. Bad parameters
// are refused.
#include <vector>

#include "rt_check.h"

namespace {

// Sets the handle to *value.
__global__ void SetFrom(const int* value, cudaGraphConditionalHandle handle) {
  cudaGraphSetConditional(handle, *value);
}

// Counts a run of body `which`.
__global__ void Count(int* runs, int which) { atomicAdd(&runs[which], 1); }

// A loop body: counts down *counter and keeps the loop going while it is not 0.
__global__ void CountDown(int* counter, int* runs, cudaGraphConditionalHandle handle) {
  --*counter;
  ++runs[0];
  cudaGraphSetConditional(handle, *counter != 0);
}

cudaGraphNode_t AddKernel(cudaGraph_t graph, const cudaGraphNode_t* deps, size_t n, void* func,
                          void** args) {
  cudaGraphNodeParams p = {cudaGraphNodeTypeKernel};
  p.kernel.func = func;
  p.kernel.gridDim = dim3(1, 1, 1);
  p.kernel.blockDim = dim3(1, 1, 1);
  p.kernel.kernelParams = args;
  cudaGraphNode_t node;
  CHECK(cudaGraphAddNode(&node, graph, deps, nullptr, n, &p));
  return node;
}

std::vector<int> Runs(const int* runs, int n) {
  std::vector<int> host(n);
  CHECK(cudaMemcpy(host.data(), runs, n * sizeof(int), cudaMemcpyDeviceToHost));
  return host;
}

void SetInt(int* dev, int value) {
  CHECK(cudaMemcpy(dev, &value, sizeof value, cudaMemcpyHostToDevice));
}

// IF with an ELSE body, and IF alone: launched with the condition 0 and 1.
void IfElse(int* value, int* runs) {
  for (int size = 1; size <= 2; ++size) {
    cudaGraph_t graph;
    CHECK(cudaGraphCreate(&graph, 0));
    cudaGraphConditionalHandle handle;
    CHECK(cudaGraphConditionalHandleCreate(&handle, graph));
    void* set_args[] = {&value, &handle};
    cudaGraphNode_t set = AddKernel(graph, nullptr, 0, (void*)SetFrom, set_args);
    cudaGraphNodeParams c = {cudaGraphNodeTypeConditional};
    c.conditional.handle = handle;
    c.conditional.type = cudaGraphCondTypeIf;
    c.conditional.size = size;
    cudaGraphNode_t cond;
    CHECK(cudaGraphAddNode(&cond, graph, &set, nullptr, 1, &c));
    int then_body = 0, else_body = 1;
    void* then_args[] = {&runs, &then_body};
    void* else_args[] = {&runs, &else_body};
    AddKernel(c.conditional.phGraph_out[0], nullptr, 0, (void*)Count, then_args);
    if (size == 2) AddKernel(c.conditional.phGraph_out[1], nullptr, 0, (void*)Count, else_args);
    // A body goes with its node, not by itself.
    EXPECT_ERROR(cudaGraphDestroy(c.conditional.phGraph_out[0]), cudaErrorInvalidValue);
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaMemset(runs, 0, 8 * sizeof(int)));
    for (int v : {0, 1, 1, 0, 7}) {
      SetInt(value, v);
      CHECK(cudaGraphLaunch(exec, 0));
    }
    CHECK(cudaDeviceSynchronize());
    const std::vector<int> got = Runs(runs, 2);
    EXPECT(got[0] == 3, "IF (size %d): the body ran %d times, expected 3", size, got[0]);
    EXPECT(got[1] == (size == 2 ? 2 : 0), "ELSE (size %d): %d runs", size, got[1]);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
  }
}

// WHILE whose handle starts at 1 at every launch: the body counts down to 0.
void WhileLoop(int* counter, int* runs) {
  cudaGraph_t graph;
  CHECK(cudaGraphCreate(&graph, 0));
  cudaGraphConditionalHandle handle;
  CHECK(cudaGraphConditionalHandleCreate(&handle, graph, 1, cudaGraphCondAssignDefault));
  cudaGraphNodeParams c = {cudaGraphNodeTypeConditional};
  c.conditional.handle = handle;
  c.conditional.type = cudaGraphCondTypeWhile;
  c.conditional.size = 1;
  cudaGraphNode_t cond;
  CHECK(cudaGraphAddNode(&cond, graph, nullptr, nullptr, 0, &c));
  // The body by capture into the body graph.
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaStreamBeginCaptureToGraph(s, c.conditional.phGraph_out[0], nullptr, nullptr, 0,
                                      cudaStreamCaptureModeGlobal));
  CountDown<<<1, 1, 0, s>>>(counter, runs, handle);
  CHECK(cudaStreamEndCapture(s, nullptr));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int start : {10, 3}) {
    CHECK(cudaMemset(runs, 0, sizeof(int)));
    SetInt(counter, start);
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    int left = -1;
    CHECK(cudaMemcpy(&left, counter, sizeof left, cudaMemcpyDeviceToHost));
    const int ran = Runs(runs, 1)[0];
    EXPECT(left == 0 && ran == start, "WHILE from %d: %d left after %d runs", start, left, ran);
  }
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(s));
}

// SWITCH of three bodies: the handle selects one; a value past the last selects none.
void Switch(int* value, int* runs) {
  cudaGraph_t graph;
  CHECK(cudaGraphCreate(&graph, 0));
  cudaGraphConditionalHandle handle;
  CHECK(cudaGraphConditionalHandleCreate(&handle, graph));
  void* set_args[] = {&value, &handle};
  cudaGraphNode_t set = AddKernel(graph, nullptr, 0, (void*)SetFrom, set_args);
  cudaGraphNodeParams c = {cudaGraphNodeTypeConditional};
  c.conditional.handle = handle;
  c.conditional.type = cudaGraphCondTypeSwitch;
  c.conditional.size = 3;
  cudaGraphNode_t cond;
  CHECK(cudaGraphAddNode(&cond, graph, &set, nullptr, 1, &c));
  int which[3] = {0, 1, 2};
  for (int i = 0; i < 3; ++i) {
    void* args[] = {&runs, &which[i]};
    AddKernel(c.conditional.phGraph_out[i], nullptr, 0, (void*)Count, args);
  }
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaMemset(runs, 0, 8 * sizeof(int)));
  for (int v : {2, 0, 2, 5, 1, 2}) {
    SetInt(value, v);
    CHECK(cudaGraphLaunch(exec, 0));
  }
  CHECK(cudaDeviceSynchronize());
  const std::vector<int> got = Runs(runs, 3);
  EXPECT(got[0] == 1 && got[1] == 1 && got[2] == 3, "SWITCH runs %d %d %d, expected 1 1 3", got[0],
         got[1], got[2]);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
}

// A WHILE node added to a graph while a stream captures it, between captured kernels.
void CapturedWhile(int* counter, int* runs) {
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  int before = 1, after = 2;
  Count<<<1, 1, 0, s>>>(runs, before);
  cudaStreamCaptureStatus status;
  cudaGraph_t graph;
  const cudaGraphNode_t* deps = nullptr;
  size_t num_deps = 0;
  CHECK(cudaStreamGetCaptureInfo(s, &status, nullptr, &graph, &deps, nullptr, &num_deps));
  EXPECT(status == cudaStreamCaptureStatusActive && num_deps == 1, "capture info: %d, %zu deps",
         (int)status, num_deps);
  cudaGraphConditionalHandle handle;
  CHECK(cudaGraphConditionalHandleCreate(&handle, graph, 1, cudaGraphCondAssignDefault));
  cudaGraphNodeParams c = {cudaGraphNodeTypeConditional};
  c.conditional.handle = handle;
  c.conditional.type = cudaGraphCondTypeWhile;
  c.conditional.size = 1;
  cudaGraphNode_t cond;
  CHECK(cudaGraphAddNode(&cond, graph, deps, nullptr, num_deps, &c));
  CHECK(
      cudaStreamUpdateCaptureDependencies(s, &cond, nullptr, 1, cudaStreamSetCaptureDependencies));
  Count<<<1, 1, 0, s>>>(runs, after);
  CHECK(cudaStreamEndCapture(s, &graph));
  cudaStream_t body;
  CHECK(cudaStreamCreate(&body));
  CHECK(cudaStreamBeginCaptureToGraph(body, c.conditional.phGraph_out[0], nullptr, nullptr, 0,
                                      cudaStreamCaptureModeGlobal));
  CountDown<<<1, 1, 0, body>>>(counter, runs, handle);
  CHECK(cudaStreamEndCapture(body, nullptr));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaMemset(runs, 0, 8 * sizeof(int)));
  SetInt(counter, 4);
  CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaStreamSynchronize(s));
  const std::vector<int> got = Runs(runs, 3);
  EXPECT(got[0] == 4 && got[1] == 1 && got[2] == 1,
         "captured WHILE: %d loop runs (expected 4), before %d, after %d", got[0], got[1], got[2]);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(body));
  CHECK(cudaStreamDestroy(s));
}

void BadParameters() {
  cudaGraph_t graph;
  CHECK(cudaGraphCreate(&graph, 0));
  cudaGraphConditionalHandle handle;
  CHECK(cudaGraphConditionalHandleCreate(&handle, graph));
  cudaGraphNodeParams c = {cudaGraphNodeTypeConditional};
  c.conditional.handle = handle;
  c.conditional.type = cudaGraphCondTypeIf;
  c.conditional.size = 3;  // IF has one or two bodies
  cudaGraphNode_t node;
  EXPECT_ERROR(cudaGraphAddNode(&node, graph, nullptr, nullptr, 0, &c), cudaErrorInvalidValue);
  c.conditional.type = cudaGraphCondTypeWhile;
  c.conditional.size = 2;
  EXPECT_ERROR(cudaGraphAddNode(&node, graph, nullptr, nullptr, 0, &c), cudaErrorInvalidValue);
  c.conditional.size = 1;
  c.conditional.handle = handle + 4096;  // no such handle
  EXPECT_ERROR(cudaGraphAddNode(&node, graph, nullptr, nullptr, 0, &c), cudaErrorInvalidValue);
  CHECK(cudaGraphDestroy(graph));
}

}  // namespace

int main() {
  int *value, *counter, *runs;
  CHECK(cudaMalloc(&value, sizeof(int)));
  CHECK(cudaMalloc(&counter, sizeof(int)));
  CHECK(cudaMalloc(&runs, 8 * sizeof(int)));
  IfElse(value, runs);
  WhileLoop(counter, runs);
  Switch(value, runs);
  CapturedWhile(counter, runs);
  BadParameters();
  CHECK(cudaFree(value));
  CHECK(cudaFree(counter));
  CHECK(cudaFree(runs));
  printf("rt_graph_conditional: OK\n");
  return 0;
}
