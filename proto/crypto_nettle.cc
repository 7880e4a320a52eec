// proto/crypto.h on Nettle (and Hogweed for Ed25519), for the client library: a guest in the
// tenant's process that must start fast. OpenSSL (crypto.cc, which the server, the CLI and the
// registry use) reads its configuration and initialises its providers at first use, which cost a
// tenant's handshake 3 to 6 ms (docs/performance.md); Nettle has no such start-up. Both compute
// the same standard functions (tests/unit/crypto_interop_test.cc checks they agree).
#include <nettle/base64.h>
#include <nettle/eddsa.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>
#include <sys/random.h>

#include <cerrno>

#include "proto/crypto.h"

namespace rgpu {
namespace {

constexpr size_t kEd25519KeyBytes = ED25519_KEY_SIZE;

const uint8_t* Bytes(std::string_view s) { return reinterpret_cast<const uint8_t*>(s.data()); }

}  // namespace

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  size_t done = 0;
  while (done < n) {
    const ssize_t got = getrandom(out.data() + done, n - done, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return "";
    done += static_cast<size_t>(got);
  }
  return out;
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  hmac_sha256_ctx ctx;
  hmac_sha256_set_key(&ctx, key.size(), Bytes(key));
  hmac_sha256_update(&ctx, data.size(), Bytes(data));
  std::string mac(SHA256_DIGEST_SIZE, '\0');
  hmac_sha256_digest(&ctx, mac.size(), reinterpret_cast<uint8_t*>(mac.data()));
  return mac;
}

std::string Sha256(std::string_view data) {
  sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, data.size(), Bytes(data));
  std::string digest(SHA256_DIGEST_SIZE, '\0');
  sha256_digest(&ctx, digest.size(), reinterpret_cast<uint8_t*>(digest.data()));
  return digest;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return a.empty() || memeql_sec(a.data(), b.data(), a.size()) != 0;
}

Status GenerateEd25519(std::string* private_raw, std::string* public_raw) {
  *private_raw = RandomBytes(kEd25519KeyBytes);
  if (private_raw->size() != kEd25519KeyBytes) return Internal("no random bytes for a key");
  return Ed25519PublicKey(*private_raw, public_raw);
}

Status Ed25519PublicKey(std::string_view private_raw, std::string* public_raw) {
  if (private_raw.size() != kEd25519KeyBytes) return InvalidArgument("not an Ed25519 private key");
  public_raw->assign(kEd25519KeyBytes, '\0');
  ed25519_sha512_public_key(reinterpret_cast<uint8_t*>(public_raw->data()), Bytes(private_raw));
  return Status::Ok();
}

Status SignEd25519(std::string_view private_raw, std::string_view message, std::string* signature) {
  std::string public_raw;
  Status s = Ed25519PublicKey(private_raw, &public_raw);
  if (!s.ok()) return s;
  signature->assign(ED25519_SIGNATURE_SIZE, '\0');
  ed25519_sha512_sign(Bytes(public_raw), Bytes(private_raw), message.size(), Bytes(message),
                      reinterpret_cast<uint8_t*>(signature->data()));
  return Status::Ok();
}

bool VerifyEd25519(std::string_view public_raw, std::string_view message,
                   std::string_view signature) {
  if (public_raw.size() != kEd25519KeyBytes || signature.size() != ED25519_SIGNATURE_SIZE) {
    return false;
  }
  return ed25519_sha512_verify(Bytes(public_raw), message.size(), Bytes(message),
                               Bytes(signature)) != 0;
}

std::string Base64UrlEncode(std::string_view in) {
  base64_encode_ctx ctx;
  base64url_encode_init(&ctx);
  std::string out(BASE64_ENCODE_LENGTH(in.size()) + BASE64_ENCODE_FINAL_LENGTH, '\0');
  char* p = out.data();
  size_t n = base64_encode_update(&ctx, p, in.size(), Bytes(in));
  n += base64_encode_final(&ctx, p + n);
  out.resize(n);
  while (!out.empty() && out.back() == '=') out.pop_back();  // unpadded, as tokens are
  return out;
}

bool Base64UrlDecode(std::string_view text, std::string* out) {
  for (char c : text) {
    const bool valid = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_';
    if (!valid) return false;
  }
  if (text.size() % 4 == 1) return false;
  std::string padded(text);
  while (padded.size() % 4 != 0) padded.push_back('=');
  base64_decode_ctx ctx;
  base64url_decode_init(&ctx);
  std::string bytes(BASE64_DECODE_LENGTH(padded.size()), '\0');
  size_t n = bytes.size();
  if (!base64_decode_update(&ctx, &n, reinterpret_cast<uint8_t*>(bytes.data()), padded.size(),
                            padded.data()) ||
      !base64_decode_final(&ctx)) {
    return false;
  }
  bytes.resize(n);
  *out = std::move(bytes);
  return true;
}

}  // namespace rgpu
