#include "server/checkpoint.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "proto/call_kinds.h"
#include "proto/crypto.h"
#include "server/checked_size.h"

namespace rgpu::server {
namespace {

constexpr size_t kPreambleBytes = sizeof kCheckpointMagic + 4 + 4 + 8;

// Incremental SHA-256 (OpenSSL's EVP).
struct Sha256Stream {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1;
  ~Sha256Stream() { EVP_MD_CTX_free(ctx); }
  void Update(const void* data, size_t size) {
    if (ok && size > 0) ok = EVP_DigestUpdate(ctx, data, size) == 1;
  }
  std::string Final() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (!ok || EVP_DigestFinal_ex(ctx, out, &n) != 1 || n != kCheckpointDigestBytes) return "";
    return std::string(reinterpret_cast<char*>(out), n);
  }
};

Status Bad(const std::string& why) { return InvalidArgument("checkpoint: " + why); }

// A unique id in [low, high) not seen before in `seen`.
Status CheckId(uint64_t id, uint64_t low, uint64_t high, std::set<uint64_t>* seen,
               const char* what) {
  if (id < low || id >= high)
    return Bad(std::string(what) + " id " + std::to_string(id) + " out of range");
  if (!seen->insert(id).second)
    return Bad(std::string(what) + " id " + std::to_string(id) + " twice");
  return Status::Ok();
}

// A count at most `limit`.
Status CheckCount(int count, uint64_t limit, const char* what) {
  if (static_cast<uint64_t>(count) > limit) {
    return Bad(std::to_string(count) + " " + what + ", more than the server's limit of " +
               std::to_string(limit));
  }
  return Status::Ok();
}

// The next id a table hands out: past every server-chosen id it holds, at most kFirstClientId.
Status CheckNext(uint64_t next, const std::set<uint64_t>& ids, const char* what) {
  if (next < 1 || next > calls::kFirstClientId)
    return Bad(std::string("next ") + what + " id out of range");
  auto below = ids.lower_bound(calls::kFirstClientId);
  if (below != ids.begin() && *std::prev(below) >= next) {
    return Bad(std::string("next ") + what + " id is not past the ids in use");
  }
  return Status::Ok();
}

}  // namespace

std::vector<CheckpointRange> CheckpointRanges(const wire::Checkpoint& c) {
  std::vector<CheckpointRange> ranges;
  for (const auto& a : c.allocations()) ranges.push_back({a.ptr(), a.size(), a.ctx()});
  for (const auto& m : c.modules()) {
    for (int i = 0; i < m.variable_bases_size() && i < m.variable_sizes_size(); ++i) {
      ranges.push_back({m.variable_bases(i), m.variable_sizes(i), m.ctx()});
    }
  }
  return ranges;
}

Status CheckCheckpoint(const wire::Checkpoint& c, const CheckpointBounds& bounds) {
  const SessionLimits& l = bounds.limits;
  for (const std::string* s : {&c.tenant(), &c.lease_id(), &c.client_name(), &c.source_server()}) {
    if (s->size() > kMaxCheckpointNameBytes) return Bad("a name longer than 4 KiB");
  }
  if (c.devices_size() > static_cast<int>(std::min(bounds.devices, kMaxCheckpointDevices))) {
    return Bad("the session sees " + std::to_string(c.devices_size()) +
               " devices, this server has " + std::to_string(bounds.devices));
  }
  const uint32_t devices = static_cast<uint32_t>(c.devices_size());
  if (Status s = CheckCount(c.contexts_size(), l.max_contexts, "contexts"); !s.ok()) return s;
  if (Status s = CheckCount(c.modules_size(), l.max_modules, "modules"); !s.ok()) return s;
  if (Status s = CheckCount(c.functions_size(), l.max_functions, "functions"); !s.ok()) return s;
  if (Status s = CheckCount(c.streams_size(), l.max_streams, "streams"); !s.ok()) return s;
  if (Status s = CheckCount(c.events_size(), l.max_events, "events"); !s.ok()) return s;
  if (Status s = CheckCount(c.pools_size(), l.max_pools, "pools"); !s.ok()) return s;
  if (Status s = CheckCount(c.graphs_size(), l.max_graphs, "graphs"); !s.ok()) return s;
  if (Status s =
          CheckCount(c.allocations_size() + c.globals_size(), l.max_allocations, "allocations");
      !s.ok()) {
    return s;
  }
  const uint64_t server_ids = calls::kFirstClientId, client_ids = calls::kClientIdLimit;

  std::map<uint64_t, uint32_t> context_device;  // id -> ordinal
  std::set<uint64_t> ids;
  for (const auto& x : c.contexts()) {
    if (Status s = CheckId(x.id(), 1, client_ids, &ids, "context"); !s.ok()) return s;
    if (x.ordinal() >= devices) return Bad("a context of a device the session does not see");
    if (x.limits_size() > 3) return Bad("a context with more than 3 limits");
    if (x.primary_refs() < 0 || x.primary_refs() > (1 << 20))
      return Bad("a primary context's count out of range");
    context_device[x.id()] = x.ordinal();
  }
  if (Status s = CheckNext(c.next_ids().contexts(), ids, "context"); !s.ok()) return s;

  std::map<uint64_t, const wire::CheckpointModule*> modules;
  ids.clear();
  for (const auto& m : c.modules()) {
    if (Status s = CheckId(m.id(), 1, server_ids, &ids, "module"); !s.ok()) return s;
    if (!context_device.count(m.ctx())) return Bad("a module of no context");
    if (m.image().empty() || m.image().size() > l.max_module_bytes) {
      return Bad("a module image of " + std::to_string(m.image().size()) + " bytes");
    }
    if (m.variable_bases_size() != m.variable_sizes_size() ||
        static_cast<uint64_t>(m.variable_bases_size()) > kMaxModuleVariables) {
      return Bad("a module's variable ranges do not pair up");
    }
    if (m.variable_names_size() != 0 && m.variable_names_size() != m.variable_bases_size()) {
      return Bad("a module's variable names do not pair up with its ranges");
    }
    for (const std::string& name : m.variable_names()) {
      if (name.empty() || name.size() > kMaxCheckpointNameBytes ||
          name.find('\0') != std::string::npos) {
        return Bad("a module variable without a proper name");
      }
    }
    modules[m.id()] = &m;
  }
  if (Status s = CheckNext(c.next_ids().modules(), ids, "module"); !s.ok()) return s;

  ids.clear();
  for (const auto& f : c.functions()) {
    if (Status s = CheckId(f.id(), 1, server_ids, &ids, "function"); !s.ok()) return s;
    if (!modules.count(f.module())) return Bad("a function of no module");
    if (f.name().empty() || f.name().size() > kMaxCheckpointNameBytes ||
        f.name().find('\0') != std::string::npos) {
      return Bad("a function without a proper name");
    }
  }
  if (Status s = CheckNext(c.next_ids().functions(), ids, "function"); !s.ok()) return s;

  ids.clear();
  for (const auto& x : c.streams()) {
    if (Status s = CheckId(x.id(), 1, client_ids, &ids, "stream"); !s.ok()) return s;
    if (!context_device.count(x.ctx())) return Bad("a stream of no context");
  }
  if (Status s = CheckNext(c.next_ids().streams(), ids, "stream"); !s.ok()) return s;

  ids.clear();
  for (const auto& x : c.events()) {
    if (Status s = CheckId(x.id(), 1, client_ids, &ids, "event"); !s.ok()) return s;
    if (!context_device.count(x.ctx())) return Bad("an event of no context");
  }
  if (Status s = CheckNext(c.next_ids().events(), ids, "event"); !s.ok()) return s;

  std::map<uint64_t, uint32_t> pool_device;
  std::set<uint32_t> default_pool_devices;
  ids.clear();
  for (const auto& p : c.pools()) {
    if (Status s = CheckId(p.id(), 1, server_ids, &ids, "pool"); !s.ok()) return s;
    if (p.ordinal() >= devices) return Bad("a pool of a device the session does not see");
    if (p.is_default() && !default_pool_devices.insert(p.ordinal()).second) {
      return Bad("two default pools of one device");
    }
    pool_device[p.id()] = p.ordinal();
  }
  if (Status s = CheckNext(c.next_ids().pools(), ids, "pool"); !s.ok()) return s;

  ids.clear();
  uint64_t graph_bytes = 0;
  for (const auto& g : c.graphs()) {
    if (Status s = CheckId(g.id(), 1, server_ids, &ids, "graph"); !s.ok()) return s;
    if (!CheckedAdd(graph_bytes, g.record().size(), &graph_bytes) ||
        graph_bytes > l.max_graph_bytes) {
      return Bad("graphs of more than " + std::to_string(l.max_graph_bytes) + " bytes");
    }
  }
  if (Status s = CheckNext(c.next_ids().graphs(), ids, "graph"); !s.ok()) return s;

  // Memory: every range well formed, no two overlapping, their sum the memory that follows.
  std::map<uint64_t, uint64_t> ranges;  // start -> end
  uint64_t total = 0;
  auto add_range = [&](uint64_t ptr, uint64_t size, const char* what) -> Status {
    uint64_t end = 0;
    if (ptr == 0 || size == 0 || size > (uint64_t{1} << 44) || !CheckedAdd(ptr, size, &end)) {
      return Bad(std::string("a malformed ") + what + " range");
    }
    auto next = ranges.lower_bound(ptr);
    if ((next != ranges.end() && next->first < end) ||
        (next != ranges.begin() && std::prev(next)->second > ptr)) {
      return Bad(std::string("overlapping memory ranges (") + what + ")");
    }
    ranges.emplace(ptr, end);
    if (!CheckedAdd(total, size, &total)) return Bad("memory size overflows");
    return Status::Ok();
  };
  for (const auto& a : c.allocations()) {
    if (Status s = add_range(a.ptr(), a.size(), "allocation"); !s.ok()) return s;
    auto ctx = context_device.find(a.ctx());
    if (ctx == context_device.end()) return Bad("an allocation of no context");
    if (a.pool() != 0) {
      auto pool = pool_device.find(a.pool());
      if (pool == pool_device.end() || pool->second != ctx->second) {
        return Bad("an allocation of no pool of its device");
      }
    }
  }
  for (const auto& m : c.modules()) {
    for (int i = 0; i < m.variable_bases_size(); ++i) {
      if (Status s = add_range(m.variable_bases(i), m.variable_sizes(i), "module variable");
          !s.ok()) {
        return s;
      }
    }
  }
  for (const auto& g : c.globals()) {
    auto m = modules.find(g.module());
    if (m == modules.end() || m->second->ctx() != g.ctx()) return Bad("a global of no module");
    uint64_t end = 0;
    bool inside = false;
    if (CheckedAdd(g.ptr(), g.size(), &end) && g.size() > 0) {
      for (int i = 0; i < m->second->variable_bases_size() && !inside; ++i) {
        const uint64_t base = m->second->variable_bases(i), size = m->second->variable_sizes(i);
        inside = g.ptr() >= base && end <= base + size;
      }
    }
    if (!inside) return Bad("a global outside its module's variables");
  }
  if (total != c.memory_bytes()) {
    return Bad("the ranges hold " + std::to_string(total) + " bytes, the header says " +
               std::to_string(c.memory_bytes()));
  }
  if (total > bounds.memory_bytes) {
    return Bad("the session's " + std::to_string(total) + " bytes of device memory are more than " +
               std::to_string(bounds.memory_bytes) + " this server can give it");
  }
  return Status::Ok();
}

struct CheckpointWriter::Digest : Sha256Stream {};
struct CheckpointReader::Digest : Sha256Stream {};

CheckpointWriter::CheckpointWriter(Sink sink)
    : sink_(std::move(sink)), digest_(std::make_unique<Digest>()) {}
CheckpointWriter::~CheckpointWriter() = default;

Status CheckpointWriter::Put(const void* data, size_t size) {
  digest_->Update(data, size);
  return sink_(static_cast<const char*>(data), size);
}

Status CheckpointWriter::Begin(const wire::Checkpoint& header) {
  std::string bytes;
  if (!header.SerializeToString(&bytes) || bytes.size() > kMaxCheckpointHeaderBytes) {
    return ResourceExhausted("checkpoint header of " + std::to_string(bytes.size()) + " bytes");
  }
  char preamble[kPreambleBytes];
  memcpy(preamble, kCheckpointMagic, sizeof kCheckpointMagic);
  const uint32_t version = kCheckpointVersion, zero = 0;
  const uint64_t length = bytes.size();
  memcpy(preamble + 8, &version, 4);
  memcpy(preamble + 12, &zero, 4);
  memcpy(preamble + 16, &length, 8);
  memory_expected_ = header.memory_bytes();
  if (Status s = Put(preamble, sizeof preamble); !s.ok()) return s;
  return Put(bytes.data(), bytes.size());
}

Status CheckpointWriter::Memory(const void* data, size_t size) {
  memory_written_ += size;
  return Put(data, size);
}

Status CheckpointWriter::Finish() {
  if (memory_written_ != memory_expected_) {
    return InvalidArgument("checkpoint: " + std::to_string(memory_written_) +
                           " bytes of memory written, the header says " +
                           std::to_string(memory_expected_));
  }
  const std::string digest = digest_->Final();
  if (digest.size() != kCheckpointDigestBytes) return Internal("checkpoint: no digest");
  return sink_(digest.data(), digest.size());
}

CheckpointReader::CheckpointReader(HeaderFn on_header, MemoryFn on_memory)
    : on_header_(std::move(on_header)),
      on_memory_(std::move(on_memory)),
      digest_(std::make_unique<Digest>()) {}
CheckpointReader::~CheckpointReader() = default;

Status CheckpointReader::Fail(Status s) {
  stage_ = Stage::kFailed;
  failure_ = s;
  return s;
}

Status CheckpointReader::Feed(const char* data, size_t size) {
  while (size > 0) {
    switch (stage_) {
      case Stage::kFailed:
        return failure_;
      case Stage::kDone:
        return Fail(Bad("bytes past its end"));
      case Stage::kPreamble:
      case Stage::kHeader:
      case Stage::kDigest: {
        const size_t want = stage_ == Stage::kPreamble ? kPreambleBytes
                            : stage_ == Stage::kHeader ? static_cast<size_t>(header_bytes_)
                                                       : kCheckpointDigestBytes;
        const size_t n = std::min(size, want - buffer_.size());
        buffer_.append(data, n);
        if (stage_ != Stage::kDigest) digest_->Update(data, n);
        data += n;
        size -= n;
        if (buffer_.size() < want) break;
        if (stage_ == Stage::kPreamble) {
          uint32_t version = 0;
          memcpy(&version, buffer_.data() + 8, 4);
          memcpy(&header_bytes_, buffer_.data() + 16, 8);
          if (memcmp(buffer_.data(), kCheckpointMagic, sizeof kCheckpointMagic) != 0) {
            return Fail(Bad("not a checkpoint (no RGPUCKPT)"));
          }
          if (version != kCheckpointVersion) {
            return Fail(Bad("version " + std::to_string(version) + ", this server reads " +
                            std::to_string(kCheckpointVersion)));
          }
          if (header_bytes_ == 0 || header_bytes_ > kMaxCheckpointHeaderBytes) {
            return Fail(Bad("a header of " + std::to_string(header_bytes_) + " bytes"));
          }
          stage_ = Stage::kHeader;
        } else if (stage_ == Stage::kHeader) {
          wire::Checkpoint header;
          if (!header.ParseFromString(buffer_)) return Fail(Bad("a malformed header"));
          memory_bytes_ = header.memory_bytes();
          if (Status s = on_header_(header); !s.ok()) return Fail(s);
          stage_ = memory_bytes_ > 0 ? Stage::kMemory : Stage::kDigest;
        } else {
          if (!ConstantTimeEquals(buffer_, digest_->Final())) {
            return Fail(Bad("its digest does not match its contents"));
          }
          stage_ = Stage::kDone;
        }
        buffer_.clear();
        buffer_.shrink_to_fit();
        break;
      }
      case Stage::kMemory: {
        const size_t n =
            static_cast<size_t>(std::min<uint64_t>(size, memory_bytes_ - memory_read_));
        digest_->Update(data, n);
        if (Status s = on_memory_(memory_read_, data, n); !s.ok()) return Fail(s);
        memory_read_ += n;
        data += n;
        size -= n;
        if (memory_read_ == memory_bytes_) stage_ = Stage::kDigest;
        break;
      }
    }
  }
  return stage_ == Stage::kFailed ? failure_ : Status::Ok();
}

Status CheckpointReader::Finish() const {
  if (stage_ == Stage::kFailed) return failure_;
  if (stage_ != Stage::kDone) return Bad("truncated");
  return Status::Ok();
}

}  // namespace rgpu::server
