// Preemption: which leases a higher-priority request ends on a GPU so that it fits there. The
// price list says which priorities may preempt and with what notice (PriceList::preemption);
// the service gives the chosen leases that notice, then ends them and places the request.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rgpu::registry {

// A lease on the GPU that might be preempted.
struct PreemptionCandidate {
  std::string lease_id;
  int32_t priority = 0;
  int64_t granted_ms = 0;
  uint64_t memory = 0;
  uint32_t milli = 0;
};

// The leases to end so that `memory` bytes and `milli` thousandths fit beside `free_memory` and
// `free_milli`, taken only from candidates of priority below `priority`: lowest priority first,
// then the most recently granted (the least work lost), and of those no more than are needed
// (a lease whose end the others make unnecessary is kept). Empty when the request fits already
// or when ending every eligible lease would not make room.
std::vector<std::string> ChoosePreemptionVictims(const std::vector<PreemptionCandidate>& leases,
                                                 uint64_t free_memory, uint32_t free_milli,
                                                 uint64_t memory, uint32_t milli, int32_t priority);

}  // namespace rgpu::registry
