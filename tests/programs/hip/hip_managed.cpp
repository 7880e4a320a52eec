// Managed memory through HIP (no kernels): hipMallocManaged memory written on the host, set by the
// device (hipMemset), read back on the host; prefetches to the device and back; a hint read back;
// attachment to a stream; the device's attributes (managed memory without concurrent access).
#include <string.h>

#include "hip_check.h"

int main() {
  int managed = 0, concurrent = -1;
  CHECK(hipDeviceGetAttribute(&managed, hipDeviceAttributeManagedMemory, 0));
  CHECK(hipDeviceGetAttribute(&concurrent, hipDeviceAttributeConcurrentManagedAccess, 0));
  EXPECT(managed == 1 && concurrent == 0);
  const size_t n = 1 << 20;
  unsigned char* p = nullptr;
  CHECK(hipMallocManaged(reinterpret_cast<void**>(&p), n, hipMemAttachGlobal));
  memset(p, 0x11, n);
  CHECK(hipMemset(p + 1000, 0x22, 5000));
  CHECK(hipDeviceSynchronize());
  for (size_t i = 0; i < n; ++i) EXPECT(p[i] == (i >= 1000 && i < 6000 ? 0x22 : 0x11));
  p[7] = 0x33;  // the host writes; the device copies it out
  unsigned char seven = 0;
  CHECK(hipMemcpy(&seven, p + 7, 1, hipMemcpyDeviceToHost));
  EXPECT(seven == 0x33);
  CHECK(hipMemPrefetchAsync(p, n, 0, nullptr));
  CHECK(hipMemPrefetchAsync(p, n, hipCpuDeviceId, nullptr));
  CHECK(hipStreamSynchronize(nullptr));
  int last = 0;
  CHECK(
      hipMemRangeGetAttribute(&last, sizeof last, hipMemRangeAttributeLastPrefetchLocation, p, n));
  EXPECT(last == hipCpuDeviceId);
  EXPECT(p[7] == 0x33 && p[1000] == 0x22);
  CHECK(hipMemAdvise(p, 4096, hipMemAdviseSetReadMostly, 0));
  int read_mostly = 0;
  CHECK(hipMemRangeGetAttribute(&read_mostly, sizeof read_mostly, hipMemRangeAttributeReadMostly, p,
                                4096));
  EXPECT(read_mostly == 1);
  hipStream_t s;
  CHECK(hipStreamCreate(&s));
  CHECK(hipStreamAttachMemAsync(s, p, 0, hipMemAttachSingle));
  CHECK(hipStreamSynchronize(s));
  CHECK(hipStreamDestroy(s));
  CHECK(hipFree(p));
  puts("hip_managed: ok");
  return 0;
}
