// JSON text for the front end's --json output.
#pragma once

#include <string>

namespace rgpu::cli {

// `s` as a JSON string literal (quotes and backslashes escaped, control characters dropped).
inline std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

}  // namespace rgpu::cli
