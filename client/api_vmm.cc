// Virtual memory management: cuMemCreate, cuMemRelease, cuMemAddressReserve, cuMemAddressFree,
// cuMemMap, cuMemUnmap, cuMemSetAccess, cuMemGetAccess, cuMemGetAllocationGranularity,
// cuMemGetAllocationPropertiesFromHandle, cuMemRetainAllocationHandle. The server keeps the
// physical memory, reservations and mappings (server/session_vmm.cc); a
// CUmemGenericAllocationHandle is the server's id of the physical memory. Here the client keeps
// what it must answer itself: each handle's properties and references (cuMemRetainAllocationHandle
// adds one; the server's handle is released with the last), each mapping's handle and access,
// and, once access is granted, the range in its memory map (copies and pointer queries know it).
// Memory lives on a device of the session, in the current context. Memory made with the POSIX
// file descriptor handle type can be shared with the program's other processes (sessions of the
// same tenant): the descriptor holds the server's key (client/shareable_handle.h). Other handle
// types, compression and host-located memory are refused with CUDA_ERROR_NOT_SUPPORTED and a
// warning.
#include <map>
#include <mutex>

#include "client/impl.h"
#include "client/memory_map.h"
#include "client/shareable_handle.h"

extern "C" CUresult rgpu_impl_cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev);

using rgpu::client::ClientState;
using rgpu::client::Memory;
using rgpu::client::RequireContext;
using rgpu::client::Server;
namespace calls = rgpu::calls;

namespace {

struct PhysicalHandle {
  CUmemAllocationProp prop = {};
  int refs = 1;
  CUctx_st* ctx = nullptr;  // the context it was made in (its device's)
};

struct MappedRange {
  uint64_t size = 0;
  CUmemGenericAllocationHandle handle = 0;
  bool accessible = false;
  int device = 0;  // of the context it was mapped in
};

struct Vmm {
  std::mutex mu;
  std::map<CUmemGenericAllocationHandle, PhysicalHandle> handles;  // GUARDED_BY(mu)
  std::map<uint64_t, MappedRange> mappings;                        // by base, GUARDED_BY(mu)
};

Vmm& State() {
  static Vmm* vmm = new Vmm;  // never destroyed: used until the process ends
  return *vmm;
}

// The mapping holding address `ptr` (v.mu held), or end.
std::map<uint64_t, MappedRange>::iterator MappingAt(Vmm& v, uint64_t ptr) {
  auto it = v.mappings.upper_bound(ptr);
  if (it == v.mappings.begin()) return v.mappings.end();
  --it;
  return ptr - it->first < it->second.size ? it : v.mappings.end();
}

// The device's primary context, for VMM calls made with no context current (physical memory is
// the device's in CUDA, not a context's: NVIDIA's memMapIPCDrv makes and exports it with none).
// It is retained once for the process (again if the program reset it) and never made current.
CUresult PrimaryFor(CUdevice dev, CUctx_st** ctx) {
  static std::mutex mu;
  static std::map<CUdevice, uint64_t> held;  // device -> generation retained; GUARDED_BY(mu)
  std::lock_guard<std::mutex> lock(mu);
  CUctx_st* primary = ClientState::Get().primary_context(dev);
  if (primary == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  uint64_t generation;
  {
    std::lock_guard<std::mutex> objects(ClientState::Get().objects_mutex());
    generation = primary->remote != 0 ? primary->generation : 0;
  }
  auto it = held.find(dev);
  if (generation == 0 || it == held.end() || it->second != generation) {
    CUcontext retained;
    if (CUresult r = rgpu_impl_cuDevicePrimaryCtxRetain(&retained, dev); r != CUDA_SUCCESS) {
      return r;
    }
    std::lock_guard<std::mutex> objects(ClientState::Get().objects_mutex());
    held[dev] = primary->generation;
  }
  *ctx = primary;
  return CUDA_SUCCESS;
}

// The context session-wide VMM calls (reservations, mappings, releases) go through: the current
// one, or with none current (the program may have destroyed it: VMM outlives contexts in CUDA)
// device `dev`'s primary context.
CUresult AnyContext(CUdevice dev, CUctx_st** ctx) {
  if (CUresult r = ClientState::Get().CheckInitialized(); r != CUDA_SUCCESS) return r;
  if (rgpu::client::CurrentContext() == nullptr) return PrimaryFor(dev, ctx);
  return RequireContext(ctx);
}

// The current context, which must be on the device `location` names; with none current, that
// device's primary context (PrimaryFor).
CUresult ContextFor(const CUmemLocation& location, CUctx_st** ctx) {
  if (location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    RGPU_LOG_WARN("virtual memory located other than on a device is not supported");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (CUresult r = ClientState::Get().CheckInitialized(); r != CUDA_SUCCESS) return r;
  if (location.id < 0 || location.id >= ClientState::Get().device_count()) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  if (rgpu::client::CurrentContext() == nullptr) return PrimaryFor(location.id, ctx);
  if (CUresult r = RequireContext(ctx); r != CUDA_SUCCESS) return r;
  if ((*ctx)->device != location.id) {
    RGPU_LOG_WARN("virtual memory of device %d from a context of device %d is not supported",
                  location.id, (*ctx)->device);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_SUCCESS;
}

CUresult CheckProp(const CUmemAllocationProp* prop, CUctx_st** ctx) {
  if (prop == nullptr || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
      prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    RGPU_LOG_WARN(
        "cuMemCreate: shareable handles other than POSIX file descriptors are not "
        "supported");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (prop->allocFlags.compressionType != 0) {
    RGPU_LOG_WARN("cuMemCreate: compressible memory is not supported");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return ContextFor(prop->location, ctx);
}

}  // namespace

RGPU_IMPL(cuMemGetAllocationGranularity)
(size_t* granularity, const CUmemAllocationProp* prop, CUmemAllocationGranularity_flags option) {
  if (granularity == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  if (CUresult r = CheckProp(prop, &ctx); r != CUDA_SUCCESS) return r;
  calls::MemGetAllocationGranularity::Results got;
  CUresult r = Server().Call<calls::MemGetAllocationGranularity>(
      ctx->remote, {.option = static_cast<uint32_t>(option)}, &got);
  if (r == CUDA_SUCCESS) *granularity = got.granularity;
  return r;
}

RGPU_IMPL(cuMemCreate)
(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
 unsigned long long flags) {
  if (handle == nullptr || size == 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  if (CUresult r = CheckProp(prop, &ctx); r != CUDA_SUCCESS) return r;
  calls::MemCreate::Results got;
  CUresult r = Server().Call<calls::MemCreate>(ctx->remote, {.size = size}, &got);
  if (r != CUDA_SUCCESS) return r;
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  v.handles[got.handle] = PhysicalHandle{*prop, 1, ctx};
  *handle = got.handle;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemRelease)(CUmemGenericAllocationHandle handle) {
  if (CUresult r = ClientState::Get().CheckInitialized(); r != CUDA_SUCCESS) return r;
  CUctx_st* ctx = nullptr;
  {
    Vmm& v = State();
    std::lock_guard<std::mutex> lock(v.mu);
    auto it = v.handles.find(handle);
    if (it == v.handles.end()) return CUDA_ERROR_INVALID_VALUE;
    if (--it->second.refs > 0) return CUDA_SUCCESS;
    ctx = it->second.ctx;
    v.handles.erase(it);
  }
  // The server keeps physical memory per session: any live context of the process names it.
  if (rgpu::client::CheckContext(ctx) != CUDA_SUCCESS) {
    if (CUresult r = AnyContext(0, &ctx); r != CUDA_SUCCESS) return r;
  }
  return Server().Call<calls::MemRelease>(ctx->remote, {.handle = handle});
}

RGPU_IMPL(cuMemAddressReserve)
(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr, unsigned long long flags) {
  if (ptr == nullptr || size == 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  if (CUresult r = AnyContext(0, &ctx); r != CUDA_SUCCESS) return r;
  // The address hint is a hint: the server's backend chooses the addresses.
  calls::MemAddressReserve::Results got;
  CUresult r = Server().Call<calls::MemAddressReserve>(
      ctx->remote, {.size = size, .alignment = alignment}, &got);
  if (r == CUDA_SUCCESS) *ptr = got.ptr;
  return r;
}

RGPU_IMPL(cuMemAddressFree)(CUdeviceptr ptr, size_t size) {
  CUctx_st* ctx;
  if (CUresult r = AnyContext(0, &ctx); r != CUDA_SUCCESS) return r;
  return Server().Call<calls::MemAddressFree>(ctx->remote, {.ptr = ptr, .size = size});
}

RGPU_IMPL(cuMemMap)
(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
 unsigned long long flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  if (CUresult r = AnyContext(0, &ctx); r != CUDA_SUCCESS) return r;
  CUresult r = Server().Call<calls::MemMap>(
      ctx->remote, {.ptr = ptr, .size = size, .offset = offset, .handle = handle});
  if (r != CUDA_SUCCESS) return r;
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  v.mappings[ptr] = MappedRange{size, handle, false, ctx->device};
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemUnmap)(CUdeviceptr ptr, size_t size) {
  CUctx_st* ctx;
  int device = 0;
  {
    Vmm& v = State();
    std::lock_guard<std::mutex> lock(v.mu);
    auto it = v.mappings.find(ptr);
    if (it != v.mappings.end()) device = it->second.device;
  }
  if (CUresult r = AnyContext(device, &ctx); r != CUDA_SUCCESS) return r;
  if (CUresult r = rgpu::client::WaitContextDrained(ctx); r != CUDA_SUCCESS) return r;
  CUresult r = Server().Call<calls::MemUnmap>(ctx->remote, {.ptr = ptr, .size = size});
  if (r != CUDA_SUCCESS) return r;
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  for (auto it = v.mappings.lower_bound(ptr); it != v.mappings.end() && it->first < ptr + size;) {
    if (it->second.accessible) Memory().Erase(it->first);
    it = v.mappings.erase(it);
  }
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemSetAccess)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  if (desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  for (size_t i = 0; i < count; ++i) {
    CUctx_st* on;
    if (CUresult r = ContextFor(desc[i].location, &on); r != CUDA_SUCCESS) return r;
    if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ) {
      RGPU_LOG_WARN("cuMemSetAccess: read-only access is not supported");
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE &&
        desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const bool read_write = desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUresult r = Server().Call<calls::MemSetAccess>(
        ctx->remote, {.ptr = ptr, .size = size, .read_write = read_write});
    if (r != CUDA_SUCCESS) return r;
    Vmm& v = State();
    std::lock_guard<std::mutex> lock(v.mu);
    for (auto it = v.mappings.lower_bound(ptr); it != v.mappings.end() && it->first < ptr + size;
         ++it) {
      if (it->second.accessible) Memory().Erase(it->first);
      it->second.accessible = read_write;
      if (read_write) {
        rgpu::client::MemoryRange range;
        range.base = it->first;
        range.size = it->second.size;
        range.ctx = ctx;
        range.freeable = false;  // unmapped, never cuMemFree'd
        range.mapping = true;
        Memory().Insert(range);
      }
    }
  }
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemGetAccess)
(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr) {
  if (flags == nullptr || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = ClientState::Get().CheckInitialized(); r != CUDA_SUCCESS) return r;
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  auto it = MappingAt(v, ptr);
  if (it == v.mappings.end()) return CUDA_ERROR_INVALID_VALUE;
  const bool here =
      location->type == CU_MEM_LOCATION_TYPE_DEVICE && location->id == it->second.device;
  *flags = here && it->second.accessible ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                                         : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemRetainAllocationHandle)(CUmemGenericAllocationHandle* handle, void* address) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = ClientState::Get().CheckInitialized(); r != CUDA_SUCCESS) return r;
  const uint64_t ptr = reinterpret_cast<uintptr_t>(address);
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  auto it = MappingAt(v, ptr);
  if (it == v.mappings.end()) return CUDA_ERROR_INVALID_VALUE;
  auto h = v.handles.find(it->second.handle);
  // Released by the program but still mapped: the server released it too, so a retained handle
  // could not be mapped again; rgpu cannot hand it out.
  if (h == v.handles.end()) {
    RGPU_LOG_WARN("cuMemRetainAllocationHandle: the handle was released already");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  ++h->second.refs;
  *handle = it->second.handle;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemGetAllocationPropertiesFromHandle)
(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) {
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = ClientState::Get().CheckInitialized(); r != CUDA_SUCCESS) return r;
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  auto it = v.handles.find(handle);
  if (it == v.handles.end()) return CUDA_ERROR_INVALID_VALUE;
  *prop = it->second.prop;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemExportToShareableHandle)
(void* shareable, CUmemGenericAllocationHandle handle, CUmemAllocationHandleType type,
 unsigned long long flags) {
  if (shareable == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = ClientState::Get().CheckInitialized(); r != CUDA_SUCCESS) return r;
  CUctx_st* ctx = nullptr;
  {
    Vmm& v = State();
    std::lock_guard<std::mutex> lock(v.mu);
    auto it = v.handles.find(handle);
    if (it == v.handles.end()) return CUDA_ERROR_INVALID_VALUE;
    // Only the handle type it was made for.
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
        !(it->second.prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    ctx = it->second.ctx;
  }
  if (CUresult r = rgpu::client::CheckContext(ctx); r != CUDA_SUCCESS) return r;
  calls::MemExportPhysical::Results got;
  CUresult r = Server().Call<calls::MemExportPhysical>(ctx->remote, {.handle = handle}, &got);
  if (r != CUDA_SUCCESS) return r;
  const int fd = rgpu::client::KeyToFd(rgpu::client::KeyFrom(got));
  if (fd < 0) return CUDA_ERROR_OPERATING_SYSTEM;
  *static_cast<int*>(shareable) = fd;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemImportFromShareableHandle)
(CUmemGenericAllocationHandle* handle, void* shareable, CUmemAllocationHandleType type) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    RGPU_LOG_WARN("cuMemImportFromShareableHandle: only POSIX file descriptors are supported");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  CUctx_st* ctx;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  // The descriptor travels as the pointer's value, as the driver takes it.
  rgpu::client::ShareKey key;
  if (!rgpu::client::KeyFromFd(static_cast<int>(reinterpret_cast<intptr_t>(shareable)), &key)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  calls::MemImportPhysical::Results got;
  CUresult r = Server().Call<calls::MemImportPhysical>(
      ctx->remote, rgpu::client::WithKey<calls::MemImportPhysical::Args>({}, key), &got);
  if (r != CUDA_SUCCESS) return r;
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = ctx->device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  v.handles[got.handle] = PhysicalHandle{prop, 1, ctx};
  *handle = got.handle;
  return CUDA_SUCCESS;
}
