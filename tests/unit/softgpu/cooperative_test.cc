// Cooperative launches (cuLaunchCooperativeKernel, cuLaunchKernelEx with
// CU_LAUNCH_ATTRIBUTE_COOPERATIVE): grid-wide synchronisation through cooperative_groups, the
// co-residency limit, the kernel timeout and abort on grids spinning at a grid barrier; and the
// block-level split barriers (cuda::barrier, mbarrier instructions) that make warps of a block
// wait for each other outside bar.sync.
#include <cuda.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "test_util.h"

extern "C" CUresult softgpuCtxAbort(CUcontext ctx);
extern "C" CUresult softgpuCtxSetKernelTimeout(CUcontext ctx, unsigned long long ms);

namespace {

using softgpu_test::KernelFile;

class CooperativeTest : public softgpu_test::KernelTest {
 protected:
  void SetUp() override {
    KernelTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const std::string ptx = KernelFile("cooperative_kernels.ptx");
    ASSERT_FALSE(ptx.empty());
    CU_ASSERT_OK(cuModuleLoadData(&coop_, ptx.c_str()));
    CU_ASSERT_OK(cuDeviceGetAttribute(&sms_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
  }
  CUfunction Coop(const char* name) {
    CUfunction f = nullptr;
    EXPECT_EQ(cuModuleGetFunction(&f, coop_, name), CUDA_SUCCESS) << name;
    return f;
  }
  // The most blocks of `threads` that can be resident together (what a cooperative launch may
  // use).
  unsigned Resident(CUfunction f, int threads, size_t shared = 0) {
    int per_sm = 0;
    EXPECT_EQ(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, threads, shared),
              CUDA_SUCCESS);
    return static_cast<unsigned>(per_sm * sms_);
  }
  CUresult LaunchCoop(CUfunction f, unsigned grid, unsigned block, std::vector<void*> args,
                      unsigned shared = 0, CUstream stream = nullptr) {
    return cuLaunchCooperativeKernel(f, grid, 1, 1, block, 1, 1, shared, stream, args.data());
  }
  CUmodule coop_ = nullptr;
  int sms_ = 0;
};

TEST_F(CooperativeTest, DeviceAttributes) {
  int coop = -1, multi = -1;
  CU_ASSERT_OK(cuDeviceGetAttribute(&coop, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 0));
  CU_ASSERT_OK(
      cuDeviceGetAttribute(&multi, CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH, 0));
  EXPECT_EQ(coop, 1);
  EXPECT_EQ(multi, 0);
}

// Phase one writes per-block partial sums, block 0 adds them after a grid sync, every block
// reads the total after a second one: without a real grid barrier block 0 would add partial sums
// that are not written yet.
TEST_F(CooperativeTest, MultiBlockReductionWithGridSync) {
  CUfunction f = Coop("coop_reduce");
  const unsigned threads = 64, blocks = Resident(f, threads);
  ASSERT_GE(blocks, 2u);
  const int n = 100003;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(0, 1);
  std::vector<float> in(n);
  double want = 0;
  for (float& v : in) {
    v = dist(rng);
    want += v;
  }
  CUdeviceptr din = Upload(in), partial, out;
  CU_ASSERT_OK(cuMemAlloc(&partial, blocks * sizeof(float)));
  CU_ASSERT_OK(cuMemAlloc(&out, (blocks + 1) * sizeof(float)));
  CU_ASSERT_OK(cuMemsetD32(partial, 0, blocks));
  CU_ASSERT_OK(cuMemsetD32(out, 0, blocks + 1));
  int count = n;
  CU_ASSERT_OK(LaunchCoop(f, blocks, threads, {&din, &count, &partial, &out}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<float> got = Download<float>(out, blocks + 1);
  EXPECT_NEAR(got[0], want, want * 1e-5);
  for (unsigned b = 0; b < blocks; ++b) EXPECT_EQ(got[1 + b], got[0]) << "block " << b;
}

// Many grid syncs in a loop, with blocks arriving at different times: after each sync every
// block sees every thread's increment of that round.
TEST_F(CooperativeTest, GridSyncInALoop) {
  CUfunction f = Coop("coop_sync_rounds");
  const unsigned threads = 64, blocks = Resident(f, threads);
  const int rounds = 12;
  CUdeviceptr counters, errors;
  CU_ASSERT_OK(cuMemAlloc(&counters, rounds * 4));
  CU_ASSERT_OK(cuMemAlloc(&errors, blocks * 4));
  CU_ASSERT_OK(cuMemsetD32(counters, 0, rounds));
  CU_ASSERT_OK(cuMemsetD32(errors, 0, blocks));
  int r = rounds;
  CU_ASSERT_OK(LaunchCoop(f, blocks, threads, {&counters, &errors, &r}));
  CU_ASSERT_OK(cuCtxSynchronize());
  EXPECT_EQ(Download<unsigned>(errors, blocks), std::vector<unsigned>(blocks, 0));
  EXPECT_EQ(Download<unsigned>(counters, rounds), std::vector<unsigned>(rounds, blocks * threads));
}

// Two cooperative grids on two streams at once, each as large as the device allows: both
// finish (each has its own grid barrier, and neither needs the other's threads).
TEST_F(CooperativeTest, ConcurrentCooperativeGridsOnTwoStreams) {
  CUfunction f = Coop("coop_sync_rounds");
  const unsigned threads = 32, blocks = Resident(f, threads);
  const int rounds = 4;
  CUstream streams[2];
  CUdeviceptr counters[2], errors[2];
  for (int i = 0; i < 2; ++i) {
    CU_ASSERT_OK(cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING));
    CU_ASSERT_OK(cuMemAlloc(&counters[i], rounds * 4));
    CU_ASSERT_OK(cuMemAlloc(&errors[i], blocks * 4));
    CU_ASSERT_OK(cuMemsetD32(counters[i], 0, rounds));
    CU_ASSERT_OK(cuMemsetD32(errors[i], 0, blocks));
  }
  int r = rounds;
  for (int i = 0; i < 2; ++i) {
    CU_ASSERT_OK(LaunchCoop(f, blocks, threads, {&counters[i], &errors[i], &r}, 0, streams[i]));
  }
  CU_ASSERT_OK(cuCtxSynchronize());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(Download<unsigned>(errors[i], blocks), std::vector<unsigned>(blocks, 0));
    EXPECT_EQ(Download<unsigned>(counters[i], rounds),
              std::vector<unsigned>(rounds, blocks * threads));
    CU_ASSERT_OK(cuStreamDestroy(streams[i]));
  }
}

TEST_F(CooperativeTest, GridLargerThanResidentIsRefused) {
  CUfunction f = Coop("coop_sync_once");
  CUdeviceptr out;
  CU_ASSERT_OK(cuMemAlloc(&out, 1 << 20));
  const unsigned blocks = Resident(f, 128);
  CU_EXPECT_EQ(LaunchCoop(f, blocks + 1, 128, {&out}), CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  // Dynamic shared memory lowers residency: with 40 KB per block, as many blocks fit per SM as
  // 40 KB goes into the architecture's shared memory per SM (1 on 7.5, 2 on 12.0).
  const unsigned shared = 40 * 1024;
  int shared_per_sm = 0;
  CU_ASSERT_OK(cuDeviceGetAttribute(&shared_per_sm,
                                    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 0));
  const unsigned fit = static_cast<unsigned>(shared_per_sm) / shared * sms_;
  ASSERT_EQ(Resident(f, 128, shared), fit);
  CU_EXPECT_EQ(LaunchCoop(f, fit + 1, 128, {&out}, shared),
               CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  // The same through cuLaunchKernelEx.
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  attr.value.cooperative = 1;
  CUlaunchConfig config{};
  config.gridDimX = blocks + 1;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 128;
  config.blockDimY = config.blockDimZ = 1;
  config.attrs = &attr;
  config.numAttrs = 1;
  void* args[] = {&out};
  CU_EXPECT_EQ(cuLaunchKernelEx(&config, f, args, nullptr),
               CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  // What fits runs, and the refusals left the context healthy.
  CU_ASSERT_OK(LaunchCoop(f, blocks, 128, {&out}));
  CU_ASSERT_OK(LaunchCoop(f, sms_, 128, {&out}, shared));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<unsigned> got = Download<unsigned>(out, blocks * 128);
  EXPECT_EQ(got, std::vector<unsigned>(blocks * 128, 1));
}

// cooperative_groups sees a valid grid group (and its size and ranks) only in a cooperative
// launch, whether made by cuLaunchCooperativeKernel or cuLaunchKernelEx.
TEST_F(CooperativeTest, GridGroupThroughEachLaunchPath) {
  CUfunction f = Coop("coop_grid_info");
  const unsigned threads = 96, blocks = 3, total = threads * blocks;
  CUdeviceptr valid, sizes, ranks;
  CU_ASSERT_OK(cuMemAlloc(&valid, total * 4));
  CU_ASSERT_OK(cuMemAlloc(&sizes, total * 8));
  CU_ASSERT_OK(cuMemAlloc(&ranks, total * 8));
  auto run = [&](int how) {
    EXPECT_EQ(cuMemsetD32(valid, 7, total), CUDA_SUCCESS);
    void* args[] = {&valid, &sizes, &ranks};
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attr.value.cooperative = how == 2 ? 1 : 0;
    CUlaunchConfig config{};
    config.gridDimX = blocks;
    config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = threads;
    config.blockDimY = config.blockDimZ = 1;
    config.attrs = &attr;
    config.numAttrs = 1;
    switch (how) {
      case 0:
        EXPECT_EQ(cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, nullptr, args, nullptr),
                  CUDA_SUCCESS);
        break;
      case 1:
        EXPECT_EQ(cuLaunchCooperativeKernel(f, blocks, 1, 1, threads, 1, 1, 0, nullptr, args),
                  CUDA_SUCCESS);
        break;
      default:
        EXPECT_EQ(cuLaunchKernelEx(&config, f, args, nullptr), CUDA_SUCCESS);
        break;
    }
    EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    return Download<unsigned>(valid, total);
  };
  EXPECT_EQ(run(0), std::vector<unsigned>(total, 0));
  EXPECT_EQ(run(1), std::vector<unsigned>(total, 1));
  EXPECT_EQ(run(2), std::vector<unsigned>(total, 1));
  const std::vector<unsigned long long> s = Download<unsigned long long>(sizes, total);
  const std::vector<unsigned long long> r = Download<unsigned long long>(ranks, total);
  for (unsigned t = 0; t < total; ++t) {
    EXPECT_EQ(s[t], total);
    EXPECT_EQ(r[t], t);
  }
  // cuLaunchKernelEx with the attribute set to 0 is an ordinary launch.
  void* args[] = {&valid, &sizes, &ranks};
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  attr.value.cooperative = 0;
  CUlaunchConfig config{};
  config.gridDimX = blocks;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = threads;
  config.blockDimY = config.blockDimZ = 1;
  config.attrs = &attr;
  config.numAttrs = 1;
  CU_ASSERT_OK(cuLaunchKernelEx(&config, f, args, nullptr));
  CU_ASSERT_OK(cuCtxSynchronize());
  EXPECT_EQ(Download<unsigned>(valid, total), std::vector<unsigned>(total, 0));
}

// The grid workspace a cooperative launch uses is released once the launch has run.
TEST_F(CooperativeTest, WorkspaceIsReleased) {
  CUfunction f = Coop("coop_sync_once");
  CUdeviceptr out;
  CU_ASSERT_OK(cuMemAlloc(&out, 64 * 4));
  CU_ASSERT_OK(cuCtxSynchronize());
  size_t free_before = 0, free_after = 0, total = 0;
  CU_ASSERT_OK(cuMemGetInfo(&free_before, &total));
  for (int i = 0; i < 3; ++i) CU_ASSERT_OK(LaunchCoop(f, 2, 32, {&out}));
  CU_ASSERT_OK(cuCtxSynchronize());
  CU_ASSERT_OK(cuMemGetInfo(&free_after, &total));
  EXPECT_EQ(free_after, free_before);
}

// A grid sync in an ordinary launch traps, as cooperative_groups does on a GPU (the grid group
// is invalid there): the launch fails instead of hanging.
TEST_F(CooperativeTest, GridSyncOutsideCooperativeLaunchFails) {
  CUfunction f = Coop("coop_sync_once");
  CUdeviceptr out;
  CU_ASSERT_OK(cuMemAlloc(&out, 4 * 64 * 4));
  testing::internal::CaptureStderr();
  CU_ASSERT_OK(Launch(f, 4, 64, {&out}));
  CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_LAUNCH_FAILED);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("trap"), std::string::npos) << err;
}

// Grids that never finish: the kernel timeout ends them (blocks spinning at a grid barrier that
// one block never reaches, and a grid that syncs forever).
TEST_F(CooperativeTest, EndlessCooperativeKernelTimesOut) {
  for (int skip_block0 : {1, 0}) {
    CUcontext ctx;
    CU_ASSERT_OK(cuCtxCreate(&ctx, nullptr, 0, 0));
    CUmodule m;
    CU_ASSERT_OK(cuModuleLoadData(&m, KernelFile("cooperative_kernels.ptx").c_str()));
    CUfunction f;
    CU_ASSERT_OK(cuModuleGetFunction(&f, m, "coop_endless"));
    CUdeviceptr flag;
    CU_ASSERT_OK(cuMemAlloc(&flag, 4));
    CU_ASSERT_OK(cuMemsetD32(flag, 0, 1));
    CU_ASSERT_OK(softgpuCtxSetKernelTimeout(ctx, 200));
    const unsigned blocks = Resident(f, 64);
    testing::internal::CaptureStderr();
    const auto start = std::chrono::steady_clock::now();
    CU_ASSERT_OK(LaunchCoop(f, blocks, 64, {&flag, &skip_block0}));
    CU_EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_LAUNCH_TIMEOUT);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_LT(seconds, 10.0) << "skip_block0 " << skip_block0;
    EXPECT_NE(err.find("RGPU_SOFTGPU_KERNEL_TIMEOUT_MS"), std::string::npos) << err;
    CU_ASSERT_OK(cuCtxDestroy(ctx));
    CU_ASSERT_OK(cuCtxSetCurrent(ctx_));
  }
}

// softgpuCtxAbort from another thread stops a cooperative grid spinning at a grid barrier.
TEST_F(CooperativeTest, EndlessCooperativeKernelIsAborted) {
  CUcontext ctx;
  CU_ASSERT_OK(cuCtxCreate(&ctx, nullptr, 0, 0));
  CUmodule m;
  CU_ASSERT_OK(cuModuleLoadData(&m, KernelFile("cooperative_kernels.ptx").c_str()));
  CUfunction f;
  CU_ASSERT_OK(cuModuleGetFunction(&f, m, "coop_endless"));
  CUdeviceptr flag;
  CU_ASSERT_OK(cuMemAlloc(&flag, 4));
  CU_ASSERT_OK(cuMemsetD32(flag, 0, 1));
  int skip_block0 = 1;
  const unsigned blocks = Resident(f, 64);
  CU_ASSERT_OK(LaunchCoop(f, blocks, 64, {&flag, &skip_block0}));
  std::thread aborter([ctx] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    EXPECT_EQ(softgpuCtxAbort(ctx), CUDA_SUCCESS);
  });
  const auto start = std::chrono::steady_clock::now();
  const CUresult r = cuCtxSynchronize();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  aborter.join();
  EXPECT_NE(r, CUDA_SUCCESS);
  EXPECT_LT(seconds, 10.0);
  CU_ASSERT_OK(cuCtxDestroy(ctx));
  CU_ASSERT_OK(cuCtxSetCurrent(ctx_));
}

// cuda::barrier arrive_and_wait between the warps of a block (an ordinary launch): warps that
// wait must let the others reach the barrier, and nobody passes it early.
TEST_F(CooperativeTest, BlockBarrierArriveAndWait) {
  CUfunction f = Coop("block_barrier_exchange");
  for (unsigned threads : {32u, 96u, 256u}) {
    CUdeviceptr errors;
    CU_ASSERT_OK(cuMemAlloc(&errors, 4));
    CU_ASSERT_OK(cuMemsetD32(errors, 0, 1));
    int rounds = 5;
    CU_ASSERT_OK(Launch(f, 3, threads, {&errors, &rounds}));
    CU_ASSERT_OK(cuCtxSynchronize());
    EXPECT_EQ(Download<int>(errors, 1)[0], 0) << threads << " threads";
    CU_ASSERT_OK(cuMemFree(errors));
  }
}

// mbarrier.init/arrive/arrive_drop/test_wait/try_wait.parity across the warps of a block.
TEST_F(CooperativeTest, MbarrierPhases) {
  CUfunction f = Coop("mbarrier_exchange");
  CUdeviceptr errors, early;
  CU_ASSERT_OK(cuMemAlloc(&errors, 4));
  CU_ASSERT_OK(cuMemAlloc(&early, 4));
  for (int drop_round : {3, 100}) {
    CU_ASSERT_OK(cuMemsetD32(errors, 0, 1));
    CU_ASSERT_OK(cuMemsetD32(early, 0, 1));
    int rounds = 6;
    CU_ASSERT_OK(Launch(f, 2, 128, {&errors, &early, &rounds, &drop_round}));
    CU_ASSERT_OK(cuCtxSynchronize());
    EXPECT_EQ(Download<int>(errors, 1)[0], 0) << "drop_round " << drop_round;
    EXPECT_EQ(Download<int>(early, 1)[0], 0) << "drop_round " << drop_round;
  }
}

// The counts an mbarrier keeps: pending arrivals, arrive counts, phase completion and parity.
TEST_F(CooperativeTest, MbarrierCounts) {
  CUfunction f = Coop("mbarrier_counts");
  CUdeviceptr out;
  CU_ASSERT_OK(cuMemAlloc(&out, 8 * 8));
  CU_ASSERT_OK(cuMemsetD32(out, 0xff, 16));
  CU_ASSERT_OK(Launch(f, 1, 1, {&out}));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<unsigned long long> got = Download<unsigned long long>(out, 7);
  EXPECT_EQ(got, (std::vector<unsigned long long>{3, 2, 0, 1, 1, 0, 4}));
}

}  // namespace
