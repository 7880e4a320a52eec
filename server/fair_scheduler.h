// FairScheduler: weighted fair sharing of one GPU between accounts (tenants). Kernels run one at
// a time; the next to run is the waiting account with the least virtual time, and each kernel's
// measured execution time, divided by its account's weight, is added to that account's virtual
// time (start-time fair queuing). Each device of a server has its own scheduler
// (FairSchedulers), and an account keeps its virtual time per device.
//
// A session's kernel waits for its turn on the server (server/kernel_turns.h), so right after
// its kernel ends the account may have none waiting yet. If the GPU went straight to whoever
// waits, two busy tenants would simply alternate whatever their weights. So when the account
// that just ran is still owed time (its virtual time is the least), the GPU is held for it for a
// short grace period (anticipation). An account that was idle for longer restarts at the least
// virtual time of those waiting, so idleness earns no credit. Thread-safe.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <mutex>
#include <memory>
#include <set>
#include <vector>

namespace rgpu::server {

// The server devices a session's figures and a tenant's accounts cover (indices 0-63).
constexpr int kMaxShareDevices = 64;

struct ShareAccount {
  double weight = 1.0;
  // Per device, each guarded by that device's scheduler.
  struct OnDevice {
    double virtual_time = 0;
    double busy_seconds = 0;  // GPU time received (metering)
    std::chrono::steady_clock::time_point last_release;
  };
  std::array<OnDevice, kMaxShareDevices> devices;
};

// Where the kernels of one device wait for their turns: this process's FairScheduler, or, in a
// session's host process, the server's over the control socket (server/session_host.h).
class TurnTaker {
 public:
  virtual ~TurnTaker() = default;
  // Blocks until `account` may run a kernel.
  virtual void Acquire(ShareAccount* account) = 0;
  // Ends the kernel `account` ran for `busy_seconds` of GPU time.
  virtual void Release(ShareAccount* account, double busy_seconds) = 0;
};

class FairScheduler : public TurnTaker {
 public:
  // The scheduler of server device `device` (0 to kMaxShareDevices - 1).
  explicit FairScheduler(int device) : device_(device) {}

  // How long the GPU is held for the account that just ran, and how long an account must have
  // been away to count as idle.
  static constexpr std::chrono::microseconds kGrace{2000};
  static constexpr std::chrono::milliseconds kIdle{50};

  void Acquire(ShareAccount* account) override;
  void Release(ShareAccount* account, double busy_seconds) override;

 private:
  bool IsNext(const ShareAccount* account) const;
  ShareAccount::OnDevice& On(ShareAccount* account) const { return account->devices[device_]; }
  const ShareAccount::OnDevice& On(const ShareAccount* account) const {
    return account->devices[device_];
  }

  const int device_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::multiset<std::pair<double, const ShareAccount*>> waiting_;
  bool running_ = false;
  const ShareAccount* last_ = nullptr;  // the account that ran last
  std::chrono::steady_clock::time_point last_release_;
};

// Where the kernels of each of a server's devices take turns. Outlives every session that uses it.
class FairSchedulers {
 public:
  // One FairScheduler for each of `devices` devices (at most kMaxShareDevices are scheduled).
  explicit FairSchedulers(int devices);
  // Turns taken elsewhere: `make(device)` gives each device's taker.
  FairSchedulers(int devices, const std::function<std::unique_ptr<TurnTaker>(int)>& make);
  // The turns of `device`; null for a device out of range.
  TurnTaker* Of(int device) const;

 private:
  std::vector<std::unique_ptr<TurnTaker>> schedulers_;
};

}  // namespace rgpu::server
