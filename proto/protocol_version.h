// The wire protocol version both sides put in Hello/Welcome. Bump it on any incompatible change
// to rgpu.proto or to the argument layout of an operation in calls.def.
#pragma once

#include <cstdint>

namespace rgpu {
// 19: a redirect to a session's process over tls:// names the key that process proves
// (Welcome.redirect_pin; hosts no longer hold the server's key); 18: a peer transfer names its
// ticket by digest and the granting server proves the ticket over the joiner's nonce (PeerJoin,
// Welcome.peer_proof); 17: the keepalive port's announcement proves the Welcome's liveness_secret
// over a nonce (proto/keepalive_proof.h); 16: compact frames for waited calls and plain replies
// (proto/compact_frame.h); 15: sessions in processes of their own (Welcome.redirect_port,
// redirect_token); 14: sessions that move (Reply.moved, Resume); 13: posted reads (ReadData),
// posted PrimaryCtxRetain.
constexpr uint32_t kProtocolVersion = 19;
}  // namespace rgpu
