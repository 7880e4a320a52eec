// Pinned host memory (hipHostMalloc and its flags, mapped memory included) and registered host
// memory, mapped included.
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
  // Mapped memory: the device reaches it at the same address (rgpu keeps the two sides
  // coherent: docs/design.md).
  void* device_view = nullptr;
  CHECK(hipHostMalloc(&device_view, n, hipHostMallocMapped));
  void* device_pointer = nullptr;
  CHECK(hipHostGetDevicePointer(&device_pointer, device_view, 0));
  EXPECT(device_pointer == device_view);
  memset(device_view, 0x33, n);
  void* dev;
  CHECK(hipMalloc(&dev, n));
  CHECK(hipMemcpy(dev, pinned, n, hipMemcpyHostToDevice));
  CHECK(hipMemcpy(mapped, dev, n, hipMemcpyDeviceToHost));
  EXPECT(memcmp(pinned, mapped, n) == 0);
  // The device copies out of mapped memory (`host`, whose device pointer is `device`) what the
  // host wrote there (`fill`), and into it what `pinned` holds.
  auto device_copies = [&](void* host, void* device, unsigned char fill) {
    CHECK(hipMemcpy(dev, device, n, hipMemcpyDeviceToDevice));
    CHECK(hipMemcpy(mapped, dev, n, hipMemcpyDeviceToHost));
    EXPECT(static_cast<unsigned char>(mapped[0]) == fill &&
           static_cast<unsigned char>(mapped[n - 1]) == fill);
    CHECK(hipMemcpy(device, pinned, n, hipMemcpyHostToDevice));
    EXPECT(memcmp(pinned, host, n) == 0);
  };
  device_copies(device_view, device_pointer, 0x33);
  CHECK(hipHostFree(device_view));
  CHECK(hipMemcpy(dev, pinned, n, hipMemcpyHostToDevice));
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

  // Registered mapped (whole pages): the device reaches the program's own memory through its
  // device pointer (not necessarily the same address), and the host sees what the device wrote.
  memset(ordinary, 0x11, n);
  CHECK(hipHostRegister(ordinary, n, hipHostRegisterMapped));
  void* registered_device = nullptr;
  CHECK(hipHostGetDevicePointer(&registered_device, ordinary, 0));
  device_copies(ordinary, registered_device, 0x11);
  CHECK(hipHostUnregister(ordinary));
  EXPECT(memcmp(ordinary, pinned, n) == 0);
  free(ordinary);

  CHECK(hipStreamDestroy(s));
  CHECK(hipFree(dev));
  CHECK(hipHostFree(pinned));
  CHECK(hipHostFree(mapped));
  CHECK(hipHostFree(nullptr));
  puts("hip_host_memory: ok");
  return 0;
}
