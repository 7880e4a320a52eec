// Stream memory operations: cuStreamWaitValue32/64, cuStreamWriteValue32/64 and
// cuStreamBatchMemOp. A wait is an operation of the stream that polls a 32- or 64-bit word of
// memory the context can reach (its device memory, a peer's, page-locked host memory) until the
// condition holds; a write stores a word in stream order. Words are read and written as the
// host's atomics, so host threads and kernels may write the word a stream waits on. A wait ends
// early only when its context is torn down or aborted (softgpuCtxAbort). FLUSH and barriers of
// remote writes are not offered (CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES is 0).
#include <cuda.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <type_traits>

#include "softgpu/api_util.h"

using namespace softgpu;

namespace {

template <typename T>
bool Satisfied(T now, T value, unsigned comparison) {
  switch (comparison) {
    case CU_STREAM_WAIT_VALUE_GEQ:  // cyclic: (signed)(*addr - value) >= 0
      return static_cast<std::make_signed_t<T>>(now - value) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
      return now == value;
    case CU_STREAM_WAIT_VALUE_AND:
      return (now & value) != 0;
    default:  // CU_STREAM_WAIT_VALUE_NOR
      return static_cast<T>(~(now | value)) != 0;
  }
}

// The word at `address` for `ctx`, checked: aligned, wholly inside memory the context reaches.
template <typename T>
CUresult Word(Context& ctx, CUdeviceptr address, std::shared_ptr<Allocation>* a, T** word) {
  if (address == 0 || address % sizeof(T) != 0) return CUDA_ERROR_INVALID_VALUE;
  *a = DeviceRange(ctx, address, sizeof(T));
  if (*a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *word = reinterpret_cast<T*>((*a)->host + (address - (*a)->base));
  return CUDA_SUCCESS;
}

template <typename T>
CUresult EnqueueWait(const std::shared_ptr<Context>& ctx, const std::shared_ptr<Stream>& s,
                     CUdeviceptr address, T value, unsigned flags) {
  if (flags & CU_STREAM_WAIT_VALUE_FLUSH) return CUDA_ERROR_NOT_SUPPORTED;
  if (flags > CU_STREAM_WAIT_VALUE_NOR) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Allocation> a;
  T* word = nullptr;
  if (CUresult r = Word(*ctx, address, &a, &word); r != CUDA_SUCCESS) return r;
  Context* c = ctx.get();
  ctx->Enqueue(s, [a, word, value, flags, c] {
    std::atomic_ref<T> ref(*word);
    for (unsigned polls = 0; !Satisfied(ref.load(std::memory_order_acquire), value, flags);
         ++polls) {
      if (c->cancelled().load()) return;
      if (polls < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
  });
  return CUDA_SUCCESS;
}

template <typename T>
CUresult EnqueueWrite(const std::shared_ptr<Context>& ctx, const std::shared_ptr<Stream>& s,
                      CUdeviceptr address, T value, unsigned flags) {
  // CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER is not part of the v2 API.
  if (flags != CU_STREAM_WRITE_VALUE_DEFAULT) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Allocation> a;
  T* word = nullptr;
  if (CUresult r = Word(*ctx, address, &a, &word); r != CUDA_SUCCESS) return r;
  ctx->Enqueue(s, [a, word, value] { std::atomic_ref<T>(*word).store(value); });
  return CUDA_SUCCESS;
}

// The stream and its context, usable (no sticky error).
CUresult Target(CUstream stream, std::shared_ptr<Context>* ctx, std::shared_ptr<Stream>* s) {
  if (CUresult r = UsableContext(ctx); r != CUDA_SUCCESS) return r;
  return ResolveStream(*ctx, stream, s);
}

}  // namespace

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr,
                                                       cuuint32_t value, unsigned int flags) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    std::shared_ptr<Stream> s;
    if (CUresult r = Target(stream, &ctx, &s); r != CUDA_SUCCESS) return r;
    return EnqueueWait<uint32_t>(ctx, s, addr, value, flags);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamWaitValue64_v2(CUstream stream, CUdeviceptr addr,
                                                       cuuint64_t value, unsigned int flags) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    std::shared_ptr<Stream> s;
    if (CUresult r = Target(stream, &ctx, &s); r != CUDA_SUCCESS) return r;
    return EnqueueWait<uint64_t>(ctx, s, addr, value, flags);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr,
                                                        cuuint32_t value, unsigned int flags) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    std::shared_ptr<Stream> s;
    if (CUresult r = Target(stream, &ctx, &s); r != CUDA_SUCCESS) return r;
    return EnqueueWrite<uint32_t>(ctx, s, addr, value, flags);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamWriteValue64_v2(CUstream stream, CUdeviceptr addr,
                                                        cuuint64_t value, unsigned int flags) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    std::shared_ptr<Stream> s;
    if (CUresult r = Target(stream, &ctx, &s); r != CUDA_SUCCESS) return r;
    return EnqueueWrite<uint64_t>(ctx, s, addr, value, flags);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamBatchMemOp_v2(CUstream stream, unsigned int count,
                                                      CUstreamBatchMemOpParams* params,
                                                      unsigned int flags) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    std::shared_ptr<Stream> s;
    if (CUresult r = Target(stream, &ctx, &s); r != CUDA_SUCCESS) return r;
    if (flags != 0 || count >= 256 || (count > 0 && params == nullptr)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    // Every operation is checked before any is queued: a refused batch queues nothing.
    for (unsigned i = 0; i < count; ++i) {
      const CUstreamBatchMemOpParams& p = params[i];
      std::shared_ptr<Allocation> a;
      CUresult r = CUDA_SUCCESS;
      switch (p.operation) {
        case CU_STREAM_MEM_OP_WAIT_VALUE_32: {
          uint32_t* w;
          r = Word(*ctx, p.waitValue.address, &a, &w);
          if (r == CUDA_SUCCESS && (p.waitValue.flags & CU_STREAM_WAIT_VALUE_FLUSH)) {
            r = CUDA_ERROR_NOT_SUPPORTED;
          } else if (r == CUDA_SUCCESS && p.waitValue.flags > CU_STREAM_WAIT_VALUE_NOR) {
            r = CUDA_ERROR_INVALID_VALUE;
          }
          break;
        }
        case CU_STREAM_MEM_OP_WAIT_VALUE_64: {
          uint64_t* w;
          r = Word(*ctx, p.waitValue.address, &a, &w);
          if (r == CUDA_SUCCESS && (p.waitValue.flags & CU_STREAM_WAIT_VALUE_FLUSH)) {
            r = CUDA_ERROR_NOT_SUPPORTED;
          } else if (r == CUDA_SUCCESS && p.waitValue.flags > CU_STREAM_WAIT_VALUE_NOR) {
            r = CUDA_ERROR_INVALID_VALUE;
          }
          break;
        }
        case CU_STREAM_MEM_OP_WRITE_VALUE_32: {
          uint32_t* w;
          r = Word(*ctx, p.writeValue.address, &a, &w);
          if (r == CUDA_SUCCESS && p.writeValue.flags != 0) r = CUDA_ERROR_INVALID_VALUE;
          break;
        }
        case CU_STREAM_MEM_OP_WRITE_VALUE_64: {
          uint64_t* w;
          r = Word(*ctx, p.writeValue.address, &a, &w);
          if (r == CUDA_SUCCESS && p.writeValue.flags != 0) r = CUDA_ERROR_INVALID_VALUE;
          break;
        }
        default:  // flushes of remote writes and memory barriers
          r = CUDA_ERROR_NOT_SUPPORTED;
          break;
      }
      if (r != CUDA_SUCCESS) return r;
    }
    for (unsigned i = 0; i < count; ++i) {
      const CUstreamBatchMemOpParams& p = params[i];
      CUresult r = CUDA_SUCCESS;
      switch (p.operation) {
        case CU_STREAM_MEM_OP_WAIT_VALUE_32:
          r = EnqueueWait<uint32_t>(ctx, s, p.waitValue.address, p.waitValue.value,
                                    p.waitValue.flags);
          break;
        case CU_STREAM_MEM_OP_WAIT_VALUE_64:
          r = EnqueueWait<uint64_t>(ctx, s, p.waitValue.address, p.waitValue.value64,
                                    p.waitValue.flags);
          break;
        case CU_STREAM_MEM_OP_WRITE_VALUE_32:
          r = EnqueueWrite<uint32_t>(ctx, s, p.writeValue.address, p.writeValue.value,
                                     p.writeValue.flags);
          break;
        default:
          r = EnqueueWrite<uint64_t>(ctx, s, p.writeValue.address, p.writeValue.value64,
                                     p.writeValue.flags);
          break;
      }
      if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
  });
}
