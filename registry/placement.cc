#include "registry/placement.h"

#include <algorithm>
#include <cctype>

namespace rgpu::registry {
namespace {

bool ContainsIgnoringCase(const std::string& text, const std::string& part) {
  if (part.empty()) return true;
  auto it = std::search(text.begin(), text.end(), part.begin(), part.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) ==
           std::tolower(static_cast<unsigned char>(b));
  });
  return it != text.end();
}

bool CpuAndMemoryFit(const NodeLoad& node, const PlacementAsk& ask, bool empty) {
  const uint64_t cpu = empty ? node.cpu_milli_total : node.FreeCpu();
  const uint64_t memory = empty ? node.memory_total : node.FreeMemory();
  return (!node.TracksCpu() || ask.cpu_milli <= cpu) &&
         (!node.TracksMemory() || ask.host_memory <= memory);
}

}  // namespace

bool GpuKindAccepted(const std::string& model, const std::string& backend,
                     const PlacementAsk& ask) {
  if (!ask.backend.empty() && backend != ask.backend) return false;
  if (!ask.gpu_models.empty() &&
      std::find(ask.gpu_models.begin(), ask.gpu_models.end(), model) == ask.gpu_models.end()) {
    return false;
  }
  return ContainsIgnoringCase(model, ask.gpu_type);
}

bool GpuFits(const GpuLoad& gpu, const PlacementAsk& ask) {
  if (!gpu.placeable || !GpuKindAccepted(gpu.model, gpu.backend, ask)) return false;
  if (!ask.excluded.empty() && ask.excluded.count(gpu.id) != 0) return false;
  return ask.memory <= gpu.FreeMemory() && ask.milli <= gpu.FreeMilli();
}

bool NodeFits(const Cluster& cluster, uint32_t node, const PlacementAsk& ask) {
  const NodeLoad& n = cluster.nodes[node];
  if (!CpuAndMemoryFit(n, ask, false)) return false;
  if (ask.gpus == 0) return true;
  uint32_t fitting = 0;
  for (uint32_t g : n.gpus) {
    if (GpuFits(cluster.gpus[g], ask) && ++fitting == ask.gpus) return true;
  }
  return false;
}

bool EverFits(const Cluster& cluster, const PlacementAsk& ask) {
  if (ask.milli > kMilliPerGpu) return false;
  for (const NodeLoad& node : cluster.nodes) {
    if (!CpuAndMemoryFit(node, ask, true)) continue;
    uint32_t fitting = 0;
    for (uint32_t g : node.gpus) {
      const GpuLoad& gpu = cluster.gpus[g];
      if (!GpuKindAccepted(gpu.model, gpu.backend, ask) || ask.excluded.count(gpu.id) != 0) {
        continue;
      }
      if (ask.memory <= gpu.memory_total) ++fitting;
    }
    if (fitting >= ask.gpus) return true;
  }
  return false;
}

void Commit(Cluster* cluster, const PlacementAsk& ask, const PlacementChoice& choice) {
  NodeLoad& node = cluster->nodes[choice.node];
  node.cpu_milli_committed += ask.cpu_milli;
  node.memory_committed += ask.host_memory;
  for (uint32_t g : choice.gpus) {
    GpuLoad& gpu = cluster->gpus[g];
    gpu.memory_committed += ask.memory;
    gpu.milli_committed += ask.milli;
    gpu.leases++;
  }
}

void Release(Cluster* cluster, const PlacementAsk& ask, const PlacementChoice& choice) {
  NodeLoad& node = cluster->nodes[choice.node];
  node.cpu_milli_committed -= std::min(node.cpu_milli_committed, ask.cpu_milli);
  node.memory_committed -= std::min(node.memory_committed, ask.host_memory);
  for (uint32_t g : choice.gpus) {
    GpuLoad& gpu = cluster->gpus[g];
    gpu.memory_committed -= std::min(gpu.memory_committed, ask.memory);
    gpu.milli_committed -= std::min(gpu.milli_committed, ask.milli);
    if (gpu.leases > 0) gpu.leases--;
  }
}

}  // namespace rgpu::registry
