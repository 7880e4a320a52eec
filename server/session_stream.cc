// Session's handlers for streams and events (proto/calls.def: Streams and events). Every stream
// and event a call names has been resolved to one of the call's context before these run.
#include <algorithm>
#include <bit>
#include <cstring>

#include "common/stream_mem_ops.h"
#include "server/device_catalog.h"
#include "server/require_fn.h"
#include "server/session.h"

namespace rgpu::server {

CUresult Session::HandleStreamCreate(CallState& cs, const StreamCreateIn& in,
                                     calls::StreamCreate::Results* out) {
  if (CUresult r = RoomFor(cs, streams_.size() + DrainingStreams(), limits_.max_streams,
                           "streams (destroyed ones with work left included)");
      r != CUDA_SUCCESS) {
    return r;
  }
  CUstream s = nullptr;
  CUresult r;
  if (in.priority != 0 && drv_.cuStreamCreateWithPriority != nullptr) {
    r = drv_.cuStreamCreateWithPriority(&s, in.flags, in.priority);
  } else {
    r = drv_.cuStreamCreate(&s, in.flags);
  }
  if (r != CUDA_SUCCESS) return r;
  const StreamRecord rec{s, cs.ctx_id, in.flags, in.priority};
  if (in.id == 0) {
    out->stream = streams_.Insert(rec);
  } else if (streams_.InsertAt(in.id, rec)) {
    out->stream = in.id;
  } else {
    drv_.cuStreamDestroy(s);
    cs.detail = "stream id " + std::to_string(in.id) + " is taken or outside the client's range";
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult Session::HandleStreamDestroy(CallState&, const StreamDestroyIn& in,
                                      calls::StreamDestroy::Results*) {
  const CUstream stream = in.stream->stream;
  AwaitLaneWaits([stream](const LaneWait& w) { return w.handle == stream; });
  // Work still queued runs on after the destroy (on backends that, like CUDA, return at once):
  // an event behind it says when it is done.
  if (drv_.cuStreamQuery != nullptr && drv_.cuEventQuery != nullptr &&
      drv_.cuStreamQuery(stream) == CUDA_ERROR_NOT_READY) {
    CUevent done = nullptr;
    if (drv_.cuEventCreate(&done, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
      if (drv_.cuEventRecord(done, stream) == CUDA_SUCCESS) {
        draining_streams_.push_back({in.stream->ctx, done});
      } else {
        drv_.cuEventDestroy(done);
      }
    }
  }
  CUresult r = drv_.cuStreamDestroy(stream);
  streams_.Erase(in.stream.id);
  return r;
}

size_t Session::DrainingStreams() {
  for (auto it = draining_streams_.begin(); it != draining_streams_.end();) {
    if (drv_.cuEventQuery(it->done) != CUDA_ERROR_NOT_READY) {
      drv_.cuEventDestroy(it->done);
      it = draining_streams_.erase(it);
    } else {
      ++it;
    }
  }
  return draining_streams_.size();
}

bool Session::DrainingStreamsBusy(uint64_t ctx) {
  if (DrainingStreams() == 0) return false;
  for (const DrainingStream& d : draining_streams_) {
    if (d.ctx == ctx) return true;
  }
  return false;
}

CUresult Session::HandleStreamSynchronize(CallState& cs, const StreamSynchronizeIn& in,
                                          calls::StreamSynchronize::Results*) {
  if (drv_.cuStreamQuery != nullptr &&
      HandOff(cs, [&] { return drv_.cuStreamQuery(in.stream.stream); })) {
    return CUDA_SUCCESS;  // the client waits on a lane
  }
  const CUresult r = drv_.cuStreamSynchronize(in.stream.stream);
  if (r == CUDA_SUCCESS) TrimPoolsAfterSync();
  return r;
}

CUresult Session::HandleStreamQuery(CallState& cs, const StreamQueryIn& in,
                                    calls::StreamQuery::Results*) {
  REQUIRE_FN(cuStreamQuery);
  return drv_.cuStreamQuery(in.stream.stream);
}

CUresult Session::HandleStreamWaitEvent(CallState& cs, const StreamWaitEventIn& in,
                                        calls::StreamWaitEvent::Results*) {
  REQUIRE_FN(cuStreamWaitEvent);
  return drv_.cuStreamWaitEvent(in.stream.stream, in.event->event, in.flags);
}

CUresult Session::HandleStreamMemOp(CallState& cs, const StreamMemOpIn& in,
                                    calls::StreamMemOp::Results*) {
  // The word is memory of the call's context (RGPU_RANGE); its width (a width of 0 would leave
  // that check nothing to check), value, alignment and flags are checked here, before the
  // backend sees them, as the client checks them (common/stream_mem_ops.h).
  if (in.bytes != 4 && in.bytes != 8) return CUDA_ERROR_INVALID_VALUE;
  const bool wide = in.bytes == 8;
  if (!wide && in.value > UINT32_MAX) return CUDA_ERROR_INVALID_VALUE;
  if (rgpu::CheckStreamMemOp({in.wait, wide, in.address, in.value, in.flags}) != CUDA_SUCCESS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (in.wait) {
    stream_waits_served_ = true;
    if (wide) {
      REQUIRE_FN(cuStreamWaitValue64);
      return drv_.cuStreamWaitValue64(in.stream.stream, in.address, in.value, in.flags);
    }
    REQUIRE_FN(cuStreamWaitValue32);
    return drv_.cuStreamWaitValue32(in.stream.stream, in.address, static_cast<cuuint32_t>(in.value),
                                    in.flags);
  }
  if (wide) {
    REQUIRE_FN(cuStreamWriteValue64);
    return drv_.cuStreamWriteValue64(in.stream.stream, in.address, in.value, in.flags);
  }
  REQUIRE_FN(cuStreamWriteValue32);
  return drv_.cuStreamWriteValue32(in.stream.stream, in.address, static_cast<cuuint32_t>(in.value),
                                   in.flags);
}

CUresult Session::HandleEventCreate(CallState& cs, const EventCreateIn& in,
                                    calls::EventCreate::Results* out) {
  if (CUresult r = RoomFor(cs, events_.size(), limits_.max_events, "events"); r != CUDA_SUCCESS) {
    return r;
  }
  CUevent e = nullptr;
  CUresult r = drv_.cuEventCreate(&e, in.flags);
  if (r != CUDA_SUCCESS) return r;
  EventRecord rec{e, cs.ctx_id};
  rec.flags = in.flags;
  if (in.id == 0) {
    out->event = events_.Insert(std::move(rec));
  } else if (events_.InsertAt(in.id, std::move(rec))) {
    out->event = in.id;
  } else {
    drv_.cuEventDestroy(e);
    cs.detail = "event id " + std::to_string(in.id) + " is taken or outside the client's range";
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult Session::HandleEventRecord(CallState&, const EventRecordIn& in,
                                    calls::EventRecord::Results*) {
  const CUresult r = drv_.cuEventRecord(in.event->event, in.stream.stream);
  if (r == CUDA_SUCCESS) in.event->recorded = true;
  return r;
}

CUresult Session::HandleEventSynchronize(CallState& cs, const EventSynchronizeIn& in,
                                         calls::EventSynchronize::Results*) {
  REQUIRE_FN(cuEventSynchronize);
  if (drv_.cuEventQuery != nullptr &&
      HandOff(cs, [&] { return drv_.cuEventQuery(in.event->event); })) {
    return CUDA_SUCCESS;  // the client waits on a lane
  }
  const CUresult r = drv_.cuEventSynchronize(in.event->event);
  if (r == CUDA_SUCCESS) TrimPoolsAfterSync();
  return r;
}

CUresult Session::HandleEventQuery(CallState& cs, const EventQueryIn& in,
                                   calls::EventQuery::Results*) {
  REQUIRE_FN(cuEventQuery);
  return drv_.cuEventQuery(in.event->event);
}

CUresult Session::HandleEventElapsedTime(CallState& cs, const EventElapsedTimeIn& in,
                                         calls::EventElapsedTime::Results* out) {
  REQUIRE_FN(cuEventElapsedTime);
  float ms = 0;
  CUresult r = drv_.cuEventElapsedTime(&ms, in.start->event, in.end->event);
  if (r != CUDA_SUCCESS) return r;
  memcpy(&out->milliseconds_float_bits, &ms, sizeof ms);
  return CUDA_SUCCESS;
}

CUresult Session::HandleEventDestroy(CallState&, const EventDestroyIn& in,
                                     calls::EventDestroy::Results*) {
  RevokeEventExport(*in.event.record);
  const CUevent event = in.event->event;
  AwaitLaneWaits([event](const LaneWait& w) { return w.handle == event; });
  CUresult r = drv_.cuEventDestroy(event);
  events_.Erase(in.event.id);
  return r;
}

// Access-policy windows and the persisting L2 cache are cache hints: checked here (the window's
// size against the device's limit, the ratio and properties), then the backend's to honour.
CUresult Session::HandleStreamSetAccessPolicyWindow(CallState& cs,
                                                    const StreamSetAccessPolicyWindowIn& in,
                                                    calls::StreamSetAccessPolicyWindow::Results*) {
  REQUIRE_FN(cuStreamSetAttribute);
  const wire::DeviceInfo& info = devices_.devices()[cs.ctx->device];
  const int max_window = CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE < info.attributes_size()
                             ? info.attributes(CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE)
                             : 0;
  CUstreamAttrValue value{};
  value.accessPolicyWindow.base_ptr = reinterpret_cast<void*>(in.base);
  value.accessPolicyWindow.num_bytes = in.bytes;
  value.accessPolicyWindow.hitRatio = std::bit_cast<float>(in.hit_ratio_bits);
  value.accessPolicyWindow.hitProp = static_cast<CUaccessProperty>(in.hit_prop);
  value.accessPolicyWindow.missProp = static_cast<CUaccessProperty>(in.miss_prop);
  const float ratio = value.accessPolicyWindow.hitRatio;
  auto property = [](uint32_t p) { return p <= CU_ACCESS_PROPERTY_PERSISTING; };
  if (!(ratio >= 0.0f && ratio <= 1.0f) || !property(in.hit_prop) || !property(in.miss_prop) ||
      in.bytes > static_cast<uint64_t>(std::max(max_window, 0))) {
    cs.detail = "access policy window out of range";
    return CUDA_ERROR_INVALID_VALUE;
  }
  return drv_.cuStreamSetAttribute(in.stream.stream, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                                   &value);
}

CUresult Session::HandleStreamGetAccessPolicyWindow(
    CallState& cs, const StreamGetAccessPolicyWindowIn& in,
    calls::StreamGetAccessPolicyWindow::Results* out) {
  REQUIRE_FN(cuStreamGetAttribute);
  CUstreamAttrValue value{};
  const CUresult r =
      drv_.cuStreamGetAttribute(in.stream.stream, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &value);
  if (r != CUDA_SUCCESS) return r;
  out->base = reinterpret_cast<uint64_t>(value.accessPolicyWindow.base_ptr);
  out->bytes = value.accessPolicyWindow.num_bytes;
  out->hit_ratio_bits = std::bit_cast<uint32_t>(value.accessPolicyWindow.hitRatio);
  out->hit_prop = static_cast<uint32_t>(value.accessPolicyWindow.hitProp);
  out->miss_prop = static_cast<uint32_t>(value.accessPolicyWindow.missProp);
  return CUDA_SUCCESS;
}

CUresult Session::HandleStreamSetSynchronizationPolicy(
    CallState& cs, const StreamSetSynchronizationPolicyIn& in,
    calls::StreamSetSynchronizationPolicy::Results*) {
  REQUIRE_FN(cuStreamSetAttribute);
  if (in.policy < CU_SYNC_POLICY_AUTO || in.policy > CU_SYNC_POLICY_BLOCKING_SYNC) {
    cs.detail = "unknown synchronization policy";
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUstreamAttrValue value{};
  value.syncPolicy = static_cast<CUsynchronizationPolicy>(in.policy);
  return drv_.cuStreamSetAttribute(in.stream.stream, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY,
                                   &value);
}

CUresult Session::HandleStreamGetSynchronizationPolicy(
    CallState& cs, const StreamGetSynchronizationPolicyIn& in,
    calls::StreamGetSynchronizationPolicy::Results* out) {
  REQUIRE_FN(cuStreamGetAttribute);
  CUstreamAttrValue value{};
  const CUresult r = drv_.cuStreamGetAttribute(in.stream.stream,
                                               CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &value);
  if (r == CUDA_SUCCESS) out->policy = static_cast<uint32_t>(value.syncPolicy);
  return r;
}

CUresult Session::HandleCtxResetPersistingL2Cache(CallState& cs, const CtxResetPersistingL2CacheIn&,
                                                  calls::CtxResetPersistingL2Cache::Results*) {
  REQUIRE_FN(cuCtxResetPersistingL2Cache);
  return drv_.cuCtxResetPersistingL2Cache();
}

}  // namespace rgpu::server
