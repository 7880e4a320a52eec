// Streams (in-order work queues, one worker thread each, started on first use) and events.
#pragma once

#include <cuda.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace softgpu {

class Context;
class Stream;

// "Operation `seq` of `stream` has completed."
struct Dependency {
  std::shared_ptr<Stream> stream;
  uint64_t seq = 0;
};

class Stream {
 public:
  // `is_default`: the context's legacy NULL stream.
  Stream(Context* context, unsigned flags, int priority, bool is_default);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  Context* context() const { return context_; }
  unsigned flags() const { return flags_; }
  int priority() const { return priority_; }
  bool is_default() const { return is_default_; }
  // Hints set with cuStreamSetAttribute (softgpu has no cache and one scheduling policy: kept
  // to be read back, without effect).
  struct Hints {
    CUaccessPolicyWindow window{};
    CUsynchronizationPolicy sync_policy = CU_SYNC_POLICY_AUTO;
  };
  Hints hints() const {
    std::lock_guard lock(mu_);
    return hints_;
  }
  void set_hints(const Hints& h) {
    std::lock_guard lock(mu_);
    hints_ = h;
  }
  // Blocking streams synchronise implicitly with the default stream.
  bool blocking() const;

  // Appends `op`, to run after every dependency and every earlier operation of this stream;
  // returns its sequence number. Operations are skipped once the context has a sticky error.
  uint64_t Enqueue(std::function<void()> op, std::vector<Dependency> deps);
  // Runs `op` in the caller's thread, now, when that keeps the stream's order: nothing queued or
  // running here and every dependency completed (what the worker would do next, done sooner: a
  // short copy behind nothing then costs no hand-over to the worker). False when it did not run
  // (the caller enqueues it). Skipped like a queued operation once the context has a sticky
  // error. Holds this stream's lock while `op` runs, so `op` must be short and must not touch
  // this stream.
  bool RunNowIfIdle(const std::function<void()>& op, const std::vector<Dependency>& deps);
  uint64_t last_enqueued() const;
  bool Done(uint64_t seq) const { return completed_.load(std::memory_order_acquire) >= seq; }
  // Blocks until operation `seq` has completed (or the stream was shut down).
  void Wait(uint64_t seq);
  // Runs what is queued, then stops the worker. Idempotent. Safe to call from the worker itself
  // (the worker then exits after the current operation without being joined).
  void Shutdown();
  // cuStreamDestroy has forgotten the stream's handle; its queued work still runs
  // (Context::DestroyStream).
  void MarkDestroyed() { destroyed_.store(true, std::memory_order_release); }
  bool destroyed() const { return destroyed_.load(std::memory_order_acquire); }
  // Everything enqueued so far has completed.
  bool Idle() const { return Done(last_enqueued()); }

 private:
  struct Op {
    uint64_t seq;
    std::vector<Dependency> deps;
    std::function<void()> fn;
  };
  void WorkerLoop();
  // Runs one operation unless the context has a sticky error or was cancelled; an exception
  // fails the context.
  void Run(const std::function<void()>& op);

  Context* const context_;
  const unsigned flags_;
  const int priority_;
  const bool is_default_;
  mutable std::mutex mu_;
  std::condition_variable work_;
  std::condition_variable done_;
  std::deque<Op> queue_;
  Hints hints_;  // guarded by mu_
  // The last operation's sequence number: written under mu_, read without it (last_enqueued).
  std::atomic<uint64_t> last_seq_{0};
  std::atomic<uint64_t> completed_{0};
  // The earliest operation a sleeping Wait waits for (no waiter: the largest value), guarded by
  // mu_: the worker wakes waiters only when it completes that one, not after every operation (a
  // wake-up costs a context switch on both sides; a waiter behind thousands of queued kernels
  // was woken thousands of times).
  uint64_t wake_at_ = UINT64_MAX;
  std::atomic<uint32_t> pending_{0};  // operations queued and not yet taken by the worker
  std::atomic<bool> stopped_{false};
  std::atomic<bool> destroyed_{false};
  bool stopping_ = false;
  std::thread worker_;
};

// One recording of an event: completes when the stream reaches `seq`.
struct EventRecord {
  Dependency at;
  std::atomic<int64_t> time_ns{-1};  // steady-clock time when reached
};

// What an event has recorded. Shared by every handle of the event: the one cuEventCreate made
// and those cuIpcOpenEventHandle made from it in other contexts.
struct EventState {
  std::mutex mu;
  std::shared_ptr<EventRecord> record;  // null until first recorded; guarded by mu
};

class Event {
 public:
  Event(Context* context, unsigned flags)
      : context_(context), flags_(flags), state_(std::make_shared<EventState>()) {}
  // Another handle of an existing event (cuIpcOpenEventHandle).
  Event(Context* context, unsigned flags, std::shared_ptr<EventState> state)
      : context_(context), flags_(flags), state_(std::move(state)) {}
  Context* context() const { return context_; }
  unsigned flags() const { return flags_; }
  bool timing() const;
  std::shared_ptr<EventRecord> record() const {
    std::lock_guard lock(state_->mu);
    return state_->record;
  }
  void set_record(std::shared_ptr<EventRecord> r) {
    std::lock_guard lock(state_->mu);
    state_->record = std::move(r);
  }
  const std::shared_ptr<EventState>& state() const { return state_; }

  // The export this handle made with cuIpcGetEventHandle (0: none); guarded by the IPC tables'
  // mutex (api_ipc.cc).
  uint64_t ipc_export_id = 0;

 private:
  Context* const context_;
  const unsigned flags_;
  const std::shared_ptr<EventState> state_;
};

int64_t SteadyNowNs();

}  // namespace softgpu
