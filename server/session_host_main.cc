#include <fcntl.h>

#include <cerrno>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "common/log.h"
#include "server/server.h"
#include "server/session.h"
#include "server/session_host.h"
#include "server/stdout_capture.h"
#include "transport/url.h"

// The host's side of server/session_host.h: rgpu-server --session-host FD.
namespace rgpu::server {
namespace {

constexpr int kNoShowTimeoutMs = 30000;  // a redirected client that never comes

// The host's quota and kernel turns, kept by the server over the control socket. The answers to
// reservations and turns come through the host's reader of that socket (Answer, TurnGranted),
// which also takes the server's other messages (move orders).
class ControlBroker : public QuotaBroker {
 public:
  explicit ControlBroker(int fd) : fd_(fd) {}
  bool Reserve(uint64_t bytes) override {
    std::lock_guard<std::mutex> one(reserve_mu_);  // one at a time: the next answer is its
    {
      std::lock_guard<std::mutex> lock(mu_);
      answered_ = false;
    }
    wire::HostControl ask;
    ask.set_reserve(bytes);
    if (!SendControl(fd_, ask)) return false;
    // The server answers at once; a server that does not is gone (its host ends with it).
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(30), [&] { return answered_ || closed_; })) {
      return false;
    }
    return answered_ && granted_;
  }
  void Release(uint64_t bytes) override {
    wire::HostControl message;
    message.set_release(bytes);
    SendControl(fd_, message);
  }
  // Asks the server for device `device`'s turn and waits until it is granted (or the server is
  // gone: the host ends with it). One call per keeper at a time; any number of keepers.
  void AcquireTurn(uint32_t device) {
    uint64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      id = ++last_turn_id_;
    }
    wire::HostControl ask;
    ask.mutable_turn()->set_id(id);
    ask.mutable_turn()->set_device(device);
    if (!SendControl(fd_, ask)) return;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return granted_turns_.count(id) > 0 || closed_; });
    granted_turns_.erase(id);
  }
  void EndTurn(uint32_t device, double busy_seconds) {
    wire::HostControl end;
    end.mutable_turn()->set_device(device);
    end.mutable_turn()->set_end(true);
    end.mutable_turn()->set_busy_seconds(busy_seconds);
    SendControl(fd_, end);
  }
  // The reader's: the turn asked for under `id` is granted.
  void TurnGranted(uint64_t id) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      granted_turns_.insert(id);
    }
    cv_.notify_all();
  }
  // The reader's: the server's answer to the reservation waiting, or the socket's end.
  void Answer(bool granted) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      answered_ = true;
      granted_ = granted;
    }
    cv_.notify_all();
  }
  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }

 private:
  const int fd_;
  std::mutex reserve_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool answered_ = false;             // under mu_
  bool granted_ = false;              // under mu_
  bool closed_ = false;               // under mu_
  uint64_t last_turn_id_ = 0;         // under mu_
  std::set<uint64_t> granted_turns_;  // under mu_
};

// A device's kernel turns in the server's scheduler (server/hosted_turns.h): the account is the
// tenant's there.
class ControlTurns : public TurnTaker {
 public:
  ControlTurns(ControlBroker* broker, int device) : broker_(broker), device_(device) {}
  void Acquire(ShareAccount*) override { broker_->AcquireTurn(static_cast<uint32_t>(device_)); }
  void Release(ShareAccount*, double busy_seconds) override {
    broker_->EndTurn(static_cast<uint32_t>(device_), busy_seconds);
  }

 private:
  ControlBroker* const broker_;
  const int device_;
};

// The pieces of the checkpoint a host restores (HostAssign.restore), from the control socket's
// reader to the thread that restores them. Unbounded: the reader must go on reading the server's
// answers to the restore's quota reservations, which come behind pieces (at most the checkpoint).
class RestoreFeed {
 public:
  void Put(const std::string& data, bool last) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pieces_.push_back({data, last});
    }
    cv_.notify_all();
  }
  // The server is gone: Next answers false once the pieces are taken.
  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  bool Next(std::string* data, bool* last) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !pieces_.empty() || closed_; });
    if (pieces_.empty()) return false;
    *data = std::move(pieces_.front().first);
    *last = pieces_.front().second;
    pieces_.pop_front();
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::string, bool>> pieces_;  // under mu_
  bool closed_ = false;                              // under mu_
};

Server* g_host_server = nullptr;
void OnHostSignal(int) {
  if (g_host_server != nullptr) g_host_server->Stop();
}

// The session's figures, as the host sends them to the server: the watcher's every second, a
// move's before its answer, and the last with the session's end. Each is taken and sent under
// one lock, and none goes after the last, so the server never reads older figures after newer
// ones (a figure taken before the end but sent after it would be what the server bills).
class StatsToServer {
 public:
  StatsToServer(int fd, Server* server) : fd_(fd), server_(server) {}
  // The session's figures now, unless the last were sent (or none is admitted).
  void Send() {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    wire::HostControl message;
    if (server_->HostedStats(message.mutable_stats())) SendControl(fd_, message);
  }
  // The last figures, then the session's end.
  void SendLast(const wire::SessionStats& stats, SessionEnd end) {
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = true;
    wire::HostControl last;
    *last.mutable_stats() = stats;
    SendControl(fd_, last);
    wire::HostControl ended;
    ended.set_ended(static_cast<uint32_t>(end));
    SendControl(fd_, ended);
  }

 private:
  const int fd_;
  Server* const server_;
  std::mutex mu_;
  bool ended_ = false;  // GUARDED_BY(mu_)
};

}  // namespace

int RunSessionHost(ServerOptions options, int control_fd,
                   const std::function<Status(const ServerOptions&)>& confine) {
  // The host ends with its server, whatever way the server ends: its end of the control socket
  // closes (not PR_SET_PDEATHSIG, which follows the thread that started the host).
  fcntl(control_fd, F_SETFD, FD_CLOEXEC);
  options.provider_key.clear();
  // Over tls:// its listener makes a key of its own (the server never hands it its own; the
  // client learns this one's pin from the server).
  options.tls_key_file.clear();
  options.tls_certificate_file.clear();
  // Kept from other processes of the server's user from the start, not only once confined (a
  // confined host must not reach one that is still loading its backend); not over shm://, whose
  // client opens this process's shared memory through /proc.
  if (options.listen.rfind("shm://", 0) != 0) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  TransportUrl url;
  if (Status s = TransportUrl::Parse(options.listen, &url); !s.ok()) return 1;
  url.port = 0;  // a port of its own on the server's host
  options.listen = url.ToString();
  options.registry.clear();
  options.tokens_path.clear();
  options.token_public_key.clear();
  options.operator_key_file.clear();
  options.metrics_port = 0;
  options.drain_to.clear();
  options.available = "always";
  options.session_processes = "off";
  // The backend's stdout (NVIDIA's driver writes device printf there) is the session's.
  StdoutCapture capture;
  if (Status s = capture.Start(); !s.ok()) {
    RGPU_LOG_ERROR("session host: %s", s.ToString().c_str());
    return 1;
  }
  // Before the server: a session thread that outlives Serve's wait may still release quota.
  ControlBroker broker(control_fd);
  Server server;
  server.SetStdoutCapture(&capture);
  server.SetTurnTakers([&broker](int device) -> std::unique_ptr<TurnTaker> {
    return std::make_unique<ControlTurns>(&broker, device);
  });
  if (Status s = server.Start(options); !s.ok()) {
    RGPU_LOG_ERROR("session host: cannot start: %s", s.ToString().c_str());
    return 1;
  }
  TransportUrl bound;
  if (!TransportUrl::Parse(server.url(), &bound).ok()) return 1;
  // Confined before any tenant reaches it (a spare waits here too).
  if (Status s = confine(options); !s.ok()) {
    RGPU_LOG_ERROR("session host: cannot confine itself, not serving: %s", s.ToString().c_str());
    server.Stop();
    return 1;
  }
  wire::HostControl ready;
  ready.set_ready_port(bound.port);
  ready.set_ready_pin(bound.pin);
  if (!SendControl(control_fd, ready)) return 1;
  wire::HostControl assigned;
  if (!ReceiveControl(control_fd, -1, &assigned) ||
      assigned.body_case() != wire::HostControl::kAssign || assigned.assign().token().empty()) {
    return 0;  // a spare the server never used: it stopped
  }
  const wire::HostAssign& a = assigned.assign();
  auto tenant = std::make_shared<Tenant>();
  tenant->name = a.tenant();
  tenant->memory_quota = a.memory_quota();
  tenant->weight = a.weight() > 0 ? a.weight() : 1.0;
  tenant->share.weight = tenant->weight;
  tenant->broker = &broker;
  std::vector<int> gpus(a.gpus().begin(), a.gpus().end());
  // A restored session keeps the server's id; connections here are numbered past it.
  if (a.parent_session_id() > 0) {
    server.SetFirstSessionId(a.parent_session_id() + (a.restore() ? 1 : 0));
  }
  std::atomic<bool> admitted{false};
  std::atomic<bool> restoring{a.restore()};
  StatsToServer stats_to_server(control_fd, &server);
  auto on_end = [&](const wire::SessionStats& stats, SessionEnd end) {
    stats_to_server.SendLast(stats, end);
  };
  auto on_admitted = [&] { admitted.store(true); };
  if (a.restore()) {
    server.HostRestoredSession(on_end, on_admitted);
  } else {
    server.HostOneSession(a.token(), tenant, a.all_gpus(), gpus, a.lease_id(), on_end, on_admitted);
  }
  RGPU_LOG_INFO(
      "session host for session %llu of %s on %s", (unsigned long long)a.parent_session_id(),
      a.tenant().empty() ? "no tenant" : ("tenant " + a.tenant()).c_str(), server.url().c_str());
  g_host_server = &server;
  struct sigaction sa = {};
  sa.sa_handler = OnHostSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  std::atomic<bool> serving{true};
  // The server's messages: answers to reservations, and move orders (each carried out on a
  // thread of its own, answered with a move_result before the host ends).
  std::mutex moves_mu;
  std::vector<std::thread> moves;  // under moves_mu
  RestoreFeed feed;
  std::thread reader([&] {
    while (serving.load()) {
      pollfd p = {control_fd, POLLIN, 0};
      const int ready = poll(&p, 1, 200);
      if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
      wire::HostControl message;
      if (ready < 0 || !ReceiveControl(control_fd, 0, &message)) break;  // the server is gone
      if (message.body_case() == wire::HostControl::kReserved) {
        broker.Answer(message.reserved());
      } else if (message.body_case() == wire::HostControl::kTurnGranted) {
        broker.TurnGranted(message.turn_granted());
      } else if (message.body_case() == wire::HostControl::kRestoreChunk) {
        feed.Put(message.restore_chunk().data(), message.restore_chunk().last());
      } else if (message.body_case() == wire::HostControl::kMove) {
        std::lock_guard<std::mutex> lock(moves_mu);
        moves.emplace_back([&server, &stats_to_server, control_fd, order = message.move()] {
          // A checkpoint goes to the server in pieces that fit a control message.
          auto sink = [control_fd](const char* data, size_t size, bool last) -> Status {
            return SendChunks(control_fd, &wire::HostControl::mutable_checkpoint_chunk, data, size,
                              last)
                       ? Status::Ok()
                       : Unavailable("the server is gone");
          };
          wire::HostControl answer;
          server.MoveHostedSession(order, sink, answer.mutable_move_result());
          // Its figures first (a parked session holds nothing), then the answer.
          stats_to_server.Send();
          SendControl(control_fd, answer);
        });
      }
    }
    broker.Close();
    feed.Close();
  });
  // A restore: the checkpoint's pieces as the server relays them, then the answer; a refused
  // one ends the host.
  std::thread restorer;
  if (a.restore()) {
    restorer = std::thread([&] {
      Status s = server.RestoreAsHost([&feed](std::string* d, bool* l) { return feed.Next(d, l); },
                                      tenant, a.all_gpus(), gpus, a.parent_session_id(), a.token());
      if (!s.ok()) {
        RGPU_LOG_WARN("session host: restore refused: %s", s.message().c_str());
      }
      wire::HostControl answer;
      answer.set_restore_result(s.ok() ? "" : s.message().substr(0, 4096));
      SendControl(control_fd, answer);
      restoring.store(false);
      if (!s.ok()) server.Stop();
    });
  }
  // The session's figures every second; the end of the server (its end of the socket closed);
  // a client that never comes.
  std::thread watcher([&] {
    auto start = std::chrono::steady_clock::now();
    while (serving.load()) {
      pollfd p = {control_fd, 0, 0};
      if (poll(&p, 1, 1000) > 0 && (p.revents & (POLLHUP | POLLERR)) != 0) {
        server.Stop();
        return;
      }
      if (restoring.load()) start = std::chrono::steady_clock::now();  // the client waits for it
      if (!admitted.load()) {
        if (std::chrono::steady_clock::now() - start >
            std::chrono::milliseconds(kNoShowTimeoutMs)) {
          RGPU_LOG_WARN("session host: the client never came");
          server.Stop();
          return;
        }
        continue;
      }
      stats_to_server.Send();
    }
  });
  server.Serve();
  // A move answers once its client has left, before the host ends (the server reads the answer
  // before the socket's end); any the reader started meanwhile are joined after it.
  auto join_moves = [&] {
    std::lock_guard<std::mutex> lock(moves_mu);
    for (std::thread& t : moves) {
      if (t.joinable()) t.join();
    }
  };
  join_moves();
  serving.store(false);
  watcher.join();
  reader.join();
  if (restorer.joinable()) restorer.join();
  join_moves();
  g_host_server = nullptr;
  return 0;
}

}  // namespace rgpu::server
