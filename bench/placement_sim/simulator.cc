#include "bench/placement_sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <set>

#include "registry/fragmentation.h"
#include "registry/queue_order.h"

namespace rgpu::placement_sim {
namespace {

using registry::Cluster;
using registry::PlacementAsk;
using registry::PlacementChoice;
using registry::PlacementPolicy;
using Clock = std::chrono::steady_clock;

uint64_t GpuCapacity(const Cluster& cluster) {
  return uint64_t{registry::kMilliPerGpu} * cluster.gpus.size();
}

uint64_t Allocated(const Cluster& cluster) {
  uint64_t sum = 0;
  for (const auto& g : cluster.gpus) sum += g.milli_committed;
  return sum;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * (v.size() - 1) + 0.5));
  return v[i];
}

}  // namespace

Status RunArrivals(const std::vector<TraceNode>& nodes, const std::vector<TracePod>& pods,
                   const std::string& policy_name, const ArrivalOptions& options,
                   ArrivalResult* result) {
  const auto started = Clock::now();
  *result = ArrivalResult();
  if (pods.empty()) return InvalidArgument("no pods");
  if (!(options.curve_step > 0) || !(options.target_load > 0)) {
    return InvalidArgument("the target load and the curve step must be positive");
  }
  std::unique_ptr<PlacementPolicy> policy;
  Status s = registry::MakePlacementPolicy(policy_name, options.seed, &policy);
  if (!s.ok()) return s;
  Cluster cluster = BuildCluster(nodes);
  const double capacity = static_cast<double>(GpuCapacity(cluster));
  const double target = options.target_load * capacity;

  std::mt19937_64 rng(options.seed);
  std::vector<size_t> order(pods.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);

  uint64_t arrived = 0, allocated = 0;
  size_t next_point = 1;                  // the curve's next point is at next_point x curve_step
  auto record_until = [&](double load) {  // points the arrived load has now passed
    while (next_point * options.curve_step * capacity <= load + 1e-9 &&
           next_point * options.curve_step <= options.target_load + 1e-9) {
      result->curve.push_back({100.0 * next_point * options.curve_step,
                               100.0 * (1.0 - static_cast<double>(allocated) / capacity)});
      ++next_point;
    }
  };
  // Bounded in case the trace asks for (almost) no GPU at all.
  const size_t limit = 1000 * pods.size() + 1000;
  for (size_t k = 0; k < limit; ++k) {
    const TracePod& pod = k < pods.size() ? pods[order[k]] : pods[rng() % pods.size()];
    if (static_cast<double>(arrived + pod.GpuMilli()) > target) break;
    // The curve's points between here and the next pod's arrival describe the state now.
    record_until(static_cast<double>(arrived + pod.GpuMilli()) - 0.5);
    arrived += pod.GpuMilli();
    result->pods++;
    const PlacementAsk ask = AskOf(pod);
    policy->Observe(ask);
    const std::optional<PlacementChoice> choice = policy->Choose(cluster, ask);
    if (choice) {
      registry::Commit(&cluster, ask, *choice);
      allocated += pod.GpuMilli();
    } else {
      result->failed_pods++;
      result->failed_gpu_milli += pod.GpuMilli();
    }
  }
  record_until(target);
  result->arrived_pct = 100.0 * static_cast<double>(arrived) / capacity;
  result->unallocated_pct = 100.0 * (1.0 - static_cast<double>(allocated) / capacity);
  if (Allocated(cluster) != allocated) return Internal("allocation accounting disagrees");
  result->seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return Status::Ok();
}

Status ParseDiscipline(const std::string& name, Discipline* out) {
  if (name == "fcfs") {
    *out = Discipline::kFcfs;
  } else if (name == "sjf") {
    *out = Discipline::kSjf;
  } else if (name == "backfill") {
    *out = Discipline::kBackfill;
  } else if (name == "backfill-exact") {
    *out = Discipline::kBackfillExact;
  } else if (name == "backfill-noisy") {
    *out = Discipline::kBackfillNoisy;
  } else {
    return InvalidArgument("unknown queue discipline '" + name +
                           "' (fcfs, sjf, backfill, backfill-exact, backfill-noisy)");
  }
  return Status::Ok();
}

const char* DisciplineName(Discipline d) {
  switch (d) {
    case Discipline::kFcfs:
      return "fcfs";
    case Discipline::kSjf:
      return "sjf";
    case Discipline::kBackfill:
      return "backfill";
    case Discipline::kBackfillExact:
      return "backfill-exact";
    case Discipline::kBackfillNoisy:
      return "backfill-noisy";
  }
  return "?";
}

FragmentationGauge::FragmentationGauge(const std::vector<TracePod>& pods) {
  for (const TracePod& p : pods) workload_.Observe(AskOf(p));
}

double FragmentationGauge::Percent(const Cluster& cluster) {
  double fragment = 0;
  for (uint32_t n = 0; n < cluster.nodes.size(); ++n) {
    fragment += registry::NodeFragmentation(registry::FreeOf(cluster, n, &workload_), workload_,
                                            registry::FragmentMeasure::kFgd);
  }
  const uint64_t capacity = GpuCapacity(cluster);
  return capacity == 0 ? 0 : 100.0 * fragment / static_cast<double>(capacity);
}

namespace {

// Pods that have times, by creation time (file order among equals).
std::vector<const TracePod*> ByCreation(const std::vector<TracePod>& trace) {
  std::vector<const TracePod*> pods;
  for (const TracePod& p : trace) {
    if (p.has_times) pods.push_back(&p);
  }
  std::stable_sort(pods.begin(), pods.end(), [](const TracePod* a, const TracePod* b) {
    return a->creation_s < b->creation_s;
  });
  return pods;
}

double Duration(const TracePod& p) {
  return static_cast<double>(std::max<int64_t>(0, p.deletion_s - p.creation_s));
}

// The pod whose arrival opens the window: the first percentile.
size_t WindowOpener(size_t pods) { return pods / 100; }

}  // namespace

double OfferedLoad(const std::vector<TracePod>& trace, double compress, uint64_t gpus) {
  const std::vector<const TracePod*> pods = ByCreation(trace);
  if (pods.empty() || gpus == 0) return 0;
  const double t0 = static_cast<double>(pods.front()->creation_s);
  auto arrival = [&](const TracePod* p) {
    return (static_cast<double>(p->creation_s) - t0) / compress;
  };
  const double begin = arrival(pods[WindowOpener(pods.size())]);
  const double end = arrival(pods.back());
  if (!(end > begin)) return INFINITY;
  double demand = 0;  // thousandths of a GPU x seconds within the window
  for (const TracePod* p : pods) {
    const double from = std::max(begin, arrival(p));
    const double to = std::min(end, arrival(p) + Duration(*p));
    if (to > from) demand += static_cast<double>(p->GpuMilli()) * (to - from);
  }
  return demand / (static_cast<double>(gpus) * registry::kMilliPerGpu * (end - begin));
}

Status RunQueueing(const std::vector<TraceNode>& all_nodes, const std::vector<TracePod>& trace,
                   const std::string& policy_name, const QueueOptions& options,
                   QueueResult* result) {
  const auto started = Clock::now();
  *result = QueueResult();
  if (!(options.node_fraction > 0) || options.node_fraction > 1) {
    return InvalidArgument("the node fraction must be within (0, 1]");
  }
  std::unique_ptr<PlacementPolicy> policy;
  Status s = registry::MakePlacementPolicy(policy_name, options.seed, &policy);
  if (!s.ok()) return s;
  std::vector<TraceNode> nodes;
  for (size_t i = 0; i < all_nodes.size(); ++i) {
    if (std::floor((i + 1) * options.node_fraction) > std::floor(i * options.node_fraction)) {
      nodes.push_back(all_nodes[i]);
    }
  }
  Cluster cluster = BuildCluster(nodes);
  const double capacity = static_cast<double>(GpuCapacity(cluster));
  result->cluster_gpus = cluster.gpus.size();
  if (capacity == 0) return InvalidArgument("the cluster has no GPU");

  // Pods by creation time, arrival gaps compressed, the clock starting with the window.
  for (const TracePod& p : trace) {
    if (!p.has_times) return InvalidArgument("the pod list has no creation and deletion times");
  }
  const std::vector<const TracePod*> pods = ByCreation(trace);
  if (pods.empty()) return InvalidArgument("no pods");
  double compress = options.compress;
  if (options.offered_load > 0) {  // bisection on log(compress): the load grows with it
    double low = 1e-3, high = 1e7;
    if (OfferedLoad(trace, high, cluster.gpus.size()) < options.offered_load) {
      return InvalidArgument("no compression reaches that offered load on this cluster");
    }
    for (int i = 0; i < 100; ++i) {
      const double mid = std::sqrt(low * high);
      (OfferedLoad(trace, mid, cluster.gpus.size()) < options.offered_load ? low : high) = mid;
    }
    compress = high;
  }
  if (!(compress > 0)) return InvalidArgument("compress must be positive");
  result->compress = compress;
  result->offered_load = OfferedLoad(trace, compress, cluster.gpus.size());
  const size_t n = pods.size();
  const double t0 = static_cast<double>(pods[WindowOpener(n)]->creation_s);
  std::vector<double> arrival(n), duration(n), start(n, -1);
  std::vector<PlacementAsk> asks(n);
  std::vector<PlacementChoice> placed(n);
  for (size_t i = 0; i < n; ++i) {
    arrival[i] = (static_cast<double>(pods[i]->creation_s) - t0) / compress;
    duration[i] = Duration(*pods[i]);
    asks[i] = AskOf(*pods[i]);
  }
  // What each pod declares (PlaceRequest.duration_seconds, at least 1 s): nothing under plain
  // backfill, its trace duration (an oracle) or that times a factor log-uniform in [1/2, 2]
  // (seeded) under backfill-exact and backfill-noisy.
  std::vector<double> declared(n, 0);
  const bool backfill = options.discipline == Discipline::kBackfill ||
                        options.discipline == Discipline::kBackfillExact ||
                        options.discipline == Discipline::kBackfillNoisy;
  std::mt19937_64 noise(options.seed);
  std::uniform_real_distribution<double> log_factor(std::log(options.declared_low),
                                                    std::log(options.declared_high));
  for (size_t i = 0; i < n; ++i) {
    if (options.discipline == Discipline::kBackfillExact) {
      declared[i] = std::max(1.0, std::round(duration[i]));
    } else if (options.discipline == Discipline::kBackfillNoisy) {
      declared[i] = std::max(1.0, std::round(duration[i] * std::exp(log_factor(noise))));
    }
  }
  result->pods = n;
  result->window_s = arrival.back();

  // The queue, in the discipline's order: (key, pod), key = arrival index or duration.
  std::set<std::pair<double, size_t>> queue;
  auto key_of = [&](size_t i) {
    return options.discipline == Discipline::kSjf ? std::make_pair(duration[i], i)
                                                  : std::make_pair(static_cast<double>(i), i);
  };
  using Departure = std::pair<double, size_t>;
  std::priority_queue<Departure, std::vector<Departure>, std::greater<>> departures;
  FragmentationGauge gauge(trace);
  std::vector<double> waits;
  uint64_t allocated = 0;
  double now = std::min(0.0, arrival[0]), allocated_area = 0;
  int next_sample = 0;

  auto place = [&](size_t i, const PlacementChoice& choice) {
    registry::Commit(&cluster, asks[i], choice);
    placed[i] = choice;
    start[i] = now;
    allocated += pods[i]->GpuMilli();
    waits.push_back(now - arrival[i]);
    departures.push({now + duration[i], i});
  };
  // Places what the discipline allows. `gained`: nodes that got capacity back since the last
  // call; `fresh`: pods that arrived since. Under backfill every waiting pod was tried at the last
  // call and fitted nowhere, and only `gained` have more room since, so a pod that fits none of
  // them is skipped without asking the policy (the same outcome, faster).
  auto dispatch = [&](const std::set<uint32_t>& gained, const std::set<size_t>& fresh) {
    if (!backfill) {
      while (!queue.empty()) {
        const size_t i = queue.begin()->second;
        const auto choice = policy->Choose(cluster, asks[i]);
        if (!choice) break;
        queue.erase(queue.begin());
        place(i, *choice);
      }
      return;
    }
    // The registry's queue order (registry/queue_order.h, as RegistryService::Dispatch), one
    // priority: arrival order when nothing is declared.
    std::vector<size_t> waiting;
    std::vector<registry::QueueEntry> entries;
    for (const auto& [key, i] : queue) {
      registry::QueueEntry e;
      e.waited_s = now - arrival[i];
      e.declared_s = declared[i];
      e.seq = i;
      waiting.push_back(i);
      entries.push_back(e);
    }
    for (size_t k : registry::QueueOrder(entries, options.queue_order)) {
      const size_t i = waiting[k];
      bool worth = fresh.count(i) != 0;
      for (auto g = gained.begin(); !worth && g != gained.end(); ++g) {
        worth = registry::NodeFits(cluster, *g, asks[i]);
      }
      const auto choice = worth ? policy->Choose(cluster, asks[i]) : std::nullopt;
      if (!choice) continue;
      queue.erase(key_of(i));
      place(i, *choice);
    }
  };
  auto advance_to = [&](double t) {  // time passes with the state unchanged
    const double from = std::max(now, 0.0), to = std::min(t, result->window_s);
    if (to > from) allocated_area += static_cast<double>(allocated) * (to - from);
    while (next_sample < options.samples &&
           result->window_s * next_sample / std::max(1, options.samples - 1) <= t) {
      QueueSample q;
      q.time_s = result->window_s * next_sample / std::max(1, options.samples - 1);
      q.allocated_pct = 100.0 * static_cast<double>(allocated) / capacity;
      q.fragmented_pct = gauge.Percent(cluster);
      q.waiting = queue.size();
      result->series.push_back(q);
      ++next_sample;
    }
    now = t;
  };

  size_t next_arrival = 0;
  while (next_arrival < n || !departures.empty()) {
    const double t = std::min(next_arrival < n ? arrival[next_arrival] : INFINITY,
                              departures.empty() ? INFINITY : departures.top().first);
    advance_to(t);
    std::set<uint32_t> gained;
    std::set<size_t> fresh;
    while (!departures.empty() && departures.top().first <= t) {  // departures first
      const size_t i = departures.top().second;
      departures.pop();
      registry::Release(&cluster, asks[i], placed[i]);
      allocated -= pods[i]->GpuMilli();
      gained.insert(placed[i].node);
    }
    while (next_arrival < n && arrival[next_arrival] <= t) {
      const size_t i = next_arrival++;
      if (!registry::EverFits(cluster, asks[i])) {
        result->refused++;
        continue;
      }
      policy->Observe(asks[i]);
      queue.insert(key_of(i));
      fresh.insert(i);
    }
    dispatch(gained, fresh);
    if (next_arrival == n && departures.empty() && !queue.empty()) {
      return Internal("pods wait with nothing left to end: the queue cannot drain");
    }
  }
  advance_to(now);
  result->makespan_s = now - arrival[0];
  result->wait_mean_s = 0;
  for (double w : waits) result->wait_mean_s += w;
  if (!waits.empty()) result->wait_mean_s /= static_cast<double>(waits.size());
  result->wait_p50_s = Percentile(waits, 50);
  result->wait_p99_s = Percentile(waits, 99);
  result->wait_max_s = Percentile(waits, 100);
  result->waited_share = waits.empty()
                             ? 0
                             : static_cast<double>(std::count_if(waits.begin(), waits.end(),
                                                                 [](double w) { return w > 0; })) /
                                   static_cast<double>(waits.size());
  result->allocated_mean_pct =
      result->window_s > 0 ? 100.0 * allocated_area / (capacity * result->window_s) : 0;
  for (const auto& q : result->series) result->fragmented_mean_pct += q.fragmented_pct;
  if (!result->series.empty()) {
    result->fragmented_mean_pct /= static_cast<double>(result->series.size());
  }
  result->seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return Status::Ok();
}

}  // namespace rgpu::placement_sim
