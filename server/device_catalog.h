// DeviceCatalog: what the backend's devices look like, gathered once at start-up (name, memory,
// UUID, PCI id and every attribute), so that sessions hand it to clients without asking again.
#pragma once

#include <string>
#include <vector>

#include "proto/rgpu.pb.h"
#include "server/cuda_driver.h"

namespace rgpu::server {

class DeviceCatalog {
 public:
  // Queries every device of an initialized driver; `backend` names its kind ("cuda", "softgpu").
  Status Load(const CudaDriver& driver, const std::string& backend);
  const std::string& backend() const { return backend_; }
  const std::vector<wire::DeviceInfo>& devices() const { return devices_; }
  int driver_version() const { return driver_version_; }

 private:
  std::vector<wire::DeviceInfo> devices_;
  int driver_version_ = 0;
  std::string backend_;
};

}  // namespace rgpu::server
