// A counter for lock tests: bumped by a separate load and store (no read-modify-write
// instruction), so increments made by two threads inside a lock at once are lost and the final
// count shows whether the lock kept them apart.
#pragma once

#include <atomic>
#include <cstdint>

namespace rgpu::testing {

struct OverlapCounter {
  std::atomic<uint64_t> value{0};
  void Bump() {
    const uint64_t v = value.load(std::memory_order_relaxed);
    for (volatile int spin = 0; spin < 20; spin = spin + 1) {
    }
    value.store(v + 1, std::memory_order_relaxed);
  }
};

}  // namespace rgpu::testing
