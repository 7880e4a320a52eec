// Streams and events: shadow handles naming server-side streams and events of one context.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <mutex>
#include <thread>

#include "client/impl.h"

namespace calls = rgpu::calls;
using rgpu::client::ClientState;
using rgpu::client::NewClientId;
using rgpu::client::ObjectKind;
using rgpu::client::RequireContext;
using rgpu::client::Server;

namespace rgpu::client {

// A fresh id of the client's own for an object a posted call creates (never used twice in the
// process, so never twice in a session).
uint64_t NewClientId() {
  static std::atomic<uint64_t> next{calls::kFirstClientId};
  return next.fetch_add(1, std::memory_order_relaxed);
}

CUresult PerThreadStream(CUctx_st* ctx, CUstream* out) {
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    if ((*out = ExistingPerThreadStream(ctx)) != nullptr) return CUDA_SUCCESS;
  }
  // Blocking, as CUDA's per-thread stream is: it synchronizes with the legacy default stream.
  // Posted under an id of the client's, as cuStreamCreate.
  const uint64_t id = NewClientId();
  CUresult r =
      Server().Post<calls::StreamCreate>(ctx->remote, {.flags = 0, .priority = 0, .id = id});
  if (r != CUDA_SUCCESS) return r;
  auto* s = new CUstream_st();
  s->remote = id;
  s->ctx = ctx;
  ClientState::Get().Register(s);
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  ctx->per_thread_streams[std::this_thread::get_id()] = s;
  *out = s;
  return CUDA_SUCCESS;
}

void DefaultToPerThread(const CUlaunchConfig** config) {
  if (*config == nullptr || (*config)->hStream != nullptr) return;
  thread_local CUlaunchConfig per_thread;
  per_thread = **config;
  per_thread.hStream = CU_STREAM_PER_THREAD;
  *config = &per_thread;
}

CUstream ExistingPerThreadStream(CUctx_st* ctx) {
  auto it = ctx->per_thread_streams.find(std::this_thread::get_id());
  return it == ctx->per_thread_streams.end() ? nullptr : it->second;
}

void ForgetPerThreadStreams(CUctx_st* ctx) {
  for (auto& [thread, s] : ctx->per_thread_streams) {
    ClientState::Get().Unregister(s);
    delete s;
  }
  ctx->per_thread_streams.clear();
}

CUresult ResolveStream(CUstream stream, CUctx_st** ctx, uint64_t* remote) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY) {
    *remote = 0;
    return RequireContext(ctx);
  }
  if (stream == CU_STREAM_PER_THREAD) {
    CUresult r = RequireContext(ctx);
    if (r != CUDA_SUCCESS) return r;
    CUstream own;
    r = PerThreadStream(*ctx, &own);
    if (r != CUDA_SUCCESS) return r;
    *remote = own->remote;
    return CUDA_SUCCESS;
  }
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  r = ClientState::Get().CheckStream(stream);
  if (r != CUDA_SUCCESS) return r;
  *ctx = stream->ctx;
  *remote = stream->remote;
  return CUDA_SUCCESS;
}

}  // namespace rgpu::client

namespace {
CUresult CheckEvent(CUevent e) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  if (!ClientState::Get().IsLive(e) || e->kind != ObjectKind::kEvent) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  return rgpu::client::CheckContext(e->ctx);
}
}  // namespace

RGPU_IMPL(cuStreamCreateWithPriority)(CUstream* out, unsigned int flags, int priority) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (priority != 0) {
    // Clamped to the device's range, as the driver does (and reports it): asked of the server
    // once per context.
    int least = 0, greatest = 0;
    bool known;
    {
      std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
      known = ctx->priority_range_known;
      least = ctx->priority_least;
      greatest = ctx->priority_greatest;
    }
    if (!known) {
      r = rgpu_impl_cuCtxGetStreamPriorityRange(&least, &greatest);
      if (r != CUDA_SUCCESS) return r;
      std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
      ctx->priority_range_known = true;
      ctx->priority_least = least;
      ctx->priority_greatest = greatest;
    }
    priority = std::max(greatest, std::min(least, priority));
  }
  // Posted under an id of the client's: no round trip (a refusal surfaces at the next
  // synchronizing call, as for any posted work).
  const uint64_t id = NewClientId();
  r = Server().Post<calls::StreamCreate>(ctx->remote,
                                         {.flags = flags, .priority = priority, .id = id});
  if (r != CUDA_SUCCESS) return r;
  auto* s = new CUstream_st();
  s->remote = id;
  s->ctx = ctx;
  s->flags = flags;
  s->priority = priority;
  ClientState::Get().Register(s);
  *out = s;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuStreamCreate)(CUstream* out, unsigned int flags) {
  return rgpu_impl_cuStreamCreateWithPriority(out, flags, 0);
}

RGPU_IMPL(cuStreamDestroy_v2)(CUstream s) {
  CUctx_st* ctx;
  uint64_t remote;
  if (s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  CUresult r = rgpu::client::ResolveStream(s, &ctx, &remote);
  if (r != CUDA_SUCCESS) return r;
  r = Server().Post<calls::StreamDestroy>(ctx->remote, {.stream = remote});
  ClientState::Get().Unregister(s);
  delete s;
  return r;
}

RGPU_IMPL(cuStreamSynchronize)(CUstream s) {
  CUctx_st* ctx;
  uint64_t remote;
  CUresult r = rgpu::client::ResolveStream(s, &ctx, &remote);
  if (r != CUDA_SUCCESS) return r;
  CUresult held = rgpu::client::WaitStreamDrained(s);
  r = Server().Call<calls::StreamSynchronize>(ctx->remote, {.stream = remote});
  return r != CUDA_SUCCESS ? r : held;
}

RGPU_IMPL(cuStreamQuery)(CUstream s) {
  CUctx_st* ctx;
  uint64_t remote;
  CUresult r = rgpu::client::ResolveStream(s, &ctx, &remote);
  if (r != CUDA_SUCCESS) return r;
  if (rgpu::client::StreamHeld(s)) return CUDA_ERROR_NOT_READY;  // a host function is pending
  return Server().Call<calls::StreamQuery>(ctx->remote, {.stream = remote});
}

RGPU_IMPL(cuStreamWaitEvent)(CUstream s, CUevent e, unsigned int flags) {
  CUctx_st* ctx;
  uint64_t remote;
  CUresult r = rgpu::client::ResolveStream(s, &ctx, &remote);
  if (r != CUDA_SUCCESS) return r;
  r = CheckEvent(e);
  if (r != CUDA_SUCCESS) return r;
  if (rgpu::client::CaptureStreamWait(s, e)) return CUDA_SUCCESS;  // a dependency inside a capture
  const bool same_server = rgpu::client::ServerSet::ServerOfContext(e->ctx) ==
                           rgpu::client::ServerSet::ServerOfContext(ctx);
  if (rgpu::client::Defer(
          s, CU_GRAPH_NODE_TYPE_WAIT_EVENT,
          [e, flags](CUstream stream) { return rgpu_impl_cuStreamWaitEvent(stream, e, flags); },
          /*recordable=*/same_server)) {
    return CUDA_SUCCESS;
  }
  if (!same_server || e->held_records->load() > 0) {
    // An event of another server's device, or whose record is still held here (behind a host
    // function): the program's later work on `s` is held here until the record has been sent
    // and, for another server's event, has completed; the caller goes on.
    if (!same_server && flags != 0 && flags != CU_EVENT_WAIT_EXTERNAL) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    return rgpu::client::HoldUntilEvent(s, e, same_server, flags);
  }
  // An event of any context of the same server: the server's stream waits for it.
  return Server().Post<calls::StreamWaitEvent>(
      ctx->remote, {.stream = remote, .event = e->remote, .flags = flags});
}

RGPU_IMPL(cuStreamGetFlags)(CUstream s, unsigned int* flags) {
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  uint64_t remote;
  CUresult r = rgpu::client::ResolveStream(s, &ctx, &remote);
  if (r != CUDA_SUCCESS) return r;
  *flags = rgpu::client::IsSpecialStream(s) ? 0 : s->flags;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuStreamGetPriority)(CUstream s, int* priority) {
  if (priority == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  uint64_t remote;
  CUresult r = rgpu::client::ResolveStream(s, &ctx, &remote);
  if (r != CUDA_SUCCESS) return r;
  *priority = rgpu::client::IsSpecialStream(s) ? 0 : s->priority;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuEventCreate)(CUevent* out, unsigned int flags) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  const uint64_t id = NewClientId();  // posted, as cuStreamCreate
  r = Server().Post<calls::EventCreate>(ctx->remote, {.flags = flags, .id = id});
  if (r != CUDA_SUCCESS) return r;
  auto* e = new CUevent_st();
  e->remote = id;
  e->ctx = ctx;
  e->flags = flags;
  ClientState::Get().Register(e);
  *out = e;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuEventRecord)(CUevent e, CUstream s) {
  CUresult r = CheckEvent(e);
  if (r != CUDA_SUCCESS) return r;
  CUctx_st* ctx;
  uint64_t remote;
  r = rgpu::client::ResolveStream(s, &ctx, &remote);
  if (r != CUDA_SUCCESS) return r;
  if (ctx != e->ctx) return CUDA_ERROR_INVALID_HANDLE;
  if (rgpu::client::CaptureEventRecord(e, s)) return CUDA_SUCCESS;  // marks a capture point
  {
    // Counted while it is held, so that a wait for the event issued meanwhile follows it.
    std::shared_ptr<std::atomic<int>> held = e->held_records;
    {
      std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
      held->fetch_add(1);
    }
    if (rgpu::client::Defer(
            s, CU_GRAPH_NODE_TYPE_EVENT_RECORD,
            [e, held](CUstream stream) {
              const CUresult r = rgpu_impl_cuEventRecord(e, stream);
              rgpu::client::NoteRecordSent(held);
              return r;
            },
            /*recordable=*/true)) {
      return CUDA_SUCCESS;
    }
    rgpu::client::NoteRecordSent(held);
  }
  return Server().Post<calls::EventRecord>(ctx->remote, {.event = e->remote, .stream = remote});
}

RGPU_IMPL(cuEventRecordWithFlags)(CUevent e, CUstream s, unsigned int flags) {
  if (flags & ~static_cast<unsigned>(CU_EVENT_RECORD_EXTERNAL)) return CUDA_ERROR_INVALID_VALUE;
  // CU_EVENT_RECORD_EXTERNAL only changes what a graph capture records; a plain record otherwise.
  return rgpu_impl_cuEventRecord(e, s);
}

RGPU_IMPL(cuEventSynchronize)(CUevent e) {
  CUresult r = CheckEvent(e);
  if (r != CUDA_SUCCESS) return r;
  // The record may be held behind a host function of any stream of the context.
  CUresult held = rgpu::client::WaitContextDrained(e->ctx);
  r = Server().Call<calls::EventSynchronize>(e->ctx->remote, {.event = e->remote});
  return r != CUDA_SUCCESS ? r : held;
}

RGPU_IMPL(cuEventQuery)(CUevent e) {
  CUresult r = CheckEvent(e);
  if (r != CUDA_SUCCESS) return r;
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    if (e->ctx->host_work > 0) return CUDA_ERROR_NOT_READY;
  }
  return Server().Call<calls::EventQuery>(e->ctx->remote, {.event = e->remote});
}

RGPU_IMPL(cuEventElapsedTime_v2)(float* ms, CUevent start, CUevent end) {
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckEvent(start);
  if (r == CUDA_SUCCESS) r = CheckEvent(end);
  if (r != CUDA_SUCCESS) return r;
  if (start->ctx != end->ctx) return CUDA_ERROR_INVALID_HANDLE;
  calls::EventElapsedTime::Results elapsed;
  r = Server().Call<calls::EventElapsedTime>(
      start->ctx->remote, {.start = start->remote, .end = end->remote}, &elapsed);
  if (r == CUDA_SUCCESS) memcpy(ms, &elapsed.milliseconds_float_bits, sizeof *ms);
  return r;
}

RGPU_IMPL(cuEventDestroy_v2)(CUevent e) {
  CUresult r = CheckEvent(e);
  if (r != CUDA_SUCCESS) return r;
  r = Server().Post<calls::EventDestroy>(e->ctx->remote, {.event = e->remote});
  ClientState::Get().Unregister(e);
  delete e;
  return r;
}

RGPU_SAME_AS(cuEventElapsedTime, cuEventElapsedTime_v2)

RGPU_IMPL(cuStreamGetCtx)(CUstream s, CUcontext* pctx) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  uint64_t remote;
  CUresult r = rgpu::client::ResolveStream(s, &ctx, &remote);
  if (r == CUDA_SUCCESS) *pctx = ctx;
  return r;
}

// rgpu makes no green contexts (cuGreenCtxCreate is not supported): every stream belongs to a
// context, and the green context returned is always NULL.
RGPU_IMPL(cuStreamGetCtx_v2)(CUstream s, CUcontext* pctx, CUgreenCtx* pgreen) {
  if (pctx == nullptr || pgreen == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  uint64_t remote;
  CUresult r = rgpu::client::ResolveStream(s, &ctx, &remote);
  if (r != CUDA_SUCCESS) return r;
  *pctx = ctx;
  *pgreen = nullptr;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuStreamGetDevice)(CUstream s, CUdevice* device) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  uint64_t remote;
  CUresult r = rgpu::client::ResolveStream(s, &ctx, &remote);
  if (r == CUDA_SUCCESS) *device = ctx->device;
  return r;
}

RGPU_IMPL(cuStreamGetId)(CUstream s, unsigned long long* id) {
  if (id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  uint64_t remote;
  CUresult r = rgpu::client::ResolveStream(s, &ctx, &remote);
  if (r == CUDA_SUCCESS) *id = remote;
  return r;
}

RGPU_PER_THREAD_SAME_AS(cuStreamGetCtx_ptsz)
RGPU_PER_THREAD_SAME_AS(cuStreamGetCtx_v2_ptsz)
RGPU_PER_THREAD_SAME_AS(cuStreamGetDevice_ptsz)
RGPU_PER_THREAD_SAME_AS(cuStreamGetId_ptsz)
RGPU_PER_THREAD_SAME_AS(cuStreamSynchronize_ptsz)
RGPU_PER_THREAD_SAME_AS(cuStreamQuery_ptsz)
RGPU_PER_THREAD_SAME_AS(cuStreamWaitEvent_ptsz)
RGPU_PER_THREAD_SAME_AS(cuStreamGetFlags_ptsz)
RGPU_PER_THREAD_SAME_AS(cuStreamGetPriority_ptsz)
RGPU_PER_THREAD_SAME_AS(cuEventRecord_ptsz)
RGPU_PER_THREAD_SAME_AS(cuEventRecordWithFlags_ptsz)

// Stream attributes: the access-policy window and the synchronization policy go to the server
// (the backend honours them; on the software GPU they are hints without effect); the priority is
// the stream's own, fixed at creation. Others are refused by name.
RGPU_IMPL(cuStreamSetAttribute)(CUstream s, CUstreamAttrID attr, const CUstreamAttrValue* value) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  uint64_t remote;
  CUresult r = rgpu::client::ResolveStream(s, &ctx, &remote);
  if (r != CUDA_SUCCESS) return r;
  switch (attr) {
    case CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
      const CUaccessPolicyWindow& w = value->accessPolicyWindow;
      return Server().Call<calls::StreamSetAccessPolicyWindow>(
          ctx->remote, {.stream = remote,
                        .base = reinterpret_cast<uint64_t>(w.base_ptr),
                        .bytes = w.num_bytes,
                        .hit_ratio_bits = std::bit_cast<uint32_t>(w.hitRatio),
                        .hit_prop = static_cast<uint32_t>(w.hitProp),
                        .miss_prop = static_cast<uint32_t>(w.missProp)});
    }
    case CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY:
      return Server().Call<calls::StreamSetSynchronizationPolicy>(
          ctx->remote, {.stream = remote, .policy = static_cast<uint32_t>(value->syncPolicy)});
    default:
      RGPU_LOG_WARN("cuStreamSetAttribute: stream attribute %d is not supported",
                    static_cast<int>(attr));
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

RGPU_IMPL(cuStreamGetAttribute)(CUstream s, CUstreamAttrID attr, CUstreamAttrValue* value) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx;
  uint64_t remote;
  CUresult r = rgpu::client::ResolveStream(s, &ctx, &remote);
  if (r != CUDA_SUCCESS) return r;
  switch (attr) {
    case CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
      calls::StreamGetAccessPolicyWindow::Results w;
      r = Server().Call<calls::StreamGetAccessPolicyWindow>(ctx->remote, {.stream = remote}, &w);
      if (r != CUDA_SUCCESS) return r;
      *value = CUstreamAttrValue{};
      value->accessPolicyWindow.base_ptr = reinterpret_cast<void*>(w.base);
      value->accessPolicyWindow.num_bytes = w.bytes;
      value->accessPolicyWindow.hitRatio = std::bit_cast<float>(w.hit_ratio_bits);
      value->accessPolicyWindow.hitProp = static_cast<CUaccessProperty>(w.hit_prop);
      value->accessPolicyWindow.missProp = static_cast<CUaccessProperty>(w.miss_prop);
      return CUDA_SUCCESS;
    }
    case CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY: {
      calls::StreamGetSynchronizationPolicy::Results p;
      r = Server().Call<calls::StreamGetSynchronizationPolicy>(ctx->remote, {.stream = remote}, &p);
      if (r != CUDA_SUCCESS) return r;
      *value = CUstreamAttrValue{};
      value->syncPolicy = static_cast<CUsynchronizationPolicy>(p.policy);
      return CUDA_SUCCESS;
    }
    case CU_STREAM_ATTRIBUTE_PRIORITY:
      *value = CUstreamAttrValue{};
      value->priority = rgpu::client::IsSpecialStream(s) ? 0 : s->priority;
      return CUDA_SUCCESS;
    default:
      RGPU_LOG_WARN("cuStreamGetAttribute: stream attribute %d is not supported",
                    static_cast<int>(attr));
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

// The attributes a stream can be given (cuStreamSetAttribute): its access-policy window and its
// synchronization policy, read from `src` and set on `dst`, both of one context. A priority,
// fixed at creation here, cannot be copied: streams of different priorities are refused with
// CUDA_ERROR_NOT_SUPPORTED before anything changes. The window is set before the policy: a
// policy the server refused (it came from the backend itself, so it should not) would leave
// the window copied.
RGPU_IMPL(cuStreamCopyAttributes)(CUstream dst, CUstream src) {
  CUctx_st *dst_ctx, *src_ctx;
  uint64_t dst_remote, src_remote;
  CUresult r = rgpu::client::ResolveStream(dst, &dst_ctx, &dst_remote);
  if (r != CUDA_SUCCESS) return r;
  r = rgpu::client::ResolveStream(src, &src_ctx, &src_remote);
  if (r != CUDA_SUCCESS) return r;
  if (dst_ctx != src_ctx) return CUDA_ERROR_INVALID_CONTEXT;
  CUstreamAttrValue dst_priority, src_priority;
  r = rgpu_impl_cuStreamGetAttribute(dst, CU_STREAM_ATTRIBUTE_PRIORITY, &dst_priority);
  if (r == CUDA_SUCCESS) {
    r = rgpu_impl_cuStreamGetAttribute(src, CU_STREAM_ATTRIBUTE_PRIORITY, &src_priority);
  }
  if (r != CUDA_SUCCESS) return r;
  if (dst_priority.priority != src_priority.priority) {
    RGPU_LOG_WARN("cuStreamCopyAttributes: a stream's priority cannot be changed (%d to %d)",
                  dst_priority.priority, src_priority.priority);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  for (CUstreamAttrID attr :
       {CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY}) {
    CUstreamAttrValue value;
    r = rgpu_impl_cuStreamGetAttribute(src, attr, &value);
    if (r == CUDA_SUCCESS) r = rgpu_impl_cuStreamSetAttribute(dst, attr, &value);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

RGPU_PER_THREAD_SAME_AS(cuStreamSetAttribute_ptsz)
RGPU_PER_THREAD_SAME_AS(cuStreamGetAttribute_ptsz)
RGPU_PER_THREAD_SAME_AS(cuStreamCopyAttributes_ptsz)

// The names CUDA 2.0 to 3.2 exported for calls whose _v2 kept their parameters (cuGetProcAddress
// hands them to a runtime that asks for those versions).
RGPU_SAME_AS(cuStreamDestroy, cuStreamDestroy_v2)
RGPU_SAME_AS(cuEventDestroy, cuEventDestroy_v2)
