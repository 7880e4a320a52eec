// StagingBuffers: pinned host memory of one backend context in which a session stages the data
// of asynchronous host-to-device copies whose stream is still busy. The session queues the copy
// from a buffer (cuMemcpyHtoDAsync) and, behind it on the same stream, a host function that gives
// the buffer back, so it goes on serving the session's other streams instead of waiting for that
// stream to reach the copy.
//
// Buffers come in power-of-two sizes from 64 KiB, are allocated with cuMemHostAlloc in the
// context the first time a size is needed, and are reused; the buffers of all of a session's
// contexts together stay within the session's StagingBudget (what a session may make the server
// pin). They die with their context: the backend frees them when it is destroyed (softgpu
// too: a session's staged bytes do not outlive it, and the server's memory does not grow with
// every session that staged copies).
//
// Threading: Take, ReleaseAfter and Release run on the session's thread with the context current;
// the release ReleaseAfter queues runs on the backend's callback thread. The object must outlive
// the context's streams: destroy it only after the backend context is destroyed (no callback can
// come later).
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "server/cuda_driver.h"

namespace rgpu::server {

// The pinned bytes the staging buffers of one session may hold together. Outlives them.
struct StagingBudget {
  explicit StagingBudget(uint64_t limit_bytes) : limit(limit_bytes) {}
  const uint64_t limit;
  std::atomic<uint64_t> used{0};
};

class StagingBuffers {
 public:
  StagingBuffers(const CudaDriver& drv, StagingBudget* budget);
  // Gives the buffers' bytes back to the budget (the backend freed the memory with the context).
  ~StagingBuffers();
  StagingBuffers(const StagingBuffers&) = delete;
  StagingBuffers& operator=(const StagingBuffers&) = delete;

  // True when the backend has what staging needs (pinned allocation, asynchronous copies, host
  // functions, stream queries).
  static bool Supported(const CudaDriver& drv);

  // A free buffer of at least `bytes` (its host address), or nullptr when none is free and the
  // budget cannot hold another, or the backend refuses one. The caller fills it, queues its
  // copy and then ReleaseAfter.
  void* Take(size_t bytes);

  // Queues the return of the buffer `host` (from Take, once) on `stream`, behind what was queued
  // there before. When the backend cannot queue it, waits for the stream and returns the buffer
  // now; the result is then that wait's. INVALID_VALUE for a buffer not taken.
  CUresult ReleaseAfter(void* host, CUstream stream);

  // Gives the buffer `host` (from Take) back now: its copy is known to have ended (a posted read
  // whose host function ran, server/session_posted_reads.cc). INVALID_VALUE for a buffer not
  // taken.
  CUresult Release(void* host);

  // Bytes of pinned memory allocated so far (never more than the budget).
  uint64_t allocated_bytes() const;

 private:
  struct Buffer {
    StagingBuffers* owner = nullptr;
    void* host = nullptr;
    size_t size = 0;
    // Free, taken (being filled, its copy queued), or released (its release queued on a stream).
    enum class State { kFree, kTaken, kReleased } state = State::kFree;  // GUARDED_BY(mu_)
  };
  // The host function queued behind a staged copy: the buffer (a Buffer*) is free again.
  static void CUDA_CB Released(void* buffer);

  const CudaDriver& drv_;
  StagingBudget* const budget_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Buffer>> buffers_;  // GUARDED_BY(mu_)
  uint64_t allocated_ = 0;                        // GUARDED_BY(mu_)
};

}  // namespace rgpu::server
