// Older exported names of driver functions whose signature did not change when cuda.h moved to
// a _v2 symbol. The real libcuda exports both; so does softgpu.
#include <cuda.h>

#include "softgpu/api_util.h"

#define SOFTGPU_ALIAS(ret, old_name, current, params, args)                                 \
  extern "C" SOFTGPU_EXPORT ret CUDAAPI softgpu_alias_##old_name params __asm__(#old_name); \
  extern "C" SOFTGPU_EXPORT ret CUDAAPI softgpu_alias_##old_name params { return current args; }

SOFTGPU_ALIAS(CUresult, cuCtxDestroy, cuCtxDestroy_v2, (CUcontext ctx), (ctx))
SOFTGPU_ALIAS(CUresult, cuCtxPopCurrent, cuCtxPopCurrent_v2, (CUcontext * pctx), (pctx))
SOFTGPU_ALIAS(CUresult, cuCtxPushCurrent, cuCtxPushCurrent_v2, (CUcontext ctx), (ctx))
SOFTGPU_ALIAS(CUresult, cuStreamDestroy, cuStreamDestroy_v2, (CUstream s), (s))
SOFTGPU_ALIAS(CUresult, cuEventDestroy, cuEventDestroy_v2, (CUevent e), (e))
SOFTGPU_ALIAS(CUresult, cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, (CUdevice d), (d))
SOFTGPU_ALIAS(CUresult, cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2, (CUdevice d), (d))
SOFTGPU_ALIAS(CUresult, cuDevicePrimaryCtxSetFlags, cuDevicePrimaryCtxSetFlags_v2,
              (CUdevice d, unsigned int flags), (d, flags))
SOFTGPU_ALIAS(CUresult, cuIpcOpenMemHandle, cuIpcOpenMemHandle_v2,
              (CUdeviceptr * pdptr, CUipcMemHandle handle, unsigned int flags),
              (pdptr, handle, flags))
SOFTGPU_ALIAS(CUresult, cuMemHostRegister, cuMemHostRegister_v2,
              (void* p, size_t bytesize, unsigned int Flags), (p, bytesize, Flags))
