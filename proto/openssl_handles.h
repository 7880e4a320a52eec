// Owning handles for OpenSSL objects, for proto/'s own .cc files (crypto.cc, signed_token.cc).
#pragma once

#include <openssl/evp.h>

#include <memory>

namespace rgpu {

struct EvpPkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct EvpMdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using Pkey = std::unique_ptr<EVP_PKEY, EvpPkeyFree>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, EvpMdCtxFree>;

}  // namespace rgpu
