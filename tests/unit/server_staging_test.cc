// StagingBuffers (server/staging_buffers.h) on the software GPU: the pinned memory a session's
// staged copies hold never passes its budget, whatever sizes a tenant asks for and across its
// contexts; buffers come back once their stream has passed the copy and are reused; a context's
// buffers give their bytes back to the budget when it goes.
#include <gtest/gtest.h>

#include <cstring>

#include "server/cuda_driver.h"
#include "server/staging_buffers.h"

namespace rgpu::server {
namespace {

constexpr uint64_t kKiB = 1024;

class StagingBuffersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(CudaDriver::Load(RGPU_SOFTGPU_LIBRARY, &drv_).ok());
    ASSERT_EQ(drv_.cuInit(0), CUDA_SUCCESS);
    CUdevice dev;
    ASSERT_EQ(drv_.cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    ASSERT_EQ(drv_.cuCtxCreate(&ctx_, nullptr, 0, dev), CUDA_SUCCESS);
    ASSERT_TRUE(StagingBuffers::Supported(drv_));
  }
  void TearDown() override {
    if (ctx_ != nullptr) drv_.cuCtxDestroy(ctx_);
  }
  CudaDriver drv_;
  CUcontext ctx_ = nullptr;
};

TEST_F(StagingBuffersTest, TheBudgetHoldsAcrossSizesAndContexts) {
  StagingBudget budget(256 * kKiB);
  auto first = std::make_unique<StagingBuffers>(drv_, &budget);
  StagingBuffers second(drv_, &budget);
  // Sizes round up to powers of two from 64 KiB: 100 KiB takes 128 KiB.
  void* a = first->Take(100 * kKiB);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(first->allocated_bytes(), 128 * kKiB);
  void* b = second.Take(64 * kKiB);
  ASSERT_NE(b, nullptr);
  void* c = second.Take(1);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(budget.used.load(), 256 * kKiB);
  // Full: nothing more from either, and nothing larger than the budget, nor a size that wraps.
  EXPECT_EQ(first->Take(1), nullptr);
  EXPECT_EQ(second.Take(64 * kKiB), nullptr);
  EXPECT_EQ(first->Take(~size_t{0}), nullptr);
  EXPECT_EQ(first->Take(size_t{1} << 40), nullptr);
  memset(a, 1, 100 * kKiB);  // the memory is there and writable
  // A context's buffers give their bytes back when it goes.
  first.reset();
  EXPECT_EQ(budget.used.load(), 128 * kKiB);
  auto third = std::make_unique<StagingBuffers>(drv_, &budget);
  EXPECT_NE(third->Take(128 * kKiB), nullptr);
  EXPECT_EQ(budget.used.load(), 256 * kKiB);
}

TEST_F(StagingBuffersTest, ABufferComesBackOnceItsStreamPassedTheCopyAndIsReused) {
  StagingBudget budget(128 * kKiB);
  StagingBuffers staging(drv_, &budget);
  CUstream stream;
  ASSERT_EQ(drv_.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr dst;
  ASSERT_EQ(drv_.cuMemAlloc(&dst, 64 * kKiB), CUDA_SUCCESS);
  void* buffer = staging.Take(64 * kKiB);
  ASSERT_NE(buffer, nullptr);
  memset(buffer, 0x5c, 64 * kKiB);
  ASSERT_EQ(drv_.cuMemcpyHtoDAsync(dst, buffer, 64 * kKiB, stream), CUDA_SUCCESS);
  ASSERT_EQ(staging.ReleaseAfter(buffer, stream), CUDA_SUCCESS);
  // A buffer not taken (or given back twice) is refused.
  EXPECT_EQ(staging.ReleaseAfter(buffer, stream), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(drv_.cuStreamSynchronize(stream), CUDA_SUCCESS);
  unsigned char out[16];
  ASSERT_EQ(drv_.cuMemcpyDtoH(out, dst + 1000, sizeof out), CUDA_SUCCESS);
  for (unsigned char v : out) EXPECT_EQ(v, 0x5c);
  // Free again: the same buffer is taken, no new memory pinned.
  EXPECT_EQ(staging.Take(64 * kKiB), buffer);
  EXPECT_EQ(staging.allocated_bytes(), 64 * kKiB);
}

}  // namespace
}  // namespace rgpu::server
