// A lease follows its session (docs/migration.md, "Metering"). When a session under a registry
// lease moves to another server, the lease's holder (the provider of the server it is on) asks
// the registry to hand the lease over: the registry picks a GPU of the target server with room
// for it, holds that room, and signs a hand-over token (TokenClaims.hand_over) that the holder
// sends with the session's checkpoint; the target restores the session under the lease with it.
// From then until the hand-over completes both GPUs may bill the lease. It completes with the
// target's first accepted record for the lease, or the holder's last (UsageRecord.moved): the
// target's GPU becomes the lease's, the old one an earlier holder whose records are accepted up
// to that moment, and its room is freed. CancelHandOver (the migration failed), or two minutes
// without either record, takes the hand-over back.
//
// Never trusted: a provider hands over only leases on its own servers, and only to a registered
// server with room; a server bills a lease only as its GPU, its hand-over's target or an earlier
// holder (registry/usage_check.h). A holder that hands a lease to a server that does not want it
// only holds room there for two minutes; a target cannot take a lease it was not handed.
#include <algorithm>

#include "common/log.h"
#include "registry/service.h"
#include "registry/service_helpers.h"

namespace rgpu::registry {
namespace {

constexpr int64_t kHandOverLifeMs = 120000;

}  // namespace

grpc::Status RegistryService::HandOverLease(grpc::ServerContext* ctx, const HandOverRequest* req,
                                            HandOverReply* reply) {
  std::string provider;
  grpc::Status auth = AuthProvider(ctx, &provider);
  if (!auth.ok()) return auth;
  if (!ValidName(req->to_server())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "server name must be 1-64 characters of [A-Za-z0-9._-]");
  }
  wire::TokenClaims claims;
  std::vector<LeaseRow> changed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = Now();
    auto it = leases_.find(req->lease_id());
    if (it == leases_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "no active lease " + req->lease_id().substr(0, 128));
    }
    LeaseRow& lease = it->second;
    auto holder = servers_.find(lease.server_name);
    if (holder == servers_.end() || holder->second.provider != provider) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "lease " + lease.lease_id + " is not on a server of provider " + provider);
    }
    if (!lease.reservation_id.empty()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "lease " + lease.lease_id + " runs under reservation " +
                              lease.reservation_id + ", whose room is on its own GPUs");
    }
    if (req->to_server() == lease.server_name) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "lease " + lease.lease_id + " is on " + lease.server_name + " already");
    }
    auto target = servers_.find(req->to_server());
    if (target == servers_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "no server named " + req->to_server() + " is registered");
    }
    // An earlier hand-over of the lease that did not complete (a migration that failed) gives
    // its room back first.
    if (!lease.moving_to.empty()) changed.push_back(DropHandOver(&lease));
    // The target's GPU: placeable, of the same backend, at least as capable, with room beside
    // its reservations until the lease ends; the fullest that fits (best fit).
    auto from = gpu_by_id_.find(lease.gpu_id);
    const GpuSpec* from_spec = from != gpu_by_id_.end() ? &gpus_[from->second].row.spec : nullptr;
    const PlacementAsk ask = LeaseAsk(lease);
    int64_t best = -1;
    for (size_t index : target->second.gpus) {
      const GpuLoad& load = cluster_.gpus[index];
      const GpuSpec& spec = gpus_[index].row.spec;
      if (!GpuFits(load, ask)) continue;
      if (from_spec != nullptr &&
          (spec.backend() != from_spec->backend() ||
           std::make_pair(spec.cc_major(), spec.cc_minor()) <
               std::make_pair(from_spec->cc_major(), from_spec->cc_minor()))) {
        continue;
      }
      if (!FitsBesideReservations(index, ask, now, LeaseEndMs(lease))) continue;
      if (best < 0 || load.FreeMemory() < cluster_.gpus[static_cast<size_t>(best)].FreeMemory()) {
        best = static_cast<int64_t>(index);
      }
    }
    if (best < 0) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "server " + req->to_server() + " has no GPU that takes lease " +
                              lease.lease_id + " (" + std::to_string(lease.memory_bytes >> 20) +
                              " MiB, " + std::to_string(lease.share) +
                              "% of a GPU, the same backend, as capable) now");
    }
    const uint32_t index = static_cast<uint32_t>(best);
    Commit(&cluster_, ask, {cluster_.gpus[index].node, {index}});
    const GpuRow& gpu = gpus_[index].row;
    lease.moving_to = gpu.gpu_id;
    lease.moving_since_ms = now;
    changed.push_back(lease);
    RGPU_LOG_INFO("lease %s of tenant %s: handing over from %s to %s", lease.lease_id.c_str(),
                  lease.tenant.c_str(), lease.gpu_id.c_str(), gpu.gpu_id.c_str());
    claims.set_tenant(lease.tenant);
    claims.set_server(gpu.server_name);
    claims.add_gpus(gpu.spec.index());
    claims.set_lease_id(lease.lease_id);
    claims.set_memory_quota(lease.memory_bytes);
    claims.set_weight(lease.share / 25.0);
    claims.set_expires_unix(LeaseEndMs(lease) / 1000);
    claims.set_hand_over(true);
    reply->set_gpu_id(gpu.gpu_id);
    reply->set_gpu_index(gpu.spec.index());
  }
  PersistHolders(changed);
  std::string token;
  if (Status s = signer_.Sign(claims, &token); !s.ok()) return ToGrpc(s);
  reply->set_token(std::move(token));
  return grpc::Status::OK;
}

grpc::Status RegistryService::CancelHandOver(grpc::ServerContext* ctx, const HandOverRequest* req,
                                             Empty*) {
  std::string provider;
  grpc::Status auth = AuthProvider(ctx, &provider, /*allow_revoked=*/true);
  if (!auth.ok()) return auth;
  std::vector<LeaseRow> changed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = leases_.find(req->lease_id());
    if (it == leases_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "no active lease " + req->lease_id().substr(0, 128));
    }
    auto holder = servers_.find(it->second.server_name);
    if (holder == servers_.end() || holder->second.provider != provider) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "lease " + it->second.lease_id +
                                                                   " is not on a server of provider " +
                                                                   provider);
    }
    if (it->second.moving_to.empty()) return grpc::Status::OK;  // completed, or taken back
    RGPU_LOG_INFO("lease %s: hand-over to %s taken back by its holder", it->first.c_str(),
                  it->second.moving_to.c_str());
    changed.push_back(DropHandOver(&it->second));
  }
  PersistHolders(changed);
  return grpc::Status::OK;
}

LeaseRow RegistryService::CompleteHandOver(LeaseRow* lease) {
  auto from = gpu_by_id_.find(lease->gpu_id);
  if (from != gpu_by_id_.end()) {
    const uint32_t index = static_cast<uint32_t>(from->second);
    Release(&cluster_, LeaseAsk(*lease), {cluster_.gpus[index].node, {index}});
  }
  RGPU_LOG_INFO("lease %s of tenant %s: handed over from %s to %s", lease->lease_id.c_str(),
                lease->tenant.c_str(), lease->gpu_id.c_str(), lease->moving_to.c_str());
  lease->earlier.push_back({lease->gpu_id, Now()});
  lease->gpu_id = lease->moving_to;
  auto to = gpu_by_id_.find(lease->gpu_id);
  if (to != gpu_by_id_.end()) lease->server_name = gpus_[to->second].row.server_name;
  lease->moving_to.clear();
  lease->moving_since_ms = 0;
  return *lease;
}

LeaseRow RegistryService::DropHandOver(LeaseRow* lease) {
  auto to = gpu_by_id_.find(lease->moving_to);
  if (to != gpu_by_id_.end()) {
    const uint32_t index = static_cast<uint32_t>(to->second);
    Release(&cluster_, LeaseAsk(*lease), {cluster_.gpus[index].node, {index}});
  }
  lease->moving_to.clear();
  lease->moving_since_ms = 0;
  return *lease;
}

std::vector<LeaseRow> RegistryService::ExpireHandOvers(int64_t now) {
  std::vector<LeaseRow> changed;
  for (auto& [id, lease] : leases_) {
    if (lease.moving_to.empty() || now - lease.moving_since_ms < kHandOverLifeMs) continue;
    RGPU_LOG_WARN("lease %s: hand-over to %s not completed in %lld s; it stays on %s", id.c_str(),
                  lease.moving_to.c_str(), (long long)(kHandOverLifeMs / 1000),
                  lease.gpu_id.c_str());
    changed.push_back(DropHandOver(&lease));
  }
  return changed;
}

std::vector<LeaseRow> RegistryService::CompleteHandOversShownBy(const std::vector<UsageRow>& rows,
                                                                const std::vector<bool>& fresh) {
  std::vector<LeaseRow> changed;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i < fresh.size() && !fresh[i]) continue;
    const UsageRecord& r = rows[i].record;
    auto it = leases_.find(r.lease_id());
    if (it == leases_.end() || it->second.moving_to.empty()) continue;
    const std::string gpu = GpuId(r.server_name(), r.gpu_index());
    if (gpu == it->second.moving_to || (r.moved() && gpu == it->second.gpu_id)) {
      changed.push_back(CompleteHandOver(&it->second));
    }
  }
  return changed;
}

void RegistryService::PersistHolders(const std::vector<LeaseRow>& leases) {
  for (const LeaseRow& lease : leases) {
    if (Status s = store_->SetLeaseHolder(lease); !s.ok()) {
      RGPU_LOG_ERROR("lease %s: its hand-over is not stored: %s", lease.lease_id.c_str(),
                     s.message().c_str());
    }
  }
}

}  // namespace rgpu::registry
