// RegistryTest: RegistryService (registry/service.h) behind a real gRPC server on loopback, over
// a SQLite store in a temporary directory, with a clock the test moves by hand (so that
// liveness, lease lifetimes and claim timeouts are tested without waiting or timing
// thresholds), and a ProbeResponder answering the reachability probes of the servers the test
// registers. Helpers speak the RPCs the way rgpu-server, rgpu and the operator do.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "proto/crypto.h"
#include "proto/signed_token.h"
#include "registry/service.h"
#include "tests/registry/probe_responder.h"

namespace rgpu::registry {

constexpr uint64_t G = 1ull << 30;
constexpr const char* kAdminKey = "admin-secret-0123456789";

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/rgpu-service-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    ASSERT_TRUE(GenerateTokenKeys(dir_ + "/key.pem", dir_ + "/key.pub").ok());
    ASSERT_FALSE(responder_.url().empty());
    Start();
  }
  void TearDown() override {
    Stop();
    std::string command = "rm -rf " + dir_;
    (void)!system(command.c_str());
  }
  // Changes the service's options before each Start (e.g. prices, claim timeout).
  std::function<void(RegistryOptions*)> configure_;

  void Start() {
    RegistryOptions options;
    options.signing_key_path = dir_ + "/key.pem";
    std::ifstream pub(dir_ + "/key.pub");
    std::stringstream text;
    text << pub.rdbuf();
    options.public_key_pem = text.str();
    options.admin_key = kAdminKey;
    options.heartbeat_ms = 1000;
    options.min_driver_version = 12000;
    options.min_compute_capability = 7.0;
    ASSERT_TRUE(PriceList::Parse("default_gpu 0.001 1\n", &options.prices).ok());
    options.now_ms = [this] { return now_.load(); };
    if (configure_) configure_(&options);
    std::unique_ptr<Db> db;
    ASSERT_TRUE(OpenSqlite(dir_ + "/registry.db", &db).ok());
    std::unique_ptr<Store> store;
    ASSERT_TRUE(Store::Open(std::move(db), &store).ok());
    Status s = RegistryService::Create(std::move(store), options, &service_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    stub_ = Registry::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                  grpc::InsecureChannelCredentials()));
  }
  void Stop() {
    if (service_) service_->Shutdown();
    if (server_) server_->Shutdown();
    server_.reset();
    service_.reset();
  }

  static void Key(grpc::ClientContext* ctx, const char* kind, const std::string& key) {
    ctx->AddMetadata(kind, key);
  }
  std::string CreateKey(bool provider, const std::string& name) {
    NameRequest req;
    req.set_name(name);
    KeyReply reply;
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-admin-key", kAdminKey);
    grpc::Status g = provider ? stub_->CreateProvider(&ctx, req, &reply)
                              : stub_->CreateTenant(&ctx, req, &reply);
    EXPECT_TRUE(g.ok()) << g.error_message();
    return reply.key();
  }
  static GpuSpec Spec(uint32_t index, uint64_t memory, int driver = 12040, uint32_t cc = 8) {
    GpuSpec s;
    s.set_index(index);
    s.set_model("NVIDIA A100");
    s.set_memory_bytes(memory);
    s.set_cc_major(cc);
    s.set_driver_version(driver);
    s.set_backend("cuda");
    s.set_bandwidth_gbps(25);
    return s;
  }
  // Registers like rgpu-server (at the responder's URL, with its secret, unless told otherwise)
  // and waits until the registry has probed the URL.
  grpc::Status Register(const std::string& key, const std::string& server,
                        std::vector<GpuSpec> gpus, RegisterReply* reply, std::string url = "",
                        std::string secret = "", const Availability& availability = {}) {
    RegisterRequest req;
    req.set_server_name(server);
    req.set_server_url(url.empty() ? responder_.url() : url);
    req.set_reachability_secret(secret.empty() ? responder_.secret() : secret);
    *req.mutable_availability() = availability;
    for (auto& g : gpus) *req.add_gpus() = g;
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-provider-key", key);
    grpc::Status g = stub_->Register(&ctx, req, reply);
    service_->WaitForProbes();
    return g;
  }
  grpc::Status Heartbeat(const std::string& key, const std::string& server,
                         HeartbeatReply* reply = nullptr, uint64_t cursor = 0,
                         const std::string& epoch = "") {
    HeartbeatRequest req;
    req.set_server_name(server);
    req.set_ended_cursor(cursor);
    req.set_ended_epoch(epoch);
    HeartbeatReply ignored;
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-provider-key", key);
    return stub_->Heartbeat(&ctx, req, reply ? reply : &ignored);
  }
  // Places like `rgpu run` (with a fresh holder key) and returns the final status; `placement`
  // gets the placement, `queued` the positions.
  grpc::Status Place(const std::string& api_key, uint64_t memory, uint32_t share, uint32_t wait,
                     Placement* placement, std::vector<uint32_t>* queued = nullptr,
                     int priority = 0, std::atomic<uint32_t>* position = nullptr,
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
    return PlaceRequestAs(api_key, req, placement, queued, position);
  }
  grpc::Status PlaceRequestAs(const std::string& api_key, const PlaceRequest& req,
                              Placement* placement, std::vector<uint32_t>* queued = nullptr,
                              std::atomic<uint32_t>* position = nullptr) {
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-api-key", api_key);
    auto reader = stub_->Place(&ctx, req);
    PlaceUpdate update;
    while (reader->Read(&update)) {
      if (update.has_queued() && queued) queued->push_back(update.queued().position());
      if (update.has_queued() && position) position->store(update.queued().position());
      if (update.has_placement()) *placement = update.placement();
    }
    return reader->Finish();
  }
  GpuStatus Gpu(const std::string& gpu_id) {
    GpuList list;
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-admin-key", kAdminKey);
    EXPECT_TRUE(stub_->ListGpus(&ctx, Empty(), &list).ok());
    for (const auto& g : list.gpus()) {
      if (g.gpu_id() == gpu_id) return g;
    }
    GpuStatus missing;
    missing.set_state("missing");
    return missing;
  }
  std::string GpuState(const std::string& gpu_id) { return Gpu(gpu_id).state(); }
  // A usage record of session `session` under placement `p` (its server and GPU).
  static UsageRecord Record(const std::string& id, const std::string& tenant, const Placement& p,
                            int64_t start, int64_t end, uint64_t calls = 1, bool ended = false,
                            uint64_t session = 1) {
    UsageRecord r;
    // Record ids begin with their server's name (registry/usage_check.h).
    r.set_record_id(id.starts_with(p.server_name() + ":") ? id : p.server_name() + ":" + id);
    r.set_server_name(p.server_name());
    r.set_gpu_index(p.gpu_index());
    r.set_tenant(tenant);
    r.set_lease_id(p.lease_id());
    r.set_session_id(session);
    r.set_start_ms(start);
    r.set_end_ms(end);
    r.set_calls(calls);
    r.set_session_ended(ended);
    return r;
  }
  grpc::Status Report(const std::string& key, std::vector<UsageRecord> records,
                      ReportUsageReply* reply) {
    ReportUsageRequest req;
    for (auto& r : records) *req.add_records() = r;
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-provider-key", key);
    return stub_->ReportUsage(&ctx, req, reply);
  }
  // The tenant's bill (as the operator reads it) for [from, to) in unix seconds (to 0: now).
  Invoice Bill(const std::string& tenant, int64_t from = 0, int64_t to = 0) {
    UsageQuery q;
    q.set_tenant(tenant);
    q.set_from_unix(from);
    q.set_to_unix(to);
    Invoice invoice;
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-admin-key", kAdminKey);
    grpc::Status g = stub_->Bill(&ctx, q, &invoice);
    EXPECT_TRUE(g.ok()) << g.error_message();
    return invoice;
  }
  // A provider's earnings and a tenant's usage, as the operator reads them (for the period
  // around now).
  Invoice Earnings(const std::string& provider) {
    UsageQuery q;
    q.set_provider(provider);
    Invoice invoice;
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-admin-key", kAdminKey);
    grpc::Status g = stub_->Earnings(&ctx, q, &invoice);
    EXPECT_TRUE(g.ok()) << g.error_message();
    return invoice;
  }
  UsageReply UsageOf(const std::string& tenant) {
    UsageQuery q;
    q.set_tenant(tenant);
    UsageReply usage;
    grpc::ClientContext ctx;
    Key(&ctx, "x-rgpu-admin-key", kAdminKey);
    grpc::Status g = stub_->Usage(&ctx, q, &usage);
    EXPECT_TRUE(g.ok()) << g.error_message();
    return usage;
  }
  // The claims of a token the registry signed (checked against its public key).
  wire::TokenClaims Claims(const std::string& token) {
    TokenVerifier verifier;
    EXPECT_TRUE(TokenVerifier::FromPublicKeyFile(dir_ + "/key.pub", &verifier).ok());
    wire::TokenClaims claims;
    EXPECT_TRUE(verifier.Verify(token, &claims).ok());
    return claims;
  }
  static std::string Reasons(const ReportUsageReply& reply) {
    std::string out;
    for (const auto& r : reply.refusals()) out += r.record_id() + ": " + r.reason() + "\n";
    return out;
  }

  std::string dir_;
  std::atomic<int64_t> now_{1'800'000'000'000};
  ProbeResponder responder_;
  std::unique_ptr<RegistryService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Registry::Stub> stub_;
};

}  // namespace rgpu::registry
