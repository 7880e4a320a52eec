#include "softgpu/texture.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "softgpu/half.h"

namespace softgpu {
namespace {

struct Table {
  std::shared_mutex mu;
  std::unordered_map<uint64_t, std::shared_ptr<const TextureObject>> objects;
  std::atomic<uint64_t> next{1};
};

Table& GetTable() {
  static Table* table = new Table();  // leaked: kernels may look objects up during exit
  return *table;
}

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

// The channel values of the in-range texel (x, y, slice) as 32-bit words: floats (integers of
// 8/16 bits promoted to [0, 1] or [-1, 1], halves widened) or, for integer-returning textures,
// integers (sign-extended for signed formats). Missing channels read 0, alpha 1.
void LoadTexel(const TextureObject& t, const uint8_t* data, const TexLevel& lv, uint64_t x,
               uint64_t y, uint64_t s, uint32_t out[4]) {
  const TexelStorage& st = t.storage;
  const uint8_t* p =
      data + lv.offset + s * lv.slice_pitch + y * lv.row_pitch + x * st.element_bytes;
  const bool as_int = t.integer_result;
  for (uint32_t c = 0; c < 4; ++c) {
    if (c >= st.channels) {
      out[c] = c == 3 ? (as_int ? 1u : Bits(1.0f)) : 0u;
      continue;
    }
    switch (st.format) {
      case CU_AD_FORMAT_UNSIGNED_INT8: {
        const uint8_t v = p[c];
        out[c] = as_int ? v : Bits(v / 255.0f);
        break;
      }
      case CU_AD_FORMAT_SIGNED_INT8: {
        const int8_t v = static_cast<int8_t>(p[c]);
        out[c] = as_int ? static_cast<uint32_t>(static_cast<int32_t>(v))
                        : Bits(std::max(-1.0f, v / 127.0f));
        break;
      }
      case CU_AD_FORMAT_UNSIGNED_INT16: {
        uint16_t v;
        memcpy(&v, p + 2 * c, 2);
        out[c] = as_int ? v : Bits(v / 65535.0f);
        break;
      }
      case CU_AD_FORMAT_SIGNED_INT16: {
        int16_t v;
        memcpy(&v, p + 2 * c, 2);
        out[c] = as_int ? static_cast<uint32_t>(static_cast<int32_t>(v))
                        : Bits(std::max(-1.0f, v / 32767.0f));
        break;
      }
      case CU_AD_FORMAT_HALF: {
        uint16_t v;
        memcpy(&v, p + 2 * c, 2);
        out[c] = Bits(HalfToFloat(v));
        break;
      }
      default:  // 32-bit integers and floats: the bits as stored
        memcpy(&out[c], p + 4 * c, 4);
        break;
    }
  }
}

void BorderTexel(const TextureObject& t, uint32_t out[4]) {
  for (int c = 0; c < 4; ++c) {
    const float b = t.texture.borderColor[c];
    out[c] = t.integer_result ? static_cast<uint32_t>(static_cast<int32_t>(b)) : Bits(b);
  }
}

// Maps texel index i along a dimension of n texels by address mode; false for a border texel.
bool AddressIndex(int64_t i, int64_t n, int mode, int64_t* out) {
  switch (mode) {
    case CU_TR_ADDRESS_MODE_WRAP:
      i %= n;
      if (i < 0) i += n;
      break;
    case CU_TR_ADDRESS_MODE_MIRROR: {
      const int64_t period = 2 * n;
      i %= period;
      if (i < 0) i += period;
      if (i >= n) i = period - 1 - i;
      break;
    }
    case CU_TR_ADDRESS_MODE_BORDER:
      if (i < 0 || i >= n) return false;
      break;
    default:
      i = std::clamp<int64_t>(i, 0, n - 1);
      break;
  }
  *out = i;
  return true;
}

int64_t FloorIndex(float v) {
  if (std::isnan(v)) return 0;
  return static_cast<int64_t>(std::floor(std::clamp(v, -1e15f, 1e15f)));
}

// Level 0 of a resource without mipmap levels: its storage.
TexLevel StorageLevel(const TexelStorage& st) {
  TexLevel lv;
  lv.width = st.width;
  lv.height = st.height;
  lv.depth = st.depth;
  lv.row_pitch = st.row_pitch;
  lv.slice_pitch = st.slice_pitch;
  return lv;
}

// The sampling problem after geometry is resolved: up to three filtered dimensions in texel
// space plus a fixed slice (layer or cubemap face) when there is no third dimension, in one level.
struct Lookup {
  TexLevel level;
  int dims = 1;
  float c[3] = {0, 0, 0};
  int64_t n[3] = {1, 1, 1};
  int mode[3] = {CU_TR_ADDRESS_MODE_CLAMP, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_ADDRESS_MODE_CLAMP};
  int64_t slice = 0;
};

// Cubemap face and face coordinates in [0, 1] for direction (x, y, z), per the CUDA
// Programming Guide's cubemap table.
void CubeFace(float x, float y, float z, int* face, float* u, float* v) {
  const float ax = std::fabs(x), ay = std::fabs(y), az = std::fabs(z);
  float m, s, t;
  if (ax >= ay && ax >= az) {
    m = ax;
    *face = x >= 0 ? 0 : 1;
    s = x >= 0 ? -z : z;
    t = -y;
  } else if (ay >= az) {
    m = ay;
    *face = y >= 0 ? 2 : 3;
    s = x;
    t = y >= 0 ? z : -z;
  } else {
    m = az;
    *face = z >= 0 ? 4 : 5;
    s = z >= 0 ? x : -x;
    t = -y;
  }
  if (m == 0) {
    *u = *v = 0.5f;
    return;
  }
  *u = (s / m + 1) * 0.5f;
  *v = (t / m + 1) * 0.5f;
}

int64_t ClampLayer(int32_t layer, uint64_t layers) {
  return std::clamp<int64_t>(layer, 0, static_cast<int64_t>(layers) - 1);
}

Lookup Resolve(const TextureObject& t, const TexLevel& lv, TexGeometry g, bool integer_coords,
               const TexCoords& c) {
  Lookup l;
  l.level = lv;
  l.n[0] = static_cast<int64_t>(lv.width);
  l.n[1] = static_cast<int64_t>(lv.height);
  l.n[2] = static_cast<int64_t>(lv.depth);
  bool normalized = t.normalized_coords;
  switch (g) {
    case TexGeometry::k1D:
      l.dims = 1;
      break;
    case TexGeometry::kA1D:
      l.dims = 1;
      l.slice = ClampLayer(c.layer, lv.depth);
      break;
    case TexGeometry::k2D:
      l.dims = 2;
      break;
    case TexGeometry::kA2D:
      l.dims = 2;
      l.slice = ClampLayer(c.layer, lv.depth);
      break;
    case TexGeometry::k3D:
      l.dims = 3;
      break;
    case TexGeometry::kCube:
    case TexGeometry::kACube: {
      int face;
      float u, v;
      CubeFace(c.f[0], c.f[1], c.f[2], &face, &u, &v);
      l.dims = 2;
      l.c[0] = u * static_cast<float>(lv.width);
      l.c[1] = v * static_cast<float>(lv.height);
      const uint64_t layers = std::max<uint64_t>(lv.depth / 6, 1);
      l.slice = (g == TexGeometry::kACube ? ClampLayer(c.layer, layers) * 6 : 0) + face;
      // Faces clamp at their edges (seamless filtering approximated by clamping).
      return l;
    }
  }
  for (int d = 0; d < l.dims; ++d) {
    l.c[d] = integer_coords ? static_cast<float>(c.i[d]) : c.f[d];
    if (normalized && !integer_coords) l.c[d] *= static_cast<float>(l.n[d]);
    int mode = t.address_mode[d];
    // Wrap and mirror need normalized coordinates; otherwise the hardware clamps.
    if (!normalized && (mode == CU_TR_ADDRESS_MODE_WRAP || mode == CU_TR_ADDRESS_MODE_MIRROR)) {
      mode = CU_TR_ADDRESS_MODE_CLAMP;
    }
    l.mode[d] = mode;
  }
  return l;
}

// Reads the texel at integer indices `idx` (per dimension) after addressing; border texels
// read the border colour.
void Fetch(const TextureObject& t, const uint8_t* data, const Lookup& l, const int64_t idx[3],
           uint32_t out[4]) {
  int64_t a[3] = {0, 0, 0};
  for (int d = 0; d < l.dims; ++d) {
    if (!AddressIndex(idx[d], l.n[d], l.mode[d], &a[d])) {
      BorderTexel(t, out);
      return;
    }
  }
  const uint64_t y = l.dims >= 2 ? static_cast<uint64_t>(a[1]) : 0;
  const uint64_t s = l.dims == 3 ? static_cast<uint64_t>(a[2]) : static_cast<uint64_t>(l.slice);
  LoadTexel(t, data, l.level, static_cast<uint64_t>(a[0]), y, s, out);
}

// Filter weight of the upper texel: the fraction in the hardware's 9-bit fixed point (8
// fractional bits).
float Weight(float frac) { return std::nearbyint(frac * 256.0f) / 256.0f; }

// The level a texture's level 0 is: the first of its view for a mipmapped texture.
TexLevel BaseLevel(const TextureObject& t) {
  return t.levels.empty() ? StorageLevel(t.storage) : t.levels.front();
}

// Samples one level (filtering between texels as the texture says).
void SampleLevel(const TextureObject& t, const uint8_t* data, const TexLevel& level, TexGeometry g,
                 bool integer_coords, const TexCoords& c, uint32_t out[4]) {
  const Lookup l = Resolve(t, level, g, integer_coords, c);
  // Linear filtering applies to float results only (the API refuses it otherwise).
  if (!t.linear_filter || integer_coords || t.integer_result) {
    int64_t idx[3];
    for (int d = 0; d < 3; ++d) idx[d] = d < l.dims ? FloorIndex(l.c[d]) : 0;
    Fetch(t, data, l, idx, out);
    return;
  }
  int64_t i0[3] = {0, 0, 0};
  float w1[3] = {0, 0, 0};
  for (int d = 0; d < l.dims; ++d) {
    const float x = l.c[d] - 0.5f;
    const float f = std::floor(x);
    i0[d] = FloorIndex(x);
    w1[d] = Weight(x - f);
  }
  float sum[4] = {0, 0, 0, 0};
  for (int corner = 0; corner < (1 << l.dims); ++corner) {
    int64_t idx[3] = {0, 0, 0};
    float weight = 1.0f;
    for (int d = 0; d < l.dims; ++d) {
      const bool upper = (corner >> d) & 1;
      idx[d] = i0[d] + (upper ? 1 : 0);
      weight *= upper ? w1[d] : 1.0f - w1[d];
    }
    uint32_t texel[4];
    Fetch(t, data, l, idx, texel);
    for (int k = 0; k < 4; ++k) sum[k] += weight * std::bit_cast<float>(texel[k]);
  }
  for (int k = 0; k < 4; ++k) out[k] = Bits(sum[k]);
}

// Length, in texels of `base`, of the change of the texture coordinates along one screen
// direction `d` (the x, y, z partials of the coordinates tex.grad gives).
float GradientLength(const TexLevel& base, TexGeometry g, const TexCoords& c, const float d[3]) {
  float v[3] = {0, 0, 0};
  int dims = 1;
  switch (g) {
    case TexGeometry::k1D:
    case TexGeometry::kA1D:
      v[0] = d[0] * static_cast<float>(base.width);
      break;
    case TexGeometry::k2D:
    case TexGeometry::kA2D:
      v[0] = d[0] * static_cast<float>(base.width);
      v[1] = d[1] * static_cast<float>(base.height);
      dims = 2;
      break;
    case TexGeometry::k3D:
      v[0] = d[0] * static_cast<float>(base.width);
      v[1] = d[1] * static_cast<float>(base.height);
      v[2] = d[2] * static_cast<float>(base.depth);
      dims = 3;
      break;
    case TexGeometry::kCube:
    case TexGeometry::kACube: {
      // Face coordinate u = (sc / |ma| + 1) / 2 (CubeFace's table), so
      // du = (dsc * |ma| - sc * d|ma|) / (2 ma^2), and the same for v.
      const float p[3] = {c.f[0], c.f[1], c.f[2]};
      const float ax = std::fabs(p[0]), ay = std::fabs(p[1]), az = std::fabs(p[2]);
      int major, s_axis, t_axis;
      float s_sign, t_sign;
      if (ax >= ay && ax >= az) {
        major = 0;
        s_axis = 2;
        s_sign = p[0] >= 0 ? -1.0f : 1.0f;
        t_axis = 1;
        t_sign = -1.0f;
      } else if (ay >= az) {
        major = 1;
        s_axis = 0;
        s_sign = 1.0f;
        t_axis = 2;
        t_sign = p[1] >= 0 ? 1.0f : -1.0f;
      } else {
        major = 2;
        s_axis = 0;
        s_sign = p[2] >= 0 ? 1.0f : -1.0f;
        t_axis = 1;
        t_sign = -1.0f;
      }
      const float m_sign = p[major] >= 0 ? 1.0f : -1.0f;
      const float m = m_sign * p[major], dm = m_sign * d[major];
      if (m == 0) return 0;
      const float sc = s_sign * p[s_axis], tc = t_sign * p[t_axis];
      const float dsc = s_sign * d[s_axis], dtc = t_sign * d[t_axis];
      const float size = static_cast<float>(base.width);
      v[0] = (dsc * m - sc * dm) / (2 * m * m) * size;
      v[1] = (dtc * m - tc * dm) / (2 * m * m) * size;
      dims = 2;
      break;
    }
  }
  float sum = 0;
  for (int k = 0; k < dims; ++k) sum += v[k] * v[k];
  return std::sqrt(sum);
}

// The level of detail of a lookup in a mipmapped texture, in [0, last] (see SampleTexture).
// Anisotropic filtering is not modelled (maxAnisotropy is taken as 1): the LOD comes from the
// longer gradient, as isotropic filtering's does.
float LevelOfDetail(const TextureObject& t, TexGeometry g, const TexCoords& c, uint32_t last) {
  float lod = 0;
  switch (c.lod_mode) {
    case TexLodMode::kBase:
      break;
    case TexLodMode::kLevel:
      lod = c.lod;
      break;
    case TexLodMode::kGrad: {
      const TexLevel base = t.levels.front();
      const float rho =
          std::max(GradientLength(base, g, c, c.grad[0]), GradientLength(base, g, c, c.grad[1]));
      lod = std::log2(rho);  // -inf for zero gradients: the finest level
      break;
    }
  }
  lod += t.lod_bias;
  // The clamps as given (the upper one wins if they cross), then the levels there are; NaN
  // reads level 0.
  lod = std::min(std::max(lod, t.min_lod_clamp), t.max_lod_clamp);
  if (!(lod > 0)) return 0;
  return std::min(lod, static_cast<float>(last));
}

}  // namespace

uint64_t RegisterTextureObject(const std::shared_ptr<TextureObject>& object) {
  Table& t = GetTable();
  object->handle = t.next.fetch_add(1);
  std::unique_lock lock(t.mu);
  t.objects[object->handle] = object;
  return object->handle;
}

std::shared_ptr<const TextureObject> FindTextureObject(uint64_t handle) {
  Table& t = GetTable();
  std::shared_lock lock(t.mu);
  auto it = t.objects.find(handle);
  return it == t.objects.end() ? nullptr : it->second;
}

std::shared_ptr<const TextureObject> RemoveTextureObject(uint64_t handle) {
  Table& t = GetTable();
  std::unique_lock lock(t.mu);
  auto it = t.objects.find(handle);
  if (it == t.objects.end()) return nullptr;
  std::shared_ptr<const TextureObject> out = std::move(it->second);
  t.objects.erase(it);
  return out;
}

void RemoveTextureObjectsOf(const void* owner) {
  Table& t = GetTable();
  std::unique_lock lock(t.mu);
  std::erase_if(t.objects, [owner](const auto& kv) { return kv.second->owner == owner; });
}

void SampleTexture(const TextureObject& t, const uint8_t* data, TexGeometry g, bool integer_coords,
                   const TexCoords& c, uint32_t out[4]) {
  const TexelStorage& st = t.storage;
  if (st.linear) {
    // tex1Dfetch: element index, no filtering or addressing; out of range reads zeros.
    const int64_t i = integer_coords ? c.i[0] : FloorIndex(c.f[0]);
    if (i < 0 || static_cast<uint64_t>(i) >= st.width) {
      out[0] = out[1] = out[2] = out[3] = 0;
      return;
    }
    LoadTexel(t, data, StorageLevel(st), static_cast<uint64_t>(i), 0, 0, out);
    return;
  }
  if (t.levels.empty()) {
    // One level: tex.level and tex.grad read it whatever the LOD.
    SampleLevel(t, data, StorageLevel(st), g, integer_coords, c, out);
    return;
  }
  const uint32_t last = static_cast<uint32_t>(t.levels.size() - 1);
  const float lod = LevelOfDetail(t, g, c, last);
  // Filtering between levels applies to float results of float coordinates only, as between
  // texels.
  if (t.linear_mip_filter && !integer_coords && !t.integer_result) {
    const uint32_t lower = static_cast<uint32_t>(lod);  // lod is in [0, last]
    const float w = lower < last ? Weight(lod - static_cast<float>(lower)) : 0.0f;
    SampleLevel(t, data, t.levels[lower], g, integer_coords, c, out);
    if (w == 0.0f) return;
    uint32_t upper[4];
    SampleLevel(t, data, t.levels[lower + 1], g, integer_coords, c, upper);
    for (int k = 0; k < 4; ++k) {
      out[k] = Bits((1.0f - w) * std::bit_cast<float>(out[k]) + w * std::bit_cast<float>(upper[k]));
    }
    return;
  }
  // Nearest level, halves rounding down (OpenGL: ceil(lod + 1/2) - 1).
  const uint32_t level = lod <= 0.5f ? 0 : static_cast<uint32_t>(std::ceil(lod + 0.5f)) - 1;
  SampleLevel(t, data, t.levels[std::min(level, last)], g, integer_coords, c, out);
}

void GatherTexture(const TextureObject& t, const uint8_t* data, TexGeometry g, const TexCoords& c,
                   uint32_t component, uint32_t out[4]) {
  const Lookup l = Resolve(t, BaseLevel(t), g, false, c);
  int64_t i0[2];
  for (int d = 0; d < 2; ++d) i0[d] = FloorIndex(l.c[d] - 0.5f);
  static constexpr int kOrder[4][2] = {{0, 1}, {1, 1}, {1, 0}, {0, 0}};
  for (int k = 0; k < 4; ++k) {
    const int64_t idx[3] = {i0[0] + kOrder[k][0], i0[1] + kOrder[k][1], 0};
    uint32_t texel[4];
    Fetch(t, data, l, idx, texel);
    out[k] = texel[component & 3];
  }
}

SurfaceAccess SurfaceOffset(const TextureObject& t, int64_t x, int64_t y, int64_t slice,
                            uint32_t bytes, SurfaceClamp clamp, uint64_t* offset) {
  const TexelStorage& st = t.storage;
  const int64_t row_bytes = static_cast<int64_t>(st.width * st.element_bytes);
  const int64_t rows = static_cast<int64_t>(st.height);
  const int64_t slices = static_cast<int64_t>(st.depth);
  if (x % bytes != 0) return SurfaceAccess::kMisaligned;
  if (bytes > row_bytes) return SurfaceAccess::kOutOfRange;
  const bool out =
      x < 0 || x > row_bytes - bytes || y < 0 || y >= rows || slice < 0 || slice >= slices;
  if (out) {
    if (clamp == SurfaceClamp::kTrap) return SurfaceAccess::kOutOfRange;
    if (clamp == SurfaceClamp::kZero) return SurfaceAccess::kZero;
    x = std::clamp<int64_t>(x, 0, (row_bytes - bytes) / bytes * bytes);
    y = std::clamp<int64_t>(y, 0, rows - 1);
    slice = std::clamp<int64_t>(slice, 0, slices - 1);
  }
  *offset = static_cast<uint64_t>(slice) * st.slice_pitch +
            static_cast<uint64_t>(y) * st.row_pitch + static_cast<uint64_t>(x);
  return SurfaceAccess::kOk;
}

void PackFormatted(const TextureObject& t, const uint32_t in[4], uint8_t* element) {
  const TexelStorage& st = t.storage;
  const uint32_t cb = FormatChannelBytes(st.format);
  for (uint32_t c = 0; c < st.channels && c < 4; ++c) {
    uint8_t* p = element + c * cb;
    if (st.format == CU_AD_FORMAT_HALF) {
      const uint16_t h = FloatToHalf(std::bit_cast<float>(in[c]));
      memcpy(p, &h, 2);
    } else {
      memcpy(p, &in[c], cb);  // floats as they are; integers truncated to the channel
    }
  }
}

uint32_t QueryTexture(const TextureObject& t, TexQuery q, int32_t level) {
  const TexelStorage& st = t.storage;
  auto mode = [&](int d) -> uint32_t {
    switch (t.address_mode[d]) {  // PTX's encoding
      case CU_TR_ADDRESS_MODE_WRAP:
        return 0;
      case CU_TR_ADDRESS_MODE_MIRROR:
        return 1;
      case CU_TR_ADDRESS_MODE_BORDER:
        return 4;
      default:
        return 3;  // clamp_to_edge
    }
  };
  const bool layered = st.layered;
  // The array's descriptor says which dimensions exist (a 1D array has height 0).
  const CUDA_ARRAY3D_DESCRIPTOR* desc = t.mipmap != nullptr  ? &t.mipmap->desc
                                        : t.array != nullptr ? &t.array->desc
                                                             : nullptr;
  TexLevel lv = StorageLevel(st);
  if (!t.levels.empty()) {
    if (level < 0 || static_cast<size_t>(level) >= t.levels.size()) {
      if (q == TexQuery::kWidth || q == TexQuery::kHeight || q == TexQuery::kDepth) return 0;
    } else {
      lv = t.levels[static_cast<size_t>(level)];
    }
  } else if (level != 0 &&
             (q == TexQuery::kWidth || q == TexQuery::kHeight || q == TexQuery::kDepth)) {
    return 0;  // one level
  }
  switch (q) {
    case TexQuery::kWidth:
      return static_cast<uint32_t>(lv.width);
    case TexQuery::kHeight:
      if (desc != nullptr) return desc->Height == 0 ? 0 : static_cast<uint32_t>(lv.height);
      return st.linear ? 0 : static_cast<uint32_t>(lv.height);
    case TexQuery::kDepth:
      return (desc != nullptr && !layered && !st.cubemap && desc->Depth != 0)
                 ? static_cast<uint32_t>(lv.depth)
                 : 0;
    case TexQuery::kArraySize:
      if (!layered) return 0;
      return static_cast<uint32_t>(st.cubemap ? st.depth / 6 : st.depth);
    case TexQuery::kMipmapLevels:
      // The levels of a mipmapped texture's view; 1 for other resources (one level).
      return t.levels.empty() ? 1 : static_cast<uint32_t>(t.levels.size());
    case TexQuery::kNormalizedCoords:
      return t.normalized_coords ? 1 : 0;
    case TexQuery::kFilterMode:
      return t.linear_filter ? 1 : 0;
    case TexQuery::kAddrMode0:
      return mode(0);
    case TexQuery::kAddrMode1:
      return mode(1);
    case TexQuery::kAddrMode2:
      return mode(2);
  }
  return 0;
}

}  // namespace softgpu
