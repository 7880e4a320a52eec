// How a copy between two servers proves the server it reaches (server/session_peer.cc).
//
// A PeerJoin names the ticket the granting server gave its tenant (PeerGrant) by
// PeerTicketDigest and carries a fresh nonce of the joining server's; the granting server answers
// with PeerJoinProof of that nonce under the ticket. The joining server sends or takes bytes only
// after checking the proof, so that a URL the tenant chose reaches nothing it did not grant.
// On rgpu_crypto (proto/crypto.h); thread-safe, no state.
#pragma once

#include <cstddef>
#include <string>

namespace rgpu::server {

constexpr size_t kPeerNonceBytes = 16;

// SHA-256 of the ticket (32 bytes).
std::string PeerTicketDigest(const std::string& ticket);
// HMAC-SHA256(ticket, tag || nonce) (32 bytes).
std::string PeerJoinProof(const std::string& ticket, const std::string& nonce);

}  // namespace rgpu::server
