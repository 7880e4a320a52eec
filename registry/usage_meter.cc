#include "registry/usage_meter.h"

#include <algorithm>

namespace rgpu::registry {

UsageMeter::UsageMeter(std::string server_name, std::string boot, uint32_t gpu_index)
    : server_name_(std::move(server_name)), boot_(std::move(boot)), gpu_index_(gpu_index) {}

void UsageMeter::Started(uint64_t session_id, int64_t now_ms) {
  if (ended_.count(session_id)) return;
  Seen& seen = sessions_[session_id];
  seen.last_ms = seen.observed_ms = now_ms;
}

void UsageMeter::Integrate(Seen* seen, uint64_t memory, int64_t now_ms) {
  if (seen->observed_ms == 0) seen->observed_ms = now_ms;
  if (now_ms > seen->observed_ms) {
    const double gib = (static_cast<double>(seen->memory) + static_cast<double>(memory)) / 2.0 /
                       (1024.0 * 1024.0 * 1024.0);
    seen->gib_seconds += gib * static_cast<double>(now_ms - seen->observed_ms) / 1000.0;
    seen->observed_ms = now_ms;
  }
  seen->memory = memory;
}

void UsageMeter::Observe(const wire::StatusReply& live, int64_t now_ms) {
  for (const auto& stats : live.sessions()) {
    if (ended_.count(stats.session_id()) || stats.tenant().empty()) continue;
    Seen& seen = sessions_[stats.session_id()];
    if (seen.last_ms == 0) seen.last_ms = now_ms;
    Integrate(&seen, stats.memory_bytes(), now_ms);
  }
}

UsageRecord UsageMeter::Delta(const wire::SessionStats& now, Seen* seen, int64_t now_ms) {
  const wire::SessionStats& before = seen->last;
  UsageRecord r;
  r.set_record_id(server_name_ + ":" + boot_ + ":" + std::to_string(++sequence_));
  r.set_server_name(server_name_);
  r.set_gpu_index(gpu_index_);
  r.set_tenant(now.tenant());
  r.set_session_id(now.session_id());
  r.set_lease_id(now.lease_id());  // the registry stores records only under a lease it granted
  if (seen->last_ms == 0) seen->last_ms = now_ms;
  const int64_t end = std::max(now_ms, seen->last_ms);
  r.set_start_ms(seen->last_ms);
  r.set_end_ms(end);
  // Counters only grow; a smaller figure (never expected) counts as no change.
  auto grew = [](uint64_t a, uint64_t b) { return a > b ? a - b : 0; };
  r.set_calls(grew(now.calls(), before.calls()));
  for (const auto& [kind, n] : now.calls_by_kind()) {
    auto it = before.calls_by_kind().find(kind);
    const uint64_t delta = grew(n, it == before.calls_by_kind().end() ? 0 : it->second);
    if (delta > 0) (*r.mutable_calls_by_kind())[kind] = delta;
  }
  r.set_queue_ms(std::max(0.0, now.queue_seconds() - before.queue_seconds()) * 1000.0);
  if (now.device() >= 0) r.set_gpu_index(static_cast<uint32_t>(now.device()));
  r.set_bytes_in(grew(now.bytes_in(), before.bytes_in()));
  r.set_bytes_out(grew(now.bytes_out(), before.bytes_out()));
  r.set_gpu_busy_ms(std::max(0.0, now.gpu_busy_seconds() - before.gpu_busy_seconds()) * 1000.0);
  // Memory held, by the trapezoid rule between observations (0 at the session's start).
  Integrate(seen, now.memory_bytes(), end);
  r.set_memory_gib_seconds(seen->gib_seconds);
  seen->gib_seconds = 0;
  seen->last = now;
  seen->last_ms = end;
  return r;
}

void UsageMeter::Sample(const wire::StatusReply& live, int64_t now_ms,
                        std::vector<UsageRecord>* out) {
  for (const auto& stats : live.sessions()) {
    if (ended_.count(stats.session_id()) || stats.tenant().empty()) continue;
    out->push_back(Delta(stats, &sessions_[stats.session_id()], now_ms));
  }
}

void UsageMeter::Ended(const wire::SessionStats& last, int64_t now_ms,
                       std::vector<UsageRecord>* out) {
  if (!ended_.insert(last.session_id()).second) return;
  auto it = sessions_.find(last.session_id());
  if (!last.tenant().empty()) {
    Seen fresh;
    Seen* seen = it != sessions_.end() ? &it->second : &fresh;
    out->push_back(Delta(last, seen, now_ms));
    out->back().set_session_ended(true);
  }
  if (it != sessions_.end()) sessions_.erase(it);
}

}  // namespace rgpu::registry
