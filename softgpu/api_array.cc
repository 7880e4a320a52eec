// CUDA arrays and mipmapped arrays: creation, destruction, levels and descriptors. Copies to and
// from arrays (mipmap levels included) are in api_memory.cc.
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

CUresult ResolveMipmappedArray(const Context* ctx, CUmipmappedArray handle,
                               std::shared_ptr<MipmappedArray>* out) {
  std::shared_ptr<MipmappedArray> m = GetDriver().mipmapped_arrays.Find(handle);
  if (m == nullptr || m->owner != ctx) return CUDA_ERROR_INVALID_HANDLE;
  *out = std::move(m);
  return CUDA_SUCCESS;
}

}  // namespace softgpu

namespace {

// Device memory for `bytes` of array storage in `ctx`.
CUresult AllocateStorage(Context& ctx, uint64_t bytes, uint64_t* address) {
  return AllocationError(ctx.memory().Allocate(bytes, address));
}

CUresult CreateArray(CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR& desc) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto a = std::make_shared<Array>();
  if (CUresult r = Array::Layout(desc, a.get()); r != CUDA_SUCCESS) return r;
  a->owner = ctx.get();
  if (CUresult r = AllocateStorage(*ctx, a->bytes, &a->address); r != CUDA_SUCCESS) return r;
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
    // A mipmap level belongs to its mipmapped array and goes with it (cuda.h's rule for level
    // arrays passed where an array of its own is needed, as in cuArrayGetSparseProperties).
    if (a->mipmap != nullptr) return CUDA_ERROR_INVALID_VALUE;
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

SOFTGPU_EXPORT CUresult CUDAAPI cuMipmappedArrayCreate(
    CUmipmappedArray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,
    unsigned int numMipmapLevels) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    if (pHandle == nullptr || pMipmappedArrayDesc == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto m = std::make_shared<MipmappedArray>();
    if (CUresult r = MipmappedArray::Layout(*pMipmappedArrayDesc, numMipmapLevels, m.get());
        r != CUDA_SUCCESS) {
      return r;
    }
    m->owner = ctx.get();
    uint64_t address = 0;
    if (CUresult r = AllocateStorage(*ctx, m->bytes, &address); r != CUDA_SUCCESS) return r;
    m->Place(address);
    Driver& d = GetDriver();
    d.mipmapped_arrays.Add(m);
    for (const auto& level : m->levels) d.arrays.Add(level);
    *pHandle = reinterpret_cast<CUmipmappedArray>(m.get());
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMipmappedArrayGetLevel(CUarray* pLevelArray,
                                                         CUmipmappedArray hMipmappedArray,
                                                         unsigned int level) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = CurrentContext(&ctx); r != CUDA_SUCCESS) return r;
    std::shared_ptr<MipmappedArray> m;
    if (CUresult r = ResolveMipmappedArray(ctx.get(), hMipmappedArray, &m); r != CUDA_SUCCESS) {
      return r;
    }
    if (pLevelArray == nullptr || level >= m->levels.size()) return CUDA_ERROR_INVALID_VALUE;
    // The level's own handle: the same one each time, valid until the mipmapped array goes.
    *pLevelArray = reinterpret_cast<CUarray>(m->levels[level].get());
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = CurrentContext(&ctx); r != CUDA_SUCCESS) return r;
    std::shared_ptr<MipmappedArray> m;
    if (CUresult r = ResolveMipmappedArray(ctx.get(), hMipmappedArray, &m); r != CUDA_SUCCESS) {
      return r;
    }
    // As cuArrayDestroy: work that may still read the levels finishes first.
    ctx->WaitForAllStreams();
    Driver& d = GetDriver();
    if (d.mipmapped_arrays.Remove(hMipmappedArray) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    for (const auto& level : m->levels) d.arrays.Remove(level.get());
    ctx->memory().Free(m->address);
    return CUDA_SUCCESS;
  });
}
