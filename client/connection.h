// Connection: the client's session with one rgpu-server: handshake, then calls that each wait for
// their reply, and posted calls that do not. Thread-safe: calls from several threads are
// serialized on the one channel, in the order they take the lock.
//
// Posted calls with small payloads are gathered into a batch that travels as one message: it
// leaves with the next call that waits (as part of the same message), when it is full, or a short
// delay after its first call (RGPU_BATCH_US, default 200; 0 sends every call at once). At most a
// window of posted calls and bytes is in flight; past it the connection waits for the server to
// catch up, as a GPU's full push buffer blocks the launching thread.
// Once the server is gone (or stops answering keepalives for RGPU_SERVER_TIMEOUT_MS, default
// 10000) every waiting and later call fails with kServerLost; nothing waits forever.
//
// Lanes: once calls come from more than one thread, a thread's waits (cuStreamSynchronize,
// cuEventSynchronize, cuCtxSynchronize, and copies to the host, which wait for their stream) go
// with Call.hand_off: the server waits a short while and, if the work has not ended, says so
// (making no copy). The thread then waits on a lane, another connection to the same session
// (opened on first need, up to the server's Welcome.max_lanes; RGPU_LANES=0 turns them off), so
// that the connection stays free for the other threads, and a copy is asked for again after the
// wait. A lane's call names the last call sent on the connection before it (Call.after_seq),
// which the server serves first: everything the program did before the wait, on any thread,
// comes before it. A program with one thread never uses a lane.
#pragma once

#include <cuda.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "client/biased_mutex.h"
#include "client/liveness_monitor.h"
#include "common/status.h"
#include "proto/calls.h"
#include "proto/ops.h"
#include "proto/rgpu.pb.h"
#include "transport/channel.h"

namespace rgpu::client {

// The error every call returns once the server connection is lost.
constexpr CUresult kServerLost = CUDA_ERROR_DEVICE_UNAVAILABLE;

// Where a reply's payload should land, and how much room there is.
struct ReplyBuffer {
  void* data = nullptr;
  size_t capacity = 0;
};

// True for the errors after which a CUDA context is unusable (a faulting kernel).
bool IsStickyError(CUresult r);

// Posted calls kept instead of sent (Connection::RecordPosts): a Batch of them with their payloads
// at 16-byte boundaries, as GraphRecord takes them (proto/calls.def).
struct PostRecording {
  wire::Batch batch;
  std::string payloads;
  // The server (client/server_set.h index) the recorded calls are for; -1 before the first, and
  // `mixed` once calls for two servers were recorded (such a run cannot be kept by one server).
  int server = -1;
  bool mixed = false;
};

class Connection {
 public:
  // While `recording` is set (not null), the calling thread's posted calls are appended to it
  // instead of sent (the server's graphs, client/graph_record.h); calls that wait still go.
  static void RecordPosts(PostRecording* recording);

  // Connects to `url` (a transport URL, or "local": the in-process server,
  // client/local_server_link.h), sends Hello (with `token`) and waits for Welcome, all within
  // timeout_ms.
  static Status Open(const std::string& url, const std::string& token, int timeout_ms,
                     std::unique_ptr<Connection>* out);

  ~Connection();

  const wire::Welcome& welcome() const { return welcome_; }
  // The URL it connected to (what another server is told to reach this one's session at).
  const std::string& url() const { return url_; }

  // Runs operation C (a struct of proto/calls.h) on the server in session context `ctx` with
  // `args` and an optional payload, and waits for the reply. Its results go to `results` (may be
  // null); a reply payload is written into `reply` (its size to *reply_size) and must fit its
  // capacity. Returns the call's CUresult (CUDA_ERROR_UNKNOWN for a reply whose results are not
  // the operation's).
  template <typename C>
  CUresult Call(uint64_t ctx, const typename C::Args& args, typename C::Results* results = nullptr,
                const void* payload = nullptr, size_t payload_size = 0, ReplyBuffer reply = {},
                size_t* reply_size = nullptr) {
    uint64_t raw[kMaxArgs];
    const size_t n = calls::EncodeArgs(args, raw);
    std::vector<uint64_t> values;
    CUresult r = CallRaw(C::kOp, ctx, std::span<const uint64_t>(raw, n), payload, payload_size,
                         results != nullptr ? &values : nullptr, reply, reply_size);
    if (r == CUDA_SUCCESS && results != nullptr &&
        !calls::DecodeResults(values.data(), values.size(), results)) {
      return MalformedReply(C::kOp);
    }
    return r;
  }

  // Sends operation C, a stream-ordered (kAsync) one, without waiting for its reply. With
  // `payload_stays_valid` (pinned memory the program may not touch until it synchronizes) the
  // payload may still be read after this returns, until the next Call; otherwise it has been
  // sent or copied when this returns. A failure on the server surfaces at the next Call.
  template <typename C>
  CUresult Post(uint64_t ctx, const typename C::Args& args, const void* payload = nullptr,
                size_t payload_size = 0, bool payload_stays_valid = false) {
    static_assert(C::kMode == CallMode::kAsync, "only kAsync operations may be posted");
    uint64_t raw[kMaxArgs];
    const size_t n = calls::EncodeArgs(args, raw);
    return PostRaw(C::kOp, ctx, std::span<const uint64_t>(raw, n), payload, payload_size,
                   payload_stays_valid);
  }

  // Waits until at most `keep` of the latest posted payloads have not left yet (the others may be
  // reused), without waiting for replies.
  CUresult WaitSent(size_t keep = 0);

  // The sticky error the server reported for context `ctx` (a session-local id; a faulting
  // kernel's), or CUDA_SUCCESS: what a call on the context that makes no round trip answers.
  CUresult StickyError(uint64_t ctx);

  // Registers pinned host memory with the transport (Channel::RegisterMemory) and drops it.
  Status RegisterHostMemory(void* address, size_t size);
  void UnregisterHostMemory(void* address);

  // For the library's unload path: sends the batch being built and stops the batch-delay thread,
  // so that no thread of the connection's own sends while the process tears the transport down.
  // Posted calls made afterwards (from later exit handlers) leave at once. Idempotent. Waits up
  // to wait_ms (-1: as long as it takes) for a call in progress on another thread; past that it
  // does nothing.
  void StopBatching(int wait_ms);

  // The untyped forms of Call and Post, over encoded arguments (what client/server_set.h sends
  // after routing them): `values` receives the reply's result values.
  CUresult CallRaw(Op op, uint64_t ctx, std::span<const uint64_t> args, const void* payload,
                   size_t payload_size, std::vector<uint64_t>* values, ReplyBuffer reply,
                   size_t* reply_size);
  CUresult PostRaw(Op op, uint64_t ctx, std::span<const uint64_t> args, const void* payload,
                   size_t payload_size, bool payload_stays_valid);
  // Logs a reply whose results do not decode as `op`'s and returns CUDA_ERROR_UNKNOWN.
  static CUresult MalformedReply(Op op);
  // The calling thread's recording (RecordPosts), or nullptr.
  static PostRecording* Recording();

  bool broken();
  // Posted reads (MemcpyDtoHPosted, proto/calls.def): a copy out into the program's pinned memory
  // that costs no round trip; its bytes arrive (ReadData) before the reply to any later call.
  // True when reads may be posted now: unless RGPU_POSTED_READS=0, not in a program whose waits
  // go to lanes (several threads, lanes offered: a read waiting for its bytes keeps every wait on
  // this connection, where a long one would hold up the other threads' calls), and not while the
  // calling thread's posts are recorded.
  bool PostsReads() {
    return posted_reads_enabled_ && !WaitsMayGoToLanes() && Recording() == nullptr;
  }
  // Registers `dst` (`bytes` long, pinned, of context `ctx`, a session id) for a read about to
  // be posted; returns the read's token for MemcpyDtoHPosted. While any read is registered, waits
  // stay on this connection. Thread-safe.
  uint64_t ExpectRead(void* dst, size_t bytes, uint64_t ctx);
  // Marks the read `token` posted (its MemcpyDtoHPosted has been queued on this connection).
  void ReadPosted(uint64_t token);
  // Drops a registered read whose post failed.
  void ForgetRead(uint64_t token);
  // Waits until every read posted so far has arrived (a synchronize of each context that has
  // one; a read the synchronize did not bring is dropped): before the program frees pinned
  // memory. A read registered by another thread but not yet posted is not waited for.
  void AwaitReads();
  // True when a wait sent now may be handed to a lane (several threads, lanes offered): the
  // server holds the session for it only briefly. Synchronous copies to the device then wait for
  // their stream with such a wait before they are posted (client/api_memory.cc).
  bool HandsOffWaits() { return WantsLane(Op::kStreamSynchronize); }
  // Lanes opened so far (for tests and logs).
  size_t lanes_opened();
  // The connection's Channel::bulk_piece() (0: large payloads go whole). Any thread.
  size_t bulk_piece() const { return bulk_piece_.load(std::memory_order_relaxed); }
  // The transport lanes in use, for logs.
  std::string DescribeTransport();

 private:
  static constexpr size_t kMaxArgs = calls::kMaxArgCount;
  Connection() = default;
  CUresult Fail(const std::string& why);
  // The parts of Call and Post that run with mu_ held. `surface_async_error`: an earlier posted
  // call's failure may be returned by this call (false for the connection's own barriers).
  CUresult CallLocked(Op op, uint64_t ctx, std::span<const uint64_t> args, const void* payload,
                      size_t payload_size, std::vector<uint64_t>* values, ReplyBuffer reply,
                      size_t* reply_size, bool surface_async_error);
  // Appends a call to the batch being built (its payload is copied).
  void AddToBatch(const wire::Call& call, const void* payload, size_t size);
  // Sends the batch as one message, if it holds any call.
  Status SendBatch();
  // Waits for the server when posting `payload_size` more bytes would overfill the in-flight
  // window (a payload larger than the window then travels alone).
  CUresult ThrottleLocked(size_t payload_size);
  // The batch-delay thread: sends a batch that waited `delay_us` for company and did not leave
  // with a call meanwhile. It waits without mu_ and takes it only to send such a batch, as a
  // guest of mu_'s bias that does not count toward ending it.
  void FlushLoop(int delay_us);
  // A lane: its own channel to the session, used by one thread at a time.
  struct Lane {
    std::unique_ptr<Channel> channel;
    uint64_t next_seq = 1;
    bool busy = false;
    bool dead = false;  // its server ended it (the session moved): dropped when released
  };
  // Notes the calling thread: a second one turns lanes on.
  void NoteThread();
  // True when `op` should wait on a lane now (a wait, several threads, lanes offered).
  bool WantsLane(Op op);
  // Several threads, lanes enabled and offered by the server.
  bool WaitsMayGoToLanes() {
    return lanes_enabled_ && multi_threaded_.load() && lanes_offered_.load() > 0;
  }
  // Runs a wait on a free lane (opening one when none is free and the server allows more).
  // False (nothing sent) when no lane can be had: the caller then uses the connection.
  bool CallOnLane(Op op, uint64_t ctx, std::span<const uint64_t> args, CUresult* result);
  // A free lane, marked busy; null when none can be had.
  Lane* AcquireLane();
  void ReleaseLane(Lane* lane);
  // Connects a new lane and joins the session (LaneJoin, answered by a Welcome).
  Status OpenLane(std::unique_ptr<Channel>* out);
  // The session moved to another server (Reply.moved, docs/migration.md): connects there,
  // resumes the session with the credential, and makes that connection the session's (mu_
  // held). The lanes of the old server are dropped; new ones open there when needed. A server
  // that restored the session in a process of its own redirects the resume there (once).
  Status MoveLocked(const wire::Moved& moved);
  // Resumes session `session_id` at `url_text` proving `credential`: the connection and its
  // Welcome (which may redirect), or why not.
  Status ResumeAt(const std::string& url_text, uint64_t session_id, const std::string& credential,
                  std::unique_ptr<Channel>* out, wire::Welcome* welcome);
  // Where an arriving payload goes (the channel's PayloadPlacer): a posted read's destination,
  // the awaited reply's buffer, or the channel's own (a read no longer registered). mu_ held:
  // called inside the channel's calls.
  void* PlacePayload(const std::string& header, size_t size);
  // Applies a reply's asynchronous error and sticky state and returns the call's result, as
  // CallLocked does (mu_ held).
  CUresult ApplyReplyLocked(Op op, uint64_t ctx, const wire::Reply& r, bool surface_async_error);
  // The part of ApplyReplyLocked every reply needs, compact ones included: a sticky `result`,
  // and an earlier posted call's failure returned in its place when it may be.
  CUresult ApplyResultLocked(Op op, uint64_t ctx, CUresult result, bool surface_async_error);
  // Ends every wait on the server: the connection's and every lane's (the server is gone).
  void AbandonAll(const std::string& why);
  // Starts the keepalive monitor of the session welcome_ describes, on `host`'s liveness port,
  // unless the Welcome offers none or RGPU_SERVER_TIMEOUT_MS is 0; a monitor that cannot start
  // is logged and the session goes on without one.
  void StartKeepalives(const std::string& host);
  // Takes a ReadData message: its bytes (unless they already landed in place) into the
  // destination, a failure as a posted call's (mu_ held).
  void TakeRead(const wire::ReadData& read, const ReceivedMessage& m);

  // A registered read: where its bytes go.
  struct ExpectedRead {
    void* dst = nullptr;
    size_t bytes = 0;
    uint64_t ctx = 0;
    // Its MemcpyDtoHPosted has been queued (ReadPosted): a synchronize sent after that brings
    // its bytes. Until then another thread's AwaitReads leaves it registered.
    bool posted = false;
  };

  // The connection's lock: without atomic instructions for a program that calls from one thread
  // (client/biased_mutex.h).
  BiasedMutex mu_;
  std::unique_ptr<Channel> channel_;
  std::atomic<size_t> bulk_piece_{0};  // channel_->bulk_piece(), set with channel_
  wire::Welcome welcome_;
  uint64_t next_seq_ = 1;
  wire::Envelope posted_;     // reused for every posted call
  wire::Envelope waited_;     // reused for every call that waits, and its encoding
  std::string waited_bytes_;  // (or the call's compact frame, proto/compact_frame.h)
  // A posted call's failure, reported by the server, not yet returned to the program.
  CUresult async_error_ = CUDA_SUCCESS;
  // Contexts (session ids) that hit an error CUDA makes sticky: every later call on them fails
  // with it at once, as the driver's do.
  std::map<uint64_t, CUresult> sticky_;
  std::map<uint64_t, ExpectedRead> reads_;   // registered reads by token (under mu_)
  uint64_t next_read_token_ = 1;             // (under mu_)
  std::atomic<size_t> reads_registered_{0};  // reads_.size(), read without mu_
  // Some read has been registered: a ReadData's bytes may come, and must never be placed where a
  // reply's go (PlacePayload), even when its read is no longer registered.
  std::atomic<bool> reads_expected_{false};
  ReplyBuffer pending_reply_;  // the destination of the reply now awaited
  // Every awaited reply is received into this one (under mu_): the channel swaps header buffers
  // with it, so a reply's header (a compact one is 24 bytes, past std::string's inline 15)
  // costs no allocation once warm.
  ReceivedMessage reply_message_;
  bool lost_ = false;
  bool said_goodbye_ = false;  // the Goodbye of the program's exit has been sent
  // Posted calls not yet sent, as one Envelope.batch, and their payloads back to back.
  wire::Envelope batch_;
  std::string batch_payload_;
  // Counts batches started (written under mu_, read by the delay thread without it).
  std::atomic<uint64_t> batch_generation_{0};
  // The generation of the last batch that left (written under mu_, read by the delay thread).
  std::atomic<uint64_t> sent_generation_{0};
  int batch_delay_us_ = 200;
  // Posted calls (and their payload bytes) sent since the last reply.
  size_t in_flight_calls_ = 0;
  size_t in_flight_bytes_ = 0;
  std::string url_;  // where the lanes connect (under mu_; it changes when the session moves)
  // Pinned host memory registered with the channel, registered again with the next one.
  std::map<void*, size_t> registered_;  // under mu_
  ChannelOptions channel_options_;
  int open_timeout_ms_ = 10000;
  // The first thread that made a call, and whether another one has since.
  std::atomic<uint64_t> first_thread_{0};
  std::atomic<bool> multi_threaded_{false};
  bool lanes_enabled_ = true;         // RGPU_LANES != 0
  bool posted_reads_enabled_ = true;  // RGPU_POSTED_READS != 0
  bool hand_off_ = false;     // the wait CallLocked sends may be handed to a lane (under mu_)
  uint64_t round_trips_ = 0;  // waited calls so far, for the debug log (under mu_)
  bool handed_off_ = false;   // ... and it was (under mu_)
  std::mutex lanes_mu_;  // guards lanes_ (their busy flags) and lanes_failed_; never taken in mu_
  std::condition_variable lanes_cv_;  // a lane was released
  std::vector<std::unique_ptr<Lane>> lanes_;
  bool lanes_failed_ = false;  // a lane could not be opened: the connection serves waits
  // Welcome.max_lanes of the session's server (0: no lanes), read without mu_.
  std::atomic<uint32_t> lanes_offered_{0};
  std::thread flusher_;
  bool closing_ = false;  // under mu_
  // The delay thread's wait and end (taken after mu_ where both are, never before it).
  std::mutex flush_mu_;
  std::condition_variable flush_cv_;
  bool flush_closing_ = false;  // (under flush_mu_)
  // Declared last, destroyed first: stops watching before the channel goes.
  std::unique_ptr<LivenessMonitor> liveness_;
};

}  // namespace rgpu::client
