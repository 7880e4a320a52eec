// Capacity over time (issue 19), through the service over gRPC with a clock the test moves
// (registry_fixture.h): lendable windows (placed only inside them, across midnight, in the
// provider's zone; a closing window ends a lease after its notice, with the reason kept and the
// bill stopped there), preemption (only where the price list allows it, only of lower
// priorities, after notice, with truthful queue positions) and reservations (capacity held, a
// conflicting placement refused or placed elsewhere, billed per the price list, cancelled).
// The registry trusts neither side: hostile windows, offsets, notices, reservation fields and
// priorities are refused, and a provider cannot cut a promised notice short.
#include <cmath>
#include <mutex>
#include <thread>

#include "tests/registry/registry_fixture.h"

namespace rgpu::registry {
namespace {

constexpr int64_t kSecond = 1000;
constexpr int64_t kMinute = 60 * kSecond;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kDay = 24 * kHour;
// 2027-01-15 00:00:00 UTC.
constexpr int64_t kDay0 = 1'799'971'200'000;

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// What a waiting Place call has been told so far, readable while it waits.
struct Watch {
  std::atomic<uint32_t> position{0};
  std::atomic<int64_t> preemption_ends_ms{0};
  std::mutex mu;
  std::vector<Queued> queued;
  std::vector<uint32_t> Positions() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<uint32_t> out;
    for (const auto& q : queued) out.push_back(q.position());
    return out;
  }
};

class CapacityTest : public RegistryTest {
 protected:
  void SetUp() override {
    configure_ = [this](RegistryOptions* o) {
      o->claim_timeout_ms = 0;  // leases here live to their lifetime unless a test ends them
      o->max_reservations_per_tenant = max_reservations_;
      o->move_on_notice = move_on_notice_;
      Status s = PriceList::Parse(prices_, &o->prices);
      ASSERT_TRUE(s.ok()) << s.ToString();
    };
    now_ = kDay0 + 12 * kHour;
    RegistryTest::SetUp();
    provider_ = CreateKey(true, "acme");
    alice_ = CreateKey(false, "alice");
    bob_ = CreateKey(false, "bob");
  }
  // Restarts the service with other prices (the store keeps everything else).
  void Reprice(const std::string& prices) {
    prices_ = prices;
    Stop();
    Start();
  }

  static Availability Window(const std::string& text, int32_t offset_s, uint32_t notice_s) {
    Availability a;
    Status s = ParseAvailability(text, &a);
    EXPECT_TRUE(s.ok()) << s.ToString();
    a.set_utc_offset_seconds(offset_s);
    a.set_notice_seconds(notice_s);
    return a;
  }
  grpc::Status RegisterHost(const Availability& a, int gpus = 1,
                            const std::string& host = "host1") {
    std::vector<GpuSpec> specs;
    for (int i = 0; i < gpus; ++i) specs.push_back(Spec(static_cast<uint32_t>(i), 16 * G));
    RegisterReply reply;
    return Register(provider_, host, specs, &reply, "", "", a);
  }
  // Moves the clock to `t`; the server heartbeats (it stays online) and the registry sweeps.
  void At(int64_t t, const std::string& host = "host1") {
    now_ = t;
    grpc::Status g = Heartbeat(provider_, host);
    EXPECT_TRUE(g.ok()) << g.error_message();
    service_->Sweep();
  }
  static PlaceRequest Ask(uint64_t memory, uint32_t share, uint32_t wait, int priority = 0,
                          uint32_t ttl = 0) {
    PlaceRequest req;
    req.set_memory_bytes(memory);
    req.set_compute_share(share);
    req.set_wait_seconds(wait);
    req.set_priority(priority);
    req.set_ttl_seconds(ttl);
    std::string holder_private, holder_public;
    EXPECT_TRUE(GenerateEd25519(&holder_private, &holder_public).ok());
    req.set_holder_key(holder_public);
    return req;
  }
  // Alice's lease on host1, whose window closes at 08:00 local (kDay0 + 7 h) with `notice_s` of
  // notice, and host2, which lends always and has room for it.
  void LeaseBeforeAClosingWindow(uint32_t notice_s, Placement* p) {
    now_ = kDay0 + 6 * kHour;
    ASSERT_TRUE(RegisterHost(Window("20:00-08:00", 3600, notice_s)).ok());
    ASSERT_TRUE(PlaceAs(alice_, Ask(G, 25, 0, 0, 4 * 3600), p).ok());
    ASSERT_EQ(p->gpu_id(), "host1/0");
    ASSERT_TRUE(RegisterHost(Availability(), 1, "host2").ok());  // lends always
  }
  // `give_up_ms` > 0: the caller leaves after that long (real time), whatever its wait says.
  grpc::Status PlaceAs(const std::string& api_key, const PlaceRequest& req, Placement* placement,
                       Watch* watch = nullptr, int give_up_ms = 0) {
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-api-key", api_key);
    if (give_up_ms > 0) {
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(give_up_ms));
    }
    auto reader = stub_->Place(&ctx, req);
    PlaceUpdate update;
    while (reader->Read(&update)) {
      if (update.has_queued() && watch) {
        {
          std::lock_guard<std::mutex> lock(watch->mu);
          watch->queued.push_back(update.queued());
        }
        watch->preemption_ends_ms.store(update.queued().preemption_ends_unix_ms());
        watch->position.store(update.queued().position());
      }
      if (update.has_placement()) *placement = update.placement();
    }
    return reader->Finish();
  }
  LeaseList Leases(const std::string& api_key = "") {
    LeaseList list;
    grpc::ClientContext ctx;
    if (api_key.empty()) {
      Key(&ctx, "x-rgpu-admin-key", kAdminKey);
    } else {
      Key(&ctx, "x-rgpu-api-key", api_key);
    }
    grpc::Status g = stub_->ListLeases(&ctx, Empty(), &list);
    EXPECT_TRUE(g.ok()) << g.error_message();
    return list;
  }
  const LeaseInfo* FindLease(const LeaseList& list, const std::string& lease_id) {
    for (const auto& l : list.leases()) {
      if (l.lease_id() == lease_id) return &l;
    }
    return nullptr;
  }
  static ReserveRequest Reservation1(int64_t start_unix, uint32_t duration_s, uint32_t share = 100,
                                     uint32_t gpus = 1) {
    ReserveRequest req;
    req.set_memory_bytes(8 * G);
    req.set_compute_share(share);
    req.set_gpus(gpus);
    req.set_start_unix(start_unix);
    req.set_duration_seconds(duration_s);
    return req;
  }
  grpc::Status Reserve(const std::string& api_key, const ReserveRequest& req, Reservation* out) {
    grpc::ClientContext ctx;
    if (!api_key.empty()) Key(&ctx, "x-rgpu-api-key", api_key);
    return stub_->Reserve(&ctx, req, out);
  }
  grpc::Status Cancel(const std::string& api_key, const std::string& id, Reservation* out) {
    CancelReservationRequest req;
    req.set_reservation_id(id);
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-api-key", api_key);
    return stub_->CancelReservation(&ctx, req, out);
  }
  grpc::Status Reservations(const std::string& api_key, const std::string& tenant,
                            ReservationList* out) {
    ReservationQuery q;
    q.set_tenant(tenant);
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-api-key", api_key);
    return stub_->ListReservations(&ctx, q, out);
  }
  static const InvoiceLine* ReservationLine(const Invoice& bill, const std::string& id) {
    for (const auto& line : bill.lines()) {
      if (line.reservation_id() == id && line.session_id() == 0 && line.lease_id().empty()) {
        return &line;
      }
    }
    return nullptr;
  }
  // Waits up to 20 s for `done`; false if it never came.
  template <typename F>
  static bool WaitFor(F done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }
  // A request of `priority` for the whole GPU that would wait a minute (long enough for a 30 s
  // notice) but whose caller leaves after half a second: whether it preempted shows in the
  // leases' notices, which stand once given.
  grpc::Status BriefWholeGpuRequest(const std::string& api_key, int priority) {
    Placement p;
    grpc::Status g = PlaceAs(api_key, Ask(G, 100, 60, priority), &p, nullptr, 500);
    EXPECT_TRUE(QueueEmpties());
    return g;
  }
  // Waits until the registry has dropped the requests whose callers left (it notices within
  // 200 ms): a priority-0 request for a whole GPU that cannot wait is then alone in the queue.
  // Call only while no GPU is free.
  bool QueueEmpties() {
    if (prober_.empty()) prober_ = CreateKey(false, "prober");
    return WaitFor([&] {
      Placement p;
      grpc::Status g = PlaceAs(prober_, Ask(G, 100, 0, 0), &p);
      return Has(g.error_message(), "queue position 1 of 1 ");
    });
  }

  std::string prices_ = "default_gpu 0.001 1\n";
  uint32_t max_reservations_ = 64;
  bool move_on_notice_ = true;
  std::string provider_, alice_, bob_, prober_;
};

// ---- Lendable windows ----

// 20:00-08:00 an hour ahead of UTC lends from 19:00 to 07:00 UTC: nothing is placed at 13:00
// local time (and the refusal says when the window opens), placements come once it opens,
// through midnight, and a request that needs its GPU longer than the window has left waits.
TEST_F(CapacityTest, PlacesOnlyInsideTheWindowAcrossMidnightInTheProvidersZone) {
  ASSERT_TRUE(RegisterHost(Window("20:00-08:00", 3600, 300)).ok());
  const GpuStatus closed = Gpu("host1/0");
  EXPECT_EQ(closed.state(), "closed");
  EXPECT_EQ(closed.availability(), "20:00-08:00 UTC+01:00, notice 300 s");
  EXPECT_TRUE(Has(closed.state_reason(), "opens at 2027-01-15 19:00:00 UTC"))
      << closed.state_reason();
  Placement p;
  grpc::Status g = PlaceAs(alice_, Ask(G, 25, 0), &p);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(Has(g.error_message(),
                  "host1/0 is outside its lendable window until 2027-01-15 "
                  "19:00:00 UTC"))
      << g.error_message();
  At(kDay0 + 19 * kHour - kSecond);  // 19:59:59 local
  EXPECT_EQ(GpuState("host1/0"), "closed");
  EXPECT_EQ(PlaceAs(alice_, Ask(G, 25, 0), &p).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  At(kDay0 + 19 * kHour);  // 20:00 local
  EXPECT_EQ(GpuState("host1/0"), "available");
  EXPECT_EQ(Gpu("host1/0").lendable_until_unix(), (kDay0 + 31 * kHour) / 1000);
  g = PlaceAs(alice_, Ask(G, 25, 0), &p);
  ASSERT_TRUE(g.ok()) << g.error_message();
  EXPECT_EQ(p.lendable_until_unix(), (kDay0 + 31 * kHour) / 1000);
  EXPECT_EQ(p.notice_seconds(), 300u);
  // Past midnight UTC (01:30 local) it still lends.
  At(kDay0 + 24 * kHour + 30 * kMinute);
  EXPECT_EQ(GpuState("host1/0"), "available");
  // 6 h 30 min are left: a request that needs 6 h is placed, one that needs 7 h waits, and one
  // that needs more than any window gives is refused at once.
  PlaceRequest six = Ask(G, 25, 0);
  six.set_duration_seconds(6 * 3600);
  g = PlaceAs(alice_, six, &p);
  EXPECT_TRUE(g.ok()) << g.error_message();
  PlaceRequest seven = Ask(G, 25, 0);
  seven.set_duration_seconds(7 * 3600);
  EXPECT_EQ(PlaceAs(alice_, seven, &p).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  PlaceRequest thirteen = Ask(G, 25, 0);
  thirteen.set_duration_seconds(13 * 3600);
  g = PlaceAs(alice_, thirteen, &p);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(Has(g.error_message(), "at a stretch")) << g.error_message();
  // 08:00 local: closed again.
  At(kDay0 + 31 * kHour);
  EXPECT_EQ(GpuState("host1/0"), "closed");
  EXPECT_EQ(PlaceAs(alice_, Ask(G, 25, 0), &p).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

// The server reports its UTC offset with each heartbeat: daylight saving time moves its windows
// (in UTC) with it, and the new offset is kept across a registry restart.
TEST_F(CapacityTest, AnOffsetReportedByAHeartbeatMovesTheWindows) {
  now_ = kDay0 + 18 * kHour + 30 * kMinute;  // 19:30 at UTC+1: closed
  ASSERT_TRUE(RegisterHost(Window("20:00-08:00", 3600, 60)).ok());
  EXPECT_EQ(GpuState("host1/0"), "closed");
  HeartbeatRequest req;
  req.set_server_name("host1");
  req.set_utc_offset_seconds(7200);  // 20:30 at UTC+2
  req.set_zone("CEST");
  HeartbeatReply reply;
  grpc::ClientContext ctx;
  Key(&ctx, "x-rgpu-provider-key", provider_);
  ASSERT_TRUE(stub_->Heartbeat(&ctx, req, &reply).ok());
  EXPECT_EQ(GpuState("host1/0"), "available");
  EXPECT_EQ(Gpu("host1/0").availability(), "20:00-08:00 UTC+02:00 (CEST), notice 60 s");
  Placement p;
  EXPECT_TRUE(PlaceAs(alice_, Ask(G, 25, 0), &p).ok());
  Stop();
  Start();
  EXPECT_EQ(Gpu("host1/0").availability(), "20:00-08:00 UTC+02:00 (CEST), notice 60 s");
}

// 07:00 local: a lease is placed (lendable until 08:00, notice 300 s). At the close the lease is
// put under notice (its tenant and its server hear when and why), it ends when the notice runs
// out even though the registry's sweep comes 10 s late, the reason is kept (a restarted registry
// still gives it), and the session is billed up to the notice's end, not to its last record.
TEST_F(CapacityTest, AClosingWindowEndsTheLeaseAfterItsNoticeAndTheBillStopsThere) {
  now_ = kDay0 + 6 * kHour;
  ASSERT_TRUE(RegisterHost(Window("20:00-08:00", 3600, 300)).ok());
  Placement p;
  ASSERT_TRUE(PlaceAs(alice_, Ask(G, 25, 0, 0, 4 * 3600), &p).ok());
  EXPECT_EQ(p.lendable_until_unix(), (kDay0 + 7 * kHour) / 1000);
  ReportUsageReply ack;
  const int64_t t0 = kDay0 + 6 * kHour;
  now_ = t0 + 30 * kMinute;
  ASSERT_TRUE(Report(provider_, {Record("r1", "alice", p, t0, t0 + 30 * kMinute)}, &ack).ok());
  ASSERT_EQ(ack.stored(), 1u) << Reasons(ack);
  At(kDay0 + 7 * kHour);  // 08:00 local: the window closes
  const int64_t ends = kDay0 + 7 * kHour + 300 * kSecond;
  const LeaseInfo* lease = nullptr;
  LeaseList mine = Leases(alice_);
  ASSERT_NE(lease = FindLease(mine, p.lease_id()), nullptr);
  EXPECT_EQ(lease->ending_unix_ms(), ends);
  EXPECT_TRUE(Has(lease->end_reason(),
                  "lendable window (20:00-08:00 UTC+01:00, notice 300 s) "
                  "closed at 2027-01-15 07:00:00 UTC"))
      << lease->end_reason();
  HeartbeatReply beat;
  ASSERT_TRUE(Heartbeat(provider_, "host1", &beat).ok());
  ASSERT_EQ(beat.ending_leases_size(), 1);
  EXPECT_EQ(beat.ending_leases(0).lease_id(), p.lease_id());
  EXPECT_EQ(beat.ending_leases(0).ends_unix_ms(), ends);
  EXPECT_TRUE(Has(beat.ending_leases(0).reason(), "lendable window"));
  ASSERT_TRUE(
      Report(provider_, {Record("r2", "alice", p, t0 + 30 * kMinute, t0 + kHour)}, &ack).ok());
  ASSERT_EQ(ack.stored(), 1u) << Reasons(ack);
  At(ends - kSecond);
  EXPECT_NE(FindLease(Leases(), p.lease_id()), nullptr);  // the notice has not run out
  At(ends + 10 * kSecond);
  EXPECT_EQ(FindLease(Leases(), p.lease_id()), nullptr);
  ASSERT_TRUE(Heartbeat(provider_, "host1", &beat).ok());
  ASSERT_EQ(beat.ended_leases_size(), 1);
  EXPECT_EQ(beat.ended_leases(0), p.lease_id());
  ASSERT_EQ(beat.ended_reasons_size(), 1);
  EXPECT_TRUE(Has(beat.ended_reasons(0), "lendable window")) << beat.ended_reasons(0);
  // The server stopped the session 2 s after the notice's end: its last record is accepted (the
  // clocks' skew) but billed only up to the end. A record of a session after it is refused.
  ASSERT_TRUE(
      Report(provider_,
             {Record("r3", "alice", p, t0 + kHour, ends + 2 * kSecond, 1, true),
              Record("late", "alice", p, ends + 6 * kSecond, ends + 7 * kSecond, 1, true, 2)},
             &ack)
          .ok());
  EXPECT_EQ(ack.stored(), 1u) << Reasons(ack);
  ASSERT_EQ(ack.refusals_size(), 1);
  EXPECT_EQ(ack.refusals(0).record_id(), "host1:late");
  const Invoice bill = Bill("alice");
  EXPECT_DOUBLE_EQ(bill.base_fee(), (kHour + 300 * kSecond) * 0.001);
  // The reason is in the store: a restarted registry tells the server again, with it.
  Stop();
  Start();
  ASSERT_TRUE(Heartbeat(provider_, "host1", &beat).ok());
  ASSERT_EQ(beat.ended_leases_size(), 1);
  ASSERT_EQ(beat.ended_reasons_size(), 1);
  EXPECT_TRUE(Has(beat.ended_reasons(0), "lendable window")) << beat.ended_reasons(0);
}

// A provider that lets the registry's moves of its leases under notice lapse (it put them under
// notice itself, by closing its window) held room on other providers' GPUs two minutes at a time
// for the whole notice. After three dropped hand-overs within the hour, none is offered.
TEST_F(CapacityTest, MovesOnNoticeThatNeverHappenAreNotOfferedForever) {
  Placement p;
  LeaseBeforeAClosingWindow(3600, &p);
  int64_t t = kDay0 + 7 * kHour;  // 08:00 local: the window closes
  for (int offer = 0; offer < 4; ++offer) {
    now_ = t;
    ASSERT_TRUE(Heartbeat(provider_, "host2").ok());
    At(t);
    HeartbeatReply beat;
    ASSERT_TRUE(Heartbeat(provider_, "host1", &beat).ok());
    ASSERT_EQ(beat.ending_leases_size(), 1);
    if (offer < 3) {
      EXPECT_FALSE(beat.ending_leases(0).move_token().empty()) << offer;
      EXPECT_EQ(Gpu("host2/0").memory_committed(), G) << offer;
    } else {
      EXPECT_TRUE(beat.ending_leases(0).move_token().empty());
      EXPECT_EQ(Gpu("host2/0").memory_committed(), 0u);
    }
    t += 121 * 1000;  // nobody completes it: it lapses
  }
}

// What a closing window would end moves instead (docs/migration.md, "Moved by the registry"):
// at the close the registry hands the lease over to a server that lends and has room, and the
// closing server's heartbeat says where its session goes (the same hand-over again until it
// completes). Once the target reports the session, the lease is there and its notice is lifted:
// it does not end when the notice runs out, and the old GPU's room is free.
TEST_F(CapacityTest, AClosingWindowMovesTheSessionWhereThereIsRoom) {
  Placement p;
  LeaseBeforeAClosingWindow(300, &p);
  auto at = [&](int64_t t) {
    now_ = t;
    ASSERT_TRUE(Heartbeat(provider_, "host2").ok());
    At(t);
  };
  at(kDay0 + 7 * kHour);  // 08:00 local: the window closes
  HeartbeatReply beat;
  ASSERT_TRUE(Heartbeat(provider_, "host1", &beat).ok());
  ASSERT_EQ(beat.ending_leases_size(), 1);
  const LeaseNotice notice = beat.ending_leases(0);
  EXPECT_EQ(notice.move_url(), responder_.url());
  const wire::TokenClaims claims = Claims(notice.move_token());
  EXPECT_TRUE(claims.hand_over());
  EXPECT_EQ(claims.server(), "host2");
  EXPECT_EQ(claims.lease_id(), p.lease_id());
  EXPECT_EQ(Gpu("host2/0").memory_committed(), G);
  ASSERT_TRUE(Heartbeat(provider_, "host1", &beat).ok());  // a lost reply: the same again
  ASSERT_EQ(beat.ending_leases_size(), 1);
  EXPECT_EQ(beat.ending_leases(0).move_token(), notice.move_token());
  // The session leaves host1 (its last record there says so) and is reported on host2.
  now_ += 5 * kSecond;
  UsageRecord left = Record("a1", "alice", p, now_ - 4 * kSecond, now_ - 3 * kSecond, 5, false, 1);
  left.set_moved(true);
  UsageRecord r = Record("b1", "alice", p, now_ - 3 * kSecond, now_ - kSecond, 5, false, 9);
  r.set_server_name("host2");
  r.set_record_id("host2:b1");
  ReportUsageReply ack;
  ASSERT_TRUE(Report(provider_, {left}, &ack).ok());
  ASSERT_EQ(ack.stored(), 1u) << Reasons(ack);
  ASSERT_TRUE(Report(provider_, {r}, &ack).ok());
  ASSERT_EQ(ack.stored(), 1u) << Reasons(ack);
  const LeaseInfo* lease = nullptr;
  LeaseList mine = Leases(alice_);
  ASSERT_NE(lease = FindLease(mine, p.lease_id()), nullptr);
  EXPECT_EQ(lease->ending_unix_ms(), 0);
  EXPECT_EQ(lease->gpu_id(), "host2/0");
  ASSERT_TRUE(Heartbeat(provider_, "host1", &beat).ok());
  EXPECT_EQ(beat.ending_leases_size(), 0);
  EXPECT_EQ(Gpu("host1/0").memory_committed(), 0u);
  at(kDay0 + 7 * kHour + 400 * kSecond);  // past the old notice
  EXPECT_NE(FindLease(Leases(), p.lease_id()), nullptr);
}

// Without room elsewhere, or with --no-move-on-notice, the notice stands as before.
TEST_F(CapacityTest, WithNowhereToGoTheNoticeStands) {
  move_on_notice_ = false;
  Reprice(prices_);
  now_ = kDay0 + 6 * kHour;
  ASSERT_TRUE(RegisterHost(Window("20:00-08:00", 3600, 300)).ok());
  Placement p;
  ASSERT_TRUE(PlaceAs(alice_, Ask(G, 25, 0, 0, 4 * 3600), &p).ok());
  ASSERT_TRUE(RegisterHost(Availability(), 1, "host2").ok());
  now_ = kDay0 + 7 * kHour;
  ASSERT_TRUE(Heartbeat(provider_, "host2").ok());
  At(now_);
  HeartbeatReply beat;
  ASSERT_TRUE(Heartbeat(provider_, "host1", &beat).ok());
  ASSERT_EQ(beat.ending_leases_size(), 1);
  EXPECT_TRUE(beat.ending_leases(0).move_token().empty());
  EXPECT_EQ(Gpu("host2/0").memory_committed(), 0u);
  // Moving on notice, but host2 has no room for it: the notice stands there too.
  move_on_notice_ = true;
  Reprice(prices_);
  ASSERT_TRUE(Heartbeat(provider_, "host2").ok());  // online again after the restart
  Placement full;
  ASSERT_TRUE(PlaceAs(bob_, Ask(16 * G, 100, 0), &full).ok());
  ASSERT_EQ(full.gpu_id(), "host2/0");
  ASSERT_TRUE(Heartbeat(provider_, "host2").ok());
  ASSERT_TRUE(Heartbeat(provider_, "host1", &beat).ok());
  ASSERT_EQ(beat.ending_leases_size(), 1);
  EXPECT_TRUE(beat.ending_leases(0).move_token().empty());
}

// A provider that registers again with windows that closed hours ago and no notice does not end
// a running lease at once: the lease gets the notice promised at its grant, counted from the
// change.
TEST_F(CapacityTest, AProviderCannotCutAPromisedNoticeShort) {
  now_ = kDay0 + 19 * kHour;  // 20:00 local
  ASSERT_TRUE(RegisterHost(Window("20:00-08:00", 3600, 600)).ok());
  Placement p;
  ASSERT_TRUE(PlaceAs(alice_, Ask(G, 25, 0, 0, 4 * 3600), &p).ok());
  EXPECT_EQ(p.notice_seconds(), 600u);
  now_ = kDay0 + 20 * kHour;
  ASSERT_TRUE(RegisterHost(Window("09:00-17:00", 3600, 0)).ok());  // closed since 16:00 UTC
  service_->Sweep();
  LeaseList leases = Leases(alice_);
  const LeaseInfo* lease = FindLease(leases, p.lease_id());
  ASSERT_NE(lease, nullptr) << "the lease was ended without its notice";
  EXPECT_EQ(lease->ending_unix_ms(), kDay0 + 20 * kHour + 600 * kSecond);
  EXPECT_TRUE(Has(lease->end_reason(), "windows changed at 2027-01-15 20:00:00 UTC"))
      << lease->end_reason();
  At(kDay0 + 20 * kHour + 599 * kSecond);
  EXPECT_NE(FindLease(Leases(), p.lease_id()), nullptr);
  At(kDay0 + 20 * kHour + 600 * kSecond);
  EXPECT_EQ(FindLease(Leases(), p.lease_id()), nullptr);
}

// Windows, offsets, zones and notices a provider reports are checked before anything reads
// them, at registration, in heartbeats and when read back from the store.
TEST_F(CapacityTest, HostileAvailabilityIsRefused) {
  auto refused = [&](const Availability& a, const char* why) {
    grpc::Status g = RegisterHost(a);
    EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << why;
    EXPECT_TRUE(Has(g.error_message(), "availability refused")) << g.error_message();
  };
  Availability a = Window("20:00-08:00", 3600, 60);
  a.mutable_windows(0)->set_start_minute(5000);
  refused(a, "a window starting after the day");
  a = Window("20:00-08:00", 3600, 60);
  a.mutable_windows(0)->set_end_minute(0xffffffffu);
  refused(a, "a window ending at 2^32 - 1");
  a = Window("20:00-08:00", 3600, 60);
  a.set_notice_seconds(86401);
  refused(a, "a notice over a day");
  a = Window("20:00-08:00", 14 * 3600 + 1, 60);
  refused(a, "an offset beyond 14 h");
  a = Window("20:00-08:00", 3600, 60);
  a.set_zone("CET\nforged log line");
  refused(a, "a zone with a newline");
  a = Window("20:00-08:00", 3600, 60);
  for (int i = 0; i < 8; ++i) *a.add_windows() = a.windows(0);
  refused(a, "nine (overlapping) windows");
  EXPECT_EQ(GpuState("host1/0"), "missing");
  // A good registration, then a heartbeat with an impossible offset: refused, nothing changes.
  ASSERT_TRUE(RegisterHost(Window("20:00-08:00", 3600, 60)).ok());
  HeartbeatRequest req;
  req.set_server_name("host1");
  req.set_utc_offset_seconds(20 * 3600);
  HeartbeatReply reply;
  grpc::ClientContext ctx;
  Key(&ctx, "x-rgpu-provider-key", provider_);
  grpc::Status g = stub_->Heartbeat(&ctx, req, &reply);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(Has(g.error_message(), "UTC offset")) << g.error_message();
  EXPECT_EQ(Gpu("host1/0").availability(), "20:00-08:00 UTC+01:00, notice 60 s");
  // A store whose availability was tampered with is not believed: the server registers again.
  Stop();
  {
    std::unique_ptr<Db> db;
    ASSERT_TRUE(OpenSqlite(dir_ + "/registry.db", &db).ok());
    ASSERT_TRUE(
        db->Exec("UPDATE servers SET windows = '0-99999' WHERE server_name = 'host1'").ok());
  }
  Start();
  g = Heartbeat(provider_, "host1");
  EXPECT_EQ(g.error_code(), grpc::StatusCode::NOT_FOUND) << g.error_message();
  EXPECT_TRUE(Has(g.error_message(), "register again")) << g.error_message();
}

// ---- Preemption ----

// Without a preemption rule in the price list nothing is preempted, whatever the priority; with
// one, a request preempts only leases of lower priority than its own, and only when it would
// still be waiting when the notice runs out.
TEST_F(CapacityTest, PreemptionNeedsThePriceListAndALowerPriorityVictim) {
  ASSERT_TRUE(RegisterHost({}).ok());
  Placement low;
  ASSERT_TRUE(PlaceAs(alice_, Ask(G, 100, 0, 0), &low).ok());
  EXPECT_EQ(BriefWholeGpuRequest(bob_, 9).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(FindLease(Leases(), low.lease_id())->ending_unix_ms(), 0) << "no rule, yet preempted";
  Reprice("default_gpu 0.001 1\npreemption 5 30\n");
  ASSERT_TRUE(Heartbeat(provider_, "host1").ok());  // online again after the restart
  ASSERT_EQ(GpuState("host1/0"), "available");
  // Priority 4 is below the rule's 5: not allowed to preempt.
  EXPECT_EQ(BriefWholeGpuRequest(bob_, 4).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(FindLease(Leases(), low.lease_id())->ending_unix_ms(), 0) << "preempted below the rule";
  // A request that would give up before the notice runs out preempts nothing.
  Placement p;
  EXPECT_EQ(PlaceAs(bob_, Ask(G, 100, 10, 9), &p, nullptr, 500).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  ASSERT_TRUE(QueueEmpties());
  EXPECT_EQ(FindLease(Leases(), low.lease_id())->ending_unix_ms(), 0)
      << "preempted for a request that leaves before the notice's end";
  // Equal priority: never.
  ReleaseLeaseRequest release;
  release.set_lease_id(low.lease_id());
  Empty empty;
  grpc::ClientContext ctx;
  Key(&ctx, "x-rgpu-api-key", alice_);
  grpc::Status released = stub_->ReleaseLease(&ctx, release, &empty);
  ASSERT_TRUE(released.ok()) << released.error_message();
  Placement same;
  grpc::Status placed = PlaceAs(alice_, Ask(G, 100, 0, 7), &same);
  ASSERT_TRUE(placed.ok()) << placed.error_message();
  EXPECT_EQ(BriefWholeGpuRequest(bob_, 7).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(FindLease(Leases(), same.lease_id())->ending_unix_ms(), 0)
      << "equal priority preempted";
  // A higher one does (the rule applies from 5 up).
  EXPECT_EQ(BriefWholeGpuRequest(bob_, 8).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(FindLease(Leases(), same.lease_id())->ending_unix_ms(), now_ + 30 * kSecond);
}

// Alice's priority-0 lease fills the GPU; dave waits at priority 4 (below the price list's
// preemption rule) and preempts nothing. Bob comes at priority 5: he goes ahead of dave, alice's
// lease is given 30 s notice for him (all three hear it), the GPU is kept for him, and when the
// notice runs out alice's lease ends and bob is placed; dave moves up. Bob's queue time (the
// notice) is what his priority surcharge is billed on.
TEST_F(CapacityTest, AHigherPriorityRequestPreemptsAfterNoticeAndQueuePositionsStayTrue) {
  Reprice("default_gpu 0.001 1\npriority 5 1\npriority_cap 4\npreemption 5 30\n");
  ASSERT_TRUE(RegisterHost({}).ok());
  const std::string dave = CreateKey(false, "dave");
  Placement alice_p;
  ASSERT_TRUE(PlaceAs(alice_, Ask(G, 100, 0, 0, 4 * 3600), &alice_p).ok());
  Watch dave_watch, bob_watch;
  Placement dave_p, bob_p;
  grpc::Status dave_status, bob_status;
  std::thread dave_thread(
      [&] { dave_status = PlaceAs(dave, Ask(G, 100, 600, 4), &dave_p, &dave_watch); });
  ASSERT_TRUE(WaitFor([&] { return dave_watch.position.load() == 1; }));
  EXPECT_EQ(FindLease(Leases(), alice_p.lease_id())->ending_unix_ms(), 0);
  const int64_t asked = now_;
  std::thread bob_thread(
      [&] { bob_status = PlaceAs(bob_, Ask(G, 100, 600, 5), &bob_p, &bob_watch); });
  ASSERT_TRUE(WaitFor([&] { return bob_watch.preemption_ends_ms.load() != 0; }));
  ASSERT_TRUE(WaitFor([&] { return dave_watch.position.load() == 2; }));
  EXPECT_EQ(bob_watch.preemption_ends_ms.load(), asked + 30 * kSecond);
  {
    std::lock_guard<std::mutex> lock(bob_watch.mu);
    EXPECT_EQ(bob_watch.queued.back().position(), 1u);
    EXPECT_EQ(bob_watch.queued.back().preempting_gpu(), "host1/0");
  }
  LeaseList alice_leases = Leases(alice_);
  const LeaseInfo* victim = FindLease(alice_leases, alice_p.lease_id());
  ASSERT_NE(victim, nullptr);
  EXPECT_EQ(victim->ending_unix_ms(), asked + 30 * kSecond);
  EXPECT_TRUE(Has(victim->end_reason(),
                  "preempted by a priority-5 request of tenant bob "
                  "(notice 30 s)"))
      << victim->end_reason();
  HeartbeatReply beat;
  ASSERT_TRUE(Heartbeat(provider_, "host1", &beat).ok());
  ASSERT_EQ(beat.ending_leases_size(), 1);
  EXPECT_EQ(beat.ending_leases(0).lease_id(), alice_p.lease_id());
  At(asked + 29 * kSecond);
  EXPECT_NE(FindLease(Leases(), alice_p.lease_id()), nullptr);
  EXPECT_EQ(dave_watch.position.load(), 2u);
  At(asked + 30 * kSecond);
  bob_thread.join();
  ASSERT_TRUE(bob_status.ok()) << bob_status.error_message();
  EXPECT_EQ(bob_p.gpu_id(), "host1/0");
  EXPECT_EQ(bob_p.queue_ms(), 30 * kSecond);
  EXPECT_EQ(FindLease(Leases(), alice_p.lease_id()), nullptr);
  ASSERT_TRUE(WaitFor([&] { return dave_watch.position.load() == 1; }));
  EXPECT_EQ(dave_watch.Positions(), (std::vector<uint32_t>{1, 2, 1}));
  // Bob's session: 10 s, billed with the priority multiplier of his 30 s in the queue.
  ReportUsageReply ack;
  const int64_t start = now_;
  now_ += 10 * kSecond;
  ASSERT_TRUE(Report(provider_, {Record("b1", "bob", bob_p, start, now_, 1, true)}, &ack).ok());
  ASSERT_EQ(ack.stored(), 1u) << Reasons(ack);
  const Invoice bill = Bill("bob");
  ASSERT_EQ(bill.lines_size(), 1);
  EXPECT_DOUBLE_EQ(bill.lines(0).priority_multiplier(), std::pow(2.0, 30.0 / 3600));
  EXPECT_DOUBLE_EQ(bill.priority_surcharge(), 10.0 * (std::pow(2.0, 30.0 / 3600) - 1));
  // Bob's session ended: dave, who never preempted, gets the GPU.
  dave_thread.join();
  ASSERT_TRUE(dave_status.ok()) << dave_status.error_message();
  EXPECT_EQ(dave_p.gpu_id(), "host1/0");
}

// ---- Reservations ----

// Alice reserves a whole GPU from 12:00 to 13:00 UTC. A lease that would still hold it then goes
// to the other GPU, or waits when that one is full; a lease that ends before noon may use it;
// another reservation that needs it is refused. From noon alice places under her reservation at
// once (no one else can use it), and she is billed the reserved hour at reservation_fraction,
// her session's GPU time included.
TEST_F(CapacityTest, AReservationHoldsItsGpuAndIsBilledAsThePriceListSays) {
  Reprice("default_gpu 0.001 1\nreservation_fraction 0.5\n");
  now_ = kDay0 + 10 * kHour;
  ASSERT_TRUE(RegisterHost({}, 2).ok());
  const int64_t start = kDay0 + 12 * kHour;
  Reservation r;
  grpc::Status g = Reserve(alice_, Reservation1(start / 1000, 3600), &r);
  ASSERT_TRUE(g.ok()) << g.error_message();
  EXPECT_EQ(r.state(), "pending");
  ASSERT_EQ(r.gpu_ids_size(), 1);
  const std::string reserved = r.gpu_ids(0);
  Placement p;
  // Three hours: it would overlap the reservation, so it goes to the other GPU.
  ASSERT_TRUE(PlaceAs(bob_, Ask(G, 100, 0, 0, 3 * 3600), &p).ok());
  EXPECT_NE(p.gpu_id(), reserved);
  // Another three hours: the other GPU is full and the reserved one is kept.
  EXPECT_EQ(PlaceAs(bob_, Ask(G, 100, 0, 0, 3 * 3600), &p).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  // One hour ends before noon: it may use the reserved GPU meanwhile.
  ASSERT_TRUE(PlaceAs(bob_, Ask(G, 100, 0, 0, 3600), &p).ok());
  EXPECT_EQ(p.gpu_id(), reserved);
  // A reservation that needs a whole GPU at 12:30: none left.
  Reservation other;
  g = Reserve(bob_, Reservation1(start / 1000 + 1800, 3600), &other);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << g.error_message();
  // Kept across a restart.
  Stop();
  Start();
  At(start);
  ReservationList mine;
  ASSERT_TRUE(Reservations(alice_, "", &mine).ok());
  ASSERT_EQ(mine.reservations_size(), 1);
  EXPECT_EQ(mine.reservations(0).state(), "active");
  // Bob cannot use alice's reservation; alice is placed under it at once.
  PlaceRequest under = Ask(G, 25, 0);
  under.set_reservation_id(r.reservation_id());
  EXPECT_EQ(PlaceAs(bob_, under, &p).error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(PlaceAs(alice_, under, &p).ok());
  EXPECT_EQ(p.gpu_id(), reserved);
  EXPECT_EQ(p.reservation_id(), r.reservation_id());
  EXPECT_LE(p.expires_unix(), (start + kHour) / 1000);
  Placement second;
  EXPECT_EQ(PlaceAs(alice_, under, &second).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  ReportUsageReply ack;
  now_ = start + 10 * kMinute;
  ASSERT_TRUE(
      Report(provider_, {Record("a1", "alice", p, start, start + 10 * kMinute, 1, true)}, &ack)
          .ok());
  ASSERT_EQ(ack.stored(), 1u) << Reasons(ack);
  At(start + kHour);
  ASSERT_TRUE(Reservations(alice_, "", &mine).ok());
  EXPECT_EQ(mine.reservations(0).state(), "ended");
  const Invoice bill = Bill("alice");
  const InvoiceLine* line = ReservationLine(bill, r.reservation_id());
  ASSERT_NE(line, nullptr);
  EXPECT_DOUBLE_EQ(line->reserved_ms(), kHour);
  EXPECT_DOUBLE_EQ(line->reservation_price_per_ms(), 0.0005);
  EXPECT_DOUBLE_EQ(line->reservation_fee(), 1800.0);
  EXPECT_DOUBLE_EQ(bill.reservation_fee(), 1800.0);
  EXPECT_DOUBLE_EQ(bill.base_fee(), 0.0);  // the session's GPU time was the reservation's
  EXPECT_DOUBLE_EQ(bill.total(), 1800.0);
  // The GPU is free again for anyone.
  ASSERT_TRUE(PlaceAs(bob_, Ask(G, 100, 0, 0, 3600), &p).ok());
}

// A reservation the registry could not keep is not billed for that time (issue 19): while its
// GPU's server is down (three heartbeats missed, counted from the last one heard, until it is
// heard again; its provider revoked, from then on) the tenant pays nothing and the provider
// earns nothing. The outage is kept across a registry restart.
TEST_F(CapacityTest, AReservationIsNotBilledWhileItsServerIsDown) {
  Reprice("default_gpu 0.001 1\nreservation_fraction 0.5\n");
  now_ = kDay0 + 10 * kHour;
  ASSERT_TRUE(RegisterHost({}).ok());
  const int64_t start = kDay0 + 12 * kHour;
  Reservation r;
  ASSERT_TRUE(Reserve(alice_, Reservation1(start / 1000, 2 * 3600), &r).ok());
  At(start + 30 * kMinute);  // the last heartbeat heard for a while
  now_ = start + 40 * kMinute;
  service_->Sweep();  // three heartbeats missed: down since start + 30 min
  EXPECT_EQ(GpuState("host1/0"), "offline");
  Stop();
  Start();
  At(start + 70 * kMinute);  // heard again: down 40 minutes in all
  At(start + 2 * kHour);
  Invoice bill = Bill("alice");
  const InvoiceLine* line = ReservationLine(bill, r.reservation_id());
  ASSERT_NE(line, nullptr);
  EXPECT_DOUBLE_EQ(line->unavailable_ms(), 40 * kMinute);
  EXPECT_DOUBLE_EQ(line->reserved_ms(), 80 * kMinute);
  EXPECT_DOUBLE_EQ(line->reservation_fee(), 80 * kMinute * 0.0005);
  const Invoice earned = Earnings("acme");
  line = ReservationLine(earned, r.reservation_id());
  ASSERT_NE(line, nullptr);
  EXPECT_DOUBLE_EQ(line->reserved_ms(), 80 * kMinute);
  // Revoked half-way through the next one: its second half is not billed.
  Reservation next;
  ASSERT_TRUE(Reserve(alice_, Reservation1((start + 3 * kHour) / 1000, 3600), &next).ok());
  At(start + 3 * kHour + 30 * kMinute);
  NameRequest revoke;
  revoke.set_name("acme");
  Empty none;
  grpc::ClientContext revoking;
  Key(&revoking, "x-rgpu-admin-key", kAdminKey);
  ASSERT_TRUE(stub_->RevokeProvider(&revoking, revoke, &none).ok());
  now_ = start + 5 * kHour;
  service_->Sweep();
  bill = Bill("alice");
  line = ReservationLine(bill, next.reservation_id());
  ASSERT_NE(line, nullptr);
  EXPECT_DOUBLE_EQ(line->reserved_ms(), 30 * kMinute);
  EXPECT_DOUBLE_EQ(line->unavailable_ms(), 30 * kMinute);
}

// Cancelled before its start a reservation costs nothing and frees its GPU at once; cancelled
// after its start it is billed up to the cancellation. Only its tenant may cancel it.
TEST_F(CapacityTest, CancellingAReservationFreesItsRoom) {
  ASSERT_TRUE(RegisterHost({}).ok());
  Reservation r;
  ASSERT_TRUE(Reserve(alice_, Reservation1(now_ / 1000 + 3600, 3600), &r).ok());
  Placement p;
  EXPECT_EQ(PlaceAs(bob_, Ask(G, 100, 0, 0, 3 * 3600), &p).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  Reservation cancelled;
  EXPECT_EQ(Cancel(bob_, r.reservation_id(), &cancelled).error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(Cancel(alice_, r.reservation_id(), &cancelled).ok());
  EXPECT_EQ(cancelled.state(), "cancelled");
  EXPECT_EQ(Cancel(alice_, r.reservation_id(), &cancelled).error_code(),
            grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(PlaceAs(bob_, Ask(G, 100, 0, 0, 3 * 3600), &p).ok());
  // After bob's lease: 15 minutes used, then cancelled.
  const int64_t start = now_ + 4 * kHour;
  Reservation later;
  ASSERT_TRUE(Reserve(alice_, Reservation1(start / 1000, 3600), &later).ok());
  At(start + 15 * kMinute);
  ASSERT_TRUE(Cancel(alice_, later.reservation_id(), &cancelled).ok());
  At(start + kHour);
  const Invoice bill = Bill("alice");
  EXPECT_EQ(ReservationLine(bill, r.reservation_id()), nullptr);
  const InvoiceLine* line = ReservationLine(bill, later.reservation_id());
  ASSERT_NE(line, nullptr);
  EXPECT_DOUBLE_EQ(line->reserved_ms(), 15 * kMinute);
  EXPECT_DOUBLE_EQ(bill.total(), 15 * kMinute * 0.001);  // reservation_fraction defaults to 1
}

// A reservation is taken only where the windows cover it, and a provider cannot then register
// windows that would not.
TEST_F(CapacityTest, AReservationNeedsTheWindowAndKeepsIt) {
  now_ = kDay0 + 19 * kHour;  // 20:00 at UTC+1
  ASSERT_TRUE(RegisterHost(Window("20:00-08:00", 3600, 60)).ok());
  Reservation r;
  EXPECT_EQ(Reserve(alice_, Reservation1((kDay0 + 36 * kHour) / 1000, 3600), &r).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);  // 13:00 local tomorrow: closed
  EXPECT_EQ(Reserve(alice_, Reservation1((kDay0 + 30 * kHour) / 1000, 2 * 3600), &r).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);  // 07:00-09:00 local: runs past the close
  ASSERT_TRUE(Reserve(alice_, Reservation1((kDay0 + 20 * kHour) / 1000, 2 * 3600), &r).ok());
  grpc::Status g = RegisterHost(Window("09:00-17:00", 3600, 60));
  EXPECT_EQ(g.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(Has(g.error_message(), r.reservation_id())) << g.error_message();
  EXPECT_EQ(Gpu("host1/0").availability(), "20:00-08:00 UTC+01:00, notice 60 s");
  EXPECT_TRUE(RegisterHost(Window("19:00-09:00", 3600, 60)).ok());  // still covers it
}

// What a tenant may put in a reservation is bounded: start (from now to 90 days ahead, no
// overflow), duration, GPUs, share, memory, names; and it must say who it is.
TEST_F(CapacityTest, HostileReservationRequestsAreRefused) {
  ASSERT_TRUE(RegisterHost({}, 2).ok());
  const int64_t now_s = now_ / 1000;
  auto refused = [&](ReserveRequest req, const char* why) {
    Reservation r;
    grpc::Status g = Reserve(alice_, req, &r);
    EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << why << ": " << g.error_message();
  };
  refused(Reservation1(now_s - 1, 3600), "a start in the past");
  refused(Reservation1(now_s + 90 * 86400 + 1, 3600), "a start over 90 days ahead");
  refused(Reservation1(INT64_MAX, 3600), "a start that overflows in milliseconds");
  refused(Reservation1(INT64_MIN, 3600), "a start at the most negative time");
  refused(Reservation1(now_s + 60, 59), "under a minute");
  refused(Reservation1(now_s + 60, 7 * 86400 + 1), "over a week");
  refused(Reservation1(now_s + 60, 3600, 101), "a share over 100%");
  refused(Reservation1(now_s + 60, 3600, 25, 17), "17 GPUs");
  ReserveRequest bad = Reservation1(now_s + 60, 3600);
  bad.set_job("a job\nwith a newline");
  refused(bad, "a job name with a newline");
  bad = Reservation1(now_s + 60, 3600);
  bad.set_gpu_type(std::string(300, 'A'));
  refused(bad, "a 300-character GPU type");
  Reservation r;
  // Memory no GPU has (sums saturate: no wrap into a fit).
  ReserveRequest huge = Reservation1(now_s + 60, 3600, 1);
  huge.set_memory_bytes(UINT64_MAX);
  EXPECT_EQ(Reserve(alice_, huge, &r).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(Reserve("", Reservation1(now_s + 60, 3600), &r).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  ReservationList list;
  ASSERT_TRUE(Reservations(alice_, "", &list).ok());
  EXPECT_EQ(list.reservations_size(), 0);
}

// A tenant holds at most --max-reservations-per-tenant reservations at once, and sees only its
// own.
TEST_F(CapacityTest, ATenantsReservationsAreLimitedAndItsOwn) {
  max_reservations_ = 2;
  Stop();
  Start();
  ASSERT_TRUE(RegisterHost({}, 2).ok());
  const int64_t now_s = now_ / 1000;
  Reservation r;
  ASSERT_TRUE(Reserve(alice_, Reservation1(now_s + 60, 3600, 10), &r).ok());
  ASSERT_TRUE(Reserve(alice_, Reservation1(now_s + 60, 3600, 10), &r).ok());
  grpc::Status g = Reserve(alice_, Reservation1(now_s + 60, 3600, 10), &r);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(Has(g.error_message(), "at most 2")) << g.error_message();
  ReservationList list;
  ASSERT_TRUE(Reservations(bob_, "", &list).ok());
  EXPECT_EQ(list.reservations_size(), 0);
  EXPECT_EQ(Reservations(bob_, "alice", &list).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(Reserve(bob_, Reservation1(now_s + 60, 3600, 10), &r).ok());  // bob's own quota
}

// Placements: priority 0-9, a duration of at most a week, a reservation id of 1-128 printable
// characters (and one that is the tenant's).
TEST_F(CapacityTest, HostilePlacementRequestsAreRefused) {
  ASSERT_TRUE(RegisterHost({}).ok());
  Placement p;
  for (int priority : {-1, 10, INT32_MAX}) {
    EXPECT_EQ(PlaceAs(alice_, Ask(G, 25, 0, priority), &p).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT)
        << priority;
  }
  PlaceRequest req = Ask(G, 25, 0);
  req.set_duration_seconds(7 * 86400 + 1);
  EXPECT_EQ(PlaceAs(alice_, req, &p).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  req = Ask(G, 25, 0);
  req.set_reservation_id(std::string(200, 'r'));
  EXPECT_EQ(PlaceAs(alice_, req, &p).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  req.set_reservation_id("resv with spaces");
  EXPECT_EQ(PlaceAs(alice_, req, &p).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  req.set_reservation_id("resv-none");
  EXPECT_EQ(PlaceAs(alice_, req, &p).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Leases(bob_).leases_size(), 0);
}

}  // namespace
}  // namespace rgpu::registry
