// Store (registry/store.h) on SQLite, and on PostgreSQL when RGPU_TEST_POSTGRES names a server
// (a libpq connection string; tests/registry/with_postgres.sh starts one and sets it).
#include "registry/store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace rgpu::registry {
namespace {

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "postgresql") {
      const char* conninfo = getenv("RGPU_TEST_POSTGRES");
      if (conninfo == nullptr) {
        GTEST_SKIP() << "RGPU_TEST_POSTGRES is not set: PostgreSQL store not tested here "
                        "(ctest runs it through tests/registry/with_postgres.sh)";
      }
      conninfo_ = conninfo;
      std::unique_ptr<Db> db;
      ASSERT_TRUE(OpenPostgres(conninfo_, &db).ok());
      ASSERT_TRUE(db->Exec("DROP TABLE IF EXISTS providers, tenants, gpus, leases, usage, servers, "
                           "usage_sessions")
                      .ok());
    } else {
      char dir[] = "/tmp/rgpu-store-XXXXXX";
      ASSERT_NE(mkdtemp(dir), nullptr);
      dir_ = dir;
    }
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    if (!dir_.empty()) {
      std::string command = "rm -rf " + dir_;
      (void)!system(command.c_str());
    }
  }
  void Reopen() {
    store_.reset();
    std::unique_ptr<Db> db;
    Status s =
        conninfo_.empty() ? OpenSqlite(dir_ + "/registry.db", &db) : OpenPostgres(conninfo_, &db);
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = Store::Open(std::move(db), &store_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  static UsageRow Record(const std::string& id, const std::string& tenant, uint64_t calls,
                         int64_t end_ms) {
    UsageRow row;
    row.provider = "acme";
    row.model = "rgpu softgpu";
    UsageRecord& r = row.record;
    r.set_record_id(id);
    r.set_server_name("host1");
    r.set_tenant(tenant);
    r.set_session_id(1);
    r.set_start_ms(end_ms - 1000);
    r.set_end_ms(end_ms);
    r.set_calls(calls);
    r.set_bytes_in(1ull << 40);  // beyond 32 bits
    r.set_gpu_busy_ms(12.5);
    r.set_memory_gib_seconds(0.125);
    (*r.mutable_calls_by_kind())["LaunchKernelOnStream"] = calls - 1;
    (*r.mutable_calls_by_kind())["MemAlloc"] = 1;
    return row;
  }

  std::string dir_, conninfo_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreTest, NamesAreUniqueAndSurviveReopening) {
  ASSERT_TRUE(store_->AddProvider({"acme", "hash1", false, 100}).ok());
  Status s = store_->AddProvider({"acme", "hash2", false, 100});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("already exists"), std::string::npos) << s.message();
  ASSERT_TRUE(store_->AddTenant({"alice", "hash3", 200}).ok());
  EXPECT_EQ(store_->AddTenant({"alice", "x", 1}).code(), Status::Code::kInvalidArgument);
  ASSERT_TRUE(store_->SetProviderRevoked("acme", true).ok());
  EXPECT_EQ(store_->SetProviderRevoked("nobody", true).code(), Status::Code::kNotFound);
  Reopen();
  std::vector<ProviderRow> providers;
  std::vector<TenantRow> tenants;
  ASSERT_TRUE(store_->LoadProviders(&providers).ok());
  ASSERT_TRUE(store_->LoadTenants(&tenants).ok());
  ASSERT_EQ(providers.size(), 1u);
  EXPECT_EQ(providers[0].key_hash, "hash1");
  EXPECT_TRUE(providers[0].revoked);
  ASSERT_EQ(tenants.size(), 1u);
  EXPECT_EQ(tenants[0].created_unix, 200);
}

TEST_P(StoreTest, GpusAndLeasesRoundTrip) {
  GpuRow g;
  g.gpu_id = "host1/0";
  g.provider = "acme";
  g.server_name = "host1";
  g.server_url = "tcp://127.0.0.1:5000";
  g.spec.set_model("NVIDIA H100 80GB HBM3");
  g.spec.set_memory_bytes(80ull << 30);
  g.spec.set_cc_major(9);
  g.spec.set_bandwidth_gbps(25.5);
  g.spec.set_driver_version(12040);
  g.resource_token = "gpu-1";
  ASSERT_TRUE(store_->PutGpus({g}).ok());
  g.server_url = "tcp://127.0.0.1:6000";  // registering again replaces
  ASSERT_TRUE(store_->PutGpus({g}).ok());
  LeaseRow active{"l1", "alice", "host1/0", "host1", 1ull << 30,     25,  2, 1500,
                  1000, 900000,  0,         0,       "slurm:lab:42", true};
  LeaseRow ended{"l2", "alice", "host1/0", "host1", 1ull << 30, 25, 0,
                 0,    2000,    900000,    0,       0,          "", false};
  LeaseRow expired{"l3", "bob", "host1/0", "host1", 1ull << 30, 25, 0,
                   0,    3000,  4000,      0,       0,          "", false};
  ASSERT_TRUE(store_->AddLease(active).ok());
  ASSERT_TRUE(store_->AddLease(ended).ok());
  ASSERT_TRUE(store_->AddLease(expired).ok());
  ASSERT_TRUE(store_->ReleaseLease("l2", 5000).ok());
  Reopen();
  std::vector<GpuRow> gpus;
  ASSERT_TRUE(store_->LoadGpus(&gpus).ok());
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].server_url, "tcp://127.0.0.1:6000");
  EXPECT_EQ(gpus[0].spec.memory_bytes(), 80ull << 30);
  EXPECT_DOUBLE_EQ(gpus[0].spec.bandwidth_gbps(), 25.5);
  EXPECT_EQ(gpus[0].spec.model(), "NVIDIA H100 80GB HBM3");
  std::vector<LeaseRow> leases;
  ASSERT_TRUE(store_->LoadActiveLeases(5000, &leases).ok());
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].lease_id, "l1");
  EXPECT_EQ(leases[0].priority, 2);
  EXPECT_EQ(leases[0].queue_ms, 1500);
  EXPECT_EQ(leases[0].job, "slurm:lab:42");
  EXPECT_TRUE(leases[0].until_released);
  leases.clear();
  ASSERT_TRUE(store_->QueryLeases("alice", 10000, &leases).ok());
  EXPECT_EQ(leases.size(), 2u);
}

TEST_P(StoreTest, UsageRecordsAreStoredOnce) {
  uint32_t stored = 0, duplicates = 0;
  ASSERT_TRUE(store_
                  ->AddUsage({Record("r1", "alice", 10, 5000), Record("r2", "alice", 20, 6000)},
                             &stored, &duplicates)
                  .ok());
  EXPECT_EQ(stored, 2u);
  EXPECT_EQ(duplicates, 0u);
  Reopen();  // as after a registry restart
  std::vector<bool> fresh;
  ASSERT_TRUE(store_
                  ->AddUsage({Record("r2", "alice", 20, 6000), Record("r3", "bob", 5, 7000)},
                             &stored, &duplicates, &fresh)
                  .ok());
  EXPECT_EQ(stored, 1u);
  EXPECT_EQ(duplicates, 1u);
  EXPECT_EQ(fresh, (std::vector<bool>{false, true}));
  std::vector<UsageRow> rows;
  ASSERT_TRUE(store_->QueryUsage("alice", "", 0, 100000, &rows).ok());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].record.calls() + rows[1].record.calls(), 30u);
  EXPECT_EQ(rows[0].record.bytes_in(), 1ull << 40);
  EXPECT_DOUBLE_EQ(rows[0].record.gpu_busy_ms(), 12.5);
  EXPECT_EQ(rows[0].model, "rgpu softgpu");
  EXPECT_EQ(rows[0].record.calls_by_kind().at("MemAlloc"), 1u);
  EXPECT_EQ(rows[0].record.calls_by_kind().at("LaunchKernelOnStream") +
                rows[1].record.calls_by_kind().at("LaunchKernelOnStream"),
            28u);
  rows.clear();
  ASSERT_TRUE(store_->QueryUsage("", "acme", 5500, 7000, &rows).ok());  // end in [5500, 7000)
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].record.record_id(), "r2");
}

TEST_P(StoreTest, LeasesAreClaimedWithTheirFirstRecordsAndFoundById) {
  ASSERT_TRUE(store_
                  ->AddLease({"l1", "alice", "host1/0", "host1", 1ull << 30, 25, 0, 0, 1000, 900000,
                              0, 0, "", false})
                  .ok());
  ASSERT_TRUE(store_
                  ->AddLease({"l2", "bob", "host1/0", "host1", 1ull << 30, 25, 0, 0, 2000, 900000,
                              0, 0, "", false})
                  .ok());
  UsageRow a = Record("a", "alice", 3, 5000);  // 4000..5000
  a.record.set_lease_id("l1");
  UsageRow b = Record("b", "alice", 4, 6000);  // 5000..6000
  b.record.set_lease_id("l1");
  // The session's totals as the service computes them, written with the records.
  SessionTotals one;
  one.server_name = "host1";
  one.session_id = 1;
  one.first_start_ms = 4000;
  one.last_end_ms = 6000;
  one.wall_ms = 2000;
  one.calls = 7;
  one.bytes = UINT64_MAX - 1;  // beyond what a signed BIGINT holds
  one.gpu_busy_ms = 25;
  one.memory_gib_seconds = 0.25;
  UsageEffects effects;
  effects.claims = {{"l1", 4000}};
  effects.sessions = {{"l1", one}};
  uint32_t stored = 0, duplicates = 0;
  ASSERT_TRUE(store_->AddUsage({a, b}, &stored, &duplicates, nullptr, &effects).ok());
  EXPECT_EQ(stored, 2u);
  UsageRow c = Record("c", "alice", 1, 7000);
  c.record.set_lease_id("l1");
  c.record.set_session_id(2);
  SessionTotals two = one;
  two.session_id = 2;
  two.calls = 1;
  effects.claims = {{"l1", 4500}};  // a later start never raises the claim
  effects.sessions = {{"l1", two}};
  ASSERT_TRUE(store_->AddUsage({c}, &stored, &duplicates, nullptr, &effects).ok());
  one.calls = 9;  // the first session's totals, rewritten
  effects.claims.clear();
  effects.sessions = {{"l1", one}};
  UsageRow d = Record("d", "alice", 2, 8000);
  d.record.set_lease_id("l1");
  ASSERT_TRUE(store_->AddUsage({d}, &stored, &duplicates, nullptr, &effects).ok());
  Reopen();
  std::vector<LeaseRow> leases;
  ASSERT_TRUE(store_->GetLeases({"l1", "l2", "nope"}, &leases).ok());
  ASSERT_EQ(leases.size(), 2u);
  for (const auto& l : leases) EXPECT_EQ(l.claimed_ms, l.lease_id == "l1" ? 4000 : 0);
  std::vector<std::string> existing;
  ASSERT_TRUE(store_->ExistingUsageIds({"a", "x", "c"}, &existing).ok());
  std::sort(existing.begin(), existing.end());
  EXPECT_EQ(existing, (std::vector<std::string>{"a", "c"}));
  std::vector<SessionTotals> totals;
  ASSERT_TRUE(store_->LeaseSessionTotals("l1", &totals).ok());
  ASSERT_EQ(totals.size(), 2u);
  const SessionTotals& first = totals[0].session_id == 1 ? totals[0] : totals[1];
  EXPECT_EQ(first.server_name, "host1");
  EXPECT_EQ(first.first_start_ms, 4000);
  EXPECT_EQ(first.last_end_ms, 6000);
  EXPECT_EQ(first.wall_ms, 2000);
  EXPECT_EQ(first.calls, 9u);
  EXPECT_EQ(first.bytes, UINT64_MAX - 1);
  EXPECT_DOUBLE_EQ(first.gpu_busy_ms, 25);
  EXPECT_DOUBLE_EQ(first.memory_gib_seconds, 0.25);
  totals.clear();
  ASSERT_TRUE(store_->LeaseSessionTotals("l2", &totals).ok());
  EXPECT_TRUE(totals.empty());
  std::vector<UsageRow> rows;
  ASSERT_TRUE(store_->QueryUsage("alice", "", 0, 100000, &rows).ok());
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].record.lease_id(), "l1");
  // Ended leases whose tokens are still valid (expires_ms after now).
  ASSERT_TRUE(store_->ReleaseLease("l2", 8000).ok());
  leases.clear();
  ASSERT_TRUE(store_->LoadEndedLeases(10000, &leases).ok());
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].lease_id, "l2");
  leases.clear();
  ASSERT_TRUE(store_->LoadEndedLeases(900000, &leases).ok());
  EXPECT_TRUE(leases.empty());
}

TEST_P(StoreTest, ServersKeepTheirProofOfReachability) {
  ASSERT_TRUE(store_->PutServer({"host1", "acme", "tcp://h:1", 0}).ok());
  ASSERT_TRUE(store_->PutServer({"host1", "acme", "tcp://h:2", 1234}).ok());
  Reopen();
  std::vector<ServerRow> servers;
  ASSERT_TRUE(store_->LoadServers(&servers).ok());
  ASSERT_EQ(servers.size(), 1u);
  EXPECT_EQ(servers[0].url, "tcp://h:2");
  EXPECT_EQ(servers[0].verified_ms, 1234);
}

TEST_P(StoreTest, AStoreFromBeforeLeaseIdsIsUpgraded) {
  // The schema as it was before usage records named leases and leases were claimed.
  store_.reset();
  {
    std::unique_ptr<Db> db;
    ASSERT_TRUE(
        (conninfo_.empty() ? OpenSqlite(dir_ + "/registry.db", &db) : OpenPostgres(conninfo_, &db))
            .ok());
    ASSERT_TRUE(db->Exec("DROP TABLE IF EXISTS leases").ok());
    ASSERT_TRUE(db->Exec("DROP TABLE IF EXISTS usage").ok());
    ASSERT_TRUE(db->Exec("CREATE TABLE leases (lease_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, "
                         "gpu_id TEXT NOT NULL, server_name TEXT NOT NULL, memory_bytes BIGINT "
                         "NOT NULL, share INTEGER NOT NULL, priority INTEGER NOT NULL, queue_ms "
                         "BIGINT NOT NULL, granted_ms BIGINT NOT NULL, expires_ms BIGINT NOT "
                         "NULL, released_ms BIGINT NOT NULL DEFAULT 0)")
                    .ok());
    ASSERT_TRUE(db->Exec("INSERT INTO leases VALUES ('old', 'alice', 'host1/0', 'host1', 1, 25, "
                         "0, 0, 1000, 900000, 0)")
                    .ok());
    ASSERT_TRUE(db->Exec("CREATE TABLE usage (record_id TEXT PRIMARY KEY, server_name TEXT NOT "
                         "NULL, gpu_index INTEGER NOT NULL, tenant TEXT NOT NULL, session_id "
                         "BIGINT NOT NULL, start_ms BIGINT NOT NULL, end_ms BIGINT NOT NULL, "
                         "calls BIGINT NOT NULL, bytes_in BIGINT NOT NULL, bytes_out BIGINT NOT "
                         "NULL, gpu_busy_ms DOUBLE PRECISION NOT NULL, memory_gib_seconds DOUBLE "
                         "PRECISION NOT NULL, queue_ms DOUBLE PRECISION NOT NULL, session_ended "
                         "INTEGER NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL, "
                         "calls_by_kind TEXT NOT NULL DEFAULT '')")
                    .ok());
  }
  Reopen();
  Reopen();  // and opening it again finds the columns there
  std::vector<LeaseRow> leases;
  ASSERT_TRUE(store_->LoadActiveLeases(2000, &leases).ok());
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].claimed_ms, 0);
  UsageRow a = Record("a", "alice", 3, 5000);
  a.record.set_lease_id("old");
  uint32_t stored = 0, duplicates = 0;
  ASSERT_TRUE(store_->AddUsage({a}, &stored, &duplicates).ok());
  EXPECT_EQ(stored, 1u);
}

INSTANTIATE_TEST_SUITE_P(Engines, StoreTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace rgpu::registry
