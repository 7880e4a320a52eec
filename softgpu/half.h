// IEEE half (f16) and bfloat16 conversions, bit-exact, round-to-nearest-even by default.
#pragma once

#include <bit>
#include <cstdint>

namespace softgpu {

inline float HalfToFloat(uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }
// Honours the current floating-point rounding mode.
inline uint16_t FloatToHalf(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }
inline uint16_t DoubleToHalf(double d) { return std::bit_cast<uint16_t>(static_cast<_Float16>(d)); }

inline float Bf16ToFloat(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// rounding: 0 nearest-even, 1 toward zero, 2 down, 3 up.
inline uint16_t FloatToBf16(float f, int rounding = 0) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  const uint32_t low = u & 0xffffu;
  const bool negative = u >> 31;
  uint32_t hi = u >> 16;
  switch (rounding) {
    case 0:
      if (low > 0x8000u || (low == 0x8000u && (hi & 1))) ++hi;
      break;
    case 1:
      break;
    case 2:
      if (low != 0 && negative) ++hi;
      break;
    default:
      if (low != 0 && !negative) ++hi;
      break;
  }
  return static_cast<uint16_t>(hi);
}

}  // namespace softgpu
