#include "server/owner_mutex.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "common/log.h"

namespace rgpu::server {
namespace {

long Membarrier(int command) { return syscall(SYS_membarrier, command, 0, 0); }

bool RegisterMembarrier() {
  const long supported = Membarrier(MEMBARRIER_CMD_QUERY);
  if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
  if (Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0) return false;
  return Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;  // it works here (seccomp, ...)
}

}  // namespace

bool OwnerMutex::FastPathAvailable() {
  static const bool available = RegisterMembarrier();
  return available;
}

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
  if (Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    // It worked when it was registered; without it the owner's fast path is unsound.
    RGPU_LOG_ERROR("membarrier failed after it was registered; stopping");
    std::abort();
  }
  // The owner's hold of the moment (one message, or a wait it serves) ends; it takes the mutex
  // from its next hold while this guest is counted in.
  auto pause = std::chrono::microseconds(20);
  for (int turn = 0; mu_.owner_inside_.load(std::memory_order_acquire); ++turn) {
    if (turn < 256) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
  }
}

OwnerMutex::Guest::~Guest() { mu_.guests_.fetch_sub(1, std::memory_order_release); }

}  // namespace rgpu::server
