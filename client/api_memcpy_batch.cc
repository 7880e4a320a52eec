// Batched copies: cuMemcpyBatchAsync and cuMemcpy3DBatchAsync (CUDA 12.8's v1 API, which reports
// the failing copy's index, CUDA 13's v2 API, and their per-thread-stream variants). A batch is
// decoded and checked whole (common/memcpy_batch.h), and each of its pointer copies' device ends
// checked against the memory map, before any copy is issued; then each copy goes as the
// unified-address copy (cuMemcpyAsync) or 3D copy (cuMemcpy3DAsync) it is, in order on the
// stream, so a batch costs no round trip of its own and a captured batch becomes copy nodes.
//
// A source whose access order is DURING_API_CALL is read before the call returns: page-locked
// host memory (which an asynchronous copy may otherwise send after the return) is copied first;
// pageable host memory is read during the call on every path (behind a host function the stream
// waits for, into a copy the held work owns); a source in device memory, managed memory or an
// array is read in stream order, and the call then waits for the stream. During stream capture such
// a copy cannot be done at all: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and nothing is captured. The
// legacy default stream is refused, as the driver documents.
#include <cudaTypedefs.h>

#include <type_traits>
#include <vector>

#include "client/impl.h"
#include "client/memory_map.h"
#include "common/memcpy_batch.h"

extern "C" CUresult rgpu_impl_cuStreamSynchronize(CUstream s);
extern "C" CUresult rgpu_impl_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                            CUstream s);

namespace {

using rgpu::client::Memory;

// One end of a copy, [address, address + span), as the copy paths will take it: device memory
// of `ctx` (within what the memory map has there; memory registered mapped from the program's
// pages within its range), or host memory (not checkable; only not null).
CUresult CheckEnd(CUctx_st* ctx, CUdeviceptr address, size_t span) {
  if (span == 0) return CUDA_SUCCESS;
  auto range = Memory().Find(address);
  if (!range || (range->type != CU_MEMORYTYPE_DEVICE && !range->managed)) {
    return address == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  }
  if (range->device_shift != 0) {
    return span <= range->size - (address - range->base) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  }
  return rgpu::client::CheckDeviceRange(ctx, address, span);
}

// Both ends of a pointer copy on a stream of `ctx`: a copy between two contexts' device memory
// (cuMemcpyAsync makes it a copy between contexts) checks each end in its own context, any
// other copy its device ends in `ctx`, as CopyUnified's paths do.
CUresult CheckPointerCopy(CUctx_st* ctx, CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  auto dst_range = Memory().Find(dst), src_range = Memory().Find(src);
  if (dst_range && src_range && dst_range->type == CU_MEMORYTYPE_DEVICE &&
      src_range->type == CU_MEMORYTYPE_DEVICE && (dst_range->ctx != ctx || src_range->ctx != ctx)) {
    if (CUresult r = CheckEnd(dst_range->ctx, dst, bytes); r != CUDA_SUCCESS) return r;
    return CheckEnd(src_range->ctx, src, bytes);
  }
  if (CUresult r = CheckEnd(ctx, dst, bytes); r != CUDA_SUCCESS) return r;
  return CheckEnd(ctx, src, bytes);
}

// A source whose access order is DURING_API_CALL, in page-locked host memory: asynchronous copies
// from such memory may read it after they return.
bool IsPageLockedHost(CUdeviceptr address) {
  auto range = Memory().Find(address);
  return range && range->type == CU_MEMORYTYPE_HOST && !range->managed;
}

// The stream a batch may be issued on (not the legacy default stream) and its context. When
// `during_call`, some copy must read its source before the call returns: refused during capture.
CUresult CheckBatchStream(CUstream stream, bool during_call, CUctx_st** ctx) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY) return CUDA_ERROR_INVALID_VALUE;
  uint64_t remote_stream = 0;
  if (CUresult r = rgpu::client::ResolveStream(stream, ctx, &remote_stream); r != CUDA_SUCCESS) {
    return r;
  }
  if (during_call && rgpu::client::StreamCapturing(stream)) {
    RGPU_LOG_WARN(
        "cuMemcpyBatchAsync: a source read during the call (CU_MEMCPY_SRC_ACCESS_ORDER_"
        "DURING_API_CALL) cannot be captured");
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return CUDA_SUCCESS;
}

CUresult MemcpyBatch(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                     CUmemcpyAttributes* attrs, size_t* attrs_idxs, size_t num_attrs,
                     CUstream stream, size_t* fail_index) {
  std::vector<rgpu::BatchCopy> copies;
  size_t failed = rgpu::kNoFailingCopy;
  CUresult r = rgpu::DecodeMemcpyBatch(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs,
                                       &copies, &failed);
  bool during_call = false;
  for (const rgpu::BatchCopy& c : copies) {
    during_call |= c.order == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
  }
  CUctx_st* ctx = nullptr;
  if (r == CUDA_SUCCESS) r = CheckBatchStream(stream, during_call, &ctx);
  for (size_t i = 0; r == CUDA_SUCCESS && i < copies.size(); ++i) {
    if ((r = CheckPointerCopy(ctx, copies[i].dst, copies[i].src, copies[i].bytes)) !=
        CUDA_SUCCESS) {
      failed = i;
    }
  }
  if (r != CUDA_SUCCESS) {
    if (fail_index != nullptr) *fail_index = failed;
    return r;
  }
  // Pageable sources are read during the call on every path (copied into a message, or, behind
  // a host function, into a copy the held work owns); page-locked ones are copied first here.
  bool wait_for_stream = false;
  std::vector<std::vector<char>> snapshots;
  for (size_t i = 0; i < copies.size(); ++i) {
    rgpu::BatchCopy c = copies[i];
    if (c.order == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL && c.bytes > 0) {
      if (rgpu::client::IsDeviceAddress(c.src)) {
        wait_for_stream = true;
      } else if (IsPageLockedHost(c.src)) {
        const char* from = reinterpret_cast<const char*>(c.src);
        try {
          snapshots.emplace_back(from, from + c.bytes);
        } catch (...) {
          if (fail_index != nullptr) *fail_index = i;  // copies before it have been issued
          return CUDA_ERROR_OUT_OF_MEMORY;
        }
        c.src = reinterpret_cast<CUdeviceptr>(snapshots.back().data());
      }
    }
    if ((r = rgpu_impl_cuMemcpyAsync(c.dst, c.src, c.bytes, stream)) != CUDA_SUCCESS) {
      if (fail_index != nullptr) *fail_index = i;
      return r;
    }
  }
  if (wait_for_stream) r = rgpu_impl_cuStreamSynchronize(stream);
  if (fail_index != nullptr) *fail_index = rgpu::kNoFailingCopy;
  return r;
}

CUresult Memcpy3DBatch(size_t num_ops, CUDA_MEMCPY3D_BATCH_OP* ops, unsigned long long flags,
                       CUstream stream, size_t* fail_index) {
  // The stream first: arrays are looked up in its context (its access order is checked below).
  bool during_call = false;
  for (size_t i = 0; ops != nullptr && i < num_ops; ++i) {
    during_call |= ops[i].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
  }
  CUctx_st* ctx = nullptr;
  size_t failed = rgpu::kNoFailingCopy;
  CUresult r = CheckBatchStream(stream, during_call, &ctx);
  std::vector<rgpu::Batch3DCopy> copies;
  if (r == CUDA_SUCCESS) {
    r = rgpu::DecodeMemcpy3DBatch(
        num_ops, ops, flags,
        [ctx](CUarray array, CUDA_ARRAY3D_DESCRIPTOR* descriptor) {
          return rgpu::client::ArrayDescriptorIn(ctx, array, descriptor);
        },
        &copies, &failed);
  }
  for (size_t i = 0; r == CUDA_SUCCESS && i < copies.size(); ++i) {
    const CUDA_MEMCPY3D& c = copies[i].copy;
    size_t span = 0;
    if (c.srcMemoryType == CU_MEMORYTYPE_UNIFIED) {
      if (!rgpu::PointerSideSpan(c, true, &span)) r = CUDA_ERROR_INVALID_VALUE;
      if (r == CUDA_SUCCESS) r = CheckEnd(ctx, c.srcDevice, span);
    }
    if (r == CUDA_SUCCESS && c.dstMemoryType == CU_MEMORYTYPE_UNIFIED) {
      if (!rgpu::PointerSideSpan(c, false, &span)) r = CUDA_ERROR_INVALID_VALUE;
      if (r == CUDA_SUCCESS) r = CheckEnd(ctx, c.dstDevice, span);
    }
    if (r != CUDA_SUCCESS) failed = i;
  }
  if (r != CUDA_SUCCESS) {
    if (fail_index != nullptr) *fail_index = failed;
    return r;
  }
  // Pitched and array copies pack host sources during the call (behind a host function, into a
  // buffer the held copy owns); only sources the device holds need the stream waited for.
  bool wait_for_stream = false;
  for (size_t i = 0; i < copies.size(); ++i) {
    const CUDA_MEMCPY3D& c = copies[i].copy;
    if (copies[i].order == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL &&
        (c.srcMemoryType == CU_MEMORYTYPE_ARRAY || rgpu::client::IsDeviceAddress(c.srcDevice))) {
      wait_for_stream = true;
    }
    if ((r = rgpu_impl_cuMemcpy3DAsync_v2(&c, stream)) != CUDA_SUCCESS) {
      if (fail_index != nullptr) *fail_index = i;
      return r;
    }
  }
  if (wait_for_stream) r = rgpu_impl_cuStreamSynchronize(stream);
  if (fail_index != nullptr) *fail_index = rgpu::kNoFailingCopy;
  return r;
}

}  // namespace

RGPU_IMPL(cuMemcpyBatchAsync_v2)
(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count, CUmemcpyAttributes* attrs,
 size_t* attrs_idxs, size_t num_attrs, CUstream stream) {
  return MemcpyBatch(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, stream, nullptr);
}
RGPU_IMPL(cuMemcpy3DBatchAsync_v2)
(size_t num_ops, CUDA_MEMCPY3D_BATCH_OP* ops, unsigned long long flags, CUstream stream) {
  return Memcpy3DBatch(num_ops, ops, flags, stream, nullptr);
}

// CUDA 12.8's revisions, which report the failing copy: cuda.h maps their plain names to the v2
// API, and cudaTypedefs.h keeps their types.
extern "C" __attribute__((visibility("default"))) CUresult rgpu_impl_cuMemcpyBatchAsync(
    CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count, CUmemcpyAttributes* attrs,
    size_t* attrs_idxs, size_t num_attrs, size_t* fail_index, CUstream stream) {
  return MemcpyBatch(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, stream, fail_index);
}
static_assert(
    std::is_same_v<decltype(&rgpu_impl_cuMemcpyBatchAsync), PFN_cuMemcpyBatchAsync_v12080>);
extern "C" __attribute__((visibility("default"))) CUresult rgpu_impl_cuMemcpy3DBatchAsync(
    size_t num_ops, CUDA_MEMCPY3D_BATCH_OP* ops, size_t* fail_index, unsigned long long flags,
    CUstream stream) {
  return Memcpy3DBatch(num_ops, ops, flags, stream, fail_index);
}
static_assert(
    std::is_same_v<decltype(&rgpu_impl_cuMemcpy3DBatchAsync), PFN_cuMemcpy3DBatchAsync_v12080>);
RGPU_PER_THREAD_SAME_AS(cuMemcpyBatchAsync_v2_ptsz)
RGPU_PER_THREAD_SAME_AS(cuMemcpyBatchAsync_ptsz)
RGPU_PER_THREAD_SAME_AS(cuMemcpy3DBatchAsync_v2_ptsz)
RGPU_PER_THREAD_SAME_AS(cuMemcpy3DBatchAsync_ptsz)
