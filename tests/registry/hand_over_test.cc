// A lease follows its session to another server (registry/lease_hand_over.cc,
// docs/migration.md "Metering"): only its holder hands it over, only to a registered server with
// room, and only its holder's last record of the session completes it; the target's records are
// billed from then (before: "not yet"), the old holder's only up to the move, each provider
// earns its part, and a hand-over that does not happen gives its room back.
#include <map>
#include <set>

#include "tests/registry/registry_fixture.h"

namespace rgpu::registry {
namespace {

class HandOverTest : public RegistryTest {
 protected:
  void SetUp() override {
    RegistryTest::SetUp();
    acme_ = CreateKey(true, "acme");
    bolt_ = CreateKey(true, "bolt");
    alice_ = CreateKey(false, "alice");
    RegisterReply reply;
    ASSERT_TRUE(Register(acme_, "host-a", {Spec(0, 16 * G)}, &reply).ok());
    ASSERT_TRUE(Place(alice_, 8 * G, 50, 0, &p_).ok());
    ASSERT_EQ(p_.gpu_id(), "host-a/0");
    // Registered after the placement, so that the lease is on host-a; its second GPU is full.
    ASSERT_TRUE(Register(bolt_, "host-b", {Spec(0, 4 * G), Spec(1, 16 * G)}, &reply).ok());
    start_ = now_;
  }
  grpc::Status HandOver(const std::string& key, const std::string& to, HandOverReply* reply,
                        const std::string& lease = "") {
    HandOverRequest req;
    req.set_lease_id(lease.empty() ? p_.lease_id() : lease);
    req.set_to_server(to);
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-provider-key", key);
    return stub_->HandOverLease(&ctx, req, reply);
  }
  grpc::Status Cancel(const std::string& key) {
    HandOverRequest req;
    req.set_lease_id(p_.lease_id());
    Empty reply;
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-provider-key", key);
    return stub_->CancelHandOver(&ctx, req, &reply);
  }
  // A record of alice's session `session` on `server`'s GPU `index` under the lease.
  UsageRecord On(const std::string& id, const std::string& server, uint32_t index, uint64_t session,
                 int64_t start, int64_t end, bool moved = false, bool ended = false) {
    UsageRecord r = Record(id, "alice", p_, start, end, 10, ended, session);
    r.set_server_name(server);
    r.set_record_id(server + ":" + id);
    r.set_gpu_index(index);
    r.set_moved(moved);
    return r;
  }
  // Stored (1) or refused (0), with the refusal's reason in `why`.
  uint32_t Stored(const std::string& key, const UsageRecord& r, std::string* why = nullptr) {
    ReportUsageReply ack;
    EXPECT_TRUE(Report(key, {r}, &ack).ok());
    if (why != nullptr) *why = Reasons(ack);
    return ack.stored();
  }

  std::string acme_, bolt_, alice_;
  Placement p_;
  int64_t start_ = 0;
};

TEST_F(HandOverTest, TheLeaseFollowsItsSessionAndEachProviderBillsItsPart) {
  now_ += 1000;
  ASSERT_EQ(Stored(acme_, On("a1", "host-a", 0, 1, start_, start_ + 1000)), 1u);
  HandOverReply h;
  // Only the holder hands it over, only to a registered server with room.
  EXPECT_EQ(HandOver(bolt_, "host-b", &h).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(HandOver(acme_, "nowhere", &h).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(HandOver(acme_, "host-a", &h).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Before any hand-over the target bills nothing.
  std::string why;
  EXPECT_EQ(Stored(bolt_, On("b0", "host-b", 1, 7, start_ + 1000, start_ + 1000), &why), 0u);
  EXPECT_NE(why.find("is for GPU host-a/0"), std::string::npos) << why;

  grpc::Status g = HandOver(acme_, "host-b", &h);
  ASSERT_TRUE(g.ok()) << g.error_message();
  EXPECT_EQ(h.gpu_id(), "host-b/1");  // GPU 0 lacks the room
  // The token: the lease's, for host-b's GPU 1, a hand-over that no client can use.
  const wire::TokenClaims claims = Claims(h.token());
  EXPECT_TRUE(claims.hand_over());
  EXPECT_EQ(claims.server(), "host-b");
  EXPECT_EQ(claims.lease_id(), p_.lease_id());
  EXPECT_EQ(claims.tenant(), "alice");
  ASSERT_EQ(claims.gpus_size(), 1);
  EXPECT_EQ(claims.gpus(0), 1u);
  EXPECT_EQ(claims.memory_quota(), 8 * G);
  EXPECT_TRUE(claims.holder_key().empty());
  // The target that has the session cannot pass the lease on before it holds it: "not yet".
  HandOverReply early;
  EXPECT_EQ(HandOver(bolt_, "host-a", &early).error_code(), grpc::StatusCode::ABORTED);
  // The target's room is held while the lease is moving; the source's is still taken.
  EXPECT_EQ(Gpu("host-b/1").memory_committed(), 8 * G);
  EXPECT_EQ(Gpu("host-a/0").memory_committed(), 8 * G);

  // The target's records wait ("not yet", to be sent again) until the source's last record says
  // the session left; that record completes the hand-over.
  now_ += 2000;
  ReportUsageReply ack;
  ASSERT_TRUE(Report(bolt_, {On("b1", "host-b", 1, 7, start_ + 1600, start_ + 3000)}, &ack).ok());
  ASSERT_EQ(ack.refusals_size(), 1);
  EXPECT_TRUE(ack.refusals(0).retry()) << Reasons(ack);
  EXPECT_EQ(Gpu("host-a/0").memory_committed(), 8 * G);
  ASSERT_EQ(Stored(acme_, On("a2", "host-a", 0, 1, start_ + 1000, start_ + 1500, true), &why), 1u)
      << why;
  EXPECT_EQ(Gpu("host-a/0").memory_committed(), 0u);
  EXPECT_EQ(Gpu("host-b/1").memory_committed(), 8 * G);
  ASSERT_EQ(Stored(bolt_, On("b1", "host-b", 1, 7, start_ + 1600, start_ + 3000), &why), 1u) << why;
  // The source bills nothing after the move, whatever it claims.
  now_ += 20000;
  EXPECT_EQ(Stored(acme_, On("a3", "host-a", 0, 1, start_ + 1500, start_ + 20000), &why), 0u);
  EXPECT_NE(why.find("left GPU host-a/0"), std::string::npos) << why;
  // A restart keeps where the lease is.
  Stop();
  Start();
  EXPECT_EQ(Stored(acme_, On("a4", "host-a", 0, 1, start_ + 1500, start_ + 20000)), 0u);
  ASSERT_EQ(
      Stored(bolt_, On("b2", "host-b", 1, 7, start_ + 3000, start_ + 4000, false, true), &why), 1u)
      << why;
  // The session's end on the target ends the lease there: host-b's room is free again.
  EXPECT_EQ(Gpu("host-b/1").memory_committed(), 0u);

  // Each provider is paid for its part: acme's session on host-a (two records), bolt's on
  // host-b (two records), both under alice's one lease.
  const UsageReply usage = UsageOf("alice");
  std::map<std::string, uint64_t> calls_by_provider;
  for (const auto& s : usage.sessions())
    calls_by_provider[s.provider() + "@" + s.server_name()] += s.calls();
  EXPECT_EQ(calls_by_provider,
            (std::map<std::string, uint64_t>{{"acme@host-a", 20}, {"bolt@host-b", 20}}));
  const Invoice bill = Bill("alice");
  std::set<std::string> paid;
  for (const auto& line : bill.lines()) {
    if (line.session_id() != 0 && line.total() > 0) paid.insert(line.provider());
  }
  EXPECT_EQ(paid, (std::set<std::string>{"acme", "bolt"}));
}

// The holder a lease left may still bill what ran there before the move, but a session it says
// ended there does not end the lease where it is now (it ended the tenant's moved session).
TEST_F(HandOverTest, AnEarlierHolderCannotEndTheLease) {
  now_ += 1000;
  ASSERT_EQ(Stored(acme_, On("a1", "host-a", 0, 1, start_, start_ + 1000)), 1u);
  HandOverReply h;
  ASSERT_TRUE(HandOver(acme_, "host-b", &h).ok());
  now_ += 1000;
  std::string why;
  ASSERT_EQ(Stored(acme_, On("a2", "host-a", 0, 1, start_ + 1000, start_ + 1500, true), &why), 1u)
      << why;
  ASSERT_EQ(Gpu("host-b/1").memory_committed(), 8 * G);
  // A session of its own on host-a, "ended", within the time the lease was there.
  Stored(acme_, On("a3", "host-a", 0, 2, start_ + 1200, start_ + 1400, false, true), &why);
  EXPECT_EQ(Gpu("host-b/1").memory_committed(), 8 * G) << "the lease was ended from host-a";
  EXPECT_EQ(Gpu("host-b/1").leases(), 1u);
  // Its holder's record of the session's end does end it.
  now_ += 1000;
  ASSERT_EQ(
      Stored(bolt_, On("b1", "host-b", 1, 7, start_ + 1600, start_ + 3000, false, true), &why), 1u)
      << why;
  EXPECT_EQ(Gpu("host-b/1").memory_committed(), 0u);
}

// A holder that hands its lease to another provider's GPU and completes the hand-over with its
// own "moved" record, with no session ever arriving there, held that GPU for the lease's
// lifetime. The new holder must report the session within the claim timeout, as a new
// placement must.
class PhantomHandOverTest : public HandOverTest {
 protected:
  static constexpr int64_t kClaimMs = 60000;
  void SetUp() override {
    configure_ = [](RegistryOptions* o) { o->claim_timeout_ms = kClaimMs; };
    HandOverTest::SetUp();
  }
  // Hands the lease to host-b and completes the hand-over from host-a.
  void MoveToB() {
    now_ += 1000;
    ASSERT_EQ(Stored(acme_, On("a1", "host-a", 0, 1, start_, start_ + 1000)), 1u);
    HandOverReply h;
    ASSERT_TRUE(HandOver(acme_, "host-b", &h).ok());
    std::string why;
    ASSERT_EQ(Stored(acme_, On("a2", "host-a", 0, 1, start_ + 1000, start_ + 1500, true), &why), 1u)
        << why;
    ASSERT_EQ(Gpu("host-b/1").memory_committed(), 8 * G);
  }
};

TEST_F(PhantomHandOverTest, APhantomHandOverEndsAtTheClaimTimeoutOnItsTarget) {
  MoveToB();
  now_ += kClaimMs - 1000;
  service_->Sweep();
  EXPECT_EQ(Gpu("host-b/1").memory_committed(), 8 * G);
  now_ += 2000;
  service_->Sweep();
  EXPECT_EQ(Gpu("host-b/1").memory_committed(), 0u) << "host-b is still held for no session";
  EXPECT_EQ(Gpu("host-b/1").leases(), 0u);
}

TEST_F(PhantomHandOverTest, ASessionThatArrivedKeepsItsLease) {
  MoveToB();
  now_ += 1000;
  std::string why;
  ASSERT_EQ(Stored(bolt_, On("b1", "host-b", 1, 7, start_ + 1600, start_ + 2500), &why), 1u) << why;
  now_ += 2 * kClaimMs;
  service_->Sweep();
  EXPECT_EQ(Gpu("host-b/1").memory_committed(), 8 * G);
}

// Whether a hand-over's session reached its new holder is kept across a registry restart: a
// phantom one still ends at the claim timeout (counted from the restart at the earliest), and a
// session that arrived keeps its lease.
TEST_F(PhantomHandOverTest, WhatAHandOverAwaitsOutlivesARegistryRestart) {
  MoveToB();
  Stop();
  Start();
  now_ += kClaimMs + 1000;
  service_->Sweep();
  EXPECT_EQ(Gpu("host-b/1").memory_committed(), 0u) << "host-b is still held for no session";
}

TEST_F(PhantomHandOverTest, ASessionThatArrivedKeepsItsLeaseAcrossARestart) {
  MoveToB();
  now_ += 1000;
  std::string why;
  ASSERT_EQ(Stored(bolt_, On("b1", "host-b", 1, 7, start_ + 1600, start_ + 2500), &why), 1u) << why;
  Stop();
  Start();
  now_ += 2 * kClaimMs;
  ASSERT_TRUE(Heartbeat(bolt_, "host-b").ok());
  service_->Sweep();
  EXPECT_EQ(Gpu("host-b/1").memory_committed(), 8 * G);
}

// A holder that hands its lease to another provider's GPU again and again without moving the
// session held room there for two minutes each time, for the lease's lifetime. After three
// hand-overs dropped within an hour of each other it may not begin another for an hour (across
// a restart too).
TEST_F(HandOverTest, AHolderCannotKeepHandingOverALeaseItDoesNotMove) {
  now_ += 1000;
  ASSERT_EQ(Stored(acme_, On("a1", "host-a", 0, 1, start_, start_ + 1000)), 1u);  // its session
  HandOverReply h;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(HandOver(acme_, "host-b", &h).ok()) << i;
    if (i == 1) {
      now_ += 121000;  // one lapses
      ASSERT_TRUE(Heartbeat(acme_, "host-a").ok());
      ASSERT_TRUE(Heartbeat(bolt_, "host-b").ok());
      service_->Sweep();
    } else {
      ASSERT_TRUE(Cancel(acme_).ok());  // the others are taken back
    }
    EXPECT_EQ(Gpu("host-b/1").memory_committed(), 0u);
    now_ += 1000;
  }
  grpc::Status g = HandOver(acme_, "host-b", &h);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(g.error_message().find("did not complete"), std::string::npos) << g.error_message();
  EXPECT_EQ(Gpu("host-b/1").memory_committed(), 0u);
  Stop();
  Start();
  EXPECT_EQ(HandOver(acme_, "host-b", &h).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  // A lease that lives longer (of another tenant's placement, on either server) may hand over
  // again an hour after its last drop.
  ASSERT_TRUE(Heartbeat(acme_, "host-a").ok());
  ASSERT_TRUE(Heartbeat(bolt_, "host-b").ok());
  const std::string carol = CreateKey(false, "carol");
  Placement q;
  grpc::Status placed = Place(carol, 2 * G, 25, 0, &q, nullptr, 0, nullptr, /*ttl=*/4 * 3600);
  ASSERT_TRUE(placed.ok()) << placed.error_message();
  const bool on_a = q.server_name() == "host-a";
  const std::string& holder = on_a ? acme_ : bolt_;
  const std::string to = on_a ? "host-b" : "host-a";
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(HandOver(holder, to, &h, q.lease_id()).ok()) << i;
    HandOverRequest req;
    req.set_lease_id(q.lease_id());
    Empty empty;
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-provider-key", holder);
    ASSERT_TRUE(stub_->CancelHandOver(&ctx, req, &empty).ok());
  }
  EXPECT_EQ(HandOver(holder, to, &h, q.lease_id()).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  now_ += 3600 * 1000;
  ASSERT_TRUE(Heartbeat(acme_, "host-a").ok());
  ASSERT_TRUE(Heartbeat(bolt_, "host-b").ok());
  EXPECT_TRUE(HandOver(holder, to, &h, q.lease_id()).ok());
}

TEST_F(HandOverTest, AHandOverThatDoesNotHappenGivesItsRoomBack) {
  HandOverReply h;
  ASSERT_TRUE(HandOver(acme_, "host-b", &h).ok());
  EXPECT_EQ(Gpu("host-b/1").memory_committed(), 8 * G);
  // A target that saw the hand-over (a restore it refused) cannot take the lease by reporting
  // usage under it: not yet, and the lease stays where it is.
  now_ += 1000;
  ReportUsageReply ack;
  ASSERT_TRUE(Report(bolt_, {On("b0", "host-b", 1, 7, start_, start_ + 900)}, &ack).ok());
  EXPECT_EQ(ack.stored(), 0u);
  ASSERT_EQ(ack.refusals_size(), 1);
  EXPECT_TRUE(ack.refusals(0).retry());
  EXPECT_EQ(Gpu("host-a/0").memory_committed(), 8 * G);
  // The migration failed: the holder takes it back; the target bills nothing.
  ASSERT_TRUE(Cancel(acme_).ok());
  EXPECT_EQ(Gpu("host-b/1").memory_committed(), 0u);
  now_ += 2000;
  std::string why;
  ASSERT_TRUE(Report(bolt_, {On("b1", "host-b", 1, 7, start_ + 100, start_ + 1000)}, &ack).ok());
  EXPECT_EQ(ack.stored(), 0u);
  ASSERT_EQ(ack.refusals_size(), 1);
  EXPECT_FALSE(ack.refusals(0).retry()) << Reasons(ack);  // never, now
  EXPECT_EQ(Stored(acme_, On("a1", "host-a", 0, 1, start_, start_ + 2000), &why), 1u) << why;
  // Nobody completes it: it lapses after two minutes.
  ASSERT_TRUE(HandOver(acme_, "host-b", &h).ok());
  EXPECT_EQ(Gpu("host-b/1").memory_committed(), 8 * G);
  now_ += 121000;
  ASSERT_TRUE(Heartbeat(acme_, "host-a").ok());
  ASSERT_TRUE(Heartbeat(bolt_, "host-b").ok());
  service_->Sweep();
  EXPECT_EQ(Gpu("host-b/1").memory_committed(), 0u);
  EXPECT_EQ(Gpu("host-a/0").memory_committed(), 8 * G);
  EXPECT_EQ(Stored(bolt_, On("b2", "host-b", 1, 7, start_ + 2000, start_ + 3000)), 0u);
  // A target without room anywhere refuses it.
  Placement big;
  ASSERT_TRUE(Place(alice_, 12 * G, 25, 0, &big).ok());
  ASSERT_EQ(big.gpu_id(), "host-b/1");
  EXPECT_EQ(HandOver(acme_, "host-b", &h).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

}  // namespace
}  // namespace rgpu::registry
