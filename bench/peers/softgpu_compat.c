// softgpu_compat.c: what a peer's server needs from libcuda.so.1 beyond what softgpu's bare
// driver gives, each mapped onto softgpu's own entry points; loaded with LD_PRELOAD into the
// peer's server only (run_peer.sh), never into rgpu's. Nothing here does device work itself.
//   cc -shared -fPIC -O2 -I/usr/local/cuda/include -o libsoftgpu-compat.so softgpu_compat.c -ldl
// - cuCtxCreate_v2: a legacy name NVIDIA's libcuda.so.1 still exports and softgpu does not
//   (LUPINE's server creates every context through it).
// - cuMemHostGetDevicePointer(_v2) on registered host memory: softgpu refuses it (its kernels
//   cannot reach registered memory); a GPU with unified addressing answers with the pointer
//   itself, which LUPINE's pinned allocations insist on. We answer the same, so copies to and
//   from that memory work; a kernel that dereferenced it would fault (none of the benchmarks or
//   samples run here does).
// - cuStreamIsCapturing: softgpu has no stream capture, so no stream is ever capturing.
// build.sh adds, per peer server, a stub answering CUDA_ERROR_NOT_SUPPORTED for every other
// driver function the server imports and softgpu lacks (a driver without that feature), so that
// such a call fails the program's call instead of killing the server.
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stddef.h>

static void* Next(const char* name) { return dlsym(RTLD_NEXT, name); }

CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int flags, CUdevice dev) {
  typedef CUresult (*V4)(CUcontext*, CUctxCreateParams*, unsigned int, CUdevice);
  static V4 v4;
  if (!v4) v4 = (V4)Next("cuCtxCreate_v4");
  return v4 ? v4(ctx, NULL, flags, dev) : CUDA_ERROR_NOT_SUPPORTED;
}

typedef CUresult (*GetDevicePointer)(CUdeviceptr*, void*, unsigned int);

static CUresult DevicePointer(const char* name, CUdeviceptr* dptr, void* p, unsigned int flags) {
  GetDevicePointer real = (GetDevicePointer)Next(name);
  if (!real) real = (GetDevicePointer)Next("cuMemHostGetDevicePointer_v2");
  if (!real) return CUDA_ERROR_NOT_SUPPORTED;
  CUresult r = real(dptr, p, flags);
  if (r == CUDA_ERROR_NOT_SUPPORTED && dptr != NULL) {  // registered memory with DEVICEMAP
    *dptr = (CUdeviceptr)p;
    return CUDA_SUCCESS;
  }
  return r;
}

#undef cuMemHostGetDevicePointer
CUresult cuMemHostGetDevicePointer(CUdeviceptr* dptr, void* p, unsigned int flags) {
  return DevicePointer("cuMemHostGetDevicePointer", dptr, p, flags);
}
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* dptr, void* p, unsigned int flags) {
  return DevicePointer("cuMemHostGetDevicePointer_v2", dptr, p, flags);
}

CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  (void)stream;
  if (status == NULL) return CUDA_ERROR_INVALID_VALUE;
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
