// UcxListener and the transport's factory functions.
#include <arpa/inet.h>
#include <netdb.h>

#include <poll.h>

#include <chrono>
#include <cstring>
#include <deque>

#include "common/log.h"
#include "transport/socket/tcp_socket.h"
#include "transport/ucx/ucx_channel.h"
#include "transport/ucx/ucx_context.h"

namespace rgpu {
namespace ucx {
namespace {

Status Resolve(const TransportUrl& url, sockaddr_storage* addr, socklen_t* len) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(url.host.c_str(), std::to_string(url.port).c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Unavailable("cannot resolve '" + url.host + "': " + gai_strerror(rc));
  }
  memcpy(addr, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return Status::Ok();
}

std::string AddressToString(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

class UcxPendingConnection final : public PendingConnection {
 public:
  UcxPendingConnection(ucp_context_h context, ucp_conn_request_h request, std::string peer)
      : context_(context), request_(request), peer_(std::move(peer)) {}
  Status Accept(const ChannelOptions& options, std::unique_ptr<Channel>* out) override {
    return UcxChannel::Accept(context_, request_, peer_, options, out);
  }
  std::string peer() const override { return peer_; }

 private:
  ucp_context_h context_;
  ucp_conn_request_h request_;
  std::string peer_;
};

class UcxListener final : public Listener {
 public:
  ~UcxListener() override {
    if (listener_ != nullptr) ucp_listener_destroy(listener_);
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
  }

  Status Init(const TransportUrl& url) {
    sockaddr_storage addr = {};
    socklen_t len = 0;
    Status s = Resolve(url, &addr, &len);
    if (!s.ok()) return s;
    s = GetTcpContext(InterfaceFor(addr, len, true), &context_);
    if (!s.ok()) return s;
    s = CreateWorker(context_, &worker_);
    if (!s.ok()) return s;
    ucs_status_t st = ucp_worker_get_efd(worker_, &event_fd_);
    if (st != UCS_OK) return FromUcs(st, "ucp_worker_get_efd");
    ucp_listener_params_t p = {};
    p.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    p.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
    p.sockaddr.addrlen = len;
    p.conn_handler.cb = [](ucp_conn_request_h request, void* arg) {
      static_cast<UcxListener*>(arg)->requests_.push_back(request);
    };
    p.conn_handler.arg = this;
    st = ucp_listener_create(worker_, &p, &listener_);
    if (st != UCS_OK) return FromUcs(st, ("listen on " + url.ToString()).c_str());
    ucp_listener_attr_t attr = {};
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    st = ucp_listener_query(listener_, &attr);
    if (st != UCS_OK) return FromUcs(st, "ucp_listener_query");
    port_ = attr.sockaddr.ss_family == AF_INET6
                ? ntohs(reinterpret_cast<sockaddr_in6*>(&attr.sockaddr)->sin6_port)
                : ntohs(reinterpret_cast<sockaddr_in*>(&attr.sockaddr)->sin_port);
    return Status::Ok();
  }

  Status WaitConnection(int timeout_ms, std::unique_ptr<PendingConnection>* out) override {
    auto start = std::chrono::steady_clock::now();
    while (requests_.empty()) {
      if (ucp_worker_progress(worker_) != 0) continue;
      auto left = timeout_ms - std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now() - start)
                                   .count();
      if (timeout_ms >= 0 && left <= 0) return Timeout("no connection request");
      if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) continue;
      pollfd pfd = {event_fd_, POLLIN, 0};
      poll(&pfd, 1, timeout_ms < 0 ? 100 : static_cast<int>(std::min<long>(left, 100)));
    }
    ucp_conn_request_h request = requests_.front();
    requests_.pop_front();
    ucp_conn_request_attr_t attr = {};
    attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    std::string peer = "?";
    if (ucp_conn_request_query(request, &attr) == UCS_OK)
      peer = AddressToString(attr.client_address);
    *out = std::make_unique<UcxPendingConnection>(context_, request, peer);
    return Status::Ok();
  }

  uint16_t port() const override { return port_; }

 private:
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  int event_fd_ = -1;
  uint16_t port_ = 0;
  std::deque<ucp_conn_request_h> requests_;
};

}  // namespace

Status ConnectChannel(const TransportUrl& url, const ChannelOptions& options,
                      std::unique_ptr<Channel>* out) {
  if (url.scheme == TransportUrl::Scheme::kShm) {
    constexpr int kConnectTimeoutMs = 10000;
    int fd = -1;
    std::string peer;
    Status s = ConnectTcpSocket(url, kConnectTimeoutMs, &fd, &peer);
    if (!s.ok()) return s;
    return UcxChannel::OverSharedMemory(fd, url.ToString(), options, out);
  }
  sockaddr_storage addr = {};
  socklen_t len = 0;
  Status s = ucx::Resolve(url, &addr, &len);
  if (!s.ok()) return s;
  ucp_context_h context = nullptr;
  s = ucx::GetTcpContext(ucx::InterfaceFor(addr, len, false), &context);
  if (!s.ok()) return s;
  return UcxChannel::Connect(context, addr, len, url.ToString(), options, out);
}

Status CreateListener(const TransportUrl& url, std::unique_ptr<Listener>* out) {
  if (url.scheme == TransportUrl::Scheme::kShm) {
    // A kernel TCP socket: UCX's socket connection set-up would cost a TCP context and its
    // worker on both sides.
    return CreateTcpSocketListener(url, &UcxChannel::OverSharedMemory, out);
  }
  auto listener = std::make_unique<UcxListener>();
  Status s = listener->Init(url);
  if (!s.ok()) return s;
  *out = std::move(listener);
  return Status::Ok();
}

}  // namespace ucx
}  // namespace rgpu
