#include "softgpu/thread_pool.h"

namespace softgpu {

ThreadPool::ThreadPool(uint32_t workers) {
  threads_.reserve(workers);
  for (uint32_t i = 0; i < workers; ++i) threads_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

ThreadPool& ThreadPool::Global() {
  // Intentionally leaked: worker threads must outlive every static destructor that might still
  // synchronize a context at exit.
  static ThreadPool* pool = [] {
    unsigned cores = std::thread::hardware_concurrency();
    if (cores == 0) cores = 1;
    return new ThreadPool(cores - 1);
  }();
  return *pool;
}

void ThreadPool::Drain(Job& job) {
  uint64_t i = job.next.fetch_add(1, std::memory_order_relaxed);
  while (i < job.n) {
    (*job.fn)(i);
    // The next index is claimed before this one counts as finished, so that a thread with no
    // more work runs `leave` while the caller still waits.
    const uint64_t next = job.next.fetch_add(1, std::memory_order_relaxed);
    if (next >= job.n && job.leave != nullptr) (*job.leave)();
    if (job.finished.fetch_add(1, std::memory_order_acq_rel) + 1 == job.n) {
      std::lock_guard lock(job.mu);
      job.done.notify_all();
    }
    i = next;
  }
}

void ThreadPool::ParallelFor(uint64_t n, const std::function<void(uint64_t)>& fn,
                             const std::function<void()>* leave) {
  if (n == 0) return;
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->leave = leave;
  job->n = n;
  if (n > 1 && !threads_.empty()) {
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(job);
    }
    if (n - 1 >= threads_.size()) {
      wake_.notify_all();
    } else {
      for (uint64_t i = 0; i + 1 < n; ++i) wake_.notify_one();
    }
  }
  Drain(*job);
  {
    std::unique_lock lock(job->mu);
    job->done.wait(lock, [&] { return job->finished.load(std::memory_order_acquire) == job->n; });
  }
  if (n > 1 && !threads_.empty()) {
    std::lock_guard lock(mu_);
    for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
      if (*it == job) {
        jobs_.erase(it);
        break;
      }
    }
  }
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] {
        if (stopping_) return true;
        for (const auto& j : jobs_) {
          if (j->next.load(std::memory_order_relaxed) < j->n) return true;
        }
        return false;
      });
      if (stopping_) return;
      for (const auto& j : jobs_) {
        if (j->next.load(std::memory_order_relaxed) < j->n) {
          job = j;
          break;
        }
      }
    }
    if (job) Drain(*job);
  }
}

}  // namespace softgpu
