// Device memory: allocation, copies (arrays included: an array side is its storage in device
// memory with the array's pitches) and memsets. Device ranges are validated synchronously
// (CUDA_ERROR_INVALID_VALUE for memory the current context does not own, or outside an array).
// Copies and memsets also reach the memory of contexts the current one has peer access to
// (cuCtxEnablePeerAccess), ordered in the current context only, as CUDA orders them.
#include <cuda.h>

#include <cstring>
#include <vector>

#include "softgpu/api_util.h"
#include "softgpu/ipc.h"

using namespace softgpu;

std::shared_ptr<Allocation> softgpu::DeviceRange(Context& ctx, CUdeviceptr address, size_t size) {
  std::shared_ptr<Allocation> a = ctx.memory().Find(address, size);
  if (a == nullptr) a = ctx.memory().FindInPeers(address, size);
  return a != nullptr ? a : GlobalHostMappings().Find(address, size);
}

bool softgpu::OtherContextsMemory(const Context& ctx, CUdeviceptr address) {
  if (!IsDeviceAddress(address)) return false;  // host memory, without visiting every context
  bool found = false;
  GetDriver().contexts.ForEach([&](const std::shared_ptr<Context>& c) {
    if (found || c.get() == &ctx || !c->alive()) return;
    std::shared_ptr<Allocation> a = c->memory().Find(address, 1);
    if (a != nullptr && !a->native) found = true;
  });
  return found;
}

namespace {

uint8_t* HostOf(const std::shared_ptr<Allocation>& a, CUdeviceptr address) {
  return a->host + (address - a->base);
}

// Runs `copy` on the calling thread once all work it must follow has completed.
template <typename F>
CUresult RunSynchronously(const std::shared_ptr<Context>& ctx, F&& copy) {
  ctx->WaitForDefaultOrder();
  if (CUresult r = ctx->sticky_error(); r != CUDA_SUCCESS) return r;
  copy();
  ctx->FlushPrintf();
  return ctx->sticky_error();
}

// Asynchronous copies and memsets up to this size run at once when their stream is idle
// (Context::RunNowIfIdle).
constexpr size_t kShortCopyBytes = 64 << 10;

CUresult CopyHtoD(CUdeviceptr dst, const void* src, size_t n, CUstream stream, bool async) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Stream> s;
  if (CUresult r = ResolveStream(ctx, stream, &s); r != CUDA_SUCCESS) return r;
  if (n == 0) return CUDA_SUCCESS;
  if (src == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Allocation> a = DeviceRange(*ctx, dst, n);
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!async) return RunSynchronously(ctx, [&] { memcpy(HostOf(a, dst), src, n); });
  if (n <= kShortCopyBytes && ctx->RunNowIfIdle(s, [&] { memcpy(HostOf(a, dst), src, n); })) {
    return CUDA_SUCCESS;
  }
  // The source is staged now, as the real driver does for pageable memory, so the caller may
  // reuse its buffer as soon as this returns.
  auto staged = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(src),
                                                       static_cast<const uint8_t*>(src) + n);
  ctx->Enqueue(s, [a, dst, staged] { memcpy(HostOf(a, dst), staged->data(), staged->size()); });
  return CUDA_SUCCESS;
}

CUresult CopyDtoH(void* dst, CUdeviceptr src, size_t n, CUstream stream, bool async) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Stream> s;
  if (CUresult r = ResolveStream(ctx, stream, &s); r != CUDA_SUCCESS) return r;
  if (n == 0) return CUDA_SUCCESS;
  if (dst == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Allocation> a = DeviceRange(*ctx, src, n);
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!async) return RunSynchronously(ctx, [&] { memcpy(dst, HostOf(a, src), n); });
  if (n <= kShortCopyBytes && ctx->RunNowIfIdle(s, [&] { memcpy(dst, HostOf(a, src), n); })) {
    return CUDA_SUCCESS;
  }
  ctx->Enqueue(s, [a, src, dst, n] { memcpy(dst, HostOf(a, src), n); });
  return CUDA_SUCCESS;
}

CUresult CopyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream, bool async) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Stream> s;
  if (CUresult r = ResolveStream(ctx, stream, &s); r != CUDA_SUCCESS) return r;
  if (n == 0) return CUDA_SUCCESS;
  std::shared_ptr<Allocation> d = DeviceRange(*ctx, dst, n);
  std::shared_ptr<Allocation> sa = DeviceRange(*ctx, src, n);
  if (d == nullptr || sa == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto copy = [d, sa, dst, src, n] { memmove(HostOf(d, dst), HostOf(sa, src), n); };
  if (!async) return RunSynchronously(ctx, copy);
  if (n <= kShortCopyBytes && ctx->RunNowIfIdle(s, copy)) return CUDA_SUCCESS;
  ctx->Enqueue(s, copy);
  return CUDA_SUCCESS;
}

template <typename T>
CUresult Memset(CUdeviceptr dst, T value, size_t count, CUstream stream, bool async) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Stream> s;
  if (CUresult r = ResolveStream(ctx, stream, &s); r != CUDA_SUCCESS) return r;
  if (count == 0) return CUDA_SUCCESS;
  if (dst % sizeof(T) != 0 || count > (~size_t{0}) / sizeof(T)) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Allocation> a = DeviceRange(*ctx, dst, count * sizeof(T));
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto fill = [a, dst, value, count] {
    uint8_t* p = HostOf(a, dst);
    if constexpr (sizeof(T) == 1) {
      memset(p, value, count);
    } else {
      for (size_t i = 0; i < count; ++i) memcpy(p + i * sizeof(T), &value, sizeof(T));
    }
  };
  if (!async) return RunSynchronously(ctx, fill);
  if (count * sizeof(T) <= kShortCopyBytes && ctx->RunNowIfIdle(s, fill)) return CUDA_SUCCESS;
  ctx->Enqueue(s, fill);
  return CUDA_SUCCESS;
}

// One side of a 2D/3D copy: the first byte of the first row, and the row and slice pitches.
struct Side {
  bool device = false;
  uint8_t* base = nullptr;
  size_t pitch = 0;
  size_t slice_pitch = 0;
  std::shared_ptr<Allocation> allocation;
};

// Geometry shared by both sides of a copy.
struct Extent {
  size_t width = 0, height = 0, depth = 1;
};

CUresult ResolveSide(Context& ctx, CUmemorytype type, const void* host, CUdeviceptr device,
                     CUarray array, size_t x, size_t y, size_t z, size_t pitch,
                     size_t rows_per_slice, const Extent& e, Side* out) {
  if (type == CU_MEMORYTYPE_ARRAY) {
    // An array is device memory with the array's own pitches; the box must lie inside it, on
    // whole elements.
    std::shared_ptr<Array> a;
    if (ResolveArray(&ctx, array, &a) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    if (x % a->element_bytes != 0 || e.width % a->element_bytes != 0 || x > a->row_bytes ||
        e.width > a->row_bytes - x || y > a->rows || e.height > a->rows - y || z > a->slices ||
        e.depth > a->slices - z) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    type = CU_MEMORYTYPE_DEVICE;
    device = a->address;
    pitch = a->row_bytes;
    rows_per_slice = a->rows;
  }
  if (type == CU_MEMORYTYPE_UNIFIED) {
    if (DeviceRange(ctx, device, 1) != nullptr) {
      type = CU_MEMORYTYPE_DEVICE;
    } else if (OtherContextsMemory(ctx, device)) {
      return CUDA_ERROR_INVALID_VALUE;
    } else {
      type = CU_MEMORYTYPE_HOST;
    }
    host = reinterpret_cast<const void*>(device);
  }
  if (e.height > 1 && pitch < e.width) return CUDA_ERROR_INVALID_VALUE;
  if (e.depth > 1 && rows_per_slice < e.height) return CUDA_ERROR_INVALID_VALUE;
  // offset and extent in 128 bits: pitches and coordinates near 2^64 must not wrap.
  const unsigned __int128 slice_pitch128 = static_cast<unsigned __int128>(pitch) * rows_per_slice;
  const unsigned __int128 offset128 =
      z * slice_pitch128 + static_cast<unsigned __int128>(y) * pitch + x;
  const unsigned __int128 extent128 = (e.depth - 1) * slice_pitch128 +
                                      static_cast<unsigned __int128>(e.height - 1) * pitch +
                                      e.width;
  if (offset128 + extent128 > (static_cast<unsigned __int128>(1) << 63)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const size_t slice_pitch = static_cast<size_t>(slice_pitch128);
  const size_t offset = static_cast<size_t>(offset128);
  const size_t extent = static_cast<size_t>(extent128);
  out->pitch = pitch;
  out->slice_pitch = slice_pitch;
  if (type == CU_MEMORYTYPE_HOST) {
    if (host == nullptr) return CUDA_ERROR_INVALID_VALUE;
    out->base = const_cast<uint8_t*>(static_cast<const uint8_t*>(host)) + offset;
    return CUDA_SUCCESS;
  }
  if (type != CU_MEMORYTYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  out->device = true;
  out->allocation = DeviceRange(ctx, device + offset, extent);
  if (out->allocation == nullptr) return CUDA_ERROR_INVALID_VALUE;
  out->base = HostOf(out->allocation, device + offset);
  return CUDA_SUCCESS;
}

// Copies `e` from src to dst, synchronously or on `stream`.
CUresult CopyBox(const std::shared_ptr<Context>& ctx, const std::shared_ptr<Stream>& s,
                 const Side& src, const Side& dst, const Extent& e, bool async) {
  auto copy = [src, dst, e] {
    for (size_t z = 0; z < e.depth; ++z) {
      for (size_t row = 0; row < e.height; ++row) {
        memmove(dst.base + z * dst.slice_pitch + row * dst.pitch,
                src.base + z * src.slice_pitch + row * src.pitch, e.width);
      }
    }
  };
  if (!async) return RunSynchronously(ctx, copy);
  if (!src.device) {
    // Stage host rows now (pageable-memory semantics).
    auto staged = std::make_shared<std::vector<uint8_t>>(e.width * e.height * e.depth);
    for (size_t z = 0; z < e.depth; ++z) {
      for (size_t row = 0; row < e.height; ++row) {
        memcpy(staged->data() + (z * e.height + row) * e.width,
               src.base + z * src.slice_pitch + row * src.pitch, e.width);
      }
    }
    ctx->Enqueue(s, [staged, dst, e] {
      for (size_t z = 0; z < e.depth; ++z) {
        for (size_t row = 0; row < e.height; ++row) {
          memcpy(dst.base + z * dst.slice_pitch + row * dst.pitch,
                 staged->data() + (z * e.height + row) * e.width, e.width);
        }
      }
    });
    return CUDA_SUCCESS;
  }
  ctx->Enqueue(s, copy);
  return CUDA_SUCCESS;
}

CUresult Copy2D(const CUDA_MEMCPY2D* p, CUstream stream, bool async) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Stream> s;
  if (CUresult r = ResolveStream(ctx, stream, &s); r != CUDA_SUCCESS) return r;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const Extent e{p->WidthInBytes, p->Height, 1};
  if (e.width == 0 || e.height == 0) return CUDA_SUCCESS;
  Side src, dst;
  if (CUresult r = ResolveSide(*ctx, p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray,
                               p->srcXInBytes, p->srcY, 0, p->srcPitch, e.height, e, &src);
      r != CUDA_SUCCESS) {
    return r;
  }
  if (CUresult r = ResolveSide(*ctx, p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray,
                               p->dstXInBytes, p->dstY, 0, p->dstPitch, e.height, e, &dst);
      r != CUDA_SUCCESS) {
    return r;
  }
  return CopyBox(ctx, s, src, dst, e, async);
}

CUresult Copy3D(const CUDA_MEMCPY3D* p, CUstream stream, bool async) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Stream> s;
  if (CUresult r = ResolveStream(ctx, stream, &s); r != CUDA_SUCCESS) return r;
  if (p == nullptr || p->srcLOD != 0 || p->dstLOD != 0) return CUDA_ERROR_INVALID_VALUE;
  const Extent e{p->WidthInBytes, p->Height, p->Depth};
  if (e.width == 0 || e.height == 0 || e.depth == 0) return CUDA_SUCCESS;
  Side src, dst;
  if (CUresult r =
          ResolveSide(*ctx, p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes,
                      p->srcY, p->srcZ, p->srcPitch, p->srcHeight, e, &src);
      r != CUDA_SUCCESS) {
    return r;
  }
  if (CUresult r =
          ResolveSide(*ctx, p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes,
                      p->dstY, p->dstZ, p->dstPitch, p->dstHeight, e, &dst);
      r != CUDA_SUCCESS) {
    return r;
  }
  return CopyBox(ctx, s, src, dst, e, async);
}

template <typename T>
CUresult Memset2D(CUdeviceptr dst, size_t pitch, T value, size_t width, size_t height,
                  CUstream stream, bool async) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Stream> s;
  if (CUresult r = ResolveStream(ctx, stream, &s); r != CUDA_SUCCESS) return r;
  if (width == 0 || height == 0) return CUDA_SUCCESS;
  if (dst % sizeof(T) != 0 || pitch % sizeof(T) != 0 || width > (~size_t{0}) / sizeof(T) / 2 ||
      (height > 1 && pitch < width * sizeof(T))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (height > 1 && pitch > (~size_t{0}) / 2 / (height - 1)) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Allocation> a = DeviceRange(*ctx, dst, (height - 1) * pitch + width * sizeof(T));
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto fill = [a, dst, pitch, value, width, height] {
    for (size_t row = 0; row < height; ++row) {
      uint8_t* p = HostOf(a, dst + row * pitch);
      for (size_t i = 0; i < width; ++i) memcpy(p + i * sizeof(T), &value, sizeof(T));
    }
  };
  if (!async) return RunSynchronously(ctx, fill);
  ctx->Enqueue(s, fill);
  return CUDA_SUCCESS;
}

// cuMemcpy with unified addressing: each side is device memory if it lies in an allocation of the
// current context or of a context it has peer access to, refused if it lies in another context's
// memory, host memory otherwise.
CUresult CopyUnified(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream, bool async) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  if (n == 0) return CUDA_SUCCESS;
  const bool dst_device = DeviceRange(*ctx, dst, 1) != nullptr;
  const bool src_device = DeviceRange(*ctx, src, 1) != nullptr;
  if ((!dst_device && OtherContextsMemory(*ctx, dst)) ||
      (!src_device && OtherContextsMemory(*ctx, src))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (dst_device && src_device) return CopyDtoD(dst, src, n, stream, async);
  if (dst_device) return CopyHtoD(dst, reinterpret_cast<const void*>(src), n, stream, async);
  if (src_device) return CopyDtoH(reinterpret_cast<void*>(dst), src, n, stream, async);
  std::shared_ptr<Stream> s;
  if (CUresult r = ResolveStream(ctx, stream, &s); r != CUDA_SUCCESS) return r;
  if (dst == 0 || src == 0) return CUDA_ERROR_INVALID_VALUE;
  void* d = reinterpret_cast<void*>(dst);
  const void* h = reinterpret_cast<const void*>(src);
  if (!async) return RunSynchronously(ctx, [&] { memmove(d, h, n); });
  ctx->Enqueue(s, [d, h, n] { memmove(d, h, n); });
  return CUDA_SUCCESS;
}

// The device address of bytes [offset, offset + n) of an array of the current context, seen as
// one linear range (arrays are stored linearly), or 0 with *error set.
CUdeviceptr ArrayBytes(CUarray array, size_t offset, size_t n, CUresult* error) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) {
    *error = r;
    return 0;
  }
  std::shared_ptr<Array> a;
  if (ResolveArray(ctx.get(), array, &a) != CUDA_SUCCESS || offset > a->bytes ||
      n > a->bytes - offset) {
    *error = CUDA_ERROR_INVALID_VALUE;
    return 0;
  }
  *error = CUDA_SUCCESS;
  return a->address + offset;
}

}  // namespace

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpyHtoA(CUarray dstArray, size_t dstOffset,
                                             const void* srcHost, size_t ByteCount) {
  return Guard([&] {
    CUresult r;
    const CUdeviceptr d = ArrayBytes(dstArray, dstOffset, ByteCount, &r);
    return r != CUDA_SUCCESS ? r : CopyHtoD(d, srcHost, ByteCount, nullptr, false);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoH(void* dstHost, CUarray srcArray, size_t srcOffset,
                                             size_t ByteCount) {
  return Guard([&] {
    CUresult r;
    const CUdeviceptr s = ArrayBytes(srcArray, srcOffset, ByteCount, &r);
    return r != CUDA_SUCCESS ? r : CopyDtoH(dstHost, s, ByteCount, nullptr, false);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpyHtoAAsync(CUarray dstArray, size_t dstOffset,
                                                  const void* srcHost, size_t ByteCount,
                                                  CUstream hStream) {
  return Guard([&] {
    CUresult r;
    const CUdeviceptr d = ArrayBytes(dstArray, dstOffset, ByteCount, &r);
    return r != CUDA_SUCCESS ? r : CopyHtoD(d, srcHost, ByteCount, hStream, true);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoHAsync(void* dstHost, CUarray srcArray, size_t srcOffset,
                                                  size_t ByteCount, CUstream hStream) {
  return Guard([&] {
    CUresult r;
    const CUdeviceptr s = ArrayBytes(srcArray, srcOffset, ByteCount, &r);
    return r != CUDA_SUCCESS ? r : CopyDtoH(dstHost, s, ByteCount, hStream, true);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoD(CUdeviceptr dstDevice, CUarray srcArray,
                                             size_t srcOffset, size_t ByteCount) {
  return Guard([&] {
    CUresult r;
    const CUdeviceptr s = ArrayBytes(srcArray, srcOffset, ByteCount, &r);
    return r != CUDA_SUCCESS ? r : CopyDtoD(dstDevice, s, ByteCount, nullptr, false);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoA(CUarray dstArray, size_t dstOffset,
                                             CUdeviceptr srcDevice, size_t ByteCount) {
  return Guard([&] {
    CUresult r;
    const CUdeviceptr d = ArrayBytes(dstArray, dstOffset, ByteCount, &r);
    return r != CUDA_SUCCESS ? r : CopyDtoD(d, srcDevice, ByteCount, nullptr, false);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpyAtoA(CUarray dstArray, size_t dstOffset, CUarray srcArray,
                                             size_t srcOffset, size_t ByteCount) {
  return Guard([&] {
    CUresult r;
    const CUdeviceptr d = ArrayBytes(dstArray, dstOffset, ByteCount, &r);
    if (r != CUDA_SUCCESS) return r;
    const CUdeviceptr s = ArrayBytes(srcArray, srcOffset, ByteCount, &r);
    return r != CUDA_SUCCESS ? r : CopyDtoD(d, s, ByteCount, nullptr, false);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  return Guard([&] { return CopyUnified(dst, src, ByteCount, nullptr, false); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                              CUstream hStream) {
  return Guard([&] { return CopyUnified(dst, src, ByteCount, hStream, true); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr* dptr, size_t bytesize) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    if (dptr == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    uint64_t address;
    CUresult r =
        AllocationError(ctx->memory().Allocate(bytesize, &address, AllocationKind::kMemAlloc));
    if (r == CUDA_SUCCESS) *dptr = address;
    return r;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr* dptr, size_t* pPitch,
                                                size_t WidthInBytes, size_t Height,
                                                unsigned int ElementSizeBytes) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    if (dptr == nullptr || pPitch == nullptr || WidthInBytes == 0 || Height == 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const size_t pitch = (WidthInBytes + 511) / 512 * 512;
    if (Height > (~size_t{0}) / pitch) return CUDA_ERROR_INVALID_VALUE;
    uint64_t address;
    CUresult r = AllocationError(
        ctx->memory().Allocate(pitch * Height, &address, AllocationKind::kMemAlloc));
    if (r == CUDA_SUCCESS) {
      *dptr = address;
      *pPitch = pitch;
    }
    return r;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr dptr) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    if (dptr == 0) return CUDA_SUCCESS;
    std::shared_ptr<Allocation> a = ctx->memory().Find(dptr, 1);
    // Memory opened with cuIpcOpenMemHandle is released with cuIpcCloseMemHandle only.
    if (a == nullptr || a->kind == AllocationKind::kIpcAlias) return CUDA_ERROR_INVALID_VALUE;
    a.reset();
    // Like the real driver, freeing waits for all work that may still use the memory, on every
    // stream (non-blocking streams too: they only skip the legacy default stream's ordering).
    ctx->WaitForAllStreams();
    if (ctx->memory().Free(dptr) != AddressSpace::Result::kOk) return CUDA_ERROR_INVALID_VALUE;
    // Its IPC handle can no longer be opened; contexts that opened it keep their mapping (and the
    // memory stays charged to the device) until they close it.
    RevokeIpcMemExport(dptr);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemGetInfo(size_t* free, size_t* total) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const DeviceMemoryBudget& b = ctx->device()->budget();
    *total = b.total();
    *free = b.total() - std::min(b.used(), b.total());
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr* pbase, size_t* psize,
                                                     CUdeviceptr dptr) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Allocation> a = ctx->memory().Find(dptr, 1);
    if (a == nullptr) a = GlobalHostMappings().Find(dptr, 1);  // page-locked host memory
    if (a == nullptr) return CUDA_ERROR_NOT_FOUND;
    if (pbase != nullptr) *pbase = a->base;
    if (psize != nullptr) *psize = a->size;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dstDevice, const void* srcHost,
                                             size_t ByteCount) {
  return Guard([&] { return CopyHtoD(dstDevice, srcHost, ByteCount, nullptr, false); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoH(void* dstHost, CUdeviceptr srcDevice,
                                             size_t ByteCount) {
  return Guard([&] { return CopyDtoH(dstHost, srcDevice, ByteCount, nullptr, false); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                             size_t ByteCount) {
  return Guard([&] { return CopyDtoD(dstDevice, srcDevice, ByteCount, nullptr, false); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void* srcHost,
                                                  size_t ByteCount, CUstream hStream) {
  return Guard([&] { return CopyHtoD(dstDevice, srcHost, ByteCount, hStream, true); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync(void* dstHost, CUdeviceptr srcDevice,
                                                  size_t ByteCount, CUstream hStream) {
  return Guard([&] { return CopyDtoH(dstHost, srcDevice, ByteCount, hStream, true); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                                  size_t ByteCount, CUstream hStream) {
  return Guard([&] { return CopyDtoD(dstDevice, srcDevice, ByteCount, hStream, true); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpy2D(const CUDA_MEMCPY2D* pCopy) {
  return Guard([&] { return Copy2D(pCopy, nullptr, false); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpy2DUnaligned(const CUDA_MEMCPY2D* pCopy) {
  return Guard([&] { return Copy2D(pCopy, nullptr, false); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpy2DAsync(const CUDA_MEMCPY2D* pCopy, CUstream hStream) {
  return Guard([&] { return Copy2D(pCopy, hStream, true); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  return Guard([&] { return Memset<uint8_t>(dstDevice, uc, N, nullptr, false); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemsetD16(CUdeviceptr dstDevice, unsigned short us, size_t N) {
  return Guard([&] { return Memset<uint16_t>(dstDevice, us, N, nullptr, false); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemsetD32(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
  return Guard([&] { return Memset<uint32_t>(dstDevice, ui, N, nullptr, false); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                                CUstream hStream) {
  return Guard([&] { return Memset<uint8_t>(dstDevice, uc, N, hStream, true); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                                 CUstream hStream) {
  return Guard([&] { return Memset<uint16_t>(dstDevice, us, N, hStream, true); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                                 CUstream hStream) {
  return Guard([&] { return Memset<uint32_t>(dstDevice, ui, N, hStream, true); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpy3D(const CUDA_MEMCPY3D* pCopy) {
  return Guard([&] { return Copy3D(pCopy, nullptr, false); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpy3DAsync(const CUDA_MEMCPY3D* pCopy, CUstream hStream) {
  return Guard([&] { return Copy3D(pCopy, hStream, true); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemsetD2D8(CUdeviceptr dstDevice, size_t dstPitch,
                                             unsigned char uc, size_t Width, size_t Height) {
  return Guard(
      [&] { return Memset2D<uint8_t>(dstDevice, dstPitch, uc, Width, Height, nullptr, false); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemsetD2D16(CUdeviceptr dstDevice, size_t dstPitch,
                                              unsigned short us, size_t Width, size_t Height) {
  return Guard(
      [&] { return Memset2D<uint16_t>(dstDevice, dstPitch, us, Width, Height, nullptr, false); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemsetD2D32(CUdeviceptr dstDevice, size_t dstPitch,
                                              unsigned int ui, size_t Width, size_t Height) {
  return Guard(
      [&] { return Memset2D<uint32_t>(dstDevice, dstPitch, ui, Width, Height, nullptr, false); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch,
                                                  unsigned char uc, size_t Width, size_t Height,
                                                  CUstream hStream) {
  return Guard(
      [&] { return Memset2D<uint8_t>(dstDevice, dstPitch, uc, Width, Height, hStream, true); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch,
                                                   unsigned short us, size_t Width, size_t Height,
                                                   CUstream hStream) {
  return Guard(
      [&] { return Memset2D<uint16_t>(dstDevice, dstPitch, us, Width, Height, hStream, true); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch,
                                                   unsigned int ui, size_t Width, size_t Height,
                                                   CUstream hStream) {
  return Guard(
      [&] { return Memset2D<uint32_t>(dstDevice, dstPitch, ui, Width, Height, hStream, true); });
}

// softgpu's own extension (not part of CUDA), for a caller in the same process that moves copy
// data itself: rgpu-server receives a transfer straight into device memory and sends one
// straight from it, as GPUDirect RDMA lets a network card do on a real GPU. Waits until a copy
// issued now on `stream` could start (NULL, CU_STREAM_LEGACY or CU_STREAM_PER_THREAD: the legacy
// default stream's order, as cuMemcpyHtoD waits), then stores the host address backing
// [dptr, dptr + bytes) of the current context in *host. The address stays valid while the
// allocation lives; the caller's copy then counts as issued and finished at that point in the
// stream's order. Errors: INVALID_VALUE for a range that is not inside one allocation of the
// context, INVALID_HANDLE for a bad stream, and the context's sticky error.
extern "C" SOFTGPU_EXPORT CUresult softgpuMemDirectAccess(void** host, CUdeviceptr dptr,
                                                          size_t bytes, CUstream stream) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Stream> s;
    if (CUresult r = ResolveStream(ctx, stream, &s); r != CUDA_SUCCESS) return r;
    if (host == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<Allocation> a = ctx->memory().Find(dptr, bytes);  // its own memory only
    if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (s == ctx->default_stream()) {
      ctx->WaitForDefaultOrder();
    } else {
      s->Wait(s->last_enqueued());
      // Work on a blocking stream also follows the legacy default stream's earlier work.
      if (s->blocking()) ctx->default_stream()->Wait(ctx->default_stream()->last_enqueued());
    }
    if (CUresult r = ctx->sticky_error(); r != CUDA_SUCCESS) return r;
    *host = HostOf(a, dptr);
    return CUDA_SUCCESS;
  });
}

// softgpu's own extension (not part of CUDA): allocates `bytesize` bytes of device memory in the
// current context at exactly `dptr` (a 256-byte aligned address of the device window), for a
// server that restores a session at the addresses its program holds. CUDA_ERROR_ALREADY_MAPPED
// when any part of the range is in use in this process, CUDA_ERROR_INVALID_VALUE for an address
// that cannot be one, CUDA_ERROR_OUT_OF_MEMORY past the device's memory. cuMemFree frees it.
extern "C" SOFTGPU_EXPORT CUresult softgpuMemAllocAt(CUdeviceptr dptr, size_t bytesize) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    if (dptr == 0 || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    const AddressSpace::Result r =
        ctx->memory().AllocateAt(dptr, bytesize, AllocationKind::kMemAlloc);
    return r == AddressSpace::Result::kAddressInUse ? CUDA_ERROR_ALREADY_MAPPED
                                                    : AllocationError(r);
  });
}
