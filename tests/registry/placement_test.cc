// The placement model and the classic policies (registry/placement.h,
// registry/placement_policies.h) on hand-built clusters: what fits, the scores by hand, and the
// choice each policy makes.
#include "registry/placement.h"

#include <gtest/gtest.h>

#include <set>

#include "registry/placement_policies.h"
#include "registry/queue_order.h"

namespace rgpu::registry {
namespace {

constexpr uint64_t G = 1ull << 30;

GpuLoad Gpu(const std::string& model, uint64_t memory, uint64_t used = 0, uint32_t percent = 0) {
  GpuLoad g;
  g.placeable = true;
  g.model = model;
  g.memory_total = memory;
  g.memory_committed = used;
  g.milli_committed = percent * kMilliPerShare;
  return g;
}

// A registry-like cluster: one node (a server, tracking no CPU or memory) holding `gpus`.
Cluster OneServer(const std::vector<GpuLoad>& gpus) {
  Cluster c;
  const uint32_t node = c.AddNode({});
  for (const auto& g : gpus) c.AddGpu(node, g);
  return c;
}

// A registry request: memory and a share in percent on one GPU.
PlacementAsk Ask(const std::string& type, uint64_t memory, uint32_t percent,
                 const std::string& backend = "") {
  PlacementAsk a;
  a.gpu_type = type;
  a.memory = memory;
  a.milli = percent * kMilliPerShare;
  a.backend = backend;
  return a;
}

// The GPU the named policy picks for a one-GPU request, or -1.
int ChooseWith(const std::string& policy, const Cluster& cluster, const PlacementAsk& ask) {
  std::unique_ptr<PlacementPolicy> p;
  EXPECT_TRUE(MakePlacementPolicy(policy, 1, &p).ok());
  auto choice = p->Choose(cluster, ask);
  if (!choice) return -1;
  EXPECT_EQ(choice->gpus.size(), 1u);
  return static_cast<int>(choice->gpus[0]);
}

int BestFit(const Cluster& cluster, const PlacementAsk& ask) {
  return ChooseWith("best-fit", cluster, ask);
}

// A trace-like node: CPU cores, host memory in GiB, `gpus` GPUs of `model`.
uint32_t AddNode(Cluster* c, uint64_t cores, uint64_t memory_gib, int gpus,
                 const std::string& model) {
  NodeLoad n;
  n.cpu_milli_total = cores * 1000;
  n.memory_total = memory_gib * G;
  const uint32_t node = c->AddNode(n);
  for (int i = 0; i < gpus; ++i) {
    GpuLoad g;
    g.placeable = true;
    g.model = model;
    c->AddGpu(node, g);
  }
  return node;
}

PlacementAsk Pod(uint32_t gpus, uint32_t milli, uint64_t cores, uint64_t memory_gib = 0) {
  PlacementAsk a;
  a.gpus = gpus;
  a.milli = milli;
  a.cpu_milli = cores * 1000;
  a.host_memory = memory_gib * G;
  return a;
}

// --- best-fit, the registry's policy on GPUs of servers (the cases it always had) ---

TEST(Placement, TightestFitWins) {
  Cluster c =
      OneServer({Gpu("A100 80GB", 80 * G), Gpu("T4 16GB", 16 * G), Gpu("A100 40GB", 40 * G)});
  // 12 GiB and half the compute: left free would be 85%/50%, 25%/50%, 70%/50%.
  EXPECT_EQ(BestFit(c, Ask("", 12 * G, 50)), 1);
  // 20 GiB does not fit the 16 GiB card: the 40 GiB one is tighter than the 80.
  EXPECT_EQ(BestFit(c, Ask("", 20 * G, 50)), 2);
}

TEST(Placement, AvoidsStrandingOneResource) {
  // A: all memory free but only 30% compute; B: 20 GiB free and all compute.
  Cluster c = OneServer({Gpu("A", 80 * G, 0, 70), Gpu("B", 80 * G, 60 * G, 0)});
  // On A: 87.5% memory left with 5% compute (score 1.75); on B: 12.5% / 75% (1.5).
  EXPECT_DOUBLE_EQ(BestFitScore(c, Ask("", 10 * G, 25), {0, {0}}), 1.75);
  EXPECT_DOUBLE_EQ(BestFitScore(c, Ask("", 10 * G, 25), {0, {1}}), 1.5);
  EXPECT_EQ(BestFit(c, Ask("", 10 * G, 25)), 1);
}

TEST(Placement, RespectsTypeStateAndCapacity) {
  Cluster c = OneServer({Gpu("NVIDIA H100", 80 * G), Gpu("NVIDIA A100", 40 * G)});
  EXPECT_EQ(BestFit(c, Ask("h100", 1 * G, 25)), 0);  // case-insensitive substring
  EXPECT_EQ(BestFit(c, Ask("V100", 1 * G, 25)), -1);
  c.gpus[0].placeable = false;  // offline or revoked
  EXPECT_EQ(BestFit(c, Ask("H100", 1 * G, 25)), -1);
  EXPECT_TRUE(EverFits(c, Ask("H100", 1 * G, 25)));  // it could, once back
  EXPECT_FALSE(EverFits(c, Ask("", 100 * G, 25)));   // nothing is that big
  c.gpus[1].milli_committed = 800;
  EXPECT_EQ(BestFit(c, Ask("", 1 * G, 25)), -1);  // 20% compute left
  EXPECT_EQ(BestFit(c, Ask("", 1 * G, 20)), 1);
  c.gpus[1].memory_committed = 40 * G;
  EXPECT_EQ(BestFit(c, Ask("", 1, 20)), -1);  // no memory left
}

TEST(Placement, RespectsTheBackendAskedFor) {
  Cluster c = OneServer({Gpu("NVIDIA H100", 80 * G), Gpu("AMD Instinct MI210", 64 * G)});
  c.gpus[0].backend = "cuda";
  c.gpus[1].backend = "hip";
  EXPECT_EQ(BestFit(c, Ask("", 1 * G, 25, "hip")), 1);  // a HIP program's kernels
  EXPECT_EQ(BestFit(c, Ask("", 1 * G, 25, "cuda")), 0);
  EXPECT_EQ(BestFit(c, Ask("", 70 * G, 25, "hip")), -1);  // the HIP GPU is too small
  EXPECT_FALSE(EverFits(c, Ask("", 1 * G, 25, "softgpu")));
  EXPECT_EQ(BestFit(c, Ask("", 1 * G, 25)), 1);  // any backend: the tighter fit
}

TEST(Placement, TiesGoToTheLessLoadedGpu) {
  Cluster c = OneServer({Gpu("A", 16 * G), Gpu("A", 16 * G)});
  c.gpus[0].leases = 3;
  c.gpus[1].leases = 1;
  EXPECT_EQ(BestFit(c, Ask("", 4 * G, 25)), 1);
  c.gpus[1].leases = 3;
  EXPECT_EQ(BestFit(c, Ask("", 4 * G, 25)), 0);  // then the earlier one
}

TEST(Placement, ExcludedGpusAreNeverChosen) {
  Cluster c = OneServer({Gpu("A", 16 * G), Gpu("A", 80 * G)});
  c.gpus[0].id = "s/0";
  c.gpus[1].id = "s/1";
  PlacementAsk a = Ask("", 4 * G, 25);
  a.excluded = {"s/0"};
  EXPECT_EQ(BestFit(c, a), 1);  // the tighter one is excluded
  a.excluded = {"s/0", "s/1"};
  EXPECT_EQ(BestFit(c, a), -1);
  EXPECT_FALSE(EverFits(c, a));
}

// --- nodes: CPU, memory, several GPUs, models ---

TEST(Placement, ANodeFitsWhenItsCpuMemoryAndEnoughGpusDo) {
  Cluster c;
  AddNode(&c, 8, 32, 4, "V100");
  EXPECT_TRUE(NodeFits(c, 0, Pod(4, 1000, 8, 32)));
  EXPECT_FALSE(NodeFits(c, 0, Pod(4, 1000, 9, 32)));  // one core short
  EXPECT_FALSE(NodeFits(c, 0, Pod(4, 1000, 8, 33)));  // 1 GiB short
  EXPECT_FALSE(NodeFits(c, 0, Pod(5, 1000, 1)));      // four GPUs only
  EXPECT_TRUE(NodeFits(c, 0, Pod(0, 0, 8)));          // CPU only
  c.gpus[2].milli_committed = 1;                      // one GPU no longer whole
  EXPECT_FALSE(NodeFits(c, 0, Pod(4, 1000, 1)));
  EXPECT_TRUE(NodeFits(c, 0, Pod(3, 1000, 1)));
  EXPECT_TRUE(NodeFits(c, 0, Pod(4, 999, 1)));  // 999 thousandths fit on all four
  PlacementAsk v100 = Pod(1, 500, 1);
  v100.gpu_models = {"T4", "V100"};
  EXPECT_TRUE(NodeFits(c, 0, v100));
  v100.gpu_models = {"T4", "V100M32"};  // exact model names, not substrings
  EXPECT_FALSE(NodeFits(c, 0, v100));
  EXPECT_FALSE(EverFits(c, v100));
  EXPECT_TRUE(EverFits(c, Pod(4, 1000, 8, 32)));
  EXPECT_FALSE(EverFits(c, Pod(8, 1000, 1)));
}

TEST(Placement, CommitAndReleaseMoveTheNodesAndGpusLoads) {
  Cluster c;
  AddNode(&c, 8, 32, 2, "T4");
  const PlacementAsk a = Pod(2, 1000, 3, 10);
  Commit(&c, a, {0, {0, 1}});
  EXPECT_EQ(c.nodes[0].FreeCpu(), 5000u);
  EXPECT_EQ(c.nodes[0].FreeMemory(), 22 * G);
  EXPECT_EQ(c.gpus[0].FreeMilli(), 0u);
  EXPECT_EQ(c.gpus[1].leases, 1u);
  EXPECT_FALSE(NodeFits(c, 0, Pod(1, 1, 1)));
  Release(&c, a, {0, {0, 1}});
  EXPECT_EQ(c.nodes[0].FreeCpu(), 8000u);
  EXPECT_EQ(c.gpus[0].FreeMilli(), 1000u);
  EXPECT_EQ(c.gpus[1].leases, 0u);
  Release(&c, a, {0, {0, 1}});  // never below zero
  EXPECT_EQ(c.nodes[0].cpu_milli_committed, 0u);
}

TEST(Placement, FirstFitTakesTheFirstNodeAndGpusThatFit) {
  Cluster c;
  AddNode(&c, 4, 16, 2, "T4");
  AddNode(&c, 64, 256, 2, "T4");
  std::unique_ptr<PlacementPolicy> p = NewFirstFitPolicy();
  c.gpus[0].milli_committed = 600;
  auto choice = p->Choose(c, Pod(1, 500, 2));
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->node, 0u);
  EXPECT_EQ(choice->gpus, std::vector<uint32_t>{1});  // GPU 0 has 400 left
  choice = p->Choose(c, Pod(1, 500, 8));              // node 0 has 4 cores
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->node, 1u);
  EXPECT_EQ(choice->gpus, std::vector<uint32_t>{2});
  choice = p->Choose(c, Pod(2, 1000, 1));
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->gpus, (std::vector<uint32_t>{2, 3}));
  EXPECT_FALSE(p->Choose(c, Pod(3, 1000, 1)));
}

TEST(Placement, RandomDrawsOnlyWhatFitsAndEveryPartOfIt) {
  Cluster c;
  AddNode(&c, 4, 16, 2, "T4");  // too few cores for the request
  AddNode(&c, 16, 64, 4, "T4");
  AddNode(&c, 16, 64, 4, "T4");
  std::set<uint32_t> nodes, gpus;
  std::unique_ptr<PlacementPolicy> p = NewRandomPolicy(42);
  for (int i = 0; i < 200; ++i) {
    auto choice = p->Choose(c, Pod(2, 1000, 8));
    ASSERT_TRUE(choice);
    ASSERT_EQ(choice->gpus.size(), 2u);
    EXPECT_NE(choice->gpus[0], choice->gpus[1]);
    for (uint32_t g : choice->gpus) {
      EXPECT_EQ(c.gpus[g].node, choice->node);
      gpus.insert(g);
    }
    nodes.insert(choice->node);
  }
  EXPECT_EQ(nodes, (std::set<uint32_t>{1, 2}));
  EXPECT_EQ(gpus.size(), 8u);  // every GPU of nodes 1 and 2, never those of node 0
  // The same seed draws the same sequence.
  std::unique_ptr<PlacementPolicy> a = NewRandomPolicy(7), b = NewRandomPolicy(7);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(a->Choose(c, Pod(1, 300, 1))->gpus, b->Choose(c, Pod(1, 300, 1))->gpus);
  }
}

TEST(Placement, BestFitOnNodesScoresEveryResourceItTouches) {
  Cluster c;
  AddNode(&c, 32, 128, 4, "T4");  // node 0
  AddNode(&c, 8, 64, 2, "T4");    // node 1
  c.gpus[0].milli_committed = 500;
  // Half a GPU, 4 cores, 16 GiB on GPU 0 of node 0. Left free after: GPU 0 0/1000 = 0; the
  // node's GPUs (4000 - 500 - 500) / 4000 = 0.75; CPU 28/32 = 0.875; memory 112/128 = 0.875.
  // Sum 2.5, spread 0.875 - 0 = 0.875: 3.375.
  const PlacementAsk half = Pod(1, 500, 4, 16);
  EXPECT_DOUBLE_EQ(BestFitScore(c, half, {0, {0}}), 3.375);
  // On GPU 4 of node 1: 0.5, (2000 - 500) / 2000 = 0.75, 4/8 = 0.5, 48/64 = 0.75: 2.5 + 0.25.
  EXPECT_DOUBLE_EQ(BestFitScore(c, half, {1, {4}}), 2.75);
  EXPECT_EQ(ChooseWith("best-fit", c, half), 4);
  // Two whole GPUs: node 1's pair (0, 0, 4/8, 48/64: 1.25 + 0.75 = 2.0) beats node 0's two
  // tightest whole ones (GPUs 1 and 2: 0, 1500/4000, 28/32, 112/128: 2.125 + 0.875 = 3.0).
  std::unique_ptr<PlacementPolicy> p = NewBestFitPolicy();
  auto choice = p->Choose(c, Pod(2, 1000, 4, 16));
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->node, 1u);
  EXPECT_DOUBLE_EQ(BestFitScore(c, Pod(2, 1000, 4, 16), *choice), 2.0);
  EXPECT_DOUBLE_EQ(BestFitScore(c, Pod(2, 1000, 4, 16), {0, {1, 2}}), 3.0);
}

TEST(Placement, DotProductAlignsTheRequestWithFreeResources) {
  Cluster c;
  AddNode(&c, 64, 256, 2, "T4");  // CPU-rich
  AddNode(&c, 16, 256, 8, "G2");  // GPU-rich
  // A CPU-heavy pod, 16 cores and 1 GPU. Node 0: CPU (16/64)(64/64) = 0.25, memory 0,
  // GPU (1000/2000)(2000/2000) = 0.5: 0.75. Node 1: (16/16)(1) = 1 + (1000/8000)(1) = 1.125.
  EXPECT_DOUBLE_EQ(DotProductScore(c, Pod(1, 1000, 16), 0), 0.75);
  EXPECT_DOUBLE_EQ(DotProductScore(c, Pod(1, 1000, 16), 1), 1.125);
  std::unique_ptr<PlacementPolicy> p = NewDotProductPolicy();
  EXPECT_EQ(p->Choose(c, Pod(1, 1000, 16))->node, 1u);
  c.nodes[1].cpu_milli_committed = 8000;  // node 1 half busy: (16/16)(8/16) + 1/8 = 0.625
  EXPECT_DOUBLE_EQ(DotProductScore(c, Pod(1, 1000, 8), 1), 8.0 / 16 * 0.5 + 0.125);
  // 8 cores: node 0 (8/64)(1) + 0.5 = 0.625, node 1 0.375: node 0.
  EXPECT_EQ(p->Choose(c, Pod(1, 1000, 8))->node, 0u);
}

TEST(Placement, PoliciesAreKnownByNameAndTheDefaultIsOne) {
  for (const std::string& name : PlacementPolicyNames()) {
    std::unique_ptr<PlacementPolicy> p;
    ASSERT_TRUE(MakePlacementPolicy(name, 1, &p).ok()) << name;
    EXPECT_EQ(p->name(), name);
  }
  std::unique_ptr<PlacementPolicy> p;
  EXPECT_TRUE(MakePlacementPolicy(kDefaultPlacementPolicy, 1, &p).ok());
  EXPECT_TRUE(MakePlacementPolicy("best-fit", 1, &p).ok());  // kept by name
  Status s = MakePlacementPolicy("worst-fit", 1, &p);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("best-fit"), std::string::npos);  // lists the known ones
}

// The queue's order (registry/queue_order.h): priority, then declared duration less the wait,
// then arrival.
QueueEntry Entry(int32_t priority, double waited_s, double declared_s, uint64_t seq) {
  QueueEntry e;
  e.priority = priority;
  e.waited_s = waited_s;
  e.declared_s = declared_s;
  e.seq = seq;
  return e;
}

TEST(QueueOrder, PriorityFirstThenShortestDeclaredThenArrival) {
  // 0: 10 min, waited 100 s (500); 1: 1 min, just queued (60); 2: nothing declared, counts as an
  // hour, waited 200 s (3400); 3: two hours at priority 5; 4: nothing declared, waited 100 s
  // (3500); 5: 1 min, waited 100 s (-40).
  const std::vector<QueueEntry> q = {Entry(0, 100, 600, 0), Entry(0, 0, 60, 1),
                                     Entry(0, 200, 0, 2),   Entry(5, 0, 7200, 3),
                                     Entry(0, 100, 0, 4),   Entry(0, 100, 60, 5)};
  QueueOrderOptions options;
  EXPECT_DOUBLE_EQ(EffectiveDurationS(q[0], options), 500);
  EXPECT_DOUBLE_EQ(EffectiveDurationS(q[2], options), 3400);
  EXPECT_EQ(QueueOrder(q, options), (std::vector<size_t>{3, 5, 1, 0, 2, 4}));
  // Without durations: priority, then arrival (the queue before them).
  options.by_declared = false;
  EXPECT_EQ(QueueOrder(q, options), (std::vector<size_t>{3, 0, 1, 2, 4, 5}));
}

TEST(QueueOrder, RequestsWithoutADurationKeepArrivalOrder) {
  // Queued in order 0..3 (the earlier, the longer waited), none declared: arrival order, and
  // arrival breaks the tie of two queued the same millisecond.
  const std::vector<QueueEntry> q = {Entry(0, 30, 0, 0), Entry(0, 20, 0, 1), Entry(0, 20, 0, 2),
                                     Entry(0, 0, 0, 3)};
  EXPECT_EQ(QueueOrder(q, QueueOrderOptions()), (std::vector<size_t>{0, 1, 2, 3}));
  // Priority still goes first.
  std::vector<QueueEntry> p = q;
  p[3].priority = 1;
  EXPECT_EQ(QueueOrder(p, QueueOrderOptions()), (std::vector<size_t>{3, 0, 1, 2}));
}

// One slot; a request declaring an hour is queued at 0 and a 1-minute request arrives every
// minute; each minute the slot frees and the head of the queue takes it. Returns when the long
// one was placed.
double LongRequestPlacedAt(const QueueOrderOptions& options) {
  struct Waiting {
    double queued_s, declared_s;
    uint64_t seq;
  };
  std::vector<Waiting> waiting = {{0, 3600, 0}};
  uint64_t seq = 1;
  for (double t = 60; t < 100000; t += 60) {
    waiting.push_back({t, 60, seq++});
    std::vector<QueueEntry> entries;
    for (const Waiting& w : waiting)
      entries.push_back(Entry(0, t - w.queued_s, w.declared_s, w.seq));
    const size_t head = QueueOrder(entries, options).front();
    if (waiting[head].seq == 0) return t;
    waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(head));
  }
  return -1;
}

TEST(QueueOrder, AnOldLongRequestGoesAheadOfAStreamOfShortOnes) {
  // The fresh 1-minute request counts 60 s; the hour-long one 3600 s less its wait: it goes first
  // once it has waited (3600 - 60) / aging (a tie goes to the earlier).
  QueueOrderOptions options;
  EXPECT_DOUBLE_EQ(LongRequestPlacedAt(options), 3540);
  options.aging = 0.5;
  EXPECT_DOUBLE_EQ(LongRequestPlacedAt(options), 7080);
  options.aging = 4;
  EXPECT_DOUBLE_EQ(LongRequestPlacedAt(options), 900);
  // Arrival order alone: at once.
  options.by_declared = false;
  EXPECT_DOUBLE_EQ(LongRequestPlacedAt(options), 60);
}

}  // namespace
}  // namespace rgpu::registry
