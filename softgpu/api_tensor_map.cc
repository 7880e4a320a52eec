// Tensor maps: cuTensorMapEncodeTiled and cuTensorMapReplaceAddress. A map is a value (128 bytes
// in softgpu's own layout, tensor_map.h) that kernels pass to cp.async.bulk.tensor; making one
// touches no device state, and a kernel checks it again before each copy (exec_tensor.cc).
// im2col maps (cuTensorMapEncodeIm2col, ...Im2colWide) are not exported: softgpu has no im2col
// copies, and the server reports an absent entry point as unsupported.
#include <cuda.h>

#include "common/log.h"
#include "softgpu/api_util.h"
#include "softgpu/tensor_map.h"

using namespace softgpu;

SOFTGPU_EXPORT CUresult CUDAAPI cuTensorMapEncodeTiled(
    CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
    void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
    const cuuint32_t* boxDim, const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
    CUtensorMapFloatOOBfill oobFill) {
  return Guard([&]() -> CUresult {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (tensorMap == nullptr || reinterpret_cast<uintptr_t>(tensorMap) % 64 != 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    TensorMap map;
    const char* why = nullptr;
    const CUresult r =
        MakeTiledTensorMap(tensorDataType, tensorRank, reinterpret_cast<uint64_t>(globalAddress),
                           globalDim, globalStrides, boxDim, elementStrides, interleave, swizzle,
                           l2Promotion, oobFill, &map, &why);
    if (r == CUDA_ERROR_NOT_SUPPORTED) {
      RGPU_LOG_WARN("softgpu: cuTensorMapEncodeTiled: %s not supported", why);
    }
    if (r != CUDA_SUCCESS) return r;
    EncodeTensorMap(map, tensorMap);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuTensorMapReplaceAddress(CUtensorMap* tensorMap,
                                                          void* globalAddress) {
  return Guard([&]() -> CUresult {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (tensorMap == nullptr || reinterpret_cast<uintptr_t>(tensorMap) % 64 != 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    TensorMap map;
    if (!DecodeTensorMap(reinterpret_cast<const uint8_t*>(tensorMap), &map)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const uint64_t address = reinterpret_cast<uint64_t>(globalAddress);
    if (address % 16 != 0) return CUDA_ERROR_INVALID_VALUE;
    map.address = address;
    EncodeTensorMap(map, tensorMap);
    return CUDA_SUCCESS;
  });
}
