#include "cli/status.h"

#include <cstdio>

#include "cli/json_text.h"
#include "proto/rgpu.pb.h"
#include "proto/session_proof.h"
#include "transport/channel.h"

namespace rgpu::cli {

int RunStatus(const std::string& server_url, const std::string& credential, bool json) {
  TransportUrl url;
  Status s = TransportUrl::Parse(server_url, &url);
  CredentialProver prover;
  if (s.ok()) s = CredentialProver::Parse(credential, &prover);
  std::unique_ptr<Channel> ch;
  if (s.ok()) s = ConnectChannel(url, ChannelOptions(), &ch);
  wire::Envelope request;
  *request.mutable_status_request()->mutable_credential() = prover.presented();
  if (s.ok()) s = ch->Send(request.SerializeAsString(), nullptr, 0);
  ReceivedMessage m;
  if (s.ok()) s = ch->Receive(10000, &m);
  wire::Envelope reply;
  if (s.ok() && !reply.ParseFromArray(m.header.data(), static_cast<int>(m.header.size()))) {
    s = ProtocolError("the server did not answer with its status");
  }
  if (s.ok()) s = AnswerChallenge(ch.get(), prover, 10000, &reply);
  if (s.ok() && reply.body_case() != wire::Envelope::kStatusReply) {
    s = ProtocolError("the server did not answer with its status");
  }
  if (s.ok() && !reply.status_reply().error().empty()) {
    s = PermissionDenied("the server refused: " + reply.status_reply().error());
  }
  if (!s.ok()) {
    fprintf(stderr, "rgpu status: %s\n", s.ToString().c_str());
    return 1;
  }
  const wire::StatusReply& r = reply.status_reply();
  if (json) {
    printf("{\"backend\": %s, \"sessions\": [", JsonString(r.backend()).c_str());
    for (int i = 0; i < r.sessions_size(); ++i) {
      const wire::SessionStats& x = r.sessions(i);
      printf(
          "%s{\"session\": %llu, \"tenant\": %s, \"client\": %s, \"memory_bytes\": %llu, "
          "\"gpu_busy_seconds\": %.6f, \"calls\": %llu, \"waited_calls\": %llu, "
          "\"bytes_in\": %llu, \"bytes_out\": %llu, \"queue_depth\": %llu, \"state\": %s}",
          i ? ", " : "", (unsigned long long)x.session_id(), JsonString(x.tenant()).c_str(),
          JsonString(x.client()).c_str(), (unsigned long long)x.memory_bytes(),
          x.gpu_busy_seconds(), (unsigned long long)x.calls(), (unsigned long long)x.waited_calls(),
          (unsigned long long)x.bytes_in(), (unsigned long long)x.bytes_out(),
          (unsigned long long)x.queue_depth(),
          JsonString(x.state().empty() ? "running" : x.state()).c_str());
    }
    printf("], \"ended\": [");
    for (int i = 0; i < r.ended_size(); ++i) {
      const wire::EndedSessions& e = r.ended(i);
      printf(
          "%s{\"tenant\": %s, \"exited\": %llu, \"lost\": %llu, \"closed\": %llu, "
          "\"shutdown\": %llu, \"moved\": %llu}",
          i ? ", " : "", JsonString(e.tenant()).c_str(), (unsigned long long)e.exited(),
          (unsigned long long)e.lost(), (unsigned long long)e.closed(),
          (unsigned long long)e.shutdown(), (unsigned long long)e.moved());
    }
    printf("]}\n");
    return 0;
  }
  printf("%d session(s) on %s (%s backend)\n", r.sessions_size(), server_url.c_str(),
         r.backend().c_str());
  printf("%8s %-12s %12s %10s %10s %12s %12s %6s %-8s %s\n", "session", "tenant", "memory MiB",
         "gpu s", "calls", "in MiB", "out MiB", "queue", "state", "client");
  for (const wire::SessionStats& x : r.sessions()) {
    printf("%8llu %-12s %12.1f %10.3f %10llu %12.1f %12.1f %6llu %-8s %s\n",
           (unsigned long long)x.session_id(), x.tenant().empty() ? "-" : x.tenant().c_str(),
           x.memory_bytes() / 1048576.0, x.gpu_busy_seconds(), (unsigned long long)x.calls(),
           x.bytes_in() / 1048576.0, x.bytes_out() / 1048576.0, (unsigned long long)x.queue_depth(),
           x.state().empty() ? "running" : x.state().c_str(), x.client().c_str());
  }
  for (const wire::EndedSessions& e : r.ended()) {
    printf(
        "ended sessions of %s: %llu exited, %llu lost, %llu closed by the server, %llu at its "
        "shutdown, %llu moved\n",
        e.tenant().empty() ? "-" : e.tenant().c_str(), (unsigned long long)e.exited(),
        (unsigned long long)e.lost(), (unsigned long long)e.closed(),
        (unsigned long long)e.shutdown(), (unsigned long long)e.moved());
  }
  return 0;
}

}  // namespace rgpu::cli
