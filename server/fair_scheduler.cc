#include "server/fair_scheduler.h"

namespace rgpu::server {

bool FairScheduler::IsNext(const ShareAccount* account) const {
  return !running_ && !waiting_.empty() && waiting_.begin()->second == account;
}

void FairScheduler::Acquire(ShareAccount* account) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  ShareAccount::OnDevice& mine = On(account);
  if (now - mine.last_release > kIdle && !waiting_.empty() &&
      mine.virtual_time < waiting_.begin()->first) {
    mine.virtual_time = waiting_.begin()->first;  // no credit for having been idle
  }
  auto entry = waiting_.emplace(mine.virtual_time, account);
  for (;;) {
    if (IsNext(account)) {
      // Hold the GPU briefly for the account that just ran if it is owed more than this one.
      const auto until = last_release_ + kGrace;
      if (last_ == nullptr || last_ == account || On(last_).virtual_time >= mine.virtual_time ||
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
    ShareAccount::OnDevice& mine = On(account);
    mine.virtual_time += busy_seconds / account->weight;
    mine.busy_seconds += busy_seconds;
    mine.last_release = std::chrono::steady_clock::now();
    last_ = account;
    last_release_ = mine.last_release;
    running_ = false;
  }
  cv_.notify_all();
}

FairSchedulers::FairSchedulers(int devices) {
  for (int d = 0; d < devices && d < kMaxShareDevices; ++d) {
    schedulers_.push_back(std::make_unique<FairScheduler>(d));
  }
}

FairSchedulers::FairSchedulers(int devices,
                               const std::function<std::unique_ptr<TurnTaker>(int)>& make) {
  for (int d = 0; d < devices && d < kMaxShareDevices; ++d) schedulers_.push_back(make(d));
}

TurnTaker* FairSchedulers::Of(int device) const {
  if (device < 0 || static_cast<size_t>(device) >= schedulers_.size()) return nullptr;
  return schedulers_[device].get();
}

}  // namespace rgpu::server
