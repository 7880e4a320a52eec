// Modules: loading code objects (alone or in offload bundles), functions, globals and launches.
#include <stdio.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/log.h"
#include "interpose/hip/offload_bundle.h"
#include "interpose/hip/runtime.h"

namespace h = rgpu::hip;
using h::Activate;
using h::Error;
using h::Ret;

namespace rgpu::hip {

Error LoadDeviceCode(const void* image, size_t limit, CUmodule* out) {
  if (image == nullptr || out == nullptr) return hipErrorInvalidValue;
  std::vector<CodeObject> objects;
  if (IsOffloadBundle(image)) {
    std::string error;
    if (!ParseOffloadBundle(image, limit, &objects, &error)) {
      RGPU_LOG_ERROR("rgpu-hip: cannot load device code: %s", error.c_str());
      return hipErrorInvalidImage;
    }
  } else if (IsAmdgpuCodeObject(image)) {
    objects.push_back(CodeObject{"(code object)", static_cast<const uint8_t*>(image), 0});
  } else {
    return ToHip(CU(cuModuleLoadData)(out, image));
  }
  for (const CodeObject& c : objects) {
    CUresult r = CU(cuModuleLoadData)(out, c.data);
    if (r == CUDA_SUCCESS) return hipSuccess;
    RGPU_LOG_INFO("rgpu-hip: the server's device refused the AMDGPU code object for %s (%s)",
                  c.target.c_str(), ErrorName(ToHip(r)));
    // Only a refusal of this image means another might do; anything else is final.
    if (r != CUDA_ERROR_INVALID_IMAGE && r != CUDA_ERROR_NO_BINARY_FOR_GPU &&
        r != CUDA_ERROR_INVALID_PTX && r != CUDA_ERROR_UNSUPPORTED_PTX_VERSION) {
      return ToHip(r);
    }
  }
  RGPU_LOG_WARN("rgpu-hip: no AMDGPU code object here can run on the server's device");
  return hipErrorNoBinaryForGpu;
}

}  // namespace rgpu::hip

HIP_API(hipModuleLoadData)(CUmodule* module, const void* image)->Error {
  if (module == nullptr || image == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(h::LoadDeviceCode(image, 0, module));
}

HIP_API(hipModuleLoadDataEx)
(CUmodule* module, const void* image, unsigned int, void*, void**)->Error {
  // JIT options tune a compiler; code objects are already compiled.
  return rgpu_hip_hipModuleLoadData(module, image);
}

HIP_API(hipModuleLoad)(CUmodule* module, const char* path)->Error {
  if (module == nullptr || path == nullptr) return Ret(h::hipErrorInvalidValue);
  std::ifstream file(path, std::ios::binary);
  if (!file) return Ret(h::hipErrorFileNotFound);
  std::stringstream contents;
  contents << file.rdbuf();
  std::string data = contents.str();
  const size_t size = data.size();
  data.push_back('\0');  // text images must be terminated
  if (size < 64) return Ret(h::hipErrorInvalidImage);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(h::LoadDeviceCode(data.data(), size, module));
}

HIP_API(hipModuleUnload)(CUmodule module)->Error {
  if (module == nullptr) return Ret(h::hipErrorInvalidHandle);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuModuleUnload)(module));
}

HIP_API(hipModuleGetFunction)(CUfunction* function, CUmodule module, const char* name)->Error {
  if (function == nullptr || name == nullptr) return Ret(h::hipErrorInvalidValue);
  if (module == nullptr) return Ret(h::hipErrorInvalidHandle);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuModuleGetFunction)(function, module, name));
}

HIP_API(hipModuleGetGlobal)
(void** address, size_t* bytes, CUmodule module, const char* name)->Error {
  if (name == nullptr) return Ret(h::hipErrorInvalidValue);
  if (module == nullptr) return Ret(h::hipErrorInvalidHandle);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  CUdeviceptr p = 0;
  CUresult r = CU(cuModuleGetGlobal_v2)(&p, bytes, module, name);
  if (address != nullptr) *address = reinterpret_cast<void*>(p);
  return Ret(r);
}

namespace rgpu::hip {

Error DriverExtra(void** extra, std::vector<void*>* out) {
  out->clear();
  if (extra == nullptr) return hipSuccess;
  for (size_t i = 0; extra[i] != kLaunchParamEnd; i += 2) {
    if (extra[i] != kLaunchParamBufferPointer && extra[i] != kLaunchParamBufferSize) {
      return hipErrorInvalidValue;
    }
    out->push_back(extra[i] == kLaunchParamBufferPointer ? CU_LAUNCH_PARAM_BUFFER_POINTER
                                                         : CU_LAUNCH_PARAM_BUFFER_SIZE);
    out->push_back(extra[i + 1]);
  }
  out->push_back(CU_LAUNCH_PARAM_END);
  return hipSuccess;
}

}  // namespace rgpu::hip

HIP_API(hipModuleLaunchKernel)
(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
 unsigned shared, CUstream stream, void** params, void** extra)
    ->Error {
  if (f == nullptr) return Ret(h::hipErrorInvalidHandle);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  std::vector<void*> cu_extra;
  e = h::DriverExtra(extra, &cu_extra);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuLaunchKernel)(f, gx, gy, gz, bx, by, bz, shared, stream, params,
                                extra != nullptr ? cu_extra.data() : nullptr));
}
