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
  // Keeps at most `max_shapes` shapes: when a new one would exceed that, it takes the place
  // (index) of the least frequent, which is forgotten (so a registry with ever-new request
  // sizes keeps the common ones).
  explicit Workload(size_t max_shapes = 64);

  // Counts one request of `ask`'s shape.
  void Observe(const PlacementAsk& ask);
  size_t size() const { return shapes_.size(); }
  // The i-th shape (excluded is always empty). A shape keeps its index until it is forgotten.
  const PlacementAsk& shape(size_t i) const { return shapes_[i].ask; }
  // The share of the counted requests that had shape i (they add up to 1; 0 before any).
  double popularity(size_t i) const;
  // A number that identifies the shape at index i for as long as it is there (a new shape at
  // that index gets a new one), so that values computed per shape can be kept.
  uint64_t generation(size_t i) const { return shapes_[i].generation; }

  // The id of a GPU kind (model and backend), made on first sight.
  uint32_t KindOf(const std::string& model, const std::string& backend);
  // Whether shape `shape` accepts GPUs of kind `kind` (GpuKindAccepted).
  bool Accepts(size_t shape, uint32_t kind) const { return accepts_[shape][kind] != 0; }

 private:
  struct Counted {
    PlacementAsk ask;
    std::string key;
    uint64_t count = 0;
    uint64_t generation = 0;
  };
  void FillAccepts(size_t shape);

  size_t max_shapes_;
  std::vector<Counted> shapes_;
  std::map<std::string, size_t> index_;  // key -> index into shapes_
  uint64_t total_ = 0;
  uint64_t generations_ = 0;
  std::vector<std::pair<std::string, std::string>> kinds_;  // model, backend
  std::map<std::pair<std::string, std::string>, uint32_t> kind_ids_;
  std::vector<std::vector<uint8_t>> accepts_;  // [shape][kind]: 1 when accepted
};

}  // namespace rgpu::registry
