// DeviceUsage: what NVML tells a tenant about one of its devices (interpose/nvml/), from the
// server's own accounting: the memory the tenant may hold and holds on that device, its metered
// GPU and copy time there (each session counts them per device: SessionStats.device_*), and its
// sessions with a context on the device. Nothing here names another
// tenant.
// DeviceSensors: what the GPU's own sensors say (the host's NVML, server/host_nvml.h).
#include <algorithm>
#include <cstring>

#include "server/device_catalog.h"
#include "server/session.h"
#include "server/tenants.h"

namespace rgpu::server {

CUresult Session::HandleDeviceUsage(CallState&, const DeviceUsageIn& in,
                                    calls::DeviceUsage::Results* out) {
  const uint64_t device_bytes = devices_.devices()[in.device].total_mem();
  // Every admitted session of the server (a server without a status provider: this one).
  std::vector<wire::SessionStats> sessions;
  if (status_provider_) {
    wire::StatusReply all = status_provider_();
    sessions.assign(all.sessions().begin(), all.sessions().end());
  } else {
    sessions.push_back(Stats());
  }
  const std::string tenant = tenant_ != nullptr ? tenant_->name : "";
  uint64_t held_on_device = 0;  // what the tenant's sessions hold on this device
  double busy = 0, copies = 0, window = 0;
  for (const wire::SessionStats& st : sessions) {
    if (st.tenant() != tenant) continue;
    for (int i = 0; i < st.devices_size(); ++i) {
      if (st.devices(i) != in.device) continue;
      const uint64_t bytes = i < st.device_memory_bytes_size() ? st.device_memory_bytes(i) : 0;
      out->pids_and_bytes.push_back(st.pid());
      out->pids_and_bytes.push_back(bytes);
      held_on_device += bytes;
      // Its GPU and copy time measured on this device.
      if (i < st.device_gpu_busy_seconds_size()) busy += st.device_gpu_busy_seconds(i);
      if (i < st.device_copy_busy_seconds_size()) copies += st.device_copy_busy_seconds(i);
      window = std::max(window, st.uptime_seconds());
    }
  }
  // A tenant's quota is its device memory (as cuMemGetInfo says); without tenants, the device's.
  out->total =
      tenant_ != nullptr ? std::min<uint64_t>(tenant_->memory_quota, device_bytes) : device_bytes;
  out->used = std::min<uint64_t>(held_on_device, out->total);
  out->metered = scheduler_ != nullptr;
  if (out->metered) {
    out->busy_ns = static_cast<uint64_t>(busy * 1e9);
    out->copy_ns = static_cast<uint64_t>(copies * 1e9);
    out->window_ns = static_cast<uint64_t>(window * 1e9);
  }
  return CUDA_SUCCESS;
}

CUresult Session::HandleDeviceSensors(CallState& cs, const DeviceSensorsIn& in,
                                      calls::DeviceSensors::Results* out) {
  if (host_nvml_ == nullptr) return CUDA_SUCCESS;  // nothing known: every field unread
  // The session's device index is the server's (Device arguments are resolved to it).
  const DeviceSensorReadings r = host_nvml_->Read(in.device);
  out->known = r.known;
  out->temperature_c = r.temperature_c;
  out->power_mw = r.power_mw;
  out->power_limit_mw = r.power_limit_mw;
  out->graphics_mhz = r.graphics_mhz;
  out->sm_mhz = r.sm_mhz;
  out->memory_mhz = r.memory_mhz;
  out->fan_percent = r.fan_percent;
  out->performance_state = r.performance_state;
  const std::string& version = host_nvml_->driver_version();
  if (!version.empty()) {
    cs.out_payload = OutputBuffer(version.size());
    if (cs.out_payload == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(cs.out_payload, version.data(), version.size());
    cs.out_size = version.size();
  }
  return CUDA_SUCCESS;
}

}  // namespace rgpu::server
