// The classic placement policies (registry/placement.h has the interface, what fits, and the
// fragmentation-aware ones are in registry/fragmentation_policy.h):
//   first-fit:   the first node that fits (cluster order) and its first fitting GPUs;
//   random:      a node drawn uniformly among those that fit, and fitting GPUs of it drawn
//                uniformly (a seeded generator, so that a run can be repeated);
//   best-fit:    the choice with the lowest BestFitScore; for one GPU, ties go to the GPU with
//                fewer leases, then the earlier one; the registry's policy before
//                bench/placement_sim, which it reduces to on nodes that track no CPU or memory;
//   dot-product: Tetris's alignment (Grandl et al., SIGCOMM'14): the node whose free resources,
//                as fractions of its capacity, have the largest dot product with the request's
//                demand in the same units (CPU, host memory, GPU compute, device memory), then
//                its tightest-fitting GPUs.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "registry/placement.h"

namespace rgpu::registry {

// Best fit over every resource the choice touches: with, after placing, c the fraction of the
// chosen GPUs' compute left free (mean over them), m the same for their device memory (where
// the GPUs offer any), and u, h the fractions of the node's CPU and host memory left free (where
// tracked), score = sum of those fractions + (largest - smallest). The tightest fit wins, so big
// GPUs and nodes stay whole for big requests, and the spread term avoids leaving one resource
// stranded (much memory free on a GPU with no compute left, or the reverse). For one GPU on a
// node that tracks nothing this is m + c + |m - c|. `choice` must fit.
double BestFitScore(const Cluster& cluster, const PlacementAsk& ask, const PlacementChoice& choice);
// The same for node `node` and the GPUs `gpus` of it (no PlacementChoice to build).
double BestFitScore(const Cluster& cluster, const PlacementAsk& ask, uint32_t node,
                    std::span<const uint32_t> gpus);
// Tetris's alignment of node `node` with the request (higher is better); `node` must fit.
double DotProductScore(const Cluster& cluster, const PlacementAsk& ask, uint32_t node);
// The `ask.gpus` fitting GPUs of node `node` with the lowest one-GPU BestFitScore (ties: fewer
// leases, then the earlier GPU), in that order; fewer when not that many fit.
std::vector<uint32_t> TightestGpus(const Cluster& cluster, uint32_t node, const PlacementAsk& ask);

std::unique_ptr<PlacementPolicy> NewFirstFitPolicy();
std::unique_ptr<PlacementPolicy> NewRandomPolicy(uint64_t seed);
std::unique_ptr<PlacementPolicy> NewBestFitPolicy();
std::unique_ptr<PlacementPolicy> NewDotProductPolicy();

}  // namespace rgpu::registry
