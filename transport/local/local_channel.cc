#include "transport/local/local_channel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace rgpu {
namespace {

using Clock = std::chrono::steady_clock;

// Large payload copies are recycled: fresh memory costs a page fault per page.
std::shared_ptr<BufferPool> LocalPool() {
  static auto* pool =
      new std::shared_ptr<BufferPool>(std::make_shared<BufferPool>(8, size_t{512} << 20));
  return *pool;
}

struct LocalMessage {
  std::string header;
  PayloadBuffer payload;  // a copy of the sender's payload (size bytes)
  size_t size = 0;
};

// One connection. End 0 is the connecting side's, end 1 the accepting side's; everything is
// guarded by `mu`.
struct Link {
  std::string name;
  std::mutex mu;
  std::condition_variable changed;    // a message arrived or an end went
  std::deque<LocalMessage> inbox[2];  // inbox[i]: messages for end i
  size_t inbox_bytes[2] = {0, 0};
  bool gone[2] = {false, false};     // end i was closed or abandoned
  std::string why[2];                // why end i went
  bool cut_off[2] = {false, false};  // end i takes no more: its peer sent past end i's bounds
  ChannelOptions options[2];         // each end's bounds on what it receives
  // Bumped (under mu) whenever end i has something new to look at (a message, an end gone, a
  // cut-off): what a spinning Receive of end i watches without the lock.
  std::atomic<uint64_t> news[2] = {0, 0};
  int sleepers[2] = {0, 0};  // Receives of end i asleep on `changed`
};

// Tells end i of `link` there is news, waking a Receive asleep there. Under link->mu.
void NotifyLocked(Link* link, int end) {
  link->news[end].fetch_add(1, std::memory_order_release);
  if (link->sleepers[end] > 0) link->changed.notify_all();
}

// Ends `end` of `link` (closed, abandoned, or never accepted) for `why`; what waited for it is
// dropped. Idempotent.
void CloseEnd(Link* link, int end, const std::string& why) {
  std::lock_guard<std::mutex> lock(link->mu);
  if (link->gone[end]) return;
  link->gone[end] = true;
  link->why[end] = why;
  link->inbox[end].clear();
  link->inbox_bytes[end] = 0;
  NotifyLocked(link, 0);
  NotifyLocked(link, 1);
}

class LocalChannel final : public Channel {
 public:
  LocalChannel(std::shared_ptr<Link> link, int end)
      : link_(std::move(link)), end_(end), peer_end_(1 - end) {}

  ~LocalChannel() override { CloseEnd(link_.get(), end_, "the peer closed the connection"); }

  Status Send(const std::string& header, const void* payload, size_t size) override {
    return Post(header, payload, size);
  }

  Status Post(std::string header, const void* payload, size_t size) override {
    LocalMessage m;
    m.header = std::move(header);
    m.size = size;
    if (size > 0) {
      m.payload = LocalPool()->Acquire(size);
      if (m.payload == nullptr) {
        return ResourceExhausted("no memory for a payload of " + std::to_string(size) + " bytes");
      }
      memcpy(m.payload.get(), payload, size);
    }
    std::lock_guard<std::mutex> lock(link_->mu);
    Status s = UsableLocked();
    if (!s.ok()) return s;
    if (link_->cut_off[peer_end_]) return Status::Ok();  // dropped, as the peer said it would
    const ChannelOptions& bounds = link_->options[peer_end_];
    const size_t bytes = m.header.size() + size;
    std::deque<LocalMessage>& inbox = link_->inbox[peer_end_];
    const bool too_large = bounds.max_message_bytes > 0 && bytes > bounds.max_message_bytes;
    const bool too_many =
        bounds.max_queued_messages > 0 && inbox.size() >= bounds.max_queued_messages;
    const bool too_much = bounds.max_queued_bytes > 0 && !inbox.empty() &&
                          link_->inbox_bytes[peer_end_] + bytes > bounds.max_queued_bytes;
    if (too_large || too_many || too_much) {
      link_->cut_off[peer_end_] = true;
    } else {
      link_->inbox_bytes[peer_end_] += bytes;
      inbox.push_back(std::move(m));
    }
    NotifyLocked(link_.get(), peer_end_);
    return Status::Ok();
  }

  // Every message left when it was posted.
  Status Flush(size_t keep) override {
    (void)keep;
    std::lock_guard<std::mutex> lock(link_->mu);
    return UsableLocked();
  }

  Status Receive(int timeout_ms, ReceivedMessage* out) override {
    out->header.clear();
    out->owned.reset();
    out->payload = nullptr;
    out->payload_size = 0;
    out->payload_pending = false;
    out->pending = nullptr;
    pending_ = LocalMessage();  // an unfetched deferred payload is dropped
    has_pending_ = false;
    LocalMessage m;
    {
      std::unique_lock<std::mutex> lock(link_->mu);
      auto ready = [this] {
        return !link_->inbox[end_].empty() || link_->gone[end_] || link_->gone[peer_end_] ||
               link_->cut_off[end_];
      };
      const auto start = Clock::now();
      if (!ready() && link_->options[end_].poll_us > 0) {
        // The other end usually answers within microseconds: watch for its news for poll_us
        // before sleeping (a condition variable's wake-up costs tens of microseconds).
        const uint64_t seen = link_->news[end_].load(std::memory_order_relaxed);
        lock.unlock();
        auto spin_until = start + std::chrono::microseconds(link_->options[end_].poll_us);
        if (timeout_ms >= 0) {
          spin_until = std::min(spin_until, start + std::chrono::milliseconds(timeout_ms));
        }
        for (unsigned turn = 1; link_->news[end_].load(std::memory_order_acquire) == seen; ++turn) {
          if ((turn & 63) == 0 && Clock::now() >= spin_until) break;
        }
        lock.lock();
      }
      if (!ready()) {
        ++link_->sleepers[end_];
        bool woke = true;
        if (timeout_ms < 0) {
          link_->changed.wait(lock, ready);
        } else {
          woke =
              link_->changed.wait_until(lock, start + std::chrono::milliseconds(timeout_ms), ready);
        }
        --link_->sleepers[end_];
        if (!woke) return Timeout("no message within " + std::to_string(timeout_ms) + " ms");
      }
      if (link_->gone[end_]) return Unavailable(link_->why[end_]);
      if (link_->cut_off[end_]) {
        return ResourceExhausted(
            peer() + " sent past this channel's bounds (" +
            std::to_string(link_->options[end_].max_queued_messages) + " messages, " +
            std::to_string(link_->options[end_].max_queued_bytes) + " bytes queued; " +
            std::to_string(link_->options[end_].max_message_bytes) + " bytes a message)");
      }
      std::deque<LocalMessage>& inbox = link_->inbox[end_];
      // What the peer sent before it went is still delivered.
      if (inbox.empty()) return Unavailable(peer() + ": " + link_->why[peer_end_]);
      m = std::move(inbox.front());
      inbox.pop_front();
      link_->inbox_bytes[end_] -= m.header.size() + m.size;
    }
    out->header = std::move(m.header);
    out->payload_size = m.size;
    if (m.size == 0) return Status::Ok();
    const size_t defer = link_->options[end_].defer_payload_bytes;
    if (defer > 0 && m.size >= defer) {
      pending_ = std::move(m);
      has_pending_ = true;
      out->payload_pending = true;
      out->pending = &pending_;
      return Status::Ok();
    }
    void* destination = placer_ ? placer_(out->header, m.size) : nullptr;
    Place(&m, destination, out);
    return Status::Ok();
  }

  void SetPayloadPlacer(PayloadPlacer placer) override { placer_ = std::move(placer); }

  Status FetchPayload(ReceivedMessage* m, void* destination) override {
    if (!m->payload_pending) return Status::Ok();
    if (!has_pending_ || m->pending != &pending_) {
      return Internal("FetchPayload: not the message Receive returned last");
    }
    has_pending_ = false;
    m->payload_pending = false;
    m->pending = nullptr;
    Place(&pending_, destination, m);
    pending_ = LocalMessage();
    return Status::Ok();
  }

  // Nothing to register: payloads are copied in memory.
  Status RegisterMemory(void* address, size_t size) override {
    (void)address;
    (void)size;
    return Status::Ok();
  }
  void UnregisterMemory(void* address) override { (void)address; }

  bool broken() const override {
    std::lock_guard<std::mutex> lock(link_->mu);
    return link_->gone[end_] || link_->gone[peer_end_];
  }

  void Abandon(const std::string& why) override { CloseEnd(link_.get(), end_, why); }

  std::string peer() const override {
    return "local://" + link_->name + (end_ == 0 ? "" : " (client)");
  }

  size_t queued() const override {
    std::lock_guard<std::mutex> lock(link_->mu);
    return link_->inbox[end_].size();
  }

  std::string Describe() override { return "local (in-process queues, payloads copied)"; }

 private:
  // OK while both ends are there.
  Status UsableLocked() const {
    if (link_->gone[end_]) return Unavailable(link_->why[end_]);
    if (link_->gone[peer_end_]) return Unavailable(peer() + ": " + link_->why[peer_end_]);
    return Status::Ok();
  }

  // Puts m's payload in `destination` (copied) or, when it is null, hands m's buffer over.
  static void Place(LocalMessage* m, void* destination, ReceivedMessage* out) {
    if (destination != nullptr) {
      memcpy(destination, m->payload.get(), m->size);
      out->payload = static_cast<char*>(destination);
      m->payload.reset();
    } else {
      out->owned = std::move(m->payload);
      out->payload = out->owned.get();
    }
  }

  const std::shared_ptr<Link> link_;
  const int end_;
  const int peer_end_;
  PayloadPlacer placer_;
  LocalMessage pending_;  // the deferred payload of the message Receive returned last
  bool has_pending_ = false;
};

class LocalPendingConnection final : public PendingConnection {
 public:
  explicit LocalPendingConnection(std::shared_ptr<Link> link) : link_(std::move(link)) {}
  ~LocalPendingConnection() override {
    if (link_ != nullptr) CloseEnd(link_.get(), 1, "the server did not accept the connection");
  }
  Status Accept(const ChannelOptions& options, std::unique_ptr<Channel>* out) override {
    if (link_ == nullptr) return Internal("connection accepted twice");
    {
      std::lock_guard<std::mutex> lock(link_->mu);
      link_->options[1] = options;
    }
    *out = std::make_unique<LocalChannel>(std::move(link_), 1);
    link_ = nullptr;
    return Status::Ok();
  }
  std::string peer() const override { return "local client"; }

 private:
  std::shared_ptr<Link> link_;
};

class LocalListener;

// The process-wide names of this copy's listeners.
struct ListenerTable {
  std::mutex mu;
  std::map<std::string, LocalListener*> by_name;  // guarded by mu
};

ListenerTable& Listeners() {
  static auto* table = new ListenerTable();  // never destroyed: listeners may outlive exit
  return *table;
}

class LocalListener final : public Listener {
 public:
  explicit LocalListener(std::string name) : name_(std::move(name)) {}
  ~LocalListener() override {
    {
      std::lock_guard<std::mutex> lock(Listeners().mu);
      Listeners().by_name.erase(name_);
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& link : waiting_) CloseEnd(link.get(), 1, "the listener closed");
  }

  Status WaitConnection(int timeout_ms, std::unique_ptr<PendingConnection>* out) override {
    std::unique_lock<std::mutex> lock(mu_);
    auto ready = [this] { return !waiting_.empty(); };
    if (timeout_ms < 0) {
      arrived_.wait(lock, ready);
    } else if (!arrived_.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
      return Timeout("no connection within " + std::to_string(timeout_ms) + " ms");
    }
    *out = std::make_unique<LocalPendingConnection>(std::move(waiting_.front()));
    waiting_.pop_front();
    return Status::Ok();
  }

  uint16_t port() const override { return 0; }

  // Called with Listeners().mu held, so the listener cannot go meanwhile.
  void Enqueue(std::shared_ptr<Link> link) {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_.push_back(std::move(link));
    arrived_.notify_all();
  }

 private:
  const std::string name_;
  std::mutex mu_;
  std::condition_variable arrived_;
  std::deque<std::shared_ptr<Link>> waiting_;  // guarded by mu_
};

}  // namespace

Status ConnectLocalChannel(const TransportUrl& url, const ChannelOptions& options,
                           std::unique_ptr<Channel>* out) {
  auto link = std::make_shared<Link>();
  link->name = url.host;
  link->options[0] = options;
  {
    std::lock_guard<std::mutex> lock(Listeners().mu);
    auto it = Listeners().by_name.find(url.host);
    if (it == Listeners().by_name.end()) {
      return Unavailable("nobody listens at local://" + url.host + " in this process");
    }
    it->second->Enqueue(link);
  }
  *out = std::make_unique<LocalChannel>(std::move(link), 0);
  return Status::Ok();
}

Status CreateLocalListener(const TransportUrl& url, std::unique_ptr<Listener>* out) {
  std::lock_guard<std::mutex> lock(Listeners().mu);
  if (Listeners().by_name.count(url.host) != 0) {
    return InvalidArgument("local://" + url.host + " is already listened on");
  }
  auto listener = std::make_unique<LocalListener>(url.host);
  Listeners().by_name.emplace(url.host, listener.get());
  *out = std::move(listener);
  return Status::Ok();
}

}  // namespace rgpu
