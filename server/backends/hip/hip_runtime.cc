#include "server/backends/hip/hip_runtime.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <mutex>

namespace rgpu::hipbackend {

const HipRuntime* LoadHipRuntime(std::string* error) {
  static std::once_flag once;
  static HipRuntime runtime;
  static std::string load_error;
  std::call_once(once, [] {
    const char* path = getenv("RGPU_HIP_LIBRARY");
    if (path == nullptr || *path == '\0') path = "libamdhip64.so.5";
    void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      load_error = std::string("cannot load the HIP runtime ") + path + ": " + dlerror();
      return;
    }
    std::string missing;
#define HIP_CALL(result, name, params)                                           \
  runtime.name = reinterpret_cast<decltype(runtime.name)>(dlsym(handle, #name)); \
  if (runtime.name == nullptr) missing += " " #name;
#include "server/backends/hip/hip_runtime_calls.def"
#undef HIP_CALL
    if (!missing.empty()) load_error = std::string(path) + " lacks" + missing;
  });
  if (!load_error.empty()) {
    *error = load_error;
    return nullptr;
  }
  return &runtime;
}

}  // namespace rgpu::hipbackend
