// UsageMeter: turns a server's cumulative per-session figures (wire::SessionStats, sampled from
// Server::SessionsStatus) into usage records for the registry, one per live session per sample,
// each with an id unique forever: "SERVER:BOOT:SEQUENCE". The records carry what changed since
// the session's previous record, so the registry sums them; an id sent twice is stored once.
// Each record names the lease of the token that admitted its session (SessionStats.lease_id):
// the registry refuses records that name none, and the first record naming a lease tells it a
// session under the lease has started (its claim).
// Not thread-safe: one owner (the registry agent) calls it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "proto/registry.pb.h"
#include "proto/rgpu.pb.h"

namespace rgpu::registry {

class UsageMeter {
 public:
  // `boot` distinguishes this process's records from an earlier run's of the same server.
  UsageMeter(std::string server_name, std::string boot, uint32_t gpu_index = 0);

  // A session began at `now_ms` (its first record's interval starts here).
  void Started(uint64_t session_id, int64_t now_ms);
  // Integrates the device memory of the sessions in `live` up to `now_ms`, without making
  // records; call it more often than Sample() for a finer integral (short sessions included).
  void Observe(const wire::StatusReply& live, int64_t now_ms);
  // Records for every admitted live session in `live`, as of `now_ms`.
  void Sample(const wire::StatusReply& live, int64_t now_ms, std::vector<UsageRecord>* out);
  // The final record of a session from its last figures; later samples that still list it are
  // ignored.
  void Ended(const wire::SessionStats& last, int64_t now_ms, std::vector<UsageRecord>* out);

 private:
  struct Seen {
    wire::SessionStats last;  // figures already reported
    int64_t last_ms = 0;      // end of the previous record's interval
    uint64_t memory = 0;      // device memory at the last observation
    int64_t observed_ms = 0;  // time of the last observation
    double gib_seconds = 0;   // memory integrated since the previous record
  };
  // Adds memory held since the last observation (trapezoid rule) and observes `memory`.
  static void Integrate(Seen* seen, uint64_t memory, int64_t now_ms);
  UsageRecord Delta(const wire::SessionStats& now, Seen* seen, int64_t now_ms);

  std::string server_name_;
  std::string boot_;
  uint32_t gpu_index_;
  uint64_t sequence_ = 0;
  std::map<uint64_t, Seen> sessions_;
  std::set<uint64_t> ended_;
};

}  // namespace rgpu::registry
