// nvcc's math library (float, double), half/bfloat16 intrinsics and 64-bit integer helpers,
// checked against the host's libm.
#include <cuda.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "test_util.h"

namespace {

using softgpu_test::KernelFile;

class MathTest : public softgpu_test::KernelTest {
 protected:
  void SetUp() override {
    KernelTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const std::string ptx = KernelFile("math_kernels.ptx");
    ASSERT_FALSE(ptx.empty());
    CU_ASSERT_OK(cuModuleLoadData(&math_, ptx.c_str()));
  }
  CUfunction MathFunction(const char* name) {
    CUfunction f = nullptr;
    EXPECT_EQ(cuModuleGetFunction(&f, math_, name), CUDA_SUCCESS) << name;
    return f;
  }
  CUmodule math_ = nullptr;
};

constexpr int kLanes = 32;

TEST_F(MathTest, FloatFunctions) {
  std::vector<float> in(kLanes);
  for (int i = 0; i < kLanes; ++i) in[i] = -3.1f + 0.21f * i;
  CUdeviceptr din = Upload(in), dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, kLanes * 32 * sizeof(float)));
  CU_ASSERT_OK(Launch(MathFunction("fmath"), 1, kLanes, {&din, &dout}));
  std::vector<float> o = Download<float>(dout, kLanes * 32);
  for (int i = 0; i < kLanes; ++i) {
    const double x = in[i];
    const double ref[32] = {sin(x),
                            cos(x),
                            tan(x),
                            exp(x),
                            log(fabs(x) + 1),
                            pow(fabs(x), 1.5),
                            sqrt(fabs(x)),
                            1 / sqrt(fabs(x) + 1),
                            erf(x),
                            tanh(x),
                            atan2(x, 1.5),
                            asin(x / 10),
                            acos(x / 10),
                            log2(fabs(x) + 1),
                            exp2(x),
                            log10(fabs(x) + 1),
                            cbrt(x),
                            fmod(x, 0.7f),
                            floor(x),
                            ceil(x),
                            round(x),
                            trunc(x),
                            sin(x),
                            exp(x),
                            x / 3.,
                            hypot(x, 2.),
                            sinh(x / 4),
                            lgamma(fabs(x) + 1),
                            expm1(x),
                            log1p(fabs(x)),
                            fmin(x, 0.3) + fmax(x, -0.2),
                            fmin(fmax(x, 0.), 1.)};
    for (int k = 0; k < 32; ++k) {
      EXPECT_NEAR(o[i * 32 + k], ref[k], 2e-5 * (1 + fabs(ref[k]))) << "x=" << x << " k=" << k;
    }
  }
}

TEST_F(MathTest, DoubleFunctions) {
  std::vector<double> in(kLanes);
  for (int i = 0; i < kLanes; ++i) in[i] = -3.1 + 0.21 * i + 1e-3;
  CUdeviceptr din = Upload(in), dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, kLanes * 16 * sizeof(double)));
  CU_ASSERT_OK(Launch(MathFunction("dmath"), 1, kLanes, {&din, &dout}));
  std::vector<double> o = Download<double>(dout, kLanes * 16);
  for (int i = 0; i < kLanes; ++i) {
    const double x = in[i];
    const double ref[16] = {sin(x),           cos(x),
                            tan(x),           exp(x),
                            log(fabs(x) + 1), pow(fabs(x), 1.5),
                            sqrt(fabs(x)),    1 / sqrt(fabs(x) + 1),
                            erf(x),           tanh(x),
                            atan2(x, 1.5),    asin(x / 10),
                            cbrt(x),          fmod(x, 0.7),
                            round(x),         1 / x};
    for (int k = 0; k < 16; ++k) {
      EXPECT_NEAR(o[i * 16 + k], ref[k], 1e-13 * (1 + fabs(ref[k]))) << "x=" << x << " k=" << k;
    }
  }
}

TEST_F(MathTest, HalfAndBfloat16) {
  std::vector<float> in = {-3.1f, 0.75f, 1.5f, 2.0f};
  CUdeviceptr din = Upload(in), dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, in.size() * 8 * sizeof(float)));
  CU_ASSERT_OK(Launch(MathFunction("halfs"), 1, static_cast<unsigned>(in.size()), {&din, &dout}));
  std::vector<float> o = Download<float>(dout, in.size() * 8);
  for (size_t i = 0; i < in.size(); ++i) {
    const double x = in[i];
    const double tol = 0.02 * (1 + x * x);
    EXPECT_NEAR(o[i * 8 + 0], x * x + x, tol);
    EXPECT_NEAR(o[i * 8 + 1], (x * x + x) + (4 * x * x + 2 * x), 4 * tol);
    EXPECT_NEAR(o[i * 8 + 2], x * x, tol);
    EXPECT_NEAR(o[i * 8 + 3], 2 * x * x, 2 * tol);
    EXPECT_NEAR(o[i * 8 + 4], sqrt(fabs(x)), 0.01);
    EXPECT_NEAR(o[i * 8 + 5], exp(x / 4), 0.01);
    EXPECT_EQ(o[i * 8 + 6], x < 0.5 ? 1.f : 0.f);
    EXPECT_NEAR(o[i * 8 + 7], std::max(x, 0.25), 0.01);
  }
}

TEST_F(MathTest, SixtyFourBitIntegers) {
  std::vector<long long> in(kLanes);
  for (int i = 0; i < kLanes; ++i) in[i] = (i * 0x123456789abcdll) ^ (i & 1 ? -1ll : 0);
  CUdeviceptr din = Upload(in), dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, kLanes * 12 * sizeof(long long)));
  CU_ASSERT_OK(Launch(MathFunction("ints"), 1, kLanes, {&din, &dout}));
  std::vector<long long> o = Download<long long>(dout, kLanes * 12);
  for (int i = 0; i < kLanes; ++i) {
    const long long x = in[i];
    const unsigned long long u = static_cast<unsigned long long>(x);
    unsigned long long rev = 0;
    for (int k = 0; k < 64; ++k) rev |= ((u >> k) & 1ull) << (63 - k);
    const long long ref[12] = {
        x / 7,
        x % 7,
        static_cast<long long>(u / 13),
        static_cast<long long>(u % 13),
        __builtin_popcountll(u),
        u ? __builtin_clzll(u) : 64,
        static_cast<long long>(rev),
        __builtin_ffsll(x),
        static_cast<long long>((static_cast<__int128>(x) * 12345) >> 64),
        static_cast<long long>((static_cast<unsigned __int128>(u) * 0x9e3779b97f4a7c15ull) >> 64),
        static_cast<long long>(static_cast<double>(x)),
        static_cast<long long>(static_cast<float>(x))};
    for (int k = 0; k < 12; ++k) EXPECT_EQ(o[i * 12 + k], ref[k]) << "i=" << i << " k=" << k;
  }
}

TEST_F(MathTest, ThirtyTwoBitOperations) {
  std::vector<unsigned> in(kLanes);
  for (int i = 0; i < kLanes; ++i) in[i] = i == 0 ? 0u : 0x9e3779b9u * i ^ (i << 7);
  CUdeviceptr din = Upload(in), dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, kLanes * 10 * sizeof(unsigned)));
  CU_ASSERT_OK(Launch(MathFunction("bits32"), 1, kLanes, {&din, &dout}));
  std::vector<unsigned> o = Download<unsigned>(dout, kLanes * 10);
  for (int i = 0; i < kLanes; ++i) {
    const unsigned x = in[i], y = in[(i + 1) % kLanes];
    unsigned rev = 0;
    for (int k = 0; k < 32; ++k) rev |= ((x >> k) & 1u) << (31 - k);
    auto byte = [&](unsigned sel) {
      const unsigned long long both = (static_cast<unsigned long long>(y) << 32) | x;
      return static_cast<unsigned>((both >> (8 * (sel & 7))) & 0xff);
    };
    const unsigned perm = byte(0) | byte(4) << 8 | byte(1) << 16 | byte(5) << 24;
    const unsigned long long wide = (static_cast<unsigned long long>(y) << 32) | x;
    const unsigned shl = static_cast<unsigned>((wide << (i & 31)) >> 32);
    const unsigned shr = static_cast<unsigned>(wide >> 7);
    const unsigned a = x & 0xffff, b = y & 0xffff;
    const unsigned ref[10] = {static_cast<unsigned>(__builtin_popcount(x)),
                              x ? static_cast<unsigned>(__builtin_clz(x)) : 32u,
                              rev,
                              perm,
                              shl,
                              shr,
                              static_cast<unsigned>((static_cast<unsigned long long>(x) * y) >> 32),
                              static_cast<unsigned>(__builtin_ffs(static_cast<int>(x))),
                              (a > b ? a - b : b - a) + 3,
                              (x & 0x7fffff) * (y & 0x7fffff)};
    for (int k = 0; k < 10; ++k) EXPECT_EQ(o[i * 10 + k], ref[k]) << "i=" << i << " k=" << k;
  }
}

}  // namespace
