// Billing: the price list and the formulas that turn metered usage into money.
//
//   base fee           = GPU milliseconds x the GPU type's unit price (per GPU millisecond)
//   burst premium      = max(0, actual GB/s - included GB/s) x seconds x premium per GB
//                        (the bytes moved beyond what the included bandwidth covers, priced per GB)
//   priority multiplier = min(cap, (1 + coefficient[priority]) ^ (queue seconds / 3600))
//   priority surcharge = base fee x (multiplier - 1)
//   line total         = base fee + burst premium + priority surcharge
//   hold fee           = held milliseconds x the GPU type's unit price x hold fraction
//                        (a line of its own per lease: the time from the grant until the first
//                        session under the lease started, or until the lease ended if none did)
//   reservation fee    = reserved milliseconds x the GPU type's unit price x reservation fraction
//                        (a line per reservation and GPU: the time from its start to its end, or
//                        its cancellation, or now; sessions under a reservation pay no base fee
//                        and hold no GPU unused: the reservation's fee covers their GPU time)
//   provider earnings  = sum of line totals on the provider's GPUs x provider share
//
// GB is 10^9 bytes. GPU milliseconds are the wall time a session held its GPU.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/registry.pb.h"

namespace rgpu::registry {

struct GpuPrice {
  double unit_price_per_ms = 0;  // per GPU millisecond
  double included_gbps = 0;      // bandwidth included in the base fee
};

// A price list file, one setting per line ('#' starts a comment):
//   currency USD
//   burst_premium_per_gb 0.01
//   priority_cap 4
//   provider_share 0.8
//   priority P COEFFICIENT          (P an integer; priorities not listed cost nothing extra)
//   gpu UNIT_PRICE_PER_MS INCLUDED_GBPS MODEL...   (MODEL: the rest of the line, exact name)
//   default_gpu UNIT_PRICE_PER_MS INCLUDED_GBPS    (models not listed)
//   hold_fraction F                 (held time's price per ms as a fraction of the GPU type's
//                                    unit price; default 1: holding a GPU costs what using it does)
//   billing_period monthly|weekly|daily   (what a bill without a start covers: the current
//                                    calendar month, ISO week from Monday, or day, in UTC;
//                                    default monthly)
//   preemption P NOTICE_S           (a request of priority P or higher waiting for a GPU may end
//                                    leases of lower priority on it, after NOTICE_S seconds'
//                                    notice (at most a day); with several lines, the one with
//                                    the highest P at or below the request's priority applies;
//                                    none: nothing is preempted. The priority surcharge pays
//                                    for it: the request's queue time includes the notice)
//   reservation_fraction F          (reserved time's price per ms as a fraction of the GPU
//                                    type's unit price; default 1)
enum class BillingPeriod { kMonthly, kWeekly, kDaily };

struct PriceList {
  std::string currency = "USD";
  double burst_premium_per_gb = 0;
  double hold_fraction = 1;
  double reservation_fraction = 1;
  // Preemption rules: the lowest priority of a rule -> its notice in seconds.
  std::map<int, uint32_t> preemption_notice_s;
  double priority_cap = 1;
  double provider_share = 1;
  BillingPeriod billing_period = BillingPeriod::kMonthly;
  std::map<int, double> priority_coefficient;
  std::map<std::string, GpuPrice> gpus;
  GpuPrice default_gpu;

  // Parses the text of a price list; a bad line is kInvalidArgument naming its number.
  static Status Parse(const std::string& text, PriceList* out);
  static Status Load(const std::string& path, PriceList* out);
  const GpuPrice& PriceFor(const std::string& model) const;
  double CoefficientFor(int priority) const;
  // The notice a request of `priority` gives the leases it preempts, or -1 when the price list
  // lets it preempt nothing.
  int64_t PreemptionNoticeFor(int priority) const;
};

// The start (unix seconds, UTC) of the billing period that contains `now_unix`.
int64_t PeriodStart(BillingPeriod period, int64_t now_unix);
// "monthly", "weekly" or "daily".
const char* PeriodName(BillingPeriod period);

double BaseFee(double gpu_ms, double unit_price_per_ms);
// `bytes` moved over `seconds`; 0 when the average stays within `included_gbps` (or seconds <= 0).
double BurstPremium(double bytes, double seconds, double included_gbps, double premium_per_gb);
double PriorityMultiplier(double coefficient, double queue_seconds, double cap);
// The time a lease held its GPU unused: from `granted_ms` until `claimed_ms` (when a session
// under it started; 0: none did) or `end_ms` (when it ended, or now), whichever came first.
double HeldMs(int64_t granted_ms, int64_t claimed_ms, int64_t end_ms);
double HoldFee(double held_ms, double unit_price_per_ms, double hold_fraction);

// One invoice line for a session's usage under `prices`.
InvoiceLine PriceSession(const SessionUsage& usage, const PriceList& prices);
// The hold line of a lease (session_id 0) that held a GPU of `model` for `held_ms`.
InvoiceLine PriceHold(const std::string& lease_id, const std::string& tenant,
                      const std::string& provider, const std::string& server,
                      const std::string& model, double held_ms, const PriceList& prices);

// The reservation line of `reservation_id` on one GPU of `model` (session_id 0): `reserved_ms`
// of it billed.
InvoiceLine PriceReservation(const std::string& reservation_id, const std::string& tenant,
                             const std::string& provider, const std::string& server,
                             const std::string& model, double reserved_ms, const PriceList& prices);

// Sums lines into an invoice (totals filled in; earnings from provider_share).
void Total(const PriceList& prices, Invoice* invoice);

}  // namespace rgpu::registry
