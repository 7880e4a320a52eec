#include "softgpu/array.h"

#include <algorithm>
#include <bit>

#include "common/array_format.h"
#include "softgpu/device.h"

namespace softgpu {

uint32_t FormatChannelBytes(CUarray_format format) { return rgpu::ArrayFormatChannelBytes(format); }

CUresult CheckElementFormat(CUarray_format format, unsigned channels) {
  if (channels != 1 && channels != 2 && channels != 4) return CUDA_ERROR_INVALID_VALUE;
  return FormatChannelBytes(format) != 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
}

namespace {

bool Within(uint64_t v, uint64_t limit) { return v >= 1 && v <= limit; }

}  // namespace

CUresult Array::Layout(const CUDA_ARRAY3D_DESCRIPTOR& d, Array* out) {
  constexpr unsigned kKnown = CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST |
                              CUDA_ARRAY3D_CUBEMAP | CUDA_ARRAY3D_TEXTURE_GATHER;
  if (d.Flags & ~kKnown) {
    // Depth textures, colour attachments, sparse and deferred-mapping arrays: valid flags of
    // cuda.h that softgpu does not implement.
    constexpr unsigned kValid = kKnown | CUDA_ARRAY3D_DEPTH_TEXTURE |
                                CUDA_ARRAY3D_COLOR_ATTACHMENT | CUDA_ARRAY3D_SPARSE |
                                CUDA_ARRAY3D_DEFERRED_MAPPING | CUDA_ARRAY3D_VIDEO_ENCODE_DECODE;
    return (d.Flags & ~kValid) ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
  }
  if (d.Width == 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckElementFormat(d.Format, d.NumChannels); r != CUDA_SUCCESS) return r;
  const bool layered = d.Flags & CUDA_ARRAY3D_LAYERED;
  const bool cube = d.Flags & CUDA_ARRAY3D_CUBEMAP;
  const bool surface = d.Flags & CUDA_ARRAY3D_SURFACE_LDST;
  const bool gather = d.Flags & CUDA_ARRAY3D_TEXTURE_GATHER;
  const uint64_t w = d.Width, h = d.Height, z = d.Depth;
  bool ok = false;
  if (cube) {
    // Square faces; six faces, or six per layer.
    if (w != h || z == 0 || z % 6 != 0 || (!layered && z != 6) || gather) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (layered) {
      ok = w <= kMaxTextureCubemapLayered[0] && z / 6 <= kMaxTextureCubemapLayered[1] &&
           (!surface ||
            (w <= kMaxSurfaceCubemapLayered[0] && z / 6 <= kMaxSurfaceCubemapLayered[1]));
    } else {
      ok = w <= kMaxTextureCubemapWidth && (!surface || w <= kMaxSurfaceCubemapWidth);
    }
  } else if (layered) {
    if (z == 0 || gather) return CUDA_ERROR_INVALID_VALUE;
    if (h == 0) {  // 1D layered
      ok = w <= kMaxTexture1DLayered[0] && z <= kMaxTexture1DLayered[1] &&
           (!surface || (w <= kMaxSurface1DLayered[0] && z <= kMaxSurface1DLayered[1]));
    } else {
      ok = w <= kMaxTexture2DLayered[0] && h <= kMaxTexture2DLayered[1] &&
           z <= kMaxTexture2DLayered[2] &&
           (!surface || (w <= kMaxSurface2DLayered[0] && h <= kMaxSurface2DLayered[1] &&
                         z <= kMaxSurface2DLayered[2]));
    }
  } else if (h == 0) {
    if (z != 0 || gather) return CUDA_ERROR_INVALID_VALUE;
    ok = w <= kMaxTexture1DWidth && (!surface || w <= kMaxSurface1DWidth);
  } else if (z == 0) {
    ok = w <= kMaxTexture2D[0] && h <= kMaxTexture2D[1] &&
         (!gather || (w <= kMaxTexture2DGather[0] && h <= kMaxTexture2DGather[1])) &&
         (!surface || (w <= kMaxSurface2D[0] && h <= kMaxSurface2D[1]));
  } else {
    if (gather) return CUDA_ERROR_INVALID_VALUE;
    // The primary 3D limits, or the alternate ones (narrower, deeper).
    ok = (Within(w, kMaxTexture3D[0]) && Within(h, kMaxTexture3D[1]) &&
          Within(z, kMaxTexture3D[2])) ||
         (Within(w, kMaxTexture3DAlternate[0]) && Within(h, kMaxTexture3DAlternate[1]) &&
          Within(z, kMaxTexture3DAlternate[2]));
    ok = ok &&
         (!surface || (w <= kMaxSurface3D[0] && h <= kMaxSurface3D[1] && z <= kMaxSurface3D[2]));
  }
  if (!ok) return CUDA_ERROR_INVALID_VALUE;
  // Every dimension is now far below 2^20 and the element at most 16 bytes: no overflow.
  out->desc = d;
  out->element_bytes = FormatChannelBytes(d.Format) * d.NumChannels;
  out->rows = h == 0 ? 1 : h;
  out->slices = z == 0 ? 1 : z;
  out->row_bytes = w * out->element_bytes;
  out->slice_bytes = out->row_bytes * out->rows;
  out->bytes = out->slice_bytes * out->slices;
  return CUDA_SUCCESS;
}

unsigned MipmappedArray::MaxLevels(const CUDA_ARRAY3D_DESCRIPTOR& d) {
  const bool layered = d.Flags & CUDA_ARRAY3D_LAYERED;
  const bool cube = d.Flags & CUDA_ARRAY3D_CUBEMAP;
  uint64_t extent = std::max<uint64_t>(d.Width, d.Height);
  if (!layered && !cube) extent = std::max<uint64_t>(extent, d.Depth);
  if (extent == 0) return 0;
  return static_cast<unsigned>(std::bit_width(extent));  // 1 + floor(log2(extent))
}

CUresult MipmappedArray::Layout(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned levels,
                                MipmappedArray* out) {
  Array base;
  if (CUresult r = Array::Layout(d, &base); r != CUDA_SUCCESS) return r;
  const bool layered = d.Flags & CUDA_ARRAY3D_LAYERED;
  const bool cube = d.Flags & CUDA_ARRAY3D_CUBEMAP;
  // 1D and 2D mipmapped arrays have narrower limits than plain ones (cuMipmappedArrayCreate's
  // table); the others share the array limits.
  if (!layered && !cube) {
    if (d.Height == 0 && d.Width > kMaxTexture1DMipmappedWidth) return CUDA_ERROR_INVALID_VALUE;
    if (d.Height != 0 && d.Depth == 0 &&
        (d.Width > kMaxTexture2DMipmapped[0] || d.Height > kMaxTexture2DMipmapped[1])) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (levels == 0 || levels > MaxLevels(d)) return CUDA_ERROR_INVALID_VALUE;
  out->desc = d;
  out->levels.clear();
  out->offsets.clear();
  uint64_t offset = 0;
  for (unsigned i = 0; i < levels; ++i) {
    CUDA_ARRAY3D_DESCRIPTOR ld = d;
    auto half = [i](size_t v) -> size_t { return v == 0 ? 0 : std::max<size_t>(v >> i, 1); };
    ld.Width = half(d.Width);
    ld.Height = half(d.Height);
    if (!layered && !cube) ld.Depth = half(d.Depth);  // layers and faces stay
    auto level = std::make_shared<Array>();
    // Smaller extents of a valid descriptor are valid.
    if (CUresult r = Array::Layout(ld, level.get()); r != CUDA_SUCCESS) return r;
    offset = (offset + kTextureAlignment - 1) / kTextureAlignment * kTextureAlignment;
    out->offsets.push_back(offset);
    offset += level->bytes;
    out->levels.push_back(std::move(level));
  }
  out->bytes = offset;
  return CUDA_SUCCESS;
}

void MipmappedArray::Place(uint64_t base) {
  address = base;
  for (size_t i = 0; i < levels.size(); ++i) {
    levels[i]->owner = owner;
    levels[i]->mipmap = this;
    levels[i]->address = address + offsets[i];
  }
}

}  // namespace softgpu
