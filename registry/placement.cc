#include "registry/placement.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace rgpu::registry {
namespace {

bool TypeMatches(const std::string& model, const std::string& type) {
  if (type.empty()) return true;
  auto it = std::search(model.begin(), model.end(), type.begin(), type.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) ==
           std::tolower(static_cast<unsigned char>(b));
  });
  return it != model.end();
}

}  // namespace

bool Fits(const GpuLoad& gpu, const PlacementAsk& ask) {
  if (!gpu.placeable || !TypeMatches(gpu.model, ask.gpu_type)) return false;
  if (ask.excluded.count(gpu.id) != 0) return false;
  if (!ask.backend.empty() && gpu.backend != ask.backend) return false;
  const uint64_t free_memory =
      gpu.memory_total > gpu.memory_committed ? gpu.memory_total - gpu.memory_committed : 0;
  const uint32_t free_share =
      kSharePerGpu > gpu.share_committed ? kSharePerGpu - gpu.share_committed : 0;
  return ask.memory <= free_memory && ask.share <= free_share;
}

double FitScore(const GpuLoad& gpu, const PlacementAsk& ask) {
  const double total = gpu.memory_total > 0 ? static_cast<double>(gpu.memory_total) : 1.0;
  const double m =
      (static_cast<double>(gpu.memory_total) - gpu.memory_committed - ask.memory) / total;
  const double c = (static_cast<double>(kSharePerGpu) - gpu.share_committed - ask.share) /
                   static_cast<double>(kSharePerGpu);
  return m + c + std::fabs(m - c);
}

int ChooseGpu(const std::vector<GpuLoad>& gpus, const PlacementAsk& ask) {
  int best = -1;
  double best_score = 0;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (!Fits(gpus[i], ask)) continue;
    const double score = FitScore(gpus[i], ask);
    if (best < 0 || score < best_score ||
        (score == best_score && gpus[i].leases < gpus[static_cast<size_t>(best)].leases)) {
      best = static_cast<int>(i);
      best_score = score;
    }
  }
  return best;
}

bool EverFits(const std::vector<GpuLoad>& gpus, const PlacementAsk& ask) {
  for (const auto& gpu : gpus) {  // an excluded GPU never fits, empty or not
    GpuLoad empty = gpu;
    empty.placeable = true;
    empty.memory_committed = 0;
    empty.share_committed = 0;
    if (Fits(empty, ask)) return true;
  }
  return false;
}

}  // namespace rgpu::registry
