#include "client/biased_mutex.h"

#include "common/process_barrier.h"

namespace rgpu::client {
namespace {

const void* ThisThread() {
  thread_local char marker;
  return &marker;
}

// Guests past this many, and more than one hold in this many, end the bias.
constexpr uint64_t kGuestShare = 64;

}  // namespace

BiasedMutex::BiasedMutex() : ended_(!ProcessBarrierAvailable()) {}

bool BiasedMutex::TryOwnerHold(bool* owner) {
  *owner = false;
  const void* self = ThisThread();
  const void* current = owner_.load(std::memory_order_relaxed);
  if (current != self) {
    if (current != nullptr) return false;
    if (!owner_.compare_exchange_strong(current, self) && current != self) return false;
  }
  *owner = true;
  owner_inside_.store(true, std::memory_order_relaxed);
  // Only the compiler is kept from moving the loads above the store: a guest's barrier orders
  // them on this thread's processor.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (guests_.load(std::memory_order_acquire) == 0 && !ended_.load(std::memory_order_relaxed)) {
    owner_holds_.store(owner_holds_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return true;
  }
  owner_inside_.store(false, std::memory_order_release);
  return false;
}

bool BiasedMutex::GuestHold(bool wait) {
  guests_.fetch_add(1, std::memory_order_seq_cst);
  ProcessBarrier();  // the owner's announcement is seen below, or its next look sees this guest
  if (wait) {
    AwaitCleared(owner_inside_);
    mu_.lock();
  } else if (owner_inside_.load(std::memory_order_acquire) || !mu_.try_lock()) {
    guests_.fetch_sub(1, std::memory_order_release);
    return false;
  }
  // Counted in and holding the mutex: the owner is outside and stays out.
  if (++guest_holds_ > kGuestShare &&
      guest_holds_ * kGuestShare > owner_holds_.load(std::memory_order_relaxed)) {
    ended_.store(true, std::memory_order_release);  // before this guest counts itself out
  }
  fast_hold_ = false;
  guest_hold_ = true;
  return true;
}

void BiasedMutex::lock() {
  if (!ended_.load(std::memory_order_acquire)) {
    bool owner = false;
    if (TryOwnerHold(&owner)) {
      fast_hold_ = true;
      return;
    }
    if (!owner) {
      GuestHold(true);
      return;
    }
  }
  mu_.lock();  // the bias ended, or the owner while guests are counted in
  fast_hold_ = false;
  guest_hold_ = false;
}

bool BiasedMutex::try_lock() {
  if (!ended_.load(std::memory_order_acquire)) {
    bool owner = false;
    if (TryOwnerHold(&owner)) {
      fast_hold_ = true;
      return true;
    }
    if (!owner) return GuestHold(false);
  }
  if (!mu_.try_lock()) return false;
  fast_hold_ = false;
  guest_hold_ = false;
  return true;
}

void BiasedMutex::unlock() {
  if (fast_hold_) {
    fast_hold_ = false;
    owner_inside_.store(false, std::memory_order_release);
    return;
  }
  const bool guest = guest_hold_;
  guest_hold_ = false;
  mu_.unlock();
  if (guest) guests_.fetch_sub(1, std::memory_order_release);
}

}  // namespace rgpu::client
