// Credentials against an attacker who sees the wire (issue 13, items 4, 8 and 11): a secret
// token never crosses the network, a signed token admits only the holder of its key, nothing
// seen on the wire can be replayed, a token dies with its lease, a token opens exactly the GPUs
// it names, status needs the operator's key or a tenant's own credential, and metrics stay on
// the listen address.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <fstream>

#include "proto/crypto.h"
#include "proto/session_proof.h"
#include "proto/signed_token.h"
#include "server/tenants.h"
#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using namespace test;  // the raw protocol peer (raw_peer.h)

class ServerAuthTest : public test::RawServerTest {
 protected:
  ServerAuthTest() {
    setenv("RGPU_SOFTGPU_DEVICES", "3", 1);
    char dir[] = "/tmp/rgpu-auth-XXXXXX";
    dir_ = mkdtemp(dir);
    std::ofstream(dir_ + "/tokens.txt") << "tok-alice-secret alice 1G 1\ntok-bob-secret bob 1G 1\n";
    EXPECT_TRUE(GenerateTokenKeys(dir_ + "/key.pem", dir_ + "/key.pub").ok());
    options_.tokens_path = dir_ + "/tokens.txt";
    options_.token_public_key = dir_ + "/key.pub";
    options_.name = "host1";
    options_.operator_key_file = dir_ + "/operator.key";
  }
  ~ServerAuthTest() override { (void)!system(("rm -rf " + dir_).c_str()); }

  // A credential for a signed token of `tenant` with a fresh holder key (or, with
  // `holder_public` set, naming that key instead).
  std::string Signed(const std::string& tenant, const std::string& lease,
                     std::vector<uint32_t> gpus, std::string* token_out = nullptr,
                     const std::string* holder_public = nullptr) {
    std::string priv, pub;
    EXPECT_TRUE(GenerateEd25519(&priv, &pub).ok());
    wire::TokenClaims claims;
    claims.set_tenant(tenant);
    claims.set_server("host1");
    claims.set_memory_quota(uint64_t{1} << 30);
    claims.set_weight(1);
    claims.set_expires_unix(time(nullptr) + 3600);
    claims.set_lease_id(lease);
    for (uint32_t g : gpus) claims.add_gpus(g);
    claims.set_all_gpus(gpus.empty());
    if (holder_public != nullptr) {
      claims.set_holder_key(*holder_public);
    } else {
      claims.set_holder_key(pub);
    }
    std::string token;
    EXPECT_TRUE(SignToken(claims, dir_ + "/key.pem", &token).ok());
    if (token_out != nullptr) *token_out = token;
    return MakeCredential(token, priv);
  }

  // The server's status as `credential` sees it.
  wire::StatusReply StatusAs(const std::string& credential) {
    auto ch = Connect();
    CredentialProver prover;
    EXPECT_TRUE(CredentialProver::Parse(credential, &prover).ok());
    wire::Envelope request;
    *request.mutable_status_request()->mutable_credential() = prover.presented();
    wire::Envelope reply = Exchange(ch.get(), request);
    EXPECT_TRUE(AnswerChallenge(ch.get(), prover, 10000, &reply).ok());
    EXPECT_EQ(reply.body_case(), wire::Envelope::kStatusReply);
    return reply.status_reply();
  }

  std::string OperatorKey() {
    std::string key;
    std::ifstream(dir_ + "/operator.key") >> key;
    return key;
  }

  std::string dir_;
};

// The audit: a token captured on the wire admitted a second session as the same tenant. A file
// token is now presented by its digest and proven over the server's nonce: neither the token nor
// a captured handshake admits anyone else.
TEST_F(ServerAuthTest, SecretTokenNeverCrossesTheWireAndItsProofCannotBeReplayed) {
  const std::string secret = "tok-alice-secret";
  CredentialProver prover;
  ASSERT_TRUE(CredentialProver::Parse(secret, &prover).ok());
  wire::Envelope hello = Hello();
  *hello.mutable_hello()->mutable_credential() = prover.presented();
  const std::string hello_bytes = hello.SerializeAsString();
  EXPECT_EQ(hello_bytes.find(secret), std::string::npos);

  auto victim = Connect();
  wire::Envelope challenge = Exchange(victim.get(), hello);
  ASSERT_EQ(challenge.body_case(), wire::Envelope::kChallenge);
  wire::Envelope answer;
  ASSERT_TRUE(prover
                  .Prove(challenge.challenge().nonce(),
                         answer.mutable_challenge_response()->mutable_proof())
                  .ok());
  const std::string answer_bytes = answer.SerializeAsString();
  EXPECT_EQ(answer_bytes.find(secret), std::string::npos);
  wire::Envelope welcome = Exchange(victim.get(), answer);
  ASSERT_EQ(welcome.welcome().status(), 0) << welcome.welcome().error();

  // The attacker replays both captured messages while the victim's session is alive.
  auto attacker = Connect();
  ASSERT_TRUE(attacker->Send(hello_bytes, nullptr, 0).ok());
  wire::Envelope second = test::Next(attacker.get());
  if (second.body_case() == wire::Envelope::kChallenge) {
    EXPECT_NE(second.challenge().nonce(), challenge.challenge().nonce());
    second = Exchange(attacker.get(), answer);
  }
  ASSERT_EQ(second.body_case(), wire::Envelope::kWelcome);
  EXPECT_EQ(second.welcome().status(), CUDA_ERROR_NOT_PERMITTED);
  EXPECT_EQ(StatusAs(OperatorKey()).sessions_size(), 1);
}

// A session host's credential (server/session_host.h) admits its one session once, to the
// devices the server granted: proven again (a replayed redirect, a second client) it is refused.
TEST(SessionHostTokenTest, AdmitsItsSessionOnce) {
  server::TenantTable table;
  auto tenant = std::make_shared<server::Tenant>();
  tenant->name = "alice";
  tenant->memory_quota = 1 << 20;
  table.AddToken("0123456789abcdef", tenant, false, {1}, /*once=*/true);
  CredentialProver prover;
  ASSERT_TRUE(CredentialProver::Parse("0123456789abcdef", &prover).ok());
  for (int attempt = 0; attempt < 2; ++attempt) {
    const std::string nonce = RandomBytes(32);
    std::string proof;
    ASSERT_TRUE(prover.Prove(nonce, &proof).ok());
    server::Admission admission;
    Status s = table.Admit(prover.presented(), nonce, proof, &admission);
    if (attempt == 0) {
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(admission.tenant->name, "alice");
      EXPECT_FALSE(admission.all_gpus);
      EXPECT_EQ(admission.gpus, std::vector<int>{1});
    } else {
      EXPECT_FALSE(s.ok());
      EXPECT_NE(s.message().find("used"), std::string::npos) << s.message();
    }
  }
}

// A registry's hand-over of a lease (a session moving with it, docs/migration.md) admits the
// restore of that lease's session only: never a client, never another lease's or tenant's
// session, not on another server, not once the lease has ended; and a client's token is no
// hand-over.
TEST(HandOverTokenTest, AdmitsOnlyTheRestoreOfItsLeasesSession) {
  char dir[] = "/tmp/rgpu-handover-XXXXXX";
  const std::string d = mkdtemp(dir);
  ASSERT_TRUE(GenerateTokenKeys(d + "/key.pem", d + "/key.pub").ok());
  server::TenantTable table;
  ASSERT_TRUE(table.AcceptSigned(d + "/key.pub", "host-b").ok());
  auto sign = [&](const std::string& server, bool hand_over, const std::string& holder) {
    wire::TokenClaims claims;
    claims.set_tenant("alice");
    claims.set_server(server);
    claims.set_memory_quota(uint64_t{3} << 30);
    claims.set_weight(1);
    claims.set_expires_unix(time(nullptr) + 3600);
    claims.set_lease_id("lease-9");
    claims.add_gpus(2);
    claims.set_hand_over(hand_over);
    claims.set_holder_key(holder);
    std::string token;
    EXPECT_TRUE(SignToken(claims, d + "/key.pem", &token).ok());
    return token;
  };
  const std::string hand_over = sign("host-b", true, "");
  server::Admission admission;
  Status s = table.AdmitHandOver(hand_over, "lease-9", "alice", &admission);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(admission.tenant->name, "alice");
  EXPECT_EQ(admission.tenant->memory_quota, uint64_t{3} << 30);
  EXPECT_EQ(admission.lease_id, "lease-9");
  EXPECT_EQ(admission.gpus, std::vector<int>{2});
  // Another lease's or tenant's session, or on another server: refused.
  EXPECT_FALSE(table.AdmitHandOver(hand_over, "lease-8", "alice", &admission).ok());
  EXPECT_FALSE(table.AdmitHandOver(hand_over, "lease-9", "bob", &admission).ok());
  EXPECT_FALSE(table.AdmitHandOver(sign("host-c", true, ""), "lease-9", "alice", &admission).ok());
  // A client's token (it names a holder key and is no hand-over) restores nothing.
  std::string priv, pub;
  ASSERT_TRUE(GenerateEd25519(&priv, &pub).ok());
  const std::string client_token = sign("host-b", false, pub);
  s = table.AdmitHandOver(client_token, "lease-9", "alice", &admission);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("hand-over"), std::string::npos) << s.message();
  // A hand-over admits no client, even one naming a holder key it proves.
  CredentialProver prover;
  ASSERT_TRUE(
      CredentialProver::Parse(MakeCredential(sign("host-b", true, pub), priv), &prover).ok());
  const std::string nonce = RandomBytes(32);
  std::string proof;
  ASSERT_TRUE(prover.Prove(nonce, &proof).ok());
  s = table.Admit(prover.presented(), nonce, proof, &admission);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a client"), std::string::npos) << s.message();
  // The lease ended: refused.
  table.EndLeases({"lease-9"});
  s = table.AdmitHandOver(hand_over, "lease-9", "alice", &admission);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("ended"), std::string::npos) << s.message();
  (void)!system(("rm -rf " + d).c_str());
}

// A signed token's claims are not secret: only the holder of the key they name gets in, and a
// token that names no key is refused.
TEST_F(ServerAuthTest, SignedTokenAdmitsOnlyTheHolderOfItsKey) {
  std::string token;
  const std::string good = Signed("carol", "lease-1", {}, &token);
  std::string thief_priv, thief_pub;
  ASSERT_TRUE(GenerateEd25519(&thief_priv, &thief_pub).ok());
  auto thief = Connect();
  EXPECT_EQ(Handshake(thief.get(), MakeCredential(token, thief_priv)).welcome().status(),
            CUDA_ERROR_NOT_PERMITTED);
  auto holder = Connect();
  EXPECT_EQ(Handshake(holder.get(), good).welcome().status(), 0);
  // Claims without a holder key (a bearer token) are refused.
  const std::string none;
  std::string bearer;
  Signed("carol", "lease-2", {}, &bearer, &none);
  std::string any_priv, any_pub;
  ASSERT_TRUE(GenerateEd25519(&any_priv, &any_pub).ok());
  auto old = Connect();
  wire::Envelope refused = Handshake(old.get(), MakeCredential(bearer, any_priv));
  EXPECT_EQ(refused.welcome().status(), CUDA_ERROR_NOT_PERMITTED);
  EXPECT_NE(refused.welcome().error().find("holder key"), std::string::npos);
}

// A token dies with its lease: once the registry reports the lease ended, the token's session
// is stopped and the token admits nobody.
TEST_F(ServerAuthTest, TokenOfAnEndedLeaseIsRefusedAndItsSessionStops) {
  const std::string credential = Signed("carol", "lease-7", {});
  auto ch = Connect();
  const uint64_t ctx = test::OpenSession(ch.get(), credential);
  ASSERT_EQ(Result(ch.get(), Call(2, Op::kMemGetInfo, ctx, {})), CUDA_SUCCESS);
  server_.EndLeases({"lease-7"});
  EXPECT_NE(Result(ch.get(), Call(3, Op::kMemGetInfo, ctx, {})), CUDA_SUCCESS);
  auto again = Connect();
  wire::Envelope w = Handshake(again.get(), credential);
  EXPECT_EQ(w.welcome().status(), CUDA_ERROR_NOT_PERMITTED);
  EXPECT_NE(w.welcome().error().find("ended"), std::string::npos) << w.welcome().error();
}

// The audit: a GPU-0 token opened contexts on every GPU of a multi-GPU server. A token names
// exactly the GPUs it grants; the tenant sees only those, numbered from 0 in the token's order.
TEST_F(ServerAuthTest, TokenOpensExactlyTheGpusItNames) {
  auto ch = Connect();
  wire::Envelope w = Handshake(ch.get(), Signed("carol", "lease-3", {2}));
  ASSERT_EQ(w.welcome().status(), 0) << w.welcome().error();
  EXPECT_EQ(w.welcome().devices_size(), 1);
  wire::Envelope ctx = Exchange(ch.get(), Call(1, Op::kCtxCreate, 0, {0, 0}));
  ASSERT_EQ(ctx.reply().result(), CUDA_SUCCESS);
  EXPECT_EQ(Result(ch.get(), Call(2, Op::kCtxCreate, 0, {0, 1})), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(Result(ch.get(), Call(3, Op::kPrimaryCtxRetain, 0, {2, 0})), CUDA_ERROR_INVALID_DEVICE);
  const wire::StatusReply status = StatusAs(OperatorKey());
  ASSERT_EQ(status.sessions_size(), 1);
  EXPECT_EQ(status.sessions(0).device(), 2) << "device 0 of the tenant is the server's GPU 2";
  // A GPU the server does not have, and a token for every GPU.
  auto bad = Connect();
  EXPECT_EQ(Handshake(bad.get(), Signed("carol", "lease-4", {5})).welcome().status(),
            CUDA_ERROR_NOT_PERMITTED);
  auto all = Connect();
  EXPECT_EQ(Handshake(all.get(), Signed("carol", "lease-5", {})).welcome().devices_size(), 3);
}

// The audit: `rgpu status` told anyone every tenant's name, program and usage. It needs the
// operator's key (every session) or a tenant's credential (that tenant's sessions only).
TEST_F(ServerAuthTest, StatusNeedsTheOperatorOrShowsOnlyTheTenantItself) {
  auto a = Connect();
  test::OpenSession(a.get(), "tok-alice-secret");
  auto b = Connect();
  test::OpenSession(b.get(), "tok-bob-secret");
  auto anonymous = Connect();
  wire::Envelope plain;
  plain.mutable_status_request();
  wire::Envelope reply = Exchange(anonymous.get(), plain);
  if (reply.body_case() == wire::Envelope::kChallenge) {
    reply = Exchange(anonymous.get(), wire::Envelope());
  }
  EXPECT_EQ(reply.status_reply().sessions_size(), 0);
  EXPECT_FALSE(reply.status_reply().error().empty());
  const wire::StatusReply alice = StatusAs("tok-alice-secret");
  ASSERT_EQ(alice.sessions_size(), 1);
  EXPECT_EQ(alice.sessions(0).tenant(), "alice");
  EXPECT_EQ(StatusAs(OperatorKey()).sessions_size(), 2);
  const wire::StatusReply wrong = StatusAs("not-the-operator-key-at-all");
  EXPECT_EQ(wrong.sessions_size(), 0);
  EXPECT_FALSE(wrong.error().empty());
  // The operator key's digest (which is no secret) with a proof made without the key.
  auto forger = Connect();
  wire::Envelope forged;
  forged.mutable_status_request()->mutable_credential()->set_token_digest(Sha256(OperatorKey()));
  wire::Envelope challenge = Exchange(forger.get(), forged);
  ASSERT_EQ(challenge.body_case(), wire::Envelope::kChallenge);
  wire::Envelope guess;
  guess.mutable_challenge_response()->set_proof(std::string(32, 'x'));
  const wire::Envelope answer = Exchange(forger.get(), guess);
  EXPECT_EQ(answer.status_reply().sessions_size(), 0);
  EXPECT_FALSE(answer.status_reply().error().empty());
}

// A local address of this machine that is not loopback ("" when there is none).
std::string NonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    if (std::string(text).rfind("127.", 0) != 0) found = text;
  }
  freeifaddrs(list);
  return found;
}

bool Reachable(const std::string& address, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to = {};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, address.c_str(), &to.sin_addr);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
  close(fd);
  return ok;
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

class ServerMetricsTest : public test::RawServerTest {
 protected:
  ServerMetricsTest() { options_.metrics_port = FreePort(); }
};

// The audit: metrics bound 0.0.0.0 even with --listen 127.0.0.1. They bind the listen host.
TEST_F(ServerMetricsTest, MetricsStayOnTheListenAddress) {
  const std::string other = NonLoopbackAddress();
  if (other.empty()) GTEST_SKIP() << "this machine has no address besides loopback";
  EXPECT_TRUE(Reachable("127.0.0.1", options_.metrics_port));
  EXPECT_FALSE(Reachable(other, options_.metrics_port)) << "metrics answer on " << other;
}

}  // namespace
}  // namespace rgpu
