// RegistryAgent: rgpu-server's side of the registry (rgpu-server --registry ADDR --provider-key
// KEY). It registers the server's GPUs, heartbeats, and reports per-session usage in batches:
// every report interval it samples Server::SessionsStatus() through a registry::UsageMeter, adds
// the records to a pending list, and sends the list; records leave the list only once the
// registry has acknowledged them (stored durably), so a lost reply or a registry restart means
// the same records, with the same ids, are sent again and the registry stores them once. Records
// the registry refuses (docs/registry.md, "Usage the registry accepts") are logged with the
// reason and dropped: they would be refused again.
//
// With each heartbeat the agent learns which leases on this server ended (session over, lifetime
// or claim timeout), reading the registry's log of them from a cursor, and hands their ids to
// on_leases_ended, so that the server refuses their tokens.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "proto/registry.grpc.pb.h"
#include "proto/rgpu.pb.h"
#include "registry/usage_meter.h"

namespace rgpu::server {

struct RegistryAgentOptions {
  std::string address;       // registry HOST:PORT
  std::string provider_key;  // x-rgpu-provider-key
  std::string tls_ca;        // CA certificate (PEM) when the registry serves TLS
  std::string server_name;   // as tokens name this server
  std::string server_url;    // where tenants reach this server
  // Sent with the registration; the registry probes server_url and expects HMAC-SHA256 of its
  // nonce under this secret (Session::SetReachabilitySecret).
  std::string reachability_secret;
  int report_ms = 1000;          // usage records are made and sent this often
  int observe_ms = 100;          // device memory is sampled this often (for GiB-seconds)
  size_t max_pending = 1000000;  // records kept while the registry is unreachable
  // When set, unacknowledged records are also kept in this file (rewritten atomically as they
  // come and go), and an agent started with it sends what an earlier run left there.
  std::string spool_path;
  // Called with each record the registry acknowledged (stored, or stored already: for audits);
  // must not call the agent.
  std::function<void(const registry::UsageRecord&)> on_acknowledged;
  // Called from the agent's thread with the ids of leases on this server that ended while their
  // tokens are still valid (an id may come again, e.g. after a registry restart); the server
  // refuses those tokens from then on. Must not call the agent.
  std::function<void(const std::vector<std::string>& lease_ids)> on_leases_ended;
  // Called from the agent's thread, once per hand-over, when the registry asks that the sessions
  // of a lease under notice move to the server at `url` with the hand-over `token` (LeaseNotice.
  // move_url/move_token, docs/migration.md "Moved by the registry"). Must not block or call the
  // agent from this thread.
  std::function<void(const std::string& lease_id, const std::string& url, const std::string& token)>
      on_lease_move;
  // When the server's GPUs are lendable (windows and notice; registry/availability.h). Its UTC
  // offset and zone are the host's, filled in at each registration and heartbeat.
  registry::Availability availability;
};

class RegistryAgent {
 public:
  using SessionsFn = std::function<wire::StatusReply()>;
  ~RegistryAgent();

  // Registers `gpus` and starts the heartbeat/report thread. Fails when the registry is
  // unreachable, refuses the provider, or accepts none of the GPUs (reasons in the message).
  // `public_key_pem` receives the key the registry signs session tokens with.
  Status Start(const RegistryAgentOptions& options, std::vector<registry::GpuSpec> gpus,
               SessionsFn sessions, std::string* public_key_pem);
  // Hooks for the server: a session began / ended with these final figures. Any thread.
  void SessionStarted(uint64_t session_id);
  void SessionEnded(const wire::SessionStats& last);
  // A session that moved to another server (docs/migration.md): its last record here covers it
  // up to the move and says it moved (UsageRecord.moved, which completes the lease's hand-over)
  // but does not end it, so that its lease, which goes on where it went, is not freed.
  void SessionMoved(const wire::SessionStats& last);
  // A lease whose sessions on this server move together (Server::MoveSessionsTogether): from
  // BeginLeaseMove to EndLeaseMove the last records of its sessions that move are held back, and
  // EndLeaseMove sends them at once, each saying it moved. The registry completes the lease's
  // hand-over at the first moved record it reads and takes this server's records for the lease
  // only up to that moment afterwards, so none may reach it before the last of them has left.
  // Held records are not spooled (a crash in between loses them: under-billing, as a source that
  // never reports). Any thread.
  void BeginLeaseMove(const std::string& lease_id);
  void EndLeaseMove(const std::string& lease_id);
  // A session under `lease_id` moves to the server registered as `to_server`: asks the registry
  // to hand the lease over (registry/lease_hand_over.cc); `token` receives the hand-over the
  // target restores the session with. CancelHandOver takes it back when the move failed.
  // Either waits for the registry (up to 10 s); any thread.
  Status HandOverLease(const std::string& lease_id, const std::string& to_server,
                       std::string* token);
  Status CancelHandOver(const std::string& lease_id);
  // This server's name at the registry.
  const std::string& server_name() const { return options_.server_name; }
  // Stops the thread and sends what is pending, records the registry answered "not yet" among
  // them, for up to `flush_ms`.
  void Stop(int flush_ms = 3000);
  // Records not yet acknowledged by the registry.
  size_t pending();

 private:
  Status Register(std::string* public_key_pem);
  // Makes `ctx` a call as this server's provider, answered within `timeout`.
  void Authorize(grpc::ClientContext* ctx, std::chrono::milliseconds timeout) const;
  // One heartbeat: liveness, registering again when asked, and the ended leases.
  void Heartbeat();
  void Loop();
  // Ends, through on_leases_ended, the leases whose notice has run out on this host's clock,
  // without waiting for the registry's next heartbeat reply to list them as ended.
  void EndNoticedLeases();
  // Wakes the loop to report (and heartbeat, when one is due) without waiting for its period.
  void ReportNow();
  // Sends up to one batch of pending records; true when the registry acknowledged it.
  bool SendBatch();
  void AddRecords(std::vector<registry::UsageRecord> records);
  // Puts what the registry answered "not yet" (held_) back at the front of pending_, to be sent
  // again first (a session's records are taken in order, and any of its later ones wait there).
  void RequeueHeld();
  // The spool file: pending_ as length-prefixed records. Under mu_.
  Status LoadSpool();
  void WriteSpool();

  RegistryAgentOptions options_;
  std::vector<registry::GpuSpec> gpus_;
  SessionsFn sessions_;
  std::unique_ptr<registry::Registry::Stub> stub_;
  std::unique_ptr<registry::UsageMeter> meter_;
  std::mutex mu_;  // guards meter_ and pending_
  std::deque<registry::UsageRecord> pending_;
  // Records the registry answered "not yet" (RefusedRecord.retry), sent again at the next
  // report; spooled with pending_. Under mu_.
  std::vector<registry::UsageRecord> held_;
  // The last records of sessions of a lease moving whole (BeginLeaseMove), by lease. Under mu_.
  std::map<std::string, std::vector<registry::UsageRecord>> moving_leases_;
  uint32_t heartbeat_ms_ = 2000;
  // Where this agent is in the registry's log of ended leases (agent thread only).
  uint64_t ended_cursor_ = 0;
  std::string ended_epoch_;
  std::string last_heartbeat_error_;  // logged once until it changes
  // Leases under notice (from the latest heartbeat), with when they end and why, and whether
  // the agent has ended them on this server already (agent thread only).
  struct Notice {
    int64_t ends_ms = 0;
    std::string reason;
    bool ended = false;
    std::string move_token;  // the last hand-over acted on (on_lease_move)
  };
  std::map<std::string, Notice> noticed_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> report_now_{false};  // a session ended: report without waiting
  std::mutex wake_mu_;
  std::condition_variable wake_;
  std::thread thread_;
};

}  // namespace rgpu::server
