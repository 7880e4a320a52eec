// Availability: when a provider's server lends its GPUs (rgpu-server --available), and what
// follows from it at a given moment. Windows are spans of every day in the server's local time
// (proto/registry.proto, Availability); the server reports them with its UTC offset, which it
// sends again with each heartbeat (daylight saving time changes it), and the registry reads them
// against its own clock. The registry trusts none of it: CheckAvailability says what is wrong
// with a report before anything else reads it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/registry.pb.h"

namespace rgpu::registry {

constexpr int kMaxLendableWindows = 8;
constexpr int32_t kMaxUtcOffsetSeconds = 14 * 3600;  // the widest offsets in use are -12 h, +14 h
constexpr uint32_t kMaxNoticeSeconds = 86400;
constexpr size_t kMaxZoneLength = 32;
constexpr uint32_t kMinutesPerDay = 1440;
// "Lendable from now on, without an end": the answer of LendableUntil for a server that always
// lends.
constexpr int64_t kLendableForever = INT64_MAX;

// Parses rgpu-server --available into `out`'s windows (its other fields are left alone):
// "always", or comma-separated windows HH:MM-HH:MM in 24-hour local time, where an end at or
// before its start wraps past midnight ("20:00-08:00") and "24:00" may end a window. The result
// is checked as CheckAvailability checks a report; kInvalidArgument says what is wrong.
Status ParseAvailability(const std::string& text, Availability* out);

// Empty when `a` is well formed, else why not: at most kMaxLendableWindows windows, each
// starting at minute 0..1439 and ending at minute 1..1440 of the day, 1 minute to 23 h 59 min
// long, none overlapping another, together not the whole day ("always" says that); an offset
// within +-14 h; a zone of at most 32 characters of [A-Za-z0-9+-_:/]; a notice of at most a day.
std::string CheckAvailability(const Availability& a);

// True when the server lends at every moment (no windows).
inline bool AlwaysLendable(const Availability& a) { return a.windows_size() == 0; }

// How `a` reads: "always", or "20:00-08:00,12:00-13:00 UTC+01:00 (CET), notice 300 s".
// Call only on an availability CheckAvailability accepted.
std::string DescribeAvailability(const Availability& a);

// `unix_ms` as UTC, for messages and logs: "2026-11-02 08:00:00 UTC".
std::string UtcTime(int64_t unix_ms);

// One stretch of unix time in which the server lends, [from_ms, to_ms).
struct LendableSpan {
  int64_t from_ms = 0;
  int64_t to_ms = 0;
};

// The stretches of lending that overlap [from_ms, to_ms), in order, windows that touch merged
// into one (a stretch may begin before from_ms or end after to_ms). Empty for a server that
// always lends. Call only on an accepted availability.
std::vector<LendableSpan> LendableSpans(const Availability& a, int64_t from_ms, int64_t to_ms);

// True when the server lends at `t_ms` (unix ms).
bool LendableAt(const Availability& a, int64_t t_ms);
// The end of the stretch of lending that `t_ms` lies in: kLendableForever for a server that
// always lends, `t_ms` itself when it does not lend then.
int64_t LendableUntil(const Availability& a, int64_t t_ms);
// When the server next lends at or after `t_ms` (`t_ms` when it lends then).
int64_t NextOpening(const Availability& a, int64_t t_ms);
// The end of the last stretch of lending that ended at or before `t_ms` (within the two days
// before it; 0 when none did, or the server always lends).
int64_t LastClose(const Availability& a, int64_t t_ms);
// The longest stretch of lending the windows give, in ms (kLendableForever: always).
int64_t LongestStretchMs(const Availability& a);
// True when the server lends throughout [from_ms, to_ms).
bool LendsThroughout(const Availability& a, int64_t from_ms, int64_t to_ms);

}  // namespace rgpu::registry
