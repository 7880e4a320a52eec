// The compute capability softgpu's devices report, and the per-multiprocessor limits that go with
// it (the CUDA Programming Guide's table of technical specifications per compute capability).
#pragma once

#include <cstdint>

namespace softgpu {

struct Architecture {
  int major = 12;
  int minor = 0;
  uint32_t shared_per_multiprocessor = 100 * 1024;
  uint32_t shared_per_block_optin = 99 * 1024;
  uint32_t max_threads_per_multiprocessor = 1536;
  uint32_t max_blocks_per_multiprocessor = 32;

  // major * 10 + minor, as PTX targets and fat-binary entries number architectures.
  uint32_t Number() const { return static_cast<uint32_t>(major * 10 + minor); }
};

// The architecture of this process's devices: RGPU_SOFTGPU_COMPUTE_CAPABILITY (one of 7.5, 8.0,
// 8.6, 8.9, 9.0, 10.0 and 12.0), read once; default 12.0, the architecture whose PTX NVIDIA's
// CUDA 13 libraries carry (their host code picks launch shapes for the device's architecture,
// and those must be the shapes the PTX it runs was compiled for). Another value is refused on
// stderr and the default is used. Thread-safe.
const Architecture& DeviceArchitecture();

}  // namespace softgpu
