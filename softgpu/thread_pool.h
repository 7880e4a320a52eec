// A fixed pool of worker threads that runs data-parallel loops (the blocks of a grid). The
// calling thread always takes part, so a loop makes progress even when every worker is busy.
#pragma once

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

class ThreadPool {
 public:
  // `workers` helper threads (0 is allowed: the caller does all the work).
  explicit ThreadPool(uint32_t workers);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The process-wide pool, created on first use with (host cores - 1) workers.
  static ThreadPool& Global();

  // Helper threads (the caller of ParallelFor makes one more).
  uint32_t workers() const { return static_cast<uint32_t>(threads_.size()); }

  // Calls fn(i) for every i in [0, n), spread over the workers and the caller, and returns when
  // all calls have finished. fn must not throw. `leave` (optional, must not throw) runs on each
  // thread that took part, after its last call of fn and before ParallelFor returns (to drop what
  // the thread's own state still holds of the loop).
  void ParallelFor(uint64_t n, const std::function<void(uint64_t)>& fn,
                   const std::function<void()>* leave = nullptr);

 private:
  struct Job {
    const std::function<void(uint64_t)>* fn;
    const std::function<void()>* leave = nullptr;
    uint64_t n;
    std::atomic<uint64_t> next{0};
    std::atomic<uint64_t> finished{0};
    std::mutex mu;
    std::condition_variable done;
  };
  static void Drain(Job& job);
  void WorkerLoop();

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace softgpu
