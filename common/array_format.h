// The size of one channel of a CUDA array format (cuda.h's CUarray_format), shared by the client,
// the server and the software GPU, which must agree on it: an array's bytes are width x height x
// depth x channels x this. Header-only; the including target provides cuda.h.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace rgpu {

// Bytes of one channel of `format`; 0 for the formats whose element is not a channel count times
// a size (block-compressed and planar video formats), which rgpu does not support.
inline uint32_t ArrayFormatChannelBytes(CUarray_format format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      return 4;
    default:
      return 0;
  }
}

}  // namespace rgpu
