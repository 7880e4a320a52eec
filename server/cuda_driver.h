// CudaDriver: the CUDA driver API of a backend library loaded with dlopen: NVIDIA's libcuda.so.1
// on GPU hosts, or libsoftgpu-cuda.so on hosts without one. The server calls the backend only
// through this table, so the same code drives a real GPU or the software GPU.
#pragma once

#include <cuda.h>

#include <string>

#include "common/status.h"

namespace rgpu::server {

// softgpu's extension: where a context's device printf output goes (see softgpu/api_context.cc).
using SoftgpuSetPrintfHandlerFn = CUresult (*)(CUcontext, void (*)(void*, const char*, size_t),
                                               void*);

// softgpu's extension: waits until a copy on a stream could start and returns the host address
// backing a device range (see softgpu/api_memory.cc), so that transfers move without a copy.
using SoftgpuMemDirectAccessFn = CUresult (*)(void** host, CUdeviceptr dptr, size_t bytes,
                                              CUstream stream);

// softgpu's extension: the bytes of device memory a module's global and constant variables hold.
using SoftgpuModuleGetFootprintFn = CUresult (*)(CUmodule module, size_t* bytes);

// softgpu's extensions: softgpuCtxAbort and softgpuCtxSetKernelTimeout (softgpu/api_context.cc).
using SoftgpuCtxAbortFn = CUresult (*)(CUcontext ctx);
using SoftgpuCtxSetKernelTimeoutFn = CUresult (*)(CUcontext ctx, unsigned long long ms);

// softgpu's extension: whether __managed__ variables are host memory at their device address
// (softgpu/api_module.cc); the server says no, since its client maps them itself.
using SoftgpuSetNativeManagedVariablesFn = CUresult (*)(int native);
// softgpu's extension: whether kernels reach page-locked host memory (softgpu/memory.h); the
// server says no, since it serves several tenants in one process and that memory is its own.
using SoftgpuSetKernelHostAccessFn = CUresult (*)(int reach);

// softgpu's extensions for restoring a session at its device addresses (softgpu/api_memory.cc,
// softgpu/api_module.cc, docs/migration.md).
using SoftgpuMemAllocAtFn = CUresult (*)(CUdeviceptr dptr, size_t bytes);
using SoftgpuModuleGetVariableRangesFn = CUresult (*)(CUmodule module, CUdeviceptr* bases,
                                                      size_t* sizes, size_t* count);
using SoftgpuModuleLoadDataAtFn = CUresult (*)(CUmodule* module, const void* image,
                                               const CUdeviceptr* bases, size_t count);

struct CudaDriver {
#define DRIVER_FN(name) decltype(&::name) name = nullptr;
#define DRIVER_FN_REQUIRED(name) DRIVER_FN(name)
#define DRIVER_EXT(name, type) type name = nullptr;
#include "server/driver_api.def"
#undef DRIVER_FN
#undef DRIVER_FN_REQUIRED
#undef DRIVER_EXT

  std::string library_path;
  void* handle = nullptr;

  // Loads `path` with dlopen and resolves every entry; fails if a REQUIRED one is missing.
  static Status Load(const std::string& path, CudaDriver* out);
};

}  // namespace rgpu::server
