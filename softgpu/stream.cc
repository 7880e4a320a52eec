#include "softgpu/stream.h"

#include <cuda.h>

#include <algorithm>
#include <chrono>

#include "softgpu/context.h"

namespace softgpu {

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Stream::Stream(Context* context, unsigned flags, int priority, bool is_default)
    : context_(context), flags_(flags), priority_(priority), is_default_(is_default) {}

Stream::~Stream() { Shutdown(); }

bool Stream::blocking() const { return !is_default_ && !(flags_ & CU_STREAM_NON_BLOCKING); }

uint64_t Stream::Enqueue(std::function<void()> op, std::vector<Dependency> deps) {
  std::lock_guard lock(mu_);
  const uint64_t seq = last_seq_.load(std::memory_order_relaxed) + 1;
  last_seq_.store(seq, std::memory_order_release);
  if (stopping_) {
    // A destroyed stream accepts nothing; report the work as done without running it.
    completed_.store(seq, std::memory_order_release);
    done_.notify_all();
    return seq;
  }
  queue_.push_back(Op{seq, std::move(deps), std::move(op)});
  pending_.fetch_add(1, std::memory_order_release);
  if (!worker_.joinable()) worker_ = std::thread([this] { WorkerLoop(); });
  work_.notify_one();
  return seq;
}

bool Stream::RunNowIfIdle(const std::function<void()>& op, const std::vector<Dependency>& deps) {
  std::lock_guard lock(mu_);
  const uint64_t last = last_seq_.load(std::memory_order_relaxed);
  if (stopping_ || !queue_.empty() || completed_.load(std::memory_order_acquire) != last) {
    return false;
  }
  for (const Dependency& d : deps) {
    if (d.stream && d.stream.get() != this && !d.stream->Done(d.seq)) return false;
  }
  const uint64_t seq = last + 1;
  last_seq_.store(seq, std::memory_order_release);
  Run(op);
  completed_.store(seq, std::memory_order_release);
  return true;
}

void Stream::Run(const std::function<void()>& op) {
  if (context_->sticky_error() != CUDA_SUCCESS || context_->cancelled().load()) return;
  try {
    op();
  } catch (const std::exception& e) {
    context_->Fail(CUDA_ERROR_UNKNOWN, std::string("stream operation failed: ") + e.what());
  } catch (...) {
    context_->Fail(CUDA_ERROR_UNKNOWN, "stream operation failed");
  }
}

uint64_t Stream::last_enqueued() const { return last_seq_.load(std::memory_order_acquire); }

void Stream::Wait(uint64_t seq) {
  if (Done(seq)) return;
  // Brief bounded polling first: a blocking wake-up costs tens of microseconds on small VMs.
  const int64_t deadline = SteadyNowNs() + 20000;
  while (SteadyNowNs() < deadline) {
    if (Done(seq)) return;
    std::this_thread::yield();
  }
  std::unique_lock lock(mu_);
  while (!Done(seq) && !stopped_.load()) {
    wake_at_ = std::min(wake_at_, seq);
    done_.wait(lock);
  }
}

void Stream::Shutdown() {
  std::thread worker;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    work_.notify_all();
    worker = std::move(worker_);
  }
  if (worker.joinable()) {
    if (worker.get_id() == std::this_thread::get_id()) {
      worker.detach();
    } else {
      worker.join();
    }
  }
  stopped_.store(true);
  std::lock_guard lock(mu_);
  completed_.store(last_seq_.load(std::memory_order_relaxed), std::memory_order_release);
  done_.notify_all();
}

void Stream::WorkerLoop() {
  for (;;) {
    Op op;
    // Poll briefly for the next operation before sleeping: launches often come back to back,
    // and a blocking wake-up costs tens of microseconds on small VMs.
    const int64_t deadline = SteadyNowNs() + 30000;
    while (pending_.load(std::memory_order_acquire) == 0 && SteadyNowNs() < deadline) {
      std::this_thread::yield();
    }
    {
      std::unique_lock lock(mu_);
      work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      op = std::move(queue_.front());
      queue_.pop_front();
      pending_.fetch_sub(1, std::memory_order_relaxed);
    }
    for (const Dependency& d : op.deps) {
      if (d.stream && d.stream.get() != this) d.stream->Wait(d.seq);
    }
    Run(op.fn);
    op.fn = nullptr;
    op.deps.clear();
    bool wake = false;
    {
      std::lock_guard lock(mu_);
      completed_.store(op.seq, std::memory_order_release);
      if (op.seq >= wake_at_) {
        // Every sleeper wakes; those still short of their operation register again.
        wake_at_ = UINT64_MAX;
        wake = true;
      }
    }
    if (wake) done_.notify_all();
  }
}

bool Event::timing() const { return !(flags_ & CU_EVENT_DISABLE_TIMING); }

}  // namespace softgpu
