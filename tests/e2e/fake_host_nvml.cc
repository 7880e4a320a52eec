// A stand-in for a GPU host's libnvidia-ml.so.1, for e2e_host_nvml only: rgpu-server on the
// software GPU loads it with --host-nvml and must pass exactly its readings on to tenants, for the
// devices it names and no others. It knows the devices whose UUIDs FAKE_NVML_UUIDS lists
// (comma-separated) and answers, for the i-th of them: temperature 40 + i C, power draw
// 100000 + i mW, power limit 700000 mW, clocks 1755 (graphics and SM) and 2619 (memory) MHz,
// performance state P2, and no fan (NOT_SUPPORTED, as a passively cooled board); the driver
// version is "570.00.fake". NVML's ABI from its public documentation; nothing else is exported.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "client/abi/nvml_types.h"

namespace {

std::vector<std::string> Uuids() {
  std::vector<std::string> out;
  const char* list = getenv("FAKE_NVML_UUIDS");
  if (list == nullptr) return out;
  std::string all = list;
  size_t start = 0;
  while (start <= all.size()) {
    const size_t comma = all.find(',', start);
    const size_t end = comma == std::string::npos ? all.size() : comma;
    if (end > start) out.push_back(all.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// Handles are 1 + the device's position in the list.
long Index(nvmlDevice_t d) { return reinterpret_cast<long>(d) - 1; }

}  // namespace

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit_v2(void) { return NVML_SUCCESS; }
__attribute__((visibility("default"))) nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByUUID(
    const char* uuid, nvmlDevice_t* device) {
  const std::vector<std::string> uuids = Uuids();
  for (size_t i = 0; i < uuids.size(); ++i) {
    if (uuids[i] == uuid) {
      *device = reinterpret_cast<nvmlDevice_t>(static_cast<long>(i) + 1);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetDriverVersion(char* version,
                                                                               unsigned length) {
  const char text[] = "570.00.fake";
  if (length < sizeof text) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(version, text, sizeof text);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetTemperature(
    nvmlDevice_t d, nvmlTemperatureSensors_t, unsigned* t) {
  *t = 40 + static_cast<unsigned>(Index(d));
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d,
                                                                            unsigned* mw) {
  *mw = 100000 + static_cast<unsigned>(Index(d));
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t,
                                                                                    unsigned* mw) {
  *mw = 700000;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t,
                                                                           nvmlClockType_t type,
                                                                           unsigned* mhz) {
  *mhz = type == NVML_CLOCK_MEM ? 2619 : 1755;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t, unsigned*) {
  return NVML_ERROR_NOT_SUPPORTED;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPerformanceState(
    nvmlDevice_t, nvmlPstates_t* state) {
  *state = static_cast<nvmlPstates_t>(2);
  return NVML_SUCCESS;
}

}  // extern "C"
