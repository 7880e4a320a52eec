// Signed session tokens: TokenClaims (proto/token.proto) signed with Ed25519 (OpenSSL).
//   token = base64url(claims) "." base64url(signature)
#pragma once

#include <string>

#include "common/status.h"
#include "proto/credential.h"
#include "proto/token.pb.h"

namespace rgpu {

// Writes a new Ed25519 key pair as PEM files.
Status GenerateTokenKeys(const std::string& private_pem_path, const std::string& public_pem_path);

// Signs `claims` with the private key in `private_pem_path`.
Status SignToken(const wire::TokenClaims& claims, const std::string& private_pem_path,
                 std::string* token);

// Verifies a token against a public key (read once from a PEM file) and returns its claims. A token
// that is malformed or whose signature does not verify is kPermissionDenied. Expiry and the
// server/GPU claims are for the caller to check.
class TokenVerifier {
 public:
  static Status FromPublicKeyFile(const std::string& path, TokenVerifier* out);
  Status Verify(const std::string& token, wire::TokenClaims* claims) const;

 private:
  std::string public_raw_;  // the Ed25519 public key, 32 bytes
};

}  // namespace rgpu
