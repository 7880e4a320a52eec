// Signed session tokens: TokenClaims (proto/token.proto) signed with Ed25519 (OpenSSL).
//   token = base64url(claims) "." base64url(signature)
#pragma once

#include <string>

#include "common/status.h"
#include "proto/token.pb.h"

namespace rgpu {

// Writes a new Ed25519 key pair as PEM files.
Status GenerateTokenKeys(const std::string& private_pem_path, const std::string& public_pem_path);

// Signs `claims` with the private key in `private_pem_path`.
Status SignToken(const wire::TokenClaims& claims, const std::string& private_pem_path,
                 std::string* token);

// Verifies a token against a public key (PEM text, not a path) and returns its claims. A token
// that is malformed or whose signature does not verify is kPermissionDenied. Expiry and the
// server/GPU claims are for the caller to check.
class TokenVerifier {
 public:
  static Status FromPublicKeyFile(const std::string& path, TokenVerifier* out);
  Status Verify(const std::string& token, wire::TokenClaims* claims) const;

 private:
  std::string public_pem_;
};

// A tenant's credential (what RGPU_TOKEN holds for a signed token): the token, ".", and the
// base64url of its holder's Ed25519 private key (the key whose public half the claims carry as
// holder_key). Only the token part ever leaves the tenant's machine: the handshake proves
// possession of the key by signing the server's challenge with it.
std::string MakeCredential(const std::string& token, const std::string& holder_private_raw);
// Splits a credential into its token and raw holder key. A string with fewer than three parts
// (a token from a file, or a token alone) is all token, with an empty key. False when a third
// part is present but is not a base64url Ed25519 key.
bool SplitCredential(const std::string& credential, std::string* token,
                     std::string* holder_private_raw);

}  // namespace rgpu
