// Warp-level matrix instructions (mma.sync, wmma): results against a host reference, and the
// refusals (a part of a warp, shapes softgpu does not run). Built three times, over the kernels'
// PTX for compute_75, compute_90 and the newest architecture (MATRIX_PTX_FILE, MATRIX_ARCH).
#include <cuda.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <vector>

#include "softgpu/half.h"
#include "test_util.h"

#ifndef MATRIX_PTX_FILE
#define MATRIX_PTX_FILE "matrix_kernels.ptx"
#endif
#ifndef MATRIX_ARCH
#define MATRIX_ARCH 90
#endif

namespace {

// Skips a test whose kernel this build's PTX does not carry.
#define REQUIRE_ARCH(arch)                   \
  if (MATRIX_ARCH < (arch))                  \
  GTEST_SKIP() << "needs compute_" #arch     \
                  " PTX; these kernels are " \
                  "compute_"                 \
               << MATRIX_ARCH

class MatrixTest : public softgpu_test::KernelTest {
 protected:
  const char* PtxFile() const override { return MATRIX_PTX_FILE; }
  // D = A (16xK f16) * B (Kx8 f16) + C (f32), all row-major, by `f`, against the host.
  void CheckMmaHalf(CUfunction f, int k_size);
};

// Small integers make every product and sum exact in f16 inputs and f32 sums.
int Small(int i, int salt) { return (i * 7 + salt * 3) % 9 - 4; }

TEST_F(MatrixTest, WmmaHalfMultiplyAccumulate) {
  std::vector<uint16_t> a(256), b(256);
  std::vector<float> c(256);
  for (int i = 0; i < 256; ++i) {
    a[i] = softgpu::FloatToHalf(static_cast<float>(Small(i, 1)));
    b[i] = softgpu::FloatToHalf(static_cast<float>(Small(i, 2)));
    c[i] = static_cast<float>(Small(i, 3));
  }
  CUdeviceptr da = Upload(a), db = Upload(b), dc = Upload(c), dd;
  CU_ASSERT_OK(cuMemAlloc(&dd, 256 * sizeof(float)));
  CU_ASSERT_OK(Launch(Function("wmma_f16"), 1, 32, {&da, &db, &dc, &dd}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<float> d = Download<float>(dd, 256);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      float want = 2 * c[i * 16 + j];  // C row-major, doubled element-wise
      for (int k = 0; k < 16; ++k) {
        want += softgpu::HalfToFloat(a[i * 16 + k]) * softgpu::HalfToFloat(b[j * 16 + k]);
      }
      ASSERT_EQ(d[j * 16 + i], want) << i << "," << j;  // D stored column-major
    }
  }
}

TEST_F(MatrixTest, WmmaInt8WithALeadingDimension) {
  std::vector<int8_t> a(256), b(256);
  for (int i = 0; i < 256; ++i) {
    a[i] = static_cast<int8_t>(Small(i, 1) * 30);
    b[i] = static_cast<int8_t>(Small(i, 5) * 31);
  }
  CUdeviceptr da = Upload(a), db = Upload(b), dd;
  CU_ASSERT_OK(cuMemAlloc(&dd, 16 * 24 * sizeof(int)));
  CU_ASSERT_OK(cuMemsetD32(dd, 0x7eadbeef, 16 * 24));
  CU_ASSERT_OK(Launch(Function("wmma_s8"), 1, 32, {&da, &db, &dd}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<int> d = Download<int>(dd, 16 * 24);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 24; ++j) {
      if (j >= 16) {
        ASSERT_EQ(d[i * 24 + j], 0x7eadbeef) << "padding written at " << i << "," << j;
        continue;
      }
      int want = 0;
      for (int k = 0; k < 16; ++k) want += a[i * 16 + k] * b[k * 16 + j];
      ASSERT_EQ(d[i * 24 + j], want) << i << "," << j;
    }
  }
}

void MatrixTest::CheckMmaHalf(CUfunction f, int k_size) {
  std::vector<uint16_t> a(16 * k_size), b(k_size * 8);
  std::vector<float> c(16 * 8);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = softgpu::FloatToHalf(static_cast<float>(Small(static_cast<int>(i), 2)));
  }
  for (size_t i = 0; i < b.size(); ++i) {
    b[i] = softgpu::FloatToHalf(static_cast<float>(Small(static_cast<int>(i), 4)));
  }
  for (int i = 0; i < 128; ++i) c[i] = static_cast<float>(i);
  CUdeviceptr da = Upload(a), db = Upload(b), dc = Upload(c), dd;
  CU_ASSERT_OK(cuMemAlloc(&dd, 128 * sizeof(float)));
  CU_ASSERT_OK(Launch(f, 1, 32, {&da, &db, &dc, &dd}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<float> d = Download<float>(dd, 128);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 8; ++j) {
      float want = c[i * 8 + j];
      for (int k = 0; k < k_size; ++k) {
        want += softgpu::HalfToFloat(a[i * k_size + k]) * softgpu::HalfToFloat(b[k * 8 + j]);
      }
      ASSERT_EQ(d[i * 8 + j], want) << i << "," << j;
    }
  }
}

TEST_F(MatrixTest, MmaM16n8k8Half) { CheckMmaHalf(Function("mma_m16n8k8_f16"), 8); }

TEST_F(MatrixTest, MmaM16n8k16Half) {
  REQUIRE_ARCH(80);
  CheckMmaHalf(Function("mma_m16n8k16_f16"), 16);
}

TEST_F(MatrixTest, MmaM8n8k4Double) {
  REQUIRE_ARCH(80);
  std::vector<double> a(32), b(32), c(64);
  for (int i = 0; i < 32; ++i) {
    a[i] = 0.5 * Small(i, 1) + 0.125;
    b[i] = 0.25 * Small(i, 6) - 1.0 / 3;
  }
  for (int i = 0; i < 64; ++i) c[i] = 1.0 / (i + 1);
  CUdeviceptr da = Upload(a), db = Upload(b), dc = Upload(c), dd;
  CU_ASSERT_OK(cuMemAlloc(&dd, 64 * sizeof(double)));
  CU_ASSERT_OK(Launch(Function("mma_m8n8k4_f64"), 1, 32, {&da, &db, &dc, &dd}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<double> d = Download<double>(dd, 64);
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) {
      double want = c[i * 8 + j];
      for (int k = 0; k < 4; ++k) want = std::fma(a[i * 4 + k], b[k * 8 + j], want);
      ASSERT_EQ(d[i * 8 + j], want) << i << "," << j;
    }
  }
}

TEST_F(MatrixTest, MmaM16n8k8Tf32IgnoresTheLowMantissaBits) {
  REQUIRE_ARCH(80);
  std::vector<float> a(128), b(64), c(128);
  for (int i = 0; i < 128; ++i) {
    a[i] = static_cast<float>(Small(i, 3));
    c[i] = static_cast<float>(-i);
  }
  // 1 + 2^-20 rounds to 1 in tf32 (10 mantissa bits): the product must use 1.
  for (int i = 0; i < 64; ++i) b[i] = static_cast<float>(Small(i, 7)) * (1.0f + 0x1p-20f);
  CUdeviceptr da = Upload(a), db = Upload(b), dc = Upload(c), dd;
  CU_ASSERT_OK(cuMemAlloc(&dd, 128 * sizeof(float)));
  CU_ASSERT_OK(Launch(Function("mma_m16n8k8_tf32"), 1, 32, {&da, &db, &dc, &dd}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<float> d = Download<float>(dd, 128);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 8; ++j) {
      float want = c[i * 8 + j];
      for (int k = 0; k < 8; ++k) want += a[i * 8 + k] * static_cast<float>(Small(k * 8 + j, 7));
      ASSERT_EQ(d[i * 8 + j], want) << i << "," << j;
    }
  }
}

TEST_F(MatrixTest, MmaM16n8k32Int8Saturates) {
  REQUIRE_ARCH(80);
  std::vector<int8_t> a(16 * 32);
  std::vector<uint8_t> b(32 * 8);
  std::vector<int> c(16 * 8);
  for (int i = 0; i < 512; ++i) a[i] = static_cast<int8_t>(Small(i, 1) * 31);
  for (int i = 0; i < 256; ++i) b[i] = static_cast<uint8_t>((i * 37) % 256);
  for (int i = 0; i < 128; ++i) c[i] = i * 1000;
  // Element (0, 5) is pushed past the int32 range in its products' direction: .satfinite clamps.
  int64_t products = 0;
  for (int k = 0; k < 32; ++k) products += a[k] * b[k * 8 + 5];
  ASSERT_GT(std::llabs(products), 5);
  c[5] = products > 0 ? INT32_MAX - 5 : INT32_MIN + 5;
  CUdeviceptr da = Upload(a), db = Upload(b), dc = Upload(c), dd;
  CU_ASSERT_OK(cuMemAlloc(&dd, 128 * sizeof(int)));
  CU_ASSERT_OK(Launch(Function("mma_m16n8k32_s8"), 1, 32, {&da, &db, &dc, &dd}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<int> d = Download<int>(dd, 128);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 8; ++j) {
      int64_t want = c[i * 8 + j];
      for (int k = 0; k < 32; ++k) want += a[i * 32 + k] * b[k * 8 + j];
      want = std::min<int64_t>(std::max<int64_t>(want, INT32_MIN), INT32_MAX);
      ASSERT_EQ(d[i * 8 + j], want) << i << "," << j;
    }
  }
  ASSERT_EQ(d[5], products > 0 ? INT32_MAX : INT32_MIN);
}

TEST_F(MatrixTest, LdmatrixStmatrixAndMovmatrixPlaceElementsAsTheIsaSays) {
  std::vector<uint16_t> in(32 * 8);
  for (int i = 0; i < 256; ++i) in[i] = static_cast<uint16_t>(1000 + i);
  CUdeviceptr din = Upload(in), dout, dstored;
  CU_ASSERT_OK(cuMemAlloc(&dout, 288 * sizeof(uint32_t)));
  CU_ASSERT_OK(cuMemAlloc(&dstored, 256 * sizeof(uint16_t)));
  CU_ASSERT_OK(Launch(Function("fragment_moves"), 1, 32, {&din, &dout, &dstored}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<uint32_t> out = Download<uint32_t>(dout, 288);
  auto element = [&](int matrix, int row, int col) -> uint32_t {
    return in[(8 * matrix + row) * 8 + col];
  };
  for (int i = 0; i < 4; ++i) {
    for (int t = 0; t < 32; ++t) {
      // Lane t holds row t/4, columns 2(t%4) and 2(t%4)+1 (low half first).
      const uint32_t plain = element(i, t / 4, 2 * (t % 4)) | element(i, t / 4, 2 * (t % 4) + 1)
                                                                  << 16;
      // .trans: the same places of the transposed matrix.
      const uint32_t trans = element(i, 2 * (t % 4), t / 4) | element(i, 2 * (t % 4) + 1, t / 4)
                                                                  << 16;
      ASSERT_EQ(out[i * 32 + t], plain) << "matrix " << i << " lane " << t;
      ASSERT_EQ(out[128 + i * 32 + t], trans) << "matrix " << i << " lane " << t;
      if (i == 0) ASSERT_EQ(out[256 + t], trans) << "movmatrix lane " << t;
    }
  }
  if (MATRIX_ARCH >= 90)
    EXPECT_EQ(Download<uint16_t>(dstored, 256), in);  // stmatrix undoes ldmatrix
}

TEST_F(MatrixTest, PartOfAWarpIsRefused) {
  REQUIRE_ARCH(80);
  std::vector<double> zeros(64, 0);
  CUdeviceptr a = Upload(zeros), d;
  CU_ASSERT_OK(cuMemAlloc(&d, 64 * sizeof(double)));
  testing::internal::CaptureStderr();
  CU_ASSERT_OK(Launch(Function("mma_m8n8k4_f64"), 1, 16, {&a, &a, &a, &d}));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_NOT_SUPPORTED);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("every lane must take part"), std::string::npos) << err;
}

TEST_F(MatrixTest, ShapesSoftgpuDoesNotRunAreNamed) {
  // Volta's m8n8k4 with .f16 (four matrices per warp) is not implemented: named at launch.
  const char* ptx = R"(
.version 8.0
.target sm_80
.address_size 64
.visible .entry volta_mma()
{
  .reg .b32 %r<13>;
  mma.sync.aligned.m8n8k4.row.col.f16.f16.f16.f16 {%r1,%r2,%r3,%r4}, {%r5,%r6}, {%r7,%r8}, {%r9,%r10,%r11,%r12};
  ret;
}
)";
  CUmodule m;
  CU_ASSERT_OK(cuModuleLoadData(&m, ptx));
  CUfunction f;
  CU_ASSERT_OK(cuModuleGetFunction(&f, m, "volta_mma"));
  testing::internal::CaptureStderr();
  CU_EXPECT_EQ(Launch(f, 1, 32, {}), CUDA_ERROR_NOT_SUPPORTED);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("mma.sync.aligned.m8n8k4.row.col.f16.f16.f16.f16"), std::string::npos) << err;
  CU_ASSERT_OK(cuModuleUnload(m));
}

}  // namespace
