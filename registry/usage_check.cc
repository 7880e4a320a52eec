#include "registry/usage_check.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

namespace rgpu::registry {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kBytesSlack = 256.0 * 1024 * 1024;
constexpr double kMsSlack = 100;
constexpr double kGibSecondsSlack = 1;
constexpr double kCallsSlack = 1000;

bool Printable(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// Names of tenants and servers: 1..64 characters of [A-Za-z0-9._-] (as the service requires).
bool Name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

bool Identifier(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

bool Amount(double v) { return std::isfinite(v) && v >= 0; }

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

std::string Format(const char* format, double a, double b) {
  char buf[200];
  snprintf(buf, sizeof buf, format, a, b);
  return buf;
}

}  // namespace

int64_t LeaseEndMs(const LeaseRow& lease) {
  int64_t end = lease.expires_ms;
  if (lease.released_ms > 0) end = std::min(end, lease.released_ms);
  if (lease.ending_ms > 0) end = std::min(end, lease.ending_ms);
  return end;
}

std::string CheckRecordShape(const UsageRecord& r) {
  if (!Printable(r.record_id(), 200)) return "record id must be 1-200 printable characters";
  if (!Name(r.tenant())) return "tenant must be 1-64 characters of [A-Za-z0-9._-]";
  if (!Name(r.server_name())) return "server name must be 1-64 characters of [A-Za-z0-9._-]";
  // Record ids are one space for every provider: beginning with the record's server's name (a
  // server of the reporting provider), no provider's ids can take another's first.
  if (!r.record_id().starts_with(r.server_name() + ":")) {
    return "a record id must begin with its server's name and a colon";
  }
  if (!Printable(r.lease_id(), 100)) return "names no lease (rgpu-server too old?)";
  if (r.end_ms() < r.start_ms()) return "ends before it starts";
  if (!Amount(r.gpu_busy_ms()) || !Amount(r.memory_gib_seconds()) || !Amount(r.queue_ms())) {
    return "GPU time, memory and queue time must be finite and not negative";
  }
  if (r.calls_by_kind_size() > 512) return "more than 512 kinds of calls";
  uint64_t by_kind = 0;
  for (const auto& [kind, n] : r.calls_by_kind()) {
    if (!Identifier(kind)) return "a call kind must be an identifier of at most 64 characters";
    if (n == 0) return "call kind " + kind + " counts no calls";
    by_kind = SaturatingAdd(by_kind, n);
  }
  if (by_kind > r.calls()) return "calls by kind add up to more than the calls";
  return "";
}

bool LeaseHeldBy(const LeaseRow& lease, const std::string& gpu_id, int64_t end_ms,
                 int64_t skew_ms) {
  if (gpu_id == lease.gpu_id) return true;
  for (const LeaseRow::Holder& h : lease.earlier) {
    if (h.gpu_id == gpu_id && end_ms <= h.until_ms + skew_ms) return true;
  }
  return false;
}

std::string CheckRecordAgainstLease(const UsageRecord& r, const UsageContext& c,
                                    const UsageLimits& limits) {
  const LeaseRow& lease = *c.lease;
  if (r.tenant() != lease.tenant)
    return "lease " + lease.lease_id + " is not tenant " + r.tenant() + "'s";
  const std::string gpu = r.server_name() + "/" + std::to_string(r.gpu_index());
  if (!LeaseHeldBy(lease, gpu, r.end_ms(), limits.skew_ms)) {
    for (const LeaseRow::Holder& h : lease.earlier) {
      if (h.gpu_id == gpu) {
        return "lease " + lease.lease_id + " left GPU " + gpu + " at " +
               std::to_string(h.until_ms) + " ms; the interval ends at " +
               std::to_string(r.end_ms());
      }
    }
    return "lease " + lease.lease_id + " is for GPU " + lease.gpu_id + ", not " + gpu;
  }
  // The interval lies inside the lease's (give or take the clocks' skew) and not in the future.
  const int64_t earliest = lease.granted_ms - limits.skew_ms;
  const int64_t latest = std::min(LeaseEndMs(lease), c.now_ms) + limits.skew_ms;
  if (r.start_ms() < earliest || r.end_ms() > latest) {
    return "interval " + std::to_string(r.start_ms()) + ".." + std::to_string(r.end_ms()) +
           " ms is outside lease " + lease.lease_id + " (" + std::to_string(lease.granted_ms) +
           ".." + std::to_string(std::min(LeaseEndMs(lease), c.now_ms)) + ")";
  }
  if (c.before == nullptr && c.sessions_of_lease >= limits.max_sessions_per_lease) {
    return "lease " + lease.lease_id + " already bills " + std::to_string(c.sessions_of_lease) +
           " sessions (at most " + std::to_string(limits.max_sessions_per_lease) + ")";
  }
  if (c.before != nullptr && r.start_ms() < c.before->last_end_ms) {
    return "overlaps the session's earlier records (they reach " +
           std::to_string(c.before->last_end_ms) + " ms)";
  }
  // An empty interval opens a session (its first observation) or closes it (its end, its move);
  // between them it tells nothing and would only fill the store.
  if (c.before != nullptr && r.end_ms() == r.start_ms() && !r.session_ended() && !r.moved()) {
    return "an empty interval inside the session";
  }
  // Nor does an empty record once the session was reported ended or moved (its end again, as
  // often as a provider likes, each a millisecond later); a session that reuses the id (a
  // server's ids start again when it restarts) is billed from its first record with an interval.
  if (c.before != nullptr && c.before->ended && r.end_ms() == r.start_ms()) {
    return "the session was reported ended or moved at " + std::to_string(c.before->last_end_ms) +
           " ms; an empty record after that tells nothing";
  }
  // Physical bounds on the session's totals, this record included. Both ends are bounded
  // above, so the differences and sums below cannot overflow.
  SessionTotals total = c.before != nullptr ? *c.before : SessionTotals{};
  AddToTotals(r, &total);
  const double wall_s = static_cast<double>(total.wall_ms) / 1000.0;
  const double t = limits.tolerance;
  if (total.gpu_busy_ms > static_cast<double>(total.wall_ms) * t + kMsSlack) {
    return Format("GPU time %.0f ms exceeds the session's wall time %.0f ms", total.gpu_busy_ms,
                  static_cast<double>(total.wall_ms));
  }
  if (total.queue_ms > static_cast<double>(total.wall_ms) * t + kMsSlack) {
    return Format("queue time %.0f ms exceeds the session's wall time %.0f ms", total.queue_ms,
                  static_cast<double>(total.wall_ms));
  }
  const double gbps =
      c.gpu->bandwidth_gbps() > 0 ? c.gpu->bandwidth_gbps() : limits.default_bandwidth_gbps;
  const double max_bytes = gbps * 1e9 * wall_s * t + kBytesSlack;
  if (static_cast<double>(total.bytes) > max_bytes) {
    return Format("%.0f bytes in the session's %.3f s exceed what its GPU's link carries",
                  static_cast<double>(total.bytes), wall_s);
  }
  const double max_gib_s =
      static_cast<double>(lease.memory_bytes) / kGiB * wall_s * t + kGibSecondsSlack;
  if (total.memory_gib_seconds > max_gib_s) {
    return Format("%.3f GiB-s exceed the lease's memory over the session's %.3f s",
                  total.memory_gib_seconds, wall_s);
  }
  if (static_cast<double>(total.calls) > limits.max_calls_per_second * wall_s * t + kCallsSlack) {
    return Format("%.0f calls in %.3f s is beyond any forwarded-call rate",
                  static_cast<double>(total.calls), wall_s);
  }
  return "";
}

void AddToTotals(const UsageRecord& r, SessionTotals* t) {
  if (t->wall_ms == 0 && t->last_end_ms == 0) {
    t->server_name = r.server_name();
    t->session_id = r.session_id();
    t->first_start_ms = r.start_ms();
  }
  t->first_start_ms = std::min(t->first_start_ms, r.start_ms());
  t->last_end_ms = std::max(t->last_end_ms, r.end_ms());
  // end >= start (CheckRecordShape); a difference beyond int64 saturates.
  const uint64_t wall = static_cast<uint64_t>(r.end_ms()) - static_cast<uint64_t>(r.start_ms());
  const uint64_t sum = SaturatingAdd(static_cast<uint64_t>(std::max<int64_t>(0, t->wall_ms)), wall);
  t->wall_ms = static_cast<int64_t>(std::min<uint64_t>(sum, INT64_MAX));
  t->calls = SaturatingAdd(t->calls, r.calls());
  t->bytes = SaturatingAdd(t->bytes, SaturatingAdd(r.bytes_in(), r.bytes_out()));
  t->gpu_busy_ms += r.gpu_busy_ms();
  t->memory_gib_seconds += r.memory_gib_seconds();
  t->queue_ms += r.queue_ms();
  t->ended = r.session_ended() || r.moved();
}

}  // namespace rgpu::registry
