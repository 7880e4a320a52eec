#include "server/server.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "common/hex.h"
#include "common/log.h"
#include <prometheus/exposer.h>

#include "server/metrics.h"
#include "proto/crypto.h"
#include "proto/protocol_version.h"
#include "registry/availability.h"
#include "registry/operator_key.h"
#include "server/registry_agent.h"
#include "server/session.h"
#include "server/session_host.h"

namespace rgpu::server {

Server::Server() = default;
Server::~Server() {
  hosts_.reset();  // spares killed
  agent_.reset();
  if (!registry_key_path_.empty()) unlink(registry_key_path_.c_str());
}

Status Server::StartRegistryAgent() {
  RegistryAgentOptions agent_options;
  agent_options.address = options_.registry;
  agent_options.provider_key = options_.provider_key;
  agent_options.tls_ca = options_.registry_ca;
  agent_options.reachability_secret = reachability_secret_;
  // A token dies with its lease: refused from now on, and its sessions are stopped.
  agent_options.on_leases_ended = [this](const std::vector<std::string>& ids) { EndLeases(ids); };
  // A lease under notice that the registry handed over elsewhere: its sessions move there.
  agent_options.on_lease_move = [this](const std::string& lease, const std::string& url,
                                       const std::string& token) {
    MoveLeaseSessions(lease, url, token);
  };
  agent_options.spool_path = options_.metering_spool;
  Status parsed = registry::ParseAvailability(options_.available, &agent_options.availability);
  if (!parsed.ok()) return InvalidArgument("--available: " + parsed.message());
  agent_options.availability.set_notice_seconds(options_.notice_seconds);
  agent_options.server_name = options_.name;
  agent_options.server_url = options_.advertise_url.empty() ? url_ : options_.advertise_url;
  if (const auto any = agent_options.server_url.find("://0.0.0.0:"); any != std::string::npos) {
    // Listening on every address: tenants elsewhere reach this host by its name.
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0 && host[0] != '\0') {
      agent_options.server_url.replace(any + 3, 7, host);
    }
  }
  std::vector<registry::GpuSpec> gpus;
  for (size_t i = 0; i < devices_.devices().size(); ++i) {
    const wire::DeviceInfo& d = devices_.devices()[i];
    registry::GpuSpec spec;
    spec.set_index(static_cast<uint32_t>(i));
    spec.set_uuid(HexText(d.uuid()));
    spec.set_model(d.name());
    spec.set_memory_bytes(d.total_mem());
    auto attribute = [&d](int a) { return a < d.attributes_size() ? d.attributes(a) : 0; };
    spec.set_cc_major(
        static_cast<uint32_t>(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)));
    spec.set_cc_minor(
        static_cast<uint32_t>(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)));
    spec.set_bandwidth_gbps(options_.interconnect_gbps);
    spec.set_driver_version(devices_.driver_version());
    spec.set_backend(options_.backend);
    gpus.push_back(std::move(spec));
  }
  agent_ = std::make_unique<RegistryAgent>();
  std::string public_key_pem;
  Status s = agent_->Start(
      agent_options, std::move(gpus), [this] { return SessionsStatus(); }, &public_key_pem);
  if (!s.ok()) return Unavailable("registry " + options_.registry + ": " + s.message());
  RGPU_LOG_INFO("registered with the registry at %s as %s (%s)", options_.registry.c_str(),
                options_.name.c_str(), agent_options.server_url.c_str());
  if (!options_.token_public_key.empty()) return Status::Ok();
  char path[] = "/tmp/rgpu-registry-key-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return Internal("cannot write the registry's public key to /tmp");
  registry_key_path_ = path;
  const bool written = write(fd, public_key_pem.data(), public_key_pem.size()) ==
                       static_cast<ssize_t>(public_key_pem.size());
  close(fd);
  if (!written) return Internal("cannot write the registry's public key to " + registry_key_path_);
  s = tenants_->AcceptSigned(registry_key_path_, options_.name);
  if (s.ok()) RGPU_LOG_INFO("sessions need a token signed by the registry");
  return s;
}

Status Server::Start(const ServerOptions& options) {
  options_ = options;
  reachability_secret_ = RandomBytes(32);
  if (reachability_secret_.empty()) return Internal("no random bytes for the reachability secret");
  std::string lib = options.driver_library;
  if (options.backend == "cuda") {
    // Modules load whole at cuModuleLoadData, so that what they hold on the device is measured
    // then and counted against their tenant's quota (Session::LoadModule), not at first launch.
    setenv("CUDA_MODULE_LOADING", "EAGER", 1);
  }
  if (lib.empty()) {
    if (options.backend == "cuda") {
      lib = "libcuda.so.1";
    } else if (options.backend == "hip") {
      lib = "librgpu-backend-hip.so";
    } else if (options.backend == "softgpu") {
      lib = "libsoftgpu-cuda.so";
    } else {
      return InvalidArgument("unknown backend '" + options.backend + "' (cuda, hip or softgpu)");
    }
  }
  Status s = CudaDriver::Load(lib, &driver_);
  // The client places __managed__ variables at their device addresses in the tenant's process
  // (which the server's own is with RGPU_SERVER=local): softgpu must leave those addresses free.
  if (s.ok() && driver_.softgpuSetNativeManagedVariables != nullptr) {
    driver_.softgpuSetNativeManagedVariables(0);
  }
  // Its page-locked memory (staging buffers, kernel turns' gates) is its own, whichever session's
  // context allocated it: no tenant's kernel reaches it, another session's staged bytes least
  // (set even when the server is told to serve as without extensions, which is about serving,
  // not about isolation).
  if (s.ok() && driver_.softgpuSetKernelHostAccess != nullptr) {
    driver_.softgpuSetKernelHostAccess(0);
  }
  if (s.ok() && !options.backend_extensions) {
#define DRIVER_FN(name)
#define DRIVER_FN_REQUIRED(name)
#define DRIVER_EXT(name, type) driver_.name = nullptr;
#include "server/driver_api.def"
#undef DRIVER_FN
#undef DRIVER_FN_REQUIRED
#undef DRIVER_EXT
  }
  if (!s.ok()) return s;
  CUresult r = driver_.cuInit(0);
  if (r != CUDA_SUCCESS) return Internal("backend cuInit failed with " + std::to_string(r));
  s = devices_.Load(driver_, options.backend);
  if (!s.ok()) return s;
  if (options.host_nvml != "none") {
    const int count = static_cast<int>(devices_.devices().size());
    if (Status n = HostNvml::Load(options.host_nvml, driver_, count, &host_nvml_); n.ok()) {
      RGPU_LOG_INFO(
          "NVML: %d of %d device(s) have sensor readings (driver %s)",
          host_nvml_->matched_devices(), count,
          host_nvml_->driver_version().empty() ? "unknown" : host_nvml_->driver_version().c_str());
    } else {
      RGPU_LOG_INFO("no sensor readings: %s", n.message().c_str());
    }
  }
  tenants_ = std::make_unique<TenantTable>();
  if (!options.operator_key_file.empty()) {
    // The operator's credential for `rgpu status` (every session's figures).
    std::string key;
    bool created = false;
    s = registry::LoadOrCreateOperatorKey(options.operator_key_file, &key, &created);
    if (!s.ok()) return s;
    tenants_->SetOperatorKey(key);
    RGPU_LOG_INFO("operator key %s %s", created ? "created in" : "read from",
                  options.operator_key_file.c_str());
  }
  if (!options.tokens_path.empty() || !options.token_public_key.empty()) {
    if (!options.tokens_path.empty()) {
      s = tenants_->Load(options.tokens_path);
      if (!s.ok()) return s;
    }
    if (!options.token_public_key.empty()) {
      s = tenants_->AcceptSigned(options.token_public_key, options.name);
      if (!s.ok()) return s;
    }
    RGPU_LOG_INFO("sessions need a token (%zu listed%s)", tenants_->size(),
                  options.token_public_key.empty() ? "" : ", or signed for this server");
  }
  if (options.fair_share) {
    const int devices = static_cast<int>(devices_.devices().size());
    scheduler_ = make_turn_taker_ ? std::make_unique<FairSchedulers>(devices, make_turn_taker_)
                                  : std::make_unique<FairSchedulers>(devices);
  }
  const std::string& processes = options.session_processes;
  if (processes != "on" && processes != "off" && processes != "auto") {
    return InvalidArgument("--session-processes is on, off or auto, not '" + processes + "'");
  }
  if (processes == "on" || (processes == "auto" && options.backend != "softgpu")) {
    if (options.command_line.empty()) return InvalidArgument("no command line to start hosts");
    hosts_ = std::make_unique<SessionHostPool>(
        options.command_line, std::max(0, options.session_host_spares), options.host_program);
    RGPU_LOG_INFO("each session runs in a process of its own (%d started ahead)",
                  std::max(0, options.session_host_spares));
  }
  TransportUrl url;
  s = TransportUrl::Parse(options.listen, &url);
  if (!s.ok()) return s;
  ListenerOptions listener_options;
  listener_options.tls_key_file = options.tls_key_file;
  listener_options.tls_certificate_file = options.tls_certificate_file;
  s = CreateListener(url, listener_options, &listener_);
  if (!s.ok()) return s;
  url.port = listener_->port();
  url.pin = listener_->pin();
  url_ = url.ToString();
  if (options.keepalive) {
    liveness_ = std::make_unique<LivenessService>();
    s = liveness_->Start(url.host);
    if (!s.ok()) return s;
  }
  RGPU_LOG_INFO("backend %s (%s), driver %d, %zu device(s)", options.backend.c_str(), lib.c_str(),
                devices_.driver_version(), devices_.devices().size());
  for (size_t i = 0; i < devices_.devices().size(); ++i) {
    RGPU_LOG_INFO("device %zu: %s, %llu MiB", i, devices_.devices()[i].name().c_str(),
                  (unsigned long long)(devices_.devices()[i].total_mem() >> 20));
  }
  if (options.metrics_port > 0) {
    // Metrics name tenants: served on the listen address's host (loopback stays loopback) unless
    // the operator says otherwise.
    const std::string host = options.metrics_host.empty() ? url.host : options.metrics_host;
    const std::string where = (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
                              ":" + std::to_string(options.metrics_port);
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(where);
    } catch (const std::exception& e) {
      return Unavailable("cannot serve metrics on port " + std::to_string(options.metrics_port) +
                         ": " + e.what());
    }
    metrics_ = MakeSessionMetrics([this] { return SessionsStatus(); });
    exposer_->RegisterCollectable(metrics_);
    RGPU_LOG_INFO("metrics on http://%s/metrics", where.c_str());
  }
  if (!options.registry.empty()) {
    s = StartRegistryAgent();
    if (!s.ok()) return s;
  }
  RGPU_LOG_INFO("listening on %s", url_.c_str());
  return Status::Ok();
}

void Server::JoinLane(uint64_t session_id, const std::string& lane_key, Channel& lane) {
  Session* target = nullptr;
  {
    // Under mu_ the session is in sessions_, so alive; once attached, it waits for the lane
    // before it ends (Session::CloseLanes).
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(session_id);
    if (it != sessions_.end() && it->second->AttachLane(lane_key)) target = it->second;
  }
  if (target == nullptr) {
    RGPU_LOG_WARN("lane from %s refused: no session %llu takes it", lane.peer().c_str(),
                  (unsigned long long)session_id);
    wire::Envelope refusal;
    refusal.mutable_welcome()->set_protocol_version(kProtocolVersion);
    refusal.mutable_welcome()->set_status(CUDA_ERROR_NOT_PERMITTED);
    refusal.mutable_welcome()->set_error(
        "no session takes this lane (a wrong key, or its lanes are all in use)");
    lane.Send(refusal.SerializeAsString(), nullptr, 0);
    return;
  }
  target->ServeLane(lane);
}

void Server::JoinPeer(const wire::PeerJoin& first, Channel& peer) {
  wire::PeerJoin join = first;
  // One connection carries the other server's transfers one after another: after each, the next
  // PeerJoin is waited for a while (in slices, so that a stopping server does not wait long).
  constexpr int kIdleSlices = 50, kSliceMs = 200;
  for (;;) {
    if (!ServeOnePeerTransfer(join, peer)) return;
    ReceivedMessage m;
    Status s = Status::Ok();
    int slice = 0;
    for (; slice < kIdleSlices && !stop_.load(); ++slice) {
      s = peer.Receive(kSliceMs, &m);
      if (s.code() != Status::Code::kTimeout) break;
    }
    wire::Envelope next;
    if (slice == kIdleSlices || stop_.load() || !s.ok() ||
        !next.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())) ||
        next.body_case() != wire::Envelope::kPeerJoin || m.payload_size != 0) {
      return;
    }
    join = next.peer_join();
  }
}

bool Server::ServeOnePeerTransfer(const wire::PeerJoin& join, Channel& peer) {
  const uint64_t session_id = join.session_id();
  Session* target = nullptr;
  Session::PeerGrantRecord grant;
  {
    std::lock_guard<std::mutex> lock(mu_);  // as JoinLane: alive while in sessions_
    auto it = sessions_.find(session_id);
    if (it != sessions_.end() && it->second->AttachPeer(join.ticket_digest(), &grant)) {
      target = it->second;
    }
  }
  if (target == nullptr) {
    RGPU_LOG_WARN("transfer from %s refused: no session %llu granted it", peer.peer().c_str(),
                  (unsigned long long)session_id);
    wire::Envelope refusal;
    refusal.mutable_welcome()->set_protocol_version(kProtocolVersion);
    refusal.mutable_welcome()->set_status(CUDA_ERROR_NOT_PERMITTED);
    refusal.mutable_welcome()->set_error(
        "no session granted this transfer (a wrong, used or "
        "expired ticket)");
    peer.Send(refusal.SerializeAsString(), nullptr, 0);
    return false;
  }
  return target->ServePeer(peer, grant, join.nonce());
}

void Server::EndLeases(const std::vector<std::string>& lease_ids) {
  tenants_->EndLeases(lease_ids);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, session] : sessions_) {
    const std::string lease = session->lease_id();
    if (!lease.empty() && std::find(lease_ids.begin(), lease_ids.end(), lease) != lease_ids.end()) {
      session->Abort("its lease " + lease + " ended");
    }
  }
}

wire::StatusReply Server::SessionsStatus() {
  wire::StatusReply reply;
  reply.set_backend(options_.backend);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, session] : sessions_) {
    if (session->admitted()) *reply.add_sessions() = session->Stats();
  }
  for (const auto& [tenant, counts] : ended_) *reply.add_ended() = counts;
  return reply;
}

void Server::CountEnded(const std::string& tenant, SessionEnd end) {
  wire::EndedSessions& c = ended_[tenant];
  c.set_tenant(tenant);
  switch (end) {
    case SessionEnd::kExited:
      c.set_exited(c.exited() + 1);
      break;
    case SessionEnd::kLost:
      c.set_lost(c.lost() + 1);
      break;
    case SessionEnd::kClosed:
      c.set_closed(c.closed() + 1);
      break;
    case SessionEnd::kShutdown:
      c.set_shutdown(c.shutdown() + 1);
      break;
    case SessionEnd::kMoved:
      c.set_moved(c.moved() + 1);
      break;
    case SessionEnd::kNone:
      break;
  }
}

size_t Server::active_sessions() {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.size();
}

void Server::ConfigureSession(Session& session) {
  session.SetStatusProvider([this] { return SessionsStatus(); });
  session.SetReachabilitySecret(&reachability_secret_);
  session.SetLiveness(liveness_.get(), options_.client_timeout_ms);
  session.SetLimits(options_.session_limits);
  session.SetHostNvml(host_nvml_.get());
  session.SetKernelBound(options_.max_kernel_ms);
  session.SetScrubAllocations(options_.backend != "softgpu" || !options_.backend_extensions);
  session.SetDeviceMemoryLock(&device_memory_mu_);
  // A session host's one session has nobody to share with in its process: its IPC calls are
  // refused as not supported, not left to fail at the other end (docs/status.md).
  if (!host_on_admitted_) session.SetIpcRegistry(&ipc_);
  if (options_.max_lanes > 0) {
    session.SetLaneJoiner([this](uint64_t target, const std::string& key,
                                 Channel& lane) { JoinLane(target, key, lane); },
                          static_cast<uint32_t>(options_.max_lanes));
  }
  session.SetPeerConnector([this](const std::string& text, std::unique_ptr<Channel>* out) {
    TransportUrl url;
    if (Status s = TransportUrl::Parse(text, &url); !s.ok()) return s;
    if (url.scheme == TransportUrl::Scheme::kLocal) {
      return InvalidArgument("not a server's URL: " + text);
    }
    ChannelOptions options;
    options.poll_us = options_.poll_us;
    options.max_message_bytes = size_t{8} << 20;
    return ConnectChannel(url, options, out);
  });
  session.SetPeerJoiner(
      [this](const wire::PeerJoin& join, Channel& peer) { JoinPeer(join, peer); });
  session.SetServiceHandler([this](const wire::Envelope& first, std::unique_ptr<Channel>& channel) {
    return HandleService(first, channel);
  });
  if (hosts_ != nullptr) session.SetSessionHosts(hosts_.get());
  if (stdout_capture_ != nullptr) session.SetStdoutCapture(stdout_capture_);
  if (host_on_admitted_) {
    session.SetAdmittedHook(host_on_admitted_);
  }
}

void Server::HostOneSession(const std::string& token, std::shared_ptr<Tenant> tenant, bool all_gpus,
                            std::vector<int> gpus, const std::string& lease_id,
                            std::function<void(const wire::SessionStats&, SessionEnd)> on_end,
                            std::function<void()> on_admitted) {
  tenants_->AddToken(token, std::move(tenant), all_gpus, std::move(gpus), /*once=*/true, lease_id);
  host_on_end_ = std::move(on_end);
  host_on_admitted_ = std::move(on_admitted);
}

void Server::HostRestoredSession(std::function<void(const wire::SessionStats&, SessionEnd)> on_end,
                                 std::function<void()> on_admitted) {
  // The session comes back by its resume credential; nobody else gets in (without this the
  // host, started without the server's tokens, admitted anyone who found its port).
  tenants_->RefuseEveryone();
  host_on_end_ = std::move(on_end);
  host_on_admitted_ = std::move(on_admitted);
}

bool Server::HostedStats(wire::SessionStats* stats) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, session] : sessions_) {
    if (!session->admitted()) continue;
    *stats = session->Stats();
    return true;
  }
  return false;
}

void Server::RunSession(Session& session, std::unique_ptr<Channel> resumed) {
  const uint64_t id = session.id();
  {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_[id] = &session;
  }
  // A session restored in a host is metered from its resume (JoinResume), as one restored here;
  // one never resumed (its restore refused, its client gone) reports nothing.
  const bool restored_in_host = session.restored_in_host();
  if (agent_ && !restored_in_host) agent_->SessionStarted(id);
  if (resumed != nullptr) {
    session.RunResumed(std::move(resumed), stop_);
  } else {
    session.Run(stop_);
  }
  const wire::SessionStats stats = session.Stats();
  const bool report = agent_ && (!restored_in_host || session.admitted());
  if (report && session.end() == SessionEnd::kMoved) {
    agent_->SessionMoved(stats);  // its lease goes on where it went
  } else if (report) {
    agent_->SessionEnded(stats);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_.erase(id);
    if (session.end() != SessionEnd::kNone) CountEnded(stats.tenant(), session.end());
  }
  if (host_on_end_ && session.admitted()) {
    // A session host: its one session has ended, and so does it.
    host_on_end_(stats, session.end());
    stop_.store(true);
  }
}

void Server::Serve() {
  if (hosts_ != nullptr) hosts_->RefillSoon();  // a host ready for the first session
  while (!stop_.load()) {
    std::unique_ptr<PendingConnection> pending;
    Status s = listener_->WaitConnection(200, &pending);
    ReapPendingResumes();
    if (drain_requested_.load() && !stop_.load()) {
      DrainAll();  // sessions go elsewhere before the server stops (a connection waits meanwhile)
      stop_.store(true);
    }
    if (s.code() == Status::Code::kTimeout) continue;
    if (!s.ok()) {
      RGPU_LOG_ERROR("listener failed: %s", s.ToString().c_str());
      break;
    }
    const uint64_t id = next_session_id_++;
    std::string refusal;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (options_.max_sessions > 0 && live_.size() >= static_cast<size_t>(options_.max_sessions)) {
        refusal = "server is full (" + std::to_string(live_.size()) + " sessions)";
      }
      live_.insert(id);
    }
    running_threads_++;
    std::thread([this, id, refusal, p = std::move(pending)]() mutable {
      ChannelOptions copts;
      copts.poll_us = options_.poll_us;
      copts.max_queued_messages = options_.max_queued_calls;
      copts.max_queued_bytes = static_cast<size_t>(options_.max_queued_mib) << 20;
      // No single request moves more than a device holds (plus its header).
      for (const auto& d : devices_.devices()) {
        copts.max_message_bytes =
            std::max<size_t>(copts.max_message_bytes, d.total_mem() + (1 << 20));
      }
      // Large payloads wait in the transport until the session has checked their call
      // (Session::Serve): one a call cannot take is never read into this process; a backend
      // whose device memory the server can address receives a copy's straight into it.
      copts.defer_payload_bytes = kDirectCopyBytes;
      std::unique_ptr<Channel> channel;
      Status st = p->Accept(copts, &channel);
      if (!st.ok()) {
        RGPU_LOG_WARN("session %llu: accept from %s failed: %s", (unsigned long long)id,
                      p->peer().c_str(), st.ToString().c_str());
      } else {
        Session session(id, driver_, devices_, std::move(channel), tenants_.get(), refusal,
                        scheduler_.get());
        ConfigureSession(session);
        RunSession(session);
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        live_.erase(id);
      }
      running_threads_--;
    }).detach();
  }
  // Sessions see stop_ within their receive timeout, say goodbye and release everything.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (running_threads_.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (agent_) agent_->Stop();  // the last usage records reach the registry
}

}  // namespace rgpu::server
