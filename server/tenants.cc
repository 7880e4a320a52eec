#include "server/tenants.h"

#include <cctype>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "proto/crypto.h"
#include "proto/session_proof.h"

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
  if (broker != nullptr) {
    if (!broker->Reserve(bytes)) return false;
    memory_used.fetch_add(bytes);
    return true;
  }
  uint64_t used = memory_used.load();
  do {
    if (used + bytes > memory_quota || used + bytes < used) return false;
  } while (!memory_used.compare_exchange_weak(used, used + bytes));
  return true;
}

void Tenant::Release(uint64_t bytes) {
  memory_used.fetch_sub(bytes);
  if (broker != nullptr) broker->Release(bytes);
}

void TenantTable::AddToken(const std::string& token, std::shared_ptr<Tenant> tenant, bool all_gpus,
                           std::vector<int> gpus, bool once, const std::string& lease_id) {
  by_token_[token] = tenant;
  by_digest_[Sha256(token)] = FileToken{token,
                                        std::move(tenant),
                                        all_gpus,
                                        std::move(gpus),
                                        once ? std::make_shared<std::atomic<bool>>(false) : nullptr,
                                        lease_id};
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
    by_digest_[Sha256(token)] = FileToken{token, t, true, {}, nullptr};
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

Status TenantTable::Admit(const wire::Credential& presented, const std::string& nonce,
                          const std::string& proof, Admission* admission) {
  *admission = Admission();
  if (refuse_everyone_) return PermissionDenied(kRefusesEveryoneReason);
  if (!presented.token_digest().empty()) {
    // A secret the server holds: the operator's key or a file token.
    const std::string& digest = presented.token_digest();
    if (!operator_key_.empty() && ConstantTimeEquals(digest, Sha256(operator_key_))) {
      if (!VerifySecretProof(operator_key_, nonce, presented, proof)) {
        return PermissionDenied("the proof of the operator key is wrong");
      }
      admission->operator_access = true;
      return Status::Ok();
    }
    auto it = by_digest_.find(digest);
    if (it == by_digest_.end()) return PermissionDenied("unknown token");
    if (!VerifySecretProof(it->second.token, nonce, presented, proof)) {
      return PermissionDenied("the proof of the token is wrong");
    }
    if (it->second.used != nullptr && it->second.used->exchange(true)) {
      return PermissionDenied("the token was used");
    }
    admission->tenant = it->second.tenant;
    admission->lease_id = it->second.lease_id;
    admission->all_gpus = it->second.all_gpus;
    admission->gpus = it->second.gpus;
    return Status::Ok();
  }
  const std::string& token = presented.token();
  if (token.empty()) return PermissionDenied("this server requires a token (RGPU_TOKEN)");
  if (verifier_ == nullptr) return PermissionDenied("this server accepts no signed tokens");
  wire::TokenClaims claims;
  Status s = VerifyClaims(token, &claims);
  if (!s.ok()) return s;
  if (claims.hand_over()) {
    return PermissionDenied("a lease's hand-over token admits a restore, not a client");
  }
  if (claims.holder_key().size() != 32) {
    return PermissionDenied("token names no holder key (sign it anew: rgpu token sign)");
  }
  if (!VerifyHolderProof(claims.holder_key(), nonce, presented, proof)) {
    return PermissionDenied("the holder's proof of the token is wrong");
  }
  return AdmitClaims(claims, admission);
}

Status TenantTable::AdmitHandOver(const std::string& token, const std::string& lease_id,
                                  const std::string& tenant, Admission* admission) {
  if (verifier_ == nullptr) return PermissionDenied("this server accepts no signed tokens");
  wire::TokenClaims claims;
  Status s = VerifyClaims(token, &claims);
  if (!s.ok()) return s;
  if (!claims.hand_over()) return PermissionDenied("not a lease's hand-over token");
  if (claims.lease_id().empty() || claims.lease_id() != lease_id) {
    return PermissionDenied("the hand-over is of lease " + claims.lease_id().substr(0, 128) +
                            ", not the session's");
  }
  if (claims.tenant() != tenant) {
    return PermissionDenied("the hand-over is tenant " + claims.tenant().substr(0, 64) +
                            "'s, not the session's");
  }
  return AdmitClaims(claims, admission);
}

Status TenantTable::VerifyHandOver(const std::string& token, wire::TokenClaims* claims) {
  if (verifier_ == nullptr) return PermissionDenied("this server accepts no signed tokens");
  Status s = VerifyClaims(token, claims);
  if (!s.ok()) return s;
  if (!claims->hand_over()) return PermissionDenied("not a lease's hand-over token");
  if (LeaseEnded(claims->lease_id())) {
    return PermissionDenied("the token's lease " + claims->lease_id() + " has ended");
  }
  return Status::Ok();
}

Status TenantTable::VerifyClaims(const std::string& token, wire::TokenClaims* claims) {
  Status s = verifier_->Verify(token, claims);
  if (!s.ok()) return s;
  if (claims->expires_unix() <= static_cast<int64_t>(time(nullptr))) {
    return PermissionDenied("token expired");
  }
  if (!claims->server().empty() && claims->server() != server_name_) {
    return PermissionDenied("token is for server " + claims->server());
  }
  if (!claims->all_gpus() && claims->gpus_size() == 0) {
    return PermissionDenied("token grants no GPU");
  }
  if (claims->tenant().empty() || !(claims->weight() > 0)) {
    return PermissionDenied("token claims no tenant or no weight");
  }
  return Status::Ok();
}

Status TenantTable::AdmitClaims(const wire::TokenClaims& claims, Admission* admission) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!claims.lease_id().empty() && ended_leases_.count(claims.lease_id()) != 0) {
    return PermissionDenied("the token's lease " + claims.lease_id() + " has ended");
  }
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
  admission->expires_unix = claims.expires_unix();
  return Status::Ok();
}

std::shared_ptr<Tenant> TenantTable::Find(const std::string& name) {
  for (const auto& [token, tenant] : by_token_) {
    if (tenant->name == name) return tenant;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = signed_tenants_.find(name);
  return it != signed_tenants_.end() ? it->second : nullptr;
}

bool TenantTable::LeaseEnded(const std::string& lease_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return !lease_id.empty() && ended_leases_.count(lease_id) != 0;
}

void TenantTable::EndLeases(const std::vector<std::string>& lease_ids) {
  std::lock_guard<std::mutex> lock(mu_);
  ended_leases_.insert(lease_ids.begin(), lease_ids.end());
}

}  // namespace rgpu::server
