// RegistryService: the registry's gRPC service (proto/registry.proto) over a Store.
//
// The store holds everything durable; this class holds what placement needs in memory (every
// GPU's load, which servers are online, active leases, the queue of waiting requests) and keeps
// the two in step: a change is committed to the store before it is acknowledged.
//
// Token signing happens outside mu_ too. Writes that callers wait for (lease grants and ends)
// reach the store outside mu_, through
// the store's group commit, so that placements do not queue behind one another's disk syncs.
//
// Liveness: a server heartbeats every heartbeat_ms; Sweep() marks a server offline once it has
// missed three heartbeats (nothing heard for more than 3 x heartbeat_ms), and its GPUs get no
// placements until it heartbeats again. After a registry restart every server is offline until
// its first heartbeat. Revoking a provider makes its GPUs unplaceable at once.
//
// Reachability: a registered server's GPUs take placements only once the server has proved it
// answers at its URL (registry/reachability.h). Register queues the probe and answers at once
// (the server may not accept connections before its registration returns); the probe runs on
// its own thread and the GPUs become placeable when it succeeds. A server that failed it is
// told why in the reply to each of its heartbeats (kFailedPrecondition); one whose proof the
// store does not hold (a store from before reachability proofs) is asked to register again.
//
// Leases: a lease ends when its session ends (a record naming it with session_ended), when its
// lifetime runs out, or when no session under it has started within claim_timeout_ms of its
// grant (a placement whose program never connects). Ended leases whose tokens are still valid
// are handed to their server with its heartbeats (registry/ended_leases.h), which refuses them.
//
// Usage: ReportUsage stores a record only when registry/usage_check.h accepts it against the
// lease it names; every record is answered (stored, duplicate or refused with the reason).
// Records are checked and stored one request at a time (usage_mu_), so a session's totals seen
// by the checks are those stored.
//
// Queue: a request no GPU can take now waits, ordered by priority (higher first), then arrival;
// whenever capacity appears, waiting requests are placed in that order (a lower-priority request
// that fits where the head does not is placed too). The caller sees its position while it waits
// and a clear kResourceExhausted answer with its position when its wait runs out.
//
// Lendable windows (registry/availability.h): a server reports when it lends its GPUs; they take
// placements only inside those windows, and a request that says how long it needs its GPU
// (PlaceRequest.duration_seconds) goes only where the window lasts that long. When a window
// closes, the server's leases are put under notice (the notice the provider set) and end when it
// runs out; servers hear of both with their heartbeats.
//
// Preemption: where the price list allows it (PriceList::preemption_notice_s), a waiting request
// that fits nowhere gives lower-priority leases on one GPU notice (registry/preemption.h); the
// GPU is kept for it meanwhile (no other waiting request is placed there), the leases end when
// the notice runs out, and the request is placed. Its queue updates say so. A notice, once
// given, stands: the leases end even if the request gives up first.
//
// Reservations: a tenant reserves GPUs from a start time for a duration; the registry picks GPUs
// whose windows cover it and whose leases and other reservations leave room for it all along
// (registry/capacity_timeline.h), and from then on places on them only leases that end before
// the room is needed. From its start the reservation holds its room on each GPU (whether used or
// not); the tenant's placements under it (PlaceRequest.reservation_id) go there without queueing
// and end with it. Ends of leases under notice and of reservations happen in Sweep.
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "proto/registry.grpc.pb.h"
#include "proto/token.pb.h"
#include "registry/availability.h"
#include "registry/billing.h"
#include "registry/capacity_timeline.h"
#include "registry/ended_leases.h"
#include "registry/placement.h"
#include "registry/probe_queue.h"
#include "registry/queue_order.h"
#include "registry/reachability.h"
#include "registry/store.h"
#include "registry/token_signer.h"
#include "registry/usage_check.h"

namespace rgpu::registry {

struct RegistryOptions {
  std::string signing_key_path;  // Ed25519 private key (PEM) session tokens are signed with
  std::string public_key_pem;    // its public half (PEM text), handed to registering servers
  // Required: operator calls need it (x-rgpu-admin-key), compared in constant time.
  std::string admin_key;
  uint32_t heartbeat_ms = 2000;
  int min_driver_version = 0;         // e.g. 12000; older drivers are refused
  double min_compute_capability = 0;  // e.g. 7.0; older GPUs are refused
  // A lease under which no session has started this long after its grant ends (0: never).
  int64_t claim_timeout_ms = 90000;
  UsageLimits usage_limits;
  PriceList prices;
  std::function<int64_t()> now_ms;  // unix milliseconds (default: the system clock)
  // How a server's reachability is proven (default: ProbeReachability over the transport). An
  // in-process benchmark simulating a fleet of servers that do not exist passes its own.
  ReachabilityProbe probe;
  // The placement policy, by name (registry/placement.h, MakePlacementPolicy); each server is a
  // node whose CPU and host memory are not tracked.
  std::string placement_policy = kDefaultPlacementPolicy;
  // The queue's order within a priority (registry/queue_order.h): shortest declared duration
  // first, aged by the wait; requests that declare none keep arrival order among themselves.
  QueueOrderOptions queue_order;
  // Reservations a tenant may hold at once (not ended, not cancelled).
  uint32_t max_reservations_per_tenant = 64;
  // A lease put under notice (its server's window closed, a preemption) is handed over to
  // another server with room, and its server told in the heartbeat to move the session there
  // (LeaseNotice.move_url/move_token, docs/migration.md "Moved by the registry"); without, or
  // with no room anywhere, its session ends with the notice.
  bool move_on_notice = true;
};

class RegistryService final : public Registry::Service {
 public:
  // Loads the store's state. The options' now_ms defaults to the system clock.
  static Status Create(std::unique_ptr<Store> store, RegistryOptions options,
                       std::unique_ptr<RegistryService>* out);
  ~RegistryService() override;

  // Marks servers offline that missed three heartbeats, ends expired leases and places waiting
  // requests that now fit. Call periodically (rgpu-registry: every heartbeat_ms / 2).
  void Sweep();
  // Ends every waiting Place call (kUnavailable), for shutdown.
  void Shutdown();
  // Blocks until every reachability probe queued so far has run and its outcome is applied.
  void WaitForProbes();

  grpc::Status Register(grpc::ServerContext* ctx, const RegisterRequest* req,
                        RegisterReply* reply) override;
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const HeartbeatRequest* req,
                         HeartbeatReply* reply) override;
  grpc::Status ReportUsage(grpc::ServerContext* ctx, const ReportUsageRequest* req,
                           ReportUsageReply* reply) override;
  // A lease's holder hands it, with its moving session, to another registered server
  // (registry/lease_hand_over.cc, docs/migration.md "Metering").
  grpc::Status HandOverLease(grpc::ServerContext* ctx, const HandOverRequest* req,
                             HandOverReply* reply) override;
  grpc::Status CancelHandOver(grpc::ServerContext* ctx, const HandOverRequest* req,
                              Empty* reply) override;
  grpc::Status Place(grpc::ServerContext* ctx, const PlaceRequest* req,
                     grpc::ServerWriter<PlaceUpdate>* writer) override;
  // Place, writing each update with `write` (false: the caller is gone). For callers without a
  // gRPC stream (the fuzzer).
  grpc::Status PlaceWith(grpc::ServerContext* ctx, const PlaceRequest* req,
                         const std::function<bool(const PlaceUpdate&)>& write);
  grpc::Status ReleaseLease(grpc::ServerContext* ctx, const ReleaseLeaseRequest* req,
                            Empty* reply) override;
  grpc::Status ListLeases(grpc::ServerContext* ctx, const Empty* req, LeaseList* reply) override;
  grpc::Status Reserve(grpc::ServerContext* ctx, const ReserveRequest* req,
                       Reservation* reply) override;
  grpc::Status ListReservations(grpc::ServerContext* ctx, const ReservationQuery* req,
                                ReservationList* reply) override;
  grpc::Status CancelReservation(grpc::ServerContext* ctx, const CancelReservationRequest* req,
                                 Reservation* reply) override;
  grpc::Status CreateTenant(grpc::ServerContext* ctx, const NameRequest* req,
                            KeyReply* reply) override;
  grpc::Status ListTenants(grpc::ServerContext* ctx, const Empty* req, TenantList* reply) override;
  grpc::Status CreateProvider(grpc::ServerContext* ctx, const NameRequest* req,
                              KeyReply* reply) override;
  grpc::Status RevokeProvider(grpc::ServerContext* ctx, const NameRequest* req,
                              Empty* reply) override;
  grpc::Status ListProviders(grpc::ServerContext* ctx, const Empty* req,
                             ProviderList* reply) override;
  grpc::Status ListGpus(grpc::ServerContext* ctx, const Empty* req, GpuList* reply) override;
  grpc::Status Usage(grpc::ServerContext* ctx, const UsageQuery* req, UsageReply* reply) override;
  grpc::Status Bill(grpc::ServerContext* ctx, const UsageQuery* req, Invoice* reply) override;
  grpc::Status Earnings(grpc::ServerContext* ctx, const UsageQuery* req, Invoice* reply) override;

 private:
  struct GpuMeta {
    GpuRow row;
  };
  enum class Reach { kUnverified, kVerified, kUnreachable };
  struct ServerState {
    std::string provider;
    std::string url;
    int64_t last_heartbeat_ms = 0;  // 0: not heard from since the registry started
    bool online = false;
    std::vector<size_t> gpus;  // indices into gpus_/cluster_.gpus
    int node = -1;             // its node in cluster_ (-1: none yet)
    Reach reach = Reach::kUnverified;
    std::string reach_reason;       // why it is unreachable
    uint64_t probe_generation = 0;  // of the latest probe queued; older outcomes are stale
    bool probe_pending = false;
    int64_t verified_ms = 0;    // when it last proved its URL (0: not since its registration)
    Availability availability;  // checked (CheckAvailability)
    bool lendable = true;       // inside its lendable window (RefreshWindows)
    bool in_outage = false;     // down, an outage open in the store (Store::AddOutage)
    // When the registry took its availability as it is now (a registration, an offset changed
    // by a heartbeat; 0: loaded from the store): notices of its leases count from then at the
    // earliest.
    int64_t availability_since_ms = 0;
  };
  struct ProviderState {
    ProviderRow row;
  };
  struct Waiter {
    PlacementAsk ask;
    std::string tenant;
    int32_t priority = 0;
    uint64_t seq = 0;
    uint32_t ttl_seconds = 3600;
    std::string holder_key;  // Ed25519 public key the token binds
    std::string job;         // PlaceRequest.job, checked
    bool until_released = false;
    int64_t enqueued_ms = 0;
    int64_t deadline_ms = 0;        // when its wait runs out, on the registry's clock
    uint32_t duration_seconds = 0;  // PlaceRequest.duration_seconds
    std::string reservation_id;     // placed under this reservation ("" = none)
    int64_t reservation_end_ms = 0;
    // A preemption on its behalf: the GPU kept for it (-1: none) and when its leases end.
    int64_t preempting_index = -1;
    int64_t preemption_ends_ms = 0;
    bool done = false;
    grpc::Status error;
    Placement placement;
    LeaseRow lease;            // granted, to be stored by the Place call
    wire::TokenClaims claims;  // granted, to be signed by the Place call
  };

  // A reservation the registry keeps: not cancelled, not ended. While active (from its start) it
  // holds its room on each of its GPUs in cluster_.
  struct ReservationState {
    ReservationRow row;
    std::vector<size_t> gpus;  // indices into gpus_/cluster_.gpus, as row.gpu_ids
    bool active = false;
  };

  RegistryService(std::unique_ptr<Store> store, RegistryOptions options);
  Status Load();
  int64_t Now() const { return options_.now_ms(); }
  // Authentication from call metadata; the status is what the RPC answers when it fails.
  grpc::Status AuthAdmin(grpc::ServerContext* ctx);
  // A revoked provider may still report usage (its sessions keep running) and read its
  // earnings, when `allow_revoked`.
  grpc::Status AuthProvider(grpc::ServerContext* ctx, std::string* provider,
                            bool allow_revoked = false);
  grpc::Status AuthTenant(grpc::ServerContext* ctx, std::string* tenant);
  // Records that `server` is down since `since_ms` (missed heartbeats, revoked), unless an
  // outage is open already; its next heartbeat ends it. Under mu_.
  void OpenOutage(const std::string& name, ServerState* server, int64_t since_ms);
  // Ends `server`'s open outage at `now_ms` (a heartbeat or a registration heard). Under mu_.
  void CloseOutage(const std::string& name, ServerState* server, int64_t now_ms);
  // Recomputes the placeable flag of a server's GPUs. Under mu_.
  void UpdatePlaceable(const std::string& server);
  // A probe's outcome (on the probe queue's thread).
  void OnProbed(const std::string& server, uint64_t generation, const Status& result);
  // ReportUsage's checks of one request's records against their leases; fills `rows` with the
  // records to store, `effects` with the leases they claim and their sessions' new totals,
  // `refusals`, and the count of duplicates. Under usage_mu_.
  Status CheckUsage(const std::string& provider, const ReportUsageRequest& req,
                    std::vector<UsageRow>* rows, UsageEffects* effects,
                    std::vector<RefusedRecord>* refusals, uint32_t* duplicates);
  // Hand-overs (registry/lease_hand_over.cc). Under mu_; each returns the lease as it now is,
  // for the caller to write to the store (Store::SetLeaseHolder) once it has let go of mu_.
  // The GPU `lease` is moving to becomes its GPU; its current one an earlier holder until now,
  // its room there freed.
  LeaseRow CompleteHandOver(LeaseRow* lease);
  // The GPU among `candidates` (indices) a hand-over of `lease` goes to: not its own, fitting
  // it now, of the same backend, as capable, not kept for a preemption, with room beside
  // reservations until the lease expires; the fullest such (best fit); -1 for none.
  int64_t HandOverTarget(const LeaseRow& lease, const std::vector<size_t>& candidates,
                         int64_t now) const;
  // Starts handing `lease` over to GPU `index`: holds its room there; returns the claims of the
  // hand-over token to sign.
  wire::TokenClaims BeginHandOver(LeaseRow* lease, size_t index, int64_t now);
  // For the leases under notice in a heartbeat reply to `server_name`: hands each over to
  // another server with room (once per kHandOverLifeMs) and tells the server where its session
  // is to go (move_on_notice).
  void OfferNoticeMoves(const std::string& server_name, int64_t now, HeartbeatReply* reply);
  // The hand-over in progress ends without the lease moving: the room held on the target freed;
  // `counts`: it counts against the lease's bound on dropped hand-overs (HandOversBarred).
  LeaseRow DropHandOver(LeaseRow* lease, bool counts = true);
  // Drops the hand-overs neither side completed within kHandOverLifeMs of their start.
  std::vector<LeaseRow> ExpireHandOvers(int64_t now);
  // Completes the hand-overs the stored records `rows` show done (the holder's last record of
  // the session, UsageRecord.moved). Under mu_.
  std::vector<LeaseRow> CompleteHandOversShownBy(const std::vector<UsageRow>& rows,
                                                 const std::vector<bool>& fresh);
  // Writes these leases' holders to the store; failures are logged. Under mu_, as every write
  // of where a lease is (OfferNoticeMoves, a lifted notice), so that the store gets them in the
  // order the registry made them: a completion and the next holder's hand-over of the same
  // lease may follow each other closely (a drain right after a move).
  void PersistHolders(const std::vector<LeaseRow>& leases);
  // The hold lines of the leases in `query` (of the subject tenant, or on the subject provider's
  // GPUs when `earnings`).
  Status HoldLines(const UsageQuery& query, bool earnings, std::vector<InvoiceLine>* out);
  // Adds a GPU to cluster_ on its server's node (made on first use); returns its index. Under mu_.
  size_t AddGpu(ServerState* server, const std::string& server_name, GpuLoad load);
  // Places waiting requests that fit, in queue order. Under mu_.
  void Dispatch();
  // Grants `w` the GPU at `index`: reserves it and fills the lease and token claims for the
  // waiting Place call to sign and store. Under mu_.
  void Grant(Waiter* w, size_t index, double decision_us);
  // Ends an active lease, returns its resources to its GPU and logs it for its server (ended_).
  // Under mu_; the caller records the end in the store with PersistEnded once it has let go of
  // mu_.
  // Records it in ended_unpersisted_ for PersistEnded.
  void EndLease(const std::string& lease_id, const std::string& why);
  // Records in the store the ends EndLease made so far. Call without mu_.
  void PersistEnded();
  // Puts a lease under notice: it ends at `ending_ms` (unless it ends sooner) for `reason`;
  // recorded in the store before servers and tenants can read it. Under mu_.
  void PutUnderNotice(LeaseRow* lease, int64_t ending_ms, const std::string& reason);
  // Opens and closes servers' windows as `now` passes their edges: a closed server's GPUs are
  // not placeable and its leases go under notice. Cheap until the next edge. Under mu_.
  void RefreshWindows(int64_t now);
  // Why `a` would break a reservation on one of `server`'s GPUs (its windows would not cover the
  // rest of it), or "" when it breaks none. Under mu_.
  std::string ReservationBrokenBy(const ServerState& server, const Availability& a,
                                  int64_t now) const;
  // Starts reservations whose start has come (their room held on their GPUs) and, when
  // `end_finished`, ends those over (their room freed, the leases under them ended). Under mu_.
  void RefreshReservations(int64_t now, bool end_finished);
  // Frees a reservation's room (if held), ends its leases for `why` and forgets it. Under mu_.
  void DropReservation(const std::string& reservation_id, const std::string& why);
  // What a waiting request may take now: its ask, with the GPUs it must not go to added to the
  // exclusions (windows too short for its duration, reservations it would break, GPUs kept for
  // another request's preemption). Under mu_.
  PlacementAsk ConstrainedAsk(const Waiter& w, int64_t now) const;
  // The leases and reservations holding GPU `index` over time (leases until their end).
  std::vector<TimedHold> HoldsOn(size_t index, int64_t now) const;
  // True when a lease of `ask` on GPU `index` over [from_ms, to_ms) leaves every reservation
  // there its room. Under mu_.
  bool FitsBesideReservations(size_t index, const PlacementAsk& ask, int64_t from_ms,
                              int64_t to_ms) const;
  // Gives notice to lower-priority leases on the GPU where that makes room for `w` at least
  // cost, and keeps the GPU for it; false when the price list or the leases allow none. Under
  // mu_.
  bool TryPreempt(Waiter* w, int64_t notice_ms, int64_t now);
  // The GPU kept for `w`'s preemption is no longer kept. Under mu_.
  void ForgetPreemption(Waiter* w);
  // Places `w` under its reservation on one of the reservation's GPUs, or says why not. Under
  // mu_.
  grpc::Status PlaceUnderReservation(Waiter* w);
  // Why a request that waited in vain was not placed, beyond its queue position: when GPUs that
  // would take it are outside their windows, when the first opens. Under mu_.
  std::string WindowHint(const PlacementAsk& ask, int64_t now) const;
  Reservation ReservationInfo(const ReservationRow& row, int64_t now) const;
  // The reservation lines of the leases in `query` (as HoldLines).
  Status ReservationLines(const UsageQuery& query, bool earnings, std::vector<InvoiceLine>* out);
  // Sums usage per session and attributes each to the lease it ran under.
  Status SessionsUsage(const UsageQuery& query, std::vector<SessionUsage>* out);
  // Bill (earnings false: a tenant's) and Earnings (a provider's): checks that the caller may see
  // the subject's invoice (the admin key any, a tenant's or provider's key only its own), then
  // builds it.
  grpc::Status InvoiceFor(grpc::ServerContext* ctx, UsageQuery query, bool earnings,
                          Invoice* reply);
  grpc::Status BuildInvoice(const UsageQuery& query, const std::string& subject, bool earnings,
                            Invoice* out);

  RegistryOptions options_;
  TokenSigner signer_;
  std::unique_ptr<Store> store_;
  std::mutex mu_;
  std::condition_variable changed_;
  bool shutdown_ = false;
  std::map<std::string, ProviderState> providers_;      // by name
  std::map<std::string, std::string> provider_by_key_;  // key hash -> name
  std::map<std::string, TenantRow> tenants_;
  std::map<std::string, std::string> tenant_by_key_;
  std::vector<GpuMeta> gpus_;  // parallel to cluster_.gpus
  Cluster cluster_;            // a node per server that registered GPUs
  std::unique_ptr<PlacementPolicy> policy_;
  std::map<std::string, size_t> gpu_by_id_;
  std::map<std::string, ServerState> servers_;
  std::map<std::string, LeaseRow> leases_;  // active, by id
  std::set<std::string> under_notice_;      // ids of active leases with an ending_ms
  // Leases EndLease ended and the store does not know of yet: (id, when, why).
  std::vector<std::tuple<std::string, int64_t, std::string>> ended_unpersisted_;
  std::map<std::string, ReservationState> reservations_;   // kept ones, by id
  std::map<size_t, std::set<std::string>> reserved_gpus_;  // GPU index -> its reservations
  int64_t next_reservation_edge_ms_ = 0;           // the next start or end among reservations_
  int64_t next_window_edge_ms_ = 0;                // the next opening or closing among the windows
  std::map<size_t, Waiter*> kept_for_preemption_;  // GPU index -> the request it is kept for
  std::deque<std::shared_ptr<Waiter>> queue_;      // ordered: QueueBefore at the last Dispatch
  uint64_t next_seq_ = 1;
  int64_t started_ms_ = 0;  // claim timeouts count from here at the earliest (a restart)
  EndedLeases ended_;
  // Hand-overs offered for leases under notice (OfferNoticeMoves), by lease id: when, where to,
  // the token ("" once taken back or when there was nowhere to go).
  struct NoticeMove {
    int64_t offered_ms = 0;
    std::string url;
    std::string token;
  };
  std::map<std::string, NoticeMove> notice_moves_;
  std::mutex usage_mu_;  // one ReportUsage at a time checks and stores
  // Last: destroyed (its thread stopped) before what its callbacks touch.
  std::unique_ptr<ProbeQueue> probes_;
};

}  // namespace rgpu::registry
