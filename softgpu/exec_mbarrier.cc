// mbarrier objects: split arrive/wait barriers in (shared) memory, for cuda::barrier and
// cooperative_groups code compiled for sm_80 and newer.
#include <atomic>

#include "softgpu/exec.h"
#include "softgpu/handlers.h"

namespace softgpu {
namespace {

constexpr uint64_t kCountMask = (1ull << 20) - 1;
constexpr uint32_t kExpectedShift = 20;
constexpr uint32_t kPhaseShift = 40;

uint64_t Pending(uint64_t v) { return v & kCountMask; }
uint64_t Expected(uint64_t v) { return (v >> kExpectedShift) & kCountMask; }
uint64_t Phase(uint64_t v) { return v >> kPhaseShift; }
uint64_t Make(uint64_t phase, uint64_t expected, uint64_t pending) {
  return (phase << kPhaseShift) | ((expected & kCountMask) << kExpectedShift) |
         (pending & kCountMask);
}

template <MemSpace kSpace>
uint8_t* Object(Warp& w, const Insn& in, uint32_t lane, bool write) {
  const uint64_t base = in.a[4] == kNoOperand ? 0 : w.R(in.a[4])[lane];
  const uint64_t address = base + static_cast<uint64_t>(in.imm);
  constexpr ptx::Space space =
      kSpace == MemSpace::kShared ? ptx::Space::kShared : ptx::Space::kGeneric;
  return Translate(w, space, address, 8, 8, lane, write);
}

template <MemSpace kSpace, MbarrierOp kOp>
void Mbarrier(Warp& w, const Insn& in, uint32_t mask) {
  if constexpr (kOp == MbarrierOp::kPendingCount) {
    uint64_t* d = w.R(in.a[0]);
    const uint64_t* state = w.R(in.a[1]);
    ForLanes(mask, [&](uint32_t l) { d[l] = Pending(state[l]); });
    return;
  } else {
    const bool writes = kOp != MbarrierOp::kTestWait && kOp != MbarrierOp::kTestWaitParity;
    // Lanes act one after another, as the hardware serialises their arrivals.
    for (uint32_t m = mask; m != 0; m &= m - 1) {
      const uint32_t l = static_cast<uint32_t>(std::countr_zero(m));
      uint8_t* p = Object<kSpace>(w, in, l, writes);
      if (p == nullptr) return;
      std::atomic_ref<uint64_t> object(*reinterpret_cast<uint64_t*>(p));
      switch (kOp) {
        case MbarrierOp::kInit: {
          const uint64_t count = w.R(in.a[1])[l] & kCountMask;
          object.store(Make(0, count, count), std::memory_order_release);
          break;
        }
        case MbarrierOp::kInval:
          object.store(0, std::memory_order_release);
          break;
        case MbarrierOp::kArrive:
        case MbarrierOp::kArriveDrop: {
          const uint64_t count = in.a[1] == kNoOperand ? 1 : (w.R(in.a[1])[l] & kCountMask);
          uint64_t old = object.load(std::memory_order_relaxed);
          uint64_t next, state;
          do {
            uint64_t expected = Expected(old);
            if (kOp == MbarrierOp::kArriveDrop) expected = expected > count ? expected - count : 0;
            const uint64_t pending = Pending(old) > count ? Pending(old) - count : 0;
            state = Make(Phase(old), expected, pending);
            // The last arrival completes the phase: the next one expects the (new) count.
            next = pending == 0 ? Make(Phase(old) + 1, expected, expected) : state;
          } while (!object.compare_exchange_weak(old, next, std::memory_order_acq_rel,
                                                 std::memory_order_relaxed));
          if (in.a[0] != kNoOperand) w.R(in.a[0])[l] = state;
          break;
        }
        case MbarrierOp::kTestWait:
        case MbarrierOp::kTestWaitParity: {
          const uint64_t current = Phase(object.load(std::memory_order_acquire));
          const uint64_t arg = w.R(in.a[1])[l];
          // A state names the phase it arrived in; a parity names the current or the previous
          // phase, which has completed exactly when the current phase's parity differs.
          const bool done = kOp == MbarrierOp::kTestWait
                                ? ((current ^ Phase(arg)) & ((1ull << 24) - 1)) != 0
                                : (current & 1) != (arg & 1);
          uint32_t& pred = w.preds[in.a[0]];
          pred = done ? (pred | (1u << l)) : (pred & ~(1u << l));
          break;
        }
        default:
          break;
      }
    }
  }
}

template <MemSpace kSpace>
Handler ForSpace(MbarrierOp op) {
  switch (op) {
    case MbarrierOp::kInit:
      return &Mbarrier<kSpace, MbarrierOp::kInit>;
    case MbarrierOp::kInval:
      return &Mbarrier<kSpace, MbarrierOp::kInval>;
    case MbarrierOp::kArrive:
      return &Mbarrier<kSpace, MbarrierOp::kArrive>;
    case MbarrierOp::kArriveDrop:
      return &Mbarrier<kSpace, MbarrierOp::kArriveDrop>;
    case MbarrierOp::kTestWait:
      return &Mbarrier<kSpace, MbarrierOp::kTestWait>;
    case MbarrierOp::kTestWaitParity:
      return &Mbarrier<kSpace, MbarrierOp::kTestWaitParity>;
    case MbarrierOp::kPendingCount:
      return &Mbarrier<kSpace, MbarrierOp::kPendingCount>;
  }
  return nullptr;
}

}  // namespace

Handler MbarrierHandler(MbarrierOp op, MemSpace space) {
  return space == MemSpace::kShared ? ForSpace<MemSpace::kShared>(op)
                                    : ForSpace<MemSpace::kGeneric>(op);
}

}  // namespace softgpu
