#include "bench/placement_sim/trace.h"

#include <charconv>
#include <fstream>
#include <map>
#include <sstream>

namespace rgpu::placement_sim {
namespace {

std::vector<std::string> Split(const std::string& line, char sep) {
  std::vector<std::string> fields;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, sep)) fields.push_back(field);
  if (!line.empty() && line.back() == sep) fields.emplace_back();
  return fields;
}

// A CSV file with a header row: each data row's fields by column name.
class CsvReader {
 public:
  Status Open(const std::string& path) {
    path_ = path;
    in_.open(path);
    if (!in_) return NotFound("cannot read " + path);
    std::string header;
    if (!std::getline(in_, header)) return InvalidArgument(path + ": empty file");
    if (!header.empty() && header.back() == '\r') header.pop_back();
    const auto names = Split(header, ',');
    for (size_t i = 0; i < names.size(); ++i) columns_[names[i]] = i;
    return Status::Ok();
  }
  bool Has(const std::string& column) const { return columns_.count(column) != 0; }
  // Reads the next row; false at the end.
  bool Next() {
    std::string line;
    while (std::getline(in_, line)) {
      ++line_number_;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      row_ = Split(line, ',');
      return true;
    }
    return false;
  }
  Status Text(const std::string& column, std::string* out) const {
    auto it = columns_.find(column);
    if (it == columns_.end()) return InvalidArgument(path_ + ": no column " + column);
    *out = it->second < row_.size() ? row_[it->second] : "";
    return Status::Ok();
  }
  template <typename T>
  Status Number(const std::string& column, T* out) const {
    std::string text;
    Status s = Text(column, &text);
    if (!s.ok()) return s;
    if (text.empty()) {
      *out = 0;
      return Status::Ok();
    }
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
    if (ec != std::errc() || end != text.data() + text.size()) {
      return InvalidArgument(path_ + ":" + std::to_string(line_number_ + 1) + ": " + column +
                             " is not a number: '" + text + "'");
    }
    return Status::Ok();
  }
  std::string Where() const { return path_ + ":" + std::to_string(line_number_ + 1); }

 private:
  std::string path_;
  std::ifstream in_;
  std::map<std::string, size_t> columns_;
  std::vector<std::string> row_;
  size_t line_number_ = 0;
};

}  // namespace

Status LoadNodes(const std::string& path, std::vector<TraceNode>* out) {
  CsvReader csv;
  Status s = csv.Open(path);
  out->clear();
  while (s.ok() && csv.Next()) {
    TraceNode n;
    s = csv.Text("sn", &n.name);
    if (s.ok()) s = csv.Number("cpu_milli", &n.cpu_milli);
    if (s.ok()) s = csv.Number("memory_mib", &n.memory_mib);
    if (s.ok()) s = csv.Number("gpu", &n.gpus);
    if (s.ok()) s = csv.Text("model", &n.model);
    if (s.ok()) out->push_back(std::move(n));
  }
  if (s.ok() && out->empty()) s = InvalidArgument(path + ": no nodes");
  return s;
}

Status LoadPods(const std::string& path, std::vector<TracePod>* out) {
  CsvReader csv;
  Status s = csv.Open(path);
  out->clear();
  const bool times = s.ok() && csv.Has("creation_time") && csv.Has("deletion_time");
  const bool spec = s.ok() && csv.Has("gpu_spec");
  while (s.ok() && csv.Next()) {
    TracePod p;
    s = csv.Text("name", &p.name);
    if (s.ok()) s = csv.Number("cpu_milli", &p.cpu_milli);
    if (s.ok()) s = csv.Number("memory_mib", &p.memory_mib);
    if (s.ok()) s = csv.Number("num_gpu", &p.num_gpu);
    if (s.ok()) s = csv.Number("gpu_milli", &p.gpu_milli);
    std::string models;
    if (s.ok() && spec) s = csv.Text("gpu_spec", &models);
    if (s.ok() && !models.empty()) p.gpu_spec = Split(models, '|');
    p.has_times = times;
    if (s.ok() && times) s = csv.Number("creation_time", &p.creation_s);
    if (s.ok() && times) s = csv.Number("deletion_time", &p.deletion_s);
    if (!s.ok()) break;
    if (p.gpu_milli > registry::kMilliPerGpu || (p.num_gpu > 1 && p.gpu_milli != 1000)) {
      s = InvalidArgument(csv.Where() +
                          ": a pod asks for 0-1000 thousandths of one GPU, or for "
                          "several whole GPUs");
      break;
    }
    if (p.num_gpu == 0) p.gpu_milli = 0;  // CPU-only pods carry no GPU share
    out->push_back(std::move(p));
  }
  if (s.ok() && out->empty()) s = InvalidArgument(path + ": no pods");
  return s;
}

registry::Cluster BuildCluster(const std::vector<TraceNode>& nodes) {
  registry::Cluster cluster;
  for (const TraceNode& n : nodes) {
    registry::NodeLoad node;
    node.name = n.name;
    node.cpu_milli_total = n.cpu_milli;
    node.memory_total = n.memory_mib << 20;
    const uint32_t index = cluster.AddNode(std::move(node));
    for (uint32_t g = 0; g < n.gpus; ++g) {
      registry::GpuLoad gpu;
      gpu.id = n.name + "/" + std::to_string(g);
      gpu.placeable = true;
      gpu.model = n.model;
      gpu.backend = "cuda";
      cluster.AddGpu(index, std::move(gpu));
    }
  }
  return cluster;
}

registry::PlacementAsk AskOf(const TracePod& pod) {
  registry::PlacementAsk ask;
  ask.gpus = pod.num_gpu;
  ask.milli = pod.num_gpu == 0 ? 0 : pod.gpu_milli;
  ask.gpu_models = pod.gpu_spec;
  ask.cpu_milli = pod.cpu_milli;
  ask.host_memory = pod.memory_mib << 20;
  return ask;
}

}  // namespace rgpu::placement_sim
