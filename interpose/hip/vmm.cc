// Virtual memory management (hipMemCreate, hipMemAddressReserve/Free, hipMemMap/Unmap,
// hipMemSetAccess/GetAccess, hipMemRelease, hipMemGetAllocationGranularity, the allocation
// handle's properties and retention, and its export and import as a POSIX file descriptor) on
// the driver's. hipMemGenericAllocationHandle_t carries the driver's handle; hipMemAllocationProp
// is translated; access descriptors and locations have the driver's layout.
#include <string.h>

#include "interpose/hip/runtime.h"

namespace h = rgpu::hip;
using h::Activate;
using h::Error;
using h::InContext;
using h::Ret;

static_assert(CU_MEM_ALLOC_GRANULARITY_MINIMUM == 0 && CU_MEM_ALLOC_GRANULARITY_RECOMMENDED == 1);
static_assert(sizeof(void*) == sizeof(CUmemGenericAllocationHandle));

namespace {

CUdeviceptr D(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// hipMemGenericAllocationHandle_t is a pointer type whose value is the driver's handle.
CUmemGenericAllocationHandle Handle(void* h) { return reinterpret_cast<uintptr_t>(h); }
void* HipHandle(CUmemGenericAllocationHandle h) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(h));
}

CUmemAllocationProp DriverProp(const h::MemAllocationProp& p) {
  CUmemAllocationProp cu;
  memset(&cu, 0, sizeof cu);
  cu.type = static_cast<CUmemAllocationType>(p.type);
  cu.requestedHandleTypes = static_cast<CUmemAllocationHandleType>(p.requestedHandleType);
  cu.location.type = static_cast<CUmemLocationType>(p.location.type);
  cu.location.id = p.location.id;
  cu.win32HandleMetaData = p.win32HandleMetaData;
  cu.allocFlags.compressionType = p.compressionType;
  cu.allocFlags.usage = p.usage;
  return cu;
}

h::MemAllocationProp HipProp(const CUmemAllocationProp& cu) {
  h::MemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = cu.type;
  p.requestedHandleType = cu.requestedHandleTypes;
  p.location.type = cu.location.type;
  p.location.id = cu.location.id;
  p.win32HandleMetaData = cu.win32HandleMetaData;
  p.compressionType = cu.allocFlags.compressionType;
  p.usage = cu.allocFlags.usage;
  return p;
}

}  // namespace

HIP_API(hipMemGetAllocationGranularity)
(size_t* granularity, const h::MemAllocationProp* prop, int option)->Error {
  if (granularity == nullptr || prop == nullptr) return Ret(h::hipErrorInvalidValue);
  const CUmemAllocationProp cu = DriverProp(*prop);
  return InContext([&] {
    return CU(cuMemGetAllocationGranularity)(granularity, &cu,
                                             static_cast<CUmemAllocationGranularity_flags>(option));
  });
}

HIP_API(hipMemCreate)
(void** handle, size_t bytes, const h::MemAllocationProp* prop, unsigned long long flags)->Error {
  if (handle == nullptr || prop == nullptr) return Ret(h::hipErrorInvalidValue);
  const CUmemAllocationProp cu = DriverProp(*prop);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  CUmemGenericAllocationHandle made = 0;
  CUresult r = CU(cuMemCreate)(&made, bytes, &cu, flags);
  if (r == CUDA_SUCCESS) *handle = HipHandle(made);
  return Ret(r);
}

HIP_API(hipMemRelease)(void* handle)->Error {
  return InContext([&] { return CU(cuMemRelease)(Handle(handle)); });
}

HIP_API(hipMemAddressReserve)
(void** out, size_t bytes, size_t alignment, void* address, unsigned long long flags)->Error {
  if (out == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  CUdeviceptr p = 0;
  CUresult r = CU(cuMemAddressReserve)(&p, bytes, alignment, D(address), flags);
  *out = r == CUDA_SUCCESS ? reinterpret_cast<void*>(p) : nullptr;
  return Ret(r);
}

HIP_API(hipMemAddressFree)(void* p, size_t bytes)->Error {
  return InContext([&] { return CU(cuMemAddressFree)(D(p), bytes); });
}

HIP_API(hipMemMap)
(void* p, size_t bytes, size_t offset, void* handle, unsigned long long flags)->Error {
  return InContext([&] { return CU(cuMemMap)(D(p), bytes, offset, Handle(handle), flags); });
}

HIP_API(hipMemUnmap)(void* p, size_t bytes)->Error {
  return InContext([&] { return CU(cuMemUnmap)(D(p), bytes); });
}

HIP_API(hipMemSetAccess)
(void* p, size_t bytes, const h::MemAccessDesc* descs, size_t count)->Error {
  if (descs == nullptr && count != 0) return Ret(h::hipErrorInvalidValue);
  return InContext([&] {
    return CU(cuMemSetAccess)(D(p), bytes, reinterpret_cast<const CUmemAccessDesc*>(descs), count);
  });
}

HIP_API(hipMemGetAccess)
(unsigned long long* flags, const h::MemLocation* location, void* p)->Error {
  if (flags == nullptr || location == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] {
    return CU(cuMemGetAccess)(flags, reinterpret_cast<const CUmemLocation*>(location), D(p));
  });
}

HIP_API(hipMemRetainAllocationHandle)(void** handle, void* address)->Error {
  if (handle == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  CUmemGenericAllocationHandle got = 0;
  CUresult r = CU(cuMemRetainAllocationHandle)(&got, address);
  if (r == CUDA_SUCCESS) *handle = HipHandle(got);
  return Ret(r);
}

HIP_API(hipMemGetAllocationPropertiesFromHandle)(h::MemAllocationProp* prop, void* handle)->Error {
  if (prop == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  CUmemAllocationProp cu;
  memset(&cu, 0, sizeof cu);
  CUresult r = CU(cuMemGetAllocationPropertiesFromHandle)(&cu, Handle(handle));
  if (r == CUDA_SUCCESS) *prop = HipProp(cu);
  return Ret(r);
}

HIP_API(hipMemExportToShareableHandle)
(void* shareable, void* handle, int type, unsigned long long flags)->Error {
  if (shareable == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] {
    return CU(cuMemExportToShareableHandle)(shareable, Handle(handle),
                                            static_cast<CUmemAllocationHandleType>(type), flags);
  });
}

HIP_API(hipMemImportFromShareableHandle)(void** handle, void* os_handle, int type)->Error {
  if (handle == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  CUmemGenericAllocationHandle got = 0;
  CUresult r = CU(cuMemImportFromShareableHandle)(&got, os_handle,
                                                  static_cast<CUmemAllocationHandleType>(type));
  if (r == CUDA_SUCCESS) *handle = HipHandle(got);
  return Ret(r);
}
