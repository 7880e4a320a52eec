// The `_spt` entry points that programs built with `hipcc -fgpu-default-stream=per-thread` call
// in place of the plain ones: the same operations, with the null stream meaning the calling
// thread's own default stream (hipStreamPerThread, the driver's CU_STREAM_PER_THREAD) rather
// than the device's shared one. Synchronous operations are ordered on that stream and waited for.
#include "interpose/hip/runtime.h"

namespace h = rgpu::hip;
using h::Error;

// The plain entry points these build on (memory.cc, stream_event.cc, registration.cc).
extern "C" {
Error rgpu_hip_hipMemcpyAsync(void*, const void*, size_t, int, CUstream);
Error rgpu_hip_hipMemsetAsync(void*, int, size_t, CUstream);
Error rgpu_hip_hipMemcpy2DAsync(void*, size_t, const void*, size_t, size_t, size_t, int, CUstream);
Error rgpu_hip_hipMemset2DAsync(void*, size_t, int, size_t, size_t, CUstream);
Error rgpu_hip_hipMemcpyToSymbolAsync(const void*, const void*, size_t, size_t, int, CUstream);
Error rgpu_hip_hipMemcpyFromSymbolAsync(void*, const void*, size_t, size_t, int, CUstream);
Error rgpu_hip_hipMemcpy3DAsync(const h::Memcpy3DParms*, CUstream);
Error rgpu_hip_hipMemset3DAsync(h::PitchedPtr, int, h::Extent, CUstream);
Error rgpu_hip_hipStreamSynchronize(CUstream);
Error rgpu_hip_hipStreamQuery(CUstream);
Error rgpu_hip_hipStreamWaitEvent(CUstream, CUevent, unsigned int);
Error rgpu_hip_hipStreamGetFlags(CUstream, unsigned int*);
Error rgpu_hip_hipStreamGetPriority(CUstream, int*);
Error rgpu_hip_hipLaunchKernel(const void*, h::Dim3, h::Dim3, void**, size_t, CUstream);
}

namespace {

// The stream a per-thread-default-stream program means by `s`.
CUstream Own(CUstream s) { return s == nullptr ? CU_STREAM_PER_THREAD : s; }

// `e`, or once the thread's stream has drained, its result.
Error ThenWait(Error e) {
  return e != h::hipSuccess ? e : rgpu_hip_hipStreamSynchronize(CU_STREAM_PER_THREAD);
}

}  // namespace

HIP_API(hipMemcpy_spt)(void* dst, const void* src, size_t bytes, int kind)->Error {
  return ThenWait(rgpu_hip_hipMemcpyAsync(dst, src, bytes, kind, CU_STREAM_PER_THREAD));
}
HIP_API(hipMemcpyAsync_spt)
(void* dst, const void* src, size_t bytes, int kind, CUstream s)->Error {
  return rgpu_hip_hipMemcpyAsync(dst, src, bytes, kind, Own(s));
}
HIP_API(hipMemset_spt)(void* dst, int value, size_t bytes)->Error {
  return ThenWait(rgpu_hip_hipMemsetAsync(dst, value, bytes, CU_STREAM_PER_THREAD));
}
HIP_API(hipMemcpy2D_spt)
(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height, int kind)
    ->Error {
  return ThenWait(rgpu_hip_hipMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind,
                                            CU_STREAM_PER_THREAD));
}
HIP_API(hipMemset2D_spt)
(void* dst, size_t pitch, int value, size_t width, size_t height)->Error {
  return ThenWait(
      rgpu_hip_hipMemset2DAsync(dst, pitch, value, width, height, CU_STREAM_PER_THREAD));
}
HIP_API(hipMemcpyToSymbol_spt)
(const void* symbol, const void* src, size_t bytes, size_t offset, int kind)->Error {
  return ThenWait(
      rgpu_hip_hipMemcpyToSymbolAsync(symbol, src, bytes, offset, kind, CU_STREAM_PER_THREAD));
}
HIP_API(hipMemcpyFromSymbol_spt)
(void* dst, const void* symbol, size_t bytes, size_t offset, int kind)->Error {
  return ThenWait(
      rgpu_hip_hipMemcpyFromSymbolAsync(dst, symbol, bytes, offset, kind, CU_STREAM_PER_THREAD));
}
HIP_API(hipMemcpy3D_spt)(const h::Memcpy3DParms* p)->Error {
  return ThenWait(rgpu_hip_hipMemcpy3DAsync(p, CU_STREAM_PER_THREAD));
}
HIP_API(hipMemset3D_spt)(h::PitchedPtr p, int value, h::Extent extent)->Error {
  return ThenWait(rgpu_hip_hipMemset3DAsync(p, value, extent, CU_STREAM_PER_THREAD));
}
HIP_API(hipStreamSynchronize_spt)(CUstream s)->Error {
  return rgpu_hip_hipStreamSynchronize(Own(s));
}
HIP_API(hipStreamQuery_spt)(CUstream s)->Error { return rgpu_hip_hipStreamQuery(Own(s)); }
HIP_API(hipStreamWaitEvent_spt)(CUstream s, CUevent e, unsigned int flags)->Error {
  return rgpu_hip_hipStreamWaitEvent(Own(s), e, flags);
}
HIP_API(hipStreamGetFlags_spt)(CUstream s, unsigned int* flags)->Error {
  return rgpu_hip_hipStreamGetFlags(Own(s), flags);
}
HIP_API(hipStreamGetPriority_spt)(CUstream s, int* priority)->Error {
  return rgpu_hip_hipStreamGetPriority(Own(s), priority);
}
HIP_API(hipLaunchKernel_spt)
(const void* stub, h::Dim3 grid, h::Dim3 block, void** args, size_t shared, CUstream s)->Error {
  return rgpu_hip_hipLaunchKernel(stub, grid, block, args, shared, Own(s));
}
