// Server's side of moving sessions (docs/migration.md): the operator's requests (a restore
// ticket, a migration, a checkpoint into the operator's stream, a restore from it, the redirect
// of a parked session), the restore of a checkpoint another server sends with a ticket, and the
// resume of a restored session by its client, which proves the credential the restore made.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "common/log.h"
#include "proto/crypto.h"
#include "proto/protocol_version.h"
#include "proto/session_proof.h"
#include "registry/operator_key.h"
#include "server/checkpoint.h"
#include "server/registry_agent.h"
#include "server/server.h"
#include "server/session.h"
#include "server/session_host.h"

namespace rgpu::server {
namespace {

constexpr int kHandshakeMs = 10000;
constexpr int kChunkWaitMs = 60000;  // between two pieces of a checkpoint stream
// After its last piece, for a host to answer the restore it was relayed.
constexpr int kHostedRestoreMs = 60000;
constexpr auto kTicketLife = std::chrono::seconds(60);
constexpr auto kResumeLife = std::chrono::seconds(60);
constexpr size_t kTicketBytes = 16;
constexpr size_t kResumeCredentialBytes = 32;
constexpr uint32_t kDefaultMoveTimeoutMs = 30000;
constexpr uint32_t kMostMoveTimeoutMs = 600000;

void Reply(Channel& channel, const wire::AdminReply& reply) {
  wire::Envelope out;
  *out.mutable_admin_reply() = reply;
  channel.Send(out.SerializeAsString(), nullptr, 0);
}

void ReplyError(Channel& channel, const std::string& error) {
  wire::AdminReply reply;
  reply.set_error(error);
  Reply(channel, reply);
}

void RefuseResume(Channel& channel, const std::string& why) {
  wire::Envelope out;
  out.mutable_welcome()->set_protocol_version(kProtocolVersion);
  out.mutable_welcome()->set_status(CUDA_ERROR_NOT_PERMITTED);
  out.mutable_welcome()->set_error(why);
  channel.Send(out.SerializeAsString(), nullptr, 0);
}

}  // namespace

bool Server::HandleService(const wire::Envelope& first, std::unique_ptr<Channel>& channel) {
  switch (first.body_case()) {
    case wire::Envelope::kAdminRequest:
      ServeAdmin(first.admin_request(), *channel);
      return true;
    case wire::Envelope::kRestoreJoin: {
      // Another server migrating a session here, with a ticket this server's operator made or
      // the registry's hand-over of the session's lease to this server.
      const wire::RestoreJoin& join = first.restore_join();
      bool admitted = false;
      std::string refusal = "no such restore ticket (a wrong, used or expired one)";
      if (!join.ticket().empty()) {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto it = tickets_.begin(); it != tickets_.end(); ++it) {
          if (it->second > std::chrono::steady_clock::now() &&
              ConstantTimeEquals(it->first, join.ticket())) {
            tickets_.erase(it);  // one use
            admitted = true;
            break;
          }
        }
      } else if (!join.hand_over().empty()) {
        // Each of the lease's sessions once (checked with the checkpoint's header).
        wire::TokenClaims claims;
        Status s = tenants_->VerifyHandOver(join.hand_over(), &claims);
        admitted = s.ok();
        if (!s.ok()) refusal = "the lease's hand-over is refused: " + s.message();
      }
      if (!admitted) {
        RGPU_LOG_WARN("restore from %s refused: %s", channel->peer().c_str(), refusal.c_str());
        ReplyError(*channel, refusal);
        return true;
      }
      RestoreFromStream(*channel, join.ticket().empty() ? join.hand_over() : "");
      return true;
    }
    case wire::Envelope::kResume:
      JoinResume(first.resume(), channel);
      return true;
    default:
      return false;
  }
}

Status Server::ProveOperator(const wire::Credential& presented, Channel& channel) {
  wire::Envelope challenge;
  const std::string nonce = RandomBytes(kChallengeNonceBytes);
  if (nonce.size() != kChallengeNonceBytes) return Internal("no random bytes for the challenge");
  challenge.mutable_challenge()->set_nonce(nonce);
  if (Status s = channel.Send(challenge.SerializeAsString(), nullptr, 0); !s.ok()) return s;
  ReceivedMessage m;
  if (Status s = channel.Receive(kHandshakeMs, &m); !s.ok()) return s;
  wire::Envelope answer;
  if (!answer.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())) ||
      answer.body_case() != wire::Envelope::kChallengeResponse) {
    return PermissionDenied("expected the proof of the operator's key");
  }
  Admission admission;
  if (Status s = tenants_->Admit(presented, nonce, answer.challenge_response().proof(), &admission);
      !s.ok()) {
    return s;
  }
  if (!admission.operator_access) return PermissionDenied("this needs the operator's key");
  return Status::Ok();
}

void Server::ServeAdmin(const wire::AdminRequest& request, Channel& channel) {
  if (Status s = ProveOperator(request.credential(), channel); !s.ok()) {
    RGPU_LOG_WARN("operator request from %s refused: %s", channel.peer().c_str(),
                  s.message().c_str());
    ReplyError(channel, s.message());
    return;
  }
  const uint32_t timeout_ms = request.timeout_ms() == 0
                                  ? kDefaultMoveTimeoutMs
                                  : std::min(request.timeout_ms(), kMostMoveTimeoutMs);
  wire::AdminReply reply;
  switch (request.kind()) {
    case wire::AdminRequest::RESTORE_TICKET: {
      const std::string ticket = RandomBytes(kTicketBytes);
      if (ticket.size() != kTicketBytes) return ReplyError(channel, "no random bytes");
      std::lock_guard<std::mutex> lock(mu_);
      tickets_[ticket] = std::chrono::steady_clock::now() + kTicketLife;
      reply.set_ticket(ticket);
      if (agent_) reply.set_registry_name(agent_->server_name());
      break;
    }
    case wire::AdminRequest::REGISTRY_NAME:
      if (agent_) reply.set_registry_name(agent_->server_name());
      break;
    case wire::AdminRequest::RESTORE:
      RestoreFromStream(channel, "", request.lease_hand_over());
      return;
    case wire::AdminRequest::HAND_OVER: {
      // For the restore of the session's checkpoint file elsewhere (rgpu restore): its lease
      // goes along, and its last record here, once its client has been sent on, completes it.
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = sessions_.find(request.session_id());
        if (it == sessions_.end() || !it->second->admitted()) {
          return ReplyError(channel, "no session " + std::to_string(request.session_id()));
        }
      }
      if (Status s = LeaseMovesAlone(request.session_id()); !s.ok()) {
        return ReplyError(channel, s.message());
      }
      MoveRequest handed;  // receives the hand-over
      std::string lease;
      if (Status s = HandOverLeaseOf(request.session_id(), request.target_registry_name(), &handed,
                                     &lease);
          !s.ok()) {
        return ReplyError(channel, s.message());
      }
      reply.set_hand_over(handed.lease_token);
      break;
    }
    case wire::AdminRequest::CANCEL_HAND_OVER: {
      std::string lease;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = sessions_.find(request.session_id());
        if (it != sessions_.end()) lease = it->second->lease_id();
      }
      if (!lease.empty()) CancelLeaseHandOver(lease);
      break;
    }
    case wire::AdminRequest::MIGRATE:
    case wire::AdminRequest::CHECKPOINT:
    case wire::AdminRequest::REDIRECT: {
      auto move = std::make_shared<MoveRequest>();
      if (request.kind() == wire::AdminRequest::MIGRATE) {
        move->kind = MoveRequest::Kind::kToServer;
        move->target_url = request.target_url();
        move->ticket = request.ticket();
      } else if (request.kind() == wire::AdminRequest::CHECKPOINT) {
        move->kind = MoveRequest::Kind::kToStream;
        move->stream = &channel;
      } else {
        move->kind = MoveRequest::Kind::kRedirect;
        move->resume_url = request.target_url();
        move->resume_session = request.target_session();
        move->resume_credential = request.resume_credential();
      }
      // A lease moves whole: one of its sessions neither migrates nor parks in a file alone.
      if (request.kind() != wire::AdminRequest::REDIRECT) {
        if (Status s = LeaseMovesAlone(request.session_id()); !s.ok()) {
          return ReplyError(channel, s.message());
        }
      }
      std::string handed_over;  // the lease that goes along
      if (request.kind() == wire::AdminRequest::MIGRATE) {
        if (Status s = HandOverLeaseOf(request.session_id(), request.target_registry_name(),
                                       move.get(), &handed_over);
            !s.ok()) {
          return ReplyError(channel, s.message());
        }
      }
      // A move that does not happen takes the lease's hand-over back.
      struct TakeBack {
        Server* server;
        const std::string& lease;
        const std::shared_ptr<MoveRequest>& move;
        ~TakeBack() {
          if (lease.empty()) return;
          std::lock_guard<std::mutex> lock(move->mu);
          if (move->state == MoveRequest::State::kCancelled ||
              move->state == MoveRequest::State::kPending || !move->result.ok()) {
            server->CancelLeaseHandOver(lease);
          }
        }
      } take_back{this, handed_over, move};
      bool asked = false;
      {
        // Under mu_ the session is in sessions_, so alive; the request outlives it either way.
        std::lock_guard<std::mutex> lock(mu_);
        auto it = sessions_.find(request.session_id());
        if (it == sessions_.end() || !it->second->admitted()) {
          return ReplyError(channel, "no session " + std::to_string(request.session_id()));
        }
        asked = it->second->RequestMove(move, timeout_ms);
      }
      if (!asked) {
        return ReplyError(channel, request.kind() == wire::AdminRequest::REDIRECT
                                       ? "the session is not parked in a checkpoint"
                                       : "the session is moving already, or parked");
      }
      RGPU_LOG_INFO("operator: session %llu asked to %s", (unsigned long long)request.session_id(),
                    request.kind() == wire::AdminRequest::MIGRATE ? "migrate"
                    : request.kind() == wire::AdminRequest::CHECKPOINT
                        ? "checkpoint"
                        : "go where it was restored");
      // A moved session's client has left before the answer (the pause it saw); a checkpointed
      // one's waits, parked.
      const Status s = move->Await(std::chrono::milliseconds(timeout_ms),
                                   request.kind() == wire::AdminRequest::CHECKPOINT
                                       ? std::chrono::milliseconds(0)
                                       : std::chrono::seconds(15));
      if (!s.ok()) return ReplyError(channel, s.message());
      std::lock_guard<std::mutex> lock(move->mu);
      reply.set_session_id(move->new_session);
      reply.set_pause_ms(move->pause_ms);
      reply.set_memory_bytes(move->memory_bytes);
      reply.set_transfer_ms(move->transfer_ms);
      break;
    }
    default:
      return ReplyError(channel, "unknown operator request");
  }
  Reply(channel, reply);
}

namespace {
std::string SourceOf(const wire::Checkpoint& header) {
  return header.source_server() + "/" + std::to_string(header.source_session());
}
}  // namespace

void Server::ForgetHandOverUse(const std::string& token, const std::string& source) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = used_hand_overs_.find(token);
  if (it != used_hand_overs_.end()) it->second.sessions.erase(source);
}

Status Server::UseHandOver(const std::string& token, const wire::Checkpoint& header,
                           int64_t expires_unix) {
  // Kept until the hand-over expires: bounded before (CheckCheckpoint comes later).
  if (header.source_server().size() > kMaxCheckpointNameBytes) {
    return InvalidArgument("the checkpoint's source server has a name longer than 4 KiB");
  }
  std::lock_guard<std::mutex> lock(mu_);
  UsedHandOver& used = used_hand_overs_[token];
  used.expires_unix = expires_unix;
  const std::string source = SourceOf(header);
  if (used.sessions.count(source) != 0) {
    return PermissionDenied("session " + source.substr(0, 200) +
                            " was restored here under this hand-over already");
  }
  if (used.sessions.size() >= kMostSessionsPerHandOver) {
    return PermissionDenied("the hand-over admitted " + std::to_string(kMostSessionsPerHandOver) +
                            " sessions here already");
  }
  used.sessions.insert(source);
  return Status::Ok();
}

void Server::RestoreFromStream(Channel& channel, const std::string& hand_over,
                               const std::string& file_hand_over) {
  const uint64_t id = next_session_id_++;
  auto session = std::make_unique<Session>(id, driver_, devices_, nullptr, tenants_.get(), "",
                                           scheduler_.get());
  ConfigureSession(*session);
  // Where only processes keep tenants apart, the session is restored in a process of its own: the
  // checkpoint's bytes go on to a host (checked here as well), supervised by a thread of its own
  // from then on, and its client resumes there (docs/migration.md, docs/security.md).
  const bool in_host = ProcessesIsolateTenants();
  std::shared_ptr<Session> hosted;
  std::string host_credential;
  bool header_seen = false;
  std::string used_hand_over, used_by;  // the hand-over a restore used, and for which source
  CheckpointReader reader(
      [&](const wire::Checkpoint& header) -> Status {
        header_seen = true;
        CheckpointBounds bounds;
        bounds.limits = options_.session_limits;
        bounds.devices = devices_.devices().size();
        std::shared_ptr<Tenant> tenant;
        // The devices it is restored onto: those its lease's hand-over names, else the first.
        std::vector<int> onto;
        if (!hand_over.empty() && header.lease_token() != hand_over) {
          return PermissionDenied("the checkpoint is not of the lease its hand-over names");
        }
        // A checkpoint file carries no hand-over: the operator brings the source's.
        if (!file_hand_over.empty() && !header.lease_token().empty() &&
            file_hand_over != header.lease_token()) {
          return PermissionDenied("the checkpoint carries another hand-over than the one given");
        }
        const std::string& lease_token =
            header.lease_token().empty() ? file_hand_over : header.lease_token();
        if (!lease_token.empty()) {
          // Its registry lease came along (registry HandOverLease): the tenant and quota are
          // the lease's, the GPU the one the registry chose here.
          Admission admission;
          if (Status s = tenants_->AdmitHandOver(lease_token, header.lease_id(), header.tenant(),
                                                 &admission);
              !s.ok()) {
            return PermissionDenied("the hand-over of the session's lease is refused: " +
                                    s.message());
          }
          if (Status s = UseHandOver(lease_token, header, admission.expires_unix); !s.ok()) {
            return s;
          }
          used_hand_over = lease_token;  // given back if the restore fails
          used_by = SourceOf(header);
          tenant = std::move(admission.tenant);
          if (!admission.all_gpus) onto = admission.gpus;
        } else if (!header.tenant().empty()) {
          tenant = tenants_->Find(header.tenant());
        }
        if (tenant == nullptr && tenants_->requires_tokens()) {
          return PermissionDenied("tenant '" + header.tenant().substr(0, 100) +
                                  "' has no credential on this server");
        }
        if (tenants_->LeaseEnded(header.lease_id())) {
          return PermissionDenied("the session's lease has ended");
        }
        if (onto.empty()) {
          for (int i = 0; i < header.devices_size() && i < bounds.devices; ++i) onto.push_back(i);
        }
        if (onto.size() < static_cast<size_t>(header.devices_size())) {
          return ResourceExhausted("the session sees " + std::to_string(header.devices_size()) +
                                   " devices; its lease grants " + std::to_string(onto.size()) +
                                   " here");
        }
        onto.resize(static_cast<size_t>(header.devices_size()));
        for (int device : onto) {
          if (device < 0 || static_cast<size_t>(device) >= bounds.devices) {
            return InvalidArgument("its lease names device " + std::to_string(device) +
                                   ", which this server does not have");
          }
          bounds.memory_bytes += devices_.devices()[device].total_mem();
        }
        if (tenant != nullptr) {
          const uint64_t used = tenant->memory_used.load();
          bounds.memory_bytes =
              std::min(bounds.memory_bytes,
                       used < tenant->memory_quota ? tenant->memory_quota - used : uint64_t{0});
        }
        if (Status s = CheckCheckpoint(header, bounds); !s.ok()) return s;
        RGPU_LOG_INFO("session %llu: restoring session %llu of %s (%llu bytes of device memory)",
                      (unsigned long long)id, (unsigned long long)header.source_session(),
                      header.tenant().empty() ? "no tenant" : header.tenant().c_str(),
                      (unsigned long long)header.memory_bytes());
        if (!in_host) return session->RestoreBegin(header, std::move(tenant), onto);
        host_credential = MakeHostToken();
        if (host_credential.empty()) return Internal("no random bytes for the session's host");
        if (Status s =
                session->StartHostedRestore(header, std::move(tenant), onto, host_credential);
            !s.ok()) {
          return s;
        }
        hosted = std::move(session);
        {
          std::lock_guard<std::mutex> lock(mu_);
          live_.insert(id);
        }
        running_threads_++;
        std::thread([this, hosted, id] {
          RunSession(*hosted, nullptr);  // until its host ends
          {
            std::lock_guard<std::mutex> lock(mu_);
            live_.erase(id);
          }
          running_threads_--;
        }).detach();
        return Status::Ok();
      },
      [&](uint64_t offset, const char* data, size_t size) {
        return hosted != nullptr ? Status::Ok() : session->RestoreMemory(offset, data, size);
      });
  Status s;
  bool last = false;
  // The checkpoint's pieces read before its header was whole (its host did not exist yet): the
  // host is given them first. No more than the reader holds of the header meanwhile.
  std::string before_host;
  while (!last && s.ok()) {
    ReceivedMessage m;
    s = channel.Receive(kChunkWaitMs, &m);
    if (!s.ok()) break;
    wire::Envelope in;
    if (!in.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())) ||
        in.body_case() != wire::Envelope::kCheckpointChunk) {
      s = ProtocolError("expected the checkpoint's next piece");
      break;
    }
    last = in.checkpoint_chunk().last();
    s = channel.FetchPayload(&m, nullptr);
    if (s.ok()) s = reader.Feed(m.payload, m.payload_size);
    if (!s.ok()) break;
    if (hosted == nullptr) {
      if (in_host) before_host.append(m.payload, m.payload_size);
      continue;
    }
    if (!before_host.empty()) {
      s = hosted->RelayRestore(before_host.data(), before_host.size(), false);
      std::string().swap(before_host);
    }
    if (s.ok()) s = hosted->RelayRestore(m.payload, m.payload_size, last);
  }
  if (s.ok()) s = reader.Finish();
  if (s.ok()) {
    s = hosted != nullptr ? hosted->AwaitHostedRestore(kHostedRestoreMs) : session->RestoreFinish();
  }
  const std::string credential = s.ok() ? RandomBytes(kResumeCredentialBytes) : "";
  if (s.ok() && credential.size() != kResumeCredentialBytes) s = Internal("no random bytes");
  if (!s.ok()) {
    RGPU_LOG_WARN("session %llu: restore refused%s: %s", (unsigned long long)id,
                  header_seen ? "" : " before its header", s.message().c_str());
    session.reset();                                                  // and all it made with it
    if (hosted != nullptr) hosted->Abort("its restore was refused");  // its host ends
    if (!used_hand_over.empty()) ForgetHandOverUse(used_hand_over, used_by);  // tried again later
    ReplyError(channel, s.message());
    // The sender learns it between two pieces; what it sent meanwhile is read and dropped, so
    // that the refusal is what it sees, not a connection cut short.
    ReceivedMessage m;
    for (int dropped = 0; !last && dropped < 1 << 16; ++dropped) {
      wire::Envelope in;
      if (!channel.Receive(kHandshakeMs, &m).ok() ||
          !in.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())) ||
          in.body_case() != wire::Envelope::kCheckpointChunk) {
        break;
      }
      last = in.checkpoint_chunk().last();
    }
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (hosted == nullptr) live_.insert(id);  // a host's is live while its thread supervises it
    PendingResume& pending = pending_resumes_[id];
    pending.session = std::move(session);  // null when restored in a host
    pending.credential = credential;
    pending.deadline = std::chrono::steady_clock::now() + kResumeLife;
    if (hosted != nullptr) {
      pending.host_port = hosted->host_port(&pending.host_pin);
      pending.host_credential = host_credential;
      pending.hosted = hosted;
    }
  }
  RGPU_LOG_INFO("session %llu: restored%s; waiting for its client to resume it",
                (unsigned long long)id, hosted != nullptr ? " in a process of its own" : "");
  wire::AdminReply reply;
  reply.set_session_id(id);
  reply.set_resume_credential(credential);
  Reply(channel, reply);
}

Status Server::RestoreAsHost(const std::function<bool(std::string*, bool*)>& next_piece,
                             std::shared_ptr<Tenant> tenant, bool all_gpus,
                             const std::vector<int>& gpus, uint64_t id,
                             const std::string& credential) {
  auto session = std::make_unique<Session>(id, driver_, devices_, nullptr, tenants_.get(), "",
                                           scheduler_.get());
  ConfigureSession(*session);
  CheckpointReader reader(
      [&](const wire::Checkpoint& header) -> Status {
        // Admitted by the server, which checked the same; checked again before anything is made.
        CheckpointBounds bounds;
        bounds.limits = options_.session_limits;
        bounds.devices = devices_.devices().size();
        std::vector<int> onto = gpus;
        if (all_gpus) {
          onto.clear();
          for (size_t i = 0; i < bounds.devices; ++i) onto.push_back(static_cast<int>(i));
        }
        if (onto.size() < static_cast<size_t>(header.devices_size())) {
          return ResourceExhausted("the session sees more devices than its host was given");
        }
        onto.resize(static_cast<size_t>(header.devices_size()));
        for (int device : onto) {
          if (device < 0 || static_cast<size_t>(device) >= bounds.devices) {
            return InvalidArgument("no device " + std::to_string(device) + " here");
          }
          bounds.memory_bytes += devices_.devices()[device].total_mem();
        }
        if (Status s = CheckCheckpoint(header, bounds); !s.ok()) return s;
        return session->RestoreBegin(header, tenant, onto);
      },
      [&](uint64_t offset, const char* data, size_t size) {
        return session->RestoreMemory(offset, data, size);
      });
  Status s;
  std::string piece;
  bool last = false;
  while (!last && s.ok()) {
    s = next_piece(&piece, &last) ? reader.Feed(piece.data(), piece.size())
                                  : Unavailable("the server went away during the restore");
  }
  if (s.ok()) s = reader.Finish();
  if (s.ok()) s = session->RestoreFinish();
  if (!s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  live_.insert(id);
  PendingResume& pending = pending_resumes_[id];
  pending.session = std::move(session);
  pending.credential = credential;
  pending.deadline = std::chrono::steady_clock::now() + kResumeLife;
  RGPU_LOG_INFO("session %llu: restored; waiting for its client to resume it",
                (unsigned long long)id);
  return Status::Ok();
}

void Server::JoinResume(const wire::Resume& resume, std::unique_ptr<Channel>& channel) {
  const uint64_t id = resume.session_id();
  std::string credential;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_resumes_.find(id);
    if (it != pending_resumes_.end() && it->second.deadline > std::chrono::steady_clock::now()) {
      credential = it->second.credential;
    }
  }
  if (credential.empty()) {
    RGPU_LOG_WARN("resume of session %llu from %s refused: no such session waits",
                  (unsigned long long)id, channel->peer().c_str());
    return RefuseResume(*channel, "no session " + std::to_string(id) + " waits to be resumed");
  }
  Status s = resume.protocol_version() == kProtocolVersion
                 ? Status::Ok()
                 : InvalidArgument("protocol version " + std::to_string(resume.protocol_version()));
  const std::string nonce = RandomBytes(kChallengeNonceBytes);
  if (s.ok() && nonce.size() != kChallengeNonceBytes) s = Internal("no random bytes");
  if (s.ok()) {
    wire::Envelope challenge;
    challenge.mutable_challenge()->set_nonce(nonce);
    s = channel->Send(challenge.SerializeAsString(), nullptr, 0);
  }
  ReceivedMessage m;
  if (s.ok()) s = channel->Receive(kHandshakeMs, &m);
  wire::Envelope answer;
  if (s.ok() && (!answer.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())) ||
                 answer.body_case() != wire::Envelope::kChallengeResponse ||
                 !VerifyResumeProof(credential, nonce, id, answer.challenge_response().proof()))) {
    s = PermissionDenied("wrong resume credential");
  }
  std::unique_ptr<Session> session;
  std::shared_ptr<Session> hosted;
  uint16_t host_port = 0;
  std::string host_pin;
  std::string host_credential;
  if (s.ok()) {
    // Its one use: whoever proves it first takes the session, and the credential goes with it.
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_resumes_.find(id);
    if (it != pending_resumes_.end() && it->second.credential == credential) {
      session = std::move(it->second.session);
      host_port = it->second.host_port;
      host_pin = it->second.host_pin;
      host_credential = it->second.host_credential;
      hosted = std::move(it->second.hosted);
      pending_resumes_.erase(it);
    } else {
      s = PermissionDenied("the session was resumed already");
    }
  }
  if (!s.ok()) {
    RGPU_LOG_WARN("resume of session %llu from %s refused: %s", (unsigned long long)id,
                  channel->peer().c_str(), s.message().c_str());
    return RefuseResume(*channel, s.message());
  }
  if (session == nullptr) {
    // Restored in a process of its own: the client goes on there, the same session id, with
    // the host's one credential (sent only now, to whoever proved the server's).
    wire::Envelope out;
    wire::Welcome* w = out.mutable_welcome();
    w->set_protocol_version(kProtocolVersion);
    w->set_session_id(id);
    w->set_redirect_port(host_port);
    w->set_redirect_token(host_credential);
    w->set_redirect_pin(host_pin);
    RGPU_LOG_INFO("session %llu: its client goes on to its process (port %u)",
                  (unsigned long long)id, (unsigned)host_port);
    if (hosted != nullptr) {
      hosted->NoteResumedInHost();
      if (agent_) agent_->SessionStarted(id);  // metered from its resume, as RunSession does
    }
    channel->Send(out.SerializeAsString(), nullptr, 0);
    return;
  }
  RunSession(*session, std::move(channel));
  session.reset();
  std::lock_guard<std::mutex> lock(mu_);
  live_.erase(id);
}

void Server::DrainAll() {
  std::string key;
  bool created = false;
  const std::string& key_file =
      options_.drain_key_file.empty() ? options_.operator_key_file : options_.drain_key_file;
  if (Status s = key_file.empty() ? NotFound("no key file")
                                  : registry::LoadOrCreateOperatorKey(key_file, &key, &created);
      !s.ok() || key.empty()) {
    RGPU_LOG_ERROR("cannot drain to %s: no operator key for it", options_.drain_to.c_str());
    return;
  }
  // The sessions of one registry lease move together (a lease moves whole); the others alone.
  std::vector<std::pair<std::string, std::vector<uint64_t>>> groups;
  size_t count = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, size_t> group_of_lease;
    for (const auto& [id, session] : sessions_) {
      if (!session->admitted()) continue;
      ++count;
      const std::string lease = agent_ ? session->lease_id() : "";
      auto known = lease.empty() ? group_of_lease.end() : group_of_lease.find(lease);
      if (known != group_of_lease.end()) {
        groups[known->second].second.push_back(id);
        continue;
      }
      if (!lease.empty()) group_of_lease[lease] = groups.size();
      groups.push_back({lease, {id}});
    }
  }
  RGPU_LOG_INFO("stopping: moving %zu session(s) to %s first", count, options_.drain_to.c_str());
  std::vector<std::thread> threads;
  std::atomic<int> moved{0};
  for (const auto& group : groups) {
    threads.emplace_back([this, &group, &key, &moved] {
      const auto& [lease, ids] = group;
      std::vector<std::pair<uint64_t, std::shared_ptr<MoveRequest>>> moves;
      std::string registry_name;
      Status s;
      for (uint64_t id : ids) {
        auto move = std::make_shared<MoveRequest>();
        move->kind = MoveRequest::Kind::kToServer;
        move->target_url = options_.drain_to;
        s = AskRestoreTicket(key, &move->ticket, &registry_name);
        if (!s.ok()) break;
        moves.push_back({id, std::move(move)});
      }
      std::string handed_over;  // the lease that goes along
      if (s.ok() && !lease.empty()) {
        MoveRequest first;  // receives the hand-over, which admits each of the lease's sessions
        s = HandOverLeaseOf(ids.front(), registry_name, &first, &handed_over);
        for (auto& [id, move] : moves) move->lease_token = first.lease_token;
      }
      if (!s.ok()) {
        for (uint64_t id : ids) {
          RGPU_LOG_WARN("session %llu: not moved to %s: %s", (unsigned long long)id,
                        options_.drain_to.c_str(), s.message().c_str());
        }
        return;
      }
      moved += MoveSessionsTogether(handed_over, std::move(moves), options_.drain_timeout_ms);
    });
  }
  for (std::thread& t : threads) t.join();
  RGPU_LOG_INFO("moved %d of %zu session(s) to %s", moved.load(), count, options_.drain_to.c_str());
}

Status Server::AskRestoreTicket(const std::string& key, std::string* ticket,
                                std::string* registry_name) {
  TransportUrl url;
  std::unique_ptr<Channel> ch;
  CredentialProver prover;
  Status s = TransportUrl::Parse(options_.drain_to, &url);
  if (s.ok()) s = CredentialProver::Parse(key, &prover);
  if (s.ok()) s = ConnectChannel(url, ChannelOptions(), &ch);
  wire::Envelope request;
  request.mutable_admin_request()->set_kind(wire::AdminRequest::RESTORE_TICKET);
  *request.mutable_admin_request()->mutable_credential() = prover.presented();
  if (s.ok()) s = ch->Send(request.SerializeAsString(), nullptr, 0);
  ReceivedMessage m;
  wire::Envelope reply;
  if (s.ok()) s = ch->Receive(kHandshakeMs, &m);
  if (s.ok() && !reply.ParseFromArray(m.header.data(), static_cast<int>(m.header.size()))) {
    s = ProtocolError("a malformed answer");
  }
  if (s.ok()) s = AnswerChallenge(ch.get(), prover, kHandshakeMs, &reply);
  if (s.ok() &&
      (reply.body_case() != wire::Envelope::kAdminReply || !reply.admin_reply().error().empty())) {
    s = PermissionDenied("no restore ticket: " + reply.admin_reply().error());
  }
  if (!s.ok()) return s;
  *ticket = reply.admin_reply().ticket();
  *registry_name = reply.admin_reply().registry_name();
  return Status::Ok();
}

int Server::MoveSessionsTogether(
    const std::string& lease, std::vector<std::pair<uint64_t, std::shared_ptr<MoveRequest>>> moves,
    uint32_t timeout_ms) {
  if (!lease.empty() && agent_) agent_->BeginLeaseMove(lease);
  std::vector<std::pair<uint64_t, std::shared_ptr<MoveRequest>>> asked;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, move] : moves) {
      auto it = sessions_.find(id);
      if (it != sessions_.end() && it->second->admitted() &&
          it->second->RequestMove(move, timeout_ms)) {
        asked.push_back({id, move});
      } else {
        RGPU_LOG_WARN(
            "session %llu: not moved to %s: it has ended, is moving already, or is "
            "parked",
            (unsigned long long)id, move->target_url.c_str());
      }
    }
  }
  // Each until its client has left for the target.
  std::vector<uint64_t> gone;
  for (auto& [id, move] : asked) {
    const Status s = move->Await(std::chrono::milliseconds(timeout_ms), std::chrono::seconds(10));
    if (s.ok()) {
      gone.push_back(id);
    } else {
      RGPU_LOG_WARN("session %llu: not moved to %s: %s", (unsigned long long)id,
                    move->target_url.c_str(), s.message().c_str());
    }
  }
  if (!lease.empty() && agent_) {
    // Their last records are made as each session's thread lets it go (RunSession).
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
      bool left = true;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (uint64_t id : gone) left = left && sessions_.count(id) == 0;
      }
      if (left || std::chrono::steady_clock::now() >= give_up) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    agent_->EndLeaseMove(lease);
    if (gone.empty()) {
      CancelLeaseHandOver(lease);
    } else if (gone.size() < moves.size()) {
      RGPU_LOG_WARN(
          "lease %s: %zu of its %zu session(s) here did not move with it; they stay, and "
          "are no longer billed here once the registry completes the hand-over",
          lease.c_str(), moves.size() - gone.size(), moves.size());
    }
  }
  return static_cast<int>(gone.size());
}

Status Server::LeaseMovesAlone(uint64_t id) {
  if (!agent_) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->lease_id().empty()) return Status::Ok();
  const std::string& lease = it->second->lease_id();
  size_t others = 0;
  for (const auto& [other, session] : sessions_) {
    if (other != id && session->admitted() && session->lease_id() == lease) ++others;
  }
  if (others == 0) return Status::Ok();
  return InvalidArgument(
      "session " + std::to_string(id) + " shares registry lease " + lease + " with " +
      std::to_string(others) +
      " other session(s) on this server, and a lease moves whole (the registry moves them "
      "together when it moves the lease, and rgpu-server --drain-to does): the session stays "
      "where it was");
}

Status Server::HandOverLeaseOf(uint64_t id, const std::string& target_name, MoveRequest* move,
                               std::string* lease_id) {
  std::string lease;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(id);
    if (it != sessions_.end()) lease = it->second->lease_id();
  }
  if (lease.empty() || !agent_) return Status::Ok();  // nothing the registry bills goes along
  if (target_name.empty()) {
    return InvalidArgument("session " + std::to_string(id) + " runs under registry lease " + lease +
                           ", and the target is not registered with a registry: the lease "
                           "cannot follow it there; the session stays where it was");
  }
  Status s = agent_->HandOverLease(lease, target_name, &move->lease_token);
  if (!s.ok()) {
    return InvalidArgument("the registry does not hand lease " + lease + " to " + target_name +
                           ": " + s.message() + "; the session stays where it was");
  }
  *lease_id = lease;
  return Status::Ok();
}

void Server::MoveHostedSession(const wire::HostMove& order,
                               const std::function<Status(const char*, size_t, bool)>& sink,
                               wire::HostMoveResult* result) {
  auto move = std::make_shared<MoveRequest>();
  if (order.checkpoint()) {
    move->kind = MoveRequest::Kind::kToStream;
    move->sink = sink;
  } else if (order.redirect()) {
    move->kind = MoveRequest::Kind::kRedirect;
    move->resume_url = order.resume_url();
    move->resume_session = order.resume_session();
    move->resume_credential = order.resume_credential();
  } else {
    move->kind = MoveRequest::Kind::kToServer;
    move->target_url = order.target_url();
    move->ticket = order.ticket();
    move->lease_token = order.lease_token();
  }
  const uint32_t timeout_ms = order.timeout_ms() == 0
                                  ? kDefaultMoveTimeoutMs
                                  : std::min(order.timeout_ms(), kMostMoveTimeoutMs);
  bool asked = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, session] : sessions_) {
      if (!session->admitted()) continue;
      asked = session->RequestMove(move, timeout_ms);
      break;
    }
  }
  // Until its client has left (a checkpoint's session parks: its client stays).
  const Status s = !asked ? InvalidArgument("the session is moving already, or not admitted")
                          : move->Await(std::chrono::milliseconds(timeout_ms),
                                        order.checkpoint() ? std::chrono::milliseconds(0)
                                                           : std::chrono::seconds(15));
  std::lock_guard<std::mutex> lock(move->mu);
  result->set_error(s.ok() ? "" : s.message());
  result->set_new_session(move->new_session);
  result->set_pause_ms(move->pause_ms);
  result->set_memory_bytes(move->memory_bytes);
  result->set_transfer_ms(move->transfer_ms);
}

void Server::CancelLeaseHandOver(const std::string& lease_id) {
  if (!agent_) return;
  if (Status s = agent_->CancelHandOver(lease_id); !s.ok()) {
    RGPU_LOG_WARN("lease %s: its hand-over not taken back (it lapses in two minutes): %s",
                  lease_id.c_str(), s.message().c_str());
  }
}

void Server::MoveLeaseSessions(const std::string& lease_id, const std::string& url,
                               const std::string& token) {
  running_threads_++;
  std::thread([this, lease_id, url, token] {
    std::vector<std::pair<uint64_t, std::shared_ptr<MoveRequest>>> moves;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [id, session] : sessions_) {
        if (!session->admitted() || session->lease_id() != lease_id) continue;
        auto move = std::make_shared<MoveRequest>();
        move->kind = MoveRequest::Kind::kToServer;
        move->target_url = url;
        move->lease_token = token;  // admits each of the lease's sessions there, once
        moves.push_back({id, std::move(move)});
      }
    }
    if (moves.empty()) {
      RGPU_LOG_WARN("lease %s: no session of it runs here to move to %s", lease_id.c_str(),
                    url.c_str());
      CancelLeaseHandOver(lease_id);
    } else {
      RGPU_LOG_INFO("lease %s under notice: moving to %s, as the registry asks (%zu session(s))",
                    lease_id.c_str(), url.c_str(), moves.size());
      const size_t asked = moves.size();
      const int moved = MoveSessionsTogether(lease_id, std::move(moves), options_.drain_timeout_ms);
      if (moved == 0) {
        RGPU_LOG_WARN("lease %s: its sessions were not moved to %s; they end with its notice",
                      lease_id.c_str(), url.c_str());
      } else {
        RGPU_LOG_INFO("lease %s: %d of its %zu session(s) moved to %s", lease_id.c_str(), moved,
                      asked, url.c_str());
      }
    }
    running_threads_--;
  }).detach();
}

void Server::ReapPendingResumes() {
  std::vector<std::unique_ptr<Session>> expired;  // released outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    for (auto it = pending_resumes_.begin(); it != pending_resumes_.end();) {
      if (it->second.deadline > now && !stop_.load()) {
        ++it;
        continue;
      }
      RGPU_LOG_WARN("session %llu: restored but never resumed; released",
                    (unsigned long long)it->first);
      // A host's session ends with its host, which a client that never comes ends itself.
      if (it->second.session != nullptr) live_.erase(it->first);
      expired.push_back(std::move(it->second.session));
      it = pending_resumes_.erase(it);
    }
    for (auto it = tickets_.begin(); it != tickets_.end();) {
      it = it->second <= now ? tickets_.erase(it) : std::next(it);
    }
    const int64_t unix_now = static_cast<int64_t>(time(nullptr));
    for (auto it = used_hand_overs_.begin(); it != used_hand_overs_.end();) {
      it = it->second.expires_unix < unix_now ? used_hand_overs_.erase(it) : std::next(it);
    }
  }
}

}  // namespace rgpu::server
