// GPU fragmentation of a node: how much of its idle GPU compute a kind of task could not use.
// Two measures, both in thousandths of a GPU (kMilliPerGpu per whole GPU), for a task shape s
// (a request of the Workload) on a node with idle compute `idle` (the free compute of its
// placeable GPUs). A GPU is usable by s when s accepts its kind and its free compute and memory
// cover s's per-GPU request.
//
//   kFgd (FGD, Weng et al., USENIX ATC'23): if s cannot run on the node at all (its CPU or host
//   memory falls short, or fewer than s.gpus GPUs are usable) the fragment is all of `idle`;
//   otherwise it is the free compute of the GPUs not usable by s (pieces too small for it).
//   A task that asks for no GPU: 0 when it can run, else `idle`.
//
//   kReach (this project's): the idle compute that tasks of shape s could not reach, however many
//   of them came. n copies of s fit the node when its CPU, host memory and usable GPUs hold n
//   (each copy on s.gpus distinct usable GPUs, a GPU holding as many as its free compute
//   allows); those copies can reach at most n x s.gpus GPUs, the usable ones with the most free
//   compute, and the fragment is `idle` minus those GPUs' free compute. Unlike kFgd it counts the
//   GPUs a node's CPU or memory will strand (a node with 8 idle GPUs and CPU for one more task
//   has 7 GPUs out of that task's reach) and the whole GPUs left over by multi-GPU tasks (3 idle
//   GPUs and 2-GPU tasks: one is out of reach). A task that asks for no GPU reaches none and
//   counts 0: it matters only through the CPU and memory it takes from the others.
//
// A node's fragmentation for a workload is the popularity-weighted sum over its shapes.
#pragma once

#include <cstdint>
#include <vector>

#include "registry/cluster.h"
#include "registry/workload.h"

namespace rgpu::registry {

enum class FragmentMeasure { kFgd, kReach };

// What a node has free, as the measures read it.
struct NodeFree {
  bool cpu_tracked = false;
  uint64_t cpu_milli = 0;
  bool memory_tracked = false;
  uint64_t memory = 0;  // host memory, bytes
  struct Gpu {
    uint32_t kind = 0;    // Workload::KindOf(model, backend)
    uint32_t milli = 0;   // free compute
    uint64_t memory = 0;  // free device memory
  };
  std::vector<Gpu> gpus;  // the placeable GPUs, in the node's order
};

// Node `node`'s free resources; `gpu_index`, when not null, receives each entry's index into
// Cluster::gpus.
NodeFree FreeOf(const Cluster& cluster, uint32_t node, Workload* workload,
                std::vector<uint32_t>* gpu_index = nullptr);
// The fragment of shape `shape` of `workload` on `free`, in thousandths of a GPU.
uint64_t ShapeFragment(const NodeFree& free, const Workload& workload, size_t shape,
                       FragmentMeasure measure);
// Both measures at once (each what ShapeFragment gives).
struct ShapeFragments {
  uint64_t fgd = 0;
  uint64_t reach = 0;
};
ShapeFragments BothFragments(const NodeFree& free, const Workload& workload, size_t shape);
// Sum over the workload's shapes of popularity x ShapeFragment, in thousandths of a GPU.
double NodeFragmentation(const NodeFree& free, const Workload& workload, FragmentMeasure measure);

}  // namespace rgpu::registry
