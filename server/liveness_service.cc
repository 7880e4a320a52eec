#include "server/liveness_service.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/log.h"
#include "proto/crypto.h"
#include "proto/keepalive_proof.h"

namespace rgpu::server {

namespace {
// Bytes of an announcement: the session's key, then its proof.
constexpr size_t kAnnouncementBytes = sizeof(uint64_t) + kKeepaliveProofBytes;

// One client connection: the announcement (the session's key and its proof of the nonce the
// service sent) arrives first, then keepalive bytes.
struct Peer {
  int fd = -1;
  std::string nonce;         // sent at accept
  std::string announcement;  // received so far, up to kAnnouncementBytes
  uint64_t key = 0;          // once announced
  bool announced = false;
  std::string source;  // SourceOf the peer's address
  std::chrono::steady_clock::time_point accepted;
};

}  // namespace

std::string SourceOf(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, text, sizeof text);
    return text;
  }
  if (a.ss_family != AF_INET6) return "";
  in6_addr address = reinterpret_cast<const sockaddr_in6&>(a).sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&address)) {
    inet_ntop(AF_INET, &address.s6_addr[12], text, sizeof text);
    return text;
  }
  memset(&address.s6_addr[8], 0, 8);  // the host's /64
  inet_ntop(AF_INET6, &address, text, sizeof text);
  return std::string(text) + "/64";
}

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
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
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

void LivenessService::Admit(uint64_t key, const std::string& secret) {
  if (secret.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  admitted_[key] = secret;
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
  admitted_.erase(key);
  last_seen_.erase(key);
  watches_.erase(key);
  lost_.erase(key);
  // Its connection, if any, is closed by the service thread when it next looks (not admitted).
}

size_t LivenessService::connected() {
  std::lock_guard<std::mutex> lock(mu_);
  return connected_keys_.size();
}

size_t LivenessService::pending() { return pending_.load(); }

void LivenessService::Watch(uint64_t key, int64_t silent_timeout_ms,
                            std::function<void(std::string)> on_lost) {
  std::lock_guard<std::mutex> lock(mu_);
  watches_[key] = WatchEntry{silent_timeout_ms, std::move(on_lost)};
}

void LivenessService::CheckWatches() {
  // Under mu_ throughout, so that Forget cannot return while a callback runs.
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  for (auto it = watches_.begin(); it != watches_.end();) {
    std::string reason;
    auto lost = lost_.find(it->first);
    if (lost != lost_.end()) {
      if (now - lost->second >= std::chrono::milliseconds(kGoneGraceMs)) {
        reason = "client closed its keepalive connection (the process is gone)";
      }
    } else if (it->second.silent_timeout_ms > 0) {
      auto seen = last_seen_.find(it->first);
      const int64_t silent =
          seen == last_seen_.end()
              ? -1
              : std::chrono::duration_cast<std::chrono::milliseconds>(now - seen->second).count();
      if (silent > it->second.silent_timeout_ms) {
        reason = "client sent no keepalive for " + std::to_string(silent) + " ms";
      }
    }
    if (!reason.empty()) {
      it->second.on_lost(reason);
      it = watches_.erase(it);
    } else {
      ++it;
    }
  }
}

void LivenessService::Loop() {
  using Clock = std::chrono::steady_clock;
  std::vector<Peer> peers;
  auto close_peer = [&](Peer& p, bool lost) {
    close(p.fd);
    p.fd = -1;
    if (!p.announced) return;
    std::lock_guard<std::mutex> lock(mu_);
    connected_keys_.erase(p.key);
    if (lost && admitted_.count(p.key) != 0) lost_.emplace(p.key, std::chrono::steady_clock::now());
  };
  for (;;) {
    std::vector<pollfd> fds = {{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const Peer& p : peers) fds.push_back({p.fd, POLLIN, 0});
    bool watching;
    {
      std::lock_guard<std::mutex> lock(mu_);
      watching = !watches_.empty();
    }
    const bool any_pending = pending_.load() > 0;
    const int ready = poll(fds.data(), fds.size(), watching || any_pending ? 100 : -1);
    if (watching) CheckWatches();
    if (ready < 0) {
      if (errno == EINTR) continue;
      RGPU_LOG_ERROR("liveness port: poll: %s", strerror(errno));
      break;
    }
    if (fds[0].revents != 0) break;
    const auto now = Clock::now();
    for (size_t i = 2; i < fds.size(); ++i) {
      Peer& p = peers[i - 2];
      if (fds[i].revents == 0 || p.fd < 0) continue;
      char buf[64];
      ssize_t n = read(p.fd, buf, sizeof buf);
      if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        close_peer(p, /*lost=*/true);
        continue;
      }
      size_t used = 0;
      if (!p.announced) {
        used = std::min(static_cast<size_t>(n), kAnnouncementBytes - p.announcement.size());
        p.announcement.append(buf, used);
        if (p.announcement.size() < kAnnouncementBytes) continue;
        uint64_t key = 0;
        for (size_t b = 0; b < sizeof key; ++b) {
          key |= uint64_t{static_cast<uint8_t>(p.announcement[b])} << (8 * b);
        }
        const std::string proof = p.announcement.substr(sizeof key);
        // Only a live session's key with the proof of this connection's nonce under its secret,
        // and only once at a time.
        std::lock_guard<std::mutex> lock(mu_);
        auto admitted = admitted_.find(key);
        if (admitted == admitted_.end() || connected_keys_.count(key) != 0 ||
            !VerifyKeepaliveProof(admitted->second, p.nonce, key, proof)) {
          close(p.fd);
          p.fd = -1;
          continue;
        }
        p.key = key;
        connected_keys_.insert(key);
        p.announced = true;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_seen_[p.key] = now;
      }
      // Echo the keepalive bytes; a client that does not read them only fills its own buffer.
      if (used < static_cast<size_t>(n)) (void)!write(p.fd, buf + used, n - used);
    }
    // Pending connections that took too long, and connections of sessions that ended.
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (Peer& p : peers) {
        if (p.fd < 0) continue;
        const bool late = !p.announced && now - p.accepted > std::chrono::milliseconds(kAnnounceMs);
        const bool ended = p.announced && admitted_.count(p.key) == 0;
        if (late || ended) {
          close(p.fd);
          p.fd = -1;
          if (p.announced) connected_keys_.erase(p.key);
        }
      }
    }
    std::erase_if(peers, [](const Peer& p) { return p.fd < 0; });
    if (fds[1].revents & POLLIN) {
      for (;;) {
        sockaddr_storage from = {};
        socklen_t from_len = sizeof from;
        int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &from_len,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) break;  // EAGAIN: none left
        Peer p;
        p.fd = fd;
        p.source = SourceOf(from);
        p.accepted = now;
        // When the source, or the table, has no room, the oldest pending connection (of the
        // source, or of all) makes room: a tenant's fresh connection announces itself at once,
        // so it is not the one to go, and one source cannot crowd out the others.
        size_t from_source = 0, waiting = 0;
        for (const Peer& q : peers) {
          if (q.announced) continue;
          ++waiting;
          if (q.source == p.source) ++from_source;
        }
        const bool source_full = from_source >= kMaxPendingPerSource;
        if (source_full || waiting >= kMaxPending) {
          for (Peer& q : peers) {
            if (!q.announced && (!source_full || q.source == p.source)) {
              close(q.fd);
              q.fd = -1;
              break;
            }
          }
          std::erase_if(peers, [](const Peer& q) { return q.fd < 0; });
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        // The nonce the announcement must prove; a fresh connection's buffer takes it whole.
        p.nonce = RandomBytes(kKeepaliveNonceBytes);
        if (p.nonce.size() != kKeepaliveNonceBytes ||
            write(fd, p.nonce.data(), p.nonce.size()) != static_cast<ssize_t>(p.nonce.size())) {
          close(fd);
          continue;
        }
        peers.push_back(std::move(p));
      }
    }
    size_t waiting = 0;
    for (const Peer& p : peers) waiting += p.announced ? 0 : 1;
    pending_.store(waiting);
  }
  for (const Peer& p : peers) close(p.fd);
}

}  // namespace rgpu::server
