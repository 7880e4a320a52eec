#include "server/ipc_registry.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "proto/crypto.h"
#include "server/tenants.h"

namespace rgpu::server {

HeldCharge::~HeldCharge() {
  if (tenant_ != nullptr) tenant_->Release(bytes_);
}

void HeldCharge::Add(std::shared_ptr<Tenant> tenant, uint64_t bytes) {
  if (tenant == nullptr || bytes == 0) return;
  tenant_ = std::move(tenant);
  bytes_ += bytes;
}

bool IpcRegistry::Export(IpcKind kind, std::shared_ptr<Tenant> tenant, uint64_t exporter,
                         const std::shared_ptr<void>& object, IpcKey* key) {
  const std::string random = RandomBytes(sizeof(IpcKey));
  if (random.size() != sizeof(IpcKey)) return false;
  IpcKey k;
  memcpy(k.data(), random.data(), sizeof k);
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(entries_, [](const auto& e) { return e.second.object.expired(); });
  // 256 random bits do not collide; refusing a duplicate keeps an earlier export intact anyway.
  if (!entries_.emplace(k, Entry{kind, std::move(tenant), exporter, object}).second) {
    return false;
  }
  *key = k;
  return true;
}

std::shared_ptr<void> IpcRegistry::Open(const IpcKey& key, IpcKind kind, const Tenant* tenant,
                                        uint64_t opener, bool* own) const {
  *own = false;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.kind != kind || it->second.tenant.get() != tenant) {
    return nullptr;
  }
  if (it->second.exporter == opener) {
    *own = true;
    return nullptr;
  }
  return it->second.object.lock();
}

void IpcRegistry::Revoke(const IpcKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.erase(key);
}

size_t IpcRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::count_if(entries_.begin(), entries_.end(),
                       [](const auto& e) { return !e.second.object.expired(); });
}

}  // namespace rgpu::server
