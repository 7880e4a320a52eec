// Lower-case hexadecimal text of bytes (credentials, keys, device UUIDs in registry records).
#pragma once

#include <string>

namespace rgpu {

// Two lower-case hex digits per byte of `bytes`, in order.
inline std::string HexText(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

}  // namespace rgpu
