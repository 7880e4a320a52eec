#include "cli/migrate.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "proto/rgpu.pb.h"
#include "proto/session_proof.h"
#include "transport/channel.h"

namespace rgpu::cli {
namespace {

constexpr int kConnectMs = 10000;
constexpr int kRestoreMs = 180000;  // a server restoring (or sending) a large checkpoint
constexpr size_t kChunkBytes = size_t{8} << 20;

// An operator's connection to `server_url`: the request sent and the server's challenge answered.
Status Open(const std::string& server_url, const std::string& key, wire::AdminRequest request,
            std::unique_ptr<Channel>* out) {
  TransportUrl url;
  Status s = TransportUrl::Parse(server_url, &url);
  CredentialProver prover;
  if (s.ok()) s = CredentialProver::Parse(key, &prover);
  ChannelOptions options;
  options.max_message_bytes = kChunkBytes + (1 << 20);
  if (s.ok()) s = ConnectChannel(url, options, out);
  if (!s.ok()) return s;
  *request.mutable_credential() = prover.presented();
  wire::Envelope envelope;
  *envelope.mutable_admin_request() = request;
  s = (*out)->Send(envelope.SerializeAsString(), nullptr, 0);
  ReceivedMessage m;
  if (s.ok()) s = (*out)->Receive(kConnectMs, &m);
  wire::Envelope reply;
  if (s.ok() && (!reply.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())) ||
                 reply.body_case() != wire::Envelope::kChallenge)) {
    s = ProtocolError(server_url + " did not challenge the operator's request");
  }
  std::string proof;
  if (s.ok()) s = prover.Prove(reply.challenge().nonce(), &proof);
  if (s.ok()) {
    wire::Envelope answer;
    answer.mutable_challenge_response()->set_proof(proof);
    s = (*out)->Send(answer.SerializeAsString(), nullptr, 0);
  }
  return s;
}

// Waits up to timeout_ms for the server's AdminReply; its error as a Status.
Status AwaitReply(Channel& channel, const std::string& server_url, int timeout_ms,
                  wire::AdminReply* reply) {
  ReceivedMessage m;
  Status s = channel.Receive(timeout_ms, &m);
  if (!s.ok()) return Unavailable("no answer from " + server_url + ": " + s.message());
  wire::Envelope in;
  if (!in.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())) ||
      in.body_case() != wire::Envelope::kAdminReply) {
    return ProtocolError(server_url + " did not answer the request");
  }
  *reply = in.admin_reply();
  if (!reply->error().empty()) return Unavailable(server_url + ": " + reply->error());
  return Status::Ok();
}

// One request, one answer.
Status Ask(const std::string& server_url, const std::string& key, const wire::AdminRequest& request,
           int timeout_ms, wire::AdminReply* reply) {
  std::unique_ptr<Channel> channel;
  Status s = Open(server_url, key, request, &channel);
  if (!s.ok()) return s;
  return AwaitReply(*channel, server_url, timeout_ms, reply);
}

int Failed(const char* command, const Status& s) {
  fprintf(stderr, "rgpu %s: %s\n", command, s.message().c_str());
  return 1;
}

// The server at `url`'s one-use restore ticket and its name at its registry (AdminReply).
Status AskRestoreTicket(const std::string& url, const std::string& key, wire::AdminReply* out) {
  wire::AdminRequest request;
  request.set_kind(wire::AdminRequest::RESTORE_TICKET);
  return Ask(url, key, request, kConnectMs, out);
}

// The server at `url`'s name at its registry ("": it has none), in AdminReply.
Status AskRegistryName(const std::string& url, const std::string& key, wire::AdminReply* out) {
  wire::AdminRequest request;
  request.set_kind(wire::AdminRequest::REGISTRY_NAME);
  return Ask(url, key, request, kConnectMs, out);
}

}  // namespace

int RunMigrate(const MoveOptions& o) {
  // The target's one-use ticket, which the source presents when it sends the checkpoint.
  wire::AdminReply ticket;
  Status s = AskRestoreTicket(o.to, o.key, &ticket);
  if (!s.ok()) return Failed("migrate", s);
  wire::AdminRequest request;
  request.set_kind(wire::AdminRequest::MIGRATE);
  request.set_session_id(o.session);
  request.set_target_url(o.to);
  request.set_ticket(ticket.ticket());
  request.set_target_registry_name(ticket.registry_name());  // a registry lease goes along
  request.set_timeout_ms(o.timeout_ms);
  wire::AdminReply done;
  s = Ask(o.server, o.key, request, static_cast<int>(o.timeout_ms) + kRestoreMs, &done);
  if (!s.ok()) return Failed("migrate", s);
  if (o.json) {
    printf(
        "{\"session\": %llu, \"pause_ms\": %.3f, \"memory_bytes\": %llu, "
        "\"transfer_ms\": %.3f}\n",
        (unsigned long long)done.session_id(), done.pause_ms(),
        (unsigned long long)done.memory_bytes(), done.transfer_ms());
  } else {
    printf(
        "session %llu of %s is session %llu of %s: %llu bytes of device memory moved, "
        "checkpoint taken and restored in %.1f ms, the program paused %.1f ms\n",
        (unsigned long long)o.session, o.server.c_str(), (unsigned long long)done.session_id(),
        o.to.c_str(), (unsigned long long)done.memory_bytes(), done.transfer_ms(), done.pause_ms());
  }
  return 0;
}

int RunCheckpoint(const MoveOptions& o) {
  wire::AdminRequest request;
  request.set_kind(wire::AdminRequest::CHECKPOINT);
  request.set_session_id(o.session);
  request.set_timeout_ms(o.timeout_ms);
  std::unique_ptr<Channel> channel;
  Status s = Open(o.server, o.key, request, &channel);
  if (!s.ok()) return Failed("checkpoint", s);
  const std::string partial = o.file + ".partial";
  // The tenant's device memory: readable by its owner only.
  const mode_t old_mask = umask(077);
  std::ofstream out(partial, std::ios::binary | std::ios::trunc);
  umask(old_mask);
  if (!out) return Failed("checkpoint", Unavailable("cannot write " + partial));
  uint64_t bytes = 0;
  int wait_ms = static_cast<int>(o.timeout_ms) + kRestoreMs;
  wire::AdminReply reply;
  for (;;) {
    ReceivedMessage m;
    s = channel->Receive(wait_ms, &m);
    if (!s.ok()) break;
    wait_ms = kRestoreMs;
    wire::Envelope in;
    if (!in.ParseFromArray(m.header.data(), static_cast<int>(m.header.size()))) {
      s = ProtocolError("a malformed message from " + o.server);
      break;
    }
    if (in.body_case() == wire::Envelope::kAdminReply) {
      reply = in.admin_reply();
      if (!reply.error().empty()) s = Unavailable(o.server + ": " + reply.error());
      break;
    }
    if (in.body_case() != wire::Envelope::kCheckpointChunk) {
      s = ProtocolError("an unexpected message from " + o.server);
      break;
    }
    out.write(m.payload, static_cast<std::streamsize>(m.payload_size));
    bytes += m.payload_size;
  }
  out.close();
  if (s.ok() && !out) s = Unavailable("cannot write " + partial);
  if (s.ok() && std::rename(partial.c_str(), o.file.c_str()) != 0) {
    s = Unavailable("cannot rename " + partial + " to " + o.file);
  }
  if (!s.ok()) {
    std::remove(partial.c_str());
    return Failed("checkpoint", s);
  }
  printf(
      "session %llu of %s is in %s (%llu bytes, %llu of device memory); its program waits "
      "until `rgpu restore --from %s --session %llu` puts it on a server\n",
      (unsigned long long)o.session, o.server.c_str(), o.file.c_str(), (unsigned long long)bytes,
      (unsigned long long)reply.memory_bytes(), o.server.c_str(), (unsigned long long)o.session);
  return 0;
}

int RunRestore(const MoveOptions& o) {
  std::ifstream in(o.file, std::ios::binary);
  if (!in) return Failed("restore", Unavailable("cannot read " + o.file));
  // A session under a registry lease takes it along when the target has a registry: the source,
  // where the session waits parked, has the registry hand the lease over to the target.
  wire::AdminReply target;
  Status s = AskRegistryName(o.server, o.key, &target);
  if (!s.ok()) return Failed("restore", s);
  wire::AdminReply handed;
  if (!target.registry_name().empty()) {
    wire::AdminRequest hand_over;
    hand_over.set_kind(wire::AdminRequest::HAND_OVER);
    hand_over.set_session_id(o.session);
    hand_over.set_target_registry_name(target.registry_name());
    s = Ask(o.from, o.key, hand_over, kConnectMs, &handed);
    if (!s.ok()) return Failed("restore", s);
  }
  // A restore or redirect that fails takes the hand-over back (the session stays parked).
  auto failed = [&](const Status& why) {
    if (!handed.hand_over().empty()) {
      wire::AdminRequest cancel;
      cancel.set_kind(wire::AdminRequest::CANCEL_HAND_OVER);
      cancel.set_session_id(o.session);
      wire::AdminReply ignored;
      (void)Ask(o.from, o.key, cancel, kConnectMs, &ignored);
    }
    return Failed("restore", why);
  };
  wire::AdminRequest request;
  request.set_kind(wire::AdminRequest::RESTORE);
  request.set_lease_hand_over(handed.hand_over());
  std::unique_ptr<Channel> channel;
  s = Open(o.server, o.key, request, &channel);
  if (!s.ok()) return failed(s);
  std::vector<char> chunk(kChunkBytes);
  wire::AdminReply restored;
  bool answered = false;
  while (s.ok()) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const size_t n = static_cast<size_t>(in.gcount());
    const bool last = in.eof() || n < chunk.size();
    wire::Envelope piece;
    piece.mutable_checkpoint_chunk()->set_last(last);
    s = channel->Send(piece.SerializeAsString(), chunk.data(), n);
    if (last || !s.ok()) break;
    // A server that refused the checkpoint (its header) answers before it has all of it.
    ReceivedMessage m;
    if (Status early = channel->Receive(0, &m); early.ok()) {
      wire::Envelope e;
      if (e.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())) &&
          e.body_case() == wire::Envelope::kAdminReply) {
        restored = e.admin_reply();
        answered = true;
      }
      break;
    }
  }
  if (!answered) s = AwaitReply(*channel, o.server, kRestoreMs, &restored);
  if (s.ok() && !restored.error().empty()) s = Unavailable(o.server + ": " + restored.error());
  if (!s.ok()) return failed(s);
  // The parked session's client is told where it went, and resumes it there.
  wire::AdminRequest redirect;
  redirect.set_kind(wire::AdminRequest::REDIRECT);
  redirect.set_session_id(o.session);
  redirect.set_target_url(o.server);
  redirect.set_target_session(restored.session_id());
  redirect.set_resume_credential(restored.resume_credential());
  wire::AdminReply done;
  s = Ask(o.from, o.key, redirect, kRestoreMs, &done);
  if (!s.ok()) return failed(s);
  if (o.json) {
    printf("{\"session\": %llu, \"pause_ms\": %.3f}\n", (unsigned long long)restored.session_id(),
           done.pause_ms());
  } else {
    printf("%s restored as session %llu of %s; the client of session %llu of %s resumed it\n",
           o.file.c_str(), (unsigned long long)restored.session_id(), o.server.c_str(),
           (unsigned long long)o.session, o.from.c_str());
  }
  return 0;
}

}  // namespace rgpu::cli
