// A cluster trace in the openb format (Alibaba's cluster-trace-gpu-v2023, as FGD's simulator
// publishes it): a node list and a pod list, read from CSV by column name, and their mapping onto
// the registry's placement model (registry/cluster.h, registry/placement.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "registry/cluster.h"
#include "registry/placement.h"

namespace rgpu::placement_sim {

struct TraceNode {
  std::string name;         // sn
  uint64_t cpu_milli = 0;   // cpu_milli
  uint64_t memory_mib = 0;  // memory_mib
  uint32_t gpus = 0;        // gpu
  std::string model;        // model
};

struct TracePod {
  std::string name;
  uint64_t cpu_milli = 0;
  uint64_t memory_mib = 0;
  uint32_t num_gpu = 0;               // whole GPUs when > 1 (then gpu_milli is 1000), else 0 or 1
  uint32_t gpu_milli = 0;             // thousandths of each GPU
  std::vector<std::string> gpu_spec;  // GPU models allowed ('|'-separated in the file); empty: any
  bool has_times = false;             // the file has creation_time and deletion_time
  int64_t creation_s = 0;
  int64_t deletion_s = 0;

  // GPU compute asked, in thousandths of a GPU (num_gpu x gpu_milli).
  uint64_t GpuMilli() const { return uint64_t{num_gpu} * gpu_milli; }
};

// Reads a node list (columns sn, cpu_milli, memory_mib, gpu, model; others ignored).
Status LoadNodes(const std::string& path, std::vector<TraceNode>* out);
// Reads a pod list (columns name, cpu_milli, memory_mib, num_gpu, gpu_milli, and, when present,
// gpu_spec, creation_time and deletion_time; others ignored). A pod asking for several GPUs must
// ask for whole ones; gpu_milli must be within 0..1000.
Status LoadPods(const std::string& path, std::vector<TracePod>* out);

// The cluster of `nodes`: one placement node per trace node, tracking its CPU and memory, with its
// GPUs placeable, of its model, offering compute only (no device memory is asked or scored).
registry::Cluster BuildCluster(const std::vector<TraceNode>& nodes);
// A pod as a placement request.
registry::PlacementAsk AskOf(const TracePod& pod);

}  // namespace rgpu::placement_sim
