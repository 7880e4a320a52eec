#include "client/biased_mutex.h"

#include "common/process_barrier.h"

namespace rgpu::client {
namespace {

const void* ThisThread() {
  thread_local char marker;
  return &marker;
}

// Whether this thread's guest holds count toward ending the bias (DoNotCountThisThread).
thread_local bool t_counted = true;

// Guests past this many, and more than one hold in this many, end the bias.
constexpr uint64_t kGuestShare = 64;

}  // namespace

BiasedMutex::BiasedMutex() : ended_(!ProcessBarrierAvailable()) {}

BiasedMutex::OwnerTry BiasedMutex::TryOwnerHold() {
  const void* self = ThisThread();
  const void* current = owner_.load(std::memory_order_relaxed);
  if (current != self) {
    if (current != nullptr) return OwnerTry::kNotOwner;
    if (!owner_.compare_exchange_strong(current, self) && current != self) {
      return OwnerTry::kNotOwner;
    }
  }
  // Only the owner writes the flag: true here is this thread's own hold, which a std::mutex
  // would not hand out again either (a signal handler's call, say).
  if (owner_inside_.load(std::memory_order_relaxed) ||
      owner_in_mutex_.load(std::memory_order_relaxed)) {
    return OwnerTry::kAlreadyInside;
  }
  owner_inside_.store(true, std::memory_order_relaxed);
  // Only the compiler is kept from moving the loads above the store: a guest's barrier orders
  // them on this thread's processor.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (guests_.load(std::memory_order_acquire) == 0 && !ended_.load(std::memory_order_relaxed)) {
    owner_holds_.store(owner_holds_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return OwnerTry::kHeld;
  }
  owner_inside_.store(false, std::memory_order_release);
  return OwnerTry::kGuestsIn;
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
  if (t_counted && ++guest_holds_ > kGuestShare &&
      guest_holds_ * kGuestShare > owner_holds_.load(std::memory_order_relaxed)) {
    ended_.store(true, std::memory_order_release);  // before this guest counts itself out
  }
  fast_hold_ = false;
  guest_hold_ = true;
  return true;
}

void BiasedMutex::lock() {
  while (!ended_.load(std::memory_order_acquire)) {
    switch (TryOwnerHold()) {
      case OwnerTry::kHeld:
        fast_hold_ = true;
        return;
      case OwnerTry::kNotOwner:
        GuestHold(true);
        return;
      case OwnerTry::kAlreadyInside:
        // Waits for its own hold, as a std::mutex's owner locking again waits forever.
        AwaitCleared(owner_inside_);
        mu_.lock();
        mu_.unlock();
        continue;
      case OwnerTry::kGuestsIn:
        mu_.lock();
        fast_hold_ = false;
        guest_hold_ = false;
        owner_mutex_hold_ = true;
        owner_in_mutex_.store(true, std::memory_order_relaxed);
        return;
    }
  }
  mu_.lock();  // the bias ended
  fast_hold_ = false;
  guest_hold_ = false;
  owner_mutex_hold_ = false;
}

bool BiasedMutex::try_lock() {
  if (!ended_.load(std::memory_order_acquire)) {
    switch (TryOwnerHold()) {
      case OwnerTry::kHeld:
        fast_hold_ = true;
        return true;
      case OwnerTry::kNotOwner:
        return GuestHold(false);
      case OwnerTry::kAlreadyInside:
        return false;
      case OwnerTry::kGuestsIn:
        if (!mu_.try_lock()) return false;
        fast_hold_ = false;
        guest_hold_ = false;
        owner_mutex_hold_ = true;
        owner_in_mutex_.store(true, std::memory_order_relaxed);
        return true;
    }
  }
  if (!mu_.try_lock()) return false;
  fast_hold_ = false;
  guest_hold_ = false;
  owner_mutex_hold_ = false;
  return true;
}

void BiasedMutex::DoNotCountThisThread() { t_counted = false; }

void BiasedMutex::unlock() {
  if (fast_hold_) {
    fast_hold_ = false;
    owner_inside_.store(false, std::memory_order_release);
    return;
  }
  const bool guest = guest_hold_;
  guest_hold_ = false;
  if (owner_mutex_hold_) {
    owner_mutex_hold_ = false;
    owner_in_mutex_.store(false, std::memory_order_relaxed);
  }
  mu_.unlock();
  if (guest) guests_.fetch_sub(1, std::memory_order_release);
}

}  // namespace rgpu::client
