// Tenants admitted by a token file (`rgpu-server --tokens FILE`). Each line:
//   TOKEN TENANT MEMORY_QUOTA WEIGHT
// MEMORY_QUOTA is bytes with an optional K/M/G/T suffix (powers of 1024); WEIGHT is the tenant's
// share weight (positive). '#' starts a comment. A tenant's quota covers all its sessions.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/signed_token.h"
#include "server/fair_scheduler.h"

namespace rgpu::server {

struct Tenant {
  std::string name;
  uint64_t memory_quota = 0;  // bytes of device memory all its sessions may hold together
  double weight = 1.0;
  ShareAccount share;  // its account with the fair scheduler (weight = weight)
  std::atomic<uint64_t> memory_used{0};

  // Reserves `bytes` of the quota; false (nothing reserved) when it would exceed it.
  bool Reserve(uint64_t bytes);
  void Release(uint64_t bytes) { memory_used.fetch_sub(bytes); }
};

// What a token admits: its tenant, the registry lease it was issued for, and the GPUs it grants.
struct Admission {
  std::shared_ptr<Tenant> tenant;
  std::string lease_id;   // "" for tokens from a file or signed by an operator
  bool all_gpus = true;   // every device of the server
  std::vector<int> gpus;  // otherwise these device indices, in the order the token names them
};

// Who may open sessions: tokens listed in a file, and/or tokens signed by a registry whose public
// key the server holds (Ed25519, see proto/signed_token.h). Thread-safe.
class TenantTable {
 public:
  // Parses a token file; a malformed line is an error naming the line.
  Status Load(const std::string& path);
  // Accepts signed tokens verified with the Ed25519 public key in `path`, valid for this
  // server (`server_name`; claims naming another server are refused).
  Status AcceptSigned(const std::string& public_key_path, const std::string& server_name);

  // What `token` admits, or the reason it is refused (missing, unknown, malformed, forged,
  // expired, for another server or GPU).
  Status Admit(const std::string& token, Admission* admission);
  size_t size() const { return by_token_.size(); }

 private:
  std::map<std::string, std::shared_ptr<Tenant>> by_token_;
  std::unique_ptr<TokenVerifier> verifier_;
  std::string server_name_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Tenant>> signed_tenants_;  // by tenant name
};

}  // namespace rgpu::server
