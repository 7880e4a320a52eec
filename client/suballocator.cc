#include "client/suballocator.h"

#include <iterator>

namespace rgpu::client {

uint64_t Suballocator::Take(uint64_t bytes) {
  if (!Carves(bytes)) return 0;
  const uint64_t need = Rounded(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [base, slab] : slabs_) {
    for (auto it = slab.free.begin(); it != slab.free.end(); ++it) {
      if (it->second < need) continue;
      const uint64_t offset = it->first, size = it->second;
      slab.free.erase(it);
      if (size > need) slab.free.emplace(offset + need, size - need);
      slab.taken.emplace(offset, need);
      return base + offset;
    }
  }
  return 0;
}

void Suballocator::AddSlab(uint64_t base) {
  std::lock_guard<std::mutex> lock(mu_);
  Slab slab;
  slab.free.emplace(0, kSlabBytes);
  slabs_.emplace(base, std::move(slab));
}

bool Suballocator::Give(uint64_t address, uint64_t* emptied_slab) {
  *emptied_slab = 0;
  std::lock_guard<std::mutex> lock(mu_);
  auto s = slabs_.upper_bound(address);
  if (s == slabs_.begin()) return false;
  --s;
  Slab& slab = s->second;
  const uint64_t offset = address - s->first;
  auto piece = slab.taken.find(offset);
  if (offset >= kSlabBytes || piece == slab.taken.end()) return false;
  uint64_t start = offset, size = piece->second;
  slab.taken.erase(piece);
  // Merge with the free neighbours on both sides.
  auto next = slab.free.lower_bound(start);
  if (next != slab.free.end() && next->first == start + size) {
    size += next->second;
    next = slab.free.erase(next);
  }
  if (next != slab.free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      slab.free.erase(prev);
    }
  }
  slab.free.emplace(start, size);
  if (slab.taken.empty()) {
    *emptied_slab = s->first;
    slabs_.erase(s);
  }
  return true;
}

bool Suballocator::Find(uint64_t address, uint64_t* slab, uint64_t* piece_bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto s = slabs_.upper_bound(address);
  if (s == slabs_.begin()) return false;
  --s;
  auto piece = s->second.taken.find(address - s->first);
  if (address - s->first >= kSlabBytes || piece == s->second.taken.end()) return false;
  *slab = s->first;
  *piece_bytes = piece->second;
  return true;
}

void Suballocator::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  slabs_.clear();
}

std::vector<uint64_t> Suballocator::Slabs() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> out;
  for (const auto& [base, slab] : slabs_) out.push_back(base);
  return out;
}

}  // namespace rgpu::client
