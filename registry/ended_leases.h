// EndedLeases: the log of leases that ended while their tokens were still valid, per server, which
// servers read from a cursor with their heartbeats (HeartbeatRequest/Reply in
// proto/registry.proto) so that they refuse those tokens from then on.
//
// Entries are numbered in the order they are added; an entry is dropped once its token has
// expired (the server refuses it by itself then). The epoch names this log: a registry that
// restarts starts a new one (with the ended leases its store still knows of), and a reader whose
// epoch differs is given every entry again. Not thread-safe (the service guards it with its mutex).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace rgpu::registry {

class EndedLeases {
 public:
  explicit EndedLeases(std::string epoch) : epoch_(std::move(epoch)) {}

  const std::string& epoch() const { return epoch_; }

  // Lease `lease_id` on `server` ended for `reason`; its token expires at `token_expires_ms`
  // (unix ms).
  void Add(const std::string& server, const std::string& lease_id, int64_t token_expires_ms,
           const std::string& reason = "");

  // The leases of `server` added after `cursor` (all of them when `epoch` is not this log's),
  // at most `max` of them, whose tokens are still valid at `now_ms`. `next_cursor` receives the
  // cursor to read from next time. `reasons`, when given, receives why each ended, in the same
  // order. Drops the server's expired entries.
  void Since(const std::string& server, const std::string& epoch, uint64_t cursor, int64_t now_ms,
             size_t max, std::vector<std::string>* out, uint64_t* next_cursor,
             std::vector<std::string>* reasons = nullptr);

  // Entries held for all servers (for tests and logs).
  size_t size() const;

 private:
  struct Entry {
    uint64_t seq;
    std::string lease_id;
    int64_t expires_ms;
    std::string reason;
  };
  std::string epoch_;
  uint64_t last_seq_ = 0;
  std::map<std::string, std::deque<Entry>> by_server_;
};

}  // namespace rgpu::registry
