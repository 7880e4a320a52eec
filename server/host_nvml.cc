#include "server/host_nvml.h"

#include <dlfcn.h>

#include <cstring>

#include "client/abi/nvml_types.h"
#include "common/device_uuid.h"
#include "proto/sensors.h"

namespace rgpu::server {

struct HostNvml::Functions {
  nvmlReturn_t (*init)(void) = nullptr;
  nvmlReturn_t (*shutdown)(void) = nullptr;
  nvmlReturn_t (*by_uuid)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, nvmlTemperatureSensors_t, unsigned*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, nvmlClockType_t, unsigned*) = nullptr;
  nvmlReturn_t (*fan)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*pstate)(nvmlDevice_t, nvmlPstates_t*) = nullptr;
};

namespace {

template <typename Fn>
void Bind(void* lib, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
}

}  // namespace

Status HostNvml::Load(const std::string& library, const CudaDriver& backend, int device_count,
                      std::unique_ptr<HostNvml>* out) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return NotFound("cannot load " + library + ": " + dlerror());
  std::unique_ptr<HostNvml> nvml(new HostNvml);
  nvml->library_ = lib;
  nvml->fn_ = std::make_unique<Functions>();
  Functions& f = *nvml->fn_;
  Bind(lib, "nvmlInit_v2", &f.init);
  Bind(lib, "nvmlShutdown", &f.shutdown);
  Bind(lib, "nvmlDeviceGetHandleByUUID", &f.by_uuid);
  Bind(lib, "nvmlSystemGetDriverVersion", &f.driver_version);
  Bind(lib, "nvmlDeviceGetTemperature", &f.temperature);
  Bind(lib, "nvmlDeviceGetPowerUsage", &f.power);
  Bind(lib, "nvmlDeviceGetEnforcedPowerLimit", &f.power_limit);
  Bind(lib, "nvmlDeviceGetClockInfo", &f.clock);
  Bind(lib, "nvmlDeviceGetFanSpeed", &f.fan);
  Bind(lib, "nvmlDeviceGetPerformanceState", &f.pstate);
  if (f.init == nullptr || f.by_uuid == nullptr) {
    return NotFound(library + " is not NVML (no nvmlInit_v2 or nvmlDeviceGetHandleByUUID)");
  }
  if (nvmlReturn_t r = f.init(); r != NVML_SUCCESS) {
    f.shutdown = nullptr;  // not started: nothing to shut down
    return NotFound(library + ": nvmlInit_v2 failed (" + std::to_string(r) + ")");
  }
  if (f.driver_version != nullptr) {
    char text[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
    if (f.driver_version(text, sizeof text) == NVML_SUCCESS) {
      nvml->driver_version_.assign(text, strnlen(text, sizeof text));
    }
  }
  nvml->devices_.assign(static_cast<size_t>(device_count), nullptr);
  for (int i = 0; i < device_count; ++i) {
    CUdevice dev;
    CUuuid uuid;
    if (backend.cuDeviceGetUuid == nullptr || backend.cuDeviceGet(&dev, i) != CUDA_SUCCESS ||
        backend.cuDeviceGetUuid(&uuid, dev) != CUDA_SUCCESS) {
      continue;
    }
    const std::string text = DeviceUuidText(std::string(uuid.bytes, sizeof uuid.bytes));
    nvmlDevice_t handle = nullptr;
    if (f.by_uuid(text.c_str(), &handle) == NVML_SUCCESS) nvml->devices_[i] = handle;
  }
  *out = std::move(nvml);
  return Status::Ok();
}

HostNvml::~HostNvml() {
  if (fn_ != nullptr && fn_->shutdown != nullptr) fn_->shutdown();
  if (library_ != nullptr) dlclose(library_);
}

int HostNvml::matched_devices() const {
  int n = 0;
  for (void* d : devices_) n += d != nullptr;
  return n;
}

DeviceSensorReadings HostNvml::Read(int device) const {
  DeviceSensorReadings s;
  if (device < 0 || static_cast<size_t>(device) >= devices_.size() || devices_[device] == nullptr) {
    return s;
  }
  const Functions& f = *fn_;
  nvmlDevice_t d = static_cast<nvmlDevice_t>(devices_[device]);
  unsigned v = 0;
  // Each reading only when NVML answers it (a board may have no fan or no power sensor).
  auto take = [&](nvmlReturn_t r, uint32_t bit, uint32_t* field) {
    if (r != NVML_SUCCESS) return;
    s.known |= bit;
    *field = v;
  };
  if (f.temperature != nullptr) {
    take(f.temperature(d, NVML_TEMPERATURE_GPU, &v), calls::kSensorTemperature, &s.temperature_c);
  }
  if (f.power != nullptr) take(f.power(d, &v), calls::kSensorPower, &s.power_mw);
  if (f.power_limit != nullptr) {
    take(f.power_limit(d, &v), calls::kSensorPowerLimit, &s.power_limit_mw);
  }
  if (f.clock != nullptr) {
    take(f.clock(d, NVML_CLOCK_GRAPHICS, &v), calls::kSensorGraphicsClock, &s.graphics_mhz);
    take(f.clock(d, NVML_CLOCK_SM, &v), calls::kSensorSmClock, &s.sm_mhz);
    take(f.clock(d, NVML_CLOCK_MEM, &v), calls::kSensorMemoryClock, &s.memory_mhz);
  }
  if (f.fan != nullptr) take(f.fan(d, &v), calls::kSensorFan, &s.fan_percent);
  nvmlPstates_t pstate = NVML_PSTATE_UNKNOWN;
  if (f.pstate != nullptr && f.pstate(d, &pstate) == NVML_SUCCESS && pstate <= NVML_PSTATE_15) {
    s.known |= calls::kSensorPerformanceState;
    s.performance_state = static_cast<uint32_t>(pstate);
  }
  return s;
}

}  // namespace rgpu::server
