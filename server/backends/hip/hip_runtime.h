// The HIP runtime (libamdhip64.so.5) as the backend sees it: loaded with dlopen on first use,
// every entry point of hip_runtime_calls.def resolved or the load fails.
#pragma once

#include <stddef.h>

#include <string>

#include "interpose/hip/hip_types.h"

namespace rgpu::hipbackend {

struct HipRuntime {
#define HIP_CALL(result, name, params) result(*name) params = nullptr;
#include "server/backends/hip/hip_runtime_calls.def"
#undef HIP_CALL
};

// Loads the runtime once (RGPU_HIP_LIBRARY, else libamdhip64.so.5) and returns it, or nullptr
// with the reason in `*error` (the same reason on every later call).
const HipRuntime* LoadHipRuntime(std::string* error);

}  // namespace rgpu::hipbackend
