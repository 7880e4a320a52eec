#include "registry/placement_policies.h"

#include <algorithm>
#include <cstdlib>
#include <random>
#include <tuple>

#include "registry/fragmentation_policy.h"

namespace rgpu::registry {
namespace {

uint32_t LeasesOf(const Cluster& cluster, const std::vector<uint32_t>& gpus) {
  uint32_t leases = 0;
  for (uint32_t g : gpus) leases += cluster.gpus[g].leases;
  return leases;
}

class FirstFitPolicy : public PlacementPolicy {
 public:
  std::string_view name() const override { return "first-fit"; }
  std::optional<PlacementChoice> Choose(const Cluster& cluster, const PlacementAsk& ask) override {
    for (uint32_t n = 0; n < cluster.nodes.size(); ++n) {
      if (!NodeFits(cluster, n, ask)) continue;
      PlacementChoice choice{n, {}};
      for (uint32_t g : cluster.nodes[n].gpus) {
        if (choice.gpus.size() == ask.gpus) break;
        if (GpuFits(cluster.gpus[g], ask)) choice.gpus.push_back(g);
      }
      return choice;
    }
    return std::nullopt;
  }
};

class RandomPolicy : public PlacementPolicy {
 public:
  explicit RandomPolicy(uint64_t seed) : rng_(seed) {}
  std::string_view name() const override { return "random"; }
  std::optional<PlacementChoice> Choose(const Cluster& cluster, const PlacementAsk& ask) override {
    std::vector<uint32_t> nodes;
    for (uint32_t n = 0; n < cluster.nodes.size(); ++n) {
      if (NodeFits(cluster, n, ask)) nodes.push_back(n);
    }
    if (nodes.empty()) return std::nullopt;
    PlacementChoice choice{nodes[Draw(nodes.size())], {}};
    std::vector<uint32_t> gpus;
    for (uint32_t g : cluster.nodes[choice.node].gpus) {
      if (GpuFits(cluster.gpus[g], ask)) gpus.push_back(g);
    }
    for (uint32_t i = 0; i < ask.gpus; ++i) {  // a partial Fisher-Yates shuffle
      std::swap(gpus[i], gpus[i + Draw(gpus.size() - i)]);
      choice.gpus.push_back(gpus[i]);
    }
    return choice;
  }

 private:
  size_t Draw(size_t n) { return static_cast<size_t>(rng_() % n); }
  std::mt19937_64 rng_;
};

class BestFitPolicy : public PlacementPolicy {
 public:
  std::string_view name() const override { return "best-fit"; }
  std::optional<PlacementChoice> Choose(const Cluster& cluster, const PlacementAsk& ask) override {
    std::optional<PlacementChoice> best;
    double best_score = 0;
    uint32_t best_leases = 0;
    // Lower score, then fewer leases, then (a full tie) the earlier GPU, or node for none.
    auto better = [&](double score, uint32_t leases, uint32_t node, uint32_t first_gpu) {
      if (!best || score < best_score) return true;
      if (score > best_score) return false;
      if (leases != best_leases) return leases < best_leases;
      return best->gpus.empty() ? node < best->node : first_gpu < best->gpus[0];
    };
    for (uint32_t n = 0; n < cluster.nodes.size(); ++n) {
      if (!NodeFits(cluster, n, ask)) continue;
      if (ask.gpus == 1) {
        for (uint32_t g : cluster.nodes[n].gpus) {
          if (!GpuFits(cluster.gpus[g], ask)) continue;
          const double score = BestFitScore(cluster, ask, n, {&g, 1});
          const uint32_t leases = cluster.gpus[g].leases;
          if (better(score, leases, n, g)) {
            best = PlacementChoice{n, {g}};
            best_score = score;
            best_leases = leases;
          }
        }
      } else {
        PlacementChoice choice{n, TightestGpus(cluster, n, ask)};
        const double score = BestFitScore(cluster, ask, choice);
        const uint32_t leases = LeasesOf(cluster, choice.gpus);
        if (better(score, leases, n, choice.gpus.empty() ? 0 : choice.gpus[0])) {
          best = std::move(choice);
          best_score = score;
          best_leases = leases;
        }
      }
    }
    return best;
  }
};

class DotProductPolicy : public PlacementPolicy {
 public:
  std::string_view name() const override { return "dot-product"; }
  std::optional<PlacementChoice> Choose(const Cluster& cluster, const PlacementAsk& ask) override {
    int best = -1;
    double best_score = 0;
    for (uint32_t n = 0; n < cluster.nodes.size(); ++n) {
      if (!NodeFits(cluster, n, ask)) continue;
      const double score = DotProductScore(cluster, ask, n);
      if (best < 0 || score > best_score) {
        best = static_cast<int>(n);
        best_score = score;
      }
    }
    if (best < 0) return std::nullopt;
    const uint32_t node = static_cast<uint32_t>(best);
    return PlacementChoice{node, TightestGpus(cluster, node, ask)};
  }
};

}  // namespace

double BestFitScore(const Cluster& cluster, const PlacementAsk& ask,
                    const PlacementChoice& choice) {
  return BestFitScore(cluster, ask, choice.node, choice.gpus);
}

double BestFitScore(const Cluster& cluster, const PlacementAsk& ask, uint32_t node_index,
                    std::span<const uint32_t> gpus) {
  double left[5];
  int dims = 0;
  if (!gpus.empty()) {
    double compute = 0, memory = 0;
    int memory_gpus = 0;
    for (uint32_t g : gpus) {
      const GpuLoad& gpu = cluster.gpus[g];
      compute += (static_cast<double>(gpu.FreeMilli()) - ask.milli) / kMilliPerGpu;
      if (gpu.memory_total > 0) {
        memory += (static_cast<double>(gpu.FreeMemory()) - static_cast<double>(ask.memory)) /
                  static_cast<double>(gpu.memory_total);
        ++memory_gpus;
      }
    }
    left[dims++] = compute / static_cast<double>(gpus.size());
    if (memory_gpus > 0) left[dims++] = memory / memory_gpus;
  }
  const NodeLoad& node = cluster.nodes[node_index];
  if (node.TracksCpu() || node.TracksMemory()) {  // a node-level view: its GPUs as a whole too
    double total = 0, free = 0;
    for (uint32_t g : node.gpus) {
      if (!cluster.gpus[g].placeable) continue;
      total += kMilliPerGpu;
      free += cluster.gpus[g].FreeMilli();
    }
    if (total > 0) left[dims++] = (free - static_cast<double>(ask.gpus) * ask.milli) / total;
  }
  if (node.TracksCpu()) {
    left[dims++] = (static_cast<double>(node.FreeCpu()) - static_cast<double>(ask.cpu_milli)) /
                   static_cast<double>(node.cpu_milli_total);
  }
  if (node.TracksMemory()) {
    left[dims++] = (static_cast<double>(node.FreeMemory()) - static_cast<double>(ask.host_memory)) /
                   static_cast<double>(node.memory_total);
  }
  if (dims == 0) return 0;
  double sum = 0, low = left[0], high = left[0];
  for (int i = 0; i < dims; ++i) {
    sum += left[i];
    low = std::min(low, left[i]);
    high = std::max(high, left[i]);
  }
  return sum + (high - low);
}

double DotProductScore(const Cluster& cluster, const PlacementAsk& ask, uint32_t node) {
  const NodeLoad& n = cluster.nodes[node];
  double score = 0;
  if (n.TracksCpu()) {
    const double total = static_cast<double>(n.cpu_milli_total);
    score +=
        (static_cast<double>(ask.cpu_milli) / total) * (static_cast<double>(n.FreeCpu()) / total);
  }
  if (n.TracksMemory()) {
    const double total = static_cast<double>(n.memory_total);
    score += (static_cast<double>(ask.host_memory) / total) *
             (static_cast<double>(n.FreeMemory()) / total);
  }
  double compute_total = 0, compute_free = 0, memory_total = 0, memory_free = 0;
  for (uint32_t g : n.gpus) {
    const GpuLoad& gpu = cluster.gpus[g];
    if (!gpu.placeable) continue;
    compute_total += kMilliPerGpu;
    compute_free += gpu.FreeMilli();
    memory_total += static_cast<double>(gpu.memory_total);
    memory_free += static_cast<double>(gpu.FreeMemory());
  }
  if (compute_total > 0) {
    score += (static_cast<double>(ask.gpus) * ask.milli / compute_total) *
             (compute_free / compute_total);
  }
  if (memory_total > 0) {
    score += (static_cast<double>(ask.gpus) * static_cast<double>(ask.memory) / memory_total) *
             (memory_free / memory_total);
  }
  return score;
}

std::vector<uint32_t> TightestGpus(const Cluster& cluster, uint32_t node, const PlacementAsk& ask) {
  PlacementAsk one = ask;
  one.gpus = 1;
  std::vector<std::tuple<double, uint32_t, uint32_t>> fitting;  // score, leases, index
  for (uint32_t g : cluster.nodes[node].gpus) {
    if (!GpuFits(cluster.gpus[g], ask)) continue;
    fitting.emplace_back(BestFitScore(cluster, one, node, {&g, 1}), cluster.gpus[g].leases, g);
  }
  const size_t keep = std::min<size_t>(ask.gpus, fitting.size());
  std::partial_sort(fitting.begin(), fitting.begin() + static_cast<std::ptrdiff_t>(keep),
                    fitting.end());
  std::vector<uint32_t> gpus;
  for (size_t i = 0; i < keep; ++i) gpus.push_back(std::get<2>(fitting[i]));
  return gpus;
}

std::unique_ptr<PlacementPolicy> NewFirstFitPolicy() { return std::make_unique<FirstFitPolicy>(); }
std::unique_ptr<PlacementPolicy> NewRandomPolicy(uint64_t seed) {
  return std::make_unique<RandomPolicy>(seed);
}
std::unique_ptr<PlacementPolicy> NewBestFitPolicy() { return std::make_unique<BestFitPolicy>(); }
std::unique_ptr<PlacementPolicy> NewDotProductPolicy() {
  return std::make_unique<DotProductPolicy>();
}

const char kDefaultPlacementPolicy[] = "reach";

const std::vector<std::string>& PlacementPolicyNames() {
  static const std::vector<std::string> names = {"random",      "first-fit", "best-fit",
                                                 "dot-product", "fgd",       "reach"};
  return names;
}

namespace {

// "fgd" or "reach", then ":W" (the reach weight, reach only) and "@N" (the shapes the workload
// keeps), both optional.
Status MakeFragmentationPolicy(std::string_view name, std::unique_ptr<PlacementPolicy>* out) {
  const std::string full(name);
  std::string base = full;
  size_t shapes = kWorkloadShapes;
  if (const size_t at = base.find('@'); at != std::string::npos) {
    const std::string count = base.substr(at + 1);
    char* end = nullptr;
    const unsigned long n = std::strtoul(count.c_str(), &end, 10);
    if (count.empty() || *end != 0 || n < 1 || n > 4096) {
      return InvalidArgument("placement policy " + full + ": @N needs a shape count 1..4096");
    }
    shapes = n;
    base.resize(at);
  }
  double weight = 0.5;
  if (base == "fgd") {
    weight = 0;
  } else if (base.substr(0, 6) == "reach:") {
    const std::string w = base.substr(6);
    char* end = nullptr;
    weight = std::strtod(w.c_str(), &end);
    if (w.empty() || *end != 0 || !(weight >= 0 && weight <= 1)) {
      return InvalidArgument("placement policy " + full + ": reach:W needs a weight W within 0..1");
    }
  } else if (base != "reach") {
    return InvalidArgument("unknown placement policy '" + full + "'");
  }
  *out = NewFragmentationPolicy(full, weight, shapes);
  return Status::Ok();
}

}  // namespace

Status MakePlacementPolicy(std::string_view name, uint64_t seed,
                           std::unique_ptr<PlacementPolicy>* out) {
  if (name == "first-fit") {
    *out = NewFirstFitPolicy();
  } else if (name == "random") {
    *out = NewRandomPolicy(seed);
  } else if (name == "best-fit") {
    *out = NewBestFitPolicy();
  } else if (name == "dot-product") {
    *out = NewDotProductPolicy();
  } else if (name.substr(0, 3) == "fgd" || name.substr(0, 5) == "reach") {
    return MakeFragmentationPolicy(name, out);
  } else {
    std::string known;
    for (const auto& n : PlacementPolicyNames()) known += (known.empty() ? "" : ", ") + n;
    return InvalidArgument("unknown placement policy '" + std::string(name) + "' (known: " + known +
                           ")");
  }
  return Status::Ok();
}

}  // namespace rgpu::registry
