// Floating-point handlers for f32, f64, f16, bf16 and the packed f16x2/bf16x2 forms.
// Built with -frounding-math: handlers switch the rounding mode for .rz/.rm/.rp.
#include <cfenv>
#include <cmath>
#include <limits>

#include "softgpu/exec.h"
#include "softgpu/half.h"
#include "softgpu/handlers.h"

namespace softgpu {
namespace {

using ptx::Type;

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

// Storage formats: how a slot holds one or two values and what type computes them.
struct F32 {
  using C = float;
  static constexpr int kParts = 1;
  static C Load(uint64_t s, int) { return Get<float>(s); }
  static uint64_t Store(C v, int) { return Put(v); }
};
struct F64 {
  using C = double;
  static constexpr int kParts = 1;
  static C Load(uint64_t s, int) { return Get<double>(s); }
  static uint64_t Store(C v, int) { return Put(v); }
};
template <int kN>
struct F16N {
  using C = float;
  static constexpr int kParts = kN;
  static C Load(uint64_t s, int p) { return HalfToFloat(static_cast<uint16_t>(s >> (16 * p))); }
  static uint64_t Store(C v, int p) { return static_cast<uint64_t>(FloatToHalf(v)) << (16 * p); }
};
template <int kN>
struct BF16N {
  using C = float;
  static constexpr int kParts = kN;
  static C Load(uint64_t s, int p) { return Bf16ToFloat(static_cast<uint16_t>(s >> (16 * p))); }
  static uint64_t Store(C v, int p) { return static_cast<uint64_t>(FloatToBf16(v, 0)) << (16 * p); }
};

template <typename C>
C Ftz(C v) {
  return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(C(0), v) : v;
}

template <typename C>
C Finish(C v, const FloatMode& m) {
  if (m.ftz) v = Ftz(v);
  if (m.sat) v = std::isnan(v) ? C(0) : std::fmin(std::fmax(v, C(0)), C(1));
  if (m.relu) v = std::isnan(v) ? v : std::fmax(v, C(0));
  return v;
}

struct AddOp {
  template <typename C>
  static C F(C a, C b) {
    return a + b;
  }
};
struct SubOp {
  template <typename C>
  static C F(C a, C b) {
    return a - b;
  }
};
struct MulOp {
  template <typename C>
  static C F(C a, C b) {
    return a * b;
  }
};
struct DivOp {
  template <typename C>
  static C F(C a, C b) {
    return a / b;
  }
};
struct MinOp {
  template <typename C>
  static C F(C a, C b) {
    return std::fmin(a, b);
  }
};
struct MaxOp {
  template <typename C>
  static C F(C a, C b) {
    return std::fmax(a, b);
  }
};
struct MinNaNOp {
  template <typename C>
  static C F(C a, C b) {
    return std::isnan(a) || std::isnan(b) ? std::numeric_limits<C>::quiet_NaN() : std::fmin(a, b);
  }
};
struct MaxNaNOp {
  template <typename C>
  static C F(C a, C b) {
    return std::isnan(a) || std::isnan(b) ? std::numeric_limits<C>::quiet_NaN() : std::fmax(a, b);
  }
};
// PTX copysign d, a, b: b's magnitude with a's sign.
struct CopysignOp {
  template <typename C>
  static C F(C a, C b) {
    return std::copysign(b, a);
  }
};
struct FmaOp {
  template <typename C>
  static C F(C a, C b, C c) {
    return std::fma(a, b, c);
  }
};
struct RcpOp {
  template <typename C>
  static C F(C a) {
    return C(1) / a;
  }
};
struct SqrtOp {
  template <typename C>
  static C F(C a) {
    return std::sqrt(a);
  }
};
struct RsqrtOp {
  template <typename C>
  static C F(C a) {
    return C(1) / std::sqrt(a);
  }
};
struct SinOp {
  template <typename C>
  static C F(C a) {
    return std::sin(a);
  }
};
struct CosOp {
  template <typename C>
  static C F(C a) {
    return std::cos(a);
  }
};
struct Lg2Op {
  template <typename C>
  static C F(C a) {
    return std::log2(a);
  }
};
struct Ex2Op {
  template <typename C>
  static C F(C a) {
    return std::exp2(a);
  }
};
struct TanhOp {
  template <typename C>
  static C F(C a) {
    return std::tanh(a);
  }
};
struct AbsOp {
  template <typename C>
  static C F(C a) {
    return std::fabs(a);
  }
};
struct NegOp {
  template <typename C>
  static C F(C a) {
    return -a;
  }
};

template <class Fmt, class Op, bool kPlain>
void Unary(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const FloatMode m{static_cast<uint8_t>(in.aux & 3), (in.aux & 4) != 0, (in.aux & 8) != 0,
                    (in.aux & 16) != 0};
  RoundingScope rounding(kPlain ? static_cast<uint8_t>(kRoundNearest) : m.rounding);
  ForLanes(mask, [&](uint32_t l) {
    uint64_t r = 0;
    for (int p = 0; p < Fmt::kParts; ++p) {
      auto x = Fmt::Load(a[l], p);
      if (!kPlain && m.ftz) x = Ftz(x);
      auto v = Op::F(x);
      if (!kPlain) v = Finish(v, m);
      r |= Fmt::Store(v, p);
    }
    d[l] = r;
  });
}

template <class Fmt, class Op, bool kPlain>
void Binary(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  const FloatMode m{static_cast<uint8_t>(in.aux & 3), (in.aux & 4) != 0, (in.aux & 8) != 0,
                    (in.aux & 16) != 0};
  RoundingScope rounding(kPlain ? static_cast<uint8_t>(kRoundNearest) : m.rounding);
  ForLanes(mask, [&](uint32_t l) {
    uint64_t r = 0;
    for (int p = 0; p < Fmt::kParts; ++p) {
      auto x = Fmt::Load(a[l], p);
      auto y = Fmt::Load(b[l], p);
      if (!kPlain && m.ftz) {
        x = Ftz(x);
        y = Ftz(y);
      }
      auto v = Op::F(x, y);
      if (!kPlain) v = Finish(v, m);
      r |= Fmt::Store(v, p);
    }
    d[l] = r;
  });
}

template <class Fmt, class Op, bool kPlain>
void Ternary(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  const uint64_t* c = w.R(in.a[3]);
  const FloatMode m{static_cast<uint8_t>(in.aux & 3), (in.aux & 4) != 0, (in.aux & 8) != 0,
                    (in.aux & 16) != 0};
  RoundingScope rounding(kPlain ? static_cast<uint8_t>(kRoundNearest) : m.rounding);
  ForLanes(mask, [&](uint32_t l) {
    uint64_t r = 0;
    for (int p = 0; p < Fmt::kParts; ++p) {
      auto x = Fmt::Load(a[l], p);
      auto y = Fmt::Load(b[l], p);
      auto z = Fmt::Load(c[l], p);
      if (!kPlain && m.ftz) {
        x = Ftz(x);
        y = Ftz(y);
        z = Ftz(z);
      }
      using C = decltype(x);
      C v;
      if constexpr (Fmt::kParts == 1 && sizeof(C) == 4 && !std::is_same_v<Fmt, F32>) {
        v = static_cast<C>(
            Op::F(static_cast<double>(x), static_cast<double>(y), static_cast<double>(z)));
      } else {
        v = Op::F(x, y, z);
      }
      if (!kPlain) v = Finish(v, m);
      r |= Fmt::Store(v, p);
    }
    d[l] = r;
  });
}

// fma without rounding-mode or ftz variants, compiled for CPUs with the FMA extension so that
// each lane is one instruction rather than a libm call. Chosen at decode time when the CPU has it.
template <typename C>
__attribute__((target("fma"))) void FmaHardware(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  const uint64_t* c = w.R(in.a[3]);
  auto one = [](uint64_t x, uint64_t y, uint64_t z) __attribute__((target("fma"))) {
    if constexpr (sizeof(C) == 4) {
      return Put(__builtin_fmaf(Get<float>(x), Get<float>(y), Get<float>(z)));
    } else {
      return Put(__builtin_fma(Get<double>(x), Get<double>(y), Get<double>(z)));
    }
  };
  if (mask == kFullMask) {
    for (uint32_t l = 0; l < kWarpSize; ++l) d[l] = one(a[l], b[l], c[l]);
  } else {
    for (uint32_t m = mask; m != 0; m &= m - 1) {
      const uint32_t l = static_cast<uint32_t>(std::countr_zero(m));
      d[l] = one(a[l], b[l], c[l]);
    }
  }
}

bool CpuHasFma() {
  static const bool has = __builtin_cpu_supports("fma");
  return has;
}

enum class Arity { k1, k2, k3 };

template <class Fmt, class Op, Arity kArity>
Handler Pick(bool plain) {
  if constexpr (kArity == Arity::k1) {
    return plain ? &Unary<Fmt, Op, true> : &Unary<Fmt, Op, false>;
  } else if constexpr (kArity == Arity::k2) {
    return plain ? &Binary<Fmt, Op, true> : &Binary<Fmt, Op, false>;
  } else {
    return plain ? &Ternary<Fmt, Op, true> : &Ternary<Fmt, Op, false>;
  }
}

template <class Op, Arity kArity>
Handler ByFormat(Type t, bool plain, bool halves) {
  switch (t) {
    case Type::kF32:
      return Pick<F32, Op, kArity>(plain);
    case Type::kF64:
      return Pick<F64, Op, kArity>(plain);
    case Type::kF16:
      return halves ? Pick<F16N<1>, Op, kArity>(plain) : nullptr;
    case Type::kF16x2:
      return halves ? Pick<F16N<2>, Op, kArity>(plain) : nullptr;
    case Type::kBF16:
      return halves ? Pick<BF16N<1>, Op, kArity>(plain) : nullptr;
    case Type::kBF16x2:
      return halves ? Pick<BF16N<2>, Op, kArity>(plain) : nullptr;
    default:
      return nullptr;
  }
}

template <int kKind, typename C>
void Testp(Warp& w, const Insn& in, uint32_t mask) {
  const uint64_t* a = w.R(in.a[0 + 1]);
  uint32_t result = 0;
  ForLanes(mask, [&](uint32_t l) {
    const C v = Get<C>(a[l]);
    bool r;
    switch (kKind) {
      case 0:
        r = std::isfinite(v);
        break;
      case 1:
        r = std::isinf(v);
        break;
      case 2:
        r = !std::isnan(v);
        break;
      case 3:
        r = std::isnan(v);
        break;
      case 4:
        r = std::isnormal(v);
        break;
      default:
        r = std::fpclassify(v) == FP_SUBNORMAL;
        break;
    }
    if (r) result |= 1u << l;
  });
  uint32_t& d = w.preds[in.a[0]];
  d = (d & ~mask) | result;
}

template <typename C>
Handler TestpFor(int kind) {
  switch (kind) {
    case 0:
      return &Testp<0, C>;
    case 1:
      return &Testp<1, C>;
    case 2:
      return &Testp<2, C>;
    case 3:
      return &Testp<3, C>;
    case 4:
      return &Testp<4, C>;
    case 5:
      return &Testp<5, C>;
    default:
      return nullptr;
  }
}

}  // namespace

Handler FloatHandler(FloatOp op, Type t, FloatMode mode) {
  const bool plain = mode.rounding == kRoundNearest && !mode.ftz && !mode.sat && !mode.relu;
  switch (op) {
    case FloatOp::kAdd:
      return ByFormat<AddOp, Arity::k2>(t, plain, true);
    case FloatOp::kSub:
      return ByFormat<SubOp, Arity::k2>(t, plain, true);
    case FloatOp::kMul:
      return ByFormat<MulOp, Arity::k2>(t, plain, true);
    case FloatOp::kFma:
      if (plain && CpuHasFma() && t == Type::kF32) return &FmaHardware<float>;
      if (plain && CpuHasFma() && t == Type::kF64) return &FmaHardware<double>;
      return ByFormat<FmaOp, Arity::k3>(t, plain, true);
    case FloatOp::kDiv:
      return ByFormat<DivOp, Arity::k2>(t, plain, false);
    case FloatOp::kRcp:
      return ByFormat<RcpOp, Arity::k1>(t, plain, false);
    case FloatOp::kSqrt:
      return ByFormat<SqrtOp, Arity::k1>(t, plain, false);
    case FloatOp::kRsqrt:
      return ByFormat<RsqrtOp, Arity::k1>(t, plain, false);
    case FloatOp::kSin:
      return ByFormat<SinOp, Arity::k1>(t, plain, false);
    case FloatOp::kCos:
      return ByFormat<CosOp, Arity::k1>(t, plain, false);
    case FloatOp::kLg2:
      return ByFormat<Lg2Op, Arity::k1>(t, plain, false);
    case FloatOp::kEx2:
      return ByFormat<Ex2Op, Arity::k1>(t, plain, true);
    case FloatOp::kTanh:
      return ByFormat<TanhOp, Arity::k1>(t, plain, true);
    case FloatOp::kAbs:
      return ByFormat<AbsOp, Arity::k1>(t, plain, true);
    case FloatOp::kNeg:
      return ByFormat<NegOp, Arity::k1>(t, plain, true);
    case FloatOp::kMin:
      return ByFormat<MinOp, Arity::k2>(t, plain, true);
    case FloatOp::kMax:
      return ByFormat<MaxOp, Arity::k2>(t, plain, true);
    case FloatOp::kMinNaN:
      return ByFormat<MinNaNOp, Arity::k2>(t, plain, true);
    case FloatOp::kMaxNaN:
      return ByFormat<MaxNaNOp, Arity::k2>(t, plain, true);
    case FloatOp::kCopysign:
      return ByFormat<CopysignOp, Arity::k2>(t, plain, false);
  }
  return nullptr;
}

Handler TestpHandler(int kind, Type t) {
  if (t == Type::kF32) return TestpFor<float>(kind);
  if (t == Type::kF64) return TestpFor<double>(kind);
  return nullptr;
}

}  // namespace softgpu
