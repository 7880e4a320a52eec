// Streams and events (HIP's flags and handles are the driver's).
#include "interpose/hip/runtime.h"

namespace h = rgpu::hip;
using h::Activate;
using h::Error;
using h::Ret;

using h::InContext;

HIP_API(hipStreamCreate)(CUstream* s)->Error {
  if (s == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuStreamCreate)(s, CU_STREAM_DEFAULT); });
}
HIP_API(hipStreamCreateWithFlags)(CUstream* s, unsigned int flags)->Error {
  if (s == nullptr || (flags & ~h::kStreamNonBlocking)) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuStreamCreate)(s, flags); });
}
HIP_API(hipStreamCreateWithPriority)(CUstream* s, unsigned int flags, int priority)->Error {
  if (s == nullptr || (flags & ~h::kStreamNonBlocking)) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuStreamCreateWithPriority)(s, flags, priority); });
}
HIP_API(hipStreamDestroy)(CUstream s)->Error {
  if (s == nullptr) return Ret(h::hipErrorInvalidHandle);
  return InContext([&] { return CU(cuStreamDestroy_v2)(s); });
}
HIP_API(hipStreamSynchronize)(CUstream s)->Error {
  return InContext([&] { return CU(cuStreamSynchronize)(s); });
}
HIP_API(hipStreamQuery)(CUstream s)->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  CUresult r = CU(cuStreamQuery)(s);
  // Not ready is an answer, not an error to remember.
  return r == CUDA_ERROR_NOT_READY ? h::hipErrorNotReady : Ret(r);
}
HIP_API(hipStreamWaitEvent)(CUstream s, CUevent event, unsigned int flags)->Error {
  if (event == nullptr) return Ret(h::hipErrorInvalidHandle);
  return InContext([&] { return CU(cuStreamWaitEvent)(s, event, flags); });
}
HIP_API(hipStreamGetFlags)(CUstream s, unsigned int* flags)->Error {
  if (flags == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuStreamGetFlags)(s, flags); });
}
HIP_API(hipStreamGetPriority)(CUstream s, int* priority)->Error {
  if (priority == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuStreamGetPriority)(s, priority); });
}

HIP_API(hipEventCreateWithFlags)(CUevent* event, unsigned int flags)->Error {
  const unsigned known = h::kEventBlockingSync | h::kEventDisableTiming | h::kEventInterprocess;
  if (event == nullptr || (flags & ~known)) return Ret(h::hipErrorInvalidValue);
  unsigned cu = 0;
  if (flags & h::kEventBlockingSync) cu |= CU_EVENT_BLOCKING_SYNC;
  if (flags & h::kEventDisableTiming) cu |= CU_EVENT_DISABLE_TIMING;
  if (flags & h::kEventInterprocess) cu |= CU_EVENT_INTERPROCESS;
  return InContext([&] { return CU(cuEventCreate)(event, cu); });
}
HIP_API(hipEventCreate)(CUevent* event)->Error {
  return rgpu_hip_hipEventCreateWithFlags(event, 0);
}
HIP_API(hipEventRecord)(CUevent event, CUstream s)->Error {
  if (event == nullptr) return Ret(h::hipErrorInvalidHandle);
  return InContext([&] { return CU(cuEventRecord)(event, s); });
}
HIP_API(hipEventSynchronize)(CUevent event)->Error {
  if (event == nullptr) return Ret(h::hipErrorInvalidHandle);
  return InContext([&] { return CU(cuEventSynchronize)(event); });
}
HIP_API(hipEventQuery)(CUevent event)->Error {
  if (event == nullptr) return Ret(h::hipErrorInvalidHandle);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  CUresult r = CU(cuEventQuery)(event);
  return r == CUDA_ERROR_NOT_READY ? h::hipErrorNotReady : Ret(r);
}
HIP_API(hipEventElapsedTime)(float* ms, CUevent start, CUevent stop)->Error {
  if (ms == nullptr) return Ret(h::hipErrorInvalidValue);
  if (start == nullptr || stop == nullptr) return Ret(h::hipErrorInvalidHandle);
  return InContext([&] { return CU(cuEventElapsedTime_v2)(ms, start, stop); });
}
HIP_API(hipEventDestroy)(CUevent event)->Error {
  if (event == nullptr) return Ret(h::hipErrorInvalidHandle);
  return InContext([&] { return CU(cuEventDestroy_v2)(event); });
}

// hipStreamCallback_t and CUstreamCallback take the same arguments (hipError_t and CUresult
// share their numbers).
HIP_API(hipStreamAddCallback)
(CUstream s, CUstreamCallback callback, void* data, unsigned int flags)->Error {
  if (callback == nullptr || flags != 0) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuStreamAddCallback)(s, callback, data, flags); });
}
