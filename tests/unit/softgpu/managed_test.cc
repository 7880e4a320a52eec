// Managed and mapped memory, native in softgpu: host code and kernels use one pointer and share
// the bytes (cuMemAllocManaged, __managed__ variables, cuMemHostAlloc), the hints and attributes
// around them, and the refusals. Every result is checked against a CPU reference.
#include <cuda.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "test_util.h"

// The first-generation cuMemAdvise (a CUdevice, not a CUmemLocation), which cuda.h now maps away.
extern "C" CUresult cuMemAdvise_v1_for_test(CUdeviceptr, size_t, CUmem_advise,
                                            CUdevice) __asm__("cuMemAdvise");
extern "C" CUresult cuMemPrefetchAsync_v1_for_test(CUdeviceptr, size_t, CUdevice,
                                                   CUstream) __asm__("cuMemPrefetchAsync");

namespace {

using softgpu_test::KernelTest;

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

class ManagedTest : public KernelTest {
 protected:
  const char* PtxFile() const override { return "managed_kernels.ptx"; }

  // Managed memory of `bytes`, its address as a host pointer of T.
  template <typename T>
  T* Managed(size_t bytes, CUdeviceptr* address) {
    *address = 0;
    EXPECT_EQ(cuMemAllocManaged(address, bytes, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    return reinterpret_cast<T*>(*address);
  }

  static CUmemLocation Device(int ordinal) {
    CUmemLocation l{};
    l.type = CU_MEM_LOCATION_TYPE_DEVICE;
    l.id = ordinal;
    return l;
  }
  static CUmemLocation Host() {
    CUmemLocation l{};
    l.type = CU_MEM_LOCATION_TYPE_HOST;
    return l;
  }

  int RangeInt(CUmem_range_attribute attribute, CUdeviceptr p, size_t n) {
    int v = 12345;
    EXPECT_EQ(cuMemRangeGetAttribute(&v, sizeof v, attribute, p, n), CUDA_SUCCESS) << attribute;
    return v;
  }
};

TEST_F(ManagedTest, DeviceAttributes) {
  const std::pair<CUdevice_attribute, int> want[] = {
      {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1},
      {CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1},
      {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1},
      {CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, 1},
      {CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST, 1},
      {CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, 0},
      {CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, 0},
      {CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 0},
      {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
  };
  for (const auto& [attribute, value] : want) {
    int v = -1;
    CU_ASSERT_OK(cuDeviceGetAttribute(&v, attribute, 0));
    EXPECT_EQ(v, value) << "attribute " << attribute;
  }
}

// The host writes, a kernel updates in place, the host reads the same pointer; the allocation is
// charged to the device like cuMemAlloc and freed by cuMemFree.
TEST_F(ManagedTest, HostWritesKernelUpdatesHostReads) {
  constexpr int kN = 1000;
  size_t free_before = 0, free_during = 0, free_after = 0, total = 0;
  CU_ASSERT_OK(cuMemGetInfo(&free_before, &total));
  CUdeviceptr d;
  int* p = Managed<int>(kN * sizeof(int), &d);
  ASSERT_NE(p, nullptr);
  CU_ASSERT_OK(cuMemGetInfo(&free_during, &total));
  EXPECT_GE(free_before - free_during, kN * sizeof(int));
  for (int i = 0; i < kN; ++i) EXPECT_EQ(p[i], 0) << i;  // zero-filled
  std::vector<int> want(kN);
  for (int i = 0; i < kN; ++i) {
    p[i] = i - 300;
    want[i] = (i - 300) * 3 + 1;
  }
  int n = kN, mul = 3, add = 1;
  CU_ASSERT_OK(Launch(Function("scale_add"), 4, 128, {&d, &n, &mul, &add}));
  CU_ASSERT_OK(cuCtxSynchronize());
  for (int i = 0; i < kN; ++i) ASSERT_EQ(p[i], want[i]) << i;
  // The copies see the same bytes.
  EXPECT_EQ(Download<int>(d, kN), want);
  CUdeviceptr base = 0;
  size_t size = 0;
  CU_ASSERT_OK(cuMemGetAddressRange(&base, &size, d + 100));
  EXPECT_EQ(base, d);
  EXPECT_EQ(size, kN * sizeof(int));
  CU_ASSERT_OK(cuMemFree(d));
  CU_ASSERT_OK(cuMemGetInfo(&free_after, &total));
  EXPECT_EQ(free_after, free_before);
}

// A range whose size is not a page multiple: the host, copies, a memset and a kernel each write at
// its first and last bytes, and every byte ends as the CPU reference says.
TEST_F(ManagedTest, PartialWritesAtBothEnds) {
  const size_t n = 3 * kPage + 100;
  CUdeviceptr d;
  uint8_t* p = Managed<uint8_t>(n, &d);
  ASSERT_NE(p, nullptr);
  std::vector<uint8_t> want(n, 0);
  p[0] = want[0] = 10;
  p[n - 1] = want[n - 1] = 20;
  const uint8_t tail[3] = {1, 2, 3};
  CU_ASSERT_OK(cuMemcpyHtoD(d + n - 3, tail, 3));
  memcpy(&want[n - 3], tail, 3);
  CU_ASSERT_OK(cuMemsetD8(d + 1, 7, 2));
  want[1] = want[2] = 7;
  CU_EXPECT_EQ(cuMemcpyHtoD(d + n - 2, tail, 3), CUDA_ERROR_INVALID_VALUE);  // past the end
  CU_EXPECT_EQ(cuMemsetD8(d + n - 1, 0, 2), CUDA_ERROR_INVALID_VALUE);
  unsigned long long count = n;
  unsigned char v = 5;
  CU_ASSERT_OK(Launch(Function("add_bytes"), 8, 128, {&d, &count, &v}));
  CU_ASSERT_OK(cuCtxSynchronize());
  for (auto& b : want) b = static_cast<uint8_t>(b + 5);
  ASSERT_EQ(std::vector<uint8_t>(p, p + n), want);
  uint8_t ends[4];
  CU_ASSERT_OK(cuMemcpyDtoH(ends, d, 2));
  CU_ASSERT_OK(cuMemcpyDtoH(ends + 2, d + n - 2, 2));
  EXPECT_EQ(ends[0], 15);
  EXPECT_EQ(ends[1], 12);
  EXPECT_EQ(ends[2], 7);
  EXPECT_EQ(ends[3], 8);
  CU_ASSERT_OK(cuMemFree(d));
}

// A __managed__ variable: the address cuModuleGetGlobal gives is host memory holding the
// variable's bytes, the ones kernels read and write.
TEST_F(ManagedTest, ManagedVariableSeenByHostAndKernel) {
  CUdeviceptr scalar, array;
  size_t scalar_bytes = 0, array_bytes = 0;
  CU_ASSERT_OK(cuModuleGetGlobal(&scalar, &scalar_bytes, module_, "managed_scalar"));
  CU_ASSERT_OK(cuModuleGetGlobal(&array, &array_bytes, module_, "managed_array"));
  EXPECT_EQ(scalar_bytes, 4u);
  EXPECT_EQ(array_bytes, 4000u);
  // Host memory at the device address (checked before the host dereferences it).
  void* host = nullptr;
  CU_ASSERT_OK(cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, array));
  ASSERT_EQ(host, reinterpret_cast<void*>(array));
  int* s = reinterpret_cast<int*>(scalar);
  int* a = reinterpret_cast<int*>(array);
  EXPECT_EQ(*s, 5);  // its initialiser
  *s = 7;
  for (int i = 0; i < 1000; ++i) a[i] = i;
  int by = 10;
  CU_ASSERT_OK(Launch(Function("update_managed"), 4, 256, {&by}));
  CU_ASSERT_OK(cuCtxSynchronize());
  EXPECT_EQ(*s, 17);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(a[i], 3 * i) << i;
  int managed = 0;
  CU_ASSERT_OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, scalar));
  EXPECT_EQ(managed, 1);
  CUdeviceptr plain;
  CU_ASSERT_OK(cuModuleGetGlobal(&plain, nullptr, module_, "plain_global"));
  CU_ASSERT_OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, plain));
  EXPECT_EQ(managed, 0);
}

// cudart's path: cuLibraryGetManaged names a library's __managed__ variable, in the current
// context's instance, host-accessible at the address it gives.
TEST_F(ManagedTest, LibraryGetManaged) {
  CUlibrary lib;
  CU_ASSERT_OK(cuLibraryLoadData(&lib, ptx_.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUdeviceptr scalar = 0;
  size_t bytes = 0;
  CU_ASSERT_OK(cuLibraryGetManaged(&scalar, &bytes, lib, "managed_scalar"));
  EXPECT_EQ(bytes, 4u);
  CUdeviceptr again = 0;
  CU_ASSERT_OK(cuLibraryGetManaged(&again, nullptr, lib, "managed_scalar"));
  EXPECT_EQ(again, scalar);
  CU_ASSERT_OK(cuLibraryGetGlobal(&again, nullptr, lib, "managed_scalar"));
  EXPECT_EQ(again, scalar);
  void* host = nullptr;
  CU_ASSERT_OK(cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, scalar));
  ASSERT_EQ(host, reinterpret_cast<void*>(scalar));
  int* s = reinterpret_cast<int*>(scalar);
  EXPECT_EQ(*s, 5);
  *s = 1;
  CUkernel k;
  CU_ASSERT_OK(cuLibraryGetKernel(&k, lib, "update_managed"));
  int by = 41;
  void* args[] = {&by};
  CU_ASSERT_OK(cuLaunchKernel(reinterpret_cast<CUfunction>(k), 1, 1, 1, 32, 1, 1, 0, nullptr, args,
                              nullptr));
  CU_ASSERT_OK(cuCtxSynchronize());
  EXPECT_EQ(*s, 42);
  CU_EXPECT_EQ(cuLibraryGetManaged(&again, &bytes, lib, "plain_global"), CUDA_ERROR_NOT_FOUND);
  CU_EXPECT_EQ(cuLibraryGetManaged(&again, &bytes, lib, "no_such_variable"), CUDA_ERROR_NOT_FOUND);
  CU_EXPECT_EQ(cuLibraryGetManaged(nullptr, nullptr, lib, "managed_scalar"),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuLibraryGetManaged(&again, &bytes, nullptr, "managed_scalar"),
               CUDA_ERROR_INVALID_HANDLE);
  CU_ASSERT_OK(cuLibraryUnload(lib));
}

// cudart may ask for a __managed__ variable before any context is current: the lookup then uses
// device 0's primary context, retained once for the program however often it asks (one release
// makes it inactive again).
TEST_F(ManagedTest, LibraryGetManagedWithoutContextRetainsPrimaryOnce) {
  CUlibrary lib;
  CU_ASSERT_OK(cuLibraryLoadData(&lib, ptx_.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUcontext popped = nullptr;
  CU_ASSERT_OK(cuCtxPopCurrent(&popped));
  ASSERT_EQ(popped, ctx_);
  unsigned flags = 0;
  int active = 1;
  CU_ASSERT_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  ASSERT_EQ(active, 0);
  CUdeviceptr first = 0, second = 0;
  CU_EXPECT_EQ(cuLibraryGetManaged(&first, nullptr, lib, "managed_scalar"), CUDA_SUCCESS);
  CU_EXPECT_EQ(cuLibraryGetManaged(&second, nullptr, lib, "managed_scalar"), CUDA_SUCCESS);
  EXPECT_EQ(first, second);
  CU_ASSERT_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  EXPECT_EQ(active, 1);
  CU_EXPECT_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  CU_ASSERT_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  EXPECT_EQ(active, 0);
  CU_ASSERT_OK(cuCtxPushCurrent(popped));
  CU_ASSERT_OK(cuLibraryUnload(lib));
}

// Page-locked host memory is mapped at its own address: a kernel reads and writes it in place, in
// every context (unified addressing); cuMemHostGetDevicePointer gives the same address.
TEST_F(ManagedTest, MappedPinnedMemoryInPlace) {
  constexpr int kN = 777;
  void* host = nullptr;
  CU_ASSERT_OK(cuMemHostAlloc(&host, kN * sizeof(int), CU_MEMHOSTALLOC_DEVICEMAP));
  CUdeviceptr d = 0;
  CU_ASSERT_OK(cuMemHostGetDevicePointer(&d, host, 0));
  EXPECT_EQ(d, reinterpret_cast<CUdeviceptr>(host));
  CUdeviceptr inner = 0;
  CU_ASSERT_OK(cuMemHostGetDevicePointer(&inner, static_cast<int*>(host) + 5, 0));
  EXPECT_EQ(inner, d + 20);
  unsigned flags = 0;
  CU_ASSERT_OK(cuMemHostGetFlags(&flags, host));
  EXPECT_EQ(flags, static_cast<unsigned>(CU_MEMHOSTALLOC_DEVICEMAP));
  int* p = static_cast<int*>(host);
  std::vector<int> want(kN);
  for (int i = 0; i < kN; ++i) {
    p[i] = 2 * i;
    want[i] = 2 * i * 5 - 3;
  }
  int n = kN, mul = 5, add = -3;
  CU_ASSERT_OK(Launch(Function("scale_add"), 2, 128, {&d, &n, &mul, &add}));
  CU_ASSERT_OK(cuCtxSynchronize());
  for (int i = 0; i < kN; ++i) ASSERT_EQ(p[i], want[i]) << i;

  // Another context's kernels reach it too.
  CUcontext other;
  CU_ASSERT_OK(cuCtxCreate(&other, nullptr, 0, 0));
  CUmodule m;
  CU_ASSERT_OK(cuModuleLoadData(&m, ptx_.c_str()));
  CUfunction f;
  CU_ASSERT_OK(cuModuleGetFunction(&f, m, "scale_add"));
  mul = 1;
  add = 1;
  void* args[] = {&d, &n, &mul, &add};
  CU_ASSERT_OK(cuLaunchKernel(f, 2, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr));
  CU_ASSERT_OK(cuCtxSynchronize());
  CU_ASSERT_OK(cuCtxDestroy(other));
  CU_ASSERT_OK(cuCtxSetCurrent(ctx_));
  for (int i = 0; i < kN; ++i) ASSERT_EQ(p[i], want[i] + 1) << i;

  // cuMemAllocHost memory is mapped as well (unified addressing maps every allocation).
  void* plain = nullptr;
  CU_ASSERT_OK(cuMemAllocHost(&plain, 64));
  CU_ASSERT_OK(cuMemHostGetDevicePointer(&inner, plain, 0));
  EXPECT_EQ(inner, reinterpret_cast<CUdeviceptr>(plain));
  CU_ASSERT_OK(cuMemsetD32(inner, 0x01020304u, 16));
  EXPECT_EQ(static_cast<uint32_t*>(plain)[15], 0x01020304u);
  CU_ASSERT_OK(cuMemFreeHost(plain));

  // Refusals: flags, memory that is not page-locked, registered memory (kernels cannot reach it).
  CU_EXPECT_EQ(cuMemHostGetDevicePointer(&inner, host, 1), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemHostGetDevicePointer(nullptr, host, 0), CUDA_ERROR_INVALID_VALUE);
  std::vector<int> pageable(256);
  CU_EXPECT_EQ(cuMemHostGetDevicePointer(&inner, pageable.data(), 0), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuMemHostRegister(pageable.data(), pageable.size() * sizeof(int),
                                 CU_MEMHOSTREGISTER_DEVICEMAP));
  testing::internal::CaptureStderr();
  CU_EXPECT_EQ(cuMemHostGetDevicePointer(&inner, pageable.data(), 0), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("registered"), std::string::npos);
  CU_ASSERT_OK(cuMemHostUnregister(pageable.data()));
  CU_EXPECT_EQ(cuMemHostRegister(host, 64, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);

  CU_ASSERT_OK(cuMemFreeHost(host));
  CU_EXPECT_EQ(cuMemHostGetDevicePointer(&inner, host, 0), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemFreeHost(host), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(ManagedTest, PointerAttributes) {
  CUdeviceptr managed;
  Managed<int>(1000, &managed);
  CUdeviceptr device;
  CU_ASSERT_OK(cuMemAlloc(&device, 1000));
  void* pinned;
  CU_ASSERT_OK(cuMemHostAlloc(&pinned, 1000, CU_MEMHOSTALLOC_DEVICEMAP));
  const CUdeviceptr pinned_d = reinterpret_cast<CUdeviceptr>(pinned);

  unsigned type = 0;
  int flag = -1, ordinal = -1;
  CUcontext ctx = nullptr;
  CUdeviceptr dptr = 0;
  void* hptr = nullptr;
  void* start = nullptr;
  size_t size = 0;
  // Managed: device memory (with IS_MANAGED), one address on both sides.
  CU_ASSERT_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, managed + 8));
  EXPECT_EQ(type, static_cast<unsigned>(CU_MEMORYTYPE_DEVICE));
  CU_ASSERT_OK(cuPointerGetAttribute(&flag, CU_POINTER_ATTRIBUTE_IS_MANAGED, managed + 8));
  EXPECT_EQ(flag, 1);
  CU_ASSERT_OK(cuPointerGetAttribute(&dptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, managed + 8));
  EXPECT_EQ(dptr, managed + 8);
  CU_ASSERT_OK(cuPointerGetAttribute(&hptr, CU_POINTER_ATTRIBUTE_HOST_POINTER, managed + 8));
  EXPECT_EQ(hptr, reinterpret_cast<void*>(managed + 8));
  CU_ASSERT_OK(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, managed));
  EXPECT_EQ(ctx, ctx_);
  CU_ASSERT_OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, managed));
  EXPECT_EQ(ordinal, 0);
  CU_ASSERT_OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, managed + 999));
  EXPECT_EQ(start, reinterpret_cast<void*>(managed));
  CU_ASSERT_OK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, managed + 999));
  EXPECT_EQ(size, 1000u);
  CU_ASSERT_OK(cuPointerGetAttribute(&flag, CU_POINTER_ATTRIBUTE_MAPPED, managed));
  EXPECT_EQ(flag, 1);
  CU_ASSERT_OK(
      cuPointerGetAttribute(&flag, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, managed));
  EXPECT_EQ(flag, 0);
  unsigned long long id_managed = 0, id_device = 0;
  CU_ASSERT_OK(cuPointerGetAttribute(&id_managed, CU_POINTER_ATTRIBUTE_BUFFER_ID, managed));
  CU_ASSERT_OK(cuPointerGetAttribute(&id_device, CU_POINTER_ATTRIBUTE_BUFFER_ID, device));
  EXPECT_NE(id_managed, id_device);

  // cuMemAlloc memory: device only.
  CU_ASSERT_OK(cuPointerGetAttribute(&flag, CU_POINTER_ATTRIBUTE_IS_MANAGED, device));
  EXPECT_EQ(flag, 0);
  CU_ASSERT_OK(
      cuPointerGetAttribute(&flag, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, device));
  EXPECT_EQ(flag, 1);
  CU_EXPECT_EQ(cuPointerGetAttribute(&hptr, CU_POINTER_ATTRIBUTE_HOST_POINTER, device),
               CUDA_ERROR_INVALID_VALUE);

  // Page-locked host memory: host memory that kernels reach at the same address.
  CU_ASSERT_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, pinned_d + 4));
  EXPECT_EQ(type, static_cast<unsigned>(CU_MEMORYTYPE_HOST));
  CU_ASSERT_OK(cuPointerGetAttribute(&dptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, pinned_d + 4));
  EXPECT_EQ(dptr, pinned_d + 4);
  CU_ASSERT_OK(cuPointerGetAttribute(&flag, CU_POINTER_ATTRIBUTE_IS_MANAGED, pinned_d));
  EXPECT_EQ(flag, 0);
  CU_ASSERT_OK(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, pinned_d));
  EXPECT_EQ(ctx, ctx_);
  CU_ASSERT_OK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, pinned_d + 4));
  EXPECT_EQ(size, 1000u);

  // Several at once; unknown memory is not an error there, but reads as null/zero/invalid.
  CUpointer_attribute attributes[] = {
      CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
      CU_POINTER_ATTRIBUTE_DEVICE_POINTER, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  int is_managed = -1;
  unsigned mem_type = 99;
  CUdeviceptr dev_ptr = 1;
  int dev_ordinal = 7;
  void* data[] = {&is_managed, &mem_type, &dev_ptr, &dev_ordinal};
  CU_ASSERT_OK(cuPointerGetAttributes(4, attributes, data, managed));
  EXPECT_EQ(is_managed, 1);
  EXPECT_EQ(mem_type, static_cast<unsigned>(CU_MEMORYTYPE_DEVICE));
  EXPECT_EQ(dev_ptr, managed);
  EXPECT_EQ(dev_ordinal, 0);
  int pageable[16];
  const CUdeviceptr unknown = reinterpret_cast<CUdeviceptr>(pageable);
  CU_ASSERT_OK(cuPointerGetAttributes(4, attributes, data, unknown));
  EXPECT_EQ(is_managed, 0);
  EXPECT_EQ(mem_type, 0u);
  EXPECT_EQ(dev_ptr, 0u);
  EXPECT_EQ(dev_ordinal, CU_DEVICE_INVALID);
  CU_EXPECT_EQ(cuPointerGetAttributes(4, attributes, nullptr, managed), CUDA_ERROR_INVALID_VALUE);

  // Unknown pointers and bad arguments.
  CU_EXPECT_EQ(cuPointerGetAttribute(&flag, CU_POINTER_ATTRIBUTE_IS_MANAGED, unknown),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuPointerGetAttribute(&flag, CU_POINTER_ATTRIBUTE_IS_MANAGED, 0),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuPointerGetAttribute(nullptr, CU_POINTER_ATTRIBUTE_IS_MANAGED, managed),
               CUDA_ERROR_INVALID_VALUE);
  CUDA_POINTER_ATTRIBUTE_P2P_TOKENS tokens;
  testing::internal::CaptureStderr();
  CU_EXPECT_EQ(cuPointerGetAttribute(&tokens, CU_POINTER_ATTRIBUTE_P2P_TOKENS, device),
               CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("not supported"), std::string::npos);
  CU_ASSERT_OK(cuMemFree(managed));
  CU_EXPECT_EQ(cuPointerGetAttribute(&flag, CU_POINTER_ATTRIBUTE_IS_MANAGED, managed),
               CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuMemFreeHost(pinned));
  CU_EXPECT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, pinned_d),
               CUDA_ERROR_INVALID_VALUE);
}

// Advice and prefetches are kept per page and read back through the range attributes.
TEST_F(ManagedTest, AdvisePrefetchAndRangeAttributes) {
  const size_t n = 4 * kPage + 10;  // five pages, the last one partly
  CUdeviceptr d;
  Managed<uint8_t>(n, &d);
  const size_t two_pages = 2 * kPage;
  // Nothing advised yet.
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d, n), 0);
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, d, n), CU_DEVICE_INVALID);
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, d, n), CU_DEVICE_INVALID);
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, d, n),
            CU_MEM_LOCATION_TYPE_INVALID);

  // Read-mostly on the first two pages (a range ending inside the second one counts it whole).
  CU_ASSERT_OK(cuMemAdvise(d + 1, two_pages - 2, CU_MEM_ADVISE_SET_READ_MOSTLY, Host()));
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d, two_pages), 1);
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d + kPage, 1), 1);
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d, two_pages + 1), 0);
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d, n), 0);
  CU_ASSERT_OK(cuMemAdvise(d, kPage, CU_MEM_ADVISE_UNSET_READ_MOSTLY, Host()));
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d, two_pages), 0);
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d + kPage, kPage), 1);

  // Preferred location: device 0 everywhere, then the host for the last page.
  CU_ASSERT_OK(cuMemAdvise(d, n, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, Device(0)));
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, d, n), 0);
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, d, n),
            CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, d, n), 0);
  CU_ASSERT_OK(cuMemAdvise(d + n - 1, 1, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, Host()));
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, d, n), CU_DEVICE_INVALID);
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, d + n - 5, 5), CU_DEVICE_CPU);
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, d + n - 5, 5),
            CU_MEM_LOCATION_TYPE_HOST);
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, d, 4 * kPage), 0);
  CU_ASSERT_OK(cuMemAdvise(d, n, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, Device(0)));
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, d + n - 5, 5), CU_DEVICE_INVALID);

  // Accessed by: device 0 (first-generation call) and the host, on all pages but the first.
  CU_ASSERT_OK(cuMemAdvise_v1_for_test(d, n, CU_MEM_ADVISE_SET_ACCESSED_BY, 0));
  CU_ASSERT_OK(cuMemAdvise(d + kPage, n - kPage, CU_MEM_ADVISE_SET_ACCESSED_BY, Host()));
  int by[3] = {7, 7, 7};
  CU_ASSERT_OK(cuMemRangeGetAttribute(by, sizeof by, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, d, n));
  EXPECT_EQ(by[0], 0);
  EXPECT_EQ(by[1], CU_DEVICE_INVALID);
  EXPECT_EQ(by[2], CU_DEVICE_INVALID);
  CU_ASSERT_OK(
      cuMemRangeGetAttribute(by, sizeof by, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, d + kPage, kPage));
  EXPECT_EQ(by[0], 0);
  EXPECT_EQ(by[1], CU_DEVICE_CPU);
  EXPECT_EQ(by[2], CU_DEVICE_INVALID);
  CU_ASSERT_OK(cuMemAdvise(d, n, CU_MEM_ADVISE_UNSET_ACCESSED_BY, Device(0)));
  CU_ASSERT_OK(cuMemRangeGetAttribute(by, 4, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, d + kPage, 1));
  EXPECT_EQ(by[0], CU_DEVICE_CPU);

  // Prefetches: to the device on a stream, then half of it back to the host.
  CUstream stream;
  CU_ASSERT_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CU_ASSERT_OK(cuMemPrefetchAsync(d, n, Device(0), 0, stream));
  CU_ASSERT_OK(cuStreamSynchronize(stream));
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, d, n), 0);
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE, d, n),
            CU_MEM_LOCATION_TYPE_DEVICE);
  CU_ASSERT_OK(cuMemPrefetchAsync_v1_for_test(d, two_pages, CU_DEVICE_CPU, stream));
  CU_ASSERT_OK(cuStreamSynchronize(stream));
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, d, n), CU_DEVICE_INVALID);
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, d, two_pages), CU_DEVICE_CPU);
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE, d, two_pages),
            CU_MEM_LOCATION_TYPE_HOST);
  EXPECT_EQ(RangeInt(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID, d + two_pages, 1), 0);

  // Several attributes at once.
  int read_mostly = -1, last = -1;
  CUmemLocationType last_type = CU_MEM_LOCATION_TYPE_MAX;
  void* data[] = {&read_mostly, &last, &last_type};
  size_t sizes[] = {4, 4, sizeof last_type};
  CUmem_range_attribute attributes[] = {CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
                                        CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION,
                                        CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE};
  CU_ASSERT_OK(cuMemRangeGetAttributes(data, sizes, attributes, 3, d + kPage, kPage));
  EXPECT_EQ(read_mostly, 1);
  EXPECT_EQ(last, CU_DEVICE_CPU);
  EXPECT_EQ(last_type, CU_MEM_LOCATION_TYPE_HOST);

  // Hints change nothing about the bytes: a kernel and the host still share them.
  unsigned long long count = n;
  unsigned char v = 3;
  CU_ASSERT_OK(Launch(Function("add_bytes"), 4, 128, {&d, &count, &v}, 0, stream));
  CU_ASSERT_OK(cuStreamSynchronize(stream));
  const uint8_t* p = reinterpret_cast<const uint8_t*>(d);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(p[i], 3) << i;
  CU_ASSERT_OK(cuStreamDestroy(stream));
  CU_ASSERT_OK(cuMemFree(d));
}

TEST_F(ManagedTest, StreamAttachMemAsync) {
  constexpr int kN = 300;
  CUdeviceptr d;
  int* p = Managed<int>(kN * sizeof(int), &d);
  CUstream stream;
  CU_ASSERT_OK(cuStreamCreate(&stream, 0));
  CU_ASSERT_OK(cuStreamAttachMemAsync(stream, d, 0, CU_MEM_ATTACH_SINGLE));
  for (int i = 0; i < kN; ++i) p[i] = i;
  int n = kN, mul = 2, add = 0;
  CU_ASSERT_OK(Launch(Function("scale_add"), 1, 128, {&d, &n, &mul, &add}, 0, stream));
  CU_ASSERT_OK(cuStreamSynchronize(stream));
  for (int i = 0; i < kN; ++i) ASSERT_EQ(p[i], 2 * i) << i;
  CU_ASSERT_OK(cuStreamAttachMemAsync(stream, d, kN * sizeof(int), CU_MEM_ATTACH_HOST));
  CU_ASSERT_OK(cuStreamAttachMemAsync(nullptr, d + 8, 0, CU_MEM_ATTACH_GLOBAL));
  // Refused: the NULL stream for one stream, flags, part of the allocation, other memory.
  CU_EXPECT_EQ(cuStreamAttachMemAsync(nullptr, d, 0, CU_MEM_ATTACH_SINGLE),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuStreamAttachMemAsync(stream, d, 0, 0), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuStreamAttachMemAsync(stream, d, 0, CU_MEM_ATTACH_GLOBAL | CU_MEM_ATTACH_HOST),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuStreamAttachMemAsync(stream, d, 8, CU_MEM_ATTACH_GLOBAL),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuStreamAttachMemAsync(stream, d + 8, kN * sizeof(int), CU_MEM_ATTACH_GLOBAL),
               CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr plain;
  CU_ASSERT_OK(cuMemAlloc(&plain, 64));
  CU_EXPECT_EQ(cuStreamAttachMemAsync(stream, plain, 0, CU_MEM_ATTACH_GLOBAL),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuStreamAttachMemAsync(stream, 0, 0, CU_MEM_ATTACH_GLOBAL),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(
      cuStreamAttachMemAsync(reinterpret_cast<CUstream>(&plain), d, 0, CU_MEM_ATTACH_GLOBAL),
      CUDA_ERROR_INVALID_HANDLE);
  CU_ASSERT_OK(cuStreamDestroy(stream));
  CU_ASSERT_OK(cuMemFree(d));
}

TEST_F(ManagedTest, BadArgumentsRefused) {
  CUdeviceptr d = 0;
  CU_EXPECT_EQ(cuMemAllocManaged(nullptr, 64, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemAllocManaged(&d, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemAllocManaged(&d, 64, 0), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemAllocManaged(&d, 64, CU_MEM_ATTACH_SINGLE), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemAllocManaged(&d, 64, CU_MEM_ATTACH_GLOBAL | CU_MEM_ATTACH_HOST),
               CUDA_ERROR_INVALID_VALUE);
  size_t free = 0, total = 0;
  CU_ASSERT_OK(cuMemGetInfo(&free, &total));
  CU_EXPECT_EQ(cuMemAllocManaged(&d, total + 1, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_OUT_OF_MEMORY);
  CU_EXPECT_EQ(cuMemAllocManaged(&d, ~size_t{0}, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_OUT_OF_MEMORY);
  CU_EXPECT_EQ(cuMemAllocManaged(&d, ~size_t{0} - 4095, CU_MEM_ATTACH_HOST),
               CUDA_ERROR_OUT_OF_MEMORY);

  CU_ASSERT_OK(cuMemAllocManaged(&d, 1000, CU_MEM_ATTACH_HOST));
  CUdeviceptr plain;
  CU_ASSERT_OK(cuMemAlloc(&plain, 1000));
  int pageable[4] = {};
  const CUdeviceptr host = reinterpret_cast<CUdeviceptr>(pageable);
  // Advice: memory that is not managed, ranges past the end, advice and locations out of range.
  CU_EXPECT_EQ(cuMemAdvise(plain, 16, CU_MEM_ADVISE_SET_READ_MOSTLY, Host()),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemAdvise(host, 16, CU_MEM_ADVISE_SET_READ_MOSTLY, Host()),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemAdvise(0, 16, CU_MEM_ADVISE_SET_READ_MOSTLY, Host()), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemAdvise(d, 1001, CU_MEM_ADVISE_SET_READ_MOSTLY, Host()),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemAdvise(d + 999, 2, CU_MEM_ADVISE_SET_READ_MOSTLY, Host()),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemAdvise(d, 0, CU_MEM_ADVISE_SET_READ_MOSTLY, Host()), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemAdvise(d, 16, static_cast<CUmem_advise>(0), Host()), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemAdvise(d, 16, static_cast<CUmem_advise>(7), Host()), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemAdvise(d, 16, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, Device(99)),
               CUDA_ERROR_INVALID_DEVICE);
  CU_EXPECT_EQ(cuMemAdvise(d, 16, CU_MEM_ADVISE_SET_ACCESSED_BY, Device(-1)),
               CUDA_ERROR_INVALID_DEVICE);
  CUmemLocation numa{};
  numa.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  CU_EXPECT_EQ(cuMemAdvise(d, 16, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, numa),
               CUDA_ERROR_INVALID_VALUE);
  CUmemLocation bad_type{};
  bad_type.type = CU_MEM_LOCATION_TYPE_INVALID;
  CU_EXPECT_EQ(cuMemAdvise(d, 16, CU_MEM_ADVISE_SET_ACCESSED_BY, bad_type),
               CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuMemAdvise(d, 16, CU_MEM_ADVISE_SET_READ_MOSTLY, bad_type));  // location ignored
  CU_EXPECT_EQ(cuMemAdvise_v1_for_test(d, 16, CU_MEM_ADVISE_SET_ACCESSED_BY, 42),
               CUDA_ERROR_INVALID_DEVICE);
  // Prefetches.
  CU_EXPECT_EQ(cuMemPrefetchAsync(d, 16, Device(0), 1, nullptr), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemPrefetchAsync(plain, 16, Device(0), 0, nullptr), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemPrefetchAsync(d, 1001, Device(0), 0, nullptr), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemPrefetchAsync(d, 16, Device(5), 0, nullptr), CUDA_ERROR_INVALID_DEVICE);
  CU_EXPECT_EQ(cuMemPrefetchAsync(d, 16, Device(0), 0, reinterpret_cast<CUstream>(&plain)),
               CUDA_ERROR_INVALID_HANDLE);
  CU_EXPECT_EQ(cuMemPrefetchAsync_v1_for_test(d, 16, -7, nullptr), CUDA_ERROR_INVALID_DEVICE);
  // Range attributes.
  int v = 0;
  CU_EXPECT_EQ(cuMemRangeGetAttribute(&v, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, plain, 16),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemRangeGetAttribute(&v, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d, 1001),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemRangeGetAttribute(&v, 8, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d, 16),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemRangeGetAttribute(nullptr, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d, 16),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemRangeGetAttribute(&v, 6, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, d, 16),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemRangeGetAttribute(&v, 4, static_cast<CUmem_range_attribute>(99), d, 16),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemRangeGetAttributes(nullptr, nullptr, nullptr, 1, d, 16),
               CUDA_ERROR_INVALID_VALUE);
  // Freeing twice; the freed range is no longer managed memory.
  CU_ASSERT_OK(cuMemFree(d));
  CU_EXPECT_EQ(cuMemFree(d), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemAdvise(d, 16, CU_MEM_ADVISE_SET_READ_MOSTLY, Host()), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemRangeGetAttribute(&v, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d, 16),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMemcpyHtoD(d, pageable, 4), CUDA_ERROR_INVALID_VALUE);
  // No IPC handle for managed memory.
  CU_ASSERT_OK(cuMemAllocManaged(&d, 1000, CU_MEM_ATTACH_GLOBAL));
  CUipcMemHandle handle;
  CU_EXPECT_EQ(cuIpcGetMemHandle(&handle, d), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuMemFree(d));
  CU_ASSERT_OK(cuMemFree(plain));
}

// A kernel storing just past the end of a managed allocation faults (sticky ILLEGAL_ADDRESS)
// instead of writing the rest of the host page, or a neighbouring allocation.
TEST_F(ManagedTest, KernelPastTheEndFaults) {
  constexpr int kN = 1001;  // 4004 bytes: the rest of the page is mapped host memory
  CUdeviceptr d, next;
  int* p = Managed<int>(kN * sizeof(int), &d);
  int* q = Managed<int>(kN * sizeof(int), &next);
  ASSERT_NE(p, nullptr);
  ASSERT_NE(q, nullptr);
  long long inside = kN - 1;
  CU_ASSERT_OK(Launch(Function("store_at"), 1, 1, {&d, &inside}));
  CU_ASSERT_OK(cuCtxSynchronize());
  EXPECT_EQ(p[kN - 1], 1);
  long long past = kN;
  testing::internal::CaptureStderr();
  CU_ASSERT_OK(Launch(Function("store_at"), 1, 1, {&d, &past}));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("out-of-bounds"), std::string::npos) << err;
  EXPECT_EQ(p[kN], 0);  // the host page past the allocation is untouched
  for (int i = 0; i < kN; ++i) ASSERT_EQ(q[i], 0) << i;
}

// System-scope atomics of a kernel and __atomic_fetch_add of host threads on one managed counter,
// at the same time (the kernel waits until the host starts adding): no update is lost.
TEST_F(ManagedTest, SystemAtomicsWithHostThreads) {
  int native = 0;
  CU_ASSERT_OK(cuDeviceGetAttribute(&native, CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, 0));
  if (native == 0) GTEST_SKIP() << "HOST_NATIVE_ATOMIC_SUPPORTED is 0";
  CUdeviceptr counter_d, flags_d;
  int* counter = Managed<int>(sizeof(int), &counter_d);
  int* flags = Managed<int>(2 * sizeof(int), &flags_d);
  constexpr int kBlocks = 4, kThreads = 64, kTimes = 400, kHostThreads = 3, kHostAdds = 100000;
  int times = kTimes;
  CU_ASSERT_OK(Launch(Function("system_add"), kBlocks, kThreads, {&counter_d, &flags_d, &times}));
  // The kernel is running once block 0 says so: the host sees its store while it runs.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool started = true;
  while (__atomic_load_n(&flags[0], __ATOMIC_ACQUIRE) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      started = false;
      break;
    }
    std::this_thread::yield();
  }
  // Released either way, so that a kernel that did start late still ends.
  __atomic_store_n(&flags[1], 1, __ATOMIC_RELEASE);
  if (!started) {
    CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    FAIL() << "the kernel did not start in 30 s";
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kHostThreads; ++t) {
    threads.emplace_back([counter] {
      for (int k = 0; k < kHostAdds; ++k) __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
    });
  }
  for (auto& t : threads) t.join();
  CU_ASSERT_OK(cuCtxSynchronize());
  EXPECT_EQ(*counter, kBlocks * kThreads * kTimes + kHostThreads * kHostAdds);
}

}  // namespace
