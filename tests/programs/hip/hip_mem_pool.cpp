// Stream-ordered allocation and memory pools: hipMallocAsync/hipFreeAsync on streams, ordered
// with memsets and copies; the device's default pool and a pool of the program's own made the
// device's current pool (its used-memory attributes count what hipMallocAsync takes from it);
// hipMallocFromPoolAsync; attributes set and read back; trimming; access (the pool's own device
// reads and writes it and keeps that access); a pool made without a shareable handle type cannot
// be exported; bad frees and pools are refused and become the last error.
#include <string.h>

#include <vector>

#include "hip_check.h"

int main() {
  const size_t n = 1 << 16;
  int supported = 0;
  CHECK(hipDeviceGetAttribute(&supported, hipDeviceAttributeMemoryPoolsSupported, 0));
  EXPECT(supported == 1);
  hipStream_t s, other;
  CHECK(hipStreamCreate(&s));
  CHECK(hipStreamCreateWithFlags(&other, hipStreamNonBlocking));

  // Stream-ordered allocations from the default pool, used in stream order.
  hipMemPool_t def = nullptr, current = nullptr;
  CHECK(hipDeviceGetDefaultMemPool(&def, 0));
  CHECK(hipDeviceGetMemPool(&current, 0));
  EXPECT(def != nullptr && current == def);
  void *a = nullptr, *b = nullptr;
  CHECK(hipMallocAsync(&a, n, s));
  CHECK(hipMallocAsync(&b, n, s));
  EXPECT(a != nullptr && b != nullptr && a != b);
  CHECK(hipMemsetAsync(a, 0x5a, n, s));
  CHECK(hipMemcpyAsync(b, a, n, hipMemcpyDeviceToDevice, s));
  std::vector<unsigned char> host(n, 0);
  CHECK(hipMemcpyAsync(host.data(), b, n, hipMemcpyDeviceToHost, s));
  CHECK(hipFreeAsync(a, s));
  CHECK(hipStreamSynchronize(s));
  for (unsigned char v : host) EXPECT(v == 0x5a);
  // Freed on one stream after another stream's work on it (ordered by an event).
  hipEvent_t done;
  CHECK(hipEventCreateWithFlags(&done, hipEventDisableTiming));
  CHECK(hipMemsetAsync(b, 0x11, n / 2, other));
  CHECK(hipEventRecord(done, other));
  CHECK(hipStreamWaitEvent(s, done, 0));
  CHECK(hipMemcpyAsync(host.data(), b, n, hipMemcpyDeviceToHost, s));
  CHECK(hipFreeAsync(b, s));
  CHECK(hipStreamSynchronize(s));
  for (size_t i = 0; i < n; ++i) EXPECT(host[i] == (i < n / 2 ? 0x11 : 0x5a));
  // The null stream works too.
  void* c = nullptr;
  CHECK(hipMallocAsync(&c, 256, nullptr));
  CHECK(hipMemsetAsync(c, 1, 256, nullptr));
  CHECK(hipFreeAsync(c, nullptr));
  CHECK(hipDeviceSynchronize());

  // A pool of the program's own.
  hipMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = hipMemAllocationTypePinned;
  props.handleTypes = hipMemHandleTypeNone;
  props.location.type = hipMemLocationTypeDevice;
  props.location.id = 0;
  hipMemPool_t pool = nullptr;
  CHECK(hipMemPoolCreate(&pool, &props));
  EXPECT(pool != nullptr && pool != def);
  uint64_t threshold = 1 << 20, got = 0;
  CHECK(hipMemPoolSetAttribute(pool, hipMemPoolAttrReleaseThreshold, &threshold));
  CHECK(hipMemPoolGetAttribute(pool, hipMemPoolAttrReleaseThreshold, &got));
  EXPECT(got == threshold);
  int reuse = 0;
  CHECK(hipMemPoolSetAttribute(pool, hipMemPoolReuseAllowOpportunistic, &reuse));
  reuse = 1;
  CHECK(hipMemPoolGetAttribute(pool, hipMemPoolReuseAllowOpportunistic, &reuse));
  EXPECT(reuse == 0);

  // The device's current pool: hipMallocAsync takes from it.
  CHECK(hipDeviceSetMemPool(0, pool));
  CHECK(hipDeviceGetMemPool(&current, 0));
  EXPECT(current == pool);
  uint64_t used = 1;
  CHECK(hipMemPoolGetAttribute(pool, hipMemPoolAttrUsedMemCurrent, &used));
  EXPECT(used == 0);
  void* p = nullptr;
  CHECK(hipMallocAsync(&p, n, s));
  CHECK(hipMemPoolGetAttribute(pool, hipMemPoolAttrUsedMemCurrent, &used));
  EXPECT(used >= n);
  uint64_t reserved = 0, high = 0;
  CHECK(hipMemPoolGetAttribute(pool, hipMemPoolAttrReservedMemCurrent, &reserved));
  EXPECT(reserved >= used);
  // hipMallocFromPoolAsync names the pool itself.
  void* q = nullptr;
  CHECK(hipMallocFromPoolAsync(&q, n, pool, s));
  CHECK(hipMemsetAsync(p, 3, n, s));
  CHECK(hipMemsetAsync(q, 4, n, s));
  std::vector<unsigned char> hp(n), hq(n);
  CHECK(hipMemcpyAsync(hp.data(), p, n, hipMemcpyDeviceToHost, s));
  CHECK(hipMemcpyAsync(hq.data(), q, n, hipMemcpyDeviceToHost, s));
  CHECK(hipStreamSynchronize(s));
  for (size_t i = 0; i < n; ++i) EXPECT(hp[i] == 3 && hq[i] == 4);
  CHECK(hipMemPoolGetAttribute(pool, hipMemPoolAttrUsedMemHigh, &high));
  EXPECT(high >= 2 * n);
  CHECK(hipFreeAsync(p, s));
  CHECK(hipFreeAsync(q, s));
  CHECK(hipStreamSynchronize(s));
  CHECK(hipMemPoolGetAttribute(pool, hipMemPoolAttrUsedMemCurrent, &used));
  EXPECT(used == 0);
  CHECK(hipMemPoolTrimTo(pool, 0));
  // Only a high watermark can be reset, and only to zero.
  uint64_t zero = 0;
  CHECK(hipMemPoolSetAttribute(pool, hipMemPoolAttrUsedMemHigh, &zero));

  // Access: the pool's device reads and writes it, and keeps that.
  hipMemLocation here;
  here.type = hipMemLocationTypeDevice;
  here.id = 0;
  hipMemAccessFlags access = hipMemAccessFlagsProtNone;
  CHECK(hipMemPoolGetAccess(&access, pool, &here));
  EXPECT(access == hipMemAccessFlagsProtReadWrite);
  hipMemAccessDesc desc;
  desc.location = here;
  desc.flags = hipMemAccessFlagsProtReadWrite;
  CHECK(hipMemPoolSetAccess(pool, &desc, 1));
  desc.flags = hipMemAccessFlagsProtNone;
  EXPECT_ERROR(hipMemPoolSetAccess(pool, &desc, 1), hipErrorInvalidValue);
  EXPECT(hipGetLastError() == hipErrorInvalidValue);

  // Not shareable: no descriptor to export.
  int fd = -1;
  EXPECT_ERROR(hipMemPoolExportToShareableHandle(&fd, pool, hipMemHandleTypePosixFileDescriptor, 0),
               hipErrorInvalidValue);
  (void)hipGetLastError();
  // Bad arguments: refused, and remembered as the last error.
  int on_stack = 0;
  EXPECT_ERROR(hipFreeAsync(&on_stack, s), hipErrorInvalidValue);
  EXPECT(hipGetLastError() == hipErrorInvalidValue);
  EXPECT_ERROR(hipMallocAsync(nullptr, 16, s), hipErrorInvalidValue);
  EXPECT_ERROR(hipMemPoolDestroy(nullptr), hipErrorInvalidValue);
  EXPECT_ERROR(hipDeviceGetDefaultMemPool(&current, 99), hipErrorInvalidDevice);
  EXPECT(hipGetLastError() == hipErrorInvalidDevice);
  EXPECT(hipGetLastError() == hipSuccess);

  // Destroying the current pool hands the device back its default pool.
  CHECK(hipMemPoolDestroy(pool));
  CHECK(hipDeviceGetMemPool(&current, 0));
  EXPECT(current == def);
  CHECK(hipEventDestroy(done));
  CHECK(hipStreamDestroy(s));
  CHECK(hipStreamDestroy(other));
  puts("hip_mem_pool: ok");
  return 0;
}
