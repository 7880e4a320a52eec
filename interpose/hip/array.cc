// Arrays (hipMallocArray, hipMalloc3DArray, hipArrayCreate, hipArray3DCreate, hipFreeArray,
// hipArrayDestroy) and copies to and from them (hipMemcpy2DToArray/FromArray and their async and
// per-thread forms, hipMemcpyToArray/FromArray, hipMemcpyHtoA/AtoH; hipMemcpy3D in memory.cc),
// on the driver's arrays. A hipArray the runtime hands out carries the driver's CUarray in
// `data` and describes the array in its other fields, as HIP's own does. Texture and surface
// objects are not offered: a HIP kernel reads a texture object as a pointer to a hardware
// descriptor in device memory, which the driver's texture handles are not.
#include <string.h>

#include <mutex>
#include <unordered_set>

#include "common/array_format.h"
#include "interpose/hip/runtime.h"

namespace h = rgpu::hip;
using h::Activate;
using h::Error;
using h::Ret;

static_assert(CU_AD_FORMAT_UNSIGNED_INT8 == 0x01 && CU_AD_FORMAT_UNSIGNED_INT16 == 0x02 &&
              CU_AD_FORMAT_UNSIGNED_INT32 == 0x03 && CU_AD_FORMAT_SIGNED_INT8 == 0x08 &&
              CU_AD_FORMAT_SIGNED_INT16 == 0x09 && CU_AD_FORMAT_SIGNED_INT32 == 0x0a &&
              CU_AD_FORMAT_HALF == 0x10 && CU_AD_FORMAT_FLOAT == 0x20);
static_assert((CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP |
               CUDA_ARRAY3D_TEXTURE_GATHER) == h::kArrayFlagsKnown);

namespace {

// hipTextureType1D/2D/3D (texture_types.h), recorded in hipArray::textureType.
constexpr unsigned kTextureType1D = 1, kTextureType2D = 2, kTextureType3D = 3;

std::mutex g_mu;
// The arrays the runtime made and has not destroyed; guarded by g_mu.
std::unordered_set<const h::Array*>& Live() {
  static auto* s = new std::unordered_set<const h::Array*>();
  return *s;
}

size_t FormatBytes(int format) {
  return rgpu::ArrayFormatChannelBytes(static_cast<CUarray_format>(format));
}

// The driver's format and channel count for a channel description: every channel present has
// x's size (8, 16 or 32 bits), channels are x, then y, z, w.
Error FormatOf(const h::ChannelFormatDesc& d, int* format, unsigned* channels) {
  const int sizes[4] = {d.x, d.y, d.z, d.w};
  unsigned n = 0;
  while (n < 4 && sizes[n] != 0) ++n;
  for (unsigned i = n; i < 4; ++i) {
    if (sizes[i] != 0) return h::hipErrorInvalidValue;  // a gap between channels
  }
  for (unsigned i = 0; i < n; ++i) {
    if (sizes[i] != d.x) return h::hipErrorInvalidValue;
  }
  if (n == 0 || n == 3) return h::hipErrorInvalidValue;  // the driver takes 1, 2 or 4 channels
  *channels = n;
  switch (d.f) {
    case h::kChannelFormatKindSigned:
      *format = d.x == 8    ? CU_AD_FORMAT_SIGNED_INT8
                : d.x == 16 ? CU_AD_FORMAT_SIGNED_INT16
                : d.x == 32 ? CU_AD_FORMAT_SIGNED_INT32
                            : 0;
      break;
    case h::kChannelFormatKindUnsigned:
      *format = d.x == 8    ? CU_AD_FORMAT_UNSIGNED_INT8
                : d.x == 16 ? CU_AD_FORMAT_UNSIGNED_INT16
                : d.x == 32 ? CU_AD_FORMAT_UNSIGNED_INT32
                            : 0;
      break;
    case h::kChannelFormatKindFloat:
      *format = d.x == 16 ? CU_AD_FORMAT_HALF : d.x == 32 ? CU_AD_FORMAT_FLOAT : 0;
      break;
    default:
      *format = 0;
  }
  return *format != 0 ? h::hipSuccess : h::hipErrorInvalidValue;
}

// The channel description of a driver format (for arrays made from a driver descriptor).
h::ChannelFormatDesc DescOf(int format, unsigned channels) {
  const int bits = static_cast<int>(FormatBytes(format) * 8);
  int kind = h::kChannelFormatKindUnsigned;
  if (format == CU_AD_FORMAT_SIGNED_INT8 || format == CU_AD_FORMAT_SIGNED_INT16 ||
      format == CU_AD_FORMAT_SIGNED_INT32) {
    kind = h::kChannelFormatKindSigned;
  } else if (format == CU_AD_FORMAT_HALF || format == CU_AD_FORMAT_FLOAT) {
    kind = h::kChannelFormatKindFloat;
  }
  return h::ChannelFormatDesc{bits, channels > 1 ? bits : 0, channels > 2 ? bits : 0,
                              channels > 3 ? bits : 0, kind};
}

// Makes the driver's array for `d` and the hipArray that carries it.
Error Make(const CUDA_ARRAY3D_DESCRIPTOR& d, bool driver_api, h::Array** out) {
  if (FormatBytes(d.Format) == 0 ||
      (d.NumChannels != 1 && d.NumChannels != 2 && d.NumChannels != 4)) {
    return h::hipErrorInvalidValue;
  }
  if ((d.Flags & ~h::kArrayFlagsKnown) != 0) return h::hipErrorInvalidValue;
  Error e = Activate();
  if (e != h::hipSuccess) return e;
  CUarray cu = nullptr;
  CUresult r = CU(cuArray3DCreate_v2)(&cu, &d);
  if (r != CUDA_SUCCESS) return h::ToHip(r);
  auto* a = new h::Array();
  a->data = cu;
  a->desc = DescOf(d.Format, d.NumChannels);
  a->type = d.Flags;
  a->width = static_cast<unsigned>(d.Width);
  a->height = static_cast<unsigned>(d.Height);
  a->depth = static_cast<unsigned>(d.Depth);
  a->Format = d.Format;
  a->NumChannels = d.NumChannels;
  a->isDrv = driver_api;
  a->textureType = d.Depth != 0 ? kTextureType3D : d.Height != 0 ? kTextureType2D : kTextureType1D;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    Live().insert(a);
  }
  *out = a;
  return h::hipSuccess;
}

Error Destroy(h::Array* a) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (a == nullptr || Live().count(a) == 0) return h::hipErrorInvalidValue;
  }
  Error e = Activate();
  if (e != h::hipSuccess) return e;
  CUresult r = CU(cuArrayDestroy)(static_cast<CUarray>(a->data));
  if (r != CUDA_SUCCESS) return h::ToHip(r);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    Live().erase(a);
  }
  delete a;
  return h::hipSuccess;
}

}  // namespace

namespace rgpu::hip {

Error DriverArray(const Array* array, CUarray* out, size_t* element_bytes) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (array == nullptr || Live().count(array) == 0) return hipErrorInvalidValue;
  *out = static_cast<CUarray>(array->data);
  if (element_bytes != nullptr) *element_bytes = FormatBytes(array->Format) * array->NumChannels;
  return hipSuccess;
}

}  // namespace rgpu::hip

HIP_API(hipMallocArray)
(h::Array** out, const h::ChannelFormatDesc* desc, size_t width, size_t height, unsigned flags)
    ->Error {
  if (out == nullptr || desc == nullptr || width == 0) return Ret(h::hipErrorInvalidValue);
  CUDA_ARRAY3D_DESCRIPTOR d;
  memset(&d, 0, sizeof d);
  int format = 0;
  Error e = FormatOf(*desc, &format, &d.NumChannels);
  if (e != h::hipSuccess) return Ret(e);
  d.Format = static_cast<CUarray_format>(format);
  d.Width = width;
  d.Height = height;
  d.Flags = flags;
  return Ret(Make(d, false, out));
}

HIP_API(hipMalloc3DArray)
(h::Array** out, const h::ChannelFormatDesc* desc, h::Extent extent, unsigned flags)->Error {
  if (out == nullptr || desc == nullptr || extent.width == 0) return Ret(h::hipErrorInvalidValue);
  CUDA_ARRAY3D_DESCRIPTOR d;
  memset(&d, 0, sizeof d);
  int format = 0;
  Error e = FormatOf(*desc, &format, &d.NumChannels);
  if (e != h::hipSuccess) return Ret(e);
  d.Format = static_cast<CUarray_format>(format);
  d.Width = extent.width;
  d.Height = extent.height;
  d.Depth = extent.depth;
  d.Flags = flags;
  return Ret(Make(d, false, out));
}

HIP_API(hipArrayCreate)(h::Array** out, const h::ArrayDescriptor* desc)->Error {
  if (out == nullptr || desc == nullptr || desc->Width == 0) return Ret(h::hipErrorInvalidValue);
  CUDA_ARRAY3D_DESCRIPTOR d;
  memset(&d, 0, sizeof d);
  d.Width = desc->Width;
  d.Height = desc->Height;
  d.Format = static_cast<CUarray_format>(desc->Format);
  d.NumChannels = desc->NumChannels;
  return Ret(Make(d, true, out));
}

HIP_API(hipArray3DCreate)(h::Array** out, const h::Array3DDescriptor* desc)->Error {
  if (out == nullptr || desc == nullptr || desc->Width == 0) return Ret(h::hipErrorInvalidValue);
  CUDA_ARRAY3D_DESCRIPTOR d;
  memset(&d, 0, sizeof d);
  d.Width = desc->Width;
  d.Height = desc->Height;
  d.Depth = desc->Depth;
  d.Format = static_cast<CUarray_format>(desc->Format);
  d.NumChannels = desc->NumChannels;
  d.Flags = desc->Flags;
  return Ret(Make(d, true, out));
}

HIP_API(hipFreeArray)(h::Array* array)->Error { return Ret(Destroy(array)); }
HIP_API(hipArrayDestroy)(h::Array* array)->Error { return Ret(Destroy(array)); }

namespace {

// The memory type of a copy's linear end, by the copy's kind: `to_array` copies read it.
Error LinearSide(int kind, bool to_array, CUmemorytype* type) {
  switch (kind) {
    case h::kHostToDevice:
      if (!to_array) return h::hipErrorInvalidMemcpyDirection;
      *type = CU_MEMORYTYPE_HOST;
      return h::hipSuccess;
    case h::kDeviceToHost:
      if (to_array) return h::hipErrorInvalidMemcpyDirection;
      *type = CU_MEMORYTYPE_HOST;
      return h::hipSuccess;
    case h::kDeviceToDevice:
      *type = CU_MEMORYTYPE_DEVICE;
      return h::hipSuccess;
    case h::kDefault:
      *type = CU_MEMORYTYPE_UNIFIED;  // the client knows which addresses are device memory
      return h::hipSuccess;
    default:
      return h::hipErrorInvalidMemcpyDirection;
  }
}

void SetLinear(CUmemorytype type, const void* p, const void** host, CUdeviceptr* device) {
  if (type == CU_MEMORYTYPE_HOST)
    *host = p;
  else
    *device = reinterpret_cast<CUdeviceptr>(p);
}

// A rectangle of `width` bytes by `height` rows between an array (at byte `x`, row `y`) and
// linear memory with rows `pitch` bytes apart.
Error Copy2D(const h::Array* array, size_t x, size_t y, const void* linear, size_t pitch,
             size_t width, size_t height, int kind, bool to_array, CUstream stream, bool async) {
  CUarray cu = nullptr;
  Error e = h::DriverArray(array, &cu);
  if (e != h::hipSuccess) return e;
  CUmemorytype type;
  if ((e = LinearSide(kind, to_array, &type)) != h::hipSuccess) return e;
  if (height > 1 && width > pitch) return h::hipErrorInvalidPitchValue;
  if ((e = Activate()) != h::hipSuccess) return e;
  CUDA_MEMCPY2D c;
  memset(&c, 0, sizeof c);
  if (to_array) {
    c.srcMemoryType = type;
    SetLinear(type, linear, &c.srcHost, &c.srcDevice);
    c.srcPitch = pitch;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    c.dstArray = cu;
    c.dstXInBytes = x;
    c.dstY = y;
  } else {
    c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    c.srcArray = cu;
    c.srcXInBytes = x;
    c.srcY = y;
    c.dstMemoryType = type;
    const void* host = nullptr;
    SetLinear(type, linear, &host, &c.dstDevice);
    c.dstHost = const_cast<void*>(host);
    c.dstPitch = pitch;
  }
  c.WidthInBytes = width;
  c.Height = height;
  return h::ToHip(async ? CU(cuMemcpy2DAsync_v2)(&c, stream) : CU(cuMemcpy2D_v2)(&c));
}

// `bytes` bytes in the array's row order from byte `x` of row `y`: the rest of the first row,
// whole rows, and the start of the last row (the deprecated hipMemcpyToArray/FromArray).
Error CopyLinear(const h::Array* array, size_t x, size_t y, const void* linear, size_t bytes,
                 int kind, bool to_array) {
  CUarray cu = nullptr;
  size_t element = 0;
  Error e = h::DriverArray(array, &cu, &element);
  if (e != h::hipSuccess) return e;
  const size_t row = static_cast<size_t>(array->width) * element;
  if (x >= row) return h::hipErrorInvalidValue;
  const char* p = static_cast<const char*>(linear);
  while (bytes > 0) {
    size_t width, rows;
    if (x != 0 || bytes < row) {
      width = bytes < row - x ? bytes : row - x;
      rows = 1;
    } else {
      width = row;
      rows = bytes / row;
    }
    e = Copy2D(array, x, y, p, width, width, rows, kind, to_array, nullptr, false);
    if (e != h::hipSuccess) return e;
    p += width * rows;
    bytes -= width * rows;
    y += x + width == row ? rows : 0;
    x = (x + width) % row;
  }
  return h::hipSuccess;
}

}  // namespace

HIP_API(hipMemcpy2DToArray)
(h::Array* dst, size_t x, size_t y, const void* src, size_t pitch, size_t width, size_t height,
 int kind)
    ->Error {
  return Ret(Copy2D(dst, x, y, src, pitch, width, height, kind, true, nullptr, false));
}
HIP_API(hipMemcpy2DToArrayAsync)
(h::Array* dst, size_t x, size_t y, const void* src, size_t pitch, size_t width, size_t height,
 int kind, CUstream stream)
    ->Error {
  return Ret(Copy2D(dst, x, y, src, pitch, width, height, kind, true, stream, true));
}
HIP_API(hipMemcpy2DFromArray)
(void* dst, size_t pitch, const h::Array* src, size_t x, size_t y, size_t width, size_t height,
 int kind)
    ->Error {
  return Ret(Copy2D(src, x, y, dst, pitch, width, height, kind, false, nullptr, false));
}
HIP_API(hipMemcpy2DFromArrayAsync)
(void* dst, size_t pitch, const h::Array* src, size_t x, size_t y, size_t width, size_t height,
 int kind, CUstream stream)
    ->Error {
  return Ret(Copy2D(src, x, y, dst, pitch, width, height, kind, false, stream, true));
}

// Per-thread default stream forms: ordered on the calling thread's stream, then waited for.
HIP_API(hipMemcpy2DToArray_spt)
(h::Array* dst, size_t x, size_t y, const void* src, size_t pitch, size_t width, size_t height,
 int kind)
    ->Error {
  Error e = Copy2D(dst, x, y, src, pitch, width, height, kind, true, CU_STREAM_PER_THREAD, true);
  if (e == h::hipSuccess) e = h::ToHip(CU(cuStreamSynchronize)(CU_STREAM_PER_THREAD));
  return Ret(e);
}
HIP_API(hipMemcpy2DFromArray_spt)
(void* dst, size_t pitch, const h::Array* src, size_t x, size_t y, size_t width, size_t height,
 int kind)
    ->Error {
  Error e = Copy2D(src, x, y, dst, pitch, width, height, kind, false, CU_STREAM_PER_THREAD, true);
  if (e == h::hipSuccess) e = h::ToHip(CU(cuStreamSynchronize)(CU_STREAM_PER_THREAD));
  return Ret(e);
}

HIP_API(hipMemcpyToArray)
(h::Array* dst, size_t x, size_t y, const void* src, size_t bytes, int kind)->Error {
  return Ret(CopyLinear(dst, x, y, src, bytes, kind, true));
}
HIP_API(hipMemcpyFromArray)
(void* dst, const h::Array* src, size_t x, size_t y, size_t bytes, int kind)->Error {
  return Ret(CopyLinear(src, x, y, dst, bytes, kind, false));
}

// The driver-style 1D forms: a byte offset into the array.
HIP_API(hipMemcpyHtoA)(h::Array* dst, size_t offset, const void* src, size_t bytes)->Error {
  CUarray cu = nullptr;
  Error e = h::DriverArray(dst, &cu);
  if (e == h::hipSuccess) e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuMemcpyHtoA_v2)(cu, offset, src, bytes));
}
HIP_API(hipMemcpyAtoH)(void* dst, h::Array* src, size_t offset, size_t bytes)->Error {
  CUarray cu = nullptr;
  Error e = h::DriverArray(src, &cu);
  if (e == h::hipSuccess) e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  return Ret(CU(cuMemcpyAtoH_v2)(dst, cu, offset, bytes));
}
