// mbarrier objects: split arrive/wait barriers in (shared) memory, for cuda::barrier and
// cooperative_groups code compiled for sm_80 and newer.
#include <atomic>

#include "softgpu/exec.h"
#include "softgpu/handlers.h"

namespace softgpu {
namespace {

// The object: pending arrivals in bits 0-19, the arrivals each phase expects in 20-39, the
// transaction count (bytes expected less bytes completed, 21-bit two's complement) in 40-60, the
// phase in 61-63 (a state names its phase; waits compare phases modulo 8).
constexpr uint64_t kCountMask = (1ull << 20) - 1;
constexpr uint32_t kExpectedShift = 20;
constexpr uint32_t kTxShift = 40;
constexpr uint64_t kTxMask = (1ull << 21) - 1;
constexpr uint32_t kPhaseShift = 61;
constexpr uint64_t kPhaseMask = 7;

uint64_t Pending(uint64_t v) { return v & kCountMask; }
uint64_t Expected(uint64_t v) { return (v >> kExpectedShift) & kCountMask; }
int64_t Tx(uint64_t v) {
  const uint64_t raw = (v >> kTxShift) & kTxMask;
  return raw & (1ull << 20) ? static_cast<int64_t>(raw) - (1ll << 21) : static_cast<int64_t>(raw);
}
uint64_t Phase(uint64_t v) { return v >> kPhaseShift; }
uint64_t Make(uint64_t phase, uint64_t expected, uint64_t pending, int64_t tx = 0) {
  return ((phase & kPhaseMask) << kPhaseShift) |
         ((static_cast<uint64_t>(tx) & kTxMask) << kTxShift) |
         ((expected & kCountMask) << kExpectedShift) | (pending & kCountMask);
}

// Applies `arrivals` arrivals (dropping `drop` from the expected count of later phases) and adds
// `tx` to the transaction count, atomically; completes the phase when nothing is pending. Returns
// the state the caller's arrival left in its phase (which that state names).
uint64_t Update(std::atomic_ref<uint64_t> object, uint64_t arrivals, uint64_t drop, int64_t tx) {
  uint64_t old = object.load(std::memory_order_relaxed);
  uint64_t next, state;
  do {
    uint64_t expected = Expected(old);
    expected = expected > drop ? expected - drop : 0;
    const uint64_t pending = Pending(old) > arrivals ? Pending(old) - arrivals : 0;
    const int64_t count = Tx(old) + tx;
    state = Make(Phase(old), expected, pending, count);
    // The phase completes: the next one expects the (new) count and no transactions.
    next = pending == 0 && count == 0 ? Make(Phase(old) + 1, expected, expected) : state;
  } while (!object.compare_exchange_weak(old, next, std::memory_order_acq_rel,
                                         std::memory_order_relaxed));
  return state;
}

}  // namespace

void MbarrierCompleteTx(uint64_t* object, uint64_t bytes) {
  Update(std::atomic_ref<uint64_t>(*object), 0, 0, -static_cast<int64_t>(bytes & kTxMask));
}

namespace {

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
          const uint64_t state =
              Update(object, count, kOp == MbarrierOp::kArriveDrop ? count : 0, 0);
          if (in.a[0] != kNoOperand) w.R(in.a[0])[l] = state;
          break;
        }
        case MbarrierOp::kArriveExpectTx: {
          const int64_t bytes = static_cast<int64_t>(w.R(in.a[1])[l] & kTxMask);
          const uint64_t state = Update(object, 1, 0, bytes);
          if (in.a[0] != kNoOperand) w.R(in.a[0])[l] = state;
          break;
        }
        case MbarrierOp::kExpectTx:
        case MbarrierOp::kCompleteTx: {
          const int64_t bytes = static_cast<int64_t>(w.R(in.a[1])[l] & kTxMask);
          Update(object, 0, 0, kOp == MbarrierOp::kExpectTx ? bytes : -bytes);
          break;
        }
        case MbarrierOp::kTestWait:
        case MbarrierOp::kTestWaitParity: {
          const uint64_t current = Phase(object.load(std::memory_order_acquire));
          const uint64_t arg = w.R(in.a[1])[l];
          // A state names the phase it arrived in; a parity names the current or the previous
          // phase, which has completed exactly when the current phase's parity differs.
          const bool done = kOp == MbarrierOp::kTestWait
                                ? ((current ^ Phase(arg)) & kPhaseMask) != 0
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
    case MbarrierOp::kExpectTx:
      return &Mbarrier<kSpace, MbarrierOp::kExpectTx>;
    case MbarrierOp::kCompleteTx:
      return &Mbarrier<kSpace, MbarrierOp::kCompleteTx>;
    case MbarrierOp::kArriveExpectTx:
      return &Mbarrier<kSpace, MbarrierOp::kArriveExpectTx>;
  }
  return nullptr;
}

}  // namespace

Handler MbarrierHandler(MbarrierOp op, MemSpace space) {
  return space == MemSpace::kShared ? ForSpace<MemSpace::kShared>(op)
                                    : ForSpace<MemSpace::kGeneric>(op);
}

}  // namespace softgpu
