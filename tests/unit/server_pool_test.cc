// Stream-ordered allocation on the server (server/session_pool.cc), spoken raw: what a pool
// reserves counts against the tenant's quota until it is released; freed memory is no longer the
// session's; a pool id another session made is refused; sizes near 2^64 are refused; the
// default pool cannot be destroyed; a pool's maximum size holds; memory released to make room in
// one context leaves the allocation in its own.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using namespace test;  // the raw protocol peer (raw_peer.h)

constexpr uint64_t kMiB = uint64_t{1} << 20;

class ServerPoolTest : public test::RawServerTest {
 protected:
  ServerPoolTest() {
    setenv("RGPU_SOFTGPU_MEMORY_MB", "2048", 1);
    char dir[] = "/tmp/rgpu-pool-XXXXXX";
    dir_ = mkdtemp(dir);
    std::ofstream(dir_ + "/tokens.txt") << "tok-alice alice 256M 1\ntok-bob bob 256M 1\n";
    options_.tokens_path = dir_ + "/tokens.txt";
  }
  ~ServerPoolTest() override {
    unlink((dir_ + "/tokens.txt").c_str());
    rmdir(dir_.c_str());
  }
  static uint64_t DefaultPool(Channel* ch) {
    wire::Envelope r = Exchange(ch, Call(20, Op::kDeviceGetDefaultMemPool, 0, {0}));
    EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
    return r.reply().values_size() > 0 ? r.reply().values(0) : 0;
  }
  // Allocates from `pool` on the default stream; 0 when refused (*result says why).
  static uint64_t AllocFrom(Channel* ch, uint64_t ctx, uint64_t pool, uint64_t bytes,
                            int* result = nullptr) {
    wire::Envelope r = Exchange(ch, Call(21, Op::kMemAllocFromPool, ctx, {pool, bytes, 0}));
    if (result != nullptr) *result = r.reply().result();
    return r.reply().result() == CUDA_SUCCESS ? r.reply().values(0) : 0;
  }
  static int FreeAsync(Channel* ch, uint64_t ctx, uint64_t p) {
    return Result(ch, Call(22, Op::kMemFreeAsync, ctx, {p, 0}));
  }
  static uint64_t Attribute(Channel* ch, uint64_t pool, CUmemPool_attribute a) {
    wire::Envelope r = Exchange(ch, Call(23, Op::kMemPoolGetAttribute, 0, {pool, a}));
    EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
    return r.reply().values_size() > 0 ? r.reply().values(0) : 0;
  }
  std::string dir_;
};

TEST_F(ServerPoolTest, ReservedMemoryCountsAgainstTheQuotaUntilReleased) {
  auto alice = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  const uint64_t pool = DefaultPool(alice.get());
  ASSERT_NE(pool, 0u);
  const uint64_t p = AllocFrom(alice.get(), a, pool, 200 * kMiB);
  ASSERT_NE(p, 0u);
  EXPECT_EQ(Attribute(alice.get(), pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 200 * kMiB);
  // The pool keeps what it reserved past the free: with a release threshold, past a
  // synchronization too, and the quota has no room for another 200 MiB.
  EXPECT_EQ(Result(alice.get(), Call(24, Op::kMemPoolSetAttribute, 0,
                                     {pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 256 * kMiB})),
            CUDA_SUCCESS);
  EXPECT_EQ(FreeAsync(alice.get(), a, p), CUDA_SUCCESS);
  EXPECT_EQ(Result(alice.get(), Call(25, Op::kCtxSynchronize, a, {})), CUDA_SUCCESS);
  EXPECT_EQ(Attribute(alice.get(), pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
  EXPECT_EQ(Attribute(alice.get(), pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 200 * kMiB);
  EXPECT_EQ(Alloc(alice.get(), a, 200 * kMiB), 0u) << "the pool's memory is the tenant's";
  // The pool's own allocations reuse it.
  const uint64_t again = AllocFrom(alice.get(), a, pool, 150 * kMiB);
  EXPECT_EQ(again, p);
  EXPECT_EQ(FreeAsync(alice.get(), a, again), CUDA_SUCCESS);
  // Released at the next synchronization once the threshold is 0: the quota has room again.
  EXPECT_EQ(Result(alice.get(), Call(26, Op::kMemPoolSetAttribute, 0,
                                     {pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 0})),
            CUDA_SUCCESS);
  EXPECT_EQ(Result(alice.get(), Call(27, Op::kStreamSynchronize, a, {0})), CUDA_SUCCESS);
  EXPECT_EQ(Attribute(alice.get(), pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0u);
  EXPECT_NE(Alloc(alice.get(), a, 200 * kMiB), 0u);
}

TEST_F(ServerPoolTest, FreedMemoryIsNoLongerTheSessions) {
  auto alice = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  const uint64_t pool = DefaultPool(alice.get());
  const uint64_t p = AllocFrom(alice.get(), a, pool, 4096);
  ASSERT_NE(p, 0u);
  auto memset = [&](uint64_t dst) {
    return Result(alice.get(), Call(30, Op::kMemset, a, {dst, 0, 1, 4096, 0, 0}));
  };
  EXPECT_EQ(memset(p), CUDA_SUCCESS);
  EXPECT_EQ(FreeAsync(alice.get(), a, p), CUDA_SUCCESS);
  EXPECT_EQ(memset(p), CUDA_ERROR_INVALID_VALUE) << "a freed range stays usable";
  EXPECT_EQ(FreeAsync(alice.get(), a, p), CUDA_ERROR_INVALID_VALUE) << "double free";
  // cuMemAlloc's memory freed in stream order (the driver allows it; cuSPARSE does it): gone
  // from the session at once, and not freed twice.
  const uint64_t plain = Alloc(alice.get(), a, 4096);
  ASSERT_NE(plain, 0u);
  EXPECT_EQ(FreeAsync(alice.get(), a, plain), CUDA_SUCCESS);
  EXPECT_EQ(memset(plain), CUDA_ERROR_INVALID_VALUE) << "a freed range stays usable";
  EXPECT_EQ(Result(alice.get(), Call(31, Op::kMemFree, a, {plain})), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(FreeAsync(alice.get(), a, plain), CUDA_ERROR_INVALID_VALUE) << "double free";
}

TEST_F(ServerPoolTest, AnotherSessionsPoolIsRefused) {
  auto alice = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  wire::Envelope made = Exchange(alice.get(), Call(40, Op::kMemPoolCreate, 0, {0, 0, 0}));
  ASSERT_EQ(made.reply().result(), CUDA_SUCCESS);
  const uint64_t alices = made.reply().values(0);
  const uint64_t p = AllocFrom(alice.get(), a, alices, 4096);
  ASSERT_NE(p, 0u);
  // Bob has made no pool: alice's id names nothing of his.
  auto bob = Connect();
  const uint64_t b = OpenSession(bob.get(), "tok-bob");
  int result = 0;
  EXPECT_EQ(AllocFrom(bob.get(), b, alices, 4096, &result), 0u);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  for (Op op : {Op::kMemPoolDestroy, Op::kMemPoolTrimTo}) {
    const std::vector<uint64_t> args = op == Op::kMemPoolDestroy ? std::vector<uint64_t>{alices}
                                                                 : std::vector<uint64_t>{alices, 0};
    EXPECT_EQ(Result(bob.get(), Call(41, op, 0, args)), CUDA_ERROR_INVALID_VALUE);
  }
  EXPECT_EQ(Result(bob.get(), Call(42, Op::kMemPoolGetAttribute, 0,
                                   {alices, CU_MEMPOOL_ATTR_USED_MEM_CURRENT})),
            CUDA_ERROR_INVALID_VALUE);
  // Nor can he free alice's memory.
  EXPECT_EQ(FreeAsync(bob.get(), b, p), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(FreeAsync(alice.get(), a, p), CUDA_SUCCESS);
}

TEST_F(ServerPoolTest, SizesNearTwoToThe64AndBoundsAreRefused) {
  auto alice = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  const uint64_t pool = DefaultPool(alice.get());
  for (uint64_t bytes : {~uint64_t{0}, ~uint64_t{0} - 4095, uint64_t{1} << 63, 300 * kMiB}) {
    int result = 0;
    EXPECT_EQ(AllocFrom(alice.get(), a, pool, bytes, &result), 0u) << bytes;
    EXPECT_EQ(result, CUDA_ERROR_OUT_OF_MEMORY) << bytes;
  }
  int result = 0;
  EXPECT_EQ(AllocFrom(alice.get(), a, pool, 0, &result), 0u);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  // A pool bounded to 1 MiB holds no more, however its memory is asked for.
  wire::Envelope made = Exchange(alice.get(), Call(50, Op::kMemPoolCreate, 0, {0, kMiB, 0}));
  ASSERT_EQ(made.reply().result(), CUDA_SUCCESS);
  const uint64_t small = made.reply().values(0);
  const uint64_t p = AllocFrom(alice.get(), a, small, 768 * 1024);
  EXPECT_NE(p, 0u);
  EXPECT_EQ(AllocFrom(alice.get(), a, small, 512 * 1024, &result), 0u);
  EXPECT_EQ(result, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(AllocFrom(alice.get(), a, small, ~uint64_t{0}, &result), 0u);
  EXPECT_EQ(result, CUDA_ERROR_OUT_OF_MEMORY);
  // The default pool stays; a created one goes once its memory is back.
  EXPECT_EQ(Result(alice.get(), Call(51, Op::kMemPoolDestroy, 0, {pool})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(alice.get(), Call(52, Op::kMemPoolDestroy, 0, {small})), CUDA_SUCCESS);
  EXPECT_EQ(AllocFrom(alice.get(), a, small, 1024, &result), 0u) << "a destroyed pool";
  EXPECT_EQ(FreeAsync(alice.get(), a, p), CUDA_SUCCESS) << "its outstanding memory still frees";
  // Unknown attributes, and statistics that can only be reset, are refused.
  EXPECT_EQ(Result(alice.get(),
                   Call(53, Op::kMemPoolSetAttribute, 0, {pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, 5})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(alice.get(), Call(54, Op::kMemPoolGetAttribute, 0, {pool, 999})),
            CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
}  // namespace rgpu

namespace rgpu {
namespace {

// Releasing a pool's memory to make room happens in the context each block came from; the
// allocation that needed the room is still made in its own context (it outlives the other).
TEST_F(ServerPoolTest, RoomMadeInAnotherContextLeavesTheAllocationInItsOwn) {
  auto alice = Connect();
  OpenSession(alice.get(), "tok-alice");
  wire::Envelope made_a = Exchange(alice.get(), Call(60, Op::kCtxCreate, 0, {0, 0}));
  wire::Envelope made_b = Exchange(alice.get(), Call(61, Op::kCtxCreate, 0, {0, 0}));
  ASSERT_EQ(made_a.reply().result(), CUDA_SUCCESS);
  ASSERT_EQ(made_b.reply().result(), CUDA_SUCCESS);
  const uint64_t a = made_a.reply().values(0), b = made_b.reply().values(0);
  const uint64_t pool = DefaultPool(alice.get());
  ASSERT_EQ(Result(alice.get(), Call(62, Op::kMemPoolSetAttribute, 0,
                                     {pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 256 * kMiB})),
            CUDA_SUCCESS);
  const uint64_t in_a = AllocFrom(alice.get(), a, pool, 200 * kMiB);
  ASSERT_NE(in_a, 0u);
  ASSERT_EQ(FreeAsync(alice.get(), a, in_a), CUDA_SUCCESS);
  ASSERT_EQ(Result(alice.get(), Call(63, Op::kCtxSynchronize, a, {})), CUDA_SUCCESS);
  // Context b needs 200 MiB: the quota has room only once a's block is released.
  const uint64_t in_b = AllocFrom(alice.get(), b, pool, 200 * kMiB);
  ASSERT_NE(in_b, 0u);
  ASSERT_EQ(Result(alice.get(), Call(64, Op::kCtxDestroy, 0, {a})), CUDA_SUCCESS);
  EXPECT_EQ(Result(alice.get(), Call(65, Op::kMemset, b, {in_b, 0, 1, 200 * kMiB, 0, 0})),
            CUDA_SUCCESS);
  EXPECT_EQ(Result(alice.get(), Call(66, Op::kCtxSynchronize, b, {})), CUDA_SUCCESS);
}

}  // namespace
}  // namespace rgpu
