// A context: one tenant's address space, streams, events and loaded modules on a device, plus
// the sticky error that a faulting kernel leaves behind.
#pragma once

#include <cuda.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "softgpu/device.h"
#include "softgpu/exec.h"
#include "softgpu/heap.h"
#include "softgpu/memory.h"
#include "softgpu/stream.h"

namespace softgpu {

class Context : public PrintfSink {
 public:
  Context(Device* device, unsigned flags, bool primary);
  ~Context() override;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device* device() const { return device_; }
  unsigned flags() const { return flags_; }
  bool primary() const { return primary_; }
  AddressSpace& memory() { return memory_; }
  // Device-side malloc heap (created in this context's memory on first use).
  DeviceHeap& heap() { return heap_; }

  // CUDA_SUCCESS, or the error every later call on this context reports (e.g. after a kernel
  // accessed an illegal address).
  CUresult sticky_error() const { return sticky_.load(std::memory_order_acquire); }
  // Sets the sticky error (first one wins) and prints `message` on stderr.
  void Fail(CUresult error, const std::string& message);

  const std::shared_ptr<Stream>& default_stream() const { return default_stream_; }
  std::shared_ptr<Stream> CreateStream(unsigned flags, int priority);
  // Forgets a stream the program destroyed without waiting for it, as CUDA does: its queued work
  // still runs, in order with the legacy default stream and before cuCtxSynchronize returns,
  // and its worker is shut down by the first DestroyStream or CreateStream that finds it idle
  // (or by Teardown).
  void DestroyStream(const std::shared_ptr<Stream>& stream);

  // Enqueues `op` on `stream` honouring the legacy default stream: work on the default stream
  // waits for all blocking streams and vice versa. `extra` adds dependencies.
  uint64_t Enqueue(const std::shared_ptr<Stream>& stream, std::function<void()> op,
                   std::vector<Dependency> extra = {});
  // Runs a short `op` now, in the caller's thread, when it would run next on `stream` anyway
  // (Stream::RunNowIfIdle, with Enqueue's dependencies): for small copies, which a hand-over to
  // the stream's worker and the wait for it cost far more than the copy. False when it did not
  // run (the caller enqueues it).
  bool RunNowIfIdle(const std::shared_ptr<Stream>& stream, const std::function<void()>& op);
  // What a default-stream operation issued now would wait for: the default stream's last
  // operation and that of every blocking stream.
  std::vector<Dependency> DefaultOrder();
  // Waits until everything a default-stream operation issued now would wait for has completed,
  // so that a synchronous operation can then run on the calling thread.
  void WaitForDefaultOrder();
  // Waits for all work issued so far on every stream, non-blocking ones included.
  void WaitForAllStreams();
  // Waits for all work of all streams; returns the sticky error. Flushes device printf output.
  CUresult Synchronize();
  // Waits for work and releases everything (memory, streams). Used by destroy and reset.
  void Teardown();

  // Device printf output, written at the next synchronization to stdout, or to the handler
  // set with SetPrintfHandler (softgpuCtxSetPrintfHandler).
  void Write(std::string text) override;
  void FlushPrintf();
  using PrintfHandler = void (*)(void* user, const char* data, size_t size);
  void SetPrintfHandler(PrintfHandler handler, void* user);

  // Limits (cuCtxSetLimit).
  size_t stack_size = 1024;
  size_t printf_fifo_size = 1 << 20;
  size_t pending_launches = 2048;
  std::atomic<size_t> persisting_l2_bytes{0};  // CU_LIMIT_PERSISTING_L2_CACHE_SIZE (a hint)
  size_t sync_depth = 2;

  // Reactivates a released/reset primary context.
  void Revive();
  bool alive() const { return alive_.load(); }
  // Set while the context is torn down, or once it is aborted: running kernels stop, queued work
  // is dropped.
  const std::atomic<bool>& cancelled() const { return cancelled_; }
  // Stops the context's work from any thread (softgpuCtxAbort): running kernels end at their
  // next check, queued work is dropped, and `error` becomes the sticky error.
  void Abort(CUresult error);
  // Kernels launched from now on fail with CUDA_ERROR_LAUNCH_TIMEOUT once they have run this
  // long (0: no bound). Starts as the device's RGPU_SOFTGPU_KERNEL_TIMEOUT_MS.
  std::atomic<uint64_t> kernel_timeout_ms{0};
  // Stream waits on memory submitted and not yet gone (api_stream_memops.cc bounds them).
  std::atomic<uint32_t> pending_memory_waits{0};

 private:
  // Adds what an operation issued now on `stream` waits for besides its stream's earlier work:
  // on the legacy default stream every blocking stream's last operation, on a blocking stream
  // the default stream's. Under mu_.
  void AddLegacyOrderLocked(const Stream& stream, std::vector<Dependency>* deps);
  // Takes the destroyed streams whose work is done out of streams_, for the caller to shut down
  // outside mu_. Under mu_.
  std::vector<std::shared_ptr<Stream>> TakeFinishedStreamsLocked();

  Device* const device_;
  const unsigned flags_;
  const bool primary_;
  AddressSpace memory_;
  DeviceHeap heap_{&memory_};
  std::atomic<CUresult> sticky_{CUDA_SUCCESS};
  std::atomic<bool> alive_{true};
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;           // guards streams_ (destroyed ones still working included) and
                            // enqueue ordering
  bool torn_down_ = false;  // Teardown took streams_; no stream joins until Revive (under mu_)
  std::shared_ptr<Stream> default_stream_;
  std::vector<std::shared_ptr<Stream>> streams_;
  std::mutex printf_mu_;
  std::string printf_pending_;
  PrintfHandler printf_handler_ = nullptr;  // guarded by printf_mu_
  void* printf_user_ = nullptr;
};

}  // namespace softgpu
