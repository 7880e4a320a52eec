// Copies between servers (server/session_peer.cc): another server reaches a session's memory only
// with a ticket the session granted (PeerGrant), once, for the granted range and direction, and
// only while that range is still the session's; a wrong, reused or another session's ticket is
// refused before any byte moves.
#include <cstring>

#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using test::Call;
using test::Exchange;
using test::Next;

class ServerTransferTest : public test::RawServerTest {
 protected:
  struct Tenant {
    std::unique_ptr<Channel> ch;
    uint64_t session = 0, ctx = 0, ptr = 0;
  };
  // A session with `bytes` of device memory holding `fill`.
  Tenant Open(size_t bytes, char fill) {
    Tenant t;
    t.ch = Connect();
    wire::Envelope w = test::Handshake(t.ch.get(), "");
    t.session = w.welcome().session_id();
    wire::Envelope r = Exchange(t.ch.get(), Call(1, Op::kCtxCreate, 0, {0, 0}));
    t.ctx = r.reply().values(0);
    t.ptr = test::Alloc(t.ch.get(), t.ctx, bytes);
    EXPECT_NE(t.ptr, 0u);
    EXPECT_EQ(test::Result(t.ch.get(), Call(3, Op::kMemcpyHtoD, t.ctx, {t.ptr, bytes, 0, 0}),
                           std::string(bytes, fill)),
              CUDA_SUCCESS);
    return t;
  }
  // PeerGrant's answer: its result and the ticket.
  int Grant(Tenant& t, uint64_t ptr, uint64_t bytes, bool write, std::string* ticket) {
    wire::Envelope r =
        Exchange(t.ch.get(), Call(4, Op::kPeerGrant, t.ctx, {ptr, bytes, write ? 1u : 0u}));
    if (r.reply().result() == CUDA_SUCCESS && ticket != nullptr) {
      ticket->resize(16);
      const uint64_t t0 = r.reply().values(0), t1 = r.reply().values(1);
      memcpy(ticket->data(), &t0, 8);
      memcpy(ticket->data() + 8, &t1, 8);
    }
    return r.reply().result();
  }
  // A transfer's connection presenting `ticket` for `session`, and the Welcome it got.
  std::unique_ptr<Channel> Join(uint64_t session, const std::string& ticket, wire::Welcome* out) {
    auto peer = Connect();
    wire::Envelope join;
    join.mutable_peer_join()->set_session_id(session);
    join.mutable_peer_join()->set_ticket(ticket);
    *out = Exchange(peer.get(), join).welcome();
    return peer;
  }
};

TEST_F(ServerTransferTest, OnlyTheGrantedTicketJoinsAndOnlyOnce) {
  Tenant a = Open(4096, 'a');
  std::string ticket;
  ASSERT_EQ(Grant(a, a.ptr, 4096, false, &ticket), CUDA_SUCCESS);
  wire::Welcome w;
  std::string forged = ticket;
  forged[0] ^= 1;
  Join(a.session, forged, &w);
  EXPECT_EQ(w.status(), CUDA_ERROR_NOT_PERMITTED);
  Join(a.session, "short", &w);
  EXPECT_EQ(w.status(), CUDA_ERROR_NOT_PERMITTED);
  // Another session's id with this ticket: not that session's grant.
  Tenant b = Open(4096, 'b');
  Join(b.session, ticket, &w);
  EXPECT_EQ(w.status(), CUDA_ERROR_NOT_PERMITTED);
  // The wrong tries above did not spend it (the ticket names a's session only) ...
  auto peer = Join(a.session, ticket, &w);
  ASSERT_EQ(w.status(), 0) << w.error();
  std::string bytes;
  wire::Envelope chunk = Next(peer.get(), &bytes);
  ASSERT_EQ(chunk.reply().result(), CUDA_SUCCESS) << chunk.reply().message();
  EXPECT_EQ(bytes, std::string(4096, 'a'));
  // ... and it admits one transfer only.
  Join(a.session, ticket, &w);
  EXPECT_EQ(w.status(), CUDA_ERROR_NOT_PERMITTED);
}

TEST_F(ServerTransferTest, AGrantReachesOnlyItsRangeWhileItIsTheSessions) {
  Tenant a = Open(4096, 'a');
  // Beyond the allocation, or empty: no ticket.
  EXPECT_EQ(Grant(a, a.ptr, 4097, false, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Grant(a, a.ptr + 4096, 1, false, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Grant(a, a.ptr, 0, false, nullptr), CUDA_ERROR_INVALID_VALUE);
  // Memory freed after the grant is not reached.
  std::string ticket;
  ASSERT_EQ(Grant(a, a.ptr, 4096, false, &ticket), CUDA_SUCCESS);
  ASSERT_EQ(test::Result(a.ch.get(), Call(5, Op::kMemFree, a.ctx, {a.ptr})), CUDA_SUCCESS);
  wire::Welcome w;
  auto peer = Join(a.session, ticket, &w);
  ASSERT_EQ(w.status(), 0);
  std::string bytes;
  wire::Envelope chunk = Next(peer.get(), &bytes);
  EXPECT_EQ(chunk.reply().result(), CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(bytes.empty());
}

TEST_F(ServerTransferTest, AWriteGrantTakesItsRangeInOrderOnly) {
  Tenant a = Open(8192, 'a');
  std::string ticket;
  ASSERT_EQ(Grant(a, a.ptr + 4096, 4096, true, &ticket), CUDA_SUCCESS);
  wire::Welcome w;
  auto peer = Join(a.session, ticket, &w);
  ASSERT_EQ(w.status(), 0);
  // A chunk that claims another offset is refused, and nothing is written.
  wire::Envelope chunk;
  chunk.mutable_reply()->add_values(4096);
  const std::string data(4096, 'z');
  wire::Envelope answer = Exchange(peer.get(), chunk, data);
  EXPECT_EQ(answer.reply().result(), CUDA_ERROR_INVALID_VALUE);
  std::string back;
  wire::Envelope r =
      Exchange(a.ch.get(), Call(6, Op::kMemcpyDtoH, a.ctx, {a.ptr, 8192, 0, 0}), "", &back);
  ASSERT_EQ(r.reply().result(), CUDA_SUCCESS);
  EXPECT_EQ(back, std::string(8192, 'a'));
  // With a fresh ticket, the granted half is written and the other half is not.
  ASSERT_EQ(Grant(a, a.ptr + 4096, 4096, true, &ticket), CUDA_SUCCESS);
  peer = Join(a.session, ticket, &w);
  ASSERT_EQ(w.status(), 0);
  chunk.mutable_reply()->set_values(0, 0);
  answer = Exchange(peer.get(), chunk, data);
  EXPECT_EQ(answer.reply().result(), CUDA_SUCCESS) << answer.reply().message();
  r = Exchange(a.ch.get(), Call(7, Op::kMemcpyDtoH, a.ctx, {a.ptr, 8192, 0, 0}), "", &back);
  EXPECT_EQ(back, std::string(4096, 'a') + std::string(4096, 'z'));
}

}  // namespace
}  // namespace rgpu
