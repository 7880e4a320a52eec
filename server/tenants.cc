#include "server/tenants.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace rgpu::server {
namespace {

bool ParseBytes(const std::string& text, uint64_t* out) {
  char* end = nullptr;
  double v = strtod(text.c_str(), &end);
  if (end == text.c_str() || v < 0) return false;
  uint64_t unit = 1;
  switch (toupper(static_cast<unsigned char>(*end))) {
    case '\0':
      break;
    case 'K':
      unit = 1ull << 10;
      break;
    case 'M':
      unit = 1ull << 20;
      break;
    case 'G':
      unit = 1ull << 30;
      break;
    case 'T':
      unit = 1ull << 40;
      break;
    default:
      return false;
  }
  if (*end != '\0' && end[1] != '\0' && !(toupper(end[1]) == 'I' || toupper(end[1]) == 'B')) {
    return false;
  }
  *out = static_cast<uint64_t>(v * unit);
  return true;
}

}  // namespace

bool Tenant::Reserve(uint64_t bytes) {
  uint64_t used = memory_used.load();
  do {
    if (used + bytes > memory_quota || used + bytes < used) return false;
  } while (!memory_used.compare_exchange_weak(used, used + bytes));
  return true;
}

Status TenantTable::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read token file " + path);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::string token, name, quota, weight;
    if (!(fields >> token)) continue;  // blank
    if (!(fields >> name >> quota >> weight)) {
      return InvalidArgument(path + ":" + std::to_string(number) +
                             ": expected TOKEN TENANT MEMORY_QUOTA WEIGHT");
    }
    auto t = std::make_shared<Tenant>();
    t->name = name;
    char* end = nullptr;
    t->weight = strtod(weight.c_str(), &end);
    if (!ParseBytes(quota, &t->memory_quota) || *end != '\0' || !(t->weight > 0)) {
      return InvalidArgument(path + ":" + std::to_string(number) + ": bad quota or weight");
    }
    // Sessions of one tenant share its account, whichever of its tokens they present.
    for (const auto& [other_token, other] : by_token_) {
      if (other->name == name) t = other;
    }
    by_token_[token] = t;
  }
  return Status::Ok();
}

std::shared_ptr<Tenant> TenantTable::Find(const std::string& token) const {
  auto it = by_token_.find(token);
  return it == by_token_.end() ? nullptr : it->second;
}

}  // namespace rgpu::server
