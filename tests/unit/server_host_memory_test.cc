// Page-locked memory of the server's process (staging buffers, kernel turns' gates) on the
// software GPU, where sessions of different tenants share the process: a tenant's kernel that
// learnt such an address could read another session's staged copy, since CUDA's unified
// addressing (which softgpu follows) lets every context's kernels reach every context's
// page-locked memory. The server tells softgpu that kernels reach none (no tenant's kernel needs
// the server's: softgpuSetKernelHostAccess, softgpu/memory.h).
#include <gtest/gtest.h>

#include <cstring>

#include "server/cuda_driver.h"
#include "server/staging_buffers.h"
#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using namespace test;  // the raw protocol peer (raw_peer.h)

// Copies the 8 bytes at `src` to `dst`.
const char kPeekPtx[] =
    ".version 7.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry peek(.param .u64 src, .param .u64 dst)\n{\n"
    "  .reg .b64 %rd<4>;\n"
    "  ld.param.u64 %rd1, [src];\n  ld.param.u64 %rd2, [dst];\n"
    "  ld.global.u64 %rd3, [%rd1];\n  st.global.u64 [%rd2], %rd3;\n  ret;\n}\n";

class ServerHostMemoryTest : public RawServerTest {};

TEST_F(ServerHostMemoryTest, ATenantsKernelDoesNotReachAnotherSessionsStagingBuffer) {
  if (options_.backend != "softgpu") GTEST_SKIP() << "the software GPU's process-wide memory";
  // Another session's staging buffer holding its tenant's bytes: made here, in the server's
  // process (the same softgpu instance), in a context of its own, as the server makes one.
  server::CudaDriver drv;
  ASSERT_TRUE(server::CudaDriver::Load(RGPU_SOFTGPU_LIBRARY, &drv).ok());
  CUdevice dev;
  ASSERT_EQ(drv.cuDeviceGet(&dev, 0), CUDA_SUCCESS);
  CUcontext other = nullptr;
  ASSERT_EQ(drv.cuCtxCreate(&other, nullptr, 0, dev), CUDA_SUCCESS);
  server::StagingBudget budget(1 << 20);
  auto staging = std::make_unique<server::StagingBuffers>(drv, &budget);
  void* staged = staging->Take(4096);
  ASSERT_NE(staged, nullptr);
  const uint64_t secret = 0x5ec2e75ec2e75ec2ull;
  memcpy(staged, &secret, sizeof secret);
  drv.cuCtxSetCurrent(nullptr);

  // A tenant whose kernel reads that address (it guessed or learnt it) into its own memory.
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  const uint64_t dst = Alloc(ch.get(), ctx, 8);
  ASSERT_NE(dst, 0u);
  wire::Envelope m = Exchange(ch.get(), Call(3, Op::kModuleLoadData, ctx, {}), kPeekPtx);
  ASSERT_EQ(m.reply().result(), CUDA_SUCCESS) << m.reply().message();
  wire::Envelope f =
      Exchange(ch.get(), Call(4, Op::kModuleGetFunction, ctx, {m.reply().values(0)}), "peek");
  ASSERT_EQ(f.reply().result(), CUDA_SUCCESS);
  std::string params(16, '\0');
  const uint64_t src = reinterpret_cast<uint64_t>(staged);
  memcpy(params.data(), &src, 8);
  memcpy(params.data() + 8, &dst, 8);
  EXPECT_EQ(Result(ch.get(),
                   Call(5, Op::kLaunchKernel, ctx, {f.reply().values(0), 1, 1, 1, 1, 1, 1, 0, 0}),
                   params),
            CUDA_SUCCESS);
  EXPECT_EQ(Result(ch.get(), Call(6, Op::kCtxSynchronize, ctx, {})), CUDA_ERROR_ILLEGAL_ADDRESS);
  std::string back;
  wire::Envelope r = Exchange(ch.get(), Call(7, Op::kMemcpyDtoH, ctx, {dst, 8, 0, 0}), "", &back);
  if (r.reply().result() == CUDA_SUCCESS) {
    ASSERT_EQ(back.size(), 8u);
    uint64_t got = 0;
    memcpy(&got, back.data(), 8);
    EXPECT_NE(got, secret);
  }
  staging.reset();
  drv.cuCtxDestroy(other);
}

}  // namespace
}  // namespace rgpu
