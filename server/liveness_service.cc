#include "server/liveness_service.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "common/log.h"

namespace rgpu::server {

namespace {
// One client connection: the announced session id arrives first, then keepalive bytes.
struct Peer {
  int fd = -1;
  uint64_t key = 0;
  size_t id_bytes = 0;  // bytes of the key received so far
};
}  // namespace

LivenessService::~LivenessService() { Stop(); }

Status LivenessService::Start(const std::string& host) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const bool any = host.empty() || host == "0.0.0.0" || host == "::";
  int rc = getaddrinfo(any ? nullptr : host.c_str(), "0", &hints, &found);
  if (rc != 0)
    return Unavailable("liveness port: cannot resolve " + host + ": " + gai_strerror(rc));
  Status result = Unavailable("liveness port: cannot listen on " + host);
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      close(fd);
      continue;
    }
    sockaddr_storage bound = {};
    socklen_t len = sizeof bound;
    getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
    port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    listen_fd_ = fd;
    result = Status::Ok();
    break;
  }
  freeaddrinfo(found);
  if (!result.ok()) return result;
  wake_fd_ = eventfd(0, EFD_CLOEXEC);
  if (wake_fd_ < 0) return Internal(std::string("eventfd: ") + strerror(errno));
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void LivenessService::Stop() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
}

int64_t LivenessService::SilentMs(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = last_seen_.find(key);
  if (it == last_seen_.end()) return -1;
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               it->second)
      .count();
}

void LivenessService::Forget(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  last_seen_.erase(key);
  watches_.erase(key);
}

void LivenessService::Watch(uint64_t key, int64_t timeout_ms,
                            std::function<void(int64_t)> on_silent) {
  std::lock_guard<std::mutex> lock(mu_);
  watches_[key] = WatchEntry{timeout_ms, std::move(on_silent)};
}

void LivenessService::CheckWatches() {
  // Under mu_ throughout, so that Forget cannot return while a callback runs.
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  for (auto it = watches_.begin(); it != watches_.end();) {
    auto seen = last_seen_.find(it->first);
    const int64_t silent =
        seen == last_seen_.end()
            ? -1
            : std::chrono::duration_cast<std::chrono::milliseconds>(now - seen->second).count();
    if (silent > it->second.timeout_ms) {
      it->second.on_silent(silent);
      it = watches_.erase(it);
    } else {
      ++it;
    }
  }
}

void LivenessService::Loop() {
  constexpr size_t kMaxPeers = 4096;
  std::vector<Peer> peers;
  for (;;) {
    std::vector<pollfd> fds = {{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const Peer& p : peers) fds.push_back({p.fd, POLLIN, 0});
    bool watching;
    {
      std::lock_guard<std::mutex> lock(mu_);
      watching = !watches_.empty();
    }
    const int ready = poll(fds.data(), fds.size(), watching ? 100 : -1);
    if (watching) CheckWatches();
    if (ready < 0) {
      if (errno == EINTR) continue;
      RGPU_LOG_ERROR("liveness port: poll: %s", strerror(errno));
      break;
    }
    if (fds[0].revents != 0) break;
    if (fds[1].revents & POLLIN) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0 && peers.size() >= kMaxPeers) {
        close(fd);
      } else if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        peers.push_back({fd, 0, 0});
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Peer& p = peers[i - 2];
      char buf[64];
      ssize_t n = read(p.fd, buf, sizeof buf);
      if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        close(p.fd);
        p.fd = -1;
        continue;
      }
      size_t used = 0;
      while (p.id_bytes < 8 && used < static_cast<size_t>(n)) {
        p.key |= uint64_t{static_cast<uint8_t>(buf[used++])} << (8 * p.id_bytes++);
      }
      if (p.id_bytes < 8) continue;
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_seen_[p.key] = std::chrono::steady_clock::now();
      }
      // Echo the keepalive bytes; a client that does not read them only fills its own buffer.
      if (used < static_cast<size_t>(n)) (void)!write(p.fd, buf + used, n - used);
    }
    std::erase_if(peers, [](const Peer& p) { return p.fd < 0; });
  }
  for (const Peer& p : peers) close(p.fd);
}

}  // namespace rgpu::server
