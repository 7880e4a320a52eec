#include "server/hosted_turns.h"

#include <algorithm>

namespace rgpu::server {

HostedTurns::HostedTurns(FairSchedulers* schedulers, ShareAccount* account,
                         std::function<bool(const wire::HostControl&)> send)
    : schedulers_(schedulers), account_(account), send_(std::move(send)) {}

HostedTurns::~HostedTurns() { End(); }

void HostedTurns::Handle(const wire::HostTurn& turn) {
  TurnTaker* taker =
      schedulers_ != nullptr ? schedulers_->Of(static_cast<int>(turn.device())) : nullptr;
  if (turn.end()) {
    if (taker == nullptr) return;
    double busy = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = held_.find(turn.device());
      if (it == held_.end()) return;  // not the host's: ignored
      const double since = std::chrono::duration<double>(Clock::now() - it->second).count();
      busy = turn.busy_seconds() >= 0 ? std::min(turn.busy_seconds(), since) : 0;  // NaN: 0
      held_.erase(it);
    }
    taker->Release(account_, busy);
    return;
  }
  wire::HostControl granted;
  granted.set_turn_granted(turn.id());
  if (taker == nullptr) {
    send_(granted);  // no scheduler governs the device
    return;
  }
  // Waits in the scheduler on a thread of its own: the host's other messages go on meanwhile.
  std::erase_if(asks_, [](Ask& a) {
    if (!a.done->load()) return false;
    a.thread.join();
    return true;
  });
  if (asks_.size() >= kMaxAsks) return;  // a host asking without end: its kernels wait
  const uint32_t device = turn.device();
  auto done = std::make_shared<std::atomic<bool>>(false);
  asks_.push_back({std::thread([this, taker, device, granted, done] {
                     Grant(taker, device, granted);
                     done->store(true);
                   }),
                   done});
}

void HostedTurns::Grant(TurnTaker* taker, uint32_t device, const wire::HostControl& granted) {
  taker->Acquire(account_);
  bool mine = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A host that is gone, or one that asked again for a device it holds (the scheduler grants
    // one turn per device at a time, so it cannot hold two): the turn goes back at once.
    if (!ended_ && held_.count(device) == 0) {
      held_.emplace(device, Clock::now());
      mine = true;
    }
  }
  if (mine) {
    send_(granted);
  } else {
    taker->Release(account_, 0);
  }
}

void HostedTurns::End() {
  std::map<uint32_t, Clock::time_point> held;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = true;
    held.swap(held_);
  }
  for (const auto& [device, since] : held) {
    schedulers_->Of(static_cast<int>(device))
        ->Release(account_, std::chrono::duration<double>(Clock::now() - since).count());
  }
  for (Ask& a : asks_) a.thread.join();
  asks_.clear();
}

}  // namespace rgpu::server
