// Kernel launches, function attributes and occupancy.
#include <cuda.h>

#include <cstring>
#include <vector>

#include "common/log.h"
#include "softgpu/api_util.h"
#include "softgpu/architecture.h"
#include "softgpu/interpreter.h"

using namespace softgpu;

namespace {

CUresult FaultToResult(FaultKind kind) {
  switch (kind) {
    case FaultKind::kIllegalAddress:
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    case FaultKind::kMisalignedAddress:
      return CUDA_ERROR_MISALIGNED_ADDRESS;
    case FaultKind::kUnsupported:
      return CUDA_ERROR_NOT_SUPPORTED;
    case FaultKind::kTrap:
      return CUDA_ERROR_LAUNCH_FAILED;
    case FaultKind::kStackOverflow:
      return CUDA_ERROR_LAUNCH_FAILED;
    case FaultKind::kAssert:
      return CUDA_ERROR_ASSERT;
    case FaultKind::kTimeout:
      return CUDA_ERROR_LAUNCH_TIMEOUT;
    case FaultKind::kOutOfResources:
      return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    default:
      return CUDA_ERROR_UNKNOWN;
  }
}

// Upper bound on the host memory one block's registers or local memory may take.
constexpr uint64_t kMaxBlockStateBytes = 1ull << 30;

uint32_t MaxDynamicShared(const Function& fn, const FunctionHandle& h) {
  const uint32_t by_default =
      kSharedPerBlock > fn.shared_bytes ? kSharedPerBlock - fn.shared_bytes : 0;
  return std::max<uint32_t>(by_default, static_cast<uint32_t>(h.max_dynamic_shared));
}

// Blocks of `block_size` threads that fit on one multiprocessor.
int ActiveBlocks(const Function& fn, int block_size, size_t dynamic_shared) {
  if (block_size <= 0 || static_cast<uint32_t>(block_size) > kMaxThreadsPerBlock) return 0;
  if (fn.max_threads != 0 && static_cast<uint32_t>(block_size) > fn.max_threads) return 0;
  const int warps = (block_size + 31) / 32;
  const Architecture& arch = DeviceArchitecture();
  int by_threads = static_cast<int>(arch.max_threads_per_multiprocessor / 32) / warps;
  const uint64_t shared = fn.shared_bytes + dynamic_shared;
  int by_shared = shared == 0 ? 1 << 30 : static_cast<int>(arch.shared_per_multiprocessor / shared);
  // Registers: the decoder's register count (capped like hardware at 255 per thread).
  const uint64_t regs_per_block =
      std::max<uint64_t>(std::min<uint32_t>(fn.num_regs, 255), 1) * 32 * warps;
  // The decoder counts virtual registers, more than a compiler would allocate; a block the
  // function may launch with (up to its MAX_THREADS_PER_BLOCK) always fits once, as it would on a
  // GPU once the compiler has fitted its registers.
  const int by_regs = std::max(static_cast<int>(kRegistersPerBlock / regs_per_block), 1);
  const int n = std::min(
      {by_threads, by_shared, by_regs, static_cast<int>(arch.max_blocks_per_multiprocessor)});
  return std::max(n, 0);
}

// Blocks a cluster may have: 8 (portable), 16 when the function allows non-portable sizes.
constexpr uint32_t kPortableClusterBlocks = 8;

uint32_t MaxClusterBlocks(const Function& fn, const FunctionHandle& h) {
  uint32_t n = h.non_portable_cluster_size ? kMaxClusterBlocks : kPortableClusterBlocks;
  if (fn.max_cluster_rank != 0) n = std::min(n, fn.max_cluster_rank);
  return n;
}

// The cluster shape the function requires (compiled in, else set at run time), or false.
bool RequiredCluster(const Function& fn, const FunctionHandle& h, uint32_t shape[3]) {
  const uint32_t* from = fn.cluster_dims[0] != 0 ? fn.cluster_dims : h.required_cluster;
  if (from[0] == 0) return false;
  for (int i = 0; i < 3; ++i) shape[i] = from[i];
  return true;
}

// A launch's cluster shape. `requested` is the launch's CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
// (null if none); a function with a required shape launches with it (a request must match), one
// that must be launched as clusters (.explicitcluster) needs one of the two; otherwise blocks
// are clusters of one and *explicit_cluster is false. Clusters of more than one block need compute
// capability 9.0 (CUDA_ERROR_NOT_SUPPORTED below it, named at warn level); a shape of more blocks
// than allowed, that does not divide the grid, or whose blocks cannot be resident together fails
// with CUDA_ERROR_INVALID_CLUSTER_SIZE.
CUresult ClusterShape(const Function& fn, const FunctionHandle& h,
                      const CUlaunchAttribute* requested, const uint32_t grid[3], uint32_t threads,
                      uint32_t dynamic_shared, uint32_t sm_count, uint32_t shape[3],
                      bool* explicit_cluster) {
  uint32_t required[3];
  const bool has_required = RequiredCluster(fn, h, required);
  shape[0] = shape[1] = shape[2] = 1;
  *explicit_cluster = false;
  if (requested != nullptr) {
    const uint32_t want[3] = {requested->value.clusterDim.x, requested->value.clusterDim.y,
                              requested->value.clusterDim.z};
    if (want[0] == 0 || want[1] == 0 || want[2] == 0) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    if (has_required &&
        (want[0] != required[0] || want[1] != required[1] || want[2] != required[2])) {
      return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    }
    for (int i = 0; i < 3; ++i) shape[i] = want[i];
  } else if (has_required) {
    for (int i = 0; i < 3; ++i) shape[i] = required[i];
  } else if (fn.explicit_cluster) {
    return CUDA_ERROR_INVALID_CLUSTER_SIZE;  // .explicitcluster: the launch must give a shape
  } else {
    return CUDA_SUCCESS;
  }
  const uint64_t blocks = uint64_t{shape[0]} * shape[1] * shape[2];
  if (DeviceArchitecture().Number() < 90 && blocks == 1) {
    return CUDA_SUCCESS;  // before 9.0 a cluster of one block is simply a block
  }
  *explicit_cluster = true;
  if (DeviceArchitecture().Number() < 90) {
    RGPU_LOG_WARN("softgpu: kernel %s: thread-block clusters need compute capability 9.0",
                  fn.name.c_str());
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (blocks > MaxClusterBlocks(fn, h)) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  for (int i = 0; i < 3; ++i) {
    if (grid[i] % shape[i] != 0) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  }
  const uint64_t resident =
      static_cast<uint64_t>(ActiveBlocks(fn, static_cast<int>(threads), dynamic_shared)) * sm_count;
  if (blocks > resident) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  return CUDA_SUCCESS;
}

// Builds the parameter buffer from kernelParams or the `extra` array.
CUresult PackParams(const Function& fn, void** kernel_params, void** extra,
                    std::vector<uint8_t>* out) {
  out->assign(fn.param_bytes, 0);
  if (kernel_params != nullptr && extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (extra != nullptr) {
    const void* buffer = nullptr;
    size_t size = 0;
    bool have_size = false;
    for (size_t i = 0; i < 64 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
        buffer = extra[i + 1];
      } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
        if (extra[i + 1] == nullptr) return CUDA_ERROR_INVALID_VALUE;
        size = *static_cast<const size_t*>(extra[i + 1]);
        have_size = true;
      } else {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    if (fn.param_bytes == 0) return CUDA_SUCCESS;
    if (buffer == nullptr || !have_size || size < fn.param_bytes) return CUDA_ERROR_INVALID_VALUE;
    memcpy(out->data(), buffer, fn.param_bytes);
    return CUDA_SUCCESS;
  }
  if (fn.params.empty()) return CUDA_SUCCESS;
  if (kernel_params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < fn.params.size(); ++i) {
    if (kernel_params[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
    memcpy(out->data() + fn.params[i].offset, kernel_params[i], fn.params[i].size);
  }
  return CUDA_SUCCESS;
}

// Size of cooperative_groups' grid_workspace (a 32-bit size, then the 32-bit barrier word).
constexpr uint32_t kGridWorkspaceBytes = 8;

// Validates and enqueues a launch. A cooperative launch must fit on the device at once (the
// occupancy calculation times the multiprocessors) and gets a fresh grid workspace.
CUresult Launch(CUfunction f, const uint32_t grid[3], const uint32_t block[3],
                unsigned shared_bytes, CUstream stream, void** kernel_params, void** extra,
                bool cooperative, const CUlaunchAttribute* cluster = nullptr) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  std::shared_ptr<FunctionHandle> fh;
  std::shared_ptr<Module> module;
  if (CUresult r = ResolveFunction(f, &fh, &module); r != CUDA_SUCCESS) return r;
  if (module->context() != ctx.get()) return CUDA_ERROR_INVALID_HANDLE;
  std::shared_ptr<Stream> s;
  if (CUresult r = ResolveStream(ctx, stream, &s); r != CUDA_SUCCESS) return r;
  const Function& fn = module->program().functions[fh->index];
  uint64_t threads = 1;
  for (int i = 0; i < 3; ++i) {
    if (grid[i] == 0 || grid[i] > kMaxGridDim[i]) return CUDA_ERROR_INVALID_VALUE;
    if (block[i] == 0 || block[i] > kMaxBlockDim[i]) return CUDA_ERROR_INVALID_VALUE;
    threads *= block[i];
  }
  if (threads > kMaxThreadsPerBlock) return CUDA_ERROR_INVALID_VALUE;
  if (fn.max_threads != 0 && threads > fn.max_threads) return CUDA_ERROR_INVALID_VALUE;
  if (shared_bytes > MaxDynamicShared(fn, *fh) ||
      fn.shared_bytes + static_cast<uint64_t>(shared_bytes) >
          DeviceArchitecture().shared_per_block_optin) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // The interpreter keeps every virtual register and every thread's local memory in host
  // memory; refuse launches whose per-block state would not fit comfortably.
  const uint64_t warps = (threads + kWarpSize - 1) / kWarpSize;
  const uint64_t register_bytes = warps * fn.num_regs * kWarpSize * sizeof(uint64_t);
  const uint64_t local_bytes = threads * (fn.local_bytes + static_cast<uint64_t>(ctx->stack_size));
  if (register_bytes > kMaxBlockStateBytes || local_bytes > kMaxBlockStateBytes) {
    return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  }
  if (cooperative) {
    const uint64_t blocks = uint64_t{grid[0]} * grid[1] * grid[2];
    const uint64_t resident =
        static_cast<uint64_t>(ActiveBlocks(fn, static_cast<int>(threads), shared_bytes)) *
        ctx->device()->sm_count();
    if (blocks > resident) return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  }
  uint32_t cluster_shape[3];
  bool explicit_cluster;
  if (CUresult r =
          ClusterShape(fn, *fh, cluster, grid, static_cast<uint32_t>(threads), shared_bytes,
                       ctx->device()->sm_count(), cluster_shape, &explicit_cluster);
      r != CUDA_SUCCESS) {
    return r;
  }
  if (cooperative && explicit_cluster) {
    RGPU_LOG_WARN("softgpu: kernel %s: a cooperative launch of clusters is not supported",
                  fn.name.c_str());
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  const std::string unsupported = FindUnsupported(module->program(), fh->index);
  if (!unsupported.empty()) {
    fprintf(stderr, "softgpu: kernel %s cannot run: unsupported instruction %s\n", fn.name.c_str(),
            unsupported.c_str());
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  auto params = std::make_shared<std::vector<uint8_t>>();
  if (CUresult r = PackParams(fn, kernel_params, extra, params.get()); r != CUDA_SUCCESS) return r;
  LaunchParams lp;
  lp.program = &module->program();
  lp.function = fh->index;
  lp.consts = module->consts().data();
  for (int i = 0; i < 3; ++i) {
    lp.grid[i] = grid[i];
    lp.block[i] = block[i];
  }
  lp.dynamic_shared = shared_bytes;
  lp.param_size = fn.param_bytes;
  lp.memory = &ctx->memory();
  lp.owner = ctx.get();
  lp.sm_count = ctx->device()->sm_count();
  lp.stack_bytes = static_cast<uint32_t>(ctx->stack_size);
  lp.printf_sink = ctx.get();
  lp.heap = &ctx->heap();
  lp.cancel = &ctx->cancelled();
  lp.cooperative = cooperative;
  for (int i = 0; i < 3; ++i) lp.cluster[i] = cluster_shape[i];
  lp.explicit_cluster = explicit_cluster;
  if (cooperative) {
    // The workspace lives in the context's memory (the kernel reaches it like any global
    // memory) until the launch has run; a launch dropped unrun leaves it to cuCtxDestroy.
    if (ctx->memory().Allocate(kGridWorkspaceBytes, &lp.grid_workspace) !=
        AddressSpace::Result::kOk) {
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    uint8_t* ws = ctx->memory().Translate(lp.grid_workspace, kGridWorkspaceBytes);
    const uint32_t header[2] = {kGridWorkspaceBytes, 0};  // wsSize, barrier
    memcpy(ws, header, sizeof header);
  }
  const uint64_t timeout_ms = ctx->kernel_timeout_ms.load();
  Context* c = ctx.get();
  RGPU_LOG_DEBUG("softgpu: launch %s grid (%u,%u,%u) block (%u,%u,%u) shared %u stream %p",
                 fn.name.c_str(), grid[0], grid[1], grid[2], block[0], block[1], block[2],
                 shared_bytes, static_cast<void*>(s.get()));
  ctx->Enqueue(s, [lp, params, module, c, timeout_ms]() mutable {
    lp.params = params->data();
    if (timeout_ms != 0)
      lp.deadline_ns = SteadyNowNs() + static_cast<int64_t>(timeout_ms) * 1000000;
    Fault fault = RunGrid(lp);
    if (lp.grid_workspace != 0) c->memory().Free(lp.grid_workspace);
    if (fault.kind != FaultKind::kNone && fault.kind != FaultKind::kCancelled) {
      c->Fail(FaultToResult(fault.kind),
              "kernel " + module->program().functions[lp.function].name + ": " + fault.message +
                  (fault.line != 0 ? " (PTX line " + std::to_string(fault.line) + ")" : ""));
    }
  });
  return CUDA_SUCCESS;
}

}  // namespace

SOFTGPU_EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX,
                                               unsigned int gridDimY, unsigned int gridDimZ,
                                               unsigned int blockDimX, unsigned int blockDimY,
                                               unsigned int blockDimZ, unsigned int sharedMemBytes,
                                               CUstream hStream, void** kernelParams,
                                               void** extra) {
  return Guard([&] {
    const uint32_t grid[3] = {gridDimX, gridDimY, gridDimZ};
    const uint32_t block[3] = {blockDimX, blockDimY, blockDimZ};
    return Launch(f, grid, block, sharedMemBytes, hStream, kernelParams, extra, false);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel(
    CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
    unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
    unsigned int sharedMemBytes, CUstream hStream, void** kernelParams) {
  return Guard([&] {
    const uint32_t grid[3] = {gridDimX, gridDimY, gridDimZ};
    const uint32_t block[3] = {blockDimX, blockDimY, blockDimZ};
    return Launch(f, grid, block, sharedMemBytes, hStream, kernelParams, nullptr, true);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f,
                                                 void** kernelParams, void** extra) {
  return Guard([&] {
    if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (config->numAttrs != 0 && config->attrs == nullptr) return CUDA_ERROR_INVALID_VALUE;
    bool cooperative = false;
    const CUlaunchAttribute* cluster = nullptr;
    for (unsigned i = 0; i < config->numAttrs; ++i) {
      const CUlaunchAttribute& a = config->attrs[i];
      switch (a.id) {
        case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
          cluster = &a;
          break;
        case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
          break;  // a best-effort regrouping; the regular clusters are always a valid choice
        case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
          cooperative = a.value.cooperative != 0;
          break;
        case CU_LAUNCH_ATTRIBUTE_IGNORE:
        case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
        case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
        case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        case CU_LAUNCH_ATTRIBUTE_PRIORITY:
        case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
        case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
        case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
          break;  // hints that do not change the result
        default:
          return CUDA_ERROR_NOT_SUPPORTED;
      }
    }
    const uint32_t grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
    const uint32_t block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
    return Launch(f, grid, block, config->sharedMemBytes, config->hStream, kernelParams, extra,
                  cooperative, cluster);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuFuncGetAttribute(int* pi, CUfunction_attribute attrib,
                                                   CUfunction hfunc) {
  return Guard([&] {
    std::shared_ptr<FunctionHandle> fh;
    std::shared_ptr<Module> m;
    if (CUresult r = ResolveFunction(hfunc, &fh, &m); r != CUDA_SUCCESS) return r;
    if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const Function& fn = m->program().functions[fh->index];
    switch (attrib) {
      case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *pi = static_cast<int>(fn.max_threads != 0 ? std::min(fn.max_threads, kMaxThreadsPerBlock)
                                                   : kMaxThreadsPerBlock);
        break;
      case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
        *pi = static_cast<int>(fn.shared_bytes);
        break;
      case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
        *pi = 0;
        break;
      case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
        *pi = static_cast<int>(fn.local_bytes);
        break;
      case CU_FUNC_ATTRIBUTE_NUM_REGS:
        *pi = static_cast<int>(std::min<uint32_t>(fn.num_regs, 255));
        break;
      case CU_FUNC_ATTRIBUTE_PTX_VERSION:
        // The virtual architecture the PTX was compiled for (CUB picks its tuning by it), as
        // the driver reports for JIT-compiled code; the binary is the device's.
        *pi = static_cast<int>(m->program().target_arch != 0 ? m->program().target_arch
                                                             : DeviceArchitecture().Number());
        break;
      case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
        *pi = static_cast<int>(DeviceArchitecture().Number());
        break;
      case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
        *pi = 0;
        break;
      case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        *pi = static_cast<int>(MaxDynamicShared(fn, *fh));
        break;
      case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        *pi = fh->preferred_carveout;
        break;
      case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET:
        *pi = fn.explicit_cluster ? 1 : 0;
        break;
      case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
      case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
      case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH: {
        uint32_t shape[3] = {0, 0, 0};
        RequiredCluster(fn, *fh, shape);
        *pi = static_cast<int>(shape[attrib - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH]);
        break;
      }
      case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
        *pi = fh->non_portable_cluster_size ? 1 : 0;
        break;
      case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        *pi = fh->cluster_scheduling_policy;
        break;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib,
                                                   int value) {
  return Guard([&] {
    std::shared_ptr<FunctionHandle> fh;
    std::shared_ptr<Module> m;
    if (CUresult r = ResolveFunction(hfunc, &fh, &m); r != CUDA_SUCCESS) return r;
    const Function& fn = m->program().functions[fh->index];
    switch (attrib) {
      case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        if (value < 0 || fn.shared_bytes + static_cast<uint64_t>(value) >
                             DeviceArchitecture().shared_per_block_optin) {
          return CUDA_ERROR_INVALID_VALUE;
        }
        fh->max_dynamic_shared = value;
        return CUDA_SUCCESS;
      case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        if (value < -1 || value > 100) return CUDA_ERROR_INVALID_VALUE;
        fh->preferred_carveout = value;
        return CUDA_SUCCESS;
      case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        if (value < CU_CLUSTER_SCHEDULING_POLICY_DEFAULT ||
            value > CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING) {
          return CUDA_ERROR_INVALID_VALUE;
        }
        fh->cluster_scheduling_policy = value;  // where blocks go: the results are the same
        return CUDA_SUCCESS;
      case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
        if (value != 0 && value != 1) return CUDA_ERROR_INVALID_VALUE;
        fh->non_portable_cluster_size = value == 1;
        return CUDA_SUCCESS;
      case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
      case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
      case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
        // Checked at launch, as CUDA checks it (all three 0 or all positive).
        if (fn.cluster_dims[0] != 0) return CUDA_ERROR_NOT_PERMITTED;  // compiled in
        if (value < 0 || value > static_cast<int>(kMaxClusterBlocks)) {
          return CUDA_ERROR_INVALID_VALUE;
        }
        fh->required_cluster[attrib - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH] =
            static_cast<uint32_t>(value);
        return CUDA_SUCCESS;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config) {
  return Guard([&] {
    std::shared_ptr<FunctionHandle> fh;
    std::shared_ptr<Module> m;
    if (CUresult r = ResolveFunction(hfunc, &fh, &m); r != CUDA_SUCCESS) return r;
    if (config < CU_FUNC_CACHE_PREFER_NONE || config > CU_FUNC_CACHE_PREFER_EQUAL) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    fh->cache_config = config;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(
    int* numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize) {
  return Guard([&] {
    std::shared_ptr<FunctionHandle> fh;
    std::shared_ptr<Module> m;
    if (CUresult r = ResolveFunction(func, &fh, &m); r != CUDA_SUCCESS) return r;
    if (numBlocks == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *numBlocks = ActiveBlocks(m->program().functions[fh->index], blockSize, dynamicSMemSize);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize, unsigned int flags) {
  return cuOccupancyMaxActiveBlocksPerMultiprocessor(numBlocks, func, blockSize, dynamicSMemSize);
}

SOFTGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(
    int* minGridSize, int* blockSize, CUfunction func,
    CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit) {
  return Guard([&] {
    std::shared_ptr<FunctionHandle> fh;
    std::shared_ptr<Module> m;
    if (CUresult r = ResolveFunction(func, &fh, &m); r != CUDA_SUCCESS) return r;
    if (minGridSize == nullptr || blockSize == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const Function& fn = m->program().functions[fh->index];
    int limit = static_cast<int>(kMaxThreadsPerBlock);
    if (fn.max_threads != 0) limit = std::min(limit, static_cast<int>(fn.max_threads));
    if (blockSizeLimit > 0) limit = std::min(limit, blockSizeLimit);
    int best_size = 0, best_threads = -1, best_blocks = 0;
    for (int size = (limit / 32) * 32; size >= 32; size -= 32) {
      const size_t shared = blockSizeToDynamicSMemSize != nullptr ? blockSizeToDynamicSMemSize(size)
                                                                  : dynamicSMemSize;
      const int blocks = ActiveBlocks(fn, size, shared);
      if (blocks * size > best_threads) {
        best_threads = blocks * size;
        best_size = size;
        best_blocks = blocks;
      }
    }
    if (best_size == 0) {
      best_size = std::max(1, std::min(limit, 32));
      best_blocks = 1;
    }
    *blockSize = best_size;
    std::shared_ptr<Context> ctx = GetDriver().contexts.Find(m->context());
    if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    *minGridSize = best_blocks * static_cast<int>(ctx->device()->sm_count());
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialBlockSizeWithFlags(
    int* minGridSize, int* blockSize, CUfunction func,
    CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit,
    unsigned int flags) {
  return cuOccupancyMaxPotentialBlockSize(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
                                          dynamicSMemSize, blockSizeLimit);
}

SOFTGPU_EXPORT CUresult CUDAAPI cuOccupancyAvailableDynamicSMemPerBlock(size_t* dynamicSmemSize,
                                                                        CUfunction func,
                                                                        int numBlocks,
                                                                        int blockSize) {
  return Guard([&] {
    std::shared_ptr<FunctionHandle> fh;
    std::shared_ptr<Module> m;
    if (CUresult r = ResolveFunction(func, &fh, &m); r != CUDA_SUCCESS) return r;
    if (dynamicSmemSize == nullptr || numBlocks <= 0 || blockSize <= 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const Function& fn = m->program().functions[fh->index];
    if (ActiveBlocks(fn, blockSize, 0) < numBlocks) {
      *dynamicSmemSize = 0;
      return CUDA_SUCCESS;
    }
    const Architecture& arch = DeviceArchitecture();
    const uint64_t per_block = arch.shared_per_multiprocessor / static_cast<uint64_t>(numBlocks);
    const uint64_t limit = arch.shared_per_block_optin;
    const uint64_t usable = std::min(per_block, limit);
    *dynamicSmemSize = usable > fn.shared_bytes ? usable - fn.shared_bytes : 0;
    return CUDA_SUCCESS;
  });
}

namespace {

// What an occupancy query of a launch configuration is about: the kernel, its module and
// context (the module's), and the configuration's threads per block. `out` is the caller's
// result pointer, which must not be null.
struct OccupancyTarget {
  std::shared_ptr<FunctionHandle> fh;
  std::shared_ptr<Module> m;
  std::shared_ptr<Context> ctx;
  const Function* fn = nullptr;
  uint32_t threads = 0;
};

CUresult OccupancyQuery(CUfunction func, const CUlaunchConfig* config, const void* out,
                        OccupancyTarget* t) {
  if (CUresult r = ResolveFunction(func, &t->fh, &t->m); r != CUDA_SUCCESS) return r;
  if (out == nullptr || config == nullptr || (config->numAttrs != 0 && config->attrs == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  t->ctx = GetDriver().contexts.Find(t->m->context());
  if (t->ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  const uint64_t threads = uint64_t{config->blockDimX} * config->blockDimY * config->blockDimZ;
  if (threads == 0 || threads > kMaxThreadsPerBlock) return CUDA_ERROR_INVALID_VALUE;
  t->threads = static_cast<uint32_t>(threads);
  t->fn = &t->m->program().functions[t->fh->index];
  return CUDA_SUCCESS;
}

// Blocks of the query's configuration resident on the whole device at once.
uint64_t ResidentBlocks(const OccupancyTarget& t, const CUlaunchConfig& config) {
  return static_cast<uint64_t>(
             ActiveBlocks(*t.fn, static_cast<int>(t.threads), config.sharedMemBytes)) *
         t.ctx->device()->sm_count();
}

}  // namespace

// The most clusters of the configuration's shape (its CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, or
// the function's required shape) resident at once: the device's resident blocks of this size
// divided by the cluster's blocks.
SOFTGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxActiveClusters(int* numClusters, CUfunction func,
                                                             const CUlaunchConfig* config) {
  return Guard([&] {
    OccupancyTarget t;
    if (CUresult r = OccupancyQuery(func, config, numClusters, &t); r != CUDA_SUCCESS) return r;
    uint32_t shape[3] = {0, 0, 0};
    bool has_shape = RequiredCluster(*t.fn, *t.fh, shape);
    for (unsigned i = 0; i < config->numAttrs; ++i) {
      const CUlaunchAttribute& a = config->attrs[i];
      if (a.id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) continue;
      const uint32_t want[3] = {a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z};
      if (has_shape && (want[0] != shape[0] || want[1] != shape[1] || want[2] != shape[2])) {
        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
      }
      for (int k = 0; k < 3; ++k) shape[k] = want[k];
      has_shape = true;
    }
    if (!has_shape) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    const uint64_t blocks = uint64_t{shape[0]} * shape[1] * shape[2];
    if (blocks == 0 || blocks > MaxClusterBlocks(*t.fn, *t.fh)) {
      return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    }
    if (DeviceArchitecture().Number() < 90) return CUDA_ERROR_NOT_SUPPORTED;
    *numClusters =
        static_cast<int>(std::min<uint64_t>(ResidentBlocks(t, *config) / blocks, 1u << 30));
    return CUDA_SUCCESS;
  });
}

// The largest cluster of the configuration's blocks that can be resident: the function's required
// shape if it has one, else the most blocks allowed (8, or 16 when non-portable sizes are
// allowed) that fit on the device at once.
SOFTGPU_EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialClusterSize(int* clusterSize,
                                                                   CUfunction func,
                                                                   const CUlaunchConfig* config) {
  return Guard([&] {
    OccupancyTarget t;
    if (CUresult r = OccupancyQuery(func, config, clusterSize, &t); r != CUDA_SUCCESS) return r;
    if (DeviceArchitecture().Number() < 90) {
      *clusterSize = 0;
      return CUDA_SUCCESS;
    }
    uint32_t shape[3];
    if (RequiredCluster(*t.fn, *t.fh, shape)) {
      *clusterSize = static_cast<int>(shape[0] * shape[1] * shape[2]);
      return CUDA_SUCCESS;
    }
    *clusterSize = static_cast<int>(
        std::min<uint64_t>(MaxClusterBlocks(*t.fn, *t.fh), ResidentBlocks(t, *config)));
    return CUDA_SUCCESS;
  });
}

// Library kernels: attributes apply to the kernel's function in the current context.
SOFTGPU_EXPORT CUresult CUDAAPI cuKernelGetAttribute(int* pi, CUfunction_attribute attrib,
                                                     CUkernel kernel, CUdevice dev) {
  if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
  if (FindDevice(dev) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  return cuFuncGetAttribute(pi, attrib, reinterpret_cast<CUfunction>(kernel));
}

SOFTGPU_EXPORT CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val,
                                                     CUkernel kernel, CUdevice dev) {
  if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
  if (FindDevice(dev) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  return cuFuncSetAttribute(reinterpret_cast<CUfunction>(kernel), attrib, val);
}

SOFTGPU_EXPORT CUresult CUDAAPI cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config,
                                                       CUdevice dev) {
  if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
  if (FindDevice(dev) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  return cuFuncSetCacheConfig(reinterpret_cast<CUfunction>(kernel), config);
}
