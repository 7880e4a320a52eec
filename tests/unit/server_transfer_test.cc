// Copies between servers (server/session_peer.cc): another server reaches a session's memory only
// with a ticket the session granted (PeerGrant), once, for the granted range and direction, and
// only while that range is still the session's; a wrong, reused or another session's ticket is
// refused before any byte moves. The server making a copy (MemcpyPeerRemote) connects where its
// tenant says, so it sends nothing the tenant chose there, and no data, until the other end
// proved the ticket (server/peer_join_proof.h).
#include <atomic>
#include <chrono>
#include <cstring>

#include "server/peer_join_proof.h"
#include "tests/unit/keepalive_peer.h"
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
// the tenant's error is the same whether anything listened there or not, and comes no sooner
// than a silent peer's would (the peer timeout, shortened here).
class UnprovenPeerTest : public ServerTransferTest {
 protected:
  static constexpr int kPeerTimeoutMs = 1500;
  UnprovenPeerTest() { options_.session_limits.peer_timeout_ms = kPeerTimeoutMs; }
  // The answer to a copy to `url`, and how long it took.
  wire::Envelope CopyTo(const Tenant& a, uint64_t id, const std::string& url, uint64_t t0,
                        uint64_t t1, int64_t* took_ms) {
    const auto start = std::chrono::steady_clock::now();
    wire::Envelope r =
        Exchange(a.ch.get(), Call(id, Op::kMemcpyPeerRemote, a.ctx, {a.ptr, 4096, 0, 1, 7, t0, t1}),
                 url + std::string(1, '\0'));
    *took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - start)
                   .count();
    return r;
  }
};

TEST_F(UnprovenPeerTest, ACopysServerSendsNothingTheTenantChoseToAnUnprovenPeer) {
  Tenant a = Open(4096, 'D');
  const std::string chosen = "\r\nFLUSHALL\r\n\r\n\r\n";  // 16 bytes
  ASSERT_EQ(chosen.size(), 16u);
  uint64_t t0 = 0, t1 = 0;
  memcpy(&t0, chosen.data(), 8);
  memcpy(&t1, chosen.data() + 8, 8);
  const std::string before_proof = "no server that granted the transfer answered at ";
  ImpostorPeer impostor;
  int64_t took_ms = 0;
  wire::Envelope r = CopyTo(a, 8, impostor.url(), t0, t1, &took_ms);
  ASSERT_EQ(r.body_case(), wire::Envelope::kReply);
  EXPECT_EQ(r.reply().result(), CUDA_ERROR_DEVICE_UNAVAILABLE);
  EXPECT_EQ(r.reply().message(), before_proof + impostor.url());
  EXPECT_GE(took_ms, kPeerTimeoutMs) << "an impostor's answer told apart by its time";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // for anything sent after it
  impostor.Finish();
  ASSERT_FALSE(impostor.first_message.empty());  // the server did connect and join
  EXPECT_EQ(impostor.first_message.find(chosen), std::string::npos);
  EXPECT_EQ(impostor.first_message.find("FLUSHALL"), std::string::npos);
  EXPECT_EQ(impostor.later_messages, 0);  // no data followed the unproven admission
  // A host that is not a name or an address (a tls:// connection names its host in its first
  // bytes) is refused before any connection.
  r = Exchange(a.ch.get(), Call(10, Op::kMemcpyPeerRemote, a.ctx, {a.ptr, 4096, 0, 1, 7, t0, t1}),
               std::string("tls://x\r\nFLUSHALL\r\n:6379") + std::string(1, '\0'));
  EXPECT_EQ(r.reply().result(), CUDA_ERROR_INVALID_VALUE) << r.reply().message();
  // Where nothing listens (the impostor's port, closed now), the same answer, no sooner.
  r = CopyTo(a, 9, impostor.url(), t0, t1, &took_ms);
  EXPECT_EQ(r.reply().result(), CUDA_ERROR_DEVICE_UNAVAILABLE);
  EXPECT_EQ(r.reply().message(), before_proof + impostor.url());
  EXPECT_GE(took_ms, kPeerTimeoutMs) << "a closed port told apart by its time";
}

// The other end of a copy may be the tenant's own listener, which can prove the ticket (the
// tenant knows it) and then stall half-way through a message. The session's end (here: its
// client's keepalive connection closes) gives up on that connection too, so that the session's
// thread, and with it the session's memory and the server's stop, are not held by it.
TEST_F(ServerTransferTest, AnEndingSessionIsNotHeldByAPeerThatStallsMidMessage) {
  auto ch = Connect();
  const wire::Welcome w = test::Handshake(ch.get(), "").welcome();
  ASSERT_EQ(w.status(), 0);
  ASSERT_NE(w.liveness_port(), 0u);
  const uint64_t ctx = Exchange(ch.get(), Call(1, Op::kCtxCreate, 0, {0, 0})).reply().values(0);
  const uint64_t ptr = test::Alloc(ch.get(), ctx, 4096);
  ASSERT_NE(ptr, 0u);
  const int keepalive = test::ConnectFrom("127.0.0.1", static_cast<uint16_t>(w.liveness_port()));
  ASSERT_GE(keepalive, 0);
  ASSERT_TRUE(test::Announce(keepalive, w.liveness_key(), w.liveness_secret()));
  // The tenant's listener, speaking sock://'s framing by hand (a 12-byte prefix: the header's
  // size, 4 bytes, and the payload's, 8, then the header).
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  socklen_t length = sizeof address;
  getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string ticket = "ticket-of-tenant";  // 16 bytes it names as the grant's
  std::atomic<bool> stalled{false}, closed{false};
  std::thread stalling_peer([&] {
    const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    auto read_all = [fd](char* out, size_t n) {
      for (size_t got = 0; got < n;) {
        const ssize_t r = read(fd, out + got, n - got);
        if (r <= 0) return false;
        got += static_cast<size_t>(r);
      }
      return true;
    };
    char prefix[12];
    uint32_t header_bytes = 0;
    std::string header;
    if (read_all(prefix, 12)) {
      memcpy(&header_bytes, prefix, 4);
      header.resize(header_bytes);
    }
    wire::Envelope join;
    if (header_bytes == 0 || !read_all(header.data(), header.size()) ||
        !join.ParseFromString(header)) {
      close(fd);
      return;
    }
    wire::Envelope welcome;
    welcome.mutable_welcome()->set_protocol_version(kProtocolVersion);
    welcome.mutable_welcome()->set_peer_proof(
        server::PeerJoinProof(ticket, join.peer_join().nonce()));
    const std::string out = welcome.SerializeAsString();
    std::string frame(12, '\0');
    const uint32_t out_bytes = static_cast<uint32_t>(out.size());
    memcpy(frame.data(), &out_bytes, 4);
    frame += out;
    // Then a message that declares 64 header bytes and sends 5 of them.
    std::string stall(12, '\0');
    const uint32_t declared = 64;
    memcpy(stall.data(), &declared, 4);
    stall += "chunk";
    frame += stall;
    if (write(fd, frame.data(), frame.size()) == static_cast<ssize_t>(frame.size())) {
      stalled = true;
      closed = test::ClosedWithin(fd, 25000);
    }
    close(fd);
  });
  uint64_t t0 = 0, t1 = 0;
  memcpy(&t0, ticket.data(), 8);
  memcpy(&t1, ticket.data() + 8, 8);
  const std::string url = "sock://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  const wire::Envelope copy =
      Call(2, Op::kMemcpyPeerRemote, ctx, {ptr, 4096, 0, 0, 7, t0, t1});  // fetch into ptr
  ASSERT_TRUE(ch->Send(copy.SerializeAsString(), url.c_str(), url.size() + 1).ok());
  for (int i = 0; i < 200 && !stalled; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(stalled.load());
  close(keepalive);  // the client is gone: the session ends
  stalling_peer.join();
  close(listener);
  EXPECT_TRUE(closed.load()) << "the session still waits on the stalled peer";
}

}  // namespace
}  // namespace rgpu
