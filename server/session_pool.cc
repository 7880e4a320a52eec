// Session's handlers for stream-ordered allocation (proto/calls.def: Stream-ordered allocation).
// Pools are the server's own, on any backend: memory comes from the backend's cuMemAlloc, is
// charged to the tenant when the pool reserves it, and stays charged while the pool keeps it.
// A free records an event on its stream; the block is used again by an allocation on the same
// stream at once (stream order), by others once the event has completed
// (REUSE_ALLOW_OPPORTUNISTIC) or by making the allocating stream wait for it
// (REUSE_ALLOW_INTERNAL_DEPENDENCIES). Synchronizations release what exceeds a pool's release
// threshold, as the driver does. A freed range is no longer the session's memory: later calls
// naming it are refused.
#include <algorithm>
#include <vector>

#include "server/require_fn.h"
#include "server/session.h"

namespace rgpu::server {
namespace {

// Blocks are used again for requests of at least half their size, not to waste much of them.
bool Fits(uint64_t block, uint64_t request) { return block >= request && block / 2 <= request; }

// The pool's reuse switches and its sizes, by attribute (null: not one of them).
bool* PoolSwitch(PoolRecord& p, CUmemPool_attribute attr) {
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      return &p.reuse_follow_event_dependencies;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      return &p.reuse_allow_opportunistic;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      return &p.reuse_allow_internal_dependencies;
    default:
      return nullptr;
  }
}
uint64_t* PoolSize(PoolRecord& p, CUmemPool_attribute attr) {
  switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      return &p.release_threshold;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
      return &p.reserved;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      return &p.reserved_high;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      return &p.used;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      return &p.used_high;
    default:
      return nullptr;
  }
}

}  // namespace

bool Session::EventDone(CUevent event) {
  return drv_.cuEventQuery != nullptr && drv_.cuEventQuery(event) == CUDA_SUCCESS;
}

uint64_t Session::DefaultPool(int device) {
  auto it = default_pool_by_device_.find(device);
  if (it != default_pool_by_device_.end()) return it->second;
  PoolRecord pool;
  pool.device = device;
  pool.is_default = true;
  const uint64_t id = pools_.Insert(std::move(pool));
  default_pool_by_device_[device] = id;
  return id;
}

CUresult Session::HandleDeviceGetDefaultMemPool(CallState&, const DeviceGetDefaultMemPoolIn& in,
                                                calls::DeviceGetDefaultMemPool::Results* out) {
  out->pool = DefaultPool(in.device);
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemPoolCreate(CallState& cs, const MemPoolCreateIn& in,
                                      calls::MemPoolCreate::Results* out) {
  if (CUresult r = RoomFor(cs, pools_.size(), limits_.max_pools, "memory pools");
      r != CUDA_SUCCESS) {
    return r;
  }
  PoolRecord pool;
  pool.device = in.device;
  pool.max_size = in.max_size;
  pool.shareable = in.shareable;
  out->pool = pools_.Insert(std::move(pool));
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemPoolDestroy(CallState& cs, const MemPoolDestroyIn& in,
                                       calls::MemPoolDestroy::Results*) {
  if (in.pool->is_default) {
    cs.detail = "a device's default pool cannot be destroyed";
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Outstanding allocations keep the pool until they are freed (as the driver does).
  in.pool->destroyed = true;
  TrimPool(*in.pool.record, 0);
  ErasePoolIfDone(in.pool.id);
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemPoolSetAttribute(CallState& cs, const MemPoolSetAttributeIn& in,
                                            calls::MemPoolSetAttribute::Results*) {
  PoolRecord& p = *in.pool.record;
  const auto attr = static_cast<CUmemPool_attribute>(in.attribute);
  if (bool* on = PoolSwitch(p, attr)) {
    *on = in.value != 0;
    return CUDA_SUCCESS;
  }
  if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) {
    p.release_threshold = in.value;
    return CUDA_SUCCESS;
  }
  // The high-water marks may only be reset (to the current value).
  if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH && in.value == 0) {
    p.reserved_high = p.reserved;
    return CUDA_SUCCESS;
  }
  if (attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH && in.value == 0) {
    p.used_high = p.used;
    return CUDA_SUCCESS;
  }
  cs.detail = "memory pool attribute " + std::to_string(in.attribute) + " cannot be set so";
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult Session::HandleMemPoolGetAttribute(CallState& cs, const MemPoolGetAttributeIn& in,
                                            calls::MemPoolGetAttribute::Results* out) {
  PoolRecord& p = *in.pool.record;
  const auto attr = static_cast<CUmemPool_attribute>(in.attribute);
  if (const bool* on = PoolSwitch(p, attr)) {
    out->value = *on;
    return CUDA_SUCCESS;
  }
  if (const uint64_t* size = PoolSize(p, attr)) {
    out->value = *size;
    return CUDA_SUCCESS;
  }
  cs.detail = "memory pool attribute " + std::to_string(in.attribute) + " is not supported";
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult Session::HandleMemPoolTrimTo(CallState&, const MemPoolTrimToIn& in,
                                      calls::MemPoolTrimTo::Results*) {
  TrimPool(*in.pool.record, in.keep);
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemAllocFromPool(CallState& cs, const MemAllocFromPoolIn& in,
                                         calls::MemAllocFromPool::Results* out) {
  PoolRecord& pool = *in.pool.record;
  const uint64_t bytes = in.bytesize;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (pool.imported) {
    cs.detail = "an imported pool only holds the pointers imported into it";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (pool.device != cs.ctx->device) {
    cs.detail = "the pool belongs to another device than the stream's";
    return CUDA_ERROR_INVALID_VALUE;
  }
  // A block this pool already holds: the smallest that fits and may be used on this stream now.
  auto best = pool.free.end();
  bool wait_needed = false;
  for (auto it = pool.free.begin(); it != pool.free.end(); ++it) {
    if (it->ctx != cs.ctx_id || !Fits(it->size, bytes)) continue;
    if (best != pool.free.end() && best->size <= it->size) continue;
    bool usable = it->ready == nullptr || it->stream == in.stream.id;
    bool wait = false;
    if (!usable && pool.reuse_allow_opportunistic && EventDone(it->ready)) {
      usable = true;
    }
    if (!usable && pool.reuse_allow_internal_dependencies) usable = wait = true;
    if (usable) {
      best = it;
      wait_needed = wait;
    }
  }
  if (best != pool.free.end()) {
    if (CUresult r = RoomFor(cs, allocations_.size(), limits_.max_allocations, "allocations");
        r != CUDA_SUCCESS) {
      return r;
    }
    if (wait_needed) {
      REQUIRE_FN(cuStreamWaitEvent);
      if (CUresult r = drv_.cuStreamWaitEvent(in.stream.stream, best->ready, 0);
          r != CUDA_SUCCESS) {
        return r;
      }
    }
    if (best->ready != nullptr) drv_.cuEventDestroy(best->ready);
    const PoolBlock block = *best;
    pool.free.erase(best);
    pool.used += block.size;
    pool.used_high = std::max(pool.used_high, pool.used);
    allocations_[block.ptr] = Allocation{block.size, cs.ctx_id, true, 0, in.pool.id};
    out->dptr = block.ptr;
    return CUDA_SUCCESS;
  }
  if (pool.max_size != 0 && (bytes > pool.max_size || pool.reserved > pool.max_size - bytes)) {
    TrimPool(pool, pool.max_size - std::min(pool.max_size, bytes));
    if (CUresult r = MakeCurrent(cs.ctx); r != CUDA_SUCCESS) return r;  // trimming may switch
    if (bytes > pool.max_size || pool.reserved > pool.max_size - bytes) {
      cs.detail = "the pool's maximum size (" + std::to_string(pool.max_size) + " bytes)";
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  // New memory, from the backend, the way MemAlloc gets it (quota, scrubbing, limits).
  MemAllocIn alloc;
  alloc.bytesize = bytes;
  calls::MemAlloc::Results got;
  CUresult r = HandleMemAlloc(cs, alloc, &got);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    // What the pools hold unused goes back first, as the driver does before failing.
    for (auto& [id, other] : pools_.records()) TrimPool(other, 0);
    if (CUresult made = MakeCurrent(cs.ctx); made != CUDA_SUCCESS) return made;
    cs.detail.clear();
    r = HandleMemAlloc(cs, alloc, &got);
  }
  if (r != CUDA_SUCCESS) return r;
  allocations_[got.dptr].pool = in.pool.id;
  pool.reserved += bytes;
  pool.reserved_high = std::max(pool.reserved_high, pool.reserved);
  pool.used += bytes;
  pool.used_high = std::max(pool.used_high, pool.used);
  out->dptr = got.dptr;
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemFreeAsync(CallState& cs, const MemFreeAsyncIn& in,
                                     calls::MemFreeAsync::Results*) {
  auto it = allocations_.find(in.dptr);
  if (it != allocations_.end() && it->second.import_pool != 0 && it->second.ctx == cs.ctx_id) {
    // A pointer imported from another session's pool: its import closes once the work before
    // the free on the stream is done.
    if (--it->second.opens > 0) return CUDA_SUCCESS;
    if (CUresult r = drv_.cuStreamSynchronize(in.stream.stream); r != CUDA_SUCCESS) return r;
    CloseImport(it);
    return MakeCurrent(cs.ctx);
  }
  if (it == allocations_.end() || !it->second.freeable || it->second.ctx != cs.ctx_id) {
    cs.detail = "not an allocation of this context";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (it->second.pool == 0) {
    // An ordinary allocation (cuMemAlloc) freed in stream order, as the driver allows (cuSPARSE
    // does it): freed once the work before it on the stream is done.
    if (CUresult r = drv_.cuStreamSynchronize(in.stream.stream); r != CUDA_SUCCESS) return r;
    return FreeAllocation(it);
  }
  PoolRecord* pool = pools_.Find(it->second.pool);
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  REQUIRE_FN(cuEventCreate);
  CUevent ready = nullptr;
  CUresult r = drv_.cuEventCreate(&ready, CU_EVENT_DISABLE_TIMING);
  if (r == CUDA_SUCCESS) r = drv_.cuEventRecord(ready, in.stream.stream);
  if (r != CUDA_SUCCESS) {
    if (ready != nullptr) drv_.cuEventDestroy(ready);
    return r;
  }
  ReturnToPool(it, in.stream.id, ready);
  return CUDA_SUCCESS;
}

void Session::ReturnToPool(std::map<CUdeviceptr, Allocation>::iterator it, uint64_t stream,
                           CUevent ready) {
  const uint64_t pool_id = it->second.pool;
  RevokeMemoryExport(it->first);  // freed by its exporter: no new imports
  PoolRecord* pool = pools_.Find(pool_id);
  if (pool != nullptr) {
    pool->free.push_back(PoolBlock{it->first, it->second.size, it->second.ctx, stream, ready});
    pool->used -= it->second.size;
  }
  allocations_.erase(it);
  if (pool != nullptr && pool->destroyed) {
    TrimPool(*pool, 0);
    ErasePoolIfDone(pool_id);
  }
}

// Frees each block in the context it was allocated in, so the current context may change: callers
// that go on in the call's context make it current again.
void Session::TrimPool(PoolRecord& pool, uint64_t keep) {
  if (pool.reserved <= keep) return;
  std::sort(pool.free.begin(), pool.free.end(),
            [](const PoolBlock& a, const PoolBlock& b) { return a.size > b.size; });
  for (auto it = pool.free.begin(); it != pool.free.end() && pool.reserved > keep;) {
    if (it->ready != nullptr && !EventDone(it->ready)) {
      ++it;  // its free has not happened yet
      continue;
    }
    ContextRecord* ctx = contexts_.Find(it->ctx);
    if (ctx == nullptr || MakeCurrent(ctx) != CUDA_SUCCESS) {
      ++it;
      continue;
    }
    if (it->ready != nullptr) drv_.cuEventDestroy(it->ready);
    ReleaseAllocationMemory(it->ptr, it->size, DeviceOf(it->ctx));
    pool.reserved -= it->size;
    it = pool.free.erase(it);
  }
}

void Session::TrimPoolsAfterSync() {
  if (pools_.size() == 0) return;
  std::vector<uint64_t> destroyed;
  for (auto& [id, pool] : pools_.records()) {
    TrimPool(pool, pool.destroyed ? 0 : pool.release_threshold);
    if (pool.destroyed) destroyed.push_back(id);
  }
  for (uint64_t id : destroyed) ErasePoolIfDone(id);
}

void Session::ForgetPoolBlocks(uint64_t ctx_id) {
  for (auto& [id, pool] : pools_.records()) {
    for (auto it = pool.free.begin(); it != pool.free.end();) {
      if (it->ctx != ctx_id) {
        ++it;
        continue;
      }
      if (restored_in_span_.count(it->ptr)) {
        ReleaseAllocationMemory(it->ptr, it->size, DeviceOf(ctx_id));  // it leaves its span
      } else {
        UnchargeMemory(it->ptr, it->size, DeviceOf(ctx_id));
      }
      pool.reserved -= it->size;
      it = pool.free.erase(it);  // its event and memory go with the context
    }
  }
  for (auto& [ptr, a] : allocations_) {
    if (a.ctx != ctx_id || a.pool == 0) continue;
    if (PoolRecord* pool = pools_.Find(a.pool)) {
      pool->used -= a.size;
      pool->reserved -= a.size;
    }
  }
}

void Session::ErasePoolIfDone(uint64_t pool_id) {
  PoolRecord* pool = pools_.Find(pool_id);
  if (pool == nullptr || !pool->destroyed || pool->used != 0 || !pool->free.empty() ||
      pool->imported_pointers != 0) {
    return;
  }
  pools_.Erase(pool_id);
}

}  // namespace rgpu::server
