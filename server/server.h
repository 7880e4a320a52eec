// Server: accepts tenant connections and runs one Session per connection on its own thread, so
// that no session waits on another.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <map>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "server/cuda_driver.h"
#include "server/device_catalog.h"
#include "server/host_nvml.h"
#include "server/fair_scheduler.h"
#include "server/ipc_registry.h"
#include "server/liveness_service.h"
#include "server/session_limits.h"
#include "server/tenants.h"
#include "proto/rgpu.pb.h"
#include "transport/channel.h"

namespace prometheus {
class Exposer;
class Collectable;
}  // namespace prometheus

namespace rgpu::server {

enum class SessionEnd : uint8_t;  // server/session.h

class Session;
struct MoveRequest;
class SessionHostPool;
class StdoutCapture;
class RegistryAgent;

struct ServerOptions {
  std::string listen = "tcp://0.0.0.0:0";
  // tls://: the server's key and certificate (ListenerOptions); without them a key of the
  // process's own, which sessions in processes of their own cannot share (refused then).
  std::string tls_key_file;
  std::string tls_certificate_file;
  std::string backend = "softgpu";   // "cuda" or "softgpu"
  std::string driver_library;        // empty: the backend's default
  int poll_us = 200;                 // busy-poll before sleeping, per session
  std::string tokens_path;           // when set, sessions need a token from this file
  std::string token_public_key;      // when set, sessions may present tokens signed for it
  std::string name = "rgpu-server";  // this server's name in signed tokens' claims
  // The operator's key for `rgpu status` (read, or created mode 0600 when missing; "": none, and
  // only tenants may read the status of their own sessions).
  std::string operator_key_file;
  int metrics_port = 0;      // serve Prometheus metrics here (0: off)
  std::string metrics_host;  // ... on this address ("": the listen URL's host)
  int max_sessions = 0;      // sessions at once (0: no limit; each lane counts as one)
  // Lanes a session may have besides its channel (Session::ServeLane; 0: none offered), where
  // the client's threads wait without holding up its other threads' calls.
  int max_lanes = 4;
  bool fair_share = false;  // kernels take turns by weight (FairScheduler)
  // The registry (rgpu-server --registry HOST:PORT): register the GPUs, heartbeat, report usage,
  // and admit tokens the registry signs (its key comes with the registration unless
  // token_public_key is given).
  std::string registry;
  std::string provider_key;      // this provider's key (`rgpu provider create`)
  std::string registry_ca;       // CA certificate when the registry serves TLS
  std::string advertise_url;     // URL tenants reach this server at (default: the bound URL)
  double interconnect_gbps = 0;  // host-to-GPU bandwidth to advertise, GB/s (0: unknown)
  std::string metering_spool;    // file keeping unacknowledged usage records across restarts
  // When the GPUs are lendable (rgpu-server --available, registry/availability.h: "always" or
  // HH:MM-HH:MM,... in local time) and how long a session still running when a window closes
  // goes on before it ends; told to the registry, which places only inside the windows.
  std::string available = "always";
  uint32_t notice_seconds = 60;
  // Per-session bound on requests received and not yet served; a client that sends past it
  // (a flood: rgpu's own client never does) has its session closed with the reason.
  int max_queued_calls = 4096;
  int max_queued_mib = 1024;
  bool keepalive = true;      // serve the keepalive echo port (LivenessService)
  int client_timeout_ms = 0;  // close sessions whose client sends no keepalive this long (0: never)
  SessionLimits session_limits;  // module size and handle counts per session
  // The longest a kernel may run (0: no bound): past it softgpu ends it with
  // CUDA_ERROR_LAUNCH_TIMEOUT, and on other backends a kernel in its --fair-share turn is ended
  // by destroying its context (Session::SetKernelBound).
  uint64_t max_kernel_ms = 60000;
  // On SIGTERM (Stop), first move every session to this server (docs/migration.md), each given
  // drain_timeout_ms for its client's next waited call; "": sessions end with the server. The
  // target's operator key: drain_key_file ("": this server's own).
  std::string drain_to;
  std::string drain_key_file;
  int drain_timeout_ms = 30000;
  // Use softgpu's extensions where the backend has them; false serves as for a backend without
  // them (NVIDIA's driver), so that tests on the software GPU exercise the CUDA backend's ways.
  bool backend_extensions = true;
  // The host's NVML, read for the sensors the driver API lacks (HostNvml; "none": not read).
  std::string host_nvml = "libnvidia-ml.so.1";
  // Each admitted session in a process of its own (server/session_host.h): "on", "off", or
  // "auto": on for every backend but softgpu (which keeps each context's faults and addresses
  // apart itself). `session_host_spares` hosts are started ahead. `command_line` is how this
  // server was started: hosts are started the same way.
  std::string session_processes = "auto";
  int session_host_spares = 1;
  std::vector<std::string> command_line;
  // The rgpu-server binary hosts run ("": the server's own; a program that embeds a server, such
  // as a test, names the binary).
  std::string host_program;
};

class Server {
 public:
  Server();
  ~Server();
  // Loads the backend, gathers its devices and starts listening.
  Status Start(const ServerOptions& options);
  // The bound listen URL (with the actual port).
  std::string url() const { return url_; }
  // Accepts connections until Stop() is called, then ends every session and returns.
  void Serve();
  // Asks Serve() to return (with drain_to: once every session has moved there or failed to);
  // safe from a signal handler.
  void Stop() {
    if (!options_.drain_to.empty() && !drain_requested_.exchange(true)) return;
    stop_.store(true);
  }
  size_t active_sessions();
  // Every live session's figures, for `rgpu status` and the metrics endpoint. Any thread.
  wire::StatusReply SessionsStatus();
  // The registry ended these leases: their tokens are refused from now on and the sessions
  // they admitted are stopped (Session::Abort). Any thread.
  void EndLeases(const std::vector<std::string>& lease_ids);
  // True when sessions run in processes of their own (ServerOptions::session_processes).
  bool session_processes() const { return hosts_ != nullptr; }
  // True when only processes keep tenants apart: sessions run in processes of their own on a
  // backend whose contexts share one address space (NVIDIA's and AMD's drivers, and the
  // software GPU driven as they are, --no-backend-extensions). A restore runs in a process of
  // its own there (RestoreFromStream relays the checkpoint to a session host).
  bool ProcessesIsolateTenants() const {
    return hosts_ != nullptr && (options_.backend != "softgpu" || !options_.backend_extensions);
  }

  // As a session host (server/session_host.h), before Serve: admits `token` once, for `tenant`
  // (on `gpus` unless `all_gpus`) under registry lease `lease_id` ("": none); `on_admitted` is
  // called when its session is admitted, and `on_end` with its last figures and its end, after
  // which Serve returns.
  void HostOneSession(const std::string& token, std::shared_ptr<Tenant> tenant, bool all_gpus,
                      std::vector<int> gpus, const std::string& lease_id,
                      std::function<void(const wire::SessionStats&, SessionEnd)> on_end,
                      std::function<void()> on_admitted);
  // The same for a host assigned a restore: no client is admitted by a token, the restored
  // session is resumed (RestoreAsHost); the callbacks as HostOneSession's.
  void HostRestoredSession(std::function<void(const wire::SessionStats&, SessionEnd)> on_end,
                           std::function<void()> on_admitted);
  // As a session host assigned a restore (HostAssign.restore): restores the checkpoint whose
  // bytes `next_piece` gives (false: no more, the server is gone; `last` with the final ones)
  // for `tenant` on `gpus` (all of them with `all_gpus`) as session `id`, which then waits to be
  // resumed with `credential` (JoinResume). Checks the checkpoint as RestoreFromStream does.
  Status RestoreAsHost(const std::function<bool(std::string*, bool*)>& next_piece,
                       std::shared_ptr<Tenant> tenant, bool all_gpus, const std::vector<int>& gpus,
                       uint64_t id, const std::string& credential);
  // As a session host: its sessions are numbered from `id` (the server's id for the session it
  // hosts, so that both logs name it alike). Before Serve.
  void SetFirstSessionId(uint64_t id) { next_session_id_.store(id); }
  // As a session host, before Start: with --fair-share, the kernels of device d take their turns
  // in `make(d)` (the server's schedulers, over the control socket) instead of this process's.
  void SetTurnTakers(std::function<std::unique_ptr<TurnTaker>(int)> make) {
    make_turn_taker_ = std::move(make);
  }
  // As a session host: sessions hand what the backend writes to stdout to their programs.
  void SetStdoutCapture(StdoutCapture* capture) { stdout_capture_ = capture; }
  // As a session host: the admitted session's figures; false before it is admitted.
  bool HostedStats(wire::SessionStats* stats);
  // A session host's part of moving its one session (HostMove from the server that admitted it):
  // a migration, a checkpoint (its pieces to `sink`; the session then parks) or a parked
  // session's redirect, asked of the session and waited for as an operator's request is, its
  // outcome in `result`. Any thread.
  void MoveHostedSession(const wire::HostMove& order,
                         const std::function<Status(const char*, size_t, bool)>& sink,
                         wire::HostMoveResult* result);

 private:
  ServerOptions options_;
  CudaDriver driver_;
  DeviceCatalog devices_;
  std::unique_ptr<HostNvml> host_nvml_;  // null: no sensor readings
  std::unique_ptr<TenantTable> tenants_;
  std::unique_ptr<FairSchedulers> scheduler_;                       // one per device (--fair-share)
  std::function<std::unique_ptr<TurnTaker>(int)> make_turn_taker_;  // SetTurnTakers
  std::unique_ptr<Listener> listener_;
  std::unique_ptr<LivenessService> liveness_;
  std::string url_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> drain_requested_{false};
  // Moves every admitted session to options_.drain_to, at once, and waits for each to have moved
  // (or failed to); then Serve stops as usual.
  void DrainAll();
  std::atomic<uint64_t> next_session_id_{1};
  std::mutex device_memory_mu_;  // Session::SetDeviceMemoryLock
  IpcRegistry ipc_;              // what sessions share (Session::SetIpcRegistry)
  std::mutex mu_;
  std::set<uint64_t> live_;                // ids of sessions still running
  std::map<uint64_t, Session*> sessions_;  // sessions past construction, by id (under mu_)
  // How admitted sessions that have ended ended, by tenant name ("" without one) (under mu_).
  std::map<std::string, wire::EndedSessions> ended_;
  // Counts one ended session of `tenant` (mu_ held).
  void CountEnded(const std::string& tenant, SessionEnd end);
  // Serves `lane` (a connection whose first message was LaneJoin) as a lane of session
  // `session_id`, on the calling thread, when its key is right; refuses it otherwise.
  // Serves a PeerJoin (another server's transfer into or out of one of its sessions), on this
  // thread. Further transfers may follow on the same connection, each with its own ticket.
  void JoinPeer(const wire::PeerJoin& first, Channel& peer);
  // One of them: false when it was refused or the connection failed.
  bool ServeOnePeerTransfer(const wire::PeerJoin& join, Channel& peer);
  void JoinLane(uint64_t session_id, const std::string& lane_key, Channel& lane);
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Collectable> metrics_;
  std::atomic<int> running_threads_{0};
  // Sets up a session as every session of this server is (limits, keepalive, lanes, peers, the
  // service handler).
  void ConfigureSession(Session& session);
  // Runs `session` on the calling thread (Run, or RunResumed with `resumed`), listed in sessions_
  // and metered, and accounts for its end.
  void RunSession(Session& session, std::unique_ptr<Channel> resumed = nullptr);

  // Moving sessions (server/server_migration.cc, docs/migration.md). The first message of a
  // connection that is none of the session kinds: an operator's AdminRequest, another server's
  // RestoreJoin, a client's Resume. False: not one of these.
  bool HandleService(const wire::Envelope& first, std::unique_ptr<Channel>& channel);
  void ServeAdmin(const wire::AdminRequest& request, Channel& channel);
  // Checks the operator's proof of its key over a fresh nonce on `channel`.
  Status ProveOperator(const wire::Credential& presented, Channel& channel);
  // Restores the checkpoint that arrives on `channel` (CheckpointChunk messages) as a session
  // waiting to be resumed, and answers AdminReply: its id and resume credential, or why not (as
  // soon as it is known, the rest of the stream then read and dropped).
  // `hand_over`, when not empty: the registry's hand-over that admitted the stream (a move the
  // registry asked for); the checkpoint must carry exactly it. `file_hand_over`: the hand-over
  // of the lease of a checkpoint that carries none (a file's, brought by `rgpu restore` from
  // the source's HAND_OVER), which admits it as a carried one does.
  void RestoreFromStream(Channel& channel, const std::string& hand_over = "",
                         const std::string& file_hand_over = "");
  // A client's Resume: its proof checked, the restored session served on this thread.
  void JoinResume(const wire::Resume& resume, std::unique_ptr<Channel>& channel);
  // Releases restored sessions nobody resumed in time, and expired restore tickets.
  void ReapPendingResumes();
  // When session `id` runs under a registry lease, has the registry hand the lease over to the
  // server it knows as `target_name` (RegistryAgent::HandOverLease) and puts the hand-over in
  // `move->lease_token`; `lease_id` receives the lease ("" when the session has none or this
  // server no registry: nothing to do). A lease that cannot follow (no target name, the
  // registry refuses) is an error: the session stays.
  Status HandOverLeaseOf(uint64_t id, const std::string& target_name, MoveRequest* move,
                         std::string* lease_id);
  // An operator's move of session `id` alone (a migration, a checkpoint into a file, the
  // hand-over for a file's restore): refused (InvalidArgument, saying why) when it runs under a
  // registry lease that other sessions here share, since a lease has one GPU and moves whole.
  Status LeaseMovesAlone(uint64_t id);
  // Takes back a hand-over whose move did not happen (logged when the registry does not answer).
  void CancelLeaseHandOver(const std::string& lease_id);
  // Moves the sessions of `moves` (each id with its request; all to one server), each at its
  // client's next waited call within `timeout_ms`, and waits until each has moved (its client
  // gone) or stayed. With `lease` (not ""), they are the sessions of that registry lease here and
  // move whole: their last records reach the registry together once all have left
  // (RegistryAgent::BeginLeaseMove), and the lease's hand-over is taken back when none moved.
  // Returns how many moved; each that stayed is logged. Blocks; any thread but a session's.
  int MoveSessionsTogether(const std::string& lease,
                           std::vector<std::pair<uint64_t, std::shared_ptr<MoveRequest>>> moves,
                           uint32_t timeout_ms);
  // Asks the --drain-to server for a one-use restore ticket with the operator key `key`;
  // `registry_name` receives the name it has at its registry ("" when none).
  Status AskRestoreTicket(const std::string& key, std::string* ticket, std::string* registry_name);
  // The registry asks that the sessions of `lease_id`, under notice, move to the server at `url`
  // with the hand-over `token` (RegistryAgent on_lease_move): all of them, together
  // (MoveSessionsTogether), on a thread of its own; those that do not move end with the notice,
  // and the hand-over is taken back when none did.
  void MoveLeaseSessions(const std::string& lease_id, const std::string& url,
                         const std::string& token);
  struct PendingResume {
    std::unique_ptr<Session> session;  // null: restored in a host, which its client goes on to
    std::string credential;
    std::chrono::steady_clock::time_point deadline;
    uint16_t host_port = 0;  // a host's: where, and with what credential, it is resumed
    std::string host_pin;    // (and over tls:// the key its host proves)
    std::string host_credential;
    std::shared_ptr<Session> hosted;  // a host's: this server's side of it
  };
  std::map<uint64_t, PendingResume> pending_resumes_;                     // under mu_
  std::map<std::string, std::chrono::steady_clock::time_point> tickets_;  // under mu_
  // The registry's hand-overs of leases that restores here carried (Checkpoint.lease_token, or
  // AdminRequest.lease_hand_over for a file's):
  // each admits every session of its lease once (by source server and session), at most
  // kMostSessionsPerHandOver of them, and is kept until it expires. Under mu_.
  static constexpr size_t kMostSessionsPerHandOver = 16;
  struct UsedHandOver {
    int64_t expires_unix = 0;
    std::set<std::string> sessions;  // "source server/source session"
  };
  std::map<std::string, UsedHandOver> used_hand_overs_;
  // Records that the restore of `header` used its lease's hand-over `token` (expiring at
  // `expires_unix`); refused when that session was restored under it before, or when the
  // hand-over has admitted kMostSessionsPerHandOver sessions.
  Status UseHandOver(const std::string& token, const wire::Checkpoint& header,
                     int64_t expires_unix);
  // A restore that used `token` for `source` (a checkpoint's "source server/source session")
  // failed: that session may try again.
  void ForgetHandOverUse(const std::string& token, const std::string& source);

  std::unique_ptr<SessionHostPool> hosts_;  // when sessions run in processes of their own
  // As a session host (HostOneSession).
  std::function<void(const wire::SessionStats&, SessionEnd)> host_on_end_;
  std::function<void()> host_on_admitted_;
  StdoutCapture* stdout_capture_ = nullptr;
  std::unique_ptr<RegistryAgent> agent_;  // when options_.registry is set
  std::string registry_key_path_;         // the registry's public key, written for TenantTable
  // Random, made at Start: sent to the registry when registering, so that the registry can check
  // this server answers at its URL (Session::SetReachabilitySecret).
  std::string reachability_secret_;
  // Registers with the registry and admits the tokens it signs. Called by Start().
  Status StartRegistryAgent();
};

}  // namespace rgpu::server
