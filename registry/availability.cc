#include "registry/availability.h"

#include <algorithm>
#include <bitset>
#include <cctype>
#include <cstdio>
#include <ctime>

namespace rgpu::registry {
namespace {

constexpr int64_t kMinuteMs = 60'000;
constexpr int64_t kDayMs = 86'400'000;

// Minutes after midnight of "H:MM" or "HH:MM" (hours up to `max_hour`, 24 only as 24:00); -1
// when it is not one.
int ParseClock(const std::string& text, int max_hour) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos || colon == 0 || colon > 2 || text.size() != colon + 3) return -1;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i != colon && !isdigit(static_cast<unsigned char>(text[i]))) return -1;
  }
  const int hours = std::stoi(text.substr(0, colon));
  const int minutes = std::stoi(text.substr(colon + 1));
  if (minutes > 59 || hours > max_hour || (hours == 24 && minutes != 0)) return -1;
  return hours * 60 + minutes;
}

// A window's length in minutes (an end at or before the start wraps past midnight).
uint32_t WindowMinutes(const LendableWindow& w) {
  return w.end_minute() > w.start_minute() ? w.end_minute() - w.start_minute()
                                           : w.end_minute() + kMinutesPerDay - w.start_minute();
}

std::string Clock(uint32_t minute) {
  char buf[8];
  snprintf(buf, sizeof buf, "%02u:%02u", minute / 60, minute % 60);
  return buf;
}

// Floor division for possibly negative times.
int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace

Status ParseAvailability(const std::string& text, Availability* out) {
  out->clear_windows();
  if (text == "always") return Status::Ok();
  if (text.empty()) return InvalidArgument("--available is 'always' or windows HH:MM-HH:MM,...");
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    const size_t dash = item.find('-');
    const int from = dash == std::string::npos ? -1 : ParseClock(item.substr(0, dash), 23);
    const int to = dash == std::string::npos ? -1 : ParseClock(item.substr(dash + 1), 24);
    if (from < 0 || to < 0) {
      return InvalidArgument("'" + item + "' is not a window HH:MM-HH:MM (24-hour local time)");
    }
    if (out->windows_size() >= kMaxLendableWindows) {
      return InvalidArgument("at most " + std::to_string(kMaxLendableWindows) + " windows");
    }
    LendableWindow* w = out->add_windows();
    w->set_start_minute(static_cast<uint32_t>(from));
    // 00:00 as an end is the midnight at the end of the day, as 24:00 is.
    w->set_end_minute(to == 0 ? kMinutesPerDay : static_cast<uint32_t>(to));
    start = end + 1;
  }
  const std::string why = CheckAvailability(*out);
  if (!why.empty()) return InvalidArgument(why);
  return Status::Ok();
}

std::string CheckAvailability(const Availability& a) {
  if (a.windows_size() > kMaxLendableWindows) {
    return "at most " + std::to_string(kMaxLendableWindows) + " lendable windows, not " +
           std::to_string(a.windows_size());
  }
  std::bitset<kMinutesPerDay> covered;
  for (const LendableWindow& w : a.windows()) {
    if (w.start_minute() >= kMinutesPerDay || w.end_minute() == 0 ||
        w.end_minute() > kMinutesPerDay) {
      return "a lendable window starts at minute 0-1439 and ends at minute 1-1440 of the day, "
             "not " +
             std::to_string(w.start_minute()) + "-" + std::to_string(w.end_minute());
    }
    const uint32_t length = WindowMinutes(w);
    if (length >= kMinutesPerDay) {
      return "the lendable window " + Clock(w.start_minute()) + "-" + Clock(w.end_minute()) +
             " is the whole day: say always";
    }
    for (uint32_t i = 0; i < length; ++i) {
      const uint32_t minute = (w.start_minute() + i) % kMinutesPerDay;
      if (covered[minute]) {
        return "lendable windows overlap at " + Clock(minute);
      }
      covered[minute] = true;
    }
  }
  if (a.windows_size() > 0 && covered.all())
    return "the lendable windows cover the whole day: say always";
  if (a.utc_offset_seconds() < -kMaxUtcOffsetSeconds ||
      a.utc_offset_seconds() > kMaxUtcOffsetSeconds) {
    return "UTC offset " + std::to_string(a.utc_offset_seconds()) + " s is beyond +-14 h";
  }
  if (a.zone().size() > kMaxZoneLength) return "time zone name longer than 32 characters";
  for (char c : a.zone()) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '_' && c != ':' &&
        c != '/') {
      return "time zone name holds characters other than [A-Za-z0-9+-_:/]";
    }
  }
  if (a.notice_seconds() > kMaxNoticeSeconds) {
    return "notice " + std::to_string(a.notice_seconds()) + " s is longer than a day";
  }
  return "";
}

std::string UtcTime(int64_t unix_ms) {
  const time_t t = static_cast<time_t>(unix_ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[40];
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string DescribeAvailability(const Availability& a) {
  if (AlwaysLendable(a)) return "always";
  std::string out;
  for (const LendableWindow& w : a.windows()) {
    if (!out.empty()) out += ",";
    out += Clock(w.start_minute()) + "-" + Clock(w.end_minute());
  }
  const int32_t offset = a.utc_offset_seconds();
  const int32_t magnitude = offset < 0 ? -offset : offset;
  char buf[64];
  if (magnitude % 60 == 0) {
    snprintf(buf, sizeof buf, " UTC%c%02d:%02d", offset < 0 ? '-' : '+', magnitude / 3600,
             magnitude / 60 % 60);
  } else {
    snprintf(buf, sizeof buf, " UTC%c%02d:%02d:%02d", offset < 0 ? '-' : '+', magnitude / 3600,
             magnitude / 60 % 60, magnitude % 60);
  }
  out += buf;
  if (!a.zone().empty()) out += " (" + a.zone() + ")";
  out += ", notice " + std::to_string(a.notice_seconds()) + " s";
  return out;
}

std::vector<LendableSpan> LendableSpans(const Availability& a, int64_t from_ms, int64_t to_ms) {
  std::vector<LendableSpan> spans;
  if (AlwaysLendable(a) || to_ms <= from_ms) return spans;
  const int64_t offset_ms = int64_t{a.utc_offset_seconds()} * 1000;
  // Local days from the one before `from` (its windows may wrap into `from`) to the one of `to`.
  const int64_t first_day = FloorDiv(from_ms + offset_ms, kDayMs) - 1;
  const int64_t last_day = FloorDiv(to_ms + offset_ms, kDayMs);
  for (int64_t day = first_day; day <= last_day; ++day) {
    for (const LendableWindow& w : a.windows()) {
      const int64_t start = day * kDayMs + int64_t{w.start_minute()} * kMinuteMs - offset_ms;
      spans.push_back({start, start + int64_t{WindowMinutes(w)} * kMinuteMs});
    }
  }
  std::sort(spans.begin(), spans.end(),
            [](const LendableSpan& x, const LendableSpan& y) { return x.from_ms < y.from_ms; });
  std::vector<LendableSpan> merged;
  for (const LendableSpan& s : spans) {
    if (!merged.empty() && s.from_ms <= merged.back().to_ms) {
      merged.back().to_ms = std::max(merged.back().to_ms, s.to_ms);
    } else {
      merged.push_back(s);
    }
  }
  std::vector<LendableSpan> out;
  for (const LendableSpan& s : merged) {
    if (s.to_ms > from_ms && s.from_ms < to_ms) out.push_back(s);
  }
  return out;
}

bool LendableAt(const Availability& a, int64_t t_ms) {
  if (AlwaysLendable(a)) return true;
  for (const LendableSpan& s : LendableSpans(a, t_ms, t_ms + 1)) {
    if (s.from_ms <= t_ms && t_ms < s.to_ms) return true;
  }
  return false;
}

int64_t LendableUntil(const Availability& a, int64_t t_ms) {
  if (AlwaysLendable(a)) return kLendableForever;
  // A stretch is shorter than a day (windows together never cover the whole day), so the days
  // up to a day after `t_ms` hold all of the one it lies in (windows that meet at midnight
  // continue it into the next day).
  for (const LendableSpan& s : LendableSpans(a, t_ms, t_ms + kDayMs)) {
    if (s.from_ms <= t_ms && t_ms < s.to_ms) return s.to_ms;
  }
  return t_ms;
}

int64_t NextOpening(const Availability& a, int64_t t_ms) {
  if (AlwaysLendable(a)) return t_ms;
  for (const LendableSpan& s : LendableSpans(a, t_ms, t_ms + 2 * kDayMs)) {
    if (s.to_ms > t_ms) return std::max(s.from_ms, t_ms);
  }
  return t_ms;  // unreachable for an accepted availability: every day has a window
}

int64_t LastClose(const Availability& a, int64_t t_ms) {
  int64_t last = 0;
  if (AlwaysLendable(a)) return last;
  for (const LendableSpan& s : LendableSpans(a, t_ms - 2 * kDayMs, t_ms + 1)) {
    if (s.to_ms <= t_ms) last = s.to_ms;
  }
  return last;
}

int64_t LongestStretchMs(const Availability& a) {
  if (AlwaysLendable(a)) return kLendableForever;
  int64_t longest = 0;
  // Two days of windows, read from a midnight in the server's zone, hold every stretch whole.
  const int64_t origin = 10 * kDayMs - int64_t{a.utc_offset_seconds()} * 1000;
  for (const LendableSpan& s : LendableSpans(a, origin, origin + 2 * kDayMs)) {
    longest = std::max(longest, s.to_ms - s.from_ms);
  }
  return longest;
}

bool LendsThroughout(const Availability& a, int64_t from_ms, int64_t to_ms) {
  if (AlwaysLendable(a)) return true;
  return LendableAt(a, from_ms) && LendableUntil(a, from_ms) >= to_ms;
}

}  // namespace rgpu::registry
