// A HIP runtime made of the software GPU, for testing the server's HIP backend where no AMD GPU
// is: librgpu-test-softhip.so defines the HIP entry points the backend calls
// (server/backends/hip/hip_runtime_calls.def) on softgpu's driver API, and rgpu-server loads it
// through the backend with RGPU_HIP_LIBRARY. It moves data for real (on the software GPU); it
// cannot run AMDGPU code, so it reports its processor as "softgpu" and the backend refuses every
// code object, as it refuses another processor's. It is a test double: it is never installed.
#include <cuda.h>
#include <string.h>

#include <mutex>
#include <vector>

#include "interpose/hip/hip_types.h"

// The definitions below must match the declarations the backend resolves.
#define HIP_CALL(result, name, params) extern "C" result name params;
#include "server/backends/hip/hip_runtime_calls.def"
#undef HIP_CALL

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

std::mutex g_mu;
std::vector<CUcontext> g_primary;  // per device, retained on first hipSetDevice

int R(CUresult r) { return static_cast<int>(r); }
CUdeviceptr D(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

}  // namespace

EXPORT int hipInit(unsigned int flags) { return R(cuInit(flags)); }
EXPORT int hipRuntimeGetVersion(int* version) { return R(cuDriverGetVersion(version)); }
EXPORT int hipGetDeviceCount(int* count) { return R(cuDeviceGetCount(count)); }
EXPORT int hipDeviceGetName(char* name, int length, int device) {
  return R(cuDeviceGetName(name, length, device));
}
EXPORT int hipDeviceTotalMem(size_t* bytes, int device) {
  return R(cuDeviceTotalMem(bytes, device));
}
EXPORT int hipDeviceGetAttribute(int* value, int attribute, int device) {
  switch (attribute) {
#define HIP_ATTRIBUTE(name, number, cu)                   \
  case number:                                            \
    if ((cu) < 0) return rgpu::hip::hipErrorInvalidValue; \
    return R(cuDeviceGetAttribute(value, static_cast<CUdevice_attribute>(cu), device));
#include "interpose/hip/device_attributes.def"
#undef HIP_ATTRIBUTE
    default:
      return rgpu::hip::hipErrorInvalidValue;
  }
}
EXPORT int hipDeviceGetPCIBusId(char* id, int length, int device) {
  return R(cuDeviceGetPCIBusId(id, length, device));
}
EXPORT int hipGetDeviceProperties(rgpu::hip::DeviceProp* p, int device) {
  if (p == nullptr) return rgpu::hip::hipErrorInvalidValue;
  memset(p, 0, sizeof *p);
  CUresult r = cuDeviceGetName(p->name, sizeof p->name, device);
  if (r == CUDA_SUCCESS) r = cuDeviceTotalMem(&p->totalGlobalMem, device);
  strcpy(p->gcnArchName, "softgpu");  // no AMDGPU processor: it runs no AMDGPU code
  return R(r);
}
EXPORT const char* hipGetErrorName(int error) {
  switch (error) {
#define HIP_ERROR(name, value, text) \
  case value:                        \
    return #name;
#include "interpose/hip/error_codes.def"
#undef HIP_ERROR
    default:
      return "hipErrorUnknown";
  }
}
EXPORT int hipSetDevice(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  int count = 0;
  if (cuDeviceGetCount(&count) != CUDA_SUCCESS || device < 0 || device >= count) {
    return rgpu::hip::hipErrorInvalidDevice;
  }
  if (g_primary.size() < static_cast<size_t>(count)) g_primary.resize(count, nullptr);
  if (g_primary[device] == nullptr) {
    if (CUresult r = cuDevicePrimaryCtxRetain(&g_primary[device], device)) return R(r);
  }
  return R(cuCtxSetCurrent(g_primary[device]));
}
EXPORT int hipDeviceSynchronize() { return R(cuCtxSynchronize()); }
EXPORT int hipDeviceGetLimit(size_t* value, int limit) {
  return R(cuCtxGetLimit(value, static_cast<CUlimit>(limit)));
}
EXPORT int hipDeviceGetStreamPriorityRange(int* least, int* greatest) {
  return R(cuCtxGetStreamPriorityRange(least, greatest));
}
EXPORT int hipMalloc(void** p, size_t bytes) {
  CUdeviceptr d = 0;
  CUresult r = cuMemAlloc(&d, bytes);
  *p = reinterpret_cast<void*>(d);
  return R(r);
}
EXPORT int hipFree(void* p) { return R(cuMemFree(D(p))); }
EXPORT int hipMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  return R(cuMemGetInfo(free_bytes, total_bytes));
}
EXPORT int hipMemcpyHtoD(void* dst, void* src, size_t bytes) {
  return R(cuMemcpyHtoD(D(dst), src, bytes));
}
EXPORT int hipMemcpyDtoH(void* dst, void* src, size_t bytes) {
  return R(cuMemcpyDtoH(dst, D(src), bytes));
}
EXPORT int hipMemcpyDtoD(void* dst, void* src, size_t bytes) {
  return R(cuMemcpyDtoD(D(dst), D(src), bytes));
}
EXPORT int hipMemcpyHtoDAsync(void* dst, void* src, size_t bytes, void* s) {
  return R(cuMemcpyHtoDAsync(D(dst), src, bytes, static_cast<CUstream>(s)));
}
EXPORT int hipMemcpyDtoHAsync(void* dst, void* src, size_t bytes, void* s) {
  return R(cuMemcpyDtoHAsync(dst, D(src), bytes, static_cast<CUstream>(s)));
}
EXPORT int hipMemcpyDtoDAsync(void* dst, void* src, size_t bytes, void* s) {
  return R(cuMemcpyDtoDAsync(D(dst), D(src), bytes, static_cast<CUstream>(s)));
}
EXPORT int hipMemsetD8(void* dst, unsigned char value, size_t count) {
  return R(cuMemsetD8(D(dst), value, count));
}
EXPORT int hipMemsetD16(void* dst, unsigned short value, size_t count) {
  return R(cuMemsetD16(D(dst), value, count));
}
EXPORT int hipMemsetD32(void* dst, int value, size_t count) {
  return R(cuMemsetD32(D(dst), static_cast<unsigned>(value), count));
}
EXPORT int hipMemsetD8Async(void* dst, unsigned char value, size_t count, void* s) {
  return R(cuMemsetD8Async(D(dst), value, count, static_cast<CUstream>(s)));
}
EXPORT int hipMemsetD16Async(void* dst, unsigned short value, size_t count, void* s) {
  return R(cuMemsetD16Async(D(dst), value, count, static_cast<CUstream>(s)));
}
EXPORT int hipMemsetD32Async(void* dst, int value, size_t count, void* s) {
  return R(cuMemsetD32Async(D(dst), static_cast<unsigned>(value), count, static_cast<CUstream>(s)));
}
EXPORT int hipModuleLoadData(void** module, const void* image) {
  return R(cuModuleLoadData(reinterpret_cast<CUmodule*>(module), image));
}
EXPORT int hipModuleUnload(void* module) {
  return R(cuModuleUnload(static_cast<CUmodule>(module)));
}
EXPORT int hipModuleGetFunction(void** f, void* module, const char* name) {
  return R(
      cuModuleGetFunction(reinterpret_cast<CUfunction*>(f), static_cast<CUmodule>(module), name));
}
EXPORT int hipModuleGetGlobal(void** p, size_t* bytes, void* module, const char* name) {
  CUdeviceptr d = 0;
  CUresult r = cuModuleGetGlobal(&d, bytes, static_cast<CUmodule>(module), name);
  if (p != nullptr) *p = reinterpret_cast<void*>(d);
  return R(r);
}
EXPORT int hipFuncGetAttribute(int* value, int attribute, void* f) {
  return R(cuFuncGetAttribute(value, static_cast<CUfunction_attribute>(attribute),
                              static_cast<CUfunction>(f)));
}
EXPORT int hipModuleLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned shared, void* s, void** params,
                                 void** extra) {
  if (extra != nullptr) return rgpu::hip::hipErrorNotSupported;  // the server passes params
  return R(cuLaunchKernel(static_cast<CUfunction>(f), gx, gy, gz, bx, by, bz, shared,
                          static_cast<CUstream>(s), params, nullptr));
}
EXPORT int hipStreamCreateWithFlags(void** s, unsigned int flags) {
  return R(cuStreamCreate(reinterpret_cast<CUstream*>(s), flags));
}
EXPORT int hipStreamCreateWithPriority(void** s, unsigned int flags, int priority) {
  return R(cuStreamCreateWithPriority(reinterpret_cast<CUstream*>(s), flags, priority));
}
EXPORT int hipStreamDestroy(void* s) { return R(cuStreamDestroy(static_cast<CUstream>(s))); }
EXPORT int hipStreamSynchronize(void* s) {
  return R(cuStreamSynchronize(static_cast<CUstream>(s)));
}
EXPORT int hipStreamQuery(void* s) { return R(cuStreamQuery(static_cast<CUstream>(s))); }
EXPORT int hipStreamWaitEvent(void* s, void* e, unsigned int flags) {
  return R(cuStreamWaitEvent(static_cast<CUstream>(s), static_cast<CUevent>(e), flags));
}
EXPORT int hipEventCreateWithFlags(void** e, unsigned int flags) {
  return R(cuEventCreate(reinterpret_cast<CUevent*>(e), flags));
}
EXPORT int hipEventRecord(void* e, void* s) {
  return R(cuEventRecord(static_cast<CUevent>(e), static_cast<CUstream>(s)));
}
EXPORT int hipEventSynchronize(void* e) { return R(cuEventSynchronize(static_cast<CUevent>(e))); }
EXPORT int hipEventQuery(void* e) { return R(cuEventQuery(static_cast<CUevent>(e))); }
EXPORT int hipEventElapsedTime(float* ms, void* start, void* stop) {
  return R(cuEventElapsedTime(ms, static_cast<CUevent>(start), static_cast<CUevent>(stop)));
}
EXPORT int hipEventDestroy(void* e) { return R(cuEventDestroy(static_cast<CUevent>(e))); }
