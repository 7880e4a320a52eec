// HandleTable: the records of one kind of resource a session created, keyed by session-local ids.
// Ids start at 1, are never reused within a session, and mean nothing outside it, so a tenant
// can only ever name its own resources.
#pragma once

#include <cstdint>
#include <iterator>
#include <map>

#include "proto/call_kinds.h"

namespace rgpu::server {

using calls::kClientIdLimit;
using calls::kFirstClientId;

template <typename Record>
class HandleTable {
 public:
  // Stores `record` and returns its new id (below kFirstClientId).
  uint64_t Insert(Record record) {
    uint64_t id = next_id_++;
    records_.emplace(id, std::move(record));
    return id;
  }
  // Stores `record` under `id`, which the client chose: false (nothing stored) unless `id` is in
  // [kFirstClientId, kClientIdLimit) and names nothing yet.
  bool InsertAt(uint64_t id, Record record) {
    if (id < kFirstClientId || id >= kClientIdLimit) return false;
    return records_.emplace(id, std::move(record)).second;
  }
  // Stores `record` under `id`, as a checkpoint had it (a restore, docs/migration.md): false
  // (nothing stored) unless `id` is in [1, kClientIdLimit) and names nothing yet.
  bool Restore(uint64_t id, Record record) {
    if (id < 1 || id >= kClientIdLimit) return false;
    return records_.emplace(id, std::move(record)).second;
  }
  // The id Insert hands out next.
  uint64_t next_id() const { return next_id_; }
  // Sets it (a restore): false unless `next` is in [1, kFirstClientId] and past every id below
  // kFirstClientId the table holds.
  bool SetNextId(uint64_t next) {
    if (next < 1 || next > kFirstClientId) return false;
    auto below = records_.lower_bound(kFirstClientId);
    if (below != records_.begin() && std::prev(below)->first >= next) return false;
    next_id_ = next;
    return true;
  }
  // The record with `id`, or nullptr when this session has none.
  Record* Find(uint64_t id) {
    auto it = records_.find(id);
    return it == records_.end() ? nullptr : &it->second;
  }
  bool Erase(uint64_t id) { return records_.erase(id) > 0; }
  size_t size() const { return records_.size(); }
  std::map<uint64_t, Record>& records() { return records_; }

 private:
  uint64_t next_id_ = 1;
  std::map<uint64_t, Record> records_;
};

}  // namespace rgpu::server
