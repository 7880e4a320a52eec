// Moving a session (docs/migration.md): at its client's next waited call the session waits for
// the device, takes its checkpoint, sends it to another server (a migration) or to an operator
// (a checkpoint file, after which it stays parked until told where its client is to go), and
// answers the call with Reply.moved, or, when anything fails, stays as it was and serves the
// call. A restored session is served once its client has resumed it (RunResumed).
#include <chrono>
#include <cstring>

#include "common/log.h"
#include "proto/protocol_version.h"
#include "server/checkpoint.h"
#include "server/session.h"
#include "server/session_host.h"

namespace rgpu::server {
namespace {

constexpr int kRestoreReplyMs = 120000;  // the target restores before it answers
constexpr int kParkPollMs = 200;

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// Gathers the checkpoint's bytes into CheckpointChunk messages of kCheckpointChunkBytes on
// `channel`; `check_refusal`: between chunks, a reply that came early (the target refused) ends
// the stream with it.
class ChunkSender {
 public:
  ChunkSender(Channel& channel, bool check_refusal)
      : channel_(&channel), check_refusal_(check_refusal) {}
  // Pieces to `sink` instead of a channel.
  explicit ChunkSender(std::function<Status(const char*, size_t, bool)> sink)
      : sink_(std::move(sink)) {}
  Status Put(const char* data, size_t size) {
    while (size > 0) {
      if (buffer_.empty() && size >= kCheckpointChunkBytes) {
        // A whole chunk of a large piece (device memory) goes from where it is, without a copy.
        if (Status s = SendPiece(false, data, kCheckpointChunkBytes); !s.ok()) return s;
        data += kCheckpointChunkBytes;
        size -= kCheckpointChunkBytes;
        continue;
      }
      const size_t n = std::min(size, kCheckpointChunkBytes - buffer_.size());
      buffer_.append(data, n);
      data += n;
      size -= n;
      if (buffer_.size() == kCheckpointChunkBytes) {
        if (Status s = Send(false); !s.ok()) return s;
      }
    }
    return Status::Ok();
  }
  Status Send(bool last) {
    Status s = SendPiece(last, buffer_.data(), buffer_.size());
    buffer_.clear();
    return s;
  }

 private:
  Status SendPiece(bool last, const char* data, size_t size) {
    if (sink_) return sink_(data, size, last);
    wire::Envelope chunk;
    chunk.mutable_checkpoint_chunk()->set_last(last);
    Status s = channel_->Send(chunk.SerializeAsString(), data, size);
    if (!s.ok() && check_refusal_) {
      // Cut short: the target's reason, if it gave one before it went.
      ReceivedMessage m;
      wire::Envelope reply;
      if (channel_->Receive(2000, &m).ok() &&
          reply.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())) &&
          reply.body_case() == wire::Envelope::kAdminReply) {
        return Unavailable("the target refused it: " + reply.admin_reply().error());
      }
    }
    if (s.ok() && check_refusal_ && !last) {
      ReceivedMessage m;
      Status early = channel_->Receive(0, &m);
      if (early.ok()) {
        wire::Envelope reply;
        if (reply.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())) &&
            reply.body_case() == wire::Envelope::kAdminReply) {
          return Unavailable("the target refused it: " + reply.admin_reply().error());
        }
        return ProtocolError("the target answered before the checkpoint was sent");
      }
      if (early.code() != Status::Code::kTimeout) return early;
    }
    return s;
  }

  Channel* channel_ = nullptr;
  bool check_refusal_ = false;
  std::function<Status(const char*, size_t, bool)> sink_;
  std::string buffer_;
};

}  // namespace

bool Session::RequestMove(std::shared_ptr<MoveRequest> request, uint32_t timeout_ms) {
  std::lock_guard<std::mutex> lock(move_mu_);
  if (host_ != nullptr) return RequestHostedMove(std::move(request), timeout_ms);
  if (move_request_ != nullptr && !move_request_->Cancelled()) return false;
  const bool redirect = request->kind == MoveRequest::Kind::kRedirect;
  if (redirect != parked_.load()) return false;
  move_request_ = std::move(request);
  if (!redirect) move_pending_.store(true);
  return true;
}

bool Session::RequestHostedMove(std::shared_ptr<MoveRequest> request, uint32_t timeout_ms) {
  if (hosted_move_ != nullptr || !request->Take()) return false;
  wire::HostMove move;
  move.set_timeout_ms(timeout_ms);
  switch (request->kind) {
    case MoveRequest::Kind::kToServer:
      move.set_target_url(request->target_url);
      move.set_ticket(request->ticket);
      move.set_lease_token(request->lease_token);
      break;
    case MoveRequest::Kind::kToStream:  // its pieces come back through checkpoint_relay_
      move.set_checkpoint(true);
      if (request->stream != nullptr) checkpoint_relay_.Start(request->stream);
      break;
    case MoveRequest::Kind::kRedirect:
      move.set_redirect(true);
      move.set_resume_url(request->resume_url);
      move.set_resume_session(request->resume_session);
      move.set_resume_credential(request->resume_credential);
      break;
  }
  if (Status s = host_->Move(move); !s.ok()) {
    request->Decide(s);
    return true;
  }
  hosted_move_ = std::move(request);
  return true;
}

void Session::HostedMoveAnswered(const wire::HostMoveResult& result) {
  checkpoint_relay_.Stop();  // answered: its operator's connection is the operator's again
  std::shared_ptr<MoveRequest> move;
  {
    std::lock_guard<std::mutex> lock(move_mu_);
    move = std::move(hosted_move_);
  }
  if (move == nullptr) return;  // nothing asked: a host's answer to nothing is ignored
  {
    std::lock_guard<std::mutex> lock(move->mu);
    move->new_session = result.new_session();
    move->memory_bytes = result.memory_bytes();
    move->transfer_ms = result.transfer_ms();
  }
  if (!result.error().empty()) {
    move->Decide(Unavailable(result.error().substr(0, 1000)));
    return;
  }
  move->Decide(Status::Ok());
  move->Finish(result.pause_ms());
}

Status Session::SendToServer(const MoveRequest& request, const wire::Checkpoint& header,
                             uint64_t* new_session, std::string* credential) {
  if (!peer_connector_) return Unavailable("this server connects to no other server");
  std::unique_ptr<Channel> target;
  if (Status s = peer_connector_(request.target_url, &target); !s.ok()) {
    return Unavailable("cannot reach " + request.target_url + ": " + s.message());
  }
  wire::Envelope join;
  join.mutable_restore_join()->set_ticket(request.ticket);
  // Moved by the registry: its hand-over of the lease admits the checkpoint there.
  if (request.ticket.empty()) join.mutable_restore_join()->set_hand_over(request.lease_token);
  if (Status s = target->Send(join.SerializeAsString(), nullptr, 0); !s.ok()) return s;
  ChunkSender sender(*target, true);
  Status s = WriteCheckpoint(header, [&](const char* d, size_t n) { return sender.Put(d, n); });
  if (s.ok()) s = sender.Send(true);
  if (!s.ok()) return s;
  ReceivedMessage m;
  if (Status r = target->Receive(kRestoreReplyMs, &m); !r.ok()) {
    return Unavailable("no answer from " + request.target_url + ": " + r.message());
  }
  wire::Envelope reply;
  if (!reply.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())) ||
      reply.body_case() != wire::Envelope::kAdminReply) {
    return ProtocolError(request.target_url + " did not answer the restore");
  }
  if (!reply.admin_reply().error().empty()) {
    return Unavailable(request.target_url + " refused it: " + reply.admin_reply().error());
  }
  *new_session = reply.admin_reply().session_id();
  *credential = reply.admin_reply().resume_credential();
  return Status::Ok();
}

void Session::SendMoved(const wire::Call& call, const std::string& url, uint64_t session,
                        const std::string& credential) {
  wire::Reply* reply = reply_envelope_.mutable_reply();
  reply->Clear();
  reply->set_seq(call.seq());
  wire::Moved* moved = reply->mutable_moved();
  moved->set_url(url);
  moved->set_session_id(session);
  moved->set_credential(credential);
  ReportPending(reply);  // what the calls served here left for the client
  reply_envelope_.SerializeToString(&reply_bytes_);
  channel_->Send(reply_bytes_, nullptr, 0);
  client_told_where_ = true;
}

bool Session::AwaitRedirect(std::shared_ptr<MoveRequest>* redirect) {
  ReceivedMessage m;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(move_mu_);
      if (move_request_ != nullptr && move_request_->kind == MoveRequest::Kind::kRedirect) {
        *redirect = std::move(move_request_);
        return true;
      }
    }
    if ((stop_ != nullptr && stop_->load()) || aborted_.load()) return false;
    // The client sends nothing while it waits for its call's answer: only its departure comes.
    const Status s = channel_->Receive(kParkPollMs, &m);
    if (!s.ok() && s.code() != Status::Code::kTimeout) return false;
  }
}

Session::MoveOutcome Session::MoveAt(const wire::Call& call) {
  std::shared_ptr<MoveRequest> request;
  {
    std::lock_guard<std::mutex> lock(move_mu_);
    request = std::move(move_request_);
    move_pending_.store(false);
  }
  if (request == nullptr || request->kind == MoveRequest::Kind::kRedirect || !request->Take()) {
    return MoveOutcome::kStayed;
  }
  phase_.store(1);
  move_started_ = std::chrono::steady_clock::now();
  const bool to_server = request->kind == MoveRequest::Kind::kToServer;
  RGPU_LOG_INFO("session %llu: moving %s", (unsigned long long)id_,
                to_server ? ("to " + request->target_url).c_str() : "into a checkpoint");
  wire::Checkpoint header;
  Status s = Quiesce();
  if (s.ok()) {
    // Every posted copy out has been made: its bytes go to the client before the move.
    SendFinishedReads();
    if (!posted_reads_.empty())
      s = InvalidArgument("the session cannot move: posted copies out wait");
  }
  if (s.ok()) s = CheckMovable();
  if (s.ok()) s = Capture(&header);
  if (s.ok() && to_server) header.set_lease_token(request->lease_token);
  uint64_t new_session = 0;
  std::string credential;
  if (s.ok() && to_server) {
    s = SendToServer(*request, header, &new_session, &credential);
  } else if (s.ok()) {
    ChunkSender sender = request->stream != nullptr ? ChunkSender(*request->stream, false)
                                                    : ChunkSender(request->sink);
    s = WriteCheckpoint(header, [&](const char* d, size_t n) { return sender.Put(d, n); });
    if (s.ok()) s = sender.Send(true);
  }
  const double transfer_ms = MsSince(move_started_);
  {
    std::lock_guard<std::mutex> lock(request->mu);
    request->new_session = new_session;
    request->memory_bytes = header.memory_bytes();
    request->transfer_ms = transfer_ms;
  }
  if (!s.ok()) {
    RGPU_LOG_WARN("session %llu: stays here: %s", (unsigned long long)id_, s.message().c_str());
    phase_.store(0);
    request->Decide(s);
    return MoveOutcome::kStayed;  // the call is served here, as if nothing had been asked
  }
  RGPU_LOG_INFO("session %llu: checkpoint of %llu bytes of device memory %s in %.1f ms",
                (unsigned long long)id_, (unsigned long long)header.memory_bytes(),
                to_server ? "restored there" : "sent", transfer_ms);
  if (to_server) {
    request->Decide(Status::Ok());
    SendMoved(call, request->target_url, new_session, credential);
    moved_by_ = std::move(request);
    return MoveOutcome::kMoved;
  }
  // Into a checkpoint: its state is in the operator's hands; the client waits for its answer
  // until the operator says where the session was restored. Parked before the operator hears
  // of it, so that a status or a redirect right after finds it parked.
  ReleaseAll();
  parked_.store(true);
  phase_.store(2);
  request->Decide(Status::Ok());
  RGPU_LOG_INFO("session %llu: parked; its client waits for its call %llu", (unsigned long long)id_,
                (unsigned long long)call.seq());
  std::shared_ptr<MoveRequest> redirect;
  if (AwaitRedirect(&redirect) && redirect->Take()) {
    move_started_ = std::chrono::steady_clock::now();
    SendMoved(call, redirect->resume_url, redirect->resume_session, redirect->resume_credential);
    redirect->Decide(Status::Ok());
    RGPU_LOG_INFO("session %llu: its client goes to %s (session %llu)", (unsigned long long)id_,
                  redirect->resume_url.c_str(), (unsigned long long)redirect->resume_session);
    moved_by_ = std::move(redirect);
  } else {
    moved_by_ = std::move(request);  // the client left (or the server stops) while parked
  }
  return MoveOutcome::kMoved;
}

void Session::RunResumed(std::unique_ptr<Channel> channel, const std::atomic<bool>& stop) {
  stop_ = &stop;
  {
    std::lock_guard<std::mutex> lock(name_mu_);
    channel_ = std::move(channel);
  }
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    abort_channel_ = channel_.get();
  }
  wire::Envelope out;
  wire::Welcome* w = out.mutable_welcome();
  w->set_protocol_version(kProtocolVersion);
  w->set_session_id(id_);
  FillWelcome(w);
  if (Status s = channel_->Send(out.SerializeAsString(), nullptr, 0); !s.ok()) {
    RGPU_LOG_WARN("session %llu: its client left while resuming: %s", (unsigned long long)id_,
                  s.message().c_str());
  }
  admitted_at_ = std::chrono::steady_clock::now();
  admitted_.store(true);
  if (admitted_hook_) admitted_hook_();  // a session host: its client came
  RGPU_LOG_INFO("session %llu: resumed by %s from %s", (unsigned long long)id_,
                client_name_.c_str(), channel_->peer().c_str());
  ServeLoop(stop);
}

}  // namespace rgpu::server
