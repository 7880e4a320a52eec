#include "client/memory_map.h"

#include "client/client_state.h"
#include "common/log.h"

namespace rgpu::client {

bool MemoryMap::InsertDevice(uint64_t base, uint64_t size, CUctx_st* ctx) {
  MemoryRange range;
  range.base = base;
  range.size = size;
  range.type = CU_MEMORYTYPE_DEVICE;
  range.ctx = ctx;
  return Insert(range);
}

bool MemoryMap::Insert(MemoryRange range) {
  std::lock_guard<std::mutex> lock(mu_);
  if (range.ctx != nullptr && ClientState::Get().servers().size() > 1) {
    const int server = ServerSet::ServerOfContext(range.ctx);
    const uint64_t end = range.base + range.size;  // device ranges end below 2^64
    auto it = ranges_.upper_bound(range.base);
    if (it != ranges_.begin()) --it;
    for (; it != ranges_.end() && it->second.base < end; ++it) {
      const MemoryRange& other = it->second;
      if (other.base + other.size <= range.base || other.ctx == nullptr) continue;
      if (ServerSet::ServerOfContext(other.ctx) != server) {
        RGPU_LOG_WARN("device memory at 0x%llx of server %d overlaps memory of server %d",
                      (unsigned long long)range.base, server,
                      ServerSet::ServerOfContext(other.ctx));
        return false;
      }
    }
  }
  range.buffer_id = next_buffer_id_++;
  ranges_[range.base] = range;
  return true;
}

std::optional<MemoryRange> MemoryMap::Erase(uint64_t base) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ranges_.find(base);
  if (it == ranges_.end()) return std::nullopt;
  MemoryRange r = it->second;
  ranges_.erase(it);
  return r;
}

std::optional<MemoryRange> MemoryMap::Find(uint64_t address) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ranges_.upper_bound(address);
  if (it == ranges_.begin()) return std::nullopt;
  --it;
  if (address - it->second.base >= it->second.size) return std::nullopt;
  return it->second;
}

std::optional<MemoryRange> MemoryMap::SetSyncMemops(uint64_t address, bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ranges_.upper_bound(address);
  if (it == ranges_.begin()) return std::nullopt;
  --it;
  if (address - it->second.base >= it->second.size) return std::nullopt;
  it->second.sync_memops = on;
  return it->second;
}

bool MemoryMap::Overlaps(uint64_t base, uint64_t size) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ranges_.lower_bound(base);
  if (it != ranges_.end() && it->first - base < size) return true;  // one starts inside
  if (it == ranges_.begin()) return false;
  --it;  // the last one starting before `base`
  return base - it->second.base < it->second.size;
}

void MemoryMap::EraseContext(CUctx_st* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = ranges_.begin(); it != ranges_.end();) {
    it = it->second.ctx == ctx && it->second.type == CU_MEMORYTYPE_DEVICE ? ranges_.erase(it)
                                                                          : std::next(it);
  }
}

CUresult CheckDeviceRange(CUctx_st* ctx, uint64_t address, uint64_t bytes) {
  // A range may span mappings that adjoin (placed side by side in a reservation), never two
  // allocations that happen to (two pieces of one slab, client/suballocator.h).
  bool first = true;
  while (bytes > 0) {
    auto r = Memory().Find(address);
    // Registered mapped memory is reached on the device at its device address, not this one.
    if (!r || (r->type != CU_MEMORYTYPE_DEVICE && !r->managed) || r->device_shift != 0 ||
        r->ctx != ctx || (!first && !r->mapping)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const uint64_t here = r->size - (address - r->base);
    if (bytes <= here) return CUDA_SUCCESS;
    if (!r->mapping) return CUDA_ERROR_INVALID_VALUE;
    bytes -= here;
    address = r->base + r->size;
    first = false;
  }
  return CUDA_SUCCESS;
}

MemoryMap& Memory() {
  static MemoryMap* map = new MemoryMap();
  return *map;
}

}  // namespace rgpu::client
