#include "registry/token_signer.h"

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdio>

namespace rgpu::registry {
namespace {

// RFC 4648 base64url without padding.
std::string Base64Url(const unsigned char* data, size_t size) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= size; i += 3) {
    const uint32_t v = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8) | data[i + 2];
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(v >> shift) & 63];
  }
  if (size - i == 1) {
    const uint32_t v = uint32_t{data[i]} << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
  } else if (size - i == 2) {
    const uint32_t v = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
  }
  return out;
}

}  // namespace

void TokenSigner::KeyFree::operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }

TokenSigner::TokenSigner() = default;
TokenSigner::~TokenSigner() = default;
TokenSigner::TokenSigner(TokenSigner&&) noexcept = default;
TokenSigner& TokenSigner::operator=(TokenSigner&&) noexcept = default;

Status TokenSigner::Load(const std::string& private_pem_path, TokenSigner* out) {
  FILE* f = fopen(private_pem_path.c_str(), "r");
  if (f == nullptr) return NotFound("cannot read signing key " + private_pem_path);
  EVP_PKEY* key = PEM_read_PrivateKey(f, nullptr, nullptr, nullptr);
  fclose(f);
  if (key == nullptr) return InvalidArgument(private_pem_path + " holds no private key");
  if (EVP_PKEY_get_id(key) != EVP_PKEY_ED25519) {
    EVP_PKEY_free(key);
    return InvalidArgument(private_pem_path + " is not an Ed25519 key");
  }
  out->key_.reset(key);
  return Status::Ok();
}

Status TokenSigner::Sign(const wire::TokenClaims& claims, std::string* token) const {
  if (!key_) return Internal("token signer has no key");
  const std::string body = claims.SerializeAsString();
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) return Internal("out of memory");
  unsigned char signature[64];
  size_t length = sizeof signature;
  const bool ok =
      EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key_.get()) == 1 &&
      EVP_DigestSign(ctx, signature, &length, reinterpret_cast<const unsigned char*>(body.data()),
                     body.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) return Internal("Ed25519 signing failed");
  *token = Base64Url(reinterpret_cast<const unsigned char*>(body.data()), body.size()) + "." +
           Base64Url(signature, length);
  return Status::Ok();
}

}  // namespace rgpu::registry
