// Operator actions always need the operator credential (issue 13, item 3): the service refuses
// to start without one, every operator call without it (or with a wrong one) is refused, the
// key file rgpu-registry creates is readable by its owner only, and plaintext is for loopback.
#include <sys/stat.h>

#include "registry/listen_address.h"
#include "registry/operator_key.h"
#include "tests/registry/registry_fixture.h"

namespace rgpu::registry {
namespace {

using OperatorTest = RegistryTest;

TEST_F(OperatorTest, TheServiceNeedsAnOperatorKey) {
  Stop();
  RegistryOptions options;
  options.signing_key_path = dir_ + "/key.pem";
  std::unique_ptr<Db> db;
  ASSERT_TRUE(OpenSqlite(dir_ + "/other.db", &db).ok());
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(std::move(db), &store).ok());
  std::unique_ptr<RegistryService> service;
  Status s = RegistryService::Create(std::move(store), options, &service);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("operator key"), std::string::npos) << s.message();
}

TEST_F(OperatorTest, OperatorCallsWithoutTheKeyAreRefused) {
  const std::string tenant = CreateKey(false, "alice");
  const std::string provider = CreateKey(true, "acme");
  for (const std::string& key : {std::string(), std::string("wrong"), std::string(kAdminKey) + "x",
                                 std::string(kAdminKey, 10)}) {
    auto ctx = [&key] {
      auto c = std::make_unique<grpc::ClientContext>();
      if (!key.empty()) c->AddMetadata("x-rgpu-admin-key", key);
      return c;
    };
    NameRequest name;
    name.set_name("mallory");
    KeyReply key_reply;
    EXPECT_EQ(stub_->CreateTenant(ctx().get(), name, &key_reply).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(stub_->CreateProvider(ctx().get(), name, &key_reply).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    TenantList tenants;
    EXPECT_EQ(stub_->ListTenants(ctx().get(), Empty(), &tenants).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    ProviderList providers;
    EXPECT_EQ(stub_->ListProviders(ctx().get(), Empty(), &providers).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    NameRequest acme;
    acme.set_name("acme");
    Empty empty;
    EXPECT_EQ(stub_->RevokeProvider(ctx().get(), acme, &empty).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    UsageQuery q;
    q.set_tenant("alice");
    Invoice invoice;
    EXPECT_EQ(stub_->Bill(ctx().get(), q, &invoice).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    UsageReply usage;
    EXPECT_EQ(stub_->Usage(ctx().get(), UsageQuery(), &usage).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    UsageQuery e;
    e.set_provider("acme");
    EXPECT_EQ(stub_->Earnings(ctx().get(), e, &invoice).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    GpuList gpus;
    EXPECT_EQ(stub_->ListGpus(ctx().get(), Empty(), &gpus).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  // Nothing changed: the provider is not revoked and no tenant was made.
  ProviderList providers;
  grpc::ClientContext ctx;
  Key(&ctx, "x-rgpu-admin-key", kAdminKey);
  ASSERT_TRUE(stub_->ListProviders(&ctx, Empty(), &providers).ok());
  ASSERT_EQ(providers.providers_size(), 1);
  EXPECT_FALSE(providers.providers(0).revoked());
  TenantList tenants;
  grpc::ClientContext ctx2;
  Key(&ctx2, "x-rgpu-admin-key", kAdminKey);
  ASSERT_TRUE(stub_->ListTenants(&ctx2, Empty(), &tenants).ok());
  EXPECT_EQ(tenants.tenants_size(), 1);
}

TEST(OperatorKey, IsCreatedForItsOwnerOnlyAndReused) {
  char dir[] = "/tmp/rgpu-opkey-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/registry.db.admin-key";
  std::string key, again;
  bool created = false;
  ASSERT_TRUE(LoadOrCreateOperatorKey(path, &key, &created).ok());
  EXPECT_TRUE(created);
  EXPECT_GE(key.size(), 32u);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_TRUE(LoadOrCreateOperatorKey(path, &again, &created).ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(again, key);
  // A key file others may read is refused, and says how to fix it.
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  Status s = LoadOrCreateOperatorKey(path, &again, &created);
  EXPECT_EQ(s.code(), Status::Code::kPermissionDenied);
  EXPECT_NE(s.message().find("chmod 600"), std::string::npos) << s.message();
  // So is a symbolic link (someone else's file could be behind it).
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  const std::string link = std::string(dir) + "/link";
  ASSERT_EQ(symlink(path.c_str(), link.c_str()), 0);
  EXPECT_FALSE(LoadOrCreateOperatorKey(link, &again, &created).ok());
  std::string command = "rm -rf " + std::string(dir);
  (void)!system(command.c_str());
}

TEST(ListenAddress, PlaintextIsForLoopbackOnly) {
  EXPECT_TRUE(IsLoopbackListen("127.0.0.1:7070"));
  EXPECT_TRUE(IsLoopbackListen("127.1.2.3:0"));
  EXPECT_TRUE(IsLoopbackListen("localhost:7070"));
  EXPECT_TRUE(IsLoopbackListen("[::1]:7070"));
  EXPECT_TRUE(IsLoopbackListen("unix:/run/rgpu/registry.sock"));
  EXPECT_FALSE(IsLoopbackListen("0.0.0.0:7070"));
  EXPECT_FALSE(IsLoopbackListen("[::]:7070"));
  EXPECT_FALSE(IsLoopbackListen(":7070"));
  EXPECT_FALSE(IsLoopbackListen("10.1.2.3:7070"));
  EXPECT_FALSE(IsLoopbackListen("no-such-host.invalid:7070"));
}

}  // namespace
}  // namespace rgpu::registry
