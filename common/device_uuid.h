// The text form of a device's UUID, as NVML, nvidia-smi and CUDA_VISIBLE_DEVICES write it.
#pragma once

#include <string>

namespace rgpu {

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" for a 16-byte UUID ("" when `uuid` is not 16 bytes).
std::string DeviceUuidText(const std::string& uuid);

}  // namespace rgpu
