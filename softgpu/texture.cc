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
void LoadTexel(const TextureObject& t, const uint8_t* data, uint64_t x, uint64_t y, uint64_t s,
               uint32_t out[4]) {
  const TexelStorage& st = t.storage;
  const uint8_t* p = data + s * st.slice_pitch + y * st.row_pitch + x * st.element_bytes;
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

// The sampling problem after geometry is resolved: up to three filtered dimensions in texel
// space plus a fixed slice (layer or cubemap face) when there is no third dimension.
struct Lookup {
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

Lookup Resolve(const TextureObject& t, TexGeometry g, bool integer_coords, const TexCoords& c) {
  const TexelStorage& st = t.storage;
  Lookup l;
  l.n[0] = static_cast<int64_t>(st.width);
  l.n[1] = static_cast<int64_t>(st.height);
  l.n[2] = static_cast<int64_t>(st.depth);
  bool normalized = t.normalized_coords;
  switch (g) {
    case TexGeometry::k1D:
      l.dims = 1;
      break;
    case TexGeometry::kA1D:
      l.dims = 1;
      l.slice = ClampLayer(c.layer, st.depth);
      break;
    case TexGeometry::k2D:
      l.dims = 2;
      break;
    case TexGeometry::kA2D:
      l.dims = 2;
      l.slice = ClampLayer(c.layer, st.depth);
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
      l.c[0] = u * static_cast<float>(st.width);
      l.c[1] = v * static_cast<float>(st.height);
      const uint64_t layers = std::max<uint64_t>(st.depth / 6, 1);
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
  LoadTexel(t, data, static_cast<uint64_t>(a[0]), y, s, out);
}

// Filter weight of the upper texel: the fraction in the hardware's 9-bit fixed point (8
// fractional bits).
float Weight(float frac) { return std::nearbyint(frac * 256.0f) / 256.0f; }

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
    LoadTexel(t, data, static_cast<uint64_t>(i), 0, 0, out);
    return;
  }
  const Lookup l = Resolve(t, g, integer_coords, c);
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

void GatherTexture(const TextureObject& t, const uint8_t* data, TexGeometry g, const TexCoords& c,
                   uint32_t component, uint32_t out[4]) {
  const Lookup l = Resolve(t, g, false, c);
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

uint32_t QueryTexture(const TextureObject& t, TexQuery q) {
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
  switch (q) {
    case TexQuery::kWidth:
      return static_cast<uint32_t>(st.width);
    case TexQuery::kHeight:
      if (t.array != nullptr) return static_cast<uint32_t>(t.array->desc.Height);
      return st.linear ? 0 : static_cast<uint32_t>(st.height);
    case TexQuery::kDepth:
      return (t.array != nullptr && !layered && !st.cubemap)
                 ? static_cast<uint32_t>(t.array->desc.Depth)
                 : 0;
    case TexQuery::kArraySize:
      if (!layered) return 0;
      return static_cast<uint32_t>(st.cubemap ? st.depth / 6 : st.depth);
    case TexQuery::kMipmapLevels:
      return 1;
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
