// Streams and events: independent async copy/kernel/copy pipelines on four streams from pinned
// memory; a chain of kernels across streams ordered only by events and cudaStreamWaitEvent;
// cudaEventQuery/cudaStreamQuery after completion; the legacy default stream's implicit ordering
// with blocking streams; non-blocking stream flags and stream priorities.
#include "rt_check.h"

#include <vector>

__global__ void Affine(int* p, int n, int mul, int add) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * mul + add;
}

__global__ void SquareInPlace(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * p[i];
}

int main() {
  const int kStreams = 4, chunk = 8192, n = kStreams * chunk;
  int *h_in = nullptr, *h_out = nullptr, *d = nullptr;
  CHECK(cudaMallocHost(&h_in, n * sizeof(int)));
  CHECK(cudaMallocHost(&h_out, n * sizeof(int)));
  CHECK(cudaMalloc(&d, n * sizeof(int)));
  cudaStream_t s[kStreams];
  for (auto& st : s) CHECK(cudaStreamCreate(&st));

  // 1. Independent pipelines, one chunk per stream.
  for (int i = 0; i < n; ++i) h_in[i] = i - n / 2, h_out[i] = 0;
  for (int k = 0; k < kStreams; ++k) {
    int off = k * chunk;
    CHECK(cudaMemcpyAsync(d + off, h_in + off, chunk * sizeof(int), cudaMemcpyHostToDevice, s[k]));
    Affine<<<chunk / 256, 256, 0, s[k]>>>(d + off, chunk, k + 2, k);
    CHECK_LAUNCH();
    CHECK(cudaMemcpyAsync(h_out + off, d + off, chunk * sizeof(int), cudaMemcpyDeviceToHost, s[k]));
  }
  for (auto& st : s) CHECK(cudaStreamSynchronize(st));
  for (int i = 0; i < n; ++i) {
    int k = i / chunk;
    EXPECT(h_out[i] == h_in[i] * (k + 2) + k, "pipeline: out[%d] = %d", i, h_out[i]);
  }
  for (auto& st : s) CHECK(cudaStreamQuery(st));

  // 2. One buffer passed along s0 -> s1 -> s2 -> s3, ordered by events only.
  cudaEvent_t ev[kStreams];
  for (auto& e : ev) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  for (int i = 0; i < n; ++i) h_in[i] = (i % 201) - 100;
  CHECK(cudaMemcpyAsync(d, h_in, n * sizeof(int), cudaMemcpyHostToDevice, s[0]));
  Affine<<<n / 256, 256, 0, s[0]>>>(d, n, 1, 1);  // x + 1
  CHECK(cudaEventRecord(ev[0], s[0]));
  CHECK(cudaStreamWaitEvent(s[1], ev[0], 0));
  Affine<<<n / 256, 256, 0, s[1]>>>(d, n, 2, 0);  // * 2
  CHECK(cudaEventRecord(ev[1], s[1]));
  CHECK(cudaStreamWaitEvent(s[2], ev[1], 0));
  Affine<<<n / 256, 256, 0, s[2]>>>(d, n, 1, -3);  // - 3
  CHECK(cudaEventRecord(ev[2], s[2]));
  CHECK(cudaStreamWaitEvent(s[3], ev[2], 0));
  SquareInPlace<<<n / 256, 256, 0, s[3]>>>(d, n);
  CHECK_LAUNCH();
  CHECK(cudaMemcpyAsync(h_out, d, n * sizeof(int), cudaMemcpyDeviceToHost, s[3]));
  CHECK(cudaEventRecord(ev[3], s[3]));
  cudaError_t q = cudaEventQuery(ev[3]);
  EXPECT(q == cudaSuccess || q == cudaErrorNotReady, "cudaEventQuery: %s", cudaGetErrorName(q));
  CHECK(cudaEventSynchronize(ev[3]));
  CHECK(cudaEventQuery(ev[3]));
  for (int i = 0; i < n; ++i) {
    int x = ((h_in[i] + 1) * 2 - 3);
    EXPECT(h_out[i] == x * x, "event chain: out[%d] = %d, want %d", i, h_out[i], x * x);
  }
  (void)cudaGetLastError();  // a cudaErrorNotReady from the query above is not a failure

  // 3. The legacy default stream waits for work on blocking streams (and vice versa).
  for (int i = 0; i < n; ++i) h_in[i] = 3 * i;
  CHECK(cudaMemcpyAsync(d, h_in, n * sizeof(int), cudaMemcpyHostToDevice, s[1]));
  Affine<<<n / 256, 256, 0, s[1]>>>(d, n, 1, 5);
  CHECK_LAUNCH();
  Affine<<<n / 256, 256>>>(d, n, 2, 0);  // legacy stream: after s[1]'s work
  CHECK_LAUNCH();
  Affine<<<n / 256, 256, 0, s[2]>>>(d, n, 1, -1);  // blocking stream: after the legacy kernel
  CHECK_LAUNCH();
  std::vector<int> out(n);
  CHECK(cudaMemcpy(out.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));  // after s[2]
  for (int i = 0; i < n; ++i) {
    int want = (3 * i + 5) * 2 - 1;
    EXPECT(out[i] == want, "legacy stream ordering: out[%d] = %d, want %d", i, out[i], want);
  }

  // 4. Flags and priorities.
  cudaStream_t nb;
  CHECK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
  unsigned flags = 0;
  CHECK(cudaStreamGetFlags(nb, &flags));
  EXPECT(flags == cudaStreamNonBlocking, "non-blocking stream flags %u", flags);
  CHECK(cudaStreamGetFlags(s[0], &flags));
  EXPECT(flags == cudaStreamDefault, "default stream flags %u", flags);
  int least = 0, greatest = 0;
  CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  EXPECT(greatest <= least, "priority range least %d greatest %d", least, greatest);
  cudaStream_t hi;
  CHECK(cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, greatest));
  int prio = 12345;
  CHECK(cudaStreamGetPriority(hi, &prio));
  EXPECT(prio == greatest, "stream priority %d, want %d", prio, greatest);
  CHECK(cudaMemcpyAsync(d, h_in, n * sizeof(int), cudaMemcpyHostToDevice, hi));
  Affine<<<n / 256, 256, 0, hi>>>(d, n, -1, 0);
  CHECK(cudaEventRecordWithFlags(ev[0], hi, cudaEventRecordDefault));
  CHECK(cudaStreamWaitEvent(nb, ev[0], 0));
  Affine<<<n / 256, 256, 0, nb>>>(d, n, 1, 7);
  CHECK(cudaMemcpyAsync(h_out, d, n * sizeof(int), cudaMemcpyDeviceToHost, nb));
  CHECK(cudaStreamSynchronize(nb));
  for (int i = 0; i < n; ++i) EXPECT(h_out[i] == -h_in[i] + 7, "priority streams: out[%d]", i);

  CHECK(cudaStreamDestroy(nb));
  CHECK(cudaStreamDestroy(hi));
  for (auto& e : ev) CHECK(cudaEventDestroy(e));
  for (auto& st : s) CHECK(cudaStreamDestroy(st));
  CHECK(cudaFree(d));
  CHECK(cudaFreeHost(h_in));
  CHECK(cudaFreeHost(h_out));
  printf("rt_streams_events: OK\n");
  return 0;
}
