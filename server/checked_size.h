// Size arithmetic on tenant input. Every product and sum a handler derives from a call's
// arguments goes through these, so that a wrapped value never reaches an ownership check, a
// buffer or the backend: each returns false, computing nothing, when the exact result does not
// fit in 64 bits.
#pragma once

#include <cstdint>

namespace rgpu::server {

// *out = a * b.
inline bool CheckedMul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

// *out = a + b.
inline bool CheckedAdd(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

// The bytes spanned by `height` rows of `width` bytes whose starts are `pitch` apart,
// pitch * (height - 1) + width, and the bytes the rows hold, width * height. False when the shape
// is not one (no width or height, or rows that overlap: pitch < width) or a figure overflows.
inline bool PitchedShape(uint64_t pitch, uint64_t width, uint64_t height, uint64_t* extent,
                         uint64_t* packed) {
  uint64_t rows_before_last = 0;
  return width != 0 && height != 0 && pitch >= width &&
         CheckedMul(pitch, height - 1, &rows_before_last) &&
         CheckedAdd(rows_before_last, width, extent) && CheckedMul(width, height, packed);
}

}  // namespace rgpu::server
