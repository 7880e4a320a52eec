// Managed memory, natively: cuMemAllocManaged gives host memory mapped at its own device address
// (AddressSpace::AllocateManaged), so host code and kernels share the bytes at the same time
// (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 1). There is one copy, so advice, prefetches
// and stream attachment change nothing about where data lives or who sees it: they are checked,
// and advice and prefetch locations are kept per host page for cuMemRangeGetAttribute(s).
// Managed memory belongs to the allocating context: its kernels and copies reach it (and, being
// host memory, host copies from any context); other contexts' kernels do not.
// Also pointer attributes (cuPointerGetAttribute(s)) for every kind of memory softgpu knows.
#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "softgpu/api_util.h"

using namespace softgpu;

namespace {

// The managed allocation of `ctx` holding [address, address + count) (count > 0), or null.
std::shared_ptr<Allocation> ManagedRange(Context& ctx, CUdeviceptr address, size_t count) {
  if (count == 0) return nullptr;
  std::shared_ptr<Allocation> a = ctx.memory().Find(address, count);
  return a != nullptr && a->managed != nullptr ? a : nullptr;
}

// The host pages of `a` that [address, address + count) touches, as [*first, *last].
void PagesOf(const Allocation& a, CUdeviceptr address, size_t count, size_t* first, size_t* last) {
  const uint64_t page = HostPageSize();
  *first = (address - a.base) / page;
  *last = (address + count - 1 - a.base) / page;
}

// The hints of `a`, created on first use (the caller holds a.managed->mu).
std::vector<PageHints>& Pages(Allocation& a) {
  std::vector<PageHints>& pages = a.managed->pages;
  if (pages.empty()) pages.resize((a.size + HostPageSize() - 1) / HostPageSize());
  return pages;
}

// A location of the _v2 calls as a device ordinal or kLocationHost. HOST_NUMA names a host NUMA
// node, and softgpu reports none (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID is -1): INVALID_VALUE.
CUresult DecodeLocation(const CUmemLocation& location, int* out) {
  switch (location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (FindDevice(location.id) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
      *out = location.id;
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
      *out = kLocationHost;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// A location of the first-generation calls: a device ordinal or CU_DEVICE_CPU.
CUresult DecodeDevice(CUdevice device, int* out) {
  if (device == CU_DEVICE_CPU) {
    *out = kLocationHost;
    return CUDA_SUCCESS;
  }
  if (FindDevice(device) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *out = device;
  return CUDA_SUCCESS;
}

// Whether `advice` takes a location (the others ignore it).
bool NeedsLocation(CUmem_advise advice) {
  return advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION ||
         advice == CU_MEM_ADVISE_SET_ACCESSED_BY || advice == CU_MEM_ADVISE_UNSET_ACCESSED_BY;
}

// Records `advice` for the pages of [address, address + count), which must lie in one managed
// allocation of the current context. `location` (a device ordinal or kLocationHost) is used only
// when the advice takes one; `location_status` is the outcome of decoding it.
CUresult Advise(CUdeviceptr address, size_t count, CUmem_advise advice, CUresult location_status,
                int location) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Allocation> a = ManagedRange(*ctx, address, count);
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (advice < CU_MEM_ADVISE_SET_READ_MOSTLY || advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (NeedsLocation(advice) && location_status != CUDA_SUCCESS) return location_status;
  size_t first = 0, last = 0;
  PagesOf(*a, address, count, &first, &last);
  std::lock_guard lock(a->managed->mu);
  std::vector<PageHints>& pages = Pages(*a);
  const uint64_t bit = location >= 0 ? 1ull << location : 0;
  for (size_t p = first; p <= last; ++p) {
    PageHints& h = pages[p];
    switch (advice) {
      case CU_MEM_ADVISE_SET_READ_MOSTLY:
      case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
        h.read_mostly = advice == CU_MEM_ADVISE_SET_READ_MOSTLY;
        break;
      case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
        h.preferred = static_cast<int16_t>(location);
        break;
      case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
        h.preferred = kLocationNone;
        break;
      case CU_MEM_ADVISE_SET_ACCESSED_BY:
        if (location == kLocationHost) h.accessed_by_host = true;
        h.accessed_by |= bit;
        break;
      case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
        if (location == kLocationHost) h.accessed_by_host = false;
        h.accessed_by &= ~bit;
        break;
    }
  }
  return CUDA_SUCCESS;
}

// A prefetch of [address, address + count) (in one managed allocation of the current context) to
// `location` on `stream`. There is nothing to move; the pages' last prefetch location is what the
// program asked for last, recorded now (cuda.h: the attribute "simply returns the last location
// that the application requested to prefetch the memory range to").
CUresult Prefetch(CUdeviceptr address, size_t count, CUresult location_status, int location,
                  unsigned flags, CUstream stream) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Stream> s;
  if (CUresult r = ResolveStream(ctx, stream, &s); r != CUDA_SUCCESS) return r;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Allocation> a = ManagedRange(*ctx, address, count);
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (location_status != CUDA_SUCCESS) return location_status;
  size_t first = 0, last = 0;
  PagesOf(*a, address, count, &first, &last);
  std::lock_guard lock(a->managed->mu);
  std::vector<PageHints>& pages = Pages(*a);
  for (size_t p = first; p <= last; ++p) pages[p].last_prefetch = static_cast<int16_t>(location);
  return CUDA_SUCCESS;
}

// What the pages [first, last] agree on.
struct RangeSummary {
  bool read_mostly = true;
  int preferred = kLocationNone;
  int last_prefetch = kLocationNone;
  uint64_t accessed_by = ~0ull;
  bool accessed_by_host = true;
};

// A location all pages share, or kLocationNone.
void Agree(int16_t value, size_t index, int* summary) {
  if (index == 0) {
    *summary = value;
  } else if (*summary != value) {
    *summary = kLocationNone;
  }
}

RangeSummary Summarize(Allocation& a, size_t first, size_t last) {
  RangeSummary s;
  std::lock_guard lock(a.managed->mu);
  const std::vector<PageHints>& pages = Pages(a);
  for (size_t p = first; p <= last; ++p) {
    const PageHints& h = pages[p];
    s.read_mostly = s.read_mostly && h.read_mostly;
    Agree(h.preferred, p - first, &s.preferred);
    Agree(h.last_prefetch, p - first, &s.last_prefetch);
    s.accessed_by &= h.accessed_by;
    s.accessed_by_host = s.accessed_by_host && h.accessed_by_host;
  }
  return s;
}

CUmemLocationType LocationType(int location) {
  if (location == kLocationHost) return CU_MEM_LOCATION_TYPE_HOST;
  return location >= 0 ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_INVALID;
}

// Writes one 32-bit answer after checking the caller's size.
CUresult Put32(void* data, size_t size, int value) {
  if (size != 4) return CUDA_ERROR_INVALID_VALUE;
  memcpy(data, &value, 4);
  return CUDA_SUCCESS;
}

// One range attribute of [first, last] of `a`, checked as cuda.h describes. A location id of a
// location that is not a device reads as the legacy attribute does (CU_DEVICE_CPU, or
// CU_DEVICE_INVALID), which cuda.h says to ignore.
CUresult RangeAttribute(void* data, size_t size, CUmem_range_attribute attribute, Allocation& a,
                        size_t first, size_t last) {
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const RangeSummary s = Summarize(a, first, last);
  switch (attribute) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
      return Put32(data, size, s.read_mostly ? 1 : 0);
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
      return Put32(data, size, s.preferred);
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
      return Put32(data, size, LocationType(s.preferred));
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
      return Put32(data, size, s.last_prefetch);
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
      return Put32(data, size, LocationType(s.last_prefetch));
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
      if (size == 0 || size % 4 != 0) return CUDA_ERROR_INVALID_VALUE;
      std::vector<int> devices;
      for (int d = 0; d < 64; ++d) {
        if (s.accessed_by & (1ull << d)) devices.push_back(d);
      }
      if (s.accessed_by_host) devices.push_back(CU_DEVICE_CPU);
      devices.resize(std::max(devices.size(), size / 4), CU_DEVICE_INVALID);
      memcpy(data, devices.data(), size);
      return CUDA_SUCCESS;
    }
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// The managed allocation a range query names, with its pages.
CUresult QueryRange(CUdeviceptr address, size_t count, std::shared_ptr<Allocation>* a,
                    size_t* first, size_t* last) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  *a = ManagedRange(*ctx, address, count);
  if (*a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  PagesOf(**a, address, count, first, last);
  return CUDA_SUCCESS;
}

// What softgpu knows about the memory at a pointer.
struct PointerInfo {
  CUcontext context = nullptr;
  int device = 0;
  CUmemorytype type = CU_MEMORYTYPE_DEVICE;
  bool device_access = false;  // kernels reach it (at the pointer itself)
  bool host_access = false;    // host code reaches it (at the pointer itself)
  bool managed = false;
  bool ipc_capable = false;
  uint64_t base = 0;
  uint64_t size = 0;
};

// Fills *info from an allocation of context `c`.
void DescribeAllocation(const Context& c, const Allocation& a, PointerInfo* info) {
  info->context = reinterpret_cast<CUcontext>(const_cast<Context*>(&c));
  info->device = c.device()->ordinal();
  info->type = CU_MEMORYTYPE_DEVICE;
  info->device_access = true;
  info->host_access = a.native;
  info->managed = a.managed != nullptr;
  info->ipc_capable = a.kind == AllocationKind::kMemAlloc;
  info->base = a.base;
  info->size = a.size;
}

// Describes the memory at `ptr`: device memory of the current context or of another live one,
// or page-locked host memory. False for memory softgpu does not know (pageable host memory).
bool DescribePointer(CUdeviceptr ptr, PointerInfo* info) {
  std::shared_ptr<Context> current;
  if (CurrentContext(&current) == CUDA_SUCCESS) {
    if (std::shared_ptr<Allocation> a = current->memory().Find(ptr, 1)) {
      DescribeAllocation(*current, *a, info);
      return true;
    }
  }
  bool found = false;
  if (IsDeviceAddress(ptr)) {
    GetDriver().contexts.ForEach([&](const std::shared_ptr<Context>& c) {
      if (found || !c->alive()) return;
      if (std::shared_ptr<Allocation> a = c->memory().Find(ptr, 1)) {
        DescribeAllocation(*c, *a, info);
        found = true;
      }
    });
  }
  if (found) return true;
  PageLockedRange range;
  if (!FindPageLocked(ptr, &range)) return false;
  info->context = range.context;
  info->device = range.device;
  info->type = CU_MEMORYTYPE_HOST;
  info->device_access = range.mapped;
  info->host_access = true;
  info->base = range.base;
  info->size = range.size;
  return true;
}

void PutInt(void* data, int value) { memcpy(data, &value, sizeof value); }

// One pointer attribute of memory described by `info`. Booleans are ints, as the driver writes.
CUresult PointerAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr,
                          const PointerInfo& info) {
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      memcpy(data, &info.context, sizeof info.context);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      PutInt(data, info.type);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      if (!info.device_access) return CUDA_ERROR_INVALID_VALUE;
      memcpy(data, &ptr, sizeof ptr);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: {
      if (!info.host_access) return CUDA_ERROR_INVALID_VALUE;
      void* host = reinterpret_cast<void*>(ptr);
      memcpy(data, &host, sizeof host);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:  // softgpu's synchronous copies always synchronise
      PutInt(data, 1);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: {  // bases are never reused (memory.h)
      const unsigned long long id = info.base;
      memcpy(data, &id, sizeof id);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      PutInt(data, info.managed ? 1 : 0);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      PutInt(data, info.device);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      PutInt(data, info.ipc_capable ? 1 : 0);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: {  // each allocation is one mapping
      void* base = reinterpret_cast<void*>(info.base);
      memcpy(data, &base, sizeof base);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE: {
      const size_t size = info.size;
      memcpy(data, &size, sizeof size);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_MAPPED:
      PutInt(data, 1);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID: {
      const unsigned long long id = info.base;
      memcpy(data, &id, sizeof id);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:  // no shareable handles (README)
      PutInt(data, CU_MEM_HANDLE_TYPE_NONE);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
      PutInt(data, 0);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
      PutInt(data, info.device_access ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE
                                      : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: {  // softgpu has no memory pools
      CUmemoryPool none = nullptr;
      memcpy(data, &none, sizeof none);
      return CUDA_SUCCESS;
    }
    default:
      fprintf(stderr, "softgpu: cuPointerGetAttribute: attribute %d is not supported\n",
              static_cast<int>(attribute));
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

// The value cuPointerGetAttributes gives an attribute of memory softgpu does not know.
void UnknownPointerAttribute(void* data, CUpointer_attribute attribute) {
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
      memset(data, 0, 8);
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      PutInt(data, CU_DEVICE_INVALID);
      break;
    default:
      PutInt(data, 0);
      break;
  }
}

}  // namespace

SOFTGPU_EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize,
                                                  unsigned int flags) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    if (dptr == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    uint64_t address;
    CUresult r = AllocationError(ctx->memory().AllocateManaged(bytesize, &address));
    if (r == CUDA_SUCCESS) *dptr = address;
    return r;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                                            CUmemLocation location) {
  return Guard([&] {
    int where = kLocationNone;
    const CUresult decoded = DecodeLocation(location, &where);
    return Advise(devPtr, count, advice, decoded, where);
  });
}

// cuMemAdvise before CUDA 12.2's CUmemLocation (a device ordinal or CU_DEVICE_CPU).
extern "C" SOFTGPU_EXPORT CUresult CUDAAPI softgpu_cuMemAdvise_v1(
    CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device) __asm__("cuMemAdvise");
extern "C" SOFTGPU_EXPORT CUresult CUDAAPI softgpu_cuMemAdvise_v1(CUdeviceptr devPtr, size_t count,
                                                                  CUmem_advise advice,
                                                                  CUdevice device) {
  return Guard([&] {
    int where = kLocationNone;
    const CUresult decoded = DecodeDevice(device, &where);
    return Advise(devPtr, count, advice, decoded, where);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count,
                                                   CUmemLocation location, unsigned int flags,
                                                   CUstream hStream) {
  return Guard([&] {
    int where = kLocationNone;
    const CUresult decoded = DecodeLocation(location, &where);
    return Prefetch(devPtr, count, decoded, where, flags, hStream);
  });
}

// cuMemPrefetchAsync before CUDA 12.2's CUmemLocation.
extern "C" SOFTGPU_EXPORT CUresult CUDAAPI
softgpu_cuMemPrefetchAsync_v1(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                              CUstream hStream) __asm__("cuMemPrefetchAsync");
extern "C" SOFTGPU_EXPORT CUresult CUDAAPI softgpu_cuMemPrefetchAsync_v1(CUdeviceptr devPtr,
                                                                         size_t count,
                                                                         CUdevice dstDevice,
                                                                         CUstream hStream) {
  return Guard([&] {
    int where = kLocationNone;
    const CUresult decoded = DecodeDevice(dstDevice, &where);
    return Prefetch(devPtr, count, decoded, where, 0, hStream);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemRangeGetAttribute(void* data, size_t dataSize,
                                                       CUmem_range_attribute attribute,
                                                       CUdeviceptr devPtr, size_t count) {
  return Guard([&] {
    std::shared_ptr<Allocation> a;
    size_t first = 0, last = 0;
    if (CUresult r = QueryRange(devPtr, count, &a, &first, &last); r != CUDA_SUCCESS) return r;
    return RangeAttribute(data, dataSize, attribute, *a, first, last);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemRangeGetAttributes(void** data, size_t* dataSizes,
                                                        CUmem_range_attribute* attributes,
                                                        size_t numAttributes, CUdeviceptr devPtr,
                                                        size_t count) {
  return Guard([&] {
    std::shared_ptr<Allocation> a;
    size_t first = 0, last = 0;
    if (CUresult r = QueryRange(devPtr, count, &a, &first, &last); r != CUDA_SUCCESS) return r;
    if (numAttributes == 0 || data == nullptr || dataSizes == nullptr || attributes == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < numAttributes; ++i) {
      CUresult r = RangeAttribute(data[i], dataSizes[i], attributes[i], *a, first, last);
      if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
  });
}

// Checks an attachment (the whole allocation of managed memory: length 0 or its size; exactly one
// of the attach flags; CU_MEM_ATTACH_SINGLE not on the NULL stream). With concurrent access
// every stream and the host see the memory whatever it is attached to, so nothing changes.
SOFTGPU_EXPORT CUresult CUDAAPI cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr,
                                                       size_t length, unsigned int flags) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Stream> s;
    if (CUresult r = ResolveStream(ctx, hStream, &s); r != CUDA_SUCCESS) return r;
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST &&
        flags != CU_MEM_ATTACH_SINGLE) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (flags == CU_MEM_ATTACH_SINGLE && s == ctx->default_stream()) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    std::shared_ptr<Allocation> a = ManagedRange(*ctx, dptr, 1);
    if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (length != 0 && (dptr != a->base || length != a->size)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute,
                                                      CUdeviceptr ptr) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
    PointerInfo info;
    if (!DescribePointer(ptr, &info)) return CUDA_ERROR_INVALID_VALUE;
    return PointerAttribute(data, attribute, ptr, info);
  });
}

// As cuPointerGetAttribute for each attribute, but memory softgpu does not know is not an error:
// its attributes read as null, zero or CU_DEVICE_INVALID (cuda.h). An attribute a known pointer
// lacks (a device pointer of registered memory...) reads the same way.
SOFTGPU_EXPORT CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes,
                                                       CUpointer_attribute* attributes, void** data,
                                                       CUdeviceptr ptr) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (numAttributes == 0 || attributes == nullptr || data == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    PointerInfo info;
    const bool known = DescribePointer(ptr, &info);
    for (unsigned i = 0; i < numAttributes; ++i) {
      if (data[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
      const CUresult r =
          known ? PointerAttribute(data[i], attributes[i], ptr, info) : CUDA_ERROR_INVALID_VALUE;
      if (r == CUDA_ERROR_INVALID_VALUE) {
        UnknownPointerAttribute(data[i], attributes[i]);
      } else if (r != CUDA_SUCCESS) {
        return r;
      }
    }
    return CUDA_SUCCESS;
  });
}
