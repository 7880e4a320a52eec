// Lanes (Session::ServeLane): more connections of one session where its client's threads wait.
// Only a connection holding the session's lane key joins it, at most --max-lanes of them; a lane
// serves only waits, each after the calls the session's channel had before it; a stream being
// waited on is destroyed only once its wait is over; a client that dies while its threads wait
// leaves nothing running, and the server goes on.
#include <chrono>

#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using test::Call;
using test::Exchange;
using test::Next;

const char kSpinPtx[] =
    ".version 7.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry spin()\n{\n$L_top:\n  bra.uni $L_top;\n}\n";

class ServerLanesTest : public test::RawServerTest {
 protected:
  struct Session {
    std::unique_ptr<Channel> ch;
    wire::Welcome welcome;
    uint64_t ctx = 0;
  };
  Session Open() {
    Session s;
    s.ch = Connect();
    s.welcome = test::Handshake(s.ch.get(), "").welcome();
    EXPECT_EQ(s.welcome.status(), 0);
    wire::Envelope r = Exchange(s.ch.get(), Call(1, Op::kCtxCreate, 0, {0, 0}));
    s.ctx = r.reply().values(0);
    return s;
  }
  // A connection that asks to join `session_id` with `key`; the Welcome it gets.
  std::unique_ptr<Channel> Join(uint64_t session_id, const std::string& key, wire::Welcome* out) {
    auto lane = Connect();
    wire::Envelope join;
    join.mutable_lane_join()->set_session_id(session_id);
    join.mutable_lane_join()->set_lane_key(key);
    *out = Exchange(lane.get(), join).welcome();
    return lane;
  }
  // A stream of `s`, with an endless kernel on it (softgpu ends it after --max-kernel-ms).
  uint64_t StreamWithEndlessKernel(Session& s) {
    wire::Envelope m = Exchange(s.ch.get(), Call(2, Op::kModuleLoadData, s.ctx, {}), kSpinPtx);
    EXPECT_EQ(m.reply().result(), CUDA_SUCCESS) << m.reply().message();
    wire::Envelope f =
        Exchange(s.ch.get(), Call(3, Op::kModuleGetFunction, s.ctx, {m.reply().values(0)}), "spin");
    wire::Envelope st = Exchange(s.ch.get(), Call(4, Op::kStreamCreate, s.ctx, {1, 0, 0}));
    EXPECT_EQ(st.reply().result(), CUDA_SUCCESS) << st.reply().message();
    const uint64_t stream = st.reply().values(0);
    wire::Envelope launch =
        Call(5, Op::kLaunchKernel, s.ctx, {f.reply().values(0), 1, 1, 1, 1, 1, 1, 0, stream}, true);
    EXPECT_TRUE(s.ch->Send(launch.SerializeAsString(), nullptr, 0).ok());
    return stream;
  }
  static wire::Envelope LaneCall(uint64_t seq, Op op, uint64_t ctx, std::vector<uint64_t> args,
                                 uint64_t after_seq) {
    wire::Envelope e = Call(seq, op, ctx, std::move(args));
    e.mutable_call()->set_after_seq(after_seq);
    return e;
  }
};

class ServerTwoLanesTest : public ServerLanesTest {
 protected:
  ServerTwoLanesTest() { options_.max_lanes = 2; }
};
class ServerLanesUnboundTest : public ServerLanesTest {
 protected:
  ServerLanesUnboundTest() { options_.max_kernel_ms = 0; }
};
class ServerLanesKernelBoundTest : public ServerLanesTest {
 protected:
  ServerLanesKernelBoundTest() { options_.max_kernel_ms = 1000; }
};

TEST_F(ServerTwoLanesTest, OnlyTheSessionsKeyJoinsAndAtMostMaxLanes) {
  Session s = Open();
  ASSERT_EQ(s.welcome.lane_key().size(), 16u);
  EXPECT_EQ(s.welcome.max_lanes(), 2u);
  Session other = Open();
  wire::Welcome w;
  std::string wrong = s.welcome.lane_key();
  wrong[0] ^= 1;
  auto refused = Join(s.welcome.session_id(), wrong, &w);
  EXPECT_EQ(w.status(), CUDA_ERROR_NOT_PERMITTED);
  // The other session's key opens only the other session.
  refused = Join(s.welcome.session_id(), other.welcome.lane_key(), &w);
  EXPECT_EQ(w.status(), CUDA_ERROR_NOT_PERMITTED);
  refused = Join(987654, s.welcome.lane_key(), &w);
  EXPECT_EQ(w.status(), CUDA_ERROR_NOT_PERMITTED);
  refused = Join(s.welcome.session_id(), "", &w);
  EXPECT_EQ(w.status(), CUDA_ERROR_NOT_PERMITTED);
  auto lane1 = Join(s.welcome.session_id(), s.welcome.lane_key(), &w);
  EXPECT_EQ(w.status(), 0) << w.error();
  auto lane2 = Join(s.welcome.session_id(), s.welcome.lane_key(), &w);
  EXPECT_EQ(w.status(), 0) << w.error();
  auto lane3 = Join(s.welcome.session_id(), s.welcome.lane_key(), &w);
  EXPECT_EQ(w.status(), CUDA_ERROR_NOT_PERMITTED);
  // A lane that goes makes room for another.
  lane1.reset();
  bool joined = false;
  for (int i = 0; i < 100 && !joined; ++i) {
    lane3 = Join(s.welcome.session_id(), s.welcome.lane_key(), &w);
    joined = w.status() == 0;
    if (!joined) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(joined);
  // The lanes' waits work; the session goes on.
  wire::Envelope r = Exchange(lane2.get(), LaneCall(1, Op::kCtxSynchronize, s.ctx, {}, 1));
  EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
  EXPECT_NE(test::Alloc(s.ch.get(), s.ctx, 4096), 0u);
}

TEST_F(ServerLanesTest, ALaneServesOnlyWaitsAndItsSessionsHandles) {
  Session s = Open();
  Session other = Open();
  wire::Envelope st = Exchange(other.ch.get(), Call(4, Op::kStreamCreate, other.ctx, {1, 0, 0}));
  const uint64_t others_stream = st.reply().values(0);
  wire::Welcome w;
  auto lane = Join(s.welcome.session_id(), s.welcome.lane_key(), &w);
  ASSERT_EQ(w.status(), 0);
  // Calls other than waits are refused, and the lane goes on.
  wire::Envelope r = Exchange(lane.get(), LaneCall(1, Op::kMemAlloc, s.ctx, {4096}, 0));
  EXPECT_EQ(r.reply().result(), CUDA_ERROR_NOT_SUPPORTED);
  r = Exchange(lane.get(), LaneCall(2, Op::kStreamSynchronize, s.ctx, {}, 0));  // no argument
  EXPECT_EQ(r.reply().result(), CUDA_ERROR_INVALID_VALUE);
  r = Exchange(lane.get(), LaneCall(3, Op::kStreamSynchronize, s.ctx, {others_stream}, 0));
  EXPECT_EQ(r.reply().result(), CUDA_ERROR_INVALID_HANDLE);  // handles are the session's own
  r = Exchange(lane.get(), LaneCall(4, Op::kEventSynchronize, s.ctx, {12345}, 0));
  EXPECT_EQ(r.reply().result(), CUDA_ERROR_INVALID_HANDLE);
  r = Exchange(lane.get(), LaneCall(5, Op::kCtxSynchronize, other.ctx + 77, {}, 0));
  EXPECT_EQ(r.reply().result(), CUDA_ERROR_INVALID_CONTEXT);
  r = Exchange(lane.get(), LaneCall(6, Op::kStreamSynchronize, s.ctx, {0}, 0));
  EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
  // A payload, a batch or garbage closes the lane, not the session.
  EXPECT_TRUE(
      lane->Send(LaneCall(7, Op::kCtxSynchronize, s.ctx, {}, 0).SerializeAsString(), "data", 4)
          .ok());
  EXPECT_EQ(Next(lane.get()).body_case(), wire::Envelope::kGoodbye);
  auto garbage = Join(s.welcome.session_id(), s.welcome.lane_key(), &w);
  ASSERT_EQ(w.status(), 0);
  EXPECT_TRUE(garbage->Send(std::string("\xff\xff\xff", 3), nullptr, 0).ok());
  EXPECT_EQ(Next(garbage.get()).body_case(), wire::Envelope::kGoodbye);
  EXPECT_NE(test::Alloc(s.ch.get(), s.ctx, 4096), 0u);
  EXPECT_NE(test::Alloc(other.ch.get(), other.ctx, 4096), 0u);
}

// A lane's wait comes after the calls the client sent on the session's channel before it: one
// that names a call not yet served waits for it, while the session serves other calls.
TEST_F(ServerLanesTest, AWaitComesAfterTheCallsSentBeforeIt) {
  Session s = Open();
  wire::Welcome w;
  auto lane = Join(s.welcome.session_id(), s.welcome.lane_key(), &w);
  ASSERT_EQ(w.status(), 0);
  EXPECT_TRUE(
      lane->Send(LaneCall(1, Op::kCtxSynchronize, s.ctx, {}, 100).SerializeAsString(), nullptr, 0)
          .ok());
  EXPECT_EQ(Next(lane.get(), nullptr, 500).body_case(), wire::Envelope::BODY_NOT_SET);
  EXPECT_NE(test::Alloc(s.ch.get(), s.ctx, 4096), 0u);  // the session serves calls meanwhile
  EXPECT_EQ(Next(lane.get(), nullptr, 200).body_case(), wire::Envelope::BODY_NOT_SET);
  wire::Envelope r = Exchange(s.ch.get(), Call(100, Op::kBarrier, 0, {}));
  EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
  wire::Envelope waited = Next(lane.get());
  ASSERT_EQ(waited.body_case(), wire::Envelope::kReply);
  EXPECT_EQ(waited.reply().result(), CUDA_SUCCESS);
}

// An event or a stream a lane waits on is destroyed only once the wait is over (the backend's
// object would otherwise go under the waiting thread): the destroy's reply comes after the
// wait's. (softgpu's cuStreamDestroy itself waits for the stream's work; its cuEventDestroy does
// not, so the event's case fails without the defence.)
TEST_F(ServerLanesKernelBoundTest, WhatALaneWaitsOnIsDestroyedAfterTheWait) {
  Session s = Open();
  const uint64_t stream = StreamWithEndlessKernel(s);
  wire::Envelope ev = Exchange(s.ch.get(), Call(6, Op::kEventCreate, s.ctx, {0, 0}));
  ASSERT_EQ(ev.reply().result(), CUDA_SUCCESS);
  const uint64_t event = ev.reply().values(0);
  wire::Envelope record = Call(7, Op::kEventRecord, s.ctx, {event, stream}, true);
  ASSERT_TRUE(s.ch->Send(record.SerializeAsString(), nullptr, 0).ok());
  wire::Welcome w;
  auto lane = Join(s.welcome.session_id(), s.welcome.lane_key(), &w);
  ASSERT_EQ(w.status(), 0);
  auto lane2 = Join(s.welcome.session_id(), s.welcome.lane_key(), &w);
  ASSERT_EQ(w.status(), 0);
  EXPECT_TRUE(lane->Send(LaneCall(1, Op::kEventSynchronize, s.ctx, {event}, 7).SerializeAsString(),
                         nullptr, 0)
                  .ok());
  EXPECT_TRUE(
      lane2
          ->Send(LaneCall(1, Op::kStreamSynchronize, s.ctx, {stream}, 7).SerializeAsString(),
                 nullptr, 0)
          .ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the lanes are waiting
  EXPECT_TRUE(
      s.ch->Send(Call(8, Op::kEventDestroy, s.ctx, {event}).SerializeAsString(), nullptr, 0).ok());
  EXPECT_TRUE(
      s.ch->Send(Call(9, Op::kStreamDestroy, s.ctx, {stream}).SerializeAsString(), nullptr, 0)
          .ok());
  // Had the destroy not waited, its reply would come now, long before the kernel's end.
  wire::Envelope early = Next(s.ch.get(), nullptr, 400);
  EXPECT_EQ(early.body_case(), wire::Envelope::BODY_NOT_SET) << "destroyed under a waiting lane";
  for (Channel* l : {lane.get(), lane2.get()}) {
    wire::Envelope waited = Next(l);
    ASSERT_EQ(waited.body_case(), wire::Envelope::kReply);
    EXPECT_EQ(waited.reply().result(), CUDA_ERROR_LAUNCH_TIMEOUT);
  }
  if (early.body_case() == wire::Envelope::BODY_NOT_SET) {
    EXPECT_EQ(Next(s.ch.get()).reply().seq(), 8u);
    EXPECT_EQ(Next(s.ch.get()).reply().seq(), 9u);
  }
}

// A client that dies while one of its threads waits on an endless kernel: the session ends, its
// kernel is stopped and its lane closed; the server serves the next tenant.
// (No --max-kernel-ms: nothing bounds the kernel but the session's end.)
TEST_F(ServerLanesUnboundTest, AClientGoneWhileItsLaneWaitsLeavesNothingRunning) {
  {
    Session s = Open();
    const uint64_t stream = StreamWithEndlessKernel(s);
    wire::Welcome w;
    auto lane = Join(s.welcome.session_id(), s.welcome.lane_key(), &w);
    ASSERT_EQ(w.status(), 0);
    EXPECT_TRUE(
        lane->Send(LaneCall(1, Op::kStreamSynchronize, s.ctx, {stream}, 5).SerializeAsString(),
                   nullptr, 0)
            .ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    s.ch.reset();                             // the process dies: its connections close
    wire::Envelope ended = Next(lane.get());  // the lane's wait ends with the session
    if (ended.body_case() == wire::Envelope::kReply) {
      EXPECT_NE(ended.reply().result(), CUDA_SUCCESS);
    }
  }
  Session next = Open();
  wire::Envelope r = Exchange(next.ch.get(), Call(2, Op::kCtxSynchronize, next.ctx, {}));
  EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
}

}  // namespace
}  // namespace rgpu
