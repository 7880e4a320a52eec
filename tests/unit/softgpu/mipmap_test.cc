// Mipmapped arrays and level-of-detail sampling in softgpu: cuMipmappedArrayCreate's validation
// and memory, level arrays (copies, surfaces, lifetime), texture objects over mipmapped arrays
// and the kernels of kernels/texture_kernels.cu that sample them with tex1DLod/tex2DLod/
// tex3DLod, the layered and cubemap forms, tex*Grad, plain tex with a bias, tld4 and txq. The
// results are compared with a CPU model of the LOD rules softgpu documents (texture.h):
//   LOD = base 0 | level operand | grad log2(max(|dPdx * size|, |dPdy * size|)),
//   then + mipmapLevelBias, clamped to [minMipmapLevelClamp, maxMipmapLevelClamp] and the levels;
//   POINT: level ceil(LOD + 0.5) - 1 (halves go down); LINEAR: the two levels around it, weighted
//   by the LOD's fraction quantized to 8 bits.
// Levels filled with distinct constants make most expectations plain numbers as well.
#include <cuda.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/unit/softgpu/test_util.h"
#include "tests/unit/softgpu/texture_fixture.h"

namespace {

using softgpu_test::Reference;
using softgpu_test::Sampler;
using softgpu_test::Texel;
using softgpu_test::Volume;

// The texture descriptor's level-of-detail fields.
struct LodParams {
  bool linear = false;  // mipmapFilterMode
  float bias = 0;
  float min_clamp = 0;
  float max_clamp = 100;  // CUDA's default of 0 would clamp every lookup to level 0
};

// The CPU model of level selection (see the file comment).
float ResolveLod(float lod, const LodParams& p, int levels) {
  lod += p.bias;
  lod = std::min(std::max(lod, p.min_clamp), p.max_clamp);
  if (!(lod > 0)) return 0;
  return std::min(lod, static_cast<float>(levels - 1));
}

float Quantized(float frac) { return std::nearbyint(frac * 256.0f) / 256.0f; }

// A lookup at `lod` (before bias and clamps) in the levels `v`, each sampled as Reference does.
Texel MipReference(const std::vector<Volume>& v, int dims, const float* coords, int slice,
                   const Sampler& s, float lod_in, const LodParams& p) {
  const int last = static_cast<int>(v.size()) - 1;
  const float lod = ResolveLod(lod_in, p, static_cast<int>(v.size()));
  if (p.linear) {
    const int lower = static_cast<int>(lod);
    const float w = lower < last ? Quantized(lod - static_cast<float>(lower)) : 0.0f;
    Texel a = Reference(v[lower], dims, coords, slice, s);
    if (w == 0) return a;
    const Texel b = Reference(v[lower + 1], dims, coords, slice, s);
    for (int k = 0; k < 4; ++k) a[k] = (1.0f - w) * a[k] + w * b[k];
    return a;
  }
  const int level = lod <= 0.5f ? 0 : static_cast<int>(std::ceil(lod + 0.5f)) - 1;
  return Reference(v[std::min(level, last)], dims, coords, slice, s);
}

// Level sizes of a mipmapped array: each dimension halves (rounding down), at least 1.
int Half(int v, int level) { return std::max(v >> level, 1); }

class MipmapTest : public softgpu_test::TextureFixture {
 protected:
  void TearDown() override {
    for (CUtexObject t : textures_) cuTexObjectDestroy(t);
    for (CUmipmappedArray m : mipmaps_) cuMipmappedArrayDestroy(m);
    TextureFixture::TearDown();
  }

  CUDA_ARRAY3D_DESCRIPTOR Desc(size_t w, size_t h, size_t d, unsigned flags = 0,
                               CUarray_format f = CU_AD_FORMAT_FLOAT, unsigned channels = 1) {
    CUDA_ARRAY3D_DESCRIPTOR desc{};
    desc.Width = w;
    desc.Height = h;
    desc.Depth = d;
    desc.Format = f;
    desc.NumChannels = channels;
    desc.Flags = flags;
    return desc;
  }
  // A mipmapped array destroyed at TearDown.
  CUmipmappedArray Mipmap(const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned levels) {
    CUmipmappedArray m = nullptr;
    EXPECT_EQ(cuMipmappedArrayCreate(&m, &desc, levels), CUDA_SUCCESS);
    mipmaps_.push_back(m);
    return m;
  }
  CUarray Level(CUmipmappedArray m, unsigned level) {
    CUarray a = nullptr;
    EXPECT_EQ(cuMipmappedArrayGetLevel(&a, m, level), CUDA_SUCCESS);
    return a;
  }
  // Copies float volume `v` (1 channel) into array `a` with cuMemcpy2D (one slice) or cuMemcpy3D.
  void Put(CUarray a, const Volume& v) {
    std::vector<float> host;
    for (const Texel& t : v.t) host.push_back(t[0]);
    if (v.d == 1) {
      CUDA_MEMCPY2D c{};
      c.srcMemoryType = CU_MEMORYTYPE_HOST;
      c.srcHost = host.data();
      c.srcPitch = v.w * sizeof(float);
      c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
      c.dstArray = a;
      c.WidthInBytes = v.w * sizeof(float);
      c.Height = v.h;
      ASSERT_EQ(cuMemcpy2D(&c), CUDA_SUCCESS);
    } else {
      Fill(a, host.data(), v.w * sizeof(float), v.h, v.d);
    }
  }
  // A texture over mipmapped array `m` (normalized coordinates, as CUDA requires).
  CUtexObject MipTexture(CUmipmappedArray m, const Sampler& s, const LodParams& p,
                         const CUDA_RESOURCE_VIEW_DESC* view = nullptr) {
    CUDA_RESOURCE_DESC res{};
    res.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
    res.res.mipmap.hMipmappedArray = m;
    CUDA_TEXTURE_DESC td{};
    for (int d = 0; d < 3; ++d) td.addressMode[d] = s.mode[d];
    td.filterMode = s.linear ? CU_TR_FILTER_MODE_LINEAR : CU_TR_FILTER_MODE_POINT;
    td.flags = CU_TRSF_NORMALIZED_COORDINATES;
    for (int k = 0; k < 4; ++k) td.borderColor[k] = s.border[k];
    td.mipmapFilterMode = p.linear ? CU_TR_FILTER_MODE_LINEAR : CU_TR_FILTER_MODE_POINT;
    td.mipmapLevelBias = p.bias;
    td.minMipmapLevelClamp = p.min_clamp;
    td.maxMipmapLevelClamp = p.max_clamp;
    td.maxAnisotropy = 16;  // ignored by softgpu (isotropic sampling)
    CUtexObject t = 0;
    EXPECT_EQ(cuTexObjectCreate(&t, &res, &td, view), CUDA_SUCCESS);
    textures_.push_back(t);
    return t;
  }
  // tex2DLod results (first component) for the lists.
  std::vector<float> Lod2D(CUtexObject t, const std::vector<float>& x, const std::vector<float>& y,
                           const std::vector<float>& lod) {
    const int n = static_cast<int>(x.size());
    CUdeviceptr dx = Upload(x), dy = Upload(y), dl = Upload(lod), out = Alloc(16 * n);
    EXPECT_EQ(Run("lookup_2d_lod", n, {&t, &dx, &dy, &dl, &out, const_cast<int*>(&n)}),
              CUDA_SUCCESS);
    return Download<float>(out, 4 * n);
  }
  // An 8x8 2D float mipmapped array of 3 levels, level i holding the constant values[i].
  CUmipmappedArray ConstantLevels(const std::vector<float>& values) {
    CUmipmappedArray m = Mipmap(Desc(8, 8, 0), static_cast<unsigned>(values.size()));
    for (size_t i = 0; i < values.size(); ++i) {
      Volume v;
      v.w = v.h = Half(8, static_cast<int>(i));
      v.t.assign(v.w * v.h, Texel{values[i], 0, 0, 1});
      Put(Level(m, static_cast<unsigned>(i)), v);
    }
    return m;
  }

  std::vector<CUtexObject> textures_;
  std::vector<CUmipmappedArray> mipmaps_;
};

// 2D levels holding a pattern distinct per level and texel: 1000 * level + 10 * y + x.
std::vector<Volume> PatternLevels(int w, int h, int levels, int layers = 1) {
  std::vector<Volume> out;
  for (int i = 0; i < levels; ++i) {
    Volume v;
    v.w = Half(w, i);
    v.h = h == 0 ? 1 : Half(h, i);
    v.d = layers;
    for (int z = 0; z < v.d; ++z) {
      for (int y = 0; y < v.h; ++y) {
        for (int x = 0; x < v.w; ++x) {
          v.t.push_back({1000.0f * i + 100000.0f * z + 10.0f * y + x, 0, 0, 1});
        }
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

// Normalized coordinates covering texel centres, fractions and the outside.
std::vector<float> UnitCoordinates() {
  std::vector<float> v;
  for (float c = -0.15f; c < 1.2f; c += 0.13f) v.push_back(c);
  return v;
}

TEST_F(MipmapTest, CreationIsValidated) {
  CUmipmappedArray m = nullptr;
  // Level counts: at least 1, at most 1 + floor(log2(largest extent)).
  const CUDA_ARRAY3D_DESCRIPTOR d2 = Desc(8, 5, 0);
  CU_EXPECT_EQ(cuMipmappedArrayCreate(&m, &d2, 0), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMipmappedArrayCreate(&m, &d2, 5), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuMipmappedArrayCreate(&m, &d2, 4));
  CU_ASSERT_OK(cuMipmappedArrayDestroy(m));
  const CUDA_ARRAY3D_DESCRIPTOR d1 = Desc(5, 0, 0);
  CU_EXPECT_EQ(cuMipmappedArrayCreate(&m, &d1, 4), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuMipmappedArrayCreate(&m, &d1, 3));
  CU_ASSERT_OK(cuMipmappedArrayDestroy(m));
  // 3D: the depth counts; layers and cubemap faces do not.
  const CUDA_ARRAY3D_DESCRIPTOR d3 = Desc(4, 2, 16);
  CU_EXPECT_EQ(cuMipmappedArrayCreate(&m, &d3, 6), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuMipmappedArrayCreate(&m, &d3, 5));
  CU_ASSERT_OK(cuMipmappedArrayDestroy(m));
  const CUDA_ARRAY3D_DESCRIPTOR layered = Desc(4, 4, 64, CUDA_ARRAY3D_LAYERED);
  CU_EXPECT_EQ(cuMipmappedArrayCreate(&m, &layered, 4), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuMipmappedArrayCreate(&m, &layered, 3));
  CU_ASSERT_OK(cuMipmappedArrayDestroy(m));
  const CUDA_ARRAY3D_DESCRIPTOR cube = Desc(16, 16, 6, CUDA_ARRAY3D_CUBEMAP);
  CU_EXPECT_EQ(cuMipmappedArrayCreate(&m, &cube, 6), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuMipmappedArrayCreate(&m, &cube, 5));
  CU_ASSERT_OK(cuMipmappedArrayDestroy(m));
  // cuArray3DCreate's checks: shapes, formats and flags.
  const CUDA_ARRAY3D_DESCRIPTOR bad_cube = Desc(16, 8, 6, CUDA_ARRAY3D_CUBEMAP);
  CU_EXPECT_EQ(cuMipmappedArrayCreate(&m, &bad_cube, 1), CUDA_ERROR_INVALID_VALUE);
  const CUDA_ARRAY3D_DESCRIPTOR no_width = Desc(0, 8, 0);
  CU_EXPECT_EQ(cuMipmappedArrayCreate(&m, &no_width, 1), CUDA_ERROR_INVALID_VALUE);
  const CUDA_ARRAY3D_DESCRIPTOR three_channels = Desc(8, 8, 0, 0, CU_AD_FORMAT_FLOAT, 3);
  CU_EXPECT_EQ(cuMipmappedArrayCreate(&m, &three_channels, 1), CUDA_ERROR_INVALID_VALUE);
  const CUDA_ARRAY3D_DESCRIPTOR bc1 = Desc(8, 8, 0, 0, CU_AD_FORMAT_BC1_UNORM, 4);
  CU_EXPECT_EQ(cuMipmappedArrayCreate(&m, &bc1, 1), CUDA_ERROR_NOT_SUPPORTED);
  const CUDA_ARRAY3D_DESCRIPTOR bad_flags = Desc(8, 8, 0, 0x80000000u);
  CU_EXPECT_EQ(cuMipmappedArrayCreate(&m, &bad_flags, 1), CUDA_ERROR_INVALID_VALUE);
  // The mipmapped 1D and 2D limits are narrower than the plain arrays' ones.
  const CUDA_ARRAY3D_DESCRIPTOR wide1 = Desc(32769, 0, 0);
  CU_EXPECT_EQ(cuMipmappedArrayCreate(&m, &wide1, 1), CUDA_ERROR_INVALID_VALUE);
  const CUDA_ARRAY3D_DESCRIPTOR wide2 = Desc(32769, 2, 0);
  CU_EXPECT_EQ(cuMipmappedArrayCreate(&m, &wide2, 1), CUDA_ERROR_INVALID_VALUE);
  CUarray plain;
  CU_ASSERT_OK(cuArray3DCreate(&plain, &wide1));
  CU_ASSERT_OK(cuArrayDestroy(plain));
  int limit = 0;
  CUdevice dev;
  CU_ASSERT_OK(cuCtxGetDevice(&dev));
  CU_ASSERT_OK(
      cuDeviceGetAttribute(&limit, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH, dev));
  EXPECT_EQ(limit, 32768);
  // Null pointers.
  CU_EXPECT_EQ(cuMipmappedArrayCreate(nullptr, &d2, 1), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMipmappedArrayCreate(&m, nullptr, 1), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(MipmapTest, LevelsHalveAndAreChargedToTheDevice) {
  struct Case {
    CUDA_ARRAY3D_DESCRIPTOR desc;
    unsigned levels;
  };
  const Case cases[] = {
      {Desc(13, 0, 0), 4},                                               // 1D: 13, 6, 3, 1
      {Desc(8, 3, 0), 4},                                                // 2D: 8x3, 4x1, 2x1, 1x1
      {Desc(8, 4, 2), 4},                                                // 3D: the depth halves
      {Desc(8, 4, 3, CUDA_ARRAY3D_LAYERED), 3},                          // layers stay
      {Desc(8, 8, 12, CUDA_ARRAY3D_CUBEMAP | CUDA_ARRAY3D_LAYERED), 4},  // faces stay
  };
  for (const Case& c : cases) {
    size_t free_before, free_after, free_end, total;
    CU_ASSERT_OK(cuMemGetInfo(&free_before, &total));
    CUmipmappedArray m;
    CU_ASSERT_OK(cuMipmappedArrayCreate(&m, &c.desc, c.levels));
    CU_ASSERT_OK(cuMemGetInfo(&free_after, &total));
    const bool layers_stay = c.desc.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
    size_t bytes = 0;
    for (unsigned i = 0; i < c.levels; ++i) {
      CUarray a;
      CU_ASSERT_OK(cuMipmappedArrayGetLevel(&a, m, i));
      CUDA_ARRAY3D_DESCRIPTOR got{};
      CU_ASSERT_OK(cuArray3DGetDescriptor(&got, a));
      const std::string what = "level " + std::to_string(i) + " of " +
                               std::to_string(c.desc.Width) + "x" + std::to_string(c.desc.Height) +
                               "x" + std::to_string(c.desc.Depth);
      EXPECT_EQ(got.Width, static_cast<size_t>(Half(static_cast<int>(c.desc.Width), i))) << what;
      EXPECT_EQ(got.Height, c.desc.Height == 0
                                ? 0
                                : static_cast<size_t>(Half(static_cast<int>(c.desc.Height), i)))
          << what;
      EXPECT_EQ(got.Depth, c.desc.Depth == 0 || layers_stay
                               ? c.desc.Depth
                               : static_cast<size_t>(Half(static_cast<int>(c.desc.Depth), i)))
          << what;
      EXPECT_EQ(got.Flags, c.desc.Flags) << what;
      EXPECT_EQ(got.Format, c.desc.Format) << what;
      bytes += got.Width * std::max<size_t>(got.Height, 1) * std::max<size_t>(got.Depth, 1) * 4;
    }
    // Every level's bytes count against the device (levels start on 512-byte boundaries).
    const size_t used = free_before - free_after;
    EXPECT_GE(used, bytes);
    EXPECT_LE(used, bytes + 512 * c.levels + 256);
    CU_ASSERT_OK(cuMipmappedArrayDestroy(m));
    CU_ASSERT_OK(cuMemGetInfo(&free_end, &total));
    EXPECT_EQ(free_end, free_before);
  }
}

TEST_F(MipmapTest, LevelHandlesBelongToTheMipmappedArray) {
  const CUDA_ARRAY3D_DESCRIPTOR d = Desc(8, 8, 0);
  CUmipmappedArray m;
  CU_ASSERT_OK(cuMipmappedArrayCreate(&m, &d, 3));
  CUarray l1 = nullptr, again = nullptr;
  CU_ASSERT_OK(cuMipmappedArrayGetLevel(&l1, m, 1));
  CU_ASSERT_OK(cuMipmappedArrayGetLevel(&again, m, 1));
  EXPECT_EQ(l1, again);  // the same level, the same handle
  CUarray l0 = nullptr;
  CU_ASSERT_OK(cuMipmappedArrayGetLevel(&l0, m, 0));
  EXPECT_NE(l0, l1);
  CUarray none = nullptr;
  CU_EXPECT_EQ(cuMipmappedArrayGetLevel(&none, m, 3), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMipmappedArrayGetLevel(nullptr, m, 0), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuMipmappedArrayGetLevel(&none, nullptr, 0), CUDA_ERROR_INVALID_HANDLE);
  // A level is not destroyed on its own.
  CU_EXPECT_EQ(cuArrayDestroy(l1), CUDA_ERROR_INVALID_VALUE);
  // Levels are arrays for copies: offset copies see the level's bytes.
  std::vector<float> in(16), out(16, -1);
  for (int i = 0; i < 16; ++i) in[i] = i * 0.5f;
  CU_ASSERT_OK(cuMemcpyHtoA(l1, 0, in.data(), 64));
  CU_EXPECT_EQ(cuMemcpyHtoA(l1, 4, in.data(), 64), CUDA_ERROR_INVALID_VALUE);  // past the level
  CU_ASSERT_OK(cuMemcpyAtoH(out.data(), l1, 0, 64));
  EXPECT_EQ(out, in);
  // Another context sees none of it.
  CUcontext other;
  CU_ASSERT_OK(cuCtxCreate(&other, nullptr, 0, 0));
  CU_EXPECT_EQ(cuMipmappedArrayGetLevel(&none, m, 0), CUDA_ERROR_INVALID_HANDLE);
  CU_EXPECT_EQ(cuMipmappedArrayDestroy(m), CUDA_ERROR_INVALID_HANDLE);
  CUDA_ARRAY3D_DESCRIPTOR got{};
  CU_EXPECT_EQ(cuArray3DGetDescriptor(&got, l1), CUDA_ERROR_INVALID_HANDLE);
  CUDA_RESOURCE_DESC res{};
  res.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
  res.res.mipmap.hMipmappedArray = m;
  CUDA_TEXTURE_DESC td{};
  td.flags = CU_TRSF_NORMALIZED_COORDINATES;
  CUtexObject t;
  CU_EXPECT_EQ(cuTexObjectCreate(&t, &res, &td, nullptr), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuCtxDestroy(other));
  CU_ASSERT_OK(cuCtxSetCurrent(ctx_));
  // Destroying the mipmapped array ends its levels' handles.
  CU_ASSERT_OK(cuMipmappedArrayDestroy(m));
  CU_EXPECT_EQ(cuArray3DGetDescriptor(&got, l1), CUDA_ERROR_INVALID_HANDLE);
  CU_EXPECT_EQ(cuArray3DGetDescriptor(&got, l0), CUDA_ERROR_INVALID_HANDLE);
  CU_EXPECT_EQ(cuMemcpyHtoA(l1, 0, in.data(), 4), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuArrayDestroy(l0), CUDA_ERROR_INVALID_HANDLE);
  CU_EXPECT_EQ(cuMipmappedArrayGetLevel(&none, m, 0), CUDA_ERROR_INVALID_HANDLE);
  CU_EXPECT_EQ(cuMipmappedArrayDestroy(m), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(MipmapTest, LevelsCopyAndServeAsSurfacesAndTextures) {
  // 2D levels through cuMemcpy2D both ways, a layered level through cuMemcpy3D.
  CUmipmappedArray m = Mipmap(Desc(8, 6, 0, CUDA_ARRAY3D_SURFACE_LDST), 3);
  const std::vector<Volume> v = PatternLevels(8, 6, 3);
  for (unsigned i = 0; i < 3; ++i) Put(Level(m, i), v[i]);
  for (unsigned i = 0; i < 3; ++i) {
    const Volume& lv = v[i];
    std::vector<float> back(lv.w * lv.h, -1);
    CUDA_MEMCPY2D c{};
    c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    c.srcArray = Level(m, i);
    c.dstMemoryType = CU_MEMORYTYPE_HOST;
    c.dstHost = back.data();
    c.dstPitch = lv.w * sizeof(float);
    c.WidthInBytes = lv.w * sizeof(float);
    c.Height = lv.h;
    CU_ASSERT_OK(cuMemcpy2D(&c));
    for (size_t k = 0; k < back.size(); ++k) EXPECT_EQ(back[k], lv.t[k][0]) << "level " << i;
    // A copy larger than the level is refused.
    c.Height = lv.h + 1;
    CU_EXPECT_EQ(cuMemcpy2D(&c), CUDA_ERROR_INVALID_VALUE);
  }
  CUmipmappedArray ml = Mipmap(Desc(4, 4, 3, CUDA_ARRAY3D_LAYERED), 2);
  const std::vector<Volume> vl = PatternLevels(4, 4, 2, 3);
  for (unsigned i = 0; i < 2; ++i) Put(Level(ml, i), vl[i]);
  std::vector<float> back(2 * 2 * 3, -1);
  CUDA_MEMCPY3D c3{};
  c3.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  c3.srcArray = Level(ml, 1);
  c3.dstMemoryType = CU_MEMORYTYPE_HOST;
  c3.dstHost = back.data();
  c3.dstPitch = 8;
  c3.dstHeight = 2;
  c3.WidthInBytes = 8;
  c3.Height = 2;
  c3.Depth = 3;
  CU_ASSERT_OK(cuMemcpy3D(&c3));
  for (size_t k = 0; k < back.size(); ++k) EXPECT_EQ(back[k], vl[1].t[k][0]);

  // Level 1 (4x3) as a surface: surface_scale writes 2 * in + x into level 1 of a second array.
  CUmipmappedArray m2 = Mipmap(Desc(8, 6, 0, CUDA_ARRAY3D_SURFACE_LDST), 2);
  CUDA_RESOURCE_DESC in_res{}, out_res{};
  in_res.resType = out_res.resType = CU_RESOURCE_TYPE_ARRAY;
  in_res.res.array.hArray = Level(m, 1);
  out_res.res.array.hArray = Level(m2, 1);
  CUsurfObject sin, sout;
  CU_ASSERT_OK(cuSurfObjectCreate(&sin, &in_res));
  CU_ASSERT_OK(cuSurfObjectCreate(&sout, &out_res));
  int w = 4, h = 3;
  void* args[] = {&sin, &sout, &w, &h};
  CU_ASSERT_OK(
      cuLaunchKernel(Function("surface_scale"), 1, 1, 1, 8, 8, 1, 0, nullptr, args, nullptr));
  CU_ASSERT_OK(cuCtxSynchronize());
  std::vector<float> got(12, -1);
  CU_ASSERT_OK(cuMemcpyAtoH(got.data(), Level(m2, 1), 0, 48));
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) EXPECT_EQ(got[y * w + x], 2 * v[1].at(x, y, 0)[0] + x);
  }
  CU_ASSERT_OK(cuSurfObjectDestroy(sin));
  CU_ASSERT_OK(cuSurfObjectDestroy(sout));
  // Without CUDA_ARRAY3D_SURFACE_LDST its levels are no surfaces.
  CUDA_RESOURCE_DESC plain_res{};
  plain_res.resType = CU_RESOURCE_TYPE_ARRAY;
  plain_res.res.array.hArray = Level(ml, 0);
  CUsurfObject s;
  CU_EXPECT_EQ(cuSurfObjectCreate(&s, &plain_res), CUDA_ERROR_INVALID_VALUE);
  // A level is an ordinary array for a texture object: tex2D reads level 2 itself.
  CUDA_RESOURCE_DESC level_res{};
  level_res.resType = CU_RESOURCE_TYPE_ARRAY;
  level_res.res.array.hArray = Level(m, 2);
  Sampler sp;
  CUtexObject t = Texture(level_res, sp);
  const std::vector<float> r = Lookup2D(t, {0.5f, 1.5f}, {0.5f, 0.5f});
  EXPECT_EQ(r[0], v[2].at(0, 0, 0)[0]);
  EXPECT_EQ(r[4], v[2].at(1, 0, 0)[0]);
  CU_ASSERT_OK(cuTexObjectDestroy(t));
}

TEST_F(MipmapTest, Tex2DLodPointAndLinearBetweenConstantLevels) {
  CUmipmappedArray m = ConstantLevels({10, 20, 40});
  const std::vector<float> lods = {0, 1, 2, 0.5f, 1.5f, 0.3f, 0.6f, 1.75f, -1, 5, NAN};
  // Point: the nearest level, halves down; linear: 8-bit weights between the two levels.
  const std::vector<float> point = {10, 20, 40, 10, 20, 10, 20, 40, 10, 40, 10};
  const std::vector<float> linear = {
      10, 20, 40, 15, 30, 10 + 10 * 77.f / 256, 10 + 10 * 154.f / 256, 35, 10, 40, 10};
  for (bool linear_mip : {false, true}) {
    for (bool linear_texels : {false, true}) {
      Sampler s;
      s.normalized = true;
      s.linear = linear_texels;  // constant levels: the same either way
      LodParams p;
      p.linear = linear_mip;
      p.max_clamp = 2;
      CUtexObject t = MipTexture(m, s, p);
      const std::vector<float> xs(lods.size(), 0.4f), ys(lods.size(), 0.7f);
      const std::vector<float> got = Lod2D(t, xs, ys, lods);
      for (size_t i = 0; i < lods.size(); ++i) {
        EXPECT_EQ(got[4 * i], (linear_mip ? linear : point)[i])
            << "lod " << lods[i] << " linear mip " << linear_mip;
        EXPECT_EQ(got[4 * i + 3], 1.0f);
      }
    }
  }
}

TEST_F(MipmapTest, Tex2DLodMatchesTheReferenceOnPatterns) {
  const int w = 16, h = 8, levels = 4;
  CUmipmappedArray m = Mipmap(Desc(w, h, 0), levels);
  const std::vector<Volume> v = PatternLevels(w, h, levels);
  for (int i = 0; i < levels; ++i) Put(Level(m, i), v[i]);
  const std::vector<float> lods = {0, 0.25f, 0.5f, 1, 1.3f, 1.5f, 2, 2.9f, 3, 7, -0.5f};
  std::vector<float> xs, ys, ls;
  for (float x : UnitCoordinates()) {
    for (float y : {0.03f, 0.31f, 0.5f, 0.77f, 1.04f}) {
      for (float l : lods) {
        xs.push_back(x);
        ys.push_back(y);
        ls.push_back(l);
      }
    }
  }
  for (int mode : {CU_TR_ADDRESS_MODE_CLAMP, CU_TR_ADDRESS_MODE_WRAP, CU_TR_ADDRESS_MODE_BORDER}) {
    for (bool linear_mip : {false, true}) {
      for (bool linear_texels : {false, true}) {
        Sampler s;
        s.normalized = true;
        s.linear = linear_texels;
        s.mode[0] = s.mode[1] = static_cast<CUaddress_mode>(mode);
        s.border[0] = -7;
        LodParams p;
        p.linear = linear_mip;
        CUtexObject t = MipTexture(m, s, p);
        const std::vector<float> got = Lod2D(t, xs, ys, ls);
        for (size_t i = 0; i < xs.size(); ++i) {
          const float c[2] = {xs[i], ys[i]};
          const Texel want = MipReference(v, 2, c, 0, s, ls[i], p);
          ASSERT_EQ(got[4 * i], want[0])
              << "(" << xs[i] << ", " << ys[i] << ") lod " << ls[i] << " mode " << mode
              << " linear mip " << linear_mip << " linear texels " << linear_texels;
        }
      }
    }
  }
}

TEST_F(MipmapTest, Tex2DGradSelectsLevelsFromGradients) {
  const int w = 16, levels = 4;  // 16, 8, 4, 2
  CUmipmappedArray m = Mipmap(Desc(w, w, 0), levels);
  const std::vector<Volume> v = PatternLevels(w, w, levels);
  for (int i = 0; i < levels; ++i) Put(Level(m, i), v[i]);
  const float u = 1.0f / w;  // one level-0 texel
  struct Grad {
    float dx[2], dy[2];
    float lod;  // log2 of the longer gradient in level-0 texels
  };
  const std::vector<Grad> grads = {
      {{u, 0}, {0, u}, 0},                        // one texel: level 0
      {{2 * u, 0}, {0, u}, 1},                    // the longer one counts
      {{0, u}, {0, 4 * u}, 2},                    // dPdy
      {{3 * u, 0}, {0, 0}, std::log2(3.0f)},      // between 1 and 2
      {{3 * u, 4 * u}, {0, 0}, std::log2(5.0f)},  // Euclidean length (5 texels)
      {{0, 0}, {0, 0}, -INFINITY},                // none: level 0
      {{100 * u, 0}, {0, 0}, std::log2(100.0f)},  // past the last level
      {{0.5f * u, 0}, {0, 0.25f * u}, -1},        // magnified: level 0
      {{-2 * u, 0}, {0, -2 * u}, 1},              // signs do not matter
  };
  std::vector<float> xs, ys;
  std::vector<std::array<float, 4>> gs;
  std::vector<float> want_lod;
  for (float x : {0.1f, 0.37f, 0.52f, 0.9f}) {
    for (float y : {0.2f, 0.66f}) {
      for (const Grad& g : grads) {
        xs.push_back(x);
        ys.push_back(y);
        gs.push_back({g.dx[0], g.dx[1], g.dy[0], g.dy[1]});
        want_lod.push_back(g.lod);
      }
    }
  }
  int n = static_cast<int>(xs.size());
  CUdeviceptr dx = Upload(xs), dy = Upload(ys), dg = Upload(gs), out = Alloc(16 * n);
  for (bool linear_mip : {false, true}) {
    Sampler s;
    s.normalized = true;
    s.linear = true;
    LodParams p;
    p.linear = linear_mip;
    CUtexObject t = MipTexture(m, s, p);
    CU_ASSERT_OK(Run("lookup_2d_grad", n, {&t, &dx, &dy, &dg, &out, &n}));
    const std::vector<float> got = Download<float>(out, 4 * n);
    for (int i = 0; i < n; ++i) {
      const float c[2] = {xs[i], ys[i]};
      const Texel want = MipReference(v, 2, c, 0, s, want_lod[i], p);
      EXPECT_EQ(got[4 * i], want[0]) << "gradient lod " << want_lod[i] << " at (" << xs[i] << ", "
                                     << ys[i] << ") linear mip " << linear_mip;
    }
  }
  // Known levels, as plain numbers: level 1 and level 2 at the centre of texel (1, 1) of level 2.
  Sampler s;
  s.normalized = true;
  CUtexObject t = MipTexture(m, s, LodParams{});
  const std::vector<float> x1 = {0.375f, 0.375f}, y1 = {0.375f, 0.375f};
  const std::vector<std::array<float, 4>> g1 = {{2 * u, 0, 0, 0}, {0, 0, 0, 4 * u}};
  CUdeviceptr px = Upload(x1), py = Upload(y1), pg = Upload(g1), pout = Alloc(32);
  int two = 2;
  CU_ASSERT_OK(Run("lookup_2d_grad", 2, {&t, &px, &py, &pg, &pout, &two}));
  const std::vector<float> known = Download<float>(pout, 8);
  EXPECT_EQ(known[0], 1000 + 10 * 3 + 3);  // level 1 (8x8): texel (3, 3)
  EXPECT_EQ(known[4], 2000 + 10 * 1 + 1);  // level 2 (4x4): texel (1, 1)
}

TEST_F(MipmapTest, BiasAndClampsApplyToEveryLookup) {
  CUmipmappedArray m = ConstantLevels({10, 20, 40});
  const std::vector<float> xs = {0.5f}, ys = {0.5f};
  struct Case {
    LodParams p;
    float lod;    // tex2DLod's level
    float want;   // tex2DLod's result
    float plain;  // tex2D's (LOD 0 + bias, clamped)
  };
  auto params = [](bool linear, float bias, float lo, float hi) {
    LodParams p;
    p.linear = linear;
    p.bias = bias;
    p.min_clamp = lo;
    p.max_clamp = hi;
    return p;
  };
  const std::vector<Case> cases = {
      {params(false, 1, 0, 2), 0, 20, 20},     // bias 1: level 1
      {params(false, 1, 0, 2), 1, 40, 20},     // lod 1 + 1
      {params(true, 0.5f, 0, 2), 0, 15, 15},   // bias 0.5, linear: halfway
      {params(true, -3, 0, 2), 2, 10, 10},     // a negative bias clamps at 0
      {params(false, 0, 0, 0), 2, 10, 10},     // CUDA's default max clamp 0: level 0
      {params(false, 0, 1, 2), 0, 20, 20},     // min clamp 1
      {params(true, 0, 1.25f, 2), 0, 25, 25},  // min clamp 1.25, linear
      {params(true, 0, 0, 1.5f), 2, 30, 10},   // max clamp 1.5
      {params(false, 0, 2, 1), 0, 20, 20},     // crossed clamps: the maximum wins
      {params(false, 5, 0, 2), 0, 40, 40},     // past the last level
  };
  for (const Case& c : cases) {
    Sampler s;
    s.normalized = true;
    CUtexObject t = MipTexture(m, s, c.p);
    const std::string what = "bias " + std::to_string(c.p.bias) + " clamps [" +
                             std::to_string(c.p.min_clamp) + ", " + std::to_string(c.p.max_clamp) +
                             "] lod " + std::to_string(c.lod);
    EXPECT_EQ(Lod2D(t, xs, ys, {c.lod})[0], c.want) << what;
    EXPECT_EQ(Lookup2D(t, xs, ys)[0], c.plain) << what;
  }
}

TEST_F(MipmapTest, QueriesViewsAndDescriptors) {
  CUmipmappedArray m = ConstantLevels({10, 20, 40});
  Sampler s;
  s.normalized = true;
  LodParams p;
  p.max_clamp = 2;
  CUtexObject t = MipTexture(m, s, p);
  CUdeviceptr out = Alloc(64);
  CU_ASSERT_OK(Run("query_levels", 1, {&t, &out}));
  std::vector<unsigned> q = Download<unsigned>(out, 9);
  EXPECT_EQ(q, (std::vector<unsigned>{3, 8, 8, 8, 4, 2, 4, 2, 0}));
  // The resource description names the mipmapped array.
  CUDA_RESOURCE_DESC rd{};
  CU_ASSERT_OK(cuTexObjectGetResourceDesc(&rd, t));
  EXPECT_EQ(rd.resType, CU_RESOURCE_TYPE_MIPMAPPED_ARRAY);
  EXPECT_EQ(rd.res.mipmap.hMipmappedArray, m);
  CUDA_TEXTURE_DESC td{};
  CU_ASSERT_OK(cuTexObjectGetTextureDesc(&td, t));
  EXPECT_EQ(td.maxMipmapLevelClamp, 2.0f);
  // A view of levels 1 and 2: level 1 becomes level 0 (the clamps count from it).
  CUDA_RESOURCE_VIEW_DESC view{};
  view.firstMipmapLevel = 1;
  view.lastMipmapLevel = 2;
  CUtexObject tv = MipTexture(m, s, p, &view);
  EXPECT_EQ(Lod2D(tv, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}, {0, 1, 2}),
            (std::vector<float>{20, 0, 0, 1, 40, 0, 0, 1, 40, 0, 0, 1}));
  CU_ASSERT_OK(Run("query_levels", 1, {&tv, &out}));
  q = Download<unsigned>(out, 9);
  EXPECT_EQ(q, (std::vector<unsigned>{2, 4, 4, 4, 2, 0, 2, 0, 0}));
  // A plain array has one level.
  CUarray plain = MakeArray(4, 4, 0, CU_AD_FORMAT_FLOAT, 1);
  CUtexObject tp = Texture(plain, s);
  CU_ASSERT_OK(Run("query_levels", 1, {&tp, &out}));
  q = Download<unsigned>(out, 9);
  EXPECT_EQ(q, (std::vector<unsigned>{1, 4, 4, 4, 0, 0, 0, 0, 0}));
  CU_ASSERT_OK(cuTexObjectDestroy(tp));
  CU_ASSERT_OK(cuArrayDestroy(plain));

  // Refused descriptors: unnormalized coordinates (CUDA requires them normalized), a bad
  // mipmap filter mode, views past the levels.
  CUDA_RESOURCE_DESC res{};
  res.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
  res.res.mipmap.hMipmappedArray = m;
  CUDA_TEXTURE_DESC bad{};
  CUtexObject none;
  CU_EXPECT_EQ(cuTexObjectCreate(&none, &res, &bad, nullptr), CUDA_ERROR_INVALID_VALUE);
  bad.flags = CU_TRSF_NORMALIZED_COORDINATES;
  bad.mipmapFilterMode = static_cast<CUfilter_mode>(7);
  CU_EXPECT_EQ(cuTexObjectCreate(&none, &res, &bad, nullptr), CUDA_ERROR_INVALID_VALUE);
  bad.mipmapFilterMode = CU_TR_FILTER_MODE_POINT;
  CUDA_RESOURCE_VIEW_DESC past{};
  past.lastMipmapLevel = 3;
  CU_EXPECT_EQ(cuTexObjectCreate(&none, &res, &bad, &past), CUDA_ERROR_INVALID_VALUE);
  past.firstMipmapLevel = 2;
  past.lastMipmapLevel = 1;
  CU_EXPECT_EQ(cuTexObjectCreate(&none, &res, &bad, &past), CUDA_ERROR_INVALID_VALUE);
  res.res.mipmap.hMipmappedArray = nullptr;
  CU_EXPECT_EQ(cuTexObjectCreate(&none, &res, &bad, nullptr), CUDA_ERROR_INVALID_VALUE);
  // Surfaces take arrays (a level), not mipmapped arrays.
  res.res.mipmap.hMipmappedArray = m;
  CU_EXPECT_EQ(cuSurfObjectCreate(&none, &res), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(MipmapTest, OneDimensionalLayeredAndThreeDimensional) {
  Sampler s;
  s.normalized = true;
  s.linear = true;
  for (bool linear_mip : {false, true}) {
    LodParams p;
    p.linear = linear_mip;
    // 1D: tex1DLod and tex1DGrad.
    {
      CUmipmappedArray m = Mipmap(Desc(16, 0, 0), 5);
      const std::vector<Volume> v = PatternLevels(16, 0, 5);
      for (int i = 0; i < 5; ++i) Put(Level(m, i), v[i]);
      CUtexObject t = MipTexture(m, s, p);
      std::vector<float> xs, ls;
      std::vector<std::array<float, 2>> gs;
      for (float x : UnitCoordinates()) {
        for (float l : {0.f, 0.7f, 1.f, 2.5f, 3.2f, 4.f}) {
          xs.push_back(x);
          ls.push_back(l);
          gs.push_back({std::exp2(l) / 16, 0});
        }
      }
      int n = static_cast<int>(xs.size());
      CUdeviceptr dx = Upload(xs), dl = Upload(ls), dg = Upload(gs), out = Alloc(16 * n);
      CU_ASSERT_OK(Run("lookup_1d_lod", n, {&t, &dx, &dl, &out, &n}));
      const std::vector<float> got = Download<float>(out, 4 * n);
      CU_ASSERT_OK(Run("lookup_1d_grad", n, {&t, &dx, &dg, &out, &n}));
      const std::vector<float> got_grad = Download<float>(out, 4 * n);
      for (int i = 0; i < n; ++i) {
        const Texel want = MipReference(v, 1, &xs[i], 0, s, ls[i], p);
        EXPECT_EQ(got[4 * i], want[0]) << "1D x " << xs[i] << " lod " << ls[i];
        const Texel want_grad = MipReference(v, 1, &xs[i], 0, s, std::log2(gs[i][0] * 16), p);
        EXPECT_EQ(got_grad[4 * i], want_grad[0]) << "1D grad x " << xs[i] << " lod " << ls[i];
      }
    }
    // 2D layered: tex2DLayeredLod and tex2DLayeredGrad; the layer picks the slice of each level.
    {
      const int layers = 3;
      CUmipmappedArray m = Mipmap(Desc(8, 8, layers, CUDA_ARRAY3D_LAYERED), 3);
      const std::vector<Volume> v = PatternLevels(8, 8, 3, layers);
      for (int i = 0; i < 3; ++i) Put(Level(m, i), v[i]);
      CUtexObject t = MipTexture(m, s, p);
      std::vector<float> xs, ys, ls;
      std::vector<int> layer;
      std::vector<std::array<float, 4>> gs;
      for (float x : {0.1f, 0.45f, 0.8f}) {
        for (int l = -1; l <= layers; ++l) {
          for (float lod : {0.f, 0.4f, 1.f, 1.6f, 2.f}) {
            xs.push_back(x);
            ys.push_back(1 - x);
            layer.push_back(l);
            ls.push_back(lod);
            gs.push_back({0, std::exp2(lod) / 8, 0, 0});
          }
        }
      }
      int n = static_cast<int>(xs.size());
      CUdeviceptr dx = Upload(xs), dy = Upload(ys), dl = Upload(ls), dly = Upload(layer),
                  dg = Upload(gs), out = Alloc(16 * n);
      CUtexObject tt = t;
      CU_ASSERT_OK(Run("lookup_2d_layered_lod", n, {&tt, &dx, &dy, &dly, &dl, &out, &n}));
      const std::vector<float> got = Download<float>(out, 4 * n);
      CU_ASSERT_OK(Run("lookup_2d_layered_grad", n, {&tt, &dx, &dy, &dly, &dg, &out, &n}));
      const std::vector<float> got_grad = Download<float>(out, 4 * n);
      for (int i = 0; i < n; ++i) {
        const float c[2] = {xs[i], ys[i]};
        const int slice = std::min(std::max(layer[i], 0), layers - 1);
        EXPECT_EQ(got[4 * i], MipReference(v, 2, c, slice, s, ls[i], p)[0])
            << "layer " << layer[i] << " lod " << ls[i];
        EXPECT_EQ(got_grad[4 * i], MipReference(v, 2, c, slice, s, std::log2(gs[i][1] * 8), p)[0])
            << "grad layer " << layer[i] << " lod " << ls[i];
      }
    }
    // 3D: tex3DLod and tex3DGrad; the depth halves with the levels.
    {
      CUmipmappedArray m = Mipmap(Desc(8, 4, 8), 4);
      std::vector<Volume> v;
      for (int i = 0; i < 4; ++i) {
        Volume lv;
        lv.w = Half(8, i);
        lv.h = Half(4, i);
        lv.d = Half(8, i);
        for (int z = 0; z < lv.d; ++z) {
          for (int y = 0; y < lv.h; ++y) {
            for (int x = 0; x < lv.w; ++x) {
              lv.t.push_back({1000.0f * i + 100.0f * z + 10.0f * y + x, 0, 0, 1});
            }
          }
        }
        Put(Level(m, i), lv);
        v.push_back(std::move(lv));
      }
      CUtexObject t = MipTexture(m, s, p);
      std::vector<float> xs, ys, zs, ls, gs;
      for (float x : {0.2f, 0.6f}) {
        for (float z : {0.1f, 0.55f, 0.95f}) {
          for (float lod : {0.f, 0.5f, 1.25f, 2.f, 3.f}) {
            xs.push_back(x);
            ys.push_back(0.4f);
            zs.push_back(z);
            ls.push_back(lod);
            // dPdx along z only: |dz * depth| = 2^lod.
            const float g[6] = {0, 0, std::exp2(lod) / 8, 0, 0, 0};
            gs.insert(gs.end(), g, g + 6);
          }
        }
      }
      int n = static_cast<int>(xs.size());
      CUdeviceptr dx = Upload(xs), dy = Upload(ys), dz = Upload(zs), dl = Upload(ls),
                  dg = Upload(gs), out = Alloc(16 * n);
      CUtexObject tt = t;
      CU_ASSERT_OK(Run("lookup_3d_lod", n, {&tt, &dx, &dy, &dz, &dl, &out, &n}));
      const std::vector<float> got = Download<float>(out, 4 * n);
      CU_ASSERT_OK(Run("lookup_3d_grad", n, {&tt, &dx, &dy, &dz, &dg, &out, &n}));
      const std::vector<float> got_grad = Download<float>(out, 4 * n);
      for (int i = 0; i < n; ++i) {
        const float c[3] = {xs[i], ys[i], zs[i]};
        EXPECT_EQ(got[4 * i], MipReference(v, 3, c, 0, s, ls[i], p)[0])
            << "3D z " << zs[i] << " lod " << ls[i];
        // The LOD the gradient gives: log2 of its length in level-0 texels.
        const float grad_lod = std::log2(gs[6 * i + 2] * 8);
        EXPECT_EQ(got_grad[4 * i], MipReference(v, 3, c, 0, s, grad_lod, p)[0])
            << "3D grad z " << zs[i] << " lod " << ls[i];
      }
    }
  }
}

TEST_F(MipmapTest, CubemapLodAndGrad) {
  // 8x8 faces, 3 levels; face f of level i (and layer l) holds 100 * l + 10 * i + f.
  for (bool layered : {false, true}) {
    const int layers = layered ? 2 : 1;
    CUmipmappedArray m = Mipmap(
        Desc(8, 8, 6 * layers, CUDA_ARRAY3D_CUBEMAP | (layered ? CUDA_ARRAY3D_LAYERED : 0)), 3);
    for (int i = 0; i < 3; ++i) {
      Volume v;
      v.w = v.h = Half(8, i);
      v.d = 6 * layers;
      for (int slice = 0; slice < v.d; ++slice) {
        for (int k = 0; k < v.w * v.h; ++k) {
          v.t.push_back({100.0f * (slice / 6) + 10.0f * i + slice % 6, 0, 0, 1});
        }
      }
      Put(Level(m, i), v);
    }
    Sampler s;
    s.normalized = true;
    LodParams p;
    CUtexObject t = MipTexture(m, s, p);
    // Directions of each face, levels, and the expected value (layer 1 adds 100).
    struct Dir {
      float x, y, z;
      int face;
    };
    const Dir dirs[] = {{1, 0.2f, -0.3f, 0},  {-1, 0.1f, 0.4f, 1}, {0.3f, 1, 0.2f, 2},
                        {0.2f, -1, -0.1f, 3}, {0.1f, -0.2f, 1, 4}, {-0.4f, 0.3f, -1, 5}};
    std::vector<float> xs, ys, zs, ls;
    std::vector<int> layer;
    std::vector<float> want;
    for (const Dir& d : dirs) {
      for (float lod : {0.f, 0.5f, 0.7f, 1.f, 2.f, 9.f}) {
        xs.push_back(d.x);
        ys.push_back(d.y);
        zs.push_back(d.z);
        ls.push_back(lod);
        layer.push_back(layers - 1);
        const int level =
            lod <= 0.5f ? 0 : std::min(static_cast<int>(std::ceil(lod + 0.5f)) - 1, 2);
        want.push_back(100.0f * (layers - 1) + 10.0f * level + d.face);
      }
    }
    int n = static_cast<int>(xs.size());
    CUdeviceptr dx = Upload(xs), dy = Upload(ys), dz = Upload(zs), dl = Upload(ls),
                dly = Upload(layer), out = Alloc(16 * n);
    CUtexObject tt = t;
    if (layered) {
      CU_ASSERT_OK(Run("lookup_cube_layered_lod", n, {&tt, &dx, &dy, &dz, &dly, &dl, &out, &n}));
    } else {
      CU_ASSERT_OK(Run("lookup_cube_lod", n, {&tt, &dx, &dy, &dz, &dl, &out, &n}));
    }
    const std::vector<float> got = Download<float>(out, 4 * n);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(got[4 * i], want[i]) << "direction (" << xs[i] << ", " << ys[i] << ", " << zs[i]
                                     << ") lod " << ls[i] << " layered " << layered;
    }
    if (layered) continue;
    // texCubemapGrad: the gradients of the face coordinates. On face +x at (1, y, z), u =
    // (-z / x + 1) / 2: a change of z by dz moves u by dz / 2 (times 8 texels), a change of x by
    // dx moves it by z * dx / 2.
    struct GradCase {
      float p[3], dx[3], dy[3];
      int level;
    };
    const GradCase cases[] = {
        {{1, 0, 0}, {0, 0, 0.25f}, {0, 0, 0}, 0},    // 1 texel
        {{1, 0, 0}, {0, 0, 0.5f}, {0, 0, 0}, 1},     // 2 texels
        {{1, 0, 0}, {0, 0, 0}, {0, 1, 0}, 2},        // 4 texels along v
        {{1, 0, 0.5f}, {0.5f, 0, 0}, {0, 0, 0}, 0},  // through the major axis: 1 texel
        {{1, 0, 0.5f}, {1, 0, 0}, {0, 0, 0}, 1},     // 2 texels
        {{0, 0, -2}, {0, 1, 0}, {0, 0, 0}, 1},       // face -z, |ma| 2: 2 texels
        {{1, 0, 0}, {0, 0, 0}, {0, 0, 0}, 0},        // no gradient
    };
    std::vector<float> gx, gy, gz, gg;
    for (const GradCase& c : cases) {
      gx.push_back(c.p[0]);
      gy.push_back(c.p[1]);
      gz.push_back(c.p[2]);
      gg.insert(gg.end(), c.dx, c.dx + 3);
      gg.insert(gg.end(), c.dy, c.dy + 3);
    }
    int gn = static_cast<int>(gx.size());
    CUdeviceptr px = Upload(gx), py = Upload(gy), pz = Upload(gz), pg = Upload(gg),
                pout = Alloc(16 * gn);
    CU_ASSERT_OK(Run("lookup_cube_grad", gn, {&tt, &px, &py, &pz, &pg, &pout, &gn}));
    const std::vector<float> gout = Download<float>(pout, 4 * gn);
    for (int i = 0; i < gn; ++i) {
      const int face = i == 5 ? 5 : 0;
      EXPECT_EQ(gout[4 * i], 10.0f * cases[i].level + face) << "cube gradient case " << i;
    }
  }
}

TEST_F(MipmapTest, IntegerLevelFetchAndGatherReadTheirLevels) {
  const std::vector<Volume> v = PatternLevels(8, 8, 3);
  CUmipmappedArray m = Mipmap(Desc(8, 8, 0, CUDA_ARRAY3D_TEXTURE_GATHER), 3);
  for (int i = 0; i < 3; ++i) Put(Level(m, i), v[i]);
  Sampler s;
  s.normalized = true;
  LodParams p;
  p.bias = 1;  // tld4 ignores it (level 0); tex.level adds it to the integer level
  p.max_clamp = 2;
  CUtexObject t = MipTexture(m, s, p);
  // tex.level.2d.v4.f32.s32: texel (x, y) of level lod + 1 (clamped).
  const std::vector<int> xs = {0, 1, 3, 1, 0, 9}, ys = {0, 2, 1, 1, 0, 0}, ls = {0, 0, 0, 1, 5, 0};
  int n = static_cast<int>(xs.size());
  CUdeviceptr dx = Upload(xs), dy = Upload(ys), dl = Upload(ls), out = Alloc(16 * n);
  CUtexObject tt = t;
  CU_ASSERT_OK(Run("fetch_2d_level", n, {&tt, &dx, &dy, &dl, &out, &n}));
  const std::vector<float> got = Download<float>(out, 4 * n);
  for (int i = 0; i < n; ++i) {
    const int level = std::min(ls[i] + 1, 2);
    const Volume& lv = v[level];
    const int x = std::min(xs[i], lv.w - 1), y = std::min(ys[i], lv.h - 1);  // clamp
    EXPECT_EQ(got[4 * i], lv.at(x, y, 0)[0])
        << "texel (" << xs[i] << ", " << ys[i] << ") lod " << ls[i];
  }
  // tld4 gathers from level 0 whatever the bias.
  const std::vector<float> gx = {0.3f}, gy = {0.55f};
  CUdeviceptr px = Upload(gx), py = Upload(gy), pout = Alloc(64);
  int one = 1;
  CU_ASSERT_OK(Run("gather_2d", 1, {&tt, &px, &py, &pout, &one}));
  const std::vector<float> g = Download<float>(pout, 4);
  // (0.3, 0.55) * 8 - 0.5 = (1.9, 3.9): texels i 1..2, j 3..4, in the order (i0, j1), (i1, j1),
  // (i1, j0), (i0, j0).
  EXPECT_EQ(g, (std::vector<float>{41, 42, 32, 31}));
}

TEST_F(MipmapTest, DestroyedMipmappedArrayFaultsItsTextures) {
  CUmipmappedArray m;
  const CUDA_ARRAY3D_DESCRIPTOR d = Desc(4, 4, 0);
  CU_ASSERT_OK(cuMipmappedArrayCreate(&m, &d, 2));
  Sampler s;
  s.normalized = true;
  CUtexObject t = MipTexture(m, s, LodParams{});
  std::vector<float> r = Lod2D(t, {0.5f}, {0.5f}, {1});
  EXPECT_EQ(r[3], 1.0f);  // readable while it lives
  CU_ASSERT_OK(cuMipmappedArrayDestroy(m));
  const std::vector<float> xs = {0.5f}, ys = {0.5f}, ls = {1};
  int n = 1;
  CUdeviceptr dx = Upload(xs), dy = Upload(ys), dl = Upload(ls), out = Alloc(16);
  CUtexObject tt = t;
  void* args[] = {&tt, &dx, &dy, &dl, &out, &n};
  CU_ASSERT_OK(
      cuLaunchKernel(Function("lookup_2d_lod"), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  allocations_.clear();
}

// Forms softgpu does not implement fail at launch naming the instruction; the implemented ones
// next to them run.
TEST(MipmapUnsupportedTest, UnsupportedLodFormsFailAtLaunch) {
  CU_ASSERT_OK(cuInit(0));
  CUcontext ctx;
  CU_ASSERT_OK(cuCtxCreate(&ctx, nullptr, 0, 0));
  const char* ptx = R"(
.version 8.0
.target sm_75
.address_size 64
.visible .entry grad_int(.param .u64 t, .param .u64 out) {
  .reg .b32 %r<8>;
  .reg .f32 %f<8>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [t];
  ld.param.u64 %rd2, [out];
  mov.b32 %r5, 0;
  mov.f32 %f5, 0f00000000;
  tex.grad.2d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [%rd1, {%r5, %r5}], {%f5, %f5}, {%f5, %f5};
  st.global.f32 [%rd2], %f1;
  ret;
}
.visible .entry level_offset(.param .u64 t, .param .u64 out) {
  .reg .b32 %r<8>;
  .reg .f32 %f<8>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [t];
  ld.param.u64 %rd2, [out];
  mov.b32 %r5, 0;
  mov.f32 %f5, 0f3F000000;
  tex.level.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f5, %f5}], %f5, {%r5, %r5};
  st.global.f32 [%rd2], %f1;
  ret;
}
.visible .entry level_query_levels(.param .u64 t, .param .u64 out) {
  .reg .b32 %r<8>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [t];
  ld.param.u64 %rd2, [out];
  mov.b32 %r5, 1;
  txq.level.num_mipmap_levels.b32 %r1, [%rd1], %r5;
  st.global.u32 [%rd2], %r1;
  ret;
}
.visible .entry level_ok(.param .u64 t, .param .u64 out) {
  .reg .f32 %f<8>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [t];
  ld.param.u64 %rd2, [out];
  mov.f32 %f5, 0f3F000000;
  mov.f32 %f6, 0f3F800000;
  tex.level.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f5, %f5}], %f6;
  st.global.f32 [%rd2], %f1;
  ret;
}
)";
  CUmodule mod;
  CU_ASSERT_OK(cuModuleLoadData(&mod, ptx));
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = 4;
  d.Height = 4;
  d.Format = CU_AD_FORMAT_FLOAT;
  d.NumChannels = 1;
  CUmipmappedArray m;
  CU_ASSERT_OK(cuMipmappedArrayCreate(&m, &d, 2));
  CUarray l1;
  CU_ASSERT_OK(cuMipmappedArrayGetLevel(&l1, m, 1));
  const float level1[4] = {7, 7, 7, 7};
  CU_ASSERT_OK(cuMemcpyHtoA(l1, 0, level1, sizeof level1));
  CUDA_RESOURCE_DESC res{};
  res.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
  res.res.mipmap.hMipmappedArray = m;
  CUDA_TEXTURE_DESC td{};
  td.flags = CU_TRSF_NORMALIZED_COORDINATES;
  td.maxMipmapLevelClamp = 1;
  CUtexObject t;
  CU_ASSERT_OK(cuTexObjectCreate(&t, &res, &td, nullptr));
  CUdeviceptr out;
  CU_ASSERT_OK(cuMemAlloc(&out, 16));
  void* args[] = {&t, &out};
  for (const char* name : {"grad_int", "level_offset", "level_query_levels"}) {
    CUfunction f;
    CU_ASSERT_OK(cuModuleGetFunction(&f, mod, name));
    CU_EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr),
                 CUDA_ERROR_NOT_SUPPORTED);
  }
  CUfunction f;
  CU_ASSERT_OK(cuModuleGetFunction(&f, mod, "level_ok"));
  CU_ASSERT_OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  float got = 0;
  CU_ASSERT_OK(cuMemcpyDtoH(&got, out, 4));
  EXPECT_EQ(got, 7.0f);
  CU_ASSERT_OK(cuCtxDestroy(ctx));
}

}  // namespace
