// Fresh allocations never show another tenant's data (issue 13): on backends whose new memory
// holds what its last user left there (every GPU), the server zeroes each allocation before the
// tenant gets it. The software GPU plays such a GPU here (RGPU_SOFTGPU_STALE_MEMORY=1: fresh
// memory holds stale bytes) and the server treats it as it treats NVIDIA's driver.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using namespace test;  // the raw protocol peer (raw_peer.h)

class ServerScrubTest : public test::RawServerTest {
 protected:
  ServerScrubTest() {
    setenv("RGPU_SOFTGPU_STALE_MEMORY", "1", 1);
    options_.backend_extensions = false;
  }
};

TEST_F(ServerScrubTest, FreshAllocationsHoldNoOtherTenantsData) {
  constexpr uint64_t kBytes = uint64_t{1} << 20;
  auto a = Connect();
  const uint64_t actx = OpenSession(a.get());
  const uint64_t secret = Alloc(a.get(), actx, kBytes);
  ASSERT_NE(secret, 0u);
  ASSERT_EQ(Result(a.get(), Call(3, Op::kMemset, actx, {secret, 0x53, 1, kBytes, 0, 0})),
            CUDA_SUCCESS);
  ASSERT_EQ(Result(a.get(), Call(4, Op::kMemFree, actx, {secret})), CUDA_SUCCESS);
  a.reset();

  auto b = Connect();
  const uint64_t bctx = OpenSession(b.get());
  const uint64_t fresh = Alloc(b.get(), bctx, kBytes);
  ASSERT_NE(fresh, 0u);
  std::string data;
  wire::Envelope r =
      Exchange(b.get(), Call(5, Op::kMemcpyDtoH, bctx, {fresh, kBytes, 0, 0}), "", &data);
  ASSERT_EQ(r.reply().result(), CUDA_SUCCESS);
  EXPECT_EQ(data, std::string(kBytes, '\0'));
}

}  // namespace
}  // namespace rgpu
