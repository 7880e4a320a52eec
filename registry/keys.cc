#include "registry/keys.h"

#include <openssl/rand.h>
#include <openssl/sha.h>

#include <cstdlib>

namespace rgpu::registry {
namespace {

std::string Hex(const unsigned char* bytes, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 15];
  }
  return out;
}

}  // namespace

std::string NewKey(const std::string& prefix) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) std::abort();  // no entropy: nothing safe to do
  return prefix + Hex(bytes, sizeof bytes);
}

std::string KeyHash(const std::string& key) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), digest);
  return Hex(digest, sizeof digest);
}

}  // namespace rgpu::registry
