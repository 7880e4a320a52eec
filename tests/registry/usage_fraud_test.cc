// Billing fraud by a provider (issue 13, item 2): ReportUsage stores a record only when it names
// a lease the registry granted for the record's tenant on that GPU of the caller's server, lies
// inside the lease's interval, continues its session without overlapping it, and holds amounts
// the GPU could have produced (registry/usage_check.h). Everything else is refused, one record
// at a time, and the rest of the batch is still stored.
#include <cmath>
#include <limits>

#include "registry/usage_check.h"
#include "tests/registry/registry_fixture.h"

namespace rgpu::registry {
namespace {

class UsageFraudTest : public RegistryTest {
 protected:
  void SetUp() override {
    configure_ = [](RegistryOptions* o) {
      // 0.000001 per GPU ms: 30 days of one GPU cost 2,592.
      ASSERT_TRUE(PriceList::Parse("default_gpu 0.000001 1\nhold_fraction 0\n", &o->prices).ok());
      o->claim_timeout_ms = 0;  // these tests move the clock far; holds are tested elsewhere
    };
    RegistryTest::SetUp();
    provider_ = CreateKey(true, "acme");
    alice_ = CreateKey(false, "alice");
    RegisterReply reply;
    ASSERT_TRUE(Register(provider_, "host1", {Spec(0, 16 * G), Spec(1, 16 * G)}, &reply).ok());
    ASSERT_EQ(GpuState("host1/0"), "available");
    granted_ = now_;
    ASSERT_TRUE(Place(alice_, 2 * G, 50, 0, &lease_).ok());
    ASSERT_EQ(lease_.gpu_id(), "host1/0");
    now_ += 60'000;  // the session has run for a minute
  }
  // Reports one record; returns the refusal reason ("" when it was stored).
  std::string ReportOne(const UsageRecord& r) {
    ReportUsageReply ack;
    grpc::Status g = Report(provider_, {r}, &ack);
    EXPECT_TRUE(g.ok()) << g.error_message();
    if (ack.stored() == 1) return "";
    EXPECT_EQ(ack.refused(), 1u);
    return ack.refusals_size() ? ack.refusals(0).reason() : "?";
  }
  UsageRecord Good(const std::string& id) {
    return Record(id, "alice", lease_, granted_, granted_ + 1000, 10);
  }

  std::string provider_, alice_;
  Placement lease_;
  int64_t granted_ = 0;
  uint64_t next_session_ = 100;
};

TEST_F(UsageFraudTest, AFakeServerCannotBillATenantForAMonth) {
  // The attack from the issue: a provider registers a server at a URL where nothing listens and
  // reports 30 days of GPU time for a tenant that never used it.
  configure_ = [](RegistryOptions* o) {
    ASSERT_TRUE(PriceList::Parse("default_gpu 0.000001 1\nhold_fraction 0\n", &o->prices).ok());
    o->claim_timeout_ms = 0;
    o->probe = [](const std::string& url, const std::string& secret) {
      return ProbeReachability(url, secret, /*window_ms=*/0, /*attempt_ms=*/2000);
    };
  };
  Stop();
  Start();
  RegisterReply reply;
  ASSERT_TRUE(Register(provider_, "fake", {Spec(0, 80 * G)}, &reply, "tcp://127.0.0.1:1").ok());
  EXPECT_EQ(GpuState("fake/0"), "unreachable");
  const int64_t month = 30ll * 86400 * 1000;
  UsageRecord r;
  r.set_record_id("fake:1:1");
  r.set_server_name("fake");
  r.set_tenant("alice");
  r.set_session_id(1);
  r.set_start_ms(now_ - month);
  r.set_end_ms(now_);
  r.set_calls(1);
  r.set_session_ended(true);
  ReportUsageReply ack;
  ASSERT_TRUE(Report(provider_, {r}, &ack).ok());  // without a lease, as the attack sent it
  r.set_record_id("fake:1:2");
  r.set_lease_id("lease-0123456789abcdef");  // and naming a lease the registry never granted
  ReportUsageReply ack2;
  ASSERT_TRUE(Report(provider_, {r}, &ack2).ok());
  EXPECT_EQ(ack.stored() + ack2.stored(), 0u);
  EXPECT_EQ(ack.refused() + ack2.refused(), 2u) << Reasons(ack) << Reasons(ack2);
  EXPECT_NE(Reasons(ack2).find("granted no lease"), std::string::npos) << Reasons(ack2);
  EXPECT_DOUBLE_EQ(Bill("alice").total(), 0.0);  // not 2,592
}

TEST_F(UsageFraudTest, ARecordForATenantThatDoesNotExistIsRefused) {
  UsageRecord r = Good("r1");
  r.set_tenant("nobody");
  EXPECT_NE(ReportOne(r).find("no tenant named nobody"), std::string::npos);
  UsageQuery q;
  UsageReply usage;
  grpc::ClientContext ctx;
  Key(&ctx, "x-rgpu-admin-key", kAdminKey);
  ASSERT_TRUE(stub_->Usage(&ctx, q, &usage).ok());
  EXPECT_EQ(usage.sessions_size(), 0);
}

TEST_F(UsageFraudTest, ARecordMustUseItsOwnTenantsLeaseOnItsOwnGpu) {
  CreateKey(false, "bob");
  UsageRecord r = Good("r1");
  r.set_tenant("bob");  // bob is billed under alice's lease
  EXPECT_NE(ReportOne(r).find("is not tenant bob's"), std::string::npos);
  r = Good("r2");
  r.set_gpu_index(1);  // the lease is for GPU 0
  EXPECT_NE(ReportOne(r).find("is for GPU host1/0"), std::string::npos);
  // Another server of the same provider cannot bill under host1's lease.
  RegisterReply reply;
  ASSERT_TRUE(Register(provider_, "host2", {Spec(0, 16 * G)}, &reply).ok());
  r = Good("r3");
  r.set_server_name("host2");
  r.set_record_id("host2:r3");
  EXPECT_NE(ReportOne(r).find("is for GPU host1/0"), std::string::npos);
  // Another provider cannot bill under it at all.
  const std::string other = CreateKey(true, "other");
  ReportUsageReply ack;
  ASSERT_TRUE(Report(other, {Good("r4")}, &ack).ok());
  EXPECT_EQ(ack.refused(), 1u);
  EXPECT_EQ(ReportOne(Good("r5")), "");  // the honest record
}

TEST_F(UsageFraudTest, RecordsOutsideTheLeaseAreRefused) {
  const int64_t skew = UsageLimits().skew_ms;
  EXPECT_NE(ReportOne(Record("early", "alice", lease_, granted_ - skew - 1, granted_ + 10))
                .find("outside lease"),
            std::string::npos);
  EXPECT_NE(
      ReportOne(Record("future", "alice", lease_, granted_, now_ + skew + 1)).find("outside lease"),
      std::string::npos);
  EXPECT_EQ(ReportOne(Record("edge", "alice", lease_, granted_ - skew, granted_)), "");
  // The session ends: the lease ends, and nothing after its end is accepted.
  EXPECT_EQ(ReportOne(Record("end", "alice", lease_, granted_, now_, 1, true)), "");
  now_ += 3'600'000;
  EXPECT_NE(ReportOne(Record("after", "alice", lease_, now_ - 1000, now_, 1, false, 2))
                .find("outside lease"),
            std::string::npos);
  // Records of the ended lease's time are still accepted (delivered late).
  EXPECT_EQ(ReportOne(Record("late", "alice", lease_, granted_, granted_ + 500, 1, false, 3)), "");
}

TEST_F(UsageFraudTest, ImpossibleAmountsAreRefused) {
  // One second of wall time on a 25 GB/s GPU with a 2 GiB lease.
  auto second = [this](const std::string& id) {
    return Record(id, "alice", lease_, granted_, granted_ + 1000, 10, false, next_session_++);
  };
  UsageRecord r = second("busy");
  r.set_gpu_busy_ms(2000);  // two seconds of GPU time in one
  EXPECT_NE(ReportOne(r).find("exceeds the session's wall time"), std::string::npos);
  r = second("bytes");
  r.set_bytes_in(40'000'000'000ull);  // 40 GB in a second over 25 GB/s
  EXPECT_NE(ReportOne(r).find("exceed what its GPU's link carries"), std::string::npos);
  r = second("memory");
  r.set_memory_gib_seconds(10);  // 10 GiB-s in one second with a 2 GiB lease
  EXPECT_NE(ReportOne(r).find("GiB-s exceed the lease's memory"), std::string::npos);
  r = second("calls");
  r.set_calls(1'000'000'000ull);
  EXPECT_NE(ReportOne(r).find("beyond any forwarded-call rate"), std::string::npos);
  r = second("queue");
  r.set_queue_ms(5000);
  EXPECT_NE(ReportOne(r).find("queue time"), std::string::npos);
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(), -1.0}) {
    r = second("nan");
    r.set_gpu_busy_ms(bad);
    EXPECT_NE(ReportOne(r).find("finite and not negative"), std::string::npos) << bad;
  }
  r = second("kinds");
  (*r.mutable_calls_by_kind())["LaunchKernel"] = 11;  // more than its 10 calls
  EXPECT_NE(ReportOne(r).find("add up to more than the calls"), std::string::npos);
  r = second("kind-name");
  (*r.mutable_calls_by_kind())["a=1,b"] = 1;
  EXPECT_NE(ReportOne(r).find("identifier"), std::string::npos);
  r = second("backwards");
  r.set_start_ms(granted_ + 2000);
  EXPECT_NE(ReportOne(r).find("ends before it starts"), std::string::npos);
  r = second("huge");
  r.set_start_ms(std::numeric_limits<int64_t>::min());
  r.set_end_ms(std::numeric_limits<int64_t>::max());
  r.set_bytes_out(std::numeric_limits<uint64_t>::max());
  EXPECT_NE(ReportOne(r).find("outside lease"), std::string::npos);
  // What the GPU can do is accepted: 20 GB and 0.9 s of kernels in a second at 25 GB/s.
  r = second("possible");
  r.set_bytes_in(20'000'000'000ull);
  r.set_gpu_busy_ms(900);
  r.set_memory_gib_seconds(2);
  EXPECT_EQ(ReportOne(r), "");
}

TEST_F(UsageFraudTest, ATransferStraddlingRecordsIsAccepted) {
  // 30 GB in the session's second record, whose own interval is short: the session's totals
  // (2 s, 30 GB at 25 GB/s) are possible, so it is accepted.
  EXPECT_EQ(ReportOne(Record("a", "alice", lease_, granted_, granted_ + 1900)), "");
  UsageRecord r = Record("b", "alice", lease_, granted_ + 1900, granted_ + 2000);
  r.set_bytes_out(30'000'000'000ull);
  EXPECT_EQ(ReportOne(r), "");
}

TEST_F(UsageFraudTest, RepeatedIntervalsCannotMultiplyTheBill) {
  // The same minute again under new record ids, and under new session ids.
  EXPECT_EQ(ReportOne(Record("m1", "alice", lease_, granted_, granted_ + 60'000)), "");
  EXPECT_NE(ReportOne(Record("m2", "alice", lease_, granted_, granted_ + 60'000))
                .find("overlaps the session's earlier records"),
            std::string::npos);
  const uint32_t most = UsageLimits().max_sessions_per_lease;
  for (uint32_t session = 2; session <= most; ++session) {
    EXPECT_EQ(ReportOne(Record("s" + std::to_string(session), "alice", lease_, granted_,
                               granted_ + 60'000, 1, false, session)),
              "");
  }
  EXPECT_NE(
      ReportOne(Record("s-extra", "alice", lease_, granted_, granted_ + 60'000, 1, false, most + 1))
          .find("already bills"),
      std::string::npos);
  // The bill: at most max_sessions_per_lease x the lease's minute.
  EXPECT_NEAR(Bill("alice").total(), most * 60'000 * 0.000001, 1e-12);
}

// Records that tell nothing cannot fill the store: an empty interval inside a session (at its
// end, again and again: 110 records of 512 call kinds each per request were stored), and call
// kinds that count no calls. A session's first observation and its end may be empty.
TEST_F(UsageFraudTest, RecordsThatTellNothingAreRefused) {
  EXPECT_EQ(ReportOne(Record("open", "alice", lease_, granted_, granted_)), "");
  EXPECT_EQ(ReportOne(Record("run", "alice", lease_, granted_, granted_ + 1000)), "");
  for (int i = 0; i < 3; ++i) {
    EXPECT_NE(ReportOne(Record("empty" + std::to_string(i), "alice", lease_, granted_ + 1000,
                               granted_ + 1000, 0))
                  .find("empty interval"),
              std::string::npos);
  }
  UsageRecord kinds = Record("kinds", "alice", lease_, granted_ + 1000, granted_ + 2000, 0);
  for (int k = 0; k < 512; ++k) (*kinds.mutable_calls_by_kind())["Kind" + std::to_string(k)] = 0;
  EXPECT_NE(ReportOne(kinds).find("counts no calls"), std::string::npos);
  EXPECT_EQ(ReportOne(Record("close", "alice", lease_, granted_ + 1000, granted_ + 1000, 0, true)),
            "");
  // The end told again under new ids (each was stored, the store growing without bound), at
  // its instant and a millisecond later each time ...
  for (int i = 0; i < 3; ++i) {
    EXPECT_NE(ReportOne(Record("close" + std::to_string(i), "alice", lease_, granted_ + 1000 + i,
                               granted_ + 1000 + i, 0, true))
                  .find("reported ended"),
              std::string::npos);
  }
  // ... also after a restart (the registry keeps whether a session ended).
  Stop();
  Start();
  EXPECT_NE(ReportOne(Record("close3", "alice", lease_, granted_ + 1000, granted_ + 1000, 0, true))
                .find("reported ended"),
            std::string::npos);
}

// Record ids are one space for every provider, and a stored id is not stored again (a retry): a
// provider that reported its own session under the ids another provider's server would use next
// made that provider's records duplicates, never billed. An id must begin with its server's name.
TEST_F(UsageFraudTest, AProviderCannotTakeAnotherProvidersRecordIds) {
  const std::string other = CreateKey(true, "other");
  RegisterReply reply;
  ASSERT_TRUE(Register(other, "host9", {Spec(0, 80 * G)}, &reply).ok());
  service_->WaitForProbes();
  Placement there;  // too large for host1's GPUs
  ASSERT_TRUE(Place(alice_, 40 * G, 50, 0, &there).ok());
  ASSERT_EQ(there.server_name(), "host9");
  now_ += 1000;
  UsageRecord squat = Record("x", "alice", there, now_ - 1000, now_);
  squat.set_record_id("host1:boot:1");  // what acme's host1 sends next
  ReportUsageReply ack;
  ASSERT_TRUE(Report(other, {squat}, &ack).ok());
  EXPECT_EQ(ack.stored(), 0u);
  EXPECT_NE(Reasons(ack).find("must begin with its server's name"), std::string::npos)
      << Reasons(ack);
  EXPECT_EQ(ReportOne(Record("host1:boot:1", "alice", lease_, granted_, granted_ + 1000)), "");
}

// A GPU's model prices its usage (the price list is by model): registering it again as a dearer
// model while it holds leases would bill them at that model's price. Its model stays while it
// holds leases; once they end it may change.
TEST_F(UsageFraudTest, AGpuCannotChangeItsModelWhileItHoldsLeases) {
  GpuSpec dearer = Spec(0, 16 * G);
  dearer.set_model("NVIDIA H200");
  RegisterReply reply;
  ASSERT_TRUE(Register(provider_, "host1", {dearer, Spec(1, 16 * G)}, &reply).ok());
  ASSERT_EQ(reply.gpus_size(), 2);
  EXPECT_FALSE(reply.gpus(0).accepted());
  EXPECT_NE(reply.gpus(0).reason().find("holds leases"), std::string::npos)
      << reply.gpus(0).reason();
  EXPECT_TRUE(reply.gpus(1).accepted());  // no lease there
  EXPECT_EQ(Gpu("host1/0").spec().model(), "NVIDIA A100");
  // The lease ends with its session; then the GPU may register as what it is now.
  EXPECT_EQ(ReportOne(Record("end", "alice", lease_, granted_, granted_ + 1000, 1, true)), "");
  ASSERT_TRUE(Register(provider_, "host1", {dearer, Spec(1, 16 * G)}, &reply).ok());
  EXPECT_TRUE(reply.gpus(0).accepted()) << reply.gpus(0).reason();
  EXPECT_EQ(Gpu("host1/0").spec().model(), "NVIDIA H200");
}

TEST_F(UsageFraudTest, OneBadRecordDoesNotHoldUpTheBatch) {
  UsageRecord bad = Record("bad", "alice", lease_, granted_ + 1000, granted_ + 2000);
  bad.set_lease_id("lease-forged");
  ReportUsageReply ack;
  ASSERT_TRUE(Report(provider_, {Good("good"), bad}, &ack).ok());
  EXPECT_EQ(ack.stored(), 1u);
  ASSERT_EQ(ack.refused(), 1u);
  EXPECT_EQ(ack.refusals(0).record_id(), "host1:bad");
  // Sent again (the agent drops refused records; a retry of the batch changes nothing).
  ASSERT_TRUE(Report(provider_, {Good("good"), bad}, &ack).ok());
  EXPECT_EQ(ack.stored(), 0u);
  EXPECT_EQ(ack.duplicates(), 1u);
  EXPECT_EQ(ack.refused(), 1u);
}

TEST_F(UsageFraudTest, ASessionEndFreesTheLeaseItNames) {
  // Alice holds two leases on the same GPU; the session of the newer one ends. The registry
  // used to free the tenant's oldest lease on that GPU instead.
  Placement newer;
  // Half the compute: it fills GPU 0 exactly, where any policy puts it.
  ASSERT_TRUE(Place(alice_, G, 50, 0, &newer).ok());
  ASSERT_EQ(newer.gpu_id(), lease_.gpu_id());
  now_ += 1000;
  EXPECT_EQ(ReportOne(Record("end", "alice", newer, now_ - 1000, now_, 1, true)), "");
  EXPECT_EQ(Gpu("host1/0").leases(), 1u);
  EXPECT_EQ(Gpu("host1/0").share_committed(), 50u);  // the older lease's share is still held
  EXPECT_EQ(ReportOne(Record("older", "alice", lease_, now_ - 1000, now_, 1, false, 9)), "");
}

TEST(UsageCheck, TotalsSaturateInsteadOfOverflowing) {
  UsageRecord r;
  r.set_start_ms(std::numeric_limits<int64_t>::min());
  r.set_end_ms(std::numeric_limits<int64_t>::max());
  r.set_bytes_in(std::numeric_limits<uint64_t>::max());
  r.set_bytes_out(5);
  r.set_calls(std::numeric_limits<uint64_t>::max());
  SessionTotals t;
  AddToTotals(r, &t);
  AddToTotals(r, &t);
  EXPECT_EQ(t.bytes, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(t.calls, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(t.wall_ms, std::numeric_limits<int64_t>::max());
}

}  // namespace
}  // namespace rgpu::registry
