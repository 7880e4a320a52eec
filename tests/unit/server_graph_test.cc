// Graphs kept by the server (server/session_graph.cc), spoken raw: a record holds only stream work
// a graph may hold and must be well formed; each launch checks every call again, so a recorded
// call naming memory that is no longer the session's (freed since, or never its own) writes
// nothing and fails at the next synchronizing call; records are bounded; a destroyed graph and
// another session's graph ids launch nothing.
#include <gtest/gtest.h>

#include <cstring>

#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using namespace test;  // the raw protocol peer (raw_peer.h)

// A GraphRecord payload of `calls` (with payloads).
std::string RecordPayload(const std::vector<std::pair<wire::Envelope, std::string>>& calls) {
  BatchBuilder b;
  for (const auto& [call, payload] : calls) {
    wire::Envelope posted = call;
    posted.mutable_call()->set_posted(true);
    b.Add(posted, payload);
  }
  const std::string batch = b.envelope.batch().SerializeAsString();
  const uint32_t n = static_cast<uint32_t>(batch.size());
  std::string out(sizeof n, '\0');
  memcpy(out.data(), &n, sizeof n);
  return out + batch + b.payload;
}

class ServerGraphTest : public test::RawServerTest {
 protected:
  static wire::Envelope Record(Channel* ch, const std::string& payload) {
    return Exchange(ch, Call(40, Op::kGraphRecord, 0, {}), payload);
  }
  static uint64_t Launch(Channel* ch, uint64_t graph) {
    EXPECT_TRUE(
        ch->Send(Call(41, Op::kGraphLaunch, 0, {graph}, true).SerializeAsString(), nullptr, 0)
            .ok());
    return graph;
  }
  static std::string Read(Channel* ch, uint64_t ctx, uint64_t p, uint64_t n) {
    std::string out;
    wire::Envelope r = Exchange(ch, Call(42, Op::kMemcpyDtoH, ctx, {p, n, 0, 0}), "", &out);
    EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
    return out;
  }
  // The async error the next synchronizing call reports (0: none).
  static int NextAsyncError(Channel* ch, uint64_t ctx) {
    wire::Envelope r = Exchange(ch, Call(43, Op::kCtxSynchronize, ctx, {}));
    return r.reply().async_error();
  }
};

TEST_F(ServerGraphTest, ARecordedGraphRunsItsCallsAtEveryLaunch) {
  auto a = Connect();
  const uint64_t ctx = OpenSession(a.get());
  const uint64_t p = Alloc(a.get(), ctx, 4096);
  ASSERT_NE(p, 0u);
  // Two memsets: the second overwrites half of the first.
  wire::Envelope got = Record(a.get(), RecordPayload({
                                           {Call(0, Op::kMemset, ctx, {p, 'x', 1, 4096, 0, 1}), ""},
                                           {Call(0, Op::kMemset, ctx, {p, 'y', 1, 2048, 0, 1}), ""},
                                       }));
  ASSERT_EQ(got.reply().result(), CUDA_SUCCESS) << got.reply().message();
  const uint64_t graph = got.reply().values(0);
  ASSERT_EQ(Result(a.get(), Call(44, Op::kMemset, ctx, {p, 0, 1, 4096, 0, 0})), CUDA_SUCCESS);
  Launch(a.get(), graph);
  EXPECT_EQ(NextAsyncError(a.get(), ctx), 0);
  EXPECT_EQ(Read(a.get(), ctx, p, 4096), std::string(2048, 'y') + std::string(2048, 'x'));
  ASSERT_EQ(Result(a.get(), Call(45, Op::kMemset, ctx, {p, 0, 1, 4096, 0, 0})), CUDA_SUCCESS);
  Launch(a.get(), graph);
  EXPECT_EQ(Read(a.get(), ctx, p, 4096), std::string(2048, 'y') + std::string(2048, 'x'));
  // Destroyed: launching it is refused (at the next synchronizing call).
  ASSERT_TRUE(
      a->Send(Call(46, Op::kGraphDestroy, 0, {graph}, true).SerializeAsString(), nullptr, 0).ok());
  Launch(a.get(), graph);
  EXPECT_EQ(NextAsyncError(a.get(), ctx), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(ServerGraphTest, EveryCallIsCheckedAgainAtEachLaunch) {
  auto a = Connect(), b = Connect();
  const uint64_t ca = OpenSession(a.get());
  const uint64_t cb = OpenSession(b.get());
  const uint64_t pa = Alloc(a.get(), ca, 4096);
  const uint64_t pb = Alloc(b.get(), cb, 4096);
  ASSERT_EQ(Result(b.get(), Call(2, Op::kMemset, cb, {pb, 'b', 1, 4096, 0, 0})), CUDA_SUCCESS);
  // A record naming b's memory is accepted (it is only bytes) but writes nothing when launched.
  wire::Envelope got =
      Record(a.get(), RecordPayload({{Call(0, Op::kMemset, ca, {pb, 'a', 1, 4096, 0, 1}), ""}}));
  ASSERT_EQ(got.reply().result(), CUDA_SUCCESS);
  Launch(a.get(), got.reply().values(0));
  EXPECT_EQ(NextAsyncError(a.get(), ca), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Read(b.get(), cb, pb, 4096), std::string(4096, 'b'));
  // Memory freed after recording: refused at launch.
  got = Record(a.get(), RecordPayload({{Call(0, Op::kMemset, ca, {pa, 'a', 1, 4096, 0, 1}), ""}}));
  ASSERT_EQ(got.reply().result(), CUDA_SUCCESS);
  ASSERT_EQ(Result(a.get(), Call(3, Op::kMemFree, ca, {pa})), CUDA_SUCCESS);
  Launch(a.get(), got.reply().values(0));
  EXPECT_EQ(NextAsyncError(a.get(), ca), CUDA_ERROR_INVALID_VALUE);
  // Session b's graph ids are its own: a's graph id names nothing there.
  Launch(b.get(), got.reply().values(0) + 100);
  EXPECT_EQ(NextAsyncError(b.get(), cb), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(ServerGraphTest, RecordsHoldOnlyWellFormedStreamWork) {
  auto a = Connect();
  const uint64_t ctx = OpenSession(a.get());
  const uint64_t p = Alloc(a.get(), ctx, 4096);
  // Host data, a free, a graph launch, a call that waits: not graph work.
  EXPECT_EQ(
      Record(a.get(),
             RecordPayload({{Call(0, Op::kMemcpyHtoD, ctx, {p, 16, 0, 1}), std::string(16, 'h')}}))
          .reply()
          .result(),
      CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(
      Record(a.get(), RecordPayload({{Call(0, Op::kMemFree, ctx, {p}), ""}})).reply().result(),
      CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(
      Record(a.get(), RecordPayload({{Call(0, Op::kGraphLaunch, 0, {1}), ""}})).reply().result(),
      CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(
      Record(a.get(), RecordPayload({{Call(0, Op::kMemAlloc, ctx, {64}), ""}})).reply().result(),
      CUDA_ERROR_INVALID_VALUE);
  // Malformed: no calls, a length past the end, payload sizes past the end, garbage.
  EXPECT_EQ(Record(a.get(), RecordPayload({})).reply().result(), CUDA_ERROR_INVALID_VALUE);
  std::string good = RecordPayload({{Call(0, Op::kMemset, ctx, {p, 'x', 1, 4096, 0, 1}), ""}});
  std::string long_length = good;
  const uint32_t huge = 0xfffffff0u;
  memcpy(long_length.data(), &huge, sizeof huge);
  EXPECT_EQ(Record(a.get(), long_length).reply().result(), CUDA_ERROR_INVALID_VALUE);
  BatchBuilder lying;
  wire::Envelope call = Call(0, Op::kLaunchKernel, ctx, {1, 1, 1, 1, 1, 1, 1, 0, 0}, true);
  lying.Add(call, "");
  lying.envelope.mutable_batch()->set_payload_sizes(0, uint64_t{1} << 40);
  const std::string batch = lying.envelope.batch().SerializeAsString();
  const uint32_t n = static_cast<uint32_t>(batch.size());
  std::string past(sizeof n, '\0');
  memcpy(past.data(), &n, sizeof n);
  EXPECT_EQ(Record(a.get(), past + batch).reply().result(), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Record(a.get(), "\x03\x00\x00\x00abc").reply().result(), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Record(a.get(), "").reply().result(), CUDA_ERROR_INVALID_VALUE);
  // The session still works and the good record is taken.
  EXPECT_EQ(Record(a.get(), good).reply().result(), CUDA_SUCCESS);
}

class ServerGraphBoundTest : public ServerGraphTest {
 protected:
  ServerGraphBoundTest() {
    options_.session_limits.max_graphs = 3;
    options_.session_limits.max_graph_bytes = 64 << 10;
  }
};

TEST_F(ServerGraphBoundTest, RecordsAreBoundedInNumberAndBytes) {
  auto a = Connect();
  const uint64_t ctx = OpenSession(a.get());
  const uint64_t p = Alloc(a.get(), ctx, 4096);
  const std::string one = RecordPayload({{Call(0, Op::kMemset, ctx, {p, 'x', 1, 16, 0, 1}), ""}});
  std::vector<uint64_t> graphs;
  for (int i = 0; i < 3; ++i) {
    wire::Envelope got = Record(a.get(), one);
    ASSERT_EQ(got.reply().result(), CUDA_SUCCESS);
    graphs.push_back(got.reply().values(0));
  }
  EXPECT_EQ(Record(a.get(), one).reply().result(), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_TRUE(
      a->Send(Call(5, Op::kGraphDestroy, 0, {graphs[0]}, true).SerializeAsString(), nullptr, 0)
          .ok());
  // Room again, but not for 64 KiB of kernel arguments.
  std::vector<std::pair<wire::Envelope, std::string>> many;
  for (int i = 0; i < 20; ++i) {
    many.push_back(
        {Call(0, Op::kLaunchKernel, ctx, {1, 1, 1, 1, 1, 1, 1, 0, 0}), std::string(4096, 'k')});
  }
  EXPECT_EQ(Record(a.get(), RecordPayload(many)).reply().result(), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(Record(a.get(), one).reply().result(), CUDA_SUCCESS);
}

}  // namespace
}  // namespace rgpu
