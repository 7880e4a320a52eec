// Fragmentation-aware placement (FGD's idea, Weng et al., USENIX ATC'23, in this project's
// code, with either fragmentation measure of registry/fragmentation.h): place each request where
// the popularity-weighted fragmentation of the node it lands on grows least (or shrinks most),
// the workload being what the policy has observed so far (registry/workload.h).
//
// Candidates: every node that fits, and on it, for one GPU, each fitting GPU (GPUs with the same
// kind and free compute and memory are one candidate: the one with fewer leases, then the
// earlier), for several, the tightest-fitting ones (TightestGpus). The lowest growth wins; ties
// (within 1e-9 of a GPU) go to the lower BestFitScore, then fewer leases, then the earlier
// node and GPU.
//
// Fragment vectors (one value per shape) of node states are cached, keyed by the state, and the
// cache is emptied when the workload's set of shapes changes; choices never depend on it.
#pragma once

#include <memory>

#include "registry/fragmentation.h"
#include "registry/placement.h"

namespace rgpu::registry {

std::unique_ptr<PlacementPolicy> NewFragmentationPolicy(FragmentMeasure measure,
                                                        size_t max_shapes = 256);

}  // namespace rgpu::registry
