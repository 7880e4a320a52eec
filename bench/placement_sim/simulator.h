// The two experiments of bench/placement_sim, run on the registry's own placement code
// (registry/placement.h: the policies, NodeFits, Commit and Release the service calls).
//
// Arrivals (FGD's experiment, Weng et al., USENIX ATC'23): pods arrive one at a time in a random
// order (the trace shuffled with the seed; once it is used up, pods drawn from it at random with
// replacement, as FGD inflates a trace) and never leave; each is placed at once or fails. Arrival
// stops before the first pod that would take the GPU compute asked so far past `target_load` of
// the cluster's. Reported: the unallocated GPU share (GPU compute not allocated, as a share of
// the cluster's) against arrived load (GPU compute asked so far, same units).
//
// Queueing: pods arrive at their creation time, with the gaps between arrivals divided by
// `compress`, and each runs for its trace duration (deletion - creation) once placed, on a
// cluster of every node of the trace or an evenly spaced `node_fraction` of them (the list is
// grouped by model, so the mix of models is kept). With `offered_load` set, `compress` is the
// factor at which the pods' GPU demand over the arrival window, were every pod placed on
// arrival, averages that share of the cluster's GPUs (OfferedLoad). The arrival window runs from
// the arrival of the pod at the first percentile (a trace's first few pods come weeks before the
// rest) to the last arrival; the time series and the means cover it. A pod that could never fit the
// cluster is refused when it arrives, as the registry refuses it. Waiting pods are placed by one of
// three disciplines: fcfs (arrival order; nothing passes a head that does not fit), sjf (shortest
// trace duration first, same rule) and backfill (arrival order, every waiting pod that fits is
// placed: the registry's queue, RegistryService::Dispatch).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/placement_sim/trace.h"
#include "common/status.h"
#include "registry/queue_order.h"
#include "registry/workload.h"

namespace rgpu::placement_sim {

struct ArrivalOptions {
  uint64_t seed = 1;
  double target_load = 1.0;  // stop arriving at this share of the cluster's GPU compute
  double curve_step = 0.01;  // a curve point each time arrived load passes a multiple of this
};

struct CurvePoint {
  double arrived_pct = 0;      // GPU compute asked so far, % of the cluster's
  double unallocated_pct = 0;  // GPU compute not allocated, % of the cluster's
};

struct ArrivalResult {
  double unallocated_pct = 0;  // at the end (arrived load just at or below the target)
  double arrived_pct = 0;
  uint64_t pods = 0;         // arrived
  uint64_t failed_pods = 0;  // found no place
  uint64_t failed_gpu_milli = 0;
  std::vector<CurvePoint> curve;
  double seconds = 0;  // wall time of the run
};

Status RunArrivals(const std::vector<TraceNode>& nodes, const std::vector<TracePod>& pods,
                   const std::string& policy, const ArrivalOptions& options, ArrivalResult* result);

// backfill: every pod declares nothing (the registry's queue then keeps arrival order);
// backfill-exact: each declares its trace duration (an oracle); backfill-noisy: that times a
// factor log-uniform in [1/2, 2], seeded. All three order the queue with the registry's
// QueueOrder (registry/queue_order.h).
enum class Discipline { kFcfs, kSjf, kBackfill, kBackfillExact, kBackfillNoisy };
// "fcfs", "sjf", "backfill", "backfill-exact", "backfill-noisy"; kInvalidArgument for anything
// else.
Status ParseDiscipline(const std::string& name, Discipline* out);
const char* DisciplineName(Discipline d);

struct QueueOptions {
  Discipline discipline = Discipline::kBackfill;
  double offered_load = 0.9;   // choose `compress` for this offered GPU load (0: use compress)
  double compress = 1000;      // arrival gaps are divided by this; durations are kept
  double node_fraction = 1.0;  // share of the trace's nodes in the cluster (0 < f <= 1)
  int samples = 200;           // points of the time series, over the arrival window
  uint64_t seed = 1;           // for the random policy and backfill-noisy's declarations
  // backfill-noisy's factor is log-uniform in [declared_low, declared_high] (0 < low <= high).
  // The registry ends a lease at its declared duration, so a pod declaring less than it runs
  // would be cut off there; [1, 2] (every declaration an overestimate) is what tenants of the
  // registry would declare, [1/2, 2] ignores the limit.
  double declared_low = 0.5, declared_high = 2.0;
  registry::QueueOrderOptions queue_order;  // the registry's defaults
};

struct QueueSample {
  double time_s = 0;          // since the first arrival (compressed time)
  double allocated_pct = 0;   // GPU compute allocated, % of the cluster's
  double fragmented_pct = 0;  // FGD's fragmentation of the cluster, % of its GPU compute
  uint64_t waiting = 0;       // pods in the queue
};

struct QueueResult {
  uint64_t pods = 0;     // arrived (including refused)
  uint64_t refused = 0;  // could never fit this cluster
  double wait_mean_s = 0, wait_p50_s = 0, wait_p99_s = 0, wait_max_s = 0;
  double waited_share = 0;         // share of placed pods that waited at all
  double allocated_mean_pct = 0;   // time-average over the arrival window
  double fragmented_mean_pct = 0;  // time-average of the samples
  double compress = 0;             // the factor used
  double offered_load = 0;         // OfferedLoad at that factor
  double window_s = 0;             // the arrival window's length
  double makespan_s = 0;           // the first arrival to the last departure
  uint64_t cluster_gpus = 0;
  std::vector<QueueSample> series;
  double seconds = 0;  // wall time of the run
};

// The pods' GPU demand over the arrival window, were each placed on arrival and left at the end
// of its trace duration, as a share of `gpus` GPUs, with arrival gaps divided by `compress`.
double OfferedLoad(const std::vector<TracePod>& pods, double compress, uint64_t gpus);

Status RunQueueing(const std::vector<TraceNode>& nodes, const std::vector<TracePod>& pods,
                   const std::string& policy, const QueueOptions& options, QueueResult* result);

// FGD's fragmentation of the whole cluster, as a share (%) of its GPU compute, for the workload
// of `pods` (every pod's shape, by how often it occurs): the measure, not any policy.
class FragmentationGauge {
 public:
  explicit FragmentationGauge(const std::vector<TracePod>& pods);
  double Percent(const registry::Cluster& cluster);

 private:
  registry::Workload workload_;
};

}  // namespace rgpu::placement_sim
