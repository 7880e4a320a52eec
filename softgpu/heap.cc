#include "softgpu/heap.h"

namespace softgpu {

bool DeviceHeap::SetSize(uint64_t bytes) {
  std::lock_guard lock(mu_);
  if (base_ != 0) return false;
  size_ = bytes;
  return true;
}

uint64_t DeviceHeap::size() const {
  std::lock_guard lock(mu_);
  return size_;
}

uint64_t DeviceHeap::Allocate(uint64_t size) {
  if (size == 0) size = 1;
  if (size > (1ull << 40)) return 0;
  size = (size + 15) / 16 * 16;
  std::lock_guard lock(mu_);
  if (base_ == 0) {
    if (size_ == 0) return 0;
    uint64_t address;
    if (memory_->Allocate(size_, &address) != AddressSpace::Result::kOk) return 0;
    base_ = address;
    free_[0] = size_ / 16 * 16;
  }
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const uint64_t offset = it->first;
    const uint64_t rest = it->second - size;
    free_.erase(it);
    if (rest != 0) free_[offset + size] = rest;
    used_[offset] = size;
    return base_ + offset;
  }
  return 0;
}

void DeviceHeap::Free(uint64_t address) {
  std::lock_guard lock(mu_);
  if (base_ == 0 || address < base_) return;
  const uint64_t offset = address - base_;
  auto used = used_.find(offset);
  if (used == used_.end()) return;
  uint64_t start = offset, size = used->second;
  used_.erase(used);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = size;
}

void DeviceHeap::Reset() {
  std::lock_guard lock(mu_);
  base_ = 0;
  free_.clear();
  used_.clear();
}

}  // namespace softgpu
