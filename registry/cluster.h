// The cluster as placement sees it: nodes (a provider's server, or a machine of a trace) that
// group GPUs with the node's CPU and host memory, and what is committed on each. Plain data: the
// policies (registry/placement.h) read it; Commit and Release (there) change it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rgpu::registry {

// A GPU's compute, in thousandths: the unit of a request's share of a GPU (`gpu_milli` in a
// trace; the registry's percent share times 10).
constexpr uint32_t kMilliPerGpu = 1000;

struct GpuLoad {
  std::string id;  // the GPU's registry id
  bool placeable = false;
  std::string model;
  std::string backend;            // the serving backend's kind ("cuda", "hip", "softgpu")
  uint64_t memory_total = 0;      // device memory, bytes (0: none to offer; memory is not scored)
  uint64_t memory_committed = 0;  // device memory promised to leases
  uint32_t milli_committed = 0;   // compute promised to leases, thousandths of the GPU
  uint32_t leases = 0;
  uint32_t node = 0;  // index of its node in Cluster::nodes (set by Cluster::AddGpu)

  uint64_t FreeMemory() const {
    return memory_total > memory_committed ? memory_total - memory_committed : 0;
  }
  uint32_t FreeMilli() const {
    return kMilliPerGpu > milli_committed ? kMilliPerGpu - milli_committed : 0;
  }
};

struct NodeLoad {
  std::string name;
  // A total of 0 means the resource is not tracked: every request fits it and no policy scores
  // it (the registry does not know its servers' CPUs and host memory; a trace does).
  uint64_t cpu_milli_total = 0;  // thousandths of a CPU core
  uint64_t cpu_milli_committed = 0;
  uint64_t memory_total = 0;  // host memory, bytes
  uint64_t memory_committed = 0;
  std::vector<uint32_t> gpus;  // indices into Cluster::gpus

  bool TracksCpu() const { return cpu_milli_total > 0; }
  bool TracksMemory() const { return memory_total > 0; }
  uint64_t FreeCpu() const {
    return cpu_milli_total > cpu_milli_committed ? cpu_milli_total - cpu_milli_committed : 0;
  }
  uint64_t FreeMemory() const {
    return memory_total > memory_committed ? memory_total - memory_committed : 0;
  }
};

struct Cluster {
  std::vector<NodeLoad> nodes;
  std::vector<GpuLoad> gpus;

  // Appends a node (its `gpus` list is ignored: GPUs join through AddGpu); returns its index.
  uint32_t AddNode(NodeLoad node);
  // Appends a GPU to node `node` (an index AddNode returned); returns the GPU's index.
  uint32_t AddGpu(uint32_t node, GpuLoad gpu);
};

}  // namespace rgpu::registry
