// hipMemGetInfo follows the program's allocations; an impossible allocation fails cleanly.
#include "hip_check.h"

int main() {
  size_t free0 = 0, total = 0;
  CHECK(hipMemGetInfo(&free0, &total));
  EXPECT(total > 0 && free0 <= total);
  const size_t chunk = 64 << 20;
  void* p;
  CHECK(hipMalloc(&p, chunk));
  size_t free1 = 0, total1 = 0;
  CHECK(hipMemGetInfo(&free1, &total1));
  EXPECT(total1 == total);
  EXPECT(free1 + chunk <= free0);
  CHECK(hipFree(p));
  size_t free2 = 0;
  CHECK(hipMemGetInfo(&free2, &total1));
  EXPECT(free2 > free1);
  // More than the device has.
  void* huge = reinterpret_cast<void*>(1);
  EXPECT_ERROR(hipMalloc(&huge, total + (size_t{1} << 30)), hipErrorOutOfMemory);
  EXPECT(huge == nullptr);
  EXPECT(hipGetLastError() == hipErrorOutOfMemory);
  // Zero bytes: success and a null pointer.
  void* none = reinterpret_cast<void*>(1);
  CHECK(hipMalloc(&none, 0));
  EXPECT(none == nullptr);
  EXPECT_ERROR(hipMemGetInfo(nullptr, &total), hipErrorInvalidValue);
  printf("%zu of %zu MiB free\n", free0 >> 20, total >> 20);
  puts("hip_mem_info: ok");
  return 0;
}
