#include "server/fair_scheduler.h"

namespace rgpu::server {

bool FairScheduler::IsNext(const ShareAccount* account) const {
  return !running_ && !waiting_.empty() && waiting_.begin()->second == account;
}

void FairScheduler::Acquire(ShareAccount* account) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (now - account->last_release > kIdle && !waiting_.empty() &&
      account->virtual_time < waiting_.begin()->first) {
    account->virtual_time = waiting_.begin()->first;  // no credit for having been idle
  }
  auto entry = waiting_.emplace(account->virtual_time, account);
  for (;;) {
    if (IsNext(account)) {
      // Hold the GPU briefly for the account that just ran if it is owed more than this one.
      const auto until = last_release_ + kGrace;
      if (last_ == nullptr || last_ == account || last_->virtual_time >= account->virtual_time ||
          std::chrono::steady_clock::now() >= until) {
        break;
      }
      cv_.wait_until(lock, until);
      continue;
    }
    cv_.wait(lock);
  }
  waiting_.erase(entry);
  running_ = true;
}

void FairScheduler::Release(ShareAccount* account, double busy_seconds) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    account->virtual_time += busy_seconds / account->weight;
    account->busy_seconds += busy_seconds;
    account->last_release = std::chrono::steady_clock::now();
    last_ = account;
    last_release_ = account->last_release;
    running_ = false;
  }
  cv_.notify_all();
}

double FairScheduler::BusySeconds(const ShareAccount* account) {
  std::lock_guard<std::mutex> lock(mu_);
  return account->busy_seconds;
}

}  // namespace rgpu::server
