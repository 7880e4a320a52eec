// Session's handlers for sharing between sessions (proto/calls.def: Sharing between the sessions
// of one tenant), CUDA's IPC with sessions in the place of processes. An export registers the
// object in the server's IpcRegistry under a random key; a session that presents the key gets its
// own handle of the same memory, event or pool, made by the backend's IPC calls (memory, events)
// or shared by the server (physical memory, pools). The exporter revokes the key when the object
// goes; what others opened stays theirs until they close it, and memory the exporter freed under
// them stays charged to the tenant (HeldCharge) until the last one closes it.
#include <cstring>

#include "server/checked_size.h"
#include "server/ipc_objects.h"
#include "server/require_fn.h"
#include "server/session.h"

namespace rgpu::server {
namespace {

IpcKey KeyOf(uint64_t k0, uint64_t k1, uint64_t k2, uint64_t k3) { return {k0, k1, k2, k3}; }

template <typename Results>
void PutKey(const IpcKey& key, Results* out) {
  out->key0 = key[0];
  out->key1 = key[1];
  out->key2 = key[2];
  out->key3 = key[3];
}

}  // namespace

CUresult Session::NoSharing(CallState& cs) {
  if (ipc_ != nullptr) return CUDA_SUCCESS;
  cs.detail = "sessions in processes of their own share nothing yet (--session-processes)";
  return CUDA_ERROR_NOT_SUPPORTED;
}

std::shared_ptr<void> Session::OpenExport(CallState& cs, const IpcKey& key, IpcKind kind,
                                          CUresult* r) {
  if ((*r = NoSharing(cs)) != CUDA_SUCCESS) return nullptr;
  bool own = false;
  std::shared_ptr<void> object = ipc_->Open(key, kind, tenant_.get(), id_, &own);
  if (object != nullptr) return object;
  if (own) {
    // As the driver refuses a handle in the process that made it.
    cs.detail = "a session cannot open its own export";
    *r = CUDA_ERROR_INVALID_CONTEXT;
  } else {
    cs.detail = "no such export for this session (never made, revoked, or another tenant's)";
    *r = CUDA_ERROR_INVALID_VALUE;
  }
  return nullptr;
}

std::shared_ptr<ExportedMemory> Session::ExportMemory(CallState& cs, CUdeviceptr dptr, IpcKind kind,
                                                      CUresult* r) {
  if ((*r = NoSharing(cs)) != CUDA_SUCCESS) return nullptr;
  auto it = allocations_.find(dptr);
  if (it == allocations_.end() || it->second.ctx != cs.ctx_id || !it->second.freeable) {
    cs.detail = "not the start of an allocation of this context";
    *r = CUDA_ERROR_INVALID_VALUE;
    return nullptr;
  }
  std::shared_ptr<ExportedMemory>& ex = exported_memory_[dptr];
  if (ex == nullptr) {
    if (drv_.cuIpcGetMemHandle == nullptr) {
      exported_memory_.erase(dptr);
      cs.detail = "the backend has no cuIpcGetMemHandle";
      *r = CUDA_ERROR_NOT_SUPPORTED;
      return nullptr;
    }
    auto made = std::make_shared<ExportedMemory>();
    made->size = it->second.size;
    made->device = cs.ctx->device;
    if ((*r = drv_.cuIpcGetMemHandle(&made->backend, dptr)) != CUDA_SUCCESS) {
      exported_memory_.erase(dptr);
      return nullptr;
    }
    ex = std::move(made);
  }
  if (!ex->standing) {
    if (!ipc_->Export(kind, tenant_, id_, ex, &ex->key)) {
      cs.detail = "no random key could be drawn";
      *r = CUDA_ERROR_OPERATING_SYSTEM;
      return nullptr;
    }
    ex->standing = true;
  }
  *r = CUDA_SUCCESS;
  return ex;
}

void Session::UnchargeMemory(CUdeviceptr base, uint64_t bytes, int device) {
  auto it = exported_memory_.find(base);
  if (it == exported_memory_.end()) {
    Uncharge(device, bytes);
    return;
  }
  // Sessions that opened it may still use the bytes (the backend keeps them for their handles):
  // the tenant's charge goes with the export, released when the last of them closes it.
  std::shared_ptr<ExportedMemory> ex = std::move(it->second);
  exported_memory_.erase(it);
  if (ex->standing && ipc_ != nullptr) ipc_->Revoke(ex->key);
  ex->standing = false;
  live_bytes_ -= bytes;
  if (device >= 0 && static_cast<size_t>(device) < device_bytes_.size()) {
    device_bytes_[device] -= bytes;
  }
  ex->charge.Add(tenant_, bytes);
}

void Session::RevokeMemoryExport(CUdeviceptr base) {
  auto it = exported_memory_.find(base);
  if (it == exported_memory_.end() || !it->second->standing) return;
  if (ipc_ != nullptr) ipc_->Revoke(it->second->key);
  it->second->standing = false;
}

CUresult Session::HandleIpcGetMemHandle(CallState& cs, const IpcGetMemHandleIn& in,
                                        calls::IpcGetMemHandle::Results* out) {
  auto it = allocations_.find(in.dptr);
  if (it != allocations_.end() && it->second.pool != 0) {
    cs.detail = "memory of a pool is shared with cuMemPoolExportPointer";
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUresult r;
  std::shared_ptr<ExportedMemory> ex = ExportMemory(cs, in.dptr, IpcKind::kMemory, &r);
  if (ex == nullptr) return r;
  PutKey(ex->key, out);
  return CUDA_SUCCESS;
}

CUresult Session::OpenMemory(CallState& cs, const std::shared_ptr<ExportedMemory>& ex,
                             unsigned flags, uint64_t import_pool, CUdeviceptr* dptr) {
  REQUIRE_FN(cuIpcOpenMemHandle);
  REQUIRE_FN(cuIpcCloseMemHandle);
  if (ex->device != cs.ctx->device) {
    cs.detail = "the memory is on another device than this context's";
    return CUDA_ERROR_INVALID_DEVICE;
  }
  // Opened in this context already: one more reference to the same mapping, as the driver does.
  for (auto& [base, a] : allocations_) {
    if (a.imported == ex && a.ctx == cs.ctx_id) {
      if (a.import_pool != import_pool) {
        cs.detail = "opened already in another way";
        return CUDA_ERROR_INVALID_VALUE;
      }
      ++a.opens;
      *dptr = base;
      return CUDA_SUCCESS;
    }
  }
  if (CUresult r = RoomFor(cs, allocations_.size(), limits_.max_allocations, "allocations");
      r != CUDA_SUCCESS) {
    return r;
  }
  CUdeviceptr p = 0;
  if (CUresult r = drv_.cuIpcOpenMemHandle(&p, ex->backend, flags); r != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_NOT_SUPPORTED) {
      cs.detail = "the backend cannot open memory of one context in another of the same process";
    }
    return r;
  }
  // The backend chose where: it must not be memory this session already has.
  uint64_t end = 0;
  auto next = allocations_.lower_bound(p);
  const bool clash =
      !CheckedAdd(p, ex->size, &end) || (next != allocations_.end() && next->first < end) ||
      (next != allocations_.begin() && std::prev(next)->first + std::prev(next)->second.size > p);
  if (clash) {
    drv_.cuIpcCloseMemHandle(p);
    cs.detail = "the backend mapped the memory over this session's own";
    return CUDA_ERROR_UNKNOWN;
  }
  Allocation a;
  a.size = ex->size;
  a.ctx = cs.ctx_id;
  a.freeable = false;
  a.imported = ex;
  a.opens = 1;
  a.import_pool = import_pool;
  allocations_[p] = std::move(a);
  *dptr = p;
  return CUDA_SUCCESS;
}

CUresult Session::HandleIpcOpenMemHandle(CallState& cs, const IpcOpenMemHandleIn& in,
                                         calls::IpcOpenMemHandle::Results* out) {
  if (in.flags & ~static_cast<uint32_t>(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUresult r;
  auto ex = std::static_pointer_cast<ExportedMemory>(
      OpenExport(cs, KeyOf(in.key0, in.key1, in.key2, in.key3), IpcKind::kMemory, &r));
  if (ex == nullptr) return r;
  CUdeviceptr p = 0;
  if ((r = OpenMemory(cs, ex, in.flags, 0, &p)) != CUDA_SUCCESS) return r;
  out->dptr = p;
  out->bytes = ex->size;
  return CUDA_SUCCESS;
}

void Session::CloseImport(std::map<CUdeviceptr, Allocation>::iterator it) {
  if (ContextRecord* ctx = contexts_.Find(it->second.ctx); ctx != nullptr && !ctx->destroyed) {
    if (MakeCurrent(ctx) == CUDA_SUCCESS && drv_.cuIpcCloseMemHandle != nullptr) {
      drv_.cuIpcCloseMemHandle(it->first);
    }
  }
  if (it->second.import_pool != 0) {
    if (PoolRecord* pool = pools_.Find(it->second.import_pool)) {
      --pool->imported_pointers;
      const uint64_t id = it->second.import_pool;
      allocations_.erase(it);
      ErasePoolIfDone(id);
      return;
    }
  }
  allocations_.erase(it);
}

CUresult Session::HandleIpcCloseMemHandle(CallState& cs, const IpcCloseMemHandleIn& in,
                                          calls::IpcCloseMemHandle::Results*) {
  auto it = allocations_.find(in.dptr);
  if (it == allocations_.end() || it->second.imported == nullptr || it->second.ctx != cs.ctx_id ||
      it->second.import_pool != 0) {
    cs.detail = "not memory this context opened with cuIpcOpenMemHandle";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (--it->second.opens > 0) return CUDA_SUCCESS;
  // Work in flight may still use it.
  if (CUresult r = drv_.cuCtxSynchronize(); r != CUDA_SUCCESS) return r;
  CloseImport(it);
  return MakeCurrent(cs.ctx);
}

CUresult Session::HandleIpcGetEventHandle(CallState& cs, const IpcGetEventHandleIn& in,
                                          calls::IpcGetEventHandle::Results* out) {
  if (CUresult r = NoSharing(cs); r != CUDA_SUCCESS) return r;
  REQUIRE_FN(cuIpcGetEventHandle);
  EventRecord& ev = *in.event.record;
  if (ev.exported == nullptr) {
    auto shared = std::make_shared<ExportedEvent>();
    if (CUresult r = drv_.cuIpcGetEventHandle(&shared->backend, ev.event); r != CUDA_SUCCESS) {
      return r;
    }
    if (!ipc_->Export(IpcKind::kEvent, tenant_, id_, shared, &ev.ipc_key)) {
      cs.detail = "no random key could be drawn";
      return CUDA_ERROR_OPERATING_SYSTEM;
    }
    ev.exported = std::move(shared);
  }
  PutKey(ev.ipc_key, out);
  return CUDA_SUCCESS;
}

CUresult Session::HandleIpcOpenEventHandle(CallState& cs, const IpcOpenEventHandleIn& in,
                                           calls::IpcOpenEventHandle::Results* out) {
  CUresult r;
  auto shared = std::static_pointer_cast<ExportedEvent>(
      OpenExport(cs, KeyOf(in.key0, in.key1, in.key2, in.key3), IpcKind::kEvent, &r));
  if (shared == nullptr) return r;
  REQUIRE_FN(cuIpcOpenEventHandle);
  if ((r = RoomFor(cs, events_.size(), limits_.max_events, "events")) != CUDA_SUCCESS) return r;
  CUevent e = nullptr;
  if ((r = drv_.cuIpcOpenEventHandle(&e, shared->backend)) != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_NOT_SUPPORTED) {
      cs.detail = "the backend cannot open an event of one context in another of the same process";
    }
    return r;
  }
  EventRecord opened{e, cs.ctx_id};
  opened.imported = true;
  out->event = events_.Insert(std::move(opened));
  return CUDA_SUCCESS;
}

void Session::RevokeEventExport(EventRecord& ev) {
  if (ev.exported != nullptr && ipc_ != nullptr) ipc_->Revoke(ev.ipc_key);
  ev.exported.reset();
}

CUresult Session::HandleMemExportPhysical(CallState& cs, const MemExportPhysicalIn& in,
                                          calls::MemExportPhysical::Results* out) {
  if (CUresult r = NoSharing(cs); r != CUDA_SUCCESS) return r;
  PhysicalRecord& p = *in.handle.record;
  if (p.shared == nullptr) {
    // From now on the backend handle is the shared memory's, released with its last holder.
    auto shared = std::make_shared<SharedPhysical>();
    shared->drv = &drv_;
    shared->handle = p.handle;
    shared->device = p.device;
    shared->size = p.size;
    if (!ipc_->Export(IpcKind::kPhysical, tenant_, id_, shared, &shared->key)) {
      shared->drv = nullptr;  // the handle stays the record's
      cs.detail = "no random key could be drawn";
      return CUDA_ERROR_OPERATING_SYSTEM;
    }
    p.shared = std::move(shared);
  }
  PutKey(p.shared->key, out);
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemImportPhysical(CallState& cs, const MemImportPhysicalIn& in,
                                          calls::MemImportPhysical::Results* out) {
  CUresult r;
  auto shared = std::static_pointer_cast<SharedPhysical>(
      OpenExport(cs, KeyOf(in.key0, in.key1, in.key2, in.key3), IpcKind::kPhysical, &r));
  if (shared == nullptr) return r;
  if ((r = RoomFor(cs, physical_.size(), limits_.max_vmm_objects, "physical allocations")) !=
      CUDA_SUCCESS) {
    return r;
  }
  if (shared->device != cs.ctx->device) {
    cs.detail = "the memory is on another device than this context's";
    return CUDA_ERROR_INVALID_DEVICE;
  }
  PhysicalRecord rec;
  rec.handle = shared->handle;
  rec.device = shared->device;
  rec.size = shared->size;
  rec.shared = std::move(shared);
  rec.charged = false;  // the exporter's charge covers it
  out->handle = physical_.Insert(std::move(rec));
  out->size = physical_.Find(out->handle)->size;
  return CUDA_SUCCESS;
}

void Session::LetGoOfPhysical(PhysicalRecord& p) {
  if (p.shared == nullptr) {
    if (!p.released && drv_.cuMemRelease != nullptr) drv_.cuMemRelease(p.handle);
    if (p.charged) Uncharge(p.device, p.size);
    return;
  }
  // The last holder releases the backend handle (SharedPhysical) and the tenant's charge.
  if (p.charged) {
    live_bytes_ -= p.size;
    if (p.device >= 0 && static_cast<size_t>(p.device) < device_bytes_.size()) {
      device_bytes_[p.device] -= p.size;
    }
    p.shared->charge.Add(tenant_, p.size);
  }
  p.shared.reset();
}

CUresult Session::HandleMemPoolExport(CallState& cs, const MemPoolExportIn& in,
                                      calls::MemPoolExport::Results* out) {
  CUresult r = ShareablePool(cs, *in.pool.record);
  if (r != CUDA_SUCCESS) return r;
  PutKey(in.pool->shared->key, out);
  return CUDA_SUCCESS;
}

CUresult Session::ShareablePool(CallState& cs, PoolRecord& pool) {
  if (CUresult r = NoSharing(cs); r != CUDA_SUCCESS) return r;
  if (pool.imported) {
    cs.detail = "an imported pool cannot be exported again";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!pool.shareable) {
    cs.detail = "the pool was made without a shareable handle type";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (pool.shared != nullptr) return CUDA_SUCCESS;
  auto shared = std::make_shared<ExportedPool>();
  shared->device = pool.device;
  if (!ipc_->Export(IpcKind::kPool, tenant_, id_, shared, &shared->key)) {
    cs.detail = "no random key could be drawn";
    return CUDA_ERROR_OPERATING_SYSTEM;
  }
  pool.shared = std::move(shared);
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemPoolImport(CallState& cs, const MemPoolImportIn& in,
                                      calls::MemPoolImport::Results* out) {
  CUresult r;
  auto shared = std::static_pointer_cast<ExportedPool>(
      OpenExport(cs, KeyOf(in.key0, in.key1, in.key2, in.key3), IpcKind::kPool, &r));
  if (shared == nullptr) return r;
  int ordinal = -1;
  for (size_t i = 0; i < visible_.size(); ++i) {
    if (visible_[i] == shared->device) ordinal = static_cast<int>(i);
  }
  if (ordinal < 0) {
    cs.detail = "the pool is on a device this session does not see";
    return CUDA_ERROR_INVALID_DEVICE;
  }
  if ((r = RoomFor(cs, pools_.size(), limits_.max_pools, "memory pools")) != CUDA_SUCCESS) {
    return r;
  }
  // One imported pool per export, as the driver gives one per shareable handle it imports.
  for (auto& [id, pool] : pools_.records()) {
    if (pool.imported && pool.shared == shared && !pool.destroyed) {
      out->pool = id;
      out->device = ordinal;
      return CUDA_SUCCESS;
    }
  }
  PoolRecord pool;
  pool.device = shared->device;
  pool.imported = true;
  pool.shared = std::move(shared);
  out->pool = pools_.Insert(std::move(pool));
  out->device = ordinal;
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemPoolExportPointer(CallState& cs, const MemPoolExportPointerIn& in,
                                             calls::MemPoolExportPointer::Results* out) {
  auto it = allocations_.find(in.dptr);
  if (it == allocations_.end() || it->second.pool == 0 || it->second.ctx != cs.ctx_id) {
    cs.detail = "not the start of a pool allocation of this context";
    return CUDA_ERROR_INVALID_VALUE;
  }
  PoolRecord* pool = pools_.Find(it->second.pool);
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = ShareablePool(cs, *pool); r != CUDA_SUCCESS) return r;
  CUresult r;
  std::shared_ptr<ExportedMemory> ex = ExportMemory(cs, in.dptr, IpcKind::kPoolPointer, &r);
  if (ex == nullptr) return r;
  ex->pool = pool->shared;
  PutKey(ex->key, out);
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemPoolImportPointer(CallState& cs, const MemPoolImportPointerIn& in,
                                             calls::MemPoolImportPointer::Results* out) {
  if (!in.pool->imported) {
    cs.detail = "pointers are imported into a pool imported from their exporter";
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUresult r;
  auto ex = std::static_pointer_cast<ExportedMemory>(
      OpenExport(cs, KeyOf(in.key0, in.key1, in.key2, in.key3), IpcKind::kPoolPointer, &r));
  if (ex == nullptr) return r;
  if (ex->pool != in.pool->shared) {
    cs.detail = "the pointer belongs to another pool";
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUdeviceptr p = 0;
  if ((r = OpenMemory(cs, ex, 0, in.pool.id, &p)) != CUDA_SUCCESS) return r;
  if (allocations_[p].opens == 1) ++in.pool->imported_pointers;
  out->dptr = p;
  out->bytes = ex->size;
  return CUDA_SUCCESS;
}

}  // namespace rgpu::server
