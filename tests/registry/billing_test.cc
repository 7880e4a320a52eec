// The billing formulas (registry/billing.h) against values computed by hand.
#include "registry/billing.h"

#include <gtest/gtest.h>

#include <cmath>

namespace rgpu::registry {
namespace {

TEST(Billing, BaseFeeIsGpuMillisecondsTimesUnitPrice) {
  EXPECT_DOUBLE_EQ(BaseFee(1500, 0.002), 3.0);
  EXPECT_DOUBLE_EQ(BaseFee(0, 0.002), 0.0);
  EXPECT_DOUBLE_EQ(BaseFee(-5, 0.002), 0.0);  // never negative
}

TEST(Billing, BurstPremiumChargesBytesBeyondTheIncludedBandwidth) {
  // 30 GB in 10 s = 3 GB/s; 1 GB/s included: 2 GB/s x 10 s = 20 GB over, at 0.05 per GB = 1.0.
  EXPECT_DOUBLE_EQ(BurstPremium(30e9, 10, 1.0, 0.05), 1.0);
  // 5 GB in 10 s = 0.5 GB/s, within the included 1 GB/s: nothing.
  EXPECT_DOUBLE_EQ(BurstPremium(5e9, 10, 1.0, 0.05), 0.0);
  // Exactly at the included bandwidth: nothing.
  EXPECT_DOUBLE_EQ(BurstPremium(10e9, 10, 1.0, 0.05), 0.0);
  EXPECT_DOUBLE_EQ(BurstPremium(1e9, 0, 1.0, 0.05), 0.0);  // no time: no rate
}

TEST(Billing, PriorityMultiplierCompoundsPerQueuedHourUpToTheCap) {
  EXPECT_DOUBLE_EQ(PriorityMultiplier(1.0, 3600, 10), 2.0);             // (1 + 1)^1
  EXPECT_DOUBLE_EQ(PriorityMultiplier(1.0, 7200, 10), 4.0);             // (1 + 1)^2
  EXPECT_DOUBLE_EQ(PriorityMultiplier(1.0, 7200, 3), 3.0);              // capped
  EXPECT_DOUBLE_EQ(PriorityMultiplier(0.5, 1800, 10), std::sqrt(1.5));  // 1.5^0.5
  EXPECT_DOUBLE_EQ(PriorityMultiplier(0.5, 0, 10), 1.0);                // not queued: no surcharge
  EXPECT_DOUBLE_EQ(PriorityMultiplier(0.0, 7200, 10), 1.0);  // priority without coefficient
}

PriceList Prices() {
  PriceList prices;
  Status s = PriceList::Parse(
      "# test prices\n"
      "currency EUR\n"
      "burst_premium_per_gb 0.1\n"
      "priority_cap 4\n"
      "provider_share 0.8\n"
      "priority 2 1.0\n"
      "gpu 0.001 1.5 NVIDIA A100-SXM4-80GB   # per GPU ms, included GB/s, model\n"
      "default_gpu 0.0005 1\n",
      &prices);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return prices;
}

TEST(Billing, PriceListParses) {
  PriceList prices = Prices();
  EXPECT_EQ(prices.currency, "EUR");
  EXPECT_DOUBLE_EQ(prices.burst_premium_per_gb, 0.1);
  EXPECT_DOUBLE_EQ(prices.priority_cap, 4);
  EXPECT_DOUBLE_EQ(prices.provider_share, 0.8);
  EXPECT_DOUBLE_EQ(prices.CoefficientFor(2), 1.0);
  EXPECT_DOUBLE_EQ(prices.CoefficientFor(5), 0.0);
  EXPECT_DOUBLE_EQ(prices.PriceFor("NVIDIA A100-SXM4-80GB").unit_price_per_ms, 0.001);
  EXPECT_DOUBLE_EQ(prices.PriceFor("NVIDIA A100-SXM4-80GB").included_gbps, 1.5);
  EXPECT_DOUBLE_EQ(prices.PriceFor("rgpu softgpu").unit_price_per_ms, 0.0005);
}

// A bill without a start covers the current calendar month, ISO week (from Monday) or day, UTC.
TEST(Billing, BillingPeriodsStartAtTheMonthTheWeekOrTheDay) {
  const int64_t now = 1796302800;  // Thursday 2026-12-03T13:00:00Z
  EXPECT_EQ(PeriodStart(BillingPeriod::kMonthly, now), 1796083200);  // 2026-12-01
  EXPECT_EQ(PeriodStart(BillingPeriod::kWeekly, now), 1795996800);   // Monday 2026-11-30
  EXPECT_EQ(PeriodStart(BillingPeriod::kDaily, now), 1796256000);    // 2026-12-03
  // The first second of a period is its own start.
  EXPECT_EQ(PeriodStart(BillingPeriod::kMonthly, 1796083200), 1796083200);
  EXPECT_EQ(PeriodStart(BillingPeriod::kWeekly, 1795996800), 1795996800);
  EXPECT_EQ(PeriodStart(BillingPeriod::kMonthly, 1796083199), 1793491200);  // 2026-11-01
  PriceList prices;
  EXPECT_EQ(prices.billing_period, BillingPeriod::kMonthly);
  ASSERT_TRUE(PriceList::Parse("billing_period weekly\n", &prices).ok());
  EXPECT_EQ(prices.billing_period, BillingPeriod::kWeekly);
  ASSERT_TRUE(PriceList::Parse("billing_period daily\n", &prices).ok());
  EXPECT_EQ(prices.billing_period, BillingPeriod::kDaily);
  Status s = PriceList::Parse("billing_period yearly\n", &prices);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("line 1"), std::string::npos) << s.message();
}

TEST(Billing, BadPriceListsNameTheLine) {
  PriceList prices;
  Status s = PriceList::Parse("currency USD\ngpu 0.1\n", &prices);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s.message();
  s = PriceList::Parse("discount 5\n", &prices);
  EXPECT_NE(s.message().find("unknown setting 'discount'"), std::string::npos) << s.message();
  s = PriceList::Parse("burst_premium_per_gb -1\n", &prices);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  s = PriceList::Parse("provider_share 1.5\n", &prices);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  s = PriceList::Parse("priority_cap 2 3\n", &prices);
  EXPECT_NE(s.message().find("unexpected '3'"), std::string::npos) << s.message();
  s = PriceList::Parse("gpu 0.1 1\n", &prices);
  EXPECT_NE(s.message().find("model"), std::string::npos) << s.message();
  EXPECT_EQ(PriceList::Load("/nonexistent/prices", &prices).code(), Status::Code::kNotFound);
}

TEST(Billing, SessionLineItemizesEveryPart) {
  SessionUsage u;
  u.set_tenant("alice");
  u.set_model("NVIDIA A100-SXM4-80GB");
  u.set_gpu_ms(2000);  // 2 s
  u.set_bytes_in(6000000000);
  u.set_bytes_out(2000000000);  // 8 GB in 2 s = 4 GB/s
  u.set_priority(2);
  u.set_placement_queue_s(3600);
  InvoiceLine line = PriceSession(u, Prices());
  EXPECT_DOUBLE_EQ(line.base_fee(), 2.0);  // 2000 ms x 0.001
  EXPECT_DOUBLE_EQ(line.bandwidth_gbps(), 4.0);
  EXPECT_DOUBLE_EQ(line.burst_premium(), 0.5);        // (4 - 1.5) GB/s x 2 s x 0.1
  EXPECT_DOUBLE_EQ(line.priority_multiplier(), 2.0);  // (1 + 1.0)^(3600/3600)
  EXPECT_DOUBLE_EQ(line.priority_surcharge(), 2.0);   // 2.0 x (2 - 1)
  EXPECT_DOUBLE_EQ(line.total(), 4.5);

  Invoice invoice;
  *invoice.add_lines() = line;
  u.set_model("rgpu softgpu");  // default price: 0.0005 per ms, 1 GB/s included
  u.set_bytes_in(1000000000);
  u.set_bytes_out(0);  // 0.5 GB/s: no premium
  u.set_priority(0);
  *invoice.add_lines() = PriceSession(u, Prices());
  EXPECT_DOUBLE_EQ(invoice.lines(1).total(), 1.0);  // 2000 x 0.0005
  Total(Prices(), &invoice);
  EXPECT_DOUBLE_EQ(invoice.base_fee(), 3.0);
  EXPECT_DOUBLE_EQ(invoice.burst_premium(), 0.5);
  EXPECT_DOUBLE_EQ(invoice.priority_surcharge(), 2.0);
  EXPECT_DOUBLE_EQ(invoice.total(), 5.5);
  EXPECT_DOUBLE_EQ(invoice.earnings(), 4.4);  // 80%
  EXPECT_EQ(invoice.currency(), "EUR");
}

TEST(Billing, HeldTimeRunsFromTheGrantUntilTheFirstSessionOrTheEnd) {
  EXPECT_DOUBLE_EQ(HeldMs(1000, 3500, 9000), 2500);     // a session started 2.5 s after the grant
  EXPECT_DOUBLE_EQ(HeldMs(1000, 0, 61000), 60000);      // none started: held until it ended
  EXPECT_DOUBLE_EQ(HeldMs(1000, 90000, 61000), 60000);  // claimed after it ended: until its end
  EXPECT_DOUBLE_EQ(HeldMs(1000, 900, 5000), 0);  // a server clock behind: nothing, never negative
  EXPECT_DOUBLE_EQ(HeldMs(1000, 0, 1000), 0);
}

TEST(Billing, HoldFeeIsHeldMillisecondsTimesTheUnitPriceTimesTheHoldFraction) {
  EXPECT_DOUBLE_EQ(HoldFee(60000, 0.001, 0.5), 30.0);  // 60,000 ms x 0.001 x 0.5
  EXPECT_DOUBLE_EQ(HoldFee(60000, 0.001, 1.0), 60.0);  // default: holding costs what using does
  EXPECT_DOUBLE_EQ(HoldFee(60000, 0.001, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(HoldFee(-5, 0.001, 1.0), 0.0);
  PriceList prices = Prices();
  EXPECT_DOUBLE_EQ(prices.hold_fraction, 1.0);
  ASSERT_TRUE(PriceList::Parse("hold_fraction 0.25\ngpu 0.002 1 NVIDIA H100\n", &prices).ok());
  EXPECT_DOUBLE_EQ(prices.hold_fraction, 0.25);
  EXPECT_EQ(PriceList::Parse("hold_fraction -1\n", &prices).code(), Status::Code::kInvalidArgument);
  // A lease on an H100 held 90 s unused: 90,000 ms x 0.002 x 0.25 = 45.
  InvoiceLine line = PriceHold("lease-1", "alice", "acme", "host1", "NVIDIA H100", 90000, prices);
  EXPECT_EQ(line.lease_id(), "lease-1");
  EXPECT_EQ(line.session_id(), 0u);
  EXPECT_DOUBLE_EQ(line.held_ms(), 90000);
  EXPECT_DOUBLE_EQ(line.hold_price_per_ms(), 0.0005);
  EXPECT_DOUBLE_EQ(line.hold_fee(), 45.0);
  EXPECT_DOUBLE_EQ(line.total(), 45.0);
  EXPECT_DOUBLE_EQ(line.base_fee(), 0.0);
  // Holds add to the invoice's total and to the provider's earnings.
  Invoice invoice;
  *invoice.add_lines() = line;
  SessionUsage u;
  u.set_model("NVIDIA H100");
  u.set_gpu_ms(1000);
  *invoice.add_lines() = PriceSession(u, prices);  // 1000 x 0.002 = 2
  prices.provider_share = 0.8;
  Total(prices, &invoice);
  EXPECT_DOUBLE_EQ(invoice.hold_fee(), 45.0);
  EXPECT_DOUBLE_EQ(invoice.base_fee(), 2.0);
  EXPECT_DOUBLE_EQ(invoice.total(), 47.0);
  EXPECT_DOUBLE_EQ(invoice.earnings(), 37.6);
}

}  // namespace
}  // namespace rgpu::registry
