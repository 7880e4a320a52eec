#include "registry/service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <set>
#include <tuple>

#include "common/log.h"
#include "proto/crypto.h"
#include "registry/availability.h"
#include "registry/keys.h"
#include "registry/preemption.h"
#include "registry/service_helpers.h"
#include "transport/url.h"

namespace rgpu::registry {
namespace {

int64_t SystemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Metadata(grpc::ServerContext* ctx, const char* key) {
  const auto& md = ctx->client_metadata();
  auto it = md.find(key);
  if (it == md.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

// A batch job's name (PlaceRequest.job): empty, or 1..128 printable ASCII characters without
// spaces (it is shown in tables and stored as text).
bool ValidJobName(const std::string& job) {
  if (job.size() > 128) return false;
  for (char c : job) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

// Reservation ids and lease ids a request names: at most 128 printable characters.
bool ValidId(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

// How long of [from_ms, to_ms) `server` was down, by `outages` (open ones run to `now_ms`);
// overlapping outages are counted once.
int64_t DownWithin(const std::vector<OutageRow>& outages, const std::string& server,
                   int64_t from_ms, int64_t to_ms, int64_t now_ms) {
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const OutageRow& o : outages) {
    if (o.server_name != server) continue;
    const int64_t a = std::max(o.start_ms, from_ms);
    const int64_t b = std::min(o.end_ms == 0 ? now_ms : o.end_ms, to_ms);
    if (b > a) spans.emplace_back(a, b);
  }
  std::sort(spans.begin(), spans.end());
  int64_t down = 0, reached = from_ms;
  for (const auto& [a, b] : spans) {
    const int64_t start = std::max(a, reached);
    if (b > start) down += b - start;
    reached = std::max(reached, b);
  }
  return down;
}

}  // namespace

grpc::Status ToGrpc(const Status& s) {
  using C = Status::Code;
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  switch (s.code()) {
    case C::kOk:
      return grpc::Status::OK;
    case C::kInvalidArgument:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case C::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case C::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case C::kTimeout:
      code = grpc::StatusCode::DEADLINE_EXCEEDED;
      break;
    case C::kPermissionDenied:
      code = grpc::StatusCode::PERMISSION_DENIED;
      break;
    case C::kResourceExhausted:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
    default:
      break;
  }
  return grpc::Status(code, s.message());
}

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

// True when `text` is at most `max` printable ASCII characters.
bool PrintableWithin(const std::string& text, size_t max) {
  if (text.size() > max) return false;
  for (char c : text) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// Why a registration's GPUs are refused as a whole, or "" (every count, index and string within
// its bound, so that one provider cannot fill the registry's memory, store or answers).
std::string CheckGpuSpecs(const RegisterRequest& req) {
  if (req.gpus_size() > static_cast<int>(kMaxGpusPerServer)) {
    return std::to_string(req.gpus_size()) + " GPUs on one server (at most " +
           std::to_string(kMaxGpusPerServer) + ")";
  }
  std::set<uint32_t> indices;
  for (const GpuSpec& spec : req.gpus()) {
    if (spec.index() >= kMaxGpusPerServer || !indices.insert(spec.index()).second) {
      return "GPU index " + std::to_string(spec.index()) + " is repeated or not below " +
             std::to_string(kMaxGpusPerServer);
    }
    if (!PrintableWithin(spec.model(), 128) || !PrintableWithin(spec.uuid(), 64) ||
        !PrintableWithin(spec.backend(), 32)) {
      return "GPU " + std::to_string(spec.index()) +
             ": a model (128), uuid (64) or backend (32) longer than its bound or not printable";
    }
  }
  return "";
}

std::string GpuId(const std::string& server, uint32_t index) {
  return server + "/" + std::to_string(index);
}

PlacementAsk LeaseAsk(const LeaseRow& lease) {
  PlacementAsk ask;
  ask.memory = lease.memory_bytes;
  ask.milli = lease.share * kMilliPerShare;
  return ask;
}

Status RegistryService::Create(std::unique_ptr<Store> store, RegistryOptions options,
                               std::unique_ptr<RegistryService>* out) {
  if (!options.now_ms) options.now_ms = SystemNowMs;
  if (!options.probe) {
    options.probe = [](const std::string& url, const std::string& secret) {
      return ProbeReachability(url, secret);
    };
  }
  if (options.heartbeat_ms == 0) return InvalidArgument("heartbeat interval must be positive");
  if (options.admin_key.empty()) {
    return InvalidArgument("the registry needs an operator key (--admin-key or its key file)");
  }
  if (options.claim_timeout_ms < 0) return InvalidArgument("claim timeout must not be negative");
  std::unique_ptr<RegistryService> service(new RegistryService(std::move(store), options));
  Status s = MakePlacementPolicy(options.placement_policy, 1, &service->policy_);
  if (!s.ok()) return s;
  s = TokenSigner::Load(options.signing_key_path, &service->signer_);
  if (s.ok()) s = service->Load();
  if (!s.ok()) return s;
  *out = std::move(service);
  return Status::Ok();
}

RegistryService::RegistryService(std::unique_ptr<Store> store, RegistryOptions options)
    : options_(std::move(options)), store_(std::move(store)), ended_(NewKey("epoch-")) {
  probes_ = std::make_unique<ProbeQueue>(
      options_.probe, [this](const std::string& server, uint64_t generation, const Status& result) {
        OnProbed(server, generation, result);
      });
}

RegistryService::~RegistryService() { Shutdown(); }

Status RegistryService::Load() {
  std::vector<ProviderRow> providers;
  std::vector<TenantRow> tenants;
  std::vector<GpuRow> gpus;
  std::vector<LeaseRow> leases, ended;
  std::vector<ServerRow> servers;
  std::vector<ReservationRow> reservations;
  started_ms_ = Now();
  Status s = store_->LoadProviders(&providers);
  if (s.ok()) s = store_->LoadTenants(&tenants);
  if (s.ok()) s = store_->LoadGpus(&gpus);
  if (s.ok()) s = store_->LoadActiveLeases(started_ms_, &leases);
  if (s.ok()) s = store_->LoadEndedLeases(started_ms_, &ended);
  if (s.ok()) s = store_->LoadServers(&servers);
  if (s.ok()) s = store_->LoadLiveReservations(started_ms_, &reservations);
  std::vector<OutageRow> outages;
  if (s.ok()) s = store_->LoadOpenOutages(&outages);
  if (!s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& p : providers) {
    provider_by_key_[p.key_hash] = p.name;
    providers_[p.name] = {p};
  }
  for (auto& t : tenants) {
    tenant_by_key_[t.key_hash] = t.name;
    tenants_[t.name] = t;
  }
  for (auto& g : gpus) {
    GpuLoad load;
    load.id = g.gpu_id;
    load.model = g.spec.model();
    load.backend = g.spec.backend();
    load.memory_total = g.spec.memory_bytes();
    ServerState& server = servers_[g.server_name];
    server.provider = g.provider;
    server.url = g.server_url;
    const size_t i = AddGpu(&server, g.server_name, std::move(load));
    gpu_by_id_[g.gpu_id] = i;
    gpus_.push_back({std::move(g)});
  }
  for (auto& l : leases) {
    auto it = gpu_by_id_.find(l.gpu_id);
    if (it == gpu_by_id_.end()) continue;
    // A lease under a reservation takes the room the reservation holds.
    if (l.reservation_id.empty()) {
      Commit(&cluster_, LeaseAsk(l), {cluster_.gpus[it->second].node, {uint32_t(it->second)}});
    }
    // A hand-over in progress holds room on its target too (it completes or expires).
    auto target = l.moving_to.empty() ? gpu_by_id_.end() : gpu_by_id_.find(l.moving_to);
    if (target != gpu_by_id_.end()) {
      Commit(&cluster_, LeaseAsk(l),
             {cluster_.gpus[target->second].node, {uint32_t(target->second)}});
    } else {
      l.moving_to.clear();
      l.moving_since_ms = 0;
    }
    if (l.ending_ms > 0) under_notice_.insert(l.lease_id);
    leases_[l.lease_id] = l;
  }
  for (const auto& l : ended) ended_.Add(l.server_name, l.lease_id, l.expires_ms, l.end_reason);
  for (const auto& row : servers) {
    auto it = servers_.find(row.name);
    if (it == servers_.end()) continue;
    // Its availability as accepted at its registration, checked again: a store is not trusted
    // to be well formed. One that fails makes the server register again.
    const std::string why = CheckAvailability(row.availability);
    if (!why.empty()) {
      RGPU_LOG_WARN("server %s: stored availability refused (%s); it must register again",
                    row.name.c_str(), why.c_str());
      continue;
    }
    it->second.availability = row.availability;
    // Proven for the URL its GPUs are registered with; anything else proves again.
    if (it->second.url == row.url && row.verified_ms > 0) {
      it->second.reach = Reach::kVerified;
      it->second.verified_ms = row.verified_ms;
    }
  }
  for (const OutageRow& o : outages) {
    auto it = servers_.find(o.server_name);
    if (it != servers_.end()) it->second.in_outage = true;  // until it is heard again
  }
  for (auto& r : reservations) {
    ReservationState state;
    bool known = true;
    for (const std::string& id : r.gpu_ids) {
      auto it = gpu_by_id_.find(id);
      known = known && it != gpu_by_id_.end();
      if (known) state.gpus.push_back(it->second);
    }
    if (!known || r.gpu_ids.empty()) continue;
    for (size_t g : state.gpus) reserved_gpus_[g].insert(r.reservation_id);
    state.row = std::move(r);
    reservations_[state.row.reservation_id] = std::move(state);
  }
  RefreshWindows(started_ms_);
  RefreshReservations(started_ms_, /*end_finished=*/false);
  RGPU_LOG_INFO(
      "store (%s): %zu provider(s), %zu tenant(s), %zu GPU(s), %zu active lease(s), %zu "
      "reservation(s)",
      store_->engine().c_str(), providers_.size(), tenants_.size(), gpus_.size(), leases_.size(),
      reservations_.size());
  return Status::Ok();
}

grpc::Status RegistryService::AuthAdmin(grpc::ServerContext* ctx) {
  // Constant time: how long the comparison takes depends only on the lengths.
  if (ConstantTimeEquals(Metadata(ctx, "x-rgpu-admin-key"), options_.admin_key)) {
    return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      "this needs the registry's operator key (--admin-key-file FILE, --admin-key, "
                      "RGPU_ADMIN_KEY or RGPU_ADMIN_KEY_FILE)");
}

grpc::Status RegistryService::AuthProvider(grpc::ServerContext* ctx, std::string* provider,
                                           bool allow_revoked) {
  const std::string key = Metadata(ctx, "x-rgpu-provider-key");
  if (key.empty()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no provider key given");
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = provider_by_key_.find(KeyHash(key));
  if (it == provider_by_key_.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "unknown provider key");
  }
  if (providers_[it->second].row.revoked && !allow_revoked) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "provider " + it->second + " is revoked");
  }
  *provider = it->second;
  return grpc::Status::OK;
}

grpc::Status RegistryService::AuthTenant(grpc::ServerContext* ctx, std::string* tenant) {
  const std::string key = Metadata(ctx, "x-rgpu-api-key");
  if (key.empty()) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no API key given");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tenant_by_key_.find(KeyHash(key));
  if (it == tenant_by_key_.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "unknown API key");
  }
  *tenant = it->second;
  return grpc::Status::OK;
}

void RegistryService::UpdatePlaceable(const std::string& server_name) {
  auto it = servers_.find(server_name);
  if (it == servers_.end()) return;
  const bool revoked = providers_[it->second.provider].row.revoked;
  const bool placeable =
      it->second.online && !revoked && it->second.reach == Reach::kVerified && it->second.lendable;
  for (size_t i : it->second.gpus) cluster_.gpus[i].placeable = placeable;
}

void RegistryService::WaitForProbes() { probes_->WaitIdle(); }

void RegistryService::OnProbed(const std::string& server_name, uint64_t generation,
                               const Status& result) {
  ServerRow row;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = servers_.find(server_name);
    if (it == servers_.end() || it->second.probe_generation != generation) return;  // stale
    ServerState& server = it->second;
    server.probe_pending = false;
    if (result.ok()) {
      server.reach = Reach::kVerified;
      server.reach_reason.clear();
      RGPU_LOG_INFO("server %s proved it answers at %s", server_name.c_str(), server.url.c_str());
    } else {
      server.reach = Reach::kUnreachable;
      server.reach_reason = result.message();
      RGPU_LOG_WARN("server %s (provider %s) refused: it did not prove it answers at %s: %s",
                    server_name.c_str(), server.provider.c_str(), server.url.c_str(),
                    result.message().c_str());
    }
    server.verified_ms = result.ok() ? Now() : 0;
    UpdatePlaceable(server_name);
    if (result.ok()) Dispatch();
    row = {server_name, server.provider, server.url, server.verified_ms, server.availability};
  }
  Status s = store_->PutServer(row);
  if (!s.ok()) {
    RGPU_LOG_ERROR("cannot record server %s's reachability: %s", server_name.c_str(),
                   s.ToString().c_str());
  }
}

grpc::Status RegistryService::Register(grpc::ServerContext* ctx, const RegisterRequest* req,
                                       RegisterReply* reply) {
  std::string provider;
  grpc::Status auth = AuthProvider(ctx, &provider);
  if (!auth.ok()) return auth;
  if (!ValidName(req->server_name())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "server name must be 1-64 characters of [A-Za-z0-9._-]");
  }
  TransportUrl url;
  if (Status parsed = TransportUrl::Parse(req->server_url(), &url); !parsed.ok() || url.port == 0) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        "server URL must be tcp://HOST:PORT or shm://HOST:PORT, not '" + req->server_url() + "'");
  }
  if (req->reachability_secret().size() < 16 || req->reachability_secret().size() > 64) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "no reachability secret (16-64 bytes) in the registration: the registry "
                        "checks that a server answers at its URL (rgpu-server too old?)");
  }
  if (const std::string why = CheckAvailability(req->availability()); !why.empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "server " + req->server_name() + "'s availability refused: " + why);
  }
  if (const std::string why = CheckGpuSpecs(*req); !why.empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "server " + req->server_name() + "'s GPUs refused: " + why);
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto existing = servers_.find(req->server_name());
  if (existing != servers_.end() && existing->second.provider != provider) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "server " + req->server_name() + " belongs to another provider");
  }
  if (existing == servers_.end()) {
    size_t owned = 0;
    for (const auto& [name, other] : servers_) owned += other.provider == provider;
    if (owned >= kMaxServersPerProvider) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "provider " + provider + " has " + std::to_string(owned) +
                              " servers, the most one provider may register");
    }
  }
  if (existing != servers_.end()) {
    if (const std::string why = ReservationBrokenBy(existing->second, req->availability(), Now());
        !why.empty()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "server " + req->server_name() + "'s availability refused: " + why);
    }
  }
  // One provider cannot keep the probe thread to itself (each probe may wait seconds).
  constexpr int kMaxPendingProbesPerProvider = 16;
  int pending = 0;
  for (const auto& [name, other] : servers_) {
    pending += other.provider == provider && other.probe_pending && name != req->server_name();
  }
  if (pending >= kMaxPendingProbesPerProvider) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "provider " + provider + " has " + std::to_string(pending) +
                            " servers whose URLs are being checked; register again later");
  }
  ServerState& server = servers_[req->server_name()];
  // The server proves again that it answers at its URL (its secret is new with each process);
  // one proven at the same URL before keeps its GPUs placeable meanwhile.
  if (server.url != req->server_url() || server.reach != Reach::kVerified) {
    server.reach = Reach::kUnverified;
    server.verified_ms = 0;
  }
  if (!probes_->Submit(provider, req->server_name(), req->server_url(), req->reachability_secret(),
                       server.probe_generation + 1)) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "the registry is busy checking other servers' URLs; register again later");
  }
  server.probe_generation++;
  server.probe_pending = true;
  server.provider = provider;
  server.url = req->server_url();
  std::vector<GpuRow> rows;  // the accepted GPUs, stored in one transaction
  for (const GpuSpec& spec : req->gpus()) {
    GpuAdmission* admission = reply->add_gpus();
    admission->set_index(spec.index());
    const double cc = spec.cc_major() + spec.cc_minor() / 10.0;
    std::string reason;
    if (spec.driver_version() < options_.min_driver_version) {
      reason = "driver version " + std::to_string(spec.driver_version()) +
               " is older than the minimum " + std::to_string(options_.min_driver_version);
    } else if (cc + 1e-9 < options_.min_compute_capability) {
      char buf[160];
      snprintf(buf, sizeof buf, "compute capability %u.%u is below the minimum %.1f",
               spec.cc_major(), spec.cc_minor(), options_.min_compute_capability);
      reason = buf;
    } else if (spec.memory_bytes() == 0) {
      reason = "no device memory reported";
    } else if (!std::isfinite(spec.bandwidth_gbps()) || spec.bandwidth_gbps() < 0 ||
               spec.bandwidth_gbps() > kMaxAdvertisedBandwidthGbps) {
      char buf[160];
      snprintf(buf, sizeof buf, "interconnect bandwidth %g GB/s is beyond any host link (max %g)",
               spec.bandwidth_gbps(), kMaxAdvertisedBandwidthGbps);
      reason = buf;
    } else if (auto known = gpu_by_id_.find(GpuId(req->server_name(), spec.index()));
               known != gpu_by_id_.end() && cluster_.gpus[known->second].leases > 0 &&
               gpus_[known->second].row.spec.model() != spec.model()) {
      // Its model prices its leases' usage: it stays what they were placed on until they end.
      reason = "its model is " + gpus_[known->second].row.spec.model() +
               " while it holds leases placed on that; it can register as another once they end";
    }
    if (!reason.empty()) {
      admission->set_accepted(false);
      admission->set_reason(reason);
      RGPU_LOG_WARN("server %s GPU %u (%s) refused: %s", req->server_name().c_str(), spec.index(),
                    spec.model().c_str(), reason.c_str());
      continue;
    }
    GpuRow row;
    row.gpu_id = GpuId(req->server_name(), spec.index());
    row.provider = provider;
    row.server_name = req->server_name();
    row.server_url = req->server_url();
    row.spec = spec;
    row.resource_token = NewKey("gpu-");
    admission->set_accepted(true);
    admission->set_gpu_id(row.gpu_id);
    admission->set_resource_token(row.resource_token);
    rows.push_back(std::move(row));
  }
  Status stored = store_->PutGpus(rows);
  if (stored.ok()) {
    stored = store_->PutServer(
        {req->server_name(), provider, req->server_url(), server.verified_ms, req->availability()});
  }
  if (!stored.ok()) return ToGrpc(stored);
  server.availability = req->availability();
  server.availability_since_ms = Now();
  server.lendable = LendableAt(server.availability, Now());
  next_window_edge_ms_ = 0;  // its windows are read at the next RefreshWindows
  for (const GpuRow& row : rows) {
    const GpuSpec& spec = row.spec;
    auto found = gpu_by_id_.find(row.gpu_id);
    size_t index;
    if (found == gpu_by_id_.end()) {
      GpuLoad load;
      load.id = row.gpu_id;
      index = AddGpu(&server, req->server_name(), std::move(load));
      gpus_.push_back({row});
      gpu_by_id_[row.gpu_id] = index;
    } else {
      index = found->second;
      gpus_[index].row = row;
    }
    cluster_.gpus[index].model = spec.model();
    cluster_.gpus[index].backend = spec.backend();
    cluster_.gpus[index].memory_total = spec.memory_bytes();
  }
  server.online = true;
  server.last_heartbeat_ms = Now();
  CloseOutage(req->server_name(), &server, server.last_heartbeat_ms);  // heard from again
  UpdatePlaceable(req->server_name());
  RGPU_LOG_INFO(
      "provider %s registered server %s (%s) with %d GPU(s), lendable %s; checking its URL",
      provider.c_str(), req->server_name().c_str(), req->server_url().c_str(), req->gpus_size(),
      DescribeAvailability(server.availability).c_str());
  reply->set_heartbeat_ms(options_.heartbeat_ms);
  reply->set_public_key_pem(options_.public_key_pem);
  Dispatch();
  return grpc::Status::OK;
}

grpc::Status RegistryService::Heartbeat(grpc::ServerContext* ctx, const HeartbeatRequest* req,
                                        HeartbeatReply* reply) {
  std::string provider;
  grpc::Status auth = AuthProvider(ctx, &provider);
  if (!auth.ok()) return auth;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = servers_.find(req->server_name());
  if (it == servers_.end() || it->second.provider != provider) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "server " + req->server_name() + " is not registered; register again");
  }
  ServerState& server = it->second;
  if (server.reach == Reach::kUnreachable) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "server " + req->server_name() + " takes no placements: the registry " +
                            "could not check that it answers at " + server.url + ": " +
                            server.reach_reason +
                            " (fix --advertise or the firewall and restart rgpu-server)");
  }
  if (server.reach == Reach::kUnverified && !server.probe_pending) {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        "server " + req->server_name() + " has not proved it answers at its URL; register again");
  }
  if (req->has_utc_offset_seconds() &&
      (req->utc_offset_seconds() != server.availability.utc_offset_seconds() ||
       req->zone() != server.availability.zone())) {
    // Daylight saving time began or ended where the server is: its windows move with it.
    Availability moved = server.availability;
    moved.set_utc_offset_seconds(req->utc_offset_seconds());
    moved.set_zone(req->zone());
    if (const std::string why = CheckAvailability(moved); !why.empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "server " + req->server_name() + "'s time zone refused: " + why);
    }
    Status stored =
        store_->PutServer({req->server_name(), provider, server.url, server.verified_ms, moved});
    if (!stored.ok()) return ToGrpc(stored);
    RGPU_LOG_INFO("server %s is now at UTC offset %d s (%s)", req->server_name().c_str(),
                  moved.utc_offset_seconds(), moved.zone().c_str());
    server.availability = std::move(moved);
    server.availability_since_ms = Now();
    next_window_edge_ms_ = 0;
    RefreshWindows(Now());
  }
  server.last_heartbeat_ms = Now();
  CloseOutage(req->server_name(), &server, server.last_heartbeat_ms);
  if (!server.online) {
    server.online = true;
    UpdatePlaceable(req->server_name());
    RGPU_LOG_INFO("server %s is back online", req->server_name().c_str());
    Dispatch();
  }
  reply->set_heartbeat_ms(options_.heartbeat_ms);
  std::vector<std::string> ended, reasons;
  uint64_t cursor = 0;
  ended_.Since(req->server_name(), req->ended_epoch(), req->ended_cursor(), Now(), 10000, &ended,
               &cursor, &reasons);
  for (auto& id : ended) reply->add_ended_leases(std::move(id));
  for (auto& why : reasons) reply->add_ended_reasons(std::move(why));
  reply->set_ended_cursor(cursor);
  reply->set_ended_epoch(ended_.epoch());
  for (const std::string& id : under_notice_) {
    const LeaseRow& lease = leases_.at(id);
    if (lease.server_name != req->server_name()) continue;
    LeaseNotice* notice = reply->add_ending_leases();
    notice->set_lease_id(id);
    notice->set_ends_unix_ms(LeaseEndMs(lease));
    notice->set_reason(lease.end_reason);
  }
  OfferNoticeMoves(req->server_name(), Now(), reply);
  return grpc::Status::OK;
}

void RegistryService::OpenOutage(const std::string& name, ServerState* server, int64_t since_ms) {
  if (server->in_outage) return;
  server->in_outage = true;
  if (Status s = store_->AddOutage(name, since_ms); !s.ok()) {
    RGPU_LOG_ERROR("server %s: its outage is not stored: %s", name.c_str(), s.message().c_str());
  }
}

void RegistryService::CloseOutage(const std::string& name, ServerState* server, int64_t now_ms) {
  if (!server->in_outage) return;
  server->in_outage = false;
  if (Status s = store_->EndOutage(name, now_ms); !s.ok()) {
    RGPU_LOG_ERROR("server %s: the end of its outage is not stored: %s", name.c_str(),
                   s.message().c_str());
  }
}

void RegistryService::Sweep() {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t now = Now();
  const int64_t limit = 3 * static_cast<int64_t>(options_.heartbeat_ms);
  for (auto& [name, server] : servers_) {
    if (server.online && now - server.last_heartbeat_ms > limit) {
      server.online = false;
      UpdatePlaceable(name);
      RGPU_LOG_WARN("server %s missed three heartbeats: its GPUs are offline", name.c_str());
      OpenOutage(name, &server, server.last_heartbeat_ms);
    } else if (!server.online && server.last_heartbeat_ms == 0 && now - started_ms_ > limit) {
      OpenOutage(name, &server, started_ms_);  // not heard from since the registry started
    }
  }
  RefreshWindows(now);
  RefreshReservations(now, /*end_finished=*/true);
  std::vector<std::string> expired, unclaimed, unarrived, noticed;
  for (const auto& [id, lease] : leases_) {
    if (lease.expires_ms <= now) {
      expired.push_back(id);
    } else if (lease.ending_ms > 0 && lease.ending_ms <= now) {
      noticed.push_back(id);
    } else if (lease.claimed_ms == 0 && options_.claim_timeout_ms > 0 &&
               now - std::max(lease.granted_ms, started_ms_) >= options_.claim_timeout_ms) {
      unclaimed.push_back(id);
    } else if (lease.handed_over_ms > 0 && !lease.holder_claimed && options_.claim_timeout_ms > 0 &&
               now - std::max(lease.handed_over_ms, started_ms_) >= options_.claim_timeout_ms) {
      // Its session never reached the GPU it was handed over to: a phantom hand-over, which
      // would hold another provider's GPU for the lease's lifetime.
      unarrived.push_back(id);
    }
  }
  for (const auto& id : expired) EndLease(id, "its lifetime is over");
  for (const auto& id : noticed) {
    const std::string why = leases_.at(id).end_reason;  // EndLease forgets the lease
    EndLease(id, why);
  }
  for (const auto& id : unclaimed) EndLease(id, "no session started under it (claim timeout)");
  for (const auto& id : unarrived) {
    EndLease(id, "its session never reached the GPU it was handed over to (claim timeout)");
  }
  PersistHolders(ExpireHandOvers(now));
  Dispatch();
  lock.unlock();
  PersistEnded();
}

void RegistryService::PersistEnded() {
  std::vector<std::tuple<std::string, int64_t, std::string>> ends;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ends.swap(ended_unpersisted_);
  }
  for (const auto& [id, when, why] : ends) {
    Status s = store_->ReleaseLease(id, when, why);
    if (!s.ok()) {
      RGPU_LOG_ERROR("cannot record the end of lease %s: %s", id.c_str(), s.ToString().c_str());
    }
  }
}

void RegistryService::PutUnderNotice(LeaseRow* lease, int64_t ending_ms,
                                     const std::string& reason) {
  if (lease->ending_ms > 0 && lease->ending_ms <= ending_ms) return;  // ends sooner already
  lease->ending_ms = ending_ms;
  lease->end_reason = reason;
  under_notice_.insert(lease->lease_id);
  RGPU_LOG_INFO("lease %s of tenant %s on %s ends at %s: %s", lease->lease_id.c_str(),
                lease->tenant.c_str(), lease->gpu_id.c_str(), UtcTime(ending_ms).c_str(),
                reason.c_str());
  // Stored before anyone can read the notice (it is read under mu_, which the caller holds).
  Status s = store_->SetLeaseEnding(lease->lease_id, ending_ms, reason);
  if (!s.ok()) {
    RGPU_LOG_ERROR("cannot record the notice of lease %s: %s", lease->lease_id.c_str(),
                   s.ToString().c_str());
  }
}

void RegistryService::RefreshWindows(int64_t now) {
  if (now < next_window_edge_ms_) return;
  int64_t next = kLendableForever;
  std::set<std::string> closed;
  for (auto& [name, server] : servers_) {
    const Availability& a = server.availability;
    if (AlwaysLendable(a)) {
      if (!server.lendable) {
        server.lendable = true;
        UpdatePlaceable(name);
      }
      continue;
    }
    const bool lendable = LendableAt(a, now);
    next = std::min(next, lendable ? LendableUntil(a, now) : NextOpening(a, now));
    if (lendable != server.lendable) {
      server.lendable = lendable;
      UpdatePlaceable(name);
      RGPU_LOG_INFO("server %s's lendable window %s", name.c_str(), lendable ? "opened" : "closed");
    }
    if (!lendable) closed.insert(name);
  }
  next_window_edge_ms_ = next;
  if (closed.empty()) return;
  for (auto& [id, lease] : leases_) {
    if (closed.count(lease.server_name) == 0) continue;
    const ServerState& server = servers_.at(lease.server_name);
    const Availability& a = server.availability;
    // The notice counts from the close, or from when the server's windows last changed if that
    // is later (windows or an offset reported anew must not cut a running lease's notice
    // short), and is the one promised at the grant, whatever the server says now.
    const int64_t close = LastClose(a, now);
    const int64_t from = std::max(close, server.availability_since_ms);
    const int64_t notice_ms = int64_t{std::min(lease.notice_s, kMaxNoticeSeconds)} * 1000;
    const std::string when = from == close
                                 ? "closed at " + UtcTime(close)
                                 : "closed (its windows changed at " + UtcTime(from) + ")";
    PutUnderNotice(&lease, std::max(now, from + notice_ms),
                   "the provider's lendable window (" + DescribeAvailability(a) + ") " + when +
                       "; notice " + std::to_string(notice_ms / 1000) + " s");
  }
}

std::string RegistryService::ReservationBrokenBy(const ServerState& server, const Availability& a,
                                                 int64_t now) const {
  for (size_t g : server.gpus) {
    auto reserved = reserved_gpus_.find(g);
    if (reserved == reserved_gpus_.end()) continue;
    for (const std::string& id : reserved->second) {
      const ReservationRow& r = reservations_.at(id).row;
      if (r.end_ms > now && !LendsThroughout(a, std::max(r.start_ms, now), r.end_ms)) {
        return "reservation " + id + " holds " + cluster_.gpus[g].id + " from " +
               UtcTime(r.start_ms) + " to " + UtcTime(r.end_ms) +
               ", which these lendable windows do not cover (keep the windows until it ends, or "
               "ask the operator to cancel it)";
      }
    }
  }
  return "";
}

void RegistryService::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_ = true;
  changed_.notify_all();
}

void RegistryService::EndLease(const std::string& lease_id, const std::string& why) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  notice_moves_.erase(lease_id);
  const int64_t now = Now();
  RGPU_LOG_INFO("lease %s of tenant %s on %s ended: %s", lease_id.c_str(),
                it->second.tenant.c_str(), it->second.gpu_id.c_str(), why.c_str());
  // Its token stays valid until the lease's expiry: the server is told to refuse it.
  if (it->second.expires_ms > now) {
    ended_.Add(it->second.server_name, lease_id, it->second.expires_ms, why);
  }
  if (!it->second.moving_to.empty()) {
    // Its hand-over's target is told too (it may hold the session already), and its room freed.
    auto target = gpu_by_id_.find(it->second.moving_to);
    if (target != gpu_by_id_.end()) {
      const GpuRow& row = gpus_[target->second].row;
      if (it->second.expires_ms > now) {
        ended_.Add(row.server_name, lease_id, it->second.expires_ms, why);
      }
      const uint32_t index = static_cast<uint32_t>(target->second);
      Release(&cluster_, LeaseAsk(it->second), {cluster_.gpus[index].node, {index}});
    }
  }
  auto gpu = gpu_by_id_.find(it->second.gpu_id);
  // A lease under a reservation used the room the reservation holds; that stays held.
  if (gpu != gpu_by_id_.end() && it->second.reservation_id.empty()) {
    const uint32_t index = static_cast<uint32_t>(gpu->second);
    Release(&cluster_, LeaseAsk(it->second), {cluster_.gpus[index].node, {index}});
  }
  // Recorded as ended when it was due (its expiry, the end of its notice) if a sweep came later.
  ended_unpersisted_.emplace_back(lease_id, std::min(now, LeaseEndMs(it->second)), why);
  under_notice_.erase(lease_id);
  leases_.erase(it);
}

size_t RegistryService::AddGpu(ServerState* server, const std::string& server_name, GpuLoad load) {
  if (server->node < 0) {
    NodeLoad node;
    node.name = server_name;
    server->node = static_cast<int>(cluster_.AddNode(std::move(node)));
  }
  const size_t index = cluster_.AddGpu(static_cast<uint32_t>(server->node), std::move(load));
  server->gpus.push_back(index);
  return index;
}

void RegistryService::Dispatch() {
  const int64_t now = Now();
  RefreshWindows(now);
  RefreshReservations(now, /*end_finished=*/false);
  bool placed = false;
  // Only requests with a duration, and clusters with reservations or GPUs kept for a
  // preemption, need more than the request's own ask.
  const bool constrained = !reserved_gpus_.empty() || !kept_for_preemption_.empty();
  // Queue order now (registry/queue_order.h): priority, then the shortest declared duration aged
  // by the wait, then arrival; the same function orders bench/placement_sim's backfill.
  auto entry = [&](const Waiter& w) {
    QueueEntry e;
    e.priority = w.priority;
    e.waited_s = static_cast<double>(now - w.enqueued_ms) / 1000.0;
    e.declared_s = w.duration_seconds;
    e.seq = w.seq;
    return e;
  };
  auto before = [&](const auto& a, const auto& b) {
    return QueueBefore(entry(*a), entry(*b), options_.queue_order);
  };
  const bool reordered = !std::is_sorted(queue_.begin(), queue_.end(), before);
  if (reordered) std::stable_sort(queue_.begin(), queue_.end(), before);
  for (auto it = queue_.begin(); it != queue_.end();) {
    Waiter* w = it->get();
    const auto start = std::chrono::steady_clock::now();
    PlacementAsk narrowed;
    const bool narrow = constrained || w->duration_seconds > 0;
    if (narrow) narrowed = ConstrainedAsk(*w, now);
    const std::optional<PlacementChoice> choice =
        policy_->Choose(cluster_, narrow ? narrowed : w->ask);
    const double decision_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    if (!choice) {
      ++it;
      continue;
    }
    Grant(w, choice->gpus[0], decision_us);
    it = queue_.erase(it);
    placed = true;
  }
  // Requests still waiting whose priority may preempt, and that no preemption serves yet.
  bool preempted = false;
  if (!options_.prices.preemption_notice_s.empty()) {
    for (auto& waiter : queue_) {
      if (waiter->preempting_index >= 0) continue;
      const int64_t notice_s = options_.prices.PreemptionNoticeFor(waiter->priority);
      if (notice_s < 0) continue;
      preempted = TryPreempt(waiter.get(), notice_s * 1000, now) || preempted;
    }
  }
  if (placed || preempted || reordered) changed_.notify_all();  // positions moved
}

PlacementAsk RegistryService::ConstrainedAsk(const Waiter& w, int64_t now) const {
  PlacementAsk ask = w.ask;
  if (w.duration_seconds > 0) {
    const int64_t until = now + int64_t{w.duration_seconds} * 1000;
    for (const auto& [name, server] : servers_) {
      if (AlwaysLendable(server.availability)) continue;
      if (LendableUntil(server.availability, now) < until) {
        for (size_t g : server.gpus) ask.excluded.insert(cluster_.gpus[g].id);
      }
    }
  }
  const int64_t until = now + int64_t{w.ttl_seconds} * 1000;
  for (const auto& [index, ids] : reserved_gpus_) {
    if (!FitsBesideReservations(index, w.ask, now, until)) {
      ask.excluded.insert(cluster_.gpus[index].id);
    }
  }
  for (const auto& [index, kept_for] : kept_for_preemption_) {
    if (kept_for != &w) ask.excluded.insert(cluster_.gpus[index].id);
  }
  return ask;
}

std::vector<TimedHold> RegistryService::HoldsOn(size_t index, int64_t now) const {
  std::vector<TimedHold> holds;
  const std::string& gpu_id = cluster_.gpus[index].id;
  for (const auto& [id, lease] : leases_) {
    // Leases under a reservation use the reservation's room, counted with it.
    if (lease.gpu_id != gpu_id || !lease.reservation_id.empty()) continue;
    holds.push_back({now, LeaseEndMs(lease), lease.memory_bytes, lease.share * kMilliPerShare});
  }
  auto reserved = reserved_gpus_.find(index);
  if (reserved != reserved_gpus_.end()) {
    for (const std::string& id : reserved->second) {
      const ReservationRow& r = reservations_.at(id).row;
      holds.push_back({r.start_ms, r.end_ms, r.memory_bytes, r.share * kMilliPerShare});
    }
  }
  return holds;
}

bool RegistryService::FitsBesideReservations(size_t index, const PlacementAsk& ask, int64_t from_ms,
                                             int64_t to_ms) const {
  const GpuLoad& gpu = cluster_.gpus[index];
  return FitsOverTime(HoldsOn(index, from_ms), {from_ms, to_ms, ask.memory, ask.milli},
                      gpu.memory_total, kMilliPerGpu);
}

bool RegistryService::TryPreempt(Waiter* w, int64_t notice_ms, int64_t now) {
  const int64_t ends = now + notice_ms;
  if (w->deadline_ms < ends) return false;  // it would be gone before the room is made
  // The leases on each GPU, and what those already under notice free by then.
  std::map<std::string, std::vector<LeaseRow*>> by_gpu;
  for (auto& [id, lease] : leases_) by_gpu[lease.gpu_id].push_back(&lease);
  struct Best {
    size_t index = 0;
    std::vector<std::string> victims;
    int32_t top_priority = 0;
  };
  std::optional<Best> best;
  for (size_t i = 0; i < cluster_.gpus.size(); ++i) {
    const GpuLoad& gpu = cluster_.gpus[i];
    if (!gpu.placeable || !GpuKindAccepted(gpu.model, gpu.backend, w->ask) ||
        w->ask.excluded.count(gpu.id) != 0 || w->ask.memory > gpu.memory_total ||
        kept_for_preemption_.count(i) != 0 || reserved_gpus_.count(i) != 0) {
      continue;
    }
    if (w->duration_seconds > 0) {
      const ServerState& server = servers_.at(gpus_[i].row.server_name);
      if (LendableUntil(server.availability, now) < ends + int64_t{w->duration_seconds} * 1000) {
        continue;
      }
    }
    uint64_t free_memory = gpu.FreeMemory();
    uint32_t free_milli = gpu.FreeMilli();
    std::vector<PreemptionCandidate> candidates;
    for (const LeaseRow* lease : by_gpu[gpu.id]) {
      if (lease->ending_ms > 0 && lease->ending_ms <= ends) {
        free_memory = free_memory > UINT64_MAX - lease->memory_bytes
                          ? UINT64_MAX
                          : free_memory + lease->memory_bytes;
        free_milli += lease->share * kMilliPerShare;
      } else if (lease->reservation_id.empty()) {
        candidates.push_back({lease->lease_id, lease->priority, lease->granted_ms,
                              lease->memory_bytes, lease->share * kMilliPerShare});
      }
    }
    std::vector<std::string> victims = ChoosePreemptionVictims(
        candidates, free_memory, free_milli, w->ask.memory, w->ask.milli, w->priority);
    if (victims.empty()) continue;
    int32_t top = 0;
    for (const std::string& id : victims) top = std::max(top, leases_.at(id).priority);
    if (!best || victims.size() < best->victims.size() ||
        (victims.size() == best->victims.size() && top < best->top_priority)) {
      best = Best{i, std::move(victims), top};
    }
  }
  if (!best) return false;
  const std::string reason = "preempted by a priority-" + std::to_string(w->priority) +
                             " request of tenant " + w->tenant + " (notice " +
                             std::to_string(notice_ms / 1000) + " s)";
  for (const std::string& id : best->victims) PutUnderNotice(&leases_.at(id), ends, reason);
  w->preempting_index = static_cast<int64_t>(best->index);
  w->preemption_ends_ms = ends;
  kept_for_preemption_[best->index] = w;
  RGPU_LOG_INFO("tenant %s's priority-%d request waits for %zu lease(s) on %s to end at %s",
                w->tenant.c_str(), w->priority, best->victims.size(),
                cluster_.gpus[best->index].id.c_str(), UtcTime(ends).c_str());
  return true;
}

void RegistryService::ForgetPreemption(Waiter* w) {
  if (w->preempting_index < 0) return;
  auto it = kept_for_preemption_.find(static_cast<size_t>(w->preempting_index));
  if (it != kept_for_preemption_.end() && it->second == w) kept_for_preemption_.erase(it);
  w->preempting_index = -1;
}

void RegistryService::Grant(Waiter* w, size_t index, double decision_us) {
  const int64_t now = Now();
  const GpuRow& gpu = gpus_[index].row;
  LeaseRow lease;
  lease.lease_id = NewKey("lease-");
  lease.tenant = w->tenant;
  lease.gpu_id = gpu.gpu_id;
  lease.server_name = gpu.server_name;
  lease.memory_bytes = w->ask.memory;
  lease.share = w->ask.milli / kMilliPerShare;
  lease.priority = w->priority;
  lease.queue_ms = now - w->enqueued_ms;
  lease.granted_ms = now;
  lease.expires_ms = now + static_cast<int64_t>(w->ttl_seconds) * 1000;
  // A declared duration is a time limit, as a batch scheduler's is: the lease ends with it, so a
  // tenant cannot declare a short job to pass longer ones in the queue and then run long.
  if (w->duration_seconds > 0) {
    lease.expires_ms = std::min(lease.expires_ms, now + int64_t{w->duration_seconds} * 1000);
  }
  lease.reservation_id = w->reservation_id;
  if (!w->reservation_id.empty()) {
    lease.expires_ms = std::min(lease.expires_ms, w->reservation_end_ms);
  }
  lease.job = w->job;
  lease.until_released = w->until_released;
  const Availability& availability = servers_[gpu.server_name].availability;
  lease.notice_s = std::min(availability.notice_seconds(), kMaxNoticeSeconds);
  wire::TokenClaims& claims = w->claims;  // signed by the waiting Place call, outside mu_
  claims.set_tenant(w->tenant);
  claims.set_server(gpu.server_name);
  claims.add_gpus(gpu.spec.index());
  claims.set_lease_id(lease.lease_id);
  claims.set_memory_quota(w->ask.memory);
  claims.set_weight(lease.share / 25.0);
  claims.set_expires_unix(lease.expires_ms / 1000);
  claims.set_holder_key(w->holder_key);
  w->done = true;
  w->lease = lease;  // stored by the waiting Place call, outside mu_
  ForgetPreemption(w);
  if (w->reservation_id.empty()) {
    Commit(&cluster_, w->ask, {cluster_.gpus[index].node, {static_cast<uint32_t>(index)}});
  }
  leases_[lease.lease_id] = lease;
  Placement& p = w->placement;
  p.set_lease_id(lease.lease_id);
  p.set_server_name(gpu.server_name);
  p.set_server_url(servers_[gpu.server_name].url);
  p.set_gpu_id(gpu.gpu_id);
  p.set_gpu_index(gpu.spec.index());
  p.set_model(gpu.spec.model());
  p.set_expires_unix(claims.expires_unix());
  p.set_decision_us(decision_us);
  p.set_queue_ms(lease.queue_ms);
  if (options_.claim_timeout_ms > 0) {
    p.set_claim_by_unix((lease.granted_ms + options_.claim_timeout_ms) / 1000);
  }
  const int64_t until = LendableUntil(availability, now);
  p.set_lendable_until_unix(until == kLendableForever ? 0 : until / 1000);
  p.set_notice_seconds(lease.notice_s);
  p.set_reservation_id(w->reservation_id);
}

grpc::Status RegistryService::Place(grpc::ServerContext* ctx, const PlaceRequest* req,
                                    grpc::ServerWriter<PlaceUpdate>* writer) {
  return PlaceWith(ctx, req, [writer](const PlaceUpdate& update) { return writer->Write(update); });
}

grpc::Status RegistryService::ReleaseLease(grpc::ServerContext* ctx, const ReleaseLeaseRequest* req,
                                           Empty*) {
  std::string tenant;
  grpc::Status auth = AuthTenant(ctx, &tenant);
  if (!auth.ok()) return auth;
  std::unique_lock<std::mutex> lock(mu_);
  auto it = leases_.find(req->lease_id());
  // Another tenant's lease reads as no lease at all: its existence is not the caller's to learn.
  if (it == leases_.end() || it->second.tenant != tenant) {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        "no active lease " + req->lease_id().substr(0, 80) + " of tenant " + tenant);
  }
  EndLease(req->lease_id(), "its tenant released it");
  Dispatch();
  lock.unlock();
  PersistEnded();
  return grpc::Status::OK;
}

grpc::Status RegistryService::PlaceWith(grpc::ServerContext* ctx, const PlaceRequest* req,
                                        const std::function<bool(const PlaceUpdate&)>& write) {
  std::string tenant;
  grpc::Status auth = AuthTenant(ctx, &tenant);
  if (!auth.ok()) return auth;
  if (req->holder_key().size() != 32) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a placement needs its holder's Ed25519 public key (32 bytes), which its "
                        "token binds (rgpu run makes one)");
  }
  if (!ValidJobName(req->job())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a job name is at most 128 printable ASCII characters without spaces");
  }
  auto w = std::make_shared<Waiter>();
  w->holder_key = req->holder_key();
  w->job = req->job();
  w->until_released = req->until_released();
  w->tenant = tenant;
  w->ask.gpu_type = req->gpu_type();
  w->ask.backend = req->backend();
  w->ask.memory = req->memory_bytes() ? req->memory_bytes() : (1ull << 30);
  const uint32_t share = req->compute_share() ? req->compute_share() : 25;
  if (req->excluded_gpus_size() > 64) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "at most 64 GPUs may be excluded");
  }
  for (const std::string& id : req->excluded_gpus()) {
    if (id.size() > 256) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "an excluded GPU id is too long");
    }
    w->ask.excluded.insert(id);
  }
  w->priority = req->priority();
  w->ttl_seconds = req->ttl_seconds() ? req->ttl_seconds() : 3600;
  if (share > kSharePerGpu) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "compute share is a percentage 1-100");
  }
  w->ask.milli = share * kMilliPerShare;
  if (w->priority < 0 || w->priority > 9) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "priority must be 0-9");
  }
  if (req->wait_seconds() > 86400 || w->ttl_seconds > 7 * 86400 ||
      req->duration_seconds() > 7 * 86400) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "wait is at most a day, lease lifetime and duration at most a week");
  }
  w->duration_seconds = req->duration_seconds();
  if (!req->reservation_id().empty() && !ValidId(req->reservation_id())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a reservation id is 1-128 printable characters");
  }
  w->reservation_id = req->reservation_id();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(req->wait_seconds());
  std::unique_lock<std::mutex> lock(mu_);
  if (!w->reservation_id.empty()) {
    // Under a reservation: its own room on its GPUs, at once or not at all.
    w->enqueued_ms = Now();
    grpc::Status placed = PlaceUnderReservation(w.get());
    if (!placed.ok()) return placed;
  } else {
    if (!EverFits(cluster_, w->ask)) {
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          "no registered GPU" +
              (w->ask.gpu_type.empty() ? "" : " of type '" + w->ask.gpu_type + "'") + " has " +
              std::to_string(w->ask.memory >> 20) + " MiB and " + std::to_string(share) +
              "% compute to offer");
    }
    if (w->duration_seconds > 0) {
      // Some GPU that could take it must lend that long at a stretch.
      bool long_enough = false;
      for (const auto& [name, server] : servers_) {
        if (LongestStretchMs(server.availability) < int64_t{w->duration_seconds} * 1000) continue;
        for (size_t g : server.gpus) {
          const GpuLoad& gpu = cluster_.gpus[g];
          long_enough = long_enough ||
                        (GpuKindAccepted(gpu.model, gpu.backend, w->ask) &&
                         w->ask.excluded.count(gpu.id) == 0 && w->ask.memory <= gpu.memory_total);
        }
      }
      if (!long_enough) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            "no registered GPU that could take the request lends for " +
                                std::to_string(w->duration_seconds) +
                                " s at a stretch (the servers' --available windows are shorter)");
      }
    }
    policy_->Observe(w->ask);
    w->seq = next_seq_++;
    w->enqueued_ms = Now();
    w->deadline_ms = w->enqueued_ms + int64_t{req->wait_seconds()} * 1000;
    auto pos = std::find_if(queue_.begin(), queue_.end(),
                            [&](const auto& other) { return other->priority < w->priority; });
    queue_.insert(pos, w);
    changed_.notify_all();  // those it went ahead of see their new positions
    Dispatch();
  }
  // What the caller was last told: its position, and the preemption made for it (if any).
  uint32_t last_position = 0;
  int64_t last_preemption_ms = 0;
  while (!w->done) {
    if (shutdown_ || ctx->IsCancelled() || std::chrono::steady_clock::now() >= deadline) break;
    const auto it = std::find(queue_.begin(), queue_.end(), w);
    const uint32_t position = static_cast<uint32_t>(it - queue_.begin()) + 1;
    if (position != last_position || w->preemption_ends_ms != last_preemption_ms) {
      last_position = position;
      last_preemption_ms = w->preemption_ends_ms;
      PlaceUpdate update;
      update.mutable_queued()->set_position(position);
      update.mutable_queued()->set_length(static_cast<uint32_t>(queue_.size()));
      if (w->preempting_index >= 0) {
        update.mutable_queued()->set_preempting_gpu(
            cluster_.gpus[static_cast<size_t>(w->preempting_index)].id);
        update.mutable_queued()->set_preemption_ends_unix_ms(w->preemption_ends_ms);
      }
      lock.unlock();
      write(update);
      lock.lock();
      continue;
    }
    changed_.wait_until(lock, std::min(deadline, std::chrono::steady_clock::now() +
                                                     std::chrono::milliseconds(200)));
  }
  if (!w->done) {
    const auto it = std::find(queue_.begin(), queue_.end(), w);
    const size_t position = static_cast<size_t>(it - queue_.begin()) + 1;
    const size_t length = queue_.size();
    if (it != queue_.end()) queue_.erase(it);
    ForgetPreemption(w.get());
    changed_.notify_all();  // positions behind it moved up
    if (shutdown_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "registry shutting down");
    if (ctx->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "no GPU free: queue position " + std::to_string(position) + " of " +
                            std::to_string(length) + " after waiting " +
                            std::to_string(req->wait_seconds()) + " s" + WindowHint(w->ask, Now()));
  }
  if (!w->error.ok()) return w->error;
  lock.unlock();
  // Signing (tens of microseconds) and storing happen outside mu_, so that
  // concurrent placements proceed in parallel; the lease is durable before the caller hears of
  // it (group-committed with concurrent ones).
  std::string token;
  Status stored = signer_.Sign(w->claims, &token);
  if (stored.ok()) stored = store_->AddLease(w->lease);
  w->placement.set_token(token);
  if (!stored.ok()) {
    lock.lock();
    EndLease(w->lease.lease_id, "it could not be stored");
    Dispatch();
    return ToGrpc(stored);
  }
  RGPU_LOG_INFO("tenant %s placed on %s (lease %s, queued %lld ms)", tenant.c_str(),
                w->placement.gpu_id().c_str(), w->placement.lease_id().c_str(),
                (long long)w->placement.queue_ms());
  PlaceUpdate update;
  *update.mutable_placement() = w->placement;
  if (!write(update)) {
    // The caller went away before hearing of its placement: nobody will use the lease.
    RGPU_LOG_WARN("tenant %s left before its placement arrived; lease %s ended", tenant.c_str(),
                  w->lease.lease_id.c_str());
    lock.lock();
    EndLease(w->lease.lease_id, "its caller left before the placement arrived");
    Dispatch();
    lock.unlock();
    PersistEnded();
    return grpc::Status(grpc::StatusCode::CANCELLED, "caller gone");
  }
  return grpc::Status::OK;
}

std::string RegistryService::WindowHint(const PlacementAsk& ask, int64_t now) const {
  int64_t opens = kLendableForever;
  std::string gpu_id;
  for (const auto& [name, server] : servers_) {
    if (server.lendable || !server.online || server.reach != Reach::kVerified) continue;
    for (size_t g : server.gpus) {
      const GpuLoad& gpu = cluster_.gpus[g];
      if (!GpuKindAccepted(gpu.model, gpu.backend, ask) || ask.excluded.count(gpu.id) != 0 ||
          ask.memory > gpu.memory_total) {
        continue;
      }
      const int64_t at = NextOpening(server.availability, now);
      if (at < opens) {
        opens = at;
        gpu_id = gpu.id;
      }
    }
  }
  if (gpu_id.empty()) return "";
  return "; " + gpu_id + " is outside its lendable window until " + UtcTime(opens);
}

void RegistryService::RefreshReservations(int64_t now, bool end_finished) {
  if (now < next_reservation_edge_ms_ && !end_finished) return;
  std::vector<std::string> over;
  int64_t next = INT64_MAX;
  for (auto& [id, r] : reservations_) {
    if (r.row.end_ms <= now) {
      over.push_back(id);
      continue;
    }
    if (!r.active && r.row.start_ms <= now) {
      r.active = true;
      for (size_t g : r.gpus) {
        GpuLoad& gpu = cluster_.gpus[g];
        gpu.memory_committed += r.row.memory_bytes;
        gpu.milli_committed += r.row.share * kMilliPerShare;
      }
      RGPU_LOG_INFO("reservation %s of tenant %s started: %zu GPU(s) held until %s", id.c_str(),
                    r.row.tenant.c_str(), r.gpus.size(), UtcTime(r.row.end_ms).c_str());
    }
    next = std::min(next, r.active ? r.row.end_ms : r.row.start_ms);
  }
  if (end_finished) {
    for (const std::string& id : over) DropReservation(id, "its reservation " + id + " ended");
  } else if (!over.empty()) {
    next = now;  // ended by the next Sweep
  }
  next_reservation_edge_ms_ = next;
}

void RegistryService::DropReservation(const std::string& reservation_id, const std::string& why) {
  auto it = reservations_.find(reservation_id);
  if (it == reservations_.end()) return;
  ReservationState& r = it->second;
  if (r.active) {
    for (size_t g : r.gpus) {
      GpuLoad& gpu = cluster_.gpus[g];
      gpu.memory_committed -= std::min(gpu.memory_committed, r.row.memory_bytes);
      gpu.milli_committed -= std::min(gpu.milli_committed, r.row.share * kMilliPerShare);
    }
  }
  std::vector<std::string> under;
  for (const auto& [id, lease] : leases_) {
    if (lease.reservation_id == reservation_id) under.push_back(id);
  }
  for (const std::string& id : under) EndLease(id, why);
  for (size_t g : r.gpus) {
    auto reserved = reserved_gpus_.find(g);
    if (reserved == reserved_gpus_.end()) continue;
    reserved->second.erase(reservation_id);
    if (reserved->second.empty()) reserved_gpus_.erase(reserved);
  }
  RGPU_LOG_INFO("reservation %s of tenant %s is over: %s", reservation_id.c_str(),
                r.row.tenant.c_str(), why.c_str());
  reservations_.erase(it);
}

grpc::Status RegistryService::PlaceUnderReservation(Waiter* w) {
  const int64_t now = Now();
  RefreshReservations(now, /*end_finished=*/false);
  auto it = reservations_.find(w->reservation_id);
  // Another tenant's reservation reads as none, as its leases do.
  if (it == reservations_.end() || it->second.row.tenant != w->tenant ||
      it->second.row.end_ms <= now) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "no reservation " + w->reservation_id.substr(0, 80) + " of tenant " +
                            w->tenant + " that has not ended");
  }
  ReservationState& r = it->second;
  if (!r.active) {
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        "reservation " + w->reservation_id + " starts at " + UtcTime(r.row.start_ms));
  }
  // One lease per reserved GPU at a time: the reservation holds one share of each.
  std::set<std::string> used;
  for (const auto& [id, lease] : leases_) {
    if (lease.reservation_id == w->reservation_id) used.insert(lease.gpu_id);
  }
  std::string why = "every GPU of reservation " + w->reservation_id + " has a lease under it";
  for (size_t g : r.gpus) {
    const GpuLoad& gpu = cluster_.gpus[g];
    if (used.count(gpu.id) != 0 || w->ask.excluded.count(gpu.id) != 0) continue;
    if (!gpu.placeable) {
      why = "reserved GPU " + gpu.id +
            " takes no placements now (offline, unverified, revoked "
            "or outside its lendable window: rgpu gpus)";
      continue;
    }
    w->ask.memory = r.row.memory_bytes;
    w->ask.milli = r.row.share * kMilliPerShare;
    w->reservation_end_ms = r.row.end_ms;
    w->priority = 0;  // it never waited and preempts nothing
    Grant(w, g, 0);
    return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, why);
}

Reservation RegistryService::ReservationInfo(const ReservationRow& row, int64_t now) const {
  Reservation out;
  out.set_reservation_id(row.reservation_id);
  out.set_tenant(row.tenant);
  for (const std::string& id : row.gpu_ids) out.add_gpu_ids(id);
  out.set_memory_bytes(row.memory_bytes);
  out.set_compute_share(row.share);
  out.set_start_unix(row.start_ms / 1000);
  out.set_end_unix(row.end_ms / 1000);
  out.set_created_unix(row.created_ms / 1000);
  out.set_cancelled_unix(row.cancelled_ms / 1000);
  out.set_state(row.cancelled_ms > 0  ? "cancelled"
                : now >= row.end_ms   ? "ended"
                : now >= row.start_ms ? "active"
                                      : "pending");
  out.set_job(row.job);
  return out;
}

grpc::Status RegistryService::Reserve(grpc::ServerContext* ctx, const ReserveRequest* req,
                                      Reservation* reply) {
  std::string tenant;
  grpc::Status auth = AuthTenant(ctx, &tenant);
  if (!auth.ok()) return auth;
  const uint32_t share = req->compute_share() ? req->compute_share() : 25;
  const uint32_t count = req->gpus() ? req->gpus() : 1;
  if (share > kSharePerGpu) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "compute share is a percentage 1-100");
  }
  if (count > 16) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a reservation holds 1-16 GPUs");
  }
  if (req->duration_seconds() < 60 || req->duration_seconds() > 7 * 86400) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a reservation lasts 60 s to a week");
  }
  if (!ValidJobName(req->job())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a job name is at most 128 printable ASCII characters without spaces");
  }
  if (req->gpu_type().size() > 256 || req->backend().size() > 32) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "GPU type or backend too long");
  }
  const int64_t now = Now();
  constexpr int64_t kAheadMs = 90LL * 86400 * 1000;
  // Seconds, checked before they become milliseconds (no overflow).
  if (req->start_unix() < now / 1000 || req->start_unix() > (now + kAheadMs) / 1000) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a reservation starts from now to 90 days ahead (start_unix " +
                            std::to_string(req->start_unix()) + ")");
  }
  ReservationRow row;
  row.tenant = tenant;
  row.gpu_type = req->gpu_type();
  row.backend = req->backend();
  row.memory_bytes = req->memory_bytes() ? req->memory_bytes() : (1ull << 30);
  row.share = share;
  row.start_ms = req->start_unix() * 1000;
  row.end_ms = row.start_ms + int64_t{req->duration_seconds()} * 1000;
  row.created_ms = now;
  row.job = req->job();
  PlacementAsk ask;
  ask.gpu_type = row.gpu_type;
  ask.backend = row.backend;
  ask.memory = row.memory_bytes;
  ask.milli = share * kMilliPerShare;
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t held = 0;
  for (const auto& [id, r] : reservations_) held += r.row.tenant == tenant;
  if (held >= options_.max_reservations_per_tenant) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "tenant " + tenant + " holds " + std::to_string(held) +
                            " reservations already (at most " +
                            std::to_string(options_.max_reservations_per_tenant) + ")");
  }
  // GPUs that can hold it all along, tightest first (large GPUs stay whole for large asks).
  std::vector<std::pair<double, size_t>> fitting;
  for (size_t i = 0; i < cluster_.gpus.size(); ++i) {
    const GpuLoad& gpu = cluster_.gpus[i];
    const ServerState& server = servers_.at(gpus_[i].row.server_name);
    if (server.reach != Reach::kVerified || !server.online ||
        providers_[server.provider].row.revoked) {
      continue;
    }
    if (!GpuKindAccepted(gpu.model, gpu.backend, ask) || ask.memory > gpu.memory_total ||
        !LendsThroughout(server.availability, row.start_ms, row.end_ms) ||
        !FitsOverTime(HoldsOn(i, now), {row.start_ms, row.end_ms, ask.memory, ask.milli},
                      gpu.memory_total, kMilliPerGpu)) {
      continue;
    }
    const double left =
        static_cast<double>(gpu.memory_total - ask.memory) / static_cast<double>(gpu.memory_total) +
        static_cast<double>(kMilliPerGpu - ask.milli) / kMilliPerGpu;
    fitting.emplace_back(left, i);
  }
  if (fitting.size() < count) {
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        "only " + std::to_string(fitting.size()) + " of the " + std::to_string(count) +
            " GPU(s) asked for can hold " + std::to_string(row.memory_bytes >> 20) + " MiB and " +
            std::to_string(share) + "% from " + UtcTime(row.start_ms) + " to " +
            UtcTime(row.end_ms) + " (lendable windows, leases and other reservations there)");
  }
  std::sort(fitting.begin(), fitting.end());
  ReservationState state;
  for (uint32_t k = 0; k < count; ++k) {
    state.gpus.push_back(fitting[k].second);
    row.gpu_ids.push_back(cluster_.gpus[fitting[k].second].id);
  }
  row.reservation_id = NewKey("resv-");
  // Durable before it is promised; under mu_, so that no placement slips in between.
  Status stored = store_->AddReservation(row);
  if (!stored.ok()) return ToGrpc(stored);
  for (size_t g : state.gpus) reserved_gpus_[g].insert(row.reservation_id);
  state.row = row;
  reservations_[row.reservation_id] = std::move(state);
  next_reservation_edge_ms_ = std::min(next_reservation_edge_ms_, row.start_ms);
  RGPU_LOG_INFO("tenant %s reserved %u GPU(s) from %s to %s (%s)", tenant.c_str(), count,
                UtcTime(row.start_ms).c_str(), UtcTime(row.end_ms).c_str(),
                row.reservation_id.c_str());
  *reply = ReservationInfo(row, now);
  RefreshReservations(now, /*end_finished=*/false);
  return grpc::Status::OK;
}

grpc::Status RegistryService::ListReservations(grpc::ServerContext* ctx,
                                               const ReservationQuery* req,
                                               ReservationList* reply) {
  std::string subject = req->tenant();
  if (!AuthAdmin(ctx).ok()) {
    std::string tenant;
    if (!AuthTenant(ctx, &tenant).ok()) return AuthAdmin(ctx);
    if (!subject.empty() && subject != tenant) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "an API key shows only its own tenant's reservations");
    }
    subject = tenant;
  }
  std::vector<ReservationRow> rows;
  Status s = store_->QueryReservations(subject, INT64_MAX, &rows);
  if (!s.ok()) return ToGrpc(s);
  const int64_t now = Now();
  for (const auto& row : rows) *reply->add_reservations() = ReservationInfo(row, now);
  return grpc::Status::OK;
}

grpc::Status RegistryService::CancelReservation(grpc::ServerContext* ctx,
                                                const CancelReservationRequest* req,
                                                Reservation* reply) {
  const bool admin = AuthAdmin(ctx).ok();
  std::string tenant;
  if (!admin) {
    grpc::Status auth = AuthTenant(ctx, &tenant);
    if (!auth.ok()) return auth;
  }
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t now = Now();
  auto it = reservations_.find(req->reservation_id());
  if (it == reservations_.end() || (!admin && it->second.row.tenant != tenant)) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "no reservation " + req->reservation_id().substr(0, 80) +
                            (admin ? "" : " of tenant " + tenant) + " to cancel");
  }
  Status s = store_->CancelReservation(req->reservation_id(), now);
  if (!s.ok()) return ToGrpc(s);
  ReservationRow row = it->second.row;
  row.cancelled_ms = now;
  DropReservation(req->reservation_id(),
                  "its reservation " + row.reservation_id + " was cancelled");
  *reply = ReservationInfo(row, now);
  Dispatch();  // its room is free for others
  lock.unlock();
  PersistEnded();
  return grpc::Status::OK;
}

grpc::Status RegistryService::ListLeases(grpc::ServerContext* ctx, const Empty*, LeaseList* reply) {
  const bool admin = AuthAdmin(ctx).ok();
  std::string tenant;
  if (!admin) {
    grpc::Status auth = AuthTenant(ctx, &tenant);
    if (!auth.ok()) return AuthAdmin(ctx);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, l] : leases_) {
    if (!admin && l.tenant != tenant) continue;
    LeaseInfo* info = reply->add_leases();
    info->set_lease_id(id);
    info->set_tenant(l.tenant);
    info->set_gpu_id(l.gpu_id);
    info->set_memory_bytes(l.memory_bytes);
    info->set_compute_share(l.share);
    info->set_priority(l.priority);
    info->set_granted_unix_ms(l.granted_ms);
    info->set_expires_unix_ms(l.expires_ms);
    info->set_claimed_unix_ms(l.claimed_ms);
    info->set_ending_unix_ms(l.ending_ms > 0 ? LeaseEndMs(l) : 0);
    info->set_end_reason(l.ending_ms > 0 ? l.end_reason : "");
    info->set_reservation_id(l.reservation_id);
    info->set_job(l.job);
  }
  return grpc::Status::OK;
}

grpc::Status RegistryService::ReportUsage(grpc::ServerContext* ctx, const ReportUsageRequest* req,
                                          ReportUsageReply* reply) {
  std::string provider;
  grpc::Status auth = AuthProvider(ctx, &provider, /*allow_revoked=*/true);
  if (!auth.ok()) return auth;
  if (req->records_size() > 1000) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "at most 1000 usage records per report");
  }
  std::lock_guard<std::mutex> usage_lock(usage_mu_);
  std::vector<UsageRow> rows;
  UsageEffects effects;
  std::vector<RefusedRecord> refusals;
  uint32_t duplicates = 0;
  Status s = CheckUsage(provider, *req, &rows, &effects, &refusals, &duplicates);
  if (!s.ok()) return ToGrpc(s);
  uint32_t stored = 0, again = 0;
  std::vector<bool> fresh;
  s = store_->AddUsage(rows, &stored, &again, &fresh, &effects);
  if (!s.ok()) return ToGrpc(s);
  reply->set_stored(stored);
  reply->set_duplicates(duplicates + again);
  reply->set_refused(static_cast<uint32_t>(refusals.size()));
  for (size_t i = 0; i < refusals.size(); ++i) {
    if (i < 5) {
      RGPU_LOG_WARN("provider %s: usage record '%s' refused: %s", provider.c_str(),
                    refusals[i].record_id().c_str(), refusals[i].reason().c_str());
    }
    *reply->add_refusals() = std::move(refusals[i]);
  }
  if (refusals.size() > 5) {
    RGPU_LOG_WARN("provider %s: %zu more usage records refused", provider.c_str(),
                  refusals.size() - 5);
  }
  // A session that ended frees the lease it ran under (unless the lease lasts until released);
  // a session that started claims its lease; a hand-over the records show done completes first.
  std::unique_lock<std::mutex> lock(mu_);
  const std::vector<LeaseRow> moved = CompleteHandOversShownBy(rows, fresh);
  for (const auto& [lease_id, start_ms] : effects.claims) {
    auto it = leases_.find(lease_id);
    if (it != leases_.end() && (it->second.claimed_ms == 0 || start_ms < it->second.claimed_ms)) {
      it->second.claimed_ms = start_ms;
    }
  }
  // Only the lease's holder claims it again after a hand-over, and only it ends the lease: an
  // earlier holder's records are billed, but the session they tell of ended there, not where the
  // lease is now.
  bool ended = false;
  std::vector<LeaseRow> claimed;  // by their holder after a hand-over, to store
  for (size_t i = 0; i < rows.size(); ++i) {
    const UsageRecord& r = rows[i].record;
    if (!fresh[i]) continue;  // a retry did its part already
    auto lease = leases_.find(r.lease_id());
    if (lease == leases_.end() || GpuId(r.server_name(), r.gpu_index()) != lease->second.gpu_id) {
      continue;
    }
    if (!r.moved() && !lease->second.holder_claimed) {
      lease->second.holder_claimed = true;
      if (lease->second.handed_over_ms > 0) claimed.push_back(lease->second);
    }
    if (!r.session_ended() || lease->second.until_released) continue;
    ended = true;
    EndLease(r.lease_id(), "its session ended");
  }
  PersistHolders(moved);
  PersistHolders(claimed);                  // after `moved`, whose copies predate the claim
  if (ended || !moved.empty()) Dispatch();  // room freed where a lease ended or left
  lock.unlock();
  if (ended) PersistEnded();
  return grpc::Status::OK;
}

Status RegistryService::CheckUsage(const std::string& provider, const ReportUsageRequest& req,
                                   std::vector<UsageRow>* rows, UsageEffects* effects,
                                   std::vector<RefusedRecord>* refusals, uint32_t* duplicates) {
  auto* claims = &effects->claims;
  std::set<std::tuple<std::string, std::string, uint64_t>> touched;  // lease, server, session
  auto refuse = [refusals](const UsageRecord& r, std::string why, bool retry = false) {
    RefusedRecord refused;
    refused.set_record_id(r.record_id().substr(0, 200));
    refused.set_reason(std::move(why));
    refused.set_retry(retry);
    refusals->push_back(std::move(refused));
  };
  // Well-formed records only, then those not stored already (a retry after a lost reply).
  std::vector<const UsageRecord*> candidates;
  std::vector<std::string> ids;
  for (const UsageRecord& r : req.records()) {
    const std::string why = CheckRecordShape(r);
    if (!why.empty()) {
      refuse(r, why);
      continue;
    }
    candidates.push_back(&r);
    ids.push_back(r.record_id());
  }
  std::vector<std::string> existing;
  Status s = store_->ExistingUsageIds(ids, &existing);
  if (!s.ok()) return s;
  std::set<std::string> seen(existing.begin(), existing.end());
  // The leases they name: active ones from memory, ended ones from the store.
  std::set<std::string> wanted;
  for (const UsageRecord* r : candidates) wanted.insert(r->lease_id());
  std::map<std::string, LeaseRow> leases;
  std::map<std::string, GpuSpec> lease_gpus;
  std::vector<std::string> missing;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& id : wanted) {
      auto it = leases_.find(id);
      if (it != leases_.end()) {
        leases[id] = it->second;
      } else {
        missing.push_back(id);
      }
    }
  }
  std::vector<LeaseRow> found;
  s = store_->GetLeases(missing, &found);
  if (!s.ok()) return s;
  for (auto& l : found) leases[l.lease_id] = std::move(l);
  // Per lease: the sessions stored so far (totals), to check amounts and continuity against.
  std::map<std::string, std::map<std::pair<std::string, uint64_t>, SessionTotals>> sessions;
  for (const auto& [id, lease] : leases) {
    std::vector<SessionTotals> totals;
    s = store_->LeaseSessionTotals(id, &totals);
    if (!s.ok()) return s;
    auto& by_session = sessions[id];
    for (auto& t : totals) by_session[{t.server_name, t.session_id}] = std::move(t);
  }
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = Now();
  for (const UsageRecord* rp : candidates) {
    const UsageRecord& r = *rp;
    if (seen.count(r.record_id())) {
      ++*duplicates;
      continue;
    }
    auto server = servers_.find(r.server_name());
    if (server == servers_.end() || server->second.provider != provider) {
      refuse(r, "server " + r.server_name() + " is not registered to provider " + provider);
      continue;
    }
    if (tenants_.count(r.tenant()) == 0) {
      refuse(r, "no tenant named " + r.tenant());
      continue;
    }
    auto lease = leases.find(r.lease_id());
    if (lease == leases.end()) {
      refuse(r, "the registry granted no lease " + r.lease_id());
      continue;
    }
    // The record's GPU: the lease's, or one of its hand-overs' (CheckRecordAgainstLease).
    auto gpu = gpu_by_id_.find(GpuId(r.server_name(), r.gpu_index()));
    if (gpu == gpu_by_id_.end()) {
      refuse(r, "GPU " + GpuId(r.server_name(), r.gpu_index()) + " is not registered");
      continue;
    }
    if (!lease->second.moving_to.empty() &&
        lease->second.moving_to == GpuId(r.server_name(), r.gpu_index()) &&
        lease->second.tenant == r.tenant()) {
      // The session's new server, before its old one said it left: later, not never.
      refuse(r,
             "lease " + r.lease_id() + " is being handed over to this GPU; its holder has not " +
                 "reported the session moved yet",
             /*retry=*/true);
      continue;
    }
    auto& by_session = sessions[r.lease_id()];
    auto before = by_session.find({r.server_name(), r.session_id()});
    UsageContext context;
    context.lease = &lease->second;
    context.gpu = &gpus_[gpu->second].row.spec;
    context.before = before != by_session.end() ? &before->second : nullptr;
    context.sessions_of_lease =
        static_cast<uint32_t>(by_session.size() - (before != by_session.end() ? 1 : 0));
    context.now_ms = now;
    const std::string why = CheckRecordAgainstLease(r, context, options_.usage_limits);
    if (!why.empty()) {
      refuse(r, why);
      continue;
    }
    AddToTotals(r, &by_session[{r.server_name(), r.session_id()}]);
    touched.insert({r.lease_id(), r.server_name(), r.session_id()});
    seen.insert(r.record_id());
    UsageRow row;
    row.record = r;
    row.provider = provider;
    row.model = gpus_[gpu->second].row.spec.model();
    rows->push_back(std::move(row));
    auto claim = std::find_if(claims->begin(), claims->end(),
                              [&r](const auto& c) { return c.first == r.lease_id(); });
    if (claim == claims->end()) {
      claims->emplace_back(r.lease_id(), r.start_ms());
    } else {
      claim->second = std::min(claim->second, r.start_ms());
    }
  }
  for (const auto& [lease_id, server, session] : touched) {
    effects->sessions.emplace_back(lease_id, sessions[lease_id][{server, session}]);
  }
  return Status::Ok();
}

grpc::Status RegistryService::CreateTenant(grpc::ServerContext* ctx, const NameRequest* req,
                                           KeyReply* reply) {
  grpc::Status auth = AuthAdmin(ctx);
  if (!auth.ok()) return auth;
  if (!ValidName(req->name())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "tenant name must be 1-64 characters of [A-Za-z0-9._-]");
  }
  TenantRow row{req->name(), "", Now() / 1000};
  const std::string key = NewKey("rgpu-t-");
  row.key_hash = KeyHash(key);
  std::lock_guard<std::mutex> lock(mu_);
  Status s = store_->AddTenant(row);
  if (!s.ok()) return ToGrpc(s);
  tenants_[row.name] = row;
  tenant_by_key_[row.key_hash] = row.name;
  reply->set_name(row.name);
  reply->set_key(key);
  return grpc::Status::OK;
}

grpc::Status RegistryService::ListTenants(grpc::ServerContext* ctx, const Empty*,
                                          TenantList* reply) {
  grpc::Status auth = AuthAdmin(ctx);
  if (!auth.ok()) return auth;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, t] : tenants_) {
    TenantInfo* info = reply->add_tenants();
    info->set_name(name);
    info->set_created_unix(t.created_unix);
  }
  return grpc::Status::OK;
}

grpc::Status RegistryService::CreateProvider(grpc::ServerContext* ctx, const NameRequest* req,
                                             KeyReply* reply) {
  grpc::Status auth = AuthAdmin(ctx);
  if (!auth.ok()) return auth;
  if (!ValidName(req->name())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "provider name must be 1-64 characters of [A-Za-z0-9._-]");
  }
  ProviderRow row{req->name(), "", false, Now() / 1000};
  const std::string key = NewKey("rgpu-p-");
  row.key_hash = KeyHash(key);
  std::lock_guard<std::mutex> lock(mu_);
  Status s = store_->AddProvider(row);
  if (!s.ok()) return ToGrpc(s);
  providers_[row.name] = {row};
  provider_by_key_[row.key_hash] = row.name;
  reply->set_name(row.name);
  reply->set_key(key);
  return grpc::Status::OK;
}

grpc::Status RegistryService::RevokeProvider(grpc::ServerContext* ctx, const NameRequest* req,
                                             Empty*) {
  grpc::Status auth = AuthAdmin(ctx);
  if (!auth.ok()) return auth;
  std::lock_guard<std::mutex> lock(mu_);
  Status s = store_->SetProviderRevoked(req->name(), true);
  if (!s.ok()) return ToGrpc(s);
  providers_[req->name()].row.revoked = true;
  for (auto& [name, server] : servers_) {
    if (server.provider != req->name()) continue;
    UpdatePlaceable(name);
    OpenOutage(name, &server, Now());  // its reservations are not kept from now on
  }
  RGPU_LOG_WARN("provider %s revoked: its GPUs take no new placements", req->name().c_str());
  return grpc::Status::OK;
}

grpc::Status RegistryService::ListProviders(grpc::ServerContext* ctx, const Empty*,
                                            ProviderList* reply) {
  grpc::Status auth = AuthAdmin(ctx);
  if (!auth.ok()) return auth;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, p] : providers_) {
    ProviderInfo* info = reply->add_providers();
    info->set_name(name);
    info->set_revoked(p.row.revoked);
    info->set_created_unix(p.row.created_unix);
    uint32_t count = 0;
    for (const auto& [server_name, server] : servers_) {
      if (server.provider == name) count += static_cast<uint32_t>(server.gpus.size());
    }
    info->set_gpus(count);
  }
  return grpc::Status::OK;
}

grpc::Status RegistryService::ListGpus(grpc::ServerContext* ctx, const Empty*, GpuList* reply) {
  grpc::Status auth = AuthAdmin(ctx);
  if (!auth.ok()) {
    std::string tenant;  // tenants may look at the GPUs too
    if (!AuthTenant(ctx, &tenant).ok()) return auth;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < gpus_.size(); ++i) {
    const GpuRow& row = gpus_[i].row;
    const ServerState& server = servers_[row.server_name];
    GpuStatus* g = reply->add_gpus();
    g->set_gpu_id(row.gpu_id);
    g->set_provider(row.provider);
    g->set_server_name(row.server_name);
    g->set_server_url(server.url);
    *g->mutable_spec() = row.spec;
    const bool revoked = providers_[row.provider].row.revoked;
    g->set_state(revoked                               ? "revoked"
                 : server.reach == Reach::kUnreachable ? "unreachable"
                 : server.reach == Reach::kUnverified  ? "unverified"
                 : !server.online                      ? "offline"
                 : !server.lendable                    ? "closed"
                                                       : "available");
    g->set_state_reason(server.reach_reason);
    g->set_availability(DescribeAvailability(server.availability));
    const int64_t now = Now();
    if (!server.lendable && server.reach == Reach::kVerified) {
      g->set_state_reason("outside its lendable window; it opens at " +
                          UtcTime(NextOpening(server.availability, now)));
    }
    const int64_t until = LendableUntil(server.availability, now);
    g->set_lendable_until_unix(until == kLendableForever || !server.lendable ? 0 : until / 1000);
    g->set_memory_committed(cluster_.gpus[i].memory_committed);
    g->set_share_committed(cluster_.gpus[i].milli_committed / kMilliPerShare);
    g->set_leases(cluster_.gpus[i].leases);
    g->set_last_heartbeat_ms(server.last_heartbeat_ms);
  }
  return grpc::Status::OK;
}

// The query's period in unix ms; kInvalidArgument for times out of range or reversed.
static Status Period(const UsageQuery& q, int64_t now_ms, int64_t* from_ms, int64_t* to_ms) {
  constexpr int64_t kLatest = 100'000'000'000;  // unix seconds, the year 5138
  if (q.from_unix() < 0 || q.from_unix() > kLatest || q.to_unix() < 0 || q.to_unix() > kLatest) {
    return InvalidArgument("times must lie between 1970 and 5138");
  }
  *from_ms = q.from_unix() * 1000;
  *to_ms = q.to_unix() > 0 ? q.to_unix() * 1000 : now_ms + 1;
  if (*to_ms < *from_ms) return InvalidArgument("the period ends before it starts");
  return Status::Ok();
}

Status RegistryService::SessionsUsage(const UsageQuery& q, std::vector<SessionUsage>* out) {
  int64_t from_ms = 0, to_ms = 0;
  Status s = Period(q, Now(), &from_ms, &to_ms);
  if (!s.ok()) return s;
  std::vector<UsageRow> rows;
  s = store_->QueryUsage(q.tenant(), q.provider(), from_ms, to_ms, &rows);
  if (!s.ok()) return s;
  std::vector<LeaseRow> leases;
  s = store_->QueryLeases(q.tenant(), to_ms, &leases);
  if (!s.ok()) return s;
  std::map<std::string, const LeaseRow*> lease_by_id;
  for (const auto& l : leases) lease_by_id[l.lease_id] = &l;
  // A session is its server, its id there and its lease (ids restart when a server restarts).
  std::map<std::tuple<std::string, uint64_t, std::string>, SessionUsage> sessions;
  std::map<std::tuple<std::string, uint64_t, std::string>, std::string> session_lease;
  for (const UsageRow& row : rows) {
    const UsageRecord& r = row.record;
    const auto key = std::make_tuple(r.server_name(), r.session_id(), r.lease_id());
    auto [it, fresh] = sessions.try_emplace(key);
    SessionUsage& u = it->second;
    if (fresh) {
      u.set_tenant(r.tenant());
      u.set_provider(row.provider);
      u.set_server_name(r.server_name());
      u.set_gpu_index(r.gpu_index());
      u.set_model(row.model);
      u.set_session_id(r.session_id());
      u.set_start_ms(r.start_ms());
      session_lease[key] = r.lease_id();
    }
    // A lease given notice (its window closed, it was preempted) is billed up to the notice's
    // end and no further, whenever its server stopped the session.
    int64_t end_ms = r.end_ms();
    if (auto lease = lease_by_id.find(r.lease_id());
        lease != lease_by_id.end() && lease->second->ending_ms > 0) {
      end_ms = std::max(r.start_ms(), std::min(end_ms, LeaseEndMs(*lease->second)));
    }
    u.set_start_ms(std::min(u.start_ms(), r.start_ms()));
    u.set_end_ms(std::max(u.end_ms(), end_ms));
    u.set_gpu_ms(u.gpu_ms() + static_cast<double>(end_ms - r.start_ms()));
    u.set_calls(u.calls() + r.calls());
    for (const auto& [kind, n] : r.calls_by_kind()) (*u.mutable_calls_by_kind())[kind] += n;
    u.set_bytes_in(u.bytes_in() + r.bytes_in());
    u.set_bytes_out(u.bytes_out() + r.bytes_out());
    u.set_gpu_busy_ms(u.gpu_busy_ms() + r.gpu_busy_ms());
    u.set_memory_gib_seconds(u.memory_gib_seconds() + r.memory_gib_seconds());
    u.set_queue_ms(u.queue_ms() + r.queue_ms());
    u.set_records(u.records() + 1);
  }
  for (auto& [key, u] : sessions) {
    // The lease it ran under: the one its records name. Records stored before they named one:
    // the tenant's latest lease on that GPU granted before the session began.
    const LeaseRow* lease = nullptr;
    if (auto named = lease_by_id.find(session_lease[key]); named != lease_by_id.end()) {
      lease = named->second;
    } else if (session_lease[key].empty()) {
      const std::string gpu_id = GpuId(u.server_name(), u.gpu_index());
      for (const auto& l : leases) {
        if (l.tenant == u.tenant() && l.gpu_id == gpu_id && l.granted_ms <= u.start_ms()) {
          lease = &l;
        }
      }
    }
    if (lease != nullptr) {
      u.set_placement_queue_s(lease->queue_ms / 1000.0);
      u.set_priority(lease->priority);
      u.set_job(lease->job);
      u.set_reservation_id(lease->reservation_id);
    }
    if (!q.job().empty() && u.job() != q.job()) continue;
    out->push_back(u);
  }
  return Status::Ok();
}

Status RegistryService::HoldLines(const UsageQuery& q, bool earnings,
                                  std::vector<InvoiceLine>* out) {
  const int64_t now = Now();
  int64_t from_ms = 0, to_ms = 0;
  Status s = Period(q, now, &from_ms, &to_ms);
  if (!s.ok()) return s;
  std::vector<LeaseRow> leases;
  s = store_->QueryLeases(earnings ? "" : q.tenant(), to_ms, &leases);
  if (!s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  for (const LeaseRow& l : leases) {
    // The hold was on the GPU it was granted on, wherever a hand-over took it since.
    auto gpu = gpu_by_id_.find(l.earlier.empty() ? l.gpu_id : l.earlier.front().gpu_id);
    if (gpu == gpu_by_id_.end()) continue;
    const GpuRow& row = gpus_[gpu->second].row;
    if (earnings && row.provider != q.provider()) continue;
    if (!q.job().empty() && l.job != q.job()) continue;
    if (!l.reservation_id.empty()) continue;  // its reservation's line covers the time
    // A hold ends when a session under the lease starts, else when the lease ends (or now).
    const int64_t end = l.released_ms > 0 ? LeaseEndMs(l) : std::min(l.expires_ms, now);
    const int64_t until = l.claimed_ms > 0 ? std::min(l.claimed_ms, end) : end;
    const double held = HeldMs(l.granted_ms, l.claimed_ms, end);
    if (held <= 0 || until < from_ms || until >= to_ms) continue;
    out->push_back(PriceHold(l.lease_id, l.tenant, row.provider, row.server_name, row.spec.model(),
                             held, options_.prices));
    out->back().set_job(l.job);
  }
  return Status::Ok();
}

Status RegistryService::ReservationLines(const UsageQuery& q, bool earnings,
                                         std::vector<InvoiceLine>* out) {
  const int64_t now = Now();
  int64_t from_ms = 0, to_ms = 0;
  Status s = Period(q, now, &from_ms, &to_ms);
  if (!s.ok()) return s;
  std::vector<ReservationRow> rows;
  s = store_->QueryReservations(earnings ? "" : q.tenant(), to_ms, &rows);
  if (!s.ok()) return s;
  // The outages of their servers: time a reservation is not billed for.
  std::vector<OutageRow> outages;
  int64_t earliest = to_ms;
  for (const ReservationRow& r : rows) earliest = std::min(earliest, r.start_ms);
  if (!rows.empty()) s = store_->QueryOutages(earliest, to_ms, &outages);
  if (!s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  for (const ReservationRow& r : rows) {
    if (!q.job().empty() && r.job != q.job()) continue;
    // Billed from its start to its end, its cancellation or now, whichever is first; in the
    // period where that falls. Cancelled before its start: nothing.
    int64_t until = std::min(r.end_ms, now);
    if (r.cancelled_ms > 0) until = std::min(until, r.cancelled_ms);
    if (until <= r.start_ms || until < from_ms || until >= to_ms) continue;
    for (const std::string& gpu_id : r.gpu_ids) {
      auto gpu = gpu_by_id_.find(gpu_id);
      if (gpu == gpu_by_id_.end()) continue;
      const GpuRow& row = gpus_[gpu->second].row;
      if (earnings && row.provider != q.provider()) continue;
      const int64_t down = DownWithin(outages, row.server_name, r.start_ms, until, now);
      out->push_back(PriceReservation(
          r.reservation_id, r.tenant, row.provider, row.server_name, row.spec.model(),
          static_cast<double>(until - r.start_ms - down), options_.prices));
      out->back().set_job(r.job);
      out->back().set_unavailable_ms(static_cast<double>(down));
    }
  }
  return Status::Ok();
}

grpc::Status RegistryService::Usage(grpc::ServerContext* ctx, const UsageQuery* req,
                                    UsageReply* reply) {
  UsageQuery query = *req;
  if (!AuthAdmin(ctx).ok()) {
    std::string tenant;
    grpc::Status auth = AuthTenant(ctx, &tenant);
    if (!auth.ok()) return AuthAdmin(ctx);
    if (!query.tenant().empty() && query.tenant() != tenant) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "an API key shows only its own tenant's usage");
    }
    query.set_tenant(tenant);
  }
  std::vector<SessionUsage> sessions;
  Status s = SessionsUsage(query, &sessions);
  if (!s.ok()) return ToGrpc(s);
  for (auto& u : sessions) *reply->add_sessions() = std::move(u);
  return grpc::Status::OK;
}

grpc::Status RegistryService::BuildInvoice(const UsageQuery& query, const std::string& subject,
                                           bool earnings, Invoice* out) {
  std::vector<SessionUsage> sessions;
  Status s = SessionsUsage(query, &sessions);
  std::vector<InvoiceLine> holds, reserved;
  if (s.ok()) s = HoldLines(query, earnings, &holds);
  if (s.ok()) s = ReservationLines(query, earnings, &reserved);
  if (!s.ok()) return ToGrpc(s);
  out->set_subject(subject);
  out->set_from_unix(query.from_unix());
  out->set_to_unix(query.to_unix() > 0 ? query.to_unix() : Now() / 1000);
  for (const auto& u : sessions) *out->add_lines() = PriceSession(u, options_.prices);
  for (auto& line : holds) *out->add_lines() = std::move(line);
  for (auto& line : reserved) *out->add_lines() = std::move(line);
  Total(options_.prices, out);
  if (!earnings) {
    out->set_provider_share(0);
    out->set_earnings(0);
  }
  return grpc::Status::OK;
}

grpc::Status RegistryService::Bill(grpc::ServerContext* ctx, const UsageQuery* req,
                                   Invoice* reply) {
  return InvoiceFor(ctx, *req, /*earnings=*/false, reply);
}

grpc::Status RegistryService::Earnings(grpc::ServerContext* ctx, const UsageQuery* req,
                                       Invoice* reply) {
  return InvoiceFor(ctx, *req, /*earnings=*/true, reply);
}

grpc::Status RegistryService::InvoiceFor(grpc::ServerContext* ctx, UsageQuery query, bool earnings,
                                         Invoice* reply) {
  // The invoice's subject: a tenant's bill or a provider's earnings; the other field is ignored.
  std::string* subject = earnings ? query.mutable_provider() : query.mutable_tenant();
  (earnings ? query.mutable_tenant() : query.mutable_provider())->clear();
  if (!AuthAdmin(ctx).ok()) {
    // A tenant's or provider's own key sees only its own invoice.
    std::string self;
    grpc::Status auth =
        earnings ? AuthProvider(ctx, &self, /*allow_revoked=*/true) : AuthTenant(ctx, &self);
    if (!auth.ok()) return AuthAdmin(ctx);
    if (!subject->empty() && *subject != self) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          earnings ? "a provider key shows only its own earnings"
                                   : "an API key shows only its own tenant's bill");
    }
    *subject = self;
  }
  if (subject->empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        earnings ? "name the provider" : "name the tenant to bill");
  }
  const bool current_period = query.current_period() && query.from_unix() == 0;
  if (current_period) {
    query.set_from_unix(PeriodStart(options_.prices.billing_period, Now() / 1000));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    const bool known = earnings ? providers_.count(*subject) > 0 : tenants_.count(*subject) > 0;
    if (!known) {
      return grpc::Status(
          grpc::StatusCode::NOT_FOUND,
          std::string(earnings ? "no provider named " : "no tenant named ") + *subject);
    }
  }
  grpc::Status built = BuildInvoice(query, *subject, earnings, reply);
  if (built.ok() && current_period) reply->set_period(PeriodName(options_.prices.billing_period));
  return built;
}

}  // namespace rgpu::registry
