#include "client/visible_devices.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace rgpu::client {

namespace {

std::string Trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

// The device `entry` names, or -1.
int Resolve(const std::string& entry, const std::vector<std::string>& uuids) {
  if (entry.empty()) return -1;
  if (entry.find_first_not_of("0123456789") == std::string::npos) {
    if (entry.size() > 9) return -1;
    const int index = atoi(entry.c_str());
    return index < static_cast<int>(uuids.size()) ? index : -1;
  }
  if (entry.rfind("GPU-", 0) != 0 || entry.size() <= 4) return -1;
  int found = -1;
  for (size_t d = 0; d < uuids.size(); ++d) {
    const std::string text = DeviceUuidText(uuids[d]);
    if (!text.empty() && text.rfind(entry, 0) == 0) {
      if (found >= 0) return -1;  // ambiguous
      found = static_cast<int>(d);
    }
  }
  return found;
}

}  // namespace

std::vector<int> SelectVisibleDevices(const std::string& value,
                                      const std::vector<std::string>& uuids) {
  std::vector<int> selected;
  size_t start = 0;
  while (start <= value.size()) {
    const size_t comma = value.find(',', start);
    const std::string entry =
        Trim(value.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    const int d = Resolve(entry, uuids);
    if (d < 0 || std::find(selected.begin(), selected.end(), d) != selected.end()) break;
    selected.push_back(d);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return selected;
}

}  // namespace rgpu::client
