#include "client/connection.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include <google/protobuf/arena.h>

#include "client/local_server_link.h"
#include "client/session_host_url.h"
#include "client/thread_setup.h"
#include "common/log.h"
#include "proto/compact_frame.h"
#include "proto/protocol_version.h"
#include "proto/session_proof.h"

namespace rgpu::client {

Status Connection::Open(const std::string& url_text, const std::string& token, int timeout_ms,
                        std::unique_ptr<Connection>* out) {
  ChannelOptions options;
  if (const char* poll = getenv("RGPU_POLL_US")) options.poll_us = atoi(poll);
  std::unique_ptr<Connection> c(new Connection());
  TransportUrl url;
  Status s;
  if (url_text == kLocalServer) {
    s = ConnectLocalServer(options, &c->channel_);
  } else {
    s = TransportUrl::Parse(url_text, &url);
    if (s.ok()) s = ConnectChannel(url, options, &c->channel_);
  }
  if (!s.ok()) return s;
  c->url_ = url_text;
  c->bulk_piece_ = c->channel_->bulk_piece();
  c->channel_options_ = options;
  c->open_timeout_ms_ = timeout_ms;
  if (const char* lanes = getenv("RGPU_LANES")) c->lanes_enabled_ = atoi(lanes) != 0;
  if (const char* reads = getenv("RGPU_POSTED_READS")) c->posted_reads_enabled_ = atoi(reads) != 0;
  Connection* self = c.get();
  c->channel_->SetPayloadPlacer([self](const std::string& header, size_t size) -> void* {
    return self->PlacePayload(header, size);
  });

  wire::Envelope hello;
  wire::Hello* h = hello.mutable_hello();
  h->set_protocol_version(kProtocolVersion);
  char exe[256] = {};
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  h->set_client_name(n > 0 ? std::string(exe, n) : "?");
  h->set_pid(static_cast<uint32_t>(getpid()));
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  h->set_hostname(host);
  // The credential is presented, never sent: the server challenges and the client proves it
  // holds it (proto/session_proof.h).
  CredentialProver prover;
  if (!token.empty()) {
    s = CredentialProver::Parse(token, &prover);
    if (!s.ok()) return PermissionDenied("RGPU_TOKEN: " + s.message());
    *h->mutable_credential() = prover.presented();
  }
  s = c->channel_->Send(hello.SerializeAsString(), nullptr, 0);
  if (!s.ok()) return s;
  ReceivedMessage m;
  s = c->channel_->Receive(timeout_ms, &m);
  if (!s.ok()) return Unavailable("no answer from " + url_text + ": " + s.message());
  wire::Envelope reply;
  if (!reply.ParseFromArray(m.header.data(), static_cast<int>(m.header.size()))) {
    return ProtocolError("server at " + url_text + " did not answer the handshake");
  }
  if (reply.body_case() == wire::Envelope::kChallenge) {
    if (token.empty()) return PermissionDenied("the server requires a token (RGPU_TOKEN)");
    s = AnswerChallenge(c->channel_.get(), prover, timeout_ms, &reply);
    if (!s.ok()) return Unavailable("handshake with " + url_text + ": " + s.message());
  }
  if (reply.body_case() != wire::Envelope::kWelcome) {
    return ProtocolError("server at " + url_text + " did not answer the handshake");
  }
  if (reply.welcome().status() == CUDA_ERROR_DEVICE_UNAVAILABLE) {
    return ResourceExhausted("server refused the session: " + reply.welcome().error());
  }
  if (reply.welcome().status() != 0) {
    return PermissionDenied("server refused the session: " + reply.welcome().error());
  }
  if (reply.welcome().redirect_port() != 0) {
    // The session runs in a process of its own (server/session_host.h): the same host and
    // scheme, its port, its one credential. A redirect never leads to another.
    if (url_text == kLocalServer || token == reply.welcome().redirect_token()) {
      return ProtocolError("server at " + url_text + " sent a redirect it cannot have meant");
    }
    static thread_local bool redirected = false;
    if (redirected) return ProtocolError("session host at " + url_text + " redirected again");
    TransportUrl host;
    s = SessionHostUrl(url, reply.welcome(), &host);
    if (!s.ok()) return s;
    const std::string redirect_token = reply.welcome().redirect_token();
    c.reset();  // this connection carries nothing more
    redirected = true;
    s = Open(host.ToString(), redirect_token, timeout_ms, out);
    redirected = false;
    return s;
  }
  c->welcome_ = reply.welcome();
  c->lanes_offered_ = c->welcome_.lane_key().empty() ? 0 : c->welcome_.max_lanes();
  if (const char* us = getenv("RGPU_BATCH_US")) c->batch_delay_us_ = std::max(0, atoi(us));
  if (c->batch_delay_us_ > 0) {
    c->flusher_ = std::thread([self, delay_us = c->batch_delay_us_] { self->FlushLoop(delay_us); });
  }
  c->StartKeepalives(url.host);
  *out = std::move(c);
  return Status::Ok();
}

void* Connection::PlacePayload(const std::string& header, size_t size) {
  if (reads_expected_.load()) {
    wire::Envelope in;
    if (in.ParseFromString(header) && in.body_case() == wire::Envelope::kReadData) {
      // A read's bytes go to its destination, or (no longer registered) to the channel's buffer.
      auto it = reads_.find(in.read_data().token());
      return it != reads_.end() && it->second.bytes == size ? it->second.dst : nullptr;
    }
  }
  return size <= pending_reply_.capacity ? pending_reply_.data : nullptr;
}

bool IsStickyError(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
      return true;
    default:
      return false;
  }
}

CUresult Connection::StickyError(uint64_t ctx) {
  std::lock_guard<BiasedMutex> lock(mu_);
  if (lost_) return kServerLost;
  auto it = sticky_.find(ctx);
  return ctx != 0 && it != sticky_.end() ? it->second : CUDA_SUCCESS;
}

CUresult Connection::WaitSent(size_t keep) {
  std::lock_guard<BiasedMutex> lock(mu_);
  if (lost_) return kServerLost;
  Status s = SendBatch();
  if (s.ok()) s = channel_->Flush(keep);
  return s.ok() ? CUDA_SUCCESS : Fail(s.ToString());
}

Status Connection::RegisterHostMemory(void* address, size_t size) {
  std::lock_guard<BiasedMutex> lock(mu_);
  Status s = channel_->RegisterMemory(address, size);
  if (s.ok()) registered_[address] = size;
  return s;
}

void Connection::UnregisterHostMemory(void* address) {
  std::lock_guard<BiasedMutex> lock(mu_);
  channel_->UnregisterMemory(address);
  registered_.erase(address);
}

bool Connection::broken() {
  std::lock_guard<BiasedMutex> lock(mu_);
  return lost_;
}

std::string Connection::DescribeTransport() {
  std::lock_guard<BiasedMutex> lock(mu_);
  return channel_->Describe();
}

CUresult Connection::Fail(const std::string& why) {
  if (!lost_) RGPU_LOG_ERROR("lost the server: %s", why.c_str());
  lost_ = true;
  return kServerLost;
}

namespace {
// Posted calls whose payload is at most this small travel in batches; larger ones alone.
constexpr size_t kBatchPayloadLimit = 16 * 1024;
// A batch is sent once it holds this many calls or payload bytes.
constexpr int kBatchCalls = 128;
constexpr size_t kBatchBytes = 64 * 1024;
// The largest batch: under kBatchBytes, then one posted call's payload and the waited call's,
// each after up to 15 bytes of alignment. The server refuses larger ones unread.
static_assert(kBatchBytes + 2 * (kBatchPayloadLimit + 15) <= kMaxBatchPayloadBytes);
// The in-flight window: posted calls (and bytes) sent without a reply before the connection
// waits for the server. Well below the server's default queue bounds (4096 messages, 1 GiB).
constexpr size_t kWindowCalls = 2048;
constexpr size_t kWindowBytes = size_t{256} << 20;
}  // namespace

Connection::~Connection() { StopBatching(-1); }

void Connection::StopBatching(int wait_ms) {
  {
    std::unique_lock<BiasedMutex> lock(mu_, std::defer_lock);
    // Another thread may be inside a call that waits for the server (a long synchronize) while
    // the process exits: exit is not held up for it.
    for (int waited = 0; !lock.try_lock(); ++waited) {
      if (wait_ms >= 0 && waited >= wait_ms) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!lost_ && channel_ != nullptr) {  // none: Open failed to connect
      // The process may exit right after this: what was sent must have left it, and the
      // server is told the program is ending (what its exit path still sends is served; the
      // session then counts as ended by its client, not lost).
      constexpr int kDrainMs = 1000;
      Status s = SendBatch();
      if (s.ok() && !said_goodbye_) {
        wire::Envelope bye;
        bye.mutable_goodbye()->set_status(0);
        bye.mutable_goodbye()->set_reason("the program is exiting");
        s = channel_->Send(bye.SerializeAsString(), nullptr, 0);
        said_goodbye_ = true;
      }
      if (s.ok()) s = channel_->Drain(kDrainMs);
      if (!s.ok()) Fail(s.ToString());
    }
    closing_ = true;
    batch_delay_us_ = 0;
  }
  {
    std::lock_guard<std::mutex> lock(flush_mu_);
    flush_closing_ = true;
  }
  flush_cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
}

void Connection::AddToBatch(const wire::Call& call, const void* payload, size_t size) {
  wire::Batch* b = batch_.mutable_batch();
  *b->add_calls() = call;
  b->add_payload_sizes(size);
  if (size > 0) {
    // Each call's payload starts at a 16-byte boundary (rgpu.proto, Batch).
    batch_payload_.resize((batch_payload_.size() + 15) & ~size_t{15});
    batch_payload_.append(static_cast<const char*>(payload), size);
  }
  if (b->calls_size() == 1 && batch_delay_us_ > 0) {
    batch_generation_.store(batch_generation_.load(std::memory_order_relaxed) + 1,
                            std::memory_order_relaxed);
    { std::lock_guard<std::mutex> lock(flush_mu_); }  // the delay thread is waiting, or sees it
    flush_cv_.notify_one();
  }
}

Status Connection::SendBatch() {
  if (!batch_.has_batch() || batch_.batch().calls_size() == 0) return Status::Ok();
  Status s =
      channel_->Send(batch_.SerializeAsString(), batch_payload_.data(), batch_payload_.size());
  batch_.mutable_batch()->Clear();
  batch_payload_.clear();
  sent_generation_.store(batch_generation_.load(std::memory_order_relaxed),
                         std::memory_order_release);
  return s;
}

void Connection::FlushLoop(int delay_us) {
  BiasedMutex::DoNotCountThisThread();  // at most one batch per delay
  std::unique_lock<std::mutex> lock(flush_mu_);
  uint64_t seen = 0;
  while (!flush_closing_) {
    flush_cv_.wait(lock, [&] { return flush_closing_ || batch_generation_.load() != seen; });
    if (flush_closing_) break;
    // A batch was started: give it a little while to fill, then send what is there.
    const uint64_t generation = batch_generation_.load();
    flush_cv_.wait_for(lock, std::chrono::microseconds(delay_us), [&] { return flush_closing_; });
    seen = generation;
    if (flush_closing_ || batch_generation_.load() != generation) continue;  // a newer one waits
    if (sent_generation_.load(std::memory_order_acquire) >= generation) continue;  // it left
    lock.unlock();
    {
      std::lock_guard<BiasedMutex> state(mu_);
      if (!closing_ && !lost_ && batch_generation_ == generation) {
        Status s = SendBatch();
        if (!s.ok()) Fail(s.ToString());
      }
    }
    lock.lock();
  }
}

CUresult Connection::ThrottleLocked(size_t payload_size) {
  if (in_flight_calls_ == 0) return CUDA_SUCCESS;
  if (in_flight_calls_ < kWindowCalls && in_flight_bytes_ + payload_size <= kWindowBytes) {
    return CUDA_SUCCESS;
  }
  return CallLocked(Op::kBarrier, 0, {}, nullptr, 0, nullptr, {}, nullptr, false);
}

CUresult Connection::MalformedReply(Op op) {
  const OpInfo* info = FindOp(static_cast<uint32_t>(op));
  RGPU_LOG_WARN("the server's reply to %s does not hold its results", info ? info->name : "?");
  return CUDA_ERROR_UNKNOWN;
}

namespace {
thread_local PostRecording* t_recording = nullptr;
}  // namespace

void Connection::RecordPosts(PostRecording* recording) { t_recording = recording; }

PostRecording* Connection::Recording() { return t_recording; }

CUresult Connection::PostRaw(Op op, uint64_t ctx, std::span<const uint64_t> args,
                             const void* payload, size_t payload_size, bool payload_stays_valid) {
  if (PostRecording* rec = t_recording; rec != nullptr) {
    wire::Call* call = rec->batch.add_calls();
    call->set_op(static_cast<uint32_t>(op));
    call->set_ctx(ctx);
    call->set_posted(true);
    for (uint64_t a : args) call->add_args(a);
    rec->batch.add_payload_sizes(payload_size);
    if (payload_size != 0) {
      rec->payloads.resize((rec->payloads.size() + 15) & ~size_t{15});
      rec->payloads.append(static_cast<const char*>(payload), payload_size);
    }
    return CUDA_SUCCESS;
  }
  NoteThread();
  std::lock_guard<BiasedMutex> lock(mu_);
  if (lost_) return kServerLost;
  if (auto it = sticky_.find(ctx); ctx != 0 && it != sticky_.end()) return it->second;
  CUresult r = ThrottleLocked(payload_size);
  if (r != CUDA_SUCCESS) return r;
  wire::Call* call = posted_.mutable_call();
  call->set_seq(next_seq_++);
  call->set_op(static_cast<uint32_t>(op));
  call->set_ctx(ctx);
  call->set_posted(true);
  call->clear_args();
  for (uint64_t a : args) call->add_args(a);
  ++in_flight_calls_;
  in_flight_bytes_ += payload_size;
  if (payload_size <= kBatchPayloadLimit) {
    AddToBatch(*call, payload, payload_size);
    if (batch_delay_us_ == 0 || batch_.batch().calls_size() >= kBatchCalls ||
        batch_payload_.size() >= kBatchBytes) {
      Status s = SendBatch();
      if (!s.ok()) return Fail(s.ToString());
    }
    return CUDA_SUCCESS;
  }
  // Large payloads go on their own, after what was batched before them.
  Status s = SendBatch();
  if (!s.ok()) return Fail(s.ToString());
  std::string header = posted_.SerializeAsString();
  s = payload_stays_valid ? channel_->Post(std::move(header), payload, payload_size)
                          : channel_->Send(header, payload, payload_size);
  if (!s.ok()) return Fail(s.ToString());
  return CUDA_SUCCESS;
}

CUresult Connection::CallRaw(Op op, uint64_t ctx, std::span<const uint64_t> args,
                             const void* payload, size_t payload_size,
                             std::vector<uint64_t>* values, ReplyBuffer reply_buffer,
                             size_t* reply_size) {
  NoteThread();
  if (!WantsLane(op)) {
    std::lock_guard<BiasedMutex> lock(mu_);
    return CallLocked(op, ctx, args, payload, payload_size, values, reply_buffer, reply_size, true);
  }
  // A wait of a program with several threads: on the connection, which the server holds only
  // briefly (Call.hand_off); when the work has not ended by then, on a lane.
  {
    std::lock_guard<BiasedMutex> lock(mu_);
    hand_off_ = true;
    const CUresult r =
        CallLocked(op, ctx, args, payload, payload_size, values, reply_buffer, reply_size, true);
    hand_off_ = false;
    if (!handed_off_) return r;
    handed_off_ = false;
  }
  CUresult result = CUDA_SUCCESS;
  if (op == Op::kMemcpyDtoH) {
    // A copy out behind long work: the work is waited for on a lane (its stream: the copy's
    // third argument), then the copy is made.
    const uint64_t stream[] = {args[2]};
    if (CallOnLane(Op::kStreamSynchronize, ctx, stream, &result) && result != CUDA_SUCCESS) {
      return result;
    }
  } else if (CallOnLane(op, ctx, args, &result)) {
    return result;
  }
  std::lock_guard<BiasedMutex> lock(mu_);  // no lane to be had: the connection waits after all
  return CallLocked(op, ctx, args, payload, payload_size, values, reply_buffer, reply_size, true);
}

CUresult Connection::CallLocked(Op op, uint64_t ctx, std::span<const uint64_t> args,
                                const void* payload, size_t payload_size,
                                std::vector<uint64_t>* values, ReplyBuffer reply_buffer,
                                size_t* reply_size, bool surface_async_error) {
  if (lost_) return kServerLost;
  if (auto it = sticky_.find(ctx); ctx != 0 && it != sticky_.end()) return it->second;
  const uint64_t seq = next_seq_++;
  const bool closes_batch =
      batch_.has_batch() && batch_.batch().calls_size() > 0 && payload_size <= kBatchPayloadLimit;
  // A call that travels alone and is not handed off goes as a compact frame, without protobuf
  // (proto/compact_frame.h); otherwise as an Envelope, reused from call to call (no allocation
  // once warm), as is the encoding.
  const bool compact_call = !closes_batch && !hand_off_ && args.size() <= compact::kMaxWords;
  if (!compact_call) {
    wire::Call* call = waited_.mutable_call();
    call->Clear();
    call->set_seq(seq);
    call->set_op(static_cast<uint32_t>(op));
    call->set_ctx(ctx);
    for (uint64_t a : args) call->add_args(a);
    if (hand_off_) call->set_hand_off(true);
  }
  if (LogEnabled(LogLevel::kDebug)) {
    const OpInfo* info = FindOp(static_cast<uint32_t>(op));
    RGPU_LOG_DEBUG("round trip %llu: %s (after %d posted)", (unsigned long long)++round_trips_,
                   info != nullptr ? info->name : "?",
                   batch_.has_batch() ? batch_.batch().calls_size() : 0);
  }
  Status s;
  if (closes_batch) {
    // The waited-for call closes the batch: one message for the whole round trip.
    AddToBatch(waited_.call(), payload, payload_size);
    s = SendBatch();
  } else {
    s = SendBatch();
    if (s.ok()) {
      if (compact_call) {
        compact::EncodeCall(static_cast<uint32_t>(op), seq, ctx, args, &waited_bytes_);
      } else {
        waited_.SerializeToString(&waited_bytes_);
      }
      s = channel_->Send(waited_bytes_, payload, payload_size);
    }
  }
  if (!s.ok()) return Fail(s.ToString());
  pending_reply_ = reply_buffer;
  const OpInfo* info = FindOp(static_cast<uint32_t>(op));
  // The end of a round trip, once its reply has arrived (in `m`) and been decoded: its result
  // `code`, `value_count` values read with value(i), and the whole Reply when it came as an
  // Envelope (`full`; null for a compact reply, which carries nothing else).
  auto finish = [&](int32_t code, size_t value_count, auto value, const ReceivedMessage& m,
                    const wire::Reply* full) -> CUresult {
    pending_reply_ = {};
    in_flight_calls_ = in_flight_bytes_ = 0;  // the server has taken every earlier call
    // Every posted call before this one has been executed, so their payloads have been read.
    Status flushed = channel_->Flush();
    if (!flushed.ok()) return Fail(flushed.ToString());
    // A wait handed to a lane: its result, and an earlier failure, are the lane's to report.
    handed_off_ = full != nullptr && hand_off_ && full->handed_off();
    const CUresult result =
        full != nullptr
            ? ApplyReplyLocked(op, ctx, *full, surface_async_error && !handed_off_)
            : ApplyResultLocked(op, ctx, static_cast<CUresult>(code), surface_async_error);
    if (values != nullptr) {
      values->resize(value_count);
      for (size_t i = 0; i < value_count; ++i) (*values)[i] = value(i);
    }
    if (m.payload_size > 0) {
      if (m.payload_size > reply_buffer.capacity) {
        return Fail("reply payload larger than the buffer it was meant for");
      }
      if (m.payload != reply_buffer.data) memcpy(reply_buffer.data, m.payload, m.payload_size);
    }
    if (reply_size != nullptr) *reply_size = m.payload_size;
    // A successful reply must carry the values its operation promises.
    if (code == CUDA_SUCCESS && info != nullptr &&
        value_count < static_cast<size_t>(info->result_count)) {
      return Fail(std::string("short reply to ") + info->name);
    }
    return result;
  };
  for (;;) {
    ReceivedMessage& m = reply_message_;
    s = channel_->Receive(-1, &m);
    if (!s.ok()) {
      pending_reply_ = {};
      return Fail(s.ToString());
    }
    if (compact::IsCompact(m.header)) {
      compact::Reply r;
      if (!compact::DecodeReply(m.header, &r)) {
        pending_reply_ = {};
        return Fail("malformed message from server");
      }
      if (r.seq() != seq) {
        RGPU_LOG_WARN("ignoring a reply to call %llu while waiting for %llu",
                      (unsigned long long)r.seq(), (unsigned long long)seq);
        continue;
      }
      return finish(
          r.result(), r.value_count(), [&](size_t i) { return r.value(i); }, m, nullptr);
    }
    // Decoded on an arena whose first block is on the stack: no allocation for a reply.
    alignas(16) char block[2048];
    google::protobuf::ArenaOptions arena_options;
    arena_options.initial_block = block;
    arena_options.initial_block_size = sizeof block;
    google::protobuf::Arena arena(arena_options);
    wire::Envelope& in = *google::protobuf::Arena::CreateMessage<wire::Envelope>(&arena);
    if (!in.ParseFromArray(m.header.data(), static_cast<int>(m.header.size()))) {
      pending_reply_ = {};
      return Fail("malformed message from server");
    }
    if (in.body_case() == wire::Envelope::kGoodbye) {
      pending_reply_ = {};
      return Fail("server closed the session: " + in.goodbye().reason());
    }
    if (in.body_case() == wire::Envelope::kReadData) {
      TakeRead(in.read_data(), m);
      continue;
    }
    if (in.body_case() != wire::Envelope::kReply || in.reply().seq() != seq) {
      RGPU_LOG_WARN("ignoring unexpected message from server (kind %d)",
                    static_cast<int>(in.body_case()));
      continue;
    }
    if (in.reply().has_moved()) {
      // The session left that server before this call ran: everything before it ran there (what
      // it left for the program comes with this answer); the call goes again where it went,
      // encoded as it was.
      pending_reply_ = {};
      in_flight_calls_ = in_flight_bytes_ = 0;
      ApplyReplyLocked(op, ctx, in.reply(), false);
      s = MoveLocked(in.reply().moved());
      if (!s.ok()) return Fail("the session moved but could not be resumed: " + s.ToString());
      if (closes_batch) waited_.SerializeToString(&waited_bytes_);
      s = channel_->Send(waited_bytes_, payload, payload_size);
      if (!s.ok()) return Fail(s.ToString());
      pending_reply_ = reply_buffer;
      continue;
    }
    const wire::Reply& r = in.reply();
    return finish(
        r.result(), r.values_size(), [&](size_t i) { return r.values(i); }, m, &r);
  }
}

CUresult Connection::ApplyReplyLocked(Op op, uint64_t ctx, const wire::Reply& r,
                                      bool surface_async_error) {
  if (!r.device_output().empty()) {
    // Device printf output belongs on the program's standard output.
    const std::string& out = r.device_output();
    for (size_t done = 0; done < out.size();) {
      ssize_t n = write(1, out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
  }
  const OpInfo* info = FindOp(static_cast<uint32_t>(op));
  if (r.result() != CUDA_SUCCESS && !r.message().empty()) {
    RGPU_LOG_DEBUG("%s failed on the server: %d (%s)", info ? info->name : "?", r.result(),
                   r.message().c_str());
  }
  if (r.async_error() != CUDA_SUCCESS) {
    RGPU_LOG_DEBUG("an earlier asynchronous call failed: %d (%s)", r.async_error(),
                   r.async_error_detail().c_str());
    if (async_error_ == CUDA_SUCCESS) async_error_ = static_cast<CUresult>(r.async_error());
    if (IsStickyError(static_cast<CUresult>(r.async_error())) && r.async_error_ctx() != 0) {
      sticky_.emplace(r.async_error_ctx(), static_cast<CUresult>(r.async_error()));
    }
  }
  return ApplyResultLocked(op, ctx, static_cast<CUresult>(r.result()), surface_async_error);
}

CUresult Connection::ApplyResultLocked(Op op, uint64_t ctx, CUresult result,
                                       bool surface_async_error) {
  const OpInfo* info = FindOp(static_cast<uint32_t>(op));
  if (IsStickyError(result) && ctx != 0) sticky_.emplace(ctx, result);
  // An asynchronous failure is reported by the next call that succeeds and returns nothing
  // else (a synchronize, a query, a copy), as CUDA reports asynchronous errors; a call that
  // created something keeps its own result so that nothing it made is lost.
  if (surface_async_error && result == CUDA_SUCCESS && async_error_ != CUDA_SUCCESS &&
      info != nullptr && info->result_count == 0) {
    result = async_error_;
    async_error_ = CUDA_SUCCESS;
  }
  return result;
}

void Connection::NoteThread() {
  if (multi_threaded_.load(std::memory_order_relaxed)) return;
  const uint64_t self = static_cast<uint64_t>(pthread_self());
  if (first_thread_.load(std::memory_order_relaxed) == self) return;  // no locked instruction
  uint64_t first = 0;
  if (!first_thread_.compare_exchange_strong(first, self) && first != self) {
    multi_threaded_.store(true);
  }
}

bool Connection::WantsLane(Op op) {
  if (op != Op::kStreamSynchronize && op != Op::kEventSynchronize && op != Op::kCtxSynchronize &&
      op != Op::kMemcpyDtoH) {
    return false;
  }
  if (reads_registered_.load() > 0) return false;  // a lane's reply could overtake their bytes
  return WaitsMayGoToLanes();
}

uint64_t Connection::ExpectRead(void* dst, size_t bytes, uint64_t ctx) {
  std::lock_guard<BiasedMutex> lock(mu_);
  const uint64_t token = next_read_token_++;
  reads_[token] = {dst, bytes, ctx};
  reads_registered_.store(reads_.size());
  reads_expected_.store(true);
  return token;
}

void Connection::ReadPosted(uint64_t token) {
  std::lock_guard<BiasedMutex> lock(mu_);
  // Gone already when another thread's call brought its bytes meanwhile.
  if (auto it = reads_.find(token); it != reads_.end()) it->second.posted = true;
}

void Connection::ForgetRead(uint64_t token) {
  std::lock_guard<BiasedMutex> lock(mu_);
  reads_.erase(token);
  reads_registered_.store(reads_.size());
}

void Connection::AwaitReads() {
  std::lock_guard<BiasedMutex> lock(mu_);
  for (;;) {
    auto first = std::find_if(reads_.begin(), reads_.end(),
                              [](const auto& read) { return read.second.posted; });
    if (first == reads_.end()) return;
    const uint64_t ctx = first->second.ctx;
    CallLocked(Op::kCtxSynchronize, ctx, {}, nullptr, 0, nullptr, {}, nullptr, false);
    // Whatever the synchronize did not bring will not come (a failed stream, a lost server); a
    // late ReadData finds no destination and is dropped (PlacePayload, TakeRead).
    for (auto it = reads_.begin(); it != reads_.end();) {
      it = it->second.posted && it->second.ctx == ctx ? reads_.erase(it) : std::next(it);
    }
    reads_registered_.store(reads_.size());
  }
}

void Connection::TakeRead(const wire::ReadData& read, const ReceivedMessage& m) {
  auto it = reads_.find(read.token());
  if (it == reads_.end()) {
    RGPU_LOG_WARN("ignoring the bytes of a read this client did not post");
    return;
  }
  if (read.result() != CUDA_SUCCESS) {
    RGPU_LOG_DEBUG("a posted copy out failed on the server: %d", read.result());
    if (async_error_ == CUDA_SUCCESS) async_error_ = static_cast<CUresult>(read.result());
  } else if (m.payload_size != it->second.bytes) {
    RGPU_LOG_WARN("a posted copy out brought %zu bytes, not %zu", m.payload_size, it->second.bytes);
    if (async_error_ == CUDA_SUCCESS) async_error_ = CUDA_ERROR_UNKNOWN;
  } else if (m.payload != it->second.dst && m.payload_size > 0) {
    memcpy(it->second.dst, m.payload, m.payload_size);
  }
  reads_.erase(it);
  reads_registered_.store(reads_.size());
}

size_t Connection::lanes_opened() {
  std::lock_guard<std::mutex> lock(lanes_mu_);
  return lanes_.size();
}

Status Connection::OpenLane(std::unique_ptr<Channel>* out) {
  rgpu_client_prepare_thread();  // UCX's parser needs this thread's ctype tables here
  std::string where;
  wire::LaneJoin lane_join;
  {
    std::lock_guard<BiasedMutex> lock(mu_);  // the session's server, as of now
    where = url_;
    lane_join.set_session_id(welcome_.session_id());
    lane_join.set_lane_key(welcome_.lane_key());
  }
  TransportUrl url;
  Status s = TransportUrl::Parse(where, &url);
  std::unique_ptr<Channel> channel;
  if (s.ok()) s = ConnectChannel(url, channel_options_, &channel);
  if (!s.ok()) return s;
  wire::Envelope join;
  *join.mutable_lane_join() = lane_join;
  s = channel->Send(join.SerializeAsString(), nullptr, 0);
  ReceivedMessage m;
  if (s.ok()) s = channel->Receive(open_timeout_ms_, &m);
  if (!s.ok()) return s;
  wire::Envelope reply;
  if (!reply.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())) ||
      reply.body_case() != wire::Envelope::kWelcome) {
    return ProtocolError("the server did not answer the lane's join");
  }
  if (reply.welcome().status() != 0) {
    return PermissionDenied("lane refused: " + reply.welcome().error());
  }
  *out = std::move(channel);
  return Status::Ok();
}

Connection::Lane* Connection::AcquireLane() {
  std::unique_lock<std::mutex> lock(lanes_mu_);
  for (;;) {
    for (auto& lane : lanes_) {
      if (!lane->busy) {
        lane->busy = true;
        return lane.get();
      }
    }
    if (lanes_failed_) return nullptr;
    if (lanes_.size() < lanes_offered_.load()) break;
    // Every lane waits for another thread: wait for one (not on the connection, which would
    // hold up every thread).
    lanes_cv_.wait(lock);
  }
  auto lane = std::make_unique<Lane>();
  lane->busy = true;
  Lane* mine = lane.get();
  lanes_.push_back(std::move(lane));  // counted now, so no other thread opens one too many
  lock.unlock();
  std::unique_ptr<Channel> channel;
  Status s = OpenLane(&channel);
  lock.lock();
  if (!s.ok()) {
    RGPU_LOG_WARN("no lane to wait on (waits then hold up the other threads): %s",
                  s.ToString().c_str());
    lanes_failed_ = true;
    std::erase_if(lanes_, [mine](const std::unique_ptr<Lane>& l) { return l.get() == mine; });
    lanes_cv_.notify_all();
    return nullptr;
  }
  mine->channel = std::move(channel);
  return mine;
}

void Connection::ReleaseLane(Lane* lane) {
  {
    std::lock_guard<std::mutex> lock(lanes_mu_);
    lane->busy = false;
    if (lane->dead) {
      std::erase_if(lanes_, [lane](const std::unique_ptr<Lane>& l) { return l.get() == lane; });
    }
  }
  lanes_cv_.notify_one();
}

bool Connection::CallOnLane(Op op, uint64_t ctx, std::span<const uint64_t> args, CUresult* result) {
  uint64_t after = 0;
  {
    std::lock_guard<BiasedMutex> lock(mu_);
    if (lost_) {
      *result = kServerLost;
      return true;
    }
    if (auto it = sticky_.find(ctx); ctx != 0 && it != sticky_.end()) {
      *result = it->second;
      return true;
    }
    // What this thread (or any) posted before the wait leaves first; the wait comes after it.
    Status s = SendBatch();
    if (!s.ok()) {
      *result = Fail(s.ToString());
      return true;
    }
    after = next_seq_ - 1;
  }
  Lane* lane = AcquireLane();
  if (lane == nullptr) return false;
  wire::Envelope out;
  wire::Call* call = out.mutable_call();
  const uint64_t seq = lane->next_seq++;
  call->set_seq(seq);
  call->set_op(static_cast<uint32_t>(op));
  call->set_ctx(ctx);
  call->set_after_seq(after);
  for (uint64_t a : args) call->add_args(a);
  Status s = lane->channel->Send(out.SerializeAsString(), nullptr, 0);
  wire::Envelope in;
  while (s.ok()) {
    ReceivedMessage m;
    s = lane->channel->Receive(-1, &m);
    if (!s.ok()) break;
    if (!in.ParseFromArray(m.header.data(), static_cast<int>(m.header.size()))) {
      s = ProtocolError("malformed message on a lane");
    } else if (in.body_case() == wire::Envelope::kGoodbye) {
      s = Unavailable("the server closed a lane: " + in.goodbye().reason());
    } else if (in.body_case() != wire::Envelope::kReply || in.reply().seq() != seq) {
      continue;
    }
    break;
  }
  if (!s.ok()) {
    // The lane is gone (its server ended it: the session moved, or the server is gone): the
    // wait goes on the connection, which knows where the session is, or fails there.
    RGPU_LOG_DEBUG("a lane ended (%s); waiting on the connection", s.ToString().c_str());
    {
      std::lock_guard<std::mutex> lock(lanes_mu_);
      lane->dead = true;
    }
    ReleaseLane(lane);
    return false;
  }
  ReleaseLane(lane);
  std::lock_guard<BiasedMutex> lock(mu_);
  *result = ApplyReplyLocked(op, ctx, in.reply(), true);
  return true;
}

void Connection::StartKeepalives(const std::string& host) {
  int server_timeout_ms = 10000;
  if (const char* t = getenv("RGPU_SERVER_TIMEOUT_MS")) server_timeout_ms = atoi(t);
  if (welcome_.liveness_port() == 0 || server_timeout_ms <= 0 || host.empty()) return;
  Connection* self = this;
  Status s = LivenessMonitor::Start(
      host, static_cast<uint16_t>(welcome_.liveness_port()), welcome_.liveness_key(),
      welcome_.liveness_secret(), server_timeout_ms,
      [self](const std::string& why) { self->AbandonAll(why); }, &liveness_);
  if (!s.ok()) RGPU_LOG_WARN("no keepalives with the server: %s", s.ToString().c_str());
}

Status Connection::ResumeAt(const std::string& url_text, uint64_t session_id,
                            const std::string& credential, std::unique_ptr<Channel>* out,
                            wire::Welcome* welcome) {
  TransportUrl url;
  Status s = TransportUrl::Parse(url_text, &url);
  if (s.ok() && url.scheme == TransportUrl::Scheme::kLocal) {
    s = InvalidArgument("not a server's URL: " + url_text);
  }
  std::unique_ptr<Channel> channel;
  if (s.ok()) s = ConnectChannel(url, channel_options_, &channel);
  if (!s.ok()) return s;
  Connection* self = this;
  channel->SetPayloadPlacer([self](const std::string& header, size_t size) -> void* {
    return self->PlacePayload(header, size);
  });
  wire::Envelope resume;
  wire::Resume* r = resume.mutable_resume();
  r->set_protocol_version(kProtocolVersion);
  r->set_session_id(session_id);
  r->set_pid(static_cast<uint32_t>(getpid()));
  s = channel->Send(resume.SerializeAsString(), nullptr, 0);
  ReceivedMessage m;
  wire::Envelope reply;
  if (s.ok()) s = channel->Receive(open_timeout_ms_, &m);
  if (s.ok() && (!reply.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())) ||
                 reply.body_case() != wire::Envelope::kChallenge)) {
    s = ProtocolError(url_text + " did not challenge the resume");
  }
  if (s.ok()) {
    // The credential is proven over the server's fresh nonce, never sent.
    wire::Envelope answer;
    answer.mutable_challenge_response()->set_proof(
        ResumeProof(credential, reply.challenge().nonce(), session_id));
    s = channel->Send(answer.SerializeAsString(), nullptr, 0);
  }
  if (s.ok()) s = channel->Receive(open_timeout_ms_, &m);
  if (s.ok() && (!reply.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())) ||
                 reply.body_case() != wire::Envelope::kWelcome)) {
    s = ProtocolError(url_text + " did not answer the resume");
  }
  if (s.ok() && reply.welcome().status() != 0) {
    s = PermissionDenied("resume refused: " + reply.welcome().error());
  }
  if (!s.ok()) return s;
  *out = std::move(channel);
  *welcome = reply.welcome();
  return Status::Ok();
}

Status Connection::MoveLocked(const wire::Moved& moved) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Channel> channel;
  wire::Welcome welcome;
  std::string where = moved.url();
  Status s = ResumeAt(where, moved.session_id(), moved.credential(), &channel, &welcome);
  if (s.ok() && welcome.redirect_port() != 0) {
    // Restored in a process of its own (server/session_host.h): the same host and scheme, its
    // port, the same session id, the host's one credential. A redirect never leads to another.
    TransportUrl target, host;
    s = TransportUrl::Parse(where, &target);
    if (s.ok() &&
        (welcome.redirect_token().empty() || welcome.session_id() != moved.session_id())) {
      s = ProtocolError(where + " sent a redirect it cannot have meant");
    }
    if (s.ok()) s = SessionHostUrl(target, welcome, &host);
    if (s.ok()) {
      where = host.ToString();
      const std::string token = welcome.redirect_token();
      channel.reset();  // that connection carries nothing more
      s = ResumeAt(where, moved.session_id(), token, &channel, &welcome);
    }
    if (s.ok() && welcome.redirect_port() != 0) {
      s = ProtocolError("session host at " + where + " redirected again");
    }
  }
  if (!s.ok()) return s;
  TransportUrl url;
  if (Status p = TransportUrl::Parse(where, &url); !p.ok()) return p;
  for (const auto& [address, size] : registered_) channel->RegisterMemory(address, size);
  // The old server's keepalive goes first, then its connection: closing it tells that server the
  // client has left for the new one.
  liveness_.reset();
  std::unique_ptr<Channel> old = std::move(channel_);
  channel_ = std::move(channel);
  bulk_piece_ = channel_->bulk_piece();
  welcome_ = welcome;
  lanes_offered_ = welcome_.lane_key().empty() ? 0 : welcome_.max_lanes();
  url_ = where;
  {
    std::lock_guard<std::mutex> lock(lanes_mu_);
    for (auto& lane : lanes_) lane->dead = true;  // the old server's
    std::erase_if(lanes_, [](const std::unique_ptr<Lane>& l) { return !l->busy; });
    lanes_failed_ = false;
  }
  old.reset();
  StartKeepalives(url.host);
  RGPU_LOG_INFO(
      "the session moved to %s (session %llu); resumed in %.1f ms", url_.c_str(),
      (unsigned long long)welcome_.session_id(),
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  return Status::Ok();
}

void Connection::AbandonAll(const std::string& why) {
  channel_->Abandon(why);
  std::lock_guard<std::mutex> lock(lanes_mu_);
  for (auto& lane : lanes_) {
    if (lane->channel) lane->channel->Abandon(why);
  }
}

}  // namespace rgpu::client
