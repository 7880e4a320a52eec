// Kernel attributes and occupancy, for kernels named by host stub (the compiler's path) or by
// module function.
#include "interpose/hip/runtime.h"

namespace h = rgpu::hip;
using h::Activate;
using h::Error;
using h::Ret;

namespace {

Error Attribute(CUfunction f, CUfunction_attribute a, int* value) {
  return h::ToHip(CU(cuFuncGetAttribute)(value, a, f));
}

}  // namespace

HIP_API(hipFuncGetAttributes)(h::FuncAttributes* out, const void* stub)->Error {
  if (out == nullptr) return Ret(h::hipErrorInvalidValue);
  CUfunction f;
  Error e = h::FunctionOfStub(stub, &f);
  if (e != h::hipSuccess) return Ret(e);
  int v[9] = {};
  const CUfunction_attribute kAttributes[9] = {CU_FUNC_ATTRIBUTE_BINARY_VERSION,
                                               CU_FUNC_ATTRIBUTE_CACHE_MODE_CA,
                                               CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES,
                                               CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
                                               CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                               CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                               CU_FUNC_ATTRIBUTE_NUM_REGS,
                                               CU_FUNC_ATTRIBUTE_PTX_VERSION,
                                               CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES};
  for (int i = 0; i < 9; ++i) {
    e = Attribute(f, kAttributes[i], &v[i]);
    if (e != h::hipSuccess) return Ret(e);
  }
  *out = h::FuncAttributes{};
  out->binaryVersion = v[0];
  out->cacheModeCA = v[1];
  out->constSizeBytes = static_cast<size_t>(v[2]);
  out->localSizeBytes = static_cast<size_t>(v[3]);
  out->maxDynamicSharedSizeBytes = v[4];
  out->maxThreadsPerBlock = v[5];
  out->numRegs = v[6];
  out->ptxVersion = v[7];
  out->sharedSizeBytes = static_cast<size_t>(v[8]);
  return h::hipSuccess;
}

HIP_API(hipFuncGetAttribute)(int* value, int attribute, CUfunction f)->Error {
  if (value == nullptr) return Ret(h::hipErrorInvalidValue);
  if (f == nullptr) return Ret(h::hipErrorInvalidHandle);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  // hipFunction_attribute numbers its members as the driver does.
  return Ret(Attribute(f, static_cast<CUfunction_attribute>(attribute), value));
}

HIP_API(hipModuleOccupancyMaxPotentialBlockSize)
(int* grid, int* block, CUfunction f, size_t shared, int limit)->Error {
  if (grid == nullptr || block == nullptr) return Ret(h::hipErrorInvalidValue);
  if (f == nullptr) return Ret(h::hipErrorInvalidHandle);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuOccupancyMaxPotentialBlockSize)(grid, block, f, nullptr, shared, limit));
}

HIP_API(hipModuleOccupancyMaxPotentialBlockSizeWithFlags)
(int* grid, int* block, CUfunction f, size_t shared, int limit, unsigned flags)->Error {
  if (grid == nullptr || block == nullptr) return Ret(h::hipErrorInvalidValue);
  if (f == nullptr) return Ret(h::hipErrorInvalidHandle);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(
      CU(cuOccupancyMaxPotentialBlockSizeWithFlags)(grid, block, f, nullptr, shared, limit, flags));
}

HIP_API(hipOccupancyMaxPotentialBlockSize)
(int* grid, int* block, const void* stub, size_t shared, int limit)->Error {
  CUfunction f;
  Error e = h::FunctionOfStub(stub, &f);
  if (e != h::hipSuccess) return Ret(e);
  return rgpu_hip_hipModuleOccupancyMaxPotentialBlockSize(grid, block, f, shared, limit);
}

HIP_API(hipModuleOccupancyMaxActiveBlocksPerMultiprocessor)
(int* blocks, CUfunction f, int block_size, size_t shared)->Error {
  if (blocks == nullptr) return Ret(h::hipErrorInvalidValue);
  if (f == nullptr) return Ret(h::hipErrorInvalidHandle);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuOccupancyMaxActiveBlocksPerMultiprocessor)(blocks, f, block_size, shared));
}

HIP_API(hipModuleOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)
(int* blocks, CUfunction f, int block_size, size_t shared, unsigned flags)->Error {
  if (blocks == nullptr) return Ret(h::hipErrorInvalidValue);
  if (f == nullptr) return Ret(h::hipErrorInvalidHandle);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)(blocks, f, block_size, shared,
                                                                      flags));
}

HIP_API(hipOccupancyMaxActiveBlocksPerMultiprocessor)
(int* blocks, const void* stub, int block_size, size_t shared)->Error {
  CUfunction f;
  Error e = h::FunctionOfStub(stub, &f);
  if (e != h::hipSuccess) return Ret(e);
  return rgpu_hip_hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(blocks, f, block_size, shared);
}

HIP_API(hipOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)
(int* blocks, const void* stub, int block_size, size_t shared, unsigned flags)->Error {
  CUfunction f;
  Error e = h::FunctionOfStub(stub, &f);
  if (e != h::hipSuccess) return Ret(e);
  return rgpu_hip_hipModuleOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, f, block_size,
                                                                              shared, flags);
}

HIP_API(hipFuncSetAttribute)(const void* stub, int attribute, int value)->Error {
  CUfunction f;
  Error e = h::FunctionOfStub(stub, &f);
  if (e != h::hipSuccess) return Ret(e);
  // hipFuncAttribute's two members have the driver's numbers (8 and 9).
  return Ret(CU(cuFuncSetAttribute)(f, static_cast<CUfunction_attribute>(attribute), value));
}

HIP_API(hipFuncSetCacheConfig)(const void* stub, int config)->Error {
  CUfunction f;
  Error e = h::FunctionOfStub(stub, &f);
  if (e != h::hipSuccess) return Ret(e);
  // hipFuncCache_t has the driver's values.
  return Ret(CU(cuFuncSetCacheConfig)(f, static_cast<CUfunc_cache>(config)));
}
