// Integer arithmetic, bit manipulation and logic handlers.
#include <bit>
#include <limits>
#include <type_traits>

#include "softgpu/exec.h"
#include "softgpu/handlers.h"

namespace softgpu {
namespace {

using ptx::Type;

template <typename T>
using U = std::make_unsigned_t<T>;
template <typename T>
using Wide = std::conditional_t<
    sizeof(T) == 1, std::conditional_t<std::is_signed_v<T>, int16_t, uint16_t>,
    std::conditional_t<sizeof(T) == 2, std::conditional_t<std::is_signed_v<T>, int32_t, uint32_t>,
                       std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>>;
template <typename T>
using Wider = std::conditional_t<
    sizeof(T) == 8, std::conditional_t<std::is_signed_v<T>, __int128, unsigned __int128>, Wide<T>>;

template <typename T>
constexpr uint32_t kBits = sizeof(T) * 8;

// ---- generic lane loops ----
template <typename T, class Op>
void Unary(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  ForLanes(mask, [&](uint32_t l) { d[l] = Put(Op::F(Get<T>(a[l]))); });
}

template <typename T, class Op>
void Binary(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  ForLanes(mask, [&](uint32_t l) { d[l] = Put(Op::F(Get<T>(a[l]), Get<T>(b[l]))); });
}

// Binary op whose second operand is a u32 (shift amounts).
template <typename T, class Op>
void Shift(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  ForLanes(mask, [&](uint32_t l) { d[l] = Put(Op::F(Get<T>(a[l]), Get<uint32_t>(b[l]))); });
}

template <typename T, class Op>
void Ternary(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  const uint64_t* c = w.R(in.a[3]);
  ForLanes(mask, [&](uint32_t l) { d[l] = Put(Op::F(Get<T>(a[l]), Get<T>(b[l]), Get<T>(c[l]))); });
}

// ---- operations ----
struct AddOp {
  template <typename T>
  static T F(T a, T b) {
    return static_cast<T>(static_cast<U<T>>(a) + static_cast<U<T>>(b));
  }
};
struct SubOp {
  template <typename T>
  static T F(T a, T b) {
    return static_cast<T>(static_cast<U<T>>(a) - static_cast<U<T>>(b));
  }
};
struct AddSatOp {
  template <typename T>
  static T F(T a, T b) {
    T r;
    if (__builtin_add_overflow(a, b, &r))
      return b > 0 ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
    return r;
  }
};
struct SubSatOp {
  template <typename T>
  static T F(T a, T b) {
    T r;
    if (__builtin_sub_overflow(a, b, &r))
      return b < 0 ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
    return r;
  }
};
struct MulLoOp {
  template <typename T>
  static T F(T a, T b) {
    using UT = std::conditional_t<sizeof(T) < 4, uint32_t, U<T>>;
    return static_cast<T>(static_cast<UT>(static_cast<U<T>>(a)) *
                          static_cast<UT>(static_cast<U<T>>(b)));
  }
};
struct MulHiOp {
  template <typename T>
  static T F(T a, T b) {
    using W = Wider<T>;
    return static_cast<T>((static_cast<W>(a) * static_cast<W>(b)) >> kBits<T>);
  }
};
struct MulWideOp {
  template <typename T>
  static Wide<T> F(T a, T b) {
    using W = Wide<T>;
    return static_cast<W>(static_cast<U<W>>(static_cast<W>(a)) *
                          static_cast<U<W>>(static_cast<W>(b)));
  }
};
struct MadLoOp {
  template <typename T>
  static T F(T a, T b, T c) {
    return AddOp::F(MulLoOp::F(a, b), c);
  }
};
struct MadHiOp {
  template <typename T>
  static T F(T a, T b, T c) {
    return AddOp::F(MulHiOp::F(a, b), c);
  }
};
struct Mul24LoOp {
  template <typename T>
  static T F(T a, T b) {
    const int64_t x = std::is_signed_v<T>
                          ? (static_cast<int64_t>(static_cast<uint64_t>(a) << 40) >> 40)
                          : static_cast<int64_t>(static_cast<uint64_t>(a) & 0xffffff);
    const int64_t y = std::is_signed_v<T>
                          ? (static_cast<int64_t>(static_cast<uint64_t>(b) << 40) >> 40)
                          : static_cast<int64_t>(static_cast<uint64_t>(b) & 0xffffff);
    return static_cast<T>(static_cast<uint32_t>(x * y));
  }
};
struct Mul24HiOp {
  template <typename T>
  static T F(T a, T b) {
    const int64_t x = std::is_signed_v<T>
                          ? (static_cast<int64_t>(static_cast<uint64_t>(a) << 40) >> 40)
                          : static_cast<int64_t>(static_cast<uint64_t>(a) & 0xffffff);
    const int64_t y = std::is_signed_v<T>
                          ? (static_cast<int64_t>(static_cast<uint64_t>(b) << 40) >> 40)
                          : static_cast<int64_t>(static_cast<uint64_t>(b) & 0xffffff);
    return static_cast<T>(static_cast<uint32_t>(static_cast<uint64_t>(x * y) >> 16));
  }
};
struct Mad24LoOp {
  template <typename T>
  static T F(T a, T b, T c) {
    return AddOp::F(Mul24LoOp::F(a, b), c);
  }
};
struct Mad24HiOp {
  template <typename T>
  static T F(T a, T b, T c) {
    return AddOp::F(Mul24HiOp::F(a, b), c);
  }
};
struct SadOp {
  template <typename T>
  static T F(T a, T b, T c) {
    U<T> diff = a < b ? static_cast<U<T>>(b) - static_cast<U<T>>(a)
                      : static_cast<U<T>>(a) - static_cast<U<T>>(b);
    return static_cast<T>(diff + static_cast<U<T>>(c));
  }
};
struct DivOp {
  template <typename T>
  static T F(T a, T b) {
    if (b == 0) return static_cast<T>(~U<T>{0});  // no trap on the GPU; all ones
    if constexpr (std::is_signed_v<T>) {
      if (a == std::numeric_limits<T>::min() && b == -1) return a;
    }
    return static_cast<T>(a / b);
  }
};
struct RemOp {
  template <typename T>
  static T F(T a, T b) {
    if (b == 0) return a;
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return 0;
    }
    return static_cast<T>(a % b);
  }
};
struct AbsOp {
  template <typename T>
  static T F(T a) {
    return a < 0 ? static_cast<T>(U<T>{0} - static_cast<U<T>>(a)) : a;
  }
};
struct NegOp {
  template <typename T>
  static T F(T a) {
    return static_cast<T>(U<T>{0} - static_cast<U<T>>(a));
  }
};
struct MinOp {
  template <typename T>
  static T F(T a, T b) {
    return a < b ? a : b;
  }
};
struct MaxOp {
  template <typename T>
  static T F(T a, T b) {
    return a > b ? a : b;
  }
};
struct PopcOp {
  template <typename T>
  static uint32_t F(T a) {
    return static_cast<uint32_t>(std::popcount(static_cast<U<T>>(a)));
  }
};
struct ClzOp {
  template <typename T>
  static uint32_t F(T a) {
    return static_cast<uint32_t>(std::countl_zero(static_cast<U<T>>(a)));
  }
};
struct BfindOp {
  template <typename T>
  static uint32_t F(T a) {
    U<T> v = static_cast<U<T>>(a);
    if constexpr (std::is_signed_v<T>) {
      if (a < 0) v = ~v;
    }
    if (v == 0) return 0xffffffffu;
    return kBits<T> - 1 - static_cast<uint32_t>(std::countl_zero(v));
  }
};
struct BfindShiftOp {
  template <typename T>
  static uint32_t F(T a) {
    uint32_t pos = BfindOp::F(a);
    return pos == 0xffffffffu ? pos : kBits<T> - 1 - pos;
  }
};
struct BrevOp {
  template <typename T>
  static T F(T a) {
    U<T> v = static_cast<U<T>>(a), r = 0;
    for (uint32_t i = 0; i < kBits<T>; ++i) {
      r = static_cast<U<T>>((r << 1) | (v & 1));
      v >>= 1;
    }
    return static_cast<T>(r);
  }
};
struct ShlOp {
  template <typename T>
  static T F(T a, uint32_t n) {
    return n >= kBits<T> ? T{0} : static_cast<T>(static_cast<U<T>>(a) << n);
  }
};
struct ShrOp {
  template <typename T>
  static T F(T a, uint32_t n) {
    if constexpr (std::is_signed_v<T>) {
      return n >= kBits<T> ? static_cast<T>(a < 0 ? -1 : 0) : static_cast<T>(a >> n);
    } else {
      return n >= kBits<T> ? T{0} : static_cast<T>(a >> n);
    }
  }
};
struct AndOp {
  template <typename T>
  static T F(T a, T b) {
    return a & b;
  }
};
struct OrOp {
  template <typename T>
  static T F(T a, T b) {
    return a | b;
  }
};
struct XorOp {
  template <typename T>
  static T F(T a, T b) {
    return a ^ b;
  }
};
struct NotOp {
  template <typename T>
  static T F(T a) {
    return static_cast<T>(~a);
  }
};
struct CnotOp {
  template <typename T>
  static T F(T a) {
    return static_cast<T>(a == 0 ? 1 : 0);
  }
};

// bfe d, a, pos, len (pos/len are u32 regardless of the type).
template <typename T>
void Bfe(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  const uint64_t* c = w.R(in.a[3]);
  ForLanes(mask, [&](uint32_t l) {
    const U<T> v = static_cast<U<T>>(Get<T>(a[l]));
    const uint32_t pos = Get<uint32_t>(b[l]) & 0xff;
    const uint32_t len = Get<uint32_t>(c[l]) & 0xff;
    const uint32_t avail = pos >= kBits<T> ? 0 : kBits<T> - pos;
    const uint32_t take = std::min(len, avail);
    U<T> r = take == 0 ? U<T>{0} : static_cast<U<T>>(v >> pos);
    const U<T> field_mask =
        take >= kBits<T> ? static_cast<U<T>>(~U<T>{0}) : static_cast<U<T>>((U<T>{1} << take) - 1);
    r &= field_mask;
    if constexpr (std::is_signed_v<T>) {
      if (len != 0) {
        const uint32_t top = std::min<uint32_t>(pos + len - 1, kBits<T> - 1);
        if ((v >> top) & 1) r |= static_cast<U<T>>(~field_mask);
      }
    }
    d[l] = Put(static_cast<T>(r));
  });
}

// bfi d, f, b, pos, len: insert the low len bits of f into b at pos.
template <typename T>
void Bfi(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* f = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  const uint64_t* p = w.R(in.a[3]);
  const uint64_t* n = w.R(in.a[5]);
  ForLanes(mask, [&](uint32_t l) {
    const T fv = Get<T>(f[l]);
    T r = Get<T>(b[l]);
    const uint32_t pos = Get<uint32_t>(p[l]) & 0xff;
    const uint32_t len = Get<uint32_t>(n[l]) & 0xff;
    for (uint32_t i = 0; i < len && pos + i < kBits<T>; ++i) {
      const T bit = static_cast<T>(T{1} << (pos + i));
      r = static_cast<T>(((fv >> i) & 1) ? (r | bit) : (r & ~bit));
    }
    d[l] = Put(r);
  });
}

void Lop3(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  const uint64_t* c = w.R(in.a[3]);
  const uint32_t lut = in.aux;
  ForLanes(mask, [&](uint32_t l) {
    const uint32_t x = Get<uint32_t>(a[l]), y = Get<uint32_t>(b[l]), z = Get<uint32_t>(c[l]);
    uint32_t r = 0;
    for (int i = 0; i < 8; ++i) {
      if (lut & (1u << i)) r |= ((i & 4) ? x : ~x) & ((i & 2) ? y : ~y) & ((i & 1) ? z : ~z);
    }
    d[l] = r;
  });
}

void Prmt(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  const uint64_t* c = w.R(in.a[3]);
  const uint32_t mode = in.aux;
  ForLanes(mask, [&](uint32_t l) {
    const uint64_t src = (static_cast<uint64_t>(Get<uint32_t>(b[l])) << 32) | Get<uint32_t>(a[l]);
    const uint32_t sel = Get<uint32_t>(c[l]);
    auto byte = [&](uint32_t i) { return static_cast<uint32_t>((src >> (8 * (i & 7))) & 0xff); };
    uint32_t r = 0;
    if (mode == 0) {
      for (int i = 0; i < 4; ++i) {
        const uint32_t s = (sel >> (4 * i)) & 0xf;
        uint32_t v = byte(s & 7);
        if (s & 8) v = (v & 0x80) ? 0xff : 0;
        r |= v << (8 * i);
      }
    } else {
      const uint32_t n = sel & 3;
      uint32_t idx[4];
      switch (mode) {
        case 1:
          for (int i = 0; i < 4; ++i) idx[i] = (n + i) & 7;
          break;  // f4e
        case 2:
          for (int i = 0; i < 4; ++i) idx[i] = (n - i) & 7;
          break;  // b4e
        case 3:
          for (int i = 0; i < 4; ++i) idx[i] = n;
          break;  // rc8
        case 4:
          for (int i = 0; i < 4; ++i)
            idx[i] = i < static_cast<int>(n) ? static_cast<uint32_t>(i) : n;
          break;  // ecl
        case 5:
          for (int i = 0; i < 4; ++i)
            idx[i] = i > static_cast<int>(n) ? static_cast<uint32_t>(i) : n;
          break;    // ecr
        default: {  // rc16
          const uint32_t h = (sel & 1) * 2;
          idx[0] = h;
          idx[1] = h + 1;
          idx[2] = h;
          idx[3] = h + 1;
        }
      }
      for (int i = 0; i < 4; ++i) r |= byte(idx[i]) << (8 * i);
    }
    d[l] = r;
  });
}

// bmsk d, a, b: a 32-bit mask of b bits starting at bit a. .wrap takes a and b modulo 32;
// .clamp limits them to 32 (a start at 32 or above gives 0); bits past 31 are dropped.
template <bool kClamp>
void Bmsk(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  ForLanes(mask, [&](uint32_t l) {
    uint32_t start = Get<uint32_t>(a[l]), width = Get<uint32_t>(b[l]);
    if constexpr (kClamp) {
      start = std::min<uint32_t>(start, 32);
      width = std::min<uint32_t>(width, 32);
    } else {
      start &= 31;
      width &= 31;
    }
    const uint64_t bits = width >= 32 ? 0xffffffffull : (uint64_t{1} << width) - 1;
    d[l] = Put(static_cast<uint32_t>(start >= 32 ? 0 : bits << start));
  });
}

template <bool kLeft, bool kClamp>
void Shf(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  const uint64_t* c = w.R(in.a[3]);
  ForLanes(mask, [&](uint32_t l) {
    const uint64_t v = (static_cast<uint64_t>(Get<uint32_t>(b[l])) << 32) | Get<uint32_t>(a[l]);
    uint32_t n = Get<uint32_t>(c[l]);
    n = kClamp ? std::min<uint32_t>(n, 32) : (n & 31);
    d[l] = kLeft ? static_cast<uint32_t>((v << n) >> 32) : static_cast<uint32_t>(v >> n);
  });
}

// Extended precision with a carry flag register (a4).
enum class CarryKind { kAdd, kSub, kMadLo, kMadHi };
template <typename T, CarryKind kKind, bool kCarryIn, bool kCarryOut>
void Carry(Warp& w, const Insn& in, uint32_t mask) {
  using UT = U<T>;
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  const uint64_t* c =
      (kKind == CarryKind::kMadLo || kKind == CarryKind::kMadHi) ? w.R(in.a[3]) : nullptr;
  uint64_t* cc = w.R(in.a[4]);
  ForLanes(mask, [&](uint32_t l) {
    const UT x = static_cast<UT>(Get<T>(a[l]));
    const UT y = static_cast<UT>(Get<T>(b[l]));
    const UT cin = kCarryIn ? static_cast<UT>(cc[l] & 1) : 0;
    UT r;
    bool carry;
    if constexpr (kKind == CarryKind::kAdd) {
      UT t;
      bool c1 = __builtin_add_overflow(x, y, &t);
      bool c2 = __builtin_add_overflow(t, cin, &r);
      carry = c1 || c2;
    } else if constexpr (kKind == CarryKind::kSub) {
      UT t;
      bool b1 = __builtin_sub_overflow(x, y, &t);
      bool b2 = __builtin_sub_overflow(t, cin, &r);
      carry = b1 || b2;  // borrow
    } else {
      using W = Wider<T>;
      const auto prod = static_cast<std::make_unsigned_t<W>>(static_cast<W>(Get<T>(a[l])) *
                                                             static_cast<W>(Get<T>(b[l])));
      const UT part =
          kKind == CarryKind::kMadLo ? static_cast<UT>(prod) : static_cast<UT>(prod >> kBits<T>);
      const UT z = static_cast<UT>(Get<T>(c[l]));
      UT t;
      bool c1 = __builtin_add_overflow(part, z, &t);
      bool c2 = __builtin_add_overflow(t, cin, &r);
      carry = c1 || c2;
    }
    d[l] = Put(static_cast<T>(r));
    if (kCarryOut) cc[l] = carry ? 1 : 0;
  });
}

template <int kKind>  // 0: dp4a, 1: dp2a.lo, 2: dp2a.hi
void Dp(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  const uint64_t* c = w.R(in.a[3]);
  const bool as = in.aux & 1, bs = in.aux & 2;
  ForLanes(mask, [&](uint32_t l) {
    const uint32_t x = Get<uint32_t>(a[l]), y = Get<uint32_t>(b[l]);
    int64_t acc = bs || as ? static_cast<int64_t>(Get<int32_t>(c[l]))
                           : static_cast<int64_t>(Get<uint32_t>(c[l]));
    if (kKind == 0) {
      for (int i = 0; i < 4; ++i) {
        const int64_t p =
            as ? static_cast<int8_t>(x >> (8 * i)) : static_cast<uint8_t>(x >> (8 * i));
        const int64_t q =
            bs ? static_cast<int8_t>(y >> (8 * i)) : static_cast<uint8_t>(y >> (8 * i));
        acc += p * q;
      }
    } else {
      const int base = kKind == 1 ? 0 : 2;
      for (int i = 0; i < 2; ++i) {
        const int64_t p =
            as ? static_cast<int16_t>(x >> (16 * i)) : static_cast<uint16_t>(x >> (16 * i));
        const int64_t q = bs ? static_cast<int8_t>(y >> (8 * (base + i)))
                             : static_cast<uint8_t>(y >> (8 * (base + i)));
        acc += p * q;
      }
    }
    d[l] = static_cast<uint32_t>(acc);
  });
}

// ---- type dispatch ----
enum TypeSet : uint32_t {
  k8 = 1,
  k16 = 2,
  k32 = 4,
  k64 = 8,
  kAll = k16 | k32 | k64,
};

template <template <typename> class H>
Handler ByType(Type t, uint32_t sizes, bool allow_bits = true) {
  switch (t) {
    case Type::kU16:
      return (sizes & k16) ? H<uint16_t>::f : nullptr;
    case Type::kS16:
      return (sizes & k16) ? H<int16_t>::f : nullptr;
    case Type::kU32:
      return (sizes & k32) ? H<uint32_t>::f : nullptr;
    case Type::kS32:
      return (sizes & k32) ? H<int32_t>::f : nullptr;
    case Type::kU64:
      return (sizes & k64) ? H<uint64_t>::f : nullptr;
    case Type::kS64:
      return (sizes & k64) ? H<int64_t>::f : nullptr;
    case Type::kB16:
      return allow_bits && (sizes & k16) ? H<uint16_t>::f : nullptr;
    case Type::kB32:
      return allow_bits && (sizes & k32) ? H<uint32_t>::f : nullptr;
    case Type::kB64:
      return allow_bits && (sizes & k64) ? H<uint64_t>::f : nullptr;
    default:
      return nullptr;
  }
}

#define SOFTGPU_WRAP(Name, Loop, Op)           \
  template <typename T>                        \
  struct Name {                                \
    static constexpr Handler f = &Loop<T, Op>; \
  };

SOFTGPU_WRAP(HAdd, Binary, AddOp)
SOFTGPU_WRAP(HSub, Binary, SubOp)
SOFTGPU_WRAP(HAddSat, Binary, AddSatOp)
SOFTGPU_WRAP(HSubSat, Binary, SubSatOp)
SOFTGPU_WRAP(HMulLo, Binary, MulLoOp)
SOFTGPU_WRAP(HMulHi, Binary, MulHiOp)
SOFTGPU_WRAP(HMulWide, Binary, MulWideOp)
SOFTGPU_WRAP(HMadLo, Ternary, MadLoOp)
SOFTGPU_WRAP(HMadHi, Ternary, MadHiOp)
SOFTGPU_WRAP(HMul24Lo, Binary, Mul24LoOp)
SOFTGPU_WRAP(HMul24Hi, Binary, Mul24HiOp)
SOFTGPU_WRAP(HMad24Lo, Ternary, Mad24LoOp)
SOFTGPU_WRAP(HMad24Hi, Ternary, Mad24HiOp)
SOFTGPU_WRAP(HSad, Ternary, SadOp)
SOFTGPU_WRAP(HDiv, Binary, DivOp)
SOFTGPU_WRAP(HRem, Binary, RemOp)
SOFTGPU_WRAP(HAbs, Unary, AbsOp)
SOFTGPU_WRAP(HNeg, Unary, NegOp)
SOFTGPU_WRAP(HMin, Binary, MinOp)
SOFTGPU_WRAP(HMax, Binary, MaxOp)
SOFTGPU_WRAP(HPopc, Unary, PopcOp)
SOFTGPU_WRAP(HClz, Unary, ClzOp)
SOFTGPU_WRAP(HBfind, Unary, BfindOp)
SOFTGPU_WRAP(HBfindShift, Unary, BfindShiftOp)
SOFTGPU_WRAP(HBrev, Unary, BrevOp)
SOFTGPU_WRAP(HShl, Shift, ShlOp)
SOFTGPU_WRAP(HShr, Shift, ShrOp)
SOFTGPU_WRAP(HAnd, Binary, AndOp)
SOFTGPU_WRAP(HOr, Binary, OrOp)
SOFTGPU_WRAP(HXor, Binary, XorOp)
SOFTGPU_WRAP(HNot, Unary, NotOp)
SOFTGPU_WRAP(HCnot, Unary, CnotOp)
#undef SOFTGPU_WRAP

template <typename T>
struct HBfe {
  static constexpr Handler f = &Bfe<T>;
};
template <typename T>
struct HBfi {
  static constexpr Handler f = &Bfi<T>;
};

// mad.wide: d (wide) = a * b (wide product) + c (wide).
template <typename T>
void MadWide(Warp& w, const Insn& in, uint32_t mask) {
  using W = Wide<T>;
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  const uint64_t* c = w.R(in.a[3]);
  ForLanes(mask, [&](uint32_t l) {
    W p = MulWideOp::F(Get<T>(a[l]), Get<T>(b[l]));
    d[l] = Put(AddOp::F(p, Get<W>(c[l])));
  });
}
template <typename T>
struct HMadWide {
  static constexpr Handler f = &MadWide<T>;
};

template <CarryKind kKind, bool kIn, bool kOut>
Handler CarryByType(Type t) {
  switch (t) {
    case Type::kU32:
    case Type::kB32:
      return &Carry<uint32_t, kKind, kIn, kOut>;
    case Type::kS32:
      return &Carry<int32_t, kKind, kIn, kOut>;
    case Type::kU64:
    case Type::kB64:
      return &Carry<uint64_t, kKind, kIn, kOut>;
    case Type::kS64:
      return &Carry<int64_t, kKind, kIn, kOut>;
    default:
      return nullptr;
  }
}

}  // namespace

Handler IntHandler(IntOp op, Type t) {
  switch (op) {
    case IntOp::kAdd:
      return ByType<HAdd>(t, kAll);
    case IntOp::kSub:
      return ByType<HSub>(t, kAll);
    case IntOp::kAddSat:
      return t == Type::kS32 ? HAddSat<int32_t>::f : nullptr;
    case IntOp::kSubSat:
      return t == Type::kS32 ? HSubSat<int32_t>::f : nullptr;
    case IntOp::kMulLo:
      return ByType<HMulLo>(t, kAll);
    case IntOp::kMulHi:
      return ByType<HMulHi>(t, kAll);
    case IntOp::kMulWide:
      return ByType<HMulWide>(t, k16 | k32, false);
    case IntOp::kMadLo:
      return ByType<HMadLo>(t, kAll);
    case IntOp::kMadHi:
      return ByType<HMadHi>(t, kAll);
    case IntOp::kMadWide:
      return ByType<HMadWide>(t, k16 | k32, false);
    case IntOp::kMul24Lo:
      return ByType<HMul24Lo>(t, k32, false);
    case IntOp::kMul24Hi:
      return ByType<HMul24Hi>(t, k32, false);
    case IntOp::kMad24Lo:
      return ByType<HMad24Lo>(t, k32, false);
    case IntOp::kMad24Hi:
      return ByType<HMad24Hi>(t, k32, false);
    case IntOp::kSad:
      return ByType<HSad>(t, kAll, false);
    case IntOp::kDiv:
      return ByType<HDiv>(t, kAll, false);
    case IntOp::kRem:
      return ByType<HRem>(t, kAll, false);
    case IntOp::kAbs:
      return ptx::IsSignedInt(t) ? ByType<HAbs>(t, kAll) : nullptr;
    case IntOp::kNeg:
      return ptx::IsSignedInt(t) ? ByType<HNeg>(t, kAll) : nullptr;
    case IntOp::kMin:
      return ByType<HMin>(t, kAll, false);
    case IntOp::kMax:
      return ByType<HMax>(t, kAll, false);
    case IntOp::kPopc:
      return ByType<HPopc>(t, k32 | k64);
    case IntOp::kClz:
      return ByType<HClz>(t, k32 | k64);
    case IntOp::kBfind:
      return ByType<HBfind>(t, k32 | k64, false);
    case IntOp::kBfindShiftAmount:
      return ByType<HBfindShift>(t, k32 | k64, false);
    case IntOp::kBrev:
      return ByType<HBrev>(t, k32 | k64);
    case IntOp::kBfe:
      return ByType<HBfe>(t, k32 | k64, false);
    case IntOp::kBfi:
      return ByType<HBfi>(t, k32 | k64);
    case IntOp::kShl:
      return ByType<HShl>(t, kAll);
    case IntOp::kShr:
      return ByType<HShr>(t, kAll);
    case IntOp::kAnd:
      return ByType<HAnd>(t, kAll);
    case IntOp::kOr:
      return ByType<HOr>(t, kAll);
    case IntOp::kXor:
      return ByType<HXor>(t, kAll);
    case IntOp::kNot:
      return ByType<HNot>(t, kAll);
    case IntOp::kCnot:
      return ByType<HCnot>(t, kAll);
    case IntOp::kLop3:
      return t == Type::kB32 ? &Lop3 : nullptr;
    case IntOp::kPrmt:
      return t == Type::kB32 ? &Prmt : nullptr;
    case IntOp::kShfLWrap:
      return t == Type::kB32 ? &Shf<true, false> : nullptr;
    case IntOp::kShfLClamp:
      return t == Type::kB32 ? &Shf<true, true> : nullptr;
    case IntOp::kShfRWrap:
      return t == Type::kB32 ? &Shf<false, false> : nullptr;
    case IntOp::kShfRClamp:
      return t == Type::kB32 ? &Shf<false, true> : nullptr;
    case IntOp::kBmskWrap:
      return t == Type::kB32 ? &Bmsk<false> : nullptr;
    case IntOp::kBmskClamp:
      return t == Type::kB32 ? &Bmsk<true> : nullptr;
    case IntOp::kAddCC:
      return CarryByType<CarryKind::kAdd, false, true>(t);
    case IntOp::kAddC:
      return CarryByType<CarryKind::kAdd, true, false>(t);
    case IntOp::kAddCCC:
      return CarryByType<CarryKind::kAdd, true, true>(t);
    case IntOp::kSubCC:
      return CarryByType<CarryKind::kSub, false, true>(t);
    case IntOp::kSubC:
      return CarryByType<CarryKind::kSub, true, false>(t);
    case IntOp::kSubCCC:
      return CarryByType<CarryKind::kSub, true, true>(t);
    case IntOp::kMadLoCC:
      return CarryByType<CarryKind::kMadLo, false, true>(t);
    case IntOp::kMadHiCC:
      return CarryByType<CarryKind::kMadHi, false, true>(t);
    case IntOp::kMadCLo:
      return CarryByType<CarryKind::kMadLo, true, false>(t);
    case IntOp::kMadCHi:
      return CarryByType<CarryKind::kMadHi, true, false>(t);
    case IntOp::kMadCLoCC:
      return CarryByType<CarryKind::kMadLo, true, true>(t);
    case IntOp::kMadCHiCC:
      return CarryByType<CarryKind::kMadHi, true, true>(t);
    case IntOp::kDp4a:
      return &Dp<0>;
    case IntOp::kDp2aLo:
      return &Dp<1>;
    case IntOp::kDp2aHi:
      return &Dp<2>;
  }
  return nullptr;
}

}  // namespace softgpu
