#include "transport/socket/socket_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "transport/socket/byte_stream.h"
#include "transport/socket/tcp_socket.h"

namespace rgpu {
namespace {

using Clock = std::chrono::steady_clock;

// Every message: header size (u32) and payload size (u64), little-endian, then both.
constexpr size_t kPrefixBytes = 12;
// Protocol envelopes are small; a larger header is a broken or hostile peer.
constexpr uint32_t kMaxHeaderBytes = 16u << 20;
// A read with at least this much left does not spin: it sleeps until kLowWaterBytes (or all of
// it, if less) have arrived.
constexpr size_t kSpinBytes = 64 << 10;
// Reads of less than kDirectBytes go through a buffer of kBufferBytes (prefix, header, small
// payloads); larger ones land straight in their destination.
constexpr size_t kDirectBytes = 16 << 10;
constexpr size_t kBufferBytes = 64 << 10;
constexpr int kLowWaterBytes = 256 << 10;
constexpr int kConnectTimeoutMs = 10000;

// Large payloads land in recycled buffers: fresh memory costs a page fault per page.
std::shared_ptr<BufferPool> SocketPool() {
  static auto* pool =
      new std::shared_ptr<BufferPool>(std::make_shared<BufferPool>(8, size_t{512} << 20));
  return *pool;
}

// The kernel's socket as it is.
class PlainStream final : public ByteStream {
 public:
  explicit PlainStream(int fd) : fd_(fd) {}
  ~PlainStream() override { close(fd_); }
  ssize_t Write(const iovec* parts, int count) override {
    msghdr h = {};
    h.msg_iov = const_cast<iovec*>(parts);
    h.msg_iovlen = static_cast<size_t>(count);
    blocked_on_ = POLLOUT;
    return sendmsg(fd_, &h, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  ssize_t Read(void* to, size_t size) override {
    blocked_on_ = POLLIN;
    return recv(fd_, to, size, MSG_DONTWAIT);
  }
  short blocked_on() const override { return blocked_on_; }
  bool low_water_counts_bytes() const override { return true; }
  std::string error() const override { return ""; }
  std::string Describe() const override { return "a kernel TCP socket"; }
  int fd() const override { return fd_; }

 private:
  const int fd_;
  short blocked_on_ = POLLIN;
};

class SocketChannel final : public Channel {
 public:
  SocketChannel(std::unique_ptr<ByteStream> stream, const ChannelOptions& options, std::string peer,
                std::string scheme)
      : stream_(std::move(stream)),
        fd_(stream_->fd()),
        options_(options),
        peer_(std::move(peer)),
        scheme_(std::move(scheme)) {}

  Status Send(const std::string& header, const void* payload, size_t size) override {
    if (Status s = Queue(header, payload, size); !s.ok()) return s;
    return Pump(0);  // this message and every one before it are in the kernel's hands
  }
  Status Post(std::string header, const void* payload, size_t size) override {
    if (Status s = Queue(header, payload, size); !s.ok()) return s;
    return PumpAvailable();
  }
  Status Flush(size_t keep) override { return Pump(keep); }

  // Written is enough: what the kernel holds it sends after this process is gone (a closed
  // socket still delivers its queued data), so nothing waits for the peer's acknowledgements,
  // which a delayed ACK may hold back for tens of milliseconds.
  Status Drain(int) override { return Pump(0); }

  Status Receive(int timeout_ms, ReceivedMessage* out) override {
    out->owned.reset();
    out->payload = nullptr;
    out->payload_size = 0;
    out->payload_pending = false;
    out->pending = nullptr;
    if (!cut_off_.empty()) return ResourceExhausted(cut_off_);
    // The last message's payload, left for FetchPayload and not fetched: dropped.
    if (unfetched_ > 0) {
      if (Status s = Skip(unfetched_); !s.ok()) return s;
      unfetched_ = 0;
    }
    unsigned char prefix[kPrefixBytes];
    if (Status s = Read(prefix, sizeof prefix, timeout_ms); !s.ok()) return s;
    uint32_t header_bytes;
    uint64_t payload_bytes;
    memcpy(&header_bytes, prefix, sizeof header_bytes);
    memcpy(&payload_bytes, prefix + 4, sizeof payload_bytes);
    if (header_bytes > kMaxHeaderBytes ||
        (options_.max_message_bytes > 0 && payload_bytes > options_.max_message_bytes)) {
      // Nothing of it is read: this end takes no more (sending still works).
      cut_off_ = "the peer sent a message past this end's size limit (" +
                 std::to_string(header_bytes) + " + " + std::to_string(payload_bytes) + " bytes)";
      return ResourceExhausted(cut_off_);
    }
    out->header.resize(header_bytes);
    if (Status s = Read(out->header.data(), header_bytes, -1); !s.ok()) return s;
    if (payload_bytes == 0) return Status::Ok();
    out->payload_size = payload_bytes;
    if (options_.defer_payload_bytes > 0 && payload_bytes >= options_.defer_payload_bytes) {
      out->payload_pending = true;
      out->pending = this;
      unfetched_ = payload_bytes;
      return Status::Ok();
    }
    void* destination = placer_ ? placer_(out->header, payload_bytes) : nullptr;
    if (destination == nullptr) {
      out->owned = SocketPool()->Acquire(payload_bytes);
      if (out->owned == nullptr) {
        cut_off_ = "no memory for a payload of " + std::to_string(payload_bytes) + " bytes";
        return ResourceExhausted(cut_off_);
      }
      destination = out->owned.get();
    }
    if (Status s = Read(destination, payload_bytes, -1); !s.ok()) return s;
    out->payload = static_cast<char*>(destination);
    return Status::Ok();
  }

  void SetPayloadPlacer(PayloadPlacer placer) override { placer_ = std::move(placer); }

  Status FetchPayload(ReceivedMessage* m, void* destination) override {
    if (!m->payload_pending) return Status::Ok();
    if (m->pending != this || unfetched_ != m->payload_size) {
      return Internal("the payload to fetch is not the last message's");
    }
    if (destination == nullptr) {
      m->owned = SocketPool()->Acquire(m->payload_size);
      if (m->owned == nullptr) return ResourceExhausted("no memory for the payload");
      destination = m->owned.get();
    }
    unfetched_ = 0;
    if (Status s = Read(destination, m->payload_size, -1); !s.ok()) return s;
    m->payload = static_cast<char*>(destination);
    m->payload_pending = false;
    m->pending = nullptr;
    return Status::Ok();
  }

  Status RegisterMemory(void*, size_t) override { return Status::Ok(); }
  void UnregisterMemory(void*) override {}

  bool broken() const override { return broken_.load(); }

  void Abandon(const std::string& why) override {
    {
      std::lock_guard<std::mutex> lock(why_mu_);
      if (!broken_.load()) why_ = why;
    }
    broken_.store(true);
    shutdown(fd_, SHUT_RDWR);  // wakes every wait on the socket
  }

  std::string peer() const override { return peer_; }
  size_t queued() const override { return 0; }  // messages stay in the socket until read
  std::string Describe() override { return scheme_ + ": " + stream_->Describe() + " to " + peer_; }
  size_t bulk_piece() const override { return kStreamBulkPiece; }

 private:
  // A message waiting to be written: its prefix and header (owned), its payload (the
  // caller's, valid until Flush), and how much of the whole has been written.
  struct Outgoing {
    std::string head;
    const char* payload = nullptr;
    size_t size = 0;
    size_t written = 0;
  };

  std::string why() const {
    std::lock_guard<std::mutex> lock(why_mu_);
    return why_;
  }
  Status Usable() const { return broken_.load() ? Unavailable(why()) : Status::Ok(); }
  Status Broke(const std::string& why) {
    Abandon(why);
    return Unavailable(this->why());
  }

  Status Queue(const std::string& header, const void* payload, size_t size) {
    if (Status s = Usable(); !s.ok()) return s;
    if (header.size() > kMaxHeaderBytes) return InvalidArgument("header too large");
    Outgoing m;
    m.head.resize(kPrefixBytes + header.size());
    const uint32_t header_bytes = static_cast<uint32_t>(header.size());
    const uint64_t payload_bytes = size;
    memcpy(m.head.data(), &header_bytes, sizeof header_bytes);
    memcpy(m.head.data() + 4, &payload_bytes, sizeof payload_bytes);
    memcpy(m.head.data() + kPrefixBytes, header.data(), header.size());
    m.payload = static_cast<const char*>(payload);
    m.size = size;
    outgoing_.push_back(std::move(m));
    return Status::Ok();
  }

  // Writes what the socket takes now without waiting; true once nothing is left queued.
  Status PumpAvailable() {
    while (!outgoing_.empty()) {
      Outgoing& m = outgoing_.front();
      iovec parts[2];
      int count = 0;
      if (m.written < m.head.size()) {
        parts[count++] = {m.head.data() + m.written, m.head.size() - m.written};
      }
      const size_t payload_done = m.written > m.head.size() ? m.written - m.head.size() : 0;
      if (m.size > payload_done) {
        parts[count++] = {const_cast<char*>(m.payload) + payload_done, m.size - payload_done};
      }
      if (count == 0) {
        outgoing_.pop_front();
        continue;
      }
      const ssize_t sent = stream_->Write(parts, count);
      if (sent < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          write_blocked_on_ = stream_->blocked_on();
          return Status::Ok();
        }
        return Broke(StreamError("send"));
      }
      // Nothing written without a reason to wait: the stream has ended (TLS's peer closed it).
      if (sent == 0) return Broke("send: " + stream_->error());
      m.written += static_cast<size_t>(sent);
      if (m.written == m.head.size() + m.size) outgoing_.pop_front();
    }
    return Status::Ok();
  }

  // Writes until at most `keep` messages are left queued, waiting for room as needed.
  Status Pump(size_t keep) {
    for (;;) {
      if (Status s = Usable(); !s.ok()) return s;
      if (Status s = PumpAvailable(); !s.ok()) return s;
      if (outgoing_.size() <= keep) return Status::Ok();
      if (Status s = Wait(write_blocked_on_, -1); !s.ok()) return s;
    }
  }

  // Waits up to timeout_ms (-1: no limit) until the socket is ready for `events` (and, while
  // messages wait to be written, for writing too, which then happens).
  Status Wait(short events, int timeout_ms) {
    pollfd p = {fd_, static_cast<short>(events | (outgoing_.empty() ? 0 : POLLOUT)), 0};
    const int r = poll(&p, 1, timeout_ms);
    if (r < 0 && errno != EINTR) return Broke(std::string("poll: ") + strerror(errno));
    if (r == 0) return Timeout("no message within " + std::to_string(timeout_ms) + " ms");
    if (Status s = Usable(); !s.ok()) return s;
    if ((p.revents & POLLOUT) != 0 && !outgoing_.empty()) return PumpAvailable();
    return Status::Ok();
  }

  // Reads exactly n bytes. The timeout applies to the first byte only: once a message has
  // begun, the rest comes or the peer is gone. Messages waiting to be written go meanwhile.
  // Small reads go through rx_, so that one recv brings a message's prefix and header (and the
  // next messages, when they came together); large ones go straight to their destination.
  Status Read(void* destination, size_t n, int timeout_ms) {
    char* to = static_cast<char*>(destination);
    size_t done = TakeBuffered(to, n);
    const auto start = Clock::now();
    const auto spin_until = start + std::chrono::microseconds(options_.poll_us);
    while (done < n) {
      if (Status s = Usable(); !s.ok()) return s;
      const size_t left = n - done;
      const bool direct = left >= kDirectBytes;
      const ssize_t got =
          direct ? stream_->Read(to + done, left) : stream_->Read(rx_.get(), kBufferBytes);
      if (got > 0) {
        if (direct) {
          done += static_cast<size_t>(got);
        } else {
          rx_end_ = static_cast<size_t>(got);
          done += TakeBuffered(to + done, left);
        }
        continue;
      }
      if (got == 0) {
        const std::string why = stream_->error();
        return Broke("the peer closed the connection" + (why.empty() ? "" : " (" + why + ")"));
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return Broke(StreamError("recv"));
      const short read_waits_for = stream_->blocked_on();  // before a write changes it
      if (!outgoing_.empty()) {
        if (Status s = PumpAvailable(); !s.ok()) return s;
      }
      const auto now = Clock::now();
      // A reply often follows within microseconds: spin for it. A large remainder comes at the
      // link's pace instead, so sleep until a good part of it is there (SO_RCVLOWAT wakes poll
      // only then), not on every segment.
      if (left < kSpinBytes && now < spin_until) continue;
      SetLowWater(left < kLowWaterBytes ? static_cast<int>(left) : kLowWaterBytes);
      int wait_ms = -1;
      if (done == 0 && timeout_ms >= 0) {
        const auto spent =
            std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count();
        if (spent >= timeout_ms)
          return Timeout("no message within " + std::to_string(timeout_ms) + " ms");
        wait_ms = static_cast<int>(timeout_ms - spent);
      }
      if (Status s = Wait(read_waits_for, wait_ms); !s.ok()) return s;
    }
    SetLowWater(1);
    return Status::Ok();
  }

  // Copies up to n bytes received earlier into `to`; returns how many.
  size_t TakeBuffered(char* to, size_t n) {
    const size_t take = std::min(n, rx_end_ - rx_begin_);
    if (take == 0) return 0;
    memcpy(to, rx_.get() + rx_begin_, take);
    rx_begin_ += take;
    if (rx_begin_ == rx_end_) rx_begin_ = rx_end_ = 0;
    return take;
  }

  // Reads and drops n bytes (a payload nobody fetched).
  Status Skip(size_t n) {
    std::unique_ptr<char[]> scratch(new char[kDirectBytes * 4]);
    while (n > 0) {
      const size_t chunk = std::min(n, kDirectBytes * 4);
      if (Status s = Read(scratch.get(), chunk, -1); !s.ok()) return s;
      n -= chunk;
    }
    return Status::Ok();
  }

  // Sets the socket's receive low-water mark (what poll waits for) when it changes and the
  // stream's bytes are the socket's.
  void SetLowWater(int bytes) {
    if (bytes == low_water_ || !stream_->low_water_counts_bytes()) return;
    setsockopt(fd_, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof bytes);
    low_water_ = bytes;
  }

  // "send: why" from the stream's error, or errno's.
  std::string StreamError(const char* what) const {
    const std::string why = stream_->error();
    return std::string(what) + ": " + (why.empty() ? strerror(errno) : why);
  }

  const std::unique_ptr<ByteStream> stream_;
  const int fd_;  // stream_'s socket
  const ChannelOptions options_;
  const std::string peer_;
  const std::string scheme_;          // "sock" or "tls"
  short write_blocked_on_ = POLLOUT;  // what a write that could not go waits for
  PayloadPlacer placer_;
  std::deque<Outgoing> outgoing_;  // messages not yet (wholly) written, oldest first
  int low_water_ = 1;              // the socket's SO_RCVLOWAT
  // Bytes received and not yet read: rx_[rx_begin_, rx_end_).
  std::unique_ptr<char[]> rx_{new char[kBufferBytes]};
  size_t rx_begin_ = 0, rx_end_ = 0;
  uint64_t unfetched_ = 0;  // payload bytes of the last message left in the socket
  std::string cut_off_;     // why this end takes no more messages ("": it does)
  std::atomic<bool> broken_{false};
  mutable std::mutex why_mu_;
  std::string why_;  // GUARDED_BY(why_mu_)
};

}  // namespace

Status ConnectSocketChannel(const TransportUrl& url, const ChannelOptions& options,
                            std::unique_ptr<Channel>* out) {
  int fd = -1;
  std::string peer;
  if (Status s = ConnectTcpSocket(url, kConnectTimeoutMs, &fd, &peer); !s.ok()) return s;
  *out = std::make_unique<SocketChannel>(std::make_unique<PlainStream>(fd), options, peer, "sock");
  return Status::Ok();
}

std::unique_ptr<Channel> MakeStreamChannel(std::unique_ptr<ByteStream> stream,
                                           const ChannelOptions& options, const std::string& peer,
                                           const std::string& scheme) {
  return std::make_unique<SocketChannel>(std::move(stream), options, peer, scheme);
}

Status CreateSocketListener(const TransportUrl& url, std::unique_ptr<Listener>* out) {
  return CreateTcpSocketListener(
      url,
      [](int fd, const std::string& peer, const ChannelOptions& options,
         std::unique_ptr<Channel>* channel) {
        *channel = std::make_unique<SocketChannel>(std::make_unique<PlainStream>(fd), options, peer,
                                                   "sock");
        return Status::Ok();
      },
      out);
}

}  // namespace rgpu
