// A lease follows its session (docs/migration.md, "Metering"). When a session under a registry
// lease moves to another server, the lease's holder (the provider of the server it is on) asks
// the registry to hand the lease over: the registry picks a GPU of the target server with room
// for it, holds that room, and signs a hand-over token (TokenClaims.hand_over) that the holder
// sends with the session's checkpoint; the target restores the session under the lease with it.
// It completes with the holder's last record of the session (UsageRecord.moved: the session
// left for the target): the target's GPU becomes the lease's, the old one an earlier holder
// whose records are accepted up to that moment, and its room is freed. The target's records
// before that are refused with `retry` (its agent sends them again). CancelHandOver (the
// migration failed), or two minutes without that record, takes the hand-over back.
//
// Never trusted: a provider hands over only leases on its own servers, and only to a registered
// server with room; a server bills a lease only as its GPU or an earlier holder
// (registry/usage_check.h). A holder that hands a lease to a server that does not want it only
// holds room there for two minutes, and after three hand-overs of a lease dropped without
// completing, each within an hour of the last, may not begin another for an hour; a target that
// saw a hand-over (a restore it refused, a migration that failed) cannot take the lease by
// reporting usage under it.
#include <algorithm>

#include "common/log.h"
#include "registry/service.h"
#include "registry/service_helpers.h"

namespace rgpu::registry {
namespace {

constexpr int64_t kHandOverLifeMs = 120000;
// Hand-overs of one lease dropped without completing, each within kDropWindowMs of the last,
// after which the holder waits kDropWindowMs from the last before it begins another.
constexpr uint32_t kMaxDroppedHandOvers = 3;
constexpr int64_t kDropWindowMs = 3600 * 1000;

// True when `lease` may not begin another hand-over now: kMaxDroppedHandOvers were dropped, each
// within kDropWindowMs of the last, counting one in progress (which the next would drop).
bool HandOversBarred(const LeaseRow& lease, int64_t now) {
  if (now - lease.last_drop_ms >= kDropWindowMs) return false;  // the count starts again
  return lease.dropped_hand_overs + (lease.moving_to.empty() ? 0 : 1) >= kMaxDroppedHandOvers;
}

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
      auto moving = gpu_by_id_.find(lease.moving_to);
      if (moving != gpu_by_id_.end() && gpus_[moving->second].row.provider == provider) {
        // Its session reached this provider's server, whose previous holder has not said so yet.
        return grpc::Status(grpc::StatusCode::ABORTED, "lease " + lease.lease_id +
                                                           " is still being handed over to " +
                                                           lease.moving_to + ": ask again shortly");
      }
      return grpc::Status(
          grpc::StatusCode::PERMISSION_DENIED,
          "lease " + lease.lease_id + " is not on a server of provider " + provider);
    }
    if (!lease.reservation_id.empty()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "lease " + lease.lease_id + " runs under reservation " +
                              lease.reservation_id + ", whose room is on its own GPUs");
    }
    if (HandOversBarred(lease, now)) {
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          "lease " + lease.lease_id + "'s last " + std::to_string(kMaxDroppedHandOvers) +
              " hand-overs did not complete; it may be handed over again in " +
              std::to_string((kDropWindowMs - (now - lease.last_drop_ms)) / 1000 + 1) + " s");
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
    const int64_t index = HandOverTarget(lease, target->second.gpus, now);
    if (index < 0) {
      PersistHolders(changed);  // the earlier one, dropped
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "server " + req->to_server() + " has no GPU that takes lease " +
                              lease.lease_id + " (" + std::to_string(lease.memory_bytes >> 20) +
                              " MiB, " + std::to_string(lease.share) +
                              "% of a GPU, the same backend, as capable) now");
    }
    claims = BeginHandOver(&lease, static_cast<size_t>(index), now);
    notice_moves_.erase(lease.lease_id);  // the holder moves it itself
    changed.push_back(lease);
    reply->set_gpu_id(lease.moving_to);
    reply->set_gpu_index(claims.gpus(0));
    PersistHolders(changed);
  }
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
      return grpc::Status(
          grpc::StatusCode::PERMISSION_DENIED,
          "lease " + it->second.lease_id + " is not on a server of provider " + provider);
    }
    if (it->second.moving_to.empty()) return grpc::Status::OK;  // completed, or taken back
    RGPU_LOG_INFO("lease %s: hand-over to %s taken back by its holder", it->first.c_str(),
                  it->second.moving_to.c_str());
    changed.push_back(DropHandOver(&it->second));
    PersistHolders(changed);
  }
  return grpc::Status::OK;
}

int64_t RegistryService::HandOverTarget(const LeaseRow& lease,
                                        const std::vector<size_t>& candidates, int64_t now) const {
  auto from = gpu_by_id_.find(lease.gpu_id);
  const GpuSpec* from_spec = from != gpu_by_id_.end() ? &gpus_[from->second].row.spec : nullptr;
  const PlacementAsk ask = LeaseAsk(lease);
  int64_t best = -1;
  for (size_t index : candidates) {
    const GpuLoad& load = cluster_.gpus[index];
    const GpuSpec& spec = gpus_[index].row.spec;
    if (load.id == lease.gpu_id || !GpuFits(load, ask)) continue;
    if (kept_for_preemption_.count(index) != 0) continue;  // another request's, soon
    if (from_spec != nullptr &&
        (spec.backend() != from_spec->backend() ||
         std::make_pair(spec.cc_major(), spec.cc_minor()) <
             std::make_pair(from_spec->cc_major(), from_spec->cc_minor()))) {
      continue;
    }
    // Its room until the lease's own end (a notice there is the source's, not the target's).
    if (!FitsBesideReservations(index, ask, now, lease.expires_ms)) continue;
    if (best < 0 || load.FreeMemory() < cluster_.gpus[static_cast<size_t>(best)].FreeMemory()) {
      best = static_cast<int64_t>(index);
    }
  }
  return best;
}

wire::TokenClaims RegistryService::BeginHandOver(LeaseRow* lease, size_t index, int64_t now) {
  Commit(&cluster_, LeaseAsk(*lease), {cluster_.gpus[index].node, {static_cast<uint32_t>(index)}});
  const GpuRow& gpu = gpus_[index].row;
  lease->moving_to = gpu.gpu_id;
  lease->moving_since_ms = now;
  RGPU_LOG_INFO("lease %s of tenant %s: handing over from %s to %s", lease->lease_id.c_str(),
                lease->tenant.c_str(), lease->gpu_id.c_str(), gpu.gpu_id.c_str());
  wire::TokenClaims claims;
  claims.set_tenant(lease->tenant);
  claims.set_server(gpu.server_name);
  claims.add_gpus(gpu.spec.index());
  claims.set_lease_id(lease->lease_id);
  claims.set_memory_quota(lease->memory_bytes);
  claims.set_weight(lease->share / 25.0);
  claims.set_expires_unix(lease->expires_ms / 1000);
  claims.set_hand_over(true);
  return claims;
}

void RegistryService::OfferNoticeMoves(const std::string& server_name, int64_t now,
                                       HeartbeatReply* reply) {
  for (int i = 0; i < reply->ending_leases_size(); ++i) {
    LeaseNotice* notice = reply->mutable_ending_leases(i);
    LeaseRow& lease = leases_.at(notice->lease_id());
    auto offered = notice_moves_.find(lease.lease_id);
    // The registry's own offers count against the bound too: a provider that puts its own
    // leases under notice and never moves them would otherwise hold other providers' room.
    if (lease.moving_to.empty() && options_.move_on_notice && lease.reservation_id.empty() &&
        !HandOversBarred(lease, now) &&
        (offered == notice_moves_.end() || now - offered->second.offered_ms >= kHandOverLifeMs)) {
      // Somewhere else with room for it, on a server that lends now and is not this one.
      std::vector<size_t> candidates;
      for (const auto& [name, server] : servers_) {
        if (name == server_name || !server.lendable) continue;
        candidates.insert(candidates.end(), server.gpus.begin(), server.gpus.end());
      }
      const int64_t index = HandOverTarget(lease, candidates, now);
      NoticeMove move;
      move.offered_ms = now;
      if (index >= 0) {
        const wire::TokenClaims claims = BeginHandOver(&lease, static_cast<size_t>(index), now);
        move.url = gpus_[static_cast<size_t>(index)].row.server_url;
        if (Status s = signer_.Sign(claims, &move.token); !s.ok()) {
          RGPU_LOG_ERROR("lease %s: its hand-over is not signed: %s", lease.lease_id.c_str(),
                         s.message().c_str());
          DropHandOver(&lease, /*counts=*/false);  // the registry's failure, not the holder's
          move.token.clear();
        }
        if (Status s = store_->SetLeaseHolder(lease); !s.ok()) {
          RGPU_LOG_ERROR("lease %s: its hand-over is not stored: %s", lease.lease_id.c_str(),
                         s.message().c_str());
        }
      } else {
        RGPU_LOG_INFO("lease %s under notice: no other server has room for it; it ends there",
                      lease.lease_id.c_str());
      }
      offered = notice_moves_.insert_or_assign(lease.lease_id, std::move(move)).first;
    }
    if (offered != notice_moves_.end() && !lease.moving_to.empty() &&
        !offered->second.token.empty()) {
      notice->set_move_url(offered->second.url);
      notice->set_move_token(offered->second.token);
    }
  }
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
  lease->handed_over_ms = Now();
  lease->holder_claimed = false;
  lease->dropped_hand_overs = 0;
  notice_moves_.erase(lease->lease_id);
  if (lease->ending_ms > 0) {
    // Its notice was its old GPU's (a window that closed there, a preemption there): it has left.
    RGPU_LOG_INFO("lease %s: its notice (%s) is lifted: it left the GPU it was given on",
                  lease->lease_id.c_str(), lease->end_reason.c_str());
    lease->ending_ms = 0;
    lease->end_reason.clear();
    under_notice_.erase(lease->lease_id);
    if (Status s = store_->SetLeaseEnding(lease->lease_id, 0, ""); !s.ok()) {
      RGPU_LOG_ERROR("lease %s: its lifted notice is not stored: %s", lease->lease_id.c_str(),
                     s.message().c_str());
    }
  }
  return *lease;
}

LeaseRow RegistryService::DropHandOver(LeaseRow* lease, bool counts) {
  auto offered = notice_moves_.find(lease->lease_id);
  if (offered != notice_moves_.end()) offered->second.token.clear();  // offered again later
  auto to = gpu_by_id_.find(lease->moving_to);
  if (to != gpu_by_id_.end()) {
    const uint32_t index = static_cast<uint32_t>(to->second);
    Release(&cluster_, LeaseAsk(*lease), {cluster_.gpus[index].node, {index}});
  }
  lease->moving_to.clear();
  lease->moving_since_ms = 0;
  if (!counts) return *lease;
  const int64_t now = Now();
  lease->dropped_hand_overs =
      now - lease->last_drop_ms < kDropWindowMs ? lease->dropped_hand_overs + 1 : 1;
  lease->last_drop_ms = now;
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
    // Only the holder says the session left: a target cannot take a lease by reporting it.
    if (r.moved() && GpuId(r.server_name(), r.gpu_index()) == it->second.gpu_id) {
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
