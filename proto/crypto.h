// Small cryptographic primitives shared by the server, the client and the registry: random
// bytes, HMAC-SHA256, constant-time comparison and raw Ed25519 keys (the proofs of possession
// of proto/token.proto's holder_key, and the registry's reachability probe).
// Two implementations compute the same functions: crypto.cc on OpenSSL (library rgpu_crypto: the
// server, the CLI, the registry) and crypto_nettle.cc on Nettle (rgpu_crypto_nettle: the client
// library, which must not pay OpenSSL's start-up in the tenant's process). Link exactly one.
// Thread-safe; no state.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace rgpu {

// `n` bytes from the system's CSPRNG (OpenSSL's, or getrandom(2) with Nettle). Aborts never; on the
// (practically impossible) failure of the generator it returns an empty string, which every caller
// treats as an error.
std::string RandomBytes(size_t n);

// HMAC-SHA256 of `data` under `key` (32 bytes).
std::string HmacSha256(std::string_view key, std::string_view data);

// SHA-256 of `data` (32 bytes).
std::string Sha256(std::string_view data);

// True when `a` and `b` hold the same bytes; the time taken depends only on their lengths.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// A new Ed25519 key pair as raw bytes (32-byte private seed, 32-byte public key).
Status GenerateEd25519(std::string* private_raw, std::string* public_raw);
// The public key of a raw private key; kInvalidArgument when it is not 32 bytes.
Status Ed25519PublicKey(std::string_view private_raw, std::string* public_raw);
// Signs `message` (64-byte signature).
Status SignEd25519(std::string_view private_raw, std::string_view message, std::string* signature);
// True when `signature` is `public_raw`'s valid signature of `message`.
bool VerifyEd25519(std::string_view public_raw, std::string_view message,
                   std::string_view signature);

// Base64url without padding (RFC 4648 section 5), as tokens use.
std::string Base64UrlEncode(std::string_view in);
// False when `in` is not base64url.
bool Base64UrlDecode(std::string_view in, std::string* out);

}  // namespace rgpu
