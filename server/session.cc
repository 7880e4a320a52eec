#include "server/session.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include <google/protobuf/arena.h>

#include "common/fatbin.h"
#include "common/log.h"
#include "proto/crypto.h"
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
// A driver call that the backend library does not provide.
#define REQUIRE_FN(fn)                  \
  do {                                  \
    if (drv_.fn == nullptr) {           \
      cs.detail = "backend lacks " #fn; \
      return CUDA_ERROR_NOT_SUPPORTED;  \
    }                                   \
  } while (0)

bool OpNeedsContext(Op op) {
  switch (op) {
    case Op::kCtxCreate:
    case Op::kCtxDestroy:
    case Op::kPrimaryCtxRetain:
    case Op::kPrimaryCtxRelease:
    case Op::kPrimaryCtxReset:
    case Op::kBarrier:
      return false;
    default:
      return true;
  }
}

}  // namespace

Session::Session(uint64_t id, const CudaDriver& driver, const DeviceCatalog& devices,
                 std::unique_ptr<Channel> channel, TenantTable* tenants, std::string refusal,
                 FairScheduler* scheduler)
    : id_(id),
      drv_(driver),
      devices_(devices),
      channel_(std::move(channel)),
      tenants_(tenants),
      refusal_(std::move(refusal)),
      scheduler_(scheduler) {}

wire::SessionStats Session::Stats() const {
  wire::SessionStats st;
  st.set_session_id(id_);
  {
    std::lock_guard<std::mutex> lock(name_mu_);
    st.set_client(client_name_);
    if (tenant_ != nullptr) st.set_tenant(tenant_->name);
    st.set_lease_id(lease_id_);
  }
  st.set_memory_bytes(live_bytes_.load());
  st.set_gpu_busy_seconds(gpu_busy_seconds_.load());
  st.set_calls(calls_.load());
  for (size_t op = 1; op < calls_by_op_.size(); ++op) {
    const uint64_t n = calls_by_op_[op].load(std::memory_order_relaxed);
    const OpInfo* info = FindOp(static_cast<uint32_t>(op));
    if (n > 0 && info != nullptr) (*st.mutable_calls_by_kind())[info->name] = n;
  }
  st.set_queue_seconds(queue_seconds_.load());
  st.set_device(device_.load());
  st.set_bytes_in(bytes_in_.load());
  st.set_bytes_out(bytes_out_.load());
  {
    std::lock_guard<std::mutex> lock(name_mu_);  // Run drops the channel under it
    if (channel_ != nullptr) st.set_queue_depth(channel_->queued());
  }
  return st;
}

ShareAccount* Session::account() { return tenant_ != nullptr ? &tenant_->share : &own_account_; }

Session::~Session() { ReleaseAll(); }

void Session::Run(const std::atomic<bool>& stop) {
  if (!Handshake()) {
    ReleaseAll();
    return;
  }
  RGPU_LOG_INFO("session %llu: %s from %s connected", (unsigned long long)id_, client_name_.c_str(),
                channel_->peer().c_str());
  ReceivedMessage m;  // reused: Receive swaps header buffers with the channel
  while (!stop.load()) {
    Status s = channel_->Receive(200, &m);
    if (s.code() == Status::Code::kTimeout) {
      const int64_t silent =
          liveness_ != nullptr && client_timeout_ms_ > 0 ? liveness_->SilentMs(liveness_key_) : -1;
      if (silent > client_timeout_ms_) {
        CloseWithReason("client sent no keepalive for " + std::to_string(silent) + " ms");
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
      RGPU_LOG_INFO("session %llu: client gone (%s)", (unsigned long long)id_,
                    s.ToString().c_str());
      break;
    }
    if (!Serve(m)) break;
  }
  if (stop.load() && !channel_->broken()) {
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
  RGPU_LOG_INFO("session %llu: closed after %llu calls; released %llu allocations (%llu bytes)",
                (unsigned long long)id_, (unsigned long long)calls_.load(),
                (unsigned long long)allocs, (unsigned long long)bytes);
  if (scheduler_ != nullptr) {
    // Metering: the GPU time this session's kernels were measured to take.
    RGPU_LOG_INFO("session %llu: tenant %s gpu_busy_ms %.3f", (unsigned long long)id_,
                  tenant_ != nullptr ? tenant_->name.c_str() : "-", gpu_busy_seconds_.load() * 1e3);
  }
}

void Session::Abort(const std::string& reason) {
  if (aborted_.exchange(true)) return;
  RGPU_LOG_WARN("session %llu: stopping its work: %s", (unsigned long long)id_, reason.c_str());
  std::lock_guard<std::mutex> lock(abort_mu_);
  if (abort_channel_ != nullptr) abort_channel_->Abandon(reason);
  if (drv_.softgpuCtxAbort != nullptr) {
    for (CUcontext ctx : live_contexts_) drv_.softgpuCtxAbort(ctx);
  }
  // Other backends: a kernel waited for in its turn (--fair-share) is given up on by the session's
  // own thread, which sees aborted_ (WaitForKernel) and destroys the context.
}

void Session::CloseWithReason(const std::string& reason) {
  RGPU_LOG_WARN("session %llu: closing: %s", (unsigned long long)id_, reason.c_str());
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
    if (tenant_ != nullptr) client_name_ += " of tenant " + tenant_->name;
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
    if (liveness_ != nullptr) {
      const std::string key = RandomBytes(sizeof liveness_key_);
      if (key.size() == sizeof liveness_key_) memcpy(&liveness_key_, key.data(), key.size());
      liveness_->Admit(liveness_key_);
      w->set_liveness_port(liveness_->port());
      w->set_liveness_key(liveness_key_);
      // A client that is gone (its keepalive connection closed) or, with a client timeout,
      // silent has its session's waits ended and its kernels stopped, even while the session's
      // thread is inside a long wait (Run's own check only runs between messages). Forgotten in
      // Run before the channel goes.
      liveness_->Watch(liveness_key_, client_timeout_ms_,
                       [this](const std::string& reason) { Abort(reason); });
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
  admitted_.store(true);
  return true;
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
    return false;
  }
  if (in.body_case() == wire::Envelope::kGoodbye) return false;
  if (m.payload_pending && !(in.body_case() == wire::Envelope::kCall &&
                             in.call().op() == static_cast<uint32_t>(Op::kMemcpyHtoD))) {
    // Only host-to-device copies take their payload straight into device memory.
    Status s = channel_->FetchPayload(&m, nullptr);
    if (!s.ok()) {
      RGPU_LOG_INFO("session %llu: payload lost (%s)", (unsigned long long)id_,
                    s.ToString().c_str());
      return false;
    }
  }
  if (in.body_case() == wire::Envelope::kCall) {
    unfetched_ = m.payload_pending ? &m : nullptr;
    const bool ok = ServeCall(in.call(), m.payload, m.payload_size);
    unfetched_ = nullptr;
    return ok;
  }
  if (in.body_case() == wire::Envelope::kBatch) {
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
  CloseWithReason("unexpected message kind " + std::to_string(in.body_case()) +
                  " in a running session");
  return false;
}

bool Session::ServeCall(const wire::Call& call, char* payload, size_t payload_size) {
  AddOwned(calls_, 1);
  AddOwned(bytes_in_, payload_size);
  // One reply envelope, cleared and refilled for every call (no allocation once warm).
  wire::Reply* reply = reply_envelope_.mutable_reply();
  reply->Clear();
  reply->set_seq(call.seq());
  CallState cs;
  cs.call = &call;
  cs.payload = payload;
  cs.payload_size = payload_size;
  cs.unfetched = unfetched_;
  cs.reply = reply;
  CUresult result;
  const OpInfo* info = FindOp(call.op());
  if (info != nullptr && call.op() < calls_by_op_.size()) {
    AddOwned(calls_by_op_[call.op()], 1);
  }
  if (info == nullptr) {
    cs.detail = "unknown operation " + std::to_string(call.op());
    result = CUDA_ERROR_NOT_SUPPORTED;
  } else if (call.args_size() != info->arg_count) {
    cs.detail = std::string(info->name) + " takes " + std::to_string(info->arg_count) +
                " arguments, got " + std::to_string(call.args_size());
    result = CUDA_ERROR_INVALID_VALUE;
  } else if (call.posted() && info->mode != CallMode::kAsync) {
    cs.detail = std::string(info->name) + " cannot be posted";
    result = CUDA_ERROR_INVALID_VALUE;
  } else if (info->payload_in == PayloadKind::kNone && payload_size != 0) {
    cs.detail = std::string(info->name) + " takes no payload";
    result = CUDA_ERROR_INVALID_VALUE;
  } else {
    result = CUDA_SUCCESS;
    const Op op = static_cast<Op>(call.op());
    if (OpNeedsContext(op)) {
      cs.ctx_id = call.ctx();
      cs.ctx = contexts_.Find(call.ctx());
      if (cs.ctx == nullptr) {
        cs.detail = "no such context";
        result = CUDA_ERROR_INVALID_CONTEXT;
      } else if (cs.ctx->destroyed) {
        cs.detail = "the context was destroyed when its kernel was stopped";
        result = stopped_error_;
      } else {
        result = MakeCurrent(cs.ctx);
      }
    }
    if (result == CUDA_SUCCESS) result = Dispatch(op, cs);
  }
  if (result != CUDA_SUCCESS) {
    RGPU_LOG_DEBUG("session %llu: %s -> %d %s", (unsigned long long)id_, info ? info->name : "?",
                   result, cs.detail.c_str());
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
  {
    std::lock_guard<std::mutex> lock(output_mu_);
    if (!device_output_.empty()) {
      reply->set_device_output(std::move(device_output_));
      device_output_.clear();
    }
  }
  if (async_error_ != CUDA_SUCCESS) {
    reply->set_async_error(async_error_);
    reply->set_async_error_detail(async_error_detail_);
    reply->set_async_error_ctx(async_error_ctx_);
    async_error_ = CUDA_SUCCESS;
    async_error_detail_.clear();
  }
  AddOwned(bytes_out_, cs.out_size);
  reply_envelope_.SerializeToString(&reply_bytes_);
  Status s = channel_->Send(reply_bytes_, cs.out_payload, cs.out_size);
  return s.ok();
}

CUresult Session::Dispatch(Op op, CallState& cs) {
  switch (op) {
#define RGPU_OP(name, nargs, args, nres, res, in, out, mode) \
  case Op::k##name:                                          \
    return Handle##name(cs);
#include "proto/calls.def"
#undef RGPU_OP
    default:
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

void Session::OnDeviceOutput(void* session, const char* data, size_t size) {
  auto* self = static_cast<Session*>(session);
  constexpr size_t kMaxPending = 8 << 20;  // a tenant that never synchronizes loses the excess
  std::lock_guard<std::mutex> lock(self->output_mu_);
  self->device_output_.append(
      data, std::min(size, kMaxPending - std::min(kMaxPending, self->device_output_.size())));
}

void* Session::DirectAccess(CUdeviceptr dptr, size_t bytes, CUstream stream, CUresult* r) {
  *r = CUDA_SUCCESS;
  if (drv_.softgpuMemDirectAccess == nullptr || bytes < kDirectCopyBytes) return nullptr;
  void* host = nullptr;
  *r = drv_.softgpuMemDirectAccess(&host, dptr, bytes, stream);
  return *r == CUDA_SUCCESS ? host : nullptr;
}

char* Session::OutputBuffer(size_t bytes) {
  if (bytes > output_capacity_) {
    output_.reset(new (std::nothrow) char[bytes]);
    output_capacity_ = output_ ? bytes : 0;
  }
  return output_.get();
}

CUresult Session::MakeCurrent(ContextRecord* ctx) {
  if (current_ == ctx->context) return CUDA_SUCCESS;
  CUresult r = drv_.cuCtxSetCurrent(ctx->context);
  if (r == CUDA_SUCCESS) current_ = ctx->context;
  return r;
}

bool Session::OwnsRange(uint64_t ctx_id, CUdeviceptr ptr, size_t bytes) const {
  auto it = allocations_.upper_bound(ptr);
  if (it == allocations_.begin()) return false;
  --it;
  const CUdeviceptr base = it->first;
  const Allocation& a = it->second;
  if (a.ctx != ctx_id) return false;
  if (ptr < base || ptr - base > a.size) return false;
  return bytes <= a.size - (ptr - base);
}

bool Session::ResolveStream(const CallState& cs, uint64_t id, CUstream* out) {
  if (id == 0) {
    *out = nullptr;
    return true;
  }
  StreamRecord* s = streams_.Find(id);
  if (s == nullptr || s->ctx != cs.ctx_id) return false;
  *out = s->stream;
  return true;
}

CUresult Session::AfterStreamWork(const CallState& cs, uint64_t stream_id) {
  CUstream stream = nullptr;
  if (!ResolveStream(cs, stream_id, &stream)) return CUDA_ERROR_INVALID_HANDLE;
  return stream != nullptr ? drv_.cuStreamSynchronize(stream) : CUDA_SUCCESS;
}

CUresult Session::CreateContext(int device, bool primary, uint64_t* id) {
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
  *id = contexts_.Insert(rec);
  if (device_.load() < 0) device_.store(device);
  return CUDA_SUCCESS;
}

void Session::DestroyContext(uint64_t id) {
  ContextRecord* rec = contexts_.Find(id);
  if (rec == nullptr) return;
  // The backend frees everything that lived in the context; forget it here too.
  for (auto it = allocations_.begin(); it != allocations_.end();) {
    if (it->second.ctx == id) {
      if (it->second.freeable) Uncharge(it->second.size);
      it = allocations_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [module_id, module] : modules_.records()) {
    if (module.ctx == id) Uncharge(module.charged);
  }
  for (uint64_t charge : rec->limit_charge) Uncharge(charge);
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
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    std::erase(live_contexts_, rec->context);
  }
  if (!rec->destroyed) {
    auto change = DeviceMemoryChange();
    drv_.cuCtxDestroy(rec->context);
  }
  if (current_ == rec->context) current_ = nullptr;
  contexts_.Erase(id);
}

void Session::ReleaseAll() {
  std::vector<uint64_t> ids;
  for (auto& [id, rec] : contexts_.records()) ids.push_back(id);
  for (uint64_t id : ids) DestroyContext(id);
  drv_.cuCtxSetCurrent(nullptr);
  current_ = nullptr;
}

// ---- Contexts ----

CUresult Session::HandleCtxCreate(CallState& cs) {
  if (CUresult r = RoomFor(cs, contexts_.size(), limits_.max_contexts, "contexts");
      r != CUDA_SUCCESS) {
    return r;
  }
  uint64_t id = 0;
  int device = 0;
  if (!ServerDevice(cs.arg(1), &device)) return CUDA_ERROR_INVALID_DEVICE;
  CUresult r = CreateContext(device, false, &id);
  if (r == CUDA_SUCCESS) cs.reply->add_values(id);
  return r;
}

CUresult Session::HandleCtxDestroy(CallState& cs) {
  ContextRecord* rec = contexts_.Find(cs.arg(0));
  if (rec == nullptr || rec->primary) return CUDA_ERROR_INVALID_CONTEXT;
  DestroyContext(cs.arg(0));
  return CUDA_SUCCESS;
}

CUresult Session::HandleCtxSynchronize(CallState& cs) { return drv_.cuCtxSynchronize(); }

// Every earlier call of this session has been served once this runs: nothing else to do.
CUresult Session::HandleBarrier(CallState& cs) { return CUDA_SUCCESS; }

CUresult Session::HandlePrimaryCtxRetain(CallState& cs) {
  int device = 0;
  if (!ServerDevice(cs.arg(0), &device)) return CUDA_ERROR_INVALID_DEVICE;
  auto it = primary_by_device_.find(device);
  uint64_t id = 0;
  if (it != primary_by_device_.end()) {
    id = it->second;
  } else {
    if (CUresult r = RoomFor(cs, contexts_.size(), limits_.max_contexts, "contexts");
        r != CUDA_SUCCESS) {
      return r;
    }
    CUresult r = CreateContext(device, true, &id);
    if (r != CUDA_SUCCESS) return r;
    primary_by_device_[device] = id;
  }
  contexts_.Find(id)->primary_refs++;
  cs.reply->add_values(id);
  return CUDA_SUCCESS;
}

CUresult Session::HandlePrimaryCtxRelease(CallState& cs) {
  int device = 0;
  if (!ServerDevice(cs.arg(0), &device)) return CUDA_ERROR_INVALID_DEVICE;
  auto it = primary_by_device_.find(device);
  if (it == primary_by_device_.end()) return CUDA_ERROR_INVALID_CONTEXT;
  ContextRecord* rec = contexts_.Find(it->second);
  if (--rec->primary_refs <= 0) DestroyContext(it->second);
  return CUDA_SUCCESS;
}

CUresult Session::HandlePrimaryCtxReset(CallState& cs) {
  int device = 0;
  if (!ServerDevice(cs.arg(0), &device)) return CUDA_ERROR_INVALID_DEVICE;
  auto it = primary_by_device_.find(device);
  if (it != primary_by_device_.end()) DestroyContext(it->second);
  return CUDA_SUCCESS;
}

// ---- Memory ----

CUresult Session::HandleMemAlloc(CallState& cs) {
  const size_t bytes = cs.arg(0);
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = RoomFor(cs, allocations_.size(), limits_.max_allocations, "allocations");
      r != CUDA_SUCCESS) {
    return r;
  }
  if (!Charge(cs, bytes, "the allocation")) return CUDA_ERROR_OUT_OF_MEMORY;
  CUdeviceptr p = 0;
  CUresult r;
  {
    auto change = DeviceMemoryChange();
    r = drv_.cuMemAlloc(&p, bytes);
  }
  if (r == CUDA_SUCCESS && scrub_allocations_) {
    // Device memory holds what its last user left there: zeroed before the tenant sees it, and
    // before any of its streams can (the legacy default stream orders the blocking ones).
    r = drv_.cuMemsetD8 != nullptr ? drv_.cuMemsetD8(p, 0, bytes) : CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS) r = drv_.cuStreamSynchronize(nullptr);
    if (r != CUDA_SUCCESS) {
      auto change = DeviceMemoryChange();
      drv_.cuMemFree(p);
    }
  }
  if (r != CUDA_SUCCESS) {
    Uncharge(bytes);
    return r;
  }
  allocations_[p] = Allocation{bytes, cs.ctx_id, true, 0};
  cs.reply->add_values(p);
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemFree(CallState& cs) {
  auto it = allocations_.find(cs.arg(0));
  if (it == allocations_.end() || !it->second.freeable || it->second.ctx != cs.ctx_id) {
    cs.detail = "not an allocation of this session";
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUresult r;
  {
    auto change = DeviceMemoryChange();
    r = drv_.cuMemFree(it->first);
  }
  if (r != CUDA_SUCCESS) return r;
  Uncharge(it->second.size);
  allocations_.erase(it);
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemGetInfo(CallState& cs) {
  size_t free_bytes = 0, total = 0;
  CUresult r = drv_.cuMemGetInfo(&free_bytes, &total);
  if (r != CUDA_SUCCESS) return r;
  if (tenant_ != nullptr) {
    // A tenant sees its quota as the device's memory.
    const uint64_t used = tenant_->memory_used.load();
    total = tenant_->memory_quota;
    free_bytes = std::min<uint64_t>(free_bytes, used < total ? total - used : 0);
  }
  cs.reply->add_values(free_bytes);
  cs.reply->add_values(total);
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemcpyHtoD(CallState& cs) {
  const CUdeviceptr dst = cs.arg(0);
  const size_t bytes = cs.arg(1);
  if (cs.payload_size != bytes) {
    cs.detail = "payload size does not match the copy size";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (bytes == 0) return CUDA_SUCCESS;
  if (!OwnsRange(cs.ctx_id, dst, bytes)) {
    cs.detail = "destination range is not memory of this session";
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUstream stream = nullptr;
  if (!ResolveStream(cs, cs.arg(2), &stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (cs.unfetched != nullptr) {
    // The payload is still with the sender: fetch it straight into device memory once the
    // copy's turn has come, or else into a buffer and copy as usual.
    CUresult r = CUDA_SUCCESS;
    void* direct = DirectAccess(dst, bytes, stream, &r);
    if (r != CUDA_SUCCESS) return r;
    Status s = channel_->FetchPayload(cs.unfetched, direct);
    if (!s.ok()) {
      cs.detail = "payload lost: " + s.ToString();
      return CUDA_ERROR_UNKNOWN;
    }
    if (direct != nullptr) return CUDA_SUCCESS;
    cs.payload = cs.unfetched->payload;
  }
  // The payload buffer is gone once this call returns, so the copy must have read it by then:
  // a synchronous copy ordered after the stream's earlier work.
  if (stream != nullptr) {
    CUresult r = drv_.cuStreamSynchronize(stream);
    if (r != CUDA_SUCCESS) return r;
  }
  return drv_.cuMemcpyHtoD(dst, cs.payload, bytes);
}

CUresult Session::HandleMemcpyDtoH(CallState& cs) {
  const CUdeviceptr src = cs.arg(0);
  const size_t bytes = cs.arg(1);
  if (bytes == 0) return CUDA_SUCCESS;
  if (!OwnsRange(cs.ctx_id, src, bytes)) {
    cs.detail = "source range is not memory of this session";
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUstream stream = nullptr;
  if (!ResolveStream(cs, cs.arg(2), &stream)) return CUDA_ERROR_INVALID_HANDLE;
  CUresult direct_result = CUDA_SUCCESS;
  if (void* direct = DirectAccess(src, bytes, stream, &direct_result)) {
    // Sent straight from device memory; the send completes before the next call runs.
    cs.out_payload = static_cast<char*>(direct);
    cs.out_size = bytes;
    return CUDA_SUCCESS;
  }
  if (direct_result != CUDA_SUCCESS) return direct_result;
  cs.out_payload = OutputBuffer(bytes);
  if (cs.out_payload == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r;
  if (stream != nullptr && drv_.cuMemcpyDtoHAsync != nullptr) {
    r = drv_.cuMemcpyDtoHAsync(cs.out_payload, src, bytes, stream);
    if (r == CUDA_SUCCESS) r = drv_.cuStreamSynchronize(stream);
  } else {
    r = drv_.cuMemcpyDtoH(cs.out_payload, src, bytes);
  }
  if (r == CUDA_SUCCESS) cs.out_size = bytes;
  return r;
}

CUresult Session::HandleMemcpyDtoD(CallState& cs) {
  const CUdeviceptr dst = cs.arg(0), src = cs.arg(1);
  const size_t bytes = cs.arg(2);
  if (bytes == 0) return CUDA_SUCCESS;
  if (!OwnsRange(cs.ctx_id, dst, bytes) || !OwnsRange(cs.ctx_id, src, bytes)) {
    cs.detail = "copy range is not memory of this session";
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUstream stream = nullptr;
  if (!ResolveStream(cs, cs.arg(3), &stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (cs.arg(4) != 0) {
    REQUIRE_FN(cuMemcpyDtoDAsync);
    return drv_.cuMemcpyDtoDAsync(dst, src, bytes, stream);
  }
  return drv_.cuMemcpyDtoD(dst, src, bytes);
}

CUresult Session::HandleMemset(CallState& cs) {
  const CUdeviceptr dst = cs.arg(0);
  const uint64_t value = cs.arg(1), element = cs.arg(2), count = cs.arg(3);
  if (element != 1 && element != 2 && element != 4) return CUDA_ERROR_INVALID_VALUE;
  if (count == 0) return CUDA_SUCCESS;
  uint64_t bytes = 0;
  if (!CheckedMul(count, element, &bytes) || !OwnsRange(cs.ctx_id, dst, bytes)) {
    cs.detail = "memset range is not memory of this session";
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUstream stream = nullptr;
  if (!ResolveStream(cs, cs.arg(4), &stream)) return CUDA_ERROR_INVALID_HANDLE;
  return MemsetElements(cs, dst, value, element, count, stream, cs.arg(5) != 0);
}

CUresult Session::MemsetElements(CallState& cs, CUdeviceptr dst, uint64_t value, uint64_t element,
                                 uint64_t count, CUstream stream, bool async) {
  switch (element) {
    case 1:
      if (async) {
        REQUIRE_FN(cuMemsetD8Async);
        return drv_.cuMemsetD8Async(dst, static_cast<unsigned char>(value), count, stream);
      }
      REQUIRE_FN(cuMemsetD8);
      return drv_.cuMemsetD8(dst, static_cast<unsigned char>(value), count);
    case 2:
      if (async) {
        REQUIRE_FN(cuMemsetD16Async);
        return drv_.cuMemsetD16Async(dst, static_cast<unsigned short>(value), count, stream);
      }
      REQUIRE_FN(cuMemsetD16);
      return drv_.cuMemsetD16(dst, static_cast<unsigned short>(value), count);
    default:
      if (async) {
        REQUIRE_FN(cuMemsetD32Async);
        return drv_.cuMemsetD32Async(dst, static_cast<unsigned int>(value), count, stream);
      }
      REQUIRE_FN(cuMemsetD32);
      return drv_.cuMemsetD32(dst, static_cast<unsigned int>(value), count);
  }
}

// ---- Modules and kernels ----

CUresult Session::HandleModuleLoadData(CallState& cs) {
  if (cs.payload_size == 0) return CUDA_ERROR_INVALID_IMAGE;
  if (cs.payload_size > limits_.max_module_bytes) {
    cs.detail = "module image of " + std::to_string(cs.payload_size) + " bytes is larger than " +
                std::to_string(limits_.max_module_bytes) + " (the server's --max-module-mib)";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  if (CUresult r = RoomFor(cs, modules_.size(), limits_.max_modules, "modules"); r != CUDA_SUCCESS)
    return r;
  // The backend gets only the image's address, so the image must be self-contained within the
  // payload: checked here first, with what a fat binary's entries expand to bounded like the
  // image. A PTX image is NUL-terminated after the payload.
  rgpu::fatbin::ImageKind kind;
  Status checked =
      rgpu::fatbin::CheckImage(cs.payload, cs.payload_size, &kind, limits_.max_module_bytes);
  if (!checked.ok()) {
    cs.detail = "malformed module image: " + checked.message();
    RGPU_LOG_WARN("session %llu: %s", (unsigned long long)id_, cs.detail.c_str());
    return CUDA_ERROR_INVALID_IMAGE;
  }
  // The image itself is held (by the backend, and on a GPU as loaded code) while the module lives.
  if (!Charge(cs, cs.payload_size, "the module image")) return CUDA_ERROR_OUT_OF_MEMORY;
  std::unique_ptr<char[]> image(new (std::nothrow) char[cs.payload_size + 1]);
  if (image == nullptr) {
    Uncharge(cs.payload_size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  memcpy(image.get(), cs.payload, cs.payload_size);
  image[cs.payload_size] = '\0';
  CUmodule module = nullptr;
  uint64_t footprint = 0;
  CUresult r = LoadModule(image.get(), &module, &footprint);
  if (r == CUDA_SUCCESS && !Charge(cs, footprint, "the module's variables")) {
    RGPU_LOG_WARN("session %llu: module refused: %s", (unsigned long long)id_, cs.detail.c_str());
    auto change = DeviceMemoryChange();
    drv_.cuModuleUnload(module);
    Uncharge(cs.payload_size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (r != CUDA_SUCCESS) {
    Uncharge(cs.payload_size);
    uint16_t machine = 0;
    if (kind == rgpu::fatbin::ImageKind::kElf) memcpy(&machine, cs.payload + 18, sizeof machine);
    constexpr uint16_t kEmAmdgpu = 224;
    cs.detail = machine == kEmAmdgpu
                    ? "the backend cannot run this AMDGPU code object (a HIP program's kernels)"
                    : "the backend could not load the module image";
    RGPU_LOG_WARN("session %llu: module refused (%d): %s", (unsigned long long)id_, r,
                  cs.detail.c_str());
    return r;
  }
  cs.reply->add_values(
      modules_.Insert(ModuleRecord{module, cs.ctx_id, cs.payload_size + footprint}));
  return CUDA_SUCCESS;
}

CUresult Session::LoadModule(const char* image, CUmodule* module, uint64_t* footprint) {
  *footprint = 0;
  if (drv_.softgpuModuleGetFootprint != nullptr) {
    CUresult r = drv_.cuModuleLoadData(module, image);
    if (r != CUDA_SUCCESS) return r;
    size_t bytes = 0;
    r = drv_.softgpuModuleGetFootprint(*module, &bytes);
    if (r != CUDA_SUCCESS) {
      drv_.cuModuleUnload(*module);
      return r;
    }
    *footprint = bytes;
    return CUDA_SUCCESS;
  }
  // Measured: no other session changes device memory meanwhile.
  std::unique_lock<std::mutex> lock;
  if (memory_lock_ != nullptr) lock = std::unique_lock<std::mutex>(*memory_lock_);
  size_t free_before = 0, free_after = 0, total = 0;
  CUresult r = drv_.cuMemGetInfo(&free_before, &total);
  if (r != CUDA_SUCCESS) return r;
  r = drv_.cuModuleLoadData(module, image);
  if (r != CUDA_SUCCESS) return r;
  r = drv_.cuMemGetInfo(&free_after, &total);
  if (r != CUDA_SUCCESS) {
    drv_.cuModuleUnload(*module);
    return r;
  }
  *footprint = free_before > free_after ? free_before - free_after : 0;
  return CUDA_SUCCESS;
}

std::unique_lock<std::mutex> Session::DeviceMemoryChange() {
  const bool measured = drv_.softgpuModuleGetFootprint == nullptr;
  if (!measured || memory_lock_ == nullptr) return std::unique_lock<std::mutex>();
  return std::unique_lock<std::mutex>(*memory_lock_);
}

bool Session::Charge(CallState& cs, uint64_t bytes, const std::string& what) {
  if (bytes == 0) return true;
  if (tenant_ != nullptr && !tenant_->Reserve(bytes)) {
    cs.detail = "tenant " + tenant_->name + "'s memory quota (" +
                std::to_string(tenant_->memory_quota) + " bytes, " +
                std::to_string(tenant_->memory_used.load()) + " in use) cannot hold " + what +
                " (" + std::to_string(bytes) + " bytes)";
    return false;
  }
  live_bytes_ += bytes;
  return true;
}

void Session::Uncharge(uint64_t bytes) {
  if (bytes == 0) return;
  live_bytes_ -= bytes;
  if (tenant_ != nullptr) tenant_->Release(bytes);
}

CUresult Session::RoomFor(CallState& cs, size_t count, uint32_t limit, const char* what) {
  if (count < limit) return CUDA_SUCCESS;
  cs.detail = std::string("this session holds ") + std::to_string(count) + " " + what +
              ", the server's limit";
  return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult Session::HandleModuleUnload(CallState& cs) {
  ModuleRecord* m = modules_.Find(cs.arg(0));
  if (m == nullptr || m->ctx != cs.ctx_id) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r;
  {
    auto change = DeviceMemoryChange();
    r = drv_.cuModuleUnload(m->module);
  }
  Uncharge(m->charged);
  const uint64_t module_id = cs.arg(0);
  for (auto it = functions_.records().begin(); it != functions_.records().end();) {
    it = it->second.module == module_id ? functions_.records().erase(it) : std::next(it);
  }
  // The module's globals go with it.
  for (auto it = allocations_.begin(); it != allocations_.end();) {
    it = it->second.module == module_id ? allocations_.erase(it) : std::next(it);
  }
  modules_.Erase(module_id);
  return r;
}

CUresult Session::HandleModuleGetFunction(CallState& cs) {
  ModuleRecord* m = modules_.Find(cs.arg(0));
  if (m == nullptr || m->ctx != cs.ctx_id) return CUDA_ERROR_INVALID_HANDLE;
  if (cs.payload_size == 0 || cs.payload_size > 4096) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = RoomFor(cs, functions_.size(), limits_.max_functions, "functions");
      r != CUDA_SUCCESS) {
    return r;
  }
  std::string name(cs.payload, cs.payload_size);
  if (name.find('\0') != std::string::npos) name.resize(name.find('\0'));
  FunctionRecord f;
  f.module = cs.arg(0);
  f.ctx = cs.ctx_id;
  CUresult r = drv_.cuModuleGetFunction(&f.function, m->module, name.c_str());
  if (r != CUDA_SUCCESS) {
    cs.detail = "no kernel named " + name;
    return r;
  }
  REQUIRE_FN(cuFuncGetParamInfo);
  for (size_t i = 0;; ++i) {
    size_t offset = 0, size = 0;
    if (drv_.cuFuncGetParamInfo(f.function, i, &offset, &size) != CUDA_SUCCESS) break;
    f.params.push_back(ParamSlot{static_cast<uint32_t>(offset), static_cast<uint32_t>(size)});
    f.params_bytes = std::max<uint32_t>(f.params_bytes, offset + size);
  }
  // Limits the client checks launches against, so that bad configurations fail at the launch
  // as CUDA's do, even when the launch itself is posted.
  auto attribute = [&](CUfunction_attribute a) -> uint64_t {
    int v = 0;
    if (drv_.cuFuncGetAttribute == nullptr ||
        drv_.cuFuncGetAttribute(&v, a, f.function) != CUDA_SUCCESS) {
      return 0;
    }
    return static_cast<uint64_t>(v);
  };
  const uint64_t id = functions_.Insert(f);
  cs.reply->add_values(id);
  cs.reply->add_values(attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
  cs.reply->add_values(attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES));
  cs.reply->add_values(attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES));
  cs.reply->add_values(f.params.size());
  for (const ParamSlot& p : f.params) {
    cs.reply->add_values(p.offset);
    cs.reply->add_values(p.size);
  }
  return CUDA_SUCCESS;
}

CUresult Session::HandleModuleGetGlobal(CallState& cs) {
  ModuleRecord* m = modules_.Find(cs.arg(0));
  if (m == nullptr || m->ctx != cs.ctx_id) return CUDA_ERROR_INVALID_HANDLE;
  REQUIRE_FN(cuModuleGetGlobal);
  if (cs.payload_size == 0 || cs.payload_size > 4096) return CUDA_ERROR_INVALID_VALUE;
  std::string name(cs.payload, cs.payload_size);
  if (name.find('\0') != std::string::npos) name.resize(name.find('\0'));
  CUdeviceptr p = 0;
  size_t bytes = 0;
  CUresult r = drv_.cuModuleGetGlobal(&p, &bytes, m->module, name.c_str());
  if (r != CUDA_SUCCESS) return r;
  // The global is memory of this session: copies to and from it are allowed, freeing is not.
  if (bytes > 0 && allocations_.find(p) == allocations_.end()) {
    allocations_[p] = Allocation{bytes, cs.ctx_id, false, cs.arg(0)};
  }
  cs.reply->add_values(p);
  cs.reply->add_values(bytes);
  return CUDA_SUCCESS;
}

CUresult Session::HandleFuncGetAttribute(CallState& cs) {
  FunctionRecord* f = functions_.Find(cs.arg(0));
  if (f == nullptr || f->ctx != cs.ctx_id) return CUDA_ERROR_INVALID_HANDLE;
  REQUIRE_FN(cuFuncGetAttribute);
  int value = 0;
  CUresult r =
      drv_.cuFuncGetAttribute(&value, static_cast<CUfunction_attribute>(cs.arg(1)), f->function);
  if (r == CUDA_SUCCESS) cs.reply->add_values(static_cast<uint64_t>(static_cast<int64_t>(value)));
  return r;
}

CUresult Session::HandleLaunchKernel(CallState& cs) {
  // The legacy default stream: the same launch with stream id 0.
  return HandleLaunchKernelOnStream(cs);
}

CUresult Session::HandleLaunchKernelOnStream(CallState& cs) {
  FunctionRecord* f = functions_.Find(cs.arg(0));
  if (f == nullptr || f->ctx != cs.ctx_id) return CUDA_ERROR_INVALID_HANDLE;
  const uint64_t stream_id = cs.call->args_size() > 8 ? cs.arg(8) : 0;
  CUstream stream = nullptr;
  if (!ResolveStream(cs, stream_id, &stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (cs.payload_size != f->params_bytes) {
    cs.detail = "kernel arguments (" + std::to_string(cs.payload_size) +
                " bytes) do not match the kernel's parameters (" + std::to_string(f->params_bytes) +
                " bytes)";
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (int i = 1; i <= 7; ++i) {
    if (cs.arg(i) > 0xffffffffull) return CUDA_ERROR_INVALID_VALUE;
  }
  std::vector<void*> params(f->params.size());
  for (size_t i = 0; i < f->params.size(); ++i) {
    params[i] = const_cast<char*>(cs.payload) + f->params[i].offset;
  }
  if (scheduler_ != nullptr) {
    // Fair sharing: the kernel runs in its turn and alone, timed to its completion.
    CUresult r = AfterStreamWork(cs, stream_id);
    if (r != CUDA_SUCCESS) return r;
    const auto queued = std::chrono::steady_clock::now();
    scheduler_->Acquire(account());
    queue_seconds_.store(queue_seconds_.load() +
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - queued)
                             .count());  // only this thread writes
    const auto start = std::chrono::steady_clock::now();
    r = drv_.cuLaunchKernel(f->function, static_cast<unsigned>(cs.arg(1)),
                            static_cast<unsigned>(cs.arg(2)), static_cast<unsigned>(cs.arg(3)),
                            static_cast<unsigned>(cs.arg(4)), static_cast<unsigned>(cs.arg(5)),
                            static_cast<unsigned>(cs.arg(6)), static_cast<unsigned>(cs.arg(7)),
                            stream, params.empty() ? nullptr : params.data(), nullptr);
    if (r == CUDA_SUCCESS) r = WaitForKernel(stream);
    const double busy =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    gpu_busy_seconds_.store(gpu_busy_seconds_.load() + busy);  // only this thread writes
    scheduler_->Release(account(), busy);
    return r;
  }
  return drv_.cuLaunchKernel(f->function, static_cast<unsigned>(cs.arg(1)),
                             static_cast<unsigned>(cs.arg(2)), static_cast<unsigned>(cs.arg(3)),
                             static_cast<unsigned>(cs.arg(4)), static_cast<unsigned>(cs.arg(5)),
                             static_cast<unsigned>(cs.arg(6)), static_cast<unsigned>(cs.arg(7)),
                             stream, params.empty() ? nullptr : params.data(), nullptr);
}

// ---- Streams and events ----

CUresult Session::WaitForKernel(CUstream stream) {
  // softgpu bounds each kernel itself (softgpuCtxSetKernelTimeout) and stops it when the session
  // is aborted (softgpuCtxAbort).
  if (drv_.softgpuCtxAbort != nullptr || drv_.cuStreamQuery == nullptr) {
    return drv_.cuStreamSynchronize(stream);
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (unsigned polls = 0;; ++polls) {
    const CUresult r = drv_.cuStreamQuery(stream);
    if (r != CUDA_ERROR_NOT_READY) return r;
    const bool late =
        max_kernel_ms_ > 0 && Clock::now() - start > std::chrono::milliseconds(max_kernel_ms_);
    if (late || aborted_.load()) {
      // No GPU can take a running kernel off its SMs on request: destroying its context is the
      // one way to end it (and everything else the context held).
      stopped_error_ = late ? CUDA_ERROR_LAUNCH_TIMEOUT : CUDA_ERROR_LAUNCH_FAILED;
      RGPU_LOG_WARN("session %llu: %s; destroying its contexts", (unsigned long long)id_,
                    late ? "a kernel ran past --max-kernel-ms" : "its client is gone");
      for (auto& [id, rec] : contexts_.records()) {
        if (rec.destroyed) continue;
        {
          std::lock_guard<std::mutex> lock(abort_mu_);
          std::erase(live_contexts_, rec.context);
        }
        auto change = DeviceMemoryChange();
        drv_.cuCtxDestroy(rec.context);
        rec.destroyed = true;
      }
      current_ = nullptr;
      return stopped_error_;
    }
    if (polls < 200) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

CUresult Session::HandleStreamCreate(CallState& cs) {
  if (CUresult r = RoomFor(cs, streams_.size(), limits_.max_streams, "streams");
      r != CUDA_SUCCESS) {
    return r;
  }
  CUstream s = nullptr;
  CUresult r;
  const int priority = static_cast<int>(static_cast<int64_t>(cs.arg(1)));
  if (priority != 0 && drv_.cuStreamCreateWithPriority != nullptr) {
    r = drv_.cuStreamCreateWithPriority(&s, static_cast<unsigned>(cs.arg(0)), priority);
  } else {
    r = drv_.cuStreamCreate(&s, static_cast<unsigned>(cs.arg(0)));
  }
  if (r != CUDA_SUCCESS) return r;
  cs.reply->add_values(streams_.Insert(StreamRecord{s, cs.ctx_id}));
  return CUDA_SUCCESS;
}

CUresult Session::HandleStreamDestroy(CallState& cs) {
  StreamRecord* s = streams_.Find(cs.arg(0));
  if (s == nullptr || s->ctx != cs.ctx_id) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = drv_.cuStreamDestroy(s->stream);
  streams_.Erase(cs.arg(0));
  return r;
}

CUresult Session::HandleStreamSynchronize(CallState& cs) {
  CUstream s = nullptr;
  if (!ResolveStream(cs, cs.arg(0), &s)) return CUDA_ERROR_INVALID_HANDLE;
  return drv_.cuStreamSynchronize(s);
}

CUresult Session::HandleStreamQuery(CallState& cs) {
  CUstream s = nullptr;
  if (!ResolveStream(cs, cs.arg(0), &s)) return CUDA_ERROR_INVALID_HANDLE;
  REQUIRE_FN(cuStreamQuery);
  return drv_.cuStreamQuery(s);
}

CUresult Session::HandleStreamWaitEvent(CallState& cs) {
  CUstream s = nullptr;
  if (!ResolveStream(cs, cs.arg(0), &s)) return CUDA_ERROR_INVALID_HANDLE;
  EventRecord* e = events_.Find(cs.arg(1));
  if (e == nullptr || e->ctx != cs.ctx_id) return CUDA_ERROR_INVALID_HANDLE;
  REQUIRE_FN(cuStreamWaitEvent);
  return drv_.cuStreamWaitEvent(s, e->event, static_cast<unsigned>(cs.arg(2)));
}

CUresult Session::HandleEventCreate(CallState& cs) {
  if (CUresult r = RoomFor(cs, events_.size(), limits_.max_events, "events"); r != CUDA_SUCCESS) {
    return r;
  }
  CUevent e = nullptr;
  CUresult r = drv_.cuEventCreate(&e, static_cast<unsigned>(cs.arg(0)));
  if (r != CUDA_SUCCESS) return r;
  cs.reply->add_values(events_.Insert(EventRecord{e, cs.ctx_id}));
  return CUDA_SUCCESS;
}

CUresult Session::HandleEventRecord(CallState& cs) {
  EventRecord* e = events_.Find(cs.arg(0));
  if (e == nullptr || e->ctx != cs.ctx_id) return CUDA_ERROR_INVALID_HANDLE;
  CUstream s = nullptr;
  if (!ResolveStream(cs, cs.arg(1), &s)) return CUDA_ERROR_INVALID_HANDLE;
  return drv_.cuEventRecord(e->event, s);
}

CUresult Session::HandleEventSynchronize(CallState& cs) {
  EventRecord* e = events_.Find(cs.arg(0));
  if (e == nullptr || e->ctx != cs.ctx_id) return CUDA_ERROR_INVALID_HANDLE;
  REQUIRE_FN(cuEventSynchronize);
  return drv_.cuEventSynchronize(e->event);
}

CUresult Session::HandleEventQuery(CallState& cs) {
  EventRecord* e = events_.Find(cs.arg(0));
  if (e == nullptr || e->ctx != cs.ctx_id) return CUDA_ERROR_INVALID_HANDLE;
  REQUIRE_FN(cuEventQuery);
  return drv_.cuEventQuery(e->event);
}

CUresult Session::HandleEventElapsedTime(CallState& cs) {
  EventRecord* a = events_.Find(cs.arg(0));
  EventRecord* b = events_.Find(cs.arg(1));
  if (a == nullptr || b == nullptr || a->ctx != cs.ctx_id || b->ctx != cs.ctx_id) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  REQUIRE_FN(cuEventElapsedTime);
  float ms = 0;
  CUresult r = drv_.cuEventElapsedTime(&ms, a->event, b->event);
  if (r != CUDA_SUCCESS) return r;
  uint32_t bits;
  memcpy(&bits, &ms, sizeof bits);
  cs.reply->add_values(bits);
  return CUDA_SUCCESS;
}

CUresult Session::HandleEventDestroy(CallState& cs) {
  EventRecord* e = events_.Find(cs.arg(0));
  if (e == nullptr || e->ctx != cs.ctx_id) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = drv_.cuEventDestroy(e->event);
  events_.Erase(cs.arg(0));
  return r;
}

// ---- Pitched 2D copies, row by row on the backend ----

CUresult Session::HandleMemcpy2DHtoD(CallState& cs) {
  const CUdeviceptr dst = cs.arg(0);
  const uint64_t pitch = cs.arg(1), width = cs.arg(2), height = cs.arg(3);
  uint64_t extent = 0, packed = 0;
  if (!PitchedShape(pitch, width, height, &extent, &packed)) {
    cs.detail = "invalid or overflowing copy shape";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (cs.payload_size != packed) {
    cs.detail = "payload size does not match the copy's rows";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!OwnsRange(cs.ctx_id, dst, extent)) {
    cs.detail = "destination range is not memory of this session";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = AfterStreamWork(cs, cs.arg(4)); r != CUDA_SUCCESS) return r;
  for (uint64_t row = 0; row < height; ++row) {
    CUresult r = drv_.cuMemcpyHtoD(dst + row * pitch, cs.payload + row * width, width);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemcpy2DDtoH(CallState& cs) {
  const CUdeviceptr src = cs.arg(0);
  const uint64_t pitch = cs.arg(1), width = cs.arg(2), height = cs.arg(3);
  uint64_t extent = 0, packed = 0;
  if (!PitchedShape(pitch, width, height, &extent, &packed)) {
    cs.detail = "invalid or overflowing copy shape";
    return CUDA_ERROR_INVALID_VALUE;
  }
  // packed <= extent, and the extent lies in one allocation: the reply is bounded by it.
  if (!OwnsRange(cs.ctx_id, src, extent)) {
    cs.detail = "source range is not memory of this session";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = AfterStreamWork(cs, cs.arg(4)); r != CUDA_SUCCESS) return r;
  cs.out_payload = OutputBuffer(packed);
  if (cs.out_payload == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  for (uint64_t row = 0; row < height; ++row) {
    CUresult r = drv_.cuMemcpyDtoH(cs.out_payload + row * width, src + row * pitch, width);
    if (r != CUDA_SUCCESS) return r;
  }
  cs.out_size = packed;
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemcpy2DDtoD(CallState& cs) {
  const CUdeviceptr dst = cs.arg(0), src = cs.arg(2);
  const uint64_t dpitch = cs.arg(1), spitch = cs.arg(3), width = cs.arg(4), height = cs.arg(5);
  uint64_t dext = 0, sext = 0, packed = 0;
  if (!PitchedShape(dpitch, width, height, &dext, &packed) ||
      !PitchedShape(spitch, width, height, &sext, &packed)) {
    cs.detail = "invalid or overflowing copy shape";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!OwnsRange(cs.ctx_id, dst, dext) || !OwnsRange(cs.ctx_id, src, sext)) {
    cs.detail = "copy range is not memory of this session";
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUstream stream = nullptr;
  if (!ResolveStream(cs, cs.arg(6), &stream)) return CUDA_ERROR_INVALID_HANDLE;
  for (uint64_t row = 0; row < height; ++row) {
    CUresult r = stream != nullptr && drv_.cuMemcpyDtoDAsync != nullptr
                     ? drv_.cuMemcpyDtoDAsync(dst + row * dpitch, src + row * spitch, width, stream)
                     : drv_.cuMemcpyDtoD(dst + row * dpitch, src + row * spitch, width);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

// ---- Function attributes and limits ----

CUresult Session::HandleFuncSetAttribute(CallState& cs) {
  FunctionRecord* f = functions_.Find(cs.arg(0));
  if (f == nullptr || f->ctx != cs.ctx_id) return CUDA_ERROR_INVALID_HANDLE;
  REQUIRE_FN(cuFuncSetAttribute);
  return drv_.cuFuncSetAttribute(f->function, static_cast<CUfunction_attribute>(cs.arg(1)),
                                 static_cast<int>(static_cast<int64_t>(cs.arg(2))));
}

CUresult Session::HandleCtxGetLimit(CallState& cs) {
  REQUIRE_FN(cuCtxGetLimit);
  size_t value = 0;
  CUresult r = drv_.cuCtxGetLimit(&value, static_cast<CUlimit>(cs.arg(0)));
  if (r == CUDA_SUCCESS) cs.reply->add_values(value);
  return r;
}

CUresult Session::HandleCtxSetLimit(CallState& cs) {
  REQUIRE_FN(cuCtxSetLimit);
  const CUlimit limit = static_cast<CUlimit>(cs.arg(0));
  const uint64_t value = cs.arg(1);
  int charged = -1;
  uint64_t scale = 1;  // bytes of device memory per unit of the limit
  switch (limit) {
    case CU_LIMIT_MALLOC_HEAP_SIZE:
      charged = kHeapLimit;
      break;
    case CU_LIMIT_PRINTF_FIFO_SIZE:
      charged = kPrintfLimit;
      break;
    case CU_LIMIT_STACK_SIZE: {
      // A GPU reserves the stack for every thread it can hold at once.
      charged = kStackLimit;
      const wire::DeviceInfo& info = devices_.devices()[cs.ctx->device];
      auto attribute = [&](CUdevice_attribute a) -> uint64_t {
        const int v = a < info.attributes_size() ? info.attributes(a) : 0;
        return static_cast<uint64_t>(std::max(1, v));
      };
      scale = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) *
              attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
      break;
    }
    default:
      return drv_.cuCtxSetLimit(limit, value);
  }
  // Charged beyond what the context held at creation, which no tenant pays for.
  uint64_t bytes = 0, default_bytes = 0;
  if (!CheckedMul(value, scale, &bytes) ||
      !CheckedMul(cs.ctx->limit_default[charged], scale, &default_bytes)) {
    cs.detail = "limit too large";
    return CUDA_ERROR_INVALID_VALUE;
  }
  const uint64_t charge = bytes > default_bytes ? bytes - default_bytes : 0;
  const uint64_t before = cs.ctx->limit_charge[charged];
  if (charge > before && !Charge(cs, charge - before, "the context limit")) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult r;
  {
    auto change = DeviceMemoryChange();
    r = drv_.cuCtxSetLimit(limit, value);
  }
  if (r != CUDA_SUCCESS) {
    if (charge > before) Uncharge(charge - before);
    return r;
  }
  if (charge < before) Uncharge(before - charge);
  cs.ctx->limit_charge[charged] = charge;
  return CUDA_SUCCESS;
}

CUresult Session::HandleCtxGetStreamPriorityRange(CallState& cs) {
  REQUIRE_FN(cuCtxGetStreamPriorityRange);
  int least = 0, greatest = 0;
  CUresult r = drv_.cuCtxGetStreamPriorityRange(&least, &greatest);
  if (r != CUDA_SUCCESS) return r;
  cs.reply->add_values(static_cast<uint64_t>(static_cast<int64_t>(least)));
  cs.reply->add_values(static_cast<uint64_t>(static_cast<int64_t>(greatest)));
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemset2D(CallState& cs) {
  const CUdeviceptr dst = cs.arg(0);
  const uint64_t pitch = cs.arg(1), value = cs.arg(2), element = cs.arg(3), width = cs.arg(4),
                 height = cs.arg(5);
  if (element != 1 && element != 2 && element != 4) return CUDA_ERROR_INVALID_VALUE;
  uint64_t row_bytes = 0, extent = 0, packed = 0;
  if (!CheckedMul(width, element, &row_bytes) ||
      !PitchedShape(pitch, row_bytes, height, &extent, &packed) ||
      !OwnsRange(cs.ctx_id, dst, extent)) {
    cs.detail = "memset range is not memory of this session";
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUstream stream = nullptr;
  if (!ResolveStream(cs, cs.arg(6), &stream)) return CUDA_ERROR_INVALID_HANDLE;
  for (uint64_t row = 0; row < height; ++row) {
    CUresult r =
        MemsetElements(cs, dst + row * pitch, value, element, width, stream, cs.arg(7) != 0);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

}  // namespace rgpu::server
