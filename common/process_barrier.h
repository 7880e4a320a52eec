// A memory barrier on every running thread of this process: membarrier(2) with
// MEMBARRIER_CMD_PRIVATE_EXPEDITED. For locks whose frequent side uses no fence (its store and
// the load after it are kept in order only by the compiler) and whose rare side pays this system
// call instead: either the rare side sees the frequent side's store, or the frequent side's
// load sees the rare side's. Correct on every architecture whose kernel implements the command.
#pragma once

#include <atomic>

namespace rgpu {

// Registers this process for the barrier (once; later calls return the first answer) and checks
// that it works here (a seccomp filter may refuse it): false where it cannot be used.
bool ProcessBarrierAvailable();

// The barrier. Only after ProcessBarrierAvailable() returned true. The kernel's lack of memory
// for it is waited out; any other failure then ends the process, as the locks built on it would
// be unsound.
void ProcessBarrier();

// Waits until `flag` reads false (acquire): yielding at first, then sleeping up to 1 ms at a time
// (so it notices the end of a long hold up to 1 ms late), for the other side's hold of the moment
// (which may be a long wait of its own) to end.
void AwaitCleared(const std::atomic<bool>& flag);

}  // namespace rgpu
