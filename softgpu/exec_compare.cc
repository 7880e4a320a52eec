// Comparison, selection and predicate-logic handlers.
#include <cmath>

#include "softgpu/exec.h"
#include "softgpu/half.h"
#include "softgpu/handlers.h"

namespace softgpu {
namespace {

using ptx::Type;

// Compare operand loaders: halves compare as floats.
struct H16 {};
struct BH16 {};
template <typename T>
struct Cmp {
  using V = T;
  static V Load(uint64_t s) { return Get<T>(s); }
};
template <>
struct Cmp<H16> {
  using V = float;
  static V Load(uint64_t s) { return HalfToFloat(static_cast<uint16_t>(s)); }
};
template <>
struct Cmp<BH16> {
  using V = float;
  static V Load(uint64_t s) { return Bf16ToFloat(static_cast<uint16_t>(s)); }
};

template <CmpOp kOp, typename V>
inline bool Compare(V a, V b) {
  if constexpr (std::is_floating_point_v<V>) {
    const bool unordered = std::isnan(a) || std::isnan(b);
    switch (kOp) {
      case CmpOp::kEq:
        return !unordered && a == b;
      case CmpOp::kNe:
        return !unordered && a != b;
      case CmpOp::kLt:
      case CmpOp::kLo:
        return !unordered && a < b;
      case CmpOp::kLe:
      case CmpOp::kLs:
        return !unordered && a <= b;
      case CmpOp::kGt:
      case CmpOp::kHi:
        return !unordered && a > b;
      case CmpOp::kGe:
      case CmpOp::kHs:
        return !unordered && a >= b;
      case CmpOp::kEqu:
        return unordered || a == b;
      case CmpOp::kNeu:
        return unordered || a != b;
      case CmpOp::kLtu:
        return unordered || a < b;
      case CmpOp::kLeu:
        return unordered || a <= b;
      case CmpOp::kGtu:
        return unordered || a > b;
      case CmpOp::kGeu:
        return unordered || a >= b;
      case CmpOp::kNum:
        return !unordered;
      case CmpOp::kNan:
        return unordered;
    }
    return false;
  } else {
    using UV = std::make_unsigned_t<V>;
    switch (kOp) {
      case CmpOp::kEq:
        return a == b;
      case CmpOp::kNe:
        return a != b;
      case CmpOp::kLt:
        return a < b;
      case CmpOp::kLe:
        return a <= b;
      case CmpOp::kGt:
        return a > b;
      case CmpOp::kGe:
        return a >= b;
      case CmpOp::kLo:
        return static_cast<UV>(a) < static_cast<UV>(b);
      case CmpOp::kLs:
        return static_cast<UV>(a) <= static_cast<UV>(b);
      case CmpOp::kHi:
        return static_cast<UV>(a) > static_cast<UV>(b);
      case CmpOp::kHs:
        return static_cast<UV>(a) >= static_cast<UV>(b);
      default:
        return false;
    }
  }
}

inline uint32_t Combine(BoolOp op, uint32_t x, uint32_t c) {
  switch (op) {
    case BoolOp::kAnd:
      return x & c;
    case BoolOp::kOr:
      return x | c;
    case BoolOp::kXor:
      return x ^ c;
    default:
      return x;
  }
}

template <typename T, CmpOp kOp>
void Setp(Warp& w, const Insn& in, uint32_t mask) {
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  uint32_t r = 0;
  ForLanes(mask, [&](uint32_t l) {
    if (Compare<kOp>(Cmp<T>::Load(a[l]), Cmp<T>::Load(b[l]))) r |= 1u << l;
  });
  uint32_t q = ~r;
  const BoolOp op = static_cast<BoolOp>(in.aux);
  if (op != BoolOp::kNone) {
    uint32_t c = w.preds[in.a[4]];
    if (in.aux2) c = ~c;
    r = Combine(op, r, c);
    q = Combine(op, q, c);
  }
  uint32_t& d = w.preds[in.a[0]];
  d = (d & ~mask) | (r & mask);
  if (in.a[3] != kNoOperand) {
    uint32_t& d2 = w.preds[in.a[3]];
    d2 = (d2 & ~mask) | (q & mask);
  }
}

template <typename T>
Handler SetpFor(CmpOp op) {
  switch (op) {
    case CmpOp::kEq:
      return &Setp<T, CmpOp::kEq>;
    case CmpOp::kNe:
      return &Setp<T, CmpOp::kNe>;
    case CmpOp::kLt:
      return &Setp<T, CmpOp::kLt>;
    case CmpOp::kLe:
      return &Setp<T, CmpOp::kLe>;
    case CmpOp::kGt:
      return &Setp<T, CmpOp::kGt>;
    case CmpOp::kGe:
      return &Setp<T, CmpOp::kGe>;
    case CmpOp::kLo:
      return &Setp<T, CmpOp::kLo>;
    case CmpOp::kLs:
      return &Setp<T, CmpOp::kLs>;
    case CmpOp::kHi:
      return &Setp<T, CmpOp::kHi>;
    case CmpOp::kHs:
      return &Setp<T, CmpOp::kHs>;
    case CmpOp::kEqu:
      return &Setp<T, CmpOp::kEqu>;
    case CmpOp::kNeu:
      return &Setp<T, CmpOp::kNeu>;
    case CmpOp::kLtu:
      return &Setp<T, CmpOp::kLtu>;
    case CmpOp::kLeu:
      return &Setp<T, CmpOp::kLeu>;
    case CmpOp::kGtu:
      return &Setp<T, CmpOp::kGtu>;
    case CmpOp::kGeu:
      return &Setp<T, CmpOp::kGeu>;
    case CmpOp::kNum:
      return &Setp<T, CmpOp::kNum>;
    case CmpOp::kNan:
      return &Setp<T, CmpOp::kNan>;
  }
  return nullptr;
}

bool IsFloatCmp(CmpOp op) { return op >= CmpOp::kEqu; }
bool IsUnsignedCmp(CmpOp op) { return op >= CmpOp::kLo && op <= CmpOp::kHs; }

template <typename T, CmpOp kOp>
bool CompareSlots(uint64_t a, uint64_t b) {
  return Compare<kOp>(Cmp<T>::Load(a), Cmp<T>::Load(b));
}

// set: runtime compare (rare instruction).
template <typename T>
bool CompareRuntime(CmpOp op, uint64_t a, uint64_t b) {
  switch (op) {
#define SOFTGPU_CASE(X) \
  case CmpOp::X:        \
    return CompareSlots<T, CmpOp::X>(a, b);
    SOFTGPU_CASE(kEq)
    SOFTGPU_CASE(kNe)
    SOFTGPU_CASE(kLt)
    SOFTGPU_CASE(kLe)
    SOFTGPU_CASE(kGt)
    SOFTGPU_CASE(kGe)
    SOFTGPU_CASE(kLo)
    SOFTGPU_CASE(kLs)
    SOFTGPU_CASE(kHi)
    SOFTGPU_CASE(kHs)
    SOFTGPU_CASE(kEqu)
    SOFTGPU_CASE(kNeu)
    SOFTGPU_CASE(kLtu)
    SOFTGPU_CASE(kLeu) SOFTGPU_CASE(kGtu) SOFTGPU_CASE(kGeu) SOFTGPU_CASE(kNum) SOFTGPU_CASE(kNan)
#undef SOFTGPU_CASE
  }
  return false;
}

// set: Insn::aux = BoolOp | CmpOp << 8, Insn::imm = the destination's "true" bits.
template <typename T>
void Set(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  const CmpOp op = static_cast<CmpOp>((in.aux >> 8) & 0xff);
  const BoolOp bop = static_cast<BoolOp>(in.aux & 0xff);
  const uint64_t true_bits = static_cast<uint64_t>(in.imm);
  uint32_t c = in.a[4] != kNoOperand ? w.preds[in.a[4]] : 0;
  if (in.aux2) c = ~c;
  ForLanes(mask, [&](uint32_t l) {
    uint32_t r = CompareRuntime<T>(op, a[l], b[l]) ? 1 : 0;
    if (bop != BoolOp::kNone) r = Combine(bop, r, (c >> l) & 1) & 1;
    d[l] = r ? true_bits : 0;
  });
}

void Selp(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  const uint32_t c = w.preds[in.a[3]];
  ForLanes(mask, [&](uint32_t l) { d[l] = ((c >> l) & 1) ? a[l] : b[l]; });
}

template <typename C>
void Slct(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  const uint64_t* c = w.R(in.a[3]);
  ForLanes(mask, [&](uint32_t l) { d[l] = Get<C>(c[l]) >= C(0) ? a[l] : b[l]; });
}

template <PredOp kOp>
void Pred(Warp& w, const Insn& in, uint32_t mask) {
  uint32_t a = w.preds[in.a[1]];
  if (in.aux & 1) a = ~a;
  uint32_t b = 0;
  if (kOp == PredOp::kAnd || kOp == PredOp::kOr || kOp == PredOp::kXor) {
    b = w.preds[in.a[2]];
    if (in.aux & 2) b = ~b;
  }
  uint32_t r;
  switch (kOp) {
    case PredOp::kAnd:
      r = a & b;
      break;
    case PredOp::kOr:
      r = a | b;
      break;
    case PredOp::kXor:
      r = a ^ b;
      break;
    case PredOp::kNot:
    case PredOp::kCnot:
      r = ~a;
      break;
    default:
      r = a;
      break;
  }
  uint32_t& d = w.preds[in.a[0]];
  d = (d & ~mask) | (r & mask);
}

void PredConst(Warp& w, const Insn& in, uint32_t mask) {
  uint32_t& d = w.preds[in.a[0]];
  d = (d & ~mask) | (in.aux != 0 ? mask : 0);
}

void PredToReg(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint32_t p = w.preds[in.a[1]];
  ForLanes(mask, [&](uint32_t l) { d[l] = (p >> l) & 1; });
}

void RegToPred(Warp& w, const Insn& in, uint32_t mask) {
  const uint64_t* a = w.R(in.a[1]);
  uint32_t r = 0;
  ForLanes(mask, [&](uint32_t l) {
    if (a[l] != 0) r |= 1u << l;
  });
  uint32_t& d = w.preds[in.a[0]];
  d = (d & ~mask) | r;
}

}  // namespace

Handler SetpHandler(CmpOp op, Type t) {
  const bool fcmp = IsFloatCmp(op);
  switch (t) {
    case Type::kB16:
    case Type::kU16:
      return fcmp ? nullptr : SetpFor<uint16_t>(op);
    case Type::kS16:
      return fcmp ? nullptr : SetpFor<int16_t>(op);
    case Type::kB32:
    case Type::kU32:
      return fcmp ? nullptr : SetpFor<uint32_t>(op);
    case Type::kS32:
      return fcmp ? nullptr : SetpFor<int32_t>(op);
    case Type::kB64:
    case Type::kU64:
      return fcmp ? nullptr : SetpFor<uint64_t>(op);
    case Type::kS64:
      return fcmp ? nullptr : SetpFor<int64_t>(op);
    case Type::kF32:
      return IsUnsignedCmp(op) ? nullptr : SetpFor<float>(op);
    case Type::kF64:
      return IsUnsignedCmp(op) ? nullptr : SetpFor<double>(op);
    case Type::kF16:
      return IsUnsignedCmp(op) ? nullptr : SetpFor<H16>(op);
    case Type::kBF16:
      return IsUnsignedCmp(op) ? nullptr : SetpFor<BH16>(op);
    default:
      return nullptr;
  }
}

Handler SetHandler(CmpOp op, Type dtype, Type stype) {
  (void)op;
  if (dtype == Type::kPred || ptx::TypeSize(dtype) == 0 || ptx::TypeSize(dtype) > 8) return nullptr;
  switch (stype) {
    case Type::kB16:
    case Type::kU16:
      return &Set<uint16_t>;
    case Type::kS16:
      return &Set<int16_t>;
    case Type::kB32:
    case Type::kU32:
      return &Set<uint32_t>;
    case Type::kS32:
      return &Set<int32_t>;
    case Type::kB64:
    case Type::kU64:
      return &Set<uint64_t>;
    case Type::kS64:
      return &Set<int64_t>;
    case Type::kF32:
      return &Set<float>;
    case Type::kF64:
      return &Set<double>;
    case Type::kF16:
      return &Set<H16>;
    case Type::kBF16:
      return &Set<BH16>;
    default:
      return nullptr;
  }
}

Handler SelpHandler(Type t) {
  if (t == Type::kPred || t == Type::kNone || t == Type::kB128) return nullptr;
  return &Selp;
}

Handler SlctHandler(Type dtype, Type ctype) {
  if (dtype == Type::kPred) return nullptr;
  if (ctype == Type::kS32) return &Slct<int32_t>;
  if (ctype == Type::kF32) return &Slct<float>;
  return nullptr;
}

Handler PredHandler(PredOp op) {
  switch (op) {
    case PredOp::kAnd:
      return &Pred<PredOp::kAnd>;
    case PredOp::kOr:
      return &Pred<PredOp::kOr>;
    case PredOp::kXor:
      return &Pred<PredOp::kXor>;
    case PredOp::kNot:
      return &Pred<PredOp::kNot>;
    case PredOp::kCnot:
      return &Pred<PredOp::kCnot>;
    case PredOp::kMov:
      return &Pred<PredOp::kMov>;
  }
  return nullptr;
}

Handler PredConstHandler() { return &PredConst; }
Handler PredToRegHandler() { return &PredToReg; }
Handler RegToPredHandler() { return &RegToPred; }

}  // namespace softgpu
