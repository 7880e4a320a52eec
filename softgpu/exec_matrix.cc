// Warp-level matrix handlers: mma.sync with the PTX ISA's fragment layouts, and wmma.load,
// wmma.store and wmma.mma over softgpu's own (opaque) fragment layout.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "softgpu/exec.h"
#include "softgpu/half.h"
#include "softgpu/handlers.h"

namespace softgpu {
namespace {

using ptx::Type;

const MatrixSite& Site(const Warp& w, const Insn& in) {
  return w.block->program->matrix_sites[in.aux];
}

uint32_t PerRegister(Type t) { return FragmentElementsPerRegister(t); }

// Bytes of one element in memory: a 32-bit register holds 4 / PerRegister of them; .f64 is 8.
uint32_t Bytes(Type t) { return t == Type::kF64 ? 8 : 4 / PerRegister(t); }

// Element `e` (in register order) of the fragment `regs` of lane `lane`, as a double.
double ReadElement(const Warp& w, const std::vector<uint32_t>& regs, Type t, uint32_t e,
                   uint32_t lane) {
  const uint32_t per = PerRegister(t);
  const uint64_t bits = w.R(regs[e / per])[lane];
  const uint32_t part = e % per;
  switch (t) {
    case Type::kF16:
      return HalfToFloat(static_cast<uint16_t>(bits >> (16 * part)));
    case Type::kBF16:
      return Bf16ToFloat(static_cast<uint16_t>(bits >> (16 * part)));
    case Type::kS8:
      return static_cast<int8_t>(bits >> (8 * part));
    case Type::kU8:
      return static_cast<uint8_t>(bits >> (8 * part));
    case Type::kTF32:  // the multiplier reads 10 mantissa bits; the low 13 are ignored
      return std::bit_cast<float>(static_cast<uint32_t>(bits) & 0xffffe000u);
    case Type::kF32:
      return std::bit_cast<float>(static_cast<uint32_t>(bits));
    case Type::kS32:
      return static_cast<int32_t>(bits);
    case Type::kF64:
      return std::bit_cast<double>(bits);
    default:
      return 0;
  }
}

// Stores accumulator element `e` of lane `lane` (f16, f32, s32 or f64).
void WriteElement(Warp& w, const std::vector<uint32_t>& regs, Type t, uint32_t e, uint32_t lane,
                  double v, bool satfinite) {
  const uint32_t per = PerRegister(t);
  uint64_t& bits = w.R(regs[e / per])[lane];
  switch (t) {
    case Type::kF16: {
      const uint32_t shift = 16 * (e % per);
      const uint64_t h = DoubleToHalf(v);
      bits = (bits & ~(0xffffull << shift) & 0xffffffffull) | (h << shift);
      break;
    }
    case Type::kF32:
      bits = std::bit_cast<uint32_t>(static_cast<float>(v));
      break;
    case Type::kS32: {
      // Integer products and sums are exact in a double up to 2^53; the result wraps like
      // 32-bit arithmetic, or clamps with .satfinite.
      int64_t x = static_cast<int64_t>(v);
      if (satfinite) {
        x = std::min<int64_t>(std::max<int64_t>(x, std::numeric_limits<int32_t>::min()),
                              std::numeric_limits<int32_t>::max());
      }
      bits = static_cast<uint32_t>(static_cast<int32_t>(static_cast<uint32_t>(x)));
      break;
    }
    case Type::kF64:
      bits = std::bit_cast<uint64_t>(v);
      break;
    default:
      break;
  }
}

// Row and column of element `i` of lane `lane`'s fragment of matrix `which` (0 A, 1 B, 2 C/D)
// for mma.sync (PTX ISA, "Matrix Fragments for mma.mMnNkK").
void MmaCoord(const MatrixSite& s, int which, uint32_t lane, uint32_t i, uint32_t* row,
              uint32_t* col) {
  const uint32_t g = lane >> 2, t = lane & 3;
  const bool integer = s.a_type == Type::kS8 || s.a_type == Type::kU8;
  const bool tf32 = s.a_type == Type::kTF32;
  if (which == 2) {
    if (s.m == 8) {  // m8n8k4 .f64, m8n8k16 integers
      *row = g;
      *col = 2 * t + (i & 1);
    } else {
      *row = g + 8 * (i >> 1);
      *col = 2 * t + (i & 1);
    }
    return;
  }
  if (s.m == 8 && s.k == 4) {  // .f64
    *row = which == 0 ? g : t;
    *col = which == 0 ? t : g;
    return;
  }
  if (s.m == 8) {  // m8n8k16 integers
    *row = which == 0 ? g : 4 * t + i;
    *col = which == 0 ? 4 * t + i : g;
    return;
  }
  if (tf32) {
    if (s.k == 4) {
      *row = which == 0 ? g + 8 * i : t;
      *col = which == 0 ? t : g;
    } else {  // k8
      *row = which == 0 ? g + 8 * (i & 1) : t + 4 * i;
      *col = which == 0 ? t + 4 * (i >> 1) : g;
    }
    return;
  }
  if (integer) {
    if (s.k == 16) {
      *row = which == 0 ? g + 8 * (i >> 2) : 4 * t + i;
      *col = which == 0 ? 4 * t + (i & 3) : g;
    } else {  // k32
      *row = which == 0 ? g + 8 * ((i >> 2) & 1) : 4 * t + (i & 3) + 16 * (i >> 2);
      *col = which == 0 ? 4 * t + (i & 3) + 16 * (i >> 3) : g;
    }
    return;
  }
  // .f16 / .bf16
  if (s.k == 8) {
    *row = which == 0 ? g + 8 * (i >> 1) : 2 * t + i;
    *col = which == 0 ? 2 * t + (i & 1) : g;
  } else {  // k16
    *row = which == 0 ? g + 8 * ((i >> 1) & 1) : 2 * t + (i & 1) + 8 * (i >> 1);
    *col = which == 0 ? 2 * t + (i & 1) + 8 * (i >> 2) : g;
  }
}

bool WholeWarp(Warp& w, uint32_t mask, const char* what) {
  if (mask == kFullMask) return true;
  w.SetFault(FaultKind::kUnsupported,
             std::string(what) + " executed by part of a warp (every lane must take part)");
  return false;
}

// The largest matrix of any shape softgpu runs: A of m16n8k32 and m32n8k16, B of m8n32k16.
constexpr size_t kMaxElements = 512;
using Tile = std::array<double, kMaxElements>;

// Whether the site's matrices fit a Tile (every shape the decoder accepts does); a fault if not.
bool FitsTile(Warp& w, const MatrixSite& s) {
  if (static_cast<size_t>(s.m) * s.k <= kMaxElements &&
      static_cast<size_t>(s.k) * s.n <= kMaxElements &&
      static_cast<size_t>(s.m) * s.n <= kMaxElements) {
    return true;
  }
  w.SetFault(FaultKind::kUnsupported, "matrix shape larger than softgpu's tiles");
  return false;
}

// D = A * B + C over logical matrices (row-major A[M][K], B[K][N], C and D [M][N]), in place on
// the stack: a whole tile at once, no allocation per instruction.
void MultiplyAdd(const MatrixSite& s, const Tile& a, const Tile& b, const Tile& c, Tile* d) {
  for (uint32_t i = 0; i < s.m; ++i) {
    for (uint32_t j = 0; j < s.n; ++j) {
      double acc = c[i * s.n + j];
      if (s.d_type == Type::kF64) {
        for (uint32_t k = 0; k < s.k; ++k) acc = std::fma(a[i * s.k + k], b[k * s.n + j], acc);
      } else {
        double sum = 0;
        for (uint32_t k = 0; k < s.k; ++k) sum += a[i * s.k + k] * b[k * s.n + j];
        acc += sum;
      }
      (*d)[i * s.n + j] = acc;
    }
  }
}

void Mma(Warp& w, const Insn& in, uint32_t mask) {
  if (!WholeWarp(w, mask, "mma.sync")) return;
  const MatrixSite& s = Site(w, in);
  if (!FitsTile(w, s)) return;
  Tile a, b, c, d;
  std::fill_n(a.begin(), static_cast<size_t>(s.m) * s.k, 0.0);
  std::fill_n(b.begin(), static_cast<size_t>(s.k) * s.n, 0.0);
  std::fill_n(c.begin(), static_cast<size_t>(s.m) * s.n, 0.0);
  const uint32_t na = static_cast<uint32_t>(s.a.size()) * PerRegister(s.a_type);
  const uint32_t nb = static_cast<uint32_t>(s.b.size()) * PerRegister(s.b_type);
  const uint32_t nc = static_cast<uint32_t>(s.c.size()) * PerRegister(s.c_type);
  const uint32_t nd = static_cast<uint32_t>(s.d.size()) * PerRegister(s.d_type);
  uint32_t row, col;
  for (uint32_t l = 0; l < kWarpSize; ++l) {
    for (uint32_t i = 0; i < na; ++i) {
      MmaCoord(s, 0, l, i, &row, &col);
      a[row * s.k + col] = ReadElement(w, s.a, s.a_type, i, l);
    }
    for (uint32_t i = 0; i < nb; ++i) {
      MmaCoord(s, 1, l, i, &row, &col);
      b[row * s.n + col] = ReadElement(w, s.b, s.b_type, i, l);
    }
    for (uint32_t i = 0; i < nc; ++i) {
      MmaCoord(s, 2, l, i, &row, &col);
      c[row * s.n + col] = ReadElement(w, s.c, s.c_type, i, l);
    }
  }
  MultiplyAdd(s, a, b, c, &d);
  for (uint32_t l = 0; l < kWarpSize; ++l) {
    for (uint32_t i = 0; i < nd; ++i) {
      MmaCoord(s, 2, l, i, &row, &col);
      WriteElement(w, s.d, s.d_type, i, l, d[row * s.n + col], s.satfinite);
    }
  }
}

// wmma: rows and columns of matrix `which` (0 A: M x K, 1 B: K x N, 2 C/D: M x N).
void Dims(const MatrixSite& s, int which, uint32_t* rows, uint32_t* cols) {
  *rows = which == 1 ? s.k : s.m;
  *cols = which == 0 ? s.k : s.n;
}

// softgpu's wmma layout: slot `i` of lane `l` in a fragment of `slots` elements per lane holds
// element (l * slots + i) mod (rows * cols) of the matrix, row-major.
uint32_t WmmaElement(uint32_t lane, uint32_t i, uint32_t slots, uint32_t elements) {
  return (lane * slots + i) % elements;
}

uint8_t* WmmaAddress(Warp& w, const MatrixSite& s, uint32_t row, uint32_t col, uint32_t lane,
                     bool write) {
  const uint64_t* base = s.base == kNoOperand ? nullptr : w.R(s.base);
  const uint64_t stride = s.stride == kNoOperand ? 0 : static_cast<uint32_t>(w.R(s.stride)[lane]);
  const uint64_t index = s.row_major ? row * stride + col : col * stride + row;
  const uint32_t size = Bytes(s.a_type);
  const uint64_t address =
      (base != nullptr ? base[lane] : 0) + static_cast<uint64_t>(s.imm) + index * size;
  return Translate(w, s.space, address, size, size, lane, write);
}

void WmmaLoad(Warp& w, const Insn& in, uint32_t mask) {
  if (!WholeWarp(w, mask, "wmma.load")) return;
  const MatrixSite& s = Site(w, in);
  uint32_t rows, cols;
  Dims(s, s.matrix, &rows, &cols);
  const uint32_t slots = static_cast<uint32_t>(s.d.size()) * PerRegister(s.a_type);
  for (uint32_t l = 0; l < kWarpSize; ++l) {
    for (uint32_t i = 0; i < slots; ++i) {
      const uint32_t e = WmmaElement(l, i, slots, rows * cols);
      const uint8_t* p = WmmaAddress(w, s, e / cols, e % cols, l, false);
      if (p == nullptr) return;
      const uint32_t per = PerRegister(s.a_type);
      const uint32_t bytes = Bytes(s.a_type);
      uint64_t value = 0;
      memcpy(&value, p, bytes);
      uint64_t& reg = w.R(s.d[i / per])[l];
      if (per == 1) {
        reg = value;
      } else {
        const uint32_t shift = 8 * bytes * (i % per);
        const uint64_t field = ((1ull << (8 * bytes)) - 1) << shift;
        reg = (reg & ~field & 0xffffffffull) | (value << shift);
      }
    }
  }
}

void WmmaStore(Warp& w, const Insn& in, uint32_t mask) {
  if (!WholeWarp(w, mask, "wmma.store")) return;
  const MatrixSite& s = Site(w, in);
  uint32_t rows, cols;
  Dims(s, 2, &rows, &cols);
  const uint32_t per = PerRegister(s.a_type);
  const uint32_t slots = static_cast<uint32_t>(s.c.size()) * per;
  const uint32_t bytes = Bytes(s.a_type);
  for (uint32_t l = 0; l < kWarpSize; ++l) {
    for (uint32_t i = 0; i < slots; ++i) {
      const uint32_t e = WmmaElement(l, i, slots, rows * cols);
      uint8_t* p = WmmaAddress(w, s, e / cols, e % cols, l, true);
      if (p == nullptr) return;
      const uint64_t value = w.R(s.c[i / per])[l] >> (8 * bytes * (i % per));
      memcpy(p, &value, bytes);
    }
  }
}

void WmmaMma(Warp& w, const Insn& in, uint32_t mask) {
  if (!WholeWarp(w, mask, "wmma.mma")) return;
  const MatrixSite& s = Site(w, in);
  const std::vector<uint32_t>* regs[3] = {&s.a, &s.b, &s.c};
  const Type types[3] = {s.a_type, s.b_type, s.c_type};
  if (!FitsTile(w, s)) return;
  Tile m[3];
  for (int which = 0; which < 3; ++which) {
    uint32_t rows, cols;
    Dims(s, which, &rows, &cols);
    std::fill_n(m[which].begin(), static_cast<size_t>(rows) * cols, 0.0);
    const uint32_t slots = static_cast<uint32_t>(regs[which]->size()) * PerRegister(types[which]);
    for (uint32_t l = 0; l < kWarpSize; ++l) {
      for (uint32_t i = 0; i < slots; ++i) {
        m[which][WmmaElement(l, i, slots, rows * cols)] =
            ReadElement(w, *regs[which], types[which], i, l);
      }
    }
  }
  Tile d;
  MultiplyAdd(s, m[0], m[1], m[2], &d);
  const uint32_t slots = static_cast<uint32_t>(s.d.size()) * PerRegister(s.d_type);
  for (uint32_t l = 0; l < kWarpSize; ++l) {
    for (uint32_t i = 0; i < slots; ++i) {
      WriteElement(w, s.d, s.d_type, i, l, d[WmmaElement(l, i, slots, s.m * s.n)], s.satfinite);
    }
  }
}

// ldmatrix/stmatrix/movmatrix: element (row, col) of an 8x8 .b16 matrix sits in lane
// row * 4 + col / 2, in the low half for even columns.
uint32_t FragmentLane(uint32_t row, uint32_t col) { return row * 4 + col / 2; }
uint32_t FragmentShift(uint32_t col) { return 16 * (col & 1); }

// The address of row `row` of matrix `i` of an ldmatrix/stmatrix: lane 8i + row's operand.
uint8_t* RowAddress(Warp& w, const MatrixSite& s, uint32_t i, uint32_t row, bool write) {
  const uint32_t lane = 8 * i + row;
  const uint64_t base = s.base == kNoOperand ? 0 : w.R(s.base)[lane];
  return Translate(w, s.space, base + static_cast<uint64_t>(s.imm), 16, 16, lane, write);
}

void Ldmatrix(Warp& w, const Insn& in, uint32_t mask) {
  if (!WholeWarp(w, mask, "ldmatrix")) return;
  const MatrixSite& s = Site(w, in);
  // Every row is read before any destination is written (a destination may be an address).
  uint16_t m[4][8][8];
  for (uint32_t i = 0; i < s.matrix; ++i) {
    for (uint32_t row = 0; row < 8; ++row) {
      const uint8_t* p = RowAddress(w, s, i, row, false);
      if (p == nullptr) return;
      memcpy(m[i][row], p, 16);
    }
  }
  for (uint32_t i = 0; i < s.matrix; ++i) {
    uint64_t out[kWarpSize] = {};
    for (uint32_t r = 0; r < 8; ++r) {
      for (uint32_t c = 0; c < 8; ++c) {
        // .trans: the fragment holds the transpose of the rows as they lie in memory.
        const uint16_t v = s.row_major ? m[i][r][c] : m[i][c][r];
        out[FragmentLane(r, c)] |= static_cast<uint64_t>(v) << FragmentShift(c);
      }
    }
    uint64_t* d = w.R(s.d[i]);
    for (uint32_t t = 0; t < kWarpSize; ++t) d[t] = out[t];
  }
}

void Stmatrix(Warp& w, const Insn& in, uint32_t mask) {
  if (!WholeWarp(w, mask, "stmatrix")) return;
  const MatrixSite& s = Site(w, in);
  for (uint32_t i = 0; i < s.matrix; ++i) {
    const uint64_t* v = w.R(s.c[i]);
    uint16_t m[8][8];
    for (uint32_t r = 0; r < 8; ++r) {
      for (uint32_t c = 0; c < 8; ++c) {
        const uint16_t x = static_cast<uint16_t>(v[FragmentLane(r, c)] >> FragmentShift(c));
        if (s.row_major)
          m[r][c] = x;
        else
          m[c][r] = x;
      }
    }
    for (uint32_t row = 0; row < 8; ++row) {
      uint8_t* p = RowAddress(w, s, i, row, true);
      if (p == nullptr) return;
      memcpy(p, m[row], 16);
    }
  }
}

void Movmatrix(Warp& w, const Insn& in, uint32_t mask) {
  if (!WholeWarp(w, mask, "movmatrix")) return;
  const MatrixSite& s = Site(w, in);
  const uint64_t* a = w.R(s.a[0]);
  uint64_t out[kWarpSize] = {};
  for (uint32_t r = 0; r < 8; ++r) {
    for (uint32_t c = 0; c < 8; ++c) {
      // Element (r, c) of the result is element (c, r) of the source.
      const uint64_t x = (a[FragmentLane(c, r)] >> FragmentShift(r)) & 0xffffu;
      out[FragmentLane(r, c)] |= x << FragmentShift(c);
    }
  }
  uint64_t* d = w.R(s.d[0]);
  for (uint32_t t = 0; t < kWarpSize; ++t) d[t] = out[t];
}

void CvtTf32(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  ForLanes(mask, [&](uint32_t l) {
    uint32_t bits = static_cast<uint32_t>(a[l]);
    if ((bits & 0x7f800000u) != 0x7f800000u) {                // NaN and infinity stay as they are
      if (in.aux == 0) bits += 0x1000u;                       // nearest, ties away
      if (in.aux == 1) bits += 0xfffu + ((bits >> 13) & 1u);  // nearest, ties to even
      bits &= 0xffffe000u;
    }
    d[l] = bits;
  });
}

}  // namespace

Handler CvtTf32Handler() { return &CvtTf32; }

uint32_t FragmentElementsPerRegister(ptx::Type t) {
  switch (t) {
    case Type::kF16:
    case Type::kBF16:
      return 2;
    case Type::kS8:
    case Type::kU8:
      return 4;
    default:
      return 1;
  }
}

Handler MatrixHandler(MatrixOp op) {
  switch (op) {
    case MatrixOp::kMma:
      return &Mma;
    case MatrixOp::kWmmaLoad:
      return &WmmaLoad;
    case MatrixOp::kWmmaStore:
      return &WmmaStore;
    case MatrixOp::kWmmaMma:
      return &WmmaMma;
    case MatrixOp::kLdmatrix:
      return &Ldmatrix;
    case MatrixOp::kStmatrix:
      return &Stmatrix;
    case MatrixOp::kMovmatrix:
      return &Movmatrix;
  }
  return nullptr;
}

}  // namespace softgpu
