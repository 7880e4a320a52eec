// NVML's answers for the devices a tenant sees (the calls client/abi/nvml_api.def describes,
// exported as rgpu_nvml_<name> for the NVML face). What a device is comes from the server's
// description of it (the Welcome, as for cuDeviceGet*); what the tenant holds and does there
// from the server's accounting (the DeviceUsage call): its quota as the memory's total, its use
// as used, its kernels' metered share of time as utilization, its sessions as processes; what
// the GPU's sensors say (temperature, power, current clocks, fan, performance state, the kernel
// driver's version) from the server's host NVML (the DeviceSensors call), NOT_SUPPORTED where the
// server has no reading (every software GPU).
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "client/abi/nvml_types.h"
#include "client/impl.h"
#include "client/visible_devices.h"
#include "proto/sensors.h"

// Each implementation's signature is the description's.
#define NVML_FN(name, params, args) \
  extern "C" __attribute__((visibility("default"))) nvmlReturn_t rgpu_nvml_##name params;
#include "client/abi/nvml_api.def"
#undef NVML_FN

#define RGPU_NVML(name) \
  extern "C" __attribute__((visibility("default"))) nvmlReturn_t rgpu_nvml_##name

struct nvmlDevice_st {
  CUdevice ordinal;
};

namespace {

namespace calls = rgpu::calls;
using rgpu::client::ClientState;
using rgpu::client::DeviceUuidText;
using rgpu::client::Server;

// A device's last utilization sample (the server's cumulative figures and when they were read).
struct Sample {
  bool taken = false;
  uint64_t busy_ns = 0, copy_ns = 0, window_ns = 0;
};

class Nvml {
 public:
  static Nvml& Get() {
    static Nvml* nvml = new Nvml();  // lives as long as the process: handles stay valid
    return *nvml;
  }

  nvmlReturn_t Init() {
    std::lock_guard<std::mutex> lock(mu_);
    const CUresult r = ClientState::Get().Initialize();
    if (r != CUDA_SUCCESS) {
      RGPU_LOG_WARN("nvmlInit: no server (CUDA error %d)", static_cast<int>(r));
      return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    if (devices_.empty()) {
      for (int d = 0; d < ClientState::Get().device_count(); ++d) {
        devices_.push_back(std::make_unique<nvmlDevice_st>(nvmlDevice_st{d}));
      }
      samples_.resize(devices_.size());
    }
    ++init_count_;
    return NVML_SUCCESS;
  }

  nvmlReturn_t Shutdown() {
    std::lock_guard<std::mutex> lock(mu_);
    if (init_count_ == 0) return NVML_ERROR_UNINITIALIZED;
    --init_count_;
    return NVML_SUCCESS;
  }

  // NVML_SUCCESS when initialized.
  nvmlReturn_t Check() {
    std::lock_guard<std::mutex> lock(mu_);
    return init_count_ > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
  }

  unsigned count() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<unsigned>(devices_.size());
  }

  nvmlDevice_t handle(unsigned index) {
    std::lock_guard<std::mutex> lock(mu_);
    return index < devices_.size() ? devices_[index].get() : nullptr;
  }

  // The server's description of `device` (checked to be one of ours), or an error.
  nvmlReturn_t Describe(nvmlDevice_t device, const rgpu::wire::DeviceInfo** info) {
    if (nvmlReturn_t r = Check(); r != NVML_SUCCESS) return r;
    {
      std::lock_guard<std::mutex> lock(mu_);
      bool ours = false;
      for (const auto& d : devices_) ours = ours || d.get() == device;
      if (!ours) return NVML_ERROR_INVALID_ARGUMENT;
    }
    *info = ClientState::Get().device(device->ordinal);
    return *info != nullptr ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
  }

  // The server's accounting for `device`.
  nvmlReturn_t Usage(nvmlDevice_t device, calls::DeviceUsage::Results* usage) {
    const rgpu::wire::DeviceInfo* info;
    if (nvmlReturn_t r = Describe(device, &info); r != NVML_SUCCESS) return r;
    const CUresult r = Server().Call<calls::DeviceUsage>(0, {.device = device->ordinal}, usage);
    if (r == CUDA_SUCCESS) return NVML_SUCCESS;
    return r == CUDA_ERROR_NOT_SUPPORTED ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_GPU_IS_LOST;
  }

  // What the GPU's sensors say of `device`, and the kernel driver's version (its server's).
  nvmlReturn_t Sensors(nvmlDevice_t device, calls::DeviceSensors::Results* sensors,
                       std::string* driver_version = nullptr) {
    const rgpu::wire::DeviceInfo* info;
    if (nvmlReturn_t r = Describe(device, &info); r != NVML_SUCCESS) return r;
    char text[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    size_t got = 0;
    const CUresult r = Server().Call<calls::DeviceSensors>(0, {.device = device->ordinal}, sensors,
                                                           nullptr, 0, {text, sizeof text}, &got);
    if (r != CUDA_SUCCESS) {
      return r == CUDA_ERROR_NOT_SUPPORTED ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_GPU_IS_LOST;
    }
    if (driver_version != nullptr) driver_version->assign(text, std::min(got, sizeof text));
    return NVML_SUCCESS;
  }

  // The percentages of the time since the last sample of `device` (or, the first time, since
  // the tenant's sessions there began) that its kernels and its copies kept the device busy.
  void Utilization(nvmlDevice_t device, const calls::DeviceUsage::Results& u, unsigned* gpu,
                   unsigned* memory) {
    std::lock_guard<std::mutex> lock(mu_);
    Sample& last = samples_[device->ordinal];
    uint64_t busy = u.busy_ns, copies = u.copy_ns, window = u.window_ns;
    if (last.taken && u.window_ns > last.window_ns && u.busy_ns >= last.busy_ns &&
        u.copy_ns >= last.copy_ns) {
      busy -= last.busy_ns;
      copies -= last.copy_ns;
      window -= last.window_ns;
    }
    // A sample older than the last one (another thread's, applied late) is not a new baseline.
    if (!last.taken || u.window_ns >= last.window_ns)
      last = {true, u.busy_ns, u.copy_ns, u.window_ns};
    auto percent = [window](uint64_t ns) {
      return window == 0 ? 0u : static_cast<unsigned>(std::min<uint64_t>(100, ns * 100 / window));
    };
    *gpu = percent(busy);
    *memory = percent(copies);
  }

 private:
  std::mutex mu_;
  int init_count_ = 0;                                   // GUARDED_BY(mu_)
  std::vector<std::unique_ptr<nvmlDevice_st>> devices_;  // GUARDED_BY(mu_), never shrinks
  std::vector<Sample> samples_;                          // GUARDED_BY(mu_)
};

// Runs `body`, turning anything it throws into NVML_ERROR_UNKNOWN: nothing of rgpu's reaches the
// program.
template <typename Body>
nvmlReturn_t Guard(Body body) {
  try {
    return body();
  } catch (...) {
    return NVML_ERROR_UNKNOWN;
  }
}

// Copies `s` into `out` of `length` bytes, NUL included; NVML_ERROR_INSUFFICIENT_SIZE when short.
nvmlReturn_t CopyString(const std::string& s, char* out, unsigned length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (s.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(out, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

struct BusId {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
};

// Parses "domain:bus:device.function" (any width of hex digits: CUDA's and NVML's forms).
bool ParseBusId(const char* text, BusId* id) {
  char end = 0;
  return text != nullptr && sscanf(text, "%x:%x:%x.%x%c", &id->domain, &id->bus, &id->device,
                                   &id->function, &end) == 4;
}

int Attribute(const rgpu::wire::DeviceInfo& info, CUdevice_attribute attribute) {
  return attribute < info.attributes_size() ? info.attributes(attribute) : 0;
}

template <typename Info>
nvmlReturn_t Processes(nvmlDevice_t device, unsigned* count, Info* infos, bool graphics) {
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  calls::DeviceUsage::Results u;
  if (nvmlReturn_t r = Nvml::Get().Usage(device, &u); r != NVML_SUCCESS) return r;
  // rgpu runs no graphics work: no process has a graphics context.
  const size_t n = graphics ? 0 : u.pids_and_bytes.size() / 2;
  if (*count < n || (n > 0 && infos == nullptr)) {
    *count = static_cast<unsigned>(n);
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (size_t i = 0; i < n; ++i) {
    Info info = {};
    info.pid = static_cast<unsigned>(u.pids_and_bytes[2 * i]);
    info.usedGpuMemory = u.pids_and_bytes[2 * i + 1];
    if constexpr (sizeof(Info) == sizeof(nvmlProcessInfo_t)) {
      info.gpuInstanceId = 0xFFFFFFFFu;  // no MIG instance
      info.computeInstanceId = 0xFFFFFFFFu;
    }
    infos[i] = info;
  }
  *count = static_cast<unsigned>(n);
  return NVML_SUCCESS;
}

}  // namespace

RGPU_NVML(nvmlInit_v2)(void) {
  return Guard([] { return Nvml::Get().Init(); });
}
RGPU_NVML(nvmlInit)(void) { return rgpu_nvml_nvmlInit_v2(); }
RGPU_NVML(nvmlInitWithFlags)(unsigned int flags) {
  // NVML_INIT_FLAG_NO_GPUS (1): initialize even without GPUs; NO_ATTACH (2): do not attach.
  if (flags & ~3u) return NVML_ERROR_INVALID_ARGUMENT;
  return rgpu_nvml_nvmlInit_v2();
}
RGPU_NVML(nvmlShutdown)(void) {
  return Guard([] { return Nvml::Get().Shutdown(); });
}

RGPU_NVML(nvmlSystemGetCudaDriverVersion)(int* version) {
  return Guard([&] {
    if (version == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (nvmlReturn_t r = Nvml::Get().Check(); r != NVML_SUCCESS) return r;
    *version = ClientState::Get().driver_version();
    return NVML_SUCCESS;
  });
}
RGPU_NVML(nvmlSystemGetCudaDriverVersion_v2)(int* version) {
  return rgpu_nvml_nvmlSystemGetCudaDriverVersion(version);
}

RGPU_NVML(nvmlDeviceGetCount_v2)(unsigned int* count) {
  return Guard([&] {
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (nvmlReturn_t r = Nvml::Get().Check(); r != NVML_SUCCESS) return r;
    *count = Nvml::Get().count();
    return NVML_SUCCESS;
  });
}
RGPU_NVML(nvmlDeviceGetCount)(unsigned int* count) {
  return rgpu_nvml_nvmlDeviceGetCount_v2(count);
}

RGPU_NVML(nvmlDeviceGetHandleByIndex_v2)(unsigned int index, nvmlDevice_t* device) {
  return Guard([&] {
    if (device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (nvmlReturn_t r = Nvml::Get().Check(); r != NVML_SUCCESS) return r;
    nvmlDevice_t d = Nvml::Get().handle(index);
    if (d == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *device = d;
    return NVML_SUCCESS;
  });
}
RGPU_NVML(nvmlDeviceGetHandleByIndex)(unsigned int index, nvmlDevice_t* device) {
  return rgpu_nvml_nvmlDeviceGetHandleByIndex_v2(index, device);
}

RGPU_NVML(nvmlDeviceGetHandleByUUID)(const char* uuid, nvmlDevice_t* device) {
  return Guard([&] {
    if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (nvmlReturn_t r = Nvml::Get().Check(); r != NVML_SUCCESS) return r;
    for (unsigned i = 0; i < Nvml::Get().count(); ++i) {
      const rgpu::wire::DeviceInfo* info = ClientState::Get().device(static_cast<CUdevice>(i));
      if (info != nullptr && strcasecmp(DeviceUuidText(info->uuid()).c_str(), uuid) == 0) {
        *device = Nvml::Get().handle(i);
        return NVML_SUCCESS;
      }
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

RGPU_NVML(nvmlDeviceGetHandleByPciBusId_v2)(const char* bus_id, nvmlDevice_t* device) {
  return Guard([&] {
    if (device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (nvmlReturn_t r = Nvml::Get().Check(); r != NVML_SUCCESS) return r;
    BusId want;
    if (!ParseBusId(bus_id, &want)) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < Nvml::Get().count(); ++i) {
      const rgpu::wire::DeviceInfo* info = ClientState::Get().device(static_cast<CUdevice>(i));
      BusId have;
      if (info != nullptr && ParseBusId(info->pci_bus_id().c_str(), &have) &&
          have.domain == want.domain && have.bus == want.bus && have.device == want.device) {
        *device = Nvml::Get().handle(i);
        return NVML_SUCCESS;
      }
    }
    return NVML_ERROR_NOT_FOUND;
  });
}
RGPU_NVML(nvmlDeviceGetHandleByPciBusId)(const char* bus_id, nvmlDevice_t* device) {
  return rgpu_nvml_nvmlDeviceGetHandleByPciBusId_v2(bus_id, device);
}

RGPU_NVML(nvmlDeviceGetIndex)(nvmlDevice_t device, unsigned int* index) {
  return Guard([&] {
    const rgpu::wire::DeviceInfo* info;
    if (nvmlReturn_t r = Nvml::Get().Describe(device, &info); r != NVML_SUCCESS) return r;
    if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *index = static_cast<unsigned>(device->ordinal);
    return NVML_SUCCESS;
  });
}

RGPU_NVML(nvmlDeviceGetName)(nvmlDevice_t device, char* name, unsigned int length) {
  return Guard([&] {
    const rgpu::wire::DeviceInfo* info;
    if (nvmlReturn_t r = Nvml::Get().Describe(device, &info); r != NVML_SUCCESS) return r;
    return CopyString(info->name(), name, length);
  });
}

RGPU_NVML(nvmlDeviceGetUUID)(nvmlDevice_t device, char* uuid, unsigned int length) {
  return Guard([&] {
    const rgpu::wire::DeviceInfo* info;
    if (nvmlReturn_t r = Nvml::Get().Describe(device, &info); r != NVML_SUCCESS) return r;
    const std::string text = DeviceUuidText(info->uuid());
    if (text.empty()) return NVML_ERROR_NOT_SUPPORTED;
    return CopyString(text, uuid, length);
  });
}

RGPU_NVML(nvmlDeviceGetPciInfo_v3)(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return Guard([&] {
    const rgpu::wire::DeviceInfo* info;
    if (nvmlReturn_t r = Nvml::Get().Describe(device, &info); r != NVML_SUCCESS) return r;
    if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    BusId id;
    if (!ParseBusId(info->pci_bus_id().c_str(), &id)) return NVML_ERROR_NOT_SUPPORTED;
    *pci = {};
    pci->domain = id.domain;
    pci->bus = id.bus;
    pci->device = id.device;
    // The server does not say the device's PCI ids: 0, "unknown", rather than a guess.
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", id.domain & 0xffff,
             id.bus & 0xff, id.device & 0xff);
    snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", id.domain, id.bus & 0xff,
             id.device & 0xff);
    return NVML_SUCCESS;
  });
}

RGPU_NVML(nvmlDeviceGetCudaComputeCapability)(nvmlDevice_t device, int* major, int* minor) {
  return Guard([&] {
    const rgpu::wire::DeviceInfo* info;
    if (nvmlReturn_t r = Nvml::Get().Describe(device, &info); r != NVML_SUCCESS) return r;
    if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *major = Attribute(*info, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    *minor = Attribute(*info, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    return NVML_SUCCESS;
  });
}

RGPU_NVML(nvmlDeviceGetMaxClockInfo)(nvmlDevice_t device, nvmlClockType_t type, unsigned int* mhz) {
  return Guard([&] {
    const rgpu::wire::DeviceInfo* info;
    if (nvmlReturn_t r = Nvml::Get().Describe(device, &info); r != NVML_SUCCESS) return r;
    if (mhz == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    int khz = 0;
    switch (type) {
      case NVML_CLOCK_GRAPHICS:
      case NVML_CLOCK_SM:
        khz = Attribute(*info, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
        break;
      case NVML_CLOCK_MEM:
        khz = Attribute(*info, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
        break;
      case NVML_CLOCK_VIDEO:
        return NVML_ERROR_NOT_SUPPORTED;
      default:
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (khz <= 0) return NVML_ERROR_NOT_SUPPORTED;  // the device does not say
    *mhz = static_cast<unsigned>(khz / 1000);
    return NVML_SUCCESS;
  });
}

namespace {

// One sensor reading of `device`: `pick` returns the field when `known` has its bit.
template <typename Pick>
nvmlReturn_t Reading(nvmlDevice_t device, unsigned int* out, uint32_t bit, Pick pick) {
  calls::DeviceSensors::Results s;
  if (nvmlReturn_t r = Nvml::Get().Sensors(device, &s); r != NVML_SUCCESS) return r;
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if ((s.known & bit) == 0) return NVML_ERROR_NOT_SUPPORTED;
  *out = pick(s);
  return NVML_SUCCESS;
}

}  // namespace

RGPU_NVML(nvmlSystemGetDriverVersion)(char* version, unsigned int length) {
  return Guard([&] {
    if (nvmlReturn_t r = Nvml::Get().Check(); r != NVML_SUCCESS) return r;
    if (version == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlDevice_t first = Nvml::Get().handle(0);
    if (first == nullptr) return NVML_ERROR_NOT_SUPPORTED;
    calls::DeviceSensors::Results s;
    std::string text;
    if (nvmlReturn_t r = Nvml::Get().Sensors(first, &s, &text); r != NVML_SUCCESS) return r;
    if (text.empty()) return NVML_ERROR_NOT_SUPPORTED;
    if (length < text.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(version, text.c_str(), text.size() + 1);
    return NVML_SUCCESS;
  });
}

RGPU_NVML(nvmlDeviceGetTemperature)
(nvmlDevice_t device, nvmlTemperatureSensors_t sensor, unsigned int* temperature) {
  return Guard([&] {
    if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    return Reading(device, temperature, calls::kSensorTemperature,
                   [](const auto& s) { return s.temperature_c; });
  });
}

RGPU_NVML(nvmlDeviceGetPowerUsage)(nvmlDevice_t device, unsigned int* milliwatts) {
  return Guard([&] {
    return Reading(device, milliwatts, calls::kSensorPower,
                   [](const auto& s) { return s.power_mw; });
  });
}

RGPU_NVML(nvmlDeviceGetEnforcedPowerLimit)(nvmlDevice_t device, unsigned int* milliwatts) {
  return Guard([&] {
    return Reading(device, milliwatts, calls::kSensorPowerLimit,
                   [](const auto& s) { return s.power_limit_mw; });
  });
}

RGPU_NVML(nvmlDeviceGetClockInfo)(nvmlDevice_t device, nvmlClockType_t type, unsigned int* mhz) {
  return Guard([&] {
    switch (type) {
      case NVML_CLOCK_GRAPHICS:
        return Reading(device, mhz, calls::kSensorGraphicsClock,
                       [](const auto& s) { return s.graphics_mhz; });
      case NVML_CLOCK_SM:
        return Reading(device, mhz, calls::kSensorSmClock, [](const auto& s) { return s.sm_mhz; });
      case NVML_CLOCK_MEM:
        return Reading(device, mhz, calls::kSensorMemoryClock,
                       [](const auto& s) { return s.memory_mhz; });
      case NVML_CLOCK_VIDEO:
        return NVML_ERROR_NOT_SUPPORTED;
      default:
        return NVML_ERROR_INVALID_ARGUMENT;
    }
  });
}

RGPU_NVML(nvmlDeviceGetFanSpeed)(nvmlDevice_t device, unsigned int* percent) {
  return Guard([&] {
    return Reading(device, percent, calls::kSensorFan, [](const auto& s) { return s.fan_percent; });
  });
}

RGPU_NVML(nvmlDeviceGetPerformanceState)(nvmlDevice_t device, nvmlPstates_t* state) {
  return Guard([&] {
    if (state == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned value = 0;
    const nvmlReturn_t r = Reading(device, &value, calls::kSensorPerformanceState,
                                   [](const auto& s) { return s.performance_state; });
    if (r == NVML_SUCCESS) *state = static_cast<nvmlPstates_t>(value);
    return r;
  });
}

RGPU_NVML(nvmlDeviceGetComputeMode)(nvmlDevice_t device, nvmlComputeMode_t* mode) {
  return Guard([&] {
    const rgpu::wire::DeviceInfo* info;
    if (nvmlReturn_t r = Nvml::Get().Describe(device, &info); r != NVML_SUCCESS) return r;
    if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    // CUDA's compute modes have NVML's values.
    *mode = static_cast<nvmlComputeMode_t>(Attribute(*info, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE));
    return NVML_SUCCESS;
  });
}

RGPU_NVML(nvmlDeviceGetP2PStatus)
(nvmlDevice_t device, nvmlDevice_t peer, nvmlGpuP2PCapsIndex_t index, nvmlGpuP2PStatus_t* status) {
  return Guard([&] {
    const rgpu::wire::DeviceInfo* info;
    if (nvmlReturn_t r = Nvml::Get().Describe(device, &info); r != NVML_SUCCESS) return r;
    if (nvmlReturn_t r = Nvml::Get().Describe(peer, &info); r != NVML_SUCCESS) return r;
    if (status == nullptr || index < NVML_P2P_CAPS_INDEX_READ || index > NVML_P2P_CAPS_INDEX_PROP) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    // Reads, writes and atomics between the devices are what cuDeviceCanAccessPeer says (a
    // device is not its own peer, as CUDA has it); there is no NVLink between them.
    int can = 0;
    if (index != NVML_P2P_CAPS_INDEX_NVLINK && index != NVML_P2P_CAPS_INDEX_PROP &&
        rgpu_impl_cuDeviceCanAccessPeer(&can, device->ordinal, peer->ordinal) != CUDA_SUCCESS) {
      return NVML_ERROR_UNKNOWN;
    }
    *status = can ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
    return NVML_SUCCESS;
  });
}

RGPU_NVML(nvmlDeviceGetMigMode)(nvmlDevice_t device, unsigned int* current, unsigned int* pending) {
  return Guard([&] {
    const rgpu::wire::DeviceInfo* info;
    if (nvmlReturn_t r = Nvml::Get().Describe(device, &info); r != NVML_SUCCESS) return r;
    if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    // A tenant's device is never partitioned into MIG instances.
    *current = *pending = NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
  });
}

RGPU_NVML(nvmlDeviceGetMemoryInfo_v2)(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  return Guard([&] {
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    calls::DeviceUsage::Results u;
    if (nvmlReturn_t r = Nvml::Get().Usage(device, &u); r != NVML_SUCCESS) return r;
    memory->total = u.total;
    memory->reserved = 0;  // the quota is the tenant's whole
    memory->used = u.used;
    memory->free = u.total - u.used;
    return NVML_SUCCESS;
  });
}

RGPU_NVML(nvmlDeviceGetMemoryInfo)(nvmlDevice_t device, nvmlMemory_t* memory) {
  return Guard([&] {
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    calls::DeviceUsage::Results u;
    if (nvmlReturn_t r = Nvml::Get().Usage(device, &u); r != NVML_SUCCESS) return r;
    memory->total = u.total;
    memory->used = u.used;
    memory->free = u.total - u.used;
    return NVML_SUCCESS;
  });
}

RGPU_NVML(nvmlDeviceGetUtilizationRates)(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  return Guard([&] {
    if (utilization == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    calls::DeviceUsage::Results u;
    if (nvmlReturn_t r = Nvml::Get().Usage(device, &u); r != NVML_SUCCESS) return r;
    // Only a server that meters (--fair-share) knows how long kernels ran.
    if (!u.metered) return NVML_ERROR_NOT_SUPPORTED;
    Nvml::Get().Utilization(device, u, &utilization->gpu, &utilization->memory);
    return NVML_SUCCESS;
  });
}

RGPU_NVML(nvmlDeviceGetComputeRunningProcesses_v3)
(nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos) {
  return Guard([&] { return Processes(device, count, infos, false); });
}
RGPU_NVML(nvmlDeviceGetComputeRunningProcesses_v2)
(nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_v2_t* infos) {
  return Guard([&] { return Processes(device, count, infos, false); });
}
RGPU_NVML(nvmlDeviceGetComputeRunningProcesses)
(nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_v1_t* infos) {
  return Guard([&] { return Processes(device, count, infos, false); });
}
RGPU_NVML(nvmlDeviceGetGraphicsRunningProcesses_v3)
(nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos) {
  return Guard([&] { return Processes(device, count, infos, true); });
}
