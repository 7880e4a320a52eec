// Kernels compiled by nvcc, run through the driver API on the interpreter.
#include <cuda.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "common/fatbin.h"
#include "test_util.h"

// softgpu's extension (api_context.cc): where a context's device printf output goes.
extern "C" CUresult softgpuCtxSetPrintfHandler(CUcontext ctx,
                                               void (*handler)(void*, const char*, size_t),
                                               void* user);

namespace {

using softgpu_test::KernelFile;
using softgpu_test::KernelTest;

TEST_F(KernelTest, VectorAdd) {
  const int n = 1000;
  std::vector<float> a(n), b(n);
  for (int i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = static_cast<float>(2 * i) + 0.5f;
  }
  CUdeviceptr da = Upload(a), db = Upload(b), dc;
  CU_ASSERT_OK(cuMemAlloc(&dc, n * sizeof(float)));
  int count = n;
  CU_ASSERT_OK(Launch(Function("vec_add"), (n + 127) / 128, 128, {&da, &db, &dc, &count}));
  std::vector<float> c = Download<float>(dc, n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << i;
}

TEST_F(KernelTest, SaxpyGridStride) {
  const int n = 10000;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 97);
    y[i] = 1.0f;
  }
  CUdeviceptr dx = Upload(x), dy = Upload(y);
  float a = 2.5f;
  int count = n;
  CU_ASSERT_OK(Launch(Function("saxpy"), 7, 96, {&a, &dx, &dy, &count}));
  std::vector<float> out = Download<float>(dy, n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], std::fma(a, x[i], 1.0f)) << i;
}

TEST_F(KernelTest, SharedMemoryReduction) {
  const int n = 256 * 9 + 17;
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = static_cast<float>(i % 13);
  CUdeviceptr din = Upload(in), dout;
  const int blocks = (n + 255) / 256;
  CU_ASSERT_OK(cuMemAlloc(&dout, blocks * sizeof(float)));
  int count = n;
  CU_ASSERT_OK(Launch(Function("block_sum"), blocks, 256, {&din, &dout, &count}));
  std::vector<float> out = Download<float>(dout, blocks);
  for (int b = 0; b < blocks; ++b) {
    float expect = 0;
    for (int i = b * 256; i < std::min(n, (b + 1) * 256); ++i) expect += in[i];
    EXPECT_EQ(out[b], expect) << b;
  }
}

TEST_F(KernelTest, DynamicSharedMemoryAnd2DBlocks) {
  const int blocks = 3, bx = 16, by = 6;
  std::vector<int> in(blocks * bx * by);
  std::iota(in.begin(), in.end(), 1);
  CUdeviceptr din = Upload(in), dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, blocks * sizeof(int)));
  void* args[] = {&din, &dout};
  CU_ASSERT_OK(cuLaunchKernel(Function("block_sum_dynamic"), blocks, 1, 1, bx, by, 1,
                              bx * by * sizeof(int), nullptr, args, nullptr));
  std::vector<int> out = Download<int>(dout, blocks);
  for (int b = 0; b < blocks; ++b) {
    int expect = 0;
    for (int i = 0; i < bx * by; ++i) expect += in[b * bx * by + i];
    EXPECT_EQ(out[b], expect);
  }
}

TEST_F(KernelTest, DynamicSharedMemoryAfterAnUnalignedStaticVariable) {
  const int threads = 128;
  std::vector<float> in(threads);
  std::iota(in.begin(), in.end(), 1.0f);
  CUdeviceptr din = Upload(in), dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, threads * sizeof(float)));
  void* args[] = {&din, &dout};
  // Exactly the dynamic array's size: its last element lies past static + dynamic bytes
  // unless the block's shared memory counts the alignment gap.
  CU_ASSERT_OK(cuLaunchKernel(Function("dynamic_after_static"), 1, 1, 1, threads, 1, 1,
                              threads * sizeof(float), nullptr, args, nullptr));
  CU_ASSERT_OK(cuCtxSynchronize());
  std::vector<float> out = Download<float>(dout, threads);
  for (int t = 0; t < threads; ++t) EXPECT_EQ(out[t], in[threads - 1 - t] + in[0]);
}

TEST_F(KernelTest, ShuffleFromLanesOutsideTheMembersGivesZero) {
  std::vector<int> in(32);
  std::iota(in.begin(), in.end(), 1);
  CUdeviceptr din = Upload(in), dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, 33 * sizeof(int)));
  CU_ASSERT_OK(Launch(Function("partial_warp_sum"), 1, 32, {&din, &dout}));
  EXPECT_EQ(Download<int>(dout, 1)[0], 1 + 2 + 3 + 4 + 5 + 6 + 7 + 8);
}

TEST_F(KernelTest, BitMasks) {
  const std::vector<unsigned> a = {0, 4, 28, 31, 32, 33, 0, 8, 40};
  const std::vector<unsigned> b = {8, 4, 8, 1, 4, 2, 32, 40, 33};
  const int n = static_cast<int>(a.size());
  CUdeviceptr da = Upload(a), db = Upload(b), dw, dc;
  CU_ASSERT_OK(cuMemAlloc(&dw, n * sizeof(unsigned)));
  CU_ASSERT_OK(cuMemAlloc(&dc, n * sizeof(unsigned)));
  CU_ASSERT_OK(Launch(Function("bit_masks"), 1, 32, {&da, &db, &dw, &dc, const_cast<int*>(&n)}));
  const std::vector<unsigned> wrap = Download<unsigned>(dw, n), clamp = Download<unsigned>(dc, n);
  auto expect = [](unsigned start, unsigned width) -> unsigned {
    const uint64_t bits = width >= 32 ? 0xffffffffull : (uint64_t{1} << width) - 1;
    return start >= 32 ? 0u : static_cast<unsigned>(bits << start);
  };
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(wrap[i], expect(a[i] & 31, b[i] & 31)) << "wrap " << a[i] << "," << b[i];
    EXPECT_EQ(clamp[i], expect(std::min(a[i], 32u), std::min(b[i], 32u)))
        << "clamp " << a[i] << "," << b[i];
  }
  EXPECT_EQ(clamp[0], 0xffu);
  EXPECT_EQ(clamp[2], 0xf0000000u);  // bits past 31 are dropped
  EXPECT_EQ(clamp[4], 0u);           // a start at 32
  EXPECT_EQ(wrap[5], 0x6u);          // 33 wraps to 1
}

TEST_F(KernelTest, Atomics) {
  const int blocks = 8, threads = 128, total = blocks * threads;
  std::vector<int> ints = {0, -1, 1, 0, 0, 0};
  std::vector<unsigned> uints = {0, 0, 0xffffffffu, 0};
  CUdeviceptr di = Upload(ints), du = Upload(uints), df = Upload(std::vector<float>{0.f}),
              d64 = Upload(std::vector<unsigned long long>{0}),
              dd = Upload(std::vector<double>{0.0});
  CU_ASSERT_OK(Launch(Function("atomics"), blocks, threads, {&di, &du, &df, &d64, &dd}));
  ints = Download<int>(di, 6);
  uints = Download<unsigned>(du, 4);
  EXPECT_EQ(ints[0], total);
  EXPECT_EQ(ints[1], total - 1);
  EXPECT_EQ(ints[2], -(total - 1));
  EXPECT_GE(ints[3], 1);
  EXPECT_LE(ints[3], total);
  EXPECT_EQ(ints[4], 7);
  EXPECT_EQ(ints[5], total);
  EXPECT_EQ(uints[0], 0xffffffffu);
  EXPECT_EQ(uints[1], 0u);  // an even number of xors
  EXPECT_EQ(uints[2], 0u);
  EXPECT_EQ(uints[3], static_cast<unsigned>(total % 10));
  EXPECT_EQ(Download<float>(df, 1)[0], total * 0.5f);
  EXPECT_EQ(Download<unsigned long long>(d64, 1)[0], 3ull * total);
  EXPECT_EQ(Download<double>(dd, 1)[0], total * 0.25);
}

TEST_F(KernelTest, DivergentLoops) {
  const int n = 300;
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = i + 1;
  CUdeviceptr din = Upload(in), dsteps;
  CU_ASSERT_OK(cuMemAlloc(&dsteps, n * sizeof(int)));
  int count = n;
  CU_ASSERT_OK(Launch(Function("collatz"), 3, 128, {&din, &dsteps, &count}));
  std::vector<int> steps = Download<int>(dsteps, n);
  for (int i = 0; i < n; ++i) {
    long long v = in[i];
    int s = 0;
    while (v != 1) {
      v = (v & 1) ? 3 * v + 1 : v >> 1;
      ++s;
    }
    ASSERT_EQ(steps[i], s) << i;
  }
}

TEST_F(KernelTest, WarpReconvergesAfterDivergentBranches) {
  std::vector<int> in(32);
  for (int i = 0; i < 32; ++i) in[i] = (i * 11) % 29;
  CUdeviceptr din = Upload(in), dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, 32 * sizeof(int)));
  CU_ASSERT_OK(Launch(Function("diverge_reconverge"), 1, 32, {&din, &dout}));
  int sum = 0;
  for (int i = 0; i < 32; ++i) {
    const int v = in[i];
    int r = v * 3;
    if (v & 1) {
      for (int k = 0; k < v; ++k) r += k * v;
    }
    if (v > 10) r -= in[v & 31];
    sum += r;
  }
  std::vector<int> out = Download<int>(dout, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], sum) << i;
}

TEST_F(KernelTest, DoublePrecisionMath) {
  const int n = 64;
  std::vector<double> in(n);
  for (int i = 0; i < n; ++i) in[i] = 0.37 * i + 0.1;
  CUdeviceptr din = Upload(in), dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, 4 * n * sizeof(double)));
  int count = n;
  CU_ASSERT_OK(Launch(Function("f64_math"), 1, 64, {&din, &dout, &count}));
  std::vector<double> out = Download<double>(dout, 4 * n);
  for (int i = 0; i < n; ++i) {
    const double x = in[i];
    EXPECT_NEAR(out[4 * i + 0], std::sqrt(x) + x / 3.0, 1e-14 * (1 + x));
    EXPECT_EQ(out[4 * i + 1], std::fma(x, x, -1.0));
    EXPECT_NEAR(out[4 * i + 2], std::exp(x * 0.01) + std::log(x + 1.0), 1e-14);
    EXPECT_NEAR(out[4 * i + 3], std::sin(x) * std::cos(x), 1e-14);
  }
}

TEST_F(KernelTest, WarpShufflesAndVotes) {
  const int threads = 64;
  std::vector<int> in(threads);
  for (int i = 0; i < threads; ++i) in[i] = (i * 7) % 23;
  CUdeviceptr din = Upload(in), dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, threads * 8 * sizeof(int)));
  CU_ASSERT_OK(Launch(Function("warp_ops"), 1, threads, {&din, &dout}));
  std::vector<int> out = Download<int>(dout, threads * 8);
  for (int w = 0; w < threads / 32; ++w) {
    unsigned ballot = 0;
    int sum = 0;
    bool any17 = false;
    for (int l = 0; l < 32; ++l) {
      const int v = in[w * 32 + l];
      if (v > 10) ballot |= 1u << l;
      sum += v;
      any17 = any17 || v == 17;
    }
    for (int l = 0; l < 32; ++l) {
      const int t = w * 32 + l;
      const int* o = &out[t * 8];
      EXPECT_EQ(static_cast<unsigned>(o[0]), ballot);
      EXPECT_EQ(o[1], l < 31 ? in[t + 1] : in[t]);
      EXPECT_EQ(o[2], l >= 2 ? in[t - 2] : in[t]);
      EXPECT_EQ(o[3], in[w * 32 + (l ^ 3)]);
      EXPECT_EQ(o[4], in[w * 32 + 5]);
      EXPECT_EQ(o[5], 1 + 2 * (any17 ? 1 : 0));
      EXPECT_EQ(o[6], sum);
      EXPECT_EQ(o[7], l);
    }
  }
}

struct Pair {
  double d;
  int i;
};

TEST_F(KernelTest, ParameterLayoutFromPtx) {
  CUfunction f = Function("param_layout");
  const size_t offsets[] = {0, 2, 4, 8, 16, 24, 32, 48, 56};
  const size_t sizes[] = {1, 2, 4, 8, 4, 8, 16, 8, 8};
  for (size_t i = 0; i < 9; ++i) {
    size_t offset = 99, size = 99;
    CU_ASSERT_OK(cuFuncGetParamInfo(f, i, &offset, &size));
    EXPECT_EQ(offset, offsets[i]) << i;
    EXPECT_EQ(size, sizes[i]) << i;
  }
  size_t offset, size;
  CU_EXPECT_EQ(cuFuncGetParamInfo(f, 9, &offset, &size), CUDA_ERROR_INVALID_VALUE);

  char c = -5;
  short s = 300;
  int i = -70000;
  long long l = 5ll << 32;
  float fl = 1.5f;
  double d = 2.25;
  Pair p{3.5, 4};
  CUdeviceptr ptr = Upload(std::vector<int>{42}), out;
  CU_ASSERT_OK(cuMemAlloc(&out, 8 * sizeof(int)));
  const std::vector<int> expect = {-5, 300, -70000, 5, 15, 22, 39, 42};
  void* args[] = {&c, &s, &i, &l, &fl, &d, &p, &ptr, &out};
  CU_ASSERT_OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  EXPECT_EQ(Download<int>(out, 8), expect);

  // The same arguments packed in one buffer (CU_LAUNCH_PARAM_BUFFER_POINTER).
  CU_ASSERT_OK(cuMemsetD8(out, 0, 32));
  std::vector<uint8_t> buffer(64, 0);
  void* values[] = {&c, &s, &i, &l, &fl, &d, &p, &ptr, &out};
  for (int k = 0; k < 9; ++k) memcpy(&buffer[offsets[k]], values[k], sizes[k]);
  size_t buffer_size = buffer.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer.data(), CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &buffer_size, CU_LAUNCH_PARAM_END};
  CU_ASSERT_OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, extra));
  EXPECT_EQ(Download<int>(out, 8), expect);
  buffer_size = 10;
  CU_EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, extra),
               CUDA_ERROR_INVALID_VALUE);
}

TEST_F(KernelTest, ModuleGlobalsAndConstants) {
  CUdeviceptr counter, table;
  size_t counter_size, table_size;
  CU_ASSERT_OK(cuModuleGetGlobal(&counter, &counter_size, module_, "device_counter"));
  CU_ASSERT_OK(cuModuleGetGlobal(&table, &table_size, module_, "table"));
  EXPECT_EQ(counter_size, 4u);
  EXPECT_EQ(table_size, 16u);
  EXPECT_EQ(Download<int>(counter, 1)[0], 5);
  CU_EXPECT_EQ(cuModuleGetGlobal(&counter, &counter_size, module_, "missing"),
               CUDA_ERROR_NOT_FOUND);
  CUfunction missing;
  CU_EXPECT_EQ(cuModuleGetFunction(&missing, module_, "missing"), CUDA_ERROR_NOT_FOUND);
  std::vector<float> new_table = {10.f, 20.f, 30.f, 40.f};
  CU_ASSERT_OK(cuMemcpyHtoD(table, new_table.data(), 16));
  CUdeviceptr out;
  CU_ASSERT_OK(cuMemAlloc(&out, 8 * sizeof(float)));
  CU_ASSERT_OK(Launch(Function("globals"), 1, 8, {&out}));
  std::vector<float> o = Download<float>(out, 8);
  for (int t = 0; t < 8; ++t) EXPECT_EQ(o[t], new_table[t & 3] + 5) << t;
  EXPECT_EQ(Download<int>(counter, 1)[0], 6);
}

TEST_F(KernelTest, RecursiveDeviceFunction) {
  CUdeviceptr out;
  CU_ASSERT_OK(cuMemAlloc(&out, 20 * sizeof(int)));
  CU_ASSERT_OK(Launch(Function("recursion"), 1, 20, {&out}));
  std::vector<int> fib = Download<int>(out, 20);
  int a = 0, b = 1;
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(fib[i], a) << i;
    const int c = a + b;
    a = b;
    b = c;
  }
}

TEST_F(KernelTest, FunctionPointersAndVirtualCalls) {
  CUdeviceptr out;
  CU_ASSERT_OK(cuMemAlloc(&out, 32 * 3 * sizeof(int)));
  int choose = 1;
  CU_ASSERT_OK(Launch(Function("indirect_calls"), 1, 32, {&out, &choose}));
  std::vector<int> o = Download<int>(out, 32 * 3);
  for (int t = 0; t < 32; ++t) {
    EXPECT_EQ(o[3 * t + 0], t * 2) << t;
    EXPECT_EQ(o[3 * t + 1], (t & 1) ? t * 2 : t + 1) << t;
    EXPECT_EQ(o[3 * t + 2], (t & 1) ? t * t : t) << t;
  }
}

TEST_F(KernelTest, BarrierInsideCalledFunction) {
  const int blocks = 3, threads = 256;
  std::vector<float> in(blocks * threads);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 17);
  CUdeviceptr din = Upload(in), dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, blocks * sizeof(float)));
  CU_ASSERT_OK(Launch(Function("reduce_in_function"), blocks, threads, {&din, &dout}));
  std::vector<float> out = Download<float>(dout, blocks);
  for (int b = 0; b < blocks; ++b) {
    float want = 0;
    for (int t = 0; t < threads; ++t) want += in[b * threads + t];
    EXPECT_EQ(out[b], want) << b;
  }
}

TEST_F(KernelTest, LocalMemoryArrays) {
  std::vector<int> in(16 + 32);
  for (int k = 0; k < 16; ++k) in[k] = k + 1;
  for (int t = 0; t < 32; ++t) in[16 + t] = (t * 5) % 16;
  CUdeviceptr din = Upload(in), dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, 32 * sizeof(int)));
  CU_ASSERT_OK(Launch(Function("local_array"), 1, 32, {&din, &dout}));
  std::vector<int> out = Download<int>(dout, 32);
  for (int t = 0; t < 32; ++t) EXPECT_EQ(out[t], in[in[16 + t]] * t) << t;
}

TEST_F(KernelTest, IntegerMath) {
  std::vector<int> in = {-1234567, 891, static_cast<int>(0xf0f01234u)};
  CUdeviceptr din = Upload(in), dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, 16 * sizeof(int)));
  CU_ASSERT_OK(Launch(Function("int_math"), 1, 1, {&din, &dout}));
  std::vector<int> o = Download<int>(dout, 16);
  const int a = in[0], b = in[1];
  const unsigned u = static_cast<unsigned>(in[2]);
  EXPECT_EQ(o[0], a / b);
  EXPECT_EQ(o[1], a % b);
  EXPECT_EQ(o[2], static_cast<int>(u / 7u));
  EXPECT_EQ(o[3], static_cast<int>(u % 7u));
  EXPECT_EQ(o[4], std::min(a, b));
  EXPECT_EQ(o[5], std::max(a, b));
  EXPECT_EQ(o[6], __builtin_popcount(u));
  EXPECT_EQ(o[7], __builtin_clz(u));
  unsigned rev = 0;
  for (int k = 0; k < 32; ++k) rev |= ((u >> k) & 1u) << (31 - k);
  EXPECT_EQ(static_cast<unsigned>(o[8]), rev);
  EXPECT_EQ(o[9], __builtin_ffs(a));
  EXPECT_EQ(static_cast<unsigned>(o[10]),
            static_cast<unsigned>((static_cast<unsigned long long>(u) * 0x9e3779b9u) >> 32));
  EXPECT_EQ(o[11], static_cast<int>((static_cast<long long>(a) * b) >> 32));
  EXPECT_EQ(o[12], std::abs(a));
  EXPECT_EQ(o[13], static_cast<int>((static_cast<long long>(a) * b) >> 7));
  // __byte_perm(x, y, 0x5140): bytes {x0, x4=y0, x1, x5=y1} from the 8-byte pool {y:x}.
  const unsigned long long pool = (0x11223344ull << 32) | u;
  unsigned perm = 0;
  const int sel[4] = {0, 4, 1, 5};
  for (int k = 0; k < 4; ++k)
    perm |= static_cast<unsigned>((pool >> (8 * sel[k])) & 0xff) << (8 * k);
  EXPECT_EQ(static_cast<unsigned>(o[14]), perm);
  const unsigned long long funnel = (0xdeadbeefull << 32) | u;
  EXPECT_EQ(static_cast<unsigned>(o[15]), static_cast<unsigned>((funnel << 12) >> 32));
}

TEST_F(KernelTest, FloatToIntRounding) {
  std::vector<float> in = {2.5f, -2.5f, 3.7f, -3.7f, 1e20f, -1e20f, 0.49999997f, NAN};
  CUdeviceptr din = Upload(in), dout, dfout;
  CU_ASSERT_OK(cuMemAlloc(&dout, in.size() * 4 * sizeof(int)));
  CU_ASSERT_OK(cuMemAlloc(&dfout, in.size() * sizeof(float)));
  CU_ASSERT_OK(
      Launch(Function("conversions"), 1, static_cast<unsigned>(in.size()), {&din, &dout, &dfout}));
  std::vector<int> o = Download<int>(dout, in.size() * 4);
  auto sat = [](double v) {
    if (std::isnan(v)) return 0;
    if (v >= 2147483648.0) return 2147483647;
    if (v <= -2147483648.0) return static_cast<int>(-2147483648ll);
    return static_cast<int>(v);
  };
  for (size_t t = 0; t < in.size(); ++t) {
    EXPECT_EQ(o[t * 4 + 0], sat(std::nearbyint(in[t]))) << t;
    EXPECT_EQ(o[t * 4 + 1], sat(std::trunc(in[t]))) << t;
    EXPECT_EQ(o[t * 4 + 2], sat(std::floor(in[t]))) << t;
    EXPECT_EQ(o[t * 4 + 3], sat(std::ceil(in[t]))) << t;
  }
  std::vector<float> f = Download<float>(dfout, in.size());
  EXPECT_EQ(f[2], static_cast<float>(static_cast<double>(3.7f) * 3.0) + 2.0f);
}

TEST_F(KernelTest, DevicePrintfAppearsAtSynchronization) {
  testing::internal::CaptureStdout();
  int value = 7;
  CU_ASSERT_OK(Launch(Function("say_hello"), 1, 4, {&value}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("hello 7 from thread 0, 1.50 ok\n"), std::string::npos) << out;
  EXPECT_NE(out.find("hello 7 from thread 1, 1.50 ok\n"), std::string::npos) << out;
}

TEST_F(KernelTest, DeviceMallocAndFree) {
  const int threads = 512;
  CUdeviceptr out, failures;
  CU_ASSERT_OK(cuMemAlloc(&out, threads * sizeof(long long)));
  CU_ASSERT_OK(cuMemAlloc(&failures, sizeof(int)));
  CU_ASSERT_OK(cuMemsetD32(failures, 0, 1));
  size_t heap = 0;
  CU_ASSERT_OK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 16 << 20));
  CU_ASSERT_OK(cuCtxGetLimit(&heap, CU_LIMIT_MALLOC_HEAP_SIZE));
  EXPECT_EQ(heap, 16u << 20);
  CU_ASSERT_OK(Launch(Function("heap_sum"), threads / 128, 128, {&out, &failures}));
  EXPECT_EQ(Download<int>(failures, 1)[0], 0);
  std::vector<long long> sums = Download<long long>(out, threads);
  for (int t = 0; t < threads; ++t) {
    const long long count = 8 + t % 24;
    EXPECT_EQ(sums[t], t * count * (count - 1) / 2) << t;
  }
  // The heap size is fixed once used.
  CU_EXPECT_EQ(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 32 << 20), CUDA_ERROR_INVALID_VALUE);
  int n = 10000;
  CU_ASSERT_OK(Launch(Function("heap_keep"), 1, 32, {&n}));
  CU_ASSERT_OK(Launch(Function("heap_use"), 1, 32, {&n, &out}));
  EXPECT_EQ(Download<long long>(out, 1)[0], 5ll * n * (n - 1) / 2);
}

TEST_F(KernelTest, DeviceAssertIsStickyWithMessage) {
  CUdeviceptr values = Upload(std::vector<int>{1, 2, -3, 4});
  CU_ASSERT_OK(Launch(Function("check_positive"), 1, 2, {&values}));
  CU_ASSERT_OK(cuCtxSynchronize());
  testing::internal::CaptureStderr();
  CU_ASSERT_OK(Launch(Function("check_positive"), 1, 4, {&values}));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ASSERT);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("thread: [2,0,0] Assertion `values[threadIdx.x] > 0` failed"),
            std::string::npos)
      << err;
  CUdeviceptr p;
  CU_EXPECT_EQ(cuMemAlloc(&p, 4), CUDA_ERROR_ASSERT);
}

TEST_F(KernelTest, ParameterAddressTaken) {
  std::vector<int> big(64);
  for (int k = 0; k < 64; ++k) big[k] = 1000 + k;
  CUdeviceptr out;
  CU_ASSERT_OK(cuMemAlloc(&out, 64 * sizeof(int)));
  CU_ASSERT_OK(Launch(Function("param_array"), 1, 64, {big.data(), &out}));
  std::vector<int> o = Download<int>(out, 64);
  for (int t = 0; t < 64; ++t) EXPECT_EQ(o[t], big[(t * 7) % 64]) << t;
}

TEST_F(KernelTest, LaunchKernelEx) {
  std::vector<float> a = {1, 2, 3};
  CUdeviceptr da = Upload(a), dc;
  CU_ASSERT_OK(cuMemAlloc(&dc, 12));
  int n = 3;
  void* args[] = {&da, &da, &dc, &n};
  CUlaunchAttribute attrs[2] = {};
  attrs[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  attrs[0].value.priority = 0;
  attrs[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attrs[1].value.clusterDim.x = attrs[1].value.clusterDim.y = attrs[1].value.clusterDim.z = 1;
  CUlaunchConfig config = {};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 32;
  config.blockDimY = config.blockDimZ = 1;
  config.attrs = attrs;
  config.numAttrs = 2;
  CU_ASSERT_OK(cuLaunchKernelEx(&config, Function("vec_add"), args, nullptr));
  EXPECT_EQ(Download<float>(dc, 3), (std::vector<float>{2, 4, 6}));
  // Clusters of two: refused before compute capability 9.0; from it, a shape that does not
  // divide the grid of one block is.
  attrs[1].value.clusterDim.x = 2;
  int clusters = 0;
  CU_ASSERT_OK(cuDeviceGetAttribute(&clusters, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, 0));
  CU_EXPECT_EQ(cuLaunchKernelEx(&config, Function("vec_add"), args, nullptr),
               clusters ? CUDA_ERROR_INVALID_CLUSTER_SIZE : CUDA_ERROR_NOT_SUPPORTED);
}

void CollectOutput(void* user, const char* data, size_t size) {
  static_cast<std::string*>(user)->append(data, size);
}

TEST_F(KernelTest, DevicePrintfToAHandler) {
  std::string collected;
  CU_ASSERT_OK(softgpuCtxSetPrintfHandler(ctx_, &CollectOutput, &collected));
  testing::internal::CaptureStdout();
  int value = 9;
  CU_ASSERT_OK(Launch(Function("say_hello"), 1, 1, {&value}));
  CU_ASSERT_OK(cuCtxSynchronize());
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
  EXPECT_EQ(collected, "hello 9 from thread 0, 1.50 ok\n");
  CU_ASSERT_OK(softgpuCtxSetPrintfHandler(ctx_, nullptr, nullptr));
  CU_EXPECT_EQ(softgpuCtxSetPrintfHandler(reinterpret_cast<CUcontext>(&value), nullptr, nullptr),
               CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(KernelTest, LaunchValidation) {
  CUfunction f = Function("vec_add");
  CUdeviceptr d;
  CU_ASSERT_OK(cuMemAlloc(&d, 64));
  int n = 0;
  std::vector<void*> args = {&d, &d, &d, &n};
  CU_EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 1025, 1, 1, 0, nullptr, args.data(), nullptr),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 32, 32, 2, 0, nullptr, args.data(), nullptr),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 1, 1, 65, 0, nullptr, args.data(), nullptr),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuLaunchKernel(f, 0, 1, 1, 32, 1, 1, 0, nullptr, args.data(), nullptr),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuLaunchKernel(f, 1, 65536, 1, 32, 1, 1, 0, nullptr, args.data(), nullptr),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 100 * 1024, nullptr, args.data(), nullptr),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuLaunchKernel(nullptr, 1, 1, 1, 32, 1, 1, 0, nullptr, args.data(), nullptr),
               CUDA_ERROR_INVALID_HANDLE);
  CU_EXPECT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(&n), 1, 1, 1, 32, 1, 1, 0, nullptr,
                              args.data(), nullptr),
               CUDA_ERROR_INVALID_HANDLE);
  CU_ASSERT_OK(cuCtxSynchronize());
}

// Shared addresses are 32 bits: [%r + imm] with a 32-bit register holding "below the start" of a
// shared array wraps back into it (cuSPARSE's triangular-solve analysis indexes this way).
TEST_F(KernelTest, SharedAddressInA32BitRegisterWraps) {
  const char* ptx = R"(
.version 9.0
.target sm_75
.address_size 64
.visible .entry wrap(.param .u64 out)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<3>;
  .shared .align 4 .b8 arr[16];
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, arr;
  mov.u32 %r2, 7;
  st.shared.u32 [%r1+4], %r2;
  sub.s32 %r3, %r1, 8;
  add.s32 %r3, %r3, -4;
  ld.shared.u32 %r4, [%r3+16];
  st.global.u32 [%rd2], %r4;
  ret;
}
)";
  CUmodule m;
  CU_ASSERT_OK(cuModuleLoadData(&m, ptx));
  CUfunction f;
  CU_ASSERT_OK(cuModuleGetFunction(&f, m, "wrap"));
  CUdeviceptr d;
  CU_ASSERT_OK(cuMemAlloc(&d, 4));
  CU_ASSERT_OK(Launch(f, 1, 1, {&d}));
  CU_ASSERT_OK(cuCtxSynchronize());
  uint32_t got = 0;
  CU_ASSERT_OK(cuMemcpyDtoH(&got, d, 4));
  EXPECT_EQ(got, 7u);
  CU_ASSERT_OK(cuModuleUnload(m));
}

// brx.idx through a .branchtargets list: lanes of one warp take three targets (and one lane, its
// guard false, falls through), and a loop whose backward edge is a brx.idx runs tid times.
const char* kIndirectBranchPtx = R"(
.version 8.0
.target sm_75
.address_size 64
.visible .entry jump(.param .u64 out, .param .u32 bias)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  .reg .pred %p<3>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r7, [bias];
  mov.u32 %r1, %tid.x;
  rem.u32 %r2, %r1, 3;
  add.u32 %r2, %r2, %r7;
  mov.u32 %r3, 0;
  setp.eq.u32 %p1, %r1, 5;
ts: .branchtargets L0, L1, L2;
  @!%p1 brx.idx %r2, ts;
  mov.u32 %r4, 99;
  bra.uni LOOP;
L0:
  mov.u32 %r4, 100;
  bra.uni LOOP;
L1:
  mov.u32 %r4, 200;
  bra.uni LOOP;
L2:
  mov.u32 %r4, 300;
LOOP:
  add.u32 %r3, %r3, 1;
  setp.lt.u32 %p2, %r3, %r1;
  selp.u32 %r5, 0, 1, %p2;
back: .branchtargets LOOP, DONE;
  brx.idx.uni %r5, back;
DONE:
  add.u32 %r4, %r4, %r3;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r4;
  ret;
}
)";

TEST_F(KernelTest, IndirectBranchTakesEachLanesTarget) {
  CUmodule m;
  CU_ASSERT_OK(cuModuleLoadData(&m, kIndirectBranchPtx));
  CUfunction f;
  CU_ASSERT_OK(cuModuleGetFunction(&f, m, "jump"));
  const int n = 70;  // three warps, the last partial
  CUdeviceptr d;
  CU_ASSERT_OK(cuMemAlloc(&d, n * 4));
  uint32_t bias = 0;
  CU_ASSERT_OK(Launch(f, 1, n, {&d, &bias}));
  const std::vector<uint32_t> got = Download<uint32_t>(d, n);
  for (int t = 0; t < n; ++t) {
    const uint32_t base = t == 5 ? 99 : 100 * (t % 3 + 1);
    EXPECT_EQ(got[t], base + std::max(t, 1)) << t;
  }
  CU_ASSERT_OK(cuModuleUnload(m));
}

TEST_F(KernelTest, IndirectBranchPastItsListFaults) {
  CUmodule m;
  CU_ASSERT_OK(cuModuleLoadData(&m, kIndirectBranchPtx));
  CUfunction f;
  CU_ASSERT_OK(cuModuleGetFunction(&f, m, "jump"));
  CUdeviceptr d;
  CU_ASSERT_OK(cuMemAlloc(&d, 32 * 4));
  uint32_t bias = 1;  // tid % 3 == 2 indexes a fourth target of three
  CU_ASSERT_OK(Launch(f, 1, 32, {&d, &bias}));
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST_F(KernelTest, IndirectBranchToAnUnknownListIsInvalidPtx) {
  std::string ptx = kIndirectBranchPtx;
  ptx.replace(ptx.find("brx.idx %r2, ts"), 15, "brx.idx %r2, zz");
  testing::internal::CaptureStderr();
  CUmodule m;
  CU_EXPECT_EQ(cuModuleLoadData(&m, ptx.c_str()), CUDA_ERROR_INVALID_PTX);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("unknown .branchtargets list 'zz'"), std::string::npos) << err;
}

TEST_F(KernelTest, UnimplementedInstructionFailsTheLaunchByName) {
  const char* ptx = R"(
.version 9.0
.target sm_80
.address_size 64
.visible .entry uses_wgmma(.param .u64 p)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, 0;
  wgmma.fence.sync.aligned;
  ret;
}
)";
  CUmodule m;
  CU_ASSERT_OK(cuModuleLoadData(&m, ptx));
  CUfunction f;
  CU_ASSERT_OK(cuModuleGetFunction(&f, m, "uses_wgmma"));
  CUdeviceptr d;
  CU_ASSERT_OK(cuMemAlloc(&d, 64));
  testing::internal::CaptureStderr();
  CU_EXPECT_EQ(Launch(f, 1, 1, {&d}), CUDA_ERROR_NOT_SUPPORTED);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("wgmma.fence.sync.aligned"), std::string::npos) << err;
  CU_ASSERT_OK(cuCtxSynchronize());  // not sticky
  CU_ASSERT_OK(cuModuleUnload(m));
}

TEST_F(KernelTest, MalformedPtxIsInvalidPtx) {
  testing::internal::CaptureStderr();
  const char* bad = ".version 9.0\n.target sm_75\n.entry k() { .reg .b32 %r<2>; mov.u32 %r1 1; }\n";
  CUmodule m;
  CU_EXPECT_EQ(cuModuleLoadData(&m, bad), CUDA_ERROR_INVALID_PTX);
  // The JIT error log receives the reason too.
  char log[256] = "unset";
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(sizeof log)};
  CU_EXPECT_EQ(cuModuleLoadDataEx(&m, bad, 2, options, values), CUDA_ERROR_INVALID_PTX);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("softgpu: cannot load PTX"), std::string::npos) << err;
  EXPECT_NE(std::string(log).find("line 3"), std::string::npos) << log;
}

// Loads `image` with a JIT error log; returns the result and the log in *log.
CUresult LoadWithLog(const void* image, std::string* log) {
  char buffer[1024] = "";
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {buffer, reinterpret_cast<void*>(sizeof buffer)};
  CUmodule m = nullptr;
  const CUresult r = cuModuleLoadDataEx(&m, image, 2, options, values);
  *log = buffer;
  if (r == CUDA_SUCCESS) cuModuleUnload(m);
  return r;
}

TEST_F(KernelTest, SassOnlyContainerIsRejected) {
  const std::string sass = KernelFile("test_kernels_sass.fatbin");
  ASSERT_FALSE(sass.empty());
  std::string log;
  CU_EXPECT_EQ(LoadWithLog(sass.data(), &log), CUDA_ERROR_NO_BINARY_FOR_GPU);
  EXPECT_NE(log.find("no PTX, only sm_75 SASS"), std::string::npos) << log;
  EXPECT_NE(log.find("-rdc=true"), std::string::npos) << log;
  EXPECT_NE(log.find("-gencode arch=compute_75,code=compute_75"), std::string::npos) << log;
}

// A refusal is explained on stderr once per process, however often the same image is tried (cuFFT
// tries a SASS-only module before its fallback for many plans), and to each caller's JIT log.
TEST_F(KernelTest, RefusalIsToldOnStderrOncePerProcess) {
  const std::string sass = KernelFile("test_kernels_sass.fatbin");
  ASSERT_FALSE(sass.empty());
  testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) {
    std::string log;
    CU_EXPECT_EQ(LoadWithLog(sass.data(), &log), CUDA_ERROR_NO_BINARY_FOR_GPU);
    EXPECT_NE(log.find("no PTX, only sm_75 SASS"), std::string::npos) << log;
  }
  const std::string err = testing::internal::GetCapturedStderr();
  size_t told = 0;
  for (size_t at = err.find("no PTX, only sm_75 SASS"); at != std::string::npos;
       at = err.find("no PTX, only sm_75 SASS", at + 1)) {
    ++told;
  }
  EXPECT_LE(told, 1u) << err;
}

TEST_F(KernelTest, BareCubinIsRejected) {
  const std::string sass = KernelFile("test_kernels_sass.fatbin");
  ASSERT_FALSE(sass.empty());
  std::vector<rgpu::fatbin::Entry> entries;
  ASSERT_TRUE(rgpu::fatbin::ParseContainer(sass.data(), sass.size(), &entries).ok());
  ASSERT_EQ(entries.size(), 1u);
  std::string log;
  CU_EXPECT_EQ(LoadWithLog(entries[0].payload.data(), &log), CUDA_ERROR_NO_BINARY_FOR_GPU);
  EXPECT_NE(log.find("only sm_75 SASS"), std::string::npos) << log;
  CUlibrary lib;
  CU_EXPECT_EQ(
      cuLibraryLoadData(&lib, entries[0].payload.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
      CUDA_ERROR_NO_BINARY_FOR_GPU);
}

TEST_F(KernelTest, FatBinaryContainerAndWrapperLoad) {
  const std::string fatbin = KernelFile("test_kernels.fatbin");
  ASSERT_FALSE(fatbin.empty());
  CUmodule m1, m2;
  CU_ASSERT_OK(cuModuleLoadData(&m1, fatbin.data()));
  struct {
    uint32_t magic, version;
    const void* data;
    void* unused;
  } wrapper{0x466243B1u, 1, fatbin.data(), nullptr};
  CU_ASSERT_OK(cuModuleLoadFatBinary(&m2, &wrapper));
  CUfunction f;
  CU_ASSERT_OK(cuModuleGetFunction(&f, m2, "vec_add"));
  std::vector<float> a = {1, 2, 3}, b = {10, 20, 30};
  CUdeviceptr da = Upload(a), db = Upload(b), dc;
  CU_ASSERT_OK(cuMemAlloc(&dc, 12));
  int n = 3;
  CU_ASSERT_OK(Launch(f, 1, 32, {&da, &db, &dc, &n}));
  EXPECT_EQ(Download<float>(dc, 3), (std::vector<float>{11, 22, 33}));
  CU_ASSERT_OK(cuModuleUnload(m1));
  CU_ASSERT_OK(cuModuleUnload(m2));
  CU_EXPECT_EQ(cuModuleUnload(m2), CUDA_ERROR_INVALID_HANDLE);
  CU_EXPECT_EQ(Launch(f, 1, 32, {&da, &db, &dc, &n}), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(KernelTest, NewerPtxIsUsedWhenThatIsAllThereIs) {
  const std::string fatbin = KernelFile("test_kernels_compute80.fatbin");
  ASSERT_FALSE(fatbin.empty());
  CUmodule m;
  CU_ASSERT_OK(cuModuleLoadData(&m, fatbin.data()));
  CUfunction f;
  CU_ASSERT_OK(cuModuleGetFunction(&f, m, "vec_add"));
  CUdeviceptr da = Upload(std::vector<float>{1, 2}), dc;
  CU_ASSERT_OK(cuMemAlloc(&dc, 8));
  int n = 2;
  CU_ASSERT_OK(Launch(f, 1, 32, {&da, &da, &dc, &n}));
  EXPECT_EQ(Download<float>(dc, 2), (std::vector<float>{2, 4}));
}

TEST_F(KernelTest, LibraryKernels) {
  CUlibrary lib;
  CU_ASSERT_OK(cuLibraryLoadData(&lib, ptx_.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel k;
  CU_ASSERT_OK(cuLibraryGetKernel(&k, lib, "param_layout"));
  size_t offset, size;
  CU_ASSERT_OK(cuKernelGetParamInfo(k, 6, &offset, &size));
  EXPECT_EQ(offset, 32u);
  EXPECT_EQ(size, 16u);
  CU_EXPECT_EQ(cuKernelGetParamInfo(k, 9, &offset, &size), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuLibraryGetKernel(&k, lib, "nope"), CUDA_ERROR_NOT_FOUND);

  CU_ASSERT_OK(cuLibraryGetKernel(&k, lib, "vec_add"));
  CUfunction f;
  CU_ASSERT_OK(cuKernelGetFunction(&f, k));
  CUdeviceptr da = Upload(std::vector<float>{1, 2}), dc;
  CU_ASSERT_OK(cuMemAlloc(&dc, 8));
  int n = 2;
  CU_ASSERT_OK(Launch(f, 1, 32, {&da, &da, &dc, &n}));
  EXPECT_EQ(Download<float>(dc, 2), (std::vector<float>{2, 4}));
  // A CUkernel may be passed where a CUfunction is expected.
  CU_ASSERT_OK(cuMemsetD8(dc, 0, 8));
  CU_ASSERT_OK(Launch(reinterpret_cast<CUfunction>(k), 1, 32, {&da, &da, &dc, &n}));
  EXPECT_EQ(Download<float>(dc, 2), (std::vector<float>{2, 4}));

  CUdeviceptr counter;
  size_t counter_size;
  CU_ASSERT_OK(cuLibraryGetGlobal(&counter, &counter_size, lib, "device_counter"));
  EXPECT_EQ(counter_size, 4u);
  EXPECT_EQ(Download<int>(counter, 1)[0], 5);
  int regs = 0;
  CU_ASSERT_OK(cuKernelGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, k, 0));
  EXPECT_GT(regs, 0);
  CU_ASSERT_OK(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 50000, k, 0));
  int dyn = 0;
  CU_ASSERT_OK(cuFuncGetAttribute(&dyn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
  EXPECT_EQ(dyn, 50000);
  CU_EXPECT_EQ(cuKernelGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, k, 7),
               CUDA_ERROR_INVALID_DEVICE);
  CU_ASSERT_OK(cuLibraryUnload(lib));
  CU_EXPECT_EQ(cuKernelGetFunction(&f, k), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(KernelTest, FunctionAttributesAndOccupancy) {
  // The limits are the device architecture's (RGPU_SOFTGPU_COMPUTE_CAPABILITY).
  auto device = [](CUdevice_attribute a) {
    int value = 0;
    EXPECT_EQ(cuDeviceGetAttribute(&value, a, 0), CUDA_SUCCESS);
    return value;
  };
  const int arch = device(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) * 10 +
                   device(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  const int optin = device(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  const int per_sm = device(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  const int threads_per_sm = device(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  CUfunction f = Function("block_sum");
  int v = 0;
  CU_ASSERT_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f));
  EXPECT_EQ(v, 1024);
  CU_ASSERT_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
  EXPECT_EQ(v, 1024);
  CU_ASSERT_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
  EXPECT_GT(v, 0);
  // PTX_VERSION is the virtual architecture of the PTX (its .target), BINARY_VERSION the device's.
  const size_t target = ptx_.find(".target sm_");
  ASSERT_NE(target, std::string::npos);
  CU_ASSERT_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PTX_VERSION, f));
  EXPECT_EQ(v, atoi(ptx_.c_str() + target + strlen(".target sm_")));
  CU_ASSERT_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f));
  EXPECT_EQ(v, arch);
  CU_ASSERT_OK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 60 * 1024));
  CU_ASSERT_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
  EXPECT_EQ(v, 60 * 1024);
  // 1024 bytes of static shared memory leave optin - 1024 for dynamic shared memory.
  CU_EXPECT_EQ(
      cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin - 1024 + 1),
      CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(
      cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin - 1024));
  CU_ASSERT_OK(cuFuncSetCacheConfig(f, CU_FUNC_CACHE_PREFER_SHARED));
  int blocks = 0;
  CU_ASSERT_OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 0));
  EXPECT_GE(blocks, 1);
  EXPECT_LE(blocks, threads_per_sm / 256);
  int min_grid = 0, block = 0;
  CU_ASSERT_OK(cuOccupancyMaxPotentialBlockSize(&min_grid, &block, f, nullptr, 0, 0));
  EXPECT_GE(block, 32);
  EXPECT_LE(block, 1024);
  EXPECT_GE(min_grid, 1);
  size_t available = 0;
  CU_ASSERT_OK(cuOccupancyAvailableDynamicSMemPerBlock(&available, f, 2, 256));
  EXPECT_EQ(available, static_cast<size_t>(std::min(per_sm / 2, optin) - 1024));
}

// cudaGraphSetConditional stores its value as a 32-bit word at the handle (a device address);
// a handle that is not the context's memory faults like any bad store.
TEST_F(KernelTest, SetConditionalStoresAtTheHandle) {
  CUdeviceptr word;
  CU_ASSERT_OK(cuMemAlloc(&word, 8));
  CU_ASSERT_OK(cuMemsetD32(word, 0xdeadbeef, 2));
  unsigned long long handle = word;
  unsigned value = 7;
  CU_ASSERT_OK(Launch(Function("set_conditional"), 1, 32, {&handle, &value}));
  std::vector<uint32_t> got = Download<uint32_t>(word, 2);
  EXPECT_EQ(got[0], 7u);
  EXPECT_EQ(got[1], 0xdeadbeefu) << "exactly one word";
  handle = word + (1ull << 30);
  CU_ASSERT_OK(Launch(Function("set_conditional"), 1, 1, {&handle, &value}));
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
}

// A vector load or store of 8 or 16 bytes is one access, as on the GPU: while one block stores
// {i, i} vectors and another, on another host thread, loads them, no load sees two stores' halves
// (CUB's decoupled look-back scans depend on it). Element by element, the loads see torn vectors.
TEST_F(KernelTest, VectorAccessesAreNotTornBetweenBlocks) {
  CUdeviceptr word, started, torn;
  CU_ASSERT_OK(cuMemAlloc(&word, 16));
  CU_ASSERT_OK(cuMemAlloc(&started, 4));
  CU_ASSERT_OK(cuMemAlloc(&torn, 4));
  for (int shape = 0; shape < 3; ++shape) {
    CU_ASSERT_OK(cuMemsetD8(word, 0, 16));
    CU_ASSERT_OK(cuMemsetD8(started, 0, 4));
    CU_ASSERT_OK(cuMemsetD32(torn, 0xffffffff, 1));
    int iterations = 300000;
    CU_ASSERT_OK(
        Launch(Function("vector_tearing"), 2, 32, {&word, &started, &torn, &shape, &iterations}));
    CU_ASSERT_OK(cuCtxSynchronize());
    EXPECT_EQ(Download<unsigned>(torn, 1)[0], 0u) << "shape " << shape;
  }
}

}  // namespace
