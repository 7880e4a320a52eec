// Virtual memory management: two physical allocations mapped side by side into one reserved
// range are usable once access is granted (memsets and copies in each, a copy across the seam
// through the host); granularity, access flags, the handle behind an address and its properties
// are reported; memory cannot be used before access is granted or after it is unmapped; maps
// outside the reservation, past the physical memory or over a mapping are refused; a handle made
// without a shareable type cannot be exported as a descriptor.
#include <string.h>

#include <vector>

#include "hip_check.h"

int main() {
  hipMemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = hipMemAllocationTypePinned;
  prop.location.type = hipMemLocationTypeDevice;
  prop.location.id = 0;
  size_t gran = 0;
  CHECK(hipMemGetAllocationGranularity(&gran, &prop, hipMemAllocationGranularityMinimum));
  EXPECT(gran > 0 && (gran & (gran - 1)) == 0);
  size_t recommended = 0;
  CHECK(
      hipMemGetAllocationGranularity(&recommended, &prop, hipMemAllocationGranularityRecommended));
  EXPECT(recommended >= gran);

  hipMemGenericAllocationHandle_t a, b;
  CHECK(hipMemCreate(&a, gran, &prop, 0));
  CHECK(hipMemCreate(&b, gran, &prop, 0));
  void* base = nullptr;
  CHECK(hipMemAddressReserve(&base, 2 * gran, 0, nullptr, 0));
  EXPECT(base != nullptr);
  char* p = static_cast<char*>(base);
  CHECK(hipMemMap(p, gran, 0, a, 0));
  CHECK(hipMemMap(p + gran, gran, 0, b, 0));
  // Not accessible yet.
  std::vector<unsigned char> host(2 * gran, 5);
  EXPECT(hipMemcpy(p, host.data(), 64, hipMemcpyHostToDevice) != hipSuccess);
  (void)hipGetLastError();
  hipMemAccessDesc access;
  memset(&access, 0, sizeof access);
  access.location = prop.location;
  access.flags = hipMemAccessFlagsProtReadWrite;
  CHECK(hipMemSetAccess(p, 2 * gran, &access, 1));
  unsigned long long flags = 0;
  CHECK(hipMemGetAccess(&flags, &prop.location, p + gran + 100));
  EXPECT(flags == hipMemAccessFlagsProtReadWrite);

  // Each mapping holds its own bytes; the seam is crossed through the host.
  CHECK(hipMemset(p, 1, gran));
  CHECK(hipMemset(p + gran, 2, gran));
  CHECK(hipMemcpy(p + gran - 256, host.data(), 256, hipMemcpyHostToDevice));
  CHECK(hipMemcpy(p + gran, host.data(), 256, hipMemcpyHostToDevice));
  std::vector<unsigned char> back(2 * gran);
  CHECK(hipMemcpy(back.data(), p, gran, hipMemcpyDeviceToHost));
  CHECK(hipMemcpy(back.data() + gran, p + gran, gran, hipMemcpyDeviceToHost));
  for (size_t i = 0; i < 2 * gran; ++i) {
    const bool copied = i >= gran - 256 && i < gran + 256;
    EXPECT(back[i] == (copied ? 5 : i < gran ? 1 : 2));
  }
  // Device-to-device copies between the two mappings, on a stream.
  hipStream_t s;
  CHECK(hipStreamCreate(&s));
  CHECK(hipMemsetAsync(p, 9, gran, s));
  CHECK(hipMemcpyAsync(p + gran, p, gran, hipMemcpyDeviceToDevice, s));
  CHECK(hipMemcpyAsync(back.data(), p + gran, gran, hipMemcpyDeviceToHost, s));
  CHECK(hipStreamSynchronize(s));
  for (size_t i = 0; i < gran; ++i) EXPECT(back[i] == 9);

  // The handle behind an address, and its properties.
  hipMemGenericAllocationHandle_t retained;
  CHECK(hipMemRetainAllocationHandle(&retained, p + gran + 8));
  EXPECT(retained == b);
  hipMemAllocationProp got;
  memset(&got, 0xff, sizeof got);
  CHECK(hipMemGetAllocationPropertiesFromHandle(&got, retained));
  EXPECT(got.type == hipMemAllocationTypePinned && got.location.type == hipMemLocationTypeDevice &&
         got.location.id == 0 && got.requestedHandleType == hipMemHandleTypeNone);
  CHECK(hipMemRelease(retained));

  // Refused: outside the reservation, past the physical memory, over a mapping.
  void* other = nullptr;
  CHECK(hipMemAddressReserve(&other, 2 * gran, 0, nullptr, 0));
  char* o = static_cast<char*>(other);
  EXPECT(hipMemMap(o + gran, 2 * gran, 0, a, 0) != hipSuccess);
  EXPECT(hipMemMap(o, gran, gran, a, 0) != hipSuccess);
  EXPECT(hipMemMap(p, gran, 0, b, 0) != hipSuccess);
  EXPECT(hipMemSetAccess(o, gran, &access, 1) != hipSuccess);
  EXPECT(hipGetLastError() != hipSuccess);
  CHECK(hipMemAddressFree(other, 2 * gran));
  // Made without a shareable type: no descriptor.
  int fd = -1;
  EXPECT_ERROR(hipMemExportToShareableHandle(&fd, a, hipMemHandleTypePosixFileDescriptor, 0),
               hipErrorInvalidValue);

  // Unmapped: no longer memory of the device.
  CHECK(hipMemUnmap(p, 2 * gran));
  EXPECT(hipMemcpy(p, host.data(), 64, hipMemcpyHostToDevice) != hipSuccess);
  (void)hipGetLastError();
  CHECK(hipMemRelease(a));
  CHECK(hipMemRelease(b));
  EXPECT(hipMemRelease(a) != hipSuccess);
  CHECK(hipMemAddressFree(base, 2 * gran));
  CHECK(hipStreamDestroy(s));
  puts("hip_vmm: ok");
  return 0;
}
