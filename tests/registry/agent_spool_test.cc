// RegistryAgent's metering spool (server/registry_agent.h): records the registry never
// acknowledged survive the server process and are delivered, once, by the next one.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "proto/signed_token.h"
#include "registry/service.h"
#include "server/registry_agent.h"
#include "tests/registry/probe_responder.h"
#include "tests/registry/test_registry.h"

namespace rgpu::registry {
namespace {

TEST(AgentSpool, UndeliveredRecordsOutliveTheServer) {
  char dir[] = "/tmp/rgpu-spool-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string d = dir;
  ASSERT_TRUE(GenerateTokenKeys(d + "/key.pem", d + "/key.pub").ok());
  auto registry = std::make_unique<TestRegistry>(d, 0);
  const int port = registry->port();
  ASSERT_NE(port, 0);
  const std::string provider_key = registry->CreateKey(true, "acme");
  const std::string api_key = registry->CreateKey(false, "alice");
  ProbeResponder responder;  // answers the registry's reachability probe, as rgpu-server does
  server::RegistryAgentOptions options;
  options.address = "127.0.0.1:" + std::to_string(port);
  options.provider_key = provider_key;
  options.server_name = "host1";
  options.server_url = responder.url();
  options.reachability_secret = responder.secret();
  options.report_ms = 50;
  options.observe_ms = 50;
  options.spool_path = d + "/spool";
  GpuSpec gpu;
  gpu.set_model("GPU");
  gpu.set_memory_bytes(1ull << 30);
  auto no_sessions = [] { return wire::StatusReply(); };
  wire::SessionStats session;
  session.set_session_id(1);
  session.set_tenant("alice");
  session.set_calls(100);

  // The first server process: registered, a session placed on it, then the registry goes away,
  // then the session ends and the server stops before the record could be delivered.
  auto first = std::make_unique<server::RegistryAgent>();
  ASSERT_TRUE(first->Start(options, {gpu}, no_sessions, nullptr).ok());
  registry->service()->WaitForProbes();
  Placement placement;
  ASSERT_TRUE(registry->Place(api_key, gpu.memory_bytes(), &placement).ok());
  session.set_lease_id(placement.lease_id());
  registry.reset();
  first->SessionStarted(1);
  first->SessionEnded(session);
  ASSERT_EQ(first->pending(), 1u);
  first->Stop(0);
  EXPECT_EQ(first->pending(), 1u);
  first.reset();

  // The registry returns; the next server process delivers the record from the spool.
  registry = std::make_unique<TestRegistry>(d, port);
  ASSERT_EQ(registry->port(), port);
  server::RegistryAgent second;
  ASSERT_TRUE(second.Start(options, {gpu}, no_sessions, nullptr).ok());
  while (second.pending() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  second.Stop(0);
  const UsageReply usage = registry->Usage();
  ASSERT_EQ(usage.sessions_size(), 1);
  EXPECT_EQ(usage.sessions(0).calls(), 100u);
  EXPECT_EQ(usage.sessions(0).records(), 1u);
  // Nothing is left to send again.
  server::RegistryAgent third;
  ASSERT_TRUE(third.Start(options, {gpu}, no_sessions, nullptr).ok());
  EXPECT_EQ(third.pending(), 0u);
  third.Stop(0);
  std::string command = "rm -rf " + d;
  (void)!system(command.c_str());
}

// Two providers' servers' agents on one test registry (host-a of acme, host-b of bolt, each
// reporting every 50 ms) and a lease of tenant alice placed on host-a and handed over to host-b
// (registry/lease_hand_over.cc). Start with ASSERT_NO_FATAL_FAILURE.
class HandedOverLease {
 public:
  void Start() {
    char dir[] = "/tmp/rgpu-spool-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    ASSERT_TRUE(GenerateTokenKeys(dir_ + "/key.pem", dir_ + "/key.pub").ok());
    registry_ = std::make_unique<TestRegistry>(dir_, 0);
    const std::string api_key = registry_->CreateKey(false, "alice");
    GpuSpec gpu;
    gpu.set_model("GPU");
    gpu.set_memory_bytes(1ull << 30);
    auto no_sessions = [] { return wire::StatusReply(); };
    ASSERT_TRUE(a.Start(Options("host-a", responder_a_), {gpu}, no_sessions, nullptr).ok());
    registry_->service()->WaitForProbes();
    ASSERT_TRUE(registry_->Place(api_key, 256ull << 20, &placement).ok());
    ASSERT_EQ(placement.server_name(), "host-a");
    ASSERT_TRUE(b.Start(Options("host-b", responder_b_), {gpu}, no_sessions, nullptr).ok());
    registry_->service()->WaitForProbes();
    std::string token;
    Status s = a.HandOverLease(placement.lease_id(), "host-b", &token);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  ~HandedOverLease() {
    a.Stop(0);
    b.Stop(0);
    if (!dir_.empty()) (void)!system(("rm -rf " + dir_).c_str());
  }
  // A session's figures under the lease.
  wire::SessionStats Stats(uint64_t id, uint64_t calls) const {
    wire::SessionStats st;
    st.set_session_id(id);
    st.set_tenant("alice");
    st.set_lease_id(placement.lease_id());
    st.set_calls(calls);
    return st;
  }
  // The calls the registry took from `server` under any lease.
  uint64_t CallsOn(const std::string& server) {
    uint64_t calls = 0;
    const UsageReply usage = registry_->Usage();
    for (const auto& u : usage.sessions()) {
      if (u.server_name() == server) calls += u.calls();
    }
    return calls;
  }

  Placement placement;

 private:
  server::RegistryAgentOptions Options(const std::string& name, ProbeResponder& responder) {
    server::RegistryAgentOptions o;
    o.address = registry_->address();
    o.provider_key = registry_->CreateKey(true, name == "host-a" ? "acme" : "bolt");
    o.server_name = name;
    o.server_url = responder.url();
    o.reachability_secret = responder.secret();
    o.report_ms = 50;
    o.observe_ms = 50;
    return o;
  }
  std::string dir_;
  std::unique_ptr<TestRegistry> registry_;
  ProbeResponder responder_a_, responder_b_;

 public:
  server::RegistryAgent a, b;  // stopped before the registry goes
};

// A session's new server reports it before its old one said it left (a lease being handed
// over, registry/lease_hand_over.cc): the registry answers "not yet", and the new server's agent
// keeps the records and sends them again until the old server's last record completes the
// hand-over; nothing is lost or counted twice.
TEST(AgentSpool, RecordsTheRegistryAnswersNotYetAreSentAgain) {
  HandedOverLease f;
  ASSERT_NO_FATAL_FAILURE(f.Start());
  f.a.SessionStarted(1);
  // The session ran on host-b, and ended there, before host-a said it left.
  f.b.SessionStarted(7);
  f.b.SessionEnded(f.Stats(7, 60));
  while (f.b.pending() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few reports: "not yet"
  EXPECT_EQ(f.CallsOn("host-b"), 0u);
  f.a.SessionMoved(f.Stats(1, 40));
  for (int i = 0; i < 200 && f.CallsOn("host-b") == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(f.CallsOn("host-b"), 60u);
  EXPECT_EQ(f.CallsOn("host-a"), 40u);
}

// The new server stops (as on SIGTERM) while the registry still answers "not yet" for its
// records, and the old server's last record arrives during its last flush: the records go again
// until the flush's deadline, and none is lost.
TEST(AgentSpool, RecordsAnsweredNotYetAreSentAgainWhenTheServerStops) {
  HandedOverLease f;
  ASSERT_NO_FATAL_FAILURE(f.Start());
  f.a.SessionStarted(1);
  f.b.SessionStarted(7);
  f.b.SessionEnded(f.Stats(7, 60));
  while (f.b.pending() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(f.CallsOn("host-b"), 0u);
  std::thread old_server([&f] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    f.a.SessionMoved(f.Stats(1, 40));
  });
  f.b.Stop(10000);
  old_server.join();
  EXPECT_EQ(f.CallsOn("host-b"), 60u) << "host-b's record was dropped at its stop";
  EXPECT_EQ(f.CallsOn("host-a"), 40u);
}

// Two sessions of one lease moving whole (Server::MoveSessionsTogether): the first one's last
// record is held back until the second has left too, so the hand-over does not complete (and
// the target's records stay "not yet") while a session of the lease still runs on the source;
// then both go, and every record of both servers is taken.
TEST(AgentSpool, ALeaseMovingWholeIsReportedMovedOnceAllItsSessionsLeft) {
  HandedOverLease f;
  ASSERT_NO_FATAL_FAILURE(f.Start());
  f.a.SessionStarted(1);
  f.a.SessionStarted(2);
  f.a.BeginLeaseMove(f.placement.lease_id());
  // Session 1 left for host-b and made calls there; session 2 is still on host-a.
  f.a.SessionMoved(f.Stats(1, 40));
  f.b.SessionStarted(7);
  f.b.SessionEnded(f.Stats(7, 60));
  while (f.b.pending() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few reports of each
  EXPECT_EQ(f.CallsOn("host-b"), 0u) << "the hand-over completed with a session still on host-a";
  EXPECT_EQ(f.CallsOn("host-a"), 0u);
  f.a.SessionMoved(f.Stats(2, 30));
  f.a.EndLeaseMove(f.placement.lease_id());
  for (int i = 0; i < 200 && (f.CallsOn("host-b") == 0 || f.CallsOn("host-a") < 70); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(f.CallsOn("host-a"), 70u);
  EXPECT_EQ(f.CallsOn("host-b"), 60u);
}

TEST(AgentSpool, ADamagedSpoolIsAClearError) {
  char dir[] = "/tmp/rgpu-spool-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string d = dir;
  {
    std::ofstream spool(d + "/spool");
    spool << "garbage that is not a record";
  }
  server::RegistryAgentOptions options;
  options.address = "127.0.0.1:1";
  options.provider_key = "k";
  options.server_name = "host1";
  options.spool_path = d + "/spool";
  server::RegistryAgent agent;
  Status s = agent.Start(
      options, {}, [] { return wire::StatusReply(); }, nullptr);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("is damaged"), std::string::npos) << s.message();
  std::string command = "rm -rf " + d;
  (void)!system(command.c_str());
}

}  // namespace
}  // namespace rgpu::registry
