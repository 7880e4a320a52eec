// Tensor maps (CUtensorMap): the tiled region of a tensor in global memory that
// cuTensorMapEncodeTiled describes, softgpu's 128-byte encoding of it, and the element layout of
// the boxes cp.async.bulk.tensor moves between it and shared memory (exec_tensor.cc).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace softgpu {

constexpr uint32_t kTensorMapMaxRank = 5;
constexpr uint32_t kTensorMapMaxBox = 256;
constexpr uint32_t kTensorMapMaxElementStride = 8;

// A decoded, checked tiled tensor map. Dimension 0 is the innermost (contiguous) one.
struct TensorMap {
  uint32_t data_type = 0;      // CUtensorMapDataType
  uint32_t element_bytes = 0;  // 1, 2, 4 or 8
  uint32_t rank = 0;           // 1..5
  uint32_t swizzle = 0;        // CU_TENSOR_MAP_SWIZZLE_NONE, _32B, _64B or _128B
  uint32_t l2_promotion = 0;   // a hint, kept for the round trip only
  uint64_t address = 0;        // global address of element (0, ..., 0)
  uint64_t dims[kTensorMapMaxRank] = {};
  // Bytes between consecutive elements of each dimension: strides[0] is the element size, the
  // others are cuTensorMapEncodeTiled's globalStrides.
  uint64_t strides[kTensorMapMaxRank] = {};
  uint32_t box[kTensorMapMaxRank] = {};              // boxDim
  uint32_t element_strides[kTensorMapMaxRank] = {};  // elementStrides (dimension 0: always 1)

  // Elements a box holds along dimension i: ceil(box[i] / element_strides[i]).
  uint32_t BoxElements(uint32_t i) const {
    return (box[i] + element_strides[i] - 1) / element_strides[i];
  }
  // Bytes of a whole box in shared memory (what a load completes on its mbarrier).
  uint64_t BoxBytes() const;
  // The shared-memory address where byte `offset` of a box placed at `base` lands: the byte
  // offset plus the swizzle, which XORs the 16-byte chunk index within each 128-byte line with
  // address bits 7-9 (128B: 3 bits, 64B: 2, 32B: 1), as CUDA's swizzle modes define.
  uint64_t SwizzledAddress(uint64_t base, uint64_t offset) const;
};

// Checks cuTensorMapEncodeTiled's arguments against the rules cuda.h states and fills `out`.
// INVALID_VALUE for arguments the driver refuses; NOT_SUPPORTED (naming the feature in `why`)
// for what softgpu does not implement: interleaved layouts, the packed sub-byte types, the
// 128-byte swizzles with 32/64-byte atoms and the NaN out-of-bounds fill.
CUresult MakeTiledTensorMap(CUtensorMapDataType data_type, uint32_t rank, uint64_t address,
                            const uint64_t* global_dim, const uint64_t* global_strides,
                            const uint32_t* box_dim, const uint32_t* element_strides,
                            CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                            CUtensorMapL2promotion l2_promotion, CUtensorMapFloatOOBfill oob_fill,
                            TensorMap* out, const char** why);

// Writes `map` as the 128 opaque bytes of a CUtensorMap (a marker, a version and the fields).
void EncodeTensorMap(const TensorMap& map, CUtensorMap* out);

// Reads 128 bytes as a tensor map and checks every field again (a kernel may hand any bytes to
// cp.async.bulk.tensor). False when they are not a map EncodeTensorMap wrote.
bool DecodeTensorMap(const uint8_t* bytes, TensorMap* out);

}  // namespace softgpu
