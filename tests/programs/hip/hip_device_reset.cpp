// hipDeviceReset releases everything the program had on the device; the device works afterwards.
#include "hip_check.h"

int main() {
  size_t free0 = 0, total = 0;
  CHECK(hipMemGetInfo(&free0, &total));
  void *a, *b;
  CHECK(hipMalloc(&a, 32 << 20));
  CHECK(hipMalloc(&b, 32 << 20));
  hipStream_t s;
  CHECK(hipStreamCreate(&s));
  size_t free1 = 0;
  CHECK(hipMemGetInfo(&free1, &total));
  EXPECT(free1 + (64 << 20) <= free0);
  CHECK(hipDeviceReset());
  size_t free2 = 0;
  CHECK(hipMemGetInfo(&free2, &total));
  EXPECT(free2 >= free0);
  // The old allocations are gone with the device's state.
  int value = 7;
  EXPECT(hipMemcpy(a, &value, sizeof value, hipMemcpyHostToDevice) != hipSuccess);
  (void)hipGetLastError();
  // New work runs.
  void* c;
  CHECK(hipMalloc(&c, 4096));
  int back = 0;
  CHECK(hipMemcpy(c, &value, sizeof value, hipMemcpyHostToDevice));
  CHECK(hipMemcpy(&back, c, sizeof back, hipMemcpyDeviceToHost));
  EXPECT(back == 7);
  CHECK(hipFree(c));
  puts("hip_device_reset: ok");
  return 0;
}
