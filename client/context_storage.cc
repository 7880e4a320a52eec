#include "client/context_storage.h"

#include <mutex>
#include <vector>

#include "client/client_state.h"

namespace rgpu::client {
namespace {

CUctx_st* Resolve(CUcontext ctx) {
  if (ctx == nullptr) ctx = CurrentContext();
  if (ctx == nullptr || !ClientState::Get().IsLive(ctx)) return nullptr;
  return ctx;
}

}  // namespace

CUresult ContextStoragePut(CUcontext ctx, void* key, void* value,
                           void (*destructor)(CUcontext, void*, void*)) {
  CUctx_st* c = Resolve(ctx);
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  c->local_storage[key] = ClsEntry{value, destructor};
  return CUDA_SUCCESS;
}

CUresult ContextStorageDelete(CUcontext ctx, void* key) {
  CUctx_st* c = Resolve(ctx);
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  c->local_storage.erase(key);
  return CUDA_SUCCESS;
}

CUresult ContextStorageGet(void** value, CUcontext ctx, void* key) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* c = Resolve(ctx);
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  auto it = c->local_storage.find(key);
  if (it == c->local_storage.end()) return CUDA_ERROR_INVALID_VALUE;
  *value = it->second.value;
  return CUDA_SUCCESS;
}

void ContextStorageRunDestructors(CUctx_st* ctx) {
  std::map<void*, ClsEntry> entries;
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    entries.swap(ctx->local_storage);
  }
  // Outside the lock: a destructor may call back into the driver.
  for (auto& [key, entry] : entries) {
    if (entry.destructor != nullptr) entry.destructor(ctx, key, entry.value);
  }
}

}  // namespace rgpu::client
