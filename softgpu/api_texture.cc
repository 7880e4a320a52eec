// Texture and surface objects: creation (validated against the resource's memory, the format
// rules and the device limits), destruction and descriptor queries. Kernels look the objects up
// in the launching context when they run (exec_texture.cc).
#include <cuda.h>

#include <cstring>
#include <vector>

#include "softgpu/api_util.h"
#include "softgpu/texture.h"

using namespace softgpu;

namespace {

// Fills object->storage (and object->array) from a resource description of the context.
CUresult ResolveResource(Context& ctx, const CUDA_RESOURCE_DESC& res, TextureObject* object) {
  if (res.flags != 0) return CUDA_ERROR_INVALID_VALUE;
  TexelStorage& st = object->storage;
  switch (res.resType) {
    case CU_RESOURCE_TYPE_ARRAY: {
      std::shared_ptr<Array> a;
      if (ResolveArray(&ctx, res.res.array.hArray, &a) != CUDA_SUCCESS) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      st.address = a->address;
      st.bytes = a->bytes;
      st.format = a->desc.Format;
      st.channels = a->desc.NumChannels;
      st.element_bytes = a->element_bytes;
      st.width = a->desc.Width;
      st.height = a->rows;
      st.depth = a->slices;
      st.row_pitch = a->row_bytes;
      st.slice_pitch = a->slice_bytes;
      st.layered = a->layered();
      st.cubemap = a->cubemap();
      object->array = std::move(a);
      return CUDA_SUCCESS;
    }
    case CU_RESOURCE_TYPE_LINEAR: {
      const auto& l = res.res.linear;
      if (CUresult r = CheckElementFormat(l.format, l.numChannels); r != CUDA_SUCCESS) return r;
      st.format = l.format;
      st.channels = l.numChannels;
      st.element_bytes = FormatChannelBytes(l.format) * l.numChannels;
      const uint64_t elements = l.sizeInBytes / st.element_bytes;
      if (l.devPtr % kTextureAlignment != 0 || elements == 0 ||
          elements > kMaxTexture1DLinearWidth) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      st.address = l.devPtr;
      st.bytes = elements * st.element_bytes;
      st.width = elements;
      st.row_pitch = st.slice_pitch = st.bytes;
      st.linear = true;
      break;
    }
    case CU_RESOURCE_TYPE_PITCH2D: {
      const auto& p = res.res.pitch2D;
      if (CUresult r = CheckElementFormat(p.format, p.numChannels); r != CUDA_SUCCESS) return r;
      st.format = p.format;
      st.channels = p.numChannels;
      st.element_bytes = FormatChannelBytes(p.format) * p.numChannels;
      if (p.devPtr % kTextureAlignment != 0 || p.pitchInBytes % kTexturePitchAlignment != 0 ||
          p.width == 0 || p.height == 0 || p.width > kMaxTexture2DLinear[0] ||
          p.height > kMaxTexture2DLinear[1] || p.pitchInBytes > kMaxTexture2DLinear[2] ||
          p.pitchInBytes < p.width * st.element_bytes) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      st.address = p.devPtr;
      st.bytes = (p.height - 1) * p.pitchInBytes + p.width * st.element_bytes;
      st.width = p.width;
      st.height = p.height;
      st.row_pitch = p.pitchInBytes;
      st.slice_pitch = p.pitchInBytes * p.height;
      break;
    }
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY: {
      std::shared_ptr<MipmappedArray> m;
      if (ResolveMipmappedArray(&ctx, res.res.mipmap.hMipmappedArray, &m) != CUDA_SUCCESS) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      // The storage spans every level; its geometry is level 0's.
      const Array& base = *m->levels.front();
      st.address = m->address;
      st.bytes = m->bytes;
      st.format = base.desc.Format;
      st.channels = base.desc.NumChannels;
      st.element_bytes = base.element_bytes;
      st.width = base.desc.Width;
      st.height = base.rows;
      st.depth = base.slices;
      st.row_pitch = base.row_bytes;
      st.slice_pitch = base.slice_bytes;
      st.layered = base.layered();
      st.cubemap = base.cubemap();
      for (size_t i = 0; i < m->levels.size(); ++i) {
        const Array& a = *m->levels[i];
        TexLevel lv;
        lv.offset = m->offsets[i];
        lv.width = a.desc.Width;
        lv.height = a.rows;
        lv.depth = a.slices;
        lv.row_pitch = a.row_bytes;
        lv.slice_pitch = a.slice_bytes;
        object->levels.push_back(lv);
      }
      object->mipmap = std::move(m);
      return CUDA_SUCCESS;
    }
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  // Linear memory must lie inside one allocation of the context.
  if (ctx.memory().Find(st.address, st.bytes) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

// A resource view of a mipmapped array: a range of its levels (the first becomes level 0, and
// the LOD clamps count from it) and, for a layered one, of its layers.
CUresult ApplyMipmapView(const CUDA_RESOURCE_VIEW_DESC& v, TextureObject* object) {
  const MipmappedArray& m = *object->mipmap;
  const Array& base = *m.levels.front();
  TexelStorage& st = object->storage;
  if (v.format != CU_RES_VIEW_FORMAT_NONE) return CUDA_ERROR_NOT_SUPPORTED;
  if (v.firstMipmapLevel > v.lastMipmapLevel || v.lastMipmapLevel >= m.levels.size()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if ((v.width != 0 && v.width != m.desc.Width) || (v.height != 0 && v.height != m.desc.Height)) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  std::vector<TexLevel> levels(object->levels.begin() + v.firstMipmapLevel,
                               object->levels.begin() + v.lastMipmapLevel + 1);
  if (!base.layered()) {
    if (v.firstLayer != 0 || v.lastLayer != 0 || (v.depth != 0 && v.depth != m.desc.Depth)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  } else {
    const uint64_t per_layer = base.cubemap() ? 6 : 1;
    const uint64_t layers = base.slices / per_layer;
    if (v.firstLayer > v.lastLayer || v.lastLayer >= layers) return CUDA_ERROR_INVALID_VALUE;
    for (TexLevel& lv : levels) {
      lv.offset += v.firstLayer * per_layer * lv.slice_pitch;
      lv.depth = (v.lastLayer - v.firstLayer + 1) * per_layer;
    }
  }
  object->levels = std::move(levels);
  // The storage still spans every level (what must stay allocated); its geometry is the view's
  // level 0.
  const TexLevel& first = object->levels.front();
  st.width = first.width;
  st.height = first.height;
  st.depth = first.depth;
  st.row_pitch = first.row_pitch;
  st.slice_pitch = first.slice_pitch;
  return CUDA_SUCCESS;
}

// Applies a resource view: the whole array or a range of its layers, in the array's own format.
CUresult ApplyView(const CUDA_RESOURCE_VIEW_DESC& v, TextureObject* object) {
  if (object->mipmap != nullptr) return ApplyMipmapView(v, object);
  if (object->array == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const Array& a = *object->array;
  TexelStorage& st = object->storage;
  if (v.format != CU_RES_VIEW_FORMAT_NONE) return CUDA_ERROR_NOT_SUPPORTED;
  if (v.firstMipmapLevel != 0 || v.lastMipmapLevel != 0) return CUDA_ERROR_INVALID_VALUE;
  if ((v.width != 0 && v.width != a.desc.Width) || (v.height != 0 && v.height != a.desc.Height)) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (!a.layered()) {
    if (v.firstLayer != 0 || v.lastLayer != 0 || (v.depth != 0 && v.depth != a.desc.Depth)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
  }
  const uint64_t per_layer = a.cubemap() ? 6 : 1;
  const uint64_t layers = a.slices / per_layer;
  if (v.firstLayer > v.lastLayer || v.lastLayer >= layers) return CUDA_ERROR_INVALID_VALUE;
  st.address += v.firstLayer * per_layer * a.slice_bytes;
  st.depth = (v.lastLayer - v.firstLayer + 1) * per_layer;
  st.bytes = st.depth * a.slice_bytes;
  return CUDA_SUCCESS;
}

CUresult CheckTextureDesc(const CUDA_TEXTURE_DESC& t, const TexelStorage& st, bool mipmapped) {
  for (int d = 0; d < 3; ++d) {
    if (t.addressMode[d] < CU_TR_ADDRESS_MODE_WRAP ||
        t.addressMode[d] > CU_TR_ADDRESS_MODE_BORDER) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (t.filterMode != CU_TR_FILTER_MODE_POINT && t.filterMode != CU_TR_FILTER_MODE_LINEAR) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  constexpr unsigned kKnown = CU_TRSF_READ_AS_INTEGER | CU_TRSF_NORMALIZED_COORDINATES |
                              CU_TRSF_SRGB | CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION |
                              CU_TRSF_SEAMLESS_CUBEMAP;
  if (t.flags & ~kKnown) return CUDA_ERROR_INVALID_VALUE;
  if (t.flags & CU_TRSF_SRGB) return CUDA_ERROR_NOT_SUPPORTED;
  if ((t.flags & CU_TRSF_SEAMLESS_CUBEMAP) && !st.cubemap) return CUDA_ERROR_INVALID_VALUE;
  if (mipmapped) {
    // cuda.h: "for CUDA mipmapped arrays, this flag has to be set".
    if (!(t.flags & CU_TRSF_NORMALIZED_COORDINATES)) return CUDA_ERROR_INVALID_VALUE;
    if (t.mipmapFilterMode != CU_TR_FILTER_MODE_POINT &&
        t.mipmapFilterMode != CU_TR_FILTER_MODE_LINEAR) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

// The live object `handle` of the current context, of the given kind.
CUresult FindObject(uint64_t handle, bool surface, std::shared_ptr<Context>* ctx,
                    std::shared_ptr<const TextureObject>* out) {
  if (CUresult r = CurrentContext(ctx); r != CUDA_SUCCESS) return r;
  std::shared_ptr<const TextureObject> o = FindTextureObject(handle);
  if (o == nullptr || o->owner != ctx->get() || o->surface != surface) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *out = std::move(o);
  return CUDA_SUCCESS;
}

CUresult DestroyObject(uint64_t handle, bool surface) {
  std::shared_ptr<Context> ctx;
  std::shared_ptr<const TextureObject> o;
  if (CUresult r = FindObject(handle, surface, &ctx, &o); r != CUDA_SUCCESS) return r;
  // Kernels already issued that use the object run first (they were given it while it lived).
  ctx->WaitForAllStreams();
  if (RemoveTextureObject(handle) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

}  // namespace

SOFTGPU_EXPORT CUresult CUDAAPI cuTexObjectCreate(CUtexObject* pTexObject,
                                                  const CUDA_RESOURCE_DESC* pResDesc,
                                                  const CUDA_TEXTURE_DESC* pTexDesc,
                                                  const CUDA_RESOURCE_VIEW_DESC* pResViewDesc) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    if (pTexObject == nullptr || pResDesc == nullptr || pTexDesc == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    auto o = std::make_shared<TextureObject>();
    o->owner = ctx.get();
    o->resource = *pResDesc;
    o->texture = *pTexDesc;
    if (CUresult r = ResolveResource(*ctx, *pResDesc, o.get()); r != CUDA_SUCCESS) return r;
    if (pResViewDesc != nullptr) {
      if (CUresult r = ApplyView(*pResViewDesc, o.get()); r != CUDA_SUCCESS) return r;
      o->view = *pResViewDesc;
      o->has_view = true;
    }
    if (CUresult r = CheckTextureDesc(*pTexDesc, o->storage, o->mipmap != nullptr);
        r != CUDA_SUCCESS) {
      return r;
    }
    const CUarray_format f = o->storage.format;
    o->integer_result = (pTexDesc->flags & CU_TRSF_READ_AS_INTEGER) ||
                        f == CU_AD_FORMAT_UNSIGNED_INT32 || f == CU_AD_FORMAT_SIGNED_INT32;
    if (f == CU_AD_FORMAT_HALF || f == CU_AD_FORMAT_FLOAT) o->integer_result = false;
    o->normalized_coords = pTexDesc->flags & CU_TRSF_NORMALIZED_COORDINATES;
    o->linear_filter = pTexDesc->filterMode == CU_TR_FILTER_MODE_LINEAR;
    for (int d = 0; d < 3; ++d) o->address_mode[d] = static_cast<uint8_t>(pTexDesc->addressMode[d]);
    // Level of detail (mipmapped arrays; other resources have one level). maxAnisotropy is
    // ignored: sampling is isotropic, as with a maximum anisotropy of 1.
    o->linear_mip_filter = pTexDesc->mipmapFilterMode == CU_TR_FILTER_MODE_LINEAR;
    o->lod_bias = pTexDesc->mipmapLevelBias;
    o->min_lod_clamp = pTexDesc->minMipmapLevelClamp;
    o->max_lod_clamp = pTexDesc->maxMipmapLevelClamp;
    // Seamless cubemaps with point filtering clamp (filtering across faces is approximated by
    // clamping at face edges).
    if (pTexDesc->flags & CU_TRSF_SEAMLESS_CUBEMAP) {
      for (int d = 0; d < 3; ++d) o->address_mode[d] = CU_TR_ADDRESS_MODE_CLAMP;
    }
    *pTexObject = RegisterTextureObject(o);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuTexObjectDestroy(CUtexObject texObject) {
  return Guard([&] { return DestroyObject(texObject, false); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC* pResDesc,
                                                           CUtexObject texObject) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    std::shared_ptr<const TextureObject> o;
    if (CUresult r = FindObject(texObject, false, &ctx, &o); r != CUDA_SUCCESS) return r;
    if (pResDesc == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pResDesc = o->resource;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC* pTexDesc,
                                                          CUtexObject texObject) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    std::shared_ptr<const TextureObject> o;
    if (CUresult r = FindObject(texObject, false, &ctx, &o); r != CUDA_SUCCESS) return r;
    if (pTexDesc == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pTexDesc = o->texture;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI
cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC* pResViewDesc, CUtexObject texObject) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    std::shared_ptr<const TextureObject> o;
    if (CUresult r = FindObject(texObject, false, &ctx, &o); r != CUDA_SUCCESS) return r;
    // As the real driver: an object created without a view has none to return.
    if (pResViewDesc == nullptr || !o->has_view) return CUDA_ERROR_INVALID_VALUE;
    *pResViewDesc = o->view;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuSurfObjectCreate(CUsurfObject* pSurfObject,
                                                   const CUDA_RESOURCE_DESC* pResDesc) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    if (pSurfObject == nullptr || pResDesc == nullptr) return CUDA_ERROR_INVALID_VALUE;
    // Surfaces are arrays created with CUDA_ARRAY3D_SURFACE_LDST.
    if (pResDesc->resType != CU_RESOURCE_TYPE_ARRAY) return CUDA_ERROR_INVALID_VALUE;
    auto o = std::make_shared<TextureObject>();
    o->surface = true;
    o->owner = ctx.get();
    o->resource = *pResDesc;
    if (CUresult r = ResolveResource(*ctx, *pResDesc, o.get()); r != CUDA_SUCCESS) return r;
    if (!o->array->surface_ldst()) return CUDA_ERROR_INVALID_VALUE;
    *pSurfObject = RegisterTextureObject(o);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuSurfObjectDestroy(CUsurfObject surfObject) {
  return Guard([&] { return DestroyObject(surfObject, true); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC* pResDesc,
                                                            CUsurfObject surfObject) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    std::shared_ptr<const TextureObject> o;
    if (CUresult r = FindObject(surfObject, true, &ctx, &o); r != CUDA_SUCCESS) return r;
    if (pResDesc == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pResDesc = o->resource;
    return CUDA_SUCCESS;
  });
}
