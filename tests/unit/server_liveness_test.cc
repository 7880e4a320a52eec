// The server's side ports and its hold on the GPU against hostile tenants (issue 13, items 6 and
// 7): a gone client's endless kernel is stopped, a kernel cannot keep its --fair-share turn past
// --max-kernel-ms, and the keepalive port admits only peers that hold a live session, with
// per-source bounds, so idle connections cannot lock tenants out.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "proto/keepalive_proof.h"
#include "server/liveness_service.h"
#include "tests/unit/keepalive_peer.h"
#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using namespace test;  // the raw protocol peer (raw_peer.h)

const char kSpinPtx[] =
    ".version 7.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry spin()\n{\n$L_top:\n  bra.uni $L_top;\n}\n"
    ".visible .entry quick()\n{\n  ret;\n}\n";

// Sends a keepalive byte and waits up to `ms` for its echo: 1 echoed, 0 closed, -1 no answer.
int Ping(int fd, int ms = 5000) {
  const char k = 'k';
  if (write(fd, &k, 1) != 1) return 0;
  pollfd p = {fd, POLLIN, 0};
  if (poll(&p, 1, ms) <= 0) return -1;
  char c;
  return read(fd, &c, 1) == 1 ? 1 : 0;
}

class ServerLivenessTest : public test::RawServerTest {
 protected:
  // A session: its channel, its context, and its Welcome's liveness port and key.
  struct Tenant {
    std::unique_ptr<Channel> ch;
    uint64_t ctx = 0;
    uint16_t port = 0;
    uint64_t key = 0;
    std::string secret;
    int keepalive = -1;
    ~Tenant() {
      if (keepalive >= 0) close(keepalive);
    }
  };
  std::unique_ptr<Tenant> Open() {
    auto t = std::make_unique<Tenant>();
    t->ch = Connect();
    wire::Envelope w = Exchange(t->ch.get(), Hello());
    EXPECT_EQ(w.welcome().status(), 0);
    t->port = static_cast<uint16_t>(w.welcome().liveness_port());
    t->key = w.welcome().liveness_key();
    t->secret = w.welcome().liveness_secret();
    wire::Envelope r = Exchange(t->ch.get(), Call(1, Op::kCtxCreate, 0, {0, 0}));
    t->ctx = r.reply().values(0);
    return t;
  }
  // Loads kSpinPtx and returns the function id of `name`.
  static uint64_t Kernel(Tenant& t, const char* name) {
    wire::Envelope m = Exchange(t.ch.get(), Call(2, Op::kModuleLoadData, t.ctx, {}), kSpinPtx);
    EXPECT_EQ(m.reply().result(), CUDA_SUCCESS) << m.reply().message();
    wire::Envelope f =
        Exchange(t.ch.get(), Call(3, Op::kModuleGetFunction, t.ctx, {m.reply().values(0)}), name);
    EXPECT_EQ(f.reply().result(), CUDA_SUCCESS) << f.reply().message();
    return f.reply().values(0);
  }
  static wire::Envelope Launch(uint64_t seq, Tenant& t, uint64_t fn) {
    return Call(seq, Op::kLaunchKernel, t.ctx, {fn, 1, 1, 1, 32, 1, 1, 0, 0}, true);
  }
  // Launches `name` on `t` and synchronizes, in one batch; returns the answer.
  static wire::Envelope LaunchAndSync(Tenant& t, const char* name) {
    const uint64_t fn = Kernel(t, name);
    test::BatchBuilder b;
    b.Add(Launch(4, t, fn), "");
    b.Add(Call(5, Op::kCtxSynchronize, t.ctx, {}), "");
    return Exchange(t.ch.get(), b.envelope, b.payload);
  }
  // Another tenant's kernel runs to its end.
  void ExpectAnotherTenantsKernelRuns() {
    auto other = Open();
    const wire::Envelope r = LaunchAndSync(*other, "quick");
    ASSERT_EQ(r.body_case(), wire::Envelope::kReply) << "the other tenant's kernel never ran";
    EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
    EXPECT_EQ(r.reply().async_error(), CUDA_SUCCESS);
  }
};

class ServerFairShareTest : public ServerLivenessTest {
 protected:
  ServerFairShareTest() {
    options_.fair_share = true;
    options_.max_kernel_ms = 0;  // no turn bound: only the client's departure ends the kernel
  }
  // A tenant announces itself on the keepalive port, launches an endless kernel (which gets its
  // turn) and dies; then another tenant's kernel must run.
  void Check() {
    auto hostile = Open();
    hostile->keepalive = ConnectFrom("127.0.0.1", hostile->port);
    ASSERT_TRUE(Announce(hostile->keepalive, hostile->key, hostile->secret));
    ASSERT_EQ(Ping(hostile->keepalive), 1);
    const uint64_t spin = Kernel(*hostile, "spin");
    ASSERT_TRUE(hostile->ch->Send(Launch(4, *hostile, spin).SerializeAsString(), nullptr, 0).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the kernel has its turn
    close(hostile->keepalive);  // the process dies: the kernel closes its sockets
    hostile->keepalive = -1;
    hostile.reset();
    ExpectAnotherTenantsKernelRuns();
  }
};

// The audit: a killed client's endless kernel kept the GPU for 90 s, and under --fair-share it
// blocked every tenant. Once its keepalive connection closes (the process is gone), its kernel is
// stopped (softgpu ends the grid) and the next tenant's kernel runs.
TEST_F(ServerFairShareTest, GoneClientsEndlessKernelIsStopped) { Check(); }

// The same where the backend cannot stop a kernel itself (NVIDIA's driver): the session's own
// thread gives up on the kernel and destroys its context.
class ServerFairShareNoExtensionsTest : public ServerFairShareTest {
 protected:
  ServerFairShareNoExtensionsTest() { options_.backend_extensions = false; }
};

TEST_F(ServerFairShareNoExtensionsTest, GoneClientsEndlessKernelIsStopped) { Check(); }

// A kernel that runs past --max-kernel-ms loses its turn with CUDA_ERROR_LAUNCH_TIMEOUT, as a
// GPU watchdog ends it; its context keeps the error (as CUDA's does), other tenants go on, and
// devices report the run-time limit.
class ServerKernelBoundTest : public ServerLivenessTest {
 protected:
  ServerKernelBoundTest() {
    options_.fair_share = true;
    options_.max_kernel_ms = 300;
  }
  void Check() {
    auto t = Connect();
    wire::Envelope w = Exchange(t.get(), Hello());
    ASSERT_GT(w.welcome().devices_size(), 0);
    EXPECT_EQ(w.welcome().devices(0).attributes(CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT), 1);
    auto hostile = Open();
    const wire::Envelope r = LaunchAndSync(*hostile, "spin");
    ASSERT_EQ(r.body_case(), wire::Envelope::kReply);
    const int seen = r.reply().async_error() != 0 ? r.reply().async_error() : r.reply().result();
    EXPECT_EQ(seen, CUDA_ERROR_LAUNCH_TIMEOUT);
    EXPECT_EQ(Result(hostile->ch.get(), Call(6, Op::kCtxSynchronize, hostile->ctx, {})),
              CUDA_ERROR_LAUNCH_TIMEOUT);
    ExpectAnotherTenantsKernelRuns();
  }
};

TEST_F(ServerKernelBoundTest, EndlessKernelLosesItsTurn) { Check(); }

class ServerKernelBoundNoExtensionsTest : public ServerKernelBoundTest {
 protected:
  ServerKernelBoundNoExtensionsTest() { options_.backend_extensions = false; }
};

TEST_F(ServerKernelBoundNoExtensionsTest, EndlessKernelLosesItsTurn) { Check(); }

// The keepalive port admits a connection only once it announces a live session's key, one
// connection per key.
TEST_F(ServerLivenessTest, KeepalivePortAdmitsOnlyLiveSessions) {
  auto t = Open();
  const int stranger = ConnectFrom("127.0.0.1", t->port);
  ASSERT_GE(stranger, 0);
  ASSERT_TRUE(Announce(stranger, t->key ^ 0x5a5a5a5a5a5a5a5aull, t->secret));
  EXPECT_TRUE(ClosedWithin(stranger, 5000)) << "an unknown key was kept";
  close(stranger);
  t->keepalive = ConnectFrom("127.0.0.1", t->port);
  ASSERT_TRUE(Announce(t->keepalive, t->key, t->secret));
  EXPECT_EQ(Ping(t->keepalive), 1);
  const int twin = ConnectFrom("127.0.0.1", t->port);
  ASSERT_TRUE(Announce(twin, t->key, t->secret));
  EXPECT_TRUE(ClosedWithin(twin, 5000)) << "a second connection for one key was kept";
  close(twin);
  EXPECT_EQ(Ping(t->keepalive), 1);
  // A connection that never announces anything is closed too.
  const int silent = ConnectFrom("127.0.0.1", t->port);
  EXPECT_TRUE(ClosedWithin(silent, server::LivenessService::kAnnounceMs + 3000));
  close(silent);
}

// The keepalive port is never encrypted, so an observer learns a session's key and the proofs
// its client sends. Neither takes the session's place: a connection announcing the key with the
// proof of another connection's nonce (a replay), or under another secret, or followed by
// keepalive bytes only (what the port asked before), is closed, while the slot is free; the
// client's own connection then gets in.
TEST_F(ServerLivenessTest, KeepaliveAnnouncementCannotBeReplayed) {
  auto t = Open();
  ASSERT_EQ(t->secret.size(), kKeepaliveSecretBytes);
  t->keepalive = ConnectFrom("127.0.0.1", t->port);
  const std::string nonce = Nonce(t->keepalive);
  ASSERT_FALSE(nonce.empty());
  const std::string observed = KeepaliveProof(t->secret, nonce, t->key);

  const int replay = ConnectFrom("127.0.0.1", t->port);
  ASSERT_FALSE(Nonce(replay).empty());
  ASSERT_TRUE(AnnounceWithProof(replay, t->key, observed));
  EXPECT_TRUE(ClosedWithin(replay, 5000)) << "a replayed announcement took the session's slot";
  close(replay);

  const int forged = ConnectFrom("127.0.0.1", t->port);
  ASSERT_TRUE(Announce(forged, t->key, std::string(kKeepaliveSecretBytes, 'x')));
  EXPECT_TRUE(ClosedWithin(forged, 5000)) << "a proof under another secret was accepted";
  close(forged);

  const int bare = ConnectFrom("127.0.0.1", t->port);
  ASSERT_TRUE(AnnounceWithProof(bare, t->key, std::string(kKeepaliveProofBytes, 'k')));
  EXPECT_TRUE(ClosedWithin(bare, 5000)) << "the key alone was accepted";
  close(bare);

  ASSERT_TRUE(AnnounceWithProof(t->keepalive, t->key, observed));
  EXPECT_EQ(Ping(t->keepalive), 1) << "the client's own connection was refused";
}

// The audit: 4,096 idle connections made the next tenant's keepalives fail as if the server had
// died. Idle connections from many sources fill the table of pending connections; a tenant's
// connection still gets in, and its keepalives are answered.
TEST_F(ServerLivenessTest, IdleConnectionsDoNotLockOutATenant) {
  auto t = Open();
  std::vector<int> idle;
  for (int host = 2; host < 80; ++host) {
    const std::string source = "127.0.0." + std::to_string(host);
    for (int i = 0; i < 12; ++i) {
      const int fd = ConnectFrom(source.c_str(), t->port);
      if (fd >= 0) idle.push_back(fd);
    }
  }
  // Also the old table's size from one source.
  for (int i = 0; i < 4200; ++i) {
    const int fd = ConnectFrom("127.0.0.1", t->port);
    if (fd >= 0) idle.push_back(fd);
  }
  ASSERT_GT(idle.size(), 4096u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  t->keepalive = ConnectFrom("127.0.0.1", t->port);
  ASSERT_GE(t->keepalive, 0);
  ASSERT_TRUE(Announce(t->keepalive, t->key, t->secret));
  EXPECT_EQ(Ping(t->keepalive), 1) << "the tenant's keepalive was not answered";
  for (int fd : idle) close(fd);
  EXPECT_EQ(Result(t->ch.get(), Call(9, Op::kMemGetInfo, t->ctx, {})), CUDA_SUCCESS);
}

// The keepalive port bounds pending connections per source. An IPv6 host is given a whole /64,
// so a bound per address bounded nothing there: its addresses count as one source.
sockaddr_storage Address(const char* text) {
  sockaddr_storage a = {};
  if (inet_pton(AF_INET, text, &reinterpret_cast<sockaddr_in&>(a).sin_addr) == 1) {
    a.ss_family = AF_INET;
  } else {
    EXPECT_EQ(inet_pton(AF_INET6, text, &reinterpret_cast<sockaddr_in6&>(a).sin6_addr), 1) << text;
    a.ss_family = AF_INET6;
  }
  return a;
}

TEST(LivenessSourceTest, AnIpv6HostCountsAsOneSourceAcrossItsSlash64) {
  using server::SourceOf;
  EXPECT_EQ(SourceOf(Address("2001:db8:1:2::1")), SourceOf(Address("2001:db8:1:2:ffff:1:2:3")));
  EXPECT_EQ(SourceOf(Address("2001:db8:1:2::1")), "2001:db8:1:2::/64");
  EXPECT_NE(SourceOf(Address("2001:db8:1:2::1")), SourceOf(Address("2001:db8:1:3::1")));
  EXPECT_NE(SourceOf(Address("10.0.0.1")), SourceOf(Address("10.0.0.2")));
  EXPECT_EQ(SourceOf(Address("10.0.0.1")), "10.0.0.1");
  EXPECT_EQ(SourceOf(Address("::ffff:10.0.0.1")), "10.0.0.1");
}

}  // namespace
}  // namespace rgpu
