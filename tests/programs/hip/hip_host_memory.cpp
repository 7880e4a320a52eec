// Pinned host memory (hipHostMalloc and its flags) and registered host memory. A remote GPU
// cannot map this process's memory, so rgpu refuses mapped allocations (hipErrorNotSupported).
#include <stdlib.h>
#include <string.h>

#include "hip_check.h"

int main() {
  const size_t n = 1 << 20;
  char *pinned, *mapped;
  CHECK(hipHostMalloc(reinterpret_cast<void**>(&pinned), n, hipHostMallocDefault));
  CHECK(hipHostMalloc(reinterpret_cast<void**>(&mapped), n,
                      hipHostMallocPortable | hipHostMallocWriteCombined));
  for (size_t i = 0; i < n; ++i) pinned[i] = static_cast<char>(i ^ 0x5a);
  unsigned flags = 0;
  CHECK(hipHostGetFlags(&flags, mapped));
  EXPECT(flags & hipHostMallocPortable);
  void* device_view = nullptr;
  EXPECT_ERROR(hipHostMalloc(&device_view, n, hipHostMallocMapped), hipErrorNotSupported);
  (void)hipGetLastError();
  void* dev;
  CHECK(hipMalloc(&dev, n));
  CHECK(hipMemcpy(dev, pinned, n, hipMemcpyHostToDevice));
  CHECK(hipMemcpy(mapped, dev, n, hipMemcpyDeviceToHost));
  EXPECT(memcmp(pinned, mapped, n) == 0);
  // Contradictory or unknown flags are refused.
  void* bad = nullptr;
  EXPECT_ERROR(hipHostMalloc(&bad, 64, hipHostMallocCoherent | hipHostMallocNonCoherent),
               hipErrorInvalidValue);
  EXPECT_ERROR(hipHostMalloc(&bad, 64, 0x100), hipErrorInvalidValue);
  (void)hipGetLastError();

  // Registered memory: an ordinary allocation, pinned in place.
  const size_t page = 4096;
  char* ordinary = static_cast<char*>(aligned_alloc(page, n));
  EXPECT(ordinary != nullptr);
  memset(ordinary, 0, n);
  CHECK(hipHostRegister(ordinary, n, hipHostRegisterDefault));
  EXPECT_ERROR(hipHostRegister(ordinary, n, hipHostRegisterDefault),
               hipErrorHostMemoryAlreadyRegistered);
  (void)hipGetLastError();
  hipStream_t s;
  CHECK(hipStreamCreate(&s));
  CHECK(hipMemcpyAsync(ordinary, dev, n, hipMemcpyDeviceToHost, s));
  CHECK(hipStreamSynchronize(s));
  EXPECT(memcmp(ordinary, pinned, n) == 0);
  CHECK(hipHostUnregister(ordinary));
  EXPECT_ERROR(hipHostUnregister(ordinary), hipErrorHostMemoryNotRegistered);
  (void)hipGetLastError();
  free(ordinary);

  CHECK(hipStreamDestroy(s));
  CHECK(hipFree(dev));
  CHECK(hipHostFree(pinned));
  CHECK(hipHostFree(mapped));
  CHECK(hipHostFree(nullptr));
  puts("hip_host_memory: ok");
  return 0;
}
