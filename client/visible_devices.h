// CUDA_VISIBLE_DEVICES on top of the devices a program's servers give it: which of them the
// program sees, in what order. Pure functions, thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/device_uuid.h"

namespace rgpu::client {

using rgpu::DeviceUuidText;  // common/device_uuid.h

// The devices `value` (CUDA_VISIBLE_DEVICES, comma-separated) selects among `count` devices whose
// UUIDs are `uuids`, as indices in the program's order, as CUDA reads it: each entry is an index
// or a prefix of a device's "GPU-..." UUID (a prefix that fits two devices matches none); the
// list ends at the first entry that names no device or names one again. Spaces around an entry
// are ignored; an empty value selects nothing.
std::vector<int> SelectVisibleDevices(const std::string& value,
                                      const std::vector<std::string>& uuids);

}  // namespace rgpu::client
