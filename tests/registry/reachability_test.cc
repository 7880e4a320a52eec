// A registered server must prove it answers at its URL (issue 13, item 2;
// registry/reachability.h): the registry probes the URL over rgpu's transport and expects the
// HMAC of its nonce under the secret the server registered with. Until then, or when it fails,
// the server's GPUs take no placements.
#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "tests/registry/registry_fixture.h"

namespace rgpu::registry {
namespace {

class ReachabilityTest : public RegistryTest {
 protected:
  void SetUp() override {
    configure_ = [](RegistryOptions* o) {
      // One attempt each, so that a URL where nothing listens fails at once.
      o->probe = [](const std::string& url, const std::string& secret) {
        return ProbeReachability(url, secret, /*window_ms=*/0, /*attempt_ms=*/3000);
      };
    };
    RegistryTest::SetUp();
    provider_ = CreateKey(true, "acme");
    tenant_ = CreateKey(false, "alice");
  }
  std::string provider_, tenant_;
};

TEST_F(ReachabilityTest, AServerWhereNothingListensTakesNoPlacements) {
  RegisterReply reply;
  ASSERT_TRUE(Register(provider_, "fake", {Spec(0, 80 * G)}, &reply, "tcp://127.0.0.1:1").ok());
  const GpuStatus gpu = Gpu("fake/0");
  EXPECT_EQ(gpu.state(), "unreachable");
  EXPECT_NE(gpu.state_reason().find("connect"), std::string::npos) << gpu.state_reason();
  Placement p;
  grpc::Status g = Place(tenant_, G, 25, 0, &p);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << g.error_message();
  // Its heartbeats say why, so that its operator can fix it.
  g = Heartbeat(provider_, "fake");
  EXPECT_EQ(g.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(g.error_message().find("tcp://127.0.0.1:1"), std::string::npos) << g.error_message();
}

// One provider key cannot fill the registry: a registration of 100,000 GPUs held the registry's
// lock for seconds, grew its memory by hundreds of MB and made every GpuList answer too large to
// send. GPUs per server, their indices and strings, and servers per provider are bounded.
TEST_F(ReachabilityTest, ARegistrationPastItsBoundsIsRefused) {
  RegisterReply reply;
  std::vector<GpuSpec> many;
  for (uint32_t i = 0; i <= kMaxGpusPerServer; ++i) many.push_back(Spec(i, 16 * G));
  grpc::Status g = Register(provider_, "many", many, &reply);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << g.error_message();
  many.pop_back();
  EXPECT_TRUE(Register(provider_, "many", many, &reply).ok());
  EXPECT_EQ(Register(provider_, "far", {Spec(kMaxGpusPerServer, 16 * G)}, &reply).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Register(provider_, "twice", {Spec(1, 16 * G), Spec(1, 16 * G)}, &reply).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  GpuSpec long_model = Spec(0, 16 * G);
  long_model.set_model(std::string(1 << 20, 'm'));
  EXPECT_EQ(Register(provider_, "long", {long_model}, &reply).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  GpuSpec odd_uuid = Spec(0, 16 * G);
  odd_uuid.set_uuid(std::string("GPU-\n\x01", 6));
  EXPECT_EQ(Register(provider_, "odd", {odd_uuid}, &reply).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  for (size_t i = 1; i < kMaxServersPerProvider; ++i) {
    ASSERT_TRUE(Register(provider_, "s" + std::to_string(i), {Spec(0, 16 * G)}, &reply).ok()) << i;
  }
  g = Register(provider_, "one-too-many", {Spec(0, 16 * G)}, &reply);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << g.error_message();
  // A server it has already registers again, and the registry still answers.
  EXPECT_TRUE(Register(provider_, "s1", {Spec(0, 16 * G)}, &reply).ok());
  EXPECT_EQ(GpuState("many/63"), "available");
}

TEST_F(ReachabilityTest, AServerAnsweringWithTheWrongProofTakesNoPlacements) {
  // Something answers at the URL, but not the server that registered (it lacks the secret).
  responder_.set_lie(true);
  RegisterReply reply;
  ASSERT_TRUE(Register(provider_, "host1", {Spec(0, 16 * G)}, &reply).ok());
  EXPECT_EQ(GpuState("host1/0"), "unreachable");
  EXPECT_NE(Gpu("host1/0").state_reason().find("wrong reachability proof"), std::string::npos);
  Placement p;
  EXPECT_EQ(Place(tenant_, G, 25, 0, &p).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Registering again once it answers correctly makes it placeable.
  responder_.set_lie(false);
  ASSERT_TRUE(Register(provider_, "host1", {Spec(0, 16 * G)}, &reply).ok());
  EXPECT_EQ(GpuState("host1/0"), "available");
  EXPECT_TRUE(Place(tenant_, G, 25, 0, &p).ok());
}

TEST_F(ReachabilityTest, ARegistrationWithoutAUrlOrSecretIsRefusedAtOnce) {
  RegisterReply reply;
  grpc::Status g = Register(provider_, "host1", {Spec(0, G)}, &reply, "http://example.com/");
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(g.error_message().find("tcp://HOST:PORT"), std::string::npos);
  g = Register(provider_, "host1", {Spec(0, G)}, &reply, "tcp://127.0.0.1:0");
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  g = Register(provider_, "host1", {Spec(0, G)}, &reply, "", "short");
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(g.error_message().find("reachability secret"), std::string::npos);
  EXPECT_EQ(GpuState("host1/0"), "missing");
  // A GPU advertising a host link faster than any that exists is refused (its bandwidth bounds
  // the bytes its usage records may claim).
  GpuSpec fast = Spec(0, G);
  fast.set_bandwidth_gbps(1e12);
  ASSERT_TRUE(Register(provider_, "host1", {fast, Spec(1, G)}, &reply).ok());
  ASSERT_EQ(reply.gpus_size(), 2);
  EXPECT_FALSE(reply.gpus(0).accepted());
  EXPECT_NE(reply.gpus(0).reason().find("beyond any host link"), std::string::npos);
  EXPECT_TRUE(reply.gpus(1).accepted());
}

TEST_F(ReachabilityTest, AProofOutlivesARegistryRestart) {
  RegisterReply reply;
  ASSERT_TRUE(Register(provider_, "host1", {Spec(0, 16 * G)}, &reply).ok());
  const int answered = responder_.answered();
  ASSERT_GE(answered, 1);
  Stop();
  Start();
  EXPECT_EQ(GpuState("host1/0"), "offline");  // until its first heartbeat
  ASSERT_TRUE(Heartbeat(provider_, "host1").ok());
  EXPECT_EQ(GpuState("host1/0"), "available");
  EXPECT_EQ(responder_.answered(), answered);  // not probed again
}

TEST_F(ReachabilityTest, AStoreWithoutTheProofAsksTheServerToRegisterAgain) {
  RegisterReply reply;
  ASSERT_TRUE(Register(provider_, "host1", {Spec(0, 16 * G)}, &reply).ok());
  Stop();
  {
    // As a store written before servers proved their URLs.
    std::unique_ptr<Db> db;
    ASSERT_TRUE(OpenSqlite(dir_ + "/registry.db", &db).ok());
    ASSERT_TRUE(db->Exec("DELETE FROM servers").ok());
  }
  Start();
  grpc::Status g = Heartbeat(provider_, "host1");
  EXPECT_EQ(g.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(g.error_message().find("register again"), std::string::npos);
  ASSERT_TRUE(Register(provider_, "host1", {Spec(0, 16 * G)}, &reply).ok());
  EXPECT_EQ(GpuState("host1/0"), "available");
}

TEST_F(ReachabilityTest, OneProviderCannotHoldTheProbeThread) {
  // Probes that do not finish until the test says so (a URL that answers slowly); each notes
  // the secret it was given, which names its server here.
  auto gate = std::make_shared<std::pair<std::mutex, std::condition_variable>>();
  auto open = std::make_shared<bool>(false);
  auto order = std::make_shared<std::vector<std::string>>();
  configure_ = [gate, open, order](RegistryOptions* o) {
    o->probe = [gate, open, order](const std::string&, const std::string& secret) {
      std::unique_lock<std::mutex> lock(gate->first);
      order->push_back(secret);
      gate->second.wait(lock, [&] { return *open; });
      return Status::Ok();
    };
  };
  Stop();
  Start();
  auto secret_of = [](const std::string& name) { return "reachability-secret-of-" + name; };
  auto register_async = [&](const std::string& name) {
    RegisterRequest req;
    req.set_server_name(name);
    req.set_server_url(responder_.url());
    req.set_reachability_secret(secret_of(name));
    *req.add_gpus() = Spec(0, 16 * G);
    RegisterReply reply;
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-provider-key", provider_);
    return stub_->Register(&ctx, req, &reply);
  };
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(register_async("slow" + std::to_string(i)).ok());
  grpc::Status g = register_async("slow16");
  EXPECT_EQ(g.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(g.error_message().find("being checked"), std::string::npos) << g.error_message();
  // Another provider's server is still taken.
  const std::string other = CreateKey(true, "other");
  RegisterRequest req;
  req.set_server_name("elsewhere");
  req.set_server_url(responder_.url());
  req.set_reachability_secret(secret_of("elsewhere"));
  *req.add_gpus() = Spec(0, 16 * G);
  RegisterReply reply;
  grpc::ClientContext ctx;
  Key(&ctx, "x-rgpu-provider-key", other);
  EXPECT_TRUE(stub_->Register(&ctx, req, &reply).ok());
  {
    std::lock_guard<std::mutex> lock(gate->first);
    *open = true;
  }
  gate->second.notify_all();
  service_->WaitForProbes();
  EXPECT_EQ(GpuState("slow0/0"), "available");
  EXPECT_EQ(GpuState("elsewhere/0"), "available");
  // ... and probed within the next two, not after the first provider's fifteen waiting ones.
  {
    std::lock_guard<std::mutex> lock(gate->first);
    ASSERT_EQ(order->size(), 17u);
    const auto at = std::find(order->begin(), order->end(), secret_of("elsewhere"));
    EXPECT_LE(at - order->begin(), 2);
  }
  EXPECT_TRUE(register_async("slow16").ok());
}

}  // namespace
}  // namespace rgpu::registry
