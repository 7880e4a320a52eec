// Page-locked host memory. softgpu has no DMA engine, so "pinned" memory is ordinary host memory
// that the driver tracks. Allocated page-locked memory (cuMemHostAlloc, cuMemAllocHost) is native:
// mapped at a fresh device address that is also its host address, in the process-wide
// HostMappings, so the kernels and copies of every context reach it at that pointer (CUDA's
// unified addressing, under which every cuMemHostAlloc allocation is mapped; cuMemHostAlloc's
// CU_MEMHOSTALLOC_DEVICEMAP only makes cuMemHostGetDevicePointer's answer official). Registered
// memory (cuMemHostRegister) stays where the program has it; kernels cannot reach it.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <vector>

#include "softgpu/api_util.h"

using namespace softgpu;

namespace {

struct HostRange {
  size_t size = 0;
  unsigned flags = 0;
  CUcontext context = nullptr;  // the context current at the allocation or registration
  int device = 0;
  std::shared_ptr<Allocation> mapping;  // allocated memory: its native mapping
};

struct HostRanges {
  std::mutex mu;
  std::map<uintptr_t, HostRange> allocated;   // by start
  std::map<uintptr_t, HostRange> registered;  // by start
};

HostRanges& Ranges() {
  static auto* ranges = new HostRanges();
  return *ranges;
}

// The range of `map` containing p, or end().
template <typename Map>
typename Map::iterator Containing(Map& map, uintptr_t p) {
  auto it = map.upper_bound(p);
  if (it == map.begin()) return map.end();
  --it;
  return p - it->first < it->second.size ? it : map.end();
}

// Whether any range of `map` overlaps [start, start + size).
template <typename Map>
bool Overlaps(Map& map, uintptr_t start, size_t size) {
  auto next = map.lower_bound(start);
  if (next != map.end() && next->first - start < size) return true;
  return Containing(map, start) != map.end();
}

CUresult HostAlloc(void** pp, size_t bytesize, unsigned flags) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  if (pp == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~7u) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Allocation> a = MapNative(bytesize);
  if (a == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  a->kind = AllocationKind::kHostMapped;
  HostRange range;
  range.size = bytesize;
  range.flags = flags;
  range.context = reinterpret_cast<CUcontext>(ctx.get());
  range.device = ctx->device()->ordinal();
  range.mapping = a;
  GlobalHostMappings().Insert(a);
  std::lock_guard lock(Ranges().mu);
  Ranges().allocated[a->base] = std::move(range);
  *pp = a->host;
  return CUDA_SUCCESS;
}

}  // namespace

namespace softgpu {

bool FindPageLocked(uint64_t address, PageLockedRange* out) {
  HostRanges& h = Ranges();
  std::lock_guard lock(h.mu);
  for (auto* map : {&h.allocated, &h.registered}) {
    auto it = Containing(*map, address);
    if (it == map->end()) continue;
    out->base = it->first;
    out->size = it->second.size;
    out->flags = it->second.flags;
    out->context = it->second.context;
    out->device = it->second.device;
    out->mapped = it->second.mapping != nullptr;
    return true;
  }
  return false;
}

void ReleasePageLockedOf(CUcontext context) {
  std::vector<std::shared_ptr<Allocation>> mappings;  // unmapped after the lock
  {
    HostRanges& h = Ranges();
    std::lock_guard lock(h.mu);
    for (auto it = h.allocated.begin(); it != h.allocated.end();) {
      if (it->second.context != context) {
        ++it;
        continue;
      }
      mappings.push_back(std::move(it->second.mapping));
      it = h.allocated.erase(it);
    }
    std::erase_if(h.registered, [context](const auto& r) { return r.second.context == context; });
  }
  for (const auto& mapping : mappings) GlobalHostMappings().Remove(mapping->base);
}

}  // namespace softgpu

SOFTGPU_EXPORT CUresult CUDAAPI cuMemAllocHost(void** pp, size_t bytesize) {
  return Guard([&] { return HostAlloc(pp, bytesize, 0); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  return Guard([&] { return HostAlloc(pp, bytesize, Flags); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemFreeHost(void* p) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Allocation> mapping;  // unmapped after the lock, once kernels let go of it
    {
      HostRanges& h = Ranges();
      std::lock_guard lock(h.mu);
      auto it = h.allocated.find(reinterpret_cast<uintptr_t>(p));
      if (it == h.allocated.end()) return CUDA_ERROR_INVALID_VALUE;
      mapping = std::move(it->second.mapping);
      h.allocated.erase(it);
    }
    GlobalHostMappings().Remove(mapping->base);
    return CUDA_SUCCESS;
  });
}

// The device address of page-locked memory: the same pointer (unified addressing), for every
// allocated range whatever its flags; registered memory is not reachable by kernels.
SOFTGPU_EXPORT CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr* pdptr, void* p,
                                                          unsigned int Flags) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = CurrentContext(&ctx); r != CUDA_SUCCESS) return r;
    if (pdptr == nullptr || p == nullptr || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
    PageLockedRange range;
    if (!FindPageLocked(reinterpret_cast<uint64_t>(p), &range)) return CUDA_ERROR_INVALID_VALUE;
    if (!range.mapped) {
      if ((range.flags & CU_MEMHOSTREGISTER_DEVICEMAP) == 0) return CUDA_ERROR_INVALID_VALUE;
      fprintf(stderr,
              "softgpu: cuMemHostGetDevicePointer: registered host memory cannot be mapped for "
              "kernels (only cuMemHostAlloc/cuMemAllocHost memory is)\n");
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    *pdptr = reinterpret_cast<CUdeviceptr>(p);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemHostGetFlags(unsigned int* pFlags, void* p) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (pFlags == nullptr) return CUDA_ERROR_INVALID_VALUE;
    HostRanges& h = Ranges();
    std::lock_guard lock(h.mu);
    auto it = Containing(h.allocated, reinterpret_cast<uintptr_t>(p));
    if (it == h.allocated.end()) return CUDA_ERROR_INVALID_VALUE;
    *pFlags = it->second.flags;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemHostRegister(void* p, size_t bytesize, unsigned int Flags) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    if (p == nullptr || bytesize == 0 || (Flags & ~0xfu)) return CUDA_ERROR_INVALID_VALUE;
    const uintptr_t start = reinterpret_cast<uintptr_t>(p);
    if (start + bytesize < start) return CUDA_ERROR_INVALID_VALUE;
    HostRanges& h = Ranges();
    std::lock_guard lock(h.mu);
    if (Overlaps(h.registered, start, bytesize) || Overlaps(h.allocated, start, bytesize)) {
      return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    }
    HostRange range;
    range.size = bytesize;
    range.flags = Flags;
    range.context = reinterpret_cast<CUcontext>(ctx.get());
    range.device = ctx->device()->ordinal();
    h.registered[start] = std::move(range);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemHostUnregister(void* p) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    HostRanges& h = Ranges();
    std::lock_guard lock(h.mu);
    auto it = h.registered.find(reinterpret_cast<uintptr_t>(p));
    if (it == h.registered.end()) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    h.registered.erase(it);
    return CUDA_SUCCESS;
  });
}
