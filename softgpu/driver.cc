#include "softgpu/driver.h"

#include <mutex>

#include "common/log.h"
#include "softgpu/ipc.h"
#include "softgpu/texture.h"

namespace softgpu {

Driver& GetDriver() {
  // Leaked on purpose: handles may be used from other threads during process exit.
  static Driver* driver = new Driver();
  return *driver;
}

CUresult InitializeDriver() {
  static std::once_flag once;
  std::call_once(once, [] {
    Driver& d = GetDriver();
    const DeviceConfig config = DeviceConfig::FromEnvironment();
    for (uint32_t i = 0; i < config.device_count; ++i) {
      d.devices.push_back(std::make_unique<Device>(static_cast<int>(i), config));
    }
    RGPU_LOG_DEBUG("softgpu: %u device(s), %llu MiB each, %u SMs, kernel time limit %llu ms",
                   config.device_count, static_cast<unsigned long long>(config.memory_bytes >> 20),
                   config.sm_count, static_cast<unsigned long long>(config.kernel_timeout_ms));
    d.initialized.store(true);
  });
  return GetDriver().devices.empty() ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
}

Device* FindDevice(CUdevice ordinal) {
  Driver& d = GetDriver();
  if (ordinal < 0 || static_cast<size_t>(ordinal) >= d.devices.size()) return nullptr;
  return d.devices[static_cast<size_t>(ordinal)].get();
}

void RegisterModule(const std::shared_ptr<Module>& module) {
  Driver& d = GetDriver();
  d.modules.Add(module);
  for (const auto& f : module->functions()) {
    if (f) d.functions.Add(f);
  }
}

void UnregisterModule(const std::shared_ptr<Module>& module) {
  Driver& d = GetDriver();
  for (const auto& f : module->functions()) {
    if (f) d.functions.Remove(f.get());
  }
  d.modules.Remove(module.get());
  // Free the globals only while the context is alive (the registry keeps it so); a destroyed
  // context already released all of its memory.
  if (std::shared_ptr<Context> ctx = d.contexts.Find(module->context()); ctx && ctx->alive()) {
    module->Release();
  }
}

CUresult Library::Instance(Context* context, std::shared_ptr<Module>* out) {
  std::lock_guard lock(mu_);
  auto it = instances_.find(context);
  if (it != instances_.end()) {
    *out = it->second;
    return CUDA_SUCCESS;
  }
  std::shared_ptr<Module> m;
  if (CUresult r = Module::Create(context, program_, &m); r != CUDA_SUCCESS) return r;
  RegisterModule(m);
  instances_[context] = m;
  *out = std::move(m);
  return CUDA_SUCCESS;
}

void DestroyContextResources(const std::shared_ptr<Context>& context) {
  Driver& d = GetDriver();
  Context* c = context.get();
  RevokeIpcExportsOf(c);  // first, so that no new opens start while it goes
  context->Teardown();
  d.streams.RemoveIf([c](const Stream& s) { return s.context() == c; });
  d.events.RemoveIf([c](const Event& e) { return e.context() == c; });
  d.arrays.RemoveIf([c](const Array& a) { return a.owner == c; });
  d.mipmapped_arrays.RemoveIf([c](const MipmappedArray& m) { return m.owner == c; });
  RemoveTextureObjectsOf(c);
  d.libraries.ForEach([c](const std::shared_ptr<Library>& lib) { lib->DropInstance(c); });
  for (const auto& m : d.modules.RemoveIf([c](const Module& m) { return m.context() == c; })) {
    for (const auto& f : m->functions()) {
      if (f) d.functions.Remove(f.get());
    }
  }
}

}  // namespace softgpu
