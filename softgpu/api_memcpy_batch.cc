// Batched copies: cuMemcpyBatchAsync and cuMemcpy3DBatchAsync (CUDA 13's v2 API). A batch is
// decoded and checked whole (common/memcpy_batch.h, shared with rgpu's client), and each pointer
// side's device range checked, before any copy is queued; then each copy is queued on the stream
// as the unified-address copy (cuMemcpyAsync) or 3D copy (cuMemcpy3DAsync) it is. A source whose
// access order is DURING_API_CALL is read before the call returns: a copy of pageable host memory
// to the device stages it at the call; a source in device memory, page-locked host memory (which
// copies read in stream order) or an array, and a copy between host buffers, are read in stream
// order, and the call then waits for the stream. The legacy default stream is refused, as the
// driver documents.
#include <cuda.h>

#include <vector>

#include "common/memcpy_batch.h"
#include "softgpu/api_util.h"
#include "softgpu/array.h"

using namespace softgpu;

namespace {

// One pointer side of a copy, [address, address + span): within one range the context may copy
// (DeviceRange) when its first byte is, not another context's device memory, and not null.
CUresult CheckPointerSide(Context& ctx, CUdeviceptr address, size_t span) {
  if (span == 0) return CUDA_SUCCESS;
  if (DeviceRange(ctx, address, 1) != nullptr) {
    return DeviceRange(ctx, address, span) != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  }
  if (address == 0 || OtherContextsMemory(ctx, address)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult BatchContext(CUstream stream, std::shared_ptr<Context>* ctx) {
  if (CUresult r = UsableContext(ctx); r != CUDA_SUCCESS) return r;
  if (stream == nullptr || stream == CU_STREAM_LEGACY) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Stream> s;
  return ResolveStream(*ctx, stream, &s);
}

CUresult MemcpyBatch(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                     CUmemcpyAttributes* attrs, size_t* attrs_idxs, size_t num_attrs,
                     CUstream stream) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = BatchContext(stream, &ctx); r != CUDA_SUCCESS) return r;
  std::vector<rgpu::BatchCopy> copies;
  CUresult r = rgpu::DecodeMemcpyBatch(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs,
                                       &copies, nullptr);
  if (r != CUDA_SUCCESS) return r;
  bool wait_for_stream = false;
  for (const rgpu::BatchCopy& c : copies) {
    if ((r = CheckPointerSide(*ctx, c.dst, c.bytes)) != CUDA_SUCCESS ||
        (r = CheckPointerSide(*ctx, c.src, c.bytes)) != CUDA_SUCCESS) {
      return r;
    }
    // Host-to-device copies stage their source at the call; the others read it in stream
    // order (a copy between host buffers too).
    if (c.order == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL && c.bytes > 0 &&
        (DeviceRange(*ctx, c.src, 1) != nullptr || DeviceRange(*ctx, c.dst, 1) == nullptr)) {
      wait_for_stream = true;
    }
  }
  for (const rgpu::BatchCopy& c : copies) {
    if ((r = cuMemcpyAsync(c.dst, c.src, c.bytes, stream)) != CUDA_SUCCESS) return r;
  }
  return wait_for_stream ? cuStreamSynchronize(stream) : CUDA_SUCCESS;
}

CUresult Memcpy3DBatch(size_t num_ops, CUDA_MEMCPY3D_BATCH_OP* ops, unsigned long long flags,
                       CUstream stream) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = BatchContext(stream, &ctx); r != CUDA_SUCCESS) return r;
  std::vector<rgpu::Batch3DCopy> copies;
  CUresult r = rgpu::DecodeMemcpy3DBatch(
      num_ops, ops, flags,
      [&](CUarray array, CUDA_ARRAY3D_DESCRIPTOR* descriptor) {
        // An array of the current context, as the copy takes it.
        std::shared_ptr<Array> a;
        if (CUresult r = ResolveArray(ctx.get(), array, &a); r != CUDA_SUCCESS) return r;
        *descriptor = a->desc;
        return CUDA_SUCCESS;
      },
      &copies, nullptr);
  if (r != CUDA_SUCCESS) return r;
  bool wait_for_stream = false;
  for (const rgpu::Batch3DCopy& batch_copy : copies) {
    const CUDA_MEMCPY3D& c = batch_copy.copy;
    size_t span = 0;
    if (c.srcMemoryType == CU_MEMORYTYPE_UNIFIED &&
        (!rgpu::PointerSideSpan(c, true, &span) ||
         CheckPointerSide(*ctx, c.srcDevice, span) != CUDA_SUCCESS)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (c.dstMemoryType == CU_MEMORYTYPE_UNIFIED &&
        (!rgpu::PointerSideSpan(c, false, &span) ||
         CheckPointerSide(*ctx, c.dstDevice, span) != CUDA_SUCCESS)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (batch_copy.order == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL &&
        (c.srcMemoryType == CU_MEMORYTYPE_ARRAY || DeviceRange(*ctx, c.srcDevice, 1) != nullptr)) {
      wait_for_stream = true;
    }
  }
  for (const rgpu::Batch3DCopy& batch_copy : copies) {
    if ((r = cuMemcpy3DAsync(&batch_copy.copy, stream)) != CUDA_SUCCESS) return r;
  }
  return wait_for_stream ? cuStreamSynchronize(stream) : CUDA_SUCCESS;
}

}  // namespace

// cuda.h maps both names to their _v2 symbols.
SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpyBatchAsync(CUdeviceptr* dsts, CUdeviceptr* srcs,
                                                   size_t* sizes, size_t count,
                                                   CUmemcpyAttributes* attrs, size_t* attrsIdxs,
                                                   size_t numAttrs, CUstream hStream) {
  return Guard(
      [&] { return MemcpyBatch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP* opList,
                                                     unsigned long long flags, CUstream hStream) {
  return Guard([&] { return Memcpy3DBatch(numOps, opList, flags, hStream); });
}
