#include "registry/ended_leases.h"

#include <algorithm>

namespace rgpu::registry {

void EndedLeases::Add(const std::string& server, const std::string& lease_id,
                      int64_t token_expires_ms, const std::string& reason) {
  by_server_[server].push_back({++last_seq_, lease_id, token_expires_ms, reason});
}

void EndedLeases::Since(const std::string& server, const std::string& epoch, uint64_t cursor,
                        int64_t now_ms, size_t max, std::vector<std::string>* out,
                        uint64_t* next_cursor, std::vector<std::string>* reasons) {
  if (epoch != epoch_) cursor = 0;
  *next_cursor = std::max(cursor, last_seq_);
  auto it = by_server_.find(server);
  if (it == by_server_.end()) return;
  std::deque<Entry>& entries = it->second;
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [now_ms](const Entry& e) { return e.expires_ms <= now_ms; }),
                entries.end());
  for (const Entry& e : entries) {
    if (e.seq <= cursor) continue;
    if (out->size() >= max) {
      *next_cursor = e.seq - 1;  // the rest next time
      break;
    }
    out->push_back(e.lease_id);
    if (reasons) reasons->push_back(e.reason);
  }
  if (entries.empty()) by_server_.erase(it);
}

size_t EndedLeases::size() const {
  size_t n = 0;
  for (const auto& [server, entries] : by_server_) n += entries.size();
  return n;
}

}  // namespace rgpu::registry
