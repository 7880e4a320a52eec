#include "common/status.h"

namespace rgpu {

std::string Status::ToString() const {
  static const char* const kNames[] = {
      "OK",       "INVALID_ARGUMENT",  "NOT_FOUND",          "UNAVAILABLE", "TIMEOUT",
      "PROTOCOL", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "INTERNAL"};
  std::string s = kNames[static_cast<int>(code_)];
  if (!message_.empty()) s += ": " + message_;
  return s;
}

}  // namespace rgpu
