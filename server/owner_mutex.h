// OwnerMutex: a mutex that one thread, its owner, takes and releases with plain loads and stores
// while no other thread wants it, and other threads (guests) take rarely.
//
// A session's state belongs to its session thread, which takes the state lock for every message
// it serves; its lanes and the peer transfers of other servers take it now and then. An
// uncontended std::mutex costs the owner two atomic read-modify-write instructions per message,
// each of which waits for the processor's store buffer to drain (the shared-memory receive's
// stores): on the null round trip that was 0.03-0.05 us of 0.8. Here the owner announces itself
// with a store and reads the guests' count; a guest counts itself in and then has every thread
// of the process pass a memory barrier (membarrier(2), MEMBARRIER_CMD_PRIVATE_EXPEDITED), so
// that either the owner sees the guest or the guest sees the owner inside. Correct on any
// architecture for which the kernel implements that command; where it is missing the owner
// always takes the mutex. A barrier interrupts every processor that runs a thread of the
// process, other tenants' session threads included: after 16 guests (a program whose threads
// wait on lanes, or a session copied to and from another server often) the fast path ends for
// good, so that no tenant can have the server's processors interrupted at will.
//
// Threading: Lock, Unlock, held, holds_mutex and owner_lock belong to the owner: one thread at a
// time (another may take the role once the previous one's last use happened before, e.g. it was
// joined). Guest may be made on any other thread of the process.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace rgpu::server {

class OwnerMutex {
 public:
  // `fast`: false has the owner take the mutex every time, as where membarrier is missing.
  explicit OwnerMutex(bool fast = true);
  OwnerMutex(const OwnerMutex&) = delete;
  OwnerMutex& operator=(const OwnerMutex&) = delete;

  // The owner's hold: without the mutex while no guest is counted in, else through mutex() (in
  // owner_lock(), so that the owner may wait on a condition variable of it).
  void Lock();
  // Ends the owner's hold. Returns whether it held the mutex (guests may be waiting on a
  // condition variable of it: the caller notifies them).
  bool Unlock();
  bool held() const { return held_; }
  bool holds_mutex() const { return held_ && !fast_hold_; }
  // The owner's lock of mutex(): owned while holds_mutex().
  std::unique_lock<std::mutex>& owner_lock() { return owner_lock_; }

  // A guest's span (RAII, on a thread other than the owner's): from its constructor's return the
  // owner is not inside without the mutex, and is not until the guest is destroyed; the guest
  // locks mutex() around what it reads or writes (and may wait on a condition variable of it).
  // Its construction costs a system call and waits for the owner's hold of the moment to end.
  class Guest {
   public:
    explicit Guest(OwnerMutex& mu);
    ~Guest();
    Guest(const Guest&) = delete;
    Guest& operator=(const Guest&) = delete;

   private:
    OwnerMutex& mu_;
  };
  std::mutex& mutex() { return mu_; }

  // Whether this process can use the owner's fast path (membarrier registered once).
  static bool FastPathAvailable();

 private:
  const bool fast_;
  std::mutex mu_;
  std::unique_lock<std::mutex> owner_lock_{mu_, std::defer_lock};
  // Guests that pass a barrier before the fast path ends for good (kept few: each barrier
  // interrupts the processors of every thread of the process).
  static constexpr uint32_t kBarriers = 16;
  std::atomic<bool> owner_inside_{false};  // the owner holds it without the mutex
  std::atomic<uint32_t> guests_{0};        // guests counted in
  std::atomic<uint32_t> barriers_{0};      // guests that passed a barrier
  std::atomic<bool> ended_{false};         // the fast path ended (set by a guest, counted in)
  bool held_ = false;                      // the owner's (owner thread only)
  bool fast_hold_ = false;                 // held_ without the mutex (owner thread only)
};

}  // namespace rgpu::server
