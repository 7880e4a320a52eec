// bench/placement_sim on small traces written here, every figure computed by hand: the trace
// reader, the arrival experiment (FGD's) and the queueing experiment under each discipline.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "bench/placement_sim/simulator.h"
#include "bench/placement_sim/trace.h"

namespace rgpu::placement_sim {
namespace {

class PlacementSim : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/placement-sim-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { (void)!system(("rm -rf " + dir_).c_str()); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::vector<TraceNode> Nodes(const std::string& text) {
    std::vector<TraceNode> nodes;
    EXPECT_TRUE(LoadNodes(Write("nodes.csv", text), &nodes).ok());
    return nodes;
  }
  std::vector<TracePod> Pods(const std::string& text) {
    std::vector<TracePod> pods;
    Status s = LoadPods(Write("pods.csv", text), &pods);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return pods;
  }
  std::string dir_;
};

constexpr char kTwoNodes[] =
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "n0,8000,32768,2,T4\n"
    "n1,4000,16384,1,V100M16\n";

TEST_F(PlacementSim, ReadsTheTraceByColumnName) {
  auto nodes = Nodes(kTwoNodes);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[1].model, "V100M16");
  EXPECT_EQ(nodes[0].cpu_milli, 8000u);
  auto pods = Pods(
      "gpu_milli,name,num_gpu,cpu_milli,memory_mib,gpu_spec\n"
      "500,p0,1,2000,1024,T4|V100M16\n"
      "0,p1,0,1000,512,\n");
  ASSERT_EQ(pods.size(), 2u);
  EXPECT_EQ(pods[0].gpu_spec, (std::vector<std::string>{"T4", "V100M16"}));
  EXPECT_FALSE(pods[0].has_times);
  const registry::PlacementAsk ask = AskOf(pods[0]);
  EXPECT_EQ(ask.gpus, 1u);
  EXPECT_EQ(ask.milli, 500u);
  EXPECT_EQ(ask.cpu_milli, 2000u);
  EXPECT_EQ(ask.host_memory, 1024ull << 20);
  registry::Cluster c = BuildCluster(nodes);
  ASSERT_EQ(c.gpus.size(), 3u);
  EXPECT_EQ(c.nodes[1].memory_total, 16384ull << 20);
  EXPECT_EQ(c.gpus[2].node, 1u);

  std::vector<TracePod> bad;
  EXPECT_FALSE(LoadPods(Write("bad.csv",
                              "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                              "p,1,1,2,500\n"),  // two half GPUs
                        &bad)
                   .ok());
  EXPECT_FALSE(LoadPods(Write("bad.csv",
                              "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                              "p,x,1,1,500\n"),
                        &bad)
                   .ok());
  EXPECT_FALSE(LoadPods(dir_ + "/missing.csv", &bad).ok());
}

TEST_F(PlacementSim, ArrivalsStopAtTheTargetAndCountWhatFitsNowhere) {
  // Pods of 600 thousandths of a GPU: one per GPU (two would need 1200). The cluster has 3000;
  // five pods arrive (3000, the sixth would pass 100%), the trace's two drawn again to make them.
  // Three are placed, two fail: 1800 allocated, 40% unallocated. Curve at 20% steps, each the
  // state after the last pod that kept arrived load at or below the step: 600 (80%), 1200
  // (60%), 1800 (40%), the 4th failed (40%), the 5th failed (40%).
  auto nodes = Nodes(kTwoNodes);
  auto pods = Pods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
      "p0,1000,1024,1,600\n"
      "p1,1000,1024,1,600\n");
  for (const char* policy : {"first-fit", "best-fit", "random", "dot-product", "fgd", "reach"}) {
    ArrivalOptions options;
    options.curve_step = 0.2;
    ArrivalResult r;
    ASSERT_TRUE(RunArrivals(nodes, pods, policy, options, &r).ok()) << policy;
    EXPECT_EQ(r.pods, 5u) << policy;
    EXPECT_EQ(r.failed_pods, 2u) << policy;
    EXPECT_EQ(r.failed_gpu_milli, 1200u);
    EXPECT_DOUBLE_EQ(r.arrived_pct, 100);
    EXPECT_NEAR(r.unallocated_pct, 40, 1e-9) << policy;
    ASSERT_EQ(r.curve.size(), 5u);
    const double expected[] = {80, 60, 40, 40, 40};
    for (int i = 0; i < 5; ++i) {
      EXPECT_NEAR(r.curve[i].arrived_pct, 20.0 * (i + 1), 1e-9);
      EXPECT_NEAR(r.curve[i].unallocated_pct, expected[i], 1e-9) << policy << " point " << i;
    }
  }
}

TEST_F(PlacementSim, ArrivalsRespectCpuAndMemory) {
  // 300 thousandths and 3 cores each: ten arrive (3000); n0's 8 cores hold two, n1's 4 one.
  // 900 allocated: 70% unallocated. At 50% load: 2 cores short of a 5th... the first five
  // pods: 3 placed, 900 allocated, 70%.
  auto nodes = Nodes(kTwoNodes);
  auto pods = Pods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
      "p0,3000,1024,1,300\n");
  ArrivalOptions options;
  options.curve_step = 0.5;
  ArrivalResult r;
  ASSERT_TRUE(RunArrivals(nodes, pods, "best-fit", options, &r).ok());
  EXPECT_EQ(r.pods, 10u);
  EXPECT_EQ(r.failed_pods, 7u);
  EXPECT_NEAR(r.unallocated_pct, 70, 1e-9);
  ASSERT_EQ(r.curve.size(), 2u);
  EXPECT_NEAR(r.curve[0].unallocated_pct, 70, 1e-9);
  // And a GPU model nothing in the cluster has: every pod fails, 100% unallocated.
  auto a100 = Pods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
      "p0,1000,1024,1,500,A100\n");
  ASSERT_TRUE(RunArrivals(nodes, a100, "reach", options, &r).ok());
  EXPECT_EQ(r.failed_pods, 6u);
  EXPECT_NEAR(r.unallocated_pct, 100, 1e-9);
}

// One GPU, five pods (times in s): a 0-100 600/1000; b from 10 for 50, a whole GPU; c from 20
// for 10, 300; d from 30 for 5, 400; e from 40 for 1, a whole GPU.
constexpr char kOneGpu[] =
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "n0,8000,32768,1,T4\n";
constexpr char kFivePods[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
    "a,0,0,1,600,,LS,Running,0,100,0\n"
    "b,0,0,1,1000,,LS,Running,10,60,10\n"
    "c,0,0,1,300,,LS,Running,20,30,20\n"
    "d,0,0,1,400,,LS,Running,30,35,30\n"
    "e,0,0,1,1000,,LS,Running,40,41,40\n";

QueueResult Queue(const std::vector<TraceNode>& nodes, const std::vector<TracePod>& pods,
                  Discipline d) {
  QueueOptions options;
  options.discipline = d;
  options.offered_load = 0;
  options.compress = 1;
  options.samples = 5;
  QueueResult r;
  Status s = RunQueueing(nodes, pods, "best-fit", options, &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return r;
}

TEST_F(PlacementSim, FcfsMakesEveryoneWaitBehindTheHead) {
  // a at 0. b cannot fit (400 free) and c, d, e queue behind it. At 100 a leaves: b (to 150).
  // At 150: c (to 160) and d (to 155); e needs the whole GPU: at 160 (to 161).
  // Waits 0, 90, 130, 120, 120: mean 92, p50 120, p99 130; four of five waited.
  QueueResult r = Queue(Nodes(kOneGpu), Pods(kFivePods), Discipline::kFcfs);
  EXPECT_EQ(r.pods, 5u);
  EXPECT_DOUBLE_EQ(r.wait_mean_s, 92);
  EXPECT_DOUBLE_EQ(r.wait_p50_s, 120);
  EXPECT_DOUBLE_EQ(r.wait_p99_s, 130);
  EXPECT_DOUBLE_EQ(r.waited_share, 0.8);
  EXPECT_DOUBLE_EQ(r.makespan_s, 161);
  // The window is 0-40 (the first pod to the last arrival): 600 allocated throughout.
  EXPECT_DOUBLE_EQ(r.window_s, 40);
  EXPECT_DOUBLE_EQ(r.allocated_mean_pct, 60);
  ASSERT_EQ(r.series.size(), 5u);      // at 0, 10, 20, 30, 40
  EXPECT_EQ(r.series[4].waiting, 3u);  // b, c, d (e arrives at 40, after the sample)
}

TEST_F(PlacementSim, SjfRunsTheShortestFirst) {
  // a at 0; b waits. c (10 s, shorter than b) at 20 (to 30). d (5 s) at 30 (to 35). e (1 s)
  // waits for the whole GPU: at 100, before b, which starts when e ends, at 101.
  // Waits 0, 91, 0, 0, 60: mean 30.2, p50 0, p99 91.
  QueueResult r = Queue(Nodes(kOneGpu), Pods(kFivePods), Discipline::kSjf);
  EXPECT_DOUBLE_EQ(r.wait_mean_s, 30.2);
  EXPECT_DOUBLE_EQ(r.wait_p50_s, 0);
  EXPECT_DOUBLE_EQ(r.wait_p99_s, 91);
  EXPECT_DOUBLE_EQ(r.makespan_s, 151);
  // 600 for 0-20, 900 for 20-30, 1000 for 30-35, 600 for 35-40: 29000 / 40000.
  EXPECT_DOUBLE_EQ(r.allocated_mean_pct, 72.5);
}

TEST_F(PlacementSim, BackfillPlacesWhateverFitsInArrivalOrder) {
  // The registry's queue: c and d fit beside a at once; at 100 b (first in line) goes, and e
  // after b, at 150. Waits 0, 90, 0, 0, 110: mean 40, p50 0, p99 110.
  QueueResult r = Queue(Nodes(kOneGpu), Pods(kFivePods), Discipline::kBackfill);
  EXPECT_DOUBLE_EQ(r.wait_mean_s, 40);
  EXPECT_DOUBLE_EQ(r.wait_p50_s, 0);
  EXPECT_DOUBLE_EQ(r.wait_p99_s, 110);
  EXPECT_DOUBLE_EQ(r.waited_share, 0.4);
  EXPECT_DOUBLE_EQ(r.allocated_mean_pct, 72.5);
  EXPECT_DOUBLE_EQ(r.makespan_s, 151);
}

TEST_F(PlacementSim, BackfillOnDeclaredDurationsUsesTheRegistrysQueueOrder) {
  // Each pod declares its trace duration: as backfill, c and d fit beside a at once; at 100 b
  // (50 s, queued at 10: 60 - its wait) and e (1 s, queued at 40: 1 - its wait) wait, and e, the
  // smaller, goes first (to 101), then b. Waits 0, 91, 0, 0, 60: mean 30.2 (as sjf here).
  QueueResult r = Queue(Nodes(kOneGpu), Pods(kFivePods), Discipline::kBackfillExact);
  EXPECT_DOUBLE_EQ(r.wait_mean_s, 30.2);
  EXPECT_DOUBLE_EQ(r.wait_p99_s, 91);
  EXPECT_DOUBLE_EQ(r.makespan_s, 151);
  // Aging 2: b counts 50 - 2 x 90 = -130, e 1 - 2 x 60 = -119: b, queued 30 s before e, goes
  // first, as under plain backfill (mean 40).
  QueueOptions options;
  options.discipline = Discipline::kBackfillExact;
  options.offered_load = 0;
  options.compress = 1;
  options.queue_order.aging = 2;
  ASSERT_TRUE(RunQueueing(Nodes(kOneGpu), Pods(kFivePods), "best-fit", options, &r).ok());
  EXPECT_DOUBLE_EQ(r.wait_mean_s, 40);
  // Noisy declarations (each duration times 1/2..2, seeded) give the same answer for a seed.
  QueueResult n1 = Queue(Nodes(kOneGpu), Pods(kFivePods), Discipline::kBackfillNoisy);
  QueueResult n2 = Queue(Nodes(kOneGpu), Pods(kFivePods), Discipline::kBackfillNoisy);
  EXPECT_DOUBLE_EQ(n1.wait_mean_s, n2.wait_mean_s);
  EXPECT_TRUE(n1.wait_mean_s == 30.2 || n1.wait_mean_s == 40) << n1.wait_mean_s;
}

TEST_F(PlacementSim, OfferedLoadIsTheDemandOverTheArrivalWindow) {
  // Compress 1, window 0-40 on one GPU: a 600 x 40, b 1000 x 30, c 300 x 10, d 400 x 5, e
  // nothing inside the window: 59000 / 40000. Compress 2: arrivals 0, 5, 10, 15, 20, window
  // 0-20: 600 x 20 + 1000 x 15 + 300 x 10 + 400 x 5 = 32000 / 20000.
  auto pods = Pods(kFivePods);
  EXPECT_DOUBLE_EQ(OfferedLoad(pods, 1, 1), 1.475);
  EXPECT_DOUBLE_EQ(OfferedLoad(pods, 2, 1), 1.6);
  EXPECT_DOUBLE_EQ(OfferedLoad(pods, 2, 2), 0.8);
  // Asking for an offered load finds a compression giving it (between 1 and 2 here, 1.5; the
  // load need not grow with the compression on a trace this small, so not necessarily that one).
  QueueOptions options;
  options.offered_load = 1.5;
  QueueResult r;
  ASSERT_TRUE(RunQueueing(Nodes(kOneGpu), pods, "best-fit", options, &r).ok());
  EXPECT_NEAR(r.offered_load, 1.5, 1e-6);
  EXPECT_NEAR(OfferedLoad(pods, r.compress, 1), 1.5, 1e-6);
  options.offered_load = 1000;  // beyond what any compression gives
  EXPECT_FALSE(RunQueueing(Nodes(kOneGpu), pods, "best-fit", options, &r).ok());
}

TEST_F(PlacementSim, PodsThatFitNowhereAreRefusedAndTheRestStillRun) {
  auto pods = Pods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time\n"
      "big,0,0,2,1000,,0,10\n"  // two GPUs: the cluster has one
      "ok,0,0,1,1000,,5,10\n");
  QueueResult r = Queue(Nodes(kOneGpu), pods, Discipline::kFcfs);
  EXPECT_EQ(r.refused, 1u);
  EXPECT_DOUBLE_EQ(r.wait_mean_s, 0);
}

}  // namespace
}  // namespace rgpu::placement_sim
