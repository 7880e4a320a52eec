// Event timing: cudaEventElapsedTime between events around kernels is >= 0, consistent (the parts
// add up to the whole) and no longer than the host's own clock saw; events can be re-recorded;
// blocking-sync events work; an event made with cudaEventDisableTiming cannot be timed.
#include "rt_check.h"

#include <chrono>

__global__ void Busy(float* p, int n, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = p[i];
  for (int k = 0; k < iters; ++k) x = x * 0.999f + 0.001f;
  p[i] = x;
}

int main() {
  const int n = 4096;
  float* d = nullptr;
  CHECK(cudaMalloc(&d, n * sizeof(float)));
  CHECK(cudaMemset(d, 0, n * sizeof(float)));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  cudaEvent_t start, mid, stop, blocking, untimed;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&mid));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventCreateWithFlags(&blocking, cudaEventBlockingSync));
  CHECK(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
  CHECK(cudaDeviceSynchronize());

  for (int round = 0; round < 2; ++round) {  // the second round re-records the same events
    auto host_begin = std::chrono::steady_clock::now();
    CHECK(cudaEventRecord(start, s));
    Busy<<<n / 128, 128, 0, s>>>(d, n, 50);
    CHECK_LAUNCH();
    CHECK(cudaEventRecord(mid, s));
    Busy<<<n / 128, 128, 0, s>>>(d, n, 50);
    CHECK_LAUNCH();
    CHECK(cudaEventRecord(stop, s));
    CHECK(cudaEventRecord(blocking, s));
    CHECK(cudaEventSynchronize(blocking));
    CHECK(cudaEventSynchronize(stop));
    double host_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_begin)
            .count();
    float a = -1, b = -1, total = -1;
    CHECK(cudaEventElapsedTime(&a, start, mid));
    CHECK(cudaEventElapsedTime(&b, mid, stop));
    CHECK(cudaEventElapsedTime(&total, start, stop));
    EXPECT(a >= 0 && b >= 0 && total >= 0, "round %d: elapsed times %g %g %g", round, a, b, total);
    EXPECT(total + 0.01f >= a && total + 0.01f >= b, "round %d: part longer than whole", round);
    EXPECT(Near(a + b, total, 0.01, 0.05), "round %d: %g + %g != %g ms", round, a, b, total);
    EXPECT(total <= host_ms + 1.0, "round %d: device saw %g ms, host only %g ms", round, total,
           host_ms);
    CHECK(cudaEventQuery(stop));
  }

  // Timing an event created without timing is an error, and not a sticky one.
  CHECK(cudaEventRecord(untimed, s));
  CHECK(cudaEventSynchronize(untimed));
  float ms = 0;
  EXPECT_ERROR(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
  EXPECT_ERROR(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  CHECK(cudaEventRecord(start, 0));  // legacy default stream
  CHECK(cudaEventRecord(stop, 0));
  CHECK(cudaEventSynchronize(stop));
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  EXPECT(ms >= 0, "default-stream elapsed %g", ms);

  for (cudaEvent_t e : {start, mid, stop, blocking, untimed}) CHECK(cudaEventDestroy(e));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(d));
  printf("rt_event_timing: OK\n");
  return 0;
}
