// HostedTurns: the server's side of the kernel turns of a session in a process of its own
// (--fair-share with --session-processes). The host's kernels wait for their turns in the
// server's schedulers, where every other tenant's do: the host asks for a device's turn over the
// control socket (HostTurn), a thread of this object waits for it in that device's scheduler
// under the tenant's account and answers turn_granted; the host ends the turn with the GPU time
// its kernel took.
//
// A host is trusted for nothing: an end of a turn it does not hold is ignored, the time it
// reports is at most the time since the grant, a device out of range is granted at once (no
// scheduler governs it, and the host can have no context there), at most kMaxAsks asks wait at
// once, and whatever it holds when it ends is given back.
//
// Threading: Handle and End run on the thread that supervises the host; `send` is called from
// this object's threads too, and must be safe to call from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "proto/rgpu.pb.h"
#include "server/fair_scheduler.h"

namespace rgpu::server {

class HostedTurns {
 public:
  // `schedulers` and `account` outlive this object.
  HostedTurns(FairSchedulers* schedulers, ShareAccount* account,
              std::function<bool(const wire::HostControl&)> send);
  // Ends (see End).
  ~HostedTurns();
  HostedTurns(const HostedTurns&) = delete;
  HostedTurns& operator=(const HostedTurns&) = delete;

  // A HostTurn from the host: an ask (answered once the turn is the host's) or an end.
  void Handle(const wire::HostTurn& turn);

  // The host is gone: gives back the turns it holds, and waits for its asks in progress (each
  // given back as soon as its turn comes). Idempotent.
  void End();

 private:
  using Clock = std::chrono::steady_clock;
  FairSchedulers* const schedulers_;
  ShareAccount* const account_;
  const std::function<bool(const wire::HostControl&)> send_;
  std::mutex mu_;
  bool ended_ = false;                          // GUARDED_BY(mu_)
  std::map<uint32_t, Clock::time_point> held_;  // device -> when granted; GUARDED_BY(mu_)
  // Asks waiting in a scheduler (or done, not yet joined): the Supervise thread's. A host has at
  // most kMaxAsks (its contexts' keepers ask one at a time each); more are ignored.
  struct Ask {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  static constexpr size_t kMaxAsks = 64;
  std::vector<Ask> asks_;
  // An ask's thread: waits for the turn, then answers `granted` (or gives it back when the host
  // is gone).
  void Grant(TurnTaker* taker, uint32_t device, const wire::HostControl& granted);
};

}  // namespace rgpu::server
