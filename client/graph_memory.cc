#include "client/graph_memory.h"

#include <map>
#include <mutex>

#include "client/impl.h"
#include "client/memory_map.h"

namespace rgpu::client {
namespace {

struct Registry {
  std::mutex mu;
  std::map<CUdeviceptr, std::weak_ptr<GraphAllocation>> allocations;  // GUARDED_BY(mu)
  std::map<int, GraphMemoryFigures> figures;                          // GUARDED_BY(mu)
};

Registry& Graphs() {
  static Registry* registry = new Registry;  // never destroyed: used until the process ends
  return *registry;
}

void Count(int device, int64_t used, int64_t reserved) {
  Registry& g = Graphs();
  std::lock_guard<std::mutex> lock(g.mu);
  GraphMemoryFigures& f = g.figures[device];
  f.used += used;
  f.reserved += reserved;
  f.used_high = std::max(f.used_high, f.used);
  f.reserved_high = std::max(f.reserved_high, f.reserved);
}

}  // namespace

CUresult GraphAllocation::Make(size_t bytes, std::shared_ptr<GraphAllocation>* out) {
  out->reset();
  CUctx_st* ctx;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  CUdeviceptr dptr = 0;
  // The server's own allocation (never a slab's piece): freed with MemFree below.
  if (CUresult r = AllocateDevice(ctx, bytes, &dptr, /*record=*/true); r != CUDA_SUCCESS) return r;
  std::shared_ptr<GraphAllocation> a(new GraphAllocation);
  a->dptr_ = dptr;
  a->bytes_ = bytes;
  a->ctx_ = ctx;
  a->device_ = ctx->device;
  a->generation_ = ctx->generation;
  {
    Registry& g = Graphs();
    std::lock_guard<std::mutex> lock(g.mu);
    g.allocations[dptr] = a;
  }
  Count(ctx->device, 0, static_cast<int64_t>(bytes));
  *out = std::move(a);
  return CUDA_SUCCESS;
}

GraphAllocation::~GraphAllocation() {
  {
    Registry& g = Graphs();
    std::lock_guard<std::mutex> lock(g.mu);
    auto it = g.allocations.find(dptr_);
    if (it != g.allocations.end() && it->second.expired()) g.allocations.erase(it);
  }
  const int state = state_.load();
  Count(device_, state == kLive ? -static_cast<int64_t>(bytes_) : 0, -static_cast<int64_t>(bytes_));
  // The context may be gone (reset or destroyed): the memory went with it.
  if (CheckContext(ctx_) != CUDA_SUCCESS || ctx_->generation != generation_) return;
  Memory().Erase(dptr_);
  Server().Post<calls::MemFree>(ctx_->remote, {.dptr = dptr_});
}

int GraphAllocation::device() const { return device_; }

CUresult GraphAllocation::Begin() {
  int expected = kIdle;
  if (state_.compare_exchange_strong(expected, kLive)) {
    Count(device_, static_cast<int64_t>(bytes_), 0);
    return CUDA_SUCCESS;
  }
  RGPU_LOG_WARN(
      "graph launch: the graph allocation at 0x%llx is still live from an earlier "
      "launch (not freed)",
      static_cast<unsigned long long>(dptr_));
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult GraphAllocation::End() {
  int expected = kLive;
  if (!state_.compare_exchange_strong(expected, kIdle)) return CUDA_ERROR_INVALID_VALUE;
  Count(device_, -static_cast<int64_t>(bytes_), 0);
  return CUDA_SUCCESS;
}

std::shared_ptr<GraphAllocation> FindGraphAllocation(CUdeviceptr dptr) {
  Registry& g = Graphs();
  std::lock_guard<std::mutex> lock(g.mu);
  auto it = g.allocations.find(dptr);
  return it == g.allocations.end() ? nullptr : it->second.lock();
}

bool EndGraphAllocationByProgram(CUdeviceptr dptr, CUresult* result) {
  std::shared_ptr<GraphAllocation> a = FindGraphAllocation(dptr);
  if (a == nullptr) return false;
  *result = a->End();
  return true;
}

GraphMemoryFigures GraphMemory(int device) {
  Registry& g = Graphs();
  std::lock_guard<std::mutex> lock(g.mu);
  return g.figures[device];
}

void ResetGraphMemoryHighs(int device) {
  Registry& g = Graphs();
  std::lock_guard<std::mutex> lock(g.mu);
  GraphMemoryFigures& f = g.figures[device];
  f.used_high = f.used;
  f.reserved_high = f.reserved;
}

}  // namespace rgpu::client
