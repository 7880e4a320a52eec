// TokenSigner: signs session tokens (the format of proto/signed_token.h: base64url(serialized
// TokenClaims) "." base64url(Ed25519 signature)) with a private key loaded once. SignToken()
// reads and parses the PEM file on every call (about 0.4 ms here); the registry signs one token
// per placement, so it keeps the key. Tokens verify with rgpu::TokenVerifier. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "proto/token.pb.h"

typedef struct evp_pkey_st EVP_PKEY;

namespace rgpu::registry {

class TokenSigner {
 public:
  TokenSigner();
  ~TokenSigner();
  TokenSigner(TokenSigner&&) noexcept;
  TokenSigner& operator=(TokenSigner&&) noexcept;

  // Loads an Ed25519 private key (PEM).
  static Status Load(const std::string& private_pem_path, TokenSigner* out);
  Status Sign(const wire::TokenClaims& claims, std::string* token) const;

 private:
  struct KeyFree {
    void operator()(EVP_PKEY* key) const;
  };
  std::unique_ptr<EVP_PKEY, KeyFree> key_;
};

}  // namespace rgpu::registry
