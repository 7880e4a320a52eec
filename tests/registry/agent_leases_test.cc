// rgpu-server's registry agent (server/registry_agent.h) against a real registry on the real
// clock: it sends its reachability secret (the registry's probe succeeds), its records name
// their leases, the leases that end reach the server through on_leases_ended, and records the
// registry refuses are dropped instead of being sent for ever, and a notice that ran out is said
// to have run out even when the registry ended its lease first.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "common/log.h"
#include "proto/signed_token.h"
#include "server/registry_agent.h"
#include "tests/registry/probe_responder.h"
#include "tests/registry/test_registry.h"

namespace rgpu::registry {
namespace {

class AgentLeasesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/rgpu-agent-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    ASSERT_TRUE(GenerateTokenKeys(dir_ + "/key.pem", dir_ + "/key.pub").ok());
    registry_ = std::make_unique<TestRegistry>(dir_, 0, /*heartbeat_ms=*/100);
    ASSERT_FALSE(responder_.url().empty());
    options_.address = registry_->address();
    options_.provider_key = registry_->CreateKey(true, "acme");
    options_.server_name = "host1";
    options_.server_url = responder_.url();
    options_.reachability_secret = responder_.secret();
    options_.report_ms = 50;
    options_.observe_ms = 50;
    options_.on_leases_ended = [this](const std::vector<std::string>& ids) {
      std::lock_guard<std::mutex> lock(mu_);
      ended_.insert(ids.begin(), ids.end());
      ++calls_;
    };
    api_key_ = registry_->CreateKey(false, "alice");
    gpu_.set_model("GPU");
    gpu_.set_memory_bytes(4ull << 30);
  }
  void TearDown() override {
    agent_.Stop(0);
    registry_.reset();
    std::string command = "rm -rf " + dir_;
    (void)!system(command.c_str());
  }
  bool Ended(const std::string& lease_id) {
    std::lock_guard<std::mutex> lock(mu_);
    return ended_.count(lease_id) > 0;
  }
  // A priority-9 request for the whole GPU's memory, waiting up to 30 s to be placed (a lower
  // priority lease holding the GPU is given notice), on a thread the caller joins.
  std::thread RequestWholeGpu() {
    return std::thread([this] {
      PlaceRequest req;
      req.set_memory_bytes(4ull << 30);
      req.set_priority(9);
      req.set_wait_seconds(30);
      std::string holder_private, holder_public;
      EXPECT_TRUE(GenerateEd25519(&holder_private, &holder_public).ok());
      req.set_holder_key(holder_public);
      grpc::ClientContext ctx;
      ctx.AddMetadata("x-rgpu-api-key", api_key_);
      auto reader = registry_->stub_->Place(&ctx, req);
      PlaceUpdate update;
      while (reader->Read(&update)) {
      }
      EXPECT_TRUE(reader->Finish().ok());
    });
  }
  // Waits (bounded by the test's timeout) for `done`.
  template <typename F>
  static void WaitFor(F done) {
    while (!done()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  std::string dir_;
  ProbeResponder responder_;
  std::unique_ptr<TestRegistry> registry_;
  server::RegistryAgentOptions options_;
  std::string api_key_;
  GpuSpec gpu_;
  server::RegistryAgent agent_;
  std::mutex mu_;
  std::set<std::string> ended_;
  int calls_ = 0;
};

TEST_F(AgentLeasesTest, TheServerLearnsThatALeaseEnded) {
  ASSERT_TRUE(agent_
                  .Start(
                      options_, {gpu_}, [] { return wire::StatusReply(); }, nullptr)
                  .ok());
  registry_->service()->WaitForProbes();
  EXPECT_GE(responder_.answered(), 1);  // the registry checked the agent's URL and secret
  Placement first, second;
  ASSERT_TRUE(registry_->Place(api_key_, 1ull << 30, &first).ok());
  ASSERT_TRUE(registry_->Place(api_key_, 1ull << 30, &second).ok());
  ASSERT_EQ(first.server_name(), "host1");
  // A session under the first lease runs and ends; its last record ends the lease.
  wire::SessionStats stats;
  stats.set_session_id(1);
  stats.set_tenant("alice");
  stats.set_lease_id(first.lease_id());
  stats.set_calls(42);
  agent_.SessionStarted(1);
  agent_.SessionEnded(stats);
  WaitFor([&] { return Ended(first.lease_id()); });
  EXPECT_FALSE(Ended(second.lease_id()));
  const UsageReply usage = registry_->Usage();
  ASSERT_EQ(usage.sessions_size(), 1);
  EXPECT_EQ(usage.sessions(0).calls(), 42u);
  // Later heartbeats read on from the cursor: the ended lease is not handed over again.
  int calls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    calls = calls_;
  }
  Placement third;
  ASSERT_TRUE(registry_->Place(api_key_, 1ull << 30, &third).ok());
  stats.set_session_id(2);
  stats.set_lease_id(third.lease_id());
  agent_.SessionStarted(2);
  agent_.SessionEnded(stats);
  WaitFor([&] { return Ended(third.lease_id()); });
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(calls_, calls + 1);
}

TEST_F(AgentLeasesTest, RecordsTheRegistryRefusesAreDropped) {
  std::atomic<int> acknowledged{0};
  options_.on_acknowledged = [&](const UsageRecord&) { acknowledged++; };
  ASSERT_TRUE(agent_
                  .Start(
                      options_, {gpu_}, [] { return wire::StatusReply(); }, nullptr)
                  .ok());
  // A session whose token named no lease the registry granted: its record is refused.
  wire::SessionStats stats;
  stats.set_session_id(1);
  stats.set_tenant("alice");
  stats.set_lease_id("lease-not-granted");
  stats.set_calls(5);
  agent_.SessionStarted(1);
  agent_.SessionEnded(stats);
  WaitFor([&] { return agent_.pending() == 0; });
  EXPECT_EQ(acknowledged.load(), 0);
  EXPECT_EQ(registry_->Usage().sessions_size(), 0);
}

// A lease given notice (here: preempted, with the price list's 1 s notice) is ended on the
// server when the notice runs out, by the agent on its own clock: the registry, which is not
// swept here, has not listed it as ended yet.
TEST_F(AgentLeasesTest, TheServerEndsALeaseWhenItsNoticeRunsOut) {
  registry_.reset();
  registry_ = std::make_unique<TestRegistry>(dir_, 0, /*heartbeat_ms=*/100,
                                             "default_gpu 0.001 1\npreemption 5 1\n");
  options_.address = registry_->address();
  options_.provider_key = registry_->CreateKey(true, "acme2");
  api_key_ = registry_->CreateKey(false, "alice2");
  ASSERT_TRUE(agent_
                  .Start(
                      options_, {gpu_}, [] { return wire::StatusReply(); }, nullptr)
                  .ok());
  registry_->service()->WaitForProbes();
  Placement low;
  ASSERT_TRUE(registry_->Place(api_key_, 4ull << 30, &low).ok());  // the whole GPU's memory
  // A priority-9 request waits for it: the low lease is given 1 s notice.
  std::thread high = RequestWholeGpu();
  const auto asked = std::chrono::steady_clock::now();
  WaitFor([&] { return Ended(low.lease_id()); });
  EXPECT_GE(std::chrono::steady_clock::now() - asked, std::chrono::milliseconds(900));
  // Still active at the registry: the agent ended it, not a heartbeat reply.
  LeaseList leases;
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("x-rgpu-admin-key", kTestAdminKey);
    ASSERT_TRUE(registry_->stub_->ListLeases(&ctx, Empty(), &leases).ok());
  }
  bool active = false;
  for (const auto& l : leases.leases()) active = active || l.lease_id() == low.lease_id();
  EXPECT_TRUE(active);
  registry_->service()->Sweep();  // now the registry ends it and places the waiting request
  high.join();
}

// The log lines this process writes to stderr while it lives, in a file (the agent logs there).
class StderrToFile {
 public:
  explicit StderrToFile(const std::string& path) : path_(path) {
    saved_ = dup(2);
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);
  }
  ~StderrToFile() {
    dup2(saved_, 2);
    close(saved_);
  }
  bool Contains(const std::string& text) const {
    std::ifstream in(path_);
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return all.find(text) != std::string::npos;
  }

 private:
  std::string path_;
  int saved_ = -1;
};

// The agent's loop may first look again after the notice ran out and after the registry ended
// the lease, so that the heartbeat reply lists the lease as ended and no longer under notice.
// The server still says that the notice ran out (the provider's log names why its sessions
// ended), before it takes in the reply. The loop here wakes only when a session ends.
TEST_F(AgentLeasesTest, ANoticeThatRanOutIsSaidEvenWhenTheRegistryEndedTheLeaseFirst) {
  registry_.reset();
  registry_ = std::make_unique<TestRegistry>(dir_, 0, /*heartbeat_ms=*/100,
                                             "default_gpu 0.001 1\npreemption 5 1\n");
  options_.address = registry_->address();
  options_.provider_key = registry_->CreateKey(true, "acme3");
  api_key_ = registry_->CreateKey(false, "alice3");
  options_.report_ms = 600000;
  options_.observe_ms = 600000;
  SetLogLevel(LogLevel::kWarn);
  StderrToFile log(dir_ + "/agent.log");
  ASSERT_TRUE(agent_
                  .Start(
                      options_, {gpu_}, [] { return wire::StatusReply(); }, nullptr)
                  .ok());
  registry_->service()->WaitForProbes();
  uint64_t wakes = 0;
  // A session that the registry never granted ends: the loop wakes, heartbeats and reports.
  auto wake = [&] {
    wire::SessionStats stats;
    stats.set_session_id(++wakes);
    stats.set_tenant("alice3");
    stats.set_lease_id("lease-not-granted");
    agent_.SessionStarted(wakes);
    agent_.SessionEnded(stats);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
  };
  Placement low;
  ASSERT_TRUE(registry_->Place(api_key_, 4ull << 30, &low).ok());
  std::thread high = RequestWholeGpu();
  const std::string notice = "registry: lease " + low.lease_id() + " ends at ";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!log.Contains(notice)) {  // the server has the 1 s notice
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "the notice never reached the agent";
      break;
    }
    wake();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_FALSE(Ended(low.lease_id()));  // the loop has not looked since the notice ran out
  registry_->service()->Sweep();        // the registry ends the lease first
  while (!Ended(low.lease_id())) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "the lease's end never reached the agent";
      break;
    }
    wake();
  }
  agent_.Stop(0);
  SetLogLevel(LogLevel::kInfo);
  EXPECT_TRUE(log.Contains("lease " + low.lease_id() + ": its notice ran out at "));
  high.join();
}

}  // namespace
}  // namespace rgpu::registry
