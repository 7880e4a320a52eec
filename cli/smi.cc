#include "cli/smi.h"

#include <dlfcn.h>

#include <cstdio>
#include <optional>
#include <vector>

#include "cli/json_text.h"
#include "client/abi/nvml_types.h"

namespace rgpu::cli {
namespace {

// The NVML entry points the table reads, from the face.
struct NvmlFace {
  nvmlReturn_t (*init)(void);
  nvmlReturn_t (*shutdown)(void);
  const char* (*error_string)(nvmlReturn_t);
  nvmlReturn_t (*cuda_version)(int*);
  nvmlReturn_t (*count)(unsigned*);
  nvmlReturn_t (*handle)(unsigned, nvmlDevice_t*);
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t*);
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_v2_t*);
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*);
  nvmlReturn_t (*capability)(nvmlDevice_t, int*, int*);
  nvmlReturn_t (*max_clock)(nvmlDevice_t, nvmlClockType_t, unsigned*);
  nvmlReturn_t (*mig)(nvmlDevice_t, unsigned*, unsigned*);
  nvmlReturn_t (*processes)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*);
  nvmlReturn_t (*driver_version)(char*, unsigned);
  nvmlReturn_t (*temperature)(nvmlDevice_t, nvmlTemperatureSensors_t, unsigned*);
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*fan)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*pstate)(nvmlDevice_t, nvmlPstates_t*);
};

template <typename Fn>
bool Bind(void* lib, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*fn == nullptr) fprintf(stderr, "rgpu smi: the NVML face lacks %s\n", name);
  return *fn != nullptr;
}

struct Gpu {
  unsigned index = 0;
  std::string name, uuid, bus_id;
  std::optional<nvmlMemory_v2_t> memory;
  std::optional<nvmlUtilization_t> utilization;
  std::optional<std::pair<int, int>> capability;
  std::optional<unsigned> sm_mhz, memory_mhz;
  // What the GPU's sensors say, where the server has a reading.
  std::optional<unsigned> temperature_c, power_mw, power_limit_mw, fan_percent, pstate;
  bool mig = false;
  std::vector<nvmlProcessInfo_t> processes;
};

std::string MiB(unsigned long long bytes) { return std::to_string(bytes >> 20) + "MiB"; }

}  // namespace

int RunSmi(const std::string& nvml_library, bool json) {
  void* lib = dlopen(nvml_library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    fprintf(stderr, "rgpu smi: cannot load %s: %s\n", nvml_library.c_str(), dlerror());
    return 2;
  }
  NvmlFace f;
  if (!Bind(lib, "nvmlInit_v2", &f.init) || !Bind(lib, "nvmlShutdown", &f.shutdown) ||
      !Bind(lib, "nvmlErrorString", &f.error_string) ||
      !Bind(lib, "nvmlSystemGetCudaDriverVersion_v2", &f.cuda_version) ||
      !Bind(lib, "nvmlDeviceGetCount_v2", &f.count) ||
      !Bind(lib, "nvmlDeviceGetHandleByIndex_v2", &f.handle) ||
      !Bind(lib, "nvmlDeviceGetName", &f.name) || !Bind(lib, "nvmlDeviceGetUUID", &f.uuid) ||
      !Bind(lib, "nvmlDeviceGetPciInfo_v3", &f.pci) ||
      !Bind(lib, "nvmlDeviceGetMemoryInfo_v2", &f.memory) ||
      !Bind(lib, "nvmlDeviceGetUtilizationRates", &f.utilization) ||
      !Bind(lib, "nvmlDeviceGetCudaComputeCapability", &f.capability) ||
      !Bind(lib, "nvmlDeviceGetMaxClockInfo", &f.max_clock) ||
      !Bind(lib, "nvmlDeviceGetMigMode", &f.mig) ||
      !Bind(lib, "nvmlDeviceGetComputeRunningProcesses_v3", &f.processes) ||
      !Bind(lib, "nvmlSystemGetDriverVersion", &f.driver_version) ||
      !Bind(lib, "nvmlDeviceGetTemperature", &f.temperature) ||
      !Bind(lib, "nvmlDeviceGetPowerUsage", &f.power) ||
      !Bind(lib, "nvmlDeviceGetEnforcedPowerLimit", &f.power_limit) ||
      !Bind(lib, "nvmlDeviceGetFanSpeed", &f.fan) ||
      !Bind(lib, "nvmlDeviceGetPerformanceState", &f.pstate)) {
    return 2;
  }
  if (nvmlReturn_t r = f.init(); r != NVML_SUCCESS) {
    fprintf(stderr, "rgpu smi: nvmlInit: %s\n", f.error_string(r));
    return 1;
  }
  int cuda = 0;
  f.cuda_version(&cuda);
  char driver_text[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  const std::string driver =
      f.driver_version(driver_text, sizeof driver_text) == NVML_SUCCESS ? driver_text : "";
  unsigned count = 0;
  if (nvmlReturn_t r = f.count(&count); r != NVML_SUCCESS) {
    fprintf(stderr, "rgpu smi: nvmlDeviceGetCount: %s\n", f.error_string(r));
    return 1;
  }
  std::vector<Gpu> gpus;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t d;
    if (nvmlReturn_t r = f.handle(i, &d); r != NVML_SUCCESS) {
      fprintf(stderr, "rgpu smi: device %u: %s\n", i, f.error_string(r));
      return 1;
    }
    Gpu g;
    g.index = i;
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    if (f.name(d, text, sizeof text) == NVML_SUCCESS) g.name = text;
    if (f.uuid(d, text, sizeof text) == NVML_SUCCESS) g.uuid = text;
    nvmlPciInfo_t pci;
    if (f.pci(d, &pci) == NVML_SUCCESS) g.bus_id = pci.busId;
    nvmlMemory_v2_t memory = {};
    memory.version = nvmlMemory_v2;
    if (f.memory(d, &memory) == NVML_SUCCESS) g.memory = memory;
    nvmlUtilization_t utilization;
    if (f.utilization(d, &utilization) == NVML_SUCCESS) g.utilization = utilization;
    int major = 0, minor = 0;
    if (f.capability(d, &major, &minor) == NVML_SUCCESS) g.capability = {major, minor};
    unsigned mhz = 0;
    if (f.max_clock(d, NVML_CLOCK_SM, &mhz) == NVML_SUCCESS) g.sm_mhz = mhz;
    if (f.max_clock(d, NVML_CLOCK_MEM, &mhz) == NVML_SUCCESS) g.memory_mhz = mhz;
    if (f.temperature(d, NVML_TEMPERATURE_GPU, &mhz) == NVML_SUCCESS) g.temperature_c = mhz;
    if (f.power(d, &mhz) == NVML_SUCCESS) g.power_mw = mhz;
    if (f.power_limit(d, &mhz) == NVML_SUCCESS) g.power_limit_mw = mhz;
    if (f.fan(d, &mhz) == NVML_SUCCESS) g.fan_percent = mhz;
    nvmlPstates_t pstate;
    if (f.pstate(d, &pstate) == NVML_SUCCESS) g.pstate = static_cast<unsigned>(pstate);
    unsigned current = 0, pending = 0;
    g.mig = f.mig(d, &current, &pending) == NVML_SUCCESS && current == NVML_DEVICE_MIG_ENABLE;
    unsigned n = 0;
    if (f.processes(d, &n, nullptr) == NVML_ERROR_INSUFFICIENT_SIZE) {
      g.processes.resize(n);
      if (f.processes(d, &n, g.processes.data()) != NVML_SUCCESS) n = 0;
      g.processes.resize(n);
    }
    gpus.push_back(std::move(g));
  }
  f.shutdown();

  if (json) {
    printf("{\"cuda_driver_version\": %d, \"driver_version\": %s, \"gpus\": [", cuda,
           driver.empty() ? "null" : JsonString(driver).c_str());
    for (size_t i = 0; i < gpus.size(); ++i) {
      const Gpu& g = gpus[i];
      printf("%s{\"index\": %u, \"name\": %s, \"uuid\": %s, \"pci_bus_id\": %s, ", i ? ", " : "",
             g.index, JsonString(g.name).c_str(), JsonString(g.uuid).c_str(),
             JsonString(g.bus_id).c_str());
      if (g.memory) {
        printf("\"memory\": {\"total\": %llu, \"used\": %llu, \"free\": %llu}, ", g.memory->total,
               g.memory->used, g.memory->free);
      } else {
        printf("\"memory\": null, ");
      }
      if (g.utilization) {
        printf("\"utilization\": {\"gpu\": %u, \"memory\": %u}, ", g.utilization->gpu,
               g.utilization->memory);
      } else {
        printf("\"utilization\": null, ");
      }
      if (g.capability) {
        printf("\"compute_capability\": \"%d.%d\", ", g.capability->first, g.capability->second);
      } else {
        printf("\"compute_capability\": null, ");
      }
      auto number = [](const std::optional<unsigned>& v) {
        return v ? std::to_string(*v) : std::string("null");
      };
      printf(
          "\"temperature_c\": %s, \"power_mw\": %s, \"power_limit_mw\": %s, "
          "\"fan_percent\": %s, \"performance_state\": %s, ",
          number(g.temperature_c).c_str(), number(g.power_mw).c_str(),
          number(g.power_limit_mw).c_str(), number(g.fan_percent).c_str(),
          number(g.pstate).c_str());
      printf("\"max_sm_clock_mhz\": %s, \"max_memory_clock_mhz\": %s, \"mig\": %s, ",
             g.sm_mhz ? std::to_string(*g.sm_mhz).c_str() : "null",
             g.memory_mhz ? std::to_string(*g.memory_mhz).c_str() : "null",
             g.mig ? "true" : "false");
      printf("\"processes\": [");
      for (size_t p = 0; p < g.processes.size(); ++p) {
        printf("%s{\"pid\": %u, \"used_memory\": %llu}", p ? ", " : "", g.processes[p].pid,
               g.processes[p].usedGpuMemory);
      }
      printf("]}");
    }
    printf("]}\n");
    return 0;
  }

  // nvidia-smi's layout: three columns per GPU, then the processes.
  const int kName = 46, kBus = 18, kUse = 28;
  const std::string rule = "+" + std::string(kName + 2, '-') + "+" + std::string(kBus + 2, '-') +
                           "+" + std::string(kUse + 2, '-') + "+\n";
  auto row = [&](const std::string& a, const std::string& b, const std::string& c) {
    printf("| %-*.*s | %-*.*s | %*.*s |\n", kName, kName, a.c_str(), kBus, kBus, b.c_str(), kUse,
           kUse, c.c_str());
  };
  const int kWhole = kName + kBus + kUse + 6;
  auto whole = [&](const std::string& text) {
    printf("| %-*.*s |\n", kWhole, kWhole, text.c_str());
  };
  char line[256];
  const std::string driver_field = "Driver Version: " + (driver.empty() ? "N/A" : driver);
  snprintf(line, sizeof line, "rgpu smi%*s%-30s CUDA Version: %d.%d", kWhole - 8 - 18 - 31, "",
           driver_field.c_str(), cuda / 1000, (cuda % 1000) / 10);
  printf("%s", rule.c_str());
  whole(line);
  printf("%s", rule.c_str());
  row("GPU  Name                          CC   MIG", "Bus-Id", "Memory-Usage        GPU-Util");
  row("     UUID", "", "Fan  Temp Perf Pwr:Usage/Cap");
  printf("%s", rule.c_str());
  for (const Gpu& g : gpus) {
    const std::string cc = g.capability ? std::to_string(g.capability->first) + "." +
                                              std::to_string(g.capability->second)
                                        : "N/A";
    const std::string memory =
        g.memory ? MiB(g.memory->used) + " / " + MiB(g.memory->total) : std::string("N/A");
    const std::string util = g.utilization ? std::to_string(g.utilization->gpu) + "%" : "N/A";
    snprintf(line, sizeof line, "%3u  %-29.29s %-4s %-3s", g.index, g.name.c_str(), cc.c_str(),
             g.mig ? "On" : "Off");
    char use[64];
    snprintf(use, sizeof use, "%-19s %8s", memory.c_str(), util.c_str());
    row(line, g.bus_id, use);
    auto or_na = [](const std::optional<unsigned>& v, const char* unit, unsigned scale) {
      return v ? std::to_string(*v / scale) + unit : std::string("N/A");
    };
    const std::string perf = g.pstate ? "P" + std::to_string(*g.pstate) : "N/A";
    char sensors[64];
    snprintf(sensors, sizeof sensors, "%3s  %4s %4s %6s/%-6s", or_na(g.fan_percent, "%", 1).c_str(),
             or_na(g.temperature_c, "C", 1).c_str(), perf.c_str(),
             or_na(g.power_mw, "W", 1000).c_str(), or_na(g.power_limit_mw, "W", 1000).c_str());
    row("     " + g.uuid, "", sensors);
  }
  printf("%s", rule.c_str());
  whole("Processes (this tenant's):");
  whole(" GPU         PID   GPU Memory Usage");
  bool any = false;
  for (const Gpu& g : gpus) {
    for (const nvmlProcessInfo_t& p : g.processes) {
      const std::string used = p.usedGpuMemory == ~0ull ? std::string("N/A") : MiB(p.usedGpuMemory);
      snprintf(line, sizeof line, " %3u  %10u   %s", g.index, p.pid, used.c_str());
      whole(line);
      any = true;
    }
  }
  if (!any) whole(" No running processes found");
  printf("%s", rule.c_str());
  return 0;
}

}  // namespace rgpu::cli
