#include "server/registry_agent.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <set>

#include "common/log.h"
#include "registry/availability.h"
#include "registry/channel.h"

namespace rgpu::server {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A random id for this process's records (the kernel's UUID source).
std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/uuid");
  std::string id;
  std::getline(in, id);
  if (id.empty()) id = std::to_string(NowMs());
  return id;
}

constexpr int kBatch = 500;
constexpr int64_t kHoldMs = 600000;  // how long a record the registry answers "not yet" is kept

// The host's UTC offset (seconds east of UTC) and zone abbreviation now, from its time zone
// (TZ, /etc/localtime).
void LocalZone(int32_t* offset_seconds, std::string* zone) {
  const time_t now = time(nullptr);
  struct tm tm;
  localtime_r(&now, &tm);
  *offset_seconds = static_cast<int32_t>(tm.tm_gmtoff);
  *zone = tm.tm_zone != nullptr ? tm.tm_zone : "";
}

}  // namespace

RegistryAgent::~RegistryAgent() { Stop(0); }

Status RegistryAgent::Start(const RegistryAgentOptions& options,
                            std::vector<registry::GpuSpec> gpus, SessionsFn sessions,
                            std::string* public_key_pem) {
  if (options.provider_key.empty()) {
    return InvalidArgument("--registry needs --provider-key (from `rgpu provider create`)");
  }
  options_ = options;
  gpus_ = std::move(gpus);
  sessions_ = std::move(sessions);
  std::shared_ptr<grpc::Channel> channel;
  Status s = registry::OpenChannel(options.address, options.tls_ca, &channel);
  if (!s.ok()) return s;
  stub_ = registry::Registry::NewStub(channel);
  meter_ = std::make_unique<registry::UsageMeter>(options.server_name, BootId());
  if (!options.spool_path.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    s = LoadSpool();
    if (!s.ok()) return s;
  }
  s = Register(public_key_pem);
  if (!s.ok()) return s;
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

Status RegistryAgent::Register(std::string* public_key_pem) {
  registry::RegisterRequest request;
  request.set_server_name(options_.server_name);
  request.set_server_url(options_.server_url);
  request.set_reachability_secret(options_.reachability_secret);
  *request.mutable_availability() = options_.availability;
  int32_t offset = 0;
  std::string zone;
  LocalZone(&offset, &zone);
  request.mutable_availability()->set_utc_offset_seconds(offset);
  request.mutable_availability()->set_zone(zone);
  for (const auto& gpu : gpus_) *request.add_gpus() = gpu;
  registry::RegisterReply reply;
  grpc::ClientContext ctx;
  Authorize(&ctx, std::chrono::seconds(10));
  grpc::Status g = stub_->Register(&ctx, request, &reply);
  if (!g.ok()) return registry::FromGrpc(g, options_.address);
  int accepted = 0;
  std::string refusals;
  for (const auto& admission : reply.gpus()) {
    if (admission.accepted()) {
      ++accepted;
      RGPU_LOG_INFO("registry accepted GPU %u as %s", admission.index(),
                    admission.gpu_id().c_str());
    } else {
      refusals += " GPU " + std::to_string(admission.index()) + ": " + admission.reason() + ";";
      RGPU_LOG_WARN("registry refused GPU %u: %s", admission.index(), admission.reason().c_str());
    }
  }
  if (accepted == 0) return PermissionDenied("the registry accepted no GPU:" + refusals);
  heartbeat_ms_ = reply.heartbeat_ms() ? reply.heartbeat_ms() : 2000;
  if (public_key_pem) *public_key_pem = reply.public_key_pem();
  return Status::Ok();
}

void RegistryAgent::SessionStarted(uint64_t session_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (meter_) meter_->Started(session_id, NowMs());
}

void RegistryAgent::SessionEnded(const wire::SessionStats& last) {
  std::vector<registry::UsageRecord> records;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!meter_) return;
    meter_->Ended(last, NowMs(), &records);
  }
  AddRecords(std::move(records));
  ReportNow();  // a session's end is reported promptly: it frees its lease
}

void RegistryAgent::SessionMoved(const wire::SessionStats& last) {
  std::vector<registry::UsageRecord> records;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!meter_) return;
    wire::StatusReply live;
    *live.add_sessions() = last;
    const int64_t now = NowMs();
    meter_->Sample(live, now, &records);        // its usage since the last report, not an end
    for (auto& r : records) r.set_moved(true);  // `live` holds this session only
    wire::SessionStats forget;                  // the meter lets go of it without a record
    forget.set_session_id(last.session_id());
    meter_->Ended(forget, now, &records);
    auto moving = moving_leases_.find(last.lease_id());
    if (!last.lease_id().empty() && moving != moving_leases_.end()) {
      // Sent with the lease's other sessions' once they have all left (EndLeaseMove).
      for (auto& r : records) moving->second.push_back(std::move(r));
      return;
    }
  }
  AddRecords(std::move(records));
  ReportNow();
}

void RegistryAgent::ReportNow() {
  {
    // Set under the loop's lock: stored between the loop's look at the flag and its wait, the
    // notification would be lost and the report wait a whole period.
    std::lock_guard<std::mutex> lock(wake_mu_);
    report_now_.store(true);
  }
  wake_.notify_all();
}

void RegistryAgent::BeginLeaseMove(const std::string& lease_id) {
  std::lock_guard<std::mutex> lock(mu_);
  moving_leases_.try_emplace(lease_id);
}

void RegistryAgent::EndLeaseMove(const std::string& lease_id) {
  std::vector<registry::UsageRecord> records;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto moving = moving_leases_.find(lease_id);
    if (moving == moving_leases_.end()) return;
    records = std::move(moving->second);
    moving_leases_.erase(moving);
  }
  if (records.empty()) return;
  AddRecords(std::move(records));
  ReportNow();
}

Status RegistryAgent::HandOverLease(const std::string& lease_id, const std::string& to_server,
                                    std::string* token) {
  if (!stub_) return Unavailable("not registered");
  registry::HandOverRequest request;
  request.set_lease_id(lease_id);
  request.set_to_server(to_server);
  registry::HandOverReply reply;
  // A session that just arrived here holds its lease once its previous server's last record is
  // in (ABORTED until then): asked again for a while.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  grpc::Status g;
  for (;;) {
    grpc::ClientContext ctx;
    Authorize(&ctx, std::chrono::seconds(10));
    g = stub_->HandOverLease(&ctx, request, &reply);
    if (g.error_code() != grpc::StatusCode::ABORTED ||
        std::chrono::steady_clock::now() >= give_up || stop_.load()) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (!g.ok()) return registry::FromGrpc(g, options_.address);
  RGPU_LOG_INFO("lease %s: the registry hands it to %s (GPU %s)", lease_id.c_str(),
                to_server.c_str(), reply.gpu_id().c_str());
  *token = reply.token();
  return Status::Ok();
}

Status RegistryAgent::CancelHandOver(const std::string& lease_id) {
  if (!stub_) return Unavailable("not registered");
  registry::HandOverRequest request;
  request.set_lease_id(lease_id);
  registry::Empty reply;
  grpc::ClientContext ctx;
  Authorize(&ctx, std::chrono::seconds(10));
  grpc::Status g = stub_->CancelHandOver(&ctx, request, &reply);
  if (!g.ok()) return registry::FromGrpc(g, options_.address);
  return Status::Ok();
}

void RegistryAgent::Authorize(grpc::ClientContext* ctx, std::chrono::milliseconds timeout) const {
  ctx->AddMetadata("x-rgpu-provider-key", options_.provider_key);
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
}

void RegistryAgent::AddRecords(std::vector<registry::UsageRecord> records) {
  if (records.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& r : records) pending_.push_back(std::move(r));
  while (pending_.size() > options_.max_pending) {
    RGPU_LOG_ERROR("registry unreachable too long: dropping usage record %s",
                   pending_.front().record_id().c_str());
    pending_.pop_front();
  }
  WriteSpool();
}

Status RegistryAgent::LoadSpool() {
  FILE* f = fopen(options_.spool_path.c_str(), "rb");
  if (f == nullptr) return Status::Ok();  // nothing left by an earlier run
  size_t loaded = 0;
  Status status;
  for (;;) {
    unsigned char prefix[4];
    const size_t got = fread(prefix, 1, sizeof prefix, f);
    if (got == 0) break;
    const uint32_t size =
        prefix[0] | (prefix[1] << 8) | (prefix[2] << 16) | (static_cast<uint32_t>(prefix[3]) << 24);
    std::string bytes;
    registry::UsageRecord record;
    if (got == sizeof prefix && size <= (1u << 20)) bytes.resize(size);
    if (got != sizeof prefix || size > (1u << 20) || fread(bytes.data(), 1, size, f) != size ||
        !record.ParseFromString(bytes)) {
      status = InvalidArgument("metering spool " + options_.spool_path + " is damaged after " +
                               std::to_string(loaded) + " record(s)");
      break;
    }
    pending_.push_back(std::move(record));
    ++loaded;
  }
  fclose(f);
  if (loaded > 0) {
    RGPU_LOG_INFO("%zu usage record(s) from %s to deliver", loaded, options_.spool_path.c_str());
  }
  return status;
}

void RegistryAgent::WriteSpool() {
  if (options_.spool_path.empty()) return;
  const std::string tmp = options_.spool_path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "wb");
  bool ok = f != nullptr;
  for (size_t i = 0; ok && i < pending_.size() + held_.size(); ++i) {
    const std::string bytes =
        (i < pending_.size() ? pending_[i] : held_[i - pending_.size()]).SerializeAsString();
    const uint32_t size = static_cast<uint32_t>(bytes.size());
    const unsigned char prefix[4] = {
        static_cast<unsigned char>(size), static_cast<unsigned char>(size >> 8),
        static_cast<unsigned char>(size >> 16), static_cast<unsigned char>(size >> 24)};
    ok = fwrite(prefix, 1, 4, f) == 4 && fwrite(bytes.data(), 1, size, f) == size;
  }
  ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
  if (f != nullptr) ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp.c_str(), options_.spool_path.c_str()) != 0) {
    RGPU_LOG_ERROR("cannot write the metering spool %s", options_.spool_path.c_str());
  }
}

void RegistryAgent::RequeueHeld() {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.insert(pending_.begin(), std::make_move_iterator(held_.begin()),
                  std::make_move_iterator(held_.end()));
  held_.clear();
}

size_t RegistryAgent::pending() {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

bool RegistryAgent::SendBatch() {
  registry::ReportUsageRequest request;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < pending_.size() && i < kBatch; ++i) *request.add_records() = pending_[i];
  }
  if (request.records_size() == 0) return true;
  registry::ReportUsageReply reply;
  grpc::ClientContext ctx;
  Authorize(&ctx, std::chrono::seconds(5));
  grpc::Status g = stub_->ReportUsage(&ctx, request, &reply);
  if (!g.ok()) {
    RGPU_LOG_WARN("usage report of %d record(s) not acknowledged (will retry): %s",
                  request.records_size(), g.error_message().c_str());
    return false;
  }
  // Every sent record is answered: stored, stored already, refused (never to be stored), or not
  // yet (retry: held, sent again at the next report, for up to kHoldMs after its interval).
  std::set<std::string> refused, later;
  for (int i = 0; i < reply.refusals_size(); ++i) {
    const auto& r = reply.refusals(i);
    if (r.retry()) {
      later.insert(r.record_id());
      continue;
    }
    refused.insert(r.record_id());
    if (i < 5) {
      RGPU_LOG_ERROR("the registry refused usage record %s (dropped): %s", r.record_id().c_str(),
                     r.reason().c_str());
    }
  }
  if (reply.refusals_size() > 5) {
    RGPU_LOG_ERROR("the registry refused %d more usage records (dropped)",
                   reply.refusals_size() - 5);
  }
  std::lock_guard<std::mutex> lock(mu_);
  // The sent records are at the front, unless the oldest were dropped meanwhile.
  for (const auto& sent : request.records()) {
    if (!pending_.empty() && pending_.front().record_id() == sent.record_id()) {
      pending_.pop_front();
    }
    if (later.count(sent.record_id()) != 0) {
      if (NowMs() - sent.end_ms() < kHoldMs) {
        held_.push_back(sent);
      } else {
        RGPU_LOG_ERROR("the registry did not take usage record %s in %lld s (dropped)",
                       sent.record_id().c_str(), (long long)(kHoldMs / 1000));
      }
      continue;
    }
    if (options_.on_acknowledged && refused.count(sent.record_id()) == 0) {
      options_.on_acknowledged(sent);
    }
  }
  WriteSpool();
  return true;
}

void RegistryAgent::Heartbeat() {
  registry::HeartbeatRequest request;
  request.set_server_name(options_.server_name);
  request.set_ended_cursor(ended_cursor_);
  request.set_ended_epoch(ended_epoch_);
  if (options_.availability.windows_size() > 0) {
    int32_t offset = 0;
    std::string zone;
    LocalZone(&offset, &zone);
    request.set_utc_offset_seconds(offset);
    request.set_zone(zone);
  }
  registry::HeartbeatReply reply;
  grpc::ClientContext ctx;
  Authorize(&ctx, std::chrono::milliseconds(heartbeat_ms_));
  grpc::Status g = stub_->Heartbeat(&ctx, request, &reply);
  if (g.error_code() == grpc::StatusCode::NOT_FOUND) {
    RGPU_LOG_INFO("registry: %s", g.error_message().c_str());
    Status s = Register(nullptr);
    RGPU_LOG_INFO("registered again: %s", s.ToString().c_str());
    return;
  }
  if (!g.ok()) {
    if (g.error_message() != last_heartbeat_error_) {
      // Refusals (revoked, unreachable) are the operator's to fix: said once, clearly.
      RGPU_LOG_ERROR("heartbeat failed: %s", g.error_message().c_str());
      last_heartbeat_error_ = g.error_message();
    }
    return;
  }
  last_heartbeat_error_.clear();
  if (reply.heartbeat_ms() > 0) heartbeat_ms_ = reply.heartbeat_ms();
  // A notice that ran out since the loop last looked is ended here first: this reply may list
  // its lease as ended already and no longer as ending, which would drop it from noticed_
  // without this host ever saying that its notice ran out.
  EndNoticedLeases();
  // Notices: said once each (again if the end moves), so the log names why sessions end; the
  // agent ends their sessions itself when the notice runs out (EndNoticedLeases).
  std::map<std::string, Notice> noticed;
  for (const auto& notice : reply.ending_leases()) {
    auto it = noticed_.find(notice.lease_id());
    if (it == noticed_.end() || it->second.ends_ms != notice.ends_unix_ms()) {
      RGPU_LOG_WARN("registry: lease %s ends at %s: %s", notice.lease_id().c_str(),
                    registry::UtcTime(notice.ends_unix_ms()).c_str(), notice.reason().c_str());
    }
    const bool ended =
        it != noticed_.end() && it->second.ends_ms == notice.ends_unix_ms() && it->second.ended;
    const std::string acted = it != noticed_.end() ? it->second.move_token : "";
    noticed[notice.lease_id()] = {notice.ends_unix_ms(), notice.reason(), ended,
                                  notice.move_token().empty() ? acted : notice.move_token()};
    if (!notice.move_token().empty() && notice.move_token() != acted && options_.on_lease_move) {
      RGPU_LOG_INFO("registry: lease %s is to move to %s before its notice runs out",
                    notice.lease_id().c_str(), notice.move_url().c_str());
      options_.on_lease_move(notice.lease_id(), notice.move_url(), notice.move_token());
    }
  }
  // A lease under notice that the registry lists as ended while this host's clock has not
  // reached the notice's end (the clocks differ): its end is said here.
  for (const std::string& id : reply.ended_leases()) {
    auto it = noticed_.find(id);
    if (it == noticed_.end() || it->second.ended || noticed.count(id) > 0) continue;
    RGPU_LOG_WARN("lease %s: its notice ran out at %s (by the registry's clock): %s", id.c_str(),
                  registry::UtcTime(it->second.ends_ms).c_str(), it->second.reason.c_str());
  }
  noticed_.swap(noticed);
  for (int i = 0; i < reply.ended_leases_size(); ++i) {
    const std::string why = i < reply.ended_reasons_size() ? reply.ended_reasons(i) : "";
    // Its token is refused from now on; a session still under it is stopped (its calls fail
    // with CUDA_ERROR_DEVICE_UNAVAILABLE), and this line says why.
    RGPU_LOG_INFO("registry: lease %s ended%s%s", reply.ended_leases(i).c_str(),
                  why.empty() ? "" : ": ", why.c_str());
  }
  if (reply.ended_leases_size() > 0 && options_.on_leases_ended) {
    options_.on_leases_ended(
        std::vector<std::string>(reply.ended_leases().begin(), reply.ended_leases().end()));
  }
  ended_cursor_ = reply.ended_cursor();
  ended_epoch_ = reply.ended_epoch();
}

void RegistryAgent::EndNoticedLeases() {
  const int64_t now = NowMs();
  std::vector<std::string> due;
  for (auto& [id, notice] : noticed_) {
    if (notice.ended || notice.ends_ms > now) continue;
    notice.ended = true;
    RGPU_LOG_WARN("lease %s: its notice ran out at %s: %s", id.c_str(),
                  registry::UtcTime(notice.ends_ms).c_str(), notice.reason.c_str());
    due.push_back(id);
  }
  if (!due.empty() && options_.on_leases_ended) options_.on_leases_ended(due);
}

void RegistryAgent::Loop() {
  auto next_heartbeat = std::chrono::steady_clock::now();
  auto next_report = next_heartbeat + std::chrono::milliseconds(options_.report_ms);
  while (!stop_.load()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_heartbeat) {
      Heartbeat();
      next_heartbeat = now + std::chrono::milliseconds(heartbeat_ms_);
    }
    EndNoticedLeases();
    // Memory is observed every observe_ms; records are made and sent every report_ms, and
    // at once when a session ends (its end frees its lease at the registry).
    const bool report = report_now_.exchange(false) || now >= next_report;
    std::vector<registry::UsageRecord> records;
    {
      const wire::StatusReply live = sessions_();
      std::lock_guard<std::mutex> lock(mu_);
      if (report) {
        meter_->Sample(live, NowMs(), &records);
      } else {
        meter_->Observe(live, NowMs());
      }
    }
    if (report) {
      next_report = now + std::chrono::milliseconds(options_.report_ms);
      RequeueHeld();
      AddRecords(std::move(records));
      // A long backlog (after the registry was away) goes in batches, with heartbeats between.
      while (pending() > 0 && !stop_.load() && std::chrono::steady_clock::now() < next_heartbeat &&
             SendBatch()) {
      }
    }
    std::unique_lock<std::mutex> lock(wake_mu_);
    wake_.wait_for(lock,
                   std::chrono::milliseconds(std::min(options_.observe_ms, options_.report_ms)),
                   [this] { return stop_.load() || report_now_.load(); });
  }
}

void RegistryAgent::Stop(int flush_ms) {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    stop_.store(true);
  }
  wake_.notify_all();
  thread_.join();
  // Final figures of the sessions still listed, then a last attempt to deliver everything.
  std::vector<registry::UsageRecord> records;
  {
    const wire::StatusReply live = sessions_();
    std::lock_guard<std::mutex> lock(mu_);
    meter_->Sample(live, NowMs(), &records);
  }
  AddRecords(std::move(records));
  // Records answered "not yet" (a session that moved here, whose old server has not said it
  // left) are sent again until the deadline too: the old server's record may come meanwhile.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(flush_ms);
  // They go again once the rest has gone, at most every 200 ms.
  for (;;) {
    if (pending() == 0) RequeueHeld();
    if (pending() == 0 || std::chrono::steady_clock::now() >= deadline) break;
    const bool acknowledged = SendBatch();
    bool only_held = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      only_held = pending_.empty() && !held_.empty();
    }
    if (!acknowledged || only_held) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  RequeueHeld();  // counted below, and kept in the spool
  if (pending() > 0) {
    RGPU_LOG_WARN("%zu usage record(s) not delivered to the registry", pending());
  }
}

}  // namespace rgpu::server
