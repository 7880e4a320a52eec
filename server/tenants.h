// Tenants admitted by a token file (`rgpu-server --tokens FILE`). Each line:
//   TOKEN TENANT MEMORY_QUOTA WEIGHT
// MEMORY_QUOTA is bytes with an optional K/M/G/T suffix (powers of 1024); WEIGHT is the tenant's
// share weight (positive). '#' starts a comment. A tenant's quota covers all its sessions.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/status.h"

namespace rgpu::server {

struct Tenant {
  std::string name;
  uint64_t memory_quota = 0;  // bytes of device memory all its sessions may hold together
  double weight = 1.0;
  std::atomic<uint64_t> memory_used{0};

  // Reserves `bytes` of the quota; false (nothing reserved) when it would exceed it.
  bool Reserve(uint64_t bytes);
  void Release(uint64_t bytes) { memory_used.fetch_sub(bytes); }
};

class TenantTable {
 public:
  // Parses a token file; a malformed line is an error naming the line.
  Status Load(const std::string& path);
  // The tenant a token admits, or nullptr for an unknown token.
  std::shared_ptr<Tenant> Find(const std::string& token) const;
  size_t size() const { return by_token_.size(); }

 private:
  std::map<std::string, std::shared_ptr<Tenant>> by_token_;
};

}  // namespace rgpu::server
