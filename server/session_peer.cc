// Copies between two servers' devices (proto/calls.def: PeerGrant, MemcpyPeerRemote; the wire's
// PeerJoin). The client of a program with devices on servers S and O copies between them by
// asking O for a ticket to one range of its session (PeerGrant, one use, a minute) and posting
// MemcpyPeerRemote on S's stream: when the stream reaches it, S connects to O, names the ticket
// (PeerJoin) and the bytes travel between the servers in chunks, not through the tenant.
//
// The tenant names the URL S connects to, so it could point S at any host and port S reaches
// (another service of the provider's network). S therefore sends there nothing the tenant chose:
// the ticket travels as its SHA-256, beside a nonce of S's, and S sends or takes bytes only once
// the answer proves the ticket over that nonce (server/peer_join_proof.h), which only the server
// that granted it (or the tenant itself) can compute. What S tells the tenant of a failure does not
// say whether anything listened at the URL (S's log does).
//
// Locking: a server serving a peer transfer (ServePeer, on the connection's thread) takes its
// session's state lock for each chunk's copy only, and checks the range again each time, so the
// tenant cannot free the memory under a transfer; the session thread running MemcpyPeerRemote
// releases its own state lock while bytes travel (its tables are touched by no other thread's
// writes meanwhile), so that two transfers in opposite directions never wait for each other.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "common/log.h"
#include "proto/crypto.h"
#include "proto/protocol_version.h"
#include "server/peer_join_proof.h"
#include "server/require_fn.h"
#include "server/session.h"
#include "transport/url.h"

namespace rgpu::server {
namespace {

constexpr size_t kPeerChunk = size_t{4} << 20;  // bytes per message
constexpr int64_t kGrantLifetimeMs = 60000;
constexpr size_t kMaxGrants = 64;
constexpr size_t kTicketBytes = 16;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string TicketOf(uint64_t t0, uint64_t t1) {
  std::string t(kTicketBytes, '\0');
  memcpy(t.data(), &t0, 8);
  memcpy(t.data() + 8, &t1, 8);
  return t;
}

// A Reply message of a peer transfer: `status`, and for a chunk its offset.
std::string PeerReply(CUresult status, uint64_t offset, const std::string& message = "") {
  wire::Envelope e;
  e.mutable_reply()->set_result(status);
  e.mutable_reply()->add_values(offset);
  if (!message.empty()) e.mutable_reply()->set_message(message);
  return e.SerializeAsString();
}

// Reads one Reply of a peer transfer from `channel`, waiting up to `timeout_ms`; its payload
// (fetched) lands in `data`.
CUresult ReceivePeerReply(Channel& channel, int timeout_ms, std::vector<char>* data,
                          wire::Reply* reply, std::string* why) {
  ReceivedMessage m;
  Status s = channel.Receive(timeout_ms, &m);
  if (!s.ok()) {
    *why = "the other server: " + s.ToString();
    return CUDA_ERROR_DEVICE_UNAVAILABLE;
  }
  wire::Envelope e;
  if (!e.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())) ||
      e.body_case() != wire::Envelope::kReply || e.reply().values_size() != 1 ||
      m.payload_size > kPeerChunk) {
    *why = "the other server sent something other than a transfer's reply";
    return CUDA_ERROR_DEVICE_UNAVAILABLE;
  }
  data->resize(m.payload_size);
  if (m.payload_pending) {
    if (!channel.FetchPayload(&m, data->data()).ok()) {
      *why = "the other server's bytes did not arrive";
      return CUDA_ERROR_DEVICE_UNAVAILABLE;
    }
  } else if (m.payload_size > 0) {
    memcpy(data->data(), m.payload, m.payload_size);
  }
  *reply = e.reply();
  return CUDA_SUCCESS;
}

// True when `text` is a server's URL whose host is a name or address (letters, digits, '.', '-',
// ':' of an IPv6 address): the host travels to whatever listens there (a tls:// connection names
// it in its first bytes), so a tenant's URL carries no other text there, a line break least.
bool PlainServerUrl(const std::string& text) {
  TransportUrl url;
  if (!TransportUrl::Parse(text, &url).ok() || url.scheme == TransportUrl::Scheme::kLocal ||
      url.host.empty() || url.host.size() > 253) {
    return false;
  }
  return std::all_of(url.host.begin(), url.host.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == ':';
  });
}

}  // namespace

CUresult Session::HandlePeerGrant(CallState& cs, const PeerGrantIn& in,
                                  calls::PeerGrant::Results* out) {
  if (in.bytes == 0) {
    cs.detail = "an empty range";
    return CUDA_ERROR_INVALID_VALUE;
  }
  const std::string ticket = RandomBytes(kTicketBytes);
  if (ticket.size() != kTicketBytes) return CUDA_ERROR_UNKNOWN;
  std::lock_guard<std::mutex> lock(lanes_mu_);
  const int64_t now = NowMs();
  std::erase_if(grants_, [now](const PeerGrantRecord& g) { return g.expires_ms <= now; });
  if (grants_.size() >= kMaxGrants) {
    cs.detail = "too many copies between servers pending for this session";
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  grants_.push_back({ticket, PeerTicketDigest(ticket), cs.ctx_id, in.ptr, in.bytes, in.write,
                     now + kGrantLifetimeMs});
  memcpy(&out->ticket0, ticket.data(), 8);
  memcpy(&out->ticket1, ticket.data() + 8, 8);
  return CUDA_SUCCESS;
}

bool Session::AttachPeer(const std::string& ticket_digest, PeerGrantRecord* grant) {
  if (ticket_digest.size() != 32) return false;
  std::lock_guard<std::mutex> lock(lanes_mu_);
  if (lanes_closing_.load()) return false;
  const int64_t now = NowMs();
  for (auto it = grants_.begin(); it != grants_.end(); ++it) {
    if (ConstantTimeEquals(it->ticket_digest, ticket_digest)) {
      const bool live = it->expires_ms > now;
      *grant = *it;
      grants_.erase(it);  // one use, whatever happens next
      if (!live) return false;
      ++lanes_active_;
      return true;
    }
  }
  return false;
}

CUresult Session::PeerChunk(const PeerGrantRecord& grant, uint64_t offset, void* host,
                            size_t size) {
  OwnerMutex::Guest guest(state_mu_);
  std::lock_guard<std::mutex> lock(state_mu_.mutex());
  const ContextRecord* ctx = contexts_.Find(grant.ctx_id);
  if (ctx == nullptr || ctx->destroyed) return CUDA_ERROR_INVALID_CONTEXT;
  if (!OwnsRange(grant.ctx_id, grant.ptr + offset, size)) return CUDA_ERROR_INVALID_VALUE;
  if (drv_.cuCtxSetCurrent == nullptr || drv_.cuStreamCreate == nullptr ||
      drv_.cuStreamSynchronize == nullptr || drv_.cuStreamDestroy == nullptr ||
      drv_.cuMemcpyHtoDAsync == nullptr || drv_.cuMemcpyDtoHAsync == nullptr) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  CUresult r = drv_.cuCtxSetCurrent(ctx->context);
  if (r != CUDA_SUCCESS) return r;
  // A stream of the server's own, ordered after nothing of the tenant's: the copy is ordered on
  // the other server's stream, as CUDA orders a peer copy on one stream.
  CUstream stream = nullptr;
  r = drv_.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
  if (r == CUDA_SUCCESS) {
    r = grant.write ? drv_.cuMemcpyHtoDAsync(grant.ptr + offset, host, size, stream)
                    : drv_.cuMemcpyDtoHAsync(host, grant.ptr + offset, size, stream);
    const CUresult synced = drv_.cuStreamSynchronize(stream);
    if (r == CUDA_SUCCESS) r = synced;
    drv_.cuStreamDestroy(stream);
  }
  drv_.cuCtxSetCurrent(nullptr);
  return r;
}

bool Session::ServePeer(Channel& peer, const PeerGrantRecord& grant, const std::string& nonce) {
  // A joiner without a nonce gets a Welcome without a proof, which no server of this protocol
  // takes; the grant is spent either way.
  Status s = BeginSideChannel(
      peer, nonce.size() == kPeerNonceBytes ? PeerJoinProof(grant.ticket, nonce) : std::string());
  std::vector<char> buffer;
  CUresult r = CUDA_SUCCESS;
  std::string why;
  for (uint64_t done = 0; s.ok() && r == CUDA_SUCCESS && done < grant.bytes;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kPeerChunk, grant.bytes - done));
    if (grant.write) {
      wire::Reply chunk;
      r = ReceivePeerReply(peer, limits_.peer_timeout_ms, &buffer, &chunk, &why);
      if (r != CUDA_SUCCESS) break;
      if (chunk.values(0) != done || buffer.size() != n) {
        r = CUDA_ERROR_INVALID_VALUE;
        why = "a chunk out of order or of the wrong size";
        break;
      }
      r = PeerChunk(grant, done, buffer.data(), n);
    } else {
      buffer.resize(n);
      r = PeerChunk(grant, done, buffer.data(), n);
      if (r == CUDA_SUCCESS) s = peer.Send(PeerReply(CUDA_SUCCESS, done), buffer.data(), n);
    }
    done += n;
  }
  if (r != CUDA_SUCCESS) {
    RGPU_LOG_WARN("session %llu: a copy to another server failed (%d)%s%s", (unsigned long long)id_,
                  r, why.empty() ? "" : ": ", why.c_str());
    peer.Send(PeerReply(r, 0, why), nullptr, 0);
  } else if (grant.write && s.ok()) {
    peer.Send(PeerReply(CUDA_SUCCESS, grant.bytes), nullptr, 0);
  }
  EndSideChannel(peer);
  return s.ok() && r == CUDA_SUCCESS;
}

CUresult Session::HandleMemcpyPeerRemote(CallState& cs, const MemcpyPeerRemoteIn& in,
                                         calls::MemcpyPeerRemote::Results*) {
  if (in.bytes == 0) return CUDA_SUCCESS;
  const std::string url_text = PayloadName(cs.payload, cs.payload_size);
  if (!peer_connector_) {
    cs.detail = "this server makes no copies to other servers";
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (!PlainServerUrl(url_text)) {
    cs.detail = "not a server's URL (a host of letters, digits, '.', '-' or ':', and a port)";
    return CUDA_ERROR_INVALID_VALUE;
  }
  REQUIRE_FN(cuStreamSynchronize);
  REQUIRE_FN(cuMemcpyHtoD);
  REQUIRE_FN(cuMemcpyDtoH);
  // In stream order: what the stream holds before the copy ends first.
  if (CUresult r = drv_.cuStreamSynchronize(in.stream.stream); r != CUDA_SUCCESS) return r;
  const CUcontext context = cs.ctx->context;
  // Bytes travel without this session's state lock (see the file's comment).
  const bool relock = state_mu_.held();
  if (relock) state_mu_.Unlock();
  CUresult r = CUDA_SUCCESS;
  std::string why;  // for the tenant
  const std::string ticket = TicketOf(in.ticket0, in.ticket1);
  // What the tenant is told when whatever is at the URL did not prove the ticket, whether
  // nothing listened there, something else did, or it did not answer: the same, so that copies
  // do not map what this server reaches. The log says which.
  const std::string unproven = "no server that granted the transfer answered at " + url_text;
  // One deadline for the whole attempt (reconnections included): the peer's answers are waited
  // for until then, and an unproven peer's failure is answered then.
  const auto answer_at =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(limits_.peer_timeout_ms);
  auto remaining_ms = [&answer_at] {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          answer_at - std::chrono::steady_clock::now())
                          .count();
    return static_cast<int>(std::max<int64_t>(1, left));
  };
  // Logs why whatever is at the URL did not prove the ticket; the tenant is told `unproven`.
  auto not_proven = [&](const std::string& what) {
    RGPU_LOG_WARN("session %llu: copy between servers: %s %s", (unsigned long long)id_,
                  url_text.c_str(), what.c_str());
    why = unproven;
  };
  // Names the ticket on `ch`: 1 admitted (the answer proved the ticket), 0 refused or not
  // proven (why says so), -1 the connection failed.
  auto join = [&](Channel* ch) {
    const std::string nonce = RandomBytes(kPeerNonceBytes);
    if (nonce.size() != kPeerNonceBytes) {
      why = "no random bytes for the transfer";
      return 0;
    }
    wire::Envelope j;
    j.mutable_peer_join()->set_session_id(in.peer_session);
    j.mutable_peer_join()->set_ticket_digest(PeerTicketDigest(ticket));
    j.mutable_peer_join()->set_nonce(nonce);
    ReceivedMessage m;
    wire::Envelope answer;
    Status s = ch->Send(j.SerializeAsString(), nullptr, 0);
    if (s.ok()) s = ch->Receive(remaining_ms(), &m);
    if (!s.ok()) {
      not_proven("did not answer: " + s.message());
      return -1;
    }
    if (!answer.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())) ||
        answer.body_case() != wire::Envelope::kWelcome) {
      not_proven("answered something other than a server's");
      return 0;
    }
    if (answer.welcome().status() != 0) {
      // Its words are not relayed: whatever answered at a URL the tenant chose is not the
      // tenant's to hear from.
      not_proven("refused the transfer: " + answer.welcome().error().substr(0, 200));
      why = "the server at " + url_text +
            " refused the transfer (a wrong, used or expired ticket, or not the server that "
            "granted it)";
      return 0;
    }
    const std::string& proof = answer.welcome().peer_proof();
    if (proof.size() != 32 || !ConstantTimeEquals(proof, PeerJoinProof(ticket, nonce))) {
      not_proven("admitted the transfer without proving its ticket");
      return 0;
    }
    return 1;
  };
  // While it is used, the session's end (Abort) gives up on the connection too: the other end
  // (which may be the tenant's own) could stall half-way through a message and hold this thread.
  auto watch = [this](Channel* ch) {
    std::lock_guard<std::mutex> lock(abort_mu_);
    abort_peer_channel_ = ch;
    if (ch != nullptr && aborted_.load()) ch->Abandon("the session is ending");
  };
  // A connection kept from an earlier copy to that server, else a new one.
  std::unique_ptr<Channel> channel;
  int joined = -1;
  if (auto kept = peer_channels_.find(url_text); kept != peer_channels_.end()) {
    channel = std::move(kept->second);
    peer_channels_.erase(kept);
    watch(channel.get());
    joined = join(channel.get());
  }
  if (joined < 0) {
    watch(nullptr);
    channel.reset();
    if (Status s = peer_connector_(url_text, &channel); !s.ok()) {
      not_proven("cannot be reached: " + s.message());
    } else {
      watch(channel.get());
      joined = join(channel.get());
    }
  }
  if (joined != 1) r = CUDA_ERROR_DEVICE_UNAVAILABLE;
  if (joined != 1 && why == unproven) {
    // Answered when a silent peer's would be, so that the time a copy takes to fail does not
    // tell whether the port is closed, open to something else, or silent. The session's end
    // does not wait for it.
    while (!aborted_.load() && std::chrono::steady_clock::now() < answer_at) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::vector<char> buffer;
  for (uint64_t done = 0; r == CUDA_SUCCESS && done < in.bytes;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kPeerChunk, in.bytes - done));
    if (in.to_peer) {
      buffer.resize(n);
      drv_.cuCtxSetCurrent(context);
      r = drv_.cuMemcpyDtoH(buffer.data(), in.local + done, n);
      if (r == CUDA_SUCCESS &&
          !channel->Send(PeerReply(CUDA_SUCCESS, done), buffer.data(), n).ok()) {
        why = "the other server went away";
        r = CUDA_ERROR_DEVICE_UNAVAILABLE;
      }
    } else {
      wire::Reply chunk;
      r = ReceivePeerReply(*channel, limits_.peer_timeout_ms, &buffer, &chunk, &why);
      if (r == CUDA_SUCCESS && chunk.result() != CUDA_SUCCESS) {
        why = "the other server: " + chunk.message();
        r = static_cast<CUresult>(chunk.result());
      } else if (r == CUDA_SUCCESS && (chunk.values(0) != done || buffer.size() != n)) {
        why = "the other server sent a chunk out of order";
        r = CUDA_ERROR_DEVICE_UNAVAILABLE;
      }
      if (r == CUDA_SUCCESS) {
        drv_.cuCtxSetCurrent(context);
        r = drv_.cuMemcpyHtoD(in.local + done, buffer.data(), n);
      }
    }
    done += n;
  }
  if (r == CUDA_SUCCESS && in.to_peer) {  // the other server says whether it wrote them all
    wire::Reply done;
    r = ReceivePeerReply(*channel, limits_.peer_timeout_ms, &buffer, &done, &why);
    if (r == CUDA_SUCCESS && done.result() != CUDA_SUCCESS) {
      why = "the other server: " + done.message();
      r = static_cast<CUresult>(done.result());
    }
  }
  watch(nullptr);
  // A connection that carried a whole transfer serves the next one to that server.
  constexpr size_t kKeptConnections = 8;
  if (r == CUDA_SUCCESS && peer_channels_.size() < kKeptConnections) {
    peer_channels_[url_text] = std::move(channel);
  }
  channel.reset();
  if (relock) state_mu_.Lock();
  drv_.cuCtxSetCurrent(context);
  if (r != CUDA_SUCCESS) cs.detail = why;
  return r;
}

}  // namespace rgpu::server
