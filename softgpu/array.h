// CUDA arrays: opaque texel storage for textures and surfaces. An array's bytes live in one
// allocation of its context's address space (so they count against the device's memory, show in
// cuMemGetInfo and go with the context), laid out linearly: x fastest, then rows, then slices
// (3D depth, layers, or cubemap faces: face f of layer l is slice 6 * l + f). A mipmapped array
// is one allocation holding its levels one after the other (each on a 512-byte boundary); each
// level is an Array of its own (the handle cuMipmappedArrayGetLevel gives) whose storage lies
// inside that allocation.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace softgpu {

// Bytes of one channel of `format`; 0 for a format softgpu does not implement.
uint32_t FormatChannelBytes(CUarray_format format);
// CUDA_SUCCESS when elements of `channels` channels of `format` can be stored and sampled;
// CUDA_ERROR_INVALID_VALUE for a channel count other than 1, 2 or 4, CUDA_ERROR_NOT_SUPPORTED
// for a format of cuda.h softgpu does not implement (block-compressed, YUV, packed normalized).
CUresult CheckElementFormat(CUarray_format format, unsigned channels);

class Array {
 public:
  // Validates `desc` (cuArray3DCreate's rules and the device limits of device.h) and computes
  // the layout; the storage is not allocated yet (address stays 0). Errors: INVALID_VALUE for a
  // malformed or too large descriptor, NOT_SUPPORTED for formats or flags softgpu lacks.
  static CUresult Layout(const CUDA_ARRAY3D_DESCRIPTOR& desc, Array* out);

  const void* owner = nullptr;  // the Context the array belongs to
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  uint32_t element_bytes = 0;
  uint64_t rows = 1;    // max(Height, 1)
  uint64_t slices = 1;  // max(Depth, 1)
  uint64_t row_bytes = 0;
  uint64_t slice_bytes = 0;
  uint64_t bytes = 0;
  uint64_t address = 0;  // device address of the storage in the owner's address space
  // The MipmappedArray this array is a level of (cuArrayDestroy refuses it: it goes with the
  // mipmapped array); null for an array of its own.
  const void* mipmap = nullptr;

  bool layered() const { return (desc.Flags & CUDA_ARRAY3D_LAYERED) != 0; }
  bool cubemap() const { return (desc.Flags & CUDA_ARRAY3D_CUBEMAP) != 0; }
  bool surface_ldst() const { return (desc.Flags & CUDA_ARRAY3D_SURFACE_LDST) != 0; }
};

class MipmappedArray {
 public:
  // The most levels a mipmapped array of this level-0 extent can have: 1 + floor(log2(largest
  // of width, height and (3D only) depth)); layers and cubemap faces do not count.
  static unsigned MaxLevels(const CUDA_ARRAY3D_DESCRIPTOR& desc);
  // Validates `desc` (cuArray3DCreate's rules, with the mipmapped 1D/2D limits) and `levels`
  // (1 to MaxLevels) and lays the levels out: level i halves every dimension of level i - 1
  // (rounding down, at least 1), layer counts and cubemap faces stay. The level arrays get
  // their offsets in `offsets`; nothing is allocated (addresses stay 0). INVALID_VALUE or
  // NOT_SUPPORTED as Array::Layout.
  static CUresult Layout(const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned levels, MipmappedArray* out);
  // Gives the storage at `address` to the mipmapped array and its levels.
  void Place(uint64_t base);

  const void* owner = nullptr;  // the Context the array belongs to
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  std::vector<std::shared_ptr<Array>> levels;  // level 0 first
  std::vector<uint64_t> offsets;               // of each level from `address`
  uint64_t bytes = 0;                          // all levels
  uint64_t address = 0;                        // device address of level 0
};

}  // namespace softgpu
