#include "proto/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <memory>

#include "proto/openssl_handles.h"

namespace rgpu {
namespace {

constexpr size_t kEd25519KeyBytes = 32;

const unsigned char* Bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

}  // namespace

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    return "";
  }
  return out;
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), Bytes(data), data.size(), mac,
           &length) == nullptr) {
    return "";
  }
  return std::string(reinterpret_cast<char*>(mac), length);
}

std::string Sha256(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(Bytes(data), data.size(), digest);
  return std::string(reinterpret_cast<char*>(digest), sizeof digest);
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Status GenerateEd25519(std::string* private_raw, std::string* public_raw) {
  Pkey key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (key == nullptr) return Internal("cannot generate an Ed25519 key");
  size_t n = kEd25519KeyBytes;
  private_raw->assign(kEd25519KeyBytes, '\0');
  if (EVP_PKEY_get_raw_private_key(key.get(), reinterpret_cast<unsigned char*>(private_raw->data()),
                                   &n) != 1 ||
      n != kEd25519KeyBytes) {
    return Internal("cannot read an Ed25519 private key");
  }
  return Ed25519PublicKey(*private_raw, public_raw);
}

Status Ed25519PublicKey(std::string_view private_raw, std::string* public_raw) {
  if (private_raw.size() != kEd25519KeyBytes) return InvalidArgument("not an Ed25519 private key");
  Pkey key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, Bytes(private_raw),
                                        private_raw.size()));
  if (key == nullptr) return InvalidArgument("not an Ed25519 private key");
  size_t n = kEd25519KeyBytes;
  public_raw->assign(kEd25519KeyBytes, '\0');
  if (EVP_PKEY_get_raw_public_key(key.get(), reinterpret_cast<unsigned char*>(public_raw->data()),
                                  &n) != 1 ||
      n != kEd25519KeyBytes) {
    return Internal("cannot derive an Ed25519 public key");
  }
  return Status::Ok();
}

Status SignEd25519(std::string_view private_raw, std::string_view message, std::string* signature) {
  if (private_raw.size() != kEd25519KeyBytes) return InvalidArgument("not an Ed25519 private key");
  Pkey key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, Bytes(private_raw),
                                        private_raw.size()));
  MdCtx ctx(EVP_MD_CTX_new());
  if (key == nullptr || ctx == nullptr) return InvalidArgument("not an Ed25519 private key");
  size_t n = 0;
  if (EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &n, Bytes(message), message.size()) != 1) {
    return Internal("Ed25519 signing failed");
  }
  signature->assign(n, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature->data()), &n,
                     Bytes(message), message.size()) != 1) {
    return Internal("Ed25519 signing failed");
  }
  signature->resize(n);
  return Status::Ok();
}

bool VerifyEd25519(std::string_view public_raw, std::string_view message,
                   std::string_view signature) {
  if (public_raw.size() != kEd25519KeyBytes) return false;
  Pkey key(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, Bytes(public_raw), public_raw.size()));
  MdCtx ctx(EVP_MD_CTX_new());
  if (key == nullptr || ctx == nullptr) return false;
  return EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) == 1 &&
         EVP_DigestVerify(ctx.get(), Bytes(signature), signature.size(), Bytes(message),
                          message.size()) == 1;
}

std::string Base64UrlEncode(std::string_view in) {
  std::string out((in.size() + 2) / 3 * 4 + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), Bytes(in),
                                static_cast<int>(in.size()));
  out.resize(n);
  for (char& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
  while (!out.empty() && out.back() == '=') out.pop_back();
  return out;
}

bool Base64UrlDecode(std::string_view text, std::string* out) {
  std::string in(text);
  for (char c : in) {
    const bool valid = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_';
    if (!valid) return false;
  }
  if (in.size() % 4 == 1) return false;
  for (char& c : in) c = c == '-' ? '+' : c == '_' ? '/' : c;
  size_t pad = 0;
  while (in.size() % 4 != 0) {
    in.push_back('=');
    ++pad;
  }
  std::string bytes(in.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(bytes.data()), Bytes(in),
                                static_cast<int>(in.size()));
  if (n < 0 || static_cast<size_t>(n) < pad) return false;
  bytes.resize(n - pad);
  *out = std::move(bytes);
  return true;
}

}  // namespace rgpu
