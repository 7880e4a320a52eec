// Copies between servers (server/session_peer.cc): another server reaches a session's memory only
// with a ticket the session granted (PeerGrant), once, for the granted range and direction, and
// only while that range is still the session's; a wrong, reused or another session's ticket is
// refused before any byte moves. The server making a copy (MemcpyPeerRemote) connects where its
// tenant says, so it sends nothing the tenant chose there, and no data, until the other end
// proved the ticket (server/peer_join_proof.h).
#include <atomic>
#include <cstring>

#include "server/peer_join_proof.h"
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
  // A transfer's connection naming `ticket` for `session`, and the Welcome it got; an admitted
  // one must prove the ticket over the join's nonce.
  std::unique_ptr<Channel> Join(uint64_t session, const std::string& ticket, wire::Welcome* out) {
    auto peer = Connect();
    wire::Envelope join;
    const std::string nonce = "0123456789abcdef";
    join.mutable_peer_join()->set_session_id(session);
    join.mutable_peer_join()->set_ticket_digest(server::PeerTicketDigest(ticket));
    join.mutable_peer_join()->set_nonce(nonce);
    *out = Exchange(peer.get(), join).welcome();
    if (out->status() == 0) {
      EXPECT_EQ(out->peer_proof(), server::PeerJoinProof(ticket, nonce));
    }
    return peer;
  }
};

// Whatever listens at a URL a tenant gives its server for a copy: it records the first message it
// gets, answers it with an admitting Welcome that proves nothing, and counts what comes after.
class ImpostorPeer {
 public:
  ImpostorPeer() {
    TransportUrl url;
    EXPECT_TRUE(TransportUrl::Parse("tcp://127.0.0.1:0", &url).ok());
    EXPECT_TRUE(CreateListener(url, &listener_).ok());
    url_ = "tcp://127.0.0.1:" + std::to_string(listener_->port());
    thread_ = std::thread([this] { Serve(); });
  }
  ~ImpostorPeer() { Finish(); }
  const std::string& url() const { return url_; }
  // Stops listening (the port closes); first_message and later_messages are complete once it
  // returns.
  void Finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    listener_.reset();
  }
  std::string first_message;
  int later_messages = 0;

 private:
  void Serve() {
    std::unique_ptr<PendingConnection> pending;
    std::unique_ptr<Channel> ch;
    while (!stop_ && !listener_->WaitConnection(100, &pending).ok()) {
    }
    if (pending == nullptr || !pending->Accept(ChannelOptions(), &ch).ok()) return;
    ReceivedMessage m;
    while (!stop_ && !ch->Receive(100, &m).ok()) {
    }
    if (stop_) return;
    first_message = m.header;
    wire::Envelope welcome;
    welcome.mutable_welcome()->set_protocol_version(kProtocolVersion);
    welcome.mutable_welcome()->set_status(0);
    welcome.mutable_welcome()->set_peer_proof(std::string(32, 'p'));
    ch->Send(welcome.SerializeAsString(), nullptr, 0);
    while (!stop_) {
      if (ch->Receive(100, &m).ok()) ++later_messages;
    }
  }
  std::unique_ptr<Listener> listener_;
  std::string url_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
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

// A tenant points its server's copy at a listener of its choosing (another service of the
// provider's network, say) with a "ticket" of bytes it picked: the listener receives neither those
// bytes nor the tenant's data, even when it answers like a server that admits the transfer, and
// the tenant's error is the same whether anything listened there or not.
TEST_F(ServerTransferTest, ACopysServerSendsNothingTheTenantChoseToAnUnprovenPeer) {
  Tenant a = Open(4096, 'D');
  const std::string chosen = "\r\nFLUSHALL\r\n\r\n\r\n";  // 16 bytes
  ASSERT_EQ(chosen.size(), 16u);
  uint64_t t0 = 0, t1 = 0;
  memcpy(&t0, chosen.data(), 8);
  memcpy(&t1, chosen.data() + 8, 8);
  const std::string before_proof = "no server that granted the transfer answered at ";
  ImpostorPeer impostor;
  wire::Envelope r =
      Exchange(a.ch.get(), Call(8, Op::kMemcpyPeerRemote, a.ctx, {a.ptr, 4096, 0, 1, 7, t0, t1}),
               impostor.url() + std::string(1, '\0'));
  ASSERT_EQ(r.body_case(), wire::Envelope::kReply);
  EXPECT_EQ(r.reply().result(), CUDA_ERROR_DEVICE_UNAVAILABLE);
  EXPECT_EQ(r.reply().message(), before_proof + impostor.url());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // for anything sent after it
  impostor.Finish();
  ASSERT_FALSE(impostor.first_message.empty());  // the server did connect and join
  EXPECT_EQ(impostor.first_message.find(chosen), std::string::npos);
  EXPECT_EQ(impostor.first_message.find("FLUSHALL"), std::string::npos);
  EXPECT_EQ(impostor.later_messages, 0);  // no data followed the unproven admission
  // Where nothing listens (the impostor's port, closed now), the same answer.
  r = Exchange(a.ch.get(), Call(9, Op::kMemcpyPeerRemote, a.ctx, {a.ptr, 4096, 0, 1, 7, t0, t1}),
               impostor.url() + std::string(1, '\0'));
  EXPECT_EQ(r.reply().result(), CUDA_ERROR_DEVICE_UNAVAILABLE);
  EXPECT_EQ(r.reply().message(), before_proof + impostor.url());
}

}  // namespace
}  // namespace rgpu