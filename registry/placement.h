// Placement: where a request goes. The request (PlacementAsk), the answer (PlacementChoice), what
// fits where, and the policies that choose among what fits, all pure functions of the cluster's
// loads (registry/cluster.h) or objects that learn only from the requests they are shown, so that
// the registry's service and the cluster-scale simulator (bench/placement_sim) run the same code.
//
// A request asks for `gpus` GPUs on one node, each with `milli` thousandths of its compute and
// `memory` bytes of its device memory, plus `cpu_milli` and `host_memory` of the node. A GPU fits
// when it is placeable (online, its provider not revoked), its model contains `gpu_type`
// (case-insensitive; "" matches any) and is one of `gpu_models` (exactly; empty matches any), its
// backend is `backend` ("" matches any), the request does not exclude it, and its free memory and
// compute cover the request. A node fits when its free CPU and host memory (where tracked) cover
// the request and at least `gpus` of its GPUs fit.
//
// Policies (by name, MakePlacementPolicy): "first-fit", "random", "best-fit", "dot-product"
// (registry/placement_policies.h), "fgd" (fragmentation gradient descent, FGD's published idea)
// and "reach" (this project's: fragmentation that also counts the GPU capacity a node's CPU,
// memory and GPU count put out of reach; registry/fragmentation_policy.h), with "reach:W" (its
// measure's weight) and "@N" (shapes remembered) variants for experiments. The registry's
// default is kDefaultPlacementPolicy.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "registry/cluster.h"

namespace rgpu::registry {

// The registry's API asks for a compute share in percent of a GPU (PlaceRequest.compute_share,
// leases, GpuList); placement counts thousandths (kMilliPerGpu).
constexpr uint32_t kSharePerGpu = 100;
constexpr uint32_t kMilliPerShare = kMilliPerGpu / kSharePerGpu;

struct PlacementAsk {
  std::string gpu_type;                 // a case-insensitive substring of the model; "" = any
  std::vector<std::string> gpu_models;  // models allowed, exact (a trace's gpu_spec); empty = any
  uint32_t gpus = 1;                    // GPUs, all on one node; 0: the node's CPU/memory only
  uint32_t milli = 250;                 // compute of each GPU, thousandths (1..kMilliPerGpu)
  uint64_t memory = 0;                  // device memory on each GPU, bytes
  uint64_t cpu_milli = 0;               // the node's CPU, thousandths of a core
  uint64_t host_memory = 0;             // the node's memory, bytes
  std::string backend;                  // "" = any
  std::set<std::string> excluded;       // ids of GPUs it must not go to
};

// Where a request goes: a node and `ask.gpus` distinct GPUs of it.
struct PlacementChoice {
  uint32_t node = 0;
  std::vector<uint32_t> gpus;  // indices into Cluster::gpus; empty when the ask wants none
};

// True when the GPU could take one of the request's GPUs now.
bool GpuFits(const GpuLoad& gpu, const PlacementAsk& ask);
// True when the GPU's model and backend are ones the request accepts (whatever its load).
bool GpuKindAccepted(const std::string& model, const std::string& backend, const PlacementAsk& ask);
// True when node `node` could take the whole request now.
bool NodeFits(const Cluster& cluster, uint32_t node, const PlacementAsk& ask);
// True when some node could take the request once it were empty and its GPUs placeable, i.e. the
// request is satisfiable at all on this cluster (an excluded GPU never counts).
bool EverFits(const Cluster& cluster, const PlacementAsk& ask);
// Adds the request's resources to the chosen node and GPUs (one lease more on each GPU).
// `choice` must be one NodeFits allowed.
void Commit(Cluster* cluster, const PlacementAsk& ask, const PlacementChoice& choice);
// Takes back what Commit added (never below zero).
void Release(Cluster* cluster, const PlacementAsk& ask, const PlacementChoice& choice);

// A placement policy. Choose is called whenever a request could be placed (a waiting request is
// offered again each time capacity appears); Observe once per request, when it arrives, so that a
// policy may learn what requests look like. Neither is thread-safe: the caller serializes them.
class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual std::string_view name() const = 0;
  virtual void Observe(const PlacementAsk& ask) { (void)ask; }
  // Where `ask` goes on `cluster` now (a node and GPUs that fit), or nullopt when nothing fits.
  virtual std::optional<PlacementChoice> Choose(const Cluster& cluster,
                                                const PlacementAsk& ask) = 0;
};

// The registry's default policy: the winner of bench/placement_sim (docs/registry.md, "Placement
// at cluster scale").
extern const char kDefaultPlacementPolicy[];
// The names MakePlacementPolicy knows, in a fixed order.
const std::vector<std::string>& PlacementPolicyNames();
// The policy called `name` (one of PlacementPolicyNames, or a variant: "reach:W" with W within
// 0..1, "fgd@N" or "reach[:W]@N" with N shapes); `seed` feeds the random one. kInvalidArgument
// for an unknown name.
Status MakePlacementPolicy(std::string_view name, uint64_t seed,
                           std::unique_ptr<PlacementPolicy>* out);

}  // namespace rgpu::registry
