// Asynchronous copies with transaction barriers (compute_90 and newer): libcu++'s
// cuda::memcpy_async on a block barrier as nvcc emits it, the bulk copies and mbarrier
// transaction counts by hand, elect.sync, and cp.async's mbarrier arrival; against the host.
#include <cuda.h>
#include <gtest/gtest.h>

#include <vector>

#include "test_util.h"

namespace {

class AsyncCopyTest : public softgpu_test::KernelTest {
 protected:
  const char* PtxFile() const override { return "async_kernels.ptx"; }
};

TEST_F(AsyncCopyTest, MemcpyAsyncOnABlockBarrier) {
  std::vector<float> in(4 * 256);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) * 0.5f - 100;
  CUdeviceptr din = Upload(in), dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, in.size() * sizeof(float)));
  CU_ASSERT_OK(Launch(Function("staged_double"), 4, 96, {&din, &dout}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<float> out = Download<float>(dout, in.size());
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i], 2 * in[i]) << i;
}

TEST_F(AsyncCopyTest, BulkCopiesCompleteTheBarriersTransactions) {
  constexpr int kBlocks = 3, kThreads = 96;
  std::vector<int> in(kBlocks * 64 * 4);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i * 7 + 3);
  CUdeviceptr din = Upload(in), dout, dleaders;
  CU_ASSERT_OK(cuMemAlloc(&dout, in.size() * sizeof(int)));
  CU_ASSERT_OK(cuMemsetD32(dout, 0, in.size()));
  CU_ASSERT_OK(cuMemAlloc(&dleaders, kThreads / 32 * sizeof(unsigned)));
  CU_ASSERT_OK(Launch(Function("bulk_roundtrip"), kBlocks, kThreads, {&din, &dout, &dleaders}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<int> out = Download<int>(dout, in.size());
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i], in[i] + 1) << i;
  EXPECT_EQ(Download<unsigned>(dleaders, kThreads / 32), std::vector<unsigned>(kThreads / 32, 5));
}

TEST_F(AsyncCopyTest, CpAsyncArrivesOnTheBarrierWhenItsCopiesAreDone) {
  std::vector<int> in(128);
  for (int i = 0; i < 128; ++i) in[i] = i * i - 50;
  CUdeviceptr din = Upload(in), dout;
  CU_ASSERT_OK(cuMemAlloc(&dout, 128 * sizeof(int)));
  CU_ASSERT_OK(Launch(Function("cp_async_arrive"), 2, 128, {&din, &dout}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<int> out = Download<int>(dout, 128);
  for (int i = 0; i < 128; ++i) ASSERT_EQ(out[i], in[(i + 1) % 128]) << i;
}

// A bulk copy whose size is not a multiple of 16 faults (the ISA leaves it undefined; softgpu
// says so rather than copying part of it).
TEST_F(AsyncCopyTest, BulkCopyOfAnOddSizeFaults) {
  const char* ptx = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .entry odd(.param .u64 src)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<2>;
  .shared .align 16 .b8 tile[64];
  .shared .align 8 .b64 bar;
  ld.param.u64 %rd1, [src];
  mov.u32 %r1, tile;
  mov.u32 %r2, bar;
  mbarrier.init.shared::cta.b64 [%r2], 1;
  mov.u32 %r3, 20;
  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], %r3, [%r2];
  ret;
}
)";
  CUmodule m;
  CU_ASSERT_OK(cuModuleLoadData(&m, ptx));
  CUfunction f;
  CU_ASSERT_OK(cuModuleGetFunction(&f, m, "odd"));
  CUdeviceptr src;
  CU_ASSERT_OK(cuMemAlloc(&src, 64));
  testing::internal::CaptureStderr();
  CU_ASSERT_OK(Launch(f, 1, 1, {&src}));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_MISALIGNED_ADDRESS);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("not a multiple of 16"), std::string::npos) << err;
}

}  // namespace
