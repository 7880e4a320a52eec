#include "softgpu/tensor_map.h"

#include <cstring>

namespace softgpu {
namespace {

// Layout of the 128 opaque bytes (little-endian fields):
//   0  u32 marker 'SGTM'   4 u8 version   5 u8 kind (1: tiled)   6 u8 data type   7 u8 rank
//   8  u64 global address
//   16 u64 dims[5]
//   56 u64 strides of dimensions 1..4 (bytes)
//   88 u8 box[5] - 1       93 u8 element_strides[5] - 1
//   98 u8 swizzle          99 u8 L2 promotion          100..127 zero
constexpr uint32_t kMarker = 0x4d544753;  // "SGTM"
constexpr uint8_t kVersion = 1;
constexpr uint8_t kKindTiled = 1;
constexpr size_t kAddressAt = 8, kDimsAt = 16, kStridesAt = 56, kBoxAt = 88, kElementStridesAt = 93,
                 kSwizzleAt = 98, kL2At = 99, kReservedAt = 100, kBytes = 128;
static_assert(sizeof(CUtensorMap) == kBytes);

// Bytes of one element of `data_type`, 0 for the packed sub-byte types and unknown values.
uint32_t ElementBytes(uint32_t data_type) {
  switch (data_type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8:
      return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
      return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
      return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
      return 8;
    default:
      return 0;
  }
}

bool IsFloat(uint32_t data_type) {
  return data_type >= CU_TENSOR_MAP_DATA_TYPE_FLOAT16 &&
         data_type <= CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ;
}

// The swizzle span in bytes (0: none).
uint32_t SwizzleSpan(uint32_t swizzle) {
  switch (swizzle) {
    case CU_TENSOR_MAP_SWIZZLE_32B:
      return 32;
    case CU_TENSOR_MAP_SWIZZLE_64B:
      return 64;
    case CU_TENSOR_MAP_SWIZZLE_128B:
      return 128;
    default:
      return 0;
  }
}

constexpr uint64_t kMaxDim = 1ull << 32;
constexpr uint64_t kMaxStride = 1ull << 40;

// The checks both MakeTiledTensorMap and DecodeTensorMap make of the fields themselves.
bool FieldsValid(const TensorMap& m) {
  if (m.rank == 0 || m.rank > kTensorMapMaxRank || m.element_bytes != ElementBytes(m.data_type) ||
      m.element_bytes == 0 || m.address % 16 != 0 || m.swizzle > CU_TENSOR_MAP_SWIZZLE_128B ||
      m.l2_promotion > CU_TENSOR_MAP_L2_PROMOTION_L2_256B || m.strides[0] != m.element_bytes) {
    return false;
  }
  for (uint32_t i = 0; i < m.rank; ++i) {
    if (m.dims[i] == 0 || m.dims[i] > kMaxDim || m.box[i] == 0 || m.box[i] > kTensorMapMaxBox ||
        m.element_strides[i] == 0 || m.element_strides[i] > kTensorMapMaxElementStride) {
      return false;
    }
    if (i > 0 && (m.strides[i] % 16 != 0 || m.strides[i] >= kMaxStride)) return false;
  }
  // Dimension 0 has no traversal stride; its box is whole 16-byte chunks, within the swizzle span.
  const uint64_t inner = static_cast<uint64_t>(m.box[0]) * m.element_bytes;
  if (m.element_strides[0] != 1 || inner % 16 != 0) return false;
  if (m.swizzle != CU_TENSOR_MAP_SWIZZLE_NONE && inner > SwizzleSpan(m.swizzle)) return false;
  for (uint32_t i = m.rank; i < kTensorMapMaxRank; ++i) {
    if (m.dims[i] != 0 || m.strides[i] != 0 || m.box[i] != 0 || m.element_strides[i] != 0) {
      return false;
    }
  }
  return true;
}

uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

void Store64(uint8_t* p, uint64_t v) { memcpy(p, &v, 8); }

}  // namespace

uint64_t TensorMap::BoxBytes() const {
  uint64_t bytes = element_bytes;
  for (uint32_t i = 0; i < rank; ++i) bytes *= BoxElements(i);
  return bytes;
}

uint64_t TensorMap::SwizzledAddress(uint64_t base, uint64_t offset) const {
  const uint64_t a = base + offset;
  switch (swizzle) {
    case CU_TENSOR_MAP_SWIZZLE_32B:
      return a ^ ((a >> 3) & 0x10);
    case CU_TENSOR_MAP_SWIZZLE_64B:
      return a ^ ((a >> 3) & 0x30);
    case CU_TENSOR_MAP_SWIZZLE_128B:
      return a ^ ((a >> 3) & 0x70);
    default:
      return a;
  }
}

CUresult MakeTiledTensorMap(CUtensorMapDataType data_type, uint32_t rank, uint64_t address,
                            const uint64_t* global_dim, const uint64_t* global_strides,
                            const uint32_t* box_dim, const uint32_t* element_strides,
                            CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                            CUtensorMapL2promotion l2_promotion, CUtensorMapFloatOOBfill oob_fill,
                            TensorMap* out, const char** why) {
  *why = nullptr;
  if (rank == 0 || rank > kTensorMapMaxRank || global_dim == nullptr || box_dim == nullptr ||
      element_strides == nullptr || (rank > 1 && global_strides == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (static_cast<uint32_t>(data_type) > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B ||
      static_cast<uint32_t>(interleave) > CU_TENSOR_MAP_INTERLEAVE_32B ||
      static_cast<uint32_t>(swizzle) > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B ||
      static_cast<uint32_t>(l2_promotion) > CU_TENSOR_MAP_L2_PROMOTION_L2_256B ||
      static_cast<uint32_t>(oob_fill) > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA ||
      (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE && rank < 3) ||
      (oob_fill != CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE && !IsFloat(data_type))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (ElementBytes(data_type) == 0) {
    *why = "packed sub-byte data types (16U4, 16U6)";
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE) {
    *why = "interleaved layouts (CU_TENSOR_MAP_INTERLEAVE_16B/32B)";
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (swizzle > CU_TENSOR_MAP_SWIZZLE_128B) {
    *why = "128-byte swizzles with 32- or 64-byte atoms";
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (oob_fill != CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) {
    *why = "the NaN out-of-bounds fill (CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)";
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  TensorMap m;
  m.data_type = data_type;
  m.element_bytes = ElementBytes(data_type);
  m.rank = rank;
  m.swizzle = swizzle;
  m.l2_promotion = l2_promotion;
  m.address = address;
  m.strides[0] = m.element_bytes;
  for (uint32_t i = 0; i < rank; ++i) {
    m.dims[i] = global_dim[i];
    if (i > 0) m.strides[i] = global_strides[i - 1];
    m.box[i] = box_dim[i];
    m.element_strides[i] = element_strides[i];
  }
  // elementStrides[0] is ignored without interleaving (TMA has no stride along dimension 0), but
  // must still be in range.
  if (m.element_strides[0] == 0 || m.element_strides[0] > kTensorMapMaxElementStride) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  m.element_strides[0] = 1;
  if (!FieldsValid(m)) return CUDA_ERROR_INVALID_VALUE;
  *out = m;
  return CUDA_SUCCESS;
}

void EncodeTensorMap(const TensorMap& map, CUtensorMap* out) {
  uint8_t b[kBytes] = {};
  memcpy(b, &kMarker, 4);
  b[4] = kVersion;
  b[5] = kKindTiled;
  b[6] = static_cast<uint8_t>(map.data_type);
  b[7] = static_cast<uint8_t>(map.rank);
  Store64(b + kAddressAt, map.address);
  for (uint32_t i = 0; i < kTensorMapMaxRank; ++i) {
    Store64(b + kDimsAt + 8 * i, map.dims[i]);
    if (i > 0) Store64(b + kStridesAt + 8 * (i - 1), map.strides[i]);
    if (i < map.rank) {
      b[kBoxAt + i] = static_cast<uint8_t>(map.box[i] - 1);
      b[kElementStridesAt + i] = static_cast<uint8_t>(map.element_strides[i] - 1);
    }
  }
  b[kSwizzleAt] = static_cast<uint8_t>(map.swizzle);
  b[kL2At] = static_cast<uint8_t>(map.l2_promotion);
  memcpy(out, b, kBytes);
}

bool DecodeTensorMap(const uint8_t* b, TensorMap* out) {
  uint32_t marker;
  memcpy(&marker, b, 4);
  if (marker != kMarker || b[4] != kVersion || b[5] != kKindTiled) return false;
  for (size_t i = kReservedAt; i < kBytes; ++i) {
    if (b[i] != 0) return false;
  }
  TensorMap m;
  m.data_type = b[6];
  m.element_bytes = ElementBytes(m.data_type);
  m.rank = b[7];
  if (m.rank == 0 || m.rank > kTensorMapMaxRank) return false;
  m.address = Load64(b + kAddressAt);
  m.strides[0] = m.element_bytes;
  for (uint32_t i = 0; i < kTensorMapMaxRank; ++i) {
    m.dims[i] = Load64(b + kDimsAt + 8 * i);
    if (i > 0) m.strides[i] = Load64(b + kStridesAt + 8 * (i - 1));
    const bool used = i < m.rank;
    if (!used && (b[kBoxAt + i] != 0 || b[kElementStridesAt + i] != 0)) return false;
    m.box[i] = used ? b[kBoxAt + i] + 1u : 0;
    m.element_strides[i] = used ? b[kElementStridesAt + i] + 1u : 0;
  }
  m.swizzle = b[kSwizzleAt];
  m.l2_promotion = b[kL2At];
  if (!FieldsValid(m)) return false;
  *out = m;
  return true;
}

}  // namespace softgpu
