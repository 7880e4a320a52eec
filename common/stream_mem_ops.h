// Stream memory operations (cuStreamWaitValue32/64, cuStreamWriteValue32/64, cuStreamBatchMemOp,
// the v2 API) in one shape, shared by the client and the software GPU, which must agree on what
// they take. Header-only; the including target provides cuda.h.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

namespace rgpu {

// One wait on, or write of, a 32- or 64-bit word.
struct StreamMemOp {
  bool wait = false;
  bool wide = false;  // 64-bit
  CUdeviceptr address = 0;
  uint64_t value = 0;
  unsigned flags = 0;
};

// Checks what an operation says of itself: a wait's comparison (GEQ, EQ, AND, NOR; FLUSH is
// CUDA_ERROR_NOT_SUPPORTED), a write's flags (none: NO_MEMORY_BARRIER is not part of the v2 API),
// and a word that is not null and is aligned to its width. Whose memory the word is, is the
// caller's to check.
inline CUresult CheckStreamMemOp(const StreamMemOp& op) {
  if (op.wait) {
    if (op.flags & CU_STREAM_WAIT_VALUE_FLUSH) return CUDA_ERROR_NOT_SUPPORTED;
    if (op.flags > CU_STREAM_WAIT_VALUE_NOR) return CUDA_ERROR_INVALID_VALUE;
  } else if (op.flags != CU_STREAM_WRITE_VALUE_DEFAULT) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const uint64_t size = op.wide ? 8 : 4;
  if (op.address == 0 || op.address % size != 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

// The operations of a cuStreamBatchMemOp: fewer than 256, no flags. A flush of remote writes or
// a memory barrier is CUDA_ERROR_NOT_SUPPORTED (`*unsupported` names it), an unknown operation
// CUDA_ERROR_INVALID_VALUE. The operations themselves are not checked (CheckStreamMemOp).
inline CUresult DecodeStreamMemOps(unsigned count, const CUstreamBatchMemOpParams* params,
                                   unsigned flags, std::vector<StreamMemOp>* ops,
                                   const char** unsupported) {
  if (flags != 0 || count >= 256 || (count > 0 && params == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  ops->assign(count, StreamMemOp());
  for (unsigned i = 0; i < count; ++i) {
    const CUstreamBatchMemOpParams& p = params[i];
    switch (p.operation) {
      case CU_STREAM_MEM_OP_WAIT_VALUE_32:
      case CU_STREAM_MEM_OP_WAIT_VALUE_64: {
        const bool wide = p.operation == CU_STREAM_MEM_OP_WAIT_VALUE_64;
        (*ops)[i] = {true, wide, p.waitValue.address,
                     wide ? p.waitValue.value64 : p.waitValue.value, p.waitValue.flags};
        break;
      }
      case CU_STREAM_MEM_OP_WRITE_VALUE_32:
      case CU_STREAM_MEM_OP_WRITE_VALUE_64: {
        const bool wide = p.operation == CU_STREAM_MEM_OP_WRITE_VALUE_64;
        (*ops)[i] = {false, wide, p.writeValue.address,
                     wide ? p.writeValue.value64 : p.writeValue.value, p.writeValue.flags};
        break;
      }
      case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
      case CU_STREAM_MEM_OP_BARRIER:
        if (unsupported != nullptr) {
          *unsupported = p.operation == CU_STREAM_MEM_OP_BARRIER ? "a memory barrier"
                                                                 : "a flush of remote writes";
        }
        return CUDA_ERROR_NOT_SUPPORTED;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

}  // namespace rgpu
