// The proof that opens a session's keepalive connection (server/liveness_service.h,
// client/liveness_monitor.h).
//
// The server sends a fresh nonce of kKeepaliveNonceBytes when it accepts a connection on its
// keepalive port; the client answers with its session's liveness key (8 bytes, little-endian: the
// public name of the session on that port) and KeepaliveProof of the nonce under the liveness
// secret its Welcome gave it. The port is never encrypted: what crosses it cannot be replayed on
// another connection and does not tell the secret. On rgpu_crypto or rgpu_crypto_nettle
// (proto/crypto.h); thread-safe, no state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace rgpu {

constexpr size_t kKeepaliveNonceBytes = 16;
constexpr size_t kKeepaliveProofBytes = 32;
constexpr size_t kKeepaliveSecretBytes = 32;

// HMAC-SHA256(secret, tag || nonce || key); kKeepaliveProofBytes.
std::string KeepaliveProof(const std::string& secret, const std::string& nonce, uint64_t key);
// Constant-time check of a keepalive proof; false for an empty secret or nonce.
bool VerifyKeepaliveProof(const std::string& secret, const std::string& nonce, uint64_t key,
                          const std::string& proof);

}  // namespace rgpu
