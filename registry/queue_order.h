// The order of the registry's queue (RegistryService::Dispatch, and bench/placement_sim's
// backfill, which calls the same function): priority first (higher first), then, among requests of
// one priority, the smallest effective duration first, where a request's effective duration is its
// declared duration (PlaceRequest.duration_seconds, or `undeclared_s` when it declared none) less
// `aging` x the time it has waited. A fresh request counts as its declared duration (shortest
// declared first, as production schedulers backfill on users' time limits); waiting lowers it
// without bound, so a request is never passed by one of its priority that was queued more than
// (its declared - the other's declared) / aging after it: an old long request goes ahead of a
// stream of short ones once it has waited that long (no starvation). The order is that of queue
// time + declared / aging, the same at every moment. Requests that declared nothing all count as
// `undeclared_s`, so among themselves they keep arrival order. Ties: arrival order (seq).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rgpu::registry {

struct QueueOrderOptions {
  // False: priority, then arrival order alone (the queue before durations were used).
  bool by_declared = true;
  double aging = 1.0;          // weight of the wait in the response ratio
  double undeclared_s = 3600;  // what a request that declared no duration counts as
};

struct QueueEntry {
  int32_t priority = 0;
  double waited_s = 0;    // since it was queued
  double declared_s = 0;  // its declared duration; 0: none
  uint64_t seq = 0;       // arrival order
};

// declared - aging x waited, with `undeclared_s` for an undeclared request.
double EffectiveDurationS(const QueueEntry& e, const QueueOrderOptions& options);

// True when `a` goes before `b`.
bool QueueBefore(const QueueEntry& a, const QueueEntry& b, const QueueOrderOptions& options);

// The indices of `entries` in queue order.
std::vector<size_t> QueueOrder(const std::vector<QueueEntry>& entries,
                               const QueueOrderOptions& options);

}  // namespace rgpu::registry
