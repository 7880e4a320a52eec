// Execution state shared by the interpreter's warp scheduler and the instruction handlers: the
// registers of one warp, the block it belongs to, and checked access to every state space.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "softgpu/heap.h"
#include "softgpu/memory.h"
#include "softgpu/program.h"

namespace softgpu {

// Generic addresses inside these windows name shared memory (of the running block) or local
// memory (of the running thread); everything else is global.
constexpr uint64_t kSharedWindowBase = 0x0000100000000000ull;
constexpr uint64_t kLocalWindowBase = 0x0000200000000000ull;
// Generic addresses of the kernel's parameter buffer (cvta.param), read-only.
constexpr uint64_t kParamWindowBase = 0x0000300000000000ull;
constexpr uint64_t kWindowSize = 1ull << 32;
static_assert(kParamWindowBase + kWindowSize <= kGlobalAddressBase,
              "generic-address windows must lie below device memory");

enum class FaultKind : uint8_t {
  kNone,
  kIllegalAddress,
  kMisalignedAddress,
  kUnsupported,
  kTrap,
  kStackOverflow,
  kAssert,          // __assertfail
  kTimeout,         // ran past the configured kernel time limit
  kCancelled,       // the context is being destroyed
  kOutOfResources,  // the host could not hold the block's registers or local memory
};

struct Fault {
  FaultKind kind = FaultKind::kNone;
  std::string message;
  uint32_t line = 0;  // PTX line of the instruction that faulted, where known
};

// Collects device printf output of one launch.
class PrintfSink {
 public:
  virtual ~PrintfSink() = default;
  virtual void Write(std::string text) = 0;
};

struct TextureObject;
struct Block;

// Most blocks a cluster may have (16 with CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
// 8 otherwise).
constexpr uint32_t kMaxClusterBlocks = 16;
// Shared-memory addresses of a cluster's distributed shared memory (shared::cluster): byte `o`
// of the block of rank `r` is ((r + 1) << kClusterRankShift) | o. Addresses below
// 1 << kClusterRankShift are the running block's own (a shared::cta address is a valid
// shared::cluster address naming the block itself, as PTX defines).
constexpr uint32_t kClusterRankShift = 24;

// The blocks of one thread-block cluster and its barrier (barrier.cluster). The blocks are
// resident together and run by turns on one host thread, so nothing here needs a lock. A launch
// without clusters gives each block a cluster of its own.
struct Cluster {
  uint32_t dims[3] = {1, 1, 1};
  uint32_t size = 1;                      // blocks
  bool explicit_launch = false;           // %is_explicit_cluster
  Block* blocks[kMaxClusterBlocks] = {};  // by rank
  // barrier.cluster: threads not exited, arrivals in the current phase, phases completed.
  uint32_t expected = 0;
  uint32_t arrived = 0;
  uint32_t phase = 0;

  // `n` threads arrive; completes the phase when every thread not exited has.
  void Arrive(uint32_t n) {
    arrived += n;
    if (arrived >= expected) {
      arrived = 0;
      ++phase;
    }
  }
  // `n` threads exited, `pending` of which had arrived in the current phase (they no longer
  // count either way); the others may now be complete.
  void Exit(uint32_t n, uint32_t pending) {
    expected -= n;
    arrived -= pending;
    if (arrived != 0 && arrived >= expected) {
      arrived = 0;
      ++phase;
    }
  }
};

// A texture or surface object a block has looked up, with the storage it reads pinned.
struct BoundTexture {
  uint64_t handle = 0;
  std::shared_ptr<const TextureObject> object;
  std::shared_ptr<Allocation> storage;
  uint8_t* data = nullptr;  // host bytes of the object's texel (0, 0, 0)
};

// Everything the warps of one block share.
struct Block {
  const Program* program = nullptr;
  const Function* kernel = nullptr;
  const uint64_t* consts = nullptr;  // module instance constant pool (relocated)
  const AddressSpace* memory = nullptr;
  uint8_t* shared = nullptr;
  uint32_t shared_size = 0;
  uint32_t dynamic_shared_size = 0;
  const uint8_t* params = nullptr;  // kernel parameter buffer
  uint32_t param_size = 0;
  uint32_t ctaid[3] = {};
  uint32_t nctaid[3] = {};
  uint32_t ntid[3] = {};
  uint32_t num_threads = 0;
  uint32_t num_warps = 0;
  uint32_t sm_count = 1;
  uint8_t* local = nullptr;  // num_threads * local_per_thread bytes
  uint32_t local_per_thread = 0;
  PrintfSink* printf_sink = nullptr;
  DeviceHeap* heap = nullptr;  // device malloc/free
  Fault* fault = nullptr;      // first fault of the block
  // bar.red accumulators for the barrier in progress.
  uint32_t bar_red_count = 0;
  bool bar_red_and = true;
  bool bar_red_or = false;
  uint32_t watch_countdown = 1;    // backward branches until the next cancellation check
  uint32_t yield_countdown = 1;    // backward branches until the running warp lets others run
  uint32_t block_countdown = 1;    // resident: warp yields until the block lets others run
  bool cooperative = false;        // launched with cuLaunchCooperativeKernel (or the attribute)
  uint64_t grid_workspace = 0;     // device address read through %envreg1:%envreg2, or 0
  uint64_t lane_instructions = 0;  // instructions executed, times the lanes active (statistics)
  // Cache of the last global allocation hit (the common case is a few large arrays).
  std::shared_ptr<Allocation> cached[4];
  uint32_t cache_next = 0;
  // The launching context (identity only): texture and surface objects must belong to it.
  const void* owner = nullptr;
  BoundTexture textures[2];  // the objects used last
  uint32_t texture_next = 0;
  // The block's cluster (never null while it runs), its rank there, and per thread the phase
  // (plus one) of its barrier.cluster arrival not yet waited for, 0 if none.
  Cluster* cluster = nullptr;
  uint32_t cluster_rank = 0;
  uint32_t* cluster_arrivals = nullptr;
  bool resident = false;  // cooperative or clustered: yields to other blocks (block_countdown)
};

// One warp's state inside the current function activation.
struct Warp {
  uint64_t* regs = nullptr;   // num_regs * 32 slots, register-major
  uint32_t* preds = nullptr;  // one lane mask per predicate register
  const uint64_t* consts = nullptr;
  uint8_t* frame = nullptr;  // per-lane parameter frames: lane l at frame + l * frame_stride
  uint32_t frame_stride = 0;
  uint32_t local_base = 0;  // local-space address of this activation's .local variables
  Block* block = nullptr;
  uint32_t index = 0;   // warp index in the block
  uint32_t live = 0;    // lanes that exist (partial last warp)
  uint32_t active = 0;  // lanes executing the current instruction (for activemask)
  bool faulted = false;
  // Set by a waiting instruction (Control::kYield) whose wait is not over: the warp stays at
  // it and lets the others run.
  bool stall = false;

  uint64_t* R(uint32_t op) const {
    return (op & kConstOperand) ? const_cast<uint64_t*>(consts) + (op & ~kConstOperand) * 32
                                : regs + op * 32;
  }
  uint32_t ThreadIndex(uint32_t lane) const { return index * kWarpSize + lane; }
  void Tid(uint32_t lane, uint32_t tid[3]) const {
    const uint32_t t = ThreadIndex(lane);
    tid[0] = t % block->ntid[0];
    tid[1] = (t / block->ntid[0]) % block->ntid[1];
    tid[2] = t / (block->ntid[0] * block->ntid[1]);
  }
  // Records a fault (first one wins) and stops the warp.
  void SetFault(FaultKind kind, std::string message);
};

template <typename F>
inline void ForLanes(uint32_t mask, F&& f) {
  if (mask == kFullMask) {
    for (uint32_t l = 0; l < kWarpSize; ++l) f(l);
  } else {
    while (mask != 0) {
      const uint32_t l = static_cast<uint32_t>(std::countr_zero(mask));
      mask &= mask - 1;
      f(l);
    }
  }
}

// Register slot <-> typed value. Slots hold the value in their low bits, zero-extended.
template <typename T>
inline T Get(uint64_t slot) {
  if constexpr (sizeof(T) == 8) {
    return std::bit_cast<T>(slot);
  } else if constexpr (sizeof(T) == 4) {
    return std::bit_cast<T>(static_cast<uint32_t>(slot));
  } else if constexpr (sizeof(T) == 2) {
    return std::bit_cast<T>(static_cast<uint16_t>(slot));
  } else {
    return std::bit_cast<T>(static_cast<uint8_t>(slot));
  }
}

template <typename T>
inline uint64_t Put(T v) {
  if constexpr (sizeof(T) == 8) {
    return std::bit_cast<uint64_t>(v);
  } else if constexpr (sizeof(T) == 4) {
    return std::bit_cast<uint32_t>(v);
  } else if constexpr (sizeof(T) == 2) {
    return std::bit_cast<uint16_t>(v);
  } else {
    return std::bit_cast<uint8_t>(v);
  }
}

// Host pointer for `size` bytes at `address` in `space` for `lane`, or null after recording a
// fault. Checks bounds and natural alignment (`align`, a power of two).
// `write` refuses read-only memory (the kernel parameter window).
uint8_t* TranslateSlow(Warp& w, ptx::Space space, uint64_t address, uint32_t size, uint32_t align,
                       uint32_t lane, bool write);

inline uint8_t* Translate(Warp& w, ptx::Space space, uint64_t address, uint32_t size,
                          uint32_t align, uint32_t lane, bool write) {
  // Generic addresses at or above the global base are global (the windows lie below it).
  if (space == ptx::Space::kGlobal || space == ptx::Space::kConst ||
      (space == ptx::Space::kGeneric && address >= kGlobalAddressBase)) {
    const Allocation* a = w.block->cached[0].get();
    if (a != nullptr && address - a->base < a->size && size <= a->size - (address - a->base) &&
        (address & (align - 1)) == 0) {
      return a->host + (address - a->base);
    }
  }
  if (space == ptx::Space::kShared) {
    const Block& b = *w.block;
    if (address < b.shared_size && size <= b.shared_size - address &&
        (address & (align - 1)) == 0) {
      return b.shared + address;
    }
  } else if (space == ptx::Space::kLocal) {
    const Block& b = *w.block;
    if (address < b.local_per_thread && size <= b.local_per_thread - address &&
        (address & (align - 1)) == 0) {
      return b.local + static_cast<uint64_t>(w.ThreadIndex(lane)) * b.local_per_thread + address;
    }
  }
  return TranslateSlow(w, space, address, size, align, lane, write);
}

}  // namespace softgpu
