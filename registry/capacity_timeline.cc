#include "registry/capacity_timeline.h"

namespace rgpu::registry {
namespace {

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

}  // namespace

bool FitsOverTime(const std::vector<TimedHold>& holds, const TimedHold& extra,
                  uint64_t memory_total, uint32_t milli_total) {
  if (extra.to_ms <= extra.from_ms) return true;
  // What is held only grows where a hold begins, so the moments to check are the start of
  // `extra` and every start of a hold inside it.
  std::vector<int64_t> moments{extra.from_ms};
  for (const TimedHold& h : holds) {
    if (h.from_ms > extra.from_ms && h.from_ms < extra.to_ms) moments.push_back(h.from_ms);
  }
  for (int64_t t : moments) {
    uint64_t memory = extra.memory, milli = extra.milli;
    for (const TimedHold& h : holds) {
      if (h.from_ms <= t && t < h.to_ms) {
        memory = SaturatingAdd(memory, h.memory);
        milli = SaturatingAdd(milli, h.milli);
      }
    }
    if (memory > memory_total || milli > milli_total) return false;
  }
  return true;
}

}  // namespace rgpu::registry
