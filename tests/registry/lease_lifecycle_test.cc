// Leases from grant to end (issue 13, items 4 and 9): a placement needs a holder key its token
// binds; a placement under which no session starts ends after the claim timeout, and the time
// it held its GPU unused is billed; servers learn of ended leases from their heartbeats, so that
// their tokens die with them.
#include "tests/registry/registry_fixture.h"

namespace rgpu::registry {
namespace {

constexpr int64_t kClaimMs = 60'000;
constexpr double kUnitPrice = 0.001;  // per GPU ms (default_gpu)
constexpr double kHoldFraction = 0.5;

class LeaseTest : public RegistryTest {
 protected:
  void SetUp() override {
    configure_ = [](RegistryOptions* o) {
      o->claim_timeout_ms = kClaimMs;
      ASSERT_TRUE(PriceList::Parse("default_gpu 0.001 1\nhold_fraction 0.5\n", &o->prices).ok());
    };
    RegistryTest::SetUp();
    provider_ = CreateKey(true, "acme");
    alice_ = CreateKey(false, "alice");
    RegisterReply reply;
    ASSERT_TRUE(Register(provider_, "host1", {Spec(0, 16 * G)}, &reply).ok());
  }
  std::vector<std::string> EndedLeases(uint64_t* cursor = nullptr, std::string* epoch = nullptr,
                                       const std::string& server = "host1") {
    HeartbeatReply reply;
    grpc::Status g =
        Heartbeat(provider_, server, &reply, cursor ? *cursor : 0, epoch ? *epoch : "");
    EXPECT_TRUE(g.ok()) << g.error_message();
    if (cursor) *cursor = reply.ended_cursor();
    if (epoch) *epoch = reply.ended_epoch();
    return {reply.ended_leases().begin(), reply.ended_leases().end()};
  }
  // Alice's placement of 1 GiB and 25% for batch job `job`, lasting until released or not.
  grpc::Status PlaceFor(const std::string& job, bool until_released, Placement* p) {
    PlaceRequest req;
    req.set_memory_bytes(G);
    req.set_compute_share(25);
    req.set_job(job);
    req.set_until_released(until_released);
    std::string holder_private, holder_public;
    EXPECT_TRUE(GenerateEd25519(&holder_private, &holder_public).ok());
    req.set_holder_key(holder_public);
    return PlaceRequestAs(alice_, req, p);
  }
  std::string provider_, alice_;
};

TEST_F(LeaseTest, AnUnusedPlacementEndsAfterTheClaimTimeoutAndItsHoldIsBilled) {
  const int64_t granted = now_;
  Placement p;
  ASSERT_TRUE(Place(alice_, G, 100, 0, &p).ok());  // the whole GPU, program never connects
  EXPECT_EQ(p.claim_by_unix(), (granted + kClaimMs) / 1000);
  now_ += kClaimMs - 1;
  service_->Sweep();
  EXPECT_EQ(Gpu("host1/0").leases(), 1u);
  now_ += 1;
  service_->Sweep();
  EXPECT_EQ(Gpu("host1/0").leases(), 0u);           // not held until its one-hour lifetime
  ASSERT_TRUE(Heartbeat(provider_, "host1").ok());  // still online after the minute
  Placement next;                                   // the GPU is free again
  grpc::Status g = Place(alice_, G, 100, 0, &next);
  EXPECT_TRUE(g.ok()) << g.error_message();
  // The hold: 60,000 ms x 0.001 x 0.5 = 30.
  now_ += 1000;
  const Invoice bill = Bill("alice");
  const InvoiceLine* hold = nullptr;
  for (const auto& line : bill.lines()) {
    if (line.lease_id() == p.lease_id()) hold = &line;
  }
  ASSERT_NE(hold, nullptr);
  EXPECT_DOUBLE_EQ(hold->held_ms(), 60'000);
  EXPECT_DOUBLE_EQ(hold->hold_price_per_ms(), kUnitPrice * kHoldFraction);
  EXPECT_DOUBLE_EQ(hold->hold_fee(), 30.0);
  EXPECT_DOUBLE_EQ(hold->total(), 30.0);
  EXPECT_EQ(hold->session_id(), 0u);
  // The next lease has held its GPU for 1,000 ms so far: 0.5 more.
  EXPECT_DOUBLE_EQ(bill.hold_fee(), 30.5);
  EXPECT_DOUBLE_EQ(bill.total(), 30.5);
  // The provider earns from holds too (provider_share defaults to 1).
  UsageQuery q;
  Invoice earnings;
  grpc::ClientContext ctx;
  Key(&ctx, "x-rgpu-provider-key", provider_);
  ASSERT_TRUE(stub_->Earnings(&ctx, q, &earnings).ok());
  EXPECT_DOUBLE_EQ(earnings.earnings(), 30.5);
}

TEST_F(LeaseTest, AStartedSessionClaimsItsLeaseAndOnlyTheTimeBeforeItIsHeld) {
  const int64_t granted = now_;
  Placement p;
  ASSERT_TRUE(Place(alice_, G, 25, 0, &p).ok());
  now_ += 3000;
  ReportUsageReply ack;
  // The session started 2 s after the grant; its first record reaches the registry.
  ASSERT_TRUE(
      Report(provider_, {Record("r1", "alice", p, granted + 2000, granted + 3000)}, &ack).ok());
  ASSERT_EQ(ack.stored(), 1u) << Reasons(ack);
  now_ += 10 * kClaimMs;
  service_->Sweep();
  EXPECT_EQ(Gpu("host1/0").leases(), 1u);  // claimed: it lives to its lifetime
  // Claimed survives a restart.
  Stop();
  Start();
  now_ += 10 * kClaimMs;
  service_->Sweep();
  EXPECT_EQ(Gpu("host1/0").leases(), 1u);
  const Invoice bill = Bill("alice");
  ASSERT_EQ(bill.lines_size(), 2);
  EXPECT_DOUBLE_EQ(bill.base_fee(), 1000 * kUnitPrice);
  EXPECT_DOUBLE_EQ(bill.hold_fee(), 2000 * kUnitPrice * kHoldFraction);
  EXPECT_DOUBLE_EQ(bill.total(), 1.0 + 1.0);
}

// `rgpu bill` without --from (UsageQuery.current_period) covers the price list's current billing
// period (monthly by default): a session of January is not on February's bill, though it is on
// the whole history's.
TEST_F(LeaseTest, ABillWithoutAStartCoversTheCurrentBillingPeriod) {
  auto session_at = [&](int64_t unix_seconds, const char* record, uint64_t session) {
    now_ = unix_seconds * 1000;
    ASSERT_TRUE(Heartbeat(provider_, "host1").ok());
    Placement p;
    ASSERT_TRUE(Place(alice_, G, 25, 0, &p).ok());
    ReportUsageReply ack;
    ASSERT_TRUE(
        Report(provider_, {Record(record, "alice", p, now_, now_ + 1000, 1, true, session)}, &ack)
            .ok());
    ASSERT_EQ(ack.stored(), 1u) << Reasons(ack);
    now_ += 2000;
  };
  session_at(1801436400, "january", 1);   // 2027-01-31T23:00:00Z
  session_at(1801562400, "february", 2);  // 2027-02-02T10:00:00Z
  UsageQuery q;
  q.set_tenant("alice");
  q.set_current_period(true);
  Invoice bill;
  grpc::ClientContext ctx;
  Key(&ctx, "x-rgpu-admin-key", kAdminKey);
  ASSERT_TRUE(stub_->Bill(&ctx, q, &bill).ok());
  EXPECT_EQ(bill.from_unix(), 1801440000);  // 2027-02-01T00:00:00Z
  EXPECT_EQ(bill.period(), "monthly");
  ASSERT_EQ(bill.lines_size(), 1);
  EXPECT_EQ(bill.lines(0).session_id(), 2u);
  EXPECT_DOUBLE_EQ(bill.total(), 1000 * kUnitPrice);
  const Invoice history = Bill("alice");  // from 1970
  EXPECT_EQ(history.lines_size(), 2);
  EXPECT_EQ(history.period(), "");
  EXPECT_DOUBLE_EQ(history.total(), 2000 * kUnitPrice);
}

// A tenant ends its own lease early (a batch job that ended): the GPU is free at once, servers
// learn of the end at their next heartbeat, the hold is billed up to the release and no further;
// another tenant cannot end it, nor learn that it exists.
TEST_F(LeaseTest, ATenantReleasesItsOwnLeaseAndNoOtherCan) {
  auto release = [&](const std::string& key, const std::string& lease) {
    Empty empty;
    ReleaseLeaseRequest request;
    request.set_lease_id(lease);
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-api-key", key);
    return stub_->ReleaseLease(&ctx, request, &empty);
  };
  const std::string bob = CreateKey(false, "bob");
  Placement p;
  ASSERT_TRUE(Place(alice_, G, 100, 0, &p).ok());
  EXPECT_EQ(Gpu("host1/0").leases(), 1u);
  now_ += 4000;
  grpc::Status g = release(bob, p.lease_id());
  EXPECT_EQ(g.error_code(), grpc::StatusCode::NOT_FOUND) << g.error_message();
  EXPECT_EQ(Gpu("host1/0").leases(), 1u);
  g = release(alice_, p.lease_id());
  ASSERT_TRUE(g.ok()) << g.error_message();
  EXPECT_EQ(Gpu("host1/0").leases(), 0u);
  const std::vector<std::string> ended = EndedLeases();
  EXPECT_NE(std::find(ended.begin(), ended.end(), p.lease_id()), ended.end());
  EXPECT_EQ(release(alice_, p.lease_id()).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(release(alice_, "lease-nonexistent").error_code(), grpc::StatusCode::NOT_FOUND);
  // Held unused for 4 s until the release, not for its hour.
  now_ += 60'000;
  const Invoice bill = Bill("alice");
  EXPECT_DOUBLE_EQ(bill.hold_fee(), 4000 * kUnitPrice * kHoldFraction);
  Placement next;  // the whole GPU is free again
  EXPECT_TRUE(Place(alice_, G, 100, 0, &next).ok());
}

// A placement names the batch job it serves (a Slurm job, PlaceRequest.job): the lease keeps it
// across a restart, its sessions' usage and bill lines and its hold show it, and a bill or usage
// query for one job holds only that job's lines. A name a table or a log would misread is refused.
TEST_F(LeaseTest, APlacementsJobIsOnItsUsageAndBillLines) {
  auto place_for = [&](const std::string& job, Placement* p) { return PlaceFor(job, false, p); };
  Placement job7, job8, plain;
  ASSERT_TRUE(place_for("slurm:lab:7", &job7).ok());
  ASSERT_TRUE(place_for("slurm:lab:8", &job8).ok());
  ASSERT_TRUE(place_for("", &plain).ok());
  for (const std::string& bad : {std::string("slurm:lab 9"), std::string("job\n"),
                                 std::string(129, 'j'), std::string("caf\xc3\xa9")}) {
    Placement refused;
    EXPECT_EQ(place_for(bad, &refused).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  now_ += 1000;
  ReportUsageReply ack;
  ASSERT_TRUE(Report(provider_,
                     {Record("a", "alice", job7, now_ - 500, now_, 3, true, 1),
                      Record("b", "alice", plain, now_ - 500, now_, 2, true, 2)},
                     &ack)
                  .ok());
  ASSERT_EQ(ack.stored(), 2u) << Reasons(ack);
  Stop();  // the job is stored with the lease
  Start();
  now_ += 1000;
  auto bill_for = [&](const std::string& job) {
    UsageQuery q;
    q.set_tenant("alice");
    q.set_job(job);
    Invoice invoice;
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-api-key", alice_);
    EXPECT_TRUE(stub_->Bill(&ctx, q, &invoice).ok());
    return invoice;
  };
  const Invoice all = bill_for("");
  int with_job7 = 0, with_job8 = 0, without = 0;
  for (const auto& line : all.lines()) {
    with_job7 += line.job() == "slurm:lab:7";
    with_job8 += line.job() == "slurm:lab:8";
    without += line.job().empty();
  }
  EXPECT_EQ(with_job7, 2);  // its session and the 1 s its lease held the GPU before it
  EXPECT_EQ(with_job8, 1);  // a hold only: no session started under it
  EXPECT_EQ(without, 2);
  const Invoice seven = bill_for("slurm:lab:7");
  ASSERT_EQ(seven.lines_size(), 2);
  for (const auto& line : seven.lines()) EXPECT_EQ(line.job(), "slurm:lab:7");
  EXPECT_GT(seven.total(), 0);
  EXPECT_LT(seven.total(), all.total());
  UsageQuery q;
  q.set_job("slurm:lab:7");
  UsageReply usage;
  grpc::ClientContext ctx;
  Key(&ctx, "x-rgpu-api-key", alice_);
  ASSERT_TRUE(stub_->Usage(&ctx, q, &usage).ok());
  ASSERT_EQ(usage.sessions_size(), 1);
  EXPECT_EQ(usage.sessions(0).job(), "slurm:lab:7");
  EXPECT_EQ(usage.sessions(0).calls(), 3u);
  EXPECT_EQ(bill_for("slurm:lab:nothing").lines_size(), 0);
}

// A batch job's lease (PlaceRequest.until_released, what rgpu place asks for) outlives its
// sessions: a task's program ends and the next one runs under the same lease and token, across a
// registry restart, until the tenant releases it; a plain lease ends with its session.
TEST_F(LeaseTest, ALeaseUntilReleasedOutlivesItsSessions) {
  auto place = [&](bool until_released, Placement* p) { return PlaceFor("", until_released, p); };
  Placement job, plain;
  ASSERT_TRUE(place(true, &job).ok());
  ASSERT_TRUE(place(false, &plain).ok());
  now_ += 1000;
  ReportUsageReply ack;
  ASSERT_TRUE(Report(provider_,
                     {Record("j1", "alice", job, now_ - 500, now_, 1, true, 1),
                      Record("p1", "alice", plain, now_ - 500, now_, 1, true, 2)},
                     &ack)
                  .ok());
  ASSERT_EQ(ack.stored(), 2u) << Reasons(ack);
  EXPECT_EQ(Gpu("host1/0").leases(), 1u);  // the plain lease ended with its session
  std::vector<std::string> ended = EndedLeases();
  EXPECT_EQ(std::find(ended.begin(), ended.end(), job.lease_id()), ended.end());
  EXPECT_NE(std::find(ended.begin(), ended.end(), plain.lease_id()), ended.end());
  Stop();
  Start();
  now_ += 10 * kClaimMs;
  service_->Sweep();
  ASSERT_TRUE(
      Report(provider_, {Record("j2", "alice", job, now_ - 500, now_, 1, true, 3)}, &ack).ok());
  ASSERT_EQ(ack.stored(), 1u) << Reasons(ack);  // a second program under the same lease
  EXPECT_EQ(Gpu("host1/0").leases(), 1u);
  Empty empty;
  ReleaseLeaseRequest release;
  release.set_lease_id(job.lease_id());
  grpc::ClientContext ctx;
  Key(&ctx, "x-rgpu-api-key", alice_);
  ASSERT_TRUE(stub_->ReleaseLease(&ctx, release, &empty).ok());
  EXPECT_EQ(Gpu("host1/0").leases(), 0u);
  ended = EndedLeases();
  EXPECT_NE(std::find(ended.begin(), ended.end(), job.lease_id()), ended.end());
}

TEST_F(LeaseTest, TheClaimTimeoutCountsFromARestartAtTheEarliest) {
  Placement p;
  ASSERT_TRUE(Place(alice_, G, 25, 0, &p).ok());
  now_ += kClaimMs / 2;
  Stop();
  now_ += kClaimMs;  // the registry was down longer than the claim timeout
  Start();
  service_->Sweep();
  EXPECT_EQ(Gpu("host1/0").leases(), 1u);  // the server had no chance to report a session yet
  now_ += kClaimMs;
  service_->Sweep();
  EXPECT_EQ(Gpu("host1/0").leases(), 0u);
}

TEST_F(LeaseTest, ServersLearnOfEndedLeasesFromTheirHeartbeats) {
  Placement used, unused, alive;
  ASSERT_TRUE(Place(alice_, G, 25, 0, &used).ok());
  ASSERT_TRUE(Place(alice_, G, 25, 0, &unused).ok());
  now_ += 1000;
  ASSERT_TRUE(Place(alice_, G, 25, 0, &alive).ok());
  ReportUsageReply ack;
  ASSERT_TRUE(Report(provider_,
                     {Record("r1", "alice", used, now_ - 1000, now_, 1, true),
                      Record("r2", "alice", alive, now_, now_)},
                     &ack)
                  .ok());
  ASSERT_EQ(ack.stored(), 2u) << Reasons(ack);
  now_ += kClaimMs;
  service_->Sweep();  // `unused` ends unclaimed
  uint64_t cursor = 0;
  std::string epoch;
  std::vector<std::string> ended = EndedLeases(&cursor, &epoch);
  std::sort(ended.begin(), ended.end());
  std::vector<std::string> expected = {used.lease_id(), unused.lease_id()};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ended, expected);
  // Read from its cursor, nothing is new; another server never sees them.
  EXPECT_TRUE(EndedLeases(&cursor, &epoch).empty());
  RegisterReply reply;
  ASSERT_TRUE(Register(provider_, "host2", {Spec(0, 16 * G)}, &reply).ok());
  EXPECT_TRUE(EndedLeases(nullptr, nullptr, "host2").empty());
  // A restarted registry starts a new log: the server hears of them again.
  Stop();
  Start();
  ended = EndedLeases(&cursor, &epoch);
  std::sort(ended.begin(), ended.end());
  EXPECT_EQ(ended, expected);
  // Once their tokens have expired (an hour), the server needs no telling.
  now_ += 3'600'000;
  service_->Sweep();  // `alive` expires now too, and with it its token
  EXPECT_TRUE(EndedLeases().empty());
}

TEST_F(LeaseTest, APlacementNeedsAHolderKeyAndItsTokenBindsIt) {
  PlaceRequest req;
  req.set_memory_bytes(G);
  Placement p;
  grpc::Status g = PlaceRequestAs(alice_, req, &p);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(g.error_message().find("holder"), std::string::npos) << g.error_message();
  req.set_holder_key(std::string(31, 'k'));
  EXPECT_EQ(PlaceRequestAs(alice_, req, &p).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  std::string holder_private, holder_public;
  ASSERT_TRUE(GenerateEd25519(&holder_private, &holder_public).ok());
  req.set_holder_key(holder_public);
  req.set_ttl_seconds(600);
  ASSERT_TRUE(PlaceRequestAs(alice_, req, &p).ok());
  TokenVerifier verifier;
  ASSERT_TRUE(TokenVerifier::FromPublicKeyFile(dir_ + "/key.pub", &verifier).ok());
  wire::TokenClaims claims;
  ASSERT_TRUE(verifier.Verify(p.token(), &claims).ok());
  EXPECT_EQ(claims.holder_key(), holder_public);
  EXPECT_EQ(claims.lease_id(), p.lease_id());
  // The token's default lifetime is its lease's: Place's ttl sets both.
  EXPECT_EQ(claims.expires_unix(), now_.load() / 1000 + 600);
  EXPECT_EQ(p.expires_unix(), claims.expires_unix());
}

}  // namespace
}  // namespace rgpu::registry
