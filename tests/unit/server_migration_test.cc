// Moving sessions (docs/migration.md), spoken raw against an in-process server: a session goes
// through a checkpoint and is resumed where it was restored, at the same ids and device addresses,
// by the one connection that proves the credential; a forged or replayed proof, a second resume,
// a wrong or used restore ticket and a request without the operator's key are refused; a
// session that cannot move (memory shared over IPC) or whose client makes no waited call stays
// and goes on; a restore refuses a device too weak and an address in use, naming them.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>

#include "proto/call_kinds.h"
#include "proto/crypto.h"
#include "proto/signed_token.h"
#include "server/checkpoint.h"
#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using namespace test;  // the raw protocol peer (raw_peer.h)

// What the tests' sessions hold: 4096 bytes of a pattern.
std::string Pattern() {
  std::string p(4096, '\0');
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<char>(i * 13 + 1);
  return p;
}

class ServerMigrationTest : public test::RawServerTest {
 protected:
  ServerMigrationTest() {
    char dir[] = "/tmp/rgpu-migration-XXXXXX";
    dir_ = mkdtemp(dir);
    options_.operator_key_file = dir_ + "/operator.key";
  }
  ~ServerMigrationTest() override { (void)!system(("rm -rf " + dir_).c_str()); }

  std::string OperatorKey() {
    std::ifstream in(dir_ + "/operator.key");
    std::string key;
    std::getline(in, key);
    return key;
  }

  // An operator's connection: `request` sent and the server's challenge answered with `key`.
  std::unique_ptr<Channel> Admin(wire::AdminRequest request, const std::string& key) {
    auto ch = Connect();
    CredentialProver prover;
    EXPECT_TRUE(CredentialProver::Parse(key, &prover).ok());
    *request.mutable_credential() = prover.presented();
    wire::Envelope out;
    *out.mutable_admin_request() = request;
    wire::Envelope challenge = Exchange(ch.get(), out);
    EXPECT_EQ(challenge.body_case(), wire::Envelope::kChallenge);
    std::string proof;
    EXPECT_TRUE(prover.Prove(challenge.challenge().nonce(), &proof).ok());
    wire::Envelope answer;
    answer.mutable_challenge_response()->set_proof(proof);
    EXPECT_TRUE(ch->Send(answer.SerializeAsString(), nullptr, 0).ok());
    return ch;
  }
  // The AdminReply on `ch`, after any checkpoint pieces (gathered into *checkpoint).
  static wire::AdminReply AdminReply(Channel* ch, std::string* checkpoint = nullptr) {
    for (;;) {
      std::string payload;
      wire::Envelope in = Next(ch, &payload, 60000);
      if (in.body_case() == wire::Envelope::kCheckpointChunk) {
        if (checkpoint != nullptr) *checkpoint += payload;
        continue;
      }
      EXPECT_EQ(in.body_case(), wire::Envelope::kAdminReply);
      return in.admin_reply();
    }
  }
  wire::AdminReply Ask(wire::AdminRequest::Kind kind, uint64_t session = 0, uint32_t timeout = 0) {
    wire::AdminRequest r;
    r.set_kind(kind);
    r.set_session_id(session);
    r.set_timeout_ms(timeout);
    auto ch = Admin(r, OperatorKey());
    return AdminReply(ch.get());
  }
  // Restores `checkpoint` (operator RESTORE); its AdminReply.
  wire::AdminReply Restore(const std::string& checkpoint) {
    wire::AdminRequest r;
    r.set_kind(wire::AdminRequest::RESTORE);
    auto ch = Admin(r, OperatorKey());
    wire::Envelope piece;
    piece.mutable_checkpoint_chunk()->set_last(true);
    EXPECT_TRUE(ch->Send(piece.SerializeAsString(), checkpoint.data(), checkpoint.size()).ok());
    return AdminReply(ch.get());
  }
  // Opens a resume of `session` and returns the server's challenge nonce ("": refused at once).
  std::unique_ptr<Channel> BeginResume(uint64_t session, std::string* nonce) {
    auto ch = Connect();
    wire::Envelope out;
    out.mutable_resume()->set_protocol_version(kProtocolVersion);
    out.mutable_resume()->set_session_id(session);
    wire::Envelope in = Exchange(ch.get(), out);
    *nonce = in.body_case() == wire::Envelope::kChallenge ? in.challenge().nonce() : "";
    return ch;
  }
  // Answers the resume's challenge with `proof`; the Welcome.
  static wire::Welcome FinishResume(Channel* ch, const std::string& proof) {
    wire::Envelope answer;
    answer.mutable_challenge_response()->set_proof(proof);
    return Exchange(ch, answer).welcome();
  }

  // A session with a context, 4096 bytes of a pattern at *ptr and a stream of a client id.
  struct Client {
    std::unique_ptr<Channel> ch;
    uint64_t session = 0, ctx = 0, ptr = 0, stream = 0, seq = 10;
  };
  Client NewClient() {
    Client c;
    c.ch = Connect();
    wire::Envelope w = Handshake(c.ch.get(), "");
    c.session = w.welcome().session_id();
    wire::Envelope r = Exchange(c.ch.get(), Call(1, Op::kCtxCreate, 0, {0, 0}));
    c.ctx = r.reply().values(0);
    c.ptr = Alloc(c.ch.get(), c.ctx, 4096);
    EXPECT_EQ(Result(c.ch.get(), Call(3, Op::kMemcpyHtoD, c.ctx, {c.ptr, 4096, 0, 0}), Pattern()),
              CUDA_SUCCESS);
    r = Exchange(c.ch.get(), Call(4, Op::kStreamCreate, c.ctx, {0, 0, calls::kFirstClientId + 7}));
    EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
    c.stream = r.reply().values(0);
    return c;
  }
  // Checkpoints `c`'s session: the operator's request on a thread, the client's waited calls
  // until one is taken (it then gets no answer: parked). The checkpoint's bytes, or the error.
  std::string Checkpoint(Client& c, std::string* error, uint32_t timeout_ms = 20000) {
    std::string bytes;
    std::atomic<bool> done{false};
    std::thread op([&] {
      wire::AdminRequest r;
      r.set_kind(wire::AdminRequest::CHECKPOINT);
      r.set_session_id(c.session);
      r.set_timeout_ms(timeout_ms);
      auto ch = Admin(r, OperatorKey());
      *error = AdminReply(ch.get(), &bytes).error();
      done = true;
    });
    while (!done) {
      // Served at once unless the checkpoint takes it.
      EXPECT_TRUE(
          c.ch->Send(Call(c.seq++, Op::kCtxSynchronize, c.ctx, {}).SerializeAsString(), nullptr, 0)
              .ok());
      for (int i = 0; i < 50 && !done; ++i) {
        ReceivedMessage m;
        if (c.ch->Receive(20, &m).ok()) break;
      }
    }
    op.join();
    return bytes;
  }

  // Restores HandMade(at) (a 4096-byte pattern at `at`), resumes it on *ch and reads the
  // memory back there: the pattern.
  void RestoreAndRead(uint64_t at, std::unique_ptr<Channel>* ch);

  std::string dir_;
};

TEST_F(ServerMigrationTest, ASessionIsResumedOnceByWhoeverProvesItsCredential) {
  Client c = NewClient();
  std::string error;
  const std::string checkpoint = Checkpoint(c, &error);
  ASSERT_EQ(error, "");
  ASSERT_GT(checkpoint.size(), 4096u);
  // Parked: its memory released, which a restore in this very process can now take again.
  wire::AdminReply restored = Restore(checkpoint);
  ASSERT_EQ(restored.error(), "");
  const uint64_t id = restored.session_id();
  const std::string credential = restored.resume_credential();
  ASSERT_EQ(credential.size(), 32u);

  // An eavesdropper's replay: a proof seen for one nonce, presented for another.
  std::string n1, n2, n3;
  auto x = BeginResume(id, &n1);
  auto y = BeginResume(id, &n2);
  ASSERT_FALSE(n1.empty());
  ASSERT_NE(n1, n2);
  const std::string seen = ResumeProof(credential, n1, id);
  EXPECT_NE(FinishResume(y.get(), seen).status(), 0);
  // A forged credential.
  auto z = BeginResume(id, &n3);
  EXPECT_NE(FinishResume(z.get(), ResumeProof(std::string(32, 'f'), n3, id)).status(), 0);
  // The credential's proof for the session's own id, presented for another: no such session.
  std::string n4;
  auto other = BeginResume(id + 1000, &n4);
  EXPECT_TRUE(n4.empty());
  // The holder: resumed.
  wire::Welcome w = FinishResume(x.get(), seen);
  ASSERT_EQ(w.status(), 0) << w.error();
  EXPECT_EQ(w.session_id(), id);
  // Once: the credential is gone.
  std::string n5;
  auto again = BeginResume(id, &n5);
  EXPECT_TRUE(n5.empty()) << "a second resume was challenged";

  // Everything where it was: the same address holds the pattern, the stream's id is the same.
  std::string got;
  wire::Envelope r =
      Exchange(x.get(), Call(c.seq++, Op::kMemcpyDtoH, c.ctx, {c.ptr, 4096, 0, 0}), "", &got);
  ASSERT_EQ(r.reply().result(), CUDA_SUCCESS) << r.reply().message();
  EXPECT_EQ(got, Pattern());
  EXPECT_EQ(Result(x.get(), Call(c.seq++, Op::kStreamSynchronize, c.ctx, {c.stream})),
            CUDA_SUCCESS);

  // The parked session's client is told where it went.
  std::thread op([&] {
    wire::AdminRequest redirect;
    redirect.set_kind(wire::AdminRequest::REDIRECT);
    redirect.set_session_id(c.session);
    redirect.set_target_url("tcp://elsewhere:1");
    redirect.set_target_session(id);
    redirect.set_resume_credential("the credential");
    auto ch = Admin(redirect, OperatorKey());
    EXPECT_EQ(AdminReply(ch.get()).error(), "");
  });
  wire::Envelope moved = Next(c.ch.get());
  ASSERT_TRUE(moved.reply().has_moved());
  EXPECT_EQ(moved.reply().moved().url(), "tcp://elsewhere:1");
  EXPECT_EQ(moved.reply().moved().session_id(), id);
  c.ch.reset();  // the client leaves
  op.join();
}

TEST_F(ServerMigrationTest, ASessionThatCannotMoveStaysAndGoesOn) {
  Client c = NewClient();
  // Memory exported to other sessions cannot move.
  ASSERT_EQ(Result(c.ch.get(), Call(c.seq++, Op::kIpcGetMemHandle, c.ctx, {c.ptr})), CUDA_SUCCESS);
  std::string error;
  std::thread op([&] {
    wire::AdminRequest r;
    r.set_kind(wire::AdminRequest::CHECKPOINT);
    r.set_session_id(c.session);
    auto ch = Admin(r, OperatorKey());
    error = AdminReply(ch.get()).error();
  });
  // Its waited calls are answered, before and after the refusal.
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(Result(c.ch.get(), Call(c.seq++, Op::kCtxSynchronize, c.ctx, {})), CUDA_SUCCESS);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  op.join();
  EXPECT_NE(error.find("IPC"), std::string::npos) << error;
  std::string got;
  Exchange(c.ch.get(), Call(c.seq++, Op::kMemcpyDtoH, c.ctx, {c.ptr, 4096, 0, 0}), "", &got);
  EXPECT_EQ(got, Pattern());
}

TEST_F(ServerMigrationTest, NoWaitedCallNoMove) {
  Client c = NewClient();
  const wire::AdminReply r = Ask(wire::AdminRequest::MIGRATE, c.session, 300);
  EXPECT_NE(r.error().find("no call it waits for"), std::string::npos) << r.error();
  // The request is gone with its time: the calls after it are served, and a new request may come.
  EXPECT_EQ(Result(c.ch.get(), Call(c.seq++, Op::kCtxSynchronize, c.ctx, {})), CUDA_SUCCESS);
  EXPECT_EQ(Result(c.ch.get(), Call(c.seq++, Op::kCtxSynchronize, c.ctx, {})), CUDA_SUCCESS);
  EXPECT_NE(Ask(wire::AdminRequest::MIGRATE, c.session, 300).error().find("no call"),
            std::string::npos);
}

TEST_F(ServerMigrationTest, OperatorRequestsNeedTheOperatorsKey) {
  wire::AdminRequest r;
  r.set_kind(wire::AdminRequest::RESTORE_TICKET);
  auto ch = Admin(r, "not-the-operator-key");
  wire::AdminReply reply = AdminReply(ch.get());
  EXPECT_NE(reply.error(), "");
  EXPECT_TRUE(reply.ticket().empty());
  EXPECT_EQ(Ask(wire::AdminRequest::RESTORE_TICKET).error(), "");
  // Its name at a registry (none here), asked without a ticket being issued.
  r.set_kind(wire::AdminRequest::REGISTRY_NAME);
  auto name_ch = Admin(r, "not-the-operator-key");
  EXPECT_NE(AdminReply(name_ch.get()).error(), "");
  const wire::AdminReply name = Ask(wire::AdminRequest::REGISTRY_NAME);
  EXPECT_EQ(name.error(), "");
  EXPECT_TRUE(name.ticket().empty());
  EXPECT_EQ(name.registry_name(), "");
}

TEST_F(ServerMigrationTest, ARestoreTicketIsNeededAndServesOnce) {
  auto Join = [&](const std::string& ticket) {
    auto ch = Connect();
    wire::Envelope join;
    join.mutable_restore_join()->set_ticket(ticket);
    EXPECT_TRUE(ch->Send(join.SerializeAsString(), nullptr, 0).ok());
    wire::Envelope piece;
    piece.mutable_checkpoint_chunk()->set_last(true);
    const std::string garbage(32, 'n');  // not a checkpoint
    ch->Send(piece.SerializeAsString(), garbage.data(), garbage.size());
    return AdminReply(ch.get()).error();
  };
  EXPECT_NE(Join(std::string(16, 't')).find("no such restore ticket"), std::string::npos);
  const std::string ticket = Ask(wire::AdminRequest::RESTORE_TICKET).ticket();
  ASSERT_EQ(ticket.size(), 16u);
  EXPECT_NE(Join(ticket).find("RGPUCKPT"), std::string::npos);
  EXPECT_NE(Join(ticket).find("no such restore ticket"), std::string::npos);
}

// A checkpoint made by hand: one context, one allocation of 4096 bytes of Pattern() at `ptr`.
// `header`, when given, fills in more of the header (tenant, lease, hand-over).
std::string HandMade(uint64_t ptr, int cc_major = 7,
                     const std::function<void(wire::Checkpoint*)>& header = nullptr) {
  wire::Checkpoint c;
  wire::CheckpointDevice* d = c.add_devices();
  d->set_cc_major(cc_major);
  d->set_cc_minor(5);
  c.add_contexts()->set_id(1);
  wire::CheckpointAllocation* a = c.add_allocations();
  a->set_ptr(ptr);
  a->set_size(4096);
  a->set_ctx(1);
  wire::CheckpointNextIds* next = c.mutable_next_ids();
  next->set_contexts(2);
  for (auto set : {&wire::CheckpointNextIds::set_modules, &wire::CheckpointNextIds::set_functions,
                   &wire::CheckpointNextIds::set_streams, &wire::CheckpointNextIds::set_events,
                   &wire::CheckpointNextIds::set_pools, &wire::CheckpointNextIds::set_graphs}) {
    (next->*set)(1);
  }
  c.set_memory_bytes(4096);
  if (header) header(&c);
  std::string out;
  server::CheckpointWriter writer([&](const char* data, size_t n) {
    out.append(data, n);
    return Status::Ok();
  });
  const std::string memory = Pattern();
  EXPECT_TRUE(writer.Begin(c).ok());
  EXPECT_TRUE(writer.Memory(memory.data(), memory.size()).ok());
  const std::string more(c.memory_bytes() - memory.size(), '\0');  // what `header` added
  EXPECT_TRUE(writer.Memory(more.data(), more.size()).ok());
  EXPECT_TRUE(writer.Finish().ok());
  return out;
}

void ServerMigrationTest::RestoreAndRead(uint64_t at, std::unique_ptr<Channel>* ch) {
  wire::AdminReply r = Restore(HandMade(at));
  ASSERT_EQ(r.error(), "");
  std::string nonce;
  *ch = BeginResume(r.session_id(), &nonce);
  ASSERT_EQ(
      FinishResume(ch->get(), ResumeProof(r.resume_credential(), nonce, r.session_id())).status(),
      0);
  std::string got;
  wire::Envelope read =
      Exchange(ch->get(), Call(5, Op::kMemcpyDtoH, 1, {at, 4096, 0, 0}), "", &got);
  ASSERT_EQ(read.reply().result(), CUDA_SUCCESS) << read.reply().message();
  EXPECT_EQ(got, Pattern());
}

TEST_F(ServerMigrationTest, ARestorePlacesMemoryWhereTheCheckpointSaysOrRefuses) {
  const uint64_t at = 0x5f1234500000ull;  // no server of this process hands this out
  std::unique_ptr<Channel> ch;
  ASSERT_NO_FATAL_FAILURE(RestoreAndRead(at, &ch));
  // The same addresses again, while that session holds them: refused, naming why.
  EXPECT_NE(Restore(HandMade(at)).error().find("cannot be placed"), std::string::npos);
  // A device weaker than the session's.
  EXPECT_NE(Restore(HandMade(at + (1 << 20), 99)).error().find("compute capability"),
            std::string::npos);
}

// The same on a backend that cannot allocate at a chosen address (NVIDIA's driver; here the
// software GPU without its extensions): the restore maps the memory at its addresses through
// virtual memory management, and a free unmaps it.
class ServerMappedMigrationTest : public ServerMigrationTest {
 protected:
  ServerMappedMigrationTest() { options_.backend_extensions = false; }
};

TEST_F(ServerMappedMigrationTest, ARestoreMapsMemoryWhereTheCheckpointSaysOrRefuses) {
  const uint64_t at = 0x5f1234500000ull;  // no server of this process hands this out
  std::unique_ptr<Channel> ch;
  ASSERT_NO_FATAL_FAILURE(RestoreAndRead(at, &ch));
  // The same addresses again, while that session holds them: refused, naming why.
  EXPECT_NE(Restore(HandMade(at)).error().find("cannot be placed there"), std::string::npos);
  // Freed, the mapping goes with it: the addresses are free for a restore again.
  ASSERT_EQ(Result(ch.get(), Call(6, Op::kMemFree, 1, {at})), CUDA_SUCCESS);
  EXPECT_EQ(Restore(HandMade(at)).error(), "");
  // A checkpoint whose module variables have no names (taken where they are placed at fixed
  // addresses) cannot be restored here.
  const std::string unnamed = HandMade(at + (4 << 20), 7, [](wire::Checkpoint* c) {
    wire::CheckpointModule* m = c->add_modules();
    m->set_id(1);
    m->set_ctx(1);
    m->set_image(".version 8.0\n.target sm_75\n.address_size 64\n.global .u32 v;\n");
    m->add_variable_bases(0x5f1300000000ull);
    m->add_variable_sizes(4);
    c->mutable_next_ids()->set_modules(2);
    c->set_memory_bytes(4096 + 4);
  });
  const std::string refused = Restore(unnamed).error();
  EXPECT_NE(refused.find("have no names"), std::string::npos) << refused;
}

// A move the registry asks for (docs/migration.md, "Moved by the registry"): the checkpoint
// comes with the registry's hand-over of its lease instead of an operator's ticket. A forged one,
// one for another server, and one whose checkpoint is not of that hand-over are refused; the real
// one restores each session of the lease once (a lease moves whole), charged to its tenant.
class ServerHandOverTest : public ServerMigrationTest {
 protected:
  ServerHandOverTest() {
    EXPECT_TRUE(GenerateTokenKeys(dir_ + "/key.pem", dir_ + "/key.pub").ok());
    options_.token_public_key = dir_ + "/key.pub";
    options_.name = "host1";
  }
  // `later`: seconds more of life (another token for the same claims).
  std::string HandOver(const std::string& server, int later = 0,
                       const std::string& lease = "lease-5", uint64_t quota = uint64_t{1} << 30) {
    wire::TokenClaims claims;
    claims.set_tenant("alice");
    claims.set_server(server);
    claims.set_memory_quota(quota);
    claims.set_weight(1);
    claims.set_expires_unix(time(nullptr) + 3600 + later);
    claims.set_lease_id(lease);
    claims.add_gpus(0);
    claims.set_hand_over(true);
    std::string token;
    EXPECT_TRUE(SignToken(claims, dir_ + "/key.pem", &token).ok());
    return token;
  }
  // Sends `checkpoint` with `hand_over` in place of a ticket; the target's answer.
  wire::AdminReply Join(const std::string& hand_over, const std::string& checkpoint) {
    auto ch = Connect();
    wire::Envelope join;
    join.mutable_restore_join()->set_hand_over(hand_over);
    EXPECT_TRUE(ch->Send(join.SerializeAsString(), nullptr, 0).ok());
    wire::Envelope piece;
    piece.mutable_checkpoint_chunk()->set_last(true);
    ch->Send(piece.SerializeAsString(), checkpoint.data(), checkpoint.size());
    return AdminReply(ch.get());
  }
  static std::function<void(wire::Checkpoint*)> Of(const std::string& token,
                                                   const std::string& lease = "lease-5") {
    return [token, lease](wire::Checkpoint* c) {
      c->set_tenant("alice");
      c->set_lease_id(lease);
      c->set_lease_token(token);
    };
  }
};

TEST_F(ServerHandOverTest, ARegistrysHandOverAdmitsOnlyItsLeasesCheckpoints) {
  const uint64_t at = 0x5f2234500000ull;
  const std::string token = HandOver("host1");
  std::string forged = token;
  forged[forged.size() / 3] ^= 1;
  EXPECT_NE(Join(forged, HandMade(at, 7, Of(forged))).error().find("hand-over is refused"),
            std::string::npos);
  const std::string elsewhere = HandOver("host2");
  EXPECT_NE(Join(elsewhere, HandMade(at, 7, Of(elsewhere))).error().find("for server host2"),
            std::string::npos);
  // The checkpoint must carry the very hand-over that admitted it.
  EXPECT_NE(Join(token, HandMade(at, 7, Of(HandOver("host1", 1)))).error().find("not of the lease"),
            std::string::npos);
  wire::AdminReply r = Join(token, HandMade(at, 7, Of(token)));
  ASSERT_EQ(r.error(), "");
  EXPECT_NE(r.session_id(), 0u);
  EXPECT_EQ(r.resume_credential().size(), 32u);
}

// The sessions of a lease move together under one hand-over: it restores each of them once (the
// same session's checkpoint again is refused, wherever its memory would go, unless its restore
// failed), another session of the lease is restored, and no more than 16 in all.
TEST_F(ServerHandOverTest, AHandOverRestoresEachSessionOfItsLeaseOnce) {
  const uint64_t at = 0x5f2234500000ull;
  const std::string token = HandOver("host1");
  auto session = [&token](uint64_t source) -> std::function<void(wire::Checkpoint*)> {
    return [token, source](wire::Checkpoint* c) {
      Of(token)(c);
      c->set_source_server("host0");
      c->set_source_session(source);
    };
  };
  ASSERT_EQ(Join(token, HandMade(at, 7, session(1))).error(), "");
  const std::string again = Join(token, HandMade(at + (1 << 20), 7, session(1))).error();
  EXPECT_NE(again.find("under this hand-over already"), std::string::npos) << again;
  // A restore that fails (its memory's place is taken) leaves its session free to try again.
  const std::string taken = Join(token, HandMade(at, 7, session(2))).error();
  EXPECT_NE(taken.find("cannot be placed"), std::string::npos) << taken;
  for (uint64_t source = 2; source <= 16; ++source) {
    ASSERT_EQ(Join(token, HandMade(at + source * (1 << 20), 7, session(source))).error(), "")
        << "session " << source;
  }
  const std::string more = Join(token, HandMade(at + 17 * (1 << 20), 7, session(17))).error();
  EXPECT_NE(more.find("16 sessions"), std::string::npos) << more;
  // A source's name is kept as long as the hand-over lives: bounded first.
  const std::string other = HandOver("host1", 3);
  const std::string named = Join(other, HandMade(at, 7,
                                                 [&](wire::Checkpoint* c) {
                                                   Of(other)(c);
                                                   c->set_source_server(std::string(5000, 'h'));
                                                 }))
                                .error();
  EXPECT_NE(named.find("longer than 4 KiB"), std::string::npos) << named;
}

// A checkpoint file carries no hand-over: `rgpu restore` brings the source's
// (AdminRequest.lease_hand_over). Without one the tenant has no credential here; one of another
// lease, or one the checkpoint contradicts, is refused; the right one restores the file, once.
TEST_F(ServerHandOverTest, AFileIsRestoredUnderTheHandOverItsOperatorBrings) {
  const uint64_t at = 0x5f2234500000ull;
  auto restore = [&](const std::string& hand_over, const std::string& checkpoint) {
    wire::AdminRequest r;
    r.set_kind(wire::AdminRequest::RESTORE);
    r.set_lease_hand_over(hand_over);
    auto ch = Admin(r, OperatorKey());
    wire::Envelope piece;
    piece.mutable_checkpoint_chunk()->set_last(true);
    EXPECT_TRUE(ch->Send(piece.SerializeAsString(), checkpoint.data(), checkpoint.size()).ok());
    return AdminReply(ch.get()).error();
  };
  auto file = [](wire::Checkpoint* c) {
    c->set_tenant("alice");
    c->set_lease_id("lease-5");
    c->set_source_server("host0");
    c->set_source_session(3);
  };
  const std::string none = restore("", HandMade(at, 7, file));
  EXPECT_NE(none.find("no credential"), std::string::npos) << none;
  const std::string other = restore(HandOver("host1", 0, "lease-6"), HandMade(at, 7, file));
  EXPECT_NE(other.find("not the session's"), std::string::npos) << other;
  const std::string token = HandOver("host1");
  const std::string carried = HandOver("host1", 1);
  const std::string contradicted = restore(token, HandMade(at, 7, [&](wire::Checkpoint* c) {
                                             file(c);
                                             c->set_lease_token(carried);
                                           }));
  EXPECT_NE(contradicted.find("another hand-over"), std::string::npos) << contradicted;
  ASSERT_EQ(restore(token, HandMade(at, 7, file)), "");
  const std::string again = restore(token, HandMade(at + (1 << 20), 7, file));
  EXPECT_NE(again.find("already"), std::string::npos) << again;
}

// Where a restore maps memory in whole granules (2 MiB here, as on NVIDIA's driver), the tenant
// is charged for the granules, not only for its allocations' bytes: 16 one-byte allocations 2 MiB
// apart hold 32 MiB, which a lease of 16 MiB refuses (it mapped them for 4 KiB of charge before).
class ServerMappedHandOverTest : public ServerHandOverTest {
 protected:
  ServerMappedHandOverTest() { options_.backend_extensions = false; }
  // HandMade(at) with 15 more allocations of one byte, each 2 MiB after the one before.
  static std::string Scattered(uint64_t at, const std::function<void(wire::Checkpoint*)>& of) {
    return HandMade(at, 7, [&](wire::Checkpoint* c) {
      of(c);
      for (uint64_t i = 1; i < 16; ++i) {
        wire::CheckpointAllocation* a = c->add_allocations();
        a->set_ptr(at + i * (uint64_t{2} << 20));
        a->set_size(1);
        a->set_ctx(1);
      }
      c->set_memory_bytes(4096 + 15);
    });
  }
};

TEST_F(ServerMappedHandOverTest, ARestoreIsChargedForTheGranulesItMaps) {
  const uint64_t at = 0x5f3200000000ull;
  const std::string small = HandOver("host1", 0, "lease-5", uint64_t{16} << 20);
  const std::string refused = Join(small, Scattered(at, Of(small))).error();
  EXPECT_NE(refused.find("whole granules"), std::string::npos) << refused;
  // With room for the granules, the same restore is made (and nothing of the refused one stayed
  // mapped at those addresses).
  const std::string large = HandOver("host1", 0, "lease-6", uint64_t{64} << 20);
  EXPECT_EQ(Join(large, Scattered(at, Of(large, "lease-6"))).error(), "");
}

// An allocation freed while another still lies in its granule: the granule stays mapped, and
// charged whole (the freed bytes were given back while the granule stayed).
TEST_F(ServerMappedHandOverTest, AGranuleStaysChargedWhileItIsMapped) {
  const uint64_t at = 0x5f3400000000ull;
  const uint64_t granule = uint64_t{2} << 20;
  const std::string token = HandOver("host1", 0, "lease-5", uint64_t{3} << 20);
  // 4096 bytes at `at` (HandMade's), then one allocation filling the granule but its last byte,
  // then that byte: one span of 2 MiB, all of it allocated.
  const std::string checkpoint = HandMade(at, 7, [&](wire::Checkpoint* c) {
    Of(token)(c);
    wire::CheckpointAllocation* big = c->add_allocations();
    big->set_ptr(at + 4096);
    big->set_size(granule - 4096 - 1);
    big->set_ctx(1);
    wire::CheckpointAllocation* last = c->add_allocations();
    last->set_ptr(at + granule - 1);
    last->set_size(1);
    last->set_ctx(1);
    c->set_memory_bytes(granule);
  });
  const wire::AdminReply restored = Join(token, checkpoint);
  ASSERT_EQ(restored.error(), "");
  std::string nonce;
  auto ch = BeginResume(restored.session_id(), &nonce);
  ASSERT_EQ(FinishResume(ch.get(),
                         ResumeProof(restored.resume_credential(), nonce, restored.session_id()))
                .status(),
            0);
  ASSERT_EQ(Result(ch.get(), Call(6, Op::kMemFree, 1, {at + 4096})), CUDA_SUCCESS);
  // 2 MiB are still mapped for the two small allocations: 1 MiB of the 3 MiB lease is left.
  EXPECT_EQ(Alloc(ch.get(), 1, granule), 0u);
  EXPECT_NE(Alloc(ch.get(), 1, granule / 4), 0u);
}

// A session restored in a process of its own (where only processes keep tenants apart): the
// server reads the checkpoint's header, starts the session's host and relays the checkpoint to it
// from its first byte, also when the header came in several pieces (the host got only the pieces
// after the header's last one, and refused the restore for want of the file's preamble).
class ServerHostedRestoreTest : public ServerMigrationTest {
 protected:
  ServerHostedRestoreTest() {
    options_.session_processes = "on";
    options_.backend_extensions = false;
    options_.host_program = RGPU_SERVER_BINARY;
    options_.command_line = {RGPU_SERVER_BINARY,    "--listen", "tcp://127.0.0.1:0",
                             "--backend",           "softgpu",  "--no-backend-extensions",
                             "--session-processes", "on"};
  }
};

TEST_F(ServerHostedRestoreTest, AHeaderInSeveralPiecesReachesTheHostWhole) {
  const uint64_t at = 0x5f4200000000ull;
  const std::string checkpoint = HandMade(at);
  wire::AdminRequest r;
  r.set_kind(wire::AdminRequest::RESTORE);
  auto ch = Admin(r, OperatorKey());
  constexpr size_t kPiece = 16;  // the header spans several pieces
  for (size_t offset = 0; offset < checkpoint.size(); offset += kPiece) {
    const size_t size = std::min(kPiece, checkpoint.size() - offset);
    wire::Envelope piece;
    piece.mutable_checkpoint_chunk()->set_last(offset + size == checkpoint.size());
    ASSERT_TRUE(ch->Send(piece.SerializeAsString(), checkpoint.data() + offset, size).ok());
  }
  const wire::AdminReply reply = AdminReply(ch.get());
  ASSERT_EQ(reply.error(), "");
  // Restored in a host: the client's resume is sent on there.
  std::string nonce;
  auto resume = BeginResume(reply.session_id(), &nonce);
  const wire::Welcome welcome =
      FinishResume(resume.get(), ResumeProof(reply.resume_credential(), nonce, reply.session_id()));
  EXPECT_EQ(welcome.status(), 0);
  EXPECT_NE(welcome.redirect_port(), 0u);
}

}  // namespace
}  // namespace rgpu
