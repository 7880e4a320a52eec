// BiasedMutex (client/biased_mutex.h): the connection's lock, taken without atomic
// read-modify-write instructions by the thread that uses it while other threads come rarely.
#include "client/biased_mutex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "common/process_barrier.h"
#include "tests/unit/overlap_counter.h"

namespace rgpu::client {
namespace {

using Counter = rgpu::testing::OverlapCounter;

TEST(BiasedMutexTest, OneThreadKeepsTheBias) {
  BiasedMutex mu;
  Counter counter;
  for (int i = 0; i < 100000; ++i) {
    std::lock_guard<BiasedMutex> lock(mu);
    counter.Bump();
  }
  EXPECT_EQ(counter.value.load(), 100000u);
  EXPECT_EQ(mu.biased(), ProcessBarrierAvailable());
}

TEST(BiasedMutexTest, ARareGuestLeavesTheBias) {
  BiasedMutex mu;
  Counter counter;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> owner_turns{0};
  std::thread owner([&] {
    uint64_t turns = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      std::lock_guard<BiasedMutex> lock(mu);
      counter.Bump();
      ++turns;
    }
    owner_turns = turns;
  });
  // The owner first (the thread that takes it first owns the bias).
  while (counter.value.load() < 1000) std::this_thread::yield();
  constexpr int kGuestTurns = 20;
  for (int i = 0; i < kGuestTurns; ++i) {
    std::lock_guard<BiasedMutex> lock(mu);
    counter.Bump();
  }
  stop = true;
  owner.join();
  EXPECT_EQ(counter.value.load(), owner_turns.load() + kGuestTurns);
  EXPECT_EQ(mu.biased(), ProcessBarrierAvailable());
}

TEST(BiasedMutexTest, GuestsAndTheOwnerNeverOverlap) {
  BiasedMutex mu;
  Counter counter;
  {
    std::lock_guard<BiasedMutex> lock(mu);  // this thread owns the bias
  }
  constexpr int kGuests = 2;
  constexpr int kGuestTurns = 2000;
  std::atomic<int> done{0};
  std::vector<std::thread> guests;
  for (int g = 0; g < kGuests; ++g) {
    guests.emplace_back([&] {
      for (int i = 0; i < kGuestTurns; ++i) {
        std::lock_guard<BiasedMutex> lock(mu);
        counter.Bump();
      }
      done.fetch_add(1);
    });
  }
  uint64_t owner_turns = 0;
  while (done.load(std::memory_order_relaxed) < kGuests) {
    std::lock_guard<BiasedMutex> lock(mu);
    counter.Bump();
    ++owner_turns;
  }
  for (auto& t : guests) t.join();
  EXPECT_EQ(counter.value.load(), owner_turns + kGuests * kGuestTurns);
}

TEST(BiasedMutexTest, FrequentGuestsEndTheBias) {
  if (!ProcessBarrierAvailable()) GTEST_SKIP() << "no membarrier here: never biased";
  BiasedMutex mu;
  constexpr int kOwnerHolds = 64 * 100;
  for (int i = 0; i < kOwnerHolds; ++i) {
    std::lock_guard<BiasedMutex> lock(mu);
  }
  // One hold in 64 is still rare.
  std::thread([&] {
    for (int i = 0; i < 100; ++i) std::lock_guard<BiasedMutex> lock(mu);
  }).join();
  EXPECT_TRUE(mu.biased());
  // More than that: a program calling from several threads, a plain mutex for good.
  std::thread([&] {
    for (int i = 0; i < 2; ++i) std::lock_guard<BiasedMutex> lock(mu);
  }).join();
  EXPECT_FALSE(mu.biased());
  for (int i = 0; i < 100; ++i) {
    std::lock_guard<BiasedMutex> lock(mu);
  }
  EXPECT_FALSE(mu.biased());
}

TEST(BiasedMutexTest, RgpusOwnThreadsDoNotEndTheBias) {
  if (!ProcessBarrierAvailable()) GTEST_SKIP() << "no membarrier here: never biased";
  BiasedMutex mu;
  {
    std::lock_guard<BiasedMutex> lock(mu);  // this thread owns the bias
  }
  std::thread([&] {
    BiasedMutex::DoNotCountThisThread();
    for (int i = 0; i < 200; ++i) std::lock_guard<BiasedMutex> lock(mu);
  }).join();
  EXPECT_TRUE(mu.biased());
}

TEST(BiasedMutexTest, TheOwnerCannotTakeItTwice) {
  BiasedMutex mu;
  mu.lock();
  EXPECT_FALSE(mu.try_lock());  // as a std::mutex's try_lock by its owner
  mu.unlock();
  EXPECT_TRUE(mu.try_lock());
  mu.unlock();
}

TEST(BiasedMutexTest, AGuestWaitsForTheOwnersHoldToEnd) {
  BiasedMutex mu;
  mu.lock();
  std::atomic<bool> entered{false};
  std::thread guest([&] {
    std::lock_guard<BiasedMutex> lock(mu);
    entered = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(entered.load());
  mu.unlock();
  guest.join();
  EXPECT_TRUE(entered.load());
}

TEST(BiasedMutexTest, TryLockDoesNotWaitForTheOwner) {
  BiasedMutex mu;
  mu.lock();
  bool got = true;
  std::thread([&] { got = mu.try_lock(); }).join();
  EXPECT_FALSE(got);
  mu.unlock();
  std::thread([&] {
    got = mu.try_lock();
    if (got) mu.unlock();
  }).join();
  EXPECT_TRUE(got);
  EXPECT_TRUE(mu.try_lock());  // the owner again
  mu.unlock();
}

TEST(BiasedMutexTest, AConditionVariableWaitsOnIt) {
  BiasedMutex mu;
  std::condition_variable_any cv;
  bool ready = false;
  {
    std::lock_guard<BiasedMutex> lock(mu);  // owner: this thread
  }
  std::thread guest([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard<BiasedMutex> lock(mu);
    ready = true;
    cv.notify_all();
  });
  {
    std::unique_lock<BiasedMutex> lock(mu);
    cv.wait(lock, [&] { return ready; });
    EXPECT_TRUE(ready);
  }
  guest.join();
}

}  // namespace
}  // namespace rgpu::client
