// Contexts: shadowed in the client (per-thread current context and stack, primary contexts with
// stable handles); creation and destruction go to the server, where each is a real context.
#include "client/context_storage.h"
#include "client/impl.h"
#include "client/managed_memory.h"
#include "client/memory_map.h"

namespace calls = rgpu::calls;
using rgpu::client::CheckContext;
using rgpu::client::ClientState;
using rgpu::client::ContextStack;
using rgpu::client::CurrentContext;
using rgpu::client::RequireContext;
using rgpu::client::Server;

namespace {
// The primary context of `dev` for the PrimaryCtx calls, or their error.
CUresult PrimaryContext(CUdevice dev, CUctx_st** out) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  *out = ClientState::Get().primary_context(dev);
  return *out == nullptr ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

}  // namespace

RGPU_IMPL(cuDevicePrimaryCtxRetain)(CUcontext* pctx, CUdevice dev) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ClientState& st = ClientState::Get();
  CUctx_st* ctx;
  CUresult r = PrimaryContext(dev, &ctx);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(st.objects_mutex());
  if (ctx->remote == 0) {
    if (rgpu::client::Connection::Recording() != nullptr) {
      // This thread's posts are being recorded into a graph: the context must be made now.
      calls::PrimaryCtxRetain::Results retained;
      r = Server().Call<calls::PrimaryCtxRetain>(0, {.device = dev, .id = 0}, &retained);
      if (r != CUDA_SUCCESS) return r;
      ctx->remote = retained.ctx;
    } else {
      // Posted, under an id of the client's: the context costs no round trip (a failure to make
      // it surfaces at the next call that waits, as a posted call's).
      const uint64_t id = rgpu::client::NewClientId();
      r = Server().Post<calls::PrimaryCtxRetain>(0, {.device = dev, .id = id});
      if (r != CUDA_SUCCESS) return r;
      ctx->remote = rgpu::client::ServerSet::Tag(Server().device(dev)->server, id);
    }
    ctx->generation++;
    ctx->primary_refs = 0;
  }
  ctx->primary_refs++;
  *pctx = ctx;
  return CUDA_SUCCESS;
}

namespace {
// Deactivates a primary context on the server; its handle stays valid.
// Release (reset = false) or reset the primary context on the server.
CUresult DeactivatePrimary(CUctx_st* ctx, bool reset) {
  // Registered mapped memory gets the device's bytes and becomes the program's own again.
  rgpu::client::UnregisterMappedOf(ctx);
  CUresult r = reset ? Server().Call<calls::PrimaryCtxReset>(0, {.device = ctx->device})
                     : Server().Call<calls::PrimaryCtxRelease>(0, {.device = ctx->device});
  rgpu::client::Memory().EraseContext(ctx);
  ctx->suballocator.Clear();  // its slabs went with the server's context
  rgpu::client::ForgetManaged(ctx);
  rgpu::client::ForgetPerThreadStreams(ctx);
  ctx->remote = 0;
  ctx->primary_refs = 0;
  return r;
}
}  // namespace

RGPU_IMPL(cuDevicePrimaryCtxRelease_v2)(CUdevice dev) {
  ClientState& st = ClientState::Get();
  CUctx_st* ctx;
  CUresult r = PrimaryContext(dev, &ctx);
  if (r != CUDA_SUCCESS) return r;
  {
    std::lock_guard<std::mutex> lock(st.objects_mutex());
    if (ctx->remote == 0 || ctx->primary_refs <= 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx->primary_refs > 1) {
      ctx->primary_refs--;
      return CUDA_SUCCESS;
    }
  }
  rgpu::client::ContextStorageRunDestructors(ctx);
  std::lock_guard<std::mutex> lock(st.objects_mutex());
  return DeactivatePrimary(ctx, /*reset=*/false);
}

RGPU_IMPL(cuDevicePrimaryCtxReset_v2)(CUdevice dev) {
  ClientState& st = ClientState::Get();
  CUctx_st* ctx;
  CUresult r = PrimaryContext(dev, &ctx);
  if (r != CUDA_SUCCESS) return r;
  // Destructors first, while the context still works: they may free what they hold in it.
  rgpu::client::ContextStorageRunDestructors(ctx);
  std::lock_guard<std::mutex> lock(st.objects_mutex());
  if (ctx->remote == 0) return CUDA_SUCCESS;
  return DeactivatePrimary(ctx, /*reset=*/true);
}

RGPU_IMPL(cuDevicePrimaryCtxGetState)(CUdevice dev, unsigned int* flags, int* active) {
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ClientState& st = ClientState::Get();
  CUctx_st* ctx;
  CUresult r = PrimaryContext(dev, &ctx);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(st.objects_mutex());
  *flags = ctx->flags;
  *active = ctx->remote != 0;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuDevicePrimaryCtxSetFlags_v2)(CUdevice dev, unsigned int flags) {
  ClientState& st = ClientState::Get();
  CUctx_st* ctx;
  CUresult r = PrimaryContext(dev, &ctx);
  if (r != CUDA_SUCCESS) return r;
  // Scheduling and mapping flags only affect how the host waits; the server decides that.
  std::lock_guard<std::mutex> lock(st.objects_mutex());
  ctx->flags = flags;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuCtxCreate_v4)
(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags, CUdevice dev) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ClientState& st = ClientState::Get();
  CUresult r = st.CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  if (st.device(dev) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (params != nullptr &&
      (params->execAffinityParams != nullptr || params->cigParams != nullptr)) {
    RGPU_LOG_WARN("cuCtxCreate: execution affinity and CIG parameters are not supported");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  calls::CtxCreate::Results created;
  r = Server().Call<calls::CtxCreate>(0, {.flags = flags, .device = dev}, &created);
  if (r != CUDA_SUCCESS) return r;
  auto* ctx = new CUctx_st();
  ctx->remote = created.ctx;
  ctx->device = dev;
  ctx->flags = flags;
  st.Register(ctx);
  ContextStack().push_back(ctx);
  *pctx = ctx;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuCtxDestroy_v2)(CUcontext ctx) {
  ClientState& st = ClientState::Get();
  if (ctx == nullptr || !st.IsLive(ctx) || ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
  rgpu::client::ContextStorageRunDestructors(ctx);
  rgpu::client::UnregisterMappedOf(ctx);
  CUresult r = Server().Call<calls::CtxDestroy>(0, {.ctx = ctx->remote});
  rgpu::client::Memory().EraseContext(ctx);
  rgpu::client::ForgetManaged(ctx);
  {
    std::lock_guard<std::mutex> lock(st.objects_mutex());
    rgpu::client::ForgetPerThreadStreams(ctx);
  }
  st.Unregister(ctx);
  auto& stack = ContextStack();
  for (auto it = stack.begin(); it != stack.end();) it = *it == ctx ? stack.erase(it) : it + 1;
  delete ctx;
  return r;
}

RGPU_IMPL(cuCtxPushCurrent_v2)(CUcontext ctx) {
  if (ctx == nullptr || !ClientState::Get().IsLive(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  ContextStack().push_back(ctx);
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuCtxPopCurrent_v2)(CUcontext* pctx) {
  auto& stack = ContextStack();
  if (stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx != nullptr) *pctx = stack.back();
  stack.pop_back();
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuCtxSetCurrent)(CUcontext ctx) {
  auto& stack = ContextStack();
  if (ctx == nullptr) {
    if (!stack.empty()) stack.pop_back();
    return CUDA_SUCCESS;
  }
  if (!ClientState::Get().IsLive(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (stack.empty()) {
    stack.push_back(ctx);
  } else {
    stack.back() = ctx;
  }
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuCtxGetCurrent)(CUcontext* pctx) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  *pctx = CurrentContext();
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuCtxGetDevice)(CUdevice* device) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  *device = ctx->device;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuCtxGetDevice_v2)(CUdevice* device, CUcontext ctx) {
  if (ctx == nullptr) return rgpu_impl_cuCtxGetDevice(device);
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ClientState::Get().IsLive(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  *device = ctx->device;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuCtxGetFlags)(unsigned int* flags) {
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  *flags = ctx->flags;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuCtxGetApiVersion)(CUcontext ctx, unsigned int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ctx == nullptr) ctx = CurrentContext();
  if (CheckContext(ctx) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
  *version = 3020;  // the context ABI version every CUDA 3.2+ context reports
  return CUDA_SUCCESS;
}

namespace {
CUresult SynchronizeContext(CUctx_st* ctx) {
  CUresult held = rgpu::client::WaitContextDrained(ctx);
  CUresult r = Server().Call<calls::CtxSynchronize>(ctx->remote, {});
  return r != CUDA_SUCCESS ? r : held;
}
}  // namespace

RGPU_IMPL(cuCtxSynchronize)() {
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  return SynchronizeContext(ctx);
}

RGPU_IMPL(cuCtxSynchronize_v2)(CUcontext ctx) {
  if (ctx == nullptr) return rgpu_impl_cuCtxSynchronize();
  CUresult r = CheckContext(ctx);
  if (r != CUDA_SUCCESS) return r;
  return SynchronizeContext(ctx);
}

// Earlier ABI revisions that NVIDIA's runtime still asks for by version.
RGPU_SAME_AS(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2)
// The names CUDA 2.0 to 3.2 exported for calls whose _v2 kept their parameters (cuGetProcAddress
// hands them to a runtime that asks for those versions).
RGPU_SAME_AS(cuCtxDestroy, cuCtxDestroy_v2)
RGPU_SAME_AS(cuCtxPushCurrent, cuCtxPushCurrent_v2)
RGPU_SAME_AS(cuCtxPopCurrent, cuCtxPopCurrent_v2)

// cuCtxCreate as CUDA 11.4 to 12.4 exported it, with execution affinity parameters (none are
// supported, as cuCtxCreate_v4 says).
extern "C" __attribute__((visibility("default"))) CUresult rgpu_impl_cuCtxCreate_v3(
    CUcontext* pctx, CUexecAffinityParam* params, int count, unsigned int flags, CUdevice dev) {
  if (count < 0 || (count > 0 && params == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  if (count > 0) {
    RGPU_LOG_WARN("cuCtxCreate: execution affinity parameters are not supported");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return rgpu_impl_cuCtxCreate_v4(pctx, nullptr, flags, dev);
}
RGPU_SAME_AS(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2)
RGPU_SAME_AS(cuDevicePrimaryCtxSetFlags, cuDevicePrimaryCtxSetFlags_v2)

extern "C" __attribute__((visibility("default"))) CUresult rgpu_impl_cuCtxCreate_v2(
    CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return rgpu_impl_cuCtxCreate_v4(pctx, nullptr, flags, dev);
}
RGPU_SAME_AS(cuCtxCreate, cuCtxCreate_v2)

RGPU_IMPL(cuCtxGetId)(CUcontext ctx, unsigned long long* id) {
  if (id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ctx == nullptr) ctx = CurrentContext();
  CUresult r = CheckContext(ctx);
  if (r != CUDA_SUCCESS) return r;
  *id = ctx->remote;
  return CUDA_SUCCESS;
}

// Cache and shared-memory configuration of the current context. The cache split is a preference
// (CUDA: "the driver ... is free to choose a different configuration"), kept per context and
// reported back. Every device rgpu serves (compute capability 7.5 and up) has a fixed shared
// memory bank size of four bytes, where setting the bank size "will do nothing".
RGPU_IMPL(cuCtxGetCacheConfig)(CUfunc_cache* config) {
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  *config = ctx->cache_config;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuCtxSetCacheConfig)(CUfunc_cache config) {
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (config < CU_FUNC_CACHE_PREFER_NONE || config > CU_FUNC_CACHE_PREFER_EQUAL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  ctx->cache_config = config;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuCtxGetSharedMemConfig)(CUsharedconfig* config) {
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  *config = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuCtxSetSharedMemConfig)(CUsharedconfig config) {
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  return config >= CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE &&
                 config <= CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE
             ? CUDA_SUCCESS
             : CUDA_ERROR_INVALID_VALUE;
}
