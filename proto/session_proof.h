// Proof of possession at the handshake (rgpu.proto: Credential, Challenge, ChallengeResponse).
//
// A client's credential (what RGPU_TOKEN holds) is one of:
//   - a signed token with its holder key, "CLAIMS.SIGNATURE.HOLDER_KEY" (proto/signed_token.h):
//     the client presents the token part and signs the server's nonce with the holder key, which
//     the claims name;
//   - a secret token from a server's token file, or a server's operator key: the client presents
//     its SHA-256 digest and answers with an HMAC-SHA256 of the nonce keyed with the secret.
// Either way the proof covers a fresh random nonce of the server's, so what crosses the network
// cannot be replayed, and a secret token itself never crosses it. Thread-safe once made.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "proto/rgpu.pb.h"

namespace rgpu {

// Bytes of a server's challenge nonce.
constexpr size_t kChallengeNonceBytes = 32;

// The bytes a proof covers: a domain tag, the server's nonce and what the client presented.
std::string ProofMessage(const std::string& nonce, const wire::Credential& presented);

// The client's side: what it presents for a credential and how it answers a challenge.
class CredentialProver {
 public:
  // Parses `credential`; kInvalidArgument when it has a holder key that is not one.
  static Status Parse(const std::string& credential, CredentialProver* out);
  const wire::Credential& presented() const { return presented_; }
  // The proof for the server's challenge `nonce`.
  Status Prove(const std::string& nonce, std::string* proof) const;

 private:
  wire::Credential presented_;
  std::string secret_;          // a secret token: the HMAC key
  std::string holder_private_;  // a signed token: the Ed25519 key
};

// The server's side: checks a proof against a secret token it holds (HMAC) ...
bool VerifySecretProof(const std::string& secret, const std::string& nonce,
                       const wire::Credential& presented, const std::string& proof);
// ... or against the holder key a verified signed token's claims name (Ed25519).
bool VerifyHolderProof(const std::string& holder_public, const std::string& nonce,
                       const wire::Credential& presented, const std::string& proof);

// A session's resume (docs/migration.md): the client proves it holds the credential a migration
// gave it (Moved.credential) with HMAC-SHA256(credential, tag || nonce || session id) over the
// target server's fresh nonce, so the proof cannot be replayed and the credential never travels
// again.
std::string ResumeProof(const std::string& credential, const std::string& nonce,
                        uint64_t session_id);
// Constant-time check of a resume proof; false for an empty credential.
bool VerifyResumeProof(const std::string& credential, const std::string& nonce, uint64_t session_id,
                       const std::string& proof);

// Answers a server's Challenge on `channel` for `prover` when the server sends one: `reply` is
// the message the server answered the Hello or StatusRequest with; if it is a Challenge, the
// proof is sent and the server's next message replaces it (waiting up to timeout_ms).
class Channel;
Status AnswerChallenge(Channel* channel, const CredentialProver& prover, int timeout_ms,
                       wire::Envelope* reply);

}  // namespace rgpu
