// DeviceCatalog: what the backend's devices look like, gathered once at start-up (name, memory,
// UUID, PCI id and every attribute), so that sessions hand it to clients without asking again.
#pragma once

#include <vector>

#include "proto/rgpu.pb.h"
#include "server/cuda_driver.h"

namespace rgpu::server {

class DeviceCatalog {
 public:
  // Queries every device of an initialized driver.
  Status Load(const CudaDriver& driver);
  const std::vector<wire::DeviceInfo>& devices() const { return devices_; }
  int driver_version() const { return driver_version_; }

 private:
  std::vector<wire::DeviceInfo> devices_;
  int driver_version_ = 0;
};

}  // namespace rgpu::server
