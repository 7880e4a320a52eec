// CUDA arrays: opaque texel storage for textures and surfaces. An array's bytes live in one
// allocation of its context's address space (so they count against the device's memory, show in
// cuMemGetInfo and go with the context), laid out linearly: x fastest, then rows, then slices
// (3D depth, layers, or cubemap faces: face f of layer l is slice 6 * l + f).
#pragma once

#include <cuda.h>

#include <cstdint>

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

  bool layered() const { return (desc.Flags & CUDA_ARRAY3D_LAYERED) != 0; }
  bool cubemap() const { return (desc.Flags & CUDA_ARRAY3D_CUBEMAP) != 0; }
  bool surface_ldst() const { return (desc.Flags & CUDA_ARRAY3D_SURFACE_LDST) != 0; }
};

}  // namespace softgpu
