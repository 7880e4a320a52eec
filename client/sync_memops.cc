#include "client/sync_memops.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "client/impl.h"
#include "client/memory_map.h"

namespace rgpu::client {
namespace {
// Whether any memory ever had the attribute: until then a synchronous memory operation looks up
// nothing.
std::atomic<bool> g_sync_memops_set{false};

// Waits until the work on the legacy default stream of `ctx` (what synchronous copies and
// memsets in it post) has run.
CUresult WaitLegacyStream(CUctx_st* ctx) {
  if (CUresult r = CheckContext(ctx); r != CUDA_SUCCESS) return r;
  return Server().Call<calls::StreamSynchronize>(ctx->remote, {.stream = 0});
}
}  // namespace

CUresult SetSyncMemops(CUdeviceptr address, bool on) {
  if (on) g_sync_memops_set.store(true, std::memory_order_release);
  std::optional<MemoryRange> range = Memory().SetSyncMemops(address, on);
  if (!range) return CUDA_ERROR_INVALID_VALUE;
  if (!on) return CUDA_SUCCESS;
  CUctx_st* current = CurrentContext();
  CUresult r = CUDA_SUCCESS;
  if (current != nullptr) r = WaitLegacyStream(current);
  if (r == CUDA_SUCCESS && range->ctx != nullptr && range->ctx != current) {
    r = WaitLegacyStream(range->ctx);
  }
  return r;
}

CUresult FinishSynchronousMemop(CUresult r, std::initializer_list<CUdeviceptr> addresses,
                                CUctx_st* issued_in) {
  if (r != CUDA_SUCCESS || !g_sync_memops_set.load(std::memory_order_acquire)) return r;
  // The legacy streams to wait for: the one the operation ran on, and, where a flagged range
  // is another context's (a copy between contexts runs in the destination's), that one's too.
  std::vector<CUctx_st*> wait_for;
  for (CUdeviceptr address : addresses) {
    if (address == 0) continue;
    std::optional<MemoryRange> range = Memory().Find(address);
    if (!range || !range->sync_memops) continue;
    if (wait_for.empty()) {
      CUctx_st* issuing = issued_in != nullptr ? issued_in : CurrentContext();
      if (issuing != nullptr) wait_for.push_back(issuing);
    }
    if (range->ctx != nullptr &&
        std::find(wait_for.begin(), wait_for.end(), range->ctx) == wait_for.end()) {
      wait_for.push_back(range->ctx);
    }
  }
  for (CUctx_st* ctx : wait_for) {
    if (CUresult waited = WaitLegacyStream(ctx); waited != CUDA_SUCCESS) return waited;
  }
  return r;
}

}  // namespace rgpu::client
