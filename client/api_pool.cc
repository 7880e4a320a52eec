// Stream-ordered allocation and memory pools (cuMemAllocAsync, cuMemFreeAsync, cuMemPool*). The
// pools live on the server (server/session_pool.cc), which reuses freed memory in stream order
// and charges what a pool reserves to the tenant's quota; here a CUmemoryPool is a handle naming
// one, and each device's current pool is this process's state, as in the driver. Pools hold
// device memory of one device; host-located pools are refused with CUDA_ERROR_NOT_SUPPORTED.
// Pools made with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR are shared with the program's other
// processes through the server (server/session_ipc.cc): the descriptor and the pointer export
// data hold the server's key (client/shareable_handle.h). Allocation while a stream is capturing
// makes a graph memory node (client/graph_memory.h).
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "client/graph_memory.h"
#include "client/impl.h"
#include "client/memory_map.h"
#include "client/shareable_handle.h"

// The driver's opaque pool type, defined by rgpu.
struct CUmemPoolHandle_st {
  uint64_t remote = 0;  // the server's pool id
  CUdevice device = 0;
  bool is_default = false;
  bool shareable = false;  // made with a POSIX file descriptor handle type
  bool imported = false;   // from another process's descriptor
};

using rgpu::client::ClientState;
using rgpu::client::Memory;
using rgpu::client::Server;
namespace calls = rgpu::calls;

namespace {

struct Pools {
  std::mutex mu;
  std::set<CUmemPoolHandle_st*> live;                // GUARDED_BY(mu)
  std::map<CUdevice, CUmemPoolHandle_st*> defaults;  // GUARDED_BY(mu)
  std::map<CUdevice, CUmemPoolHandle_st*> current;   // GUARDED_BY(mu)
};

Pools& State() {
  static Pools* pools = new Pools;  // never destroyed: used until the process ends
  return *pools;
}

CUresult CheckDevice(CUdevice dev) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  if (dev < 0 || dev >= ClientState::Get().device_count()) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

CUresult DefaultPool(CUdevice dev, CUmemPoolHandle_st** out) {
  CUresult r = CheckDevice(dev);
  if (r != CUDA_SUCCESS) return r;
  Pools& p = State();
  std::lock_guard<std::mutex> lock(p.mu);
  auto it = p.defaults.find(dev);
  if (it != p.defaults.end()) {
    *out = it->second;
    return CUDA_SUCCESS;
  }
  calls::DeviceGetDefaultMemPool::Results got;
  r = Server().Call<calls::DeviceGetDefaultMemPool>(0, {.device = dev}, &got);
  if (r != CUDA_SUCCESS) return r;
  auto* pool = new CUmemPoolHandle_st{got.pool, dev, true};
  p.live.insert(pool);
  p.defaults[dev] = pool;
  *out = pool;
  return CUDA_SUCCESS;
}

CUresult CurrentPool(CUdevice dev, CUmemPoolHandle_st** out) {
  {
    Pools& p = State();
    std::lock_guard<std::mutex> lock(p.mu);
    auto it = p.current.find(dev);
    if (it != p.current.end()) {
      *out = it->second;
      return CUDA_SUCCESS;
    }
  }
  return DefaultPool(dev, out);
}

CUresult CheckPool(CUmemoryPool pool) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  Pools& p = State();
  std::lock_guard<std::mutex> lock(p.mu);
  return pool != nullptr && p.live.count(pool) != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// The device a location of type DEVICE names; other locations are not supported.
CUresult LocationDevice(const CUmemLocation* location, CUmemAllocationType type, CUdevice* dev) {
  if (location == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (location->type != CU_MEM_LOCATION_TYPE_DEVICE) {
    RGPU_LOG_WARN("memory pools located on the host are not supported");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  *dev = location->id;
  return CheckDevice(*dev);
}

// Resolves the stream of a stream-ordered allocation or free; refuses one that is capturing
// (graph memory nodes are not supported yet), naming `what`.
CUresult StreamOfPoolCall(CUstream stream, const char* what, CUctx_st** ctx, uint64_t* remote) {
  CUresult r = rgpu::client::ResolveStream(stream, ctx, remote);
  if (r != CUDA_SUCCESS) return r;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (rgpu_impl_cuStreamIsCapturing(stream, &status) == CUDA_SUCCESS &&
      status != CU_STREAM_CAPTURE_STATUS_NONE) {
    RGPU_LOG_WARN("%s in a capturing stream (graph memory nodes) is not supported yet", what);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_SUCCESS;
}

// True when `stream` is capturing into a graph.
bool Capturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return rgpu_impl_cuStreamIsCapturing(stream, &status) == CUDA_SUCCESS &&
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

CUresult AllocFrom(CUdeviceptr* dptr, size_t bytes, CUmemPoolHandle_st* pool, CUstream stream) {
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (Capturing(stream)) {
    // A graph memory node: the graph's allocation, made now (client/graph_memory.h).
    std::shared_ptr<rgpu::client::GraphAllocation> a;
    if (CUresult r = rgpu::client::GraphAllocation::Make(bytes, &a); r != CUDA_SUCCESS) return r;
    *dptr = a->dptr();
    rgpu::client::Defer(stream, CU_GRAPH_NODE_TYPE_MEM_ALLOC, [a](CUstream) { return a->Begin(); });
    return CUDA_SUCCESS;
  }
  CUctx_st* ctx;
  uint64_t remote_stream = 0;
  CUresult r = StreamOfPoolCall(stream, "stream-ordered allocation", &ctx, &remote_stream);
  if (r != CUDA_SUCCESS) return r;
  if (pool == nullptr) {
    r = CurrentPool(ctx->device, &pool);
    if (r != CUDA_SUCCESS) return r;
  } else if (pool->device != ctx->device) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Work held behind a host function on `stream` must reach the server first, so that the
  // server orders the allocation after it.
  r = rgpu::client::WaitStreamDrained(stream);
  if (r != CUDA_SUCCESS) return r;
  calls::MemAllocFromPool::Results got;
  r = Server().Call<calls::MemAllocFromPool>(
      ctx->remote, {.pool = pool->remote, .bytesize = bytes, .stream = remote_stream}, &got);
  if (r != CUDA_SUCCESS) return r;
  if (!Memory().InsertDevice(got.dptr, bytes, ctx)) {  // another server's addresses
    Server().Post<calls::MemFreeAsync>(ctx->remote, {.dptr = got.dptr, .stream = remote_stream});
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *dptr = got.dptr;
  return CUDA_SUCCESS;
}

}  // namespace

RGPU_IMPL(cuDeviceGetDefaultMemPool)(CUmemoryPool* pool_out, CUdevice dev) {
  if (pool_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return DefaultPool(dev, pool_out);
}

RGPU_IMPL(cuDeviceGetMemPool)(CUmemoryPool* pool, CUdevice dev) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckDevice(dev);
  if (r != CUDA_SUCCESS) return r;
  return CurrentPool(dev, pool);
}

RGPU_IMPL(cuDeviceSetMemPool)(CUdevice dev, CUmemoryPool pool) {
  CUresult r = CheckDevice(dev);
  if (r == CUDA_SUCCESS) r = CheckPool(pool);
  if (r != CUDA_SUCCESS) return r;
  if (pool->device != dev) return CUDA_ERROR_INVALID_DEVICE;
  Pools& p = State();
  std::lock_guard<std::mutex> lock(p.mu);
  p.current[dev] = pool;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemGetDefaultMemPool)
(CUmemoryPool* pool_out, CUmemLocation* location, CUmemAllocationType type) {
  if (pool_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUdevice dev = 0;
  CUresult r = LocationDevice(location, type, &dev);
  if (r != CUDA_SUCCESS) return r;
  return DefaultPool(dev, pool_out);
}

RGPU_IMPL(cuMemGetMemPool)(CUmemoryPool* pool, CUmemLocation* location, CUmemAllocationType type) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUdevice dev = 0;
  CUresult r = LocationDevice(location, type, &dev);
  if (r != CUDA_SUCCESS) return r;
  return CurrentPool(dev, pool);
}

RGPU_IMPL(cuMemSetMemPool)(CUmemLocation* location, CUmemAllocationType type, CUmemoryPool pool) {
  CUdevice dev = 0;
  CUresult r = LocationDevice(location, type, &dev);
  if (r != CUDA_SUCCESS) return r;
  return rgpu_impl_cuDeviceSetMemPool(dev, pool);
}

RGPU_IMPL(cuMemPoolCreate)(CUmemoryPool* pool, const CUmemPoolProps* props) {
  if (pool == nullptr || props == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (props->handleTypes != CU_MEM_HANDLE_TYPE_NONE &&
      props->handleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    RGPU_LOG_WARN(
        "cuMemPoolCreate: shareable handles other than POSIX file descriptors are not "
        "supported");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  CUdevice dev = 0;
  CUresult r = LocationDevice(&props->location, props->allocType, &dev);
  if (r != CUDA_SUCCESS) return r;
  calls::MemPoolCreate::Results got;
  const bool shareable = props->handleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  r = Server().Call<calls::MemPoolCreate>(
      0, {.device = dev, .max_size = props->maxSize, .shareable = shareable}, &got);
  if (r != CUDA_SUCCESS) return r;
  auto* created = new CUmemPoolHandle_st{got.pool, dev, false};
  created->shareable = shareable;
  Pools& p = State();
  std::lock_guard<std::mutex> lock(p.mu);
  p.live.insert(created);
  *pool = created;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemPoolDestroy)(CUmemoryPool pool) {
  CUresult r = CheckPool(pool);
  if (r != CUDA_SUCCESS) return r;
  if (pool->is_default) return CUDA_ERROR_INVALID_VALUE;
  r = Server().Call<calls::MemPoolDestroy>(0, {.pool = pool->remote});
  if (r != CUDA_SUCCESS) return r;
  Pools& p = State();
  std::lock_guard<std::mutex> lock(p.mu);
  for (auto it = p.current.begin(); it != p.current.end();) {
    it = it->second == pool ? p.current.erase(it) : std::next(it);  // back to the default
  }
  p.live.erase(pool);
  delete pool;
  return CUDA_SUCCESS;
}

namespace {

// The size of an attribute's value: cuuint64_t for sizes, int for the reuse switches.
bool IsSizeAttribute(CUmemPool_attribute attr) {
  return attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD ||
         attr == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT ||
         attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH || attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT ||
         attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH;
}

}  // namespace

RGPU_IMPL(cuMemPoolSetAttribute)(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckPool(pool);
  if (r != CUDA_SUCCESS) return r;
  const uint64_t v = IsSizeAttribute(attr) ? *static_cast<cuuint64_t*>(value)
                                           : static_cast<uint64_t>(*static_cast<int*>(value) != 0);
  return Server().Call<calls::MemPoolSetAttribute>(
      0, {.pool = pool->remote, .attribute = static_cast<uint32_t>(attr), .value = v});
}

RGPU_IMPL(cuMemPoolGetAttribute)(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckPool(pool);
  if (r != CUDA_SUCCESS) return r;
  calls::MemPoolGetAttribute::Results got;
  r = Server().Call<calls::MemPoolGetAttribute>(
      0, {.pool = pool->remote, .attribute = static_cast<uint32_t>(attr)}, &got);
  if (r != CUDA_SUCCESS) return r;
  if (IsSizeAttribute(attr)) {
    *static_cast<cuuint64_t*>(value) = got.value;
  } else {
    *static_cast<int*>(value) = static_cast<int>(got.value);
  }
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemPoolTrimTo)(CUmemoryPool pool, size_t keep) {
  CUresult r = CheckPool(pool);
  if (r != CUDA_SUCCESS) return r;
  return Server().Call<calls::MemPoolTrimTo>(0, {.pool = pool->remote, .keep = keep});
}

RGPU_IMPL(cuMemAllocAsync)(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  return AllocFrom(dptr, bytes, nullptr, stream);
}
RGPU_PER_THREAD_SAME_AS(cuMemAllocAsync_ptsz)

RGPU_IMPL(cuMemAllocFromPoolAsync)
(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream stream) {
  CUresult r = CheckPool(pool);
  if (r != CUDA_SUCCESS) return r;
  return AllocFrom(dptr, bytes, pool, stream);
}
RGPU_PER_THREAD_SAME_AS(cuMemAllocFromPoolAsync_ptsz)

RGPU_IMPL(cuMemFreeAsync)(CUdeviceptr dptr, CUstream stream) {
  if (Capturing(stream)) {
    std::shared_ptr<rgpu::client::GraphAllocation> a = rgpu::client::FindGraphAllocation(dptr);
    if (a != nullptr) {
      rgpu::client::Defer(stream, CU_GRAPH_NODE_TYPE_MEM_FREE, [a](CUstream) { return a->End(); });
      return CUDA_SUCCESS;
    }
  }
  CUctx_st* ctx;
  uint64_t remote_stream = 0;
  CUresult r = StreamOfPoolCall(stream, "stream-ordered free", &ctx, &remote_stream);
  if (r != CUDA_SUCCESS) return r;
  if (dptr == 0) return CUDA_SUCCESS;  // as the driver does (cuSPARSE frees null buffers)
  // A graph allocation freed outside its graph ends; its memory stays the graph's.
  if (CUresult ended; rgpu::client::EndGraphAllocationByProgram(dptr, &ended)) return ended;
  auto range = Memory().Find(dptr);
  if (!range || range->base != dptr || range->type != CU_MEMORYTYPE_DEVICE || range->ctx != ctx) {
    RGPU_LOG_DEBUG("cuMemFreeAsync(%#llx): %s", static_cast<unsigned long long>(dptr),
                   !range                ? "not an allocation"
                   : range->base != dptr ? "not the start of an allocation"
                   : range->ctx != ctx   ? "an allocation of another context"
                                         : "not device memory");
    return CUDA_ERROR_INVALID_VALUE;
  }
  Memory().Erase(dptr);
  auto free = [=](CUstream s) {
    CUctx_st* free_ctx;
    uint64_t free_stream = 0;
    CUresult fr = rgpu::client::ResolveStream(s, &free_ctx, &free_stream);
    if (fr != CUDA_SUCCESS) return fr;
    return Server().Post<calls::MemFreeAsync>(free_ctx->remote,
                                              {.dptr = dptr, .stream = free_stream});
  };
  if (rgpu::client::Defer(stream, CU_GRAPH_NODE_TYPE_MEM_FREE, free)) return CUDA_SUCCESS;
  return free(stream);
}
RGPU_PER_THREAD_SAME_AS(cuMemFreeAsync_ptsz)

// Sharing pools with the program's other processes (sessions of the same tenant on the server).

RGPU_IMPL(cuMemPoolExportToShareableHandle)
(void* handle_out, CUmemoryPool pool, CUmemAllocationHandleType type, unsigned long long flags) {
  if (handle_out == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckPool(pool);
  if (r != CUDA_SUCCESS) return r;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !pool->shareable || pool->imported) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  calls::MemPoolExport::Results got;
  r = Server().Call<calls::MemPoolExport>(0, {.pool = pool->remote}, &got);
  if (r != CUDA_SUCCESS) return r;
  const int fd = rgpu::client::KeyToFd(rgpu::client::KeyFrom(got));
  if (fd < 0) return CUDA_ERROR_OPERATING_SYSTEM;
  *static_cast<int*>(handle_out) = fd;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemPoolImportFromShareableHandle)
(CUmemoryPool* pool_out, void* handle, CUmemAllocationHandleType type, unsigned long long flags) {
  if (pool_out == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  // The descriptor travels as the pointer's value, as the driver takes it.
  rgpu::client::ShareKey key;
  if (!rgpu::client::KeyFromFd(static_cast<int>(reinterpret_cast<intptr_t>(handle)), &key)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  calls::MemPoolImport::Results got;
  r = Server().Call<calls::MemPoolImport>(
      0, rgpu::client::WithKey<calls::MemPoolImport::Args>({}, key), &got);
  if (r != CUDA_SUCCESS) return r;
  Pools& p = State();
  std::lock_guard<std::mutex> lock(p.mu);
  for (CUmemPoolHandle_st* live : p.live) {
    if (live->remote == got.pool) {  // imported before: the same pool
      *pool_out = live;
      return CUDA_SUCCESS;
    }
  }
  auto* imported = new CUmemPoolHandle_st{got.pool, got.device, false};
  imported->imported = true;
  p.live.insert(imported);
  *pool_out = imported;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemPoolExportPointer)(CUmemPoolPtrExportData* data, CUdeviceptr ptr) {
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  auto range = Memory().Find(ptr);
  if (!range || range->base != ptr || range->type != CU_MEMORYTYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  calls::MemPoolExportPointer::Results got;
  r = Server().Call<calls::MemPoolExportPointer>(range->ctx->remote, {.dptr = ptr}, &got);
  if (r != CUDA_SUCCESS) return r;
  rgpu::client::EncodeHandle(rgpu::client::KeyFrom(got), reinterpret_cast<char*>(data->reserved));
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemPoolImportPointer)
(CUdeviceptr* ptr_out, CUmemoryPool pool, CUmemPoolPtrExportData* data) {
  if (ptr_out == nullptr || data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckPool(pool);
  if (r != CUDA_SUCCESS) return r;
  if (!pool->imported) return CUDA_ERROR_INVALID_VALUE;
  rgpu::client::ShareKey key;
  if (!rgpu::client::DecodeHandle(reinterpret_cast<const char*>(data->reserved), &key)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUctx_st* ctx;
  if ((r = rgpu::client::RequireContext(&ctx)) != CUDA_SUCCESS) return r;
  if (ctx->device != pool->device) return CUDA_ERROR_INVALID_DEVICE;
  calls::MemPoolImportPointer::Results got;
  r = Server().Call<calls::MemPoolImportPointer>(
      ctx->remote,
      rgpu::client::WithKey<calls::MemPoolImportPointer::Args>({.pool = pool->remote}, key), &got);
  if (r != CUDA_SUCCESS) return r;
  if (!Memory().Find(got.dptr)) Memory().InsertDevice(got.dptr, got.bytes, ctx);
  *ptr_out = got.dptr;
  return CUDA_SUCCESS;
}

// A pool's memory is its device's: that device reads and writes it; peer devices get no access
// (rgpu offers no peer access).
RGPU_IMPL(cuMemPoolGetAccess)
(CUmemAccess_flags* flags, CUmemoryPool pool, CUmemLocation* location) {
  if (flags == nullptr || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckPool(pool);
  if (r != CUDA_SUCCESS) return r;
  if (location->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  if ((r = CheckDevice(location->id)) != CUDA_SUCCESS) return r;
  *flags = location->id == pool->device ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                                        : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMemPoolSetAccess)(CUmemoryPool pool, const CUmemAccessDesc* map, size_t count) {
  if (map == nullptr && count != 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckPool(pool);
  if (r != CUDA_SUCCESS) return r;
  for (size_t i = 0; i < count; ++i) {
    if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if ((r = CheckDevice(map[i].location.id)) != CUDA_SUCCESS) return r;
    if (map[i].location.id == pool->device) {
      // Its own device keeps read-write access (the driver refuses to take it away).
      if (map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) return CUDA_ERROR_INVALID_VALUE;
      continue;
    }
    if (map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE) {
      RGPU_LOG_WARN("cuMemPoolSetAccess: access from a peer device is not supported");
      return CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  return CUDA_SUCCESS;
}
