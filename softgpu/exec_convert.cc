// Moves, packing, conversions (cvt) and special-register reads.
// Built with -frounding-math: conversions switch the rounding mode for .rz/.rm/.rp.
#include <cfenv>
#include <chrono>
#include <cmath>
#include <limits>
#include <type_traits>
#include <x86intrin.h>

#include "softgpu/exec.h"
#include "softgpu/half.h"
#include "softgpu/handlers.h"

namespace softgpu {
namespace {

using ptx::Type;

struct Bf16 {
  uint16_t bits;
};

void Mov(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  if (mask == kFullMask) {
    memcpy(d, a, sizeof(uint64_t) * kWarpSize);
    return;
  }
  ForLanes(mask, [&](uint32_t l) { d[l] = a[l]; });
}

template <uint32_t kPartBits, uint32_t kCount>
void Pack(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* p[kCount];
  for (uint32_t i = 0; i < kCount; ++i) p[i] = w.R(in.a[1 + i]);
  constexpr uint64_t kPartMask = kPartBits == 64 ? ~0ull : ((1ull << kPartBits) - 1);
  ForLanes(mask, [&](uint32_t l) {
    uint64_t v = 0;
    for (uint32_t i = 0; i < kCount; ++i) v |= (p[i][l] & kPartMask) << (kPartBits * i);
    d[l] = v;
  });
}

template <uint32_t kPartBits, uint32_t kCount>
void Unpack(Warp& w, const Insn& in, uint32_t mask) {
  const uint64_t* s = w.R(in.a[5]);
  uint64_t src[kWarpSize];
  ForLanes(mask, [&](uint32_t l) { src[l] = s[l]; });  // a destination may alias the source
  constexpr uint64_t kPartMask = kPartBits == 64 ? ~0ull : ((1ull << kPartBits) - 1);
  for (uint32_t i = 0; i < kCount; ++i) {
    if (in.a[i] == kNoOperand) continue;
    uint64_t* d = w.R(in.a[i]);
    ForLanes(mask, [&](uint32_t l) { d[l] = (src[l] >> (kPartBits * i)) & kPartMask; });
  }
}

class RoundingScope {
 public:
  explicit RoundingScope(uint8_t rounding) {
    if (rounding == kRoundNearest) return;
    saved_ = fegetround();
    static const int kModes[] = {FE_TONEAREST, FE_TOWARDZERO, FE_DOWNWARD, FE_UPWARD};
    fesetround(kModes[rounding & 3]);
    active_ = true;
  }
  ~RoundingScope() {
    if (active_) fesetround(saved_);
  }

 private:
  int saved_ = 0;
  bool active_ = false;
};

template <typename T>
constexpr bool kIsFloat =
    std::is_floating_point_v<T> || std::is_same_v<T, _Float16> || std::is_same_v<T, Bf16>;

template <typename S>
S LoadSrc(uint64_t slot) {
  if constexpr (std::is_same_v<S, Bf16>) {
    return Bf16{static_cast<uint16_t>(slot)};
  } else {
    return Get<S>(slot);
  }
}

template <typename S>
double ToDouble(S v) {
  if constexpr (std::is_same_v<S, Bf16>) {
    return Bf16ToFloat(v.bits);
  } else {
    return static_cast<double>(v);
  }
}

double RoundIntegral(double v, uint8_t rounding) {
  switch (rounding) {
    case kRoundZero:
      return std::trunc(v);
    case kRoundDown:
      return std::floor(v);
    case kRoundUp:
      return std::ceil(v);
    default:
      return std::nearbyint(v);  // ties to even under the default mode
  }
}

template <typename D>
D SaturateFromDouble(double v) {
  if (std::isnan(v)) return D(0);
  constexpr double lo = static_cast<double>(std::numeric_limits<D>::min());
  // 2^bits (unsigned) or 2^(bits-1) (signed): the first value past the range, exact in double.
  constexpr double hi_excl = static_cast<double>(
      static_cast<unsigned __int128>(1) << (sizeof(D) * 8 - (std::is_signed_v<D> ? 1 : 0)));
  if (v <= lo) return std::numeric_limits<D>::min();
  if (v >= hi_excl) return std::numeric_limits<D>::max();
  return static_cast<D>(v);
}

template <typename D>
D SaturateFromInt(__int128 v) {
  if (v < static_cast<__int128>(std::numeric_limits<D>::min()))
    return std::numeric_limits<D>::min();
  if (v > static_cast<__int128>(std::numeric_limits<D>::max()))
    return std::numeric_limits<D>::max();
  return static_cast<D>(v);
}

template <typename T>
T FlushSubnormal(T v) {
  return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(T(0), v) : v;
}

// Integer results are extended to the register: signed types sign-extend (a cvt.s8 into a
// 32-bit register reads back as a negative 32-bit value), unsigned ones zero-extend.
template <typename D>
uint64_t PutInt(D v) {
  if constexpr (std::is_signed_v<D>) {
    return static_cast<uint64_t>(static_cast<int64_t>(v));
  } else {
    return static_cast<uint64_t>(v);
  }
}

template <typename D, typename S>
uint64_t Convert(uint64_t slot, const FloatMode& m, bool integer_rounding) {
  const S s = LoadSrc<S>(slot);
  if constexpr (!kIsFloat<D>) {
    if constexpr (kIsFloat<S>) {
      double v = ToDouble(s);
      v = RoundIntegral(v, m.rounding);
      return PutInt(SaturateFromDouble<D>(v));
    } else {
      if (m.sat) return PutInt(SaturateFromInt<D>(static_cast<__int128>(s)));
      return PutInt(static_cast<D>(s));
    }
  } else {
    // Float destination.
    if constexpr (kIsFloat<S>) {
      if (integer_rounding) {
        double v = RoundIntegral(ToDouble(s), m.rounding);
        if constexpr (std::is_same_v<D, Bf16>) {
          return FloatToBf16(static_cast<float>(v), 0);
        } else {
          D r = static_cast<D>(v);
          if constexpr (std::is_same_v<D, float>) {
            if (m.ftz) r = FlushSubnormal(r);
          }
          return Put(r);
        }
      }
    }
    if constexpr (std::is_same_v<D, Bf16>) {
      float f;
      if constexpr (std::is_same_v<S, Bf16>) {
        return s.bits;
      } else if constexpr (std::is_same_v<S, double>) {
        f = static_cast<float>(s);  // (double rounding: rare and within bf16 precision)
      } else {
        f = static_cast<float>(ToDouble(s));
      }
      if (m.sat) f = std::isnan(f) ? 0.f : std::fmin(std::fmax(f, 0.f), 1.f);
      if (m.relu && !std::isnan(f)) f = std::fmax(f, 0.f);
      return FloatToBf16(f, m.rounding);
    } else {
      D r;
      if constexpr (std::is_same_v<S, Bf16>) {
        r = static_cast<D>(Bf16ToFloat(s.bits));
      } else {
        S x = s;
        if constexpr (std::is_same_v<S, float>) {
          if (m.ftz) x = FlushSubnormal(x);
        }
        r = static_cast<D>(x);
      }
      if constexpr (std::is_same_v<D, float>) {
        if (m.ftz) r = FlushSubnormal(r);
      }
      if (m.sat)
        r = std::isnan(static_cast<double>(r)) ? D(0) : (r < D(0) ? D(0) : (r > D(1) ? D(1) : r));
      if (m.relu && !std::isnan(static_cast<double>(r)) && r < D(0)) r = D(0);
      return Put(r);
    }
  }
}

template <typename D, typename S>
void Cvt(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const FloatMode m{static_cast<uint8_t>(in.aux & 3), (in.aux & 4) != 0, (in.aux & 8) != 0,
                    (in.aux & 16) != 0};
  const bool integer_rounding = in.aux2 != 0;
  // Rounding to integers is done explicitly; the mode applies to float results only.
  RoundingScope rounding(kIsFloat<D> && !integer_rounding ? m.rounding
                                                          : static_cast<uint8_t>(kRoundNearest));
  ForLanes(mask, [&](uint32_t l) { d[l] = Convert<D, S>(a[l], m, integer_rounding); });
}

template <typename D>
Handler CvtFrom(Type src) {
  switch (src) {
    case Type::kU8:
    case Type::kB8:
      return &Cvt<D, uint8_t>;
    case Type::kS8:
      return &Cvt<D, int8_t>;
    case Type::kU16:
    case Type::kB16:
      return &Cvt<D, uint16_t>;
    case Type::kS16:
      return &Cvt<D, int16_t>;
    case Type::kU32:
    case Type::kB32:
      return &Cvt<D, uint32_t>;
    case Type::kS32:
      return &Cvt<D, int32_t>;
    case Type::kU64:
    case Type::kB64:
      return &Cvt<D, uint64_t>;
    case Type::kS64:
      return &Cvt<D, int64_t>;
    case Type::kF16:
      return &Cvt<D, _Float16>;
    case Type::kBF16:
      return &Cvt<D, Bf16>;
    case Type::kF32:
      return &Cvt<D, float>;
    case Type::kF64:
      return &Cvt<D, double>;
    default:
      return nullptr;
  }
}

template <bool kBf16>
void CvtPack(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  const uint8_t rounding = static_cast<uint8_t>(in.aux & 3);
  const bool relu = (in.aux & 16) != 0;
  RoundingScope scope(kBf16 ? static_cast<uint8_t>(kRoundNearest) : rounding);
  auto one = [&](float f) -> uint32_t {
    if (relu && !std::isnan(f)) f = std::fmax(f, 0.f);
    return kBf16 ? FloatToBf16(f, rounding) : FloatToHalf(f);
  };
  ForLanes(mask, [&](uint32_t l) { d[l] = (one(Get<float>(a[l])) << 16) | one(Get<float>(b[l])); });
}

uint64_t NowNanoseconds() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

template <Special kReg>
void ReadSpecial(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const Block& b = *w.block;
  uint64_t uniform = 0;
  switch (kReg) {
    case Special::kNtidX:
      uniform = b.ntid[0];
      break;
    case Special::kNtidY:
      uniform = b.ntid[1];
      break;
    case Special::kNtidZ:
      uniform = b.ntid[2];
      break;
    case Special::kCtaidX:
      uniform = b.ctaid[0];
      break;
    case Special::kCtaidY:
      uniform = b.ctaid[1];
      break;
    case Special::kCtaidZ:
      uniform = b.ctaid[2];
      break;
    case Special::kNctaidX:
      uniform = b.nctaid[0];
      break;
    case Special::kNctaidY:
      uniform = b.nctaid[1];
      break;
    case Special::kNctaidZ:
      uniform = b.nctaid[2];
      break;
    case Special::kWarpId:
      uniform = w.index;
      break;
    case Special::kNWarpId:
      uniform = 64;
      break;
    case Special::kSmId: {
      const uint64_t linear =
          (static_cast<uint64_t>(b.ctaid[2]) * b.nctaid[1] + b.ctaid[1]) * b.nctaid[0] + b.ctaid[0];
      uniform = linear % b.sm_count;
      break;
    }
    case Special::kNSmId:
      uniform = b.sm_count;
      break;
    case Special::kGridId:
      uniform = 1;
      break;
    case Special::kClock:
      uniform = static_cast<uint32_t>(__rdtsc());
      break;
    case Special::kClock64:
      uniform = __rdtsc();
      break;
    case Special::kGlobalTimer:
      uniform = NowNanoseconds();
      break;
    case Special::kGlobalTimerLo:
      uniform = static_cast<uint32_t>(NowNanoseconds());
      break;
    case Special::kGlobalTimerHi:
      uniform = NowNanoseconds() >> 32;
      break;
    case Special::kDynamicSmemSize:
      uniform = b.dynamic_shared_size;
      break;
    case Special::kTotalSmemSize:
      uniform = b.shared_size;
      break;
    case Special::kEnvReg1:
      uniform = b.grid_workspace >> 32;
      break;
    case Special::kClusterIdX:
    case Special::kClusterIdY:
    case Special::kClusterIdZ: {
      const int i = static_cast<int>(kReg) - static_cast<int>(Special::kClusterIdX);
      uniform = b.ctaid[i] / b.cluster->dims[i];
      break;
    }
    case Special::kNClusterIdX:
    case Special::kNClusterIdY:
    case Special::kNClusterIdZ: {
      const int i = static_cast<int>(kReg) - static_cast<int>(Special::kNClusterIdX);
      uniform = b.nctaid[i] / b.cluster->dims[i];
      break;
    }
    case Special::kClusterCtaidX:
    case Special::kClusterCtaidY:
    case Special::kClusterCtaidZ: {
      const int i = static_cast<int>(kReg) - static_cast<int>(Special::kClusterCtaidX);
      uniform = b.ctaid[i] % b.cluster->dims[i];
      break;
    }
    case Special::kClusterNctaidX:
    case Special::kClusterNctaidY:
    case Special::kClusterNctaidZ:
      uniform =
          b.cluster->dims[static_cast<int>(kReg) - static_cast<int>(Special::kClusterNctaidX)];
      break;
    case Special::kClusterCtarank:
      uniform = b.cluster_rank;
      break;
    case Special::kClusterNctarank:
      uniform = b.cluster->size;
      break;
    case Special::kIsExplicitCluster:
      uniform = b.cluster->explicit_launch ? 1 : 0;
      break;
    case Special::kEnvReg2:
      uniform = static_cast<uint32_t>(b.grid_workspace);
      break;
    default:
      break;
  }
  ForLanes(mask, [&](uint32_t l) {
    uint32_t tid[3];
    switch (kReg) {
      case Special::kTidX:
        w.Tid(l, tid);
        d[l] = tid[0];
        break;
      case Special::kTidY:
        w.Tid(l, tid);
        d[l] = tid[1];
        break;
      case Special::kTidZ:
        w.Tid(l, tid);
        d[l] = tid[2];
        break;
      case Special::kLaneId:
        d[l] = l;
        break;
      case Special::kLanemaskEq:
        d[l] = 1u << l;
        break;
      case Special::kLanemaskLe:
        d[l] = static_cast<uint32_t>((2ull << l) - 1);
        break;
      case Special::kLanemaskLt:
        d[l] = (1u << l) - 1;
        break;
      case Special::kLanemaskGe:
        d[l] = ~((1u << l) - 1);
        break;
      case Special::kLanemaskGt:
        d[l] = static_cast<uint32_t>(~((2ull << l) - 1));
        break;
      default:
        d[l] = uniform;
        break;
    }
  });
}

void LocalAddress(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t v = w.local_base + static_cast<uint64_t>(in.imm);
  ForLanes(mask, [&](uint32_t l) { d[l] = v; });
}

}  // namespace

Handler MovHandler() { return &Mov; }

Handler PackHandler(uint32_t part_size, uint32_t count) {
  if (part_size == 1 && count == 2) return &Pack<8, 2>;
  if (part_size == 1 && count == 4) return &Pack<8, 4>;
  if (part_size == 2 && count == 2) return &Pack<16, 2>;
  if (part_size == 2 && count == 4) return &Pack<16, 4>;
  if (part_size == 4 && count == 2) return &Pack<32, 2>;
  return nullptr;
}

Handler UnpackHandler(uint32_t part_size, uint32_t count) {
  if (part_size == 1 && count == 2) return &Unpack<8, 2>;
  if (part_size == 1 && count == 4) return &Unpack<8, 4>;
  if (part_size == 2 && count == 2) return &Unpack<16, 2>;
  if (part_size == 2 && count == 4) return &Unpack<16, 4>;
  if (part_size == 4 && count == 2) return &Unpack<32, 2>;
  return nullptr;
}

Handler CvtHandler(Type dst, Type src, FloatMode mode, bool integer_rounding) {
  (void)mode;
  (void)integer_rounding;
  switch (dst) {
    case Type::kU8:
    case Type::kB8:
      return CvtFrom<uint8_t>(src);
    case Type::kS8:
      return CvtFrom<int8_t>(src);
    case Type::kU16:
    case Type::kB16:
      return CvtFrom<uint16_t>(src);
    case Type::kS16:
      return CvtFrom<int16_t>(src);
    case Type::kU32:
    case Type::kB32:
      return CvtFrom<uint32_t>(src);
    case Type::kS32:
      return CvtFrom<int32_t>(src);
    case Type::kU64:
    case Type::kB64:
      return CvtFrom<uint64_t>(src);
    case Type::kS64:
      return CvtFrom<int64_t>(src);
    case Type::kF16:
      return CvtFrom<_Float16>(src);
    case Type::kBF16:
      return CvtFrom<Bf16>(src);
    case Type::kF32:
      return CvtFrom<float>(src);
    case Type::kF64:
      return CvtFrom<double>(src);
    default:
      return nullptr;
  }
}

Handler CvtPackHandler(Type dst, FloatMode mode) {
  (void)mode;
  if (dst == Type::kF16x2) return &CvtPack<false>;
  if (dst == Type::kBF16x2) return &CvtPack<true>;
  return nullptr;
}

Handler SpecialHandler(Special reg) {
  switch (reg) {
#define SOFTGPU_CASE(X) \
  case Special::X:      \
    return &ReadSpecial<Special::X>;
    // clang-format off
    SOFTGPU_CASE(kTidX)
    SOFTGPU_CASE(kTidY)
    SOFTGPU_CASE(kTidZ)
    SOFTGPU_CASE(kNtidX)
    SOFTGPU_CASE(kNtidY)
    SOFTGPU_CASE(kNtidZ)
    SOFTGPU_CASE(kCtaidX)
    SOFTGPU_CASE(kCtaidY)
    SOFTGPU_CASE(kCtaidZ)
    SOFTGPU_CASE(kNctaidX)
    SOFTGPU_CASE(kNctaidY)
    SOFTGPU_CASE(kNctaidZ)
    SOFTGPU_CASE(kLaneId)
    SOFTGPU_CASE(kWarpId)
    SOFTGPU_CASE(kNWarpId)
    SOFTGPU_CASE(kSmId)
    SOFTGPU_CASE(kNSmId)
    SOFTGPU_CASE(kGridId)
    SOFTGPU_CASE(kLanemaskEq)
    SOFTGPU_CASE(kLanemaskLe)
    SOFTGPU_CASE(kLanemaskLt)
    SOFTGPU_CASE(kLanemaskGe)
    SOFTGPU_CASE(kLanemaskGt)
    SOFTGPU_CASE(kClock)
    SOFTGPU_CASE(kClock64)
    SOFTGPU_CASE(kGlobalTimer)
    SOFTGPU_CASE(kGlobalTimerLo)
    SOFTGPU_CASE(kGlobalTimerHi)
    SOFTGPU_CASE(kDynamicSmemSize)
    SOFTGPU_CASE(kTotalSmemSize)
    SOFTGPU_CASE(kEnvReg1)
    SOFTGPU_CASE(kEnvReg2)
    SOFTGPU_CASE(kZero)
    SOFTGPU_CASE(kClusterIdX)
    SOFTGPU_CASE(kClusterIdY)
    SOFTGPU_CASE(kClusterIdZ)
    SOFTGPU_CASE(kNClusterIdX)
    SOFTGPU_CASE(kNClusterIdY)
    SOFTGPU_CASE(kNClusterIdZ)
    SOFTGPU_CASE(kClusterCtaidX)
    SOFTGPU_CASE(kClusterCtaidY)
    SOFTGPU_CASE(kClusterCtaidZ)
    SOFTGPU_CASE(kClusterNctaidX)
    SOFTGPU_CASE(kClusterNctaidY)
    SOFTGPU_CASE(kClusterNctaidZ)
    SOFTGPU_CASE(kClusterCtarank)
    SOFTGPU_CASE(kClusterNctarank)
    SOFTGPU_CASE(kIsExplicitCluster)
    // clang-format on
#undef SOFTGPU_CASE
  }
  return nullptr;
}

Handler LocalAddressHandler() { return &LocalAddress; }

}  // namespace softgpu
