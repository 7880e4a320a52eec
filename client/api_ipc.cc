// CUDA IPC between the program's processes: cuIpcGetMemHandle, cuIpcOpenMemHandle,
// cuIpcCloseMemHandle, cuIpcGetEventHandle, cuIpcOpenEventHandle. Each process is a session of
// the same tenant on the server, which shares the memory or event between them
// (server/session_ipc.cc); the 64-byte handles hold the server's key of the export
// (client/shareable_handle.h). Opened memory joins this process's memory map as device memory of
// the current context that cuMemFree does not free.
#include <map>
#include <mutex>

#include "client/impl.h"
#include "client/memory_map.h"
#include "client/shareable_handle.h"

using rgpu::client::ClientState;
using rgpu::client::Memory;
using rgpu::client::RequireContext;
using rgpu::client::Server;
namespace calls = rgpu::calls;

namespace {

// How many times each opened range is open (the server counts the same way), by the address
// the program got, and the address of the export the server opened (the same, or the start of
// the slab a piece lies in).
struct Open {
  int count = 0;
  CUdeviceptr export_base = 0;
};
struct Opened {
  std::mutex mu;
  std::map<CUdeviceptr, Open> opens;  // GUARDED_BY(mu)
};

Opened& State() {
  static Opened* opened = new Opened;  // never destroyed: used until the process ends
  return *opened;
}

}  // namespace

RGPU_IMPL(cuIpcGetMemHandle)(CUipcMemHandle* handle, CUdeviceptr dptr) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  auto range = Memory().Find(dptr);
  if (!range || range->base != dptr || range->type != CU_MEMORYTYPE_DEVICE || !range->freeable) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // A piece of a slab: the slab is exported, the handle names the piece in it (the opening
  // process of the same tenant can then reach the whole slab, as an IPC mapping reaches a page).
  uint64_t export_base = dptr, offset = 0, size = 0, slab = 0, piece = 0;
  if (range->ctx->suballocator.Find(dptr, &slab, &piece)) {
    export_base = slab;
    offset = dptr - slab;
    size = range->size;
  }
  calls::IpcGetMemHandle::Results got;
  r = Server().Call<calls::IpcGetMemHandle>(range->ctx->remote, {.dptr = export_base}, &got);
  if (r != CUDA_SUCCESS) return r;
  rgpu::client::EncodeMemoryHandle(rgpu::client::KeyFrom(got), offset, size, handle->reserved);
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuIpcOpenMemHandle_v2)(CUdeviceptr* dptr, CUipcMemHandle handle, unsigned int flags) {
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  rgpu::client::ShareKey key;
  uint64_t offset = 0, size = 0;
  if (!rgpu::client::DecodeMemoryHandle(handle.reserved, &key, &offset, &size)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  calls::IpcOpenMemHandle::Results got;
  r = Server().Call<calls::IpcOpenMemHandle>(
      ctx->remote, rgpu::client::WithKey<calls::IpcOpenMemHandle::Args>({.flags = flags}, key),
      &got);
  if (r != CUDA_SUCCESS) return r;
  // A piece of the export: it must lie inside it.
  const bool piece = size != 0;
  if (piece && (offset > got.bytes || size > got.bytes - offset)) {
    Server().Call<calls::IpcCloseMemHandle>(ctx->remote, {.dptr = got.dptr});
    return CUDA_ERROR_INVALID_VALUE;
  }
  const CUdeviceptr address = got.dptr + offset;
  Opened& o = State();
  std::lock_guard<std::mutex> lock(o.mu);
  Open& open = o.opens[address];
  open.export_base = got.dptr;
  if (open.count++ == 0) {
    rgpu::client::MemoryRange range;
    range.base = address;
    range.size = piece ? size : got.bytes;
    range.type = CU_MEMORYTYPE_DEVICE;
    range.ctx = ctx;
    range.freeable = false;  // closed with cuIpcCloseMemHandle, never freed here
    Memory().Insert(range);
  }
  *dptr = address;
  return CUDA_SUCCESS;
}
// The first revision takes the same arguments.
RGPU_SAME_AS(cuIpcOpenMemHandle, cuIpcOpenMemHandle_v2)

RGPU_IMPL(cuIpcCloseMemHandle)(CUdeviceptr dptr) {
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  Opened& o = State();
  std::lock_guard<std::mutex> lock(o.mu);
  auto it = o.opens.find(dptr);
  auto range = Memory().Find(dptr);
  if (it == o.opens.end() || !range || range->base != dptr || range->ctx != ctx) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  r = Server().Call<calls::IpcCloseMemHandle>(ctx->remote, {.dptr = it->second.export_base});
  if (r != CUDA_SUCCESS) return r;
  if (--it->second.count == 0) {
    o.opens.erase(it);
    Memory().Erase(dptr);
  }
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuIpcGetEventHandle)(CUipcEventHandle* handle, CUevent event) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = ClientState::Get().CheckInitialized(); r != CUDA_SUCCESS) return r;
  if (!ClientState::Get().IsLive(event) || event->kind != rgpu::client::ObjectKind::kEvent) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (CUresult r = rgpu::client::CheckContext(event->ctx); r != CUDA_SUCCESS) return r;
  if (!(event->flags & CU_EVENT_INTERPROCESS)) return CUDA_ERROR_INVALID_VALUE;
  calls::IpcGetEventHandle::Results got;
  CUresult r =
      Server().Call<calls::IpcGetEventHandle>(event->ctx->remote, {.event = event->remote}, &got);
  if (r != CUDA_SUCCESS) return r;
  rgpu::client::EncodeHandle(rgpu::client::KeyFrom(got), handle->reserved);
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuIpcOpenEventHandle)(CUevent* event, CUipcEventHandle handle) {
  if (event == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  rgpu::client::ShareKey key;
  if (!rgpu::client::DecodeHandle(handle.reserved, &key)) return CUDA_ERROR_INVALID_VALUE;
  calls::IpcOpenEventHandle::Results got;
  r = Server().Call<calls::IpcOpenEventHandle>(
      ctx->remote, rgpu::client::WithKey<calls::IpcOpenEventHandle::Args>({}, key), &got);
  if (r != CUDA_SUCCESS) return r;
  auto* e = new CUevent_st();
  e->remote = got.event;
  e->ctx = ctx;
  e->flags = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
  ClientState::Get().Register(e);
  *event = e;
  return CUDA_SUCCESS;
}
