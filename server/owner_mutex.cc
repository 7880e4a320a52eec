#include "server/owner_mutex.h"

#include "common/process_barrier.h"

namespace rgpu::server {

bool OwnerMutex::FastPathAvailable() { return ProcessBarrierAvailable(); }

OwnerMutex::OwnerMutex(bool fast) : fast_(fast && FastPathAvailable()) {}

void OwnerMutex::Lock() {
  held_ = true;
  if (fast_ && !ended_.load(std::memory_order_relaxed)) {
    owner_inside_.store(true, std::memory_order_relaxed);
    // Only the compiler is kept from moving the loads above the store: a guest's membarrier
    // orders them on this thread's processor (see the file's comment).
    std::atomic_signal_fence(std::memory_order_seq_cst);
    // After the last guest's release, and so after an ending guest's `ended_`.
    if (guests_.load(std::memory_order_acquire) == 0 && !ended_.load(std::memory_order_relaxed)) {
      fast_hold_ = true;
      return;
    }
    owner_inside_.store(false, std::memory_order_release);
  }
  fast_hold_ = false;
  owner_lock_.lock();
}

bool OwnerMutex::Unlock() {
  held_ = false;
  if (fast_hold_) {
    fast_hold_ = false;
    owner_inside_.store(false, std::memory_order_release);
    return false;
  }
  owner_lock_.unlock();
  return true;
}

OwnerMutex::Guest::Guest(OwnerMutex& mu) : mu_(mu) {
  mu_.guests_.fetch_add(1, std::memory_order_seq_cst);
  // Without the fast path, or once it ended (after the owner's last hold without the mutex),
  // the mutex alone keeps guests and the owner apart.
  if (!mu_.fast_ || mu_.ended_.load(std::memory_order_acquire)) return;
  // Every thread of the process passes a full barrier: the owner's announcement is seen below,
  // or its next look at the count sees this guest.
  ProcessBarrier();
  // The owner's hold of the moment (one message, or a wait it serves) ends; it takes the mutex
  // from its next hold while this guest is counted in.
  AwaitCleared(mu_.owner_inside_);
  // Each barrier interrupts every processor running a thread of the process (other tenants'
  // sessions among them): a mutex whose guests keep coming gives its fast path up instead.
  if (mu_.barriers_.fetch_add(1, std::memory_order_relaxed) + 1 >= kBarriers) {
    mu_.ended_.store(true, std::memory_order_release);  // before this guest counts itself out
  }
}

OwnerMutex::Guest::~Guest() { mu_.guests_.fetch_sub(1, std::memory_order_release); }

}  // namespace rgpu::server
