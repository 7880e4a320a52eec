// Stream-ordered work that waits in the client: graph capture, host functions, and waits for
// events of another server's device.
//
// A host function (cuLaunchHostFunc, cuStreamAddCallback) runs in this process on rgpu's host
// worker thread, after the work issued before it on its stream has finished on the server, and
// before any work issued after it: until it has run, later operations on that stream are held
// here in order, then sent. The caller never blocks on it, as with CUDA. A wait for an event of
// another server's device (HoldUntilEvent) holds the stream's later work the same way, on a thread
// of its own that waits for the event, so that the waits and the host functions of independent
// streams never wait for each other.
#include <condition_variable>
#include <deque>
#include <atomic>
#include <thread>

#include "client/graph_order.h"
#include "client/impl.h"

using rgpu::client::ClientState;
using rgpu::client::GraphNode;
using rgpu::client::ObjectKind;
using rgpu::client::StreamHold;

namespace {

struct HostJob {
  CUstream stream;       // as the program named it (its hold)
  CUstream sync_stream;  // the stream whose work it follows (the caller's own per-thread one)
  CUctx_st* ctx;
  std::function<void(CUresult)> work;  // gets the stream's status
};

// Never destroyed: the worker thread waits on these until the process ends, and destroying a
// condition variable with a waiter at exit would hang.
struct HostWork {
  std::mutex jobs_mu;
  std::condition_variable jobs_cv;     // a job was queued
  std::condition_variable drained_cv;  // held work or a host function finished
  std::deque<HostJob> jobs;
  bool worker_started = false;
  CUresult held_error = CUDA_SUCCESS;  // first failure of held work (under objects_mutex)
};
HostWork& W() {
  static HostWork* w = new HostWork();
  return *w;
}
thread_local bool t_on_host_worker = false;
// Set while this thread replays held work (Release): what it replays follows everything held
// before it, so a replayed call that waits for its stream to drain must not wait for itself.
thread_local int t_replaying = 0;
// Set (under objects_mutex) once any stream has been blocked: until then no stream holds work and
// no held work failed, and StreamHeld and WaitStreamDrained answer without a lock.
std::atomic<bool> g_holds_used{false};

// Starts a detached thread of the program's C library (set by the interposer when it loads this
// runtime; null when loaded otherwise).
using ProgramThreadStarter = int (*)(void* (*)(void*), void*);
std::atomic<ProgramThreadStarter> g_program_thread_starter{nullptr};

bool IsDefaultStream(CUstream s) {
  return s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

// The hold of `stream`, or nullptr for a handle that is not a live stream.
StreamHold* HoldOf(CUstream stream, CUctx_st** ctx) {
  if (IsDefaultStream(stream)) {
    CUctx_st* c = rgpu::client::CurrentContext();
    if (c == nullptr || !ClientState::Get().IsLive(c)) return nullptr;
    *ctx = c;
    return &c->default_hold;
  }
  if (!ClientState::Get().IsLive(stream) || stream->kind != ObjectKind::kStream) return nullptr;
  *ctx = stream->ctx;
  return &stream->hold;
}

// Sends the held work of `hold` in order, until it is empty or the stream blocks again (a held
// host function), leaving the rest held.
void Release(StreamHold* hold) {
  std::unique_lock<std::mutex> lock(ClientState::Get().objects_mutex());
  hold->blocked = false;
  while (!hold->blocked && !hold->held.empty()) {
    auto [stream, replay] = std::move(hold->held.front());
    hold->held.pop_front();
    hold->replaying++;  // not drained until it has been sent
    lock.unlock();
    ++t_replaying;
    CUresult r = replay(stream);
    --t_replaying;
    lock.lock();
    hold->replaying--;
    if (r != CUDA_SUCCESS && W().held_error == CUDA_SUCCESS) W().held_error = r;
  }
}

void HostWorker() {
  t_on_host_worker = true;
  for (;;) {
    HostJob job;
    {
      std::unique_lock<std::mutex> lock(W().jobs_mu);
      W().jobs_cv.wait(lock, [] { return !W().jobs.empty(); });
      job = std::move(W().jobs.front());
      W().jobs.pop_front();
    }
    // The job's context is current here, for the stream handle and for held default-stream work.
    rgpu::client::ContextStack().assign(1, job.ctx);
    // Everything issued on the stream before the host function has been sent (later work is
    // held), so synchronizing it waits for exactly that work.
    CUresult status = rgpu_impl_cuStreamSynchronize(job.sync_stream);
    job.work(status);
    CUctx_st* ctx = nullptr;
    StreamHold* hold;
    {
      std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
      hold = HoldOf(job.stream, &ctx);
    }
    if (hold != nullptr) Release(hold);
    {
      std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
      job.ctx->host_work--;
    }
    W().drained_cv.notify_all();
  }
}

// Queues a host function behind `stream`'s earlier work and holds what follows it.
CUresult EnqueueHostWork(CUstream stream, std::function<void(CUresult)> work) {
  CUctx_st* ctx;
  uint64_t remote;
  CUresult r = rgpu::client::ResolveStream(stream, &ctx, &remote);
  if (r != CUDA_SUCCESS) return r;
  CUstream sync_stream = stream;  // resolved above, so a per-thread one exists
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    CUctx_st* owner = nullptr;
    StreamHold* hold = HoldOf(stream, &owner);
    if (hold == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    hold->blocked = true;
    g_holds_used.store(true, std::memory_order_release);
    ctx->host_work++;
    if (stream == CU_STREAM_PER_THREAD) sync_stream = rgpu::client::ExistingPerThreadStream(ctx);
  }
  std::lock_guard<std::mutex> lock(W().jobs_mu);
  if (!W().worker_started) {
    // The program's host functions run on this thread, so it must be a thread of the program's
    // own C library (the one this runtime's namespace has is another copy, whose threads lack
    // the program's thread-local state: printf("%f") crashed in one).
    auto start = g_program_thread_starter.load();
    if (start == nullptr || start(
                                [](void*) -> void* {
                                  HostWorker();
                                  return nullptr;
                                },
                                nullptr) != 0) {
      std::thread(HostWorker).detach();
    }
    W().worker_started = true;
  }
  W().jobs.push_back(HostJob{stream, sync_stream, ctx, std::move(work)});
  W().jobs_cv.notify_one();
  return CUDA_SUCCESS;
}

CUresult TakeHeldError() {
  CUresult r = W().held_error;
  W().held_error = CUDA_SUCCESS;
  return r;
}

}  // namespace

namespace rgpu::client {

bool Defer(CUstream stream, CUgraphNodeType type, std::function<CUresult(CUstream)> replay,
           bool recordable) {
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  if (!IsDefaultStream(stream) && ClientState::Get().IsLive(stream) &&
      stream->kind == ObjectKind::kStream && stream->capture != nullptr) {
    CUgraph_st* g = stream->capture;
    GraphNode node{type, std::move(replay)};
    node.graph = g;
    node.recordable = recordable;
    // Captured work is replayed in capture order: each node follows the one before it, or the
    // nodes the program named (cuStreamUpdateCaptureDependencies).
    node.deps = NextCaptureDeps(*g);
    g->next_deps_set = false;
    g->next_deps.clear();
    g->nodes.push_back(std::move(node));
    ClientState::Get().Register(&g->nodes.back());
    return true;
  }
  CUctx_st* ctx = nullptr;
  StreamHold* hold = HoldOf(stream, &ctx);
  if (hold == nullptr) return false;
  // Held while a host function blocks the stream, and also while held work is still being sent
  // (Release): work issued then goes behind it, not past it. The thread replaying held work sends
  // what its replay issues directly: that work precedes what is still held.
  if (!hold->blocked && (t_replaying > 0 || (hold->held.empty() && hold->replaying == 0))) {
    return false;
  }
  // Held work runs on the host worker's thread later: a per-thread stream handle is kept as the
  // caller's own per-thread stream, not the worker's.
  CUstream own = stream == CU_STREAM_PER_THREAD ? ExistingPerThreadStream(ctx) : nullptr;
  hold->held.emplace_back(own != nullptr ? own : stream, std::move(replay));
  return true;
}

bool CaptureEventRecord(CUevent event, CUstream stream) {
  if (IsDefaultStream(stream)) return false;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  if (!ClientState::Get().IsLive(stream) || stream->capture == nullptr) return false;
  event->captured_in = stream->capture;
  stream->capture->events.push_back(event);
  return true;
}

bool CaptureStreamWait(CUstream stream, CUevent event) {
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  CUgraph_st* graph = event->captured_in;
  if (graph == nullptr) return false;
  if (IsDefaultStream(stream) || !ClientState::Get().IsLive(stream)) return false;
  if (stream->capture == nullptr) {
    // A fork: the stream joins the capture. Its operations are appended after everything
    // captured so far, which orders them after the event as the dependency requires.
    stream->capture = graph;
    graph->streams.push_back(stream);
  }
  return stream->capture == graph;
}

bool StreamHeld(CUstream stream) {
  if (!g_holds_used.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
  CUctx_st* ctx = nullptr;
  StreamHold* hold = HoldOf(stream, &ctx);
  return hold != nullptr && (hold->blocked || !hold->held.empty() || hold->replaying > 0);
}

CUresult WaitStreamDrained(CUstream stream) {
  // The worker itself, and a replay of held work, wait for nothing held.
  if (t_on_host_worker || t_replaying > 0) return CUDA_SUCCESS;
  if (!g_holds_used.load(std::memory_order_acquire)) return CUDA_SUCCESS;
  std::unique_lock<std::mutex> lock(ClientState::Get().objects_mutex());
  CUctx_st* ctx = nullptr;
  StreamHold* hold = HoldOf(stream, &ctx);
  if (hold == nullptr) return CUDA_SUCCESS;
  if (IsDefaultStream(stream)) {
    // The legacy default stream waits for the whole context.
    W().drained_cv.wait(lock, [ctx] { return ctx->host_work == 0; });
  } else {
    W().drained_cv.wait(
        lock, [hold] { return !hold->blocked && hold->held.empty() && hold->replaying == 0; });
  }
  return TakeHeldError();
}

void NoteRecordSent(const std::shared_ptr<std::atomic<int>>& held) {
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    held->fetch_sub(1);
  }
  W().drained_cv.notify_all();
}

CUresult HoldUntilEvent(CUstream stream, CUevent event, bool same_server, unsigned flags) {
  CUctx_st* ctx;
  uint64_t remote;
  CUresult r = ResolveStream(stream, &ctx, &remote);
  if (r != CUDA_SUCCESS) return r;
  {
    std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
    CUctx_st* owner = nullptr;
    StreamHold* hold = HoldOf(stream, &owner);
    if (hold == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    hold->blocked = true;  // it was not (Defer holds whatever comes while a stream is blocked)
    g_holds_used.store(true, std::memory_order_release);
    ctx->host_work++;
  }
  // The event's id, context and count of held records, not its handle: the program may destroy
  // the event meanwhile (the server then answers for an event it no longer has, and the stream
  // goes on).
  std::thread([stream, ctx, remote, event_ctx = event->ctx, event_remote = event->remote,
               held = event->held_records, same_server, flags] {
    ContextStack().assign(1, ctx);  // for the default stream's hold and the held work's replay
    {
      // A record the program made before this wait goes first.
      std::unique_lock<std::mutex> lock(ClientState::Get().objects_mutex());
      W().drained_cv.wait(lock, [&held] { return held->load() <= 0; });
    }
    if (same_server) {
      Server().Post<calls::StreamWaitEvent>(
          ctx->remote, {.stream = remote, .event = event_remote, .flags = flags});
    } else {
      Server().Call<calls::EventSynchronize>(event_ctx->remote, {.event = event_remote});
    }
    StreamHold* hold;
    {
      std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
      CUctx_st* owner = nullptr;
      hold = HoldOf(stream, &owner);
    }
    if (hold != nullptr) Release(hold);
    {
      std::lock_guard<std::mutex> lock(ClientState::Get().objects_mutex());
      ctx->host_work--;
    }
    W().drained_cv.notify_all();
  }).detach();
  return CUDA_SUCCESS;
}

CUresult WaitContextDrained(CUctx_st* ctx) {
  if (t_on_host_worker || t_replaying > 0 || ctx == nullptr) return CUDA_SUCCESS;
  std::unique_lock<std::mutex> lock(ClientState::Get().objects_mutex());
  W().drained_cv.wait(lock, [ctx] { return ctx->host_work == 0; });
  return TakeHeldError();
}

}  // namespace rgpu::client

RGPU_IMPL(cuLaunchHostFunc)(CUstream stream, CUhostFn fn, void* data) {
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (rgpu::client::Defer(stream, CU_GRAPH_NODE_TYPE_HOST, [fn, data](CUstream s) {
        return rgpu_impl_cuLaunchHostFunc(s, fn, data);
      })) {
    return CUDA_SUCCESS;
  }
  return EnqueueHostWork(stream, [fn, data](CUresult) { fn(data); });
}
RGPU_PER_THREAD_SAME_AS(cuLaunchHostFunc_ptsz)

RGPU_IMPL(cuStreamAddCallback)
(CUstream stream, CUstreamCallback cb, void* data, unsigned int flags) {
  if (cb == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (rgpu::client::Defer(stream, CU_GRAPH_NODE_TYPE_HOST, [cb, data](CUstream s) {
        return rgpu_impl_cuStreamAddCallback(s, cb, data, 0);
      })) {
    return CUDA_SUCCESS;
  }
  return EnqueueHostWork(stream, [stream, cb, data](CUresult status) { cb(stream, status, data); });
}
RGPU_PER_THREAD_SAME_AS(cuStreamAddCallback_ptsz)

// Called by the interposer (interpose/common/private_runtime.cc) right after loading this
// runtime into its private namespace.
extern "C" __attribute__((visibility("default"))) void rgpu_client_set_thread_starter(
    int (*start)(void* (*)(void*), void*)) {
  g_program_thread_starter.store(start);
}
