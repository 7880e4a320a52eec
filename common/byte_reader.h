// Reading fixed-layout binary formats (ELF, fat binaries, code objects) without trusting them:
// little-endian values at any alignment, and range checks that cannot overflow. Header-only.
#pragma once

#include <cstdint>
#include <cstring>

namespace rgpu::bytes {

// The little-endian T at `p` (any alignment; the host is little-endian, as every CUDA host is).
template <typename T>
T ReadLe(const uint8_t* p) {
  T v;
  memcpy(&v, p, sizeof v);
  return v;
}

// True when [offset, offset + size) lies within `limit` bytes, without overflowing.
inline bool Within(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

}  // namespace rgpu::bytes
