// Stream-ordered allocation and memory pools (hipMallocAsync, hipFreeAsync,
// hipMallocFromPoolAsync, hipMemPool*, hipDevice{Get,Set}MemPool, hipDeviceGetDefaultMemPool),
// pools shared with the program's other processes through POSIX file descriptors, on the driver's
// pools (hipMemPool_t is the driver's CUmemoryPool). Pool attributes, access flags, location and
// handle types have the driver's values; hipMemPoolProps is translated.
#include <string.h>

#include "interpose/hip/runtime.h"

namespace h = rgpu::hip;
using h::Activate;
using h::Error;
using h::InContext;
using h::Ret;

static_assert(CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES == 1 &&
              CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC == 2 &&
              CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES == 3 &&
              CU_MEMPOOL_ATTR_RELEASE_THRESHOLD == 4 && CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT == 5 &&
              CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH == 6 && CU_MEMPOOL_ATTR_USED_MEM_CURRENT == 7 &&
              CU_MEMPOOL_ATTR_USED_MEM_HIGH == 8);
static_assert(CU_MEM_LOCATION_TYPE_DEVICE == h::kMemLocationTypeDevice &&
              CU_MEM_ALLOCATION_TYPE_PINNED == h::kMemAllocationTypePinned &&
              CU_MEM_HANDLE_TYPE_NONE == h::kMemHandleTypeNone &&
              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR == h::kMemHandleTypePosixFileDescriptor &&
              CU_MEM_HANDLE_TYPE_WIN32 == 2 && CU_MEM_HANDLE_TYPE_WIN32_KMT == 4);
static_assert(CU_MEM_ACCESS_FLAGS_PROT_NONE == 0 && CU_MEM_ACCESS_FLAGS_PROT_READ == 1 &&
              CU_MEM_ACCESS_FLAGS_PROT_READWRITE == 3);
static_assert(sizeof(h::MemLocation) == sizeof(CUmemLocation) &&
              sizeof(h::MemAccessDesc) == sizeof(CUmemAccessDesc) &&
              offsetof(h::MemAccessDesc, flags) == offsetof(CUmemAccessDesc, flags));
static_assert(sizeof(h::OpaqueHandle) == sizeof(CUmemPoolPtrExportData));

namespace {

CUdeviceptr D(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

const CUmemAccessDesc* DriverAccess(const h::MemAccessDesc* d) {
  return reinterpret_cast<const CUmemAccessDesc*>(d);
}

// A pool argument: HIP answers hipErrorInvalidValue for a null one.
Error CheckPool(CUmemoryPool pool) {
  return pool == nullptr ? h::hipErrorInvalidValue : h::hipSuccess;
}

}  // namespace

HIP_API(hipMallocAsync)(void** out, size_t bytes, CUstream stream)->Error {
  if (out == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  CUdeviceptr p = 0;
  CUresult r = CU(cuMemAllocAsync)(&p, bytes, stream);
  *out = r == CUDA_SUCCESS ? reinterpret_cast<void*>(p) : nullptr;
  return Ret(r);
}

HIP_API(hipMallocFromPoolAsync)
(void** out, size_t bytes, CUmemoryPool pool, CUstream stream)->Error {
  if (out == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = CheckPool(pool);
  if (e == h::hipSuccess) e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  CUdeviceptr p = 0;
  CUresult r = CU(cuMemAllocFromPoolAsync)(&p, bytes, pool, stream);
  *out = r == CUDA_SUCCESS ? reinterpret_cast<void*>(p) : nullptr;
  return Ret(r);
}

HIP_API(hipFreeAsync)(void* p, CUstream stream)->Error {
  return InContext([&] { return CU(cuMemFreeAsync)(D(p), stream); });
}

HIP_API(hipDeviceGetDefaultMemPool)(CUmemoryPool* pool, int device)->Error {
  if (pool == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = h::CheckDevice(device);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuDeviceGetDefaultMemPool)(pool, device));
}

HIP_API(hipDeviceGetMemPool)(CUmemoryPool* pool, int device)->Error {
  if (pool == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = h::CheckDevice(device);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuDeviceGetMemPool)(pool, device));
}

HIP_API(hipDeviceSetMemPool)(int device, CUmemoryPool pool)->Error {
  Error e = CheckPool(pool);
  if (e == h::hipSuccess) e = h::CheckDevice(device);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuDeviceSetMemPool)(device, pool));
}

HIP_API(hipMemPoolCreate)(CUmemoryPool* pool, const h::MemPoolProps* props)->Error {
  if (pool == nullptr || props == nullptr) return Ret(h::hipErrorInvalidValue);
  CUmemPoolProps cu;
  memset(&cu, 0, sizeof cu);
  cu.allocType = static_cast<CUmemAllocationType>(props->allocType);
  cu.handleTypes = static_cast<CUmemAllocationHandleType>(props->handleTypes);
  cu.location.type = static_cast<CUmemLocationType>(props->location.type);
  cu.location.id = props->location.id;
  cu.win32SecurityAttributes = props->win32SecurityAttributes;
  if (props->location.type == h::kMemLocationTypeDevice) {
    Error e = h::CheckDevice(props->location.id);
    if (e != h::hipSuccess) return Ret(e);
  }
  return InContext([&] { return CU(cuMemPoolCreate)(pool, &cu); });
}

HIP_API(hipMemPoolDestroy)(CUmemoryPool pool)->Error {
  Error e = CheckPool(pool);
  if (e != h::hipSuccess) return Ret(e);
  return InContext([&] { return CU(cuMemPoolDestroy)(pool); });
}

HIP_API(hipMemPoolSetAttribute)(CUmemoryPool pool, int attribute, void* value)->Error {
  Error e = CheckPool(pool);
  if (e != h::hipSuccess || value == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] {
    return CU(cuMemPoolSetAttribute)(pool, static_cast<CUmemPool_attribute>(attribute), value);
  });
}

HIP_API(hipMemPoolGetAttribute)(CUmemoryPool pool, int attribute, void* value)->Error {
  Error e = CheckPool(pool);
  if (e != h::hipSuccess || value == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] {
    return CU(cuMemPoolGetAttribute)(pool, static_cast<CUmemPool_attribute>(attribute), value);
  });
}

HIP_API(hipMemPoolTrimTo)(CUmemoryPool pool, size_t keep)->Error {
  Error e = CheckPool(pool);
  if (e != h::hipSuccess) return Ret(e);
  return InContext([&] { return CU(cuMemPoolTrimTo)(pool, keep); });
}

HIP_API(hipMemPoolSetAccess)
(CUmemoryPool pool, const h::MemAccessDesc* descs, size_t count)->Error {
  Error e = CheckPool(pool);
  if (e != h::hipSuccess || (descs == nullptr && count != 0)) {
    return Ret(h::hipErrorInvalidValue);
  }
  return InContext([&] { return CU(cuMemPoolSetAccess)(pool, DriverAccess(descs), count); });
}

HIP_API(hipMemPoolGetAccess)(int* flags, CUmemoryPool pool, h::MemLocation* location)->Error {
  Error e = CheckPool(pool);
  if (e != h::hipSuccess || flags == nullptr || location == nullptr) {
    return Ret(h::hipErrorInvalidValue);
  }
  return InContext([&] {
    return CU(cuMemPoolGetAccess)(reinterpret_cast<CUmemAccess_flags*>(flags), pool,
                                  reinterpret_cast<CUmemLocation*>(location));
  });
}

// Shareable pools: only POSIX file descriptors (the driver refuses the other handle types).
HIP_API(hipMemPoolExportToShareableHandle)
(void* handle, CUmemoryPool pool, int type, unsigned int flags)->Error {
  Error e = CheckPool(pool);
  if (e != h::hipSuccess || handle == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] {
    return CU(cuMemPoolExportToShareableHandle)(
        handle, pool, static_cast<CUmemAllocationHandleType>(type), flags);
  });
}

HIP_API(hipMemPoolImportFromShareableHandle)
(CUmemoryPool* pool, void* handle, int type, unsigned int flags)->Error {
  if (pool == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] {
    return CU(cuMemPoolImportFromShareableHandle)(
        pool, handle, static_cast<CUmemAllocationHandleType>(type), flags);
  });
}

HIP_API(hipMemPoolExportPointer)(h::OpaqueHandle* data, void* p)->Error {
  if (data == nullptr || p == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] {
    return CU(cuMemPoolExportPointer)(reinterpret_cast<CUmemPoolPtrExportData*>(data), D(p));
  });
}

HIP_API(hipMemPoolImportPointer)(void** out, CUmemoryPool pool, h::OpaqueHandle* data)->Error {
  Error e = CheckPool(pool);
  if (e != h::hipSuccess || out == nullptr || data == nullptr) {
    return Ret(h::hipErrorInvalidValue);
  }
  e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  CUdeviceptr p = 0;
  CUresult r =
      CU(cuMemPoolImportPointer)(&p, pool, reinterpret_cast<CUmemPoolPtrExportData*>(data));
  *out = r == CUDA_SUCCESS ? reinterpret_cast<void*>(p) : nullptr;
  return Ret(r);
}
