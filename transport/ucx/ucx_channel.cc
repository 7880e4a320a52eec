#include "transport/ucx/ucx_channel.h"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "common/log.h"
#include "transport/socket/tcp_socket.h"
#include "transport/ucx/ucx_context.h"

namespace rgpu::ucx {

using Clock = std::chrono::steady_clock;
constexpr auto kLandingSpin = std::chrono::milliseconds(2);  // WaitUntil's, with payloads landing
// How long a tcp:// channel waits for its endpoint's wire-up by sleeping between polls (see
// IdleWhileWiringUp); past it (a slow network, or a peer that says nothing), waits poll and sleep
// on the worker as usual.
constexpr auto kWireUpWindow = std::chrono::milliseconds(100);

struct UcxChannel::Slot {
  UcxChannel* channel = nullptr;
  ReceivedMessage message;
  bool complete = false;
  ucs_status_t status = UCS_OK;
  void* request = nullptr;  // the rendezvous fetch still in flight
};

struct UcxChannel::Outgoing {
  std::string header;  // UCX reads it until the send completes
  void* request = nullptr;
  bool done = false;
  ucs_status_t status = UCS_OK;
};

namespace {
// Shared by every channel of the process: up to 8 buffers, 512 MiB.
std::shared_ptr<BufferPool> ProcessPool() {
  static std::shared_ptr<BufferPool>* pool =
      new std::shared_ptr<BufferPool>(std::make_shared<BufferPool>(8, size_t{512} << 20));
  return *pool;
}
}  // namespace

UcxChannel::UcxChannel(const std::string& peer, const ChannelOptions& options)
    : peer_(peer), options_(options), pool_(ProcessPool()) {}

Status UcxChannel::Init(ucp_context_h context, const ucp_ep_params_t* ep_params) {
  context_ = context;
  Status s = CreateWorker(context, &worker_);
  if (!s.ok()) return s;
  ucs_status_t st = ucp_worker_get_efd(worker_, &event_fd_);
  if (st != UCS_OK) return FromUcs(st, "ucp_worker_get_efd");
  s = SetHandler(worker_);
  if (!s.ok() || ep_params == nullptr) return s;
  // An endpoint of UCX's socket connection set-up (tcp://) is wired up on UCX's asynchronous
  // thread behind the first send.
  wiring_up_ = true;
  wire_up_until_ = Clock::now() + kWireUpWindow;
  return CreateEndpoint(worker_, *ep_params, true, &ep_);
}

void UcxChannel::IdleWhileWiringUp() {
  if (Clock::now() >= wire_up_until_) {
    wiring_up_ = false;
    return;
  }
  const timespec pause = {0, 10 * 1000};
  nanosleep(&pause, nullptr);
}

Status UcxChannel::SetHandler(ucp_worker_h worker) {
  ucp_am_handler_param_t handler = {};
  handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                       UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  handler.id = kAmId;
  handler.cb = &UcxChannel::OnActiveMessage;
  handler.arg = this;
  handler.flags = UCP_AM_FLAG_WHOLE_MSG;
  ucs_status_t st = ucp_worker_set_am_recv_handler(worker, &handler);
  if (st != UCS_OK) return FromUcs(st, "ucp_worker_set_am_recv_handler");
  return Status::Ok();
}

void UcxChannel::WatchPeer(Clock::time_point now) {
  // Looking at the socket costs a system call, so it is done once a millisecond.
  if (peer_socket_ < 0 || now < next_peer_check_) return;
  CheckPeerSocket();
  next_peer_check_ = now + std::chrono::milliseconds(1);
}

void UcxChannel::CheckPeerSocket() {
  if (peer_socket_ < 0 || !error_.ok()) return;
  char byte;
  const ssize_t r = recv(peer_socket_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  const std::string why = r > 0    ? "wrote on the set-up socket after the set-up"
                          : r == 0 ? "is gone (its socket closed)"
                                   : std::string("is gone (") + strerror(errno) + ")";
  // The peer wrote its last messages into shared memory before its socket ended: they are
  // received first.
  while (ucp_worker_progress(worker_) != 0) {
  }
  if (error_.ok()) error_ = Unavailable("peer " + peer_ + " " + why);
}

bool UcxChannel::ProgressOnce() {
  const bool progressed = ucp_worker_progress(worker_) != 0;
  if (!progressed && WiringUp()) {
    IdleWhileWiringUp();
    return false;
  }
  // Reading the clock costs more than a poll of shared memory (tens of nanoseconds in a VM), so
  // only every 64th turn looks at it.
  if (peer_socket_ >= 0 && (++turns_ & 63) == 0) WatchPeer(Clock::now());
  // A send that waits on UCX's own threads (a TCP connection's set-up runs on its async thread)
  // lets them have the processor now and then: on a busy host they otherwise wait for this
  // thread's time slice to end (measured: the first round trip over tcp:// took 6-21 ms, 4-7 ms
  // yielding every 256 idle turns, on two cores).
  if (progressed) {
    idle_turns_ = 0;
  } else if ((++idle_turns_ & 255) == 0) {
    sched_yield();
  }
  return progressed;
}

Status UcxChannel::CreateEndpoint(ucp_worker_h worker, const ucp_ep_params_t& params_in,
                                  bool peer_failure, ucp_ep_h* ep) {
  ucp_ep_params_t params = params_in;
  params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.err_mode = peer_failure ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  params.err_handler.cb = &UcxChannel::OnPeerError;
  params.err_handler.arg = this;
  ucs_status_t st = ucp_ep_create(worker, &params, ep);
  if (st != UCS_OK) return FromUcs(st, "ucp_ep_create");
  return Status::Ok();
}

namespace {

constexpr int kSetupTimeoutMs = 10000;
// A worker address of the shared-memory context is a few hundred bytes.
constexpr uint32_t kMaxWorkerAddressBytes = 64 << 10;

// Writes all of [data, data + size) on the non-blocking socket `fd` before `deadline`.
Status WriteAll(int fd, const char* data, size_t size, Clock::time_point deadline) {
  while (size > 0) {
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      return Unavailable(std::string("set-up socket: ") + strerror(errno));
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p = {fd, POLLOUT, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) == 0) {
      return Timeout("set-up socket: the peer takes nothing");
    }
  }
  return Status::Ok();
}

// Reads exactly `size` bytes from the non-blocking socket `fd` before `deadline`.
Status ReadAll(int fd, char* data, size_t size, Clock::time_point deadline) {
  while (size > 0) {
    const ssize_t n = recv(fd, data, size, 0);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Unavailable("set-up socket: the peer closed it");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return Unavailable(std::string("set-up socket: ") + strerror(errno));
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p = {fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) == 0) {
      return Timeout("set-up socket: no worker address from the peer within " +
                     std::to_string(kSetupTimeoutMs) + " ms");
    }
  }
  return Status::Ok();
}

}  // namespace

Status UcxChannel::ConnectOverSocket() {
  // UCX unpacks a worker address without checking it (a malformed one aborts the process), so
  // only a peer that could end this process anyway may send one: the same user. (Shared memory
  // needs that too: each side maps the other's segments through /proc/PID/fd.)
  uid_t user = 0;
  Status s = LocalPeerUser(peer_socket_, &user);
  if (!s.ok()) return Unavailable("shm://: " + s.message());
  if (user != geteuid()) {
    return PermissionDenied("shm://: the peer " + peer_ + " runs as user " + std::to_string(user) +
                            ", this process as " + std::to_string(geteuid()) +
                            " (shared memory needs one user)");
  }
  ucp_context_h context = nullptr;
  s = GetSharedMemoryDataContext(&context);
  if (s.ok()) s = Init(context, nullptr);
  if (!s.ok()) return s;
  ucp_address_t* address = nullptr;
  size_t length = 0;
  ucs_status_t st = ucp_worker_get_address(worker_, &address, &length);
  if (st != UCS_OK) return FromUcs(st, "ucp_worker_get_address");
  // Both sides write first (a few hundred bytes: the socket takes them), then read.
  std::string mine(4 + length, '\0');
  const uint32_t size = static_cast<uint32_t>(length);
  memcpy(mine.data(), &size, 4);
  memcpy(mine.data() + 4, address, length);
  ucp_worker_release_address(worker_, address);
  const auto deadline = Clock::now() + std::chrono::milliseconds(kSetupTimeoutMs);
  s = WriteAll(peer_socket_, mine.data(), mine.size(), deadline);
  uint32_t theirs_size = 0;
  if (s.ok()) s = ReadAll(peer_socket_, reinterpret_cast<char*>(&theirs_size), 4, deadline);
  if (s.ok() && (theirs_size == 0 || theirs_size > kMaxWorkerAddressBytes)) {
    s = InvalidArgument("set-up socket: a worker address of " + std::to_string(theirs_size) +
                        " bytes");
  }
  if (!s.ok()) return s;
  std::string theirs(theirs_size, '\0');
  s = ReadAll(peer_socket_, theirs.data(), theirs.size(), deadline);
  if (!s.ok()) return s;
  ucp_ep_params_t params = {};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  params.address = reinterpret_cast<const ucp_address_t*>(theirs.data());
  // UCX 1.13's shared-memory transports cannot report peer failure, so the endpoint does not ask
  // for it: the socket, kept open, tells.
  return CreateEndpoint(worker_, params, false, &ep_);
}

Status UcxChannel::Connect(ucp_context_h context, const sockaddr_storage& addr, socklen_t len,
                           const std::string& peer, const ChannelOptions& options,
                           std::unique_ptr<Channel>* out) {
  std::unique_ptr<UcxChannel> ch(new UcxChannel(peer, options));
  ucp_ep_params_t p = {};
  p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
  p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  p.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  p.sockaddr.addrlen = len;
  Status s = ch->Init(context, &p);
  if (!s.ok()) return s;
  *out = std::move(ch);
  return Status::Ok();
}

Status UcxChannel::Accept(ucp_context_h context, ucp_conn_request_h request,
                          const std::string& peer, const ChannelOptions& options,
                          std::unique_ptr<Channel>* out) {
  std::unique_ptr<UcxChannel> ch(new UcxChannel(peer, options));
  ucp_ep_params_t p = {};
  p.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
  p.conn_request = request;
  Status s = ch->Init(context, &p);
  if (!s.ok()) return s;
  *out = std::move(ch);
  return Status::Ok();
}

Status UcxChannel::OverSharedMemory(int socket, const std::string& peer,
                                    const ChannelOptions& options, std::unique_ptr<Channel>* out) {
  std::unique_ptr<UcxChannel> ch(new UcxChannel(peer, options));
  ch->peer_socket_ = socket;  // closed by the destructor from here on
  Status s = ch->ConnectOverSocket();
  if (!s.ok()) return s;
  *out = std::move(ch);
  return Status::Ok();
}

void UcxChannel::CloseEndpoint(ucp_worker_h worker, ucp_ep_h ep) {
  if (ep == nullptr) return;
  ucp_request_param_t p = {};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = broken() ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &p);
  if (UCS_PTR_IS_PTR(req)) {
    auto deadline = Clock::now() + std::chrono::seconds(1);
    while (ucp_request_check_status(req) == UCS_INPROGRESS && Clock::now() < deadline) {
      ucp_worker_progress(worker);
    }
    if (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_request_cancel(worker, req);
    ucp_request_free(req);
  }
}

UcxChannel::~UcxChannel() {
  // From here on arriving messages are dropped, so no new rendezvous fetch starts while the
  // endpoint is being closed (an endpoint must have no requests left when it is destroyed).
  closing_ = true;
  if (unfetched_ != nullptr) ucp_am_data_release(worker_, unfetched_);
  for (auto& slot : arrived_) {
    if (slot->message.payload_pending) ucp_am_data_release(worker_, slot->message.pending);
  }
  if (!outgoing_.empty()) {
    if (!broken()) (void)Flush();
    for (auto& o : outgoing_) {
      if (!o->done) ucp_request_cancel(worker_, o->request);
    }
    for (int i = 0; i < 100 && std::any_of(outgoing_.begin(), outgoing_.end(),
                                           [](const auto& o) { return !o->done; });
         ++i) {
      ucp_worker_progress(worker_);
    }
    for (auto& o : outgoing_) {
      if (o->done) ucp_request_free(o->request);
    }
  }
  // Cancel rendezvous fetches still in flight first: an endpoint must have no requests left when
  // it is closed. Their slots (and buffers) stay alive until the worker is gone, so UCX never
  // writes into freed memory; arrived_ is destroyed after this body.
  for (auto& slot : arrived_) {
    if (!slot->complete && slot->request != nullptr) ucp_request_cancel(worker_, slot->request);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  while (Clock::now() < deadline && std::any_of(arrived_.begin(), arrived_.end(),
                                                [](const auto& s) { return !s->complete; })) {
    ucp_worker_progress(worker_);
  }
  CloseEndpoint(worker_, ep_);
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  for (auto& [base, r] : registered_) ucp_mem_unmap(context_, r.memh);
  // The peer learns of the end from the socket once everything above has gone out.
  if (peer_socket_ >= 0) close(peer_socket_);
}

template <typename Done>
Status UcxChannel::WaitUntil(Done done, int timeout_ms) {
  // The clock is read only every 64th idle turn (see ProgressOnce), the first time included:
  // most waits end before that, and the timeout and the spin are counted from then.
  Clock::time_point start, spin_until;
  bool started = false;
  bool progressed = false;          // since the clock was last read
  Clock::time_point last_progress;  // when the clock was read after progress
  unsigned idle_turns = 0;
  for (;;) {
    if (done()) return Status::Ok();
    if (broken()) return Failure();
    if (ucp_worker_progress(worker_) != 0) {
      progressed = true;
      continue;
    }
    if (WiringUp()) {
      IdleWhileWiringUp();  // then reads the clock at every turn: the sleep costs far more
    } else if ((++idle_turns & 63) != 0) {
      continue;
    }
    auto now = Clock::now();
    if (!started) {
      started = true;
      start = now;
      spin_until = now + std::chrono::microseconds(options_.poll_us);
    }
    WatchPeer(now);
    if (progressed) {
      last_progress = now;
      progressed = false;
    }
    if (now < spin_until) continue;
    int wait_ms = 100;
    if (timeout_ms >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      start + std::chrono::milliseconds(timeout_ms) - now)
                      .count();
      if (left <= 0) return Timeout("no message within " + std::to_string(timeout_ms) + " ms");
      wait_ms = static_cast<int>(std::min<long>(left, wait_ms));
    }
    if (WiringUp()) continue;  // it sleeps between polls instead
    // A payload that is landing keeps the wait polling while it moves: its data comes faster
    // than a sleeping thread wakes. One that stalls (a peer that stopped sending) lets it sleep
    // again after kLandingSpin, so a stalled sender cannot keep a core busy.
    if (payloads_in_flight_ > 0 && now - last_progress < kLandingSpin) continue;
    // Sleep until the worker has something or (shm://) the peer's socket ends.
    ucs_status_t st = ucp_worker_arm(worker_);
    if (st == UCS_ERR_BUSY) continue;
    if (st != UCS_OK) return FromUcs(st, "ucp_worker_arm");
    pollfd fds[2] = {{event_fd_, POLLIN, 0}, {peer_socket_, POLLIN, 0}};
    poll(fds, peer_socket_ >= 0 ? 2 : 1, wait_ms);
    if (peer_socket_ >= 0 && fds[1].revents != 0) CheckPeerSocket();
    spin_until = Clock::now() + std::chrono::microseconds(options_.poll_us);
  }
}

Status UcxChannel::RegisterMemory(void* address, size_t size) {
  if (address == nullptr || size == 0) return InvalidArgument("nothing to register");
  UnregisterMemory(address);
  ucp_mem_map_params_t params = {};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = address;
  params.length = size;
  ucp_mem_h memh = nullptr;
  ucs_status_t st = ucp_mem_map(context_, &params, &memh);
  if (st != UCS_OK) return FromUcs(st, "ucp_mem_map");
  registered_[reinterpret_cast<uintptr_t>(address)] = {size, memh};
  return Status::Ok();
}

void UcxChannel::UnregisterMemory(void* address) {
  auto it = registered_.find(reinterpret_cast<uintptr_t>(address));
  if (it == registered_.end()) return;
  (void)Flush();  // no send in flight may still use the handle
  ucp_mem_unmap(context_, it->second.memh);
  registered_.erase(it);
}

ucp_mem_h UcxChannel::FindRegistration(const void* address, size_t size) const {
  if (registered_.empty() || size == 0) return nullptr;
  const auto a = reinterpret_cast<uintptr_t>(address);
  auto it = registered_.upper_bound(a);
  if (it == registered_.begin()) return nullptr;
  --it;
  const uintptr_t end = it->first + it->second.size;
  return a >= it->first && a < end && size <= end - a ? it->second.memh : nullptr;
}

void UcxChannel::Abandon(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(abandon_mu_);
    if (abandoned_.load()) return;
    abandon_reason_ = why;
  }
  abandoned_.store(true);
}

const Status& UcxChannel::Failure() {
  if (error_.ok() && abandoned_.load()) {
    std::lock_guard<std::mutex> lock(abandon_mu_);
    error_ = Unavailable("peer " + peer_ + " abandoned: " + abandon_reason_);
  }
  return error_;
}

Status UcxChannel::Send(const std::string& header, const void* payload, size_t size) {
  return SendOn(ep_, header, payload, size);
}

Status UcxChannel::Post(std::string header, const void* payload, size_t size) {
  if (broken()) return Failure();
  auto out = std::make_unique<Outgoing>();
  out->header = std::move(header);
  ucp_request_param_t p = {};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.flags = size >= options_.rendezvous_threshold ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER;
  p.cb.send = [](void*, ucs_status_t status, void* user_data) {
    auto* o = static_cast<Outgoing*>(user_data);
    o->status = status;
    o->done = true;
  };
  p.user_data = out.get();
  if (ucp_mem_h memh = FindRegistration(payload, size)) {
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    p.memh = memh;
  }
  ucs_status_ptr_t req =
      ucp_am_send_nbx(ep_, kAmId, out->header.data(), out->header.size(), payload, size, &p);
  if (req == nullptr) return Status::Ok();  // done already
  if (UCS_PTR_IS_ERR(req)) return FromUcs(UCS_PTR_STATUS(req), "ucp_am_send_nbx");
  out->request = req;
  outgoing_.push_back(std::move(out));
  // Retire what has completed, so the list stays short between flushes.
  while (!outgoing_.empty() && outgoing_.front()->done) {
    ucp_request_free(outgoing_.front()->request);
    if (outgoing_.front()->status != UCS_OK && error_.ok()) {
      error_ = FromUcs(outgoing_.front()->status, "send");
    }
    outgoing_.pop_front();
  }
  return Status::Ok();
}

bool UcxChannel::GiveUpOnBrokenChannel(bool progressed) const {
  // A shared-memory endpoint keeps "progressing" sends to a peer that is gone.
  return broken() && (!progressed || peer_socket_ >= 0);
}

bool UcxChannel::CancelSend(void* request) {
  if (peer_socket_ >= 0) {
    // Shared-memory endpoints cannot tell that the peer is gone (the socket did), and UCX
    // cannot cancel their sends: the endpoint is closed by force and its sends are given up.
    if (ep_ != nullptr) {
      ucp_ep_h ep = ep_;
      ep_ = nullptr;
      CloseEndpoint(worker_, ep);
    }
    return false;
  }
  ucp_request_cancel(worker_, request);
  return true;
}

Status UcxChannel::Flush(size_t keep) {
  while (outgoing_.size() > keep) {
    Outgoing* o = outgoing_.front().get();
    while (!o->done) {
      if (GiveUpOnBrokenChannel(ProgressOnce()) && !o->done) {
        // Left to UCX, as in SendOn; the Outgoing stays owned until the worker is gone.
        if (abandoned_.load() || !CancelSend(o->request)) return Failure();
      }
    }
    ucp_request_free(o->request);
    if (o->status != UCS_OK && Failure().ok()) error_ = FromUcs(o->status, "send");
    outgoing_.pop_front();
  }
  return Failure();
}

Status UcxChannel::Drain(int timeout_ms) {
  Status s = Flush();
  if (!s.ok() || ep_ == nullptr) return s.ok() ? Failure() : s;
  // A send completes once its data is in the transport's buffers; an endpoint flush completes
  // once the data has left them.
  drain_state_ = SendState();
  ucp_request_param_t p = {};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = [](void*, ucs_status_t status, void* user_data) {
    auto* state = static_cast<SendState*>(user_data);
    state->status = status;
    state->done = true;
  };
  p.user_data = &drain_state_;
  ucs_status_ptr_t req = ucp_ep_flush_nbx(ep_, &p);
  if (req == nullptr) return Status::Ok();
  if (UCS_PTR_IS_ERR(req)) return FromUcs(UCS_PTR_STATUS(req), "ucp_ep_flush_nbx");
  s = WaitUntil([this] { return drain_state_.done; }, timeout_ms);
  if (!s.ok()) {
    orphaned_.push_back(req);  // completes (writing drain_state_) or dies with the worker
    return s;
  }
  ucp_request_free(req);
  return drain_state_.status == UCS_OK ? Status::Ok() : FromUcs(drain_state_.status, "flush");
}

Status UcxChannel::SendOn(ucp_ep_h ep, const std::string& header, const void* payload,
                          size_t size) {
  if (broken()) return Failure();
  // A member, not a local: a send given up on may still complete (when the worker is destroyed)
  // and write here.
  SendState& state = send_state_;
  state = SendState();
  ucp_request_param_t p = {};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.flags = size >= options_.rendezvous_threshold ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER;
  p.cb.send = [](void*, ucs_status_t status, void* user_data) {
    auto* s = static_cast<SendState*>(user_data);
    s->status = status;
    s->done = true;
  };
  p.user_data = &state;
  if (ucp_mem_h memh = FindRegistration(payload, size)) {
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    p.memh = memh;
  }
  ucs_status_ptr_t req =
      ucp_am_send_nbx(ep, kAmId, header.data(), header.size(), payload, size, &p);
  if (req == nullptr) return Status::Ok();
  if (UCS_PTR_IS_ERR(req)) return FromUcs(UCS_PTR_STATUS(req), "ucp_am_send_nbx");
  // Requests on a failed endpoint complete with an error. An abandoned channel (a peer that is
  // stopped, not gone) may never complete them: the request is then left to UCX, which is not
  // progressed again for this channel, so `payload` is not read after this returns.
  while (!state.done) {
    if (GiveUpOnBrokenChannel(ProgressOnce()) && !state.done) {
      if (abandoned_.load() || !CancelSend(req)) {
        orphaned_.push_back(req);
        return Failure();
      }
    }
  }
  ucp_request_free(req);
  if (state.status != UCS_OK) {
    if (Failure().ok()) error_ = FromUcs(state.status, "send");
    return error_;
  }
  return Status::Ok();
}

Status UcxChannel::Receive(int timeout_ms, ReceivedMessage* out) {
  out->owned.reset();  // a reused message's previous payload goes back before the wait
  if (unfetched_ != nullptr) {
    ucp_am_data_release(worker_, unfetched_);  // the sender's send completes
    unfetched_ = nullptr;
  }
  if (!overflow_.ok()) return overflow_;
  Status s = WaitUntil(
      [this] { return !overflow_.ok() || (!arrived_.empty() && arrived_.front()->complete); },
      timeout_ms);
  if (!s.ok()) return s;
  if (!overflow_.ok()) return overflow_;
  std::unique_ptr<Slot> slot = std::move(arrived_.front());
  arrived_.pop_front();
  queued_.store(arrived_.size(), std::memory_order_release);
  queued_bytes_ -= slot->message.header.size() + slot->message.payload_size;
  if (slot->status != UCS_OK) return FromUcs(slot->status, "receive");
  ReceivedMessage& in = slot->message;
  // The header's buffer is swapped, not moved: the slot keeps the caller's old one, so a caller
  // that reuses its ReceivedMessage makes small messages cost no allocation.
  out->header.swap(in.header);
  out->owned = std::move(in.owned);
  out->payload = in.payload;
  out->payload_size = in.payload_size;
  out->payload_pending = in.payload_pending;
  out->pending = in.pending;
  unfetched_ = out->pending;
  RecycleSlot(std::move(slot));
  return Status::Ok();
}

std::unique_ptr<UcxChannel::Slot> UcxChannel::NewSlot() {
  if (spare_slots_.empty()) {
    auto slot = std::make_unique<Slot>();
    slot->channel = this;
    return slot;
  }
  std::unique_ptr<Slot> slot = std::move(spare_slots_.back());
  spare_slots_.pop_back();
  return slot;
}

void UcxChannel::RecycleSlot(std::unique_ptr<Slot> slot) {
  constexpr size_t kSpareSlots = 16;
  if (spare_slots_.size() >= kSpareSlots) return;
  slot->message.header.clear();
  slot->message.owned.reset();
  slot->message.payload = nullptr;
  slot->message.payload_size = 0;
  slot->message.payload_pending = false;
  slot->message.pending = nullptr;
  slot->complete = false;
  slot->status = UCS_OK;
  slot->request = nullptr;
  spare_slots_.push_back(std::move(slot));
}

Status UcxChannel::FetchPayload(ReceivedMessage* m, void* destination) {
  if (!m->payload_pending) return Status::Ok();
  if (m->pending == nullptr || m->pending != unfetched_) {
    return InvalidArgument("FetchPayload: not the pending payload of the last message received");
  }
  if (broken()) return Failure();
  if (destination == nullptr) {
    m->owned = pool_->Acquire(m->payload_size);
    destination = m->owned.get();
    if (destination == nullptr) {
      return ResourceExhausted("no memory for a payload of " + std::to_string(m->payload_size) +
                               " bytes from " + peer_);
    }
  }
  // From here UCX owns the descriptor, whatever happens to the fetch.
  void* descriptor = m->pending;
  unfetched_ = nullptr;
  m->pending = nullptr;
  m->payload_pending = false;
  fetch_state_ = FetchState();
  ucp_request_param_t p = {};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.recv_am = [](void*, ucs_status_t status, size_t, void* user_data) {
    auto* state = static_cast<FetchState*>(user_data);
    state->status = status;
    state->done = true;
  };
  p.user_data = &fetch_state_;
  if (ucp_mem_h memh = FindRegistration(destination, m->payload_size)) {
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    p.memh = memh;
  }
  ucs_status_ptr_t req =
      ucp_am_recv_data_nbx(worker_, descriptor, destination, m->payload_size, &p);
  if (UCS_PTR_IS_ERR(req)) return FromUcs(UCS_PTR_STATUS(req), "ucp_am_recv_data_nbx");
  if (req != nullptr) {
    payloads_in_flight_++;
    Status s = WaitUntil([this] { return fetch_state_.done; }, -1);
    payloads_in_flight_--;
    if (!s.ok()) {
      // The destination must not be written after this returns: cancel and wait it out.
      ucp_request_cancel(worker_, req);
      for (int i = 0; i < 1000000 && !fetch_state_.done; ++i) ucp_worker_progress(worker_);
      if (!fetch_state_.done) {
        orphaned_.push_back(req);
        return s;
      }
    }
    ucp_request_free(req);
    if (!s.ok()) return s;
  }
  if (fetch_state_.status != UCS_OK) return FromUcs(fetch_state_.status, "fetch");
  m->payload = static_cast<char*>(destination);
  return Status::Ok();
}

ucs_status_t UcxChannel::OnActiveMessage(void* arg, const void* header, size_t header_length,
                                         void* data, size_t length,
                                         const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxChannel*>(arg);
  self->wiring_up_ = false;  // the peer reached this worker: the endpoint is wired up
  const ChannelOptions& o = self->options_;
  const size_t bytes = header_length + length;
  if (!self->overflow_.ok() || self->closing_) return UCS_OK;  // cut off or closing: drop
  if (o.max_message_bytes > 0 && bytes > o.max_message_bytes) {
    self->overflow_ =
        ResourceExhausted("peer " + self->peer_ + " sent a message of " + std::to_string(bytes) +
                          " bytes (limit " + std::to_string(o.max_message_bytes) + ")");
    return UCS_OK;
  }
  if ((o.max_queued_messages > 0 && self->arrived_.size() + 1 > o.max_queued_messages) ||
      (o.max_queued_bytes > 0 && self->queued_bytes_ > 0 &&
       self->queued_bytes_ + bytes > o.max_queued_bytes)) {
    self->overflow_ =
        ResourceExhausted("peer " + self->peer_ + " sent past the receive-queue bound (" +
                          std::to_string(self->arrived_.size()) + " messages, " +
                          std::to_string(self->queued_bytes_ + bytes) + " bytes queued; limits " +
                          std::to_string(o.max_queued_messages) + " messages, " +
                          std::to_string(o.max_queued_bytes) + " bytes)");
    return UCS_OK;
  }
  if (o.defer_payload_bytes > 0 && length >= o.defer_payload_bytes &&
      !(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
    // Such a payload must wait for FetchPayload; sent eagerly (the sender's choice), UCX has
    // already gathered it, and it goes no further.
    self->overflow_ = ResourceExhausted("peer " + self->peer_ + " sent " + std::to_string(length) +
                                        " payload bytes eagerly (at most " +
                                        std::to_string(o.defer_payload_bytes) + " that way)");
    return UCS_OK;
  }
  self->queued_bytes_ += bytes;
  std::unique_ptr<Slot> slot = self->NewSlot();
  ReceivedMessage& m = slot->message;
  m.header.assign(static_cast<const char*>(header), header_length);
  m.payload_size = length;
  if (length > 0 && (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) && o.defer_payload_bytes > 0 &&
      length >= o.defer_payload_bytes) {
    // Kept for FetchPayload: UCX holds the descriptor until it is fetched or released.
    m.payload_pending = true;
    m.pending = data;
    slot->complete = true;
    self->arrived_.push_back(std::move(slot));
    self->queued_.store(self->arrived_.size(), std::memory_order_release);
    return UCS_INPROGRESS;
  }
  if (length > 0) {
    void* dest = self->placer_ ? self->placer_(m.header, length) : nullptr;
    if (dest == nullptr) {
      m.owned = self->pool_->Acquire(length);
      dest = m.owned.get();
      if (dest == nullptr) {
        self->queued_bytes_ -= bytes;
        self->overflow_ = ResourceExhausted("no memory for a message of " + std::to_string(length) +
                                            " bytes from " + self->peer_);
        return UCS_OK;
      }
    }
    m.payload = static_cast<char*>(dest);
  }
  if (length > 0 && (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
    ucp_request_param_t p = {};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = &UcxChannel::OnDataFetched;
    p.user_data = slot.get();
    if (ucp_mem_h memh = self->FindRegistration(m.payload, length)) {
      p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
      p.memh = memh;
    }
    ucs_status_ptr_t req = ucp_am_recv_data_nbx(self->worker_, data, m.payload, length, &p);
    if (req == nullptr) {
      slot->complete = true;
    } else if (UCS_PTR_IS_ERR(req)) {
      slot->complete = true;
      slot->status = UCS_PTR_STATUS(req);
    } else {
      slot->request = req;
      self->payloads_in_flight_++;
    }
    // Otherwise OnDataFetched completes the slot.
  } else {
    if (length > 0) memcpy(m.payload, data, length);
    slot->complete = true;
  }
  self->arrived_.push_back(std::move(slot));
  self->queued_.store(self->arrived_.size(), std::memory_order_release);
  return UCS_OK;
}

void UcxChannel::OnDataFetched(void* request, ucs_status_t status, size_t, void* user_data) {
  auto* slot = static_cast<Slot*>(user_data);
  slot->channel->payloads_in_flight_--;
  slot->status = status;
  slot->complete = true;
  slot->request = nullptr;
  ucp_request_free(request);
}

std::string UcxChannel::Describe() {
  if (ep_ == nullptr) return "";
  char* text = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&text, &size);
  if (f == nullptr) return "";
  ucp_ep_print_info(ep_, f);
  fclose(f);
  std::string out(text, size);
  free(text);
  return out;
}

void UcxChannel::OnPeerError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* self = static_cast<UcxChannel*>(arg);
  if (self->error_.ok()) {
    self->error_ = Unavailable("peer " + self->peer_ + " is gone (" +
                               std::string(ucs_status_string(status)) + ")");
  }
}

}  // namespace rgpu::ucx
