#include "registry/preemption.h"

#include <algorithm>

namespace rgpu::registry {
namespace {

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

}  // namespace

std::vector<std::string> ChoosePreemptionVictims(const std::vector<PreemptionCandidate>& leases,
                                                 uint64_t free_memory, uint32_t free_milli,
                                                 uint64_t memory, uint32_t milli,
                                                 int32_t priority) {
  if (memory <= free_memory && milli <= free_milli) return {};
  std::vector<const PreemptionCandidate*> eligible;
  for (const PreemptionCandidate& c : leases) {
    if (c.priority < priority) eligible.push_back(&c);
  }
  std::sort(eligible.begin(), eligible.end(), [](const auto* a, const auto* b) {
    if (a->priority != b->priority) return a->priority < b->priority;
    if (a->granted_ms != b->granted_ms) return a->granted_ms > b->granted_ms;
    return a->lease_id < b->lease_id;
  });
  uint64_t got_memory = free_memory, got_milli = free_milli;
  std::vector<const PreemptionCandidate*> chosen;
  for (const PreemptionCandidate* c : eligible) {
    if (memory <= got_memory && milli <= got_milli) break;
    chosen.push_back(c);
    got_memory = SaturatingAdd(got_memory, c->memory);
    got_milli = SaturatingAdd(got_milli, c->milli);
  }
  if (memory > got_memory || milli > got_milli) return {};
  // Keep any lease the others make unnecessary, trying the most valuable ones (the last taken)
  // first.
  for (size_t i = chosen.size(); i-- > 0;) {
    const PreemptionCandidate* c = chosen[i];
    if (got_memory - c->memory >= memory && got_milli - c->milli >= milli) {
      got_memory -= c->memory;
      got_milli -= c->milli;
      chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  std::vector<std::string> ids;
  for (const PreemptionCandidate* c : chosen) ids.push_back(c->lease_id);
  return ids;
}

}  // namespace rgpu::registry
