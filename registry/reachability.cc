#include "registry/reachability.h"

#include <chrono>
#include <thread>

#include "proto/crypto.h"
#include "proto/rgpu.pb.h"
#include "transport/channel.h"

namespace rgpu::registry {
namespace {

// One attempt: connect, send the probe, check the answer.
Status ProbeOnce(const TransportUrl& url, const std::string& secret, int attempt_ms) {
  const std::string nonce = RandomBytes(32);
  if (nonce.empty()) return Internal("no random bytes for the probe's nonce");
  ChannelOptions options;
  options.max_queued_messages = 4;  // the answer is one small message
  options.max_queued_bytes = 64 * 1024;
  options.max_message_bytes = 64 * 1024;
  std::unique_ptr<Channel> channel;
  Status s = ConnectChannel(url, options, &channel);
  if (!s.ok()) return Unavailable("cannot connect: " + s.message());
  wire::Envelope probe;
  probe.mutable_reachability_probe()->set_nonce(nonce);
  // Posted, not sent: a peer that never completes the connection is bounded by the wait below.
  s = channel->Post(probe.SerializeAsString(), nullptr, 0);
  if (!s.ok()) return Unavailable("cannot send the probe: " + s.message());
  ReceivedMessage answer;
  s = channel->Receive(attempt_ms, &answer);
  if (!s.ok()) return Unavailable("no answer to the probe: " + s.message());
  wire::Envelope reply;
  if (!reply.ParseFromString(answer.header) || !reply.has_reachability_proof()) {
    return PermissionDenied(
        "what answers there does not answer the reachability probe (not an rgpu-server, or one "
        "older than the registry)");
  }
  if (!ConstantTimeEquals(reply.reachability_proof().mac(), HmacSha256(secret, nonce))) {
    return PermissionDenied(
        "the server answering there is not the one that registered (wrong reachability proof)");
  }
  return Status::Ok();
}

}  // namespace

Status ProbeReachability(const std::string& url_text, const std::string& secret, int window_ms,
                         int attempt_ms) {
  TransportUrl url;
  Status s = TransportUrl::Parse(url_text, &url);
  if (!s.ok()) return s;
  if (url.port == 0) return InvalidArgument("server URL " + url_text + " has no port");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(window_ms);
  for (;;) {
    s = ProbeOnce(url, secret, attempt_ms);
    // A wrong proof is final; a connection that fails may be a server still starting.
    if (s.ok() || s.code() != Status::Code::kUnavailable) return s;
    if (std::chrono::steady_clock::now() >= deadline) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

}  // namespace rgpu::registry
