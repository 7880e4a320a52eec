#include "server/tenants.h"

#include <cctype>
#include <cstdlib>
#include <ctime>
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
    t->share.weight = t->weight;
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

Status TenantTable::AcceptSigned(const std::string& public_key_path,
                                 const std::string& server_name) {
  auto verifier = std::make_unique<TokenVerifier>();
  Status s = TokenVerifier::FromPublicKeyFile(public_key_path, verifier.get());
  if (!s.ok()) return s;
  verifier_ = std::move(verifier);
  server_name_ = server_name;
  return Status::Ok();
}

Status TenantTable::Admit(const std::string& token, Admission* admission) {
  *admission = Admission();
  if (token.empty()) return PermissionDenied("this server requires a token (RGPU_TOKEN)");
  if (auto it = by_token_.find(token); it != by_token_.end()) {
    admission->tenant = it->second;
    return Status::Ok();
  }
  if (verifier_ == nullptr || token.find('.') == std::string::npos) {
    return PermissionDenied("unknown token");
  }
  wire::TokenClaims claims;
  Status s = verifier_->Verify(token, &claims);
  if (!s.ok()) return s;
  if (claims.expires_unix() <= static_cast<int64_t>(time(nullptr))) {
    return PermissionDenied("token expired");
  }
  if (!claims.server().empty() && claims.server() != server_name_) {
    return PermissionDenied("token is for server " + claims.server());
  }
  if (!claims.all_gpus() && claims.gpus_size() == 0) {
    return PermissionDenied("token grants no GPU");
  }
  if (claims.tenant().empty() || !(claims.weight() > 0)) {
    return PermissionDenied("token claims no tenant or no weight");
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Tenant>& t = signed_tenants_[claims.tenant()];
  if (t == nullptr) t = std::make_shared<Tenant>();
  // The latest token's claims set the tenant's quota and weight.
  t->name = claims.tenant();
  t->memory_quota = claims.memory_quota();
  t->weight = claims.weight();
  t->share.weight = claims.weight();
  admission->tenant = t;
  admission->lease_id = claims.lease_id();
  admission->all_gpus = claims.all_gpus();
  for (uint32_t g : claims.gpus()) admission->gpus.push_back(static_cast<int>(g));
  return Status::Ok();
}

}  // namespace rgpu::server
