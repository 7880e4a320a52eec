// The texture tests' shared parts: a CPU model of the texture unit (Reference) and a fixture
// owning a context with kernels/texture_kernels.cu loaded, with helpers for device buffers,
// arrays and texture objects. Used by texture_test.cc and mipmap_test.cc.
#pragma once

#include <cuda.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/unit/softgpu/test_util.h"

namespace softgpu_test {

using Texel = std::array<float, 4>;

// A CPU model of the texture unit for float results: POINT = floor, LINEAR = weights with 8
// fractional bits, texel centres at i + 0.5, every address mode.
struct Sampler {
  bool normalized = false;
  bool linear = false;
  CUaddress_mode mode[3] = {CU_TR_ADDRESS_MODE_CLAMP, CU_TR_ADDRESS_MODE_CLAMP,
                            CU_TR_ADDRESS_MODE_CLAMP};
  float border[4] = {0, 0, 0, 0};
};

struct Volume {
  int w = 1, h = 1, d = 1;
  std::vector<Texel> t;  // x fastest
  const Texel& at(int x, int y, int z) const { return t[(static_cast<size_t>(z) * h + y) * w + x]; }
};

inline Texel Reference(const Volume& v, int dims, const float* coords, int slice,
                       const Sampler& s) {
  const int n[3] = {v.w, v.h, v.d};
  auto texel = [&](const int* idx) -> Texel {
    int a[3] = {0, 0, slice};
    for (int d = 0; d < dims; ++d) {
      int i = idx[d];
      CUaddress_mode mode = s.mode[d];
      if (!s.normalized && (mode == CU_TR_ADDRESS_MODE_WRAP || mode == CU_TR_ADDRESS_MODE_MIRROR)) {
        mode = CU_TR_ADDRESS_MODE_CLAMP;
      }
      switch (mode) {
        case CU_TR_ADDRESS_MODE_WRAP:
          i = ((i % n[d]) + n[d]) % n[d];
          break;
        case CU_TR_ADDRESS_MODE_MIRROR: {
          const int p = 2 * n[d];
          i = ((i % p) + p) % p;
          if (i >= n[d]) i = p - 1 - i;
          break;
        }
        case CU_TR_ADDRESS_MODE_BORDER:
          if (i < 0 || i >= n[d]) return {s.border[0], s.border[1], s.border[2], s.border[3]};
          break;
        default:
          i = std::min(std::max(i, 0), n[d] - 1);
          break;
      }
      a[d] = i;
    }
    return v.at(a[0], a[1], a[2]);
  };
  float c[3];
  for (int d = 0; d < dims; ++d) c[d] = s.normalized ? coords[d] * n[d] : coords[d];
  if (!s.linear) {
    int idx[3];
    for (int d = 0; d < dims; ++d) idx[d] = static_cast<int>(std::floor(c[d]));
    return texel(idx);
  }
  int i0[3];
  float a[3];
  for (int d = 0; d < dims; ++d) {
    const float t = c[d] - 0.5f;
    i0[d] = static_cast<int>(std::floor(t));
    a[d] = std::nearbyint((t - std::floor(t)) * 256.0f) / 256.0f;
  }
  Texel out{0, 0, 0, 0};
  for (int corner = 0; corner < (1 << dims); ++corner) {
    int idx[3];
    float w = 1;
    for (int d = 0; d < dims; ++d) {
      const int up = (corner >> d) & 1;
      idx[d] = i0[d] + up;
      w *= up ? a[d] : 1 - a[d];
    }
    const Texel t = texel(idx);
    for (int k = 0; k < 4; ++k) out[k] += w * t[k];
  }
  return out;
}

inline void ExpectNear(const Texel& want, const float* got, const std::string& what) {
  for (int k = 0; k < 4; ++k) {
    EXPECT_NEAR(got[k], want[k], 1e-4f) << what << " component " << k;
  }
}

class TextureFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ptx_ = KernelFile("texture_kernels.ptx");
    if (ptx_.empty()) GTEST_SKIP() << "texture kernels were not built (no nvcc)";
    CU_ASSERT_OK(cuInit(0));
    CU_ASSERT_OK(cuCtxCreate(&ctx_, nullptr, 0, 0));
    CU_ASSERT_OK(cuModuleLoadData(&module_, ptx_.c_str()));
  }
  void TearDown() override {
    for (CUdeviceptr p : allocations_) cuMemFree(p);
    if (ctx_ != nullptr) {
      EXPECT_EQ(cuCtxDestroy(ctx_), CUDA_SUCCESS);
    }
  }

  CUfunction Function(const char* name) {
    CUfunction f = nullptr;
    EXPECT_EQ(cuModuleGetFunction(&f, module_, name), CUDA_SUCCESS) << name;
    return f;
  }
  template <typename T>
  CUdeviceptr Upload(const std::vector<T>& host) {
    CUdeviceptr d = 0;
    EXPECT_EQ(cuMemAlloc(&d, std::max<size_t>(host.size(), 1) * sizeof(T)), CUDA_SUCCESS);
    if (!host.empty()) {
      EXPECT_EQ(cuMemcpyHtoD(d, host.data(), host.size() * sizeof(T)), CUDA_SUCCESS);
    }
    allocations_.push_back(d);
    return d;
  }
  CUdeviceptr Alloc(size_t bytes) {
    CUdeviceptr d = 0;
    EXPECT_EQ(cuMemAlloc(&d, bytes), CUDA_SUCCESS);
    allocations_.push_back(d);
    return d;
  }
  template <typename T>
  std::vector<T> Download(CUdeviceptr d, size_t count) {
    std::vector<T> host(count);
    EXPECT_EQ(cuMemcpyDtoH(host.data(), d, count * sizeof(T)), CUDA_SUCCESS);
    return host;
  }
  // Runs `name` over n threads (1D grid) and synchronizes.
  CUresult Run(const char* name, int n, std::vector<void*> args) {
    const unsigned block = 64;
    const unsigned grid = (static_cast<unsigned>(n) + block - 1) / block;
    CUresult r =
        cuLaunchKernel(Function(name), grid, 1, 1, block, 1, 1, 0, nullptr, args.data(), nullptr);
    if (r != CUDA_SUCCESS) return r;
    return cuCtxSynchronize();
  }

  CUarray MakeArray(size_t w, size_t h, size_t d, CUarray_format f, unsigned channels,
                    unsigned flags = 0) {
    CUDA_ARRAY3D_DESCRIPTOR desc{};
    desc.Width = w;
    desc.Height = h;
    desc.Depth = d;
    desc.Format = f;
    desc.NumChannels = channels;
    desc.Flags = flags;
    CUarray a = nullptr;
    EXPECT_EQ(cuArray3DCreate(&a, &desc), CUDA_SUCCESS);
    return a;
  }
  // Copies `bytes` (rows of w * element bytes, h rows per slice, d slices) into the array.
  void Fill(CUarray a, const void* host, size_t row_bytes, size_t rows, size_t slices) {
    CUDA_MEMCPY3D c{};
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = host;
    c.srcPitch = row_bytes;
    c.srcHeight = rows;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    c.dstArray = a;
    c.WidthInBytes = row_bytes;
    c.Height = rows;
    c.Depth = slices;
    EXPECT_EQ(cuMemcpy3D(&c), CUDA_SUCCESS);
  }
  CUtexObject Texture(CUarray a, const Sampler& s, unsigned extra_flags = 0) {
    CUDA_RESOURCE_DESC res{};
    res.resType = CU_RESOURCE_TYPE_ARRAY;
    res.res.array.hArray = a;
    return Texture(res, s, extra_flags);
  }
  CUtexObject Texture(const CUDA_RESOURCE_DESC& res, const Sampler& s, unsigned extra_flags = 0) {
    CUDA_TEXTURE_DESC td{};
    for (int d = 0; d < 3; ++d) td.addressMode[d] = s.mode[d];
    td.filterMode = s.linear ? CU_TR_FILTER_MODE_LINEAR : CU_TR_FILTER_MODE_POINT;
    td.flags = (s.normalized ? CU_TRSF_NORMALIZED_COORDINATES : 0) | extra_flags;
    for (int k = 0; k < 4; ++k) td.borderColor[k] = s.border[k];
    CUtexObject t = 0;
    EXPECT_EQ(cuTexObjectCreate(&t, &res, &td, nullptr), CUDA_SUCCESS);
    return t;
  }
  // Results of lookup_2d for the coordinate lists.
  std::vector<float> Lookup2D(CUtexObject t, const std::vector<float>& x,
                              const std::vector<float>& y) {
    const int n = static_cast<int>(x.size());
    CUdeviceptr dx = Upload(x), dy = Upload(y), out = Alloc(16 * x.size());
    EXPECT_EQ(Run("lookup_2d", n, {&t, &dx, &dy, &out, const_cast<int*>(&n)}), CUDA_SUCCESS);
    return Download<float>(out, 4 * x.size());
  }

  std::string ptx_;
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  std::vector<CUdeviceptr> allocations_;
};

}  // namespace softgpu_test
