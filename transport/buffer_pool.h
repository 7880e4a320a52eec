// BufferPool: large payload buffers kept for reuse. Receiving a large message into freshly
// mapped memory costs a page fault per page (measured: a 64 MiB message over loopback TCP takes
// ~500 ms into new memory, ~55 ms into reused memory), so channels recycle them.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace rgpu {

// A payload buffer; its deleter returns it to the pool it came from (if the pool keeps it).
using PayloadBuffer = std::unique_ptr<char[], std::function<void(char*)>>;

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Buffers smaller than this are not pooled.
  static constexpr size_t kMinPooled = 64 * 1024;

  // Keeps at most `max_buffers` free buffers totalling at most `max_bytes`.
  BufferPool(size_t max_buffers, size_t max_bytes)
      : max_buffers_(max_buffers), max_bytes_(max_bytes) {}
  ~BufferPool();

  // A buffer of at least `size` bytes (contents undefined), or an empty one when memory for it
  // cannot be had. Thread-safe.
  PayloadBuffer Acquire(size_t size);

 private:
  void Return(char* data, size_t capacity);

  const size_t max_buffers_;
  const size_t max_bytes_;
  std::mutex mu_;
  std::vector<std::pair<size_t, char*>> free_;  // (capacity, data)
  size_t free_bytes_ = 0;
};

}  // namespace rgpu
