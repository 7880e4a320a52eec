#include "registry/fragmentation.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace rgpu::registry {
namespace {

constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();

// How many copies a free amount holds of a per-copy demand (unbounded when nothing is asked or
// the resource is not tracked).
uint64_t Copies(bool tracked, uint64_t free, uint64_t demand) {
  if (!tracked || demand == 0) return kUnbounded;
  return free / demand;
}

}  // namespace

NodeFree FreeOf(const Cluster& cluster, uint32_t node, Workload* workload,
                std::vector<uint32_t>* gpu_index) {
  const NodeLoad& n = cluster.nodes[node];
  NodeFree free;
  free.cpu_tracked = n.TracksCpu();
  free.cpu_milli = n.FreeCpu();
  free.memory_tracked = n.TracksMemory();
  free.memory = n.FreeMemory();
  if (gpu_index != nullptr) gpu_index->clear();
  for (uint32_t g : n.gpus) {
    const GpuLoad& gpu = cluster.gpus[g];
    if (!gpu.placeable) continue;
    free.gpus.push_back(
        {workload->KindOf(gpu.model, gpu.backend), gpu.FreeMilli(), gpu.FreeMemory()});
    if (gpu_index != nullptr) gpu_index->push_back(g);
  }
  return free;
}

ShapeFragments BothFragments(const NodeFree& free, const Workload& workload, size_t shape) {
  const PlacementAsk& s = workload.shape(shape);
  uint64_t idle = 0;
  for (const auto& g : free.gpus) idle += g.milli;
  const uint64_t by_cpu = Copies(free.cpu_tracked, free.cpu_milli, s.cpu_milli);
  const uint64_t by_memory = Copies(free.memory_tracked, free.memory, s.host_memory);
  const bool host_fits = by_cpu > 0 && by_memory > 0;
  if (s.gpus == 0) return {host_fits ? 0 : idle, 0};

  // The usable GPUs' free compute, and how many copies of s each could hold.
  uint32_t usable_milli[64];
  uint64_t slots[64];
  size_t usable = 0;
  uint64_t usable_total = 0;
  for (const auto& g : free.gpus) {
    if (usable == 64) break;
    if (!workload.Accepts(shape, g.kind) || g.milli < s.milli || g.memory < s.memory) continue;
    usable_milli[usable] = g.milli;
    slots[usable] = std::min(s.milli == 0 ? kUnbounded : g.milli / s.milli,
                             s.memory == 0 ? kUnbounded : g.memory / s.memory);
    usable_total += g.milli;
    ++usable;
  }
  ShapeFragments f;
  f.fgd = host_fits && usable >= s.gpus ? idle - usable_total : idle;

  // kReach: n copies fit when the CPU and memory hold n and the usable GPUs do, each copy on
  // s.gpus distinct GPUs (sum over GPUs of min(slots, n) >= n x s.gpus). Copies beyond the
  // point where they touch every usable GPU reach nothing more, so counting stops there. (One
  // GPU each: every usable GPU holds a copy, so the GPUs hold as many as there are of them.)
  const uint64_t host_copies = std::min(by_cpu, by_memory);
  const uint64_t enough = (usable + s.gpus - 1) / s.gpus;  // copies that touch them all
  uint64_t copies = 0;
  if (s.gpus == 1) {
    copies = std::min(host_copies, enough);
  } else {
    while (copies < host_copies && copies < enough) {
      uint64_t places = 0;
      for (size_t i = 0; i < usable; ++i) places += std::min<uint64_t>(slots[i], copies + 1);
      if (places < (copies + 1) * s.gpus) break;
      ++copies;
    }
  }
  uint64_t reached = usable_total;
  if (copies < enough) {  // the copies reach the copies x s.gpus usable GPUs with most free
    std::sort(usable_milli, usable_milli + usable, std::greater<uint32_t>());
    reached = 0;
    for (uint64_t i = 0; i < copies * s.gpus; ++i) reached += usable_milli[i];
  }
  f.reach = idle - reached;
  return f;
}

uint64_t ShapeFragment(const NodeFree& free, const Workload& workload, size_t shape,
                       FragmentMeasure measure) {
  const ShapeFragments f = BothFragments(free, workload, shape);
  return measure == FragmentMeasure::kFgd ? f.fgd : f.reach;
}

double NodeFragmentation(const NodeFree& free, const Workload& workload, FragmentMeasure measure) {
  double sum = 0;
  for (size_t s = 0; s < workload.size(); ++s) {
    const double p = workload.popularity(s);
    if (p > 0) sum += p * static_cast<double>(ShapeFragment(free, workload, s, measure));
  }
  return sum;
}

}  // namespace rgpu::registry
