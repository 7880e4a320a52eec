#include "softgpu/device.h"

#include "softgpu/architecture.h"
#include "softgpu/memory.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace softgpu {
namespace {

uint64_t EnvNumber(const char* name, uint64_t fallback, uint64_t min, uint64_t max) {
  const char* s = getenv(name);
  if (s == nullptr || *s == '\0') return fallback;
  char* end = nullptr;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || *end != '\0' || v < min || v > max) {
    fprintf(stderr, "softgpu: ignoring %s=%s (expected %llu..%llu)\n", name, s,
            static_cast<unsigned long long>(min), static_cast<unsigned long long>(max));
    return fallback;
  }
  return v;
}

}  // namespace

DeviceConfig DeviceConfig::FromEnvironment() {
  DeviceConfig c;
  c.memory_bytes = EnvNumber("RGPU_SOFTGPU_MEMORY_MB", 4096, 1, 1u << 24) << 20;
  unsigned cores = std::thread::hardware_concurrency();
  c.sm_count =
      static_cast<uint32_t>(EnvNumber("RGPU_SOFTGPU_SMS", cores == 0 ? 1 : cores, 1, 4096));
  c.device_count = static_cast<uint32_t>(EnvNumber("RGPU_SOFTGPU_DEVICES", 1, 0, 64));
  c.kernel_timeout_ms = EnvNumber("RGPU_SOFTGPU_KERNEL_TIMEOUT_MS", 0, 0, 1ull << 40);
  return c;
}

Device::Device(int ordinal, const DeviceConfig& config)
    : ordinal_(ordinal),
      sm_count_(config.sm_count),
      kernel_timeout_ms_(config.kernel_timeout_ms),
      budget_(config.memory_bytes) {}

namespace {
// What tells this process's devices from another's (two servers' devices in one program): the
// 1 GiB slot its device addresses start at (softgpu/memory.h), at most 16 bits.
unsigned InstanceNumber() {
  return static_cast<unsigned>((FirstDeviceAddress() - kGlobalAddressBase) >> 30) & 0xffff;
}
}  // namespace

// "rgpu-softg", the instance number, the ordinal.
CUuuid Device::uuid() const {
  CUuuid u;
  const char prefix[] = "rgpu-softg";
  for (int i = 0; i < 10; ++i) u.bytes[i] = prefix[i];
  u.bytes[10] = static_cast<char>(InstanceNumber() >> 8);
  u.bytes[11] = static_cast<char>(InstanceNumber());
  u.bytes[12] = static_cast<char>(ordinal_ >> 24);
  u.bytes[13] = static_cast<char>(ordinal_ >> 16);
  u.bytes[14] = static_cast<char>(ordinal_ >> 8);
  u.bytes[15] = static_cast<char>(ordinal_);
  return u;
}

std::string Device::pci_bus_id() const {
  char buf[32];
  snprintf(buf, sizeof buf, "%04x:%02x:00.0", InstanceNumber(), 0x10 + ordinal_);
  return buf;
}

bool Device::Attribute(int attribute, int* value) const {
  if (attribute < 1 || attribute >= CU_DEVICE_ATTRIBUTE_MAX) return false;
  int v = 0;
  switch (static_cast<CUdevice_attribute>(attribute)) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      v = kMaxThreadsPerBlock;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
      v = kMaxBlockDim[0];
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      v = kMaxBlockDim[1];
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      v = kMaxBlockDim[2];
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      v = static_cast<int>(kMaxGridDim[0]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
      v = kMaxGridDim[1];
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      v = kMaxGridDim[2];
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      v = kSharedPerBlock;
      break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
      v = 65536;
      break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
      v = 2147483647;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
      v = kRegistersPerBlock;
      break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      v = 1500000;
      break;  // kHz
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
      v = static_cast<int>(kTextureAlignment);
      break;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      v = static_cast<int>(sm_count_);
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
      v = CU_COMPUTEMODE_DEFAULT;
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH:
      v = static_cast<int>(kMaxTexture1DWidth);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH:
      v = static_cast<int>(kMaxTexture2D[0]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT:
      v = static_cast<int>(kMaxTexture2D[1]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH:
      v = static_cast<int>(kMaxTexture3D[0]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT:
      v = static_cast<int>(kMaxTexture3D[1]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH:
      v = static_cast<int>(kMaxTexture3D[2]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH:
      v = static_cast<int>(kMaxTexture2DLayered[0]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT:
      v = static_cast<int>(kMaxTexture2DLayered[1]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS:
      v = static_cast<int>(kMaxTexture2DLayered[2]);
      break;
    case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT:
      v = static_cast<int>(kTextureAlignment);
      break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      v = 0x10 + ordinal_;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
      v = static_cast<int>(InstanceNumber());
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
      v = 5001000;
      break;  // kHz
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
      v = 256;
      break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      v = static_cast<int>(kL2CacheBytes);
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
      v = static_cast<int>(DeviceArchitecture().max_threads_per_multiprocessor);
      break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH:
      v = static_cast<int>(kMaxTexture1DLayered[0]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS:
      v = static_cast<int>(kMaxTexture1DLayered[1]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH:
      v = static_cast<int>(kMaxTexture2DGather[0]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT:
      v = static_cast<int>(kMaxTexture2DGather[1]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE:
      v = static_cast<int>(kMaxTexture3DAlternate[0]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE:
      v = static_cast<int>(kMaxTexture3DAlternate[1]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE:
      v = static_cast<int>(kMaxTexture3DAlternate[2]);
      break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
      v = static_cast<int>(kTexturePitchAlignment);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH:
      v = static_cast<int>(kMaxTextureCubemapWidth);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH:
      v = static_cast<int>(kMaxTextureCubemapLayered[0]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS:
      v = static_cast<int>(kMaxTextureCubemapLayered[1]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH:
      v = static_cast<int>(kMaxSurface1DWidth);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH:
      v = static_cast<int>(kMaxSurface2D[0]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT:
      v = static_cast<int>(kMaxSurface2D[1]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH:
      v = static_cast<int>(kMaxSurface3D[0]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT:
      v = static_cast<int>(kMaxSurface3D[1]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH:
      v = static_cast<int>(kMaxSurface3D[2]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH:
      v = static_cast<int>(kMaxSurface1DLayered[0]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS:
      v = static_cast<int>(kMaxSurface1DLayered[1]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH:
      v = static_cast<int>(kMaxSurface2DLayered[0]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT:
      v = static_cast<int>(kMaxSurface2DLayered[1]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS:
      v = static_cast<int>(kMaxSurface2DLayered[2]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH:
      v = static_cast<int>(kMaxSurfaceCubemapWidth);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH:
      v = static_cast<int>(kMaxSurfaceCubemapLayered[0]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS:
      v = static_cast<int>(kMaxSurfaceCubemapLayered[1]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH:
      v = static_cast<int>(kMaxTexture1DLinearWidth);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH:
      v = static_cast<int>(kMaxTexture2DLinear[0]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT:
      v = static_cast<int>(kMaxTexture2DLinear[1]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH:
      v = static_cast<int>(kMaxTexture2DLinear[2]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH:
      v = static_cast<int>(kMaxTexture2DMipmapped[0]);
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT:
      v = static_cast<int>(kMaxTexture2DMipmapped[1]);
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      v = DeviceArchitecture().major;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      v = DeviceArchitecture().minor;
      break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH:
      v = static_cast<int>(kMaxTexture1DMipmappedWidth);
      break;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
      v = static_cast<int>(DeviceArchitecture().shared_per_multiprocessor);
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
      v = 65536;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
      v = ordinal_;
      break;
    case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO:
      v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
      v = 1;  // cuLaunchCooperativeKernel; multi-device cooperative launches stay 0
      break;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
      v = DeviceArchitecture().Number() >= 90 ? 1 : 0;  // thread-block clusters from 9.0
      break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      v = 1;  // cuMemCreate, cuMemAddressReserve, cuMemMap (softgpu/virtual_memory.h); no
      break;  // shareable handles, no compression
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      v = static_cast<int>(DeviceArchitecture().shared_per_block_optin);
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
      v = static_cast<int>(DeviceArchitecture().max_blocks_per_multiprocessor);
      break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR:
      v = 1;  // cuStreamWaitValue64/WriteValue64 and the NOR comparison (api_stream_memops.cc)
      break;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
      v = 1;  // cuIpcGetEventHandle / cuIpcOpenEventHandle between contexts (api_ipc.cc)
      break;
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID:
      v = -1;
      break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:
      v = -1;
      break;
    // Managed and page-locked memory are native: host memory at its device address, shared by
    // host code and kernels at the same time (memory.h). Only memory allocated through CUDA is
    // reachable by kernels (not malloc'd or registered memory), and the interpreter's atomics are
    // the host's own atomic read-modify-writes on that memory, so atomics of kernels and of host
    // threads on it are atomic with respect to each other. rgpu's client answers these itself
    // for the programs it serves (client/api_device.cc).
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE:
      v = static_cast<int>(kMaxPersistingL2Bytes);
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE:
      v = static_cast<int>(kMaxAccessPolicyWindowBytes);
      break;
    default:
      v = 0;
      break;  // features softgpu does not offer
  }
  *value = v;
  return true;
}

}  // namespace softgpu
