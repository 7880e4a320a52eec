#include "common/process_barrier.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/log.h"

namespace rgpu {
namespace {

long Membarrier(int command) { return syscall(SYS_membarrier, command, 0, 0); }

bool Register() {
  const long supported = Membarrier(MEMBARRIER_CMD_QUERY);
  if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
  if (Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0) return false;
  return Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
}

}  // namespace

bool ProcessBarrierAvailable() {
  static const bool available = Register();
  return available;
}

void ProcessBarrier() {
  // The kernel may lack memory for the processor mask for a while (ENOMEM): tried again. Any
  // other failure after registration leaves the locks unsound.
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    if (Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
    if (errno != ENOMEM && errno != EINTR && errno != EAGAIN) break;
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10));
  }
  RGPU_LOG_ERROR("membarrier failed after it was registered (%s); stopping", strerror(errno));
  std::abort();
}

void AwaitCleared(const std::atomic<bool>& flag) {
  auto pause = std::chrono::microseconds(20);
  for (int turn = 0; flag.load(std::memory_order_acquire);) {
    if (turn < 256) {
      ++turn;
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
  }
}

}  // namespace rgpu
