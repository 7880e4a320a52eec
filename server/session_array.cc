// Session's handlers for CUDA arrays and the texture and surface objects that read them
// (proto/calls.def: CUDA arrays, texture and surface objects). calls.def's checks have made sure
// every array belongs to the call's context, every box lies inside its array and every device
// range is the context's memory before these run. Arrays are charged to the tenant's quota and
// zeroed before the tenant sees them, as allocations are.
#include <algorithm>
#include <cstring>
#include <memory>

#include "common/array_format.h"
#include "server/checked_size.h"
#include "server/require_fn.h"
#include "server/session.h"

namespace rgpu::server {
namespace {

uint32_t FormatBytes(uint32_t format) {
  return ArrayFormatChannelBytes(static_cast<CUarray_format>(format));
}

float FloatOfBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// A 3D copy of the box `width` x `height` x `depth`; the caller sets its two sides.
CUDA_MEMCPY3D Box(uint64_t width, uint64_t height, uint64_t depth) {
  CUDA_MEMCPY3D c = {};
  c.WidthInBytes = width;
  c.Height = height;
  c.Depth = depth;
  return c;
}

void SetArraySource(CUDA_MEMCPY3D* c, CUarray array, uint64_t x, uint64_t y, uint64_t z) {
  c->srcMemoryType = CU_MEMORYTYPE_ARRAY;
  c->srcArray = array;
  c->srcXInBytes = x;
  c->srcY = y;
  c->srcZ = z;
}

void SetArrayDestination(CUDA_MEMCPY3D* c, CUarray array, uint64_t x, uint64_t y, uint64_t z) {
  c->dstMemoryType = CU_MEMORYTYPE_ARRAY;
  c->dstArray = array;
  c->dstXInBytes = x;
  c->dstY = y;
  c->dstZ = z;
}

// Zeroes `depth` slices of `height` rows of `row` bytes of `array`, slice by slice: an array's
// memory holds what its last user left there, like any device memory.
CUresult ZeroArray(const CudaDriver& drv, CUarray array, uint64_t row, uint64_t height,
                   uint64_t depth) {
  if (drv.cuMemcpy3D == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  std::unique_ptr<char[]> zeros(new (std::nothrow) char[row * height]());
  if (!zeros) return CUDA_ERROR_OUT_OF_MEMORY;
  for (uint64_t z = 0; z < depth; ++z) {
    CUDA_MEMCPY3D c = Box(row, height, 1);
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = zeros.get();
    c.srcPitch = row;
    c.srcHeight = height;
    SetArrayDestination(&c, array, 0, 0, z);
    if (CUresult r = drv.cuMemcpy3D(&c); r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

// The extent of mipmap level `level` of a dimension of `extent` (at least 1).
uint64_t LevelExtent(uint64_t extent, uint32_t level) {
  return level >= 64 ? 1 : std::max<uint64_t>(1, extent >> level);
}

}  // namespace

CUresult Session::HandleArrayCreate(CallState& cs, const ArrayCreateIn& in,
                                    calls::ArrayCreate::Results* out) {
  REQUIRE_FN(cuArray3DCreate);
  REQUIRE_FN(cuArrayDestroy);
  const uint32_t channel_bytes = FormatBytes(in.format);
  if (channel_bytes == 0) {
    cs.detail = "array format " + std::to_string(in.format) + " is not supported";
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (in.channels != 1 && in.channels != 2 && in.channels != 4) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = RoomFor(cs, arrays_.size(), limits_.max_arrays, "arrays"); r != CUDA_SUCCESS) {
    return r;
  }
  ArrayRecord rec;
  rec.ctx = cs.ctx_id;
  rec.width = in.width;
  rec.height = in.height == 0 ? 1 : in.height;
  rec.depth = in.depth == 0 ? 1 : in.depth;
  rec.element_bytes = channel_bytes * in.channels;
  rec.flags = in.flags;
  uint64_t row = 0, slice = 0;
  if (in.width == 0 || !CheckedMul(rec.width, rec.element_bytes, &row) ||
      !CheckedMul(row, rec.height, &slice) || !CheckedMul(slice, rec.depth, &rec.charged)) {
    cs.detail = "invalid or overflowing array shape";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!Charge(cs, DeviceOf(cs.ctx_id), rec.charged, "the array")) return CUDA_ERROR_OUT_OF_MEMORY;
  CUDA_ARRAY3D_DESCRIPTOR desc = {};
  desc.Width = in.width;
  desc.Height = in.height;
  desc.Depth = in.depth;
  desc.Format = static_cast<CUarray_format>(in.format);
  desc.NumChannels = in.channels;
  desc.Flags = in.flags;
  CUresult r;
  {
    auto change = DeviceMemoryChange();
    r = drv_.cuArray3DCreate(&rec.array, &desc);
  }
  if (r == CUDA_SUCCESS && scrub_allocations_) {
    // Zeroed before the tenant can read it.
    r = ZeroArray(drv_, rec.array, row, rec.height, rec.depth);
    if (r != CUDA_SUCCESS) {
      auto change = DeviceMemoryChange();
      drv_.cuArrayDestroy(rec.array);
    }
  }
  if (r != CUDA_SUCCESS) {
    Uncharge(DeviceOf(cs.ctx_id), rec.charged);
    return r;
  }
  out->array = arrays_.Insert(rec);
  return CUDA_SUCCESS;
}

CUresult Session::HandleArrayDestroy(CallState& cs, const ArrayDestroyIn& in,
                                     calls::ArrayDestroy::Results*) {
  if (in.array->mipmap != 0) {
    cs.detail = "a level of a mipmapped array goes with it";
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUresult r;
  {
    auto change = DeviceMemoryChange();
    r = drv_.cuArrayDestroy(in.array->array);
  }
  if (r != CUDA_SUCCESS) return r;
  Uncharge(DeviceOf(in.array->ctx), in.array->charged);
  arrays_.Erase(in.array.id);
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemcpyHtoArray(CallState& cs, const MemcpyHtoArrayIn& in,
                                       calls::MemcpyHtoArray::Results*) {
  REQUIRE_FN(cuMemcpy3D);
  if (CUresult r = AfterStreamWork(in.stream.stream); r != CUDA_SUCCESS) return r;
  // The payload lives only while this call is served: the copy completes before it returns.
  CUDA_MEMCPY3D c = Box(in.width, in.height, in.depth);
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = cs.payload;
  c.srcPitch = in.width;
  c.srcHeight = in.height;
  SetArrayDestination(&c, in.dst->array, in.x, in.y, in.z);
  return drv_.cuMemcpy3D(&c);
}

CUresult Session::HandleMemcpyArrayToH(CallState& cs, const MemcpyArrayToHIn& in,
                                       calls::MemcpyArrayToH::Results*) {
  REQUIRE_FN(cuMemcpy3D);
  if (CUresult r = AfterStreamWork(in.stream.stream); r != CUDA_SUCCESS) return r;
  // At most the array's size (calls.def's check), which the quota has covered.
  const uint64_t packed = in.width * in.height * in.depth;
  cs.out_payload = OutputBuffer(packed);
  if (cs.out_payload == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  CUDA_MEMCPY3D c = Box(in.width, in.height, in.depth);
  SetArraySource(&c, in.src->array, in.x, in.y, in.z);
  c.dstMemoryType = CU_MEMORYTYPE_HOST;
  c.dstHost = cs.out_payload;
  c.dstPitch = in.width;
  c.dstHeight = in.height;
  if (CUresult r = drv_.cuMemcpy3D(&c); r != CUDA_SUCCESS) return r;
  cs.out_size = packed;
  return CUDA_SUCCESS;
}

namespace {
// Runs a device-side 3D copy on `stream` (asynchronously when it is one of the session's and the
// backend can), or in the legacy default stream's order.
CUresult CopyOnStream(const CudaDriver& drv, const CUDA_MEMCPY3D& c, CUstream stream) {
  if (stream != nullptr && drv.cuMemcpy3DAsync != nullptr) return drv.cuMemcpy3DAsync(&c, stream);
  if (drv.cuMemcpy3D == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  if (stream != nullptr) {
    if (CUresult r = drv.cuStreamSynchronize(stream); r != CUDA_SUCCESS) return r;
  }
  return drv.cuMemcpy3D(&c);
}
}  // namespace

CUresult Session::HandleMemcpyDtoArray(CallState&, const MemcpyDtoArrayIn& in,
                                       calls::MemcpyDtoArray::Results*) {
  CUDA_MEMCPY3D c = Box(in.width, in.height, in.depth);
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = in.src;
  c.srcPitch = in.pitch;
  c.srcHeight = in.rows;
  SetArrayDestination(&c, in.dst->array, in.x, in.y, in.z);
  return CopyOnStream(drv_, c, in.stream.stream);
}

CUresult Session::HandleMemcpyArrayToD(CallState&, const MemcpyArrayToDIn& in,
                                       calls::MemcpyArrayToD::Results*) {
  CUDA_MEMCPY3D c = Box(in.width, in.height, in.depth);
  SetArraySource(&c, in.src->array, in.x, in.y, in.z);
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = in.dst;
  c.dstPitch = in.pitch;
  c.dstHeight = in.rows;
  return CopyOnStream(drv_, c, in.stream.stream);
}

CUresult Session::HandleMemcpyArrayToArray(CallState&, const MemcpyArrayToArrayIn& in,
                                           calls::MemcpyArrayToArray::Results*) {
  CUDA_MEMCPY3D c = Box(in.width, in.height, in.depth);
  SetArraySource(&c, in.src->array, in.src_x, in.src_y, in.src_z);
  SetArrayDestination(&c, in.dst->array, in.dst_x, in.dst_y, in.dst_z);
  return CopyOnStream(drv_, c, in.stream.stream);
}

CUresult Session::HandleTexObjectCreate(CallState& cs, const TexObjectCreateIn& in,
                                        calls::TexObjectCreate::Results* out) {
  REQUIRE_FN(cuTexObjectCreate);
  REQUIRE_FN(cuTexObjectDestroy);
  if (CUresult r = RoomFor(cs, textures_.size() + surfaces_.size(), limits_.max_samplers,
                           "texture and surface objects");
      r != CUDA_SUCCESS) {
    return r;
  }
  CUDA_RESOURCE_DESC res = {};
  res.resType = static_cast<CUresourcetype>(in.resource_type);
  const uint32_t channel_bytes = FormatBytes(in.format);
  uint64_t row_bytes = 0;
  switch (in.resource_type) {
    case CU_RESOURCE_TYPE_ARRAY:
      if (in.array.record == nullptr) return CUDA_ERROR_INVALID_VALUE;
      res.res.array.hArray = in.array->array;
      break;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
      if (in.mipmap.record == nullptr) return CUDA_ERROR_INVALID_VALUE;
      res.res.mipmap.hMipmappedArray = in.mipmap->mipmap;
      break;
    case CU_RESOURCE_TYPE_LINEAR:
      if (channel_bytes == 0 || in.width == 0 || !CheckRange(cs, in.dptr, in.width, "dptr")) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      res.res.linear.devPtr = in.dptr;
      res.res.linear.format = static_cast<CUarray_format>(in.format);
      res.res.linear.numChannels = in.channels;
      res.res.linear.sizeInBytes = in.width;
      break;
    case CU_RESOURCE_TYPE_PITCH2D:
      if (channel_bytes == 0 || in.channels > 4 ||
          !CheckedMul(in.width, uint64_t{channel_bytes} * in.channels, &row_bytes) ||
          !CheckPitched(cs, in.dptr, in.pitch, row_bytes, in.height, "dptr")) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      res.res.pitch2D.devPtr = in.dptr;
      res.res.pitch2D.format = static_cast<CUarray_format>(in.format);
      res.res.pitch2D.numChannels = in.channels;
      res.res.pitch2D.width = in.width;
      res.res.pitch2D.height = in.height;
      res.res.pitch2D.pitchInBytes = in.pitch;
      break;
    default:
      cs.detail = "texture resource type " + std::to_string(in.resource_type) + " is not supported";
      return CUDA_ERROR_NOT_SUPPORTED;
  }
  CUDA_TEXTURE_DESC tex = {};
  tex.addressMode[0] = static_cast<CUaddress_mode>(in.address_x);
  tex.addressMode[1] = static_cast<CUaddress_mode>(in.address_y);
  tex.addressMode[2] = static_cast<CUaddress_mode>(in.address_z);
  tex.filterMode = static_cast<CUfilter_mode>(in.filter);
  tex.flags = in.flags;
  tex.maxAnisotropy = in.max_anisotropy;
  tex.mipmapFilterMode = static_cast<CUfilter_mode>(in.mipmap_filter);
  tex.mipmapLevelBias = FloatOfBits(in.mipmap_bias_bits);
  tex.minMipmapLevelClamp = FloatOfBits(in.min_lod_bits);
  tex.maxMipmapLevelClamp = FloatOfBits(in.max_lod_bits);
  tex.borderColor[0] = FloatOfBits(in.border_r_bits);
  tex.borderColor[1] = FloatOfBits(in.border_g_bits);
  tex.borderColor[2] = FloatOfBits(in.border_b_bits);
  tex.borderColor[3] = FloatOfBits(in.border_a_bits);
  CUtexObject texture = 0;
  if (CUresult r = drv_.cuTexObjectCreate(&texture, &res, &tex, nullptr); r != CUDA_SUCCESS) {
    return r;
  }
  if (texture == 0 || textures_.count(texture) != 0) {
    // A value the session already names would make two objects one; the backend broke its word.
    drv_.cuTexObjectDestroy(texture);
    cs.detail = "the backend returned a texture object value already in use";
    return CUDA_ERROR_UNKNOWN;
  }
  textures_[texture] = SamplerRecord{cs.ctx_id, in.array.id};
  out->texture = texture;
  return CUDA_SUCCESS;
}

CUresult Session::HandleTexObjectDestroy(CallState&, const TexObjectDestroyIn& in,
                                         calls::TexObjectDestroy::Results*) {
  if (CUresult r = drv_.cuTexObjectDestroy(in.texture.id); r != CUDA_SUCCESS) return r;
  textures_.erase(in.texture.id);
  return CUDA_SUCCESS;
}

CUresult Session::HandleSurfObjectCreate(CallState& cs, const SurfObjectCreateIn& in,
                                         calls::SurfObjectCreate::Results* out) {
  REQUIRE_FN(cuSurfObjectCreate);
  REQUIRE_FN(cuSurfObjectDestroy);
  if (CUresult r = RoomFor(cs, textures_.size() + surfaces_.size(), limits_.max_samplers,
                           "texture and surface objects");
      r != CUDA_SUCCESS) {
    return r;
  }
  CUDA_RESOURCE_DESC res = {};
  res.resType = CU_RESOURCE_TYPE_ARRAY;
  res.res.array.hArray = in.array->array;
  CUsurfObject surface = 0;
  if (CUresult r = drv_.cuSurfObjectCreate(&surface, &res); r != CUDA_SUCCESS) return r;
  if (surface == 0 || surfaces_.count(surface) != 0) {
    drv_.cuSurfObjectDestroy(surface);
    cs.detail = "the backend returned a surface object value already in use";
    return CUDA_ERROR_UNKNOWN;
  }
  surfaces_[surface] = SamplerRecord{cs.ctx_id, in.array.id};
  out->surface = surface;
  return CUDA_SUCCESS;
}

CUresult Session::HandleSurfObjectDestroy(CallState&, const SurfObjectDestroyIn& in,
                                          calls::SurfObjectDestroy::Results*) {
  if (CUresult r = drv_.cuSurfObjectDestroy(in.surface.id); r != CUDA_SUCCESS) return r;
  surfaces_.erase(in.surface.id);
  return CUDA_SUCCESS;
}

void Session::ForgetArrays(uint64_t ctx_id) {
  const int device = DeviceOf(ctx_id);
  for (auto it = arrays_.records().begin(); it != arrays_.records().end();) {
    if (it->second.ctx == ctx_id) {
      Uncharge(device, it->second.charged);
      it = arrays_.records().erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = mipmaps_.records().begin(); it != mipmaps_.records().end();) {
    if (it->second.ctx == ctx_id) {
      Uncharge(device, it->second.charged);
      it = mipmaps_.records().erase(it);
    } else {
      ++it;
    }
  }
  std::erase_if(textures_, [ctx_id](const auto& t) { return t.second.ctx == ctx_id; });
  std::erase_if(surfaces_, [ctx_id](const auto& s) { return s.second.ctx == ctx_id; });
}

CUresult Session::HandleMipmappedArrayCreate(CallState& cs, const MipmappedArrayCreateIn& in,
                                             calls::MipmappedArrayCreate::Results* out) {
  REQUIRE_FN(cuMipmappedArrayCreate);
  REQUIRE_FN(cuMipmappedArrayGetLevel);
  REQUIRE_FN(cuMipmappedArrayDestroy);
  const uint32_t channel_bytes = FormatBytes(in.format);
  if (channel_bytes == 0) {
    cs.detail = "array format " + std::to_string(in.format) + " is not supported";
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (in.channels != 1 && in.channels != 2 && in.channels != 4) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = RoomFor(cs, arrays_.size() + mipmaps_.size(), limits_.max_arrays, "arrays");
      r != CUDA_SUCCESS) {
    return r;
  }
  MipmapRecord rec;
  rec.ctx = cs.ctx_id;
  rec.width = in.width;
  rec.height = in.height == 0 ? 1 : in.height;
  rec.depth = in.depth == 0 ? 1 : in.depth;
  rec.element_bytes = channel_bytes * in.channels;
  rec.flags = in.flags;
  // Layers and cube faces stay at every level; a 3D array's depth halves with the rest.
  const bool keeps_depth = (in.flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
  const uint64_t largest = std::max({rec.width, in.height, keeps_depth ? 0 : in.depth});
  uint32_t possible = 1;
  while (possible < 64 && (largest >> possible) != 0) ++possible;
  if (in.width == 0 || in.levels == 0 || in.levels > possible) {
    cs.detail = "a mipmapped array has 1 to " + std::to_string(possible) + " levels";
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (uint32_t l = 0; l < in.levels; ++l) {
    uint64_t row = 0, slice = 0, level = 0, sum = 0;
    const uint64_t depth = keeps_depth ? rec.depth : LevelExtent(rec.depth, l);
    if (!CheckedMul(LevelExtent(rec.width, l), rec.element_bytes, &row) ||
        !CheckedMul(row, LevelExtent(rec.height, l), &slice) || !CheckedMul(slice, depth, &level) ||
        !CheckedAdd(rec.charged, level, &sum)) {
      cs.detail = "invalid or overflowing array shape";
      return CUDA_ERROR_INVALID_VALUE;
    }
    rec.charged = sum;
  }
  if (!Charge(cs, DeviceOf(cs.ctx_id), rec.charged, "the mipmapped array")) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUDA_ARRAY3D_DESCRIPTOR desc = {};
  desc.Width = in.width;
  desc.Height = in.height;
  desc.Depth = in.depth;
  desc.Format = static_cast<CUarray_format>(in.format);
  desc.NumChannels = in.channels;
  desc.Flags = in.flags;
  CUresult r;
  {
    auto change = DeviceMemoryChange();
    r = drv_.cuMipmappedArrayCreate(&rec.mipmap, &desc, in.levels);
  }
  for (uint32_t l = 0; r == CUDA_SUCCESS && scrub_allocations_ && l < in.levels; ++l) {
    CUarray level = nullptr;
    r = drv_.cuMipmappedArrayGetLevel(&level, rec.mipmap, l);
    if (r == CUDA_SUCCESS) {
      r = ZeroArray(drv_, level, LevelExtent(rec.width, l) * rec.element_bytes,
                    in.height == 0 ? 1 : LevelExtent(rec.height, l),
                    keeps_depth ? rec.depth : LevelExtent(rec.depth, l));
    }
  }
  if (r != CUDA_SUCCESS) {
    if (rec.mipmap != nullptr) {
      auto change = DeviceMemoryChange();
      drv_.cuMipmappedArrayDestroy(rec.mipmap);
    }
    Uncharge(DeviceOf(cs.ctx_id), rec.charged);
    return r;
  }
  rec.levels.assign(in.levels, 0);
  out->mipmap = mipmaps_.Insert(std::move(rec));
  return CUDA_SUCCESS;
}

CUresult Session::HandleMipmappedArrayGetLevel(CallState& cs, const MipmappedArrayGetLevelIn& in,
                                               calls::MipmappedArrayGetLevel::Results* out) {
  MipmapRecord& m = *in.mipmap.record;
  if (in.level >= m.levels.size()) {
    cs.detail = "the mipmapped array has " + std::to_string(m.levels.size()) + " levels";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (m.levels[in.level] != 0) {
    out->array = m.levels[in.level];
    return CUDA_SUCCESS;
  }
  if (CUresult r = RoomFor(cs, arrays_.size() + mipmaps_.size(), limits_.max_arrays, "arrays");
      r != CUDA_SUCCESS) {
    return r;
  }
  ArrayRecord level;
  if (CUresult r = drv_.cuMipmappedArrayGetLevel(&level.array, m.mipmap, in.level);
      r != CUDA_SUCCESS) {
    return r;
  }
  const bool keeps_depth = (m.flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
  level.ctx = m.ctx;
  level.width = LevelExtent(m.width, in.level);
  level.height = m.height == 1 ? 1 : LevelExtent(m.height, in.level);
  level.depth = keeps_depth ? m.depth : LevelExtent(m.depth, in.level);
  level.element_bytes = m.element_bytes;
  level.flags = m.flags;
  level.mipmap = in.mipmap.id;  // charged with its mipmapped array
  out->array = m.levels[in.level] = arrays_.Insert(level);
  return CUDA_SUCCESS;
}

CUresult Session::HandleMipmappedArrayDestroy(CallState&, const MipmappedArrayDestroyIn& in,
                                              calls::MipmappedArrayDestroy::Results*) {
  CUresult r;
  {
    auto change = DeviceMemoryChange();
    r = drv_.cuMipmappedArrayDestroy(in.mipmap->mipmap);
  }
  if (r != CUDA_SUCCESS) return r;
  for (uint64_t level : in.mipmap->levels) {
    if (level != 0) arrays_.Erase(level);
  }
  Uncharge(DeviceOf(in.mipmap->ctx), in.mipmap->charged);
  mipmaps_.Erase(in.mipmap.id);
  return CUDA_SUCCESS;
}

}  // namespace rgpu::server
