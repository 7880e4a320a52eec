#include "server/session.h"
#include "server/session_host.h"
#include "server/stdout_capture.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include <google/protobuf/arena.h>

#include "common/fatbin.h"
#include "common/log.h"
#include "proto/compact_frame.h"
#include "proto/crypto.h"
#include "proto/keepalive_proof.h"
#include "proto/protocol_version.h"
#include "proto/session_proof.h"
#include "server/checked_size.h"
#include "server/device_catalog.h"
#include "server/liveness_service.h"
#include "server/tenants.h"

namespace rgpu::server {
namespace {

// Adds to a counter that only the session's thread writes (status and metrics only read it):
// a plain load and store instead of a locked read-modify-write on every call.
void AddOwned(std::atomic<uint64_t>& counter, uint64_t n) {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

constexpr int kHandshakeTimeoutMs = 10000;
constexpr size_t kMaxNameBytes = 4096;  // a kName payload: a kernel's or a variable's name
// A kParams payload: a kernel's parameters (CUDA's limit is 32 KiB) and a launch's attributes.
constexpr size_t kMaxParamsBytes = size_t{1} << 20;
}  // namespace

Session::Session(uint64_t id, const CudaDriver& driver, const DeviceCatalog& devices,
                 std::unique_ptr<Channel> channel, TenantTable* tenants, std::string refusal,
                 FairSchedulers* scheduler)
    : id_(id),
      drv_(driver),
      devices_(devices),
      channel_(std::move(channel)),
      tenants_(tenants),
      refusal_(std::move(refusal)),
      scheduler_(scheduler) {}

wire::SessionStats Session::Stats() const {
  wire::SessionStats st;
  {
    std::lock_guard<std::mutex> lock(name_mu_);
    if (hosted_stats_.has_value()) {
      // Served by its host: the host's figures, under this server's names for it.
      st = *hosted_stats_;
      st.set_session_id(id_);
      st.set_client(client_name_);
      st.set_tenant(tenant_ != nullptr ? tenant_->name : "");
      st.set_lease_id(lease_id_);
      return st;
    }
  }
  st.set_session_id(id_);
  {
    std::lock_guard<std::mutex> lock(name_mu_);
    st.set_client(client_name_);
    if (tenant_ != nullptr) st.set_tenant(tenant_->name);
    st.set_lease_id(lease_id_);
  }
  st.set_memory_bytes(live_bytes_.load());
  st.set_gpu_busy_seconds(GpuBusySeconds());
  uint64_t calls = 0;
  for (size_t op = 0; op < calls_by_op_.size(); ++op) {
    const uint64_t n = calls_by_op_[op].load(std::memory_order_relaxed);
    calls += n;
    const OpInfo* info = op == 0 ? nullptr : FindOp(static_cast<uint32_t>(op));
    if (n > 0 && info != nullptr) (*st.mutable_calls_by_kind())[info->name] = n;
  }
  st.set_calls(calls);
  st.set_waited_calls(waited_calls_.load(std::memory_order_relaxed));
  st.set_queue_seconds(queue_seconds_.load());
  st.set_device(device_.load());
  st.set_bytes_in(bytes_in_.load());
  st.set_bytes_out(bytes_out_.load());
  double copies = 0;
  for (const auto& seconds : device_copy_seconds_) copies += seconds.load();
  st.set_copy_busy_seconds(copies);
  static const char* const kPhases[] = {"running", "moving", "parked"};
  st.set_state(kPhases[std::clamp(phase_.load(), 0, 2)]);
  for (uint64_t mask = context_devices_.load(); mask != 0; mask &= mask - 1) {
    const int device = __builtin_ctzll(mask);
    st.add_devices(device);
    st.add_device_memory_bytes(device_bytes_[device].load());
    st.add_device_gpu_busy_seconds(device_busy_seconds_[device].load());
    st.add_device_copy_busy_seconds(device_copy_seconds_[device].load());
  }
  if (admitted()) {
    st.set_pid(client_pid_);
    st.set_uptime_seconds(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - admitted_at_).count());
  }
  {
    std::lock_guard<std::mutex> lock(name_mu_);  // Run drops the channel under it
    if (channel_ != nullptr) st.set_queue_depth(channel_->queued());
  }
  return st;
}

ShareAccount* Session::account() { return tenant_ != nullptr ? &tenant_->share : &own_account_; }

Session::~Session() { ReleaseAll(); }

void Session::Run(const std::atomic<bool>& stop) {
  stop_ = &stop;
  if (restore_in_host_) {  // no client yet: it resumes at the host
    SuperviseHost(stop);
    return;
  }
  if (!Handshake()) {
    ReleaseAll();
    return;
  }
  if (host_ != nullptr) {
    SuperviseHost(stop);
    return;
  }
  RGPU_LOG_INFO("session %llu: %s from %s connected", (unsigned long long)id_, client_name_.c_str(),
                channel_->peer().c_str());
  ServeLoop(stop);
}

wire::HostAssign Session::HostAssignment(const std::string& token) {
  wire::HostAssign assign;
  assign.set_token(token);
  if (tenant_ != nullptr) {
    assign.set_tenant(tenant_->name);
    assign.set_memory_quota(tenant_->memory_quota);
    assign.set_weight(tenant_->weight);
  } else {
    assign.set_memory_quota(UINT64_MAX);  // no quota: the server grants every reservation
  }
  assign.set_lease_id(lease_id_);
  assign.set_all_gpus(false);
  for (int g : visible_) assign.add_gpus(g);
  assign.set_parent_session_id(id_);
  return assign;
}

Status Session::RedirectToHost(wire::Welcome* w) {
  std::unique_ptr<SessionHost> host;
  if (Status s = hosts_->Take(&host); !s.ok()) return s;
  wire::HostAssign assign = HostAssignment(MakeHostToken());
  if (assign.token().empty()) return Internal("no random bytes for the session's host");
  if (Status s = host->Assign(assign); !s.ok()) return s;
  w->set_redirect_port(host->port());
  w->set_redirect_token(assign.token());
  w->set_redirect_pin(host->pin());
  host_ = std::move(host);
  hosted_.store(true);
  hosts_->RefillSoon();  // the next session's host
  return Status::Ok();
}

void Session::SuperviseHost(const std::atomic<bool>& stop) {
  const pid_t pid = host_->pid();
  RGPU_LOG_INFO("session %llu: %s from %s runs in process %d", (unsigned long long)id_,
                client_name_.c_str(),
                channel_ != nullptr ? channel_->peer().c_str() : "a checkpoint", (int)pid);
  {
    // The redirect was its last message: closed now, as the client closes its end.
    std::lock_guard<std::mutex> lock(name_mu_);
    std::lock_guard<std::mutex> abort_lock(abort_mu_);
    abort_channel_ = nullptr;
    channel_.reset();
  }
  std::string how;
  const uint32_t end = host_->Supervise(
      tenant_.get(), scheduler_, [&] { return stop.load() || aborted_.load(); },
      [this](const wire::SessionStats& stats) {
        std::lock_guard<std::mutex> lock(name_mu_);
        hosted_stats_ = stats;
      },
      [this](const wire::HostMoveResult& result) { HostedMoveAnswered(result); },
      [this](const wire::HostCheckpointChunk& piece) { checkpoint_relay_.Piece(piece); },
      [this](const std::string& answer) {
        std::lock_guard<std::mutex> lock(restore_mu_);
        if (restore_in_host_ && !restore_answer_) restore_answer_ = answer;
        restore_cv_.notify_all();
      },
      &how);
  {
    std::lock_guard<std::mutex> lock(restore_mu_);  // a restore waiting for it has its answer
    if (restore_in_host_ && !restore_answer_) {
      restore_answer_ = "the session's process ended (" + how + ")";
    }
    restore_cv_.notify_all();
  }
  checkpoint_relay_.Stop();
  std::shared_ptr<MoveRequest> unanswered;
  {
    std::lock_guard<std::mutex> lock(move_mu_);  // RequestMove uses host_ under it
    host_.reset();
    unanswered = std::move(hosted_move_);
  }
  if (unanswered != nullptr) {
    unanswered->Finish(-1, Unavailable("the session's process ended before it moved"));
  }
  if (end > static_cast<uint32_t>(SessionEnd::kNone) &&
      end <= static_cast<uint32_t>(SessionEnd::kMoved)) {
    end_ = static_cast<SessionEnd>(end);
  } else {
    end_ = stop.load()       ? SessionEnd::kShutdown
           : aborted_.load() ? SessionEnd::kClosed
                             : SessionEnd::kLost;
  }
  RGPU_LOG_INFO("session %llu: its process %d %s", (unsigned long long)id_, (int)pid, how.c_str());
}

void Session::ServeLoop(const std::atomic<bool>& stop) {
  ReceivedMessage m;  // reused: Receive swaps header buffers with the channel
  while (!stop.load()) {
    // While posted reads wait for their streams, their bytes go out as they are made.
    Status s = channel_->Receive(posted_reads_.empty() ? 200 : 1, &m);
    if (s.code() == Status::Code::kTimeout) {
      if (!posted_reads_.empty()) {
        state_mu_.Lock();
        SendFinishedReads();
        if (state_mu_.Unlock()) state_cv_.notify_all();
      }
      const int64_t silent =
          liveness_ != nullptr && client_timeout_ms_ > 0 ? liveness_->SilentMs(liveness_key_) : -1;
      if (silent > client_timeout_ms_) {
        CloseWithReason("client sent no keepalive for " + std::to_string(silent) + " ms");
        end_ = client_said_goodbye_ ? SessionEnd::kExited : SessionEnd::kLost;
        break;
      }
      if (aborted_.load()) break;
      continue;
    }
    if (s.code() == Status::Code::kResourceExhausted) {
      CloseWithReason(s.message());
      break;
    }
    if (!s.ok()) {
      if (client_said_goodbye_) {
        RGPU_LOG_INFO("session %llu: ended by its client (%s)", (unsigned long long)id_,
                      goodbye_reason_.c_str());
      } else {
        RGPU_LOG_INFO("session %llu: client gone (%s)", (unsigned long long)id_,
                      s.ToString().c_str());
      }
      break;
    }
    state_mu_.Lock();
    const bool served = Serve(m);
    // After a lane's synchronize, pools give back what they keep past their thresholds, as
    // after one on the channel (the lane cannot: pools are the session thread's).
    if (served && lane_synchronized_.load(std::memory_order_relaxed) &&
        lane_synchronized_.exchange(false)) {
      TrimPoolsAfterSync();
    }
    if (state_mu_.Unlock()) state_cv_.notify_all();  // lanes waiting for these calls
    if (!served) break;
  }
  {
    // A move asked for and never acted on: the session ended first.
    std::lock_guard<std::mutex> lock(move_mu_);
    if (move_request_ != nullptr) {
      move_request_->Finish(-1, Unavailable("the session ended before it could move"));
      move_request_ = nullptr;
    }
    move_pending_.store(false);
  }
  // Moved: its client was told where the session went (parked sessions whose client left first
  // end as any other).
  if (moved_by_ != nullptr && client_told_where_) end_ = SessionEnd::kMoved;
  if (end_ == SessionEnd::kNone) {
    end_ = stop.load()            ? SessionEnd::kShutdown
           : aborted_.load()      ? SessionEnd::kClosed
           : client_said_goodbye_ ? SessionEnd::kExited
                                  : SessionEnd::kLost;
  }
  if (stream_waits_served_ && moved_by_ == nullptr && drv_.softgpuCtxAbort != nullptr) {
    // A stream may still wait on a word that nothing will write now, and closing the lanes and
    // releasing the memory wait for the streams: the session's remaining work is dropped first. (A
    // moved session's streams were idle when it moved.)
    std::lock_guard<std::mutex> lock(abort_mu_);
    for (CUcontext ctx : live_contexts_) drv_.softgpuCtxAbort(ctx);
  }
  CloseLanes();  // before anything they might wait on goes
  if (moved_by_ != nullptr) {
    // Its device memory goes now; the client leaves this server once it has resumed where the
    // session went, which ends the pause the move cost it.
    ReleaseAll();
    if (!client_told_where_ && !channel_->broken()) {
      wire::Envelope bye;  // parked, and the server stops before the session was restored
      bye.mutable_goodbye()->set_status(CUDA_ERROR_DEVICE_UNAVAILABLE);
      bye.mutable_goodbye()->set_reason("server is shutting down");
      channel_->Send(bye.SerializeAsString(), nullptr, 0);
    }
    ReceivedMessage rest;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    bool left = false;
    while (!left && std::chrono::steady_clock::now() < deadline && !stop.load()) {
      const Status r = channel_->Receive(100, &rest);
      left = !r.ok() && r.code() != Status::Code::kTimeout;
    }
    const double pause = left ? std::chrono::duration<double, std::milli>(
                                    std::chrono::steady_clock::now() - move_started_)
                                    .count()
                              : -1;
    RGPU_LOG_INFO("session %llu: moved; %s", (unsigned long long)id_,
                  left ? ("its client left after " + std::to_string(pause) + " ms").c_str()
                       : "its client did not leave within 10 s");
    moved_by_->Finish(pause);
  } else if (stop.load() && !channel_->broken()) {
    wire::Envelope bye;
    bye.mutable_goodbye()->set_status(CUDA_ERROR_DEVICE_UNAVAILABLE);
    bye.mutable_goodbye()->set_reason("server is shutting down");
    channel_->Send(bye.SerializeAsString(), nullptr, 0);
  }
  const uint64_t allocs = allocations_.size(), bytes = live_bytes_.load();
  if (liveness_ != nullptr && liveness_key_ != 0) liveness_->Forget(liveness_key_);
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    abort_channel_ = nullptr;
  }
  {
    // The transport goes before the memory: a transfer given up on half-way (a client that
    // stopped) may still be reading or writing device memory until its worker is destroyed.
    std::unique_ptr<Channel> closing;
    {
      std::lock_guard<std::mutex> lock(name_mu_);
      closing = std::move(channel_);
    }
  }
  ReleaseAll();
  const wire::SessionStats stats = Stats();
  RGPU_LOG_INFO(
      "session %llu: closed after %llu calls (%llu waited for); released %llu allocations "
      "(%llu bytes)",
      (unsigned long long)id_, (unsigned long long)stats.calls(),
      (unsigned long long)stats.waited_calls(), (unsigned long long)allocs,
      (unsigned long long)bytes);
  if (scheduler_ != nullptr) {
    // Metering: the GPU time this session's kernels were measured to take.
    RGPU_LOG_INFO("session %llu: tenant %s gpu_busy_ms %.3f", (unsigned long long)id_,
                  tenant_ != nullptr ? tenant_->name.c_str() : "-", GpuBusySeconds() * 1e3);
  }
}

void Session::Abort(const std::string& reason) {
  if (aborted_.exchange(true)) return;
  RGPU_LOG_WARN("session %llu: stopping its work: %s", (unsigned long long)id_, reason.c_str());
  std::lock_guard<std::mutex> lock(abort_mu_);
  if (abort_channel_ != nullptr) abort_channel_->Abandon(reason);
  if (abort_peer_channel_ != nullptr) abort_peer_channel_->Abandon(reason);
  if (drv_.softgpuCtxAbort != nullptr) {
    for (CUcontext ctx : live_contexts_) drv_.softgpuCtxAbort(ctx);
  }
  // Other backends: a kernel in its turn (--fair-share) is given up on by its context's keeper
  // (KernelTurns, which sees aborted_) or, on a backend without stream waits on memory, by the
  // session's own thread (WaitForKernel); either destroys the session's contexts.
}

void Session::CloseWithReason(const std::string& reason) {
  RGPU_LOG_WARN("session %llu: closing: %s", (unsigned long long)id_, reason.c_str());
  end_ = SessionEnd::kClosed;
  if (channel_->broken()) return;
  wire::Envelope bye;
  bye.mutable_goodbye()->set_status(CUDA_ERROR_DEVICE_UNAVAILABLE);
  bye.mutable_goodbye()->set_reason(reason);
  channel_->Send(bye.SerializeAsString(), nullptr, 0);
}

bool Session::Handshake() {
  ReceivedMessage m;
  Status s = channel_->Receive(kHandshakeTimeoutMs, &m);
  if (!s.ok()) {
    RGPU_LOG_WARN("session %llu: no handshake from %s: %s", (unsigned long long)id_,
                  channel_->peer().c_str(), s.ToString().c_str());
    return false;
  }
  wire::Envelope in;
  wire::Envelope out;
  wire::Welcome* w = out.mutable_welcome();
  w->set_protocol_version(kProtocolVersion);
  w->set_session_id(id_);
  const bool parsed = in.ParseFromArray(m.header.data(), static_cast<int>(m.header.size()));
  if (parsed && in.body_case() == wire::Envelope::kStatusRequest && status_provider_) {
    // Only to the operator (every session) or a tenant (its own sessions).
    wire::Envelope status;
    wire::StatusReply* reply = status.mutable_status_reply();
    Admission admission;
    Status s = tenants_ == nullptr ? PermissionDenied("this server has no operator key")
                                   : Challenge(in.status_request().credential(), &admission);
    if (s.ok() && !admission.operator_access && admission.tenant == nullptr) {
      s = PermissionDenied("status needs the operator's key or a tenant's token");
    }
    if (!s.ok()) {
      reply->set_error(s.message());
      RGPU_LOG_WARN("session %llu: status refused to %s: %s", (unsigned long long)id_,
                    channel_->peer().c_str(), s.message().c_str());
    } else {
      *reply = status_provider_();
      if (!admission.operator_access) {
        auto& sessions = *reply->mutable_sessions();
        const std::string& name = admission.tenant->name;
        sessions.erase(
            std::remove_if(sessions.begin(), sessions.end(),
                           [&](const wire::SessionStats& x) { return x.tenant() != name; }),
            sessions.end());
        auto& ended = *reply->mutable_ended();
        ended.erase(
            std::remove_if(ended.begin(), ended.end(),
                           [&](const wire::EndedSessions& x) { return x.tenant() != name; }),
            ended.end());
      }
    }
    channel_->Send(status.SerializeAsString(), nullptr, 0);
    return false;  // a status query is not a session
  }
  if (parsed && in.body_case() == wire::Envelope::kReachabilityProbe &&
      reachability_secret_ != nullptr && !reachability_secret_->empty()) {
    constexpr size_t kMaxNonceBytes = 64;
    wire::Envelope proof;
    if (in.reachability_probe().nonce().size() <= kMaxNonceBytes) {
      proof.mutable_reachability_proof()->set_mac(
          HmacSha256(*reachability_secret_, in.reachability_probe().nonce()));
    }
    channel_->Send(proof.SerializeAsString(), nullptr, 0);
    return false;  // a probe is not a session
  }
  if (parsed && in.body_case() == wire::Envelope::kLaneJoin && lane_joiner_) {
    // Another connection of a running session's client: served as its lane on this thread.
    lane_joiner_(in.lane_join().session_id(), in.lane_join().lane_key(), *channel_);
    return false;  // a lane is not a session
  }
  if (parsed && in.body_case() == wire::Envelope::kPeerJoin && peer_joiner_) {
    // Another server's transfer for a session of this server: served on this thread.
    peer_joiner_(in.peer_join(), *channel_);
    return false;  // a transfer is not a session
  }
  if (parsed && in.body_case() != wire::Envelope::kHello && service_handler_ &&
      service_handler_(in, channel_)) {
    return false;  // an operator's request, a restore, or a resumed session: not this session
  }
  if (!parsed || in.body_case() != wire::Envelope::kHello) {
    w->set_status(CUDA_ERROR_INVALID_VALUE);
    w->set_error("malformed handshake: expected Hello");
  } else if (in.hello().protocol_version() != kProtocolVersion) {
    w->set_status(CUDA_ERROR_NOT_SUPPORTED);
    w->set_error("protocol version " + std::to_string(in.hello().protocol_version()) +
                 " not supported; this server speaks " + std::to_string(kProtocolVersion));
  } else if (!refusal_.empty()) {
    w->set_status(CUDA_ERROR_DEVICE_UNAVAILABLE);
    w->set_error(refusal_);
  } else if (Status admit = Admit(in.hello().credential()); !admit.ok()) {
    // Refused before anything is created for it.
    w->set_status(CUDA_ERROR_NOT_PERMITTED);
    w->set_error(admit.message());
  } else {
    std::lock_guard<std::mutex> lock(name_mu_);
    client_name_ = in.hello().client_name() + " (pid " + std::to_string(in.hello().pid()) + ")";
    client_pid_ = in.hello().pid();
    if (tenant_ != nullptr && !tenant_->name.empty()) client_name_ += " of tenant " + tenant_->name;
    if (hosts_ == nullptr) {
      FillWelcome(w);
    } else if (Status h = RedirectToHost(w); !h.ok()) {
      w->set_status(CUDA_ERROR_DEVICE_UNAVAILABLE);
      w->set_error("no process for the session: " + h.message());
    }
  }
  if (w->status() == 0) {
    std::lock_guard<std::mutex> lock(abort_mu_);
    abort_channel_ = channel_.get();
  }
  channel_->Send(out.SerializeAsString(), nullptr, 0);
  if (w->status() != 0) {
    RGPU_LOG_WARN("session %llu: refused %s: %s", (unsigned long long)id_, channel_->peer().c_str(),
                  w->error().c_str());
    return false;
  }
  admitted_at_ = std::chrono::steady_clock::now();
  admitted_.store(true);
  if (admitted_hook_) admitted_hook_();
  return true;
}

void Session::FillWelcome(wire::Welcome* w) {
  w->set_driver_version(devices_.driver_version());
  w->set_backend(devices_.backend());
  for (int index : visible_) {
    wire::DeviceInfo* info = w->add_devices();
    *info = devices_.devices()[index];
    // Kernels have a run time limit (a watchdog), as CUDA reports for a display GPU.
    if (max_kernel_ms_ > 0 && CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT < info->attributes_size()) {
      info->set_attributes(CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT, 1);
    }
  }
  {
    if (liveness_ != nullptr) {
      const std::string key = RandomBytes(sizeof liveness_key_);
      if (key.size() == sizeof liveness_key_) memcpy(&liveness_key_, key.data(), key.size());
      const std::string secret = RandomBytes(kKeepaliveSecretBytes);
      liveness_->Admit(liveness_key_, secret);
      w->set_liveness_port(liveness_->port());
      w->set_liveness_key(liveness_key_);
      w->set_liveness_secret(secret);
      // A client that is gone (its keepalive connection closed) or, with a client timeout,
      // silent has its session's waits ended and its kernels stopped, even while the session's
      // thread is inside a long wait (Run's own check only runs between messages). Forgotten in
      // Run before the channel goes.
      liveness_->Watch(liveness_key_, client_timeout_ms_,
                       [this](const std::string& reason) { Abort(reason); });
    }
    if (lane_joiner_ && max_lanes_ > 0) {
      lane_key_ = RandomBytes(16);
      w->set_lane_key(lane_key_);
      w->set_max_lanes(max_lanes_);
    }
  }
}

Status Session::Challenge(const wire::Credential& presented, Admission* admission) {
  wire::Envelope challenge;
  const std::string nonce = RandomBytes(kChallengeNonceBytes);
  if (nonce.size() != kChallengeNonceBytes) return Internal("no random bytes for the challenge");
  challenge.mutable_challenge()->set_nonce(nonce);
  Status s = channel_->Send(challenge.SerializeAsString(), nullptr, 0);
  if (!s.ok()) return s;
  ReceivedMessage m;
  s = channel_->Receive(kHandshakeTimeoutMs, &m);
  if (!s.ok()) return s;
  wire::Envelope answer;
  if (!answer.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())) ||
      answer.body_case() != wire::Envelope::kChallengeResponse) {
    return PermissionDenied("expected the proof of the credential");
  }
  return tenants_->Admit(presented, nonce, answer.challenge_response().proof(), admission);
}

Status Session::Admit(const wire::Credential& presented) {
  const int device_count = static_cast<int>(devices_.devices().size());
  std::vector<int> visible;
  for (int i = 0; i < device_count; ++i) visible.push_back(i);
  Admission admission;
  if (tenants_ != nullptr && tenants_->refuses_everyone()) {
    return PermissionDenied(kRefusesEveryoneReason);
  }
  if (tenants_ != nullptr && tenants_->requires_tokens()) {
    Status s = Challenge(presented, &admission);
    if (!s.ok()) return s;
    if (admission.tenant == nullptr)
      return PermissionDenied("the operator's key opens no sessions");
    if (!admission.all_gpus) {
      // The token grants these devices, and the tenant sees only them, in this order.
      visible.clear();
      for (int g : admission.gpus) {
        if (g < 0 || g >= device_count) {
          return PermissionDenied("token grants GPU " + std::to_string(g) +
                                  ", which this server does not have");
        }
        if (std::find(visible.begin(), visible.end(), g) == visible.end()) visible.push_back(g);
      }
    }
  }
  std::lock_guard<std::mutex> lock(name_mu_);
  tenant_ = admission.tenant;
  lease_id_ = admission.lease_id;
  visible_ = std::move(visible);
  return Status::Ok();
}

bool Session::ServerDevice(uint64_t ordinal, int* index) const {
  if (ordinal >= visible_.size()) return false;
  *index = visible_[ordinal];
  return true;
}

bool Session::Serve(ReceivedMessage& m) {
  if (compact::IsCompact(m.header)) {
    if (!compact::DecodeCall(m.header, &compact_call_)) {
      CloseWithReason("malformed compact call (" + std::to_string(m.header.size()) + " bytes)");
      return false;
    }
    return ServeSingle(compact_call_, m, true);
  }
  // Decoded on an arena whose first block is the session's own: a message of a few calls costs
  // no allocation.
  google::protobuf::ArenaOptions arena_options;
  arena_options.initial_block = arena_block_;
  arena_options.initial_block_size = sizeof arena_block_;
  google::protobuf::Arena arena(arena_options);
  wire::Envelope& in = *google::protobuf::Arena::CreateMessage<wire::Envelope>(&arena);
  if (!in.ParseFromArray(m.header.data(), static_cast<int>(m.header.size()))) {
    RGPU_LOG_WARN("session %llu: malformed message (%zu bytes); closing session",
                  (unsigned long long)id_, m.header.size());
    wire::Envelope bye;
    bye.mutable_goodbye()->set_status(CUDA_ERROR_INVALID_VALUE);
    bye.mutable_goodbye()->set_reason("malformed message");
    channel_->Send(bye.SerializeAsString(), nullptr, 0);
    end_ = SessionEnd::kClosed;
    return false;
  }
  if (in.body_case() == wire::Envelope::kGoodbye) {
    // The program is exiting: what its exit path still sends is served until the connection
    // closes (its end is then the client's, not a loss). Any other goodbye ends the session now.
    client_said_goodbye_ = true;
    goodbye_reason_ = in.goodbye().reason().substr(0, 200);
    for (char& c : goodbye_reason_) {
      if (c < 0x20 || c > 0x7e) c = '?';  // the tenant's words, bound for the server's log
    }
    return in.goodbye().status() == 0;
  }
  if (in.body_case() == wire::Envelope::kCall) return ServeSingle(in.call(), m, false);
  if (in.body_case() != wire::Envelope::kBatch) {
    CloseWithReason("unexpected message kind " + std::to_string(in.body_case()) +
                    " in a running session");
    return false;
  }
  // A batch's payload is fetched only within the bound the client keeps (proto/ops.h); a larger
  // one is left where it waits in the transport, and dropped with the session.
  if (m.payload_size > kMaxBatchPayloadBytes) {
    CloseWithReason("a batch of " + std::to_string(m.payload_size) + " payload bytes (at most " +
                    std::to_string(kMaxBatchPayloadBytes) + ")");
    return false;
  }
  if (m.payload_pending) {
    Status s = channel_->FetchPayload(&m, nullptr);
    if (!s.ok()) {
      RGPU_LOG_INFO("session %llu: payload lost (%s)", (unsigned long long)id_,
                    s.ToString().c_str());
      return false;
    }
  }
  const wire::Batch& b = in.batch();
  // Each non-empty payload starts at the next 16-byte boundary (rgpu.proto, Batch).
  std::vector<uint64_t> offsets;
  uint64_t end = 0;
  bool valid = b.calls_size() == b.payload_sizes_size();
  for (int i = 0; valid && i < b.payload_sizes_size(); ++i) {
    const uint64_t start = b.payload_sizes(i) == 0 ? end : (end + 15) & ~uint64_t{15};
    valid = start <= m.payload_size && b.payload_sizes(i) <= m.payload_size - start;
    end = start + (valid ? b.payload_sizes(i) : 0);
    offsets.push_back(start);
    // Only the last call may wait for a reply.
    if (i + 1 < b.calls_size() && !b.calls(i).posted()) valid = false;
  }
  if (!valid || end != m.payload_size) {
    CloseWithReason("malformed batch (" + std::to_string(b.calls_size()) + " calls, " +
                    std::to_string(b.payload_sizes_size()) + " sizes, " +
                    std::to_string(m.payload_size) + " payload bytes)");
    return false;
  }
  for (int i = 0; i < b.calls_size(); ++i) {
    if (!ServeCall(b.calls(i), m.payload + offsets[i], b.payload_sizes(i))) return false;
  }
  return true;
}

bool Session::ServeSingle(const wire::Call& call, ReceivedMessage& m, bool compact_reply) {
  // A name, an image or launch parameters, within their bound, is fetched now. Data (a copy's
  // bytes, a link input, a graph) waits until its call has been checked (TakePayload).
  const auto takes_now = [&] {
    const OpInfo* info = FindOp(call.op());
    return info != nullptr && info->payload_in != PayloadKind::kData &&
           m.payload_size <= LargestPayload(call.op());
  };
  if (m.payload_pending && takes_now()) {
    Status s = channel_->FetchPayload(&m, nullptr);
    if (!s.ok()) {
      RGPU_LOG_INFO("session %llu: payload lost (%s)", (unsigned long long)id_,
                    s.ToString().c_str());
      return false;
    }
  }
  unfetched_ = m.payload_pending ? &m : nullptr;
  const bool ok = ServeCall(call, m.payload, m.payload_size, compact_reply);
  unfetched_ = nullptr;
  return ok;
}

uint64_t Session::LargestPayload(uint32_t op) const {
  const OpInfo* info = FindOp(op);
  if (info == nullptr) return 0;
  switch (static_cast<Op>(op)) {
    case Op::kLinkCreate:  // its options, far less
    case Op::kLinkAddData:
      return limits_.max_module_bytes;
    case Op::kGraphRecord:
      return limits_.max_graph_bytes;
    default:
      break;
  }
  switch (info->payload_in) {
    case PayloadKind::kNone:
      return 0;
    case PayloadKind::kName:
      return kMaxNameBytes;
    case PayloadKind::kImage:
      return limits_.max_module_bytes;
    case PayloadKind::kParams:
      return kMaxParamsBytes;
    case PayloadKind::kData:
      break;
  }
  return UINT64_MAX;  // a copy's: its row checks its size against its arguments (TakePayload)
}

CUresult Session::TakePayload(CallState& cs, Op op) {
  if (cs.unfetched == nullptr || op == Op::kMemcpyHtoD) return CUDA_SUCCESS;
  Status s = channel_->FetchPayload(cs.unfetched, nullptr);
  if (!s.ok()) {
    cs.detail = "payload lost: " + s.ToString();
    return CUDA_ERROR_UNKNOWN;
  }
  cs.payload = cs.unfetched->payload;
  cs.unfetched = nullptr;
  return CUDA_SUCCESS;
}

CUresult Session::RunCall(const wire::Call& call, CallState& cs) {
  const OpInfo* info = FindOp(call.op());
  AddOwned(calls_by_op_[info != nullptr && call.op() < calls_by_op_.size() ? call.op() : 0], 1);
  if (info == nullptr) {
    cs.detail = "unknown operation " + std::to_string(call.op());
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (call.args_size() != info->arg_count) {
    cs.detail = std::string(info->name) + " takes " + std::to_string(info->arg_count) +
                " arguments, got " + std::to_string(call.args_size());
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (call.posted() && info->mode != CallMode::kAsync) {
    cs.detail = std::string(info->name) + " cannot be posted";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (info->payload_in == PayloadKind::kNone && cs.payload_size != 0) {
    cs.detail = std::string(info->name) + " takes no payload";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (info->payload_in == PayloadKind::kName &&
      (cs.payload_size == 0 || cs.payload_size > kMaxNameBytes)) {
    cs.detail = std::string(info->name) + " needs a name of at most 4 KiB";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (cs.payload_size > LargestPayload(call.op())) {
    cs.detail = std::string(info->name) + " takes at most " +
                std::to_string(LargestPayload(call.op())) + " bytes of payload, got " +
                std::to_string(cs.payload_size);
    // An image past the module bound is one the server will not load, as the driver says of
    // one it cannot; a graph past the session's room for graphs is refused as its handler
    // refuses one that does not fit beside the others.
    if (info->payload_in == PayloadKind::kImage) return CUDA_ERROR_INVALID_IMAGE;
    if (call.op() == static_cast<uint32_t>(Op::kGraphRecord)) return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_ERROR_INVALID_VALUE;
  }
  const Op op = static_cast<Op>(call.op());
  if (info->context == ContextUse::kInContext) {
    cs.ctx_id = call.ctx();
    cs.ctx = contexts_.Find(call.ctx());
    if (cs.ctx == nullptr) {
      if (auto unmade = unmade_contexts_.find(call.ctx()); unmade != unmade_contexts_.end()) {
        cs.detail = "the context's posted creation failed";
        return unmade->second;
      }
      cs.detail = "no such context";
      return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (stopped_pending_.load()) AbsorbStoppedContexts();
    if (cs.ctx->destroyed) {
      cs.detail = "the context was destroyed when its kernel was stopped";
      return stopped_error_.load();
    }
    if (CUresult r = MakeCurrent(cs.ctx); r != CUDA_SUCCESS) return r;
  }
  if (scheduler_ == nullptr || !info->moves_memory) return AfterStops(cs, Dispatch(op, cs));
  // Metered (--fair-share): how long the tenant's copies and memsets keep the server busy.
  const auto start = std::chrono::steady_clock::now();
  const CUresult r = Dispatch(op, cs);
  const int device = cs.ctx != nullptr ? cs.ctx->device : std::max(device_.load(), 0);
  if (device < kMaxShareDevices) {
    device_copy_seconds_[device].fetch_add(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return AfterStops(cs, r);
}

CUresult Session::AfterStops(CallState& cs, CUresult r) {
  // A call on a context that a kernel turn's keeper destroyed meanwhile fails as calls on that
  // context do from now on (a synchronization it ended returns without the work done).
  if (stopped_error_.load() == CUDA_SUCCESS) return r;
  AbsorbStoppedContexts();
  if (cs.ctx == nullptr || !cs.ctx->destroyed) return r;
  cs.detail = "the context was destroyed when its kernel was stopped";
  return stopped_error_.load();
}

double Session::GpuBusySeconds() const {
  double busy = 0;
  for (const auto& seconds : device_busy_seconds_) busy += seconds.load();
  return busy;
}

void Session::StopContexts(bool late) {
  CUresult none = CUDA_SUCCESS;
  stopped_error_.compare_exchange_strong(
      none, late ? CUDA_ERROR_LAUNCH_TIMEOUT : CUDA_ERROR_LAUNCH_FAILED);
  std::lock_guard<std::mutex> lock(abort_mu_);
  if (live_contexts_.empty()) return;
  RGPU_LOG_WARN("session %llu: %s; destroying its contexts", (unsigned long long)id_,
                late ? "a kernel ran past --max-kernel-ms" : "its client is gone");
  // No turn touches its context again (its gate words go with it).
  for (KernelTurns* turns : turns_) turns->ContextGone();
  // Said before they are destroyed: a call that the destruction ends (a synchronization) must
  // find its context stopped (AfterStops; the session's thread then waits for abort_mu_).
  std::vector<CUcontext> doomed;
  doomed.swap(live_contexts_);
  stopped_contexts_.insert(stopped_contexts_.end(), doomed.begin(), doomed.end());
  stopped_pending_.store(true);
  for (CUcontext ctx : doomed) {
    auto change = DeviceMemoryChange();
    drv_.cuCtxDestroy(ctx);
  }
}

void Session::AbsorbStoppedContexts() {
  if (!stopped_pending_.exchange(false)) return;
  std::vector<CUcontext> stopped;
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    stopped.swap(stopped_contexts_);
  }
  for (auto& [id, rec] : contexts_.records()) {
    if (std::find(stopped.begin(), stopped.end(), rec.context) != stopped.end()) {
      rec.destroyed = true;
    }
  }
  if (std::find(stopped.begin(), stopped.end(), current_) != stopped.end()) current_ = nullptr;
}

KernelTurns* Session::TurnsOf(ContextRecord* ctx) {
  if (ctx->turns != nullptr) return ctx->turns.get();
  TurnTaker* scheduler = scheduler_->Of(ctx->device);
  if (scheduler == nullptr || !KernelTurns::Supported(drv_)) return nullptr;
  // softgpu bounds each kernel itself (softgpuCtxSetKernelTimeout) and stops the kernels of an
  // aborted session (softgpuCtxAbort); on other backends the keeper gives up on them.
  const bool backend_stops = drv_.softgpuCtxAbort != nullptr;
  KernelTurns::Meter meter{&device_busy_seconds_[ctx->device], &queue_seconds_};
  ctx->turns = std::make_unique<KernelTurns>(
      drv_, ctx->context, scheduler, account(), meter, backend_stops ? 0 : max_kernel_ms_,
      backend_stops ? nullptr : &aborted_, [this](bool late) { StopContexts(late); });
  std::lock_guard<std::mutex> lock(abort_mu_);
  turns_.push_back(ctx->turns.get());
  return ctx->turns.get();
}

bool Session::ServeCall(const wire::Call& call, char* payload, size_t payload_size,
                        bool compact_reply) {
  AddOwned(bytes_in_, payload_size);
  if (!call.posted()) AddOwned(waited_calls_, 1);
  // One reply envelope, cleared and refilled for every call (no allocation once warm).
  wire::Reply* reply = reply_envelope_.mutable_reply();
  reply->Clear();
  reply->set_seq(call.seq());
  // A move asked for happens here, at a call the client waits for: everything it sent before
  // has been served, and it sends nothing more until it has this call's answer.
  if (!call.posted() && move_pending_.load(std::memory_order_relaxed) &&
      MoveAt(call) == MoveOutcome::kMoved) {
    return false;
  }
  CallState cs;
  cs.call = &call;
  cs.payload = payload;
  cs.payload_size = payload_size;
  cs.unfetched = unfetched_;
  cs.reply = reply;
  const CUresult result = RunCall(call, cs);
  executed_seq_ = std::max(executed_seq_, call.seq());  // lanes wait for it (state_mu_ held)
  const OpInfo* info = FindOp(call.op());
  if (result != CUDA_SUCCESS && LogEnabled(LogLevel::kDebug)) {
    std::string args;
    for (int i = 0; i < call.args_size() && i < 8; ++i) {
      char word[24];
      snprintf(word, sizeof word, "%s%#llx", i == 0 ? "" : ", ",
               static_cast<unsigned long long>(call.args(i)));
      args += word;
    }
    RGPU_LOG_DEBUG("session %llu: %s(%s) -> %d %s", (unsigned long long)id_,
                   info ? info->name : "?", args.c_str(), result, cs.detail.c_str());
  }
  if (result != CUDA_SUCCESS && call.op() == static_cast<uint32_t>(Op::kMemcpyDtoHPosted) &&
      call.args_size() == 4) {
    // A posted read that failed (its checks, or the copy): the client stops waiting for it.
    SendRead(call.args(3), result, nullptr, 0);
  }
  if (call.posted()) {
    // No reply: the failure waits for the next one.
    if (result != CUDA_SUCCESS && async_error_ == CUDA_SUCCESS) {
      async_error_ = result;
      async_error_detail_ = std::string(info ? info->name : "?") + ": " + cs.detail;
      async_error_ctx_ = call.ctx();
    }
    return true;
  }
  reply->set_result(result);
  if (result != CUDA_SUCCESS) {
    if (!cs.detail.empty()) reply->set_message(cs.detail);
    cs.out_size = 0;
  }
  // The bytes of posted reads the work waited for (or any other) go before the reply.
  if (!posted_reads_.empty()) SendFinishedReads();
  ReportPending(reply);
  AddOwned(bytes_out_, cs.out_size);
  if (compact_reply && compact::IsPlain(*reply)) {
    compact::EncodeReply(*reply, &reply_bytes_);
  } else {
    reply_envelope_.SerializeToString(&reply_bytes_);
  }
  Status s = channel_->Send(reply_bytes_, cs.out_payload, cs.out_size);
  return s.ok();
}

void Session::ReportPending(wire::Reply* reply) {
  if (stdout_capture_ != nullptr) {
    std::string printed;
    stdout_capture_->Drain(&printed);
    if (!printed.empty()) OnDeviceOutput(this, printed.data(), printed.size());
  }
  if (device_output_waiting_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(output_mu_);
    if (!device_output_.empty()) {
      reply->set_device_output(std::move(device_output_));
      device_output_.clear();
    }
    device_output_waiting_.store(false, std::memory_order_relaxed);
  }
  if (async_error_ != CUDA_SUCCESS) {
    reply->set_async_error(async_error_);
    reply->set_async_error_detail(async_error_detail_);
    reply->set_async_error_ctx(async_error_ctx_);
    async_error_ = CUDA_SUCCESS;
    async_error_detail_.clear();
  }
}

void Session::OnDeviceOutput(void* session, const char* data, size_t size) {
  auto* self = static_cast<Session*>(session);
  constexpr size_t kMaxPending = 8 << 20;  // a tenant that never synchronizes loses the excess
  std::lock_guard<std::mutex> lock(self->output_mu_);
  self->device_output_.append(
      data, std::min(size, kMaxPending - std::min(kMaxPending, self->device_output_.size())));
  self->device_output_waiting_.store(true, std::memory_order_release);
}

CUresult Session::MakeCurrent(ContextRecord* ctx) {
  if (current_ == ctx->context) return CUDA_SUCCESS;
  CUresult r = drv_.cuCtxSetCurrent(ctx->context);
  if (r == CUDA_SUCCESS) current_ = ctx->context;
  return r;
}

CUresult Session::CreateContext(int device, bool primary, uint64_t* id, uint64_t chosen_id) {
  if (device < 0 || device >= static_cast<int>(devices_.devices().size())) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  CUdevice dev = 0;
  CUresult r = drv_.cuDeviceGet(&dev, device);
  if (r != CUDA_SUCCESS) return r;
  CUcontext ctx = nullptr;
  r = drv_.cuCtxCreate(&ctx, nullptr, 0, dev);
  if (r != CUDA_SUCCESS) return r;
  current_ = ctx;  // cuCtxCreate makes the new context current
  if (max_kernel_ms_ > 0 && drv_.softgpuCtxSetKernelTimeout != nullptr) {
    drv_.softgpuCtxSetKernelTimeout(ctx, max_kernel_ms_);
  }
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    live_contexts_.push_back(ctx);
  }
  if (drv_.softgpuCtxSetPrintfHandler != nullptr) {
    drv_.softgpuCtxSetPrintfHandler(ctx, &Session::OnDeviceOutput, this);
  }
  ContextRecord rec;
  rec.context = ctx;
  rec.device = device;
  rec.primary = primary;
  if (drv_.cuCtxGetLimit != nullptr) {
    const CUlimit limits[kChargedLimits] = {CU_LIMIT_MALLOC_HEAP_SIZE, CU_LIMIT_STACK_SIZE,
                                            CU_LIMIT_PRINTF_FIFO_SIZE};
    for (int i = 0; i < kChargedLimits; ++i) {
      size_t value = 0;
      if (drv_.cuCtxGetLimit(&value, limits[i]) == CUDA_SUCCESS) rec.limit_default[i] = value;
    }
  }
  if (chosen_id != 0) {
    if (!contexts_.Restore(chosen_id, std::move(rec))) {
      {
        std::lock_guard<std::mutex> lock(abort_mu_);
        std::erase(live_contexts_, ctx);
      }
      drv_.cuCtxDestroy(ctx);
      current_ = nullptr;
      return CUDA_ERROR_INVALID_VALUE;
    }
    *id = chosen_id;
  } else {
    *id = contexts_.Insert(std::move(rec));
  }
  if (device_.load() < 0) device_.store(device);
  NoteContextDevices();
  return CUDA_SUCCESS;
}

void Session::NoteContextDevices() {
  uint64_t mask = 0;
  for (const auto& [id, rec] : contexts_.records()) {
    if (rec.device >= 0 && rec.device < 64) mask |= uint64_t{1} << rec.device;
  }
  context_devices_.store(mask);
}

void Session::DestroyContext(uint64_t id) {
  if (contexts_.Find(id) == nullptr) return;
  FinishReadsOf(id);
  AwaitLaneWaits([id](const LaneWait& w) { return w.ctx == id; });
  ContextRecord* rec = contexts_.Find(id);  // again: the wait may have let lanes look things up
  if (rec == nullptr) return;
  // The backend frees everything that lived in the context; forget it here too.
  ForgetPoolBlocks(id);
  DestroyLinks(id);
  ForgetArrays(id);
  for (auto it = allocations_.begin(); it != allocations_.end();) {
    if (it->second.ctx == id) {
      // A restored allocation leaves its span, which goes with its last one (a span that
      // several contexts' allocations share would otherwise stay mapped, uncharged).
      if (restored_in_span_.count(it->first)) {
        ReleaseAllocationMemory(it->first, it->second.size, rec->device);
      } else if (it->second.freeable) {
        UnchargeMemory(it->first, it->second.size, rec->device);
      }
      if (it->second.import_pool != 0) {
        if (PoolRecord* pool = pools_.Find(it->second.import_pool)) --pool->imported_pointers;
      }
      it = allocations_.erase(it);  // an import's mapping goes with the context
    } else {
      ++it;
    }
  }
  for (auto& [event_id, event] : events_.records()) {
    if (event.ctx == id) RevokeEventExport(event);
  }
  // Destroyed streams' events go with their context.
  std::erase_if(draining_streams_, [id](const DrainingStream& d) { return d.ctx == id; });
  for (const auto& [module_id, module] : modules_.records()) {
    if (module.ctx == id) Uncharge(rec->device, module.charged);
  }
  for (uint64_t charge : rec->limit_charge) Uncharge(rec->device, charge);
  auto erase_in_ctx = [id](auto& table) {
    for (auto it = table.records().begin(); it != table.records().end();) {
      it = it->second.ctx == id ? table.records().erase(it) : std::next(it);
    }
  };
  erase_in_ctx(modules_);
  erase_in_ctx(functions_);
  erase_in_ctx(streams_);
  erase_in_ctx(events_);
  if (rec->primary) primary_by_device_.erase(rec->device);
  if (rec->turns != nullptr) rec->turns->Stop();  // its gates open: nothing waits on them
  bool live = false;  // not destroyed by a kernel turn's keeper meanwhile
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    live = std::erase(live_contexts_, rec->context) > 0;
    std::erase(turns_, rec->turns.get());
  }
  ReleaseRestoredSpans(id);  // mapped memory outlives its context otherwise
  if (!rec->destroyed && live) {
    auto change = DeviceMemoryChange();
    drv_.cuCtxDestroy(rec->context);
  }
  // Its gates' page-locked words went with it (as CUDA frees a context's page-locked memory):
  // the turns' destructor must not open them again.
  if (rec->turns != nullptr) rec->turns->ContextGone();
  if (current_ == rec->context) current_ = nullptr;
  contexts_.Erase(id);
  NoteContextDevices();
}

void Session::ReleaseAll() {
  ReleaseVirtualMemory();
  ReleaseRestoredSpans(0);
  std::vector<uint64_t> ids;
  for (auto& [id, rec] : contexts_.records()) ids.push_back(id);
  for (uint64_t id : ids) DestroyContext(id);
  drv_.cuCtxSetCurrent(nullptr);
  current_ = nullptr;
}

std::unique_lock<std::mutex> Session::DeviceMemoryChange() {
  const bool measured = drv_.softgpuModuleGetFootprint == nullptr;
  if (!measured || memory_lock_ == nullptr) return std::unique_lock<std::mutex>();
  return std::unique_lock<std::mutex>(*memory_lock_);
}

bool Session::Charge(CallState& cs, int device, uint64_t bytes, const std::string& what) {
  if (bytes == 0) return true;
  if (tenant_ != nullptr && !tenant_->Reserve(bytes)) {
    cs.detail = "tenant " + tenant_->name + "'s memory quota (" +
                std::to_string(tenant_->memory_quota) + " bytes, " +
                std::to_string(tenant_->memory_used.load()) + " in use) cannot hold " + what +
                " (" + std::to_string(bytes) + " bytes)";
    return false;
  }
  live_bytes_ += bytes;
  if (device >= 0 && static_cast<size_t>(device) < device_bytes_.size()) {
    device_bytes_[device] += bytes;
  }
  return true;
}

void Session::Uncharge(int device, uint64_t bytes) {
  if (bytes == 0) return;
  live_bytes_ -= bytes;
  if (device >= 0 && static_cast<size_t>(device) < device_bytes_.size()) {
    device_bytes_[device] -= bytes;
  }
  if (tenant_ != nullptr) tenant_->Release(bytes);
}

int Session::DeviceOf(uint64_t ctx_id) {
  const ContextRecord* rec = contexts_.Find(ctx_id);
  return rec != nullptr ? rec->device : -1;
}

CUresult Session::RoomFor(CallState& cs, size_t count, uint32_t limit, const char* what) {
  if (count < limit) return CUDA_SUCCESS;
  cs.detail = std::string("this session holds ") + std::to_string(count) + " " + what +
              ", the server's limit";
  return CUDA_ERROR_OUT_OF_MEMORY;
}

}  // namespace rgpu::server
