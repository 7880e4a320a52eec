// Peer access on a server with two software GPUs, spoken raw: copies between two contexts of a
// session check each range against the context it names (memory of the other context, or of
// another session, is refused and nothing moves); peer access is enabled only between contexts of
// two devices of the session (context ids are session-local, so no other session's can be named).
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using namespace test;  // the raw protocol peer (raw_peer.h)

class ServerPeerTest : public test::RawServerTest {
 protected:
  ServerPeerTest() { setenv("RGPU_SOFTGPU_DEVICES", "2", 1); }
  ~ServerPeerTest() override { unsetenv("RGPU_SOFTGPU_DEVICES"); }
  // A context on device `device` of the session on `ch`.
  static uint64_t Context(Channel* ch, int device) {
    wire::Envelope r = Exchange(ch, Call(2, Op::kCtxCreate, 0, {0, static_cast<uint64_t>(device)}));
    EXPECT_EQ(r.reply().result(), CUDA_SUCCESS) << r.reply().message();
    return r.reply().values_size() > 0 ? r.reply().values(0) : 0;
  }
  static std::string Read(Channel* ch, uint64_t ctx, uint64_t p, uint64_t n) {
    std::string out;
    wire::Envelope r = Exchange(ch, Call(3, Op::kMemcpyDtoH, ctx, {p, n, 0, 0}), "", &out);
    EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
    return out;
  }
};

TEST_F(ServerPeerTest, CopiesBetweenContextsCheckEachEndInItsOwnContext) {
  auto a = Connect();
  const uint64_t c0 = OpenSession(a.get());  // device 0
  const uint64_t c1 = Context(a.get(), 1);
  const uint64_t p0 = Alloc(a.get(), c0, 4096);
  const uint64_t p1 = Alloc(a.get(), c1, 4096);
  ASSERT_NE(p0, 0u);
  ASSERT_NE(p1, 0u);
  ASSERT_EQ(Result(a.get(), Call(4, Op::kMemcpyHtoD, c0, {p0, 4096, 0, 0}), std::string(4096, 'a')),
            CUDA_SUCCESS);
  ASSERT_EQ(Result(a.get(), Call(5, Op::kMemset, c1, {p1, 'z', 1, 4096, 0, 0})), CUDA_SUCCESS);
  // Each end named in the wrong context: refused, nothing moves.
  EXPECT_EQ(Result(a.get(), Call(6, Op::kMemcpyPeer, c0, {p1, c0, p0, c0, 4096, 0, 0})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(a.get(), Call(7, Op::kMemcpyPeer, c0, {p1, c1, p0, c1, 4096, 0, 0})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(a.get(), Call(8, Op::kMemcpyPeer, c0, {p1, c1, p0, c0, 4097, 0, 0})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Read(a.get(), c1, p1, 4096), std::string(4096, 'z'));
  // Named right: the bytes move from device 0 to device 1.
  EXPECT_EQ(Result(a.get(), Call(9, Op::kMemcpyPeer, c0, {p1, c1, p0, c0, 4096, 0, 0})),
            CUDA_SUCCESS);
  EXPECT_EQ(Read(a.get(), c1, p1, 4096), std::string(4096, 'a'));

  // Another session (whose context ids are its own: the same numbers name its own contexts):
  // neither session's memory is reached from the other.
  auto b = Connect();
  const uint64_t b0 = OpenSession(b.get());
  const uint64_t b1 = Context(b.get(), 1);
  const uint64_t q1 = Alloc(b.get(), b1, 4096);
  EXPECT_NE(Result(b.get(), Call(10, Op::kMemcpyPeer, b0, {q1, b1, p0, b0, 4096, 0, 0})),
            CUDA_SUCCESS);
  EXPECT_NE(Result(a.get(), Call(11, Op::kMemcpyPeer, c0, {q1, b1, p0, c0, 4096, 0, 0})),
            CUDA_SUCCESS);
  EXPECT_EQ(Read(b.get(), b1, q1, 16), std::string(16, '\0'));
}

TEST_F(ServerPeerTest, PeerAccessIsBetweenTwoDevicesOfTheSession) {
  auto a = Connect();
  const uint64_t c0 = OpenSession(a.get());
  const uint64_t c0b = Context(a.get(), 0);
  const uint64_t c1 = Context(a.get(), 1);
  wire::Envelope can = Exchange(a.get(), Call(4, Op::kDeviceCanAccessPeer, 0, {0, 1}));
  ASSERT_EQ(can.reply().result(), CUDA_SUCCESS);
  EXPECT_EQ(can.reply().values(0), 1u);
  can = Exchange(a.get(), Call(5, Op::kDeviceCanAccessPeer, 0, {0, 0}));
  EXPECT_EQ(can.reply().values(0), 0u);
  EXPECT_EQ(Result(a.get(), Call(6, Op::kCtxEnablePeerAccess, c0, {c0})),
            CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(Result(a.get(), Call(7, Op::kCtxEnablePeerAccess, c0, {c0b})),
            CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(Result(a.get(), Call(8, Op::kCtxEnablePeerAccess, c0, {c1})), CUDA_SUCCESS);
  EXPECT_EQ(Result(a.get(), Call(9, Op::kCtxEnablePeerAccess, c0, {c1})),
            CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  EXPECT_EQ(Result(a.get(), Call(10, Op::kCtxDisablePeerAccess, c0, {c1})), CUDA_SUCCESS);
  EXPECT_EQ(Result(a.get(), Call(11, Op::kCtxDisablePeerAccess, c0, {c1})),
            CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
}

}  // namespace
}  // namespace rgpu
