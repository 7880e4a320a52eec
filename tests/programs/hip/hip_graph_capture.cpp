// Graphs by stream capture: memsets and copies captured on a stream (with a second stream forked
// and joined through events) run only when the instantiated graph is launched, every time it is.
#include <string.h>

#include <vector>

#include "hip_check.h"

int main() {
  const size_t n = 1 << 16;
  void *a, *b;
  CHECK(hipMalloc(&a, n));
  CHECK(hipMalloc(&b, n));
  CHECK(hipMemset(a, 0, n));
  CHECK(hipMemset(b, 0, n));
  hipStream_t s, side;
  CHECK(hipStreamCreate(&s));
  CHECK(hipStreamCreate(&side));
  hipEvent_t fork, join;
  CHECK(hipEventCreateWithFlags(&fork, hipEventDisableTiming));
  CHECK(hipEventCreateWithFlags(&join, hipEventDisableTiming));
  std::vector<unsigned char> host(n, 0);

  CHECK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
  hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
  CHECK(hipStreamIsCapturing(s, &status));
  EXPECT(status == hipStreamCaptureStatusActive);
  CHECK(hipMemsetAsync(a, 0x42, n / 2, s));
  CHECK(hipEventRecord(fork, s));
  CHECK(hipStreamWaitEvent(side, fork, 0));
  CHECK(hipMemsetAsync(static_cast<char*>(a) + n / 2, 0x24, n / 2, side));
  CHECK(hipEventRecord(join, side));
  CHECK(hipStreamWaitEvent(s, join, 0));
  CHECK(hipMemcpyAsync(b, a, n, hipMemcpyDeviceToDevice, s));
  CHECK(hipMemcpyAsync(host.data(), b, n, hipMemcpyDeviceToHost, s));
  hipGraph_t graph;
  CHECK(hipStreamEndCapture(s, &graph));
  CHECK(hipStreamIsCapturing(s, &status));
  EXPECT(status == hipStreamCaptureStatusNone);

  // Captured, not run.
  CHECK(hipDeviceSynchronize());
  for (unsigned char v : host) EXPECT(v == 0);
  size_t nodes = 0;
  CHECK(hipGraphGetNodes(graph, nullptr, &nodes));
  EXPECT(nodes >= 4);

  hipGraphExec_t exec;
  CHECK(hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0));
  for (int round = 0; round < 3; ++round) {
    memset(host.data(), 0, n);
    CHECK(hipMemset(b, 0, n));
    CHECK(hipGraphLaunch(exec, s));
    CHECK(hipStreamSynchronize(s));
    for (size_t i = 0; i < n; ++i) EXPECT(host[i] == (i < n / 2 ? 0x42 : 0x24));
  }
  CHECK(hipGraphExecDestroy(exec));
  CHECK(hipGraphDestroy(graph));
  CHECK(hipEventDestroy(fork));
  CHECK(hipEventDestroy(join));
  CHECK(hipStreamDestroy(s));
  CHECK(hipStreamDestroy(side));
  CHECK(hipFree(a));
  CHECK(hipFree(b));
  puts("hip_graph_capture: ok");
  return 0;
}
