// Session's handlers for device memory: allocation, copies (1D and pitched 2D) and memsets
// (proto/calls.def: Memory, Pitched 2D copies). calls.def's checks have made sure every range
// lies in memory of the call's context and every size fits before these run.
#include <algorithm>

#include "server/require_fn.h"
#include "server/session.h"
#include "server/tenants.h"

namespace rgpu::server {

CUresult Session::HandleMemAlloc(CallState& cs, const MemAllocIn& in,
                                 calls::MemAlloc::Results* out) {
  const uint64_t bytes = in.bytesize;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = RoomFor(cs, allocations_.size(), limits_.max_allocations, "allocations");
      r != CUDA_SUCCESS) {
    return r;
  }
  const int device = DeviceOf(cs.ctx_id);
  if (!Charge(cs, device, bytes, "the allocation")) return CUDA_ERROR_OUT_OF_MEMORY;
  CUdeviceptr p = 0;
  CUresult r;
  {
    auto change = DeviceMemoryChange();
    r = drv_.cuMemAlloc(&p, bytes);
  }
  if (r == CUDA_SUCCESS && scrub_allocations_) {
    // Device memory holds what its last user left there: zeroed before the tenant sees it, and
    // before any of its streams can (the legacy default stream orders the blocking ones).
    r = drv_.cuMemsetD8 != nullptr ? drv_.cuMemsetD8(p, 0, bytes) : CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS) r = drv_.cuStreamSynchronize(nullptr);
    if (r != CUDA_SUCCESS) {
      auto change = DeviceMemoryChange();
      drv_.cuMemFree(p);
    }
  }
  if (r != CUDA_SUCCESS) {
    Uncharge(device, bytes);
    return r;
  }
  allocations_[p] = Allocation{bytes, cs.ctx_id, true, 0};
  out->dptr = p;
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemFree(CallState& cs, const MemFreeIn& in, calls::MemFree::Results*) {
  auto it = allocations_.find(in.dptr);
  if (it != allocations_.end() && it->second.import_pool != 0 && it->second.ctx == cs.ctx_id) {
    // A pointer imported from another session's pool: freeing it closes this session's import.
    if (--it->second.opens > 0) return CUDA_SUCCESS;
    if (CUresult r = drv_.cuCtxSynchronize(); r != CUDA_SUCCESS) return r;
    CloseImport(it);
    return MakeCurrent(cs.ctx);
  }
  if (it == allocations_.end() || !it->second.freeable || it->second.ctx != cs.ctx_id) {
    cs.detail = "not an allocation of this session";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (it->second.pool != 0) {
    // A stream-ordered allocation freed with cuMemFree: once the context's work is done, its
    // memory returns to its pool.
    if (CUresult r = drv_.cuCtxSynchronize(); r != CUDA_SUCCESS) return r;
    ReturnToPool(it, 0, nullptr);
    TrimPoolsAfterSync();
    return CUDA_SUCCESS;
  }
  return FreeAllocation(it);
}

CUresult Session::FreeAllocation(std::map<CUdeviceptr, Allocation>::iterator it) {
  if (CUresult r = ReleaseAllocationMemory(it->first, it->second.size, DeviceOf(it->second.ctx));
      r != CUDA_SUCCESS) {
    return r;
  }
  allocations_.erase(it);
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemGetInfo(CallState&, const MemGetInfoIn&,
                                   calls::MemGetInfo::Results* out) {
  size_t free_bytes = 0, total = 0;
  CUresult r = drv_.cuMemGetInfo(&free_bytes, &total);
  if (r != CUDA_SUCCESS) return r;
  if (tenant_ != nullptr) {
    // A tenant sees its quota as the device's memory (never more than the device has: a session
    // host's tenant without a quota has UINT64_MAX).
    const uint64_t used = tenant_->memory_used.load();
    total = std::min<uint64_t>(tenant_->memory_quota, total);
    free_bytes = std::min<uint64_t>(free_bytes, used < total ? total - used : 0);
  }
  out->free = free_bytes;
  out->total = total;
  return CUDA_SUCCESS;
}

CUresult Session::HandleFreeFence(CallState&, const FreeFenceIn&, calls::FreeFence::Results*) {
  return drv_.cuCtxSynchronize();
}

CUresult Session::HandleMemcpyHtoD(CallState& cs, const MemcpyHtoDIn& in,
                                   calls::MemcpyHtoD::Results*) {
  if (in.bytes == 0) return CUDA_SUCCESS;
  // Behind work still running on its stream, an asynchronous copy is staged in pinned memory and
  // queued: the session goes on serving its other streams instead of waiting for this one.
  if (in.async && in.stream.stream != nullptr) {
    bool staged = false;
    if (CUresult r = StageCopyIn(cs, in.dst, in.bytes, in.stream.stream, &staged); staged) {
      return r;
    }
  }
  if (cs.unfetched != nullptr) {
    // The payload is still with the sender: fetch it straight into device memory once the
    // copy's turn has come, or else into a buffer and copy as usual.
    CUresult r = CUDA_SUCCESS;
    void* direct = DirectAccess(in.dst, in.bytes, in.stream.stream, &r);
    if (r != CUDA_SUCCESS) return r;
    Status s = channel_->FetchPayload(cs.unfetched, direct);
    if (!s.ok()) {
      cs.detail = "payload lost: " + s.ToString();
      return CUDA_ERROR_UNKNOWN;
    }
    if (direct != nullptr) return CUDA_SUCCESS;
    cs.payload = cs.unfetched->payload;
  }
  // The payload buffer is gone once this call returns, so the copy must have read it by then:
  // queued on its stream and waited for. (A synchronous copy would be ordered on the legacy
  // default stream, after every blocking stream's work: a copy on a non-blocking stream would
  // wait for another stream's kernel, which may itself wait for this copy.)
  if (in.stream.stream != nullptr && drv_.cuMemcpyHtoDAsync != nullptr) {
    CUresult r = drv_.cuMemcpyHtoDAsync(in.dst, cs.payload, in.bytes, in.stream.stream);
    if (r == CUDA_SUCCESS) r = drv_.cuStreamSynchronize(in.stream.stream);
    return r;
  }
  if (in.stream.stream != nullptr) {
    CUresult r = drv_.cuStreamSynchronize(in.stream.stream);
    if (r != CUDA_SUCCESS) return r;
  }
  return drv_.cuMemcpyHtoD(in.dst, cs.payload, in.bytes);
}

CUresult Session::HandleMemcpyDtoH(CallState& cs, const MemcpyDtoHIn& in,
                                   calls::MemcpyDtoH::Results*) {
  if (in.bytes == 0) return CUDA_SUCCESS;
  CUstream stream = in.stream.stream;
  // Behind long work on its stream, the copy is not made now: the client waits on a lane and
  // asks again (Call.hand_off).
  if (drv_.cuStreamQuery != nullptr && HandOff(cs, [&] { return drv_.cuStreamQuery(stream); })) {
    return CUDA_SUCCESS;
  }
  return CopyOut(cs, in.src, in.bytes, stream);
}

CUresult Session::CopyOut(CallState& cs, CUdeviceptr src, size_t bytes, CUstream stream) {
  if (bytes == 0) return CUDA_SUCCESS;
  CUresult direct_result = CUDA_SUCCESS;
  if (void* direct = DirectAccess(src, bytes, stream, &direct_result)) {
    // Sent straight from device memory; the send completes before the next call runs.
    cs.out_payload = static_cast<char*>(direct);
    cs.out_size = bytes;
    return CUDA_SUCCESS;
  }
  if (direct_result != CUDA_SUCCESS) return direct_result;
  cs.out_payload = OutputBuffer(bytes);
  if (cs.out_payload == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r;
  if (stream != nullptr && drv_.cuMemcpyDtoHAsync != nullptr) {
    r = drv_.cuMemcpyDtoHAsync(cs.out_payload, src, bytes, stream);
    if (r == CUDA_SUCCESS) r = drv_.cuStreamSynchronize(stream);
  } else {
    r = drv_.cuMemcpyDtoH(cs.out_payload, src, bytes);
  }
  if (r == CUDA_SUCCESS) cs.out_size = bytes;
  return r;
}

CUresult Session::HandleMemcpyDtoD(CallState& cs, const MemcpyDtoDIn& in,
                                   calls::MemcpyDtoD::Results*) {
  if (in.bytes == 0) return CUDA_SUCCESS;
  // A copy between device memory is asynchronous to the host even when it is not called *Async:
  // behind work still running on its stream it is queued there (as a memset, MemsetElements).
  if (in.async || (drv_.cuMemcpyDtoDAsync != nullptr && StreamBusy(in.stream.stream))) {
    REQUIRE_FN(cuMemcpyDtoDAsync);
    return drv_.cuMemcpyDtoDAsync(in.dst, in.src, in.bytes, in.stream.stream);
  }
  return drv_.cuMemcpyDtoD(in.dst, in.src, in.bytes);
}

// Between memory of two contexts of the session (each range checked against its own context).
CUresult Session::HandleMemcpyPeer(CallState& cs, const MemcpyPeerIn& in,
                                   calls::MemcpyPeer::Results*) {
  if (in.bytes == 0) return CUDA_SUCCESS;
  if (in.async) {
    REQUIRE_FN(cuMemcpyPeerAsync);
    return drv_.cuMemcpyPeerAsync(in.dst, in.dst_ctx->context, in.src, in.src_ctx->context,
                                  in.bytes, in.stream.stream);
  }
  REQUIRE_FN(cuMemcpyPeer);
  return drv_.cuMemcpyPeer(in.dst, in.dst_ctx->context, in.src, in.src_ctx->context, in.bytes);
}

CUresult Session::HandleMemset(CallState& cs, const MemsetIn& in, calls::Memset::Results*) {
  if (in.count == 0) return CUDA_SUCCESS;
  return MemsetElements(cs, in.dst, in.value, in.element_size, in.count, in.stream.stream,
                        in.async);
}

CUresult Session::MemsetElements(CallState& cs, CUdeviceptr dst, uint64_t value, uint64_t element,
                                 uint64_t count, CUstream stream, bool async) {
  // A memset of device memory (all a session's memory is, on the server) is asynchronous to the
  // host even when it is not called *Async. Behind work still running on its stream (the legacy
  // default stream, for the synchronous ones) it is queued there, so that the work does not hold
  // the session (and its other streams) until it ends. On an idle stream it is made at once, as
  // a GPU would finish it before the program's next work: programs that set memory and then
  // launch on a non-blocking stream (unordered with it, strictly) rely on that.
  async = async || (drv_.cuMemsetD8Async != nullptr && drv_.cuMemsetD16Async != nullptr &&
                    drv_.cuMemsetD32Async != nullptr && StreamBusy(stream));
  switch (element) {
    case 1:
      if (async) {
        REQUIRE_FN(cuMemsetD8Async);
        return drv_.cuMemsetD8Async(dst, static_cast<unsigned char>(value), count, stream);
      }
      REQUIRE_FN(cuMemsetD8);
      return drv_.cuMemsetD8(dst, static_cast<unsigned char>(value), count);
    case 2:
      if (async) {
        REQUIRE_FN(cuMemsetD16Async);
        return drv_.cuMemsetD16Async(dst, static_cast<unsigned short>(value), count, stream);
      }
      REQUIRE_FN(cuMemsetD16);
      return drv_.cuMemsetD16(dst, static_cast<unsigned short>(value), count);
    default:
      if (async) {
        REQUIRE_FN(cuMemsetD32Async);
        return drv_.cuMemsetD32Async(dst, static_cast<unsigned int>(value), count, stream);
      }
      REQUIRE_FN(cuMemsetD32);
      return drv_.cuMemsetD32(dst, static_cast<unsigned int>(value), count);
  }
}

// ---- Pitched 2D copies and memsets, row by row on the backend ----

CUresult Session::HandleMemcpy2DHtoD(CallState& cs, const Memcpy2DHtoDIn& in,
                                     calls::Memcpy2DHtoD::Results*) {
  if (CUresult r = AfterStreamWork(in.stream.stream); r != CUDA_SUCCESS) return r;
  for (uint64_t row = 0; row < in.height; ++row) {
    CUresult r =
        drv_.cuMemcpyHtoD(in.dst + row * in.dst_pitch, cs.payload + row * in.width, in.width);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemcpy2DDtoH(CallState& cs, const Memcpy2DDtoHIn& in,
                                     calls::Memcpy2DDtoH::Results*) {
  if (CUresult r = AfterStreamWork(in.stream.stream); r != CUDA_SUCCESS) return r;
  // At most the rows' extent, which lies in one allocation of the session (calls.def's check).
  const uint64_t packed = in.width * in.height;
  cs.out_payload = OutputBuffer(packed);
  if (cs.out_payload == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  for (uint64_t row = 0; row < in.height; ++row) {
    CUresult r =
        drv_.cuMemcpyDtoH(cs.out_payload + row * in.width, in.src + row * in.src_pitch, in.width);
    if (r != CUDA_SUCCESS) return r;
  }
  cs.out_size = packed;
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemcpy2DDtoD(CallState&, const Memcpy2DDtoDIn& in,
                                     calls::Memcpy2DDtoD::Results*) {
  CUstream stream = in.stream.stream;
  // Queued on a busy stream, the legacy default stream when none (see HandleMemcpyDtoD).
  const bool queued =
      drv_.cuMemcpyDtoDAsync != nullptr && (stream != nullptr || StreamBusy(stream));
  for (uint64_t row = 0; row < in.height; ++row) {
    const CUdeviceptr dst = in.dst + row * in.dst_pitch, src = in.src + row * in.src_pitch;
    CUresult r = queued ? drv_.cuMemcpyDtoDAsync(dst, src, in.width, stream)
                        : drv_.cuMemcpyDtoD(dst, src, in.width);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemset2D(CallState& cs, const Memset2DIn& in, calls::Memset2D::Results*) {
  for (uint64_t row = 0; row < in.height; ++row) {
    CUresult r = MemsetElements(cs, in.dst + row * in.pitch, in.value, in.element_size, in.width,
                                in.stream.stream, in.async);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

// ---- Helpers ----

CUresult Session::StageCopyIn(CallState& cs, CUdeviceptr dst, size_t bytes, CUstream stream,
                              bool* staged) {
  *staged = false;
  StagingBuffers* staging = nullptr;
  if (!StreamBusy(stream) || (staging = StagingOf(cs.ctx)) == nullptr) return CUDA_SUCCESS;
  void* buffer = staging->Take(bytes);
  if (buffer == nullptr) return CUDA_SUCCESS;  // the budget is taken: the copy waits its turn
  *staged = true;
  if (cs.unfetched != nullptr) {
    Status s = channel_->FetchPayload(cs.unfetched, buffer);
    if (!s.ok()) {
      staging->ReleaseAfter(buffer, stream);
      cs.detail = "payload lost: " + s.ToString();
      return CUDA_ERROR_UNKNOWN;
    }
  } else {
    memcpy(buffer, cs.payload, bytes);
  }
  CUresult r = drv_.cuMemcpyHtoDAsync(dst, buffer, bytes, stream);
  const CUresult released = staging->ReleaseAfter(buffer, stream);
  return r != CUDA_SUCCESS ? r : released;
}

void* Session::DirectAccess(CUdeviceptr dptr, size_t bytes, CUstream stream, CUresult* r) {
  *r = CUDA_SUCCESS;
  if (drv_.softgpuMemDirectAccess == nullptr || bytes < kDirectCopyBytes) return nullptr;
  void* host = nullptr;
  *r = drv_.softgpuMemDirectAccess(&host, dptr, bytes, stream);
  return *r == CUDA_SUCCESS ? host : nullptr;
}

char* Session::OutputBuffer(size_t bytes) {
  if (bytes > output_capacity_) {
    output_.reset(new (std::nothrow) char[bytes]);
    output_capacity_ = output_ ? bytes : 0;
  }
  return output_.get();
}

bool Session::OwnsRange(uint64_t ctx_id, CUdeviceptr ptr, size_t bytes) const {
  auto it = allocations_.upper_bound(ptr);
  if (it == allocations_.begin()) return false;
  --it;
  // The range may continue into allocations that adjoin (mappings placed side by side).
  for (;;) {
    const CUdeviceptr base = it->first;
    const Allocation& a = it->second;
    if (a.ctx != ctx_id) return false;
    if (ptr < base || ptr - base > a.size) return false;
    const uint64_t here = a.size - (ptr - base);
    if (bytes <= here) return true;
    bytes -= here;
    ptr = base + a.size;
    if (++it == allocations_.end() || it->first != ptr) return false;
  }
}

StagingBuffers* Session::StagingOf(ContextRecord* ctx) {
  if (limits_.max_staging_bytes == 0 || !StagingBuffers::Supported(drv_)) return nullptr;
  if (ctx->staging == nullptr) {
    if (staging_budget_ == nullptr) {
      staging_budget_ = std::make_unique<StagingBudget>(limits_.max_staging_bytes);
    }
    ctx->staging = std::make_unique<StagingBuffers>(drv_, staging_budget_.get());
  }
  return ctx->staging.get();
}

bool Session::StreamBusy(CUstream stream) {
  return drv_.cuStreamQuery != nullptr && drv_.cuStreamQuery(stream) == CUDA_ERROR_NOT_READY;
}

CUresult Session::AfterStreamWork(CUstream stream) {
  return stream != nullptr ? drv_.cuStreamSynchronize(stream) : CUDA_SUCCESS;
}

}  // namespace rgpu::server
