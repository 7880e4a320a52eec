// Tensor maps on the server (server/session_tensor_map.cc), spoken raw: a map is encoded only
// over memory of the call's context (not another tenant's, not an address the session never
// had); ranks outside 1..5 and unknown modes are refused before the backend reads any array;
// an encoding the backend lacks (softgpu has no im2col maps) is NOT_SUPPORTED; the session goes
// on after every refusal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using namespace test;  // the raw protocol peer (raw_peer.h)

class ServerTensorMapTest : public test::RawServerTest {
 protected:
  ServerTensorMapTest() {
    char dir[] = "/tmp/rgpu-tensor-map-XXXXXX";
    dir_ = mkdtemp(dir);
    std::ofstream(dir_ + "/tokens.txt") << "tok-alice alice 256M 1\ntok-bob bob 256M 1\n";
    options_.tokens_path = dir_ + "/tokens.txt";
  }
  ~ServerTensorMapTest() override {
    unlink((dir_ + "/tokens.txt").c_str());
    rmdir(dir_.c_str());
  }
  // Encodes a 2D float map of 64 x 16 elements (rows of 256 bytes, 32 x 8 boxes) at `address`
  // with `mode` and `rank`; the result, and the map's words in *words.
  static int Encode(Channel* ch, uint64_t ctx, uint64_t address, uint64_t mode = 0,
                    uint64_t rank = 2, std::vector<uint64_t>* words = nullptr) {
    std::vector<uint64_t> args = {mode, CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
                                  rank, address,
                                  64,   16,
                                  0,    0,
                                  0,  // dims
                                  256,  0,
                                  0,    0,  // strides of dimensions 1..4
                                  32,   8,
                                  0,    0,
                                  0,  // box
                                  1,    1,
                                  0,    0,
                                  0,  // element strides
                                  0,    0,
                                  0,    0,
                                  0,    0,  // im2col corners
                                  8,    32,
                                  0,  // channels, pixels, wide mode
                                  0,    0,
                                  0,    0};  // interleave, swizzle, L2, fill
    wire::Envelope r = Exchange(ch, Call(60, Op::kTensorMapEncode, ctx, args));
    if (words != nullptr) {
      words->assign(r.reply().values().begin(), r.reply().values().end());
    }
    return r.reply().result();
  }
  std::string dir_;
};

TEST_F(ServerTensorMapTest, AMapCoversOnlyTheContextsOwnMemory) {
  auto alice = Connect(), bob = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  const uint64_t b = OpenSession(bob.get(), "tok-bob");
  const uint64_t mine = Alloc(alice.get(), a, 4096), theirs = Alloc(bob.get(), b, 4096);
  ASSERT_NE(mine, 0u);
  ASSERT_NE(theirs, 0u);
  std::vector<uint64_t> words;
  ASSERT_EQ(Encode(alice.get(), a, mine, 0, 2, &words), CUDA_SUCCESS);
  ASSERT_EQ(words.size(), 16u);
  uint32_t marker;
  memcpy(&marker, words.data(), 4);
  EXPECT_EQ(marker, 0x4d544753u) << "softgpu's map layout";
  uint64_t address;
  memcpy(&address, reinterpret_cast<const char*>(words.data()) + 8, 8);
  EXPECT_EQ(address, mine);
  // Another tenant's memory, memory never allocated, and null are refused.
  EXPECT_EQ(Encode(alice.get(), a, theirs), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Encode(alice.get(), a, mine + (1u << 30)), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Encode(alice.get(), a, 0), CUDA_ERROR_INVALID_VALUE);
  // Freed memory is no longer the session's.
  ASSERT_EQ(Result(alice.get(), Call(61, Op::kMemFree, a, {mine})), CUDA_SUCCESS);
  EXPECT_EQ(Encode(alice.get(), a, mine), CUDA_ERROR_INVALID_VALUE);
  const uint64_t again = Alloc(alice.get(), a, 4096);
  EXPECT_EQ(Encode(alice.get(), a, again), CUDA_SUCCESS);
}

TEST_F(ServerTensorMapTest, RanksAndModesOutsideTheDescriptionAreRefused) {
  auto alice = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  const uint64_t p = Alloc(alice.get(), a, 4096);
  ASSERT_NE(p, 0u);
  EXPECT_EQ(Encode(alice.get(), a, p, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Encode(alice.get(), a, p, 0, 6), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Encode(alice.get(), a, p, 0, 0xffffffffu), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Encode(alice.get(), a, p, 3, 2), CUDA_ERROR_INVALID_VALUE);
  // softgpu has no im2col maps: the backend lacks the entry point.
  EXPECT_EQ(Encode(alice.get(), a, p, 1, 3), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(Encode(alice.get(), a, p, 2, 3), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(Encode(alice.get(), a, p), CUDA_SUCCESS) << "the session goes on";
}

}  // namespace
}  // namespace rgpu
