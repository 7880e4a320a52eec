// `rgpu smi [--server URL] [--token T] [--json]`: nvidia-smi's table for the GPUs a tenant sees
// on a server, read through rgpu's NVML face (librgpu-nvml.so beside the interposer) exactly as
// a program's NVML calls are answered: names, bus ids, the tenant's memory (its quota as total),
// metered utilization, compute capability, clocks the device states, MIG mode, the tenant's
// processes. What NVML does not know reads "N/A" (null in JSON).
#pragma once

#include <string>

namespace rgpu::cli {

// `nvml_library`: the face to load. Returns the process exit code.
int RunSmi(const std::string& nvml_library, bool json);

}  // namespace rgpu::cli
