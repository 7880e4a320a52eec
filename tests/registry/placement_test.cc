// The placement policy (registry/placement.h): best fit over memory and compute share.
#include "registry/placement.h"

#include <gtest/gtest.h>

namespace rgpu::registry {
namespace {

constexpr uint64_t G = 1ull << 30;

GpuLoad Gpu(const std::string& model, uint64_t memory, uint64_t used = 0, uint32_t share = 0) {
  GpuLoad g;
  g.placeable = true;
  g.model = model;
  g.memory_total = memory;
  g.memory_committed = used;
  g.share_committed = share;
  return g;
}

TEST(Placement, TightestFitWins) {
  std::vector<GpuLoad> gpus = {Gpu("A100 80GB", 80 * G), Gpu("T4 16GB", 16 * G),
                               Gpu("A100 40GB", 40 * G)};
  // 12 GiB and half the compute: left free would be 85%/50%, 25%/50%, 70%/50%.
  EXPECT_EQ(ChooseGpu(gpus, {"", 12 * G, 50}), 1);
  // 20 GiB does not fit the 16 GiB card: the 40 GiB one is tighter than the 80.
  EXPECT_EQ(ChooseGpu(gpus, {"", 20 * G, 50}), 2);
}

TEST(Placement, AvoidsStrandingOneResource) {
  // A: all memory free but only 30% compute; B: 20 GiB free and all compute.
  std::vector<GpuLoad> gpus = {Gpu("A", 80 * G, 0, 70), Gpu("B", 80 * G, 60 * G, 0)};
  // On A: 87.5% memory left with 5% compute (score 1.75); on B: 12.5% / 75% (1.5).
  EXPECT_DOUBLE_EQ(FitScore(gpus[0], {"", 10 * G, 25}), 1.75);
  EXPECT_DOUBLE_EQ(FitScore(gpus[1], {"", 10 * G, 25}), 1.5);
  EXPECT_EQ(ChooseGpu(gpus, {"", 10 * G, 25}), 1);
}

TEST(Placement, RespectsTypeStateAndCapacity) {
  std::vector<GpuLoad> gpus = {Gpu("NVIDIA H100", 80 * G), Gpu("NVIDIA A100", 40 * G)};
  EXPECT_EQ(ChooseGpu(gpus, {"h100", 1 * G, 25}), 0);  // case-insensitive substring
  EXPECT_EQ(ChooseGpu(gpus, {"V100", 1 * G, 25}), -1);
  gpus[0].placeable = false;  // offline or revoked
  EXPECT_EQ(ChooseGpu(gpus, {"H100", 1 * G, 25}), -1);
  EXPECT_TRUE(EverFits(gpus, {"H100", 1 * G, 25}));  // it could, once back
  EXPECT_FALSE(EverFits(gpus, {"", 100 * G, 25}));   // nothing is that big
  gpus[1].share_committed = 80;
  EXPECT_EQ(ChooseGpu(gpus, {"", 1 * G, 25}), -1);  // 20% compute left
  EXPECT_EQ(ChooseGpu(gpus, {"", 1 * G, 20}), 1);
  gpus[1].memory_committed = 40 * G;
  EXPECT_EQ(ChooseGpu(gpus, {"", 1, 20}), -1);  // no memory left
}

TEST(Placement, RespectsTheBackendAskedFor) {
  std::vector<GpuLoad> gpus = {Gpu("NVIDIA H100", 80 * G), Gpu("AMD Instinct MI210", 64 * G)};
  gpus[0].backend = "cuda";
  gpus[1].backend = "hip";
  EXPECT_EQ(ChooseGpu(gpus, {"", 1 * G, 25, "hip"}), 1);  // a HIP program's kernels
  EXPECT_EQ(ChooseGpu(gpus, {"", 1 * G, 25, "cuda"}), 0);
  EXPECT_EQ(ChooseGpu(gpus, {"", 70 * G, 25, "hip"}), -1);  // the HIP GPU is too small
  EXPECT_FALSE(EverFits(gpus, {"", 1 * G, 25, "softgpu"}));
  EXPECT_EQ(ChooseGpu(gpus, {"", 1 * G, 25}), 1);  // any backend: the tighter fit
}

TEST(Placement, TiesGoToTheLessLoadedGpu) {
  std::vector<GpuLoad> gpus = {Gpu("A", 16 * G), Gpu("A", 16 * G)};
  gpus[0].leases = 3;
  gpus[1].leases = 1;
  EXPECT_EQ(ChooseGpu(gpus, {"", 4 * G, 25}), 1);
  gpus[1].leases = 3;
  EXPECT_EQ(ChooseGpu(gpus, {"", 4 * G, 25}), 0);  // then the earlier one
}

}  // namespace
}  // namespace rgpu::registry
