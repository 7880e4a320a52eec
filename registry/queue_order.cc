#include "registry/queue_order.h"

#include <algorithm>
#include <numeric>

namespace rgpu::registry {

double EffectiveDurationS(const QueueEntry& e, const QueueOrderOptions& options) {
  const double declared = e.declared_s > 0 ? e.declared_s : options.undeclared_s;
  return declared - options.aging * std::max(0.0, e.waited_s);
}

bool QueueBefore(const QueueEntry& a, const QueueEntry& b, const QueueOrderOptions& options) {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (options.by_declared) {
    const double da = EffectiveDurationS(a, options), db = EffectiveDurationS(b, options);
    if (da != db) return da < db;
  }
  return a.seq < b.seq;
}

std::vector<size_t> QueueOrder(const std::vector<QueueEntry>& entries,
                               const QueueOrderOptions& options) {
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return QueueBefore(entries[a], entries[b], options); });
  return order;
}

}  // namespace rgpu::registry
