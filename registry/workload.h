// The workload a fragmentation-aware policy plans for: the shapes of the requests seen so far
// (a request without its exclusions) and how often each came, learned online from the requests
// the policy is shown (FGD's "target workload", estimated from history rather than given).
// Also interns GPU kinds (model and backend) so that whether a shape accepts a kind is a table
// look-up.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "registry/placement.h"

namespace rgpu::registry {

class Workload {
 public:
  // Keeps at most `max_shapes` shapes: when a new one would exceed that, the least frequent is
  // forgotten (so a registry with ever-new request sizes keeps the common ones).
  explicit Workload(size_t max_shapes = 256);

  // Counts one request of `ask`'s shape.
  void Observe(const PlacementAsk& ask);
  size_t size() const { return shapes_.size(); }
  // The i-th shape (excluded is always empty).
  const PlacementAsk& shape(size_t i) const { return shapes_[i].ask; }
  // The share of the counted requests that had shape i (they add up to 1; 0 before any).
  double popularity(size_t i) const;
  // Changes whenever a shape is added or forgotten (not when counts change).
  uint64_t version() const { return version_; }

  // The id of a GPU kind (model and backend), made on first sight.
  uint32_t KindOf(const std::string& model, const std::string& backend);
  // Whether shape `shape` accepts GPUs of kind `kind` (GpuKindAccepted).
  bool Accepts(size_t shape, uint32_t kind) const { return accepts_[shape][kind]; }

 private:
  struct Counted {
    PlacementAsk ask;
    std::string key;
    uint64_t count = 0;
  };
  void FillAccepts(size_t shape);

  size_t max_shapes_;
  std::vector<Counted> shapes_;
  std::map<std::string, size_t> index_;  // key -> index into shapes_
  uint64_t total_ = 0;
  uint64_t version_ = 0;
  std::vector<std::pair<std::string, std::string>> kinds_;  // model, backend
  std::map<std::pair<std::string, std::string>, uint32_t> kind_ids_;
  std::vector<std::vector<bool>> accepts_;  // [shape][kind]
};

}  // namespace rgpu::registry
