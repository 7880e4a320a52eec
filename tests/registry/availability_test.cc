// Lendable windows (registry/availability.h): rgpu-server --available as the server parses it,
// the registry's check of what a server reports (it trusts none of it), and what the windows
// say at a given moment: across midnight, at positive and negative UTC offsets.
#include "registry/availability.h"

#include <gtest/gtest.h>

namespace rgpu::registry {
namespace {

constexpr int64_t kMinute = 60'000;
constexpr int64_t kHour = 3'600'000;
constexpr int64_t kDay = 86'400'000;
// 2027-01-15 00:00:00 UTC.
constexpr int64_t kDay0 = 1'799'971'200'000;

Availability Parsed(const std::string& text, int32_t offset_s = 0, uint32_t notice_s = 0) {
  Availability a;
  Status s = ParseAvailability(text, &a);
  EXPECT_TRUE(s.ok()) << text << ": " << s.ToString();
  a.set_utc_offset_seconds(offset_s);
  a.set_notice_seconds(notice_s);
  return a;
}

TEST(Availability, ParsesWindowsInLocalTimeThatMayWrapPastMidnight) {
  Availability a;
  ASSERT_TRUE(ParseAvailability("always", &a).ok());
  EXPECT_TRUE(AlwaysLendable(a));
  ASSERT_TRUE(ParseAvailability("20:00-08:00", &a).ok());
  ASSERT_EQ(a.windows_size(), 1);
  EXPECT_EQ(a.windows(0).start_minute(), 20u * 60);
  EXPECT_EQ(a.windows(0).end_minute(), 8u * 60);
  ASSERT_TRUE(ParseAvailability("9:00-12:30,18:00-24:00", &a).ok());
  ASSERT_EQ(a.windows_size(), 2);
  EXPECT_EQ(a.windows(0).start_minute(), 9u * 60);
  EXPECT_EQ(a.windows(0).end_minute(), 12u * 60 + 30);
  EXPECT_EQ(a.windows(1).end_minute(), kMinutesPerDay);
  // 00:00 as an end is the midnight that ends the day.
  ASSERT_TRUE(ParseAvailability("18:00-00:00", &a).ok());
  EXPECT_EQ(a.windows(0).end_minute(), kMinutesPerDay);
  a.set_utc_offset_seconds(3600);
  a.set_zone("CET");
  a.set_notice_seconds(300);
  EXPECT_EQ(DescribeAvailability(a), "18:00-24:00 UTC+01:00 (CET), notice 300 s");
  a.set_utc_offset_seconds(-(5 * 3600 + 30 * 60));
  a.set_zone("");
  EXPECT_EQ(DescribeAvailability(a), "18:00-24:00 UTC-05:30, notice 300 s");
}

TEST(Availability, RefusesMalformedWindows) {
  for (const char* text :
       {"",
        "never",
        "20:00",
        "20-08",
        "25:00-08:00",
        "20:60-08:00",
        "24:00-01:00",
        "20:00-24:01",
        "2000-0800",
        "20:00-08:00,",
        ",20:00-08:00",
        "20:00-08:00x",
        "1:0-2:00",
        "-1:00-02:00",
        "+1:00-02:00",
        "08:00-08:00",
        "00:00-00:00",
        "08:00-12:00,11:00-13:00",
        "00:00-12:00,12:00-24:00",
        "20:00 -08:00",
        "9999999999:00-01:00",
        "1:00-1:01,2:00-2:01,3:00-3:01,4:00-4:01,5:00-5:01,6:00-6:01,7:00-7:01,8:00-8:01,"
        "9:00-9:01"}) {
    Availability a;
    Status s = ParseAvailability(text, &a);
    EXPECT_FALSE(s.ok()) << "'" << text << "' was accepted";
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << text;
  }
}

// What a hostile provider might report instead of what rgpu-server makes: every field is checked.
TEST(Availability, RefusesHostileReports) {
  auto window = [](uint32_t start, uint32_t end) {
    Availability a;
    LendableWindow* w = a.add_windows();
    w->set_start_minute(start);
    w->set_end_minute(end);
    return a;
  };
  EXPECT_EQ(CheckAvailability(window(60, 120)), "");
  EXPECT_NE(CheckAvailability(window(1440, 120)), "");        // starts after the day
  EXPECT_NE(CheckAvailability(window(60, 0)), "");            // ends at minute 0
  EXPECT_NE(CheckAvailability(window(60, 1441)), "");         // ends after the day
  EXPECT_NE(CheckAvailability(window(0xffffffffu, 60)), "");  // would wrap in arithmetic
  EXPECT_NE(CheckAvailability(window(60, 0xffffffffu)), "");
  EXPECT_NE(CheckAvailability(window(0, 1440)), "");   // the whole day: "always"
  EXPECT_NE(CheckAvailability(window(600, 600)), "");  // wraps round to the whole day
  Availability many;
  for (uint32_t i = 0; i <= kMaxLendableWindows; ++i) {
    LendableWindow* w = many.add_windows();
    w->set_start_minute(i * 10);
    w->set_end_minute(i * 10 + 5);
  }
  EXPECT_NE(CheckAvailability(many).find("at most 8"), std::string::npos);
  Availability overlapping = window(60, 120);
  *overlapping.add_windows() = window(119, 200).windows(0);
  EXPECT_NE(CheckAvailability(overlapping).find("overlap"), std::string::npos);
  Availability a = window(60, 120);
  a.set_utc_offset_seconds(14 * 3600);
  EXPECT_EQ(CheckAvailability(a), "");
  a.set_utc_offset_seconds(14 * 3600 + 1);
  EXPECT_NE(CheckAvailability(a).find("UTC offset"), std::string::npos);
  a.set_utc_offset_seconds(INT32_MIN);
  EXPECT_NE(CheckAvailability(a).find("UTC offset"), std::string::npos);
  a.set_utc_offset_seconds(0);
  a.set_zone(std::string(33, 'A'));
  EXPECT_NE(CheckAvailability(a), "");
  a.set_zone("CET\n[forged log line]");
  EXPECT_NE(CheckAvailability(a), "");
  a.set_zone("Europe/Paris");
  EXPECT_EQ(CheckAvailability(a), "");
  a.set_notice_seconds(kMaxNoticeSeconds);
  EXPECT_EQ(CheckAvailability(a), "");
  a.set_notice_seconds(kMaxNoticeSeconds + 1);
  EXPECT_NE(CheckAvailability(a).find("notice"), std::string::npos);
}

// 20:00-08:00 in a zone an hour ahead of UTC lends from 19:00 to 07:00 UTC.
TEST(Availability, AWindowAcrossMidnightInTheServersZone) {
  const Availability a = Parsed("20:00-08:00", 3600);
  EXPECT_FALSE(LendableAt(a, kDay0 + 19 * kHour - 1));
  EXPECT_TRUE(LendableAt(a, kDay0 + 19 * kHour));
  EXPECT_TRUE(LendableAt(a, kDay0 + 24 * kHour));  // midnight UTC, 01:00 local
  EXPECT_TRUE(LendableAt(a, kDay0 + 31 * kHour - 1));
  EXPECT_FALSE(LendableAt(a, kDay0 + 31 * kHour));
  EXPECT_TRUE(LendableAt(a, kDay0 + 6 * kHour));  // the night before
  EXPECT_EQ(LendableUntil(a, kDay0 + 19 * kHour), kDay0 + 31 * kHour);
  EXPECT_EQ(LendableUntil(a, kDay0 + 25 * kHour), kDay0 + 31 * kHour);
  EXPECT_EQ(LendableUntil(a, kDay0 + 12 * kHour), kDay0 + 12 * kHour);  // closed
  EXPECT_EQ(NextOpening(a, kDay0 + 12 * kHour), kDay0 + 19 * kHour);
  EXPECT_EQ(NextOpening(a, kDay0 + 20 * kHour), kDay0 + 20 * kHour);
  EXPECT_EQ(LastClose(a, kDay0 + 12 * kHour), kDay0 + 7 * kHour);
  EXPECT_EQ(LastClose(a, kDay0 + 7 * kHour), kDay0 + 7 * kHour);
  EXPECT_EQ(LongestStretchMs(a), 12 * kHour);
  EXPECT_TRUE(LendsThroughout(a, kDay0 + 19 * kHour, kDay0 + 31 * kHour));
  EXPECT_FALSE(LendsThroughout(a, kDay0 + 19 * kHour, kDay0 + 31 * kHour + 1));
  EXPECT_FALSE(LendsThroughout(a, kDay0 + 18 * kHour, kDay0 + 20 * kHour));
}

// Five and a half hours behind UTC, 20:00-08:00 local is 01:30-13:30 UTC the next day.
TEST(Availability, ANegativeOffsetMovesTheWindowLater) {
  const Availability a = Parsed("20:00-08:00", -(5 * 3600 + 1800));
  EXPECT_FALSE(LendableAt(a, kDay0 + 25 * kHour + 30 * kMinute - 1));
  EXPECT_TRUE(LendableAt(a, kDay0 + 25 * kHour + 30 * kMinute));
  EXPECT_TRUE(LendableAt(a, kDay0 + 37 * kHour + 30 * kMinute - 1));
  EXPECT_FALSE(LendableAt(a, kDay0 + 37 * kHour + 30 * kMinute));
  EXPECT_EQ(NextOpening(a, kDay0 + 14 * kHour), kDay0 + 25 * kHour + 30 * kMinute);
}

// Windows that meet at midnight are one stretch; several windows a day each count.
TEST(Availability, WindowsThatMeetAreOneStretch) {
  const Availability a = Parsed("20:00-24:00,00:00-08:00,12:00-13:00");
  EXPECT_EQ(LongestStretchMs(a), 12 * kHour);
  EXPECT_EQ(LendableUntil(a, kDay0 + 22 * kHour), kDay0 + 32 * kHour);
  EXPECT_EQ(LendableUntil(a, kDay0 + 12 * kHour + 30 * kMinute), kDay0 + 13 * kHour);
  EXPECT_EQ(NextOpening(a, kDay0 + 9 * kHour), kDay0 + 12 * kHour);
  EXPECT_EQ(LastClose(a, kDay0 + 14 * kHour), kDay0 + 13 * kHour);
  // A server that always lends: no edges at all.
  const Availability always;
  EXPECT_TRUE(LendableAt(always, kDay0));
  EXPECT_EQ(LendableUntil(always, kDay0), kLendableForever);
  EXPECT_EQ(LastClose(always, kDay0), 0);
  EXPECT_TRUE(LendsThroughout(always, kDay0, kDay0 + 365 * kDay));
}

}  // namespace
}  // namespace rgpu::registry
