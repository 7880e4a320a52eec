#include "proto/credential.h"

#include "proto/crypto.h"

namespace rgpu {

std::string MakeCredential(const std::string& token, const std::string& holder_private_raw) {
  return token + "." + Base64UrlEncode(holder_private_raw);
}

bool SplitCredential(const std::string& credential, std::string* token,
                     std::string* holder_private_raw) {
  holder_private_raw->clear();
  const size_t first = credential.find('.');
  const size_t second = first == std::string::npos ? first : credential.find('.', first + 1);
  if (second == std::string::npos) {
    *token = credential;
    return true;
  }
  *token = credential.substr(0, second);
  std::string key;
  if (!Base64UrlDecode(credential.substr(second + 1), &key) || key.size() != 32) return false;
  *holder_private_raw = std::move(key);
  return true;
}

}  // namespace rgpu
