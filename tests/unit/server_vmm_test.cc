// Virtual memory management on the server (server/session_vmm.cc), spoken raw: physical memory
// counts against the tenant's quota until it is released and unmapped; a handle or an address
// reservation of another session is refused (the software GPU's address space is process-wide,
// so without the session's own records a tenant could map into another's reservation); mapping
// sizes and offsets that overflow are refused; a mapped range is the session's memory only while
// access is granted and it is mapped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using namespace test;  // the raw protocol peer (raw_peer.h)

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGran = 2 * kMiB;

class ServerVmmTest : public test::RawServerTest {
 protected:
  ServerVmmTest() {
    setenv("RGPU_SOFTGPU_MEMORY_MB", "1024", 1);
    char dir[] = "/tmp/rgpu-vmm-XXXXXX";
    dir_ = mkdtemp(dir);
    std::ofstream(dir_ + "/tokens.txt") << "tok-alice alice 256M 1\ntok-bob bob 256M 1\n";
    options_.tokens_path = dir_ + "/tokens.txt";
  }
  ~ServerVmmTest() override {
    unlink((dir_ + "/tokens.txt").c_str());
    rmdir(dir_.c_str());
  }
  static uint64_t Create(Channel* ch, uint64_t ctx, uint64_t bytes, int* result = nullptr) {
    wire::Envelope r = Exchange(ch, Call(70, Op::kMemCreate, ctx, {bytes}));
    if (result != nullptr) *result = r.reply().result();
    return r.reply().result() == CUDA_SUCCESS ? r.reply().values(0) : 0;
  }
  static uint64_t Reserve(Channel* ch, uint64_t ctx, uint64_t bytes) {
    wire::Envelope r = Exchange(ch, Call(71, Op::kMemAddressReserve, ctx, {bytes, 0}));
    return r.reply().result() == CUDA_SUCCESS ? r.reply().values(0) : 0;
  }
  static int Map(Channel* ch, uint64_t ctx, uint64_t ptr, uint64_t bytes, uint64_t offset,
                 uint64_t handle) {
    return Result(ch, Call(72, Op::kMemMap, ctx, {ptr, bytes, offset, handle}));
  }
  static int Access(Channel* ch, uint64_t ctx, uint64_t ptr, uint64_t bytes) {
    return Result(ch, Call(73, Op::kMemSetAccess, ctx, {ptr, bytes, 1}));
  }
  static int CopyIn(Channel* ch, uint64_t ctx, uint64_t ptr) {
    return Result(ch, Call(74, Op::kMemcpyHtoD, ctx, {ptr, 64, 0, 0}), std::string(64, 'x'));
  }
  std::string dir_;
};

TEST_F(ServerVmmTest, PhysicalMemoryCountsUntilReleasedAndUnmapped) {
  auto alice = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  int result = 0;
  const uint64_t h = Create(alice.get(), a, 100 * kGran, &result);  // 200 MiB of 256
  ASSERT_NE(h, 0u) << result;
  EXPECT_EQ(Create(alice.get(), a, 50 * kGran, &result), 0u);
  EXPECT_EQ(result, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(Alloc(alice.get(), a, 100 * kMiB), 0u) << "physical memory is the tenant's";
  const uint64_t va = Reserve(alice.get(), a, 100 * kGran);
  ASSERT_NE(va, 0u);
  ASSERT_EQ(Map(alice.get(), a, va, 100 * kGran, 0, h), CUDA_SUCCESS);
  // Released but mapped: still held, still charged.
  ASSERT_EQ(Result(alice.get(), Call(75, Op::kMemRelease, a, {h})), CUDA_SUCCESS);
  EXPECT_EQ(Alloc(alice.get(), a, 100 * kMiB), 0u);
  EXPECT_EQ(Map(alice.get(), a, va, kGran, 0, h), CUDA_ERROR_INVALID_VALUE) << "released handle";
  ASSERT_EQ(Result(alice.get(), Call(76, Op::kMemUnmap, a, {va, 100 * kGran})), CUDA_SUCCESS);
  EXPECT_NE(Alloc(alice.get(), a, 100 * kMiB), 0u) << "unmapped and released: uncharged";
}

TEST_F(ServerVmmTest, AnotherSessionsHandlesAndReservationsAreRefused) {
  auto alice = Connect();
  auto bob = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  const uint64_t b = OpenSession(bob.get(), "tok-bob");
  const uint64_t bobs_handle = Create(bob.get(), b, kGran);
  const uint64_t bobs_va = Reserve(bob.get(), b, 2 * kGran);
  ASSERT_NE(bobs_handle, 0u);
  ASSERT_NE(bobs_va, 0u);
  const uint64_t hers = Create(alice.get(), a, kGran);
  const uint64_t her_va = Reserve(alice.get(), a, 2 * kGran);
  ASSERT_NE(hers, 0u);
  ASSERT_NE(her_va, 0u);
  // Alice's own memory into bob's reservation: refused, and bob's range stays free for him.
  EXPECT_EQ(Map(alice.get(), a, bobs_va, kGran, 0, hers), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Map(bob.get(), b, bobs_va, kGran, 0, bobs_handle), CUDA_SUCCESS);
  // Bob's handle id means nothing in alice's session (she made one handle: id 1; bob's is 1 too,
  // so she names an id she does not have).
  EXPECT_EQ(Map(alice.get(), a, her_va, kGran, 0, bobs_handle + 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(alice.get(), Call(77, Op::kMemAddressFree, a, {bobs_va, 2 * kGran})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(alice.get(), Call(78, Op::kMemUnmap, a, {bobs_va, kGran})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Access(alice.get(), a, bobs_va, kGran), CUDA_ERROR_INVALID_VALUE);
  // Bob's mapping works for bob.
  ASSERT_EQ(Access(bob.get(), b, bobs_va, kGran), CUDA_SUCCESS);
  EXPECT_EQ(CopyIn(bob.get(), b, bobs_va), CUDA_SUCCESS);
  EXPECT_EQ(CopyIn(alice.get(), a, bobs_va), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(ServerVmmTest, MappedMemoryIsTheSessionsOnlyWhileAccessibleAndMapped) {
  auto alice = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  const uint64_t h = Create(alice.get(), a, 2 * kGran);
  const uint64_t va = Reserve(alice.get(), a, 2 * kGran);
  ASSERT_NE(h, 0u);
  ASSERT_NE(va, 0u);
  EXPECT_EQ(Map(alice.get(), a, va, 2 * kGran, ~uint64_t{0} - kGran + 1, h),
            CUDA_ERROR_INVALID_VALUE)
      << "an offset that wraps around";
  EXPECT_EQ(Map(alice.get(), a, va, ~uint64_t{0} - kGran + 1, 0, h), CUDA_ERROR_INVALID_VALUE)
      << "a size that wraps around";
  EXPECT_EQ(Map(alice.get(), a, va, 2 * kGran, kGran, h), CUDA_ERROR_INVALID_VALUE)
      << "past the physical memory";
  ASSERT_EQ(Map(alice.get(), a, va, 2 * kGran, 0, h), CUDA_SUCCESS);
  EXPECT_EQ(Map(alice.get(), a, va, kGran, 0, h), CUDA_ERROR_INVALID_VALUE) << "mapped already";
  EXPECT_EQ(CopyIn(alice.get(), a, va), CUDA_ERROR_INVALID_VALUE) << "no access granted yet";
  ASSERT_EQ(Access(alice.get(), a, va, 2 * kGran), CUDA_SUCCESS);
  EXPECT_EQ(CopyIn(alice.get(), a, va + kGran), CUDA_SUCCESS);
  EXPECT_EQ(Result(alice.get(), Call(79, Op::kMemFree, a, {va})), CUDA_ERROR_INVALID_VALUE)
      << "a mapping is not an allocation";
  EXPECT_EQ(Result(alice.get(), Call(80, Op::kMemAddressFree, a, {va, 2 * kGran})),
            CUDA_ERROR_INVALID_VALUE)
      << "still mapped";
  ASSERT_EQ(Result(alice.get(), Call(81, Op::kMemUnmap, a, {va, 2 * kGran})), CUDA_SUCCESS);
  EXPECT_EQ(CopyIn(alice.get(), a, va), CUDA_ERROR_INVALID_VALUE) << "unmapped";
  EXPECT_EQ(Result(alice.get(), Call(82, Op::kMemAddressFree, a, {va, 2 * kGran})), CUDA_SUCCESS);
}

// Fresh physical memory holding stale bytes, as a GPU's does, on a server that treats the
// software GPU as NVIDIA's driver (server_scrub_test): it must be zeroed before the tenant maps
// it, and only then (access taken away and granted again keeps the tenant's data).
class ServerVmmScrubTest : public ServerVmmTest {
 protected:
  ServerVmmScrubTest() {
    setenv("RGPU_SOFTGPU_STALE_MEMORY", "1", 1);
    options_.backend_extensions = false;
  }
  ~ServerVmmScrubTest() override { unsetenv("RGPU_SOFTGPU_STALE_MEMORY"); }
  static std::string Read(Channel* ch, uint64_t ctx, uint64_t ptr, uint64_t bytes) {
    std::string out;
    wire::Envelope r = Exchange(ch, Call(90, Op::kMemcpyDtoH, ctx, {ptr, bytes, 0, 0}), "", &out);
    return r.reply().result() == CUDA_SUCCESS ? out : "refused";
  }
};

TEST_F(ServerVmmScrubTest, PhysicalMemoryIsZeroedOnceBeforeTheTenantSeesIt) {
  auto alice = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  const uint64_t h = Create(alice.get(), a, kGran);
  const uint64_t va = Reserve(alice.get(), a, kGran);
  ASSERT_NE(h, 0u);
  ASSERT_NE(va, 0u);
  ASSERT_EQ(Map(alice.get(), a, va, kGran, 0, h), CUDA_SUCCESS);
  ASSERT_EQ(Access(alice.get(), a, va, kGran), CUDA_SUCCESS);
  const std::string fresh = Read(alice.get(), a, va, 4096);
  ASSERT_EQ(fresh.size(), 4096u);
  EXPECT_EQ(std::count(fresh.begin(), fresh.end(), '\0'), 4096) << "another user's bytes";
  ASSERT_EQ(CopyIn(alice.get(), a, va), CUDA_SUCCESS);  // 64 bytes of 'x'
  ASSERT_EQ(Result(alice.get(), Call(91, Op::kMemSetAccess, a, {va, kGran, 0})), CUDA_SUCCESS);
  ASSERT_EQ(Access(alice.get(), a, va, kGran), CUDA_SUCCESS);
  EXPECT_EQ(Read(alice.get(), a, va, 64), std::string(64, 'x')) << "granting access again wiped it";
}

}  // namespace
}  // namespace rgpu
