// The fragmentation measures (registry/fragmentation.h), the workload they weigh
// (registry/workload.h) and the fragmentation-aware policies (registry/fragmentation_policy.h)
// on hand-built nodes, every figure computed by hand in the comments.
#include "registry/fragmentation.h"

#include <gtest/gtest.h>

#include "registry/fragmentation_policy.h"
#include "registry/placement_policies.h"
#include "registry/workload.h"

namespace rgpu::registry {
namespace {

constexpr uint64_t G = 1ull << 30;

uint32_t AddNode(Cluster* c, uint64_t cores, int gpus, const std::string& model = "T4") {
  NodeLoad n;
  n.cpu_milli_total = cores * 1000;
  const uint32_t node = c->AddNode(n);
  for (int i = 0; i < gpus; ++i) {
    GpuLoad g;
    g.placeable = true;
    g.model = model;
    c->AddGpu(node, g);
  }
  return node;
}

PlacementAsk Shape(uint32_t gpus, uint32_t milli, uint64_t cores) {
  PlacementAsk a;
  a.gpus = gpus;
  a.milli = milli;
  a.cpu_milli = cores * 1000;
  return a;
}

void Observe(Workload* w, const PlacementAsk& a, int times) {
  for (int i = 0; i < times; ++i) w->Observe(a);
}

// Four GPUs with 1000, 1000, 500 and 200 thousandths free (2700 idle); shapes A (one GPU x 600,
// 2 cores, 3 of 4 requests) and B (two whole GPUs, 4 cores, 1 of 4).
class FragmentationOnFourGpus : public ::testing::Test {
 protected:
  void SetUp() override {
    AddNode(&cluster, 16, 4);
    cluster.gpus[2].milli_committed = 500;
    cluster.gpus[3].milli_committed = 800;
    Observe(&workload, Shape(1, 600, 2), 3);   // shape 0
    Observe(&workload, Shape(2, 1000, 4), 1);  // shape 1
  }
  uint64_t Fragment(size_t shape, FragmentMeasure m) {
    return ShapeFragment(FreeOf(cluster, 0, &workload), workload, shape, m);
  }
  double Fragmentation(FragmentMeasure m) {
    return NodeFragmentation(FreeOf(cluster, 0, &workload), workload, m);
  }
  Cluster cluster;
  Workload workload;
};

TEST_F(FragmentationOnFourGpus, FgdCountsThePiecesTooSmallOrAllWhenTheTaskCannotRun) {
  // A runs (CPU 16 >= 2; GPUs 0 and 1 have >= 600): the 500 and 200 pieces, 700. B runs too
  // (two whole GPUs, 4 cores): the same pieces, 700.
  EXPECT_EQ(Fragment(0, FragmentMeasure::kFgd), 700u);
  EXPECT_EQ(Fragment(1, FragmentMeasure::kFgd), 700u);
  EXPECT_DOUBLE_EQ(Fragmentation(FragmentMeasure::kFgd), 0.75 * 700 + 0.25 * 700);
  // Three cores left: A still runs (700), B cannot (all 2700 idle).
  cluster.nodes[0].cpu_milli_committed = 13000;
  EXPECT_EQ(Fragment(0, FragmentMeasure::kFgd), 700u);
  EXPECT_EQ(Fragment(1, FragmentMeasure::kFgd), 2700u);
  EXPECT_DOUBLE_EQ(Fragmentation(FragmentMeasure::kFgd), 0.75 * 700 + 0.25 * 2700);  // 1200
}

TEST_F(FragmentationOnFourGpus, ReachAlsoCountsWhatTheCpuLeavesOutOfReach) {
  // With 16 cores, 8 copies of A could come, and they would reach both usable GPUs: 700.
  EXPECT_EQ(Fragment(0, FragmentMeasure::kReach), 700u);
  EXPECT_EQ(Fragment(1, FragmentMeasure::kReach), 700u);
  // Three cores: one copy of A, which reaches one whole GPU: 2700 - 1000 = 1700; none of B: 2700.
  cluster.nodes[0].cpu_milli_committed = 13000;
  EXPECT_EQ(Fragment(0, FragmentMeasure::kReach), 1700u);
  EXPECT_EQ(Fragment(1, FragmentMeasure::kReach), 2700u);
  EXPECT_DOUBLE_EQ(Fragmentation(FragmentMeasure::kReach), 0.75 * 1700 + 0.25 * 2700);  // 1950
}

TEST(Fragmentation, ReachCountsWholeGpusASeveralGpuTaskLeavesOver) {
  Cluster c;
  AddNode(&c, 0, 8);                                             // CPU not tracked
  for (int g = 3; g < 8; ++g) c.gpus[g].milli_committed = 1000;  // three whole GPUs free
  Workload w;
  w.Observe(Shape(2, 1000, 0));
  const NodeFree free = FreeOf(c, 0, &w);
  EXPECT_EQ(ShapeFragment(free, w, 0, FragmentMeasure::kFgd), 0u);       // nothing too small
  EXPECT_EQ(ShapeFragment(free, w, 0, FragmentMeasure::kReach), 1000u);  // one copy, 2 GPUs
  // A third of a GPU on GPUs with 1000 and 250 free: the 250 piece either way.
  c.gpus[0].milli_committed = 750;
  for (int g = 1; g < 3; ++g) c.gpus[g].milli_committed = 1000;
  c.gpus[3].milli_committed = 0;
  w.Observe(Shape(1, 300, 0));
  const NodeFree free2 = FreeOf(c, 0, &w);
  EXPECT_EQ(ShapeFragment(free2, w, 1, FragmentMeasure::kFgd), 250u);
  EXPECT_EQ(ShapeFragment(free2, w, 1, FragmentMeasure::kReach), 250u);
}

TEST(Fragmentation, TasksWithoutGpusCountOnlyUnderFgdAndOnlyWhenTheyCannotRun) {
  Cluster c;
  AddNode(&c, 4, 2);
  Workload w;
  w.Observe(Shape(0, 0, 4));
  EXPECT_EQ(ShapeFragment(FreeOf(c, 0, &w), w, 0, FragmentMeasure::kFgd), 0u);
  c.nodes[0].cpu_milli_committed = 1000;  // 3 cores: it cannot run, the 2000 idle count
  EXPECT_EQ(ShapeFragment(FreeOf(c, 0, &w), w, 0, FragmentMeasure::kFgd), 2000u);
  EXPECT_EQ(ShapeFragment(FreeOf(c, 0, &w), w, 0, FragmentMeasure::kReach), 0u);
}

TEST(Fragmentation, ShapesOfOtherModelsFindAllIdleComputeUnusable) {
  Cluster c;
  AddNode(&c, 0, 2, "V100M16");
  c.gpus[1].placeable = false;  // offline GPUs are not idle capacity
  Workload w;
  PlacementAsk t4 = Shape(1, 500, 0);
  t4.gpu_models = {"T4"};
  w.Observe(t4);
  EXPECT_EQ(ShapeFragment(FreeOf(c, 0, &w), w, 0, FragmentMeasure::kFgd), 1000u);
  EXPECT_EQ(ShapeFragment(FreeOf(c, 0, &w), w, 0, FragmentMeasure::kReach), 1000u);
}

TEST(PlacementWorkload, CountsShapesAndForgetsTheRarestBeyondItsLimit) {
  Workload w(2);
  Observe(&w, Shape(1, 500, 1), 3);
  const uint64_t first = w.generation(0);
  PlacementAsk excluded = Shape(1, 500, 1);
  excluded.excluded = {"gpu-1"};  // exclusions are not part of a shape
  w.Observe(excluded);
  EXPECT_EQ(w.size(), 1u);
  w.Observe(Shape(1, 1000, 8));
  ASSERT_EQ(w.size(), 2u);
  EXPECT_DOUBLE_EQ(w.popularity(0), 0.8);
  EXPECT_DOUBLE_EQ(w.popularity(1), 0.2);
  const uint64_t second = w.generation(1);
  w.Observe(Shape(2, 1000, 8));  // a third shape takes the place of the rarest (1 request)
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w.shape(1).gpus, 2u);
  EXPECT_NE(w.generation(1), second);
  EXPECT_EQ(w.generation(0), first);       // counts changed, the shape did not
  EXPECT_DOUBLE_EQ(w.popularity(0), 0.8);  // 4 of the 5 requests still counted
  EXPECT_DOUBLE_EQ(w.popularity(1), 0.2);
  w.Observe(Shape(1, 1000, 8));  // back, in place of the newest (1 request, the first of those)
  EXPECT_EQ(w.shape(1).cpu_milli, 8000u);
  EXPECT_EQ(w.shape(1).gpus, 1u);
}

TEST(PlacementWorkload, KnowsWhichGpuKindsAShapeAccepts) {
  Workload w;
  PlacementAsk exact = Shape(1, 500, 1);
  exact.gpu_models = {"T4", "V100M32"};
  PlacementAsk typed = Shape(1, 500, 1);
  typed.gpu_type = "v100";
  typed.backend = "cuda";
  w.Observe(exact);
  const uint32_t t4 = w.KindOf("T4", "cuda");
  w.Observe(typed);
  const uint32_t v100 = w.KindOf("V100M16", "cuda");
  const uint32_t v100hip = w.KindOf("V100M16", "hip");
  EXPECT_TRUE(w.Accepts(0, t4));
  EXPECT_FALSE(w.Accepts(0, v100));  // exact names only
  EXPECT_FALSE(w.Accepts(1, t4));
  EXPECT_TRUE(w.Accepts(1, v100));  // a substring, any case
  EXPECT_FALSE(w.Accepts(1, v100hip));
  EXPECT_EQ(w.KindOf("T4", "cuda"), t4);
}

// Two nodes of two T4s: node 0 with 8 cores, node 1 with 64. The workload: half of the requests
// whole GPUs with 4 cores (T), half CPU-only pods of 4 cores (C).
class FragmentationCpuStranding : public ::testing::Test {
 protected:
  void SetUp() override {
    AddNode(&cluster, 8, 2);
    AddNode(&cluster, 64, 2);
  }
  std::optional<PlacementChoice> Place(PlacementPolicy* p, const PlacementAsk& a) {
    p->Observe(a);
    auto choice = p->Choose(cluster, a);
    if (choice) Commit(&cluster, a, *choice);
    return choice;
  }
  Cluster cluster;
  const PlacementAsk t = Shape(1, 1000, 4);
  const PlacementAsk cpu = Shape(0, 0, 4);
};

TEST_F(FragmentationCpuStranding, FgdLetsACpuPodStrandAGpuAndReachDoesNot) {
  std::unique_ptr<PlacementPolicy> fgd, reach;
  ASSERT_TRUE(MakePlacementPolicy("fgd", 1, &fgd).ok());
  ASSERT_TRUE(MakePlacementPolicy("reach", 1, &reach).ok());
  fgd->Observe(t);
  reach->Observe(t);
  // Under FGD's measure T still runs on node 0 after a 4-core pod (4 cores left), so neither
  // node's fragmentation grows, and the tie goes to node 0 (best fit scores both 2: twice the
  // largest fraction left, their untouched GPUs; then the earlier node). Under reach, node 0 would
  // then hold one T, which reaches one GPU of two: T's fragment grows 0 -> 1000, weighted by T's
  // popularity (1/2) and the midpoint (1/2): +250; node 1 keeps 15 copies' worth: +0. Reach puts
  // the pod on node 1.
  EXPECT_EQ(Place(fgd.get(), cpu)->node, 0u);
  Release(&cluster, cpu, {0, {}});
  EXPECT_EQ(Place(reach.get(), cpu)->node, 1u);
  Cluster after = cluster;
  Commit(&after, cpu, {0, {}});
  Workload w;
  w.Observe(t);
  w.Observe(cpu);
  EXPECT_DOUBLE_EQ(NodeFragmentation(FreeOf(after, 0, &w), w, FragmentMeasure::kReach), 500);
  EXPECT_DOUBLE_EQ(NodeFragmentation(FreeOf(after, 0, &w), w, FragmentMeasure::kFgd), 0);
  // So under reach the four GPUs still take four T pods; under FGD's choice the cluster would
  // take three (node 0's 4 remaining cores hold one).
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(Place(reach.get(), t)) << i;
}

TEST(FragmentationPolicy, PlacesWhereTheWeightedFragmentationGrowsLeast) {
  // Node 0: GPUs with 500 and 1000 free; node 1: two free GPUs. Shapes: half a GPU (p 1/2) and
  // a whole one (p 1/2). Node 0's fragmentation now: the half fits both GPUs (0), the whole
  // one only GPU 1 (the 500 piece): 250. Half a GPU on node 0's GPU 0 leaves 0 and 1000: 0,
  // a growth of -250; on its GPU 1, 500 and 500: the whole one cannot run, 1000 idle: 500,
  // +250; on node 1: 500 and 1000 (from 0): +250. GPU 0 of node 0 wins.
  Cluster c;
  AddNode(&c, 0, 2);
  AddNode(&c, 0, 2);
  c.gpus[0].milli_committed = 500;
  for (const char* name : {"fgd", "reach"}) {
    std::unique_ptr<PlacementPolicy> p;
    ASSERT_TRUE(MakePlacementPolicy(name, 1, &p).ok());
    p->Observe(Shape(1, 1000, 0));
    p->Observe(Shape(1, 500, 0));
    auto choice = p->Choose(c, Shape(1, 500, 0));
    ASSERT_TRUE(choice) << name;
    EXPECT_EQ(choice->gpus, std::vector<uint32_t>{0}) << name;
  }
  Workload w;
  w.Observe(Shape(1, 1000, 0));
  w.Observe(Shape(1, 500, 0));
  EXPECT_DOUBLE_EQ(NodeFragmentation(FreeOf(c, 0, &w), w, FragmentMeasure::kFgd), 250);
  c.gpus[1].milli_committed = 500;  // the other option on node 0
  EXPECT_DOUBLE_EQ(NodeFragmentation(FreeOf(c, 0, &w), w, FragmentMeasure::kFgd), 500);
}

TEST(FragmentationPolicy, ChoosesOnlyWhatFitsAndTheSameWhateverItCached) {
  Cluster c;
  AddNode(&c, 8, 4);
  AddNode(&c, 2, 8, "V100M32");
  std::unique_ptr<PlacementPolicy> warm, cold;
  ASSERT_TRUE(MakePlacementPolicy("reach", 1, &warm).ok());
  PlacementAsk v100 = Shape(2, 1000, 1);
  v100.gpu_models = {"V100M32"};
  const std::vector<PlacementAsk> asks = {Shape(1, 300, 2), v100, Shape(4, 1000, 2),
                                          Shape(1, 700, 1), Shape(0, 0, 1)};
  for (const auto& a : asks) warm->Observe(a);
  for (int round = 0; round < 3; ++round) {
    for (const auto& a : asks) {
      auto choice = warm->Choose(c, a);
      ASSERT_TRUE(choice);
      EXPECT_TRUE(NodeFits(c, choice->node, a));
      EXPECT_EQ(choice->gpus.size(), a.gpus);
      for (uint32_t g : choice->gpus) {
        EXPECT_EQ(c.gpus[g].node, choice->node);
        EXPECT_TRUE(GpuFits(c.gpus[g], a));
      }
    }
  }
  // A policy that saw the same requests but never chose decides the same.
  ASSERT_TRUE(MakePlacementPolicy("reach", 1, &cold).ok());
  for (const auto& a : asks) cold->Observe(a);
  for (const auto& a : asks) {
    auto w = warm->Choose(c, a), k = cold->Choose(c, a);
    ASSERT_TRUE(w && k);
    EXPECT_EQ(w->node, k->node);
    EXPECT_EQ(w->gpus, k->gpus);
  }
  EXPECT_FALSE(warm->Choose(c, Shape(5, 1000, 3)));  // node 1 has 8 GPUs but 2 cores
  EXPECT_TRUE(warm->Choose(c, Shape(5, 1000, 2)));
}

TEST(FragmentationPolicy, TheWeightIsNamedAndChecked) {
  std::unique_ptr<PlacementPolicy> p;
  ASSERT_TRUE(MakePlacementPolicy("reach:0.25", 1, &p).ok());
  EXPECT_EQ(p->name(), "reach:0.25");
  EXPECT_FALSE(MakePlacementPolicy("reach:2", 1, &p).ok());
  EXPECT_FALSE(MakePlacementPolicy("reach:", 1, &p).ok());
  EXPECT_FALSE(MakePlacementPolicy("reach:x", 1, &p).ok());
  ASSERT_TRUE(MakePlacementPolicy("fgd@256", 1, &p).ok());
  EXPECT_EQ(p->name(), "fgd@256");
  ASSERT_TRUE(MakePlacementPolicy("reach:1@8", 1, &p).ok());
  EXPECT_FALSE(MakePlacementPolicy("fgd:0.5", 1, &p).ok());  // a weight is reach's
  EXPECT_FALSE(MakePlacementPolicy("fgd@0", 1, &p).ok());
  EXPECT_FALSE(MakePlacementPolicy("reach@", 1, &p).ok());
  EXPECT_FALSE(MakePlacementPolicy("fgdx", 1, &p).ok());
}

}  // namespace
}  // namespace rgpu::registry
