// Usage checks: whether a usage record a provider reports could be true. The registry never
// trusts a provider (docs/security.md): it stores a record only when it names a lease the
// registry granted for the record's tenant on a GPU of the caller's server (the lease's GPU, or
// one that held it before a hand-over, for records that end by the time it left there), lies
// inside the
// lease's interval, continues its session without overlapping it, and holds amounts the GPU
// could physically have produced in the session's wall time so far:
//
//   wall         = sum of the session's record intervals (end - start), this one included
//   GPU busy     <= wall x tolerance + 100 ms      (kernels run one at a time on the GPU: under
//                                                  --fair-share a tenant alone on it may use all
//                                                  of it, so the bound is the GPU, not the share)
//   bytes in+out <= bandwidth x wall x tolerance + 256 MiB
//                   (bandwidth: the GPU's advertised GB/s, or default_bandwidth_gbps when 0)
//   GiB-seconds  <= lease memory x wall x tolerance + 1 GiB-s
//   calls        <= max_calls_per_second x wall x tolerance + 1000
//   queue time   <= wall x tolerance + 100 ms
//
// The bounds apply to the session's totals, so a transfer or kernel that straddles two records
// is never refused, and a provider gains nothing by splitting or merging records. Pure functions;
// the service (registry/service.cc) looks up what they compare against.
#pragma once

#include <cstdint>
#include <string>

#include "proto/registry.pb.h"
#include "registry/store.h"

namespace rgpu::registry {

struct UsageLimits {
  int64_t skew_ms = 5000;   // a server's clock may differ from the registry's by this much
  double tolerance = 1.25;  // measured amounts may exceed their physical bound by this factor
  // The bandwidth assumed for a GPU that advertises none: PCIe 5.0 x16, about 63 GB/s each way
  // (rounded up), more than any host link rgpu's transports reach.
  double default_bandwidth_gbps = 64;
  double max_calls_per_second = 10e6;   // far above any forwarded-call rate rgpu reaches
  uint32_t max_sessions_per_lease = 4;  // sessions (client connections) one lease may bill
};

// The most a GPU may advertise (GB/s): above NVLink-C2C (900 GB/s), the fastest host link there is.
constexpr double kMaxAdvertisedBandwidthGbps = 1000;
// A registration's GPUs (their indices are below this) and one provider's servers.
constexpr uint32_t kMaxGpusPerServer = 64;
constexpr size_t kMaxServersPerProvider = 256;

// What the registry knows when it checks a record.
struct UsageContext {
  const LeaseRow* lease = nullptr;  // the lease the record names (required)
  const GpuSpec* gpu = nullptr;     // the record's GPU (required)
  // The session's records stored so far (and accepted earlier in the same request); nullptr for
  // its first record.
  const SessionTotals* before = nullptr;
  uint32_t sessions_of_lease = 0;  // other sessions already billed under the lease
  int64_t now_ms = 0;              // the registry's clock
};

// "" when the record is well formed on its own: ids, names, finite non-negative amounts,
// end >= start, calls by kind (at most 512 identifiers of at most 64 characters, each counting
// some calls, adding up to at most `calls`); otherwise why not.
std::string CheckRecordShape(const UsageRecord& r);

// True when GPU `gpu_id` may bill `lease` for an interval ending at `end_ms`: it is the lease's
// GPU, or it held the lease before a hand-over and the interval ends by when the lease left it
// (give or take `skew_ms`). A hand-over's target bills only once the hand-over is complete.
bool LeaseHeldBy(const LeaseRow& lease, const std::string& gpu_id, int64_t end_ms, int64_t skew_ms);

// "" when the (well-formed) record agrees with its lease and is physically possible, and tells
// something (an empty interval only opens, ends or moves a session, and never once it was
// reported ended or moved); otherwise why not, in words for the provider's log.
std::string CheckRecordAgainstLease(const UsageRecord& r, const UsageContext& context,
                                    const UsageLimits& limits);

// Adds an accepted record to its session's totals (saturating, never overflowing); `ended`
// becomes whether this record ended or moved the session.
void AddToTotals(const UsageRecord& r, SessionTotals* totals);

// The end of a lease's interval: the earliest of its expiry, its release (ended early) and the
// end of its notice (a lendable window closed, a preemption), if it was given one.
int64_t LeaseEndMs(const LeaseRow& lease);

}  // namespace rgpu::registry
