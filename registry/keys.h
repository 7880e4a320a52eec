// Keys: random credentials (tenant API keys, provider keys, resource tokens, lease ids) and the
// one-way hash the registry stores instead of a key.
#pragma once

#include <string>

namespace rgpu::registry {

// `prefix` followed by 32 random hex digits (OpenSSL's RAND_bytes).
std::string NewKey(const std::string& prefix);
// SHA-256 of `key`, hex.
std::string KeyHash(const std::string& key);

}  // namespace rgpu::registry
