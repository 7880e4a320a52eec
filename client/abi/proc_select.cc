#include "client/abi/proc_select.h"

#include <cstring>

namespace rgpu::abi {
namespace {

constexpr ProcRevision kRevisions[] = {
#define RGPU_PROC(name, version, per_thread, symbol) {name, version, per_thread != 0, #symbol},
#include "abi/proc_table.inc"
#undef RGPU_PROC
};
constexpr size_t kCount = sizeof kRevisions / sizeof kRevisions[0];

}  // namespace

const ProcRevision* ProcRevisions(size_t* count) {
  *count = kCount;
  return kRevisions;
}

ProcLookup SelectRevision(const char* name, int cuda_version, bool per_thread, size_t* index) {
  if (name == nullptr || *name == '\0') return ProcLookup::kNotFound;
  // First row of `name` (rows are sorted by name).
  size_t lo = 0, hi = kCount;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (strcmp(kRevisions[mid].name, name) < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == kCount || strcmp(kRevisions[lo].name, name) != 0) return ProcLookup::kNotFound;
  long best_default = -1, best_per_thread = -1;
  for (size_t i = lo; i < kCount && strcmp(kRevisions[i].name, name) == 0; ++i) {
    if (kRevisions[i].version > cuda_version) continue;
    long& best = kRevisions[i].per_thread ? best_per_thread : best_default;
    if (best < 0 || kRevisions[best].version <= kRevisions[i].version) best = static_cast<long>(i);
  }
  long chosen = per_thread && best_per_thread >= 0 ? best_per_thread : best_default;
  if (chosen < 0) return ProcLookup::kVersionTooLow;
  *index = static_cast<size_t>(chosen);
  return ProcLookup::kFound;
}

}  // namespace rgpu::abi
