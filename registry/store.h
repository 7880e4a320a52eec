// Store: the registry's durable state (providers, tenants, GPUs, leases, usage records) in SQL
// over a Db (SQLite or PostgreSQL). Every write returns only once it is committed, so whatever
// the registry acknowledges survives a crash. Thread-safe (the Db serializes statements).
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "proto/registry.pb.h"
#include "registry/db.h"

namespace rgpu::registry {

struct ProviderRow {
  std::string name;
  std::string key_hash;  // SHA-256 of the key, hex
  bool revoked = false;
  int64_t created_unix = 0;
};

struct TenantRow {
  std::string name;
  std::string key_hash;
  int64_t created_unix = 0;
};

struct GpuRow {
  std::string gpu_id;  // "SERVER/INDEX"
  std::string provider;
  std::string server_name;
  std::string server_url;
  GpuSpec spec;
  std::string resource_token;
};

struct LeaseRow {
  std::string lease_id;
  std::string tenant;
  std::string gpu_id;
  std::string server_name;
  uint64_t memory_bytes = 0;
  uint32_t share = 0;
  int32_t priority = 0;
  int64_t queue_ms = 0;
  int64_t granted_ms = 0;
  int64_t expires_ms = 0;
  int64_t released_ms = 0;  // 0 while active
  // Start of the earliest accepted usage record naming the lease: when a session under it began
  // (0: none yet). The time before it is the lease's hold.
  int64_t claimed_ms = 0;
  std::string job;              // the batch job it serves (PlaceRequest.job), "" = none
  bool until_released = false;  // a session's end does not end it (PlaceRequest.until_released)
  // Under notice: it ends at ending_ms (0: not under notice), for end_reason (its server's
  // lendable window closed, a higher-priority request preempted it). Once ended, end_reason
  // says why it ended.
  int64_t ending_ms = 0;
  std::string end_reason;
  std::string reservation_id;  // the reservation it was placed under ("" = none)
  // The notice its server promised when it was granted (Placement.notice_seconds): what it gets
  // when the server's lendable window closes, whatever the server reports later.
  uint32_t notice_s = 0;
  // A hand-over in progress (registry HandOverLease, docs/migration.md): the GPU it is moving to,
  // which holds room for it meanwhile, and since when ("" / 0: none).
  std::string moving_to;
  int64_t moving_since_ms = 0;
  // The GPUs that held it before its current one, oldest first, each until when: their servers'
  // records for it are accepted up to then.
  struct Holder {
    std::string gpu_id;
    int64_t until_ms = 0;
  };
  std::vector<Holder> earlier;
  // Since a hand-over completed (0: none since it was granted), and whether its new holder has
  // reported the session since: one that does not within the claim timeout (counted from the
  // registry's start at the earliest) ends it, as an unclaimed placement ends.
  int64_t handed_over_ms = 0;
  bool holder_claimed = false;
  // Hand-overs dropped without completing (taken back, lapsed, replaced) since the last one
  // completed, within an hour of each other, and when the last was dropped: past a bound the
  // holder may not begin another for a while (each held room on the target meanwhile).
  uint32_t dropped_hand_overs = 0;
  int64_t last_drop_ms = 0;
};

// GPUs held for a tenant over [start_ms, end_ms): gpu_ids each hold memory_bytes and share.
struct ReservationRow {
  std::string reservation_id;
  std::string tenant;
  std::vector<std::string> gpu_ids;
  std::string gpu_type;  // what was asked for (ReserveRequest), for listings
  std::string backend;
  uint64_t memory_bytes = 0;
  uint32_t share = 0;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  int64_t created_ms = 0;
  int64_t cancelled_ms = 0;  // 0: not cancelled
  std::string job;
};

// A time a server was down: from when it was last heard (or its provider revoked) until it was
// heard again (end_ms 0: not yet). What a reservation on its GPUs is not billed for.
struct OutageRow {
  std::string server_name;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
};

// A registered server's URL and when the registry last saw it prove it answers there.
struct ServerRow {
  std::string name;
  std::string provider;
  std::string url;
  int64_t verified_ms = 0;  // 0: not proven
  // When it lends (rgpu-server --available), as it last reported; stored as it was accepted,
  // read back unchecked (the service checks it again).
  Availability availability;
};

// What the store holds of one session's records under one lease (Store::LeaseSessionTotals),
// kept beside the records (table usage_sessions) so that checking a record costs one lookup,
// however long its session has run.
struct SessionTotals {
  std::string server_name;
  uint64_t session_id = 0;
  int64_t first_start_ms = 0;
  int64_t last_end_ms = 0;
  int64_t wall_ms = 0;  // sum of the records' end - start
  uint64_t calls = 0;
  uint64_t bytes = 0;  // in + out
  double gpu_busy_ms = 0;
  double memory_gib_seconds = 0;
  double queue_ms = 0;
  bool ended = false;  // its latest record reported its end or its move
};

// What a batch of usage records changes besides storing them (Store::AddUsage).
struct UsageEffects {
  // Leases claimed: (lease id, the earliest session start among the records); a lease's
  // claimed_ms is lowered to it (set when 0).
  std::vector<std::pair<std::string, int64_t>> claims;
  // The totals of the sessions the records belong to, records included: (lease id, totals).
  std::vector<std::pair<std::string, SessionTotals>> sessions;
};

// A stored usage record with what the registry knew when it stored it.
struct UsageRow {
  UsageRecord record;
  std::string provider;
  std::string model;
};

class Store {
 public:
  // Takes the database and creates the schema when missing.
  static Status Open(std::unique_ptr<Db> db, std::unique_ptr<Store>* out);
  std::string engine() const { return db_->engine(); }

  // Adds a provider or tenant; kInvalidArgument when the name is taken.
  Status AddProvider(const ProviderRow& row);
  Status AddTenant(const TenantRow& row);
  Status SetProviderRevoked(const std::string& name, bool revoked);
  // Inserts or replaces GPUs' registrations, in one transaction.
  Status PutGpus(const std::vector<GpuRow>& rows);
  // Lease writes go through a group commit: writes from concurrent callers are committed in one
  // transaction (one sync to disk for all); each call returns once its write is durable.
  Status AddLease(const LeaseRow& row);
  // Ends a lease at `released_ms`; `reason`, when not empty, is kept as its end_reason.
  Status ReleaseLease(const std::string& lease_id, int64_t released_ms,
                      const std::string& reason = "");
  // Puts a lease under notice: it ends at `ending_ms` for `reason`.
  Status SetLeaseEnding(const std::string& lease_id, int64_t ending_ms, const std::string& reason);
  // Writes where a lease is (gpu_id, server_name), its hand-over in progress, its earlier
  // holders and its hand-overs' state (handed_over_ms, holder_claimed, dropped_hand_overs,
  // last_drop_ms), as `row` has them.
  Status SetLeaseHolder(const LeaseRow& row);
  // The leases with these ids (any state); ids not found are left out.
  Status GetLeases(const std::vector<std::string>& lease_ids, std::vector<LeaseRow>* out);
  // Leases released before their tokens expire (expires_ms > now_ms), oldest release first.
  Status LoadEndedLeases(int64_t now_ms, std::vector<LeaseRow>* out);

  // Reservations: added whole; cancelled once (kNotFound when there is none to cancel).
  Status AddReservation(const ReservationRow& row);
  Status CancelReservation(const std::string& reservation_id, int64_t cancelled_ms);
  // Reservations not cancelled whose end is after `now_ms`, for the registry's start-up.
  Status LoadLiveReservations(int64_t now_ms, std::vector<ReservationRow>* out);
  // Reservations of `tenant` ("" = all) that start before `to_ms`, oldest start first.
  Status QueryReservations(const std::string& tenant, int64_t to_ms,
                           std::vector<ReservationRow>* out);

  // Outages: one opens (server down since `start_ms`), the open one of a server ends; those
  // that overlap [from_ms, to_ms) (open ones too), and the open ones (for the start-up).
  Status AddOutage(const std::string& server_name, int64_t start_ms);
  Status EndOutage(const std::string& server_name, int64_t end_ms);
  Status QueryOutages(int64_t from_ms, int64_t to_ms, std::vector<OutageRow>* out);
  Status LoadOpenOutages(std::vector<OutageRow>* out);
  // Servers: inserts or replaces one (its URL, verification time and availability).
  Status PutServer(const ServerRow& row);
  Status LoadServers(std::vector<ServerRow>* out);

  // Stores the records in one transaction; ids already present are left alone and counted as
  // duplicates. `fresh`, when given, says which rows were new. `effects`, when given, are
  // applied in the same transaction. Returns once they are durable.
  Status AddUsage(const std::vector<UsageRow>& rows, uint32_t* stored, uint32_t* duplicates,
                  std::vector<bool>* fresh = nullptr, const UsageEffects* effects = nullptr);
  // Which of these record ids are stored already (at most 1000 ids).
  Status ExistingUsageIds(const std::vector<std::string>& record_ids,
                          std::vector<std::string>* out);
  // Per session (server, session id), the totals of the records stored under `lease_id` (as
  // AddUsage's effects last wrote them).
  Status LeaseSessionTotals(const std::string& lease_id, std::vector<SessionTotals>* out);

  // Everything, for the registry's start-up.
  Status LoadProviders(std::vector<ProviderRow>* out);
  Status LoadTenants(std::vector<TenantRow>* out);
  Status LoadGpus(std::vector<GpuRow>* out);
  Status LoadActiveLeases(int64_t now_ms, std::vector<LeaseRow>* out);

  // Usage records whose interval ends in [from_ms, to_ms), optionally for one tenant/provider.
  Status QueryUsage(const std::string& tenant, const std::string& provider, int64_t from_ms,
                    int64_t to_ms, std::vector<UsageRow>* out);
  // Leases granted to `tenant` ("" = all) before `to_ms`, newest last.
  Status QueryLeases(const std::string& tenant, int64_t to_ms, std::vector<LeaseRow>* out);

  ~Store();

 private:
  struct PendingWrite {
    Statement statement;
    Status result;
    bool done = false;
  };
  explicit Store(std::unique_ptr<Db> db);
  // Queues a write for the group commit and waits until it is committed.
  Status Commit(Statement statement);
  void WriterLoop();

  std::unique_ptr<Db> db_;
  std::mutex write_mu_;
  std::condition_variable write_cv_;
  std::deque<PendingWrite*> writes_;
  bool stop_writer_ = false;
  std::thread writer_;
};

}  // namespace rgpu::registry
