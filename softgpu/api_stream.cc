// Streams, events and host functions.
#include <cuda.h>

#include "softgpu/api_util.h"
#include "softgpu/ipc.h"

using namespace softgpu;

namespace {

// The stream and its (alive) context for a stream handle; NULL means the current context's
// default stream.
CUresult StreamAndContext(CUstream handle, std::shared_ptr<Stream>* stream,
                          std::shared_ptr<Context>* ctx) {
  if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
  if (handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) {
    if (CUresult r = CurrentContext(ctx); r != CUDA_SUCCESS) return r;
    *stream = (*ctx)->default_stream();
    return CUDA_SUCCESS;
  }
  *stream = GetDriver().streams.Find(handle);
  if (*stream == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *ctx = GetDriver().contexts.Find((*stream)->context());
  if (*ctx == nullptr || !(*ctx)->alive()) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

CUresult EventAndContext(CUevent handle, std::shared_ptr<Event>* event,
                         std::shared_ptr<Context>* ctx) {
  if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
  *event = GetDriver().events.Find(handle);
  if (*event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *ctx = GetDriver().contexts.Find((*event)->context());
  if (*ctx == nullptr || !(*ctx)->alive()) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

CUresult CreateStream(CUstream* phStream, unsigned int flags, int priority) {
  std::shared_ptr<Context> ctx;
  if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
  if (phStream == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  priority = std::max(-5, std::min(0, priority));
  std::shared_ptr<Stream> s = ctx->CreateStream(flags, priority);
  if (s == nullptr) return CUDA_ERROR_INVALID_CONTEXT;  // torn down meanwhile
  GetDriver().streams.Add(s);
  // A context torn down meanwhile (another thread's cuCtxDestroy) removed its streams before
  // this one was registered: it must not stay, as it would outlive its context (cuStreamQuery
  // reads the context through a registered stream).
  if (!ctx->alive()) {
    GetDriver().streams.Remove(s.get());
    ctx->DestroyStream(s);
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  *phStream = reinterpret_cast<CUstream>(s.get());
  return CUDA_SUCCESS;
}

CUresult RecordEvent(CUevent hEvent, CUstream hStream) {
  std::shared_ptr<Event> e;
  std::shared_ptr<Context> ectx;
  if (CUresult r = EventAndContext(hEvent, &e, &ectx); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Stream> s;
  std::shared_ptr<Context> sctx;
  if (CUresult r = StreamAndContext(hStream, &s, &sctx); r != CUDA_SUCCESS) return r;
  if (sctx != ectx) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = sctx->sticky_error(); r != CUDA_SUCCESS) return r;
  auto record = std::make_shared<EventRecord>();
  const uint64_t seq = sctx->Enqueue(s, [record] { record->time_ns.store(SteadyNowNs()); });
  record->at = Dependency{s, seq};
  e->set_record(std::move(record));
  return CUDA_SUCCESS;
}

}  // namespace

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  return Guard([&] { return CreateStream(phStream, Flags, 0); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags,
                                                           int priority) {
  return Guard([&] { return CreateStream(phStream, flags, priority); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamDestroy(CUstream hStream) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (hStream == nullptr || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD) {
      return CUDA_ERROR_INVALID_HANDLE;
    }
    std::shared_ptr<Stream> s = GetDriver().streams.Remove(hStream);
    if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    std::shared_ptr<Context> ctx = GetDriver().contexts.Find(s->context());
    if (ctx != nullptr)
      ctx->DestroyStream(s);
    else
      s->Shutdown();
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  return Guard([&] {
    std::shared_ptr<Stream> s;
    std::shared_ptr<Context> ctx;
    if (CUresult r = StreamAndContext(hStream, &s, &ctx); r != CUDA_SUCCESS) return r;
    s->Wait(s->last_enqueued());
    ctx->FlushPrintf();
    return ctx->sticky_error();
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamQuery(CUstream hStream) {
  return Guard([&] {
    if (hStream != nullptr && hStream != CU_STREAM_LEGACY && hStream != CU_STREAM_PER_THREAD) {
      // A stream a program polls: looked at in place, without the two references
      // StreamAndContext takes. Its context is looked at through the stream: a context's streams
      // leave the registry (DestroyContextResources, under the registry's lock) before the
      // context can go, so a registered stream's context is there, torn down (not alive) or not.
      if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
      CUresult r = CUDA_ERROR_INVALID_CONTEXT;
      bool done = false;
      if (!GetDriver().streams.Visit(hStream, [&](const Stream& s) {
            const Context* c = s.context();
            if (c != nullptr && c->alive()) r = c->sticky_error();
            done = s.Done(s.last_enqueued());
          })) {
        return CUDA_ERROR_INVALID_HANDLE;
      }
      if (r != CUDA_SUCCESS) return r;
      return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
    }
    std::shared_ptr<Stream> s;
    std::shared_ptr<Context> ctx;
    if (CUresult r = StreamAndContext(hStream, &s, &ctx); r != CUDA_SUCCESS) return r;
    if (CUresult r = ctx->sticky_error(); r != CUDA_SUCCESS) return r;
    return s->Done(s->last_enqueued()) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent,
                                                  unsigned int Flags) {
  return Guard([&] {
    std::shared_ptr<Stream> s;
    std::shared_ptr<Context> ctx;
    if (CUresult r = StreamAndContext(hStream, &s, &ctx); r != CUDA_SUCCESS) return r;
    if (CUresult r = ctx->sticky_error(); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Event> e = GetDriver().events.Find(hEvent);
    if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (Flags != 0 && Flags != CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<EventRecord> record = e->record();
    if (record == nullptr) return CUDA_SUCCESS;  // never recorded: nothing to wait for
    ctx->Enqueue(s, [] {}, {record->at});
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamGetPriority(CUstream hStream, int* priority) {
  return Guard([&] {
    std::shared_ptr<Stream> s;
    std::shared_ptr<Context> ctx;
    if (CUresult r = StreamAndContext(hStream, &s, &ctx); r != CUDA_SUCCESS) return r;
    if (priority == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *priority = s->priority();
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamGetFlags(CUstream hStream, unsigned int* flags) {
  return Guard([&] {
    std::shared_ptr<Stream> s;
    std::shared_ptr<Context> ctx;
    if (CUresult r = StreamAndContext(hStream, &s, &ctx); r != CUDA_SUCCESS) return r;
    if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *flags = s->flags();
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamGetCtx(CUstream hStream, CUcontext* pctx) {
  return Guard([&] {
    std::shared_ptr<Stream> s;
    std::shared_ptr<Context> ctx;
    if (CUresult r = StreamAndContext(hStream, &s, &ctx); r != CUDA_SUCCESS) return r;
    if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pctx = reinterpret_cast<CUcontext>(ctx.get());
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData) {
  return Guard([&] {
    std::shared_ptr<Stream> s;
    std::shared_ptr<Context> ctx;
    if (CUresult r = StreamAndContext(hStream, &s, &ctx); r != CUDA_SUCCESS) return r;
    if (CUresult r = ctx->sticky_error(); r != CUDA_SUCCESS) return r;
    if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
    ctx->Enqueue(s, [fn, userData] { fn(userData); });
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamAddCallback(CUstream hStream, CUstreamCallback callback,
                                                    void* userData, unsigned int flags) {
  return Guard([&] {
    std::shared_ptr<Stream> s;
    std::shared_ptr<Context> ctx;
    if (CUresult r = StreamAndContext(hStream, &s, &ctx); r != CUDA_SUCCESS) return r;
    if (callback == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    Context* c = ctx.get();
    ctx->Enqueue(
        s, [callback, userData, hStream, c] { callback(hStream, c->sticky_error(), userData); });
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    if (phEvent == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const unsigned valid = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (Flags & ~valid) return CUDA_ERROR_INVALID_VALUE;
    if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    auto e = std::make_shared<Event>(ctx.get(), Flags);
    GetDriver().events.Add(e);
    *phEvent = reinterpret_cast<CUevent>(e.get());
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
  return Guard([&] { return RecordEvent(hEvent, hStream); });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream,
                                                       unsigned int flags) {
  return Guard([&] {
    if (flags != CU_EVENT_RECORD_DEFAULT && flags != CU_EVENT_RECORD_EXTERNAL) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    return RecordEvent(hEvent, hStream);
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuEventQuery(CUevent hEvent) {
  return Guard([&] {
    std::shared_ptr<Event> e;
    std::shared_ptr<Context> ctx;
    if (CUresult r = EventAndContext(hEvent, &e, &ctx); r != CUDA_SUCCESS) return r;
    if (CUresult r = ctx->sticky_error(); r != CUDA_SUCCESS) return r;
    std::shared_ptr<EventRecord> rec = e->record();
    if (rec == nullptr) return CUDA_SUCCESS;
    return rec->at.stream->Done(rec->at.seq) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
  return Guard([&] {
    std::shared_ptr<Event> e;
    std::shared_ptr<Context> ctx;
    if (CUresult r = EventAndContext(hEvent, &e, &ctx); r != CUDA_SUCCESS) return r;
    std::shared_ptr<EventRecord> rec = e->record();
    if (rec != nullptr) rec->at.stream->Wait(rec->at.seq);
    ctx->FlushPrintf();
    return ctx->sticky_error();
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuEventElapsedTime(float* pMilliseconds, CUevent hStart,
                                                   CUevent hEnd) {
  return Guard([&] {
    if (pMilliseconds == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<Event> start, end;
    std::shared_ptr<Context> c1, c2;
    if (CUresult r = EventAndContext(hStart, &start, &c1); r != CUDA_SUCCESS) return r;
    if (CUresult r = EventAndContext(hEnd, &end, &c2); r != CUDA_SUCCESS) return r;
    if (!start->timing() || !end->timing()) return CUDA_ERROR_INVALID_HANDLE;
    std::shared_ptr<EventRecord> a = start->record(), b = end->record();
    if (a == nullptr || b == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (!a->at.stream->Done(a->at.seq) || !b->at.stream->Done(b->at.seq)) {
      return CUDA_ERROR_NOT_READY;
    }
    if (CUresult r = c1->sticky_error(); r != CUDA_SUCCESS) return r;
    const int64_t ta = a->time_ns.load(), tb = b->time_ns.load();
    if (ta < 0 || tb < 0) return CUDA_ERROR_INVALID_HANDLE;
    *pMilliseconds = static_cast<float>(static_cast<double>(tb - ta) / 1e6);
    return CUDA_SUCCESS;
  });
}

// The CUDA 12 name of the same call (cuda.h 13 maps cuEventElapsedTime to the _v2 symbol).
extern "C" SOFTGPU_EXPORT CUresult CUDAAPI
cuEventElapsedTime_v1(float* ms, CUevent a, CUevent b) __asm__("cuEventElapsedTime");
extern "C" SOFTGPU_EXPORT CUresult CUDAAPI cuEventElapsedTime_v1(float* ms, CUevent a, CUevent b) {
  return cuEventElapsedTime_v2(ms, a, b);
}

SOFTGPU_EXPORT CUresult CUDAAPI cuEventDestroy(CUevent hEvent) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Event> e = GetDriver().events.Remove(hEvent);
    if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    // Its IPC handle can no longer be opened; handles opened from it keep the shared state.
    RevokeIpcEventExport(*e);
    return CUDA_SUCCESS;
  });
}

// Stream attributes: the access-policy window and synchronization policy are checked and kept
// (hints: softgpu has no cache); the priority is the stream's.
SOFTGPU_EXPORT CUresult CUDAAPI cuStreamSetAttribute(CUstream hStream, CUstreamAttrID attr,
                                                     const CUstreamAttrValue* value) {
  return Guard([&] {
    std::shared_ptr<Stream> s;
    std::shared_ptr<Context> ctx;
    if (CUresult r = StreamAndContext(hStream, &s, &ctx); r != CUDA_SUCCESS) return r;
    if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Stream::Hints hints = s->hints();
    switch (attr) {
      case CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
        const CUaccessPolicyWindow& w = value->accessPolicyWindow;
        auto property = [](CUaccessProperty p) {
          return p == CU_ACCESS_PROPERTY_NORMAL || p == CU_ACCESS_PROPERTY_STREAMING ||
                 p == CU_ACCESS_PROPERTY_PERSISTING;
        };
        if (!(w.hitRatio >= 0.0f && w.hitRatio <= 1.0f) || !property(w.hitProp) ||
            !property(w.missProp) || w.num_bytes > kMaxAccessPolicyWindowBytes) {
          return CUDA_ERROR_INVALID_VALUE;
        }
        hints.window = w;
        break;
      }
      case CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY:
        if (value->syncPolicy < CU_SYNC_POLICY_AUTO ||
            value->syncPolicy > CU_SYNC_POLICY_BLOCKING_SYNC) {
          return CUDA_ERROR_INVALID_VALUE;
        }
        hints.sync_policy = value->syncPolicy;
        break;
      default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    s->set_hints(hints);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuStreamGetAttribute(CUstream hStream, CUstreamAttrID attr,
                                                     CUstreamAttrValue* value) {
  return Guard([&] {
    std::shared_ptr<Stream> s;
    std::shared_ptr<Context> ctx;
    if (CUresult r = StreamAndContext(hStream, &s, &ctx); r != CUDA_SUCCESS) return r;
    if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *value = CUstreamAttrValue{};
    switch (attr) {
      case CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW:
        value->accessPolicyWindow = s->hints().window;
        return CUDA_SUCCESS;
      case CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY:
        value->syncPolicy = s->hints().sync_policy;
        return CUDA_SUCCESS;
      case CU_STREAM_ATTRIBUTE_PRIORITY:
        value->priority = s->priority();
        return CUDA_SUCCESS;
      default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxResetPersistingL2Cache() {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    return CurrentContext(&ctx);  // nothing persists in a cache softgpu does not have
  });
}
