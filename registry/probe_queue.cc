#include "registry/probe_queue.h"

namespace rgpu::registry {

ProbeQueue::ProbeQueue(ReachabilityProbe probe, Done done, size_t max_pending)
    : probe_(std::move(probe)), done_(std::move(done)), max_pending_(max_pending) {
  thread_ = std::thread([this] { Loop(); });
}

ProbeQueue::~ProbeQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool ProbeQueue::Submit(const std::string& owner, const std::string& server, const std::string& url,
                        const std::string& secret, uint64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Job& job : jobs_) {
    if (job.server == server) {
      job = {owner, server, url, secret, generation};
      return true;
    }
  }
  if (jobs_.size() >= max_pending_) return false;
  jobs_.push_back({owner, server, url, secret, generation});
  cv_.notify_all();
  return true;
}

void ProbeQueue::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return stop_ || (jobs_.empty() && !running_); });
}

std::deque<ProbeQueue::Job>::iterator ProbeQueue::NextJob() {
  auto best = jobs_.begin();
  uint64_t best_turn = UINT64_MAX;
  for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
    const auto served = served_.find(it->owner);
    const uint64_t turn = served == served_.end() ? 0 : served->second;
    if (turn < best_turn) {  // strictly: the oldest job of that owner
      best = it;
      best_turn = turn;
    }
  }
  return best;
}

void ProbeQueue::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
    if (stop_) break;
    auto next = NextJob();
    Job job = std::move(*next);
    jobs_.erase(next);
    served_[job.owner] = ++turns_;
    running_ = true;
    lock.unlock();
    const Status result = probe_(job.url, job.secret);
    done_(job.server, job.generation, result);
    lock.lock();
    running_ = false;
    cv_.notify_all();
  }
  running_ = false;
  cv_.notify_all();
}

}  // namespace rgpu::registry
