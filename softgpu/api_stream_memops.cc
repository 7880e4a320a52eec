// Stream memory operations: cuStreamWaitValue32/64, cuStreamWriteValue32/64 and
// cuStreamBatchMemOp. A wait is an operation of the stream that polls a 32- or 64-bit word of
// memory the context can reach (its device memory, a peer's, page-locked host memory) until the
// condition holds; a write stores a word in stream order. Words are read and written as the
// host's atomics, so host threads and kernels may write the word a stream waits on. A wait ends
// early when its context is torn down, aborted (softgpuCtxAbort) or failed. A wait on device
// memory that outlasts ten times the context's kernel time bound (softgpuCtxSetKernelTimeout: the
// kernel that releases it may itself take up to that, after waiting for its turn) fails the
// context with CUDA_ERROR_LAUNCH_TIMEOUT, as a late kernel does; it polls less often the longer
// it waits (every 2 ms at most), and a context has at most kMaxPendingWaits such waits queued or
// waiting at once (more: CUDA_ERROR_OUT_OF_MEMORY): a server's tenant, who reaches device memory
// only, cannot have thousands of threads polling. Waits on page-locked host memory are not
// bounded (a host thread releases them: rgpu-server's kernel turns wait so). FLUSH and barriers of
// remote writes are not offered (CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES is 0).
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/stream_mem_ops.h"
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

using MemOp = rgpu::StreamMemOp;

// Checks `op` for `ctx` (an aligned word wholly inside memory the context reaches, known flags)
// and gives the host memory of its word.
CUresult Check(Context& ctx, const MemOp& op, std::shared_ptr<Allocation>* a, uint8_t** word) {
  if (CUresult r = rgpu::CheckStreamMemOp(op); r != CUDA_SUCCESS) return r;
  const size_t size = op.wide ? 8 : 4;
  *a = DeviceRange(ctx, op.address, size);
  if (*a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *word = (*a)->host + (op.address - (*a)->base);
  return CUDA_SUCCESS;
}

constexpr uint32_t kMaxPendingWaits = 64;

// One wait counted in its context's pending_memory_waits from its submission until its operation
// is gone (run or dropped).
struct PendingWait {
  explicit PendingWait(Context* c) : context(c) {}
  ~PendingWait() { context->pending_memory_waits.fetch_sub(1); }
  Context* context;
};

// Waits on page-locked host memory, which a host thread releases (rgpu-server's own kernel
// turns wait so, on gates it opens), poll every 20 us without bound, as they always have; a
// server's tenant reaches device memory only.
bool Bounded(const Allocation& a) { return a.kind != AllocationKind::kHostMapped; }

// A wait may last as long as the kernel that releases it and that kernel's wait for its turn on
// the device: its bound is this many times the kernel bound.
constexpr uint64_t kWaitBoundKernels = 10;

// `pending`: the wait's count in its context (Submit's), for a bounded one.
template <typename T>
void QueueWait(Context& ctx, const std::shared_ptr<Stream>& s, std::shared_ptr<Allocation> a,
               T* word, T value, unsigned comparison, std::shared_ptr<PendingWait> pending) {
  Context* c = &ctx;
  const bool bounded = pending != nullptr;
  const uint64_t timeout_ms = bounded ? ctx.kernel_timeout_ms.load() * kWaitBoundKernels : 0;
  const auto longest_pause = std::chrono::microseconds(bounded ? 2000 : 20);
  ctx.Enqueue(s, [a, word, value, comparison, c, pending, timeout_ms, longest_pause] {
    std::atomic_ref<T> ref(*word);
    const auto start = std::chrono::steady_clock::now();
    auto pause = std::chrono::microseconds(20);
    for (unsigned polls = 0; !Satisfied(ref.load(std::memory_order_acquire), value, comparison);
         ++polls) {
      if (c->cancelled().load() || c->sticky_error() != CUDA_SUCCESS) return;
      if (polls < 64) {
        std::this_thread::yield();
        continue;
      }
      if (timeout_ms != 0 &&
          std::chrono::steady_clock::now() - start > std::chrono::milliseconds(timeout_ms)) {
        c->Fail(CUDA_ERROR_LAUNCH_TIMEOUT,
                "softgpu: a stream's wait on memory (cuStreamWaitValue) ran past its bound of " +
                    std::to_string(timeout_ms) + " ms (" + std::to_string(kWaitBoundKernels) +
                    " times the kernel time bound)");
        return;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, longest_pause);
    }
  });
}

template <typename T>
void QueueWrite(Context& ctx, const std::shared_ptr<Stream>& s, std::shared_ptr<Allocation> a,
                T* word, T value) {
  ctx.Enqueue(s, [a, word, value] { std::atomic_ref<T>(*word).store(value); });
}

// Checks every operation, then queues them all in order on `stream` (a refused batch queues
// nothing).
CUresult Submit(CUstream stream, const MemOp* ops, unsigned count) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Stream> s;
  if (CUresult r = ResolveStream(ctx, stream, &s); r != CUDA_SUCCESS) return r;
  std::vector<std::shared_ptr<Allocation>> allocations(count);
  std::vector<uint8_t*> words(count);
  uint32_t waits = 0;
  for (unsigned i = 0; i < count; ++i) {
    if (CUresult r = Check(*ctx, ops[i], &allocations[i], &words[i]); r != CUDA_SUCCESS) return r;
    if (ops[i].wait && Bounded(*allocations[i])) ++waits;
  }
  // Counted in now; each bounded wait's PendingWait, made before anything is queued, counts
  // itself out when its operation is gone (or, should queueing fail, when this returns).
  std::vector<std::shared_ptr<PendingWait>> pending(count);
  if (waits > 0) {
    if (ctx->pending_memory_waits.fetch_add(waits) + waits > kMaxPendingWaits) {
      ctx->pending_memory_waits.fetch_sub(waits);
      fprintf(stderr,
              "softgpu: more than %u stream waits on memory at once in one context: refused\n",
              kMaxPendingWaits);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    uint32_t made = 0;
    try {
      for (unsigned i = 0; i < count; ++i) {
        if (!ops[i].wait || !Bounded(*allocations[i])) continue;
        pending[i] = std::make_shared<PendingWait>(ctx.get());
        ++made;
      }
    } catch (...) {
      ctx->pending_memory_waits.fetch_sub(waits - made);
      throw;
    }
  }
  for (unsigned i = 0; i < count; ++i) {
    const MemOp& op = ops[i];
    if (op.wait && op.wide) {
      QueueWait<uint64_t>(*ctx, s, allocations[i], reinterpret_cast<uint64_t*>(words[i]), op.value,
                          op.flags, pending[i]);
    } else if (op.wait) {
      QueueWait<uint32_t>(*ctx, s, allocations[i], reinterpret_cast<uint32_t*>(words[i]),
                          static_cast<uint32_t>(op.value), op.flags, pending[i]);
    } else if (op.wide) {
      QueueWrite<uint64_t>(*ctx, s, allocations[i], reinterpret_cast<uint64_t*>(words[i]),
                           op.value);
    } else {
      QueueWrite<uint32_t>(*ctx, s, allocations[i], reinterpret_cast<uint32_t*>(words[i]),
                           static_cast<uint32_t>(op.value));
    }
  }
  return CUDA_SUCCESS;
}

CUresult One(CUstream stream, bool wait, bool wide, CUdeviceptr address, uint64_t value,
             unsigned flags) {
  const MemOp op{wait, wide, address, value, flags};
  return Submit(stream, &op, 1);
}

}  // namespace

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr,
                                                       cuuint32_t value, unsigned int flags) {
  return Guard([&] { return One(stream, true, false, addr, value, flags); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamWaitValue64_v2(CUstream stream, CUdeviceptr addr,
                                                       cuuint64_t value, unsigned int flags) {
  return Guard([&] { return One(stream, true, true, addr, value, flags); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr,
                                                        cuuint32_t value, unsigned int flags) {
  return Guard([&] { return One(stream, false, false, addr, value, flags); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamWriteValue64_v2(CUstream stream, CUdeviceptr addr,
                                                        cuuint64_t value, unsigned int flags) {
  return Guard([&] { return One(stream, false, true, addr, value, flags); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamBatchMemOp_v2(CUstream stream, unsigned int count,
                                                      CUstreamBatchMemOpParams* params,
                                                      unsigned int flags) {
  return Guard([&] {
    std::vector<MemOp> ops;
    if (CUresult r = rgpu::DecodeStreamMemOps(count, params, flags, &ops, nullptr);
        r != CUDA_SUCCESS) {
      return r;
    }
    return Submit(stream, ops.data(), count);
  });
}
