#include "client/sync_memops.h"

#include <atomic>

#include "client/memory_map.h"
#include "client/objects.h"

extern "C" CUresult rgpu_impl_cuCtxSynchronize_v2(CUcontext ctx);

namespace rgpu::client {
namespace {
// Whether any memory ever had the attribute: until then a synchronous memory operation looks up
// nothing.
std::atomic<bool> g_sync_memops_set{false};
}  // namespace

CUresult SetSyncMemops(CUdeviceptr address, bool on) {
  if (on) g_sync_memops_set.store(true, std::memory_order_release);
  std::optional<MemoryRange> range = Memory().SetSyncMemops(address, on);
  if (!range) return CUDA_ERROR_INVALID_VALUE;
  if (!on || range->ctx == nullptr) return CUDA_SUCCESS;
  return rgpu_impl_cuCtxSynchronize_v2(range->ctx);
}

CUresult FinishSynchronousMemop(CUresult r, std::initializer_list<CUdeviceptr> addresses) {
  if (r != CUDA_SUCCESS || !g_sync_memops_set.load(std::memory_order_acquire)) return r;
  for (CUdeviceptr address : addresses) {
    std::optional<MemoryRange> range = Memory().Find(address);
    if (range && range->sync_memops && range->ctx != nullptr) {
      return rgpu_impl_cuCtxSynchronize_v2(range->ctx);
    }
  }
  return r;
}

}  // namespace rgpu::client
