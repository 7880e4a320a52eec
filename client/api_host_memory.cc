// Host memory the driver knows about (cuMemHostAlloc, cuMemHostRegister), pointer attributes
// answered from the client's memory map, and pitched 2D copies.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "client/held_copy_source.h"
#include "client/impl.h"
#include "client/managed_memory.h"
#include "client/memory_map.h"
#include "client/sync_memops.h"

namespace calls = rgpu::calls;
using rgpu::client::LocalTransport;
using rgpu::client::Memory;
using rgpu::client::MemoryRange;
using rgpu::client::RequireContext;
using rgpu::client::Server;

namespace {
// Pinned memory is registered with the transport so copies from and to it can go without
// per-transfer registration (zero-copy where the transport can). A failure only costs speed.
void RegisterWithTransport(void* p, size_t bytes) {
  rgpu::Status s = LocalTransport().RegisterHostMemory(p, bytes);
  if (!s.ok())
    RGPU_LOG_DEBUG("pinned memory not registered with the transport: %s", s.ToString().c_str());
}
}  // namespace

RGPU_IMPL(cuMemHostAlloc)(void** pp, size_t bytesize, unsigned int flags) {
  if (pp == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (flags &
      ~(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (flags & CU_MEMHOSTALLOC_DEVICEMAP) {
    // Mapped pinned memory: kernels reach it at the same address; the device being remote, it
    // is kept coherent as managed memory is (client/managed_memory.h).
    uint64_t address = 0;
    r = rgpu::client::AllocateManaged(ctx, bytesize, true, &address);
    if (r == CUDA_SUCCESS) *pp = reinterpret_cast<void*>(address);
    return r;
  }
  const size_t page = 4096;
  void* p = aligned_alloc(page, (bytesize + page - 1) / page * page);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  MemoryRange range;
  range.base = reinterpret_cast<uint64_t>(p);
  range.size = bytesize;
  range.type = CU_MEMORYTYPE_HOST;
  range.ctx = ctx;
  range.host_flags = flags;
  Memory().Insert(range);
  RegisterWithTransport(p, bytesize);
  *pp = p;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemAllocHost_v2)(void** pp, size_t bytesize) {
  return rgpu_impl_cuMemHostAlloc(pp, bytesize, 0);
}

RGPU_IMPL(cuMemFreeHost)(void* p) {
  auto range = Memory().Find(reinterpret_cast<uint64_t>(p));
  if (range && range->managed && range->freeable && range->type == CU_MEMORYTYPE_HOST &&
      range->base == reinterpret_cast<uint64_t>(p)) {
    return rgpu::client::FreeManaged(range->base);
  }
  if (!range || range->type != CU_MEMORYTYPE_HOST || range->base != reinterpret_cast<uint64_t>(p) ||
      !range->freeable) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Posted copies out still on their way may land here: they arrive first.
  Server().AwaitReads();
  Memory().Erase(range->base);
  LocalTransport().UnregisterHostMemory(p);
  free(p);
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemHostRegister_v2)(void* p, size_t bytesize, unsigned int flags) {
  if (p == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (flags & ~(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (flags & CU_MEMHOSTREGISTER_IOMEMORY) {
    RGPU_LOG_WARN("cuMemHostRegister: I/O memory cannot be mapped by a remote GPU");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (reinterpret_cast<uint64_t>(p) + bytesize < reinterpret_cast<uint64_t>(p))
    return CUDA_ERROR_INVALID_VALUE;
  if (Memory().Overlaps(reinterpret_cast<uint64_t>(p), bytesize))
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  if (flags & CU_MEMHOSTREGISTER_DEVICEMAP) {
    // Mapped: the program's pages are kept coherent with a device copy, as managed memory is
    // (client/managed_memory.h); the device has them at another address.
    return rgpu::client::RegisterMapped(ctx, reinterpret_cast<uint64_t>(p), bytesize, flags);
  }
  MemoryRange range;
  range.base = reinterpret_cast<uint64_t>(p);
  range.size = bytesize;
  range.type = CU_MEMORYTYPE_HOST;
  range.ctx = ctx;
  range.freeable = false;
  range.host_flags = flags;
  Memory().Insert(range);
  RegisterWithTransport(p, bytesize);
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemHostUnregister)(void* p) {
  auto range = Memory().Find(reinterpret_cast<uint64_t>(p));
  if (!range || range->type != CU_MEMORYTYPE_HOST || range->freeable ||
      range->base != reinterpret_cast<uint64_t>(p)) {
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  }
  if (range->managed) return rgpu::client::UnregisterMapped(range->base);
  Server().AwaitReads();  // posted copies out on their way land first
  Memory().Erase(range->base);
  LocalTransport().UnregisterHostMemory(p);
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemHostGetFlags)(unsigned int* flags, void* p) {
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto range = Memory().Find(reinterpret_cast<uint64_t>(p));
  if (!range || range->type != CU_MEMORYTYPE_HOST) return CUDA_ERROR_INVALID_VALUE;
  *flags = range->host_flags;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemHostGetDevicePointer_v2)(CUdeviceptr* pdptr, void* p, unsigned int flags) {
  if (pdptr == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  // Mapped pinned memory has one address for both, registered mapped memory another on the
  // device; other host memory is not mapped.
  auto range = Memory().Find(reinterpret_cast<uint64_t>(p));
  if (!range || !range->managed || range->type != CU_MEMORYTYPE_HOST) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *pdptr = reinterpret_cast<CUdeviceptr>(p) + range->device_shift;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemGetAddressRange_v2)(CUdeviceptr* base, size_t* size, CUdeviceptr dptr) {
  auto range = Memory().Find(dptr);
  if (!range || range->type != CU_MEMORYTYPE_DEVICE) return CUDA_ERROR_NOT_FOUND;
  if (base != nullptr) *base = range->base;
  if (size != nullptr) *size = range->size;
  return CUDA_SUCCESS;
}

namespace {

// One attribute of the memory at `ptr`. Unknown memory is CUDA_ERROR_INVALID_VALUE, as the
// driver answers for pageable host memory.
CUresult PointerAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = rgpu::client::ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  auto range = Memory().Find(ptr);
  if (!range) return CUDA_ERROR_INVALID_VALUE;
  const bool device = range->type == CU_MEMORYTYPE_DEVICE;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = range->ctx;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) = range->type;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      // Host memory is mapped on the device only when allocated mapped (one address for both).
      if (!device && !range->managed) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<CUdeviceptr*>(data) = ptr + range->device_shift;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (device && !range->managed) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = reinterpret_cast<void*>(ptr);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<int*>(data) = range->managed && device ? 1 : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      *static_cast<int*>(data) = attribute == CU_POINTER_ATTRIBUTE_MAPPED ? 1 : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = range->ctx != nullptr ? range->ctx->device : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *static_cast<unsigned long long*>(data) = range->buffer_id;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<void**>(data) = reinterpret_cast<void*>(range->base);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = range->size;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:  // off until set (client/sync_memops.h)
      *static_cast<int*>(data) = range->sync_memops ? 1 : 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

}  // namespace

RGPU_IMPL(cuPointerGetAttribute)(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  return PointerAttribute(data, attribute, ptr);
}

// Of the pointer attributes only CU_POINTER_ATTRIBUTE_SYNC_MEMOPS can be set, as on the driver.
RGPU_IMPL(cuPointerSetAttribute)
(const void* value, CUpointer_attribute attribute, CUdeviceptr ptr) {
  if (value == nullptr || attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUresult r = rgpu::client::ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  return rgpu::client::SetSyncMemops(ptr, *static_cast<const unsigned*>(value) != 0);
}

RGPU_IMPL(cuPointerGetAttributes)
(unsigned int count, CUpointer_attribute* attributes, void** data, CUdeviceptr ptr) {
  if (attributes == nullptr || data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const bool known = Memory().Find(ptr).has_value();
  for (unsigned i = 0; i < count; ++i) {
    if (data[i] == nullptr) continue;
    CUresult r = PointerAttribute(data[i], attributes[i], ptr);
    if (r == CUDA_SUCCESS) continue;
    if (known && r != CUDA_ERROR_INVALID_VALUE) return r;
    // Like the driver: unknown (pageable) memory reads as zero rather than failing.
    switch (attributes[i]) {
      case CU_POINTER_ATTRIBUTE_CONTEXT:
      case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *static_cast<void**>(data[i]) = nullptr;
        break;
      case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *static_cast<unsigned long long*>(data[i]) = 0;
        break;
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *static_cast<int*>(data[i]) = -2;
        break;
      default:
        *static_cast<unsigned*>(data[i]) = 0;
    }
  }
  return CUDA_SUCCESS;
}

// ---- Pitched 2D copies ----

namespace {

struct Side {
  CUmemorytype type;
  const char* host;    // host rows (HOST)
  CUdeviceptr device;  // first device byte (DEVICE)
  size_t pitch;
};

CUresult Classify(CUmemorytype type, const void* host, CUdeviceptr device, size_t x, size_t y,
                  size_t pitch, Side* out) {
  if (type == CU_MEMORYTYPE_UNIFIED) {
    type = rgpu::client::IsDeviceAddress(device) ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    host = reinterpret_cast<const void*>(device);
    if (type == CU_MEMORYTYPE_DEVICE) device = rgpu::client::DeviceAddressOf(device);
  }
  out->type = type;
  out->pitch = pitch;
  if (type == CU_MEMORYTYPE_HOST) {
    if (host == nullptr) return CUDA_ERROR_INVALID_VALUE;
    out->host = static_cast<const char*>(host) + y * pitch + x;
  } else if (type == CU_MEMORYTYPE_DEVICE) {
    out->device = device + y * pitch + x;
  } else {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult Copy2D(const CUDA_MEMCPY2D* given, CUstream stream, bool async) {
  if (given == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // A host side in managed or mapped memory is that memory's device copy (the client never
  // reads or writes the program's view of it); the host's writes reach the device first.
  CUDA_MEMCPY2D managed_sides = *given;
  if (managed_sides.srcMemoryType == CU_MEMORYTYPE_HOST &&
      rgpu::client::IsManagedAddress(reinterpret_cast<uint64_t>(managed_sides.srcHost))) {
    managed_sides.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    managed_sides.srcDevice =
        rgpu::client::DeviceAddressOf(reinterpret_cast<CUdeviceptr>(managed_sides.srcHost));
  }
  if (managed_sides.dstMemoryType == CU_MEMORYTYPE_HOST &&
      rgpu::client::IsManagedAddress(reinterpret_cast<uint64_t>(managed_sides.dstHost))) {
    managed_sides.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    managed_sides.dstDevice =
        rgpu::client::DeviceAddressOf(reinterpret_cast<CUdeviceptr>(managed_sides.dstHost));
  }
  if (CUresult r = rgpu::client::BeforeDeviceWork(); r != CUDA_SUCCESS) return r;
  const CUDA_MEMCPY2D* c = &managed_sides;
  if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY) {
    CUDA_MEMCPY3D box = {};
    box.srcXInBytes = c->srcXInBytes;
    box.srcY = c->srcY;
    box.srcMemoryType = c->srcMemoryType;
    box.srcHost = c->srcHost;
    box.srcDevice = c->srcDevice;
    box.srcArray = c->srcArray;
    box.srcPitch = c->srcPitch;
    box.srcHeight = c->Height;
    box.dstXInBytes = c->dstXInBytes;
    box.dstY = c->dstY;
    box.dstMemoryType = c->dstMemoryType;
    box.dstHost = c->dstHost;
    box.dstDevice = c->dstDevice;
    box.dstArray = c->dstArray;
    box.dstPitch = c->dstPitch;
    box.dstHeight = c->Height;
    box.WidthInBytes = c->WidthInBytes;
    box.Height = c->Height;
    box.Depth = 1;
    return rgpu::client::CopyArray3D(box, stream, async);
  }
  if (!async) {
    CUresult r = rgpu::client::WaitStreamDrained(stream);
    if (r != CUDA_SUCCESS) return r;
  }
  CUDA_MEMCPY2D copy = *c;
  std::shared_ptr<std::vector<char>> kept = rgpu::client::KeepPageableSource(&copy, stream, async);
  if (rgpu::client::Defer(stream, CU_GRAPH_NODE_TYPE_MEMCPY,
                          [copy, kept](CUstream s) { return Copy2D(&copy, s, true); })) {
    return CUDA_SUCCESS;
  }
  const size_t width = c->WidthInBytes, height = c->Height;
  if (width == 0 || height == 0) return CUDA_SUCCESS;
  Side src = {}, dst = {};
  CUresult r = Classify(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY,
                        c->srcPitch, &src);
  if (r == CUDA_SUCCESS) {
    r = Classify(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY, c->dstPitch,
                 &dst);
  }
  if (r != CUDA_SUCCESS) return r;
  if ((src.pitch < width && height > 1) || (dst.pitch < width && height > 1)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const size_t spitch = std::max(src.pitch, width), dpitch = std::max(dst.pitch, width);
  CUctx_st* ctx;
  uint64_t remote_stream = 0;
  r = rgpu::client::ResolveStream(stream, &ctx, &remote_stream);
  if (r != CUDA_SUCCESS) return r;
  char* dst_host = const_cast<char*>(dst.host);
  if (src.type == CU_MEMORYTYPE_HOST && dst.type == CU_MEMORYTYPE_HOST) {
    if (stream != nullptr && (r = rgpu_impl_cuStreamSynchronize(stream)) != CUDA_SUCCESS) return r;
    for (size_t row = 0; row < height; ++row) {
      memmove(dst_host + row * dpitch, src.host + row * spitch, width);
    }
    return CUDA_SUCCESS;
  }
  if (src.type == CU_MEMORYTYPE_HOST) {
    if (!async) {
      r = rgpu::client::WaitBeforeSynchronousCopy(ctx, remote_stream);
      if (r != CUDA_SUCCESS) return r;
    }
    std::vector<char> packed(width * height);
    for (size_t row = 0; row < height; ++row) {
      memcpy(packed.data() + row * width, src.host + row * spitch, width);
    }
    return Server().Post<calls::Memcpy2DHtoD>(ctx->remote,
                                              {.dst = dst.device,
                                               .dst_pitch = dpitch,
                                               .width = width,
                                               .height = height,
                                               .stream = remote_stream,
                                               .async = async},
                                              packed.data(), packed.size());
  }
  if (dst.type == CU_MEMORYTYPE_HOST) {
    const bool direct = dpitch == width;
    std::vector<char> packed(direct ? 0 : width * height);
    char* landing = direct ? dst_host : packed.data();
    size_t got = 0;
    r = Server().Call<calls::Memcpy2DDtoH>(
        ctx->remote,
        {.src = src.device,
         .src_pitch = spitch,
         .width = width,
         .height = height,
         .stream = remote_stream,
         .async = async},
        nullptr, nullptr, 0, rgpu::client::ReplyBuffer{landing, width * height}, &got);
    if (r != CUDA_SUCCESS) return r;
    if (got != width * height) return CUDA_ERROR_UNKNOWN;
    if (!direct) {
      for (size_t row = 0; row < height; ++row) {
        memcpy(dst_host + row * dpitch, packed.data() + row * width, width);
      }
    }
    return CUDA_SUCCESS;
  }
  return Server().Post<calls::Memcpy2DDtoD>(ctx->remote, {.dst = dst.device,
                                                          .dst_pitch = dpitch,
                                                          .src = src.device,
                                                          .src_pitch = spitch,
                                                          .width = width,
                                                          .height = height,
                                                          .stream = remote_stream,
                                                          .async = async});
}

}  // namespace

namespace {

// A 3D copy between host and device memory: one pitched 2D copy per slice. Slice z starts
// (z + srcZ) * srcPitch * srcHeight bytes into the source (likewise the destination).
CUresult Copy3D(const CUDA_MEMCPY3D* c, CUstream stream, bool async) {
  if (c == nullptr || c->reserved0 != nullptr || c->reserved1 != nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (c->srcLOD != 0 || c->dstLOD != 0) return CUDA_ERROR_INVALID_VALUE;
  if (rgpu::client::CopyNamesArray(*c)) {
    return rgpu::client::CopyArray3D(*c, stream, async);
  }
  if (c->Depth > 1 && (c->srcHeight < c->Height || c->dstHeight < c->Height)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t z = 0; z < c->Depth; ++z) {
    CUDA_MEMCPY2D slice = {};
    slice.srcXInBytes = c->srcXInBytes;
    slice.srcY = c->srcY + (c->srcZ + z) * c->srcHeight;
    slice.srcMemoryType = c->srcMemoryType;
    slice.srcHost = c->srcHost;
    slice.srcDevice = c->srcDevice;
    slice.srcArray = c->srcArray;
    slice.srcPitch = c->srcPitch;
    slice.dstXInBytes = c->dstXInBytes;
    slice.dstY = c->dstY + (c->dstZ + z) * c->dstHeight;
    slice.dstMemoryType = c->dstMemoryType;
    slice.dstHost = c->dstHost;
    slice.dstDevice = c->dstDevice;
    slice.dstArray = c->dstArray;
    slice.dstPitch = c->dstPitch;
    slice.WidthInBytes = c->WidthInBytes;
    slice.Height = c->Height;
    CUresult r = Copy2D(&slice, stream, async);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

}  // namespace

namespace {
// The address a pitched copy's side names, for client/sync_memops.h (page-locked host memory
// may carry the attribute too); 0 for arrays.
CUdeviceptr SideAddress(CUmemorytype type, CUdeviceptr device, const void* host) {
  if (type == CU_MEMORYTYPE_HOST) return reinterpret_cast<CUdeviceptr>(host);
  return type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED ? device : 0;
}

// The end of a synchronous 2D or 3D copy that returned `r` (client/sync_memops.h).
template <typename PitchedCopy>
CUresult FinishPitchedCopy(CUresult r, const PitchedCopy* copy) {
  if (copy == nullptr) return r;
  return rgpu::client::FinishSynchronousMemop(
      r, {SideAddress(copy->dstMemoryType, copy->dstDevice, copy->dstHost),
          SideAddress(copy->srcMemoryType, copy->srcDevice, copy->srcHost)});
}
}  // namespace

RGPU_IMPL(cuMemcpy3D_v2)(const CUDA_MEMCPY3D* copy) {
  return FinishPitchedCopy(Copy3D(copy, nullptr, false), copy);
}
RGPU_IMPL(cuMemcpy3DAsync_v2)(const CUDA_MEMCPY3D* copy, CUstream s) {
  return Copy3D(copy, s, true);
}
RGPU_SAME_AS(cuMemcpy3D_v2_ptds, cuMemcpy3D_v2)
RGPU_PER_THREAD_SAME_AS(cuMemcpy3DAsync_v2_ptsz)

RGPU_IMPL(cuMemcpy2D_v2)(const CUDA_MEMCPY2D* copy) {
  return FinishPitchedCopy(Copy2D(copy, nullptr, false), copy);
}
RGPU_IMPL(cuMemcpy2DUnaligned_v2)(const CUDA_MEMCPY2D* copy) {
  return rgpu_impl_cuMemcpy2D_v2(copy);
}
RGPU_IMPL(cuMemcpy2DAsync_v2)(const CUDA_MEMCPY2D* copy, CUstream s) {
  return Copy2D(copy, s, true);
}
RGPU_SAME_AS(cuMemcpy2D_v2_ptds, cuMemcpy2D_v2)
RGPU_SAME_AS(cuMemcpy2DUnaligned_v2_ptds, cuMemcpy2DUnaligned_v2)
RGPU_PER_THREAD_SAME_AS(cuMemcpy2DAsync_v2_ptsz)

// Managed memory's hints and prefetches (client/managed_memory.h). A prefetch to the device
// pushes what the host wrote; one to the host (CU_DEVICE_CPU) brings the range back whole.
namespace {

CUresult Prefetch(CUdeviceptr ptr, size_t count, bool to_host, int device, CUstream stream) {
  CUresult r = rgpu::client::ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  auto range = Memory().Find(ptr);
  if (!range || !range->managed || count == 0) return CUDA_ERROR_INVALID_VALUE;
  if (!to_host && (range->ctx == nullptr || device != range->ctx->device)) {
    return CUDA_ERROR_INVALID_DEVICE;  // managed memory lives on its context's device
  }
  if (!rgpu::client::IsSpecialStream(stream)) {
    CUctx_st* ctx;
    uint64_t remote = 0;
    if ((r = rgpu::client::ResolveStream(stream, &ctx, &remote)) != CUDA_SUCCESS) return r;
  }
  return rgpu::client::PrefetchManaged(ptr, count, to_host, stream);
}

}  // namespace

RGPU_IMPL(cuMemPrefetchAsync_v2)
(CUdeviceptr ptr, size_t count, CUmemLocation location, unsigned int flags, CUstream stream) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  switch (location.type) {
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
      return Prefetch(ptr, count, true, CU_DEVICE_CPU, stream);
    case CU_MEM_LOCATION_TYPE_DEVICE:
      return Prefetch(ptr, count, false, location.id, stream);
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}
RGPU_PER_THREAD_SAME_AS(cuMemPrefetchAsync_v2_ptsz)

extern "C" __attribute__((visibility("default"))) CUresult rgpu_impl_cuMemPrefetchAsync(
    CUdeviceptr ptr, size_t count, CUdevice device, CUstream stream) {
  return Prefetch(ptr, count, device == CU_DEVICE_CPU, device, stream);
}
RGPU_PER_THREAD_SAME_AS(cuMemPrefetchAsync_ptsz)

RGPU_IMPL(cuMemAdvise_v2)
(CUdeviceptr ptr, size_t count, CUmem_advise advice, CUmemLocation location) {
  CUresult r = rgpu::client::ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  if (count == 0) return CUDA_ERROR_INVALID_VALUE;
  return rgpu::client::AdviseManaged(ptr, count, advice, location);
}

extern "C" __attribute__((visibility("default"))) CUresult rgpu_impl_cuMemAdvise(
    CUdeviceptr ptr, size_t count, CUmem_advise advice, CUdevice device) {
  CUmemLocation location = {};
  if (device == CU_DEVICE_CPU) {
    location.type = CU_MEM_LOCATION_TYPE_HOST;
  } else {
    location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = device;
  }
  return rgpu_impl_cuMemAdvise_v2(ptr, count, advice, location);
}

RGPU_IMPL(cuMemRangeGetAttribute)
(void* data, size_t data_size, CUmem_range_attribute attribute, CUdeviceptr ptr, size_t count) {
  CUresult r = rgpu::client::ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  return rgpu::client::ManagedRangeAttribute(data, data_size, attribute, ptr, count);
}

RGPU_IMPL(cuMemRangeGetAttributes)
(void** data, size_t* data_sizes, CUmem_range_attribute* attributes, size_t count, CUdeviceptr ptr,
 size_t bytes) {
  if (data == nullptr || data_sizes == nullptr || attributes == nullptr || count == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < count; ++i) {
    CUresult r =
        rgpu_impl_cuMemRangeGetAttribute(data[i], data_sizes[i], attributes[i], ptr, bytes);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

// Attaching managed memory to a stream lets the host touch it while other streams run, on a GPU.
// rgpu's host waits for all device work before it touches managed memory the device may have
// written, so every attachment gives the same results; it is validated and kept by no one.
RGPU_IMPL(cuStreamAttachMemAsync)
(CUstream stream, CUdeviceptr ptr, size_t length, unsigned int flags) {
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST &&
      flags != CU_MEM_ATTACH_SINGLE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto range = Memory().Find(ptr);
  if (!range || !range->managed || range->type != CU_MEMORYTYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (length != 0 && (range->base != ptr || length != range->size)) {
    return CUDA_ERROR_INVALID_VALUE;  // as CUDA: the whole allocation (or 0 for it)
  }
  CUctx_st* ctx;
  uint64_t remote = 0;
  if (flags == CU_MEM_ATTACH_SINGLE && rgpu::client::IsSpecialStream(stream)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return rgpu::client::IsSpecialStream(stream) ? CUDA_SUCCESS
                                               : rgpu::client::ResolveStream(stream, &ctx, &remote);
}
RGPU_PER_THREAD_SAME_AS(cuStreamAttachMemAsync_ptsz)
