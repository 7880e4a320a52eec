// Contexts: creation, the per-thread context stack, synchronization and limits.
#include <cuda.h>

#include <algorithm>

#include "softgpu/api_util.h"
#include "softgpu/interpreter.h"

using namespace softgpu;

namespace {

CUresult FindContext(CUcontext handle, std::shared_ptr<Context>* out) {
  std::shared_ptr<Context> ctx = GetDriver().contexts.Find(handle);
  if (ctx == nullptr || !ctx->alive()) return CUDA_ERROR_INVALID_CONTEXT;
  *out = std::move(ctx);
  return CUDA_SUCCESS;
}

}  // namespace

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxCreate(CUcontext* pctx, CUctxCreateParams* ctxCreateParams,
                                            unsigned int flags, CUdevice dev) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Device* d = FindDevice(dev);
    if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
    if (ctxCreateParams != nullptr &&
        (ctxCreateParams->numExecAffinityParams != 0 || ctxCreateParams->cigParams != nullptr)) {
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (flags & ~0x1fu) return CUDA_ERROR_INVALID_VALUE;
    auto ctx = std::make_shared<Context>(d, flags, /*primary=*/false);
    GetDriver().contexts.Add(ctx);
    CUcontext handle = reinterpret_cast<CUcontext>(ctx.get());
    ContextStack().push_back(handle);
    *pctx = handle;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Context> c = GetDriver().contexts.Find(ctx);
    if (c == nullptr || c->primary()) return CUDA_ERROR_INVALID_CONTEXT;
    GetDriver().contexts.Remove(ctx);
    DestroyContextResources(c);
    ReleasePageLockedOf(reinterpret_cast<CUcontext>(c.get()));
    auto& stack = ContextStack();
    stack.erase(std::remove(stack.begin(), stack.end(), ctx), stack.end());
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    auto& stack = ContextStack();
    if (ctx == nullptr) {
      if (!stack.empty()) stack.pop_back();
      return CUDA_SUCCESS;
    }
    std::shared_ptr<Context> c;
    if (CUresult r = FindContext(ctx, &c); r != CUDA_SUCCESS) return r;
    if (stack.empty())
      stack.push_back(ctx);
    else
      stack.back() = ctx;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto& stack = ContextStack();
    *pctx = stack.empty() ? nullptr : stack.back();
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Context> c;
    if (CUresult r = FindContext(ctx, &c); r != CUDA_SUCCESS) return r;
    ContextStack().push_back(ctx);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxPopCurrent(CUcontext* pctx) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    auto& stack = ContextStack();
    if (stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
    if (pctx != nullptr) *pctx = stack.back();
    stack.pop_back();
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = CurrentContext(&ctx); r != CUDA_SUCCESS) return r;
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *device = ctx->device()->ordinal();
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  if (ctx == nullptr) return cuCtxGetDevice(device);
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Context> c;
    if (CUresult r = FindContext(ctx, &c); r != CUDA_SUCCESS) return r;
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *device = c->device()->ordinal();
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxGetFlags(unsigned int* flags) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = CurrentContext(&ctx); r != CUDA_SUCCESS) return r;
    if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *flags = ctx->flags();
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxSynchronize(void) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = CurrentContext(&ctx); r != CUDA_SUCCESS) return r;
    return ctx->Synchronize();
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) {
  if (ctx == nullptr) return cuCtxSynchronize();
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Context> c;
    if (CUresult r = FindContext(ctx, &c); r != CUDA_SUCCESS) return r;
    return c->Synchronize();
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxGetLimit(size_t* pvalue, CUlimit limit) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = CurrentContext(&ctx); r != CUDA_SUCCESS) return r;
    if (pvalue == nullptr) return CUDA_ERROR_INVALID_VALUE;
    switch (limit) {
      case CU_LIMIT_STACK_SIZE:
        *pvalue = ctx->stack_size;
        break;
      case CU_LIMIT_PRINTF_FIFO_SIZE:
        *pvalue = ctx->printf_fifo_size;
        break;
      case CU_LIMIT_MALLOC_HEAP_SIZE:
        *pvalue = ctx->heap().size();
        break;
      case CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH:
        *pvalue = ctx->sync_depth;
        break;
      case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT:
        *pvalue = ctx->pending_launches;
        break;
      case CU_LIMIT_MAX_L2_FETCH_GRANULARITY:
        *pvalue = 64;
        break;
      case CU_LIMIT_PERSISTING_L2_CACHE_SIZE:
        *pvalue = ctx->persisting_l2_bytes.load();
        break;
      case CU_LIMIT_CIG_ENABLED:
        *pvalue = 0;  // no context of softgpu's is a CUDA-in-graphics context (cuBLAS asks)
        break;
      default:
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    }
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = CurrentContext(&ctx); r != CUDA_SUCCESS) return r;
    switch (limit) {
      case CU_LIMIT_STACK_SIZE:
        if (value > (128u << 10)) return CUDA_ERROR_INVALID_VALUE;
        ctx->stack_size = (value + 15) / 16 * 16;
        break;
      case CU_LIMIT_PRINTF_FIFO_SIZE:
        if (value > (1ull << 30)) return CUDA_ERROR_INVALID_VALUE;
        ctx->printf_fifo_size = value;
        break;
      case CU_LIMIT_MALLOC_HEAP_SIZE:
        // Fixed once a kernel has used malloc, as on a GPU.
        if (!ctx->heap().SetSize(value)) return CUDA_ERROR_INVALID_VALUE;
        break;
      case CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH:
        ctx->sync_depth = value;
        break;
      case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT:
        ctx->pending_launches = value;
        break;
      case CU_LIMIT_MAX_L2_FETCH_GRANULARITY:
        break;
      case CU_LIMIT_PERSISTING_L2_CACHE_SIZE:
        if (value > kMaxPersistingL2Bytes) return CUDA_ERROR_INVALID_VALUE;
        ctx->persisting_l2_bytes = value;
        break;
      default:
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    }
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxGetStreamPriorityRange(int* leastPriority,
                                                            int* greatestPriority) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = CurrentContext(&ctx); r != CUDA_SUCCESS) return r;
    if (leastPriority != nullptr) *leastPriority = 0;
    if (greatestPriority != nullptr) *greatestPriority = -5;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int* version) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<Context> c;
    CUresult r = ctx == nullptr ? CurrentContext(&c) : FindContext(ctx, &c);
    if (r != CUDA_SUCCESS) return r;
    *version = 3020;
    return CUDA_SUCCESS;
  });
}

// softgpu's own extension (not part of CUDA): where device printf output of a context goes.
// With a handler, the output of each synchronization is passed to handler(user, data, size)
// instead of being written to stdout; NULL restores stdout. rgpu-server uses it to send each
// tenant's output back to the tenant.
extern "C" SOFTGPU_EXPORT CUresult
softgpuCtxSetPrintfHandler(CUcontext ctx, void (*handler)(void*, const char*, size_t), void* user) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Context> c;
    if (CUresult r = FindContext(ctx, &c); r != CUDA_SUCCESS) return r;
    c->SetPrintfHandler(handler, user);
    return CUDA_SUCCESS;
  });
}

// softgpu's own extensions (not part of CUDA) for a server that shares the device between tenants:
// softgpuCtxAbort stops a context's work from any thread (running kernels end at their next
// check, queued work is dropped, later calls see CUDA_ERROR_LAUNCH_FAILED as the sticky error),
// for a tenant that is gone; softgpuCtxSetKernelTimeout bounds how long each kernel launched in
// the context from now on may run (0: no bound) before it fails with CUDA_ERROR_LAUNCH_TIMEOUT,
// as a GPU's watchdog ends a kernel.
extern "C" SOFTGPU_EXPORT CUresult softgpuCtxAbort(CUcontext ctx) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Context> c;
    if (CUresult r = FindContext(ctx, &c); r != CUDA_SUCCESS) return r;
    c->Abort(CUDA_ERROR_LAUNCH_FAILED);
    return CUDA_SUCCESS;
  });
}

extern "C" SOFTGPU_EXPORT CUresult softgpuCtxSetKernelTimeout(CUcontext ctx,
                                                              unsigned long long ms) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Context> c;
    if (CUresult r = FindContext(ctx, &c); r != CUDA_SUCCESS) return r;
    c->kernel_timeout_ms.store(ms);
    return CUDA_SUCCESS;
  });
}

// softgpu's own extension: lane-instructions executed by every kernel so far (each instruction
// counted once per active lane), for benchmarks.
extern "C" SOFTGPU_EXPORT CUresult softgpuGetLaneInstructions(unsigned long long* count) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = LaneInstructionsExecuted();
  return CUDA_SUCCESS;
}
