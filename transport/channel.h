// Channel and Listener: the message transport between a tenant's client runtime and rgpu-server.
// A message is a small header (one serialized protocol envelope) plus an optional payload of any
// size. Nothing above this layer knows which transport carries it.
//
// Threading: a Channel belongs to one thread at a time (the caller serializes). Each Channel has
// its own progress engine, so channels owned by different threads never wait on each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "transport/buffer_pool.h"
#include "transport/url.h"

namespace rgpu {

struct ChannelOptions {
  // How long a waiting thread busy-polls before it sleeps on the transport's event descriptor.
  // Polling avoids the wake-up cost of a sleeping thread (tens of microseconds on small VMs).
  int poll_us = 200;
  // Payloads of at least this many bytes travel as rendezvous data (fetched by the receiver
  // straight into its destination buffer) instead of being copied into the message.
  size_t rendezvous_threshold = 64 * 1024;
  // Bounds on what may wait in the receive queue (0: no bound). A peer that sends past either is
  // cut off: its further messages are dropped and Receive fails with kResourceExhausted, so a
  // flood cannot exhaust this process's memory. A message larger than max_queued_bytes is still
  // taken when nothing else is queued, unless it is larger than max_message_bytes.
  size_t max_queued_messages = 0;
  size_t max_queued_bytes = 0;
  size_t max_message_bytes = 0;
  // Rendezvous payloads of at least this many bytes (0: none) are not fetched when they arrive:
  // Receive returns their message with payload_pending set, and the receiver fetches the payload
  // with FetchPayload into a buffer of its choice (one that may only be written once earlier work
  // is done, such as device memory). A peer that sends such a payload so that it cannot wait
  // (UCX's eager protocol, which the sender chooses) is cut off as by the queue bounds.
  size_t defer_payload_bytes = 0;
};

// A received message. The payload lies either in `owned` or in a buffer that the channel's
// PayloadPlacer supplied.
// With payload_pending, the payload (payload_size bytes) has not been fetched yet and `payload`
// is null (ChannelOptions::defer_payload_bytes).
struct ReceivedMessage {
  std::string header;
  PayloadBuffer owned;
  char* payload = nullptr;
  size_t payload_size = 0;
  bool payload_pending = false;
  void* pending = nullptr;  // the transport's handle of the pending payload
};

// Chooses where an arriving payload of `size` bytes is written, given the message header. Returns
// a buffer of at least `size` bytes that stays valid until Receive returns that message, or nullptr
// to have the channel allocate one. Called on the thread that is inside Receive.
using PayloadPlacer = std::function<void*(const std::string& header, size_t size)>;

class Channel {
 public:
  virtual ~Channel() = default;

  // Sends one message and returns once the payload buffer may be reused. Fails with kUnavailable
  // when the peer is gone.
  virtual Status Send(const std::string& header, const void* payload, size_t size) = 0;

  // Starts sending one message and returns without waiting: the channel keeps the header, but
  // `payload` must stay valid and unmodified until Flush() returns (or the channel breaks).
  // Messages, posted or sent, arrive in the order they were issued.
  virtual Status Post(std::string header, const void* payload, size_t size) = 0;

  // Waits until at most `keep` of the posted messages (the latest ones) have not left yet; the
  // payloads of the others may be reused. Flush() waits for all of them.
  virtual Status Flush(size_t keep = 0) = 0;

  // Waits, at most timeout_ms (-1: no limit), until everything sent or posted so far has left
  // this process (reached the peer's transport), not just the transport's own buffers: for a
  // process about to exit, whose last messages would otherwise die with it.
  virtual Status Drain(int timeout_ms) {
    (void)timeout_ms;
    return Flush();
  }

  // Waits up to timeout_ms (-1: no limit) for the next message. kTimeout when none came,
  // kUnavailable when the peer disconnected or died (detected, never a hang). `out` may be a
  // message received before: its payload is released first and its buffers reused.
  virtual Status Receive(int timeout_ms, ReceivedMessage* out) = 0;

  virtual void SetPayloadPlacer(PayloadPlacer placer) = 0;

  // Fetches the pending payload of `m`, the message Receive returned last, into `destination`
  // (at least m->payload_size bytes; nullptr: a buffer of the channel's, kept in m->owned) and
  // waits until it has landed; m->payload then points at it. Does nothing for a message without
  // a pending payload. A pending payload not fetched before the next Receive is dropped (the
  // sender's send completes). Fails with kUnavailable when the peer is gone meanwhile.
  virtual Status FetchPayload(ReceivedMessage* m, void* destination) {
    (void)destination;
    return m->payload_pending ? Internal("this channel cannot fetch deferred payloads")
                              : Status::Ok();
  }

  // Registers host memory that payloads will often come from or land in (pinned memory), so
  // that the transport can move it without copies or per-transfer registration where it can
  // (UCX: ucp_mem_map, then the handle travels with each send and fetch). Optional for a
  // transport: one that cannot returns OK and moves the data as usual.
  virtual Status RegisterMemory(void* address, size_t size) = 0;
  // Drops a registration made at `address`; harmless when there is none.
  virtual void UnregisterMemory(void* address) = 0;

  // True once the peer is known to be gone (or the channel was abandoned).
  virtual bool broken() const = 0;

  // Gives up on the peer, from any thread (e.g. a watchdog that saw the peer fall silent): every
  // wait in progress or later ends, and every call fails with kUnavailable and `why`.
  virtual void Abandon(const std::string& why) = 0;

  // The peer's address, for logs.
  virtual std::string peer() const = 0;

  // Messages received and not yet returned by Receive.
  virtual size_t queued() const = 0;

  // What carries the channel (transport lanes and devices), for logs and tests.
  virtual std::string Describe() = 0;

  // The size of the pieces a large payload moves fastest in over this channel, when several
  // messages of this size in flight outrun one message of the whole (0: they do not; send it
  // whole). A hint for senders of bulk data; any size still works.
  virtual size_t bulk_piece() const { return 0; }
};

// bulk_piece() of the transports over a TCP stream: 64 MiB copies over loopback TCP moved
// 1.2-1.6x faster as 4 MiB messages, several in flight, than as one (docs/performance.md).
inline constexpr size_t kStreamBulkPiece = size_t{4} << 20;

// A connection request that a Listener received and that has not been accepted yet.
class PendingConnection {
 public:
  virtual ~PendingConnection() = default;
  // Completes the connection on the calling thread; the Channel then belongs to that thread.
  virtual Status Accept(const ChannelOptions& options, std::unique_ptr<Channel>* out) = 0;
  virtual std::string peer() const = 0;
};

class Listener {
 public:
  virtual ~Listener() = default;
  // Waits up to timeout_ms for a connection request.
  virtual Status WaitConnection(int timeout_ms, std::unique_ptr<PendingConnection>* out) = 0;
  // The port actually bound (useful with port 0).
  virtual uint16_t port() const = 0;
  // What clients pin to reach this listener and no other (TransportUrl::pin): the SHA-256 of a
  // tls:// listener's public key; "" for the other transports.
  virtual std::string pin() const { return ""; }
};

// What a listener needs besides its URL.
struct ListenerOptions {
  // tls://: the server's private key and certificate chain (PEM files). With a key and no
  // certificate the listener makes a self-signed one for the key; with neither, a new key for the
  // process's life (a pin changes with every start).
  std::string tls_key_file;
  std::string tls_certificate_file;
};

// Connects to a server at `url`. Fails within a bounded time when nobody listens there.
Status ConnectChannel(const TransportUrl& url, const ChannelOptions& options,
                      std::unique_ptr<Channel>* out);

// Listens on `url` (port 0 picks an ephemeral port).
Status CreateListener(const TransportUrl& url, const ListenerOptions& options,
                      std::unique_ptr<Listener>* out);
inline Status CreateListener(const TransportUrl& url, std::unique_ptr<Listener>* out) {
  return CreateListener(url, ListenerOptions(), out);
}

}  // namespace rgpu
