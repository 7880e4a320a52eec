// Device and host memory: allocation, copies of every kind (synchronous and stream-ordered),
// memsets, pinned and registered host memory, pitched allocations and 2D copies.
#include <string.h>

#include "interpose/hip/runtime.h"

namespace h = rgpu::hip;
using h::Activate;
using h::Error;
using h::Ret;

namespace {

CUdeviceptr D(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// One copy of `kind`, ordered on `stream` when `async`.
Error Copy(void* dst, const void* src, size_t bytes, int kind, CUstream stream, bool async) {
  Error e = Activate();
  if (e != h::hipSuccess) return e;
  if (bytes == 0) return h::hipSuccess;
  if (dst == nullptr || src == nullptr) return h::hipErrorInvalidValue;
  switch (kind) {
    case h::kHostToDevice:
      return h::ToHip(async ? CU(cuMemcpyHtoDAsync_v2)(D(dst), src, bytes, stream)
                            : CU(cuMemcpyHtoD_v2)(D(dst), src, bytes));
    case h::kDeviceToHost:
      return h::ToHip(async ? CU(cuMemcpyDtoHAsync_v2)(dst, D(src), bytes, stream)
                            : CU(cuMemcpyDtoH_v2)(dst, D(src), bytes));
    case h::kDeviceToDevice:
      return h::ToHip(async ? CU(cuMemcpyDtoDAsync_v2)(D(dst), D(src), bytes, stream)
                            : CU(cuMemcpyDtoD_v2)(D(dst), D(src), bytes));
    case h::kHostToHost:
    case h::kDefault:
      // The client knows which addresses are device memory (unified addressing).
      return h::ToHip(async ? CU(cuMemcpyAsync)(D(dst), D(src), bytes, stream)
                            : CU(cuMemcpy)(D(dst), D(src), bytes));
    default:
      return h::hipErrorInvalidMemcpyDirection;
  }
}

CUmemorytype Side(int kind, bool source) {
  switch (kind) {
    case h::kHostToHost:
      return CU_MEMORYTYPE_HOST;
    case h::kHostToDevice:
      return source ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    case h::kDeviceToHost:
      return source ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    case h::kDeviceToDevice:
      return CU_MEMORYTYPE_DEVICE;
    default:
      return CU_MEMORYTYPE_UNIFIED;
  }
}

Error Copy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
             int kind, CUstream stream, bool async) {
  Error e = Activate();
  if (e != h::hipSuccess) return e;
  if (kind < h::kHostToHost || kind > h::kDefault) return h::hipErrorInvalidMemcpyDirection;
  if (width > dpitch || width > spitch) return h::hipErrorInvalidPitchValue;
  CUDA_MEMCPY2D c;
  memset(&c, 0, sizeof c);
  c.srcMemoryType = Side(kind, true);
  c.dstMemoryType = Side(kind, false);
  if (c.srcMemoryType == CU_MEMORYTYPE_HOST)
    c.srcHost = src;
  else
    c.srcDevice = D(src);
  if (c.dstMemoryType == CU_MEMORYTYPE_HOST)
    c.dstHost = dst;
  else
    c.dstDevice = D(dst);
  c.srcPitch = spitch;
  c.dstPitch = dpitch;
  c.WidthInBytes = width;
  c.Height = height;
  return h::ToHip(async ? CU(cuMemcpy2DAsync_v2)(&c, stream) : CU(cuMemcpy2D_v2)(&c));
}

unsigned HostAllocFlags(unsigned flags) {
  unsigned cu = 0;
  if (flags & h::kHostMallocPortable) cu |= CU_MEMHOSTALLOC_PORTABLE;
  if (flags & h::kHostMallocMapped) cu |= CU_MEMHOSTALLOC_DEVICEMAP;
  if (flags & h::kHostMallocWriteCombined) cu |= CU_MEMHOSTALLOC_WRITECOMBINED;
  return cu;
}

}  // namespace

HIP_API(hipMalloc)(void** out, size_t bytes)->Error {
  if (out == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  if (bytes == 0) {
    *out = nullptr;
    return h::hipSuccess;
  }
  CUdeviceptr p = 0;
  CUresult r = CU(cuMemAlloc_v2)(&p, bytes);
  *out = r == CUDA_SUCCESS ? reinterpret_cast<void*>(p) : nullptr;
  return Ret(r);
}

HIP_API(hipFree)(void* p)->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  if (p == nullptr) return h::hipSuccess;
  return Ret(CU(cuMemFree_v2)(D(p)));
}

HIP_API(hipMemGetInfo)(size_t* free_bytes, size_t* total_bytes)->Error {
  if (free_bytes == nullptr || total_bytes == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuMemGetInfo_v2)(free_bytes, total_bytes));
}

HIP_API(hipMallocPitch)(void** out, size_t* pitch, size_t width, size_t height)->Error {
  if (out == nullptr || pitch == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  CUdeviceptr p = 0;
  // Rows are aligned for the widest element (16 bytes), as the runtime cannot know the type.
  CUresult r = CU(cuMemAllocPitch_v2)(&p, pitch, width, height, 16);
  *out = r == CUDA_SUCCESS ? reinterpret_cast<void*>(p) : nullptr;
  return Ret(r);
}

HIP_API(hipMemAllocPitch)
(void** out, size_t* pitch, size_t width, size_t height, unsigned int element_bytes)->Error {
  if (out == nullptr || pitch == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  CUdeviceptr p = 0;
  CUresult r = CU(cuMemAllocPitch_v2)(&p, pitch, width, height, element_bytes);
  *out = r == CUDA_SUCCESS ? reinterpret_cast<void*>(p) : nullptr;
  return Ret(r);
}

HIP_API(hipMemcpy)(void* dst, const void* src, size_t bytes, int kind)->Error {
  return Ret(Copy(dst, src, bytes, kind, nullptr, false));
}
HIP_API(hipMemcpyAsync)
(void* dst, const void* src, size_t bytes, int kind, CUstream stream)->Error {
  return Ret(Copy(dst, src, bytes, kind, stream, true));
}
HIP_API(hipMemcpyWithStream)
(void* dst, const void* src, size_t bytes, int kind, CUstream stream)->Error {
  Error e = Copy(dst, src, bytes, kind, stream, true);
  if (e == h::hipSuccess) e = h::ToHip(CU(cuStreamSynchronize)(stream));
  return Ret(e);
}
HIP_API(hipMemcpyHtoD)(void* dst, void* src, size_t bytes)->Error {
  return Ret(Copy(dst, src, bytes, h::kHostToDevice, nullptr, false));
}
HIP_API(hipMemcpyDtoH)(void* dst, void* src, size_t bytes)->Error {
  return Ret(Copy(dst, src, bytes, h::kDeviceToHost, nullptr, false));
}
HIP_API(hipMemcpyDtoD)(void* dst, void* src, size_t bytes)->Error {
  return Ret(Copy(dst, src, bytes, h::kDeviceToDevice, nullptr, false));
}
HIP_API(hipMemcpyHtoDAsync)(void* dst, void* src, size_t bytes, CUstream stream)->Error {
  return Ret(Copy(dst, src, bytes, h::kHostToDevice, stream, true));
}
HIP_API(hipMemcpyDtoHAsync)(void* dst, void* src, size_t bytes, CUstream stream)->Error {
  return Ret(Copy(dst, src, bytes, h::kDeviceToHost, stream, true));
}
HIP_API(hipMemcpyDtoDAsync)(void* dst, void* src, size_t bytes, CUstream stream)->Error {
  return Ret(Copy(dst, src, bytes, h::kDeviceToDevice, stream, true));
}

HIP_API(hipMemcpy2D)
(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height, int kind)
    ->Error {
  return Ret(Copy2D(dst, dpitch, src, spitch, width, height, kind, nullptr, false));
}
HIP_API(hipMemcpy2DAsync)
(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height, int kind,
 CUstream stream)
    ->Error {
  return Ret(Copy2D(dst, dpitch, src, spitch, width, height, kind, stream, true));
}

HIP_API(hipMemset)(void* dst, int value, size_t bytes)->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuMemsetD8_v2)(D(dst), static_cast<unsigned char>(value), bytes));
}
HIP_API(hipMemsetAsync)(void* dst, int value, size_t bytes, CUstream stream)->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuMemsetD8Async)(D(dst), static_cast<unsigned char>(value), bytes, stream));
}
HIP_API(hipMemsetD8)(void* dst, unsigned char value, size_t count)->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuMemsetD8_v2)(D(dst), value, count));
}
HIP_API(hipMemsetD16)(void* dst, unsigned short value, size_t count)->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuMemsetD16_v2)(D(dst), value, count));
}
HIP_API(hipMemsetD32)(void* dst, int value, size_t count)->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuMemsetD32_v2)(D(dst), static_cast<unsigned>(value), count));
}
HIP_API(hipMemsetD8Async)(void* dst, unsigned char value, size_t count, CUstream s)->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuMemsetD8Async)(D(dst), value, count, s));
}
HIP_API(hipMemsetD16Async)(void* dst, unsigned short value, size_t count, CUstream s)->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuMemsetD16Async)(D(dst), value, count, s));
}
HIP_API(hipMemsetD32Async)(void* dst, int value, size_t count, CUstream s)->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuMemsetD32Async)(D(dst), static_cast<unsigned>(value), count, s));
}
HIP_API(hipMemset2D)
(void* dst, size_t pitch, int value, size_t width, size_t height)->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuMemsetD2D8_v2)(D(dst), pitch, static_cast<unsigned char>(value), width, height));
}
HIP_API(hipMemset2DAsync)
(void* dst, size_t pitch, int value, size_t width, size_t height, CUstream s)->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(
      CU(cuMemsetD2D8Async)(D(dst), pitch, static_cast<unsigned char>(value), width, height, s));
}

// Managed memory: the client's (client/managed_memory.h), with CUDA's model for devices without
// concurrent managed access, which hipDeviceAttributeConcurrentManagedAccess reports.
HIP_API(hipMallocManaged)(void** out, size_t bytes, unsigned int flags)->Error {
  if (out == nullptr || (flags != h::kMemAttachGlobal && flags != h::kMemAttachHost)) {
    return Ret(h::hipErrorInvalidValue);
  }
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  if (bytes == 0) {
    *out = nullptr;
    return h::hipSuccess;
  }
  CUdeviceptr p = 0;
  CUresult r = CU(cuMemAllocManaged)(&p, bytes, flags);
  *out = r == CUDA_SUCCESS ? reinterpret_cast<void*>(p) : nullptr;
  return Ret(r);
}

namespace {
// HIP names a processor by device ordinal or hipCpuDeviceId; the driver by a location.
CUmemLocation Location(int device) {
  CUmemLocation location = {};
  if (device == h::kCpuDeviceId) {
    location.type = CU_MEM_LOCATION_TYPE_HOST;
  } else {
    location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = device;
  }
  return location;
}
}  // namespace

HIP_API(hipMemPrefetchAsync)
(const void* p, size_t count, int device, CUstream stream)->Error {
  return h::InContext(
      [&] { return CU(cuMemPrefetchAsync_v2)(D(p), count, Location(device), 0, stream); });
}
HIP_API(hipMemAdvise)(const void* p, size_t count, int advice, int device)->Error {
  return h::InContext([&] {
    return CU(cuMemAdvise_v2)(D(p), count, static_cast<CUmem_advise>(advice), Location(device));
  });
}
HIP_API(hipMemRangeGetAttribute)
(void* data, size_t data_size, int attribute, const void* p, size_t count)->Error {
  return h::InContext([&] {
    return CU(cuMemRangeGetAttribute)(data, data_size,
                                      static_cast<CUmem_range_attribute>(attribute), D(p), count);
  });
}
HIP_API(hipMemRangeGetAttributes)
(void** data, size_t* data_sizes, int* attributes, size_t n, const void* p, size_t count)->Error {
  if (data == nullptr || data_sizes == nullptr || attributes == nullptr || n == 0) {
    return Ret(h::hipErrorInvalidValue);
  }
  return h::InContext([&] {
    for (size_t i = 0; i < n; ++i) {
      CUresult r = CU(cuMemRangeGetAttribute)(
          data[i], data_sizes[i], static_cast<CUmem_range_attribute>(attributes[i]), D(p), count);
      if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
  });
}
HIP_API(hipStreamAttachMemAsync)
(CUstream stream, void* p, size_t length, unsigned int flags)->Error {
  return h::InContext([&] { return CU(cuStreamAttachMemAsync)(stream, D(p), length, flags); });
}

HIP_API(hipHostMalloc)(void** out, size_t bytes, unsigned int flags)->Error {
  if (out == nullptr) return Ret(h::hipErrorInvalidValue);
  const unsigned known = h::kHostMallocPortable | h::kHostMallocMapped |
                         h::kHostMallocWriteCombined | h::kHostMallocNumaUser |
                         h::kHostMallocCoherent | h::kHostMallocNonCoherent;
  if ((flags & ~known) != 0 ||
      ((flags & h::kHostMallocCoherent) && (flags & h::kHostMallocNonCoherent))) {
    return Ret(h::hipErrorInvalidValue);
  }
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  if (bytes == 0) {
    *out = nullptr;
    return h::hipSuccess;
  }
  // Coherence and NUMA placement describe AMD's fabric; pinned memory here is coherent.
  return Ret(CU(cuMemHostAlloc)(out, bytes, HostAllocFlags(flags)));
}
HIP_API(hipHostAlloc)(void** out, size_t bytes, unsigned int flags)->Error {
  return rgpu_hip_hipHostMalloc(out, bytes, flags);
}
HIP_API(hipMallocHost)(void** out, size_t bytes)->Error {
  return rgpu_hip_hipHostMalloc(out, bytes, 0);
}
HIP_API(hipMemAllocHost)(void** out, size_t bytes)->Error {
  return rgpu_hip_hipHostMalloc(out, bytes, 0);
}

HIP_API(hipHostFree)(void* p)->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  if (p == nullptr) return h::hipSuccess;
  return Ret(CU(cuMemFreeHost)(p));
}
HIP_API(hipFreeHost)(void* p)->Error { return rgpu_hip_hipHostFree(p); }

HIP_API(hipHostRegister)(void* p, size_t bytes, unsigned int flags)->Error {
  if (p == nullptr || bytes == 0) return Ret(h::hipErrorInvalidValue);
  const unsigned known = h::kHostRegisterPortable | h::kHostRegisterMapped |
                         h::kHostRegisterIoMemory | h::kExtHostRegisterCoarseGrained;
  if (flags & ~known) return Ret(h::hipErrorInvalidValue);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  unsigned cu = 0;
  if (flags & h::kHostRegisterPortable) cu |= CU_MEMHOSTREGISTER_PORTABLE;
  if (flags & h::kHostRegisterMapped) cu |= CU_MEMHOSTREGISTER_DEVICEMAP;
  if (flags & h::kHostRegisterIoMemory) cu |= CU_MEMHOSTREGISTER_IOMEMORY;
  return Ret(CU(cuMemHostRegister_v2)(p, bytes, cu));
}
HIP_API(hipHostUnregister)(void* p)->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuMemHostUnregister)(p));
}
HIP_API(hipHostGetDevicePointer)(void** out, void* host, unsigned int flags)->Error {
  if (out == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  CUdeviceptr p = 0;
  CUresult r = CU(cuMemHostGetDevicePointer_v2)(&p, host, flags);
  *out = reinterpret_cast<void*>(p);
  return Ret(r);
}
HIP_API(hipHostGetFlags)(unsigned int* flags, void* host)->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuMemHostGetFlags)(flags, host));
}

HIP_API(hipPointerGetAttributes)(h::PointerAttribute* out, const void* p)->Error {
  if (out == nullptr || p == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  CUmemorytype type = CU_MEMORYTYPE_HOST;
  CUresult r = CU(cuPointerGetAttribute)(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, D(p));
  // Memory rgpu does not know of is the program's own; HIP calls that invalid.
  if (r != CUDA_SUCCESS) return Ret(h::hipErrorInvalidValue);
  *out = h::PointerAttribute{};
  int ordinal = 0;
  CU(cuPointerGetAttribute)(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, D(p));
  out->device = ordinal;
  if (type == CU_MEMORYTYPE_DEVICE) {
    out->memoryType = h::kMemoryTypeDevice;
    out->devicePointer = const_cast<void*>(p);
  } else {
    out->memoryType = h::kMemoryTypeHost;
    out->hostPointer = const_cast<void*>(p);
    CUdeviceptr mapped = 0;  // mapped host memory: where the device has it
    if (CU(cuPointerGetAttribute)(&mapped, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, D(p)) ==
        CUDA_SUCCESS) {
      out->devicePointer = reinterpret_cast<void*>(mapped);
    }
    unsigned flags = 0;
    if (CU(cuMemHostGetFlags)(&flags, const_cast<void*>(p)) == CUDA_SUCCESS) {
      out->allocationFlags = flags;
    }
  }
  return h::hipSuccess;
}

HIP_API(hipMemGetAddressRange)(void** base, size_t* size, void* p)->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  CUdeviceptr b = 0;
  CUresult r = CU(cuMemGetAddressRange_v2)(&b, size, D(p));
  if (base != nullptr) *base = reinterpret_cast<void*>(b);
  return Ret(r);
}

HIP_API(hipMemPtrGetInfo)(void* p, size_t* size)->Error {
  if (size == nullptr) return Ret(h::hipErrorInvalidValue);
  return rgpu_hip_hipMemGetAddressRange(nullptr, size, p);
}

// AMD's extension: device memory with a coherence choice. Only the default is offered: the
// memory lives on a remote device, which cannot give the host fine-grained coherence.
HIP_API(hipExtMallocWithFlags)(void** out, size_t bytes, unsigned int flags)->Error {
  if (flags != 0) return Ret(h::hipErrorNotSupported);
  return rgpu_hip_hipMalloc(out, bytes);
}

// ---- 3D: pitched volumes are pitched 2D allocations of height * depth rows.

namespace rgpu::hip {

Error DriverCopy3D(const Memcpy3DParms& p, CUDA_MEMCPY3D* out) {
  if (p.kind < kHostToHost || p.kind > kDefault) return hipErrorInvalidMemcpyDirection;
  if ((p.srcArray != nullptr && p.srcPtr.ptr != nullptr) ||
      (p.dstArray != nullptr && p.dstPtr.ptr != nullptr)) {
    return hipErrorInvalidValue;  // each end is an array or linear memory, not both
  }
  CUDA_MEMCPY3D& c = *out;
  memset(&c, 0, sizeof c);
  // With an array at either end, x positions and the width count elements of that array.
  size_t element = 1;
  if (p.srcArray != nullptr) {
    Error e = DriverArray(p.srcArray, &c.srcArray, &element);
    if (e != hipSuccess) return e;
    c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  }
  if (p.dstArray != nullptr) {
    size_t dst_element = 1;
    Error e = DriverArray(p.dstArray, &c.dstArray, &dst_element);
    if (e != hipSuccess) return e;
    if (p.srcArray != nullptr && dst_element != element) return hipErrorInvalidValue;
    element = dst_element;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  }
  const size_t src_unit = p.srcArray != nullptr ? element : 1;
  const size_t dst_unit = p.dstArray != nullptr ? element : 1;
  const size_t width_unit = p.srcArray != nullptr || p.dstArray != nullptr ? element : 1;
  c.srcXInBytes = p.srcPos.x * src_unit;
  c.srcY = p.srcPos.y;
  c.srcZ = p.srcPos.z;
  if (p.srcArray == nullptr) {
    c.srcMemoryType = Side(p.kind, true);
    if (c.srcMemoryType == CU_MEMORYTYPE_HOST)
      c.srcHost = p.srcPtr.ptr;
    else
      c.srcDevice = D(p.srcPtr.ptr);
    c.srcPitch = p.srcPtr.pitch;
    c.srcHeight = p.srcPtr.ysize;
  }
  c.dstXInBytes = p.dstPos.x * dst_unit;
  c.dstY = p.dstPos.y;
  c.dstZ = p.dstPos.z;
  if (p.dstArray == nullptr) {
    c.dstMemoryType = Side(p.kind, false);
    if (c.dstMemoryType == CU_MEMORYTYPE_HOST)
      c.dstHost = p.dstPtr.ptr;
    else
      c.dstDevice = D(p.dstPtr.ptr);
    c.dstPitch = p.dstPtr.pitch;
    c.dstHeight = p.dstPtr.ysize;
  }
  c.WidthInBytes = p.extent.width * width_unit;
  c.Height = p.extent.height;
  c.Depth = p.extent.depth;
  return hipSuccess;
}

}  // namespace rgpu::hip

namespace {

Error Copy3D(const h::Memcpy3DParms* p, CUstream stream, bool async) {
  if (p == nullptr) return h::hipErrorInvalidValue;
  Error e = Activate();
  if (e != h::hipSuccess) return e;
  CUDA_MEMCPY3D c;
  e = h::DriverCopy3D(*p, &c);
  if (e != h::hipSuccess) return e;
  return h::ToHip(async ? CU(cuMemcpy3DAsync_v2)(&c, stream) : CU(cuMemcpy3D_v2)(&c));
}

Error Set3D(h::PitchedPtr p, int value, h::Extent extent, CUstream stream, bool async) {
  Error e = Activate();
  if (e != h::hipSuccess) return e;
  if (extent.width > p.pitch || extent.height > p.ysize) return h::hipErrorInvalidValue;
  for (size_t z = 0; z < extent.depth; ++z) {
    const CUdeviceptr slice = D(p.ptr) + z * p.pitch * p.ysize;
    const auto byte = static_cast<unsigned char>(value);
    CUresult r =
        async ? CU(cuMemsetD2D8Async)(slice, p.pitch, byte, extent.width, extent.height, stream)
              : CU(cuMemsetD2D8_v2)(slice, p.pitch, byte, extent.width, extent.height);
    if (r != CUDA_SUCCESS) return h::ToHip(r);
  }
  return h::hipSuccess;
}

}  // namespace

HIP_API(hipMalloc3D)(h::PitchedPtr* out, h::Extent extent)->Error {
  if (out == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  *out = h::PitchedPtr{nullptr, 0, extent.width, extent.height};
  if (extent.width == 0 || extent.height == 0 || extent.depth == 0) return h::hipSuccess;
  CUdeviceptr p = 0;
  size_t pitch = 0;
  CUresult r = CU(cuMemAllocPitch_v2)(&p, &pitch, extent.width, extent.height * extent.depth, 16);
  if (r != CUDA_SUCCESS) return Ret(r);
  out->ptr = reinterpret_cast<void*>(p);
  out->pitch = pitch;
  return h::hipSuccess;
}

HIP_API(hipMemcpy3D)(const h::Memcpy3DParms* p)->Error { return Ret(Copy3D(p, nullptr, false)); }
HIP_API(hipMemcpy3DAsync)(const h::Memcpy3DParms* p, CUstream stream)->Error {
  return Ret(Copy3D(p, stream, true));
}
HIP_API(hipMemset3D)(h::PitchedPtr p, int value, h::Extent extent)->Error {
  return Ret(Set3D(p, value, extent, nullptr, false));
}
HIP_API(hipMemset3DAsync)(h::PitchedPtr p, int value, h::Extent extent, CUstream s)->Error {
  return Ret(Set3D(p, value, extent, s, true));
}
