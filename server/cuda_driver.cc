#include "server/cuda_driver.h"

#include <dlfcn.h>

#define RGPU_STRINGIFY2(x) #x
#define RGPU_STRINGIFY(x) RGPU_STRINGIFY2(x)

namespace rgpu::server {

Status CudaDriver::Load(const std::string& path, CudaDriver* out) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return NotFound("cannot load backend driver " + path + ": " + dlerror());
  CudaDriver d;
  d.library_path = path;
  d.handle = handle;
  std::string missing;
#define DRIVER_FN(name) \
  d.name = reinterpret_cast<decltype(d.name)>(dlsym(handle, RGPU_STRINGIFY(name)));
#define DRIVER_FN_REQUIRED(name) \
  DRIVER_FN(name)                \
  if (d.name == nullptr) missing += std::string(" ") + RGPU_STRINGIFY(name);
#define DRIVER_EXT(name, type) d.name = reinterpret_cast<type>(dlsym(handle, #name));
#include "server/driver_api.def"
#undef DRIVER_FN
#undef DRIVER_FN_REQUIRED
#undef DRIVER_EXT
  if (!missing.empty()) {
    dlclose(handle);
    return NotFound(path + " lacks required driver entry points:" + missing);
  }
  *out = d;
  return Status::Ok();
}

}  // namespace rgpu::server
