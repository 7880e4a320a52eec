// UcxChannel: a Channel over one UCP endpoint with a worker of its own (UCP active messages).
// UcxListener: a UCP listener whose connection requests are accepted onto new workers.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include "transport/channel.h"

namespace rgpu::ucx {

class UcxChannel final : public Channel {
 public:
  // tcp://, client side: a new worker and an endpoint to `addr` (UCX's socket connection).
  static Status Connect(ucp_context_h context, const sockaddr_storage& addr, socklen_t len,
                        const std::string& peer, const ChannelOptions& options,
                        std::unique_ptr<Channel>* out);
  // tcp://, server side: a new worker and an endpoint accepting `request`.
  static Status Accept(ucp_context_h context, ucp_conn_request_h request, const std::string& peer,
                       const ChannelOptions& options, std::unique_ptr<Channel>* out);
  // shm://, either side, over `socket`, a connected kernel TCP socket to the peer on this host
  // (taken over: closed with the channel, or at once on failure). The peer must run as this
  // process's user (kPermissionDenied otherwise, before anything of it reaches UCX, whose parser
  // of worker addresses trusts them; shared memory needs one user anyway). Each side makes a worker
  // of the shared-memory context (GetSharedMemoryDataContext), writes its worker address on the
  // socket, reads the peer's (within a bounded time) and connects an endpoint to it. Nothing else
  // is written on the socket: it stays open only so that its end tells this side the peer is gone
  // (shared-memory transports cannot), after whatever the peer sent before it went is received.
  static Status OverSharedMemory(int socket, const std::string& peer, const ChannelOptions& options,
                                 std::unique_ptr<Channel>* out);
  ~UcxChannel() override;

  Status Send(const std::string& header, const void* payload, size_t size) override;
  Status Post(std::string header, const void* payload, size_t size) override;
  Status Flush(size_t keep = 0) override;
  Status Drain(int timeout_ms) override;
  Status Receive(int timeout_ms, ReceivedMessage* out) override;
  void SetPayloadPlacer(PayloadPlacer placer) override { placer_ = std::move(placer); }
  Status FetchPayload(ReceivedMessage* m, void* destination) override;
  Status RegisterMemory(void* address, size_t size) override;
  void UnregisterMemory(void* address) override;
  bool broken() const override { return !error_.ok() || abandoned_.load(); }
  void Abandon(const std::string& why) override;
  std::string peer() const override { return peer_; }
  std::string Describe() override;
  size_t queued() const override { return queued_.load(std::memory_order_acquire); }
  // tcp://: kStreamBulkPiece; shm://: 0 (one message of the whole moves fastest there).
  size_t bulk_piece() const override { return peer_socket_ < 0 ? kStreamBulkPiece : 0; }

 private:
  struct Slot;      // one arriving message, complete or still being fetched
  struct Outgoing;  // one posted message still being sent
  UcxChannel(const std::string& peer, const ChannelOptions& options);
  // A worker of `context` with this channel's handler; with `ep_params`, an endpoint on it
  // (the peer's failure reported).
  Status Init(ucp_context_h context, const ucp_ep_params_t* ep_params);
  // The worker-address exchange and endpoint of OverSharedMemory.
  Status ConnectOverSocket();
  // Sets this channel's active-message handler on `worker`.
  Status SetHandler(ucp_worker_h worker);
  // With `peer_failure`, UCX reports the peer's failure (only transports that can detect it are
  // used); without, the endpoint may use any transport and relies on another for that.
  Status CreateEndpoint(ucp_worker_h worker, const ucp_ep_params_t& params, bool peer_failure,
                        ucp_ep_h* ep);
  // shm://: looks at the peer's socket when a millisecond has passed since it last was.
  void WatchPeer(std::chrono::steady_clock::time_point now);
  // shm://: a peer whose socket has ended is gone: what it sent is taken off the worker, then
  // the channel breaks.
  void CheckPeerSocket();
  // Progresses the worker once and, now and then, looks at the peer's socket (WatchPeer) or
  // yields the processor (after 256 idle turns; while WiringUp, after every idle turn, by
  // IdleWhileWiringUp). True when the worker made progress.
  bool ProgressOnce();
  // tcp://: true until the peer's first message has arrived (UCX has then wired the endpoint up),
  // but at most kWireUpWindow after the channel was made.
  bool WiringUp() const { return wiring_up_; }
  // An idle turn while WiringUp: sleeps 10 microseconds (about 60 with the kernel's default timer
  // slack), so that UCX's asynchronous thread,
  // which wires the endpoint up, has the processor at once instead of after a spinning waiter's
  // time slice (on two cores the first round trip over tcp:// took 3.8-7.7 ms spinning, 1.7-1.8
  // ms sleeping, medians of 30-40 set-ups, `channel_bench --setups`). Ends WiringUp past its
  // window.
  void IdleWhileWiringUp();
  Status SendOn(ucp_ep_h ep, const std::string& header, const void* payload, size_t size);
  void CloseEndpoint(ucp_worker_h worker, ucp_ep_h ep);
  // Gives up a send on a broken channel: cancels it (true: it will complete) or, on a shared-memory
  // endpoint, closes the endpoint by force (false: its sends never complete).
  bool CancelSend(void* request);
  // True when a send still waiting after a progress turn (`progressed`: whether the turn did
  // anything) should be given up: the channel is broken and nothing is left to finish it.
  bool GiveUpOnBrokenChannel(bool progressed) const;
  // A slot for an arriving message: a spare one, or a new one.
  std::unique_ptr<Slot> NewSlot();
  // Keeps a slot whose message was handed out for reuse (up to 16).
  void RecycleSlot(std::unique_ptr<Slot> slot);
  // The registration covering [address, address + size), or nullptr.
  ucp_mem_h FindRegistration(const void* address, size_t size) const;
  // The reason the channel is broken: error_, after folding in an abandonment. Owner thread.
  const Status& Failure();

  // Progresses the worker until done() is true, the channel breaks, or timeout_ms passes.
  template <typename Done>
  Status WaitUntil(Done done, int timeout_ms);

  static ucs_status_t OnActiveMessage(void* arg, const void* header, size_t header_length,
                                      void* data, size_t length, const ucp_am_recv_param_t* param);
  static void OnDataFetched(void* request, ucs_status_t status, size_t length, void* user_data);
  static void OnPeerError(void* arg, ucp_ep_h ep, ucs_status_t status);

  std::string peer_;
  ChannelOptions options_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  struct Registration {
    size_t size = 0;
    ucp_mem_h memh = nullptr;
  };
  std::map<uintptr_t, Registration> registered_;  // by base address
  ucp_ep_h ep_ = nullptr;
  int peer_socket_ = -1;  // shm://: the set-up socket, watched for the peer's end
  std::chrono::steady_clock::time_point next_peer_check_;
  unsigned turns_ = 0;
  unsigned idle_turns_ = 0;  // ProgressOnce's turns in a row that did nothing
  bool wiring_up_ = false;   // see WiringUp; cleared by the first arriving message
  std::chrono::steady_clock::time_point wire_up_until_;
  int event_fd_ = -1;
  PayloadPlacer placer_;
  // Large received payloads, reused (the process-wide pool is shared by all channels).
  std::shared_ptr<BufferPool> pool_;
  std::deque<std::unique_ptr<Slot>> arrived_;       // in arrival order
  std::vector<std::unique_ptr<Slot>> spare_slots_;  // handed-out slots kept for reuse
  std::atomic<size_t> queued_{0};                   // arrived_.size(), readable from any thread
  size_t queued_bytes_ = 0;                         // headers and payloads in arrived_
  Status overflow_;                                 // set when the peer passed a queue bound
  bool closing_ = false;                            // the destructor runs: drop arrivals
  std::deque<std::unique_ptr<Outgoing>> outgoing_;  // posted, not yet complete
  Status error_;
  std::atomic<bool> abandoned_{false};
  std::vector<void*> orphaned_;  // sends left incomplete when the channel was abandoned
  struct SendState {
    bool done = false;
    ucs_status_t status = UCS_OK;
  };
  SendState send_state_;   // the send SendOn waits for
  SendState drain_state_;  // the endpoint flush Drain waits for
  struct FetchState {
    bool done = false;
    ucs_status_t status = UCS_OK;
  };
  FetchState fetch_state_;  // the fetch FetchPayload waits for
  // Rendezvous payloads on their way in (fetches started, not landed): while there are any and
  // they move, WaitUntil polls instead of sleeping, since their data arrives faster than a
  // sleeping thread wakes (a TCP 64 MiB copy at 0.71-0.85 of the floor with sleeps, 0.93-1.09
  // without); a payload that stalls for 2 ms lets it sleep again.
  int payloads_in_flight_ = 0;
  void* unfetched_ = nullptr;  // the pending payload of the message Receive returned last
  std::mutex abandon_mu_;
  std::string abandon_reason_;  // under abandon_mu_
};

// The UCX transport's ConnectChannel and CreateListener (tcp:// and shm://; transport/connect.cc
// picks the transport by scheme).
Status ConnectChannel(const TransportUrl& url, const ChannelOptions& options,
                      std::unique_ptr<Channel>* out);
Status CreateListener(const TransportUrl& url, std::unique_ptr<Listener>* out);

}  // namespace rgpu::ucx
