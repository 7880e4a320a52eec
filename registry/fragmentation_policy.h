// Fragmentation-aware placement (FGD's idea, Weng et al., USENIX ATC'23, in this project's
// code): place each request where the popularity-weighted fragmentation of the node it lands on
// grows least (or shrinks most), the workload being what the policy has observed so far
// (registry/workload.h). A shape's fragment is
//     (1 - w) x kFgd + w x kReach        (registry/fragmentation.h)
// kFgd is the optimistic estimate (any idle GPU a task of the shape could use counts as usable,
// however few of them the node's CPU and memory can hold), kReach the pessimistic one (only tasks
// of that shape come, so what their number cannot reach is lost). "fgd" is w = 0 (FGD's
// measure); "reach", this project's policy, is w = 1/2, the midpoint of the two estimates;
// "reach:W" any w in [0, 1] (for experiments: "reach:1" is the pessimistic estimate alone).
// The workload keeps kWorkloadShapes shapes (enough for openb's common ones, and few enough that
// a registry of 6000 GPUs decides in about a millisecond); a suffix "@N" keeps N ("fgd@256").
//
// Candidates: every node that fits, and on it, for one GPU, each fitting GPU (GPUs with the same
// kind and free compute and memory are one candidate: the one with fewer leases, then the
// earlier), for several, the tightest-fitting ones (TightestGpus). The lowest growth wins; ties
// (within 1e-9 of a GPU) go to the lower BestFitScore, then fewer leases, then the earlier
// node and GPU.
//
// Fragment vectors (one value per shape) of node states are cached, keyed by the state; a value
// is computed again when another shape has taken its index in the workload. Choices never
// depend on the cache.
#pragma once

#include <memory>
#include <string>

#include "registry/fragmentation.h"
#include "registry/placement.h"

namespace rgpu::registry {

constexpr size_t kWorkloadShapes = 64;

// `reach_weight` is w above, within [0, 1]; `name` is what name() answers.
std::unique_ptr<PlacementPolicy> NewFragmentationPolicy(std::string name, double reach_weight,
                                                        size_t max_shapes = kWorkloadShapes);

}  // namespace rgpu::registry
