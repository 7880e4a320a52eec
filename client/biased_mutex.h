// BiasedMutex: the connection's lock, biased toward the thread that takes it first (its owner),
// which then takes it with plain loads and stores while no other thread wants it.
//
// A program makes its driver calls from one thread more often than not; an uncontended
// std::mutex still costs that thread two atomic read-modify-write instructions per call, each
// waiting for the store buffer to drain (measured on the shm null round trip: about 0.02-0.03 us
// of 0.8). The owner announces each hold with a store and then reads the count of other threads
// (guests) that want it. A guest counts itself in, has every thread of the process pass a memory
// barrier (common/process_barrier.h), so that either it sees the owner inside or the owner sees
// it, waits for the owner's hold of the moment, and takes the mutex; while a guest is counted in,
// the owner takes the mutex too. Guests that come often (more than one hold in 64, past the first
// 64: a program calling from several threads) end the bias for good, and everyone then takes the
// mutex alone (the owner's holds counted are those without the mutex). Where the barrier is
// missing there is no bias. The owner locking again while it holds it waits forever and
// try_lock fails, as with a std::mutex.
//
// Threading: lock, unlock and try_lock on any thread (BasicLockable and Lockable: std::lock_guard,
// std::unique_lock and std::condition_variable_any work with it). A thread that exits while it
// owns the bias leaves it, unknowingly, to a later thread that gets the same thread-local storage
// (its last hold has ended by then).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace rgpu::client {

class BiasedMutex {
 public:
  BiasedMutex();
  BiasedMutex(const BiasedMutex&) = delete;
  BiasedMutex& operator=(const BiasedMutex&) = delete;

  void lock();
  void unlock();
  // Without waiting: false when the owner's hold or another thread's lock is in the way.
  bool try_lock();

  // Whether the bias stands (for tests).
  bool biased() const { return !ended_.load(std::memory_order_acquire); }

  // The calling thread's holds, as a guest, no longer count toward ending the bias of any
  // BiasedMutex: for rgpu's own threads that come now and then whatever the program does (the
  // batch-delay thread).
  static void DoNotCountThisThread();

 private:
  enum class OwnerTry {
    kHeld,           // the owner's hold without the mutex
    kNotOwner,       // another thread owns the bias
    kAlreadyInside,  // the owner, inside already (locking again on its thread)
    kGuestsIn,       // the owner, with guests counted in: the mutex it is
  };
  // The owner's hold without the mutex, when the calling thread is (or now becomes) the owner,
  // the bias stands and no guest is counted in.
  OwnerTry TryOwnerHold();
  // A guest's hold: counted in, the owner's hold of the moment waited for (`wait`; else false
  // when it has not ended), then the mutex (try_lock with !wait).
  bool GuestHold(bool wait);

  std::mutex mu_;
  std::atomic<const void*> owner_{nullptr};  // the owner thread's marker (a thread-local's address)
  std::atomic<bool> owner_inside_{false};    // the owner holds it without the mutex
  std::atomic<uint32_t> guests_{0};          // guests counted in
  std::atomic<bool> ended_;  // the bias ended for good (set by a guest, counted in), or never was
  std::atomic<uint64_t> owner_holds_{0};  // written by the owner only, without a locked add
  uint64_t guest_holds_ = 0;              // under mu_
  // The owner holds the mutex (written by the owner only, read by it to refuse a second hold).
  std::atomic<bool> owner_in_mutex_{false};
  // What the current hold is: written and read by the holder only.
  bool fast_hold_ = false;
  bool guest_hold_ = false;
  bool owner_mutex_hold_ = false;
};

}  // namespace rgpu::client
