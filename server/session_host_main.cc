#include <fcntl.h>
#include <poll.h>
#include <signal.h>

#include <chrono>
#include <mutex>
#include <thread>

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

// The host's quota, kept by the server over the control socket.
class ControlBroker : public QuotaBroker {
 public:
  explicit ControlBroker(int fd) : fd_(fd) {}
  bool Reserve(uint64_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    wire::HostControl ask;
    ask.set_reserve(bytes);
    if (!SendControl(fd_, ask)) return false;
    wire::HostControl answer;
    // The server answers at once; a server that does not is gone (its host ends with it).
    if (!ReceiveControl(fd_, 30000, &answer)) return false;
    return answer.body_case() == wire::HostControl::kReserved && answer.reserved();
  }
  void Release(uint64_t bytes) override {
    wire::HostControl message;
    message.set_release(bytes);
    SendControl(fd_, message);
  }

 private:
  const int fd_;
  std::mutex mu_;  // one reservation at a time: its answer is the next message
};

Server* g_host_server = nullptr;
void OnHostSignal(int) {
  if (g_host_server != nullptr) g_host_server->Stop();
}

}  // namespace

int RunSessionHost(ServerOptions options, int control_fd) {
  // The host ends with its server, whatever way the server ends: its end of the control socket
  // closes (not PR_SET_PDEATHSIG, which follows the thread that started the host).
  fcntl(control_fd, F_SETFD, FD_CLOEXEC);
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
  if (Status s = server.Start(options); !s.ok()) {
    RGPU_LOG_ERROR("session host: cannot start: %s", s.ToString().c_str());
    return 1;
  }
  TransportUrl bound;
  if (!TransportUrl::Parse(server.url(), &bound).ok()) return 1;
  wire::HostControl ready;
  ready.set_ready_port(bound.port);
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
  if (a.parent_session_id() > 0) server.SetFirstSessionId(a.parent_session_id());
  std::atomic<bool> admitted{false};
  server.HostOneSession(
      a.token(), tenant, a.all_gpus(), std::move(gpus),
      [&](const wire::SessionStats& stats, SessionEnd end) {
        wire::HostControl last;
        *last.mutable_stats() = stats;
        SendControl(control_fd, last);
        wire::HostControl ended;
        ended.set_ended(static_cast<uint32_t>(end));
        SendControl(control_fd, ended);
      },
      [&] { admitted.store(true); });
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
  // The session's figures every second; the end of the server (its end of the socket closed);
  // a client that never comes.
  std::thread watcher([&] {
    const auto start = std::chrono::steady_clock::now();
    while (serving.load()) {
      pollfd p = {control_fd, 0, 0};
      if (poll(&p, 1, 1000) > 0 && (p.revents & (POLLHUP | POLLERR)) != 0) {
        server.Stop();
        return;
      }
      if (!admitted.load()) {
        if (std::chrono::steady_clock::now() - start >
            std::chrono::milliseconds(kNoShowTimeoutMs)) {
          RGPU_LOG_WARN("session host: the client never came");
          server.Stop();
          return;
        }
        continue;
      }
      wire::HostControl message;
      if (server.HostedStats(message.mutable_stats())) SendControl(control_fd, message);
    }
  });
  server.Serve();
  serving.store(false);
  watcher.join();
  g_host_server = nullptr;
  return 0;
}

}  // namespace rgpu::server
