#include "server/peer_join_proof.h"

#include "proto/crypto.h"

namespace rgpu::server {

std::string PeerTicketDigest(const std::string& ticket) { return Sha256(ticket); }

std::string PeerJoinProof(const std::string& ticket, const std::string& nonce) {
  std::string m = "rgpu-peer-join-proof-v1";
  m.push_back('\0');
  m += nonce;
  return HmacSha256(ticket, m);
}

}  // namespace rgpu::server
