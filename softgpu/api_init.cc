// cuInit, versions, error strings, and the helpers in api_util.h.
#include <cuda.h>

#include "softgpu/api_util.h"
#include "softgpu/errors.h"

namespace softgpu {

std::vector<CUcontext>& ContextStack() {
  thread_local std::vector<CUcontext> stack;
  return stack;
}

CUresult CurrentContext(std::shared_ptr<Context>* out) {
  if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
  auto& stack = ContextStack();
  if (stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  std::shared_ptr<Context> ctx = GetDriver().contexts.Find(stack.back());
  if (ctx == nullptr || !ctx->alive()) return CUDA_ERROR_INVALID_CONTEXT;
  *out = std::move(ctx);
  return CUDA_SUCCESS;
}

CUresult UsableContext(std::shared_ptr<Context>* out) {
  if (CUresult r = CurrentContext(out); r != CUDA_SUCCESS) return r;
  return (*out)->sticky_error();
}

CUresult ResolveStream(const std::shared_ptr<Context>& ctx, CUstream handle,
                       std::shared_ptr<Stream>* out) {
  if (handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) {
    *out = ctx->default_stream();
    return CUDA_SUCCESS;
  }
  std::shared_ptr<Stream> s = GetDriver().streams.Find(handle);
  if (s == nullptr || s->context() != ctx.get()) return CUDA_ERROR_INVALID_HANDLE;
  *out = std::move(s);
  return CUDA_SUCCESS;
}

CUresult ResolveFunction(CUfunction handle, std::shared_ptr<FunctionHandle>* function,
                         std::shared_ptr<Module>* module) {
  if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
  if (handle == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  Driver& d = GetDriver();
  if (std::shared_ptr<FunctionHandle> f = d.functions.Find(handle)) {
    std::shared_ptr<Module> m = d.modules.Find(f->module);
    if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    *function = std::move(f);
    *module = std::move(m);
    return CUDA_SUCCESS;
  }
  if (std::shared_ptr<KernelHandle> k = d.kernels.Find(handle)) {
    std::shared_ptr<Library> lib = d.libraries.Find(k->library);
    if (lib == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    std::shared_ptr<Context> ctx;
    if (CUresult r = CurrentContext(&ctx); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Module> m;
    if (CUresult r = lib->Instance(ctx.get(), &m); r != CUDA_SUCCESS) return r;
    *function = m->functions()[k->index];
    *module = std::move(m);
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_HANDLE;
}

}  // namespace softgpu

using namespace softgpu;

SOFTGPU_EXPORT CUresult CUDAAPI cuInit(unsigned int Flags) {
  return Guard([&] {
    if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
    return InitializeDriver();
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuDriverGetVersion(int* driverVersion) {
  if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = CUDA_VERSION;
  return CUDA_SUCCESS;
}

SOFTGPU_EXPORT CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ErrorName(error, pStr)) {
    *pStr = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

SOFTGPU_EXPORT CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ErrorText(error, pStr)) {
    *pStr = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
