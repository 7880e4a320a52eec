// Page-locked host memory. softgpu has no DMA engine, so "pinned" memory is ordinary host memory
// that the driver tracks; kernels cannot address it (no device mapping).
#include <cuda.h>

#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>

#include "softgpu/api_util.h"

using namespace softgpu;

namespace {

struct HostRanges {
  std::mutex mu;
  std::map<uintptr_t, std::pair<size_t, unsigned>> allocated;   // start -> (size, flags)
  std::map<uintptr_t, std::pair<size_t, unsigned>> registered;  // start -> (size, flags)
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
  return p - it->first < it->second.first ? it : map.end();
}

CUresult HostAlloc(void** pp, size_t bytesize, unsigned flags) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  if (pp == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~7u) return CUDA_ERROR_INVALID_VALUE;
  void* p = aligned_alloc(4096, (bytesize + 4095) / 4096 * 4096);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard lock(Ranges().mu);
  Ranges().allocated[reinterpret_cast<uintptr_t>(p)] = {bytesize, flags};
  *pp = p;
  return CUDA_SUCCESS;
}

}  // namespace

SOFTGPU_EXPORT CUresult CUDAAPI cuMemAllocHost(void** pp, size_t bytesize) {
  return Guard([&] { return HostAlloc(pp, bytesize, 0); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  return Guard([&] { return HostAlloc(pp, bytesize, Flags); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemFreeHost(void* p) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    HostRanges& h = Ranges();
    {
      std::lock_guard lock(h.mu);
      auto it = h.allocated.find(reinterpret_cast<uintptr_t>(p));
      if (it == h.allocated.end()) return CUDA_ERROR_INVALID_VALUE;
      h.allocated.erase(it);
    }
    free(p);
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
    *pFlags = it->second.second;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemHostRegister(void* p, size_t bytesize, unsigned int Flags) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    if (p == nullptr || bytesize == 0 || (Flags & ~0xfu)) return CUDA_ERROR_INVALID_VALUE;
    HostRanges& h = Ranges();
    std::lock_guard lock(h.mu);
    const uintptr_t start = reinterpret_cast<uintptr_t>(p);
    auto next = h.registered.lower_bound(start);
    if (next != h.registered.end() && next->first < start + bytesize) {
      return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    }
    if (Containing(h.registered, start) != h.registered.end()) {
      return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    }
    h.registered[start] = {bytesize, Flags};
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
