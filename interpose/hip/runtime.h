// The HIP runtime of rgpu (librgpu-hip-runtime.so), loaded by the face into the private link
// namespace beside the client runtime. It implements HIP's runtime semantics (a current device
// per thread, each device's primary context, the last error, fat-binary registration) on the
// client's CUDA driver-API implementations, so everything a HIP program does travels the same
// wire, and the server stays backend-neutral. This header is what the runtime's files share.
#pragma once

#include <cuda.h>

#include <vector>

#include "interpose/hip/hip_types.h"

// The client's implementations (librgpu-client.so exports them as rgpu_impl_<name>).
#define DRIVER_CALL(name) extern "C" decltype(::name) rgpu_impl_##name;
#include "interpose/hip/driver_calls.def"
#undef DRIVER_CALL

// Calls the client's implementation of driver entry point `name`.
#define CU(name) rgpu_impl_##name

// Defines the runtime's implementation of HIP entry point `name`, which the face's `name`
// forwards to. The result type and parameters follow: HIP_API(hipFree)(void* p) -> ...
#define HIP_API(name) extern "C" __attribute__((visibility("default"))) auto rgpu_hip_##name

namespace rgpu::hip {

// The HIP error for a driver result: the same number where HIP defines one (HIP's codes follow
// CUDA's), else hipErrorUnknown.
Error ToHip(CUresult r);

// HIP's name for `e` ("hipErrorNoBinaryForGpu"), as hipGetErrorName answers.
const char* ErrorName(Error e);

// Records `e` as the calling thread's last error when it is one (hipGetLastError), returns it.
Error Ret(Error e);
inline Error Ret(CUresult r) { return Ret(ToHip(r)); }

// Initializes the client once (cuInit) and returns its result; `count` receives the number of
// devices the server offers.
Error Initialize(int* count = nullptr);

// hipSuccess when `device` is a device of the server (initializing the client first),
// hipErrorInvalidDevice (or the initialization's error) otherwise.
Error CheckDevice(int device);

// The calling thread's current device (hipSetDevice; 0 until set).
int CurrentDevice();
void SetCurrentDevice(int device);

// Makes the primary context of the calling thread's current device current on this thread,
// retaining it on first use, and returns the device in `*device` when asked. Every HIP call that
// touches a device goes through here, as HIP's runtime would.
Error Activate(int* device = nullptr);

// The primary context of `device` (checked), retained by the runtime on first use.
Error PrimaryContext(int device, CUcontext* out);

// The device whose primary context is `ctx`, or -1.
int DeviceOfPrimary(CUcontext ctx);

// Runs `call` (a driver call) in the current device's primary context and returns its result as
// HIP's, recorded as the last error when it is one.
template <typename F>
Error InContext(F call) {
  Error e = Activate();
  if (e != hipSuccess) return Ret(e);
  return Ret(call());
}

// Releases what the runtime holds for `device` after hipDeviceReset: its primary context is
// retained again on next use, and registered code is loaded again.
void ForgetDevice(int device);

// The function of the kernel whose host stub is `stub` (registered by __hipRegisterFunction), in
// the current device, loading the program's code there on first use.
Error FunctionOfStub(const void* stub, CUfunction* out);

// Registered code objects must be loaded again into `device` after a reset (registration.cc).
void ForgetRegisteredModules(int device);

// The host stub whose kernel is `f` (a function FunctionOfStub returned), or nullptr.
const void* StubOfFunction(CUfunction f);

// A launch's `extra` array in the driver's form: HIP ends it with its own marker (3), the driver
// with 0 (module.cc). `out` is left empty for a null `extra`.
Error DriverExtra(void** extra, std::vector<void*>* out);

// The driver's description of a hipMemcpy3D copy (hipMemcpy3D and graph memcpy nodes): positions
// and widths of array ends are in elements, of linear ends in bytes (memory.cc).
Error DriverCopy3D(const Memcpy3DParms& p, CUDA_MEMCPY3D* out);

// The driver's array behind a hipArray the runtime made, and the bytes of one of its elements;
// hipErrorInvalidValue for anything else (array.cc).
Error DriverArray(const Array* array, CUarray* out, size_t* element_bytes = nullptr);

}  // namespace rgpu::hip

namespace rgpu::hip {

// Loads device code into the current context: an AMDGPU code object, or the code objects of a
// clang offload bundle one after another until the server's device accepts one. When the device
// can run none of them the answer is hipErrorNoBinaryForGpu, and each refusal is logged (with
// RGPU_LOG) with the code object's target. Other images (PTX, cubins) go to the server as they
// are. `limit` bounds a bundle's extent when known (0: unknown).
Error LoadDeviceCode(const void* image, size_t limit, CUmodule* out);

}  // namespace rgpu::hip
