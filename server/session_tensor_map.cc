// Session's handler for tensor maps (proto/calls.def: TensorMapEncode): the backend encodes the
// map, which is a value (no object of the session holds it). The rank is checked here before
// the backend reads any array, so a tenant cannot make it read past them, and the tensor's
// start address must be memory of the call's context.
#include <cstring>

#include "server/require_fn.h"
#include "server/session.h"

namespace rgpu::server {

CUresult Session::HandleTensorMapEncode(CallState& cs, const TensorMapEncodeIn& in,
                                        calls::TensorMapEncode::Results* out) {
  constexpr uint32_t kMaxRank = 5;
  if (in.rank == 0 || in.rank > kMaxRank) return CUDA_ERROR_INVALID_VALUE;
  // A map names memory by address: its first element must be the context's.
  if (!CheckRange(cs, in.address, 1, "address")) return CUDA_ERROR_INVALID_VALUE;
  const cuuint64_t dims[kMaxRank] = {in.dim0, in.dim1, in.dim2, in.dim3, in.dim4};
  const cuuint64_t strides[kMaxRank - 1] = {in.stride1, in.stride2, in.stride3, in.stride4};
  const cuuint32_t box[kMaxRank] = {in.box0, in.box1, in.box2, in.box3, in.box4};
  const cuuint32_t element_strides[kMaxRank] = {in.element_stride0, in.element_stride1,
                                                in.element_stride2, in.element_stride3,
                                                in.element_stride4};
  const int lower[kMaxRank - 2] = {in.lower0, in.lower1, in.lower2};
  const int upper[kMaxRank - 2] = {in.upper0, in.upper1, in.upper2};
  void* address = reinterpret_cast<void*>(in.address);
  const auto type = static_cast<CUtensorMapDataType>(in.data_type);
  const auto interleave = static_cast<CUtensorMapInterleave>(in.interleave);
  const auto swizzle = static_cast<CUtensorMapSwizzle>(in.swizzle);
  const auto l2 = static_cast<CUtensorMapL2promotion>(in.l2_promotion);
  const auto oob = static_cast<CUtensorMapFloatOOBfill>(in.oob_fill);
  CUtensorMap map;  // aligned as cuda.h declares it
  CUresult r;
  switch (in.mode) {
    case 0:
      REQUIRE_FN(cuTensorMapEncodeTiled);
      r = drv_.cuTensorMapEncodeTiled(&map, type, in.rank, address, dims, strides, box,
                                      element_strides, interleave, swizzle, l2, oob);
      break;
    case 1:
      REQUIRE_FN(cuTensorMapEncodeIm2col);
      r = drv_.cuTensorMapEncodeIm2col(&map, type, in.rank, address, dims, strides, lower, upper,
                                       in.channels, in.pixels, element_strides, interleave, swizzle,
                                       l2, oob);
      break;
    case 2:
      REQUIRE_FN(cuTensorMapEncodeIm2colWide);
      r = drv_.cuTensorMapEncodeIm2colWide(
          &map, type, in.rank, address, dims, strides, in.lower0, in.upper0, in.channels, in.pixels,
          element_strides, interleave, static_cast<CUtensorMapIm2ColWideMode>(in.wide_mode),
          swizzle, l2, oob);
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  if (r != CUDA_SUCCESS) return r;
  uint64_t words[sizeof map / 8];
  memcpy(words, &map, sizeof map);
  out->words.assign(words, words + sizeof map / 8);
  return CUDA_SUCCESS;
}

}  // namespace rgpu::server
