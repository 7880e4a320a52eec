// CUDA arrays and the texture and surface objects that read them. An array lives on the server
// (server/session_array.cc); here a CUarray is a handle naming it, with the descriptor it was made
// with (cuArray3DGetDescriptor answers from it). Copies to, from and between arrays go as boxes
// (proto/calls.def: CUDA arrays, texture and surface objects); host data travels packed. A
// texture or surface object is the backend's own value, since kernels receive it as an argument;
// the client keeps the descriptors it was made with. A mipmapped array's levels are arrays of its
// own (cuMipmappedArrayGetLevel), which go with it. Resource views and block-compressed or planar
// formats are refused with CUDA_ERROR_NOT_SUPPORTED and a warning.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "client/held_copy_source.h"
#include "client/impl.h"
#include "client/managed_memory.h"
#include "client/sync_memops.h"
#include "common/array_format.h"

using rgpu::client::ClientState;
using rgpu::client::ObjectKind;
using rgpu::client::RequireContext;
using rgpu::client::Server;
namespace calls = rgpu::calls;

// The driver's opaque array type, defined by rgpu.
struct CUarray_st {
  ObjectKind kind = ObjectKind::kArray;
  uint64_t remote = 0;  // the server's array id
  CUctx_st* ctx = nullptr;
  uint64_t generation = 0;  // of ctx when made: a reset context took the array with it
  CUDA_ARRAY3D_DESCRIPTOR desc = {};
  CUmipmappedArray_st* mipmap = nullptr;  // a level of it (destroyed with it, never alone)
};

// The driver's opaque mipmapped array type, defined by rgpu.
struct CUmipmappedArray_st {
  ObjectKind kind = ObjectKind::kMipmappedArray;
  uint64_t remote = 0;  // the server's id
  CUctx_st* ctx = nullptr;
  uint64_t generation = 0;
  CUDA_ARRAY3D_DESCRIPTOR desc = {};
  std::vector<CUarray_st*> levels;  // made on first use; guarded by objects_mutex()
};

namespace {

// Checks an array handle the program passed: live, and its context not reset since.
CUresult CheckArray(CUarray array) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  if (array == nullptr || !ClientState::Get().IsLive(array) || array->kind != ObjectKind::kArray) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (rgpu::client::CheckContext(array->ctx) != CUDA_SUCCESS ||
      array->generation != array->ctx->generation) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  return CUDA_SUCCESS;
}

CUresult CreateArray(CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR& desc) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (rgpu::ArrayFormatChannelBytes(desc.Format) == 0) {
    RGPU_LOG_WARN("cuArray3DCreate: array format %d is not supported",
                  static_cast<int>(desc.Format));
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  calls::ArrayCreate::Results got;
  r = Server().Call<calls::ArrayCreate>(ctx->remote,
                                        {.width = desc.Width,
                                         .height = desc.Height,
                                         .depth = desc.Depth,
                                         .format = static_cast<uint32_t>(desc.Format),
                                         .channels = desc.NumChannels,
                                         .flags = desc.Flags},
                                        &got);
  if (r != CUDA_SUCCESS) return r;
  auto* array = new CUarray_st;
  array->remote = got.array;
  array->ctx = ctx;
  array->generation = ctx->generation;
  array->desc = desc;
  ClientState::Get().Register(array);
  *out = array;
  return CUDA_SUCCESS;
}

// One side of a copy with an array in it, as the box calls name it.
struct BoxSide {
  CUmemorytype type = CU_MEMORYTYPE_HOST;
  CUarray array = nullptr;  // ARRAY
  char* host = nullptr;     // HOST: the box's first byte
  CUdeviceptr device = 0;   // DEVICE: the box's first byte
  size_t pitch = 0, rows = 0;
  size_t x = 0, y = 0, z = 0;  // ARRAY: the box's place
};

CUresult Side(CUmemorytype type, const void* host, CUdeviceptr device, CUarray array, size_t x,
              size_t y, size_t z, size_t pitch, size_t rows, const CUDA_MEMCPY3D& c, BoxSide* out) {
  if (type == CU_MEMORYTYPE_UNIFIED) {
    type = rgpu::client::IsDeviceAddress(device) ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    host = reinterpret_cast<const void*>(device);
    if (type == CU_MEMORYTYPE_DEVICE) device = rgpu::client::DeviceAddressOf(device);
  }
  out->type = type;
  if (type == CU_MEMORYTYPE_ARRAY) {
    if (CUresult r = CheckArray(array); r != CUDA_SUCCESS) return r;
    out->array = array;
    out->x = x;
    out->y = y;
    out->z = z;
    return CUDA_SUCCESS;
  }
  // Linear memory: rows of `pitch` bytes, `rows` of them to a slice.
  if (pitch == 0) pitch = c.WidthInBytes;
  if (rows == 0) rows = c.Height;
  if (pitch < c.WidthInBytes || (c.Depth > 1 && rows < c.Height)) return CUDA_ERROR_INVALID_VALUE;
  out->pitch = pitch;
  out->rows = rows;
  const size_t offset = z * rows * pitch + y * pitch + x;
  if (type == CU_MEMORYTYPE_HOST) {
    if (host == nullptr) return CUDA_ERROR_INVALID_VALUE;
    out->host = const_cast<char*>(static_cast<const char*>(host)) + offset;
  } else if (type == CU_MEMORYTYPE_DEVICE) {
    out->device = device + offset;
  } else {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// True when a host box's rows and slices already lie back to back (nothing to pack).
bool Packed(const BoxSide& h, size_t width, size_t height, size_t depth) {
  return h.pitch == width && (depth == 1 || h.rows == height);
}

// Host rows of a box to and from their packed form (rows, then slices).
void Pack(const BoxSide& h, size_t width, size_t height, size_t depth, char* packed) {
  for (size_t z = 0; z < depth; ++z) {
    for (size_t y = 0; y < height; ++y) {
      memcpy(packed + (z * height + y) * width, h.host + z * h.rows * h.pitch + y * h.pitch, width);
    }
  }
}
void Unpack(const char* packed, size_t width, size_t height, size_t depth, const BoxSide& h) {
  for (size_t z = 0; z < depth; ++z) {
    for (size_t y = 0; y < height; ++y) {
      memcpy(h.host + z * h.rows * h.pitch + y * h.pitch, packed + (z * height + y) * width, width);
    }
  }
}

}  // namespace

namespace rgpu::client {

namespace {
// Sends a box copy: posted when the program asked for an asynchronous copy, else called, so that
// a refusal (a box outside the array) is the copy's own result, as the driver reports it.
template <typename C>
CUresult SendCopy(bool async, uint64_t ctx, const typename C::Args& args,
                  const void* payload = nullptr, size_t payload_size = 0) {
  if (async) return Server().Post<C>(ctx, args, payload, payload_size);
  return Server().Call<C>(ctx, args, nullptr, payload, payload_size);
}
}  // namespace

bool CopyNamesArray(const CUDA_MEMCPY3D& c) {
  return c.srcMemoryType == CU_MEMORYTYPE_ARRAY || c.dstMemoryType == CU_MEMORYTYPE_ARRAY;
}

CUresult CopyArray3D(const CUDA_MEMCPY3D& given, CUstream stream, bool async) {
  // A host side in managed or mapped memory is that memory's device copy (the client never
  // touches the program's view of it); the host's writes reach the device first.
  CUDA_MEMCPY3D c = given;
  if (c.srcMemoryType == CU_MEMORYTYPE_HOST &&
      IsManagedAddress(reinterpret_cast<uint64_t>(c.srcHost))) {
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = DeviceAddressOf(reinterpret_cast<CUdeviceptr>(c.srcHost));
  }
  if (c.dstMemoryType == CU_MEMORYTYPE_HOST &&
      IsManagedAddress(reinterpret_cast<uint64_t>(c.dstHost))) {
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = DeviceAddressOf(reinterpret_cast<CUdeviceptr>(c.dstHost));
  }
  if (CUresult r = BeforeDeviceWork(); r != CUDA_SUCCESS) return r;
  if (c.reserved0 != nullptr || c.reserved1 != nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (c.srcLOD != 0 || c.dstLOD != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!async) {
    if (CUresult r = WaitStreamDrained(stream); r != CUDA_SUCCESS) return r;
  }
  CUDA_MEMCPY3D held = c;
  std::shared_ptr<std::vector<char>> kept = KeepPageableSource(&held, stream, async);
  if (Defer(stream, CU_GRAPH_NODE_TYPE_MEMCPY,
            [held, kept](CUstream s) { return CopyArray3D(held, s, true); })) {
    return CUDA_SUCCESS;
  }
  const size_t width = c.WidthInBytes, height = c.Height, depth = c.Depth;
  if (width == 0 || height == 0 || depth == 0) return CUDA_SUCCESS;
  const CUDA_MEMCPY3D& shape = c;
  BoxSide src, dst;
  CUresult r = Side(c.srcMemoryType, c.srcHost, c.srcDevice, c.srcArray, c.srcXInBytes, c.srcY,
                    c.srcZ, c.srcPitch, c.srcHeight, shape, &src);
  if (r == CUDA_SUCCESS) {
    r = Side(c.dstMemoryType, c.dstHost, c.dstDevice, c.dstArray, c.dstXInBytes, c.dstY, c.dstZ,
             c.dstPitch, c.dstHeight, shape, &dst);
  }
  if (r != CUDA_SUCCESS) return r;
  CUctx_st* ctx;
  uint64_t remote_stream = 0;
  if ((r = ResolveStream(stream, &ctx, &remote_stream)) != CUDA_SUCCESS) return r;
  // The server checks that each array is one of the stream's context.
  if (src.type == CU_MEMORYTYPE_ARRAY && dst.type == CU_MEMORYTYPE_ARRAY) {
    return SendCopy<calls::MemcpyArrayToArray>(async, ctx->remote,
                                               {.dst = dst.array->remote,
                                                .dst_x = dst.x,
                                                .dst_y = dst.y,
                                                .dst_z = dst.z,
                                                .src = src.array->remote,
                                                .src_x = src.x,
                                                .src_y = src.y,
                                                .src_z = src.z,
                                                .width = width,
                                                .height = height,
                                                .depth = depth,
                                                .stream = remote_stream});
  }
  size_t packed_bytes = 0;
  if (__builtin_mul_overflow(width, height, &packed_bytes) ||
      __builtin_mul_overflow(packed_bytes, depth, &packed_bytes)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (dst.type == CU_MEMORYTYPE_ARRAY) {
    if (src.type == CU_MEMORYTYPE_HOST) {
      std::vector<char> packed;
      const char* payload = src.host;
      if (!Packed(src, width, height, depth)) {
        packed.resize(packed_bytes);
        Pack(src, width, height, depth, packed.data());
        payload = packed.data();
      }
      return SendCopy<calls::MemcpyHtoArray>(async, ctx->remote,
                                             {.dst = dst.array->remote,
                                              .x = dst.x,
                                              .y = dst.y,
                                              .z = dst.z,
                                              .width = width,
                                              .height = height,
                                              .depth = depth,
                                              .stream = remote_stream},
                                             payload, packed_bytes);
    }
    return SendCopy<calls::MemcpyDtoArray>(async, ctx->remote,
                                           {.dst = dst.array->remote,
                                            .x = dst.x,
                                            .y = dst.y,
                                            .z = dst.z,
                                            .src = src.device,
                                            .pitch = src.pitch,
                                            .rows = src.rows,
                                            .width = width,
                                            .height = height,
                                            .depth = depth,
                                            .stream = remote_stream});
  }
  if (dst.type == CU_MEMORYTYPE_HOST) {
    // A device-to-host copy completes before the call returns, async or not (pageable memory).
    // The reply lands in the program's memory when its rows are back to back.
    const bool direct = Packed(dst, width, height, depth);
    std::vector<char> packed(direct ? 0 : packed_bytes);
    char* landing = direct ? dst.host : packed.data();
    size_t got = 0;
    r = Server().Call<calls::MemcpyArrayToH>(ctx->remote,
                                             {.src = src.array->remote,
                                              .x = src.x,
                                              .y = src.y,
                                              .z = src.z,
                                              .width = width,
                                              .height = height,
                                              .depth = depth,
                                              .stream = remote_stream},
                                             nullptr, nullptr, 0,
                                             ReplyBuffer{landing, packed_bytes}, &got);
    if (r != CUDA_SUCCESS) return r;
    if (got != packed_bytes) return CUDA_ERROR_UNKNOWN;
    if (!direct) Unpack(packed.data(), width, height, depth, dst);
    return CUDA_SUCCESS;
  }
  return SendCopy<calls::MemcpyArrayToD>(async, ctx->remote,
                                         {.src = src.array->remote,
                                          .x = src.x,
                                          .y = src.y,
                                          .z = src.z,
                                          .dst = dst.device,
                                          .pitch = dst.pitch,
                                          .rows = dst.rows,
                                          .width = width,
                                          .height = height,
                                          .depth = depth,
                                          .stream = remote_stream});
}

CUresult ArrayRemote(CUarray array, uint64_t* remote) {
  if (CUresult r = CheckArray(array); r != CUDA_SUCCESS) return r;
  *remote = array->remote;
  return CUDA_SUCCESS;
}

CUresult ArrayDescriptorIn(CUctx_st* ctx, CUarray array, CUDA_ARRAY3D_DESCRIPTOR* descriptor) {
  if (CUresult r = CheckArray(array); r != CUDA_SUCCESS) return r;
  if (array->ctx != ctx) return CUDA_ERROR_INVALID_VALUE;
  *descriptor = array->desc;
  return CUDA_SUCCESS;
}

}  // namespace rgpu::client

// ---- Arrays ----

RGPU_IMPL(cuArrayCreate_v2)(CUarray* out, const CUDA_ARRAY_DESCRIPTOR* desc) {
  if (desc == nullptr || desc->Width == 0) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d = {};
  d.Width = desc->Width;
  d.Height = desc->Height;
  d.Format = desc->Format;
  d.NumChannels = desc->NumChannels;
  return CreateArray(out, d);
}

RGPU_IMPL(cuArray3DCreate_v2)(CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  if (desc == nullptr || desc->Width == 0) return CUDA_ERROR_INVALID_VALUE;
  return CreateArray(out, *desc);
}

RGPU_IMPL(cuArrayDestroy)(CUarray array) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  if (array == nullptr || !ClientState::Get().IsLive(array) || array->kind != ObjectKind::kArray) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (array->mipmap != nullptr) return CUDA_ERROR_INVALID_VALUE;  // goes with its mipmapped array
  if (CheckArray(array) == CUDA_SUCCESS) {
    // The array's context must be done with it: destroying waits for its work, as the driver.
    if ((r = rgpu::client::WaitContextDrained(array->ctx)) != CUDA_SUCCESS) return r;
    r = Server().Call<calls::ArrayDestroy>(array->ctx->remote, {.array = array->remote});
    if (r != CUDA_SUCCESS) return r;
  }
  // An array whose context was reset or destroyed went with it; only the handle is left.
  ClientState::Get().Unregister(array);
  delete array;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuArray3DGetDescriptor_v2)(CUDA_ARRAY3D_DESCRIPTOR* desc, CUarray array) {
  if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckArray(array); r != CUDA_SUCCESS) return r;
  *desc = array->desc;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuArrayGetDescriptor_v2)(CUDA_ARRAY_DESCRIPTOR* desc, CUarray array) {
  if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckArray(array); r != CUDA_SUCCESS) return r;
  // A descriptor without depth cannot describe a 3D, layered or cubemap array.
  if (array->desc.Depth != 0) return CUDA_ERROR_INVALID_VALUE;
  desc->Width = array->desc.Width;
  desc->Height = array->desc.Height;
  desc->Format = array->desc.Format;
  desc->NumChannels = array->desc.NumChannels;
  return CUDA_SUCCESS;
}

// ---- Copies of one array row range (the 1D forms: offsets are bytes into the array) ----

namespace {

// One side of a 1D copy.
struct End {
  CUmemorytype type;
  const void* host;
  CUdeviceptr device;
  CUarray array;
  size_t offset;  // bytes into the array
};
End Host(const void* p) { return {CU_MEMORYTYPE_HOST, p, 0, nullptr, 0}; }
End Device(CUdeviceptr d) { return {CU_MEMORYTYPE_DEVICE, nullptr, d, nullptr, 0}; }
End Array(CUarray a, size_t offset) { return {CU_MEMORYTYPE_ARRAY, nullptr, 0, a, offset}; }

// `bytes` from `src` to `dst`, as a box of one row.
CUresult Copy1D(End src, End dst, size_t bytes, CUstream stream, bool async) {
  CUDA_MEMCPY3D c = {};
  c.WidthInBytes = bytes;
  c.Height = 1;
  c.Depth = 1;
  c.srcMemoryType = src.type;
  c.srcHost = src.host;
  c.srcDevice = src.device;
  c.srcArray = src.array;
  c.srcXInBytes = src.offset;
  c.dstMemoryType = dst.type;
  c.dstHost = const_cast<void*>(dst.host);
  c.dstDevice = dst.device;
  c.dstArray = dst.array;
  c.dstXInBytes = dst.offset;
  return rgpu::client::CopyArray3D(c, stream, async);
}

}  // namespace

RGPU_IMPL(cuMemcpyHtoA_v2)(CUarray dst, size_t offset, const void* src, size_t bytes) {
  return Copy1D(Host(src), Array(dst, offset), bytes, nullptr, false);
}
RGPU_IMPL(cuMemcpyHtoAAsync_v2)
(CUarray dst, size_t offset, const void* src, size_t bytes, CUstream stream) {
  return Copy1D(Host(src), Array(dst, offset), bytes, stream, true);
}
RGPU_IMPL(cuMemcpyAtoH_v2)(void* dst, CUarray src, size_t offset, size_t bytes) {
  return Copy1D(Array(src, offset), Host(dst), bytes, nullptr, false);
}
RGPU_IMPL(cuMemcpyAtoHAsync_v2)
(void* dst, CUarray src, size_t offset, size_t bytes, CUstream stream) {
  return Copy1D(Array(src, offset), Host(dst), bytes, stream, true);
}
RGPU_IMPL(cuMemcpyDtoA_v2)(CUarray dst, size_t offset, CUdeviceptr src, size_t bytes) {
  return rgpu::client::FinishSynchronousMemop(
      Copy1D(Device(src), Array(dst, offset), bytes, nullptr, false), {src});
}
RGPU_IMPL(cuMemcpyAtoD_v2)(CUdeviceptr dst, CUarray src, size_t offset, size_t bytes) {
  return rgpu::client::FinishSynchronousMemop(
      Copy1D(Array(src, offset), Device(dst), bytes, nullptr, false), {dst});
}
RGPU_IMPL(cuMemcpyAtoA_v2)
(CUarray dst, size_t dst_offset, CUarray src, size_t src_offset, size_t bytes) {
  return Copy1D(Array(src, src_offset), Array(dst, dst_offset), bytes, nullptr, false);
}
RGPU_SAME_AS(cuMemcpyHtoA_v2_ptds, cuMemcpyHtoA_v2)
RGPU_SAME_AS(cuMemcpyAtoH_v2_ptds, cuMemcpyAtoH_v2)
RGPU_SAME_AS(cuMemcpyDtoA_v2_ptds, cuMemcpyDtoA_v2)
RGPU_SAME_AS(cuMemcpyAtoD_v2_ptds, cuMemcpyAtoD_v2)
RGPU_SAME_AS(cuMemcpyAtoA_v2_ptds, cuMemcpyAtoA_v2)
RGPU_PER_THREAD_SAME_AS(cuMemcpyHtoAAsync_v2_ptsz)
RGPU_PER_THREAD_SAME_AS(cuMemcpyAtoHAsync_v2_ptsz)

// ---- Mipmapped arrays ----

namespace {

// Checks a mipmapped array handle the program passed: live, its context not reset since.
CUresult CheckMipmap(CUmipmappedArray m) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  if (m == nullptr || !ClientState::Get().IsLive(m) || m->kind != ObjectKind::kMipmappedArray ||
      rgpu::client::CheckContext(m->ctx) != CUDA_SUCCESS || m->generation != m->ctx->generation) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  return CUDA_SUCCESS;
}

CUresult MipmapRemote(CUmipmappedArray m, uint64_t* remote) {
  if (CUresult r = CheckMipmap(m); r != CUDA_SUCCESS) return r;
  *remote = m->remote;
  return CUDA_SUCCESS;
}

// Level `level`'s extent of a dimension of `extent` (0 stays 0: a dimension the array lacks).
size_t LevelExtent(size_t extent, unsigned level) {
  if (extent == 0) return 0;
  return level >= 64 ? 1 : std::max<size_t>(1, extent >> level);
}

}  // namespace

RGPU_IMPL(cuMipmappedArrayCreate)
(CUmipmappedArray* out, const CUDA_ARRAY3D_DESCRIPTOR* desc, unsigned int levels) {
  if (out == nullptr || desc == nullptr || desc->Width == 0) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (rgpu::ArrayFormatChannelBytes(desc->Format) == 0) {
    RGPU_LOG_WARN("cuMipmappedArrayCreate: array format %d is not supported",
                  static_cast<int>(desc->Format));
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  calls::MipmappedArrayCreate::Results got;
  r = Server().Call<calls::MipmappedArrayCreate>(ctx->remote,
                                                 {.width = desc->Width,
                                                  .height = desc->Height,
                                                  .depth = desc->Depth,
                                                  .format = static_cast<uint32_t>(desc->Format),
                                                  .channels = desc->NumChannels,
                                                  .flags = desc->Flags,
                                                  .levels = levels},
                                                 &got);
  if (r != CUDA_SUCCESS) return r;
  auto* m = new CUmipmappedArray_st;
  m->remote = got.mipmap;
  m->ctx = ctx;
  m->generation = ctx->generation;
  m->desc = *desc;
  m->levels.assign(levels, nullptr);
  ClientState::Get().Register(m);
  *out = m;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMipmappedArrayGetLevel)(CUarray* out, CUmipmappedArray m, unsigned int level) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckMipmap(m); r != CUDA_SUCCESS) return r;
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    if (level >= m->levels.size()) return CUDA_ERROR_INVALID_VALUE;
    if (m->levels[level] != nullptr) {
      *out = m->levels[level];
      return CUDA_SUCCESS;
    }
  }
  calls::MipmappedArrayGetLevel::Results got;
  CUresult r = Server().Call<calls::MipmappedArrayGetLevel>(
      m->ctx->remote, {.mipmap = m->remote, .level = level}, &got);
  if (r != CUDA_SUCCESS) return r;
  const bool keeps_depth = (m->desc.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  if (m->levels[level] == nullptr) {
    auto* array = new CUarray_st;
    array->remote = got.array;
    array->ctx = m->ctx;
    array->generation = m->generation;
    array->desc = m->desc;
    array->desc.Width = LevelExtent(m->desc.Width, level);
    array->desc.Height = LevelExtent(m->desc.Height, level);
    if (!keeps_depth) array->desc.Depth = LevelExtent(m->desc.Depth, level);
    array->mipmap = m;
    ClientState::Get().Register(array);
    m->levels[level] = array;
  }
  *out = m->levels[level];
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuMipmappedArrayDestroy)(CUmipmappedArray m) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  if (m == nullptr || !ClientState::Get().IsLive(m) || m->kind != ObjectKind::kMipmappedArray) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (CheckMipmap(m) == CUDA_SUCCESS) {
    if ((r = rgpu::client::WaitContextDrained(m->ctx)) != CUDA_SUCCESS) return r;
    r = Server().Call<calls::MipmappedArrayDestroy>(m->ctx->remote, {.mipmap = m->remote});
    if (r != CUDA_SUCCESS) return r;
  }
  ClientState::Get().Unregister(m);
  for (CUarray_st* level : m->levels) {
    if (level == nullptr) continue;
    ClientState::Get().Unregister(level);
    delete level;
  }
  delete m;
  return CUDA_SUCCESS;
}

// ---- Texture and surface objects ----

namespace {

struct Sampler {
  CUctx_st* ctx = nullptr;
  uint64_t generation = 0;
  CUDA_RESOURCE_DESC resource = {};
  CUDA_TEXTURE_DESC texture = {};  // texture objects only
};

struct Samplers {
  std::mutex mu;
  std::map<CUtexObject, Sampler> textures;   // GUARDED_BY(mu)
  std::map<CUsurfObject, Sampler> surfaces;  // GUARDED_BY(mu)
};

Samplers& State() {
  static Samplers* samplers = new Samplers;  // never destroyed: used until the process ends
  return *samplers;
}

uint32_t Bits(float f) {
  uint32_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}

// The sampler `value` of `table` (mu held), or null.
Sampler* Find(std::map<unsigned long long, Sampler>& table, unsigned long long value) {
  auto it = table.find(value);
  return it == table.end() ? nullptr : &it->second;
}

// Forgets texture or surface `value` of `table` and has the server destroy it with `destroy`
// (not when its context was reset or destroyed: it went with it).
template <typename Destroy>
CUresult DestroySampler(std::map<unsigned long long, Sampler>& table, unsigned long long value,
                        Destroy destroy) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  Sampler sampler;
  {
    std::lock_guard<std::mutex> lock(State().mu);
    Sampler* found = Find(table, value);
    if (found == nullptr) return CUDA_ERROR_INVALID_VALUE;
    sampler = *found;
    table.erase(value);
  }
  if (rgpu::client::CheckContext(sampler.ctx) != CUDA_SUCCESS ||
      sampler.generation != sampler.ctx->generation) {
    return CUDA_SUCCESS;
  }
  return destroy(sampler.ctx);
}

// The resource descriptor texture or surface `value` was made with.
CUresult ResourceOf(std::map<unsigned long long, Sampler>& table, unsigned long long value,
                    CUDA_RESOURCE_DESC* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(State().mu);
  Sampler* found = Find(table, value);
  if (found == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *out = found->resource;
  return CUDA_SUCCESS;
}

}  // namespace

RGPU_IMPL(cuTexObjectCreate)
(CUtexObject* out, const CUDA_RESOURCE_DESC* res, const CUDA_TEXTURE_DESC* tex,
 const CUDA_RESOURCE_VIEW_DESC* view) {
  if (out == nullptr || res == nullptr || tex == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (view != nullptr) {
    RGPU_LOG_WARN("cuTexObjectCreate: resource views are not supported");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  calls::TexObjectCreate::Args a = {};
  a.resource_type = static_cast<uint32_t>(res->resType);
  switch (res->resType) {
    case CU_RESOURCE_TYPE_ARRAY:
      if ((r = rgpu::client::ArrayRemote(res->res.array.hArray, &a.array)) != CUDA_SUCCESS) {
        return r;
      }
      break;
    case CU_RESOURCE_TYPE_LINEAR:
      a.dptr = res->res.linear.devPtr;
      a.format = static_cast<uint32_t>(res->res.linear.format);
      a.channels = res->res.linear.numChannels;
      a.width = res->res.linear.sizeInBytes;
      break;
    case CU_RESOURCE_TYPE_PITCH2D:
      a.dptr = res->res.pitch2D.devPtr;
      a.format = static_cast<uint32_t>(res->res.pitch2D.format);
      a.channels = res->res.pitch2D.numChannels;
      a.width = res->res.pitch2D.width;
      a.height = res->res.pitch2D.height;
      a.pitch = res->res.pitch2D.pitchInBytes;
      break;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
      if ((r = MipmapRemote(res->res.mipmap.hMipmappedArray, &a.mipmap)) != CUDA_SUCCESS) {
        return r;
      }
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  a.address_x = static_cast<uint32_t>(tex->addressMode[0]);
  a.address_y = static_cast<uint32_t>(tex->addressMode[1]);
  a.address_z = static_cast<uint32_t>(tex->addressMode[2]);
  a.filter = static_cast<uint32_t>(tex->filterMode);
  a.flags = tex->flags;
  a.max_anisotropy = tex->maxAnisotropy;
  a.mipmap_filter = static_cast<uint32_t>(tex->mipmapFilterMode);
  a.mipmap_bias_bits = Bits(tex->mipmapLevelBias);
  a.min_lod_bits = Bits(tex->minMipmapLevelClamp);
  a.max_lod_bits = Bits(tex->maxMipmapLevelClamp);
  a.border_r_bits = Bits(tex->borderColor[0]);
  a.border_g_bits = Bits(tex->borderColor[1]);
  a.border_b_bits = Bits(tex->borderColor[2]);
  a.border_a_bits = Bits(tex->borderColor[3]);
  calls::TexObjectCreate::Results got;
  if ((r = Server().Call<calls::TexObjectCreate>(ctx->remote, a, &got)) != CUDA_SUCCESS) return r;
  Samplers& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  s.textures[got.texture] = Sampler{ctx, ctx->generation, *res, *tex};
  *out = got.texture;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuTexObjectDestroy)(CUtexObject texture) {
  return DestroySampler(State().textures, texture, [texture](CUctx_st* ctx) {
    return Server().Call<calls::TexObjectDestroy>(ctx->remote, {.texture = texture});
  });
}

RGPU_IMPL(cuTexObjectGetResourceDesc)(CUDA_RESOURCE_DESC* out, CUtexObject texture) {
  return ResourceOf(State().textures, texture, out);
}

RGPU_IMPL(cuTexObjectGetTextureDesc)(CUDA_TEXTURE_DESC* out, CUtexObject texture) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Samplers& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  Sampler* found = Find(s.textures, texture);
  if (found == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *out = found->texture;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuTexObjectGetResourceViewDesc)(CUDA_RESOURCE_VIEW_DESC* out, CUtexObject texture) {
  (void)out;
  (void)texture;
  // rgpu makes texture objects without views only: there is no view to describe.
  return CUDA_ERROR_INVALID_VALUE;
}

RGPU_IMPL(cuSurfObjectCreate)(CUsurfObject* out, const CUDA_RESOURCE_DESC* res) {
  if (out == nullptr || res == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (res->resType != CU_RESOURCE_TYPE_ARRAY) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  uint64_t array = 0;
  if ((r = rgpu::client::ArrayRemote(res->res.array.hArray, &array)) != CUDA_SUCCESS) return r;
  calls::SurfObjectCreate::Results got;
  r = Server().Call<calls::SurfObjectCreate>(ctx->remote, {.array = array}, &got);
  if (r != CUDA_SUCCESS) return r;
  Samplers& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  s.surfaces[got.surface] = Sampler{ctx, ctx->generation, *res, {}};
  *out = got.surface;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuSurfObjectDestroy)(CUsurfObject surface) {
  return DestroySampler(State().surfaces, surface, [surface](CUctx_st* ctx) {
    return Server().Call<calls::SurfObjectDestroy>(ctx->remote, {.surface = surface});
  });
}

RGPU_IMPL(cuSurfObjectGetResourceDesc)(CUDA_RESOURCE_DESC* out, CUsurfObject surface) {
  return ResourceOf(State().surfaces, surface, out);
}
