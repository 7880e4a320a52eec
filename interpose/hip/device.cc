// Initialization, the current device of each thread, primary contexts, and the device queries
// (answered from the attributes the client fetched from the server once).
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <mutex>
#include <vector>

#include "client/thread_setup.h"
#include "interpose/hip/runtime.h"

namespace rgpu::hip {
namespace {

// HIP 5.2.21153, the version of the API this runtime implements (HIP_VERSION's encoding:
// major * 10^7 + minor * 10^5 + patch).
constexpr int kHipVersion = 50221153;

std::once_flag g_init_once;
Error g_init_error = hipErrorNotInitialized;
int g_device_count = 0;

std::mutex g_mu;
std::vector<CUcontext> g_primary;  // per device, retained on first use; guarded by g_mu
thread_local int t_device = 0;

int Attribute(CUdevice_attribute a, int device) {
  int v = 0;
  if (CU(cuDeviceGetAttribute)(&v, a, device) != CUDA_SUCCESS) return 0;
  return v;
}

}  // namespace

Error CheckDevice(int device) {
  int count = 0;
  Error e = Initialize(&count);
  if (e != hipSuccess) return e;
  if (count == 0) return hipErrorNoDevice;
  return device >= 0 && device < count ? hipSuccess : hipErrorInvalidDevice;
}

Error Initialize(int* count) {
  rgpu_client_prepare_thread();  // every HIP call on a new thread passes here first
  std::call_once(g_init_once, [] {
    CUresult r = CU(cuInit)(0);
    if (r == CUDA_SUCCESS) r = CU(cuDeviceGetCount)(&g_device_count);
    g_init_error = ToHip(r);
    std::lock_guard<std::mutex> lock(g_mu);
    g_primary.assign(g_device_count > 0 ? g_device_count : 0, nullptr);
  });
  if (count != nullptr) *count = g_device_count;
  return g_init_error;
}

int CurrentDevice() { return t_device; }
void SetCurrentDevice(int device) { t_device = device; }

Error PrimaryContext(int device, CUcontext* out) {
  Error e = CheckDevice(device);
  if (e != hipSuccess) return e;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_primary[device] == nullptr) {
    CUresult r = CU(cuDevicePrimaryCtxRetain)(&g_primary[device], device);
    if (r != CUDA_SUCCESS) {
      g_primary[device] = nullptr;
      return ToHip(r);
    }
  }
  *out = g_primary[device];
  return hipSuccess;
}

int DeviceOfPrimary(CUcontext ctx) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (size_t d = 0; d < g_primary.size(); ++d) {
    if (ctx != nullptr && g_primary[d] == ctx) return static_cast<int>(d);
  }
  return -1;
}

Error Activate(int* device) {
  const int d = t_device;
  CUcontext ctx;
  Error e = PrimaryContext(d, &ctx);
  if (e != hipSuccess) return e;
  CUcontext current = nullptr;
  CU(cuCtxGetCurrent)(&current);
  if (current != ctx) {
    CUresult r = CU(cuCtxSetCurrent)(ctx);
    if (r != CUDA_SUCCESS) return ToHip(r);
  }
  if (device != nullptr) *device = d;
  return hipSuccess;
}

void ForgetDevice(int device) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (device >= 0 && static_cast<size_t>(device) < g_primary.size()) g_primary[device] = nullptr;
  }
  ForgetRegisteredModules(device);
}

}  // namespace rgpu::hip

using rgpu::hip::Activate;
using rgpu::hip::CheckDevice;
using rgpu::hip::Error;
using rgpu::hip::Ret;
namespace h = rgpu::hip;

HIP_API(hipInit)(unsigned int flags)->Error {
  if (flags != 0) return Ret(h::hipErrorInvalidValue);
  return Ret(h::Initialize());
}

HIP_API(hipDriverGetVersion)(int* version)->Error {
  if (version == nullptr) return Ret(h::hipErrorInvalidValue);
  *version = h::kHipVersion;
  return h::hipSuccess;
}

HIP_API(hipRuntimeGetVersion)(int* version)->Error {
  if (version == nullptr) return Ret(h::hipErrorInvalidValue);
  *version = h::kHipVersion;
  return h::hipSuccess;
}

HIP_API(hipGetDeviceCount)(int* count)->Error {
  if (count == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = h::Initialize(count);
  if (e != h::hipSuccess) {
    *count = 0;
    return Ret(e);
  }
  return *count == 0 ? Ret(h::hipErrorNoDevice) : h::hipSuccess;
}

HIP_API(hipSetDevice)(int device)->Error {
  Error e = CheckDevice(device);
  if (e != h::hipSuccess) return Ret(e);
  h::SetCurrentDevice(device);
  return Ret(Activate());
}

HIP_API(hipGetDevice)(int* device)->Error {
  if (device == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = h::Initialize();
  if (e != h::hipSuccess) return Ret(e);
  *device = h::CurrentDevice();
  return h::hipSuccess;
}

HIP_API(hipDeviceSynchronize)()->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuCtxSynchronize)());
}

HIP_API(hipDeviceReset)()->Error {
  int device;
  Error e = Activate(&device);
  if (e != h::hipSuccess) return Ret(e);
  CUresult r = CU(cuDevicePrimaryCtxReset_v2)(device);
  h::ForgetDevice(device);
  return Ret(r);
}

HIP_API(hipSetDeviceFlags)(unsigned int flags)->Error {
  Error e = CheckDevice(h::CurrentDevice());
  if (e != h::hipSuccess) return Ret(e);
  // The schedule flags (auto, spin, yield, blocking sync) have the driver's values.
  if (flags & ~0x1fu) return Ret(h::hipErrorInvalidValue);
  return Ret(CU(cuDevicePrimaryCtxSetFlags_v2)(h::CurrentDevice(), flags & 0x7u));
}

HIP_API(hipGetDeviceFlags)(unsigned int* flags)->Error {
  if (flags == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = CheckDevice(h::CurrentDevice());
  if (e != h::hipSuccess) return Ret(e);
  int active = 0;
  return Ret(CU(cuDevicePrimaryCtxGetState)(h::CurrentDevice(), flags, &active));
}

HIP_API(hipDeviceGet)(int* device, int ordinal)->Error {
  if (device == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = CheckDevice(ordinal);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuDeviceGet)(device, ordinal));
}

HIP_API(hipDeviceGetName)(char* name, int length, int device)->Error {
  if (name == nullptr || length <= 0) return Ret(h::hipErrorInvalidValue);
  Error e = CheckDevice(device);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuDeviceGetName)(name, length, device));
}

HIP_API(hipDeviceTotalMem)(size_t* bytes, int device)->Error {
  if (bytes == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = CheckDevice(device);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuDeviceTotalMem_v2)(bytes, device));
}

HIP_API(hipDeviceComputeCapability)(int* major, int* minor, int device)->Error {
  if (major == nullptr || minor == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = CheckDevice(device);
  if (e != h::hipSuccess) return Ret(e);
  *major = h::Attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  *minor = h::Attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  return h::hipSuccess;
}

HIP_API(hipDeviceGetPCIBusId)(char* bus_id, int length, int device)->Error {
  if (bus_id == nullptr || length <= 0) return Ret(h::hipErrorInvalidValue);
  Error e = CheckDevice(device);
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuDeviceGetPCIBusId)(bus_id, length, device));
}

HIP_API(hipDeviceGetAttribute)(int* value, h::DeviceAttribute attribute, int device)->Error {
  if (value == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = CheckDevice(device);
  if (e != h::hipSuccess) return Ret(e);
  int cu = -1;
  switch (attribute) {
#define HIP_ATTRIBUTE(name, number, driver) \
  case h::name:                             \
    cu = driver;                            \
    break;
#include "interpose/hip/device_attributes.def"
#undef HIP_ATTRIBUTE
    default:
      return Ret(h::hipErrorInvalidValue);
  }
  if (cu < 0) return Ret(h::hipErrorInvalidValue);  // no driver attribute holds it
  return Ret(CU(cuDeviceGetAttribute)(value, static_cast<CUdevice_attribute>(cu), device));
}

HIP_API(hipGetDeviceProperties)(h::DeviceProp* p, int device)->Error {
  if (p == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = CheckDevice(device);
  if (e != h::hipSuccess) return Ret(e);
  memset(p, 0, sizeof *p);
  CUresult r = CU(cuDeviceGetName)(p->name, sizeof p->name, device);
  if (r == CUDA_SUCCESS) r = CU(cuDeviceTotalMem_v2)(&p->totalGlobalMem, device);
  if (r != CUDA_SUCCESS) return Ret(r);
  auto a = [device](CUdevice_attribute attribute) { return h::Attribute(attribute, device); };
  p->sharedMemPerBlock = a(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  p->regsPerBlock = a(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  p->warpSize = a(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  p->maxThreadsPerBlock = a(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  p->maxThreadsDim[0] = a(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
  p->maxThreadsDim[1] = a(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
  p->maxThreadsDim[2] = a(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
  p->maxGridSize[0] = a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  p->maxGridSize[1] = a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
  p->maxGridSize[2] = a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
  p->clockRate = a(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  p->memoryClockRate = a(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  p->memoryBusWidth = a(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  p->totalConstMem = a(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY);
  p->major = a(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  p->minor = a(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  p->multiProcessorCount = a(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  p->l2CacheSize = a(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  p->maxThreadsPerMultiProcessor = a(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  p->computeMode = a(CU_DEVICE_ATTRIBUTE_COMPUTE_MODE);
  p->concurrentKernels = a(CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS);
  p->pciDomainID = a(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
  p->pciBusID = a(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
  p->pciDeviceID = a(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
  p->maxSharedMemoryPerMultiProcessor = a(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  p->isMultiGpuBoard = a(CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD);
  p->canMapHostMemory = a(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY);
  p->integrated = a(CU_DEVICE_ATTRIBUTE_INTEGRATED);
  p->cooperativeLaunch = a(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH);
  p->cooperativeMultiDeviceLaunch = a(CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH);
  p->maxTexture1DLinear = a(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH);
  p->maxTexture1D = a(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH);
  p->maxTexture2D[0] = a(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH);
  p->maxTexture2D[1] = a(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT);
  p->maxTexture3D[0] = a(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH);
  p->maxTexture3D[1] = a(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT);
  p->maxTexture3D[2] = a(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH);
  p->memPitch = a(CU_DEVICE_ATTRIBUTE_MAX_PITCH);
  p->textureAlignment = a(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT);
  p->texturePitchAlignment = a(CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT);
  p->kernelExecTimeoutEnabled = a(CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT);
  p->ECCEnabled = a(CU_DEVICE_ATTRIBUTE_ECC_ENABLED);
  p->tccDriver = a(CU_DEVICE_ATTRIBUTE_TCC_DRIVER);
  p->managedMemory = a(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
  p->directManagedMemAccessFromHost = a(CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST);
  p->concurrentManagedAccess = a(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS);
  p->pageableMemoryAccess = a(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS);
  p->pageableMemoryAccessUsesHostPageTables =
      a(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES);
  // Not reported over the wire, so left 0: clockInstructionRate, arch (feature bits), gcnArch,
  // gcnArchName, the HDP registers, isLargeBar, asicRevision and the
  // cooperativeMultiDeviceUnmatched* flags.
  return h::hipSuccess;
}

HIP_API(hipDeviceGetStreamPriorityRange)(int* least, int* greatest)->Error {
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuCtxGetStreamPriorityRange)(least, greatest));
}

HIP_API(hipDeviceGetLimit)(size_t* value, int limit)->Error {
  if (value == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  // hipLimit_t's values are the driver's (printf FIFO 1, malloc heap 2).
  return Ret(CU(cuCtxGetLimit)(value, static_cast<CUlimit>(limit)));
}

HIP_API(hipDeviceCanAccessPeer)(int* can_access, int device, int peer)->Error {
  if (can_access == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = CheckDevice(device);
  if (e == h::hipSuccess) e = CheckDevice(peer);
  if (e != h::hipSuccess) return Ret(e);
  // The server's answer for the pair (0 for a device and itself, as HIP answers).
  return Ret(CU(cuDeviceCanAccessPeer)(can_access, device, peer));
}
