// FairScheduler: weighted fair sharing of one GPU between accounts (tenants). Kernels run one at
// a time; the next to run is the waiting account with the least virtual time, and each kernel's
// measured execution time, divided by its account's weight, is added to that account's virtual
// time (start-time fair queuing).
//
// A session submits one kernel at a time, so right after its kernel ends it has none waiting. If
// the GPU went straight to whoever waits, two busy tenants would simply alternate whatever their
// weights. So when the account that just ran is still owed time (its virtual time is the least),
// the GPU is held for it for a short grace period (anticipation). An account that was idle for
// longer restarts at the least virtual time of those waiting, so idleness earns no credit.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>

namespace rgpu::server {

struct ShareAccount {
  double weight = 1.0;
  double virtual_time = 0;  // guarded by the scheduler
  double busy_seconds = 0;  // GPU time received (metering), guarded by the scheduler
  std::chrono::steady_clock::time_point last_release;  // guarded by the scheduler
};

class FairScheduler {
 public:
  // How long the GPU is held for the account that just ran, and how long an account must have
  // been away to count as idle.
  static constexpr std::chrono::microseconds kGrace{2000};
  static constexpr std::chrono::milliseconds kIdle{50};

  // Blocks until `account` may run a kernel.
  void Acquire(ShareAccount* account);
  // Ends the kernel `account` ran for `busy_seconds` of GPU time.
  void Release(ShareAccount* account, double busy_seconds);
  // GPU time `account` has received so far.
  double BusySeconds(const ShareAccount* account);

 private:
  bool IsNext(const ShareAccount* account) const;

  std::mutex mu_;
  std::condition_variable cv_;
  std::multiset<std::pair<double, const ShareAccount*>> waiting_;
  bool running_ = false;
  const ShareAccount* last_ = nullptr;  // the account that ran last
  std::chrono::steady_clock::time_point last_release_;
};

}  // namespace rgpu::server
