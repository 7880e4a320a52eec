// HostNvml: the host's NVML (libnvidia-ml.so.1), read on the server for what the CUDA driver API
// does not say of a GPU: its temperature, power draw and limit, current clocks, fan speed,
// performance state and the kernel driver's version. A backend device is matched to NVML's by
// its UUID, so a device NVML does not know (every software GPU) has no readings, and nothing
// is ever made up.
//
// Thread-safe once loaded (NVML's queries are).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/cuda_driver.h"

namespace rgpu::server {

// One device's readings; `known` has a bit (proto/sensors.h) per field that holds one.
struct DeviceSensorReadings {
  uint32_t known = 0;
  uint32_t temperature_c = 0;
  uint32_t power_mw = 0;
  uint32_t power_limit_mw = 0;
  uint32_t graphics_mhz = 0;
  uint32_t sm_mhz = 0;
  uint32_t memory_mhz = 0;
  uint32_t fan_percent = 0;
  uint32_t performance_state = 0;
};

class HostNvml {
 public:
  // Loads `library` (dlopen) and matches the backend's `device_count` devices by UUID. NotFound
  // when the library is absent or does not start (no NVIDIA driver: the usual case with the
  // software GPU); the server then answers no readings.
  static Status Load(const std::string& library, const CudaDriver& backend, int device_count,
                     std::unique_ptr<HostNvml>* out);
  ~HostNvml();
  HostNvml(const HostNvml&) = delete;
  HostNvml& operator=(const HostNvml&) = delete;

  // The readings of the backend's device `device` now (none for one NVML does not know).
  DeviceSensorReadings Read(int device) const;
  // The kernel driver's version ("" when NVML does not say).
  const std::string& driver_version() const { return driver_version_; }
  // How many of the backend's devices NVML knows.
  int matched_devices() const;

 private:
  struct Functions;
  HostNvml() = default;
  void* library_ = nullptr;
  std::unique_ptr<Functions> fn_;
  std::vector<void*> devices_;  // NVML's handle per backend device, nullptr when unknown
  std::string driver_version_;
};

}  // namespace rgpu::server
