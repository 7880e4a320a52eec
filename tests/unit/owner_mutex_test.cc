// OwnerMutex (server/owner_mutex.h): the session state lock whose owner takes it without atomic
// read-modify-write instructions while no guest wants it.
#include "server/owner_mutex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "tests/unit/overlap_counter.h"

namespace rgpu::server {
namespace {

using Counter = rgpu::testing::OverlapCounter;

void OwnerAndGuests(bool fast) {
  OwnerMutex mu(fast);
  Counter counter;
  constexpr int kGuests = 2;
  constexpr int kGuestTurns = 2000;
  std::atomic<bool> start{false};
  std::atomic<int> guests_done{0};
  std::vector<std::thread> guests;
  for (int g = 0; g < kGuests; ++g) {
    guests.emplace_back([&] {
      while (!start.load()) std::this_thread::yield();
      for (int i = 0; i < kGuestTurns; ++i) {
        OwnerMutex::Guest guest(mu);
        std::lock_guard<std::mutex> lock(mu.mutex());
        counter.Bump();
      }
      guests_done.fetch_add(1);
    });
  }
  // The owner's holds with no guest counted in yet.
  uint64_t owner_turns = 0;
  uint64_t fast_holds = 0;
  for (; owner_turns < 100; ++owner_turns) {
    mu.Lock();
    if (!mu.holds_mutex()) ++fast_holds;
    counter.Bump();
    mu.Unlock();
  }
  start.store(true);
  // The owner takes it for as long as the guests come.
  while (guests_done.load(std::memory_order_relaxed) < kGuests) {
    mu.Lock();
    EXPECT_TRUE(mu.held());
    if (!mu.holds_mutex()) ++fast_holds;
    counter.Bump();
    ++owner_turns;
    mu.Unlock();
    EXPECT_FALSE(mu.held());
  }
  for (auto& t : guests) t.join();
  EXPECT_EQ(counter.value.load(), owner_turns + kGuests * kGuestTurns);
  if (!fast || !OwnerMutex::FastPathAvailable()) {
    EXPECT_EQ(fast_holds, 0u);
  } else {
    EXPECT_GT(fast_holds, 0u);  // before the guests came, at least
  }
}

TEST(OwnerMutexTest, OwnerAndGuestsNeverInsideTogether) { OwnerAndGuests(true); }

TEST(OwnerMutexTest, WithoutTheFastPathTheOwnerTakesTheMutex) { OwnerAndGuests(false); }

TEST(OwnerMutexTest, AGuestWaitsForTheOwnersHoldToEnd) {
  OwnerMutex mu;
  mu.Lock();
  std::atomic<bool> entered{false};
  std::thread guest([&] {
    OwnerMutex::Guest g(mu);
    std::lock_guard<std::mutex> lock(mu.mutex());
    entered.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(entered.load());
  mu.Unlock();
  guest.join();
  EXPECT_TRUE(entered.load());
}

TEST(OwnerMutexTest, WhileAGuestIsCountedInTheOwnerHoldsTheMutex) {
  OwnerMutex mu;
  std::atomic<bool> counted{false};
  std::atomic<bool> release{false};
  std::thread guest([&] {
    OwnerMutex::Guest g(mu);
    counted.store(true);
    while (!release.load()) std::this_thread::yield();
  });
  while (!counted.load()) std::this_thread::yield();
  mu.Lock();
  EXPECT_TRUE(mu.holds_mutex());
  EXPECT_TRUE(mu.owner_lock().owns_lock());
  EXPECT_TRUE(mu.Unlock());  // it held the mutex: guests may wait on it
  release.store(true);
  guest.join();
  mu.Lock();  // the guest has gone
  EXPECT_EQ(mu.holds_mutex(), !OwnerMutex::FastPathAvailable());
  mu.Unlock();
}

// Each guest's barrier interrupts every processor running a thread of the server, other
// tenants' sessions among them: guests that keep coming (a tenant's lanes) end the fast path for
// good rather than interrupt them at will.
TEST(OwnerMutexTest, GuestsThatKeepComingEndTheFastPath) {
  if (!OwnerMutex::FastPathAvailable()) GTEST_SKIP() << "no membarrier here: no fast path";
  OwnerMutex mu;
  for (int i = 0; i < 15; ++i) {
    std::thread([&] { OwnerMutex::Guest guest(mu); }).join();
    mu.Lock();
    EXPECT_FALSE(mu.holds_mutex()) << "after " << i + 1 << " guests";
    mu.Unlock();
  }
  std::thread([&] { OwnerMutex::Guest guest(mu); }).join();  // the sixteenth
  for (int i = 0; i < 3; ++i) {
    mu.Lock();
    EXPECT_TRUE(mu.holds_mutex());
    EXPECT_TRUE(mu.Unlock());
  }
  // A guest now takes the mutex alone, and the two still exclude each other.
  Counter counter;
  std::thread guest([&] {
    for (int i = 0; i < 1000; ++i) {
      OwnerMutex::Guest g(mu);
      std::lock_guard<std::mutex> lock(mu.mutex());
      counter.Bump();
    }
  });
  for (int i = 0; i < 1000; ++i) {
    mu.Lock();
    counter.Bump();
    mu.Unlock();
  }
  guest.join();
  EXPECT_EQ(counter.value.load(), 2000u);
}

}  // namespace
}  // namespace rgpu::server
