#include "registry/cluster.h"

#include <utility>

namespace rgpu::registry {

uint32_t Cluster::AddNode(NodeLoad node) {
  node.gpus.clear();
  nodes.push_back(std::move(node));
  return static_cast<uint32_t>(nodes.size() - 1);
}

uint32_t Cluster::AddGpu(uint32_t node, GpuLoad gpu) {
  gpu.node = node;
  gpus.push_back(std::move(gpu));
  const uint32_t index = static_cast<uint32_t>(gpus.size() - 1);
  nodes[node].gpus.push_back(index);
  return index;
}

}  // namespace rgpu::registry
