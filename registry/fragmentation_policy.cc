#include "registry/fragmentation_policy.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <unordered_map>

#include "registry/placement_policies.h"
#include "registry/workload.h"

namespace rgpu::registry {
namespace {

constexpr double kTie = 1e-6;                // thousandths of a GPU: growths this close tie
constexpr size_t kMaxCachedStates = 200000;  // then the cache starts over

class FragmentationPolicy : public PlacementPolicy {
 public:
  FragmentationPolicy(std::string name, double reach_weight, size_t max_shapes)
      : name_(std::move(name)), reach_weight_(reach_weight), workload_(max_shapes) {}

  std::string_view name() const override { return name_; }

  void Observe(const PlacementAsk& ask) override { workload_.Observe(ask); }

  std::optional<PlacementChoice> Choose(const Cluster& cluster, const PlacementAsk& ask) override {
    if (workload_.version() != cached_version_ || offsets_.size() > kMaxCachedStates) {
      offsets_.clear();
      values_.clear();
      cached_version_ = workload_.version();
    }
    popularity_.resize(workload_.size());
    for (size_t s = 0; s < workload_.size(); ++s) popularity_[s] = workload_.popularity(s);

    struct Candidate {
      double growth;
      double best_fit;
      uint32_t leases;
      PlacementChoice choice;
    };
    std::optional<Candidate> best;
    auto consider = [&](Candidate c) {
      bool better = !best || c.growth < best->growth - kTie;
      if (!better && c.growth <= best->growth + kTie) {
        better = std::make_tuple(c.best_fit, c.leases, c.choice.node, FirstGpu(c.choice)) <
                 std::make_tuple(best->best_fit, best->leases, best->choice.node,
                                 FirstGpu(best->choice));
      }
      if (better) best = std::move(c);
    };

    std::vector<uint32_t> index;  // position in the node's NodeFree -> GPU index
    for (uint32_t n = 0; n < cluster.nodes.size(); ++n) {
      if (!NodeFits(cluster, n, ask)) continue;
      const NodeFree before = FreeOf(cluster, n, &workload_, &index);
      const double before_fragmentation = Fragmentation(before);
      for (std::vector<size_t>& positions : Options(cluster, n, ask, before, index)) {
        NodeFree after = before;
        after.cpu_milli -= std::min(after.cpu_milli, ask.cpu_milli);
        after.memory -= std::min(after.memory, ask.host_memory);
        PlacementChoice choice{n, {}};
        for (size_t p : positions) {
          after.gpus[p].milli -= std::min(after.gpus[p].milli, ask.milli);
          after.gpus[p].memory -= std::min(after.gpus[p].memory, ask.memory);
          choice.gpus.push_back(index[p]);
        }
        Candidate c{Fragmentation(after) - before_fragmentation, 0, 0, std::move(choice)};
        c.best_fit = BestFitScore(cluster, ask, c.choice);
        for (uint32_t g : c.choice.gpus) c.leases += cluster.gpus[g].leases;
        consider(std::move(c));
      }
    }
    if (!best) return std::nullopt;
    return std::move(best->choice);
  }

 private:
  static uint32_t FirstGpu(const PlacementChoice& c) { return c.gpus.empty() ? 0 : c.gpus[0]; }

  // The ways to place `ask` on a node that fits it, as positions in its NodeFree: for one GPU,
  // one per distinct (kind, free compute, free memory) among the fitting GPUs (the one with
  // fewer leases, then the earlier); for several, the tightest-fitting ones; for none, no GPU.
  std::vector<std::vector<size_t>> Options(const Cluster& cluster, uint32_t node,
                                           const PlacementAsk& ask, const NodeFree& free,
                                           const std::vector<uint32_t>& index) const {
    std::vector<std::vector<size_t>> options;
    if (ask.gpus == 0) {
      options.emplace_back();
    } else if (ask.gpus == 1) {
      std::vector<size_t> picked;
      for (size_t p = 0; p < free.gpus.size(); ++p) {
        if (!GpuFits(cluster.gpus[index[p]], ask)) continue;
        bool same = false;
        for (size_t& q : picked) {
          const auto& a = free.gpus[p];
          const auto& b = free.gpus[q];
          if (a.kind == b.kind && a.milli == b.milli && a.memory == b.memory) {
            same = true;
            if (cluster.gpus[index[p]].leases < cluster.gpus[index[q]].leases) q = p;
            break;
          }
        }
        if (!same) picked.push_back(p);
      }
      for (size_t p : picked) options.push_back({p});
    } else {
      std::vector<size_t> positions;
      for (uint32_t g : TightestGpus(cluster, node, ask)) {
        positions.push_back(
            static_cast<size_t>(std::find(index.begin(), index.end(), g) - index.begin()));
      }
      if (positions.size() == ask.gpus) options.push_back(std::move(positions));
    }
    return options;
  }

  // The popularity-weighted fragmentation of a node state, from the cache when it is there.
  double Fragmentation(const NodeFree& free) {
    key_.clear();
    auto put = [this](uint64_t v) { key_.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(free.cpu_tracked ? free.cpu_milli : ~0ull);
    put(free.memory_tracked ? free.memory : ~0ull);
    sorted_.assign(free.gpus.begin(), free.gpus.end());
    std::sort(sorted_.begin(), sorted_.end(), [](const auto& a, const auto& b) {
      return std::tie(a.kind, a.milli, a.memory) < std::tie(b.kind, b.milli, b.memory);
    });
    for (const auto& g : sorted_) {
      put((static_cast<uint64_t>(g.kind) << 32) | g.milli);
      put(g.memory);
    }
    const size_t shapes = workload_.size();
    auto [it, fresh] = offsets_.try_emplace(key_, values_.size());
    if (fresh) {
      for (size_t s = 0; s < shapes; ++s) {
        const double fgd =
            reach_weight_ < 1
                ? static_cast<double>(ShapeFragment(free, workload_, s, FragmentMeasure::kFgd))
                : 0.0;
        const double reach =
            reach_weight_ > 0
                ? static_cast<double>(ShapeFragment(free, workload_, s, FragmentMeasure::kReach))
                : 0.0;
        values_.push_back(static_cast<float>((1 - reach_weight_) * fgd + reach_weight_ * reach));
      }
    }
    const float* v = values_.data() + it->second;
    double sum = 0;
    for (size_t s = 0; s < shapes; ++s) sum += popularity_[s] * v[s];
    return sum;
  }

  std::string name_;
  double reach_weight_;
  Workload workload_;
  std::vector<double> popularity_;
  uint64_t cached_version_ = ~0ull;
  std::unordered_map<std::string, size_t> offsets_;  // state key -> offset into values_
  std::vector<float> values_;                        // per state, one fragment per shape
  std::string key_;
  std::vector<NodeFree::Gpu> sorted_;
};

}  // namespace

std::unique_ptr<PlacementPolicy> NewFragmentationPolicy(std::string name, double reach_weight,
                                                        size_t max_shapes) {
  return std::make_unique<FragmentationPolicy>(std::move(name), reach_weight, max_shapes);
}

}  // namespace rgpu::registry
