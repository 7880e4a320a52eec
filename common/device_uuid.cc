#include "common/device_uuid.h"

#include <cstdio>

namespace rgpu {

std::string DeviceUuidText(const std::string& uuid) {
  if (uuid.size() != 16) return "";
  std::string text = "GPU-";
  char hex[3];
  for (size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(uuid[i]));
    text += hex;
  }
  return text;
}

}  // namespace rgpu
