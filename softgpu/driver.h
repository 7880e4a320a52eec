// Process-wide driver state: initialisation, devices and the handle registries.
#pragma once

#include <cuda.h>

#include <atomic>
#include <memory>
#include <vector>

#include "softgpu/array.h"
#include "softgpu/context.h"
#include "softgpu/device.h"
#include "softgpu/module.h"
#include "softgpu/registry.h"
#include "softgpu/stream.h"

namespace softgpu {

struct Driver {
  std::atomic<bool> initialized{false};
  std::vector<std::unique_ptr<Device>> devices;
  Registry<Context> contexts;
  Registry<Stream> streams;
  Registry<Event> events;
  Registry<Module> modules;
  Registry<FunctionHandle> functions;
  Registry<Library> libraries;
  Registry<KernelHandle> kernels;
  Registry<Array> arrays;  // mipmap levels included
  Registry<MipmappedArray> mipmapped_arrays;
};

Driver& GetDriver();

// Initialises the driver (cuInit); idempotent.
CUresult InitializeDriver();

// The device for an ordinal, or null.
Device* FindDevice(CUdevice ordinal);

// Registers a module instance and its function handles.
void RegisterModule(const std::shared_ptr<Module>& module);
// Unregisters a module instance and its function handles and frees its globals.
void UnregisterModule(const std::shared_ptr<Module>& module);

// Destroys a context's resources and unregisters every handle that belongs to it (arrays,
// mipmapped arrays, texture and surface objects included).
void DestroyContextResources(const std::shared_ptr<Context>& context);

}  // namespace softgpu
