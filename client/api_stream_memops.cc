// Stream memory operations: cuStreamWaitValue32/64, cuStreamWriteValue32/64 and
// cuStreamBatchMemOp (the v2 API, and their per-thread-stream variants). Each wait or write is
// posted as one StreamMemOp call on its stream (a batch's in its order), so it costs no round
// trip: the server's stream waits for, or writes, a word of the session's device memory. A batch
// is checked whole before any of it is posted, so a refused batch queues nothing. Flushes of
// remote writes and memory barriers are not offered (CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES
// is 0); nor is the v1 API. The word must be device memory: not managed memory (as the driver
// documents), nor memory mapped for the device (managed memory here), whose host side the
// program could not write while the device waits.
#include <vector>

#include "client/impl.h"
#include "common/stream_mem_ops.h"
#include "client/memory_map.h"

namespace calls = rgpu::calls;
using rgpu::client::ResolveStream;
using rgpu::client::Server;

namespace {

using MemOp = rgpu::StreamMemOp;

CUresult Submit(CUstream stream, std::vector<MemOp> ops) {
  for (const MemOp& op : ops) {
    if (CUresult r = rgpu::CheckStreamMemOp(op); r != CUDA_SUCCESS) {
      if (r == CUDA_ERROR_NOT_SUPPORTED) {
        RGPU_LOG_WARN("cuStreamWaitValue: CU_STREAM_WAIT_VALUE_FLUSH is not supported");
      }
      return r;
    }
  }
  if (rgpu::client::Defer(stream, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP,
                          [ops](CUstream s) { return Submit(s, ops); })) {
    return CUDA_SUCCESS;
  }
  CUctx_st* ctx;
  uint64_t remote_stream = 0;
  if (CUresult r = ResolveStream(stream, &ctx, &remote_stream); r != CUDA_SUCCESS) return r;
  for (const MemOp& op : ops) {
    // Not managed memory, as the driver documents (nor mapped memory, which is managed here).
    if (rgpu::client::IsManagedAddress(op.address)) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = rgpu::client::CheckDeviceRange(ctx, op.address, op.wide ? 8 : 4);
        r != CUDA_SUCCESS) {
      return r;
    }
  }
  for (const MemOp& op : ops) {
    CUresult r = Server().Post<calls::StreamMemOp>(ctx->remote, {.address = op.address,
                                                                 .bytes = op.wide ? 8u : 4u,
                                                                 .value = op.value,
                                                                 .flags = op.flags,
                                                                 .wait = op.wait,
                                                                 .stream = remote_stream});
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

}  // namespace

CUresult rgpu::client::SubmitStreamMemOps(CUstream stream, const std::vector<MemOp>& ops) {
  return Submit(stream, ops);
}

namespace {

CUresult One(CUstream stream, bool wait, bool wide, CUdeviceptr address, uint64_t value,
             unsigned flags) {
  return Submit(stream, {MemOp{wait, wide, address, value, flags}});
}

}  // namespace

RGPU_IMPL(cuStreamWaitValue32_v2)
(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  return One(stream, true, false, addr, value, flags);
}
RGPU_IMPL(cuStreamWaitValue64_v2)
(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
  return One(stream, true, true, addr, value, flags);
}
RGPU_IMPL(cuStreamWriteValue32_v2)
(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  return One(stream, false, false, addr, value, flags);
}
RGPU_IMPL(cuStreamWriteValue64_v2)
(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
  return One(stream, false, true, addr, value, flags);
}

RGPU_IMPL(cuStreamBatchMemOp_v2)
(CUstream stream, unsigned int count, CUstreamBatchMemOpParams* params, unsigned int flags) {
  std::vector<MemOp> ops;
  const char* unsupported = nullptr;
  CUresult r = rgpu::DecodeStreamMemOps(count, params, flags, &ops, &unsupported);
  if (r == CUDA_ERROR_NOT_SUPPORTED) {
    RGPU_LOG_WARN("cuStreamBatchMemOp: %s is not supported", unsupported);
  }
  if (r != CUDA_SUCCESS) return r;
  return Submit(stream, std::move(ops));
}

RGPU_PER_THREAD_SAME_AS(cuStreamWaitValue32_v2_ptsz)
RGPU_PER_THREAD_SAME_AS(cuStreamWaitValue64_v2_ptsz)
RGPU_PER_THREAD_SAME_AS(cuStreamWriteValue32_v2_ptsz)
RGPU_PER_THREAD_SAME_AS(cuStreamWriteValue64_v2_ptsz)
RGPU_PER_THREAD_SAME_AS(cuStreamBatchMemOp_v2_ptsz)
