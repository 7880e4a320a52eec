// Loads, stores, atomics and address-space conversions, all bounds-checked.
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <type_traits>

#include "softgpu/atomics.h"
#include "softgpu/exec.h"
#include "softgpu/handlers.h"

namespace softgpu {

void Warp::SetFault(FaultKind kind, std::string message) {
  faulted = true;
  if (block->fault != nullptr && block->fault->kind == FaultKind::kNone) {
    block->fault->kind = kind;
    block->fault->message = std::move(message);
  }
}

namespace {

const char* SpaceName(ptx::Space s) {
  switch (s) {
    case ptx::Space::kGeneric:
      return "generic";
    case ptx::Space::kGlobal:
      return "global";
    case ptx::Space::kShared:
      return "shared";
    case ptx::Space::kLocal:
      return "local";
    case ptx::Space::kConst:
      return "const";
    case ptx::Space::kParam:
      return "param";
  }
  return "?";
}

void Fail(Warp& w, FaultKind kind, ptx::Space space, uint64_t address, uint32_t size,
          uint32_t lane) {
  uint32_t tid[3];
  w.Tid(lane, tid);
  const Block& b = *w.block;
  char msg[256];
  snprintf(msg, sizeof msg,
           "%s %u-byte %s access at 0x%" PRIx64 " by block (%u,%u,%u) thread (%u,%u,%u)",
           kind == FaultKind::kMisalignedAddress ? "misaligned" : "out-of-bounds", size,
           SpaceName(space), address, b.ctaid[0], b.ctaid[1], b.ctaid[2], tid[0], tid[1], tid[2]);
  w.SetFault(kind, msg);
}

}  // namespace

uint8_t* TranslateSlow(Warp& w, ptx::Space space, uint64_t address, uint32_t size, uint32_t align,
                       uint32_t lane, bool write) {
  Block& b = *w.block;
  if (space == ptx::Space::kGeneric) {
    if (address - kSharedWindowBase < kWindowSize) {
      space = ptx::Space::kShared;
      address -= kSharedWindowBase;
    } else if (address - kLocalWindowBase < kWindowSize) {
      space = ptx::Space::kLocal;
      address -= kLocalWindowBase;
    } else if (address - kParamWindowBase < kWindowSize) {
      space = ptx::Space::kParam;
      address -= kParamWindowBase;
    } else {
      space = ptx::Space::kGlobal;
    }
  }
  if ((address & (align - 1)) != 0) {
    Fail(w, FaultKind::kMisalignedAddress, space, address, size, lane);
    return nullptr;
  }
  switch (space) {
    case ptx::Space::kShared:
      if (address - kSharedWindowBase < kWindowSize) address -= kSharedWindowBase;
      // Shared and local addresses are 32 bits: [%r + imm] with a 32-bit register wraps there
      // (cuSPARSE indexes a shared array from below its start through such a wrap).
      address = static_cast<uint32_t>(address);
      if (address >> kClusterRankShift != 0) {
        // Distributed shared memory: another block of the cluster (or this one, by rank).
        const uint64_t rank = (address >> kClusterRankShift) - 1;
        const Cluster* c = b.cluster;
        if (c == nullptr || rank >= c->size || c->blocks[rank] == nullptr) break;
        const Block& peer = *c->blocks[rank];
        const uint64_t offset = address & ((1u << kClusterRankShift) - 1);
        if (offset >= peer.shared_size || size > peer.shared_size - offset) break;
        return peer.shared + offset;
      }
      if (address >= b.shared_size || size > b.shared_size - address) break;
      return b.shared + address;
    case ptx::Space::kLocal:
      if (address - kLocalWindowBase < kWindowSize) address -= kLocalWindowBase;
      address = static_cast<uint32_t>(address);
      if (address >= b.local_per_thread || size > b.local_per_thread - address) break;
      return b.local + static_cast<uint64_t>(w.ThreadIndex(lane)) * b.local_per_thread + address;
    case ptx::Space::kParam:
      if (write || address >= b.param_size || size > b.param_size - address) break;
      return const_cast<uint8_t*>(b.params) + address;
    case ptx::Space::kGlobal:
    case ptx::Space::kConst: {
      for (uint32_t i = 0; i < 4; ++i) {
        const Allocation* a = b.cached[i].get();
        if (a != nullptr && address - a->base < a->size && size <= a->size - (address - a->base)) {
          if (i != 0) std::swap(b.cached[0], b.cached[i]);
          return b.cached[0]->host + (address - b.cached[0]->base);
        }
      }
      std::shared_ptr<Allocation> a = b.memory->Find(address, size);
      // Not the context's own: memory of a context it has peer access to (cuCtxEnablePeerAccess),
      // cached like its own from here on (if the peer goes meanwhile, the block still reaches
      // what it cached until it ends: the pin keeps those bytes alive, nobody else's).
      if (a == nullptr) a = b.memory->FindInPeers(address, size);
      // Page-locked host memory, which every context reaches at its own address (unless the
      // process said that kernels reach none: memory.h).
      if (a == nullptr && KernelHostAccess()) a = GlobalHostMappings().Find(address, size);
      if (a == nullptr) break;
      // Keep the most recent hit in slot 0; evict the oldest.
      b.cached[3] = std::move(b.cached[2]);
      b.cached[2] = std::move(b.cached[1]);
      b.cached[1] = std::move(b.cached[0]);
      b.cached[0] = std::move(a);
      return b.cached[0]->host + (address - b.cached[0]->base);
    }
    default:
      break;
  }
  Fail(w, FaultKind::kIllegalAddress, space, address, size, lane);
  return nullptr;
}

namespace {

using ptx::Type;

// Lane values of an absent base register: all zero.
alignas(64) const uint64_t kZeros[kWarpSize] = {};

constexpr ptx::Space ToSpace(MemSpace s) {
  switch (s) {
    case MemSpace::kGlobal:
      return ptx::Space::kGlobal;
    case MemSpace::kShared:
      return ptx::Space::kShared;
    case MemSpace::kLocal:
      return ptx::Space::kLocal;
    case MemSpace::kConst:
      return ptx::Space::kConst;
    default:
      return ptx::Space::kGeneric;
  }
}

template <typename T>
uint64_t Extend(T v) {
  if constexpr (std::is_signed_v<T>) {
    return static_cast<uint64_t>(static_cast<int64_t>(v));
  } else {
    return static_cast<uint64_t>(v);
  }
}

// A vector access of 8 or 16 bytes moves as one access, as the GPU's does (PTX requires it to be
// aligned to its whole size; Translate checked that of the device address): CUB's decoupled
// look-back publishes a tile's status and value in one vector store that other blocks, running
// on other host threads, read with one vector load, and element by element a reader could see a
// new status beside an old value. False (the caller goes element by element) for other sizes
// and for host memory not aligned like its device address.
template <uint32_t kSize>
bool LoadWhole(const uint8_t* p, uint8_t* out) {
  if ((reinterpret_cast<uintptr_t>(p) & (kSize - 1)) != 0) return false;
  if constexpr (kSize == 8) {
    const uint64_t v = __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_RELAXED);
    memcpy(out, &v, 8);
    return true;
#if defined(__SSE2__)
  } else if constexpr (kSize == 16) {
    // MOVDQA: 16-byte aligned SSE accesses are single accesses on the x86-64 processors that
    // have AVX (Intel SDM vol. 3A, 9.1.1; AMD likewise). Elsewhere 16 bytes go element by
    // element.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                     _mm_load_si128(reinterpret_cast<const __m128i*>(p)));
    return true;
#endif
  } else {
    return false;
  }
}

template <uint32_t kSize>
bool StoreWhole(uint8_t* p, const uint8_t* in) {
  if ((reinterpret_cast<uintptr_t>(p) & (kSize - 1)) != 0) return false;
  if constexpr (kSize == 8) {
    uint64_t v;
    memcpy(&v, in, 8);
    __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELAXED);
    return true;
#if defined(__SSE2__)
  } else if constexpr (kSize == 16) {
    _mm_store_si128(reinterpret_cast<__m128i*>(p),
                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
    return true;
#endif
  } else {
    return false;
  }
}

template <MemSpace kSpace, typename T, uint32_t kCount>
void Load(Warp& w, const Insn& in, uint32_t mask) {
  constexpr uint32_t kSize = sizeof(T) * kCount;
  uint64_t* d[kCount];
  for (uint32_t i = 0; i < kCount; ++i) d[i] = in.a[i] == kNoOperand ? nullptr : w.R(in.a[i]);
  if constexpr (kSpace == MemSpace::kKernelParam) {
    if (in.a[4] != kNoOperand) {
      // Through a register holding a parameter-space address: per lane.
      const uint64_t* base = w.R(in.a[4]);
      const uint64_t imm = static_cast<uint64_t>(in.imm);
      ForLanes(mask, [&](uint32_t l) {
        if (w.faulted) return;
        const uint64_t offset = base[l] + imm;
        if (offset > w.block->param_size || kSize > w.block->param_size - offset) {
          w.SetFault(FaultKind::kIllegalAddress, "kernel parameter read past the parameter buffer");
          return;
        }
        for (uint32_t i = 0; i < kCount; ++i) {
          T v;
          memcpy(&v, w.block->params + offset + i * sizeof(T), sizeof v);
          if (d[i] != nullptr) d[i][l] = Extend(v);
        }
      });
      return;
    }
    const uint64_t offset = static_cast<uint64_t>(in.imm);
    if (offset > w.block->param_size || kSize > w.block->param_size - offset) {
      w.SetFault(FaultKind::kIllegalAddress, "kernel parameter read past the parameter buffer");
      return;
    }
    for (uint32_t i = 0; i < kCount; ++i) {
      if (d[i] == nullptr) continue;
      T v;
      memcpy(&v, w.block->params + offset + i * sizeof(T), sizeof v);
      const uint64_t x = Extend(v);
      ForLanes(mask, [&](uint32_t l) { d[i][l] = x; });
    }
    return;
  } else {
    const uint64_t* base = in.a[4] == kNoOperand ? kZeros : w.R(in.a[4]);
    const uint64_t imm = static_cast<uint64_t>(in.imm);
    // Explicit lane loop so that a fault returns at once.
    for (uint32_t m = mask; m != 0; m &= m - 1) {
      const uint32_t l = static_cast<uint32_t>(std::countr_zero(m));
      const uint64_t address = base[l] + imm;
      const uint8_t* p;
      if constexpr (kSpace == MemSpace::kFrameParam) {
        if (address > w.frame_stride || kSize > w.frame_stride - address) {
          w.SetFault(FaultKind::kIllegalAddress, "parameter access outside the call frame");
          return;
        }
        p = w.frame + static_cast<uint64_t>(l) * w.frame_stride + address;
      } else {
        p = Translate(w, ToSpace(kSpace), address, kSize, kSize, l, false);
        if (p == nullptr) return;
      }
      alignas(16) uint8_t whole[(kSize == 8 || kSize == 16) && kCount > 1 ? kSize : 1];
      if constexpr ((kSize == 8 || kSize == 16) && kCount > 1 && kSpace != MemSpace::kFrameParam) {
        if (LoadWhole<kSize>(p, whole)) p = whole;
      }
      for (uint32_t i = 0; i < kCount; ++i) {
        T v;
        memcpy(&v, p + i * sizeof(T), sizeof v);
        if (d[i] != nullptr) d[i][l] = Extend(v);
      }
    }
  }
}

template <MemSpace kSpace, typename T, uint32_t kCount>
void Store(Warp& w, const Insn& in, uint32_t mask) {
  constexpr uint32_t kSize = sizeof(T) * kCount;
  const uint64_t* s[kCount];
  for (uint32_t i = 0; i < kCount; ++i) s[i] = w.R(in.a[i]);
  const uint64_t* base = in.a[4] == kNoOperand ? kZeros : w.R(in.a[4]);
  const uint64_t imm = static_cast<uint64_t>(in.imm);
  for (uint32_t m = mask; m != 0; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(std::countr_zero(m));
    const uint64_t address = base[l] + imm;
    uint8_t* p;
    if constexpr (kSpace == MemSpace::kFrameParam) {
      if (address > w.frame_stride || kSize > w.frame_stride - address) {
        w.SetFault(FaultKind::kIllegalAddress, "parameter access outside the call frame");
        return;
      }
      p = w.frame + static_cast<uint64_t>(l) * w.frame_stride + address;
    } else {
      p = Translate(w, ToSpace(kSpace), address, kSize, kSize, l, true);
      if (p == nullptr) return;
    }
    if constexpr ((kSize == 8 || kSize == 16) && kCount > 1 && kSpace != MemSpace::kFrameParam) {
      alignas(16) uint8_t whole[kSize];
      for (uint32_t i = 0; i < kCount; ++i) {
        const T v = static_cast<T>(s[i][l]);
        memcpy(whole + i * sizeof(T), &v, sizeof v);
      }
      if (StoreWhole<kSize>(p, whole)) continue;
    }
    for (uint32_t i = 0; i < kCount; ++i) {
      const T v = static_cast<T>(s[i][l]);
      memcpy(p + i * sizeof(T), &v, sizeof v);
    }
  }
}

template <MemSpace kSpace, AtomOp kOp, typename T>
void Atom(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = in.a[0] == kNoOperand ? nullptr : w.R(in.a[0]);
  const uint64_t* b = w.R(in.a[1]);
  const uint64_t* c = in.a[2] == kNoOperand ? nullptr : w.R(in.a[2]);
  const uint64_t* base = in.a[4] == kNoOperand ? nullptr : w.R(in.a[4]);
  const uint64_t imm = static_cast<uint64_t>(in.imm);
  ForLanes(mask, [&](uint32_t l) {
    if (w.faulted) return;
    const uint64_t address = (base != nullptr ? base[l] : 0) + imm;
    uint8_t* p = Translate(w, ToSpace(kSpace), address, sizeof(T), sizeof(T), l, true);
    if (p == nullptr) return;
    const T old = AtomicApply<kOp, T>(p, Get<T>(b[l]), c != nullptr ? Get<T>(c[l]) : T{});
    if (d != nullptr) d[l] = Put(old);
  });
}

template <MemSpace kSpace, typename T>
Handler LoadFor(uint32_t count) {
  switch (count) {
    case 1:
      return &Load<kSpace, T, 1>;
    case 2:
      return &Load<kSpace, T, 2>;
    case 4:
      return &Load<kSpace, T, 4>;
    default:
      return nullptr;
  }
}

template <MemSpace kSpace, typename T>
Handler StoreFor(uint32_t count) {
  switch (count) {
    case 1:
      return &Store<kSpace, T, 1>;
    case 2:
      return &Store<kSpace, T, 2>;
    case 4:
      return &Store<kSpace, T, 4>;
    default:
      return nullptr;
  }
}

template <MemSpace kSpace>
Handler LoadIn(Type t, uint32_t count) {
  switch (t) {
    case Type::kU8:
    case Type::kB8:
      return LoadFor<kSpace, uint8_t>(count);
    case Type::kS8:
      return LoadFor<kSpace, int8_t>(count);
    case Type::kU16:
    case Type::kB16:
    case Type::kF16:
    case Type::kBF16:
      return LoadFor<kSpace, uint16_t>(count);
    case Type::kS16:
      return LoadFor<kSpace, int16_t>(count);
    case Type::kU32:
    case Type::kB32:
    case Type::kF32:
    case Type::kF16x2:
    case Type::kBF16x2:
      return LoadFor<kSpace, uint32_t>(count);
    case Type::kS32:
      return LoadFor<kSpace, int32_t>(count);
    case Type::kU64:
    case Type::kB64:
    case Type::kF64:
    case Type::kS64:
      return LoadFor<kSpace, uint64_t>(count);
    default:
      return nullptr;
  }
}

template <MemSpace kSpace>
Handler StoreIn(Type t, uint32_t count) {
  switch (TypeSize(t)) {
    case 1:
      return StoreFor<kSpace, uint8_t>(count);
    case 2:
      return StoreFor<kSpace, uint16_t>(count);
    case 4:
      return StoreFor<kSpace, uint32_t>(count);
    case 8:
      return StoreFor<kSpace, uint64_t>(count);
    default:
      return nullptr;
  }
}

template <MemSpace kSpace, AtomOp kOp>
Handler AtomIn(Type t) {
  switch (kOp) {
    case AtomOp::kAdd:
      switch (t) {
        case Type::kU32:
        case Type::kS32:
          return &Atom<kSpace, kOp, uint32_t>;
        case Type::kU64:
        case Type::kS64:
          return &Atom<kSpace, kOp, uint64_t>;
        case Type::kF32:
          return &Atom<kSpace, kOp, float>;
        case Type::kF64:
          return &Atom<kSpace, kOp, double>;
        default:
          return nullptr;
      }
    case AtomOp::kMin:
    case AtomOp::kMax:
      switch (t) {
        case Type::kU32:
          return &Atom<kSpace, kOp, uint32_t>;
        case Type::kS32:
          return &Atom<kSpace, kOp, int32_t>;
        case Type::kU64:
          return &Atom<kSpace, kOp, uint64_t>;
        case Type::kS64:
          return &Atom<kSpace, kOp, int64_t>;
        case Type::kF32:
          return &Atom<kSpace, kOp, float>;
        case Type::kF64:
          return &Atom<kSpace, kOp, double>;
        default:
          return nullptr;
      }
    case AtomOp::kInc:
    case AtomOp::kDec:
      return t == Type::kU32 ? &Atom<kSpace, kOp, uint32_t> : nullptr;
    default:  // exch, cas, and, or, xor: bit types
      switch (TypeSize(t)) {
        case 4:
          return ptx::IsFloat(t) && kOp != AtomOp::kExch ? nullptr : &Atom<kSpace, kOp, uint32_t>;
        case 8:
          return ptx::IsFloat(t) && kOp != AtomOp::kExch ? nullptr : &Atom<kSpace, kOp, uint64_t>;
        default:
          return nullptr;
      }
  }
}

template <MemSpace kSpace>
Handler AtomOpIn(AtomOp op, Type t) {
  switch (op) {
    case AtomOp::kAdd:
      return AtomIn<kSpace, AtomOp::kAdd>(t);
    case AtomOp::kMin:
      return AtomIn<kSpace, AtomOp::kMin>(t);
    case AtomOp::kMax:
      return AtomIn<kSpace, AtomOp::kMax>(t);
    case AtomOp::kExch:
      return AtomIn<kSpace, AtomOp::kExch>(t);
    case AtomOp::kCas:
      return AtomIn<kSpace, AtomOp::kCas>(t);
    case AtomOp::kAnd:
      return AtomIn<kSpace, AtomOp::kAnd>(t);
    case AtomOp::kOr:
      return AtomIn<kSpace, AtomOp::kOr>(t);
    case AtomOp::kXor:
      return AtomIn<kSpace, AtomOp::kXor>(t);
    case AtomOp::kInc:
      return AtomIn<kSpace, AtomOp::kInc>(t);
    case AtomOp::kDec:
      return AtomIn<kSpace, AtomOp::kDec>(t);
  }
  return nullptr;
}

template <MemSpace kSpace, bool kToGeneric>
void Cvta(Warp& w, const Insn& in, uint32_t mask) {
  uint64_t* d = w.R(in.a[0]);
  const uint64_t* a = w.R(in.a[1]);
  ForLanes(mask, [&](uint32_t l) {
    uint64_t v = a[l];
    if constexpr (kSpace == MemSpace::kShared) {
      if (kToGeneric)
        v = static_cast<uint32_t>(v) + kSharedWindowBase;
      else if (v - kSharedWindowBase < kWindowSize)
        v -= kSharedWindowBase;
    } else if constexpr (kSpace == MemSpace::kLocal) {
      if (kToGeneric)
        v = static_cast<uint32_t>(v) + kLocalWindowBase;
      else if (v - kLocalWindowBase < kWindowSize)
        v -= kLocalWindowBase;
    } else if constexpr (kSpace == MemSpace::kKernelParam) {
      if (kToGeneric)
        v = static_cast<uint32_t>(v) + kParamWindowBase;
      else if (v - kParamWindowBase < kWindowSize)
        v -= kParamWindowBase;
    }
    d[l] = v;
  });
}

template <MemSpace kSpace>
void Isspacep(Warp& w, const Insn& in, uint32_t mask) {
  const uint64_t* a = w.R(in.a[1]);
  uint32_t r = 0;
  ForLanes(mask, [&](uint32_t l) {
    const uint64_t v = a[l];
    const bool shared = v - kSharedWindowBase < kWindowSize;
    const bool local = v - kLocalWindowBase < kWindowSize;
    bool in_space;
    if (kSpace == MemSpace::kShared) {
      // shared::cta: the block's own shared memory (untagged, or tagged with its own rank).
      const uint32_t tag = static_cast<uint32_t>(v - kSharedWindowBase) >> kClusterRankShift;
      in_space = shared && (tag == 0 || tag == w.block->cluster_rank + 1);
    } else if (kSpace == MemSpace::kSharedCluster)
      in_space = shared;
    else if (kSpace == MemSpace::kLocal)
      in_space = local;
    else
      in_space = !shared && !local;
    if (in_space) r |= 1u << l;
  });
  uint32_t& d = w.preds[in.a[0]];
  d = (d & ~mask) | r;
}

void Nop(Warp&, const Insn&, uint32_t) {}

}  // namespace

Handler LoadHandler(MemSpace space, Type t, uint32_t count) {
  switch (space) {
    case MemSpace::kGeneric:
      return LoadIn<MemSpace::kGeneric>(t, count);
    case MemSpace::kGlobal:
      return LoadIn<MemSpace::kGlobal>(t, count);
    case MemSpace::kShared:
      return LoadIn<MemSpace::kShared>(t, count);
    case MemSpace::kLocal:
      return LoadIn<MemSpace::kLocal>(t, count);
    case MemSpace::kConst:
      return LoadIn<MemSpace::kConst>(t, count);
    case MemSpace::kKernelParam:
      return LoadIn<MemSpace::kKernelParam>(t, count);
    case MemSpace::kFrameParam:
      return LoadIn<MemSpace::kFrameParam>(t, count);
    case MemSpace::kSharedCluster:
      break;  // isspacep only
  }
  return nullptr;
}

Handler StoreHandler(MemSpace space, Type t, uint32_t count) {
  switch (space) {
    case MemSpace::kGeneric:
      return StoreIn<MemSpace::kGeneric>(t, count);
    case MemSpace::kGlobal:
      return StoreIn<MemSpace::kGlobal>(t, count);
    case MemSpace::kShared:
      return StoreIn<MemSpace::kShared>(t, count);
    case MemSpace::kLocal:
      return StoreIn<MemSpace::kLocal>(t, count);
    case MemSpace::kFrameParam:
      return StoreIn<MemSpace::kFrameParam>(t, count);
    default:
      return nullptr;
  }
}

Handler AtomHandler(MemSpace space, AtomOp op, Type t) {
  switch (space) {
    case MemSpace::kGeneric:
      return AtomOpIn<MemSpace::kGeneric>(op, t);
    case MemSpace::kGlobal:
      return AtomOpIn<MemSpace::kGlobal>(op, t);
    case MemSpace::kShared:
      return AtomOpIn<MemSpace::kShared>(op, t);
    default:
      return nullptr;
  }
}

Handler CvtaHandler(MemSpace space, bool to_generic) {
  switch (space) {
    case MemSpace::kGlobal:
    case MemSpace::kConst:
      return to_generic ? &Cvta<MemSpace::kGlobal, true> : &Cvta<MemSpace::kGlobal, false>;
    case MemSpace::kShared:
      return to_generic ? &Cvta<MemSpace::kShared, true> : &Cvta<MemSpace::kShared, false>;
    case MemSpace::kLocal:
      return to_generic ? &Cvta<MemSpace::kLocal, true> : &Cvta<MemSpace::kLocal, false>;
    case MemSpace::kKernelParam:
      return to_generic ? &Cvta<MemSpace::kKernelParam, true>
                        : &Cvta<MemSpace::kKernelParam, false>;
    default:
      return nullptr;
  }
}

Handler IsspacepHandler(MemSpace space) {
  switch (space) {
    case MemSpace::kGlobal:
      return &Isspacep<MemSpace::kGlobal>;
    case MemSpace::kShared:
      return &Isspacep<MemSpace::kShared>;
    case MemSpace::kSharedCluster:
      return &Isspacep<MemSpace::kSharedCluster>;
    case MemSpace::kLocal:
      return &Isspacep<MemSpace::kLocal>;
    default:
      return nullptr;
  }
}

Handler NopHandler() { return &Nop; }

}  // namespace softgpu
