#include "server/owner_mutex.h"

#include "common/process_barrier.h"

namespace rgpu::server {

bool OwnerMutex::FastPathAvailable() { return ProcessBarrierAvailable(); }

OwnerMutex::OwnerMutex(bool fast) : fast_(fast && FastPathAvailable()) {}

void OwnerMutex::Lock() {
  held_ = true;
  if (fast_) {
    owner_inside_.store(true, std::memory_order_relaxed);
    // Only the compiler is kept from moving the load above the store: a guest's membarrier
    // orders the two on this thread's processor (see the file's comment).
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (guests_.load(std::memory_order_acquire) == 0) {  // after the last guest's release
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
  if (!mu_.fast_) return;
  // Every thread of the process passes a full barrier: the owner's announcement is seen below,
  // or its next look at the count sees this guest.
  ProcessBarrier();
  // The owner's hold of the moment (one message, or a wait it serves) ends; it takes the mutex
  // from its next hold while this guest is counted in.
  AwaitCleared(mu_.owner_inside_);
}

OwnerMutex::Guest::~Guest() { mu_.guests_.fetch_sub(1, std::memory_order_release); }

}  // namespace rgpu::server
