// HostedTurns (server/hosted_turns.h): a session host's kernels take their turns in the server's
// schedulers, and a host is trusted for nothing: it cannot end a turn it does not hold, report
// more GPU time than it held the turn, or keep a turn by dying.
#include "server/hosted_turns.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace rgpu::server {
namespace {

using namespace std::chrono_literals;

// What the server sends the host: the ids of granted turns.
class Sent {
 public:
  bool Send(const wire::HostControl& m) {
    std::lock_guard<std::mutex> lock(mu_);
    if (m.body_case() == wire::HostControl::kTurnGranted) granted_.push_back(m.turn_granted());
    cv_.notify_all();
    return true;
  }
  // True once `id` was granted, within `wait`.
  bool Granted(uint64_t id, std::chrono::milliseconds wait = 2000ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, wait, [&] {
      return std::find(granted_.begin(), granted_.end(), id) != granted_.end();
    });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint64_t> granted_;
};

wire::HostTurn Ask(uint64_t id, uint32_t device) {
  wire::HostTurn t;
  t.set_id(id);
  t.set_device(device);
  return t;
}
wire::HostTurn End(uint32_t device, double busy) {
  wire::HostTurn t;
  t.set_device(device);
  t.set_end(true);
  t.set_busy_seconds(busy);
  return t;
}

// A tenant asking for `device`'s turn on a thread of its own (given back as soon as it comes;
// joined at the end, so release what holds the device first).
class Contender {
 public:
  Contender(FairSchedulers& s, ShareAccount* account, int device = 0)
      : thread_([&s, account, device, this] {
          s.Of(device)->Acquire(account);
          got_.store(true);
          s.Of(device)->Release(account, 0);
        }) {}
  ~Contender() { thread_.join(); }
  // True once it got the turn, within `wait`.
  bool GotWithin(std::chrono::milliseconds wait) {
    const auto until = std::chrono::steady_clock::now() + wait;
    while (!got_.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(1ms);
    }
    return got_.load();
  }

 private:
  std::atomic<bool> got_{false};
  std::thread thread_;
};

// True when `account` gets `device`'s turn within `wait`.
bool TurnComesWithin(FairSchedulers& s, ShareAccount* account, std::chrono::milliseconds wait,
                     int device = 0) {
  return Contender(s, account, device).GotWithin(wait);
}

TEST(HostedTurnsTest, AHostWaitsForItsTurnLikeAnyTenant) {
  FairSchedulers schedulers(1);
  ShareAccount host_account, other;
  Sent sent;
  HostedTurns turns(&schedulers, &host_account,
                    [&](const wire::HostControl& m) { return sent.Send(m); });
  schedulers.Of(0)->Acquire(&other);  // another tenant's kernel runs
  turns.Handle(Ask(1, 0));
  EXPECT_FALSE(sent.Granted(1, 200ms)) << "granted while another tenant held the device";
  schedulers.Of(0)->Release(&other, 0.001);
  EXPECT_TRUE(sent.Granted(1));
  // A device no scheduler governs is granted at once.
  turns.Handle(Ask(2, 7));
  EXPECT_TRUE(sent.Granted(2));
  turns.Handle(End(0, 0.001));
  EXPECT_TRUE(TurnComesWithin(schedulers, &other, 2000ms));
}

TEST(HostedTurnsTest, AnEndOfATurnTheHostDoesNotHoldIsIgnored) {
  FairSchedulers schedulers(1);
  ShareAccount host_account, other, third;
  Sent sent;
  HostedTurns turns(&schedulers, &host_account,
                    [&](const wire::HostControl& m) { return sent.Send(m); });
  schedulers.Of(0)->Acquire(&other);
  turns.Handle(End(0, 0));  // would end the other tenant's turn
  Contender contender(schedulers, &third);
  EXPECT_FALSE(contender.GotWithin(300ms))
      << "a host's forged end gave the device to a third tenant while another's kernel ran";
  schedulers.Of(0)->Release(&other, 0);
  EXPECT_TRUE(contender.GotWithin(2000ms));
}

TEST(HostedTurnsTest, ReportedTimeIsAtMostTheTimeHeld) {
  FairSchedulers schedulers(1);
  ShareAccount host_account;
  Sent sent;
  HostedTurns turns(&schedulers, &host_account,
                    [&](const wire::HostControl& m) { return sent.Send(m); });
  turns.Handle(Ask(1, 0));
  ASSERT_TRUE(sent.Granted(1));
  std::this_thread::sleep_for(20ms);
  turns.Handle(End(0, 1e9));
  const double busy = host_account.devices[0].busy_seconds;
  EXPECT_GE(busy, 0.02);
  EXPECT_LT(busy, 5.0) << "the host's own figure was taken";
  turns.Handle(Ask(2, 0));
  ASSERT_TRUE(sent.Granted(2));
  turns.Handle(End(0, -1));  // negative: nothing
  EXPECT_LT(host_account.devices[0].busy_seconds, busy + 1e-3);
}

TEST(HostedTurnsTest, AHostThatEndsGivesBackWhatItHeldAndAskedFor) {
  FairSchedulers schedulers(2);
  ShareAccount host_account, other;
  Sent sent;
  {
    HostedTurns turns(&schedulers, &host_account,
                      [&](const wire::HostControl& m) { return sent.Send(m); });
    turns.Handle(Ask(1, 0));
    ASSERT_TRUE(sent.Granted(1));
    schedulers.Of(1)->Acquire(&other);
    turns.Handle(Ask(2, 1));  // waits behind the other tenant
    std::thread release([&] {
      std::this_thread::sleep_for(100ms);
      schedulers.Of(1)->Release(&other, 0);
    });
    turns.End();  // the host died holding device 0 and waiting for device 1
    release.join();
  }
  EXPECT_TRUE(TurnComesWithin(schedulers, &other, 2000ms)) << "device 0 stayed held";
  EXPECT_TRUE(TurnComesWithin(schedulers, &other, 2000ms, 1)) << "device 1 stayed held";
}

}  // namespace
}  // namespace rgpu::server
