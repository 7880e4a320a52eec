// UsageMeter (registry/usage_meter.h): per-interval deltas with unique ids.
#include "registry/usage_meter.h"

#include <gtest/gtest.h>

#include <set>

namespace rgpu::registry {
namespace {

wire::SessionStats Stats(uint64_t id, uint64_t calls, uint64_t in, uint64_t memory) {
  wire::SessionStats s;
  s.set_session_id(id);
  s.set_tenant("alice");
  s.set_calls(calls);
  s.set_bytes_in(in);
  s.set_bytes_out(2 * in);
  s.set_memory_bytes(memory);
  return s;
}

TEST(UsageMeter, RecordsDeltasOverIntervals) {
  UsageMeter meter("host1", "boot1");
  meter.Started(7, 1000);
  std::vector<UsageRecord> out;
  wire::StatusReply live;
  *live.add_sessions() = Stats(7, 10, 100, 1ull << 30);  // 1 GiB held
  meter.Sample(live, 3000, &out);
  *live.mutable_sessions(0) = Stats(7, 25, 400, 1ull << 30);
  meter.Sample(live, 4000, &out);
  meter.Ended(Stats(7, 30, 500, 0), 4500, &out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].start_ms(), 1000);
  EXPECT_EQ(out[0].end_ms(), 3000);
  EXPECT_EQ(out[0].calls(), 10u);
  EXPECT_DOUBLE_EQ(out[0].memory_gib_seconds(), 1.0);  // 0 to 1 GiB over 2 s: (0 + 1) / 2 x 2
  EXPECT_EQ(out[1].start_ms(), 3000);
  EXPECT_EQ(out[1].calls(), 15u);
  EXPECT_EQ(out[1].bytes_in(), 300u);
  EXPECT_EQ(out[1].bytes_out(), 600u);
  EXPECT_EQ(out[2].calls(), 5u);
  EXPECT_TRUE(out[2].session_ended());
  EXPECT_DOUBLE_EQ(out[1].memory_gib_seconds(), 1.0);   // 1 GiB for 1 s
  EXPECT_DOUBLE_EQ(out[2].memory_gib_seconds(), 0.25);  // 1 GiB to 0 over 0.5 s
  std::set<std::string> ids;
  for (const auto& r : out) ids.insert(r.record_id());
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(out[0].record_id(), "host1:boot1:1");
}

TEST(UsageMeter, CallsByKindQueueTimeAndDevice) {
  UsageMeter meter("host1", "boot1");
  meter.Started(7, 1000);
  std::vector<UsageRecord> out;
  wire::StatusReply live;
  wire::SessionStats s = Stats(7, 12, 0, 0);
  (*s.mutable_calls_by_kind())["MemAlloc"] = 2;
  (*s.mutable_calls_by_kind())["LaunchKernelOnStream"] = 10;
  s.set_queue_seconds(0.5);
  s.set_device(1);
  *live.add_sessions() = s;
  meter.Sample(live, 2000, &out);
  (*s.mutable_calls_by_kind())["LaunchKernelOnStream"] = 15;
  (*s.mutable_calls_by_kind())["MemFree"] = 2;
  s.set_calls(19);
  s.set_queue_seconds(0.75);
  meter.Ended(s, 3000, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].calls_by_kind().at("MemAlloc"), 2u);
  EXPECT_EQ(out[0].calls_by_kind().at("LaunchKernelOnStream"), 10u);
  EXPECT_DOUBLE_EQ(out[0].queue_ms(), 500.0);
  EXPECT_EQ(out[0].gpu_index(), 1u);  // the session's device, not the meter's default
  EXPECT_EQ(out[1].calls_by_kind().count("MemAlloc"), 0u);  // unchanged: not repeated
  EXPECT_EQ(out[1].calls_by_kind().at("LaunchKernelOnStream"), 5u);
  EXPECT_EQ(out[1].calls_by_kind().at("MemFree"), 2u);
  EXPECT_DOUBLE_EQ(out[1].queue_ms(), 250.0);
}

TEST(UsageMeter, ObservationsBetweenSamplesRefineMemory) {
  UsageMeter meter("host1", "boot1");
  meter.Started(1, 1000);
  wire::StatusReply live;
  *live.add_sessions() = Stats(1, 1, 1, 2ull << 30);  // 2 GiB
  meter.Observe(live, 1100);                          // (0 + 2) / 2 x 0.1 s = 0.1
  meter.Observe(live, 2100);                          // 2 x 1 s = 2
  std::vector<UsageRecord> out;
  meter.Ended(Stats(1, 5, 5, 0), 2200, &out);  // (2 + 0) / 2 x 0.1 s = 0.1
  ASSERT_EQ(out.size(), 1u);
  EXPECT_DOUBLE_EQ(out[0].memory_gib_seconds(), 2.2);
  EXPECT_EQ(out[0].start_ms(), 1000);
  EXPECT_EQ(out[0].end_ms(), 2200);
  EXPECT_EQ(out[0].calls(), 5u);
}

TEST(UsageMeter, EndedSessionsAreNotCountedAgain) {
  UsageMeter meter("host1", "boot1");
  std::vector<UsageRecord> out;
  wire::StatusReply live;
  *live.add_sessions() = Stats(3, 10, 100, 0);
  meter.Ended(Stats(3, 10, 100, 0), 2000, &out);
  meter.Sample(live, 2100, &out);  // a sample taken before the session left the list
  meter.Ended(Stats(3, 10, 100, 0), 2200, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].calls(), 10u);
  // Sessions without a tenant (not admitted) are not metered.
  wire::StatusReply anonymous;
  anonymous.add_sessions()->set_session_id(9);
  meter.Sample(anonymous, 3000, &out);
  EXPECT_EQ(out.size(), 1u);
}

TEST(UsageMeter, RecordsNameTheLeaseOfTheirSession) {
  UsageMeter meter("host1", "boot1");
  meter.Started(7, 1000);
  wire::StatusReply live;
  *live.add_sessions() = Stats(7, 10, 100, 0);
  live.mutable_sessions(0)->set_lease_id("lease-7");
  std::vector<UsageRecord> out;
  meter.Sample(live, 2000, &out);
  wire::SessionStats last = Stats(7, 12, 100, 0);
  last.set_lease_id("lease-7");
  meter.Ended(last, 2500, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].lease_id(), "lease-7");
  EXPECT_EQ(out[1].lease_id(), "lease-7");
  EXPECT_TRUE(out[1].session_ended());
}

}  // namespace
}  // namespace rgpu::registry
