// CUDA arrays: creation, destruction and descriptors. Copies to and from arrays are in
// api_memory.cc.
#include <cuda.h>

#include "softgpu/api_util.h"

using namespace softgpu;

namespace softgpu {

CUresult ResolveArray(const Context* ctx, CUarray handle, std::shared_ptr<Array>* out) {
  std::shared_ptr<Array> a = GetDriver().arrays.Find(handle);
  if (a == nullptr || a->owner != ctx) return CUDA_ERROR_INVALID_HANDLE;
  *out = std::move(a);
  return CUDA_SUCCESS;
}

}  // namespace softgpu

namespace {

CUresult CreateArray(CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR& desc) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto a = std::make_shared<Array>();
  if (CUresult r = Array::Layout(desc, a.get()); r != CUDA_SUCCESS) return r;
  a->owner = ctx.get();
  switch (ctx->memory().Allocate(a->bytes, &a->address)) {
    case AddressSpace::Result::kOk:
      break;
    case AddressSpace::Result::kOutOfMemory:
      return CUDA_ERROR_OUT_OF_MEMORY;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  GetDriver().arrays.Add(a);
  *out = reinterpret_cast<CUarray>(a.get());
  return CUDA_SUCCESS;
}

CUresult FindArray(CUarray handle, std::shared_ptr<Context>* ctx, std::shared_ptr<Array>* out) {
  if (CUresult r = CurrentContext(ctx); r != CUDA_SUCCESS) return r;
  return ResolveArray(ctx->get(), handle, out);
}

}  // namespace

SOFTGPU_EXPORT CUresult CUDAAPI cuArrayCreate(CUarray* pHandle,
                                              const CUDA_ARRAY_DESCRIPTOR* pAllocateArray) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (pAllocateArray == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d{};
    d.Width = pAllocateArray->Width;
    d.Height = pAllocateArray->Height;
    d.Depth = 0;
    d.Format = pAllocateArray->Format;
    d.NumChannels = pAllocateArray->NumChannels;
    d.Flags = 0;
    return CreateArray(pHandle, d);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuArray3DCreate(CUarray* pHandle,
                                                const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (pAllocateArray == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return CreateArray(pHandle, *pAllocateArray);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuArrayDestroy(CUarray hArray) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    std::shared_ptr<Array> a;
    if (CUresult r = FindArray(hArray, &ctx, &a); r != CUDA_SUCCESS) return r;
    // As cuMemFree: work that may still read the array finishes first.
    ctx->WaitForAllStreams();
    if (GetDriver().arrays.Remove(hArray) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    ctx->memory().Free(a->address);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuArrayGetDescriptor(CUDA_ARRAY_DESCRIPTOR* pArrayDescriptor,
                                                     CUarray hArray) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    std::shared_ptr<Array> a;
    if (CUresult r = FindArray(hArray, &ctx, &a); r != CUDA_SUCCESS) return r;
    if (pArrayDescriptor == nullptr) return CUDA_ERROR_INVALID_VALUE;
    pArrayDescriptor->Width = a->desc.Width;
    pArrayDescriptor->Height = a->desc.Height;
    pArrayDescriptor->Format = a->desc.Format;
    pArrayDescriptor->NumChannels = a->desc.NumChannels;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuArray3DGetDescriptor(CUDA_ARRAY3D_DESCRIPTOR* pArrayDescriptor,
                                                       CUarray hArray) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    std::shared_ptr<Array> a;
    if (CUresult r = FindArray(hArray, &ctx, &a); r != CUDA_SUCCESS) return r;
    if (pArrayDescriptor == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pArrayDescriptor = a->desc;
    return CUDA_SUCCESS;
  });
}
