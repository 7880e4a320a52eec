#include "registry/keys.h"

#include <openssl/rand.h>
#include <openssl/sha.h>

#include <cstdlib>

#include "common/hex.h"

namespace rgpu::registry {

std::string NewKey(const std::string& prefix) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) std::abort();  // no entropy: nothing safe to do
  return prefix + HexText(std::string(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

std::string KeyHash(const std::string& key) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), digest);
  return HexText(std::string(reinterpret_cast<const char*>(digest), sizeof digest));
}

}  // namespace rgpu::registry
