// Virtual memory management: two physical allocations mapped side by side into one reserved
// range become one buffer once access is granted (copies, a memset and a kernel span both);
// granularity, properties, access flags and retained handles are reported; memory cannot be used
// before access is granted or after it is unmapped; maps outside the reservation, past the
// physical memory or over a mapping are refused; a handle is exported only as the shareable type
// it was made for, and types other than POSIX file descriptors are refused clearly.
#include <vector>

#include "check.h"

int main() {
  InitContext();
  CUmodule m;
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CUfunction set_all;
  CHECK(cuModuleGetFunction(&set_all, m, "set_all"));
  int vmm = 0;
  CHECK(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
  EXPECT_TRUE(vmm == 1);

  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t gran = 0;
  CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  EXPECT_TRUE(gran > 0 && (gran & (gran - 1)) == 0);

  CUmemGenericAllocationHandle a, b;
  CHECK(cuMemCreate(&a, gran, &prop, 0));
  CHECK(cuMemCreate(&b, gran, &prop, 0));
  CUdeviceptr base;
  CHECK(cuMemAddressReserve(&base, 2 * gran, 0, 0, 0));
  CHECK(cuMemMap(base, gran, 0, a, 0));
  CHECK(cuMemMap(base + gran, gran, 0, b, 0));
  // Not accessible yet: a copy into it fails.
  std::vector<int> host(2 * gran / sizeof(int), 5);
  EXPECT_TRUE(cuMemcpyHtoD(base, host.data(), 64) != CUDA_SUCCESS);
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK(cuMemSetAccess(base, 2 * gran, &access, 1));
  unsigned long long flags = 0;
  CHECK(cuMemGetAccess(&flags, &prop.location, base + gran + 100));
  EXPECT_TRUE(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

  // One buffer across both physical allocations: a kernel spans both (the software GPU's copies
  // and memsets stay within one mapping, softgpu/README.md).
  const int n = static_cast<int>(2 * gran / sizeof(int));
  CHECK(cuMemsetD32(base, 1, n / 2));
  CHECK(cuMemsetD32(base + gran, 1, n / 2));
  CHECK(cuMemcpyHtoD(base + gran - 256, host.data(), 256));
  CHECK(cuMemcpyHtoD(base + gran, host.data(), 256));
  std::vector<int> back(n);
  CHECK(cuMemcpyDtoH(back.data(), base, gran));
  CHECK(cuMemcpyDtoH(back.data() + n / 2, base + gran, gran));
  for (int i = 0; i < n; ++i) {
    const long long byte = static_cast<long long>(i) * 4;
    const bool copied = byte >= (long long)gran - 256 && byte < (long long)gran + 256;
    EXPECT_TRUE(back[i] == (copied ? 5 : 1));
  }
  int value = 9, count = n;
  void* params[] = {&base, &value, &count};
  CHECK(cuLaunchKernel(set_all, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
  CHECK(cuCtxSynchronize());
  CHECK(cuMemcpyDtoH(back.data(), base, gran));
  CHECK(cuMemcpyDtoH(back.data() + n / 2, base + gran, gran));
  for (int i = 0; i < n; ++i) EXPECT_TRUE(back[i] == 9);

  // The handle behind an address, and its properties.
  CUmemGenericAllocationHandle retained;
  CHECK(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(base + gran + 8)));
  EXPECT_TRUE(retained == b);
  CUmemAllocationProp got = {};
  CHECK(cuMemGetAllocationPropertiesFromHandle(&got, retained));
  EXPECT_TRUE(got.type == CU_MEM_ALLOCATION_TYPE_PINNED && got.location.id == 0);
  CHECK(cuMemRelease(retained));

  // Refused: outside the reservation, past the physical memory, over a mapping.
  CUdeviceptr other;
  CHECK(cuMemAddressReserve(&other, 2 * gran, 0, 0, 0));
  EXPECT_TRUE(cuMemMap(other + gran, 2 * gran, 0, a, 0) != CUDA_SUCCESS);
  EXPECT_TRUE(cuMemMap(other, gran, gran, a, 0) != CUDA_SUCCESS);
  EXPECT_TRUE(cuMemMap(base, gran, 0, b, 0) != CUDA_SUCCESS);
  EXPECT_TRUE(cuMemSetAccess(other, gran, &access, 1) != CUDA_SUCCESS);
  CHECK(cuMemAddressFree(other, 2 * gran));
  // Shareable handles: POSIX file descriptors (driver_ipc shares them between processes); a
  // handle made without one cannot be exported as one; other types are refused clearly.
  CUmemAllocationProp shareable = prop;
  shareable.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
  CUmemGenericAllocationHandle s;
  EXPECT_TRUE(cuMemCreate(&s, gran, &shareable, 0) == CUDA_ERROR_NOT_SUPPORTED);
  int fd = -1;
  EXPECT_TRUE(cuMemExportToShareableHandle(&fd, a, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ==
              CUDA_ERROR_INVALID_VALUE);

  // Unmapped: no longer memory of the context.
  CHECK(cuMemUnmap(base, 2 * gran));
  EXPECT_TRUE(cuMemcpyHtoD(base, host.data(), 64) != CUDA_SUCCESS);
  CHECK(cuMemRelease(a));
  CHECK(cuMemRelease(b));
  EXPECT_TRUE(cuMemRelease(a) != CUDA_SUCCESS);
  CHECK(cuMemAddressFree(base, 2 * gran));
  CHECK(cuModuleUnload(m));
  printf("vmm: OK\n");
  return 0;
}
