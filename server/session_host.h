// Session hosts: a process of its own for each tenant session (rgpu-server --session-processes).
//
// NVIDIA's driver makes a fault or a device assert sticky for the whole process, and gives the
// contexts of one process one GPU address space: tenants served in one process share their fate
// and can read each other's memory from a kernel (docs/real-gpu.md, run 1). So the server admits
// a tenant (its credential, its devices) and then hands the session to a host: a copy of
// rgpu-server started with `--session-host FD` that loads the backend, listens on a port of its
// own (same host and scheme) and admits exactly one client, once, with a token made for it. The
// client connects there (Welcome.redirect_port); the server keeps the tenant's quota (the host
// reserves through it, QuotaBroker), receives the session's figures every second for status,
// metrics and metering, and ends the host when the session must end (a lease ended, the server
// stops). A host that crashes or is killed ends only its own session; whatever quota it held is
// released.
//
// The server and a host talk over a SOCK_SEQPACKET socket pair, one HostControl message per
// packet (proto/rgpu.proto). The server trusts nothing a host says beyond its own session: it
// releases at most what the host reserved.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "proto/rgpu.pb.h"
#include "server/tenants.h"

namespace rgpu::server {

struct ServerOptions;

// The server's handle on one host process. Not thread-safe: one session's thread uses it.
class SessionHost {
 public:
  // `pin`: over tls://, the pin of the key the host's listener proves (its own); "" otherwise.
  SessionHost(pid_t pid, int control_fd, uint16_t port, std::string pin = "");
  // Ends the process if it still runs (SIGKILL) and reaps it.
  ~SessionHost();
  SessionHost(const SessionHost&) = delete;
  SessionHost& operator=(const SessionHost&) = delete;

  uint16_t port() const { return port_; }
  const std::string& pin() const { return pin_; }
  pid_t pid() const { return pid_; }
  // Sends the session the host is to serve.
  Status Assign(const wire::HostAssign& assign);
  // Asks the host to move its session (answered by a move_result, which Supervise hands to
  // `on_move_result`). Any thread, while the host runs.
  Status Move(const wire::HostMove& move);
  // The next `size` bytes of the checkpoint a HostAssign.restore host restores, in pieces that
  // fit a control message; `last` with its final bytes. Any thread, while the host runs (the
  // host answers a restore_result, which Supervise hands to `on_restore_result`).
  Status SendRestorePiece(const char* data, size_t size, bool last);
  // Serves the host until its process ends: quota reservations against `tenant` (null: every
  // one granted), its kernels' turns in `schedulers` (--fair-share; null: none) under the
  // tenant's account (server/hosted_turns.h), its figures passed to `on_stats`, its answers to
  // moves to `on_move_result`, the pieces of a checkpoint asked of it to `on_piece` and its
  // answer to a restore to `on_restore_result` ("": restored). When
  // `should_stop` answers true (polled every 200 ms) the host is told to end (SIGTERM, then SIGKILL
  // after 5 s). Returns the session's end as the host reported it (SessionEnd's value; 0 when it
  // reported none) and, in `how`, how the process ended ("exited 0", "killed by signal 9").
  uint32_t Supervise(Tenant* tenant, FairSchedulers* schedulers,
                     const std::function<bool()>& should_stop,
                     const std::function<void(const wire::SessionStats&)>& on_stats,
                     const std::function<void(const wire::HostMoveResult&)>& on_move_result,
                     const std::function<void(const wire::HostCheckpointChunk&)>& on_piece,
                     const std::function<void(const std::string&)>& on_restore_result,
                     std::string* how);

 private:
  pid_t pid_;
  int fd_;
  uint16_t port_;
  std::string pin_;
  bool reaped_ = false;
  int wait_status_ = 0;
  uint64_t reserved_ = 0;  // quota the host holds, released when it ends
  bool Reap(int timeout_ms);
};

// Starts hosts, keeping `spares` started ahead so that a session's host is ready when it is
// admitted (a host's start loads the backend: on NVIDIA's driver, cuInit). Thread-safe.
class SessionHostPool {
 public:
  // `argv`: the server's own command line (its options are the hosts' too); `program`: the
  // rgpu-server binary hosts run ("": this process's own, /proc/self/exe).
  SessionHostPool(std::vector<std::string> argv, int spares, std::string program = "");
  ~SessionHostPool();
  // A ready host (a spare when there is one, else one started now).
  Status Take(std::unique_ptr<SessionHost>* out);
  // Starts spares until there are as many as asked for, on a thread of the pool's (one at a
  // time), returning at once.
  void RefillSoon();

 private:
  void Refill();  // the same on the calling thread
  Status Spawn(std::unique_ptr<SessionHost>* out);
  const std::vector<std::string> argv_;
  const int spares_wanted_;
  const std::string program_;
  std::mutex mu_;
  std::vector<std::unique_ptr<SessionHost>> spares_;  // under mu_
  int starting_ = 0;                                  // under mu_
  bool refilling_ = false;                            // under mu_
  std::thread refiller_;                              // under mu_
};

// One HostControl message per packet on the control socket: sends one (false when the other end
// is gone); receives one, waiting up to `timeout_ms` (-1: forever; false on timeout, end or
// garbage).
bool SendControl(int fd, const wire::HostControl& message);
// Sends `size` bytes at `data` as HostCheckpointChunk pieces that fit a control message, each in
// `field` of its HostControl (checkpoint_chunk or restore_chunk), `last` set on the final one.
// False when the other end is gone.
bool SendChunks(int fd, wire::HostCheckpointChunk* (wire::HostControl::*field)(), const char* data,
                size_t size, bool last);
bool ReceiveControl(int fd, int timeout_ms, wire::HostControl* message);

// A random one-time credential for a host's session (hex).
std::string MakeHostToken();

// The host's side (session_host_main.cc): runs rgpu-server as the host of one session over
// `control_fd` (main.cc's `--session-host`), with the server's `options` adjusted (a port of its
// own, no registry, no token file, no metrics, one session). Once the backend is loaded and the
// host listens, before it tells the server it is ready, it calls `confine` (main.cc: the
// confinement of server/session_sandbox.h, unless --session-sandbox off); a host whose `confine`
// fails ends without serving. Returns the process's exit code.
int RunSessionHost(ServerOptions options, int control_fd,
                   const std::function<Status(const ServerOptions&)>& confine);

}  // namespace rgpu::server
