#include "registry/workload.h"

#include <algorithm>

namespace rgpu::registry {
namespace {

// Every field of the shape, unambiguously.
std::string KeyOf(const PlacementAsk& a) {
  std::string key = std::to_string(a.gpus) + '/' + std::to_string(a.milli) + '/' +
                    std::to_string(a.memory) + '/' + std::to_string(a.cpu_milli) + '/' +
                    std::to_string(a.host_memory) + '/' + std::to_string(a.gpu_type.size()) + ':' +
                    a.gpu_type + '/' + std::to_string(a.backend.size()) + ':' + a.backend;
  for (const std::string& m : a.gpu_models) key += '/' + std::to_string(m.size()) + ':' + m;
  return key;
}

}  // namespace

Workload::Workload(size_t max_shapes) : max_shapes_(std::max<size_t>(1, max_shapes)) {}

void Workload::Observe(const PlacementAsk& ask) {
  std::string key = KeyOf(ask);
  auto found = index_.find(key);
  if (found != index_.end()) {
    shapes_[found->second].count++;
    total_++;
    return;
  }
  size_t slot = shapes_.size();
  if (shapes_.size() == max_shapes_) {  // forget the least frequent (the first of those)
    slot = 0;
    for (size_t i = 1; i < shapes_.size(); ++i) {
      if (shapes_[i].count < shapes_[slot].count) slot = i;
    }
    total_ -= shapes_[slot].count;
    index_.erase(shapes_[slot].key);
  } else {
    shapes_.emplace_back();
    accepts_.emplace_back();
  }
  Counted& counted = shapes_[slot];
  counted.ask = ask;
  counted.ask.excluded.clear();
  counted.key = key;
  counted.count = 1;
  counted.generation = ++generations_;
  index_[std::move(key)] = slot;
  FillAccepts(slot);
  total_++;
}

double Workload::popularity(size_t i) const {
  return total_ == 0 ? 0.0 : static_cast<double>(shapes_[i].count) / static_cast<double>(total_);
}

uint32_t Workload::KindOf(const std::string& model, const std::string& backend) {
  auto [it, fresh] = kind_ids_.try_emplace({model, backend}, static_cast<uint32_t>(kinds_.size()));
  if (fresh) {
    kinds_.emplace_back(model, backend);
    for (size_t s = 0; s < shapes_.size(); ++s) {
      accepts_[s].push_back(GpuKindAccepted(model, backend, shapes_[s].ask));
    }
  }
  return it->second;
}

void Workload::FillAccepts(size_t shape) {
  accepts_[shape].clear();
  for (const auto& [model, backend] : kinds_) {
    accepts_[shape].push_back(GpuKindAccepted(model, backend, shapes_[shape].ask));
  }
}

}  // namespace rgpu::registry
