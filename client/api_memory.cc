// Device memory: allocation, copies and memsets, forwarded to the server. Host-to-device data goes
// with the call (large buffers as rendezvous data); device-to-host replies land straight in the
// program's buffer.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "client/graph_memory.h"
#include "client/impl.h"
#include "client/managed_memory.h"
#include "client/memory_map.h"
#include "client/sync_memops.h"

namespace calls = rgpu::calls;
using rgpu::client::FinishSynchronousMemop;
using rgpu::client::Memory;
using rgpu::client::RequireContext;
using rgpu::client::ResolveStream;
using rgpu::client::Server;

namespace rgpu::client {

bool SuballocationOn() {
  static const bool on = [] {
    const char* v = getenv("RGPU_SUBALLOCATE");
    return v == nullptr || strcmp(v, "0") != 0;
  }();
  return on;
}

CUresult AllocateDevice(CUctx_st* ctx, size_t bytesize, CUdeviceptr* dptr, bool record) {
  // Addresses another server's memory already has (client/memory_map.h) are kept aside while
  // the server is asked again, a few times, and then given back.
  constexpr int kTries = 4;
  std::vector<uint64_t> taken;
  CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
  for (int attempt = 0; attempt < kTries; ++attempt) {
    calls::MemAlloc::Results allocated;
    r = Server().Call<calls::MemAlloc>(ctx->remote, {.bytesize = bytesize}, &allocated);
    if (r != CUDA_SUCCESS) break;
    if (Memory().InsertDevice(allocated.dptr, bytesize, ctx)) {
      if (!record) Memory().Erase(allocated.dptr);  // a slab: only its pieces are recorded
      *dptr = allocated.dptr;
      break;
    }
    taken.push_back(allocated.dptr);
    r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  for (uint64_t d : taken) Server().Post<calls::MemFree>(ctx->remote, {.dptr = d});
  return r;
}

}  // namespace rgpu::client

namespace {

// A piece of a slab of `ctx`'s (client/suballocator.h), taking a new slab when none has room;
// false when none could be had (then the caller allocates the size itself).
bool CarvePiece(CUctx_st* ctx, size_t bytesize, CUdeviceptr* dptr) {
  constexpr int kTries = 8;
  for (int attempt = 0; attempt < kTries; ++attempt) {
    const uint64_t piece = ctx->suballocator.Take(bytesize);
    if (piece == 0) {
      CUdeviceptr slab = 0;
      if (rgpu::client::AllocateDevice(ctx, rgpu::client::Suballocator::kSlabBytes, &slab,
                                       /*record=*/false) != CUDA_SUCCESS) {
        return false;
      }
      ctx->suballocator.AddSlab(slab);
      continue;
    }
    // A piece whose addresses another server's memory has is left taken, never handed out.
    if (Memory().InsertDevice(piece, bytesize, ctx)) {
      *dptr = piece;
      return true;
    }
  }
  return false;
}

}  // namespace

RGPU_IMPL(cuMemAlloc_v2)(CUdeviceptr* dptr, size_t bytesize) {
  if (dptr == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  // Small sizes: carved from a slab, no round trip but the slab's; a slab that cannot be had
  // (the quota has less than a slab left) leaves the size to be allocated as asked.
  if (rgpu::client::Suballocator::Carves(bytesize) && rgpu::client::SuballocationOn()) {
    // A context whose kernel faulted fails every call, this one too, as the driver's does.
    if (CUresult sticky = Server().StickyError(ctx->remote); sticky != CUDA_SUCCESS) return sticky;
    if (CarvePiece(ctx, bytesize, dptr)) return CUDA_SUCCESS;
  }
  return rgpu::client::AllocateDevice(ctx, bytesize, dptr, /*record=*/true);
}

RGPU_IMPL(cuMemAllocPitch_v2)
(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height, unsigned int element_size) {
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (element_size != 4 && element_size != 8 && element_size != 16) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  int align = 0;
  rgpu_impl_cuDeviceGetAttribute(&align, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, ctx->device);
  if (align <= 0) align = 512;
  const size_t p = (width + align - 1) / align * align;
  r = rgpu_impl_cuMemAlloc_v2(dptr, p * height);
  if (r == CUDA_SUCCESS) *pitch = p;
  return r;
}

// Managed memory (client/managed_memory.h): device memory whose address is also this process's,
// CU_MEM_ATTACH_GLOBAL or CU_MEM_ATTACH_HOST (the same here: the host never touches it while
// device work is pending, whatever the stream).
RGPU_IMPL(cuMemAllocManaged)(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  if (dptr == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  uint64_t address = 0;
  r = rgpu::client::AllocateManaged(ctx, bytesize, false, &address);
  if (r == CUDA_SUCCESS) *dptr = address;
  return r;
}

RGPU_IMPL(cuMemFree_v2)(CUdeviceptr dptr) {
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (dptr == 0) return CUDA_SUCCESS;
  auto range = Memory().Find(dptr);
  if (range && range->managed && range->base == dptr && range->type == CU_MEMORYTYPE_DEVICE) {
    return rgpu::client::FreeManaged(dptr);
  }
  if (!range || range->base != dptr || range->type != CU_MEMORYTYPE_DEVICE || !range->freeable ||
      range->ctx != ctx) {
    RGPU_LOG_DEBUG("cuMemFree(%#llx): %s", static_cast<unsigned long long>(dptr),
                   !range                ? "not an allocation"
                   : range->base != dptr ? "not the start of an allocation"
                   : range->ctx != ctx   ? "an allocation of another context"
                                         : "not memory cuMemFree frees");
    return CUDA_ERROR_INVALID_VALUE;
  }
  // A graph allocation freed outside its graph ends (the graph keeps its address and memory for
  // the next launch, as CUDA's graphs keep theirs).
  if (CUresult ended; rgpu::client::EndGraphAllocationByProgram(dptr, &ended)) {
    if (ended == CUDA_SUCCESS) ended = rgpu::client::WaitStreamDrained(nullptr);  // as cuMemFree
    return ended;
  }
  // A piece of a slab goes back to the slab; its space may be handed out again at once, so
  // the server first waits for the context's work, as the driver's free does (FreeFence). A
  // slab left empty goes back to the server (whose free waits the same way).
  if (uint64_t emptied = 0; ctx->suballocator.Give(dptr, &emptied)) {
    Memory().Erase(dptr);
    if (emptied != 0) return Server().Post<calls::MemFree>(ctx->remote, {.dptr = emptied});
    return Server().Post<calls::FreeFence>(ctx->remote, {});
  }
  // Stream-ordered on the server after everything posted before it, as the driver's free waits
  // for the work using the memory; the range is checked above, so the server's answer can only
  // be a failure of earlier work, which the next synchronizing call reports.
  Memory().Erase(dptr);
  return Server().Post<calls::MemFree>(ctx->remote, {.dptr = dptr});
}

RGPU_IMPL(cuMemGetInfo_v2)(size_t* free_bytes, size_t* total) {
  if (free_bytes == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  calls::MemGetInfo::Results info;
  r = Server().Call<calls::MemGetInfo>(ctx->remote, {}, &info);
  if (r == CUDA_SUCCESS) {
    *free_bytes = info.free;
    *total = info.total;
  }
  return r;
}

namespace rgpu::client {

// Pageable host-to-device copies larger than this travel in chunks of this size.
constexpr size_t kPageableChunk = size_t{4} << 20;

CUresult WaitBeforeSynchronousCopy(CUctx_st* ctx, uint64_t remote_stream) {
  if (!Server().HandsOffWaits(ctx->remote)) return CUDA_SUCCESS;
  return Server().Call<calls::StreamSynchronize>(ctx->remote, {.stream = remote_stream});
}

CUresult CopyHtoD(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream, bool async) {
  if (src == nullptr && bytes > 0) return CUDA_ERROR_INVALID_VALUE;
  // From managed or mapped memory: its current bytes may be the device's.
  if (IsManagedAddress(reinterpret_cast<uint64_t>(src))) {
    return CopyDtoD(dst, DeviceAddressOf(reinterpret_cast<uint64_t>(src)), bytes, stream, async);
  }
  if (CUresult r = BeforeDeviceWork(); r != CUDA_SUCCESS) return r;
  if (!async) {
    CUresult r = WaitStreamDrained(stream);
    if (r != CUDA_SUCCESS) return r;
  }
  auto pinned = Memory().Find(reinterpret_cast<uint64_t>(src));
  const bool from_pinned = pinned && pinned->type == CU_MEMORYTYPE_HOST &&
                           bytes <= pinned->size - (reinterpret_cast<uint64_t>(src) - pinned->base);
  if (async && !from_pinned && StreamHeld(stream)) {
    // Held behind a host function: pageable data may change once this returns, so keep a copy.
    auto copy = std::make_shared<std::string>(static_cast<const char*>(src), bytes);
    if (Defer(stream, CU_GRAPH_NODE_TYPE_MEMCPY,
              [=](CUstream s) { return CopyHtoD(dst, copy->data(), bytes, s, true); })) {
      return CUDA_SUCCESS;
    }
  }
  if (Defer(stream, CU_GRAPH_NODE_TYPE_MEMCPY,
            [=](CUstream s) { return CopyHtoD(dst, src, bytes, s, true); })) {
    return CUDA_SUCCESS;
  }
  CUctx_st* ctx;
  uint64_t remote_stream = 0;
  CUresult r = ResolveStream(stream, &ctx, &remote_stream);
  if (r != CUDA_SUCCESS) return r;
  r = CheckDeviceRange(ctx, dst, bytes);
  if (r != CUDA_SUCCESS) return r;
  if (!async) {
    r = WaitBeforeSynchronousCopy(ctx, remote_stream);
    if (r != CUDA_SUCCESS) return r;
  }
  // Stream-ordered: sent without waiting. From pinned memory the program leaves alone until it
  // synchronizes, the data may go while this returns; pageable data has left when it returns.
  // Large copies go as chunks, so the server copies one to the device while the next is
  // arriving: pageable ones always, and from pinned memory over a transport that moves large
  // payloads faster in pieces (Channel::bulk_piece). Asynchronous ones from pinned memory are
  // all posted at once; the others two at a time, and all of them have left when this returns.
  const size_t piece = from_pinned ? Server().BulkPiece(ctx->remote) : kPageableChunk;
  if (piece != 0 && bytes > piece) {
    const bool all_at_once = async && from_pinned;
    const char* from = static_cast<const char*>(src);
    for (size_t done = 0; done < bytes; done += piece) {
      const size_t n = std::min(piece, bytes - done);
      r = Server().Post<calls::MemcpyHtoD>(
          ctx->remote, {.dst = dst + done, .bytes = n, .stream = remote_stream, .async = async},
          from + done, n, true);
      if (r == CUDA_SUCCESS && !all_at_once) r = Server().WaitSent(1);
      if (r != CUDA_SUCCESS) return r;
    }
    return all_at_once ? CUDA_SUCCESS : Server().WaitSent();
  }
  return Server().Post<calls::MemcpyHtoD>(
      ctx->remote, {.dst = dst, .bytes = bytes, .stream = remote_stream, .async = async}, src,
      bytes, async && from_pinned);
}

CUresult CopyDtoH(void* dst, CUdeviceptr src, size_t bytes, CUstream stream, bool async) {
  if (dst == nullptr && bytes > 0) return CUDA_ERROR_INVALID_VALUE;
  if (IsManagedAddress(reinterpret_cast<uint64_t>(dst))) {
    return CopyDtoD(DeviceAddressOf(reinterpret_cast<uint64_t>(dst)), src, bytes, stream, async);
  }
  // The device only reads: the host's writes go first, its pages stay readable.
  if (CUresult r = BeforeDeviceWork(DeviceAccess::kReads); r != CUDA_SUCCESS) return r;
  if (!async) {
    CUresult r = WaitStreamDrained(stream);
    if (r != CUDA_SUCCESS) return r;
  }
  if (Defer(stream, CU_GRAPH_NODE_TYPE_MEMCPY,
            [=](CUstream s) { return CopyDtoH(dst, src, bytes, s, true); })) {
    return CUDA_SUCCESS;
  }
  CUctx_st* ctx;
  uint64_t remote_stream = 0;
  CUresult r = ResolveStream(stream, &ctx, &remote_stream);
  if (r != CUDA_SUCCESS) return r;
  if (async && Server().PostsReads(ctx->remote)) {
    // Into pinned memory the program leaves alone until it synchronizes: posted, its bytes come
    // before the reply to whatever tells the program the copy is done.
    auto pinned = Memory().Find(reinterpret_cast<uint64_t>(dst));
    if (pinned && pinned->type == CU_MEMORYTYPE_HOST &&
        bytes <= pinned->size - (reinterpret_cast<uint64_t>(dst) - pinned->base)) {
      return Server().PostRead(ctx->remote, src, bytes, remote_stream, dst);
    }
  }
  if (Server().PostsReads(ctx->remote)) {
    // A waited copy over a transport that moves large payloads faster in pieces: all pieces but
    // the last as posted reads, whose bytes arrive before the reply to the last piece's call
    // (the destination stays put: the program waits in this call).
    const size_t piece = Server().BulkPiece(ctx->remote);
    if (piece != 0 && bytes > piece) {
      const size_t last = (bytes - 1) / piece * piece;
      r = Server().PostRead(ctx->remote, src, last, remote_stream, dst);
      if (r != CUDA_SUCCESS) return r;
      src += last;
      dst = static_cast<char*>(dst) + last;
      bytes -= last;
    }
  }
  size_t got = 0;
  r = Server().Call<calls::MemcpyDtoH>(
      ctx->remote, {.src = src, .bytes = bytes, .stream = remote_stream, .async = async}, nullptr,
      nullptr, 0, rgpu::client::ReplyBuffer{dst, bytes}, &got);
  if (r == CUDA_SUCCESS && got != bytes) return CUDA_ERROR_UNKNOWN;
  return r;
}

CUresult CopyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream, bool async) {
  if (CUresult r = BeforeDeviceWork(); r != CUDA_SUCCESS) return r;
  if (Defer(
          stream, CU_GRAPH_NODE_TYPE_MEMCPY,
          [=](CUstream s) { return CopyDtoD(dst, src, bytes, s, true); }, /*recordable=*/true)) {
    return CUDA_SUCCESS;
  }
  CUctx_st* ctx;
  uint64_t remote_stream = 0;
  CUresult r = ResolveStream(stream, &ctx, &remote_stream);
  if (r != CUDA_SUCCESS) return r;
  // Unified addressing: ends in other contexts (devices) make it a copy between contexts.
  auto dst_range = Memory().Find(dst), src_range = Memory().Find(src);
  if (dst_range && src_range && dst_range->type == CU_MEMORYTYPE_DEVICE &&
      src_range->type == CU_MEMORYTYPE_DEVICE && (dst_range->ctx != ctx || src_range->ctx != ctx)) {
    return CopyBetweenContexts(dst, dst_range->ctx, src, src_range->ctx, bytes, stream, async);
  }
  if ((r = CheckDeviceRange(ctx, dst, bytes)) != CUDA_SUCCESS ||
      (r = CheckDeviceRange(ctx, src, bytes)) != CUDA_SUCCESS) {
    return r;
  }
  return Server().Post<calls::MemcpyDtoD>(
      ctx->remote,
      {.dst = dst, .src = src, .bytes = bytes, .stream = remote_stream, .async = async});
}

bool IsDeviceAddress(uint64_t address) {
  auto range = Memory().Find(address);
  return range && (range->type == CU_MEMORYTYPE_DEVICE || range->managed);
}

bool IsManagedAddress(uint64_t address) {
  if (!g_managed_memory_exists.load(std::memory_order_acquire)) return false;
  auto range = Memory().Find(address);
  return range && range->managed;
}

uint64_t DeviceAddressOf(uint64_t address) {
  if (!g_managed_memory_exists.load(std::memory_order_acquire)) return address;
  auto range = Memory().Find(address);
  return range && range->managed ? address + range->device_shift : address;
}

}  // namespace rgpu::client

namespace {

using rgpu::client::CopyDtoD;
using rgpu::client::CopyDtoH;
using rgpu::client::CopyHtoD;

CUresult CopyHtoH(void* dst, const void* src, size_t bytes, CUstream stream, bool async) {
  if (bytes > 0 && (dst == nullptr || src == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  // Captured, a node that copies when the graph runs.
  if (async && rgpu::client::StreamCapturing(stream) &&
      rgpu::client::Defer(stream, CU_GRAPH_NODE_TYPE_MEMCPY,
                          [=](CUstream s) { return CopyHtoH(dst, src, bytes, s, true); })) {
    return CUDA_SUCCESS;
  }
  // Otherwise synchronous for the host, as CUDA's copies between host buffers are: after the
  // stream's earlier work (the legacy default stream's for the NULL stream), held work included.
  if (CUresult r = rgpu_impl_cuStreamSynchronize(stream); r != CUDA_SUCCESS) return r;
  memmove(dst, src, bytes);
  return CUDA_SUCCESS;
}

// A copy between unified addresses: the direction comes from what each pointer is.
CUresult CopyUnified(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream, bool async) {
  const bool dst_device = rgpu::client::IsDeviceAddress(dst);
  const bool src_device = rgpu::client::IsDeviceAddress(src);
  using rgpu::client::DeviceAddressOf;
  if (dst_device && src_device) {
    return CopyDtoD(DeviceAddressOf(dst), DeviceAddressOf(src), bytes, stream, async);
  }
  if (dst_device) {
    return CopyHtoD(DeviceAddressOf(dst), reinterpret_cast<const void*>(src), bytes, stream, async);
  }
  if (src_device) {
    return CopyDtoH(reinterpret_cast<void*>(dst), DeviceAddressOf(src), bytes, stream, async);
  }
  return CopyHtoH(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, stream,
                  async);
}

CUresult Memset(CUdeviceptr dst, uint64_t value, uint64_t element, size_t count, CUstream stream,
                bool async) {
  if (CUresult r = rgpu::client::BeforeDeviceWork(); r != CUDA_SUCCESS) return r;
  if (rgpu::client::Defer(
          stream, CU_GRAPH_NODE_TYPE_MEMSET,
          [=](CUstream s) { return Memset(dst, value, element, count, s, true); },
          /*recordable=*/true)) {
    return CUDA_SUCCESS;
  }
  CUctx_st* ctx;
  uint64_t remote_stream = 0;
  CUresult r = ResolveStream(stream, &ctx, &remote_stream);
  if (r != CUDA_SUCCESS) return r;
  if (count > (~0ull) / element) return CUDA_ERROR_INVALID_VALUE;
  r = rgpu::client::CheckDeviceRange(ctx, dst, count * element);
  if (r != CUDA_SUCCESS) return r;
  return Server().Post<calls::Memset>(ctx->remote, {.dst = dst,
                                                    .value = static_cast<uint32_t>(value),
                                                    .element_size = static_cast<uint32_t>(element),
                                                    .count = count,
                                                    .stream = remote_stream,
                                                    .async = async});
}

}  // namespace

RGPU_IMPL(cuMemcpyHtoD_v2)(CUdeviceptr dst, const void* src, size_t bytes) {
  return FinishSynchronousMemop(CopyHtoD(dst, src, bytes, nullptr, false),
                                {dst, reinterpret_cast<CUdeviceptr>(src)});
}
RGPU_IMPL(cuMemcpyHtoDAsync_v2)(CUdeviceptr dst, const void* src, size_t bytes, CUstream s) {
  return CopyHtoD(dst, src, bytes, s, true);
}
RGPU_IMPL(cuMemcpyDtoH_v2)(void* dst, CUdeviceptr src, size_t bytes) {
  return CopyDtoH(dst, src, bytes, nullptr, false);
}
RGPU_IMPL(cuMemcpyDtoHAsync_v2)(void* dst, CUdeviceptr src, size_t bytes, CUstream s) {
  return CopyDtoH(dst, src, bytes, s, true);
}
RGPU_IMPL(cuMemcpyDtoD_v2)(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  return FinishSynchronousMemop(CopyDtoD(dst, src, bytes, nullptr, false), {dst, src});
}
RGPU_IMPL(cuMemcpyDtoDAsync_v2)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s) {
  return CopyDtoD(dst, src, bytes, s, true);
}
RGPU_IMPL(cuMemsetD8_v2)(CUdeviceptr dst, unsigned char value, size_t n) {
  return FinishSynchronousMemop(Memset(dst, value, 1, n, nullptr, false), {dst});
}
RGPU_IMPL(cuMemsetD16_v2)(CUdeviceptr dst, unsigned short value, size_t n) {
  return FinishSynchronousMemop(Memset(dst, value, 2, n, nullptr, false), {dst});
}
RGPU_IMPL(cuMemsetD32_v2)(CUdeviceptr dst, unsigned int value, size_t n) {
  return FinishSynchronousMemop(Memset(dst, value, 4, n, nullptr, false), {dst});
}
RGPU_IMPL(cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t n, CUstream s) {
  return Memset(dst, value, 1, n, s, true);
}
RGPU_IMPL(cuMemsetD16Async)(CUdeviceptr dst, unsigned short value, size_t n, CUstream s) {
  return Memset(dst, value, 2, n, s, true);
}
RGPU_IMPL(cuMemsetD32Async)(CUdeviceptr dst, unsigned int value, size_t n, CUstream s) {
  return Memset(dst, value, 4, n, s, true);
}

namespace {

CUresult Memset2D(CUdeviceptr dst, size_t pitch, uint64_t value, uint64_t element, size_t width,
                  size_t height, CUstream stream, bool async) {
  if (CUresult r = rgpu::client::BeforeDeviceWork(); r != CUDA_SUCCESS) return r;
  if (rgpu::client::Defer(
          stream, CU_GRAPH_NODE_TYPE_MEMSET,
          [=](CUstream s) { return Memset2D(dst, pitch, value, element, width, height, s, true); },
          /*recordable=*/true)) {
    return CUDA_SUCCESS;
  }
  if (width == 0 || height == 0) return CUDA_SUCCESS;
  if (pitch < width * element && height > 1) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  uint64_t remote_stream = 0;
  CUresult r = ResolveStream(stream, &ctx, &remote_stream);
  if (r != CUDA_SUCCESS) return r;
  r = rgpu::client::CheckDeviceRange(ctx, dst, pitch * (height - 1) + width * element);
  if (r != CUDA_SUCCESS) return r;
  return Server().Post<calls::Memset2D>(ctx->remote,
                                        {.dst = dst,
                                         .pitch = pitch,
                                         .value = static_cast<uint32_t>(value),
                                         .element_size = static_cast<uint32_t>(element),
                                         .width = width,
                                         .height = height,
                                         .stream = remote_stream,
                                         .async = async});
}

}  // namespace

RGPU_IMPL(cuMemsetD2D8_v2)(CUdeviceptr dst, size_t pitch, unsigned char v, size_t w, size_t h) {
  return FinishSynchronousMemop(Memset2D(dst, pitch, v, 1, w, h, nullptr, false), {dst});
}
RGPU_IMPL(cuMemsetD2D16_v2)(CUdeviceptr dst, size_t pitch, unsigned short v, size_t w, size_t h) {
  return FinishSynchronousMemop(Memset2D(dst, pitch, v, 2, w, h, nullptr, false), {dst});
}
RGPU_IMPL(cuMemsetD2D32_v2)(CUdeviceptr dst, size_t pitch, unsigned int v, size_t w, size_t h) {
  return FinishSynchronousMemop(Memset2D(dst, pitch, v, 4, w, h, nullptr, false), {dst});
}
RGPU_IMPL(cuMemsetD2D8Async)
(CUdeviceptr dst, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s) {
  return Memset2D(dst, pitch, v, 1, w, h, s, true);
}
RGPU_IMPL(cuMemsetD2D16Async)
(CUdeviceptr dst, size_t pitch, unsigned short v, size_t w, size_t h, CUstream s) {
  return Memset2D(dst, pitch, v, 2, w, h, s, true);
}
RGPU_IMPL(cuMemsetD2D32Async)
(CUdeviceptr dst, size_t pitch, unsigned int v, size_t w, size_t h, CUstream s) {
  return Memset2D(dst, pitch, v, 4, w, h, s, true);
}
RGPU_SAME_AS(cuMemsetD2D8_v2_ptds, cuMemsetD2D8_v2)
RGPU_SAME_AS(cuMemsetD2D16_v2_ptds, cuMemsetD2D16_v2)
RGPU_SAME_AS(cuMemsetD2D32_v2_ptds, cuMemsetD2D32_v2)
RGPU_PER_THREAD_SAME_AS(cuMemsetD2D8Async_ptsz)
RGPU_PER_THREAD_SAME_AS(cuMemsetD2D16Async_ptsz)
RGPU_PER_THREAD_SAME_AS(cuMemsetD2D32Async_ptsz)

RGPU_IMPL(cuMemcpy)(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  return FinishSynchronousMemop(CopyUnified(dst, src, bytes, nullptr, false), {dst, src});
}
RGPU_IMPL(cuMemcpyAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s) {
  return CopyUnified(dst, src, bytes, s, true);
}

// Per-thread-default-stream builds call these; the default stream is shared per context here.
RGPU_SAME_AS(cuMemcpy_ptds, cuMemcpy)
RGPU_PER_THREAD_SAME_AS(cuMemcpyAsync_ptsz)
RGPU_SAME_AS(cuMemcpyHtoD_v2_ptds, cuMemcpyHtoD_v2)
RGPU_SAME_AS(cuMemcpyDtoH_v2_ptds, cuMemcpyDtoH_v2)
RGPU_SAME_AS(cuMemcpyDtoD_v2_ptds, cuMemcpyDtoD_v2)
RGPU_PER_THREAD_SAME_AS(cuMemcpyHtoDAsync_v2_ptsz)
RGPU_PER_THREAD_SAME_AS(cuMemcpyDtoHAsync_v2_ptsz)
RGPU_PER_THREAD_SAME_AS(cuMemcpyDtoDAsync_v2_ptsz)
RGPU_SAME_AS(cuMemsetD8_v2_ptds, cuMemsetD8_v2)
RGPU_SAME_AS(cuMemsetD16_v2_ptds, cuMemsetD16_v2)
RGPU_SAME_AS(cuMemsetD32_v2_ptds, cuMemsetD32_v2)
RGPU_PER_THREAD_SAME_AS(cuMemsetD8Async_ptsz)
RGPU_PER_THREAD_SAME_AS(cuMemsetD16Async_ptsz)
RGPU_PER_THREAD_SAME_AS(cuMemsetD32Async_ptsz)
