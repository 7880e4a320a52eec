// The simulated devices and their configuration (from the environment, read once at cuInit).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "softgpu/memory.h"

namespace softgpu {

class Context;

struct DeviceConfig {
  uint64_t memory_bytes = 4096ull << 20;  // RGPU_SOFTGPU_MEMORY_MB
  uint32_t sm_count = 1;                  // RGPU_SOFTGPU_SMS (default: host cores)
  uint32_t device_count = 1;              // RGPU_SOFTGPU_DEVICES
  uint64_t kernel_timeout_ms = 0;         // RGPU_SOFTGPU_KERNEL_TIMEOUT_MS (0: no limit)
  static DeviceConfig FromEnvironment();
};

constexpr uint32_t kMaxThreadsPerBlock = 1024;
// The L2 cache softgpu reports (it has none: persisting-L2 limits and access-policy windows are
// checked against these and have no effect, as cache hints change only a GPU's speed).
constexpr uint64_t kL2CacheBytes = 4ull << 20;
constexpr uint64_t kMaxPersistingL2Bytes = 3ull << 20;
constexpr uint64_t kMaxAccessPolicyWindowBytes = 128ull << 20;
constexpr uint32_t kMaxBlockDim[3] = {1024, 1024, 64};
constexpr uint32_t kMaxGridDim[3] = {2147483647u, 65535, 65535};
constexpr uint32_t kSharedPerBlock = 48 * 1024;
constexpr uint32_t kRegistersPerBlock = 65536;

// Texture and surface limits (compute capability 7.5): reported as device attributes and
// enforced by cuArray3DCreate, cuTexObjectCreate and cuSurfObjectCreate.
constexpr uint64_t kMaxTexture1DWidth = 131072;
constexpr uint64_t kMaxTexture1DMipmappedWidth = 32768;
constexpr uint64_t kMaxTexture2DMipmapped[2] = {32768, 32768};
constexpr uint64_t kMaxTexture2D[2] = {131072, 65536};
constexpr uint64_t kMaxTexture3D[3] = {16384, 16384, 16384};
constexpr uint64_t kMaxTexture3DAlternate[3] = {8192, 8192, 32768};
constexpr uint64_t kMaxTexture1DLayered[2] = {32768, 2048};         // width, layers
constexpr uint64_t kMaxTexture2DLayered[3] = {32768, 32768, 2048};  // width, height, layers
constexpr uint64_t kMaxTexture2DGather[2] = {32768, 32768};
constexpr uint64_t kMaxTextureCubemapWidth = 32768;
constexpr uint64_t kMaxTextureCubemapLayered[2] = {32768, 2046};       // width, layers
constexpr uint64_t kMaxTexture1DLinearWidth = 1ull << 28;              // elements
constexpr uint64_t kMaxTexture2DLinear[3] = {131072, 65000, 2097120};  // width, height, pitch
constexpr uint64_t kMaxSurface1DWidth = 32768;
constexpr uint64_t kMaxSurface2D[2] = {131072, 65536};
constexpr uint64_t kMaxSurface3D[3] = {16384, 16384, 16384};
constexpr uint64_t kMaxSurface1DLayered[2] = {32768, 2048};
constexpr uint64_t kMaxSurface2DLayered[3] = {32768, 32768, 2048};
constexpr uint64_t kMaxSurfaceCubemapWidth = 32768;
constexpr uint64_t kMaxSurfaceCubemapLayered[2] = {32768, 2046};
constexpr uint64_t kTextureAlignment = 512;      // LINEAR/PITCH2D devPtr alignment
constexpr uint64_t kTexturePitchAlignment = 32;  // PITCH2D pitch alignment

class Device {
 public:
  Device(int ordinal, const DeviceConfig& config);

  int ordinal() const { return ordinal_; }
  uint32_t sm_count() const { return sm_count_; }
  uint64_t kernel_timeout_ms() const { return kernel_timeout_ms_; }
  DeviceMemoryBudget& budget() { return budget_; }
  const char* name() const { return "rgpu softgpu"; }
  CUuuid uuid() const;
  std::string pci_bus_id() const;
  // Value of a device attribute; false for an attribute value outside the enum.
  bool Attribute(int attribute, int* value) const;

  // Primary context bookkeeping (guarded by primary_mu).
  std::mutex primary_mu;
  std::shared_ptr<Context> primary;
  int primary_refcount = 0;
  unsigned primary_flags = 0;

 private:
  const int ordinal_;
  const uint32_t sm_count_;
  const uint64_t kernel_timeout_ms_;
  DeviceMemoryBudget budget_;
};

}  // namespace softgpu
