#include "proto/session_proof.h"

#include "proto/crypto.h"
#include "proto/credential.h"
#include "transport/channel.h"

namespace rgpu {

std::string ProofMessage(const std::string& nonce, const wire::Credential& presented) {
  std::string m = "rgpu-session-proof-v1";
  m.push_back('\0');
  m += nonce;
  // Length-prefixed, so that no two presentations give the same bytes.
  for (const std::string* part : {&presented.token(), &presented.token_digest()}) {
    const uint64_t n = part->size();
    m.append(reinterpret_cast<const char*>(&n), sizeof n);
    m += *part;
  }
  return m;
}

namespace {
std::string ResumeProofMessage(const std::string& nonce, uint64_t session_id) {
  std::string m = "rgpu-resume-proof-v1";
  m.push_back('\0');
  const uint64_t n = nonce.size();
  m.append(reinterpret_cast<const char*>(&n), sizeof n);
  m += nonce;
  m.append(reinterpret_cast<const char*>(&session_id), sizeof session_id);
  return m;
}
}  // namespace

std::string ResumeProof(const std::string& credential, const std::string& nonce,
                        uint64_t session_id) {
  return HmacSha256(credential, ResumeProofMessage(nonce, session_id));
}

bool VerifyResumeProof(const std::string& credential, const std::string& nonce, uint64_t session_id,
                       const std::string& proof) {
  if (credential.empty() || nonce.empty()) return false;
  return ConstantTimeEquals(ResumeProof(credential, nonce, session_id), proof);
}

Status CredentialProver::Parse(const std::string& credential, CredentialProver* out) {
  *out = CredentialProver();
  std::string token, holder;
  if (!SplitCredential(credential, &token, &holder)) {
    return InvalidArgument("the credential's holder key is malformed");
  }
  if (!holder.empty()) {
    out->presented_.set_token(token);
    out->holder_private_ = holder;
  } else {
    out->presented_.set_token_digest(Sha256(credential));
    out->secret_ = credential;
  }
  return Status::Ok();
}

Status CredentialProver::Prove(const std::string& nonce, std::string* proof) const {
  const std::string message = ProofMessage(nonce, presented_);
  if (!holder_private_.empty()) return SignEd25519(holder_private_, message, proof);
  *proof = HmacSha256(secret_, message);
  return proof->empty() ? Internal("HMAC failed") : Status::Ok();
}

bool VerifySecretProof(const std::string& secret, const std::string& nonce,
                       const wire::Credential& presented, const std::string& proof) {
  return ConstantTimeEquals(HmacSha256(secret, ProofMessage(nonce, presented)), proof);
}

bool VerifyHolderProof(const std::string& holder_public, const std::string& nonce,
                       const wire::Credential& presented, const std::string& proof) {
  return VerifyEd25519(holder_public, ProofMessage(nonce, presented), proof);
}

Status AnswerChallenge(Channel* channel, const CredentialProver& prover, int timeout_ms,
                       wire::Envelope* reply) {
  if (reply->body_case() != wire::Envelope::kChallenge) return Status::Ok();
  if (reply->challenge().nonce().size() != kChallengeNonceBytes) {
    return ProtocolError("the server's challenge is malformed");
  }
  wire::Envelope answer;
  Status s = prover.Prove(reply->challenge().nonce(),
                          answer.mutable_challenge_response()->mutable_proof());
  if (!s.ok()) return s;
  s = channel->Send(answer.SerializeAsString(), nullptr, 0);
  if (!s.ok()) return s;
  ReceivedMessage m;
  s = channel->Receive(timeout_ms, &m);
  if (!s.ok()) return s;
  if (!reply->ParseFromArray(m.header.data(), static_cast<int>(m.header.size()))) {
    return ProtocolError("the server's answer to the proof is malformed");
  }
  return Status::Ok();
}

}  // namespace rgpu
