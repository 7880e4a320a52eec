// Lanes (Session::ServeLane, server/session.h): a client's threads wait on lanes, other
// connections of the same session, so that a thread in cuStreamSynchronize on a long kernel does
// not hold up the session's channel, where its other threads' calls are served.
#include <algorithm>
#include <thread>

#include "common/log.h"
#include "proto/crypto.h"
#include "proto/protocol_version.h"
#include "server/session.h"

namespace rgpu::server {

namespace {
constexpr int kLanePollMs = 200;
// How long a wait on the session's channel may hold it before it is handed to a lane: short
// waits (most) cost no more than without lanes, long ones hold up the other threads this long.
constexpr auto kHandOffAfter = std::chrono::microseconds(300);

bool LaneOp(uint32_t op) {
  return op == static_cast<uint32_t>(Op::kStreamSynchronize) ||
         op == static_cast<uint32_t>(Op::kEventSynchronize) ||
         op == static_cast<uint32_t>(Op::kCtxSynchronize);
}
}  // namespace

bool Session::AttachLane(const std::string& key) {
  if (lane_key_.empty() || !ConstantTimeEquals(key, lane_key_)) return false;
  std::lock_guard<std::mutex> lock(lanes_mu_);
  if (lanes_closing_.load() || lanes_active_ >= max_lanes_) return false;
  ++lanes_active_;
  return true;
}

Status Session::BeginSideChannel(Channel& channel, const std::string& peer_proof) {
  {
    std::lock_guard<std::mutex> lock(lanes_mu_);
    lane_channels_.push_back(&channel);
  }
  wire::Envelope welcome;
  welcome.mutable_welcome()->set_protocol_version(kProtocolVersion);
  welcome.mutable_welcome()->set_session_id(id_);
  if (!peer_proof.empty()) welcome.mutable_welcome()->set_peer_proof(peer_proof);
  return channel.Send(welcome.SerializeAsString(), nullptr, 0);
}

void Session::EndSideChannel(Channel& channel) {
  {
    std::lock_guard<std::mutex> lock(lanes_mu_);
    std::erase(lane_channels_, &channel);
    --lanes_active_;
  }
  lanes_cv_.notify_all();
}

void Session::ServeLane(Channel& lane) {
  Status s = BeginSideChannel(lane);
  ReceivedMessage m;
  while (s.ok() && !lanes_closing_.load() && !aborted_.load()) {
    s = lane.Receive(kLanePollMs, &m);
    if (s.code() == Status::Code::kTimeout) {
      s = Status::Ok();
      continue;
    }
    if (!s.ok()) break;
    wire::Envelope in;
    const bool parsed = in.ParseFromArray(m.header.data(), static_cast<int>(m.header.size()));
    if (parsed && in.body_case() == wire::Envelope::kGoodbye) break;  // the client closes it
    if (!parsed || in.body_case() != wire::Envelope::kCall || m.payload_size != 0 ||
        m.payload_pending) {
      RGPU_LOG_WARN("session %llu: closing a lane that sent something other than a wait",
                    (unsigned long long)id_);
      wire::Envelope bye;
      bye.mutable_goodbye()->set_status(CUDA_ERROR_INVALID_VALUE);
      bye.mutable_goodbye()->set_reason("a lane carries only waits, without payloads");
      lane.Send(bye.SerializeAsString(), nullptr, 0);
      break;
    }
    wire::Envelope out;
    wire::Reply* reply = out.mutable_reply();
    reply->set_seq(in.call().seq());
    const CUresult r = RunLaneCall(in.call(), reply);
    reply->set_result(r);
    s = lane.Send(out.SerializeAsString(), nullptr, 0);
  }
  EndSideChannel(lane);
}

bool Session::HandOff(CallState& cs, const std::function<CUresult()>& query) {
  if (!cs.call->hand_off() || lane_key_.empty()) return false;
  const auto deadline = std::chrono::steady_clock::now() + kHandOffAfter;
  for (;;) {
    // Ended, or failed: the handler's own wait returns at once (with the error).
    if (query() != CUDA_ERROR_NOT_READY) return false;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::yield();
  }
  cs.reply->set_handed_off(true);
  return true;
}

CUresult Session::RunLaneCall(const wire::Call& call, wire::Reply* reply) {
  const OpInfo* info = FindOp(call.op());
  if (info == nullptr || !LaneOp(call.op()) || call.posted()) {
    reply->set_message("a lane serves only StreamSynchronize, EventSynchronize and CtxSynchronize");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (call.args_size() != info->arg_count) {
    reply->set_message(std::string(info->name) + " takes " + std::to_string(info->arg_count) +
                       " arguments");
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Counted in as the state's guest for the whole call: while its wait is listed, the session
  // thread holds the state through the mutex and so notifies state_cv_.
  OwnerMutex::Guest guest(state_mu_);
  std::unique_lock<std::mutex> lock(state_mu_.mutex());
  // Everything the client sent on the session's channel before this call comes first.
  while (executed_seq_ < call.after_seq()) {
    if (aborted_.load() || lanes_closing_.load()) return CUDA_ERROR_DEVICE_UNAVAILABLE;
    state_cv_.wait_for(lock, std::chrono::milliseconds(kLanePollMs));
  }
  calls_by_op_[call.op()].fetch_add(1);  // under state_mu_, as the session thread's counts
  const ContextRecord* ctx = contexts_.Find(call.ctx());
  if (ctx == nullptr) {
    reply->set_message("no such context");
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (ctx->destroyed) return stopped_error_.load();
  const CUcontext context = ctx->context;
  LaneWait wait{call.ctx(), nullptr};
  CUstream stream = nullptr;
  CUevent event = nullptr;
  const Op op = static_cast<Op>(call.op());
  if (op == Op::kStreamSynchronize && call.args(0) != 0) {  // 0: the context's default stream
    const StreamRecord* s = streams_.Find(call.args(0));
    if (s == nullptr || s->ctx != call.ctx()) return CUDA_ERROR_INVALID_HANDLE;
    stream = s->stream;
    wait.handle = stream;
  } else if (op == Op::kEventSynchronize) {
    const EventRecord* e = events_.Find(call.args(0));
    if (e == nullptr || e->ctx != call.ctx()) return CUDA_ERROR_INVALID_HANDLE;
    if (drv_.cuEventSynchronize == nullptr) {
      reply->set_message("the backend has no cuEventSynchronize");
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    event = e->event;
    wait.handle = event;
  }
  // The handles stay valid while the wait is listed: their destruction waits for it.
  lane_waits_.push_back(wait);
  lock.unlock();
  CUresult r = drv_.cuCtxSetCurrent(context);
  if (r == CUDA_SUCCESS) {
    r = op == Op::kEventSynchronize    ? drv_.cuEventSynchronize(event)
        : op == Op::kStreamSynchronize ? drv_.cuStreamSynchronize(stream)
                                       : drv_.cuCtxSynchronize();
    drv_.cuCtxSetCurrent(nullptr);
  }
  lock.lock();
  auto it = std::find_if(lane_waits_.begin(), lane_waits_.end(), [&](const LaneWait& w) {
    return w.ctx == wait.ctx && w.handle == wait.handle;
  });
  if (it != lane_waits_.end()) lane_waits_.erase(it);
  // An earlier posted call's failure is reported by this wait, as by one on the channel.
  ReportPending(reply);
  if (r == CUDA_SUCCESS) lane_synchronized_.store(true);
  lock.unlock();
  state_cv_.notify_all();
  return r;
}

void Session::AwaitLaneWaits(const std::function<bool(const LaneWait&)>& matches) {
  if (!state_mu_.held()) return;  // not serving a message: no lane runs (Run's end)
  // Held without the mutex: no guest was counted in when this hold began, and one counted in
  // since waits in its Guest's constructor; a lane lists its waits only after that (RunLaneCall)
  // and takes them off before it counts itself out: none is listed.
  if (!state_mu_.holds_mutex()) return;
  state_cv_.wait(state_mu_.owner_lock(),
                 [&] { return std::none_of(lane_waits_.begin(), lane_waits_.end(), matches); });
}

void Session::CloseLanes() {
  std::unique_lock<std::mutex> lock(lanes_mu_);
  lanes_closing_.store(true);
  for (Channel* lane : lane_channels_) lane->Abandon("the session ended");
  if (lanes_active_ > 0 && end_ != SessionEnd::kExited && drv_.softgpuCtxAbort != nullptr) {
    // A client gone while its threads waited: their kernels are stopped, as Abort does.
    std::lock_guard<std::mutex> contexts(abort_mu_);
    for (CUcontext ctx : live_contexts_) drv_.softgpuCtxAbort(ctx);
  }
  state_cv_.notify_all();
  lanes_cv_.wait(lock, [&] { return lanes_active_ == 0; });
}

}  // namespace rgpu::server
