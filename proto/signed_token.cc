#include "proto/signed_token.h"

#include "proto/crypto.h"
#include "proto/openssl_handles.h"

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

namespace rgpu {
namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}

}  // namespace

Status GenerateTokenKeys(const std::string& private_pem_path, const std::string& public_pem_path) {
  EVP_PKEY* raw = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
  if (raw == nullptr) return Internal("Ed25519 key generation failed");
  Pkey key(raw);
  FILE* f = fopen(private_pem_path.c_str(), "w");
  if (f == nullptr) return InvalidArgument("cannot write " + private_pem_path);
  bool ok = PEM_write_PrivateKey(f, key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1;
  fclose(f);
  f = fopen(public_pem_path.c_str(), "w");
  if (f == nullptr) return InvalidArgument("cannot write " + public_pem_path);
  ok = ok && PEM_write_PUBKEY(f, key.get()) == 1;
  fclose(f);
  return ok ? Status::Ok() : Internal("cannot write the key files");
}

Status SignToken(const wire::TokenClaims& claims, const std::string& private_pem_path,
                 std::string* token) {
  FILE* f = fopen(private_pem_path.c_str(), "r");
  if (f == nullptr) return NotFound("cannot read " + private_pem_path);
  Pkey key(PEM_read_PrivateKey(f, nullptr, nullptr, nullptr));
  fclose(f);
  if (!key) return InvalidArgument(private_pem_path + " holds no private key");
  const std::string message = claims.SerializeAsString();
  MdCtx ctx(EVP_MD_CTX_new());
  size_t size = 0;
  if (EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &size,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1) {
    return Internal("signing failed");
  }
  std::string signature(size, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &size,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1) {
    return Internal("signing failed");
  }
  signature.resize(size);
  *token = Base64UrlEncode(message) + "." + Base64UrlEncode(signature);
  return Status::Ok();
}

Status TokenVerifier::FromPublicKeyFile(const std::string& path, TokenVerifier* out) {
  std::string pem;
  if (!ReadFile(path, &pem)) return NotFound("cannot read " + path);
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  Pkey key(PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  if (!key || EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519) {
    return InvalidArgument(path + " holds no Ed25519 public key");
  }
  // Kept raw: decoding PEM costs most of a verification's time in OpenSSL 3.
  out->public_raw_.assign(32, '\0');
  size_t n = out->public_raw_.size();
  if (EVP_PKEY_get_raw_public_key(
          key.get(), reinterpret_cast<unsigned char*>(out->public_raw_.data()), &n) != 1 ||
      n != 32) {
    return InvalidArgument(path + " holds no usable Ed25519 public key");
  }
  return Status::Ok();
}

Status TokenVerifier::Verify(const std::string& token, wire::TokenClaims* claims) const {
  const size_t dot = token.find('.');
  std::string message, signature;
  if (dot == std::string::npos || !Base64UrlDecode(token.substr(0, dot), &message) ||
      !Base64UrlDecode(token.substr(dot + 1), &signature)) {
    return PermissionDenied("malformed token");
  }
  if (!VerifyEd25519(public_raw_, message, signature)) {
    return PermissionDenied("token signature does not verify (forged or not from this registry)");
  }
  if (!claims->ParseFromString(message)) return PermissionDenied("malformed token claims");
  return Status::Ok();
}

}  // namespace rgpu
