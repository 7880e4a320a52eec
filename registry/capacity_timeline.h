// Capacity over time on one GPU: what leases and reservations hold of it, each over an interval,
// and whether one more hold fits beside them at every moment of its own interval. The registry
// keeps a reservation (registry/service.h) by placing no lease on its GPUs that would still hold
// the room the reservation needs when it starts, and takes a reservation only where the leases
// there (until their lifetimes end) and the other reservations leave room for it all along.
#pragma once

#include <cstdint>
#include <vector>

namespace rgpu::registry {

// `memory` bytes and `milli` thousandths of a GPU's compute, held over [from_ms, to_ms).
struct TimedHold {
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  uint64_t memory = 0;
  uint32_t milli = 0;
};

// True when, at every moment of [extra.from_ms, extra.to_ms), the holds covering that moment
// together with `extra` stay within `memory_total` and `milli_total` (sums saturate, so holds
// near 2^64 bytes never wrap into a fit). An empty interval always fits.
bool FitsOverTime(const std::vector<TimedHold>& holds, const TimedHold& extra,
                  uint64_t memory_total, uint32_t milli_total);

}  // namespace rgpu::registry
