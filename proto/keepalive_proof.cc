#include "proto/keepalive_proof.h"

#include "proto/crypto.h"

namespace rgpu {

std::string KeepaliveProof(const std::string& secret, const std::string& nonce, uint64_t key) {
  std::string m = "rgpu-keepalive-proof-v1";
  m.push_back('\0');
  const uint64_t n = nonce.size();
  m.append(reinterpret_cast<const char*>(&n), sizeof n);
  m += nonce;
  m.append(reinterpret_cast<const char*>(&key), sizeof key);
  return HmacSha256(secret, m);
}

bool VerifyKeepaliveProof(const std::string& secret, const std::string& nonce, uint64_t key,
                          const std::string& proof) {
  if (secret.empty() || nonce.empty()) return false;
  return ConstantTimeEquals(KeepaliveProof(secret, nonce, key), proof);
}

}  // namespace rgpu
