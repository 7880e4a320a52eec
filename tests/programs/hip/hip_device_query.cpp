// Devices and their properties: count, current device, properties against attributes.
#include <string.h>

#include "hip_check.h"

int main() {
  int count = 0;
  CHECK(hipGetDeviceCount(&count));
  EXPECT(count >= 1);
  int version = 0;
  CHECK(hipRuntimeGetVersion(&version));
  EXPECT(version >= 50200000);
  for (int d = 0; d < count; ++d) {
    hipDeviceProp_t p;
    CHECK(hipGetDeviceProperties(&p, d));
    EXPECT(strlen(p.name) > 0);
    EXPECT(p.totalGlobalMem > 0);
    EXPECT(p.multiProcessorCount > 0);
    EXPECT(p.maxThreadsPerBlock > 0 && p.warpSize > 0);
    int v = 0;
    CHECK(hipDeviceGetAttribute(&v, hipDeviceAttributeMaxThreadsPerBlock, d));
    EXPECT(v == p.maxThreadsPerBlock);
    CHECK(hipDeviceGetAttribute(&v, hipDeviceAttributeMultiprocessorCount, d));
    EXPECT(v == p.multiProcessorCount);
    CHECK(hipDeviceGetAttribute(&v, hipDeviceAttributeWarpSize, d));
    EXPECT(v == p.warpSize);
    CHECK(hipDeviceGetAttribute(&v, hipDeviceAttributeMaxBlockDimX, d));
    EXPECT(v == p.maxThreadsDim[0]);
    CHECK(hipDeviceGetAttribute(&v, hipDeviceAttributeComputeCapabilityMajor, d));
    EXPECT(v == p.major);
    size_t total = 0;
    CHECK(hipDeviceTotalMem(&total, d));
    EXPECT(total == p.totalGlobalMem);
    char name[256];
    CHECK(hipDeviceGetName(name, sizeof name, d));
    EXPECT(strcmp(name, p.name) == 0);
    int major = -1, minor = -1;
    CHECK(hipDeviceComputeCapability(&major, &minor, d));
    EXPECT(major == p.major && minor == p.minor);
    printf("device %d: %s, %zu MiB, %d CUs\n", d, p.name, p.totalGlobalMem >> 20,
           p.multiProcessorCount);
  }
  CHECK(hipSetDevice(count - 1));
  int current = -1;
  CHECK(hipGetDevice(&current));
  EXPECT(current == count - 1);
  CHECK(hipSetDevice(0));
  EXPECT_ERROR(hipSetDevice(count), hipErrorInvalidDevice);
  hipDeviceProp_t p;
  EXPECT_ERROR(hipGetDeviceProperties(&p, count), hipErrorInvalidDevice);
  EXPECT_ERROR(hipGetDeviceProperties(nullptr, 0), hipErrorInvalidValue);
  int v;
  EXPECT_ERROR(hipDeviceGetAttribute(&v, static_cast<hipDeviceAttribute_t>(-5), 0),
               hipErrorInvalidValue);
  CHECK(hipDeviceSynchronize());
  puts("hip_device_query: ok");
  return 0;
}
