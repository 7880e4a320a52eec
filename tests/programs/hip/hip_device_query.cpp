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
  // Contexts are the devices' primary contexts.
  hipCtx_t primary = nullptr, current_ctx = nullptr;
  CHECK(hipDevicePrimaryCtxRetain(&primary, 0));
  EXPECT(primary != nullptr);
  CHECK(hipCtxGetCurrent(&current_ctx));
  EXPECT(current_ctx == primary);
  unsigned flags = 0;
  int active = 0;
  CHECK(hipDevicePrimaryCtxGetState(0, &flags, &active));
  EXPECT(active == 1);
  CHECK(hipCtxSetCurrent(primary));
  hipDevice_t ctx_device = -1;
  CHECK(hipCtxGetDevice(&ctx_device));
  EXPECT(ctx_device == 0);
  EXPECT_ERROR(hipCtxSetCurrent(reinterpret_cast<hipCtx_t>(&flags)), hipErrorInvalidContext);
  (void)hipGetLastError();
  CHECK(hipCtxSynchronize());
  CHECK(hipDevicePrimaryCtxRelease(0));
  CHECK(hipDeviceSynchronize());
  puts("hip_device_query: ok");
  return 0;
}
