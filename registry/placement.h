// Placement: which GPU a request goes to. A pure function of the GPUs' loads, so that the policy
// is tested on its own and timed apart from the service around it.
//
// Policy (fragmentation-aware best fit over two resources, memory and compute share):
//   - a GPU is a candidate when it is placeable (online, its provider not revoked), its model
//     contains the requested type (case-insensitive; "" matches any), its server's backend is the
//     one asked for (a HIP program's kernels need "hip"; "" matches any), and both its free memory
//     and its free compute share cover the request;
//   - among candidates, the one with the lowest score wins, where with m and c the fractions of
//     the GPU's memory and compute share that would be left free after placing,
//         score = m + c + |m - c|   (= 2 max(m, c))
//     so the tightest fit wins (large GPUs stay whole for large requests) and a placement that
//     would strand one resource (much memory left but no compute, or the reverse) is avoided;
//   - ties go to the GPU with fewer leases, then to the earlier GPU;
//   - a GPU the request excludes (the program's other placements, `rgpu run --gpus N`) is never
//     a candidate.
// Priority is the queue's business (registry/service.h): higher priorities are placed first.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace rgpu::registry {

constexpr uint32_t kSharePerGpu = 100;  // compute share units (percent) a GPU offers

struct GpuLoad {
  std::string id;  // the GPU's registry id
  bool placeable = false;
  std::string model;
  std::string backend;  // the serving backend's kind ("cuda", "hip", "softgpu")
  uint64_t memory_total = 0;
  uint64_t memory_committed = 0;
  uint32_t share_committed = 0;
  uint32_t leases = 0;
};

struct PlacementAsk {
  std::string gpu_type;  // "" = any
  uint64_t memory = 0;
  uint32_t share = 25;             // 1..kSharePerGpu
  std::string backend;             // "" = any
  std::set<std::string> excluded;  // ids of GPUs it must not go to
};

// True when the GPU could take the request now.
bool Fits(const GpuLoad& gpu, const PlacementAsk& ask);
// The score above (lower is better); only meaningful when Fits().
double FitScore(const GpuLoad& gpu, const PlacementAsk& ask);
// The index of the chosen GPU, or -1 when none fits.
int ChooseGpu(const std::vector<GpuLoad>& gpus, const PlacementAsk& ask);
// True when some GPU of the requested type, not excluded, could take the request once it were
// empty (i.e. the request is satisfiable at all on these GPUs, placeable or not).
bool EverFits(const std::vector<GpuLoad>& gpus, const PlacementAsk& ask);

}  // namespace rgpu::registry
