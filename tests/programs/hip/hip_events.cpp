// Events: record, query, synchronize, elapsed time between two recorded events.
#include "hip_check.h"

int main() {
  hipEvent_t start, stop, untimed;
  CHECK(hipEventCreate(&start));
  CHECK(hipEventCreateWithFlags(&stop, hipEventDefault));
  CHECK(hipEventCreateWithFlags(&untimed, hipEventDisableTiming));
  hipStream_t s;
  CHECK(hipStreamCreate(&s));
  const size_t n = 8 << 20;
  void *a, *b;
  CHECK(hipMalloc(&a, n));
  CHECK(hipMalloc(&b, n));
  CHECK(hipEventRecord(start, s));
  for (int i = 0; i < 8; ++i) CHECK(hipMemcpyAsync(b, a, n, hipMemcpyDeviceToDevice, s));
  CHECK(hipEventRecord(stop, s));
  CHECK(hipEventRecord(untimed, s));
  CHECK(hipEventSynchronize(stop));
  EXPECT(hipEventQuery(stop) == hipSuccess);
  float ms = -1;
  CHECK(hipEventElapsedTime(&ms, start, stop));
  EXPECT(ms >= 0);
  float reverse = 0;
  CHECK(hipEventElapsedTime(&reverse, stop, start));
  EXPECT(reverse <= 0);
  // An event created without timing has no time to measure.
  float none = 0;
  EXPECT(hipEventElapsedTime(&none, start, untimed) != hipSuccess);
  EXPECT_ERROR(hipEventElapsedTime(nullptr, start, stop), hipErrorInvalidValue);
  (void)hipGetLastError();
  // An event never recorded is complete.
  hipEvent_t fresh;
  CHECK(hipEventCreate(&fresh));
  EXPECT(hipEventQuery(fresh) == hipSuccess);
  CHECK(hipEventSynchronize(fresh));
  printf("8 copies of %zu MiB: %.3f ms\n", n >> 20, ms);
  for (hipEvent_t e : {start, stop, untimed, fresh}) CHECK(hipEventDestroy(e));
  CHECK(hipStreamDestroy(s));
  CHECK(hipFree(a));
  CHECK(hipFree(b));
  puts("hip_events: ok");
  return 0;
}
