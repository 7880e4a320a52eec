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

constexpr double kTie = 1e-6;               // thousandths of a GPU: growths this close tie
constexpr size_t kMaxCachedStates = 20000;  // then the cache starts over

void Put(std::string* key, uint64_t v) { key->append(reinterpret_cast<const char*>(&v), sizeof v); }

class FragmentationPolicy : public PlacementPolicy {
 public:
  FragmentationPolicy(std::string name, double reach_weight, size_t max_shapes)
      : name_(std::move(name)),
        reach_weight_(reach_weight),
        max_shapes_(std::max<size_t>(1, max_shapes)),
        workload_(max_shapes_) {}

  std::string_view name() const override { return name_; }

  void Observe(const PlacementAsk& ask) override { workload_.Observe(ask); }

  std::optional<PlacementChoice> Choose(const Cluster& cluster, const PlacementAsk& ask) override {
    if (offsets_.size() > kMaxCachedStates) ForgetStates();
    ++call_;
    popularity_.resize(workload_.size());
    for (size_t s = 0; s < workload_.size(); ++s) popularity_[s] = workload_.popularity(s);
    if (nodes_.size() != cluster.nodes.size()) nodes_.resize(cluster.nodes.size());
    growths_.clear();

    Best best;
    for (uint32_t n = 0; n < cluster.nodes.size(); ++n) {
      if (!NodeFits(cluster, n, ask)) continue;
      const NodeView& view = Refresh(cluster, n);
      const double before = Weighted(view.state, view.free);
      if (ask.gpus == 0) {
        Consider(cluster, ask, &best, Growth(view, before, ask, {}), n, {});
      } else if (ask.gpus == 1) {
        // Every fitting GPU is a candidate; those in the same state grow the node's
        // fragmentation alike, so each state's growth is computed once (and looked up once per
        // node: `seen` holds the positions already looked up).
        size_t seen[64];
        double seen_growth[64];
        size_t seen_count = 0;
        for (size_t p = 0; p < view.free.gpus.size(); ++p) {
          const uint32_t g = view.index[p];
          if (!GpuFits(cluster.gpus[g], ask)) continue;
          const NodeFree::Gpu& state = view.free.gpus[p];
          double growth = 0;
          size_t i = 0;
          for (; i < seen_count; ++i) {
            const NodeFree::Gpu& other = view.free.gpus[seen[i]];
            if (other.kind == state.kind && other.milli == state.milli &&
                other.memory == state.memory) {
              growth = seen_growth[i];
              break;
            }
          }
          if (i == seen_count) {
            const size_t position[] = {p};
            growth = Growth(view, before, ask, position);
            if (seen_count < 64) {
              seen[seen_count] = p;
              seen_growth[seen_count++] = growth;
            }
          }
          Consider(cluster, ask, &best, growth, n, {&g, 1});
        }
      } else {
        const std::vector<uint32_t> gpus = TightestGpus(cluster, n, ask);
        std::vector<size_t> positions;
        for (uint32_t g : gpus) {
          positions.push_back(static_cast<size_t>(
              std::find(view.index.begin(), view.index.end(), g) - view.index.begin()));
        }
        Consider(cluster, ask, &best, Growth(view, before, ask, positions), n, gpus);
      }
    }
    if (!best.found) return std::nullopt;
    return std::move(best.choice);
  }

 private:
  // A node's NodeFree, kept between calls with the loads it was made from, and its state's id.
  struct GpuSnapshot {
    uint32_t gpu = 0;
    bool placeable = false;
    uint32_t milli_committed = 0;
    uint64_t memory_committed = 0, memory_total = 0;
    std::string model, backend;
  };
  struct NodeView {
    uint64_t epoch = 0;  // of the state cache the id refers to (0: never made)
    uint64_t cpu_total = 0, cpu_committed = 0, memory_total = 0, memory_committed = 0;
    std::vector<GpuSnapshot> gpus;
    NodeFree free;
    std::vector<uint32_t> index;  // position in free.gpus -> GPU index
    size_t state = 0;             // id of its state in the cache
  };
  struct Best {
    bool found = false;
    double growth = 0, best_fit = 0;
    bool best_fit_known = false;
    uint32_t leases = 0;
    PlacementChoice choice;
  };

  // The lowest growth wins; near ties go to the lower BestFitScore (computed only for them),
  // then fewer leases, then the earlier node and GPU.
  void Consider(const Cluster& cluster, const PlacementAsk& ask, Best* best, double growth,
                uint32_t node, std::span<const uint32_t> gpus) {
    uint32_t leases = 0;
    for (uint32_t g : gpus) leases += cluster.gpus[g].leases;
    bool better = !best->found || growth < best->growth - kTie;
    double best_fit = 0;
    if (!better && growth <= best->growth + kTie) {
      if (!best->best_fit_known) {
        best->best_fit = BestFitScore(cluster, ask, best->choice);
        best->best_fit_known = true;
      }
      best_fit = BestFitScore(cluster, ask, node, gpus);
      const uint32_t first = gpus.empty() ? 0 : gpus[0];
      const uint32_t best_first = best->choice.gpus.empty() ? 0 : best->choice.gpus[0];
      better = std::tie(best_fit, leases, node, first) <
               std::tie(best->best_fit, best->leases, best->choice.node, best_first);
      if (!better) return;
      best->best_fit_known = true;
    } else if (better) {
      best->best_fit_known = false;
    }
    if (!better) return;
    best->found = true;
    best->growth = growth;
    best->best_fit = best_fit;
    best->leases = leases;
    best->choice.node = node;
    best->choice.gpus.assign(gpus.begin(), gpus.end());
  }

  // Node `n`'s view, remade only when its loads changed since it was made.
  const NodeView& Refresh(const Cluster& cluster, uint32_t n) {
    const NodeLoad& node = cluster.nodes[n];
    NodeView& view = nodes_[n];
    bool same =
        view.epoch == epoch_ && view.cpu_total == node.cpu_milli_total &&
        view.cpu_committed == node.cpu_milli_committed && view.memory_total == node.memory_total &&
        view.memory_committed == node.memory_committed && view.gpus.size() == node.gpus.size();
    for (size_t i = 0; same && i < node.gpus.size(); ++i) {
      const GpuSnapshot& s = view.gpus[i];
      const GpuLoad& g = cluster.gpus[node.gpus[i]];
      same = s.gpu == node.gpus[i] && s.placeable == g.placeable &&
             s.milli_committed == g.milli_committed && s.memory_committed == g.memory_committed &&
             s.memory_total == g.memory_total && s.model == g.model && s.backend == g.backend;
    }
    if (same) return view;
    view.epoch = epoch_;
    view.cpu_total = node.cpu_milli_total;
    view.cpu_committed = node.cpu_milli_committed;
    view.memory_total = node.memory_total;
    view.memory_committed = node.memory_committed;
    view.gpus.resize(node.gpus.size());
    for (size_t i = 0; i < node.gpus.size(); ++i) {
      const GpuLoad& g = cluster.gpus[node.gpus[i]];
      view.gpus[i] = {node.gpus[i],   g.placeable, g.milli_committed, g.memory_committed,
                      g.memory_total, g.model,     g.backend};
    }
    view.free = FreeOf(cluster, n, &workload_, &view.index);
    view.state = StateOf(view.free);
    return view;
  }

  // How much placing `ask` on `positions` of the node grows its weighted fragmentation
  // (`before`). Within a call, nodes in the same state share it for the same choice of GPU state.
  double Growth(const NodeView& view, double before, const PlacementAsk& ask,
                std::span<const size_t> positions) {
    GrowthKey key{view.state, ~0ull, ~0ull};
    if (positions.size() == 1) {
      const NodeFree::Gpu& g = view.free.gpus[positions[0]];
      key.gpu = (static_cast<uint64_t>(g.kind) << 32) | g.milli;
      key.memory = g.memory;
    }
    const bool memo = positions.size() <= 1;
    if (memo) {
      auto known = growths_.find(key);
      if (known != growths_.end()) return known->second;
    }
    NodeFree after = view.free;
    after.cpu_milli -= std::min(after.cpu_milli, ask.cpu_milli);
    after.memory -= std::min(after.memory, ask.host_memory);
    for (size_t p : positions) {
      after.gpus[p].milli -= std::min(after.gpus[p].milli, ask.milli);
      after.gpus[p].memory -= std::min(after.gpus[p].memory, ask.memory);
    }
    // Not kept: a state a placement would lead to is rarely met again, but for the one chosen,
    // which the node's next view computes once.
    double weighted = 0;
    for (size_t s = 0; s < workload_.size(); ++s) weighted += popularity_[s] * Blend(after, s);
    const double growth = weighted - before;
    if (memo) growths_.emplace(key, growth);
    return growth;
  }

  // The id of a node state in the cache: its free CPU and memory and its GPUs' kinds and free
  // compute and memory, in a canonical order (GPUs that differ only in order are one state).
  size_t StateOf(const NodeFree& free) {
    key_.clear();
    Put(&key_, free.cpu_tracked ? free.cpu_milli : ~0ull);
    Put(&key_, free.memory_tracked ? free.memory : ~0ull);
    sorted_.assign(free.gpus.begin(), free.gpus.end());
    std::sort(sorted_.begin(), sorted_.end(), [](const auto& a, const auto& b) {
      return std::tie(a.kind, a.milli, a.memory) < std::tie(b.kind, b.milli, b.memory);
    });
    for (const auto& g : sorted_) {
      Put(&key_, (static_cast<uint64_t>(g.kind) << 32) | g.milli);
      Put(&key_, g.memory);
    }
    auto [it, fresh] = offsets_.try_emplace(key_, offsets_.size());
    if (fresh) {
      values_.resize(values_.size() + max_shapes_);
      generations_.resize(generations_.size() + max_shapes_, 0);
      weighted_call_.push_back(0);
      weighted_.push_back(0);
    }
    return it->second;
  }

  // The popularity-weighted fragmentation of state `state` (whose NodeFree is `free`). Each
  // state holds a value per shape index, with the generation of the shape it was computed for;
  // a shape that has since taken that index is computed afresh. Once per call and state.
  double Weighted(size_t state, const NodeFree& free) {
    if (weighted_call_[state] == call_) return weighted_[state];
    float* v = values_.data() + state * max_shapes_;
    uint64_t* g = generations_.data() + state * max_shapes_;
    double sum = 0;
    for (size_t s = 0; s < workload_.size(); ++s) {
      if (g[s] != workload_.generation(s)) {
        g[s] = workload_.generation(s);
        v[s] = static_cast<float>(Blend(free, s));
      }
      sum += popularity_[s] * v[s];
    }
    weighted_call_[state] = call_;
    weighted_[state] = sum;
    return sum;
  }

  // Shape s's fragment on `free`: (1 - w) x FGD's + w x reach's.
  double Blend(const NodeFree& free, size_t s) const {
    const ShapeFragments f = BothFragments(free, workload_, s);
    return (1 - reach_weight_) * static_cast<double>(f.fgd) +
           reach_weight_ * static_cast<double>(f.reach);
  }

  void ForgetStates() {
    offsets_.clear();
    values_.clear();
    generations_.clear();
    weighted_call_.clear();
    weighted_.clear();
    ++epoch_;  // every NodeView's state id is stale
  }

  struct GrowthKey {
    size_t state;
    uint64_t gpu, memory;  // the chosen GPU's kind and free compute, free memory (~0: none)
    bool operator==(const GrowthKey&) const = default;
  };
  struct GrowthKeyHash {
    size_t operator()(const GrowthKey& k) const {
      uint64_t h = k.state * 0x9E3779B97F4A7C15ull;
      h ^= (k.gpu + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
      h ^= (k.memory + 0x165667B19E3779F9ull) * 0x27D4EB2F165667C5ull;
      return static_cast<size_t>(h ^ (h >> 31));
    }
  };

  std::string name_;
  double reach_weight_;
  size_t max_shapes_;
  Workload workload_;
  std::vector<double> popularity_;  // this call's, per shape index
  uint64_t call_ = 0;
  uint64_t epoch_ = 1;
  std::vector<NodeView> nodes_;
  // Node states seen: key -> id; per id, max_shapes_ values and their shapes' generations, and
  // the weighted sum as of the call that last computed it.
  std::unordered_map<std::string, size_t> offsets_;
  std::vector<float> values_;
  std::vector<uint64_t> generations_;
  std::vector<uint64_t> weighted_call_;
  std::vector<double> weighted_;
  std::unordered_map<GrowthKey, double, GrowthKeyHash> growths_;  // this call's
  std::string key_;
  std::vector<NodeFree::Gpu> sorted_;
};

}  // namespace

std::unique_ptr<PlacementPolicy> NewFragmentationPolicy(std::string name, double reach_weight,
                                                        size_t max_shapes) {
  return std::make_unique<FragmentationPolicy>(std::move(name), reach_weight, max_shapes);
}

}  // namespace rgpu::registry
