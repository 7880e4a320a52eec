// Credentials: the form a signed token takes in RGPU_TOKEN, with its holder's private key.
// Depends only on proto/crypto.h (base64url). Thread-safe; no state.
#pragma once

#include <string>

namespace rgpu {

// A tenant's credential (what RGPU_TOKEN holds for a signed token): the token, ".", and the
// base64url of its holder's Ed25519 private key (the key whose public half the claims carry as
// holder_key). Only the token part ever leaves the tenant's machine: the handshake proves
// possession of the key by signing the server's challenge with it.
std::string MakeCredential(const std::string& token, const std::string& holder_private_raw);
// Splits a credential into its token and raw holder key. A string with fewer than three parts
// (a token from a file, or a token alone) is all token, with an empty key. False when a third
// part is present but is not a base64url Ed25519 key.
bool SplitCredential(const std::string& credential, std::string* token,
                     std::string* holder_private_raw);

}  // namespace rgpu
