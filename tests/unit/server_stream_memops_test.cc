// Stream memory operations from a hostile client (proto/calls.def: StreamMemOp): the word a wait
// or write names must be an aligned 4- or 8-byte word wholly inside memory of the call's context,
// its value must fit it, and its flags must be a comparison (waits) or none (writes). Anything
// else is refused before the backend sees it, writes nothing, and leaves the session serving.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using namespace test;  // the raw protocol peer (raw_peer.h)

class ServerStreamMemOpsTest : public test::RawServerTest {
 protected:
  // A write of `bytes` bytes of `value` at `address` (stream 0), as the client would post it,
  // but waited for.
  static wire::Envelope Write(uint64_t seq, uint64_t ctx, uint64_t address, uint64_t bytes,
                              uint64_t value, uint64_t flags = 0) {
    return Call(seq, Op::kStreamMemOp, ctx, {address, bytes, value, flags, 0, 0});
  }
  static wire::Envelope Wait(uint64_t seq, uint64_t ctx, uint64_t address, uint64_t bytes,
                             uint64_t value, uint64_t flags) {
    return Call(seq, Op::kStreamMemOp, ctx, {address, bytes, value, flags, 1, 0});
  }
  static std::string Read(Channel* ch, uint64_t ctx, uint64_t ptr, uint64_t bytes) {
    std::string data;
    wire::Envelope r = Exchange(ch, Call(90, Op::kMemcpyDtoH, ctx, {ptr, bytes, 0, 0}), "", &data);
    EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
    return data;
  }
  static uint64_t Word(const std::string& bytes, size_t at, size_t size) {
    uint64_t v = 0;
    memcpy(&v, bytes.data() + at, size);
    return v;
  }
};

TEST_F(ServerStreamMemOpsTest, WritesAndWaitsOnTheSessionsOwnWords) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  const uint64_t words = Alloc(ch.get(), ctx, 64);
  ASSERT_NE(words, 0u);
  ASSERT_EQ(Result(ch.get(), Call(3, Op::kMemset, ctx, {words, 0, 1, 64, 0, 0})), CUDA_SUCCESS);
  EXPECT_EQ(Result(ch.get(), Write(4, ctx, words, 4, 0xdeadbeef)), CUDA_SUCCESS);
  EXPECT_EQ(Result(ch.get(), Write(5, ctx, words + 56, 8, 0x0123456789abcdefull)), CUDA_SUCCESS);
  // Satisfied at once, so the stream goes on to the write behind it.
  EXPECT_EQ(Result(ch.get(), Wait(6, ctx, words, 4, 0xdeadbeef, CU_STREAM_WAIT_VALUE_EQ)),
            CUDA_SUCCESS);
  EXPECT_EQ(Result(ch.get(), Write(7, ctx, words + 8, 4, 5)), CUDA_SUCCESS);
  const std::string after = Read(ch.get(), ctx, words, 64);
  EXPECT_EQ(Word(after, 0, 4), 0xdeadbeefu);
  EXPECT_EQ(Word(after, 8, 4), 5u);
  EXPECT_EQ(Word(after, 56, 8), 0x0123456789abcdefull);
}

TEST_F(ServerStreamMemOpsTest, WordsThatAreNotTheCallersAreRefused) {
  auto other = Connect();
  const uint64_t other_ctx = OpenSession(other.get());
  const uint64_t theirs = Alloc(other.get(), other_ctx, 64);
  ASSERT_NE(theirs, 0u);
  ASSERT_EQ(Result(other.get(), Call(3, Op::kMemset, other_ctx, {theirs, 0x5a, 1, 64, 0, 0})),
            CUDA_SUCCESS);
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  const uint64_t mine = Alloc(ch.get(), ctx, 64);
  ASSERT_NE(mine, 0u);
  ASSERT_EQ(Result(ch.get(), Call(3, Op::kMemset, ctx, {mine, 0, 1, 64, 0, 0})), CUDA_SUCCESS);
  const int bad = CUDA_ERROR_INVALID_VALUE;
  // Another session's memory, a wait on it (which would hold the stream on a word another
  // tenant writes), no memory at all, and a word that runs past the end of an allocation.
  EXPECT_EQ(Result(ch.get(), Write(4, ctx, theirs, 4, 1)), bad);
  EXPECT_EQ(Result(ch.get(), Wait(5, ctx, theirs, 4, 0x5a5a5a5a, CU_STREAM_WAIT_VALUE_EQ)), bad);
  EXPECT_EQ(Result(ch.get(), Write(6, ctx, 0x1000, 4, 1)), bad);
  EXPECT_EQ(Result(ch.get(), Write(7, ctx, mine + 60, 8, 1)), bad);
  // Widths other than 4 and 8 (with 0, the range check has nothing to check: the word could be
  // any address the backend reaches, softgpu's page-locked memory of the server included), a
  // misaligned word, a value wider than its word, flags.
  EXPECT_EQ(Result(ch.get(), Write(8, ctx, mine, 16, 1)), bad);
  EXPECT_EQ(Result(ch.get(), Write(9, ctx, mine, 2, 1)), bad);
  EXPECT_EQ(Result(ch.get(), Write(10, ctx, theirs, 0, 1)), bad);
  EXPECT_EQ(Result(ch.get(), Wait(19, ctx, theirs, 0, 1, CU_STREAM_WAIT_VALUE_EQ)), bad);
  EXPECT_EQ(Result(ch.get(), Write(20, ctx, mine + 16, 0, 1)), bad);  // the check skipped
  EXPECT_EQ(Result(ch.get(), Write(11, ctx, mine + 4, 8, 1)), bad);
  EXPECT_EQ(Result(ch.get(), Write(12, ctx, mine + 2, 4, 1)), bad);
  EXPECT_EQ(Result(ch.get(), Write(13, ctx, mine, 4, uint64_t{1} << 32)), bad);
  EXPECT_EQ(Result(ch.get(), Write(14, ctx, mine, 4, 1, 1)), bad);
  EXPECT_EQ(Result(ch.get(), Wait(15, ctx, mine, 4, 0, CU_STREAM_WAIT_VALUE_FLUSH)), bad);
  EXPECT_EQ(Result(ch.get(), Wait(16, ctx, mine, 4, 0, 4)), bad);
  EXPECT_EQ(Result(ch.get(), Wait(17, ctx, mine, 4, uint64_t{1} << 32, 0)), bad);
  // Nothing was written, on either side, and both sessions still serve.
  EXPECT_EQ(Read(ch.get(), ctx, mine, 64), std::string(64, '\0'));
  EXPECT_EQ(Read(other.get(), other_ctx, theirs, 64), std::string(64, '\x5a'));
  EXPECT_EQ(Result(ch.get(), Write(18, ctx, mine, 4, 1)), CUDA_SUCCESS);
}

// What waits may hold: at most 64 at once in a context (the software GPU polls for each), none
// past the kernel time bound (the context fails as with a late kernel), and nothing once the
// client is gone, though a copy out waits behind the wait on its stream.
class ServerStreamWaitBoundsTest : public ServerStreamMemOpsTest {
 protected:
  ServerStreamWaitBoundsTest() { options_.max_kernel_ms = 300; }  // waits: 10 times that
  static uint64_t Stream(Channel* ch, uint64_t ctx) {
    wire::Envelope r =
        Exchange(ch, Call(50, Op::kStreamCreate, ctx, {CU_STREAM_NON_BLOCKING, 0, 0}));
    EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
    return r.reply().values_size() > 0 ? r.reply().values(0) : 0;
  }
  static wire::Envelope WaitOn(uint64_t seq, uint64_t ctx, uint64_t stream, uint64_t address) {
    return Call(seq, Op::kStreamMemOp, ctx, {address, 4, 1, CU_STREAM_WAIT_VALUE_EQ, 1, stream});
  }
  // A session's context, 64 zeroed bytes (`word` the first) and a non-blocking stream.
  struct Setup {
    uint64_t ctx = 0, word = 0, stream = 0;
  };
  static Setup Open(Channel* ch) {
    Setup s;
    s.ctx = OpenSession(ch);
    s.word = Alloc(ch, s.ctx, 64);
    EXPECT_NE(s.word, 0u);
    EXPECT_EQ(Result(ch, Call(3, Op::kMemset, s.ctx, {s.word, 0, 1, 64, 0, 0})), CUDA_SUCCESS);
    s.stream = Stream(ch, s.ctx);
    return s;
  }
};

TEST_F(ServerStreamWaitBoundsTest, AContextHoldsAtMost64Waits) {
  if (options_.backend != "softgpu") GTEST_SKIP() << "the bound is the software GPU's";
  auto ch = Connect();
  const Setup o = Open(ch.get());
  const uint64_t ctx = o.ctx, word = o.word, stream = o.stream;
  for (uint64_t i = 0; i < 64; ++i) {
    ASSERT_EQ(Result(ch.get(), WaitOn(100 + i, ctx, stream, word)), CUDA_SUCCESS) << i;
  }
  EXPECT_EQ(Result(ch.get(), WaitOn(200, ctx, stream, word)), CUDA_ERROR_OUT_OF_MEMORY);
  // Released, they go, and make room again.
  EXPECT_EQ(Result(ch.get(), Write(201, ctx, word, 4, 1)), CUDA_SUCCESS);
  EXPECT_EQ(Result(ch.get(), Call(202, Op::kStreamSynchronize, ctx, {stream})), CUDA_SUCCESS);
  EXPECT_EQ(Result(ch.get(), WaitOn(203, ctx, stream, word)), CUDA_SUCCESS);
}

TEST_F(ServerStreamWaitBoundsTest, AWaitPastTheKernelBoundFailsItsContext) {
  auto ch = Connect();
  const Setup o = Open(ch.get());
  const uint64_t ctx = o.ctx, word = o.word, stream = o.stream;
  ASSERT_EQ(Result(ch.get(), WaitOn(4, ctx, stream, word)), CUDA_SUCCESS);
  EXPECT_EQ(Result(ch.get(), Call(5, Op::kStreamSynchronize, ctx, {stream})),
            CUDA_ERROR_LAUNCH_TIMEOUT);
}

// Without a kernel bound, a wait would never end on its own.
class ServerStreamWaitUnboundedTest : public ServerStreamWaitBoundsTest {
 protected:
  ServerStreamWaitUnboundedTest() { options_.max_kernel_ms = 0; }
};

TEST_F(ServerStreamWaitUnboundedTest, AGoneClientsWaitsDoNotHoldItsSession) {
  if (options_.backend != "softgpu") GTEST_SKIP() << "NVIDIA's driver: docs/security.md";
  {
    auto ch = Connect();
    const Setup o = Open(ch.get());
    const uint64_t ctx = o.ctx, word = o.word, stream = o.stream;
    ASSERT_EQ(Result(ch.get(), WaitOn(4, ctx, stream, word)), CUDA_SUCCESS);
    // A copy out behind the wait, posted: the session's end waits for such copies.
    wire::Envelope read = Call(5, Op::kMemcpyDtoHPosted, ctx, {word + 8, 8, stream, 77}, true);
    ASSERT_TRUE(ch->Send(read.SerializeAsString(), nullptr, 0).ok());
    EXPECT_EQ(Result(ch.get(), Call(6, Op::kMemGetInfo, ctx, {})), CUDA_SUCCESS);
  }  // the client goes
  bool ended = false;
  for (int i = 0; i < 200 && !ended; ++i) {
    ended = server_.SessionsStatus().sessions_size() == 0;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(ended) << "the session of a client that left is still there";
}

// A stream destroyed with work queued (here a wait nobody satisfies) lets that work run on, as
// CUDA does, but still counts toward --max-streams until it is done: a tenant cannot pile up
// the backend's stream workers by destroying busy streams. Once its work is done it counts no
// more.
class ServerDestroyedStreamsTest : public ServerStreamWaitBoundsTest {
 protected:
  ServerDestroyedStreamsTest() { options_.session_limits.max_streams = 3; }
};

TEST_F(ServerDestroyedStreamsTest, ABusyDestroyedStreamCountsTowardTheStreamLimit) {
  auto ch = Connect();
  const Setup o = Open(ch.get());  // stream 1 of 3
  const uint64_t ctx = o.ctx, word = o.word;
  const uint64_t busy = Stream(ch.get(), ctx);  // 2 of 3
  ASSERT_NE(busy, 0u);
  ASSERT_EQ(Result(ch.get(), WaitOn(4, ctx, busy, word)), CUDA_SUCCESS);
  ASSERT_EQ(Result(ch.get(), Call(5, Op::kStreamDestroy, ctx, {busy})), CUDA_SUCCESS);
  ASSERT_NE(Stream(ch.get(), ctx), 0u);  // 3 of 3, the destroyed one still busy
  wire::Envelope refused =
      Exchange(ch.get(), Call(6, Op::kStreamCreate, ctx, {CU_STREAM_NON_BLOCKING, 0, 0}));
  EXPECT_EQ(refused.reply().result(), CUDA_ERROR_OUT_OF_MEMORY);
  // The wait is satisfied (from the first stream): the destroyed stream's work ends, and its
  // place is free again.
  ASSERT_EQ(Result(ch.get(), Write(7, ctx, word, 4, 1)), CUDA_SUCCESS);
  ASSERT_EQ(Result(ch.get(), Call(8, Op::kCtxSynchronize, ctx, {})), CUDA_SUCCESS);
  EXPECT_NE(Stream(ch.get(), ctx), 0u);
}

}  // namespace
}  // namespace rgpu
