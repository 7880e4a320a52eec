// What sessions of one server share through the IpcRegistry: the objects behind an export, held
// by the exporting session and by every session that opened it (std::shared_ptr), so that each
// lives until the last of them lets go.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>

#include "server/cuda_driver.h"
#include "server/ipc_registry.h"

namespace rgpu::server {

// A memory pool made shareable (cuMemPoolExportToShareableHandle or its first exported pointer):
// sessions that import it may import the pointers it exports.
struct ExportedPool {
  int device = 0;  // the server's device index
  IpcKey key = {};
};

// An allocation of the exporting session (ordinary memory, or a block of an exported pool) that
// other sessions open through the backend's IPC handle. When the exporter frees it while others
// still have it open, the backend keeps the bytes for them and the tenant's charge for them
// passes here until the last one closes it.
struct ExportedMemory {
  CUipcMemHandle backend = {};
  uint64_t size = 0;
  int device = 0;  // the server's device index
  IpcKey key = {};
  bool standing = false;               // key is in the registry
  std::shared_ptr<ExportedPool> pool;  // the pool of an exported pool pointer (else null)
  HeldCharge charge;
};

// An interprocess event: other sessions open their own handle of it through the backend.
struct ExportedEvent {
  CUipcEventHandle backend = {};
};

// Physical memory (cuMemCreate) once it is shared: every session holding it maps the same
// backend handle, which is released with the last of them (with the tenant's charge, passed here
// by the session that made it when it let go).
struct SharedPhysical {
  const CudaDriver* drv = nullptr;
  CUmemGenericAllocationHandle handle = 0;
  int device = 0;  // the server's device index
  uint64_t size = 0;
  IpcKey key = {};
  HeldCharge charge;
  SharedPhysical() = default;
  SharedPhysical(const SharedPhysical&) = delete;
  SharedPhysical& operator=(const SharedPhysical&) = delete;
  ~SharedPhysical() {
    if (drv != nullptr && drv->cuMemRelease != nullptr) drv->cuMemRelease(handle);
  }
};

}  // namespace rgpu::server
