// KernelTurns: the kernels of one backend context under --fair-share, each run in its turn on the
// context's device (FairScheduler) without holding the session's thread.
//
// Launch queues on the kernel's stream, in this order: an event and a host function that say the
// stream has reached the kernel (everything queued before it has ended), a wait until the
// stream's gate word (pinned host memory, cuStreamWaitValue32) reaches the kernel's turn number,
// the kernel, and an event and a host function that say it has ended. The session's thread then
// serves its next call: the stream's own order keeps what is queued behind the kernel behind it,
// and the program's other streams go on. The keeper, a thread of this object, waits until a
// stream has reached a kernel, waits for the kernel's turn on the device, opens the gate (writes
// the turn number) and ends the turn when the kernel has ended, timing it from the gate's opening:
// the GPU time its account is charged and the session is metered. A stream's kernels are opened
// in their order; several streams' in the order they reach them, round robin when several have.
//
// A kernel that runs past `max_kernel_ms` (when not 0), or any kernel once `aborted` becomes true
// (when not null), is given up on: the keeper calls `stop` (no GPU takes a running kernel off its
// SMs on request; the session destroys its contexts) and ends the turn. A backend that bounds and
// stops kernels itself (softgpu) is given neither.
//
// Threading: Launch and Stop run on the session's thread with the context current; the keeper is
// this object's thread; the host functions run on the backend's callback thread and take no lock
// (a driver may hold its own while it runs them, and the keeper queries it under mu_);
// ContextGone on any thread. The object must outlive the context's streams: Stop it (or mark the
// context gone) before the context is destroyed, and destroy the object after.
#pragma once

#include <cuda.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/cuda_driver.h"
#include "server/fair_scheduler.h"

namespace rgpu::server {

class KernelTurns {
 public:
  // Where the turns' times are added (any thread reads them).
  struct Meter {
    std::atomic<double>* busy_seconds = nullptr;   // from each gate's opening to its kernel's end
    std::atomic<double>* queue_seconds = nullptr;  // from reaching a kernel to its turn
  };
  // `stop(late)`: give up on the context's kernels (late: past max_kernel_ms; otherwise aborted).
  KernelTurns(const CudaDriver& drv, CUcontext context, TurnTaker* scheduler, ShareAccount* account,
              Meter meter, uint64_t max_kernel_ms, const std::atomic<bool>* aborted,
              std::function<void(bool late)> stop);
  // Stops (see Stop).
  ~KernelTurns();
  KernelTurns(const KernelTurns&) = delete;
  KernelTurns& operator=(const KernelTurns&) = delete;

  // True when the backend has what turns need (stream waits on memory, mapped pinned memory,
  // events, host functions).
  static bool Supported(const CudaDriver& drv);

  // Queues the kernel that `launch` queues on `stream` behind its turn, and returns launch's
  // result (an error: nothing of the kernel runs; its gate opens without a turn). An error
  // before launch is called (no pinned memory, no event): launch was not called.
  CUresult Launch(CUstream stream, const std::function<CUresult()>& launch);

  // Ends the keeper (without waiting for a running kernel's end) and opens every gate, so what is
  // queued behind them runs without turns: the context is about to be destroyed, which ends its
  // work. Idempotent.
  void Stop();

  // The context was destroyed (by `stop`): nothing of it is touched again, gates included (their
  // memory went with it). Any thread; idempotent.
  void ContextGone();

 private:
  struct Turn {
    uint32_t number = 0;  // the gate value that opens it
    CUevent reached = nullptr;
    CUevent ended = nullptr;  // null: no kernel (its launch failed), opened without a turn
  };
  struct Gate {
    uint32_t* word = nullptr;  // pinned; the keeper (and Stop) write it under mu_
    CUdeviceptr device_word = 0;
    uint32_t issued = 0;     // the last turn number a wait was queued for (session thread)
    std::deque<Turn> turns;  // waiting or running, in the stream's order (GUARDED_BY mu_)
  };
  // The host function queued behind the events: wakes the keeper.
  static void CUDA_CB Wake(void* self);
  void KeeperLoop();
  // Waits for `turn`'s kernel to end (or gives up on it); its result.
  CUresult AwaitEnd(const Turn& turn);
  // The gate of `stream`, made on first use (GUARDED_BY mu_); null when no pinned word is had.
  Gate* GateOf(CUstream stream);
  CUevent TakeEvent();                 // GUARDED_BY mu_; null when the backend makes none
  void Recycle(const Turn& turn);      // GUARDED_BY mu_
  void Open(Gate& gate, uint32_t to);  // GUARDED_BY mu_

  const CudaDriver& drv_;
  const CUcontext context_;
  TurnTaker* const scheduler_;
  ShareAccount* const account_;
  const Meter meter_;
  const uint64_t max_kernel_ms_;
  const std::atomic<bool>* const aborted_;
  const std::function<void(bool)> stop_;

  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<bool> woken_{false};                   // set by Wake without mu_
  bool stopping_ = false;                            // GUARDED_BY mu_
  bool gone_ = false;                                // GUARDED_BY mu_
  std::map<CUstream, std::unique_ptr<Gate>> gates_;  // GUARDED_BY mu_
  CUstream last_served_ = nullptr;                   // the keeper's round robin
  std::vector<uint32_t*> word_blocks_;               // pinned blocks of gate words
  size_t words_left_ = 0;                            // in the last block
  std::vector<CUevent> free_events_;                 // GUARDED_BY mu_
  std::thread keeper_;
};

}  // namespace rgpu::server
