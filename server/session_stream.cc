// Session's handlers for streams and events (proto/calls.def: Streams and events). Every stream
// and event a call names has been resolved to one of the call's context before these run.
#include <cstring>

#include "server/require_fn.h"
#include "server/session.h"

namespace rgpu::server {

CUresult Session::HandleStreamCreate(CallState& cs, const StreamCreateIn& in,
                                     calls::StreamCreate::Results* out) {
  if (CUresult r = RoomFor(cs, streams_.size(), limits_.max_streams, "streams");
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
  out->stream = streams_.Insert(StreamRecord{s, cs.ctx_id});
  return CUDA_SUCCESS;
}

CUresult Session::HandleStreamDestroy(CallState&, const StreamDestroyIn& in,
                                      calls::StreamDestroy::Results*) {
  CUresult r = drv_.cuStreamDestroy(in.stream->stream);
  streams_.Erase(in.stream.id);
  return r;
}

CUresult Session::HandleStreamSynchronize(CallState&, const StreamSynchronizeIn& in,
                                          calls::StreamSynchronize::Results*) {
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

CUresult Session::HandleEventCreate(CallState& cs, const EventCreateIn& in,
                                    calls::EventCreate::Results* out) {
  if (CUresult r = RoomFor(cs, events_.size(), limits_.max_events, "events"); r != CUDA_SUCCESS) {
    return r;
  }
  CUevent e = nullptr;
  CUresult r = drv_.cuEventCreate(&e, in.flags);
  if (r != CUDA_SUCCESS) return r;
  out->event = events_.Insert(EventRecord{e, cs.ctx_id});
  return CUDA_SUCCESS;
}

CUresult Session::HandleEventRecord(CallState&, const EventRecordIn& in,
                                    calls::EventRecord::Results*) {
  return drv_.cuEventRecord(in.event->event, in.stream.stream);
}

CUresult Session::HandleEventSynchronize(CallState& cs, const EventSynchronizeIn& in,
                                         calls::EventSynchronize::Results*) {
  REQUIRE_FN(cuEventSynchronize);
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
  CUresult r = drv_.cuEventDestroy(in.event->event);
  events_.Erase(in.event.id);
  return r;
}

}  // namespace rgpu::server
