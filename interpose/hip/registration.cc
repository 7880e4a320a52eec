// The compiler's registration and launch path: hipcc's start-up code registers each translation
// unit's offload bundle (__hipRegisterFatBinary), its kernels by host stub (__hipRegisterFunction)
// and its device variables by host shadow (__hipRegisterVar); `kernel<<<...>>>(args)` pushes the
// launch configuration, and the stub pops it and calls hipLaunchKernel. A bundle's code is
// loaded into a device on its first use there; kernels and variables are found by name in it.
#include <string.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/log.h"
#include "interpose/hip/runtime.h"

namespace h = rgpu::hip;
using h::Activate;
using h::Error;
using h::Ret;

namespace {

struct FatBinary {
  const void* bundle = nullptr;
  std::map<int, CUmodule> modules;  // per device, loaded on first use; guarded by g_mu
};

struct Kernel {
  FatBinary* binary;
  std::string name;
};

struct Variable {
  FatBinary* binary;
  std::string name;
  size_t size;
};

struct LaunchConfiguration {
  h::Dim3 grid, block;
  size_t shared;
  CUstream stream;
};

std::mutex g_mu;
// Registered binaries live until the program ends (hipcc's unregistration runs at exit, when
// their stubs can no longer be called); they are only forgotten.
std::vector<std::unique_ptr<FatBinary>>& Binaries() {
  static auto* v = new std::vector<std::unique_ptr<FatBinary>>();
  return *v;
}
std::unordered_map<const void*, Kernel>& Kernels() {
  static auto* m = new std::unordered_map<const void*, Kernel>();
  return *m;
}
std::unordered_map<const void*, Variable>& Variables() {
  static auto* m = new std::unordered_map<const void*, Variable>();
  return *m;
}
thread_local std::vector<LaunchConfiguration> t_configurations;
// The stub of each function FunctionOfStub found (graph kernel nodes report their stub).
std::unordered_map<CUfunction, const void*>& Stubs() {
  static auto* m = new std::unordered_map<CUfunction, const void*>();
  return *m;
}

// The module of `binary` in the current device's primary context (made current by the caller).
Error ModuleOf(FatBinary* binary, int device, CUmodule* out) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = binary->modules.find(device);
    if (it != binary->modules.end()) {
      *out = it->second;
      return h::hipSuccess;
    }
  }
  CUmodule m = nullptr;
  Error e = h::LoadDeviceCode(binary->bundle, 0, &m);
  if (e != h::hipSuccess) return e;
  std::lock_guard<std::mutex> lock(g_mu);
  auto [it, inserted] = binary->modules.emplace(device, m);
  if (!inserted) CU(cuModuleUnload)(m);  // another thread loaded it meanwhile
  *out = it->second;
  return h::hipSuccess;
}

// The device address and size of the registered variable whose host shadow is `symbol`.
Error SymbolAddress(const void* symbol, CUdeviceptr* address, size_t* bytes) {
  Variable v;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Variables().find(symbol);
    if (it == Variables().end()) return h::hipErrorInvalidSymbol;
    v = it->second;
  }
  int device;
  Error e = Activate(&device);
  if (e != h::hipSuccess) return e;
  CUmodule m;
  e = ModuleOf(v.binary, device, &m);
  if (e != h::hipSuccess) return e;
  CUresult r = CU(cuModuleGetGlobal_v2)(address, bytes, m, v.name.c_str());
  return r == CUDA_ERROR_NOT_FOUND ? h::hipErrorInvalidSymbol : h::ToHip(r);
}

}  // namespace

namespace rgpu::hip {

void ForgetRegisteredModules(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& b : Binaries()) b->modules.erase(device);  // unloaded with the reset context
}

}  // namespace rgpu::hip

HIP_API(__hipRegisterFatBinary)(const void* wrapper_address)->void** {
  const auto* wrapper = static_cast<const h::FatBinaryWrapper*>(wrapper_address);
  if (wrapper == nullptr || wrapper->magic != h::kFatBinaryMagic || wrapper->binary == nullptr) {
    RGPU_LOG_ERROR("rgpu-hip: __hipRegisterFatBinary: not a HIP fat-binary wrapper");
    return nullptr;
  }
  auto binary = std::make_unique<FatBinary>();
  binary->bundle = wrapper->binary;
  std::lock_guard<std::mutex> lock(g_mu);
  Binaries().push_back(std::move(binary));
  // The handle hipcc keeps and passes back: a pointer to the binary's slot.
  return reinterpret_cast<void**>(Binaries().back().get());
}

HIP_API(__hipUnregisterFatBinary)(void** handle)->void {
  // Runs at exit: the modules go with the session; the records stay for stubs still running.
  (void)handle;
}

HIP_API(__hipRegisterFunction)
(void** handle, const void* stub, char* host_name, const char* device_name, unsigned int, void*,
 void*, void*, void*, int*)
    ->void {
  if (handle == nullptr || stub == nullptr || device_name == nullptr) return;
  (void)host_name;
  std::lock_guard<std::mutex> lock(g_mu);
  Kernels()[stub] = Kernel{reinterpret_cast<FatBinary*>(handle), device_name};
}

HIP_API(__hipRegisterVar)
(void** handle, void* host_shadow, char* host_name, char* device_name, int, size_t size, int, int)
    ->void {
  if (handle == nullptr || host_shadow == nullptr || device_name == nullptr) return;
  (void)host_name;
  std::lock_guard<std::mutex> lock(g_mu);
  Variables()[host_shadow] = Variable{reinterpret_cast<FatBinary*>(handle), device_name, size};
}

HIP_API(__hipPushCallConfiguration)
(h::Dim3 grid, h::Dim3 block, size_t shared, CUstream stream)->Error {
  t_configurations.push_back(LaunchConfiguration{grid, block, shared, stream});
  return h::hipSuccess;
}

HIP_API(__hipPopCallConfiguration)
(h::Dim3* grid, h::Dim3* block, size_t* shared, CUstream* stream)->Error {
  if (t_configurations.empty()) return Ret(h::hipErrorMissingConfiguration);
  const LaunchConfiguration c = t_configurations.back();
  t_configurations.pop_back();
  if (grid != nullptr) *grid = c.grid;
  if (block != nullptr) *block = c.block;
  if (shared != nullptr) *shared = c.shared;
  if (stream != nullptr) *stream = c.stream;
  return h::hipSuccess;
}

namespace rgpu::hip {

Error FunctionOfStub(const void* stub, CUfunction* out) {
  Kernel k;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Kernels().find(stub);
    if (it == Kernels().end()) return hipErrorInvalidDeviceFunction;
    k = it->second;
  }
  int device;
  Error e = Activate(&device);
  if (e != hipSuccess) return e;
  CUmodule m;
  e = ModuleOf(k.binary, device, &m);
  if (e != hipSuccess) return e;
  CUresult r = CU(cuModuleGetFunction)(out, m, k.name.c_str());
  if (r == CUDA_SUCCESS) {
    std::lock_guard<std::mutex> lock(g_mu);
    Stubs()[*out] = stub;
  }
  return r == CUDA_ERROR_NOT_FOUND ? hipErrorInvalidDeviceFunction : ToHip(r);
}

const void* StubOfFunction(CUfunction f) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Stubs().find(f);
  return it != Stubs().end() ? it->second : nullptr;
}

}  // namespace rgpu::hip

HIP_API(hipLaunchKernel)
(const void* stub, h::Dim3 grid, h::Dim3 block, void** args, size_t shared, CUstream stream)
    ->Error {
  CUfunction f;
  Error e = h::FunctionOfStub(stub, &f);
  if (e != h::hipSuccess) return Ret(e);
  // Arguments are laid out by the kernel's code-object metadata, which the server reads.
  return Ret(CU(cuLaunchKernel)(f, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                static_cast<unsigned>(shared), stream, args, nullptr));
}

// A launch whose blocks may synchronize with each other (the device must run them all at once).
HIP_API(hipLaunchCooperativeKernel)
(const void* stub, h::Dim3 grid, h::Dim3 block, void** args, unsigned int shared, CUstream stream)
    ->Error {
  CUfunction f;
  Error e = h::FunctionOfStub(stub, &f);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuLaunchCooperativeKernel)(f, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                           shared, stream, args));
}
HIP_API(hipLaunchCooperativeKernel_spt)
(const void* stub, h::Dim3 grid, h::Dim3 block, void** args, unsigned int shared, CUstream stream)
    ->Error {
  return rgpu_hip_hipLaunchCooperativeKernel(stub, grid, block, args, shared,
                                             stream == nullptr ? CU_STREAM_PER_THREAD : stream);
}

HIP_API(hipGetSymbolAddress)(void** address, const void* symbol)->Error {
  if (address == nullptr) return Ret(h::hipErrorInvalidValue);
  CUdeviceptr p = 0;
  Error e = SymbolAddress(symbol, &p, nullptr);
  if (e == h::hipSuccess) *address = reinterpret_cast<void*>(p);
  return Ret(e);
}

HIP_API(hipGetSymbolSize)(size_t* bytes, const void* symbol)->Error {
  if (bytes == nullptr) return Ret(h::hipErrorInvalidValue);
  CUdeviceptr p = 0;
  return Ret(SymbolAddress(symbol, &p, bytes));
}

namespace {

Error SymbolCopy(const void* symbol, size_t offset, size_t bytes, CUdeviceptr* target) {
  size_t size = 0;
  Error e = SymbolAddress(symbol, target, &size);
  if (e != h::hipSuccess) return e;
  if (offset > size || bytes > size - offset) return h::hipErrorInvalidValue;
  *target += offset;
  return h::hipSuccess;
}

}  // namespace

HIP_API(hipMemcpyToSymbol)
(const void* symbol, const void* src, size_t bytes, size_t offset, int kind)->Error {
  if (kind != h::kHostToDevice && kind != h::kDeviceToDevice && kind != h::kDefault) {
    return Ret(h::hipErrorInvalidMemcpyDirection);
  }
  CUdeviceptr target;
  Error e = SymbolCopy(symbol, offset, bytes, &target);
  if (e != h::hipSuccess) return Ret(e);
  if (kind == h::kDeviceToDevice)
    return Ret(CU(cuMemcpyDtoD_v2)(target, reinterpret_cast<CUdeviceptr>(src), bytes));
  return Ret(CU(cuMemcpy)(target, reinterpret_cast<CUdeviceptr>(src), bytes));
}

HIP_API(hipMemcpyFromSymbol)
(void* dst, const void* symbol, size_t bytes, size_t offset, int kind)->Error {
  if (kind != h::kDeviceToHost && kind != h::kDeviceToDevice && kind != h::kDefault) {
    return Ret(h::hipErrorInvalidMemcpyDirection);
  }
  CUdeviceptr source;
  Error e = SymbolCopy(symbol, offset, bytes, &source);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuMemcpy)(reinterpret_cast<CUdeviceptr>(dst), source, bytes));
}

HIP_API(hipMemcpyToSymbolAsync)
(const void* symbol, const void* src, size_t bytes, size_t offset, int kind, CUstream stream)
    ->Error {
  if (kind != h::kHostToDevice && kind != h::kDeviceToDevice && kind != h::kDefault) {
    return Ret(h::hipErrorInvalidMemcpyDirection);
  }
  CUdeviceptr target;
  Error e = SymbolCopy(symbol, offset, bytes, &target);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuMemcpyAsync)(target, reinterpret_cast<CUdeviceptr>(src), bytes, stream));
}

HIP_API(hipMemcpyFromSymbolAsync)
(void* dst, const void* symbol, size_t bytes, size_t offset, int kind, CUstream stream)->Error {
  if (kind != h::kDeviceToHost && kind != h::kDeviceToDevice && kind != h::kDefault) {
    return Ret(h::hipErrorInvalidMemcpyDirection);
  }
  CUdeviceptr source;
  Error e = SymbolCopy(symbol, offset, bytes, &source);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuMemcpyAsync)(reinterpret_cast<CUdeviceptr>(dst), source, bytes, stream));
}

HIP_API(hipCreateChannelDesc)(int x, int y, int z, int w, int kind)->h::ChannelFormatDesc {
  return h::ChannelFormatDesc{x, y, z, w, kind};
}

// AMD's extension: a launch bracketed by two optional events recorded on its stream.
HIP_API(hipExtLaunchKernel)
(const void* stub, h::Dim3 grid, h::Dim3 block, void** args, size_t shared, CUstream stream,
 CUevent start, CUevent stop, int flags)
    ->Error {
  if (flags != 0) return Ret(h::hipErrorInvalidValue);  // no launch flags are defined here
  if (start != nullptr) {
    Error e = h::InContext([&] { return CU(cuEventRecord)(start, stream); });
    if (e != h::hipSuccess) return e;
  }
  Error e = rgpu_hip_hipLaunchKernel(stub, grid, block, args, shared, stream);
  if (e != h::hipSuccess || stop == nullptr) return e;
  return h::InContext([&] { return CU(cuEventRecord)(stop, stream); });
}
