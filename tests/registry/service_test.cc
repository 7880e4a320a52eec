// RegistryService (registry/service.h) behind a real gRPC server on loopback, with a clock the
// test moves by hand, so that liveness is tested without waiting or timing thresholds
// (tests/registry/registry_fixture.h): registration, placement, liveness, revocation, the queue
// and billing as honest servers and tenants use them.
#include <thread>

#include "tests/registry/registry_fixture.h"

namespace rgpu::registry {
namespace {

using ServiceTest = RegistryTest;

TEST_F(ServiceTest, RegistrationChecksCompatibility) {
  const std::string key = CreateKey(true, "acme");
  RegisterReply reply;
  ASSERT_TRUE(Register(key, "host1",
                       {Spec(0, 40 * G), Spec(1, 40 * G, 11080), Spec(2, 40 * G, 12040, 6)}, &reply)
                  .ok());
  ASSERT_EQ(reply.gpus_size(), 3);
  EXPECT_TRUE(reply.gpus(0).accepted());
  EXPECT_FALSE(reply.gpus(0).resource_token().empty());
  EXPECT_EQ(reply.gpus(0).gpu_id(), "host1/0");
  EXPECT_FALSE(reply.gpus(1).accepted());
  EXPECT_NE(reply.gpus(1).reason().find("driver version 11080 is older than the minimum 12000"),
            std::string::npos)
      << reply.gpus(1).reason();
  EXPECT_FALSE(reply.gpus(2).accepted());
  EXPECT_NE(reply.gpus(2).reason().find("compute capability 6.0"), std::string::npos);
  EXPECT_EQ(reply.heartbeat_ms(), 1000u);
  EXPECT_NE(reply.public_key_pem().find("PUBLIC KEY"), std::string::npos);
  EXPECT_EQ(GpuState("host1/0"), "available");
  EXPECT_EQ(GpuState("host1/1"), "missing");
  // Bad credentials and names are refused clearly.
  EXPECT_EQ(Register("wrong", "host1", {Spec(0, G)}, &reply).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Register(key, "bad name!", {Spec(0, G)}, &reply).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  const std::string other = CreateKey(true, "other");
  grpc::Status g = Register(other, "host1", {Spec(0, G)}, &reply);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(g.error_message().find("belongs to another provider"), std::string::npos);
}

TEST_F(ServiceTest, PlacementSignsATokenTheServerCanVerify) {
  const std::string provider = CreateKey(true, "acme");
  const std::string tenant = CreateKey(false, "alice");
  RegisterReply reply;
  ASSERT_TRUE(Register(provider, "host1", {Spec(0, 16 * G), Spec(1, 80 * G)}, &reply).ok());
  Placement p;
  grpc::Status g = Place(tenant, 12 * G, 50, 0, &p);
  ASSERT_TRUE(g.ok()) << g.error_message();
  // The default policy (reach) keeps GPUs usable for the requests it has seen: on the 16 GiB GPU
  // this one would leave 4 GiB beside half the compute, which no such request could use; on
  // the 80 GiB one nothing is stranded. (Best fit took the tighter 16 GiB GPU.)
  EXPECT_EQ(p.gpu_id(), "host1/1");
  EXPECT_EQ(p.server_url(), responder_.url());
  TokenVerifier verifier;
  ASSERT_TRUE(TokenVerifier::FromPublicKeyFile(dir_ + "/key.pub", &verifier).ok());
  wire::TokenClaims claims;
  Status s = verifier.Verify(p.token(), &claims);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(claims.tenant(), "alice");
  EXPECT_EQ(claims.server(), "host1");
  ASSERT_EQ(claims.gpus_size(), 1);
  EXPECT_EQ(claims.gpus(0), 1u);
  EXPECT_EQ(claims.lease_id(), p.lease_id());
  EXPECT_EQ(claims.memory_quota(), 12 * G);
  // The token dies with its lease: same lifetime (Place's ttl, default 3600 s).
  EXPECT_EQ(claims.expires_unix(), now_.load() / 1000 + 3600);
  EXPECT_EQ(p.expires_unix(), claims.expires_unix());
  // The request is checked; a request nothing could ever satisfy is answered at once.
  EXPECT_EQ(Place("wrong", G, 25, 0, &p).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Place(tenant, G, 101, 0, &p).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Place(tenant, G, 25, 0, &p, nullptr, 10).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  g = Place(tenant, 100 * G, 25, 0, &p);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(g.error_message().find("no registered GPU"), std::string::npos);
}

TEST_F(ServiceTest, MissedHeartbeatsTakeAServerOfflineUntilItReturns) {
  const std::string provider = CreateKey(true, "acme");
  const std::string tenant = CreateKey(false, "alice");
  RegisterReply reply;
  ASSERT_TRUE(Register(provider, "host1", {Spec(0, 16 * G)}, &reply).ok());
  now_ += 3000;  // exactly three intervals: still online
  service_->Sweep();
  EXPECT_EQ(GpuState("host1/0"), "available");
  now_ += 1;  // the third heartbeat is missed
  service_->Sweep();
  EXPECT_EQ(GpuState("host1/0"), "offline");
  Placement p;
  std::vector<uint32_t> queued;
  grpc::Status g = Place(tenant, G, 25, 0, &p, &queued);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(g.error_message().find("no GPU free: queue position 1 of 1"), std::string::npos)
      << g.error_message();
  ASSERT_TRUE(Heartbeat(provider, "host1").ok());
  EXPECT_EQ(GpuState("host1/0"), "available");
  EXPECT_TRUE(Place(tenant, G, 25, 0, &p).ok());
  EXPECT_EQ(Heartbeat(provider, "host9").error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServiceTest, RevokingAProviderStopsPlacementsAtOnce) {
  const std::string provider = CreateKey(true, "acme");
  const std::string tenant = CreateKey(false, "alice");
  RegisterReply reply;
  ASSERT_TRUE(Register(provider, "host1", {Spec(0, 16 * G)}, &reply).ok());
  Placement running;  // a session already running when the provider is revoked
  ASSERT_TRUE(Place(tenant, G, 25, 0, &running).ok());
  NameRequest req;
  req.set_name("acme");
  Empty empty;
  {
    grpc::ClientContext ctx;  // without the admin key
    EXPECT_EQ(stub_->RevokeProvider(&ctx, req, &empty).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  grpc::ClientContext ctx;
  Key(&ctx, "x-rgpu-admin-key", kAdminKey);
  ASSERT_TRUE(stub_->RevokeProvider(&ctx, req, &empty).ok());
  EXPECT_EQ(GpuState("host1/0"), "revoked");
  Placement p;
  EXPECT_EQ(Place(tenant, G, 25, 0, &p).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  grpc::Status g = Heartbeat(provider, "host1");
  EXPECT_EQ(g.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(g.error_message().find("revoked"), std::string::npos);
  // Sessions already running are still metered and billed.
  ReportUsageReply ack;
  now_ += 1000;
  ASSERT_TRUE(
      Report(provider, {Record("late", "alice", running, now_ - 1000, now_, 3, true)}, &ack).ok());
  EXPECT_EQ(ack.stored(), 1u) << Reasons(ack);
  // Still revoked after a restart.
  Stop();
  Start();
  EXPECT_EQ(GpuState("host1/0"), "revoked");
}

TEST_F(ServiceTest, AFullGpuQueuesRequestsUntilASessionEnds) {
  const std::string provider = CreateKey(true, "acme");
  const std::string alice = CreateKey(false, "alice");
  const std::string bob = CreateKey(false, "bob");
  RegisterReply reply;
  ASSERT_TRUE(Register(provider, "host1", {Spec(0, 16 * G)}, &reply).ok());
  Placement first;
  ASSERT_TRUE(Place(alice, G, 100, 0, &first).ok());  // the whole GPU's compute
  Placement second;
  std::vector<uint32_t> queued;
  grpc::Status waited;
  std::atomic<uint32_t> was_queued{0};
  std::thread waiter([&] { waited = Place(bob, G, 50, 600, &second, &queued, 0, &was_queued); });
  // Once bob is queued, alice's session ends and frees the GPU.
  ReportUsageReply ack;
  while (was_queued.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  now_ += 10;
  ASSERT_TRUE(
      Report(provider, {Record("r1", "alice", first, now_ - 10, now_, 5, true)}, &ack).ok());
  EXPECT_EQ(ack.stored(), 1u) << Reasons(ack);
  waiter.join();
  ASSERT_TRUE(waited.ok()) << waited.error_message();
  EXPECT_EQ(queued, std::vector<uint32_t>{1});
  EXPECT_EQ(second.gpu_id(), "host1/0");
}

TEST_F(ServiceTest, HigherPriorityIsPlacedFirst) {
  const std::string provider = CreateKey(true, "acme");
  const std::string alice = CreateKey(false, "alice");
  const std::string bob = CreateKey(false, "bob");
  const std::string carol = CreateKey(false, "carol");
  RegisterReply reply;
  ASSERT_TRUE(Register(provider, "host1", {Spec(0, 16 * G)}, &reply).ok());
  Placement first, low, high;
  ASSERT_TRUE(Place(alice, G, 100, 0, &first).ok());
  std::vector<uint32_t> low_positions, high_positions;
  std::atomic<uint32_t> low_queued{0}, high_queued{0};
  grpc::Status low_status, high_status;
  std::thread low_waiter(
      [&] { low_status = Place(bob, G, 100, 600, &low, &low_positions, 0, &low_queued); });
  while (low_queued.load() != 1) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::thread high_waiter(
      [&] { high_status = Place(carol, G, 100, 600, &high, &high_positions, 7, &high_queued); });
  // Carol goes ahead of bob.
  while (high_queued.load() != 1 || low_queued.load() != 2) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Alice's session ends: carol, who came later at a higher priority, gets the GPU.
  ReportUsageReply ack;
  now_ += 10;
  ASSERT_TRUE(
      Report(provider, {Record("r1", "alice", first, now_ - 10, now_, 5, true)}, &ack).ok());
  EXPECT_EQ(ack.stored(), 1u) << Reasons(ack);
  high_waiter.join();
  ASSERT_TRUE(high_status.ok()) << high_status.error_message();
  EXPECT_EQ(high_positions, std::vector<uint32_t>{1});
  // Then carol's ends and bob, who was moved to second place, gets it.
  now_ += 10;
  ASSERT_TRUE(Report(provider, {Record("r2", "carol", high, now_ - 10, now_, 5, true)}, &ack).ok());
  EXPECT_EQ(ack.stored(), 1u) << Reasons(ack);
  low_waiter.join();
  ASSERT_TRUE(low_status.ok()) << low_status.error_message();
  ASSERT_GE(low_positions.size(), 2u);
  EXPECT_EQ(low_positions[0], 1u);
  EXPECT_EQ(low_positions[1], 2u);
}

// Within a priority the queue goes by declared duration (registry/queue_order.h): a request
// declaring 10 minutes that came after one declaring 2 hours goes ahead of it.
TEST_F(ServiceTest, TheShorterDeclaredDurationIsPlacedFirst) {
  const std::string provider = CreateKey(true, "acme");
  const std::string alice = CreateKey(false, "alice");
  const std::string bob = CreateKey(false, "bob");
  const std::string carol = CreateKey(false, "carol");
  RegisterReply reply;
  ASSERT_TRUE(Register(provider, "host1", {Spec(0, 16 * G)}, &reply).ok());
  Placement first, long_one, short_one;
  ASSERT_TRUE(Place(alice, G, 100, 0, &first).ok());
  auto request = [](uint32_t duration_s) {
    PlaceRequest req;
    req.set_memory_bytes(G);
    req.set_compute_share(100);
    req.set_wait_seconds(600);
    req.set_duration_seconds(duration_s);
    std::string holder_private, holder_public;
    EXPECT_TRUE(GenerateEd25519(&holder_private, &holder_public).ok());
    req.set_holder_key(holder_public);
    return req;
  };
  std::vector<uint32_t> long_positions, short_positions;
  std::atomic<uint32_t> long_queued{0}, short_queued{0};
  grpc::Status long_status, short_status;
  std::thread long_waiter([&] {
    long_status = PlaceRequestAs(bob, request(2 * 3600), &long_one, &long_positions, &long_queued);
  });
  while (long_queued.load() != 1) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::thread short_waiter([&] {
    short_status = PlaceRequestAs(carol, request(600), &short_one, &short_positions, &short_queued);
  });
  // Carol, who declared 10 minutes, goes ahead of bob's 2 hours.
  while (short_queued.load() != 1 || long_queued.load() != 2) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ReportUsageReply ack;
  now_ += 10;
  ASSERT_TRUE(
      Report(provider, {Record("r1", "alice", first, now_ - 10, now_, 5, true)}, &ack).ok());
  EXPECT_EQ(ack.stored(), 1u) << Reasons(ack);
  short_waiter.join();
  ASSERT_TRUE(short_status.ok()) << short_status.error_message();
  EXPECT_EQ(short_positions, std::vector<uint32_t>{1});
  now_ += 10;
  ASSERT_TRUE(
      Report(provider, {Record("r2", "carol", short_one, now_ - 10, now_, 5, true)}, &ack).ok());
  EXPECT_EQ(ack.stored(), 1u) << Reasons(ack);
  long_waiter.join();
  ASSERT_TRUE(long_status.ok()) << long_status.error_message();
  ASSERT_GE(long_positions.size(), 2u);
  EXPECT_EQ(long_positions[0], 1u);
  EXPECT_EQ(long_positions[1], 2u);
}

// A declared duration is a time limit: the lease (and its token) end with it, so declaring a short
// job to pass longer ones in the queue does not buy a long one.
TEST_F(ServiceTest, ADeclaredDurationEndsTheLease) {
  const std::string provider = CreateKey(true, "acme");
  const std::string alice = CreateKey(false, "alice");
  RegisterReply reply;
  ASSERT_TRUE(Register(provider, "host1", {Spec(0, 16 * G)}, &reply).ok());
  PlaceRequest req;
  req.set_memory_bytes(G);
  req.set_compute_share(50);
  req.set_ttl_seconds(3600);
  req.set_duration_seconds(600);
  std::string holder_private, holder_public;
  ASSERT_TRUE(GenerateEd25519(&holder_private, &holder_public).ok());
  req.set_holder_key(holder_public);
  Placement placed;
  ASSERT_TRUE(PlaceRequestAs(alice, req, &placed).ok());
  EXPECT_EQ(placed.expires_unix(), now_.load() / 1000 + 600);
  // Without one, the lease lasts its lifetime.
  req.set_duration_seconds(0);
  Placement plain;
  ASSERT_TRUE(PlaceRequestAs(alice, req, &plain).ok());
  EXPECT_EQ(plain.expires_unix(), now_.load() / 1000 + 3600);
}

TEST_F(ServiceTest, UsageIsCountedOnceAndBilled) {
  const std::string provider = CreateKey(true, "acme");
  const std::string alice = CreateKey(false, "alice");
  RegisterReply reply;
  ASSERT_TRUE(Register(provider, "host1", {Spec(0, 16 * G)}, &reply).ok());
  Placement p;
  ASSERT_TRUE(Place(alice, G, 25, 0, &p).ok());
  const int64_t t = now_;
  now_ += 4000;
  ReportUsageReply ack;
  ASSERT_TRUE(Report(provider,
                     {Record("a", "alice", p, t, t + 1000, 10),
                      Record("b", "alice", p, t + 1000, t + 3000, 20)},
                     &ack)
                  .ok());
  EXPECT_EQ(ack.stored(), 2u) << Reasons(ack);
  // The same batch again (a lost reply), then again after a restart: nothing is counted twice.
  ASSERT_TRUE(Report(provider,
                     {Record("a", "alice", p, t, t + 1000, 10),
                      Record("b", "alice", p, t + 1000, t + 3000, 20)},
                     &ack)
                  .ok());
  EXPECT_EQ(ack.stored(), 0u);
  EXPECT_EQ(ack.duplicates(), 2u);
  EXPECT_EQ(ack.refused(), 0u) << Reasons(ack);
  Stop();
  Start();
  ASSERT_TRUE(Report(provider,
                     {Record("b", "alice", p, t + 1000, t + 3000, 20),
                      Record("c", "alice", p, t + 3000, t + 4000, 5)},
                     &ack)
                  .ok());
  EXPECT_EQ(ack.stored(), 1u) << Reasons(ack);
  EXPECT_EQ(ack.duplicates(), 1u);
  // Records for a server of another provider, and malformed ones, are refused one by one.
  const std::string other = CreateKey(true, "other");
  ASSERT_TRUE(Report(other, {Record("x", "alice", p, t, t, 1)}, &ack).ok());
  EXPECT_EQ(ack.stored(), 0u);
  ASSERT_EQ(ack.refused(), 1u);
  EXPECT_NE(ack.refusals(0).reason().find("not registered to provider other"), std::string::npos)
      << Reasons(ack);
  ASSERT_TRUE(Report(provider, {Record("", "alice", p, t, t, 1)}, &ack).ok());
  EXPECT_EQ(ack.refused(), 1u);

  now_ += 10000;
  UsageQuery q;
  q.set_tenant("alice");
  Invoice invoice;
  {
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-api-key", alice);  // a tenant may read its own bill
    grpc::Status g = stub_->Bill(&ctx, q, &invoice);
    ASSERT_TRUE(g.ok()) << g.error_message();
  }
  ASSERT_EQ(invoice.lines_size(), 1);  // one session (its lease was never held unused)
  EXPECT_DOUBLE_EQ(invoice.lines(0).gpu_ms(), 4000);
  EXPECT_DOUBLE_EQ(invoice.total(), 4.0);  // 4000 GPU ms x 0.001
  UsageReply usage;
  {
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-admin-key", kAdminKey);
    ASSERT_TRUE(stub_->Usage(&ctx, q, &usage).ok());
  }
  ASSERT_EQ(usage.sessions_size(), 1);
  EXPECT_EQ(usage.sessions(0).calls(), 35u);
  EXPECT_EQ(usage.sessions(0).records(), 3u);
  // Another tenant's key cannot read alice's bill; earnings are the provider's.
  const std::string bob = CreateKey(false, "bob");
  {
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-api-key", bob);
    EXPECT_EQ(stub_->Bill(&ctx, q, &invoice).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  UsageQuery eq;
  Invoice earnings;
  grpc::ClientContext ctx;
  Key(&ctx, "x-rgpu-provider-key", provider);
  ASSERT_TRUE(stub_->Earnings(&ctx, eq, &earnings).ok());
  EXPECT_EQ(earnings.subject(), "acme");
  EXPECT_DOUBLE_EQ(earnings.earnings(), 4.0);  // provider_share defaults to 1
}

}  // namespace
}  // namespace rgpu::registry
