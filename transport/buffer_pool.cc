#include "transport/buffer_pool.h"

#include <algorithm>
#include <new>

namespace rgpu {

BufferPool::~BufferPool() {
  for (auto& [capacity, data] : free_) delete[] data;
}

PayloadBuffer BufferPool::Acquire(size_t size) {
  if (size < kMinPooled) {
    return PayloadBuffer(new (std::nothrow) char[size], [](char* p) { delete[] p; });
  }
  char* data = nullptr;
  size_t capacity = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The smallest free buffer that fits.
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->first >= size && (best == free_.end() || it->first < best->first)) best = it;
    }
    if (best != free_.end()) {
      capacity = best->first;
      data = best->second;
      free_bytes_ -= capacity;
      free_.erase(best);
    }
  }
  if (data == nullptr) {
    capacity = size;
    data = new (std::nothrow) char[capacity];
    if (data == nullptr) return PayloadBuffer(nullptr, [](char*) {});
  }
  std::weak_ptr<BufferPool> pool = weak_from_this();
  return PayloadBuffer(data, [pool, capacity](char* p) {
    if (auto self = pool.lock()) {
      self->Return(p, capacity);
    } else {
      delete[] p;
    }
  });
}

void BufferPool::Return(char* data, size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.size() < max_buffers_ && free_bytes_ + capacity <= max_bytes_) {
    free_.emplace_back(capacity, data);
    free_bytes_ += capacity;
    return;
  }
  // Full: drop the smallest kept buffer if this one is larger, else this one.
  auto smallest = std::min_element(free_.begin(), free_.end());
  if (smallest != free_.end() && smallest->first < capacity &&
      free_bytes_ - smallest->first + capacity <= max_bytes_) {
    free_bytes_ -= smallest->first;
    delete[] smallest->second;
    *smallest = {capacity, data};
    free_bytes_ += capacity;
    return;
  }
  delete[] data;
}

}  // namespace rgpu
