// Warp-level collective handlers: shuffles, votes, match, redux, activemask, elect, bar.red.
#include <bit>

#include "softgpu/exec.h"
#include "softgpu/handlers.h"

namespace softgpu {
namespace {

using ptx::Type;

template <ShflMode kMode>
void Shfl(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  const uint64_t* b = w.R(in.a[2]);
  const uint64_t* c = w.R(in.a[3]);
  uint64_t src[kWarpSize];
  memcpy(src, a, sizeof src);
  uint32_t valid = 0;
  ForLanes(mask, [&](uint32_t l) {
    const int32_t lane = static_cast<int32_t>(l);
    const int32_t bval = static_cast<int32_t>(b[l] & 0x1f);
    const int32_t cval = static_cast<int32_t>(c[l] & 0x1f);
    const int32_t seg = static_cast<int32_t>((c[l] >> 8) & 0x1f);
    const int32_t max_lane = (lane & seg) | (cval & ~seg);
    const int32_t min_lane = lane & seg;
    int32_t j;
    bool ok;
    switch (kMode) {
      case ShflMode::kUp:
        j = lane - bval;
        ok = j >= max_lane;
        break;
      case ShflMode::kDown:
        j = lane + bval;
        ok = j <= max_lane;
        break;
      case ShflMode::kBfly:
        j = lane ^ bval;
        ok = j <= max_lane;
        break;
      default:
        j = min_lane | (bval & ~seg);
        ok = j <= max_lane;
        break;
    }
    if (!ok) j = lane;
    // A source lane that does not take part in this shfl (inactive, or outside the member
    // mask) has no value to give: the result is undefined, and GPUs give 0, which code such as
    // NVIDIA's reduction sample (a shuffle tree over a ballot of the active lanes) relies on.
    d[l] = (mask >> (j & 31)) & 1u ? static_cast<uint32_t>(src[j & 31]) : 0;
    if (ok) valid |= 1u << l;
  });
  if (in.a[5] != kNoOperand) {
    uint32_t& p = w.preds[in.a[5]];
    p = (p & ~mask) | valid;
  }
}

template <VoteMode kMode>
void Vote(Warp& w, const Insn& in, uint32_t mask) {
  uint32_t p = w.preds[in.a[1]];
  if (in.aux2) p = ~p;
  p &= mask;
  if constexpr (kMode == VoteMode::kBallot) {
    uint64_t* d = w.R(in.a[0]);
    ForLanes(mask, [&](uint32_t l) { d[l] = p; });
  } else {
    bool r;
    if (kMode == VoteMode::kAll)
      r = p == mask;
    else if (kMode == VoteMode::kAny)
      r = p != 0;
    else
      r = p == 0 || p == mask;
    uint32_t& d = w.preds[in.a[0]];
    d = (d & ~mask) | (r ? mask : 0);
  }
}

template <bool kAll, typename T>
void Match(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  T v[kWarpSize];
  ForLanes(mask, [&](uint32_t l) { v[l] = Get<T>(a[l]); });
  if constexpr (kAll) {
    bool same = true;
    const uint32_t first = static_cast<uint32_t>(std::countr_zero(mask | (mask == 0 ? 1u : 0u)));
    ForLanes(mask, [&](uint32_t l) { same = same && v[l] == v[first]; });
    ForLanes(mask, [&](uint32_t l) { d[l] = same ? mask : 0; });
    if (in.a[5] != kNoOperand) {
      uint32_t& p = w.preds[in.a[5]];
      p = (p & ~mask) | (same ? mask : 0);
    }
  } else {
    uint32_t groups[kWarpSize];
    ForLanes(mask, [&](uint32_t l) {
      uint32_t m = 0;
      ForLanes(mask, [&](uint32_t k) {
        if (v[k] == v[l]) m |= 1u << k;
      });
      groups[l] = m;
    });
    ForLanes(mask, [&](uint32_t l) { d[l] = groups[l]; });
  }
}

template <int kOp, typename T>
void Redux(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  T acc{};
  bool first = true;
  ForLanes(mask, [&](uint32_t l) {
    const T v = Get<T>(a[l]);
    if (first) {
      acc = v;
      first = false;
      return;
    }
    switch (kOp) {
      case 0:
        acc = static_cast<T>(static_cast<uint32_t>(acc) + static_cast<uint32_t>(v));
        break;
      case 1:
        acc = v < acc ? v : acc;
        break;
      case 2:
        acc = v > acc ? v : acc;
        break;
      case 3:
        acc = acc & v;
        break;
      case 4:
        acc = acc | v;
        break;
      default:
        acc = acc ^ v;
        break;
    }
  });
  ForLanes(mask, [&](uint32_t l) { d[l] = Put(acc); });
}

void Activemask(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  ForLanes(mask, [&](uint32_t l) { d[l] = w.active; });
}

void Elect(Warp& w, const Insn& in, uint32_t mask) {
  const uint32_t members = mask & static_cast<uint32_t>(w.R(in.a[2])[std::countr_zero(mask)]);
  const uint32_t leader = members == 0 ? 32 : static_cast<uint32_t>(std::countr_zero(members));
  if (in.a[0] != kNoOperand) {
    uint64_t* d = w.R(in.a[0]);
    ForLanes(mask, [&](uint32_t l) { d[l] = leader; });
  }
  if (in.a[1] != kNoOperand) {
    uint32_t& p = w.preds[in.a[1]];
    p = (p & ~mask) | (leader < 32 ? 1u << leader : 0u);
  }
}

void BarRed(Warp& w, const Insn& in, uint32_t mask) {
  uint32_t p = w.preds[in.a[1]];
  if (in.aux2) p = ~p;
  p &= mask;
  Block& b = *w.block;
  b.bar_red_count += static_cast<uint32_t>(std::popcount(p));
  if (p != mask) b.bar_red_and = false;
  if (p != 0) b.bar_red_or = true;
}

}  // namespace

Handler ShflHandler(ShflMode mode) {
  switch (mode) {
    case ShflMode::kUp:
      return &Shfl<ShflMode::kUp>;
    case ShflMode::kDown:
      return &Shfl<ShflMode::kDown>;
    case ShflMode::kBfly:
      return &Shfl<ShflMode::kBfly>;
    case ShflMode::kIdx:
      return &Shfl<ShflMode::kIdx>;
  }
  return nullptr;
}

Handler VoteHandler(VoteMode mode) {
  switch (mode) {
    case VoteMode::kAll:
      return &Vote<VoteMode::kAll>;
    case VoteMode::kAny:
      return &Vote<VoteMode::kAny>;
    case VoteMode::kUni:
      return &Vote<VoteMode::kUni>;
    case VoteMode::kBallot:
      return &Vote<VoteMode::kBallot>;
  }
  return nullptr;
}

Handler MatchHandler(bool all, Type t) {
  const uint32_t size = TypeSize(t);
  if (size == 4) return all ? &Match<true, uint32_t> : &Match<false, uint32_t>;
  if (size == 8) return all ? &Match<true, uint64_t> : &Match<false, uint64_t>;
  return nullptr;
}

Handler ReduxHandler(int op, Type t) {
  const bool is_signed = t == Type::kS32;
  switch (op) {
    case 0:
      return (t == Type::kU32 || t == Type::kS32) ? &Redux<0, uint32_t> : nullptr;
    case 1:
      return is_signed ? &Redux<1, int32_t> : (t == Type::kU32 ? &Redux<1, uint32_t> : nullptr);
    case 2:
      return is_signed ? &Redux<2, int32_t> : (t == Type::kU32 ? &Redux<2, uint32_t> : nullptr);
    case 3:
      return t == Type::kB32 ? &Redux<3, uint32_t> : nullptr;
    case 4:
      return t == Type::kB32 ? &Redux<4, uint32_t> : nullptr;
    case 5:
      return t == Type::kB32 ? &Redux<5, uint32_t> : nullptr;
    default:
      return nullptr;
  }
}

Handler ActivemaskHandler() { return &Activemask; }
Handler ElectHandler() { return &Elect; }
Handler BarRedHandler() { return &BarRed; }

}  // namespace softgpu
