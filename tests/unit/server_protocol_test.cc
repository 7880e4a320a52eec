// rgpu-server against a raw protocol peer: handshake refusals, malformed and unexpected messages,
// wrong argument counts, unknown operations and foreign handles get clear errors and close (or
// keep) only that session; the server keeps serving others throughout.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "proto/calls.h"
#include "proto/compact_frame.h"
#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using namespace test;  // the raw protocol peer (raw_peer.h)

class ServerProtocolTest : public test::RawServerTest {};

// A primary context retained by a posted call (under the client's id) that the server could not
// make: the program's next call in it gets the failure itself, as from the driver, not
// CUDA_ERROR_INVALID_CONTEXT (found on an H200: 201 where the driver said 46, docs/real-gpu.md).
class ServerOneContextTest : public test::RawServerTest {
 protected:
  ServerOneContextTest() { options_.session_limits.max_contexts = 1; }
};

TEST_F(ServerOneContextTest, ACallInAnUnmadePostedContextGetsTheFailure) {
  auto ch = Connect();
  ASSERT_NE(test::OpenSession(ch.get()), 0u);  // the session's one context
  const uint64_t first = calls::kFirstClientId + 1, second = calls::kFirstClientId + 2;
  // Posted: no reply. The session's one context is taken, so it cannot be made.
  ASSERT_TRUE(
      ch->Send(Call(2, Op::kPrimaryCtxRetain, 0, {0, first}, true).SerializeAsString(), nullptr, 0)
          .ok());
  const int in_unmade = Result(ch.get(), Call(3, Op::kMemAlloc, first, {4096}));
  EXPECT_NE(in_unmade, CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_NE(in_unmade, CUDA_SUCCESS);
  // A context id nobody asked for is still no context.
  EXPECT_EQ(Result(ch.get(), Call(4, Op::kMemAlloc, second, {4096})), CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(ServerProtocolTest, RefusesWrongProtocolVersion) {
  auto ch = Connect();
  wire::Envelope w = Exchange(ch.get(), Hello(kProtocolVersion + 7));
  ASSERT_EQ(w.body_case(), wire::Envelope::kWelcome);
  EXPECT_NE(w.welcome().status(), 0);
  EXPECT_NE(w.welcome().error().find("protocol version"), std::string::npos);
}

TEST_F(ServerProtocolTest, RefusesGarbageHandshake) {
  auto ch = Connect();
  ASSERT_TRUE(ch->Send("\xff\xff\xff garbage", nullptr, 0).ok());
  ReceivedMessage m;
  ASSERT_TRUE(ch->Receive(10000, &m).ok());
  wire::Envelope w;
  ASSERT_TRUE(w.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())));
  EXPECT_NE(w.welcome().status(), 0);
}

// A module the backend refuses: the reply's detail carries the backend's reason (its JIT error
// log) every time, not only in the backend's first word on stderr (softgpu tells each reason once
// per process).
TEST_F(ServerProtocolTest, ARefusedModuleSaysWhyEachTime) {
  const char bad[] =
      ".version 9.0\n.target sm_75\n.entry k() { .reg .b32 %r<2>; mov.u32 %r1 1; }\n";
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  for (uint64_t seq = 30; seq < 32; ++seq) {
    wire::Envelope load = Exchange(ch.get(), Call(seq, Op::kModuleLoadData, ctx, {}), bad);
    EXPECT_EQ(load.reply().result(), CUDA_ERROR_INVALID_PTX);
    EXPECT_NE(load.reply().message().find("could not load the module image: "), std::string::npos)
        << load.reply().message();
    EXPECT_NE(load.reply().message().find("line 3"), std::string::npos) << load.reply().message();
  }
}

// A module's kernels come with its load (one round trip): each one's handle, limits and
// parameter layout, and its name in the reply's payload; the handles launch.
TEST_F(ServerProtocolTest, AModuleLoadListsItsKernels) {
  const char ptx[] =
      ".version 7.0\n.target sm_75\n.address_size 64\n"
      ".visible .entry first(.param .u64 p, .param .u32 n) { ret; }\n"
      ".visible .entry second() { ret; }\n";
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  std::string names;
  wire::Envelope load = Exchange(ch.get(), Call(20, Op::kModuleLoadData, ctx, {}), ptx, &names);
  ASSERT_EQ(load.reply().result(), CUDA_SUCCESS);
  const auto& v = load.reply().values();
  ASSERT_GE(v.size(), 2);
  EXPECT_EQ(v[1], 1u) << "listed";
  // [module, listed, then per kernel: id, max threads, static shared, max dynamic shared,
  //  parameter count, (offset, size)...]
  std::vector<uint64_t> list(v.begin() + 2, v.end());
  ASSERT_EQ(list.size(), 5u + 4u + 5u);
  EXPECT_EQ(names, std::string("first\0second\0", 13));
  EXPECT_EQ(list[4], 2u) << "first takes two parameters";
  EXPECT_EQ(list[5], 0u);
  EXPECT_EQ(list[6], 8u);
  EXPECT_EQ(list[7], 8u);
  EXPECT_EQ(list[8], 4u);
  EXPECT_EQ(list[9 + 4], 0u) << "second takes none";
  EXPECT_GT(list[1], 0u) << "max threads per block";
  // The listed handle of `second` launches.
  EXPECT_EQ(Result(ch.get(), Call(21, Op::kLaunchKernel, ctx, {list[9], 1, 1, 1, 1, 1, 1, 0, 0})),
            CUDA_SUCCESS);
  EXPECT_EQ(Result(ch.get(), Call(22, Op::kCtxSynchronize, ctx, {})), CUDA_SUCCESS);
}

// Streams and events may be made under ids the client chose (so the call can be posted): only
// in the client's range, never twice, each session its own; the server's own ids never collide.
TEST_F(ServerProtocolTest, ClientChosenIdsAreCheckedAndPerSession) {
  constexpr uint64_t kFirst = uint64_t{1} << 32, kLimit = uint64_t{1} << 40;
  auto a = Connect(), b = Connect();
  const uint64_t ca = OpenSession(a.get()), cb = OpenSession(b.get());
  EXPECT_EQ(Result(a.get(), Call(30, Op::kStreamCreate, ca, {1, 0, kFirst + 5})), CUDA_SUCCESS);
  EXPECT_EQ(Result(a.get(), Call(31, Op::kStreamSynchronize, ca, {kFirst + 5})), CUDA_SUCCESS);
  EXPECT_EQ(Result(a.get(), Call(32, Op::kStreamCreate, ca, {1, 0, kFirst + 5})),
            CUDA_ERROR_INVALID_VALUE)
      << "an id already taken";
  EXPECT_EQ(Result(a.get(), Call(33, Op::kStreamCreate, ca, {1, 0, 7})), CUDA_ERROR_INVALID_VALUE)
      << "an id of the server's range";
  EXPECT_EQ(Result(a.get(), Call(34, Op::kStreamCreate, ca, {1, 0, kLimit})),
            CUDA_ERROR_INVALID_VALUE)
      << "past the client's range";
  // The same id in another session is that session's own.
  EXPECT_EQ(Result(b.get(), Call(35, Op::kStreamCreate, cb, {1, 0, kFirst + 5})), CUDA_SUCCESS);
  EXPECT_EQ(Result(b.get(), Call(36, Op::kEventCreate, cb, {0, kFirst + 6})), CUDA_SUCCESS);
  EXPECT_EQ(Result(b.get(), Call(37, Op::kEventRecord, cb, {kFirst + 6, kFirst + 5})),
            CUDA_SUCCESS);
  EXPECT_EQ(Result(a.get(), Call(38, Op::kEventSynchronize, ca, {kFirst + 6})),
            CUDA_ERROR_INVALID_HANDLE)
      << "b's event is not a's";
  // Destroyed, the id names nothing; server-chosen ids stay below the client's range.
  EXPECT_EQ(Result(a.get(), Call(39, Op::kStreamDestroy, ca, {kFirst + 5})), CUDA_SUCCESS);
  EXPECT_EQ(Result(a.get(), Call(40, Op::kStreamSynchronize, ca, {kFirst + 5})),
            CUDA_ERROR_INVALID_HANDLE);
  wire::Envelope mine = Exchange(a.get(), Call(41, Op::kStreamCreate, ca, {1, 0, 0}));
  ASSERT_EQ(mine.reply().result(), CUDA_SUCCESS);
  EXPECT_LT(mine.reply().values(0), kFirst);
}

TEST_F(ServerProtocolTest, BadCallsGetErrorsAndTheSessionSurvives) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  // Wrong argument count.
  EXPECT_EQ(Exchange(ch.get(), Call(2, Op::kMemAlloc, ctx, {})).reply().result(),
            CUDA_ERROR_INVALID_VALUE);
  // Unknown operation.
  wire::Envelope unknown = Call(3, Op::kMemAlloc, ctx, {64});
  unknown.mutable_call()->set_op(9999);
  EXPECT_EQ(Exchange(ch.get(), unknown).reply().result(), CUDA_ERROR_NOT_SUPPORTED);
  // A context this session does not have.
  EXPECT_EQ(Exchange(ch.get(), Call(4, Op::kMemAlloc, ctx + 100, {64})).reply().result(),
            CUDA_ERROR_INVALID_CONTEXT);
  // Handles and pointers it does not own.
  EXPECT_EQ(Exchange(ch.get(), Call(5, Op::kStreamSynchronize, ctx, {12345})).reply().result(),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(Exchange(ch.get(), Call(6, Op::kMemFree, ctx, {0x10000})).reply().result(),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Exchange(ch.get(), Call(7, Op::kMemcpyDtoH, ctx, {0x10000, 16, 0, 0})).reply().result(),
            CUDA_ERROR_INVALID_VALUE);
  // A copy whose payload does not match its size.
  EXPECT_EQ(Exchange(ch.get(), Call(8, Op::kMemAlloc, ctx, {256})).reply().result(), CUDA_SUCCESS);
  wire::Envelope alloc = Exchange(ch.get(), Call(9, Op::kMemAlloc, ctx, {256}));
  const uint64_t ptr = alloc.reply().values(0);
  EXPECT_EQ(Exchange(ch.get(), Call(10, Op::kMemcpyHtoD, ctx, {ptr, 256, 0, 0}), "short")
                .reply()
                .result(),
            CUDA_ERROR_INVALID_VALUE);
  // Past the end of the allocation.
  EXPECT_EQ(Exchange(ch.get(), Call(11, Op::kMemcpyHtoD, ctx, {ptr + 8, 256, 0, 0}),
                     std::string(256, 'x'))
                .reply()
                .result(),
            CUDA_ERROR_INVALID_VALUE);
  // A module image that is not one.
  EXPECT_NE(
      Exchange(ch.get(), Call(12, Op::kModuleLoadData, ctx, {}), "not a module").reply().result(),
      CUDA_SUCCESS);
  // The session still works.
  wire::Envelope info = Exchange(ch.get(), Call(13, Op::kMemGetInfo, ctx, {}));
  EXPECT_EQ(info.reply().result(), CUDA_SUCCESS);
  EXPECT_EQ(info.reply().values_size(), 2);
}

// Copies of 1 MiB or more move straight between the network and the software GPU's memory: a
// refused one (a range the session does not own, a size that does not match) drops its payload
// without harm, and a valid one round-trips exactly, as does a sub-range at an offset.
TEST_F(ServerProtocolTest, DirectCopiesRoundTripAndRefusalsLoseNothing) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  const size_t bytes = size_t{3} << 20;
  wire::Envelope alloc = Exchange(ch.get(), Call(2, Op::kMemAlloc, ctx, {bytes}));
  ASSERT_EQ(alloc.reply().result(), CUDA_SUCCESS);
  const uint64_t ptr = alloc.reply().values(0);
  std::string data(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(i * 131 + 7);
  // Refused: past the allocation's end, and a payload that does not match the size.
  EXPECT_EQ(Exchange(ch.get(), Call(3, Op::kMemcpyHtoD, ctx, {ptr + 4096, bytes, 0, 0}), data)
                .reply()
                .result(),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Exchange(ch.get(), Call(4, Op::kMemcpyHtoD, ctx, {ptr, bytes - 1, 0, 0}), data)
                .reply()
                .result(),
            CUDA_ERROR_INVALID_VALUE);
  // Accepted, then read back whole and from an offset.
  EXPECT_EQ(
      Exchange(ch.get(), Call(5, Op::kMemcpyHtoD, ctx, {ptr, bytes, 0, 0}), data).reply().result(),
      CUDA_SUCCESS);
  for (uint64_t offset : {uint64_t{0}, uint64_t{1} << 20}) {
    const size_t n = bytes - offset;
    EXPECT_TRUE(ch->Send(Call(6, Op::kMemcpyDtoH, ctx, {ptr + offset, n, 0, 0}).SerializeAsString(),
                         nullptr, 0)
                    .ok());
    ReceivedMessage m;
    ASSERT_TRUE(ch->Receive(10000, &m).ok());
    wire::Envelope in;
    ASSERT_TRUE(in.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())));
    EXPECT_EQ(in.reply().result(), CUDA_SUCCESS);
    ASSERT_EQ(m.payload_size, n);
    EXPECT_TRUE(std::string(m.payload, n) == data.substr(offset)) << "offset " << offset;
  }
}

TEST_F(ServerProtocolTest, MalformedMessageClosesOnlyThatSession) {
  auto good = Connect();
  const uint64_t ctx = OpenSession(good.get());
  auto bad = Connect();
  OpenSession(bad.get());
  ASSERT_TRUE(bad->Send("\x0a\xff\xff\xff\xff\xff garbage", nullptr, 0).ok());
  ReceivedMessage m;
  Status s = bad->Receive(10000, &m);
  if (s.ok()) {
    wire::Envelope bye;
    ASSERT_TRUE(bye.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())));
    EXPECT_EQ(bye.body_case(), wire::Envelope::kGoodbye);
  }
  EXPECT_EQ(Exchange(good.get(), Call(2, Op::kMemGetInfo, ctx, {})).reply().result(), CUDA_SUCCESS);
}

// A compact call (proto/compact_frame.h) is served as its Envelope would be: a plain reply comes
// back compact, a failure with its detail as an Envelope.
TEST_F(ServerProtocolTest, CompactCallsGetCompactPlainReplies) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  const uint64_t size[] = {4096};
  std::string frame;
  compact::EncodeCall(static_cast<uint32_t>(Op::kMemAlloc), 7, ctx, size, &frame);
  ASSERT_TRUE(ch->Send(frame, nullptr, 0).ok());
  ReceivedMessage m;
  ASSERT_TRUE(ch->Receive(10000, &m).ok());
  compact::Reply reply;
  ASSERT_TRUE(compact::DecodeReply(m.header, &reply));
  EXPECT_EQ(reply.seq(), 7u);
  EXPECT_EQ(reply.result(), CUDA_SUCCESS);
  ASSERT_EQ(reply.value_count(), 1u);
  EXPECT_NE(reply.value(0), 0u);
  // A compact call may carry a payload, and a compact reply one back.
  const uint64_t ptr = reply.value(0);
  const uint64_t copy_in[] = {ptr, 5, 0, 0}, copy_out[] = {ptr, 5, 0, 0};
  compact::EncodeCall(static_cast<uint32_t>(Op::kMemcpyHtoD), 20, ctx, copy_in, &frame);
  ASSERT_TRUE(ch->Send(frame, "abcde", 5).ok());
  ASSERT_TRUE(ch->Receive(10000, &m).ok());
  ASSERT_TRUE(compact::DecodeReply(m.header, &reply));
  EXPECT_EQ(reply.result(), CUDA_SUCCESS);
  compact::EncodeCall(static_cast<uint32_t>(Op::kMemcpyDtoH), 21, ctx, copy_out, &frame);
  ASSERT_TRUE(ch->Send(frame, nullptr, 0).ok());
  ASSERT_TRUE(ch->Receive(10000, &m).ok());
  ASSERT_TRUE(compact::DecodeReply(m.header, &reply));
  EXPECT_EQ(reply.seq(), 21u);
  EXPECT_EQ(reply.result(), CUDA_SUCCESS);
  EXPECT_EQ(std::string(m.payload, m.payload_size), "abcde");
  // The allocation is the session's: an Envelope call frees it.
  EXPECT_EQ(Result(ch.get(), Call(8, Op::kMemFree, ctx, {ptr})), CUDA_SUCCESS);
  // A failure comes as an Envelope, with why.
  compact::EncodeCall(static_cast<uint32_t>(Op::kMemAlloc), 9, ctx + 1000, size, &frame);
  ASSERT_TRUE(ch->Send(frame, nullptr, 0).ok());
  wire::Envelope failed = Next(ch.get());
  ASSERT_EQ(failed.body_case(), wire::Envelope::kReply);
  EXPECT_EQ(failed.reply().seq(), 9u);
  EXPECT_EQ(failed.reply().result(), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_FALSE(failed.reply().message().empty());
}

// A compact frame whose counts do not match its size (it would make the server read past the
// message) closes only the sender's session, with the reason in the Goodbye.
TEST_F(ServerProtocolTest, MalformedCompactCallsCloseOnlyThatSession) {
  auto good = Connect();
  const uint64_t good_ctx = OpenSession(good.get());
  const uint64_t size[] = {4096};
  std::string frame;
  compact::EncodeCall(static_cast<uint32_t>(Op::kMemAlloc), 3, 1, size, &frame);
  std::string over_counted = frame;
  over_counted[2] = 32;  // 32 arguments claimed, one sent
  std::string reply_kind = frame;
  reply_kind[1] = 2;  // a reply sent to the server
  for (const std::string& bad_frame : {over_counted, frame.substr(0, 20), reply_kind}) {
    auto bad = Connect();
    OpenSession(bad.get());
    ASSERT_TRUE(bad->Send(bad_frame, nullptr, 0).ok());
    wire::Envelope bye = Next(bad.get());
    ASSERT_EQ(bye.body_case(), wire::Envelope::kGoodbye);
    EXPECT_NE(bye.goodbye().reason().find("malformed compact call"), std::string::npos);
  }
  EXPECT_EQ(Exchange(good.get(), Call(2, Op::kMemGetInfo, good_ctx, {})).reply().result(),
            CUDA_SUCCESS);
}

// A batch runs its posted calls in order and answers only the last one; the payloads are found at
// their 16-byte boundaries.
TEST_F(ServerProtocolTest, BatchRunsInOrderAndAnswersItsLastCall) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  wire::Envelope alloc = Exchange(ch.get(), Call(2, Op::kMemAlloc, ctx, {64}));
  ASSERT_EQ(alloc.reply().result(), CUDA_SUCCESS);
  const uint64_t ptr = alloc.reply().values(0);
  wire::Envelope batch;
  std::string payload;
  auto add = [&](wire::Envelope call, const std::string& data, bool posted) {
    call.mutable_call()->set_posted(posted);
    *batch.mutable_batch()->add_calls() = call.call();
    batch.mutable_batch()->add_payload_sizes(data.size());
    if (!data.empty()) payload.resize((payload.size() + 15) & ~size_t{15});
    payload += data;
  };
  add(Call(3, Op::kMemset, ctx, {ptr, 1, 1, 64, 0, 0}), "", true);
  add(Call(4, Op::kMemcpyHtoD, ctx, {ptr, 5, 0, 0}), "abcde", true);
  add(Call(5, Op::kMemcpyHtoD, ctx, {ptr + 8, 3, 0, 0}), "xyz", true);
  add(Call(6, Op::kMemcpyDtoH, ctx, {ptr, 12, 0, 0}), "", false);
  ASSERT_TRUE(ch->Send(batch.SerializeAsString(), payload.data(), payload.size()).ok());
  ReceivedMessage m;
  ASSERT_TRUE(ch->Receive(10000, &m).ok());
  wire::Envelope reply;
  ASSERT_TRUE(reply.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())));
  EXPECT_EQ(reply.reply().seq(), 6u);
  EXPECT_EQ(reply.reply().result(), CUDA_SUCCESS);
  ASSERT_EQ(m.payload_size, 12u);
  EXPECT_EQ(std::string(m.payload, 12), std::string("abcde\x01\x01\x01xyz\x01"));
}

// Truncated batches, batches whose sizes do not add up and batches with a waited-for call before
// their end close only the sender's session, with the reason in the Goodbye.
TEST_F(ServerProtocolTest, MalformedBatchesCloseOnlyThatSession) {
  auto good = Connect();
  const uint64_t good_ctx = OpenSession(good.get());
  struct Case {
    std::vector<uint64_t> sizes;
    size_t payload_bytes;
    bool first_posted;
  };
  const Case cases[] = {
      {{100, 100}, 150, true},  // truncated: less payload than the sizes claim
      {{10}, 4000, true},       // oversized: more payload than the sizes claim
      {{0, 0}, 0, false},       // out of order: a waited-for call before the end
      {{1, 2, 3}, 32, true},    // a size for a call that is not there
  };
  for (const Case& c : cases) {
    auto bad = Connect();
    const uint64_t ctx = OpenSession(bad.get());
    wire::Envelope batch;
    for (size_t i = 0; i < std::min<size_t>(c.sizes.size(), 2); ++i) {
      wire::Envelope call = Call(10 + i, Op::kMemGetInfo, ctx, {});
      call.mutable_call()->set_posted(i == 0 ? c.first_posted : false);
      *batch.mutable_batch()->add_calls() = call.call();
    }
    for (uint64_t size : c.sizes) batch.mutable_batch()->add_payload_sizes(size);
    std::string payload(c.payload_bytes, 'p');
    ASSERT_TRUE(bad->Send(batch.SerializeAsString(), payload.data(), payload.size()).ok());
    ReceivedMessage m;
    Status s = bad->Receive(10000, &m);
    ASSERT_TRUE(s.ok()) << s.ToString();
    wire::Envelope bye;
    ASSERT_TRUE(bye.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())));
    ASSERT_EQ(bye.body_case(), wire::Envelope::kGoodbye);
    EXPECT_NE(bye.goodbye().reason().find("malformed batch"), std::string::npos);
  }
  EXPECT_EQ(Exchange(good.get(), Call(2, Op::kMemGetInfo, good_ctx, {})).reply().result(),
            CUDA_SUCCESS);
}

// A second Hello in the middle of a session is out of order: the session closes, others go on.
TEST_F(ServerProtocolTest, OutOfOrderHandshakeClosesOnlyThatSession) {
  auto good = Connect();
  const uint64_t good_ctx = OpenSession(good.get());
  auto bad = Connect();
  OpenSession(bad.get());
  ASSERT_TRUE(bad->Send(Hello().SerializeAsString(), nullptr, 0).ok());
  ReceivedMessage m;
  ASSERT_TRUE(bad->Receive(10000, &m).ok());
  wire::Envelope bye;
  ASSERT_TRUE(bye.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())));
  ASSERT_EQ(bye.body_case(), wire::Envelope::kGoodbye);
  EXPECT_NE(bye.goodbye().reason().find("unexpected message"), std::string::npos);
  EXPECT_EQ(Exchange(good.get(), Call(2, Op::kMemGetInfo, good_ctx, {})).reply().result(),
            CUDA_SUCCESS);
}

TEST_F(ServerProtocolTest, ForeignHandlesAreRejected) {
  auto a = Connect();
  const uint64_t ctx_a = OpenSession(a.get());
  wire::Envelope alloc = Exchange(a.get(), Call(2, Op::kMemAlloc, ctx_a, {4096}));
  ASSERT_EQ(alloc.reply().result(), CUDA_SUCCESS);
  const uint64_t ptr_a = alloc.reply().values(0);
  auto b = Connect();
  const uint64_t ctx_b = OpenSession(b.get());
  // Session b names a's memory: refused, and a's data is untouched.
  EXPECT_EQ(
      Exchange(a.get(), Call(3, Op::kMemset, ctx_a, {ptr_a, 7, 1, 4096, 0, 0})).reply().result(),
      CUDA_SUCCESS);
  EXPECT_EQ(
      Exchange(b.get(), Call(3, Op::kMemset, ctx_b, {ptr_a, 9, 1, 4096, 0, 0})).reply().result(),
      CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Exchange(b.get(), Call(4, Op::kMemFree, ctx_b, {ptr_a})).reply().result(),
            CUDA_ERROR_INVALID_VALUE);
  wire::Envelope read = Call(4, Op::kMemcpyDtoH, ctx_a, {ptr_a, 16, 0, 0});
  ASSERT_TRUE(a->Send(read.SerializeAsString(), nullptr, 0).ok());
  ReceivedMessage m;
  ASSERT_TRUE(a->Receive(10000, &m).ok());
  ASSERT_EQ(m.payload_size, 16u);
  EXPECT_EQ(m.payload[0], 7);
}

// Metering snapshots taken while a session serves calls never count more calls by kind than
// calls, in any one snapshot or between two (the registry refuses a usage record whose calls by
// kind add up to more than its calls, and drops it: the tenant goes unbilled).
TEST_F(ServerProtocolTest, MeteringSnapshotsNeverCountMoreCallsByKindThanCalls) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  std::atomic<bool> done{false};
  std::thread busy([&] {
    // Posted memsets of memory the session does not own: each is refused at once, no reply.
    const std::string header =
        Call(0, Op::kMemset, ctx, {0, 0, 1, 0, 0, 0}, true).SerializeAsString();
    while (!done.load()) {
      for (int i = 0; i < 64; ++i) ASSERT_TRUE(ch->Post(header, nullptr, 0).ok());
      ASSERT_EQ(Exchange(ch.get(), Call(1, Op::kMemGetInfo, ctx, {})).body_case(),
                wire::Envelope::kReply);
    }
  });
  auto by_kind = [](const wire::SessionStats& s) {
    uint64_t n = 0;
    for (const auto& [kind, calls] : s.calls_by_kind()) n += calls;
    return n;
  };
  wire::SessionStats before;
  int snapshots = 0;
  for (const auto start = std::chrono::steady_clock::now();
       std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500);) {
    wire::StatusReply live = server_.SessionsStatus();
    if (live.sessions_size() != 1) continue;
    const wire::SessionStats& now = live.sessions(0);
    ++snapshots;
    ASSERT_LE(by_kind(now), now.calls()) << "in snapshot " << snapshots;
    ASSERT_LE(by_kind(now) - by_kind(before), now.calls() - before.calls())
        << "between snapshots " << snapshots - 1 << " and " << snapshots;
    before = now;
  }
  done.store(true);
  busy.join();
  EXPECT_GT(snapshots, 100);
  EXPECT_GT(before.calls(), 1000u);
}

// A tenant that floods its session past the server's receive-queue bound has that session closed
// with the reason; other sessions go on.
TEST(ServerQueueBoundTest, FloodClosesOnlyThatSessionWithTheReason) {
  server::ServerOptions o;
  o.listen = "tcp://127.0.0.1:0";
  o.backend = "softgpu";
  o.driver_library = RGPU_SOFTGPU_LIBRARY;
  o.max_queued_calls = 4;
  server::Server server;
  ASSERT_TRUE(server.Start(o).ok());
  std::thread serve([&] { server.Serve(); });
  TransportUrl url;
  ASSERT_TRUE(TransportUrl::Parse(server.url(), &url).ok());
  auto open = [&](std::unique_ptr<Channel>* ch) {
    ASSERT_TRUE(ConnectChannel(url, ChannelOptions(), ch).ok());
    wire::Envelope hello;
    hello.mutable_hello()->set_protocol_version(kProtocolVersion);
    ASSERT_TRUE((*ch)->Send(hello.SerializeAsString(), nullptr, 0).ok());
    ReceivedMessage m;
    ASSERT_TRUE((*ch)->Receive(10000, &m).ok());
  };
  std::unique_ptr<Channel> good, flood;
  open(&good);
  open(&flood);
  // Posted memsets of nothing in particular: each fails on the server, which sends no reply.
  wire::Envelope call;
  call.mutable_call()->set_op(static_cast<uint32_t>(Op::kMemset));
  call.mutable_call()->set_posted(true);
  for (int i = 0; i < 6; ++i) call.mutable_call()->add_args(0);
  const std::string header = call.SerializeAsString();
  std::string reason;
  for (int burst = 0; burst < 50 && reason.empty(); ++burst) {
    for (int i = 0; i < 2000; ++i) {
      if (!flood->Post(header, nullptr, 0).ok()) break;
    }
    ReceivedMessage m;
    if (flood->Receive(100, &m).ok()) {
      wire::Envelope bye;
      ASSERT_TRUE(bye.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())));
      ASSERT_EQ(bye.body_case(), wire::Envelope::kGoodbye);
      reason = bye.goodbye().reason();
    }
  }
  EXPECT_NE(reason.find("receive-queue bound"), std::string::npos) << reason;
  wire::Envelope ctx;
  ctx.mutable_call()->set_seq(1);
  ctx.mutable_call()->set_op(static_cast<uint32_t>(Op::kCtxCreate));
  ctx.mutable_call()->add_args(0);
  ctx.mutable_call()->add_args(0);
  ASSERT_TRUE(good->Send(ctx.SerializeAsString(), nullptr, 0).ok());
  ReceivedMessage m;
  ASSERT_TRUE(good->Receive(10000, &m).ok());
  wire::Envelope reply;
  ASSERT_TRUE(reply.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())));
  EXPECT_EQ(reply.reply().result(), CUDA_SUCCESS);
  flood.reset();
  good.reset();
  server.Stop();
  serve.join();
}

}  // namespace
}  // namespace rgpu
