#include "transport/socket/tcp_socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace rgpu {
namespace {

// The addresses of url's host and port.
Status Resolve(const TransportUrl& url, bool passive, addrinfo** out) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string port = std::to_string(url.port);
  const int r = getaddrinfo(url.host.c_str(), port.c_str(), &hints, out);
  if (r != 0) return NotFound("cannot resolve " + url.host + ": " + gai_strerror(r));
  return Status::Ok();
}

}  // namespace

std::string DescribeSocketAddress(const sockaddr* a) {
  char host[NI_MAXHOST], port[NI_MAXSERV];
  const socklen_t len = a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (getnameinfo(a, len, host, sizeof host, port, sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) !=
      0) {
    return "?";
  }
  return a->sa_family == AF_INET6 ? "[" + std::string(host) + "]:" + port
                                  : std::string(host) + ":" + port;
}

void TuneTcpSocket(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
}

Status ConnectTcpSocket(const TransportUrl& url, int timeout_ms, int* fd_out, std::string* peer) {
  addrinfo* addresses = nullptr;
  if (Status s = Resolve(url, false, &addresses); !s.ok()) return s;
  std::string error = "no address";
  for (addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    const int fd =
        socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int r = connect(fd, a->ai_addr, a->ai_addrlen);
    if (r != 0 && errno == EINPROGRESS) {
      pollfd p = {fd, POLLOUT, 0};
      r = poll(&p, 1, timeout_ms) == 1 ? 0 : -1;
      int so_error = r == 0 ? 0 : ETIMEDOUT;
      socklen_t length = sizeof so_error;
      if (r == 0) getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &length);
      if (so_error != 0) {
        errno = so_error;
        r = -1;
      }
    }
    if (r != 0) {
      error = strerror(errno);
      close(fd);
      continue;
    }
    TuneTcpSocket(fd);
    *peer = DescribeSocketAddress(a->ai_addr);
    *fd_out = fd;
    freeaddrinfo(addresses);
    return Status::Ok();
  }
  freeaddrinfo(addresses);
  return Unavailable("cannot connect to " + url.ToString() + ": " + error);
}

Status ListenTcpSocket(const TransportUrl& url, int* fd_out, uint16_t* port_out) {
  addrinfo* addresses = nullptr;
  if (Status s = Resolve(url, true, &addresses); !s.ok()) return s;
  std::string error = "no address";
  for (addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0) {
      error = strerror(errno);
      close(fd);
      continue;
    }
    sockaddr_storage bound;
    socklen_t length = sizeof bound;
    getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
    *port_out =
        ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    *fd_out = fd;
    freeaddrinfo(addresses);
    return Status::Ok();
  }
  freeaddrinfo(addresses);
  return Unavailable("cannot listen on " + url.ToString() + ": " + error);
}

Status AcceptTcpSocket(int listen_fd, int timeout_ms, int* fd_out, std::string* peer) {
  pollfd p = {listen_fd, POLLIN, 0};
  const int r = poll(&p, 1, timeout_ms);
  if (r == 0) return Timeout("no connection");
  if (r < 0) return errno == EINTR ? Timeout("interrupted") : Internal(strerror(errno));
  sockaddr_storage address;
  socklen_t length = sizeof address;
  const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&address), &length,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return Timeout(std::string("accept: ") + strerror(errno));
  *peer = DescribeSocketAddress(reinterpret_cast<sockaddr*>(&address));
  *fd_out = fd;
  return Status::Ok();
}

namespace {

class PendingTcpSocket final : public PendingConnection {
 public:
  PendingTcpSocket(int fd, std::string peer, std::shared_ptr<const TcpSocketChannelMaker> make)
      : fd_(fd), peer_(std::move(peer)), make_(std::move(make)) {}
  ~PendingTcpSocket() override {
    if (fd_ >= 0) close(fd_);
  }
  Status Accept(const ChannelOptions& options, std::unique_ptr<Channel>* out) override {
    if (fd_ < 0) return Internal("already accepted");
    TuneTcpSocket(fd_);
    const int fd = fd_;
    fd_ = -1;
    return (*make_)(fd, peer_, options, out);
  }
  std::string peer() const override { return peer_; }

 private:
  int fd_;
  const std::string peer_;
  const std::shared_ptr<const TcpSocketChannelMaker> make_;
};

class TcpSocketListener final : public Listener {
 public:
  TcpSocketListener(int fd, uint16_t port, TcpSocketChannelMaker make)
      : fd_(fd),
        port_(port),
        make_(std::make_shared<const TcpSocketChannelMaker>(std::move(make))) {}
  ~TcpSocketListener() override { close(fd_); }
  Status WaitConnection(int timeout_ms, std::unique_ptr<PendingConnection>* out) override {
    int fd = -1;
    std::string peer;
    if (Status s = AcceptTcpSocket(fd_, timeout_ms, &fd, &peer); !s.ok()) return s;
    *out = std::make_unique<PendingTcpSocket>(fd, std::move(peer), make_);
    return Status::Ok();
  }
  uint16_t port() const override { return port_; }

 private:
  const int fd_;
  const uint16_t port_;
  const std::shared_ptr<const TcpSocketChannelMaker> make_;  // shared with pending connections
};

// An address and port in one form for both families (IPv4 as IPv4-mapped IPv6): a dual-stack
// socket's end shows in /proc/net/tcp6 with a mapped address, its IPv4 peer's in /proc/net/tcp.
struct TcpEnd {
  in6_addr address = {};
  uint16_t port = 0;
  bool operator==(const TcpEnd& o) const {
    return port == o.port && memcmp(&address, &o.address, sizeof address) == 0;
  }
};

void MapIpv4(uint32_t network_order, in6_addr* out) {
  *out = {};
  out->s6_addr[10] = 0xff;
  out->s6_addr[11] = 0xff;
  memcpy(out->s6_addr + 12, &network_order, 4);
}

bool EndOfAddress(const sockaddr_storage& a, TcpEnd* out) {
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    MapIpv4(v4->sin_addr.s_addr, &out->address);
    out->port = ntohs(v4->sin_port);
    return true;
  }
  if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    out->address = v6->sin6_addr;
    out->port = ntohs(v6->sin6_port);
    return true;
  }
  return false;
}

// The hexadecimal "ADDRESS:PORT" of /proc/net/tcp{,6}. The kernel prints an IPv4 address as one
// 32-bit word and an IPv6 address as four, each in the host's byte order, and the port as a
// number.
bool EndOfTableEntry(const std::string& text, TcpEnd* out) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos || (colon != 8 && colon != 32)) return false;
  auto word = [&](size_t i) {
    return static_cast<uint32_t>(strtoul(text.substr(i * 8, 8).c_str(), nullptr, 16));
  };
  if (colon == 8) {
    MapIpv4(word(0), &out->address);
  } else {
    for (size_t i = 0; i < 4; ++i) {
      const uint32_t w = word(i);
      memcpy(out->address.s6_addr + 4 * i, &w, 4);
    }
  }
  out->port = static_cast<uint16_t>(strtoul(text.c_str() + colon + 1, nullptr, 16));
  return true;
}

}  // namespace

Status CreateTcpSocketListener(const TransportUrl& url, TcpSocketChannelMaker make,
                               std::unique_ptr<Listener>* out) {
  int fd = -1;
  uint16_t port = 0;
  if (Status s = ListenTcpSocket(url, &fd, &port); !s.ok()) return s;
  *out = std::make_unique<TcpSocketListener>(fd, port, std::move(make));
  return Status::Ok();
}

Status LocalPeerUser(int fd, uid_t* user) {
  sockaddr_storage mine = {}, theirs = {};
  socklen_t mine_length = sizeof mine, theirs_length = sizeof theirs;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &mine_length) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&theirs), &theirs_length) != 0) {
    return NotFound(std::string("not a connected socket: ") + strerror(errno));
  }
  // The other end's entry: its local address is our peer's, its remote address ours (in either
  // table: a dual-stack socket and its IPv4 peer are listed in different ones).
  TcpEnd peer_end, own_end;
  if (!EndOfAddress(theirs, &peer_end) || !EndOfAddress(mine, &own_end)) {
    return NotFound("not a TCP socket");
  }
  bool closed = false;  // the other end was found, closed
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the column names
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits;
      uid_t uid = 0;
      if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid)) {
        continue;
      }
      TcpEnd entry_local, entry_remote;
      if (EndOfTableEntry(local, &entry_local) && EndOfTableEntry(remote, &entry_remote) &&
          entry_local == peer_end && entry_remote == own_end) {
        // Only a connected socket tells its owner: one its process closed (FIN_WAIT,
        // TIME_WAIT) is listed as root's, whatever user made it, so a peer that wrote and
        // closed at once would pass for root. (A connection not yet taken from its listener's
        // queue has no inode but its owner's user; an earlier connection's TIME_WAIT entry may
        // share the four addresses: look on.)
        if (state != "01") {
          closed = true;
          continue;
        }
        *user = uid;
        return Status::Ok();
      }
    }
  }
  const std::string peer = DescribeSocketAddress(reinterpret_cast<sockaddr*>(&theirs));
  if (closed) return NotFound("the peer " + peer + " has closed its socket");
  return NotFound("the peer " + peer + " is no socket of this host (/proc/net/tcp, tcp6)");
}

}  // namespace rgpu
