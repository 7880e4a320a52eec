// Function attributes (fetched once per function and attribute, then answered locally),
// occupancy (computed locally from those and the device's attributes), context limits, and host
// functions on streams, which run in this process at their point in the stream's order.
#include <algorithm>

#include "client/impl.h"

namespace calls = rgpu::calls;
using rgpu::client::ClientState;
using rgpu::client::RequireContext;
using rgpu::client::ResolveFunction;
using rgpu::client::Server;

namespace {

CUresult FunctionAttribute(CUfunc_st* f, CUfunction_attribute attrib, int* value) {
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    auto it = f->attributes.find(attrib);
    if (it != f->attributes.end()) {
      *value = it->second;
      return CUDA_SUCCESS;
    }
  }
  calls::FuncGetAttribute::Results got;
  CUresult r = Server().Call<calls::FuncGetAttribute>(
      f->ctx->remote, {.function = f->remote, .attribute = static_cast<uint32_t>(attrib)}, &got);
  if (r != CUDA_SUCCESS) return r;
  *value = got.value;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  f->attributes[attrib] = *value;
  return CUDA_SUCCESS;
}

int DeviceAttribute(int device, CUdevice_attribute a) {
  int v = 0;
  rgpu_impl_cuDeviceGetAttribute(&v, a, device);
  return v;
}

// Resident blocks of `f` per multiprocessor at `block_size` threads and `dynamic_smem` bytes:
// the tightest of the thread, block, shared-memory and register limits.
CUresult ActiveBlocks(CUfunc_st* f, int block_size, size_t dynamic_smem, int* blocks) {
  int max_threads = 0, regs = 0, static_smem = 0;
  CUresult r = FunctionAttribute(f, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &max_threads);
  if (r == CUDA_SUCCESS) r = FunctionAttribute(f, CU_FUNC_ATTRIBUTE_NUM_REGS, &regs);
  if (r == CUDA_SUCCESS)
    r = FunctionAttribute(f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &static_smem);
  if (r != CUDA_SUCCESS) return r;
  const int dev = f->ctx->device;
  const int warp = std::max(1, DeviceAttribute(dev, CU_DEVICE_ATTRIBUTE_WARP_SIZE));
  if (block_size <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (block_size > max_threads) {
    *blocks = 0;
    return CUDA_SUCCESS;
  }
  const int threads = (block_size + warp - 1) / warp * warp;
  int n = DeviceAttribute(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR) / threads;
  const int max_blocks = DeviceAttribute(dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
  if (max_blocks > 0) n = std::min(n, max_blocks);
  const size_t smem = static_cast<size_t>(static_smem) + dynamic_smem;
  if (smem > 0) {
    const size_t per_sm =
        DeviceAttribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    n = std::min<int>(n, static_cast<int>(per_sm / smem));
  }
  if (regs > 0) {
    // A block the function may launch with (up to its MAX_THREADS_PER_BLOCK, checked above)
    // always fits once by registers: a compiler fits them to the launch bounds, and the software
    // GPU's count of virtual registers is an upper bound it never needs.
    const int per_sm = DeviceAttribute(dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
    n = std::min(n, std::max(per_sm / (regs * threads), 1));
  }
  *blocks = std::max(n, 0);
  return CUDA_SUCCESS;
}

}  // namespace

RGPU_IMPL(cuFuncGetAttribute)(int* value, CUfunction_attribute attrib, CUfunction f) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUfunc_st* fn;
  CUresult r = ResolveFunction(f, &fn);
  if (r != CUDA_SUCCESS) return r;
  return FunctionAttribute(fn, attrib, value);
}

RGPU_IMPL(cuKernelGetAttribute)
(int* value, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev) {
  return rgpu_impl_cuFuncGetAttribute(value, attrib, reinterpret_cast<CUfunction>(kernel));
}

RGPU_IMPL(cuFuncSetAttribute)(CUfunction f, CUfunction_attribute attrib, int value) {
  CUfunc_st* fn;
  CUresult r = ResolveFunction(f, &fn);
  if (r != CUDA_SUCCESS) return r;
  r = Server().Call<calls::FuncSetAttribute>(
      fn->ctx->remote,
      {.function = fn->remote, .attribute = static_cast<uint32_t>(attrib), .value = value});
  if (r == CUDA_SUCCESS) {
    // Setting one attribute can change others (e.g. the shared-memory carveout): refetch later.
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    fn->attributes.clear();
    if (attrib == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
      fn->max_dynamic_shared = static_cast<uint32_t>(value);
    }
  }
  return r;
}

RGPU_IMPL(cuKernelSetAttribute)
(CUfunction_attribute attrib, int value, CUkernel kernel, CUdevice dev) {
  return rgpu_impl_cuFuncSetAttribute(reinterpret_cast<CUfunction>(kernel), attrib, value);
}

RGPU_IMPL(cuFuncSetCacheConfig)(CUfunction f, CUfunc_cache config) {
  // A preference the driver may ignore (as CUDA documents); validated, then not forwarded.
  CUfunc_st* fn;
  CUresult r = ResolveFunction(f, &fn);
  if (r != CUDA_SUCCESS) return r;
  return config <= CU_FUNC_CACHE_PREFER_EQUAL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

RGPU_IMPL(cuKernelSetCacheConfig)(CUkernel kernel, CUfunc_cache config, CUdevice dev) {
  return rgpu_impl_cuFuncSetCacheConfig(reinterpret_cast<CUfunction>(kernel), config);
}

// Every device rgpu serves has a fixed four-byte shared memory bank size, where the setting
// does nothing (as cuda.h documents); validated only.
RGPU_IMPL(cuFuncSetSharedMemConfig)(CUfunction f, CUsharedconfig config) {
  CUfunc_st* fn;
  CUresult r = ResolveFunction(f, &fn);
  if (r != CUDA_SUCCESS) return r;
  return config >= CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE &&
                 config <= CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE
             ? CUDA_SUCCESS
             : CUDA_ERROR_INVALID_VALUE;
}

RGPU_IMPL(cuOccupancyMaxActiveBlocksPerMultiprocessor)
(int* blocks, CUfunction f, int block_size, size_t dynamic_smem) {
  if (blocks == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUfunc_st* fn;
  CUresult r = ResolveFunction(f, &fn);
  if (r != CUDA_SUCCESS) return r;
  return ActiveBlocks(fn, block_size, dynamic_smem, blocks);
}

RGPU_IMPL(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)
(int* blocks, CUfunction f, int block_size, size_t dynamic_smem, unsigned int flags) {
  return rgpu_impl_cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks, f, block_size, dynamic_smem);
}

RGPU_IMPL(cuOccupancyMaxPotentialBlockSizeWithFlags)
(int* min_grid, int* block_size, CUfunction f, CUoccupancyB2DSize smem_for_block,
 size_t dynamic_smem, int limit, unsigned int flags) {
  if (min_grid == nullptr || block_size == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUfunc_st* fn;
  CUresult r = ResolveFunction(f, &fn);
  if (r != CUDA_SUCCESS) return r;
  int max_threads = 0;
  r = FunctionAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &max_threads);
  if (r != CUDA_SUCCESS) return r;
  const int warp = std::max(1, DeviceAttribute(fn->ctx->device, CU_DEVICE_ATTRIBUTE_WARP_SIZE));
  if (limit > 0) max_threads = std::min(max_threads, limit);
  int best_size = 0, best_blocks = 0;
  long best_threads = -1;
  for (int size = max_threads / warp * warp; size >= warp; size -= warp) {
    const size_t smem = smem_for_block != nullptr ? smem_for_block(size) : dynamic_smem;
    int blocks = 0;
    r = ActiveBlocks(fn, size, smem, &blocks);
    if (r != CUDA_SUCCESS) return r;
    if (static_cast<long>(blocks) * size > best_threads) {
      best_threads = static_cast<long>(blocks) * size;
      best_size = size;
      best_blocks = blocks;
    }
  }
  *block_size = best_size;
  *min_grid =
      best_blocks * DeviceAttribute(fn->ctx->device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuOccupancyMaxPotentialBlockSize)
(int* min_grid, int* block_size, CUfunction f, CUoccupancyB2DSize smem_for_block,
 size_t dynamic_smem, int limit) {
  return rgpu_impl_cuOccupancyMaxPotentialBlockSizeWithFlags(
      min_grid, block_size, f, smem_for_block, dynamic_smem, limit, 0);
}

RGPU_IMPL(cuOccupancyAvailableDynamicSMemPerBlock)
(size_t* smem, CUfunction f, int blocks, int block_size) {
  if (smem == nullptr || blocks <= 0) return CUDA_ERROR_INVALID_VALUE;
  CUfunc_st* fn;
  CUresult r = ResolveFunction(f, &fn);
  if (r != CUDA_SUCCESS) return r;
  int static_smem = 0;
  r = FunctionAttribute(fn, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &static_smem);
  if (r != CUDA_SUCCESS) return r;
  const size_t per_sm =
      DeviceAttribute(fn->ctx->device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  const size_t per_block =
      DeviceAttribute(fn->ctx->device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  size_t share = per_sm / blocks;
  share = std::min(share, per_block);
  *smem = share > static_cast<size_t>(static_smem) ? share - static_smem : 0;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuCtxGetLimit)(size_t* value, CUlimit limit) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  calls::CtxGetLimit::Results got;
  r = Server().Call<calls::CtxGetLimit>(ctx->remote, {.limit = static_cast<uint32_t>(limit)}, &got);
  if (r == CUDA_SUCCESS) *value = got.value;
  return r;
}

RGPU_IMPL(cuCtxSetLimit)(CUlimit limit, size_t value) {
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  return Server().Call<calls::CtxSetLimit>(ctx->remote,
                                           {.limit = static_cast<uint32_t>(limit), .value = value});
}

// A cache hint: the backend's to honour (the software GPU has no cache).
RGPU_IMPL(cuCtxResetPersistingL2Cache)() {
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  return Server().Call<calls::CtxResetPersistingL2Cache>(ctx->remote, {});
}

RGPU_IMPL(cuCtxGetStreamPriorityRange)(int* least, int* greatest) {
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  calls::CtxGetStreamPriorityRange::Results range;
  r = Server().Call<calls::CtxGetStreamPriorityRange>(ctx->remote, {}, &range);
  if (r != CUDA_SUCCESS) return r;
  if (least != nullptr) *least = range.least;
  if (greatest != nullptr) *greatest = range.greatest;
  return CUDA_SUCCESS;
}

namespace {

// The function and the shape fields of an occupancy query's launch configuration.
CUresult ClusterQuery(CUfunction f, const CUlaunchConfig* config, CUfunc_st** fn) {
  if (config == nullptr || (config->numAttrs > 0 && config->attrs == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return ResolveFunction(f, fn);
}

}  // namespace

// Cluster occupancy depends on how the device's multiprocessors group (GPCs): the backend
// answers.
RGPU_IMPL(cuOccupancyMaxActiveClusters)
(int* clusters, CUfunction f, const CUlaunchConfig* config) {
  if (clusters == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUfunc_st* fn;
  CUresult r = ClusterQuery(f, config, &fn);
  if (r != CUDA_SUCCESS) return r;
  calls::OccupancyMaxActiveClusters::Args a = {};
  a.function = fn->remote;
  a.grid_x = config->gridDimX;
  a.grid_y = config->gridDimY;
  a.grid_z = config->gridDimZ;
  a.block_x = config->blockDimX;
  a.block_y = config->blockDimY;
  a.block_z = config->blockDimZ;
  a.shared_bytes = config->sharedMemBytes;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute& attr = config->attrs[i];
    if (attr.id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) continue;
    a.cluster_x = attr.value.clusterDim.x;
    a.cluster_y = attr.value.clusterDim.y;
    a.cluster_z = attr.value.clusterDim.z;
  }
  calls::OccupancyMaxActiveClusters::Results got;
  r = Server().Call<calls::OccupancyMaxActiveClusters>(fn->ctx->remote, a, &got);
  if (r == CUDA_SUCCESS) *clusters = static_cast<int>(got.clusters);
  return r;
}

RGPU_IMPL(cuOccupancyMaxPotentialClusterSize)
(int* size, CUfunction f, const CUlaunchConfig* config) {
  if (size == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUfunc_st* fn;
  CUresult r = ClusterQuery(f, config, &fn);
  if (r != CUDA_SUCCESS) return r;
  calls::OccupancyMaxPotentialClusterSize::Results got;
  r = Server().Call<calls::OccupancyMaxPotentialClusterSize>(
      fn->ctx->remote,
      {.function = fn->remote,
       .grid_x = config->gridDimX,
       .grid_y = config->gridDimY,
       .grid_z = config->gridDimZ,
       .block_x = config->blockDimX,
       .block_y = config->blockDimY,
       .block_z = config->blockDimZ,
       .shared_bytes = config->sharedMemBytes},
      &got);
  if (r == CUDA_SUCCESS) *size = static_cast<int>(got.size);
  return r;
}
