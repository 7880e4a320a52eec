// The asynchronous proxy: cp.async, bulk copies (plain, multicast, reducing), tensor-map copies
// and st.async/red.async. softgpu does each copy when it is issued; what the program waits on
// (an mbarrier's transactions, a bulk group) is then already complete.
#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

#include "softgpu/atomics.h"
#include "softgpu/exec.h"
#include "softgpu/half.h"
#include "softgpu/handlers.h"
#include "softgpu/tensor_map.h"

namespace softgpu {
namespace {

using ptx::Type;

void CpAsync(Warp& w, const Insn& in, uint32_t mask) {
  const uint64_t* dst = w.R(in.a[0]);
  const uint64_t* src = w.R(in.a[1]);
  const uint64_t* src_size = in.a[2] == kNoOperand ? nullptr : w.R(in.a[2]);
  const uint32_t size = in.aux;
  for (uint32_t m = mask; m != 0; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(std::countr_zero(m));
    const uint32_t n =
        src_size == nullptr ? size : std::min<uint32_t>(size, static_cast<uint32_t>(src_size[l]));
    uint8_t* d = Translate(w, ptx::Space::kShared, dst[l], size, size, l, true);
    if (d == nullptr) return;
    if (n != 0) {
      const uint8_t* s = Translate(w, ptx::Space::kGlobal, src[l], n, 1, l, false);
      if (s == nullptr) return;
      memcpy(d, s, n);
    }
    memset(d + n, 0, size - n);
  }
}

// Combines the value at `value` into the element at `p` (host memory, aligned to its size)
// atomically; `type` and `op` are a pair BulkReduceSupported accepts.
template <AtomOp kOp>
void CombineAs(uint8_t* p, const uint8_t* value, Type type) {
  auto apply = [&](auto zero) {
    using T = decltype(zero);
    T v;
    memcpy(&v, value, sizeof v);
    AtomicApply<kOp, T>(p, v, T{});
  };
  // f16 and bf16: the arithmetic in float, rounded back, in a compare-exchange loop.
  auto half = [&](float (*to_float)(uint16_t), uint16_t (*from_float)(float)) {
    uint16_t v;
    memcpy(&v, value, 2);
    std::atomic_ref<uint16_t> ref(*reinterpret_cast<uint16_t*>(p));
    uint16_t old = ref.load(std::memory_order_relaxed);
    for (;;) {
      const float a = to_float(old), b = to_float(v);
      const float r = kOp == AtomOp::kAdd   ? a + b
                      : kOp == AtomOp::kMin ? std::min(a, b)
                                            : std::max(a, b);
      if (ref.compare_exchange_weak(old, from_float(r), std::memory_order_relaxed)) return;
    }
  };
  switch (type) {
    case Type::kU32:
    case Type::kB32:
      return apply(uint32_t{});
    case Type::kS32:
      return apply(int32_t{});
    case Type::kU64:
    case Type::kB64:
      return apply(uint64_t{});
    case Type::kS64:
      return apply(int64_t{});
    case Type::kF32:
      if constexpr (kOp == AtomOp::kAdd || kOp == AtomOp::kMin || kOp == AtomOp::kMax) {
        return apply(float{});
      }
      return;
    case Type::kF64:
      if constexpr (kOp == AtomOp::kAdd || kOp == AtomOp::kMin || kOp == AtomOp::kMax) {
        return apply(double{});
      }
      return;
    case Type::kF16:
      return half(&HalfToFloat, &FloatToHalf);
    case Type::kBF16:
      return half(&Bf16ToFloat, [](float f) { return FloatToBf16(f); });
    default:
      return;
  }
}

void Combine(uint8_t* p, const uint8_t* value, Type type, AtomOp op) {
  switch (op) {
    case AtomOp::kAdd:
      return CombineAs<AtomOp::kAdd>(p, value, type);
    case AtomOp::kMin:
      return CombineAs<AtomOp::kMin>(p, value, type);
    case AtomOp::kMax:
      return CombineAs<AtomOp::kMax>(p, value, type);
    case AtomOp::kAnd:
      return CombineAs<AtomOp::kAnd>(p, value, type);
    case AtomOp::kOr:
      return CombineAs<AtomOp::kOr>(p, value, type);
    case AtomOp::kXor:
      return CombineAs<AtomOp::kXor>(p, value, type);
    case AtomOp::kInc:
      return CombineAs<AtomOp::kInc>(p, value, type);
    case AtomOp::kDec:
      return CombineAs<AtomOp::kDec>(p, value, type);
    default:
      return;
  }
}

// `bytes` of elements of `type` from `from` combined into `to`, element by element.
void CombineAll(uint8_t* to, const uint8_t* from, uint64_t bytes, Type type, AtomOp op) {
  const uint32_t size = ptx::TypeSize(type);
  for (uint64_t i = 0; i + size <= bytes; i += size) Combine(to + i, from + i, type, op);
}

// The same offset in the shared memory of block `rank` of the cluster.
uint64_t InBlock(uint64_t shared_cluster_address, uint32_t rank) {
  const uint64_t offset = shared_cluster_address & ((1u << kClusterRankShift) - 1);
  return (static_cast<uint64_t>(rank) + 1) << kClusterRankShift | offset;
}

// Completes `bytes` of transactions on the mbarrier at the shared::cluster address `mbar`.
bool CompleteTx(Warp& w, uint64_t mbar, uint64_t bytes, uint32_t lane) {
  uint8_t* object = Translate(w, ptx::Space::kShared, mbar, 8, 8, lane, true);
  if (object == nullptr) return false;
  MbarrierCompleteTx(reinterpret_cast<uint64_t*>(object), bytes);
  return true;
}

void CpAsyncBulk(Warp& w, const Insn& in, uint32_t mask) {
  const uint64_t* dst = w.R(in.a[0]);
  const uint64_t* src = w.R(in.a[1]);
  const uint64_t* size = w.R(in.a[2]);
  const uint64_t* mbar = in.a[3] == kNoOperand ? nullptr : w.R(in.a[3]);
  const uint64_t* cta_mask = in.a[4] == kNoOperand ? nullptr : w.R(in.a[4]);
  const CpBulkMode mode = CpBulkMode::Unpack(in.aux);
  const ptx::Space from = mode.direction == CpBulkDirection::kGlobalToShared ? ptx::Space::kGlobal
                                                                             : ptx::Space::kShared;
  const ptx::Space to = mode.direction == CpBulkDirection::kSharedToGlobal ? ptx::Space::kGlobal
                                                                           : ptx::Space::kShared;
  for (uint32_t m = mask; m != 0; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(std::countr_zero(m));
    const uint64_t n = size[l] & 0xffffffffu;
    if (n % 16 != 0) {
      w.SetFault(FaultKind::kMisalignedAddress,
                 "cp.async.bulk of " + std::to_string(n) + " bytes (not a multiple of 16)");
      return;
    }
    // The destinations: the one named, or with .multicast::cluster the same offset in each block
    // of the mask (their mbarriers at the mbarrier's offset).
    uint32_t ranks = 0;
    if (cta_mask != nullptr) {
      ranks = static_cast<uint16_t>(cta_mask[l]);
      if (ranks == 0) continue;
    }
    const uint8_t* s = nullptr;
    if (n != 0) {
      s = Translate(w, from, src[l], static_cast<uint32_t>(n), 16, l, false);
      if (s == nullptr) return;
    }
    for (uint32_t r = ranks;;) {
      const uint32_t rank = static_cast<uint32_t>(std::countr_zero(r));
      const uint64_t to_address = cta_mask == nullptr ? dst[l] : InBlock(dst[l], rank);
      if (n != 0) {
        uint8_t* d = Translate(w, to, to_address, static_cast<uint32_t>(n), 16, l, true);
        if (d == nullptr) return;
        if (mode.reduce)
          CombineAll(d, s, n, mode.type, mode.op);
        else
          memmove(d, s, n);
      }
      if (mbar != nullptr &&
          !CompleteTx(w, cta_mask == nullptr ? mbar[l] : InBlock(mbar[l], rank), n, l)) {
        return;
      }
      if (cta_mask == nullptr) break;
      r &= r - 1;
      if (r == 0) break;
    }
  }
}

// The element type a reducing tensor copy combines for a map's data type.
Type ReduceType(uint32_t data_type) {
  switch (data_type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
      return Type::kU32;
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
      return Type::kS32;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
      return Type::kU64;
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
      return Type::kS64;
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
      return Type::kF16;
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
      return Type::kBF16;
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
      return Type::kF32;
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
      return Type::kF64;
    default:
      return Type::kNone;
  }
}

void TensorFault(Warp& w, FaultKind kind, const char* what, uint64_t address) {
  char message[160];
  snprintf(message, sizeof message, "cp.async.bulk.tensor: %s (0x%" PRIx64 ")", what, address);
  w.SetFault(kind, message);
}

// One row of a box: `count` elements of dimension 0 starting at box element `first`, at global
// byte address `address` (elements before and after it lie outside the tensor).
struct BoxRow {
  uint64_t shared_offset = 0;  // of the row's first element in the box's shared-memory image
  bool inside = false;         // any element of it lies inside the tensor
  uint32_t first = 0;
  uint32_t count = 0;
  uint64_t address = 0;
};

// Calls `row(BoxRow)` for each row of the box at `coords` (dimension 0 innermost); false (after
// faulting the warp) when an address overflows.
template <typename F>
bool ForEachRow(Warp& w, const TensorMap& map, const int32_t* coords, F&& row) {
  uint32_t n[kTensorMapMaxRank] = {};
  uint64_t rows = 1;
  for (uint32_t i = 0; i < map.rank; ++i) {
    n[i] = map.BoxElements(i);
    if (i > 0) rows *= n[i];
  }
  const uint64_t row_bytes = static_cast<uint64_t>(n[0]) * map.element_bytes;
  // Dimension 0: the elements inside [0, dims[0]).
  const int64_t c0 = coords[0];
  const int64_t lo = std::max<int64_t>(0, -c0);
  const int64_t hi = std::min<int64_t>(n[0], static_cast<int64_t>(map.dims[0]) - c0);
  for (uint64_t r = 0; r < rows; ++r) {
    BoxRow out;
    out.shared_offset = r * row_bytes;
    out.inside = lo < hi;
    unsigned __int128 address = static_cast<unsigned __int128>(map.address);
    uint64_t rest = r;
    for (uint32_t i = 1; i < map.rank && out.inside; ++i) {
      const int64_t g = coords[i] + static_cast<int64_t>(rest % n[i]) * map.element_strides[i];
      rest /= n[i];
      if (g < 0 || g >= static_cast<int64_t>(map.dims[i])) {
        out.inside = false;
        break;
      }
      address += static_cast<unsigned __int128>(g) * map.strides[i];
    }
    if (out.inside) {
      out.first = static_cast<uint32_t>(lo);
      out.count = static_cast<uint32_t>(hi - lo);
      address += static_cast<unsigned __int128>(c0 + lo) * map.element_bytes;
      if (address >> 64 != 0) {
        TensorFault(w, FaultKind::kIllegalAddress, "an element's address overflows", map.address);
        return false;
      }
      out.address = static_cast<uint64_t>(address);
    }
    if (!row(out)) return false;
  }
  return true;
}

// Moves a box's shared-memory image between `image` (packed) and shared memory at `base`
// (through the map's swizzle), 16 bytes at a time; false after faulting.
bool MoveShared(Warp& w, const TensorMap& map, uint64_t base, uint8_t* image, uint64_t bytes,
                bool to_shared, uint32_t lane) {
  if (map.swizzle == CU_TENSOR_MAP_SWIZZLE_NONE) {
    uint8_t* p =
        Translate(w, ptx::Space::kShared, base, static_cast<uint32_t>(bytes), 16, lane, to_shared);
    if (p == nullptr) return false;
    to_shared ? memcpy(p, image, bytes) : memcpy(image, p, bytes);
    return true;
  }
  for (uint64_t offset = 0; offset < bytes; offset += 16) {
    uint8_t* p = Translate(w, ptx::Space::kShared, map.SwizzledAddress(base, offset), 16, 16, lane,
                           to_shared);
    if (p == nullptr) return false;
    to_shared ? memcpy(p, image + offset, 16) : memcpy(image + offset, p, 16);
  }
  return true;
}

void CopyTensor(Warp& w, const Insn& in, uint32_t mask) {
  const TensorSite& site = w.block->program->tensor_sites[in.aux];
  thread_local std::vector<uint8_t> image;
  for (uint32_t m = mask; m != 0; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(std::countr_zero(m));
    const uint64_t map_address = w.R(site.map)[l];
    const uint8_t* bytes = Translate(w, ptx::Space::kGeneric, map_address, 128, 64, l, false);
    if (bytes == nullptr) return;
    TensorMap map;
    if (!DecodeTensorMap(bytes, &map)) {
      TensorFault(w, FaultKind::kIllegalAddress, "not a tensor map cuTensorMapEncodeTiled made",
                  map_address);
      return;
    }
    if (map.rank != site.rank) {
      TensorFault(w, FaultKind::kIllegalAddress, "the map's rank is not the instruction's",
                  map_address);
      return;
    }
    int32_t coords[kTensorMapMaxRank] = {};
    for (uint32_t i = 0; i < site.rank; ++i) {
      coords[i] = static_cast<int32_t>(w.R(site.coords[i])[l]);
    }
    const uint64_t shared = w.R(site.shared)[l];
    if (shared % 128 != 0) {
      TensorFault(w, FaultKind::kMisalignedAddress, "shared memory not 128-byte aligned", shared);
      return;
    }
    // Every block of the launch has this block's shared memory size.
    const uint64_t box_bytes = map.BoxBytes();
    if (box_bytes > w.block->shared_size) {
      TensorFault(w, FaultKind::kIllegalAddress, "a box larger than the block's shared memory",
                  map_address);
      return;
    }
    image.assign(box_bytes, 0);
    const uint32_t esize = map.element_bytes;
    if (site.op == TensorCopy::kLoad) {
      // Gather the box (zeros outside the tensor), then place it in each destination block.
      const bool ok = ForEachRow(w, map, coords, [&](const BoxRow& row) {
        if (!row.inside || row.count == 0) return true;
        const uint64_t n = static_cast<uint64_t>(row.count) * esize;
        const uint8_t* from =
            Translate(w, ptx::Space::kGlobal, row.address, static_cast<uint32_t>(n), 1, l, false);
        if (from == nullptr) return false;
        memcpy(image.data() + row.shared_offset + static_cast<uint64_t>(row.first) * esize, from,
               n);
        return true;
      });
      if (!ok) return;
      const uint64_t mbar = w.R(site.mbarrier)[l];
      uint32_t ranks =
          site.cta_mask == kNoOperand ? 0 : static_cast<uint16_t>(w.R(site.cta_mask)[l]);
      if (site.cta_mask == kNoOperand) {
        if (!MoveShared(w, map, shared, image.data(), box_bytes, true, l) ||
            !CompleteTx(w, mbar, box_bytes, l)) {
          return;
        }
      }
      for (; ranks != 0; ranks &= ranks - 1) {
        const uint32_t rank = static_cast<uint32_t>(std::countr_zero(ranks));
        if (!MoveShared(w, map, InBlock(shared, rank), image.data(), box_bytes, true, l) ||
            !CompleteTx(w, InBlock(mbar, rank), box_bytes, l)) {
          return;
        }
      }
      continue;
    }
    // Store or reduce: read the box from shared memory, then write the elements inside the tensor.
    const Type reduce_type = ReduceType(map.data_type);
    if (site.op == TensorCopy::kReduce && !BulkReduceSupported(site.reduce, reduce_type)) {
      TensorFault(w, FaultKind::kUnsupported,
                  "cp.reduce.async.bulk.tensor: this operation on the map's data type",
                  map_address);
      return;
    }
    if (!MoveShared(w, map, shared, image.data(), box_bytes, false, l)) return;
    const bool ok = ForEachRow(w, map, coords, [&](const BoxRow& row) {
      if (!row.inside || row.count == 0) return true;
      const uint64_t n = static_cast<uint64_t>(row.count) * esize;
      uint8_t* to =
          Translate(w, ptx::Space::kGlobal, row.address, static_cast<uint32_t>(n), esize, l, true);
      if (to == nullptr) return false;
      const uint8_t* from =
          image.data() + row.shared_offset + static_cast<uint64_t>(row.first) * esize;
      if (site.op == TensorCopy::kReduce)
        CombineAll(to, from, n, reduce_type, site.reduce);
      else
        memcpy(to, from, n);
      return true;
    });
    if (!ok) return;
  }
}

void AsyncStore(Warp& w, const Insn& in, uint32_t mask) {
  const AsyncStoreMode mode = AsyncStoreMode::Unpack(in.aux);
  const uint32_t size = ptx::TypeSize(mode.type);
  const uint32_t bytes = size * mode.count;
  for (uint32_t m = mask; m != 0; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(std::countr_zero(m));
    uint8_t* p = Translate(w, ptx::Space::kShared, w.R(in.a[0])[l], bytes, bytes, l, true);
    if (p == nullptr) return;
    for (uint32_t i = 0; i < mode.count; ++i) {
      const uint64_t v = w.R(in.a[1 + i])[l];
      if (mode.reduce)
        Combine(p, reinterpret_cast<const uint8_t*>(&v), mode.type, mode.op);
      else
        memcpy(p + i * size, &v, size);
    }
    if (!CompleteTx(w, w.R(in.a[5])[l], bytes, l)) return;
  }
}

}  // namespace

bool BulkReduceSupported(AtomOp op, Type type) {
  const bool integer =
      type == Type::kU32 || type == Type::kS32 || type == Type::kU64 || type == Type::kS64;
  const bool floating =
      type == Type::kF16 || type == Type::kBF16 || type == Type::kF32 || type == Type::kF64;
  switch (op) {
    case AtomOp::kAdd:
    case AtomOp::kMin:
    case AtomOp::kMax:
      return integer || floating;
    case AtomOp::kInc:
    case AtomOp::kDec:
      return type == Type::kU32;
    case AtomOp::kAnd:
    case AtomOp::kOr:
    case AtomOp::kXor:
      return integer || type == Type::kB32 || type == Type::kB64;
    default:
      return false;
  }
}

Handler CpAsyncHandler() { return &CpAsync; }
Handler CpAsyncBulkHandler() { return &CpAsyncBulk; }
Handler TensorCopyHandler() { return &CopyTensor; }
Handler AsyncStoreHandler() { return &AsyncStore; }

}  // namespace softgpu
