#include "client/liveness_monitor.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/log.h"
#include "proto/keepalive_proof.h"

namespace rgpu::client {

namespace {

// A connection to host:port; -1 when it cannot be made.
int Connect(const std::string& host, uint16_t port, std::string* error) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    *error = "liveness port: cannot resolve " + host + ": " + gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    *error = "liveness port " + host + ":" + service + " unreachable";
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// The announcement of session `key` on a connection whose nonce is `nonce`: the key, 8 bytes
// little-endian, and its proof.
std::string Announcement(uint64_t key, const std::string& secret, const std::string& nonce) {
  std::string a;
  for (int i = 0; i < 8; ++i) a.push_back(static_cast<char>(key >> (8 * i)));
  return a + KeepaliveProof(secret, nonce, key);
}

}  // namespace

Status LivenessMonitor::Start(const std::string& host, uint16_t port, uint64_t key,
                              const std::string& secret, int timeout_ms, SilentCallback on_silent,
                              std::unique_ptr<LivenessMonitor>* out) {
  if (secret.empty()) return InvalidArgument("liveness port: the Welcome gave no secret");
  std::string error;
  const int fd = Connect(host, port, &error);
  if (fd < 0) return Unavailable(error);
  std::unique_ptr<LivenessMonitor> m(new LivenessMonitor());
  m->fd_ = fd;
  m->host_ = host;
  m->port_ = port;
  m->key_ = key;
  m->secret_ = secret;
  m->wake_fd_ = eventfd(0, EFD_CLOEXEC);
  m->timeout_ms_ = timeout_ms;
  m->on_silent_ = std::move(on_silent);
  if (m->wake_fd_ < 0) return Internal(std::string("eventfd: ") + strerror(errno));
  m->thread_ = std::thread([self = m.get()] { self->Loop(); });
  *out = std::move(m);
  return Status::Ok();
}

LivenessMonitor::~LivenessMonitor() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  if (fd_ >= 0) close(fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

void LivenessMonitor::Loop() {
  using Clock = std::chrono::steady_clock;
  // Several keepalives per deadline, so one delayed echo is not fatal.
  const int interval_ms = std::max(10, timeout_ms_ / 5);
  auto last_echo = Clock::now();
  auto next_ping = Clock::now();
  bool confirmed = false;  // an echo came back: the server took this connection
  std::string nonce;       // the server's, for this connection
  bool announced = false;  // the announcement is sent
  int reconnects = 0;
  for (;;) {
    const auto now = Clock::now();
    if (announced && now >= next_ping) {
      const char ping = 'k';
      // A full buffer means no echoes either: the deadline decides. Never SIGPIPE: the
      // program is not ours to signal (the server may have closed the connection).
      (void)!send(fd_, &ping, 1, MSG_NOSIGNAL);
      next_ping = now + std::chrono::milliseconds(interval_ms);
    }
    const auto silent_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - last_echo).count();
    if (silent_ms >= timeout_ms_) {
      on_silent_("the server has not answered keepalives for " + std::to_string(silent_ms) +
                 " ms (RGPU_SERVER_TIMEOUT_MS=" + std::to_string(timeout_ms_) + ")");
      return;
    }
    const auto deadline = last_echo + std::chrono::milliseconds(timeout_ms_);
    const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             (announced ? std::min(next_ping, deadline) : deadline) - now)
                             .count();
    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {fd_, POLLIN, 0}};
    int n = poll(fds, 2, static_cast<int>(std::max<int64_t>(wait_ms, 1)));
    if (n < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;
    if (fds[1].revents != 0) {
      char buf[64];
      ssize_t got = read(fd_, buf, sizeof buf);
      if (got > 0 && !announced) {
        // The nonce, which the server sends first: the announcement answers it.
        last_echo = Clock::now();
        nonce.append(buf, std::min(static_cast<size_t>(got), kKeepaliveNonceBytes - nonce.size()));
        if (nonce.size() < kKeepaliveNonceBytes) continue;
        const std::string announcement = Announcement(key_, secret_, nonce);
        // As a ping: echoes decide.
        (void)!send(fd_, announcement.data(), announcement.size(), MSG_NOSIGNAL);
        announced = true;
        next_ping = last_echo;
      } else if (got > 0) {
        last_echo = Clock::now();
        confirmed = true;
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        if (confirmed) {
          on_silent_("the server closed its keepalive connection");
          return;
        }
        // Closed before the server took it (its table of connections not yet announced was
        // full, or this source had too many): that is no sign of the server's death. Try
        // again a few times, then go on without keepalives (calls still fail when the
        // session's own connection breaks).
        close(fd_);
        fd_ = -1;
        std::string error;
        while (fd_ < 0 && reconnects < kMaxReconnects) {
          ++reconnects;
          pollfd wake = {wake_fd_, POLLIN, 0};
          if (poll(&wake, 1, 50 * reconnects) > 0) return;
          fd_ = Connect(host_, port_, &error);
        }
        if (fd_ < 0) {
          RGPU_LOG_INFO(
              "the keepalive port %s:%u did not take this session's connection (%d tries);"
              " going on without keepalives",
              host_.c_str(), static_cast<unsigned>(port_), reconnects + 1);
          return;
        }
        nonce.clear();
        announced = false;
        last_echo = Clock::now();
        next_ping = last_echo;
      }
    }
  }
}

}  // namespace rgpu::client
