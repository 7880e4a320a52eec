// HIP's context API, as HIP itself has it on AMD GPUs: a device's context is its primary
// context, and making one current selects its device. Contexts other than the primary ones
// (hipCtxCreate, push and pop) are not supported.
#include "interpose/hip/runtime.h"

namespace h = rgpu::hip;
using h::Activate;
using h::Error;
using h::Ret;

HIP_API(hipDevicePrimaryCtxRetain)(CUcontext* ctx, int device)->Error {
  if (ctx == nullptr) return Ret(h::hipErrorInvalidValue);
  // The runtime holds each primary context from its first use to the end: one reference.
  return Ret(h::PrimaryContext(device, ctx));
}

HIP_API(hipDevicePrimaryCtxRelease)(int device)->Error {
  CUcontext ctx;
  return Ret(h::PrimaryContext(device, &ctx));  // the runtime's reference stays
}

HIP_API(hipDevicePrimaryCtxGetState)(int device, unsigned int* flags, int* active)->Error {
  if (flags == nullptr || active == nullptr) return Ret(h::hipErrorInvalidValue);
  CUcontext ctx;
  Error e = h::PrimaryContext(device, &ctx);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuDevicePrimaryCtxGetState)(device, flags, active));
}

HIP_API(hipDevicePrimaryCtxSetFlags)(int device, unsigned int flags)->Error {
  CUcontext ctx;
  Error e = h::PrimaryContext(device, &ctx);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuDevicePrimaryCtxSetFlags_v2)(device, flags));
}

HIP_API(hipDevicePrimaryCtxReset)(int device)->Error {
  CUcontext ctx;
  Error e = h::PrimaryContext(device, &ctx);
  if (e != h::hipSuccess) return Ret(e);
  CUresult r = CU(cuDevicePrimaryCtxReset_v2)(device);
  h::ForgetDevice(device);
  return Ret(r);
}

HIP_API(hipCtxGetCurrent)(CUcontext* ctx)->Error {
  if (ctx == nullptr) return Ret(h::hipErrorInvalidValue);
  int device;
  Error e = Activate(&device);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(h::PrimaryContext(device, ctx));
}

HIP_API(hipCtxSetCurrent)(CUcontext ctx)->Error {
  if (ctx == nullptr) return h::hipSuccess;  // the thread keeps its device
  const int device = h::DeviceOfPrimary(ctx);
  if (device < 0) return Ret(h::hipErrorInvalidContext);
  h::SetCurrentDevice(device);
  return Ret(Activate());
}

HIP_API(hipCtxGetDevice)(int* device)->Error {
  if (device == nullptr) return Ret(h::hipErrorInvalidValue);
  return Ret(Activate(device));
}

HIP_API(hipCtxSynchronize)()->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuCtxSynchronize)());
}
