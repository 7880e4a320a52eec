// TestRegistry: a RegistryService on a real gRPC port over a SQLite file, on the real clock, for
// tests of rgpu-server's side (server/registry_agent.h) that run the agent's own thread. Helpers
// make operator keys and placements the way the CLI does.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "proto/crypto.h"
#include "registry/service.h"

namespace rgpu::registry {

constexpr const char* kTestAdminKey = "test-operator-key-0123456789";

class TestRegistry {
 public:
  // Starts the service on `port` (0: any) over the SQLite file in `dir` (which holds key.pem and
  // key.pub), with the price list `prices` (PriceList::Parse's format; "" = the default).
  TestRegistry(const std::string& dir, int port, uint32_t heartbeat_ms = 2000,
               const std::string& prices = "") {
    RegistryOptions options;
    options.signing_key_path = dir + "/key.pem";
    std::ifstream pub(dir + "/key.pub");
    std::stringstream text;
    text << pub.rdbuf();
    options.public_key_pem = text.str();
    options.admin_key = kTestAdminKey;
    options.heartbeat_ms = heartbeat_ms;
    if (!prices.empty()) EXPECT_TRUE(PriceList::Parse(prices, &options.prices).ok());
    std::unique_ptr<Db> db;
    EXPECT_TRUE(OpenSqlite(dir + "/registry.db", &db).ok());
    std::unique_ptr<Store> store;
    EXPECT_TRUE(Store::Open(std::move(db), &store).ok());
    EXPECT_TRUE(RegistryService::Create(std::move(store), options, &service_).ok());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    stub_ = Stub();
  }
  ~TestRegistry() {
    service_->Shutdown();
    server_->Shutdown();
  }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  RegistryService* service() { return service_.get(); }
  std::unique_ptr<registry::Registry::Stub> Stub() {
    return registry::Registry::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                                           grpc::InsecureChannelCredentials()));
  }
  // A new provider's or tenant's key.
  std::string CreateKey(bool provider, const std::string& name) {
    NameRequest req;
    req.set_name(name);
    KeyReply reply;
    grpc::ClientContext ctx;
    ctx.AddMetadata("x-rgpu-admin-key", kTestAdminKey);
    grpc::Status g = provider ? stub_->CreateProvider(&ctx, req, &reply)
                              : stub_->CreateTenant(&ctx, req, &reply);
    EXPECT_TRUE(g.ok()) << g.error_message();
    return reply.key();
  }
  // A placement for the tenant with `api_key`, with a fresh holder key.
  grpc::Status Place(const std::string& api_key, uint64_t memory, Placement* placement) {
    PlaceRequest req;
    req.set_memory_bytes(memory);
    std::string holder_private, holder_public;
    EXPECT_TRUE(GenerateEd25519(&holder_private, &holder_public).ok());
    req.set_holder_key(holder_public);
    grpc::ClientContext ctx;
    ctx.AddMetadata("x-rgpu-api-key", api_key);
    auto reader = stub_->Place(&ctx, req);
    PlaceUpdate update;
    while (reader->Read(&update)) {
      if (update.has_placement()) *placement = update.placement();
    }
    return reader->Finish();
  }
  // Usage as the operator sees it.
  UsageReply Usage() {
    UsageReply usage;
    grpc::ClientContext ctx;
    ctx.AddMetadata("x-rgpu-admin-key", kTestAdminKey);
    EXPECT_TRUE(stub_->Usage(&ctx, UsageQuery(), &usage).ok());
    return usage;
  }
  std::unique_ptr<registry::Registry::Stub> stub_;

 private:
  std::unique_ptr<RegistryService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace rgpu::registry
