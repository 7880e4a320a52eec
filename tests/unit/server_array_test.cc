// CUDA arrays, texture and surface objects on the server (server/session_array.cc), spoken raw:
// an array counts against the tenant's quota while it lives; an array, texture or surface of
// another session is refused; boxes outside an array, shapes whose sizes overflow 64 bits and
// payloads that do not match are refused; a texture cannot read memory that is not the session's;
// a fresh array holds zeros, not what the device's last user left there.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using namespace test;  // the raw protocol peer (raw_peer.h)

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kHuge = ~uint64_t{0} - 3;

class ServerArrayTest : public test::RawServerTest {
 protected:
  ServerArrayTest() {
    setenv("RGPU_SOFTGPU_MEMORY_MB", "1024", 1);
    char dir[] = "/tmp/rgpu-array-XXXXXX";
    dir_ = mkdtemp(dir);
    std::ofstream(dir_ + "/tokens.txt") << "tok-alice alice 256M 1\ntok-bob bob 256M 1\n";
    options_.tokens_path = dir_ + "/tokens.txt";
  }
  ~ServerArrayTest() override {
    unlink((dir_ + "/tokens.txt").c_str());
    rmdir(dir_.c_str());
  }
  // Makes a float array (channels 1) of width x height x depth; 0 when refused.
  static uint64_t MakeArray(Channel* ch, uint64_t ctx, uint64_t width, uint64_t height,
                            uint64_t depth, int* result = nullptr, uint32_t channels = 1,
                            uint32_t format = CU_AD_FORMAT_FLOAT, uint32_t flags = 0) {
    wire::Envelope r = Exchange(
        ch, Call(30, Op::kArrayCreate, ctx, {width, height, depth, format, channels, flags}));
    if (result != nullptr) *result = r.reply().result();
    return r.reply().result() == CUDA_SUCCESS ? r.reply().values(0) : 0;
  }
  // Copies `data` into the box; the call's result.
  static int CopyIn(Channel* ch, uint64_t ctx, uint64_t array, uint64_t x, uint64_t y,
                    uint64_t width, uint64_t height, const std::string& data) {
    return Result(ch, Call(31, Op::kMemcpyHtoArray, ctx, {array, x, y, 0, width, height, 1, 0}),
                  data);
  }
  // The box's bytes; *result says whether the copy succeeded.
  static std::string CopyOut(Channel* ch, uint64_t ctx, uint64_t array, uint64_t x, uint64_t y,
                             uint64_t width, uint64_t height, int* result) {
    std::string out;
    wire::Envelope r = Exchange(
        ch, Call(32, Op::kMemcpyArrayToH, ctx, {array, x, y, 0, width, height, 1, 0}), "", &out);
    *result = r.reply().result();
    return out;
  }
  // A point-sampled texture over the array; 0 when refused.
  static uint64_t MakeTexture(Channel* ch, uint64_t ctx, uint32_t type, uint64_t array,
                              uint64_t dptr, uint64_t width, uint64_t height, uint64_t pitch,
                              int* result = nullptr) {
    std::vector<uint64_t> args = {type,
                                  array,
                                  dptr,
                                  CU_AD_FORMAT_FLOAT,
                                  1,
                                  width,
                                  height,
                                  pitch,
                                  CU_TR_ADDRESS_MODE_CLAMP,
                                  CU_TR_ADDRESS_MODE_CLAMP,
                                  CU_TR_ADDRESS_MODE_CLAMP,
                                  CU_TR_FILTER_MODE_POINT,
                                  0,
                                  0,
                                  0};
    args.resize(23, 0);  // bias, level clamps and border colour: 0.0f; no mipmapped array
    wire::Envelope r = Exchange(ch, Call(33, Op::kTexObjectCreate, ctx, args));
    if (result != nullptr) *result = r.reply().result();
    return r.reply().result() == CUDA_SUCCESS ? r.reply().values(0) : 0;
  }
  std::string dir_;
};

TEST_F(ServerArrayTest, AnArrayCountsAgainstTheQuotaWhileItLives) {
  auto alice = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  // 4096 x 2560 four-channel float texels: 160 MiB of the 256 MiB quota; a second one does not fit.
  int result = 0;
  const uint64_t big = MakeArray(alice.get(), a, 4096, 2560, 0, &result, 4);
  ASSERT_NE(big, 0u) << result;
  EXPECT_EQ(MakeArray(alice.get(), a, 4096, 2560, 0, &result, 4), 0u);
  EXPECT_EQ(result, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(Alloc(alice.get(), a, 200 * kMiB), 0u) << "the array's memory is the tenant's";
  EXPECT_EQ(Result(alice.get(), Call(34, Op::kArrayDestroy, a, {big})), CUDA_SUCCESS);
  EXPECT_NE(MakeArray(alice.get(), a, 4096, 2560, 0, &result, 4), 0u) << result;
  // Destroyed: its id names nothing any more.
  EXPECT_EQ(Result(alice.get(), Call(35, Op::kArrayDestroy, a, {big})), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(ServerArrayTest, ShapesThatOverflowOrAreNotArraysAreRefused) {
  auto alice = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  int result = 0;
  EXPECT_EQ(MakeArray(alice.get(), a, kHuge, 1, 1, &result), 0u);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(MakeArray(alice.get(), a, uint64_t{1} << 32, uint64_t{1} << 32, 1 << 20, &result, 4),
            0u);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(MakeArray(alice.get(), a, 0, 4, 0, &result), 0u);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(MakeArray(alice.get(), a, 16, 16, 0, &result, 3), 0u) << "three channels";
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(MakeArray(alice.get(), a, 16, 16, 0, &result, 1, CU_AD_FORMAT_BC1_UNORM), 0u);
  EXPECT_EQ(result, CUDA_ERROR_NOT_SUPPORTED);
  // The session goes on.
  EXPECT_NE(MakeArray(alice.get(), a, 16, 16, 0), 0u);
}

TEST_F(ServerArrayTest, BoxesOutsideTheArrayAreRefused) {
  auto alice = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  const uint64_t array = MakeArray(alice.get(), a, 16, 8, 0);  // 64 bytes x 8 rows
  ASSERT_NE(array, 0u);
  const std::string row(64, 'x');
  EXPECT_EQ(CopyIn(alice.get(), a, array, 0, 0, 64, 1, row), CUDA_SUCCESS);
  EXPECT_EQ(CopyIn(alice.get(), a, array, 4, 0, 64, 1, row), CUDA_ERROR_INVALID_VALUE)
      << "past the row's end";
  EXPECT_EQ(CopyIn(alice.get(), a, array, 0, 8, 64, 1, row), CUDA_ERROR_INVALID_VALUE)
      << "past the last row";
  EXPECT_EQ(CopyIn(alice.get(), a, array, kHuge, 0, 64, 1, row), CUDA_ERROR_INVALID_VALUE)
      << "an offset that wraps around";
  EXPECT_EQ(CopyIn(alice.get(), a, array, 0, 0, 64, 2, row), CUDA_ERROR_INVALID_VALUE)
      << "a payload shorter than the box";
  EXPECT_EQ(
      Result(alice.get(), Call(36, Op::kMemcpyHtoArray, a, {array, 0, 0, 1, 64, 1, 1, 0}), row),
      CUDA_ERROR_INVALID_VALUE)
      << "past the last slice";
  EXPECT_EQ(
      Result(alice.get(),
             Call(37, Op::kMemcpyHtoArray, a,
                  {array, 0, 0, 0, uint64_t{1} << 33, uint64_t{1} << 31, uint64_t{1} << 2, 0}),
             row),
      CUDA_ERROR_INVALID_VALUE)
      << "a box whose size overflows";
  int result = 0;
  EXPECT_TRUE(CopyOut(alice.get(), a, array, 0, 7, 64, 2, &result).empty());
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  // Device memory on the other side must be the session's, all its slices.
  const uint64_t p = Alloc(alice.get(), a, 4096);
  ASSERT_NE(p, 0u);
  EXPECT_EQ(Result(alice.get(),
                   Call(38, Op::kMemcpyDtoArray, a, {array, 0, 0, 0, p, 64, 8, 64, 8, 1, 0})),
            CUDA_SUCCESS);
  EXPECT_EQ(Result(alice.get(),
                   Call(39, Op::kMemcpyDtoArray, a, {array, 0, 0, 0, p, 1024, 8, 64, 8, 1, 0})),
            CUDA_ERROR_INVALID_VALUE)
      << "rows past the allocation's end";
  EXPECT_EQ(Result(alice.get(), Call(40, Op::kMemcpyArrayToD, a,
                                     {array, 0, 0, 0, p, kHuge, kHuge, 64, 8, 1, 0})),
            CUDA_ERROR_INVALID_VALUE)
      << "a pitch whose slices overflow";
  EXPECT_EQ(Result(alice.get(), Call(41, Op::kMemcpyArrayToArray, a,
                                     {array, 0, 0, 0, array, 0, 4, 0, 64, 5, 1, 0})),
            CUDA_ERROR_INVALID_VALUE)
      << "a source box past the last row";
}

TEST_F(ServerArrayTest, MemoryTheSessionFreedIsNotReadAgain) {
  // Memory a pool keeps after a free is still the backend context's, but no longer the session's:
  // neither a texture nor a copy into an array may read it.
  auto alice = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  wire::Envelope r = Exchange(alice.get(), Call(50, Op::kDeviceGetDefaultMemPool, 0, {0}));
  ASSERT_EQ(r.reply().result(), CUDA_SUCCESS);
  const uint64_t pool = r.reply().values(0);
  ASSERT_EQ(Result(alice.get(), Call(51, Op::kMemPoolSetAttribute, 0,
                                     {pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 64 * kMiB})),
            CUDA_SUCCESS);
  r = Exchange(alice.get(), Call(52, Op::kMemAllocFromPool, a, {pool, 4096, 0}));
  ASSERT_EQ(r.reply().result(), CUDA_SUCCESS);
  const uint64_t p = r.reply().values(0);
  const uint64_t array = MakeArray(alice.get(), a, 16, 8, 0);
  ASSERT_NE(array, 0u);
  EXPECT_EQ(Result(alice.get(),
                   Call(53, Op::kMemcpyDtoArray, a, {array, 0, 0, 0, p, 64, 8, 64, 8, 1, 0})),
            CUDA_SUCCESS);
  EXPECT_NE(MakeTexture(alice.get(), a, CU_RESOURCE_TYPE_LINEAR, 0, p, 4096, 0, 0), 0u);
  ASSERT_EQ(Result(alice.get(), Call(54, Op::kMemFreeAsync, a, {p, 0})), CUDA_SUCCESS);
  int result = 0;
  EXPECT_EQ(MakeTexture(alice.get(), a, CU_RESOURCE_TYPE_LINEAR, 0, p, 4096, 0, 0, &result), 0u);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(MakeTexture(alice.get(), a, CU_RESOURCE_TYPE_PITCH2D, 0, p, 16, 8, 64, &result), 0u);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(alice.get(),
                   Call(55, Op::kMemcpyDtoArray, a, {array, 0, 0, 0, p, 64, 8, 64, 8, 1, 0})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(alice.get(),
                   Call(56, Op::kMemcpyArrayToD, a, {array, 0, 0, 0, p, 64, 8, 64, 8, 1, 0})),
            CUDA_ERROR_INVALID_VALUE);
}

// Fresh device memory holding stale bytes, as a GPU's does, and the server treating the software
// GPU as it treats NVIDIA's driver (server_scrub_test): it must zero each array.
class ServerArrayScrubTest : public ServerArrayTest {
 protected:
  ServerArrayScrubTest() {
    setenv("RGPU_SOFTGPU_STALE_MEMORY", "1", 1);
    options_.backend_extensions = false;
  }
  ~ServerArrayScrubTest() override { unsetenv("RGPU_SOFTGPU_STALE_MEMORY"); }
};

TEST_F(ServerArrayScrubTest, AFreshArrayHoldsZeros) {
  auto alice = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  const uint64_t array = MakeArray(alice.get(), a, 256, 64, 0);
  ASSERT_NE(array, 0u);
  int result = 0;
  const std::string got = CopyOut(alice.get(), a, array, 0, 0, 1024, 64, &result);
  ASSERT_EQ(result, CUDA_SUCCESS);
  ASSERT_EQ(got.size(), 1024u * 64);
  EXPECT_EQ(std::count(got.begin(), got.end(), '\0'), static_cast<long>(got.size()))
      << "bytes another user left are visible";
  // And what is written is what is read.
  std::string data(1024 * 2, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  ASSERT_EQ(CopyIn(alice.get(), a, array, 0, 10, 1024, 2, data), CUDA_SUCCESS);
  EXPECT_TRUE(CopyOut(alice.get(), a, array, 0, 10, 1024, 2, &result) == data);
}

TEST_F(ServerArrayTest, AnotherSessionsArraysTexturesAndMemoryAreRefused) {
  auto alice = Connect();
  auto bob = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  const uint64_t b = OpenSession(bob.get(), "tok-bob");
  const uint64_t bobs_array =
      MakeArray(bob.get(), b, 16, 16, 0, nullptr, 1, CU_AD_FORMAT_FLOAT, CUDA_ARRAY3D_SURFACE_LDST);
  ASSERT_NE(bobs_array, 0u);
  const uint64_t bobs_memory = Alloc(bob.get(), b, 4096);
  ASSERT_NE(bobs_memory, 0u);
  int result = 0;
  const uint64_t bobs_texture =
      MakeTexture(bob.get(), b, CU_RESOURCE_TYPE_ARRAY, bobs_array, 0, 0, 0, 0, &result);
  ASSERT_NE(bobs_texture, 0u) << result;
  wire::Envelope s = Exchange(bob.get(), Call(42, Op::kSurfObjectCreate, b, {bobs_array}));
  ASSERT_EQ(s.reply().result(), CUDA_SUCCESS);
  const uint64_t bobs_surface = s.reply().values(0);

  // Alice has no array with bob's id: she cannot copy into it, read it or sample it.
  EXPECT_EQ(CopyIn(alice.get(), a, bobs_array, 0, 0, 64, 1, std::string(64, 'a')),
            CUDA_ERROR_INVALID_VALUE);
  CopyOut(alice.get(), a, bobs_array, 0, 0, 64, 1, &result);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(MakeTexture(alice.get(), a, CU_RESOURCE_TYPE_ARRAY, bobs_array, 0, 0, 0, 0, &result),
            0u);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(alice.get(), Call(43, Op::kSurfObjectCreate, a, {bobs_array})),
            CUDA_ERROR_INVALID_VALUE);
  // Nor make a texture over bob's memory, linear or pitched.
  EXPECT_EQ(
      MakeTexture(alice.get(), a, CU_RESOURCE_TYPE_LINEAR, 0, bobs_memory, 4096, 0, 0, &result),
      0u);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(
      MakeTexture(alice.get(), a, CU_RESOURCE_TYPE_PITCH2D, 0, bobs_memory, 16, 16, 64, &result),
      0u);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  // Nor destroy bob's texture or surface by their values.
  EXPECT_EQ(Result(alice.get(), Call(44, Op::kTexObjectDestroy, a, {bobs_texture})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(alice.get(), Call(45, Op::kSurfObjectDestroy, a, {bobs_surface})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(alice.get(), Call(46, Op::kArrayDestroy, a, {bobs_array})),
            CUDA_ERROR_INVALID_VALUE);
  // A linear texture over her own memory, but longer than the allocation: refused too.
  const uint64_t hers = Alloc(alice.get(), a, 4096);
  ASSERT_NE(hers, 0u);
  EXPECT_NE(MakeTexture(alice.get(), a, CU_RESOURCE_TYPE_LINEAR, 0, hers, 4096, 0, 0), 0u);
  EXPECT_EQ(MakeTexture(alice.get(), a, CU_RESOURCE_TYPE_LINEAR, 0, hers, 8192, 0, 0, &result), 0u);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(MakeTexture(alice.get(), a, CU_RESOURCE_TYPE_PITCH2D, 0, hers, 16, kHuge, 64, &result),
            0u);
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);

  // Bob's objects are untouched.
  EXPECT_EQ(Result(bob.get(), Call(47, Op::kTexObjectDestroy, b, {bobs_texture})), CUDA_SUCCESS);
  EXPECT_EQ(Result(bob.get(), Call(48, Op::kSurfObjectDestroy, b, {bobs_surface})), CUDA_SUCCESS);
  EXPECT_EQ(Result(bob.get(), Call(49, Op::kArrayDestroy, b, {bobs_array})), CUDA_SUCCESS);
}

// Mipmapped arrays: every level is charged while the mipmapped array lives; a level is an array
// of the session that goes with it (never destroyed alone); level counts past the extent, other
// contexts' and other sessions' mipmapped arrays are refused; a texture reads one.
TEST_F(ServerArrayTest, MipmappedArraysAreChargedWithEveryLevelAndOwnTheirLevels) {
  auto alice = Connect(), bob = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  const uint64_t b = OpenSession(bob.get(), "tok-bob");
  auto make = [](Channel* ch, uint64_t ctx, uint64_t w, uint64_t h, uint32_t levels) {
    return Exchange(
        ch, Call(40, Op::kMipmappedArrayCreate, ctx, {w, h, 0, CU_AD_FORMAT_FLOAT, 1, 0, levels}));
  };
  // 8192 x 4096 floats: 128 MiB at level 0, about 170.7 MiB with all 14 levels. With a 64 MiB
  // array beside it, a 256 MiB quota has no room for another 64 MiB (it would if only level 0
  // were charged: exactly 256 MiB).
  std::vector<uint64_t> mips;
  wire::Envelope big = make(alice.get(), a, 8192, 4096, 14);
  ASSERT_EQ(big.reply().result(), CUDA_SUCCESS) << big.reply().message();
  mips.push_back(big.reply().values(0));
  ASSERT_NE(MakeArray(alice.get(), a, 4096, 4096, 0), 0u);
  EXPECT_EQ(make(alice.get(), a, 4096, 4096, 1).reply().result(), CUDA_ERROR_OUT_OF_MEMORY);
  wire::Envelope small = make(alice.get(), a, 64, 64, 7);
  ASSERT_EQ(small.reply().result(), CUDA_SUCCESS) << small.reply().message();
  mips.push_back(small.reply().values(0));
  EXPECT_EQ(make(alice.get(), a, 64, 64, 8).reply().result(), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(make(alice.get(), a, 64, 64, 0).reply().result(), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(make(alice.get(), a, kHuge, kHuge, 1).reply().result(), CUDA_ERROR_INVALID_VALUE);
  // Levels: the same id again, the extent halved, past the last refused.
  wire::Envelope l1 = Exchange(alice.get(), Call(41, Op::kMipmappedArrayGetLevel, a, {mips[0], 1}));
  ASSERT_EQ(l1.reply().result(), CUDA_SUCCESS) << l1.reply().message();
  const uint64_t level1 = l1.reply().values(0);
  EXPECT_EQ(Exchange(alice.get(), Call(42, Op::kMipmappedArrayGetLevel, a, {mips[0], 1}))
                .reply()
                .values(0),
            level1);
  EXPECT_EQ(Result(alice.get(), Call(43, Op::kMipmappedArrayGetLevel, a, {mips[0], 14})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CopyIn(alice.get(), a, level1, 0, 2047, 4096 * 4, 1, std::string(4096 * 4, 'm')),
            CUDA_SUCCESS);
  EXPECT_EQ(CopyIn(alice.get(), a, level1, 0, 0, 4097 * 4, 1, std::string(4097 * 4, 'm')),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CopyIn(alice.get(), a, level1, 0, 2048, 4, 1, "mmmm"), CUDA_ERROR_INVALID_VALUE);
  int result = 0;
  EXPECT_EQ(CopyOut(alice.get(), a, level1, 4, 2047, 4, 1, &result), "mmmm");
  // A level is not destroyed alone; another session cannot name the mipmapped array or its level.
  EXPECT_EQ(Result(alice.get(), Call(44, Op::kArrayDestroy, a, {level1})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_NE(Result(bob.get(), Call(45, Op::kMipmappedArrayGetLevel, b, {mips[0], 0})),
            CUDA_SUCCESS);
  EXPECT_NE(CopyIn(bob.get(), b, level1, 0, 0, 4, 1, "bbbb"), CUDA_SUCCESS);
  // A texture over it.
  std::vector<uint64_t> tex = {CU_RESOURCE_TYPE_MIPMAPPED_ARRAY,
                               0,
                               0,
                               CU_AD_FORMAT_FLOAT,
                               1,
                               0,
                               0,
                               0,
                               CU_TR_ADDRESS_MODE_CLAMP,
                               CU_TR_ADDRESS_MODE_CLAMP,
                               CU_TR_ADDRESS_MODE_CLAMP,
                               CU_TR_FILTER_MODE_POINT};
  tex.resize(22, 0);
  tex[12] = CU_TRSF_NORMALIZED_COORDINATES;  // which a mipmapped array needs
  tex.push_back(mips[1]);
  wire::Envelope t = Exchange(alice.get(), Call(46, Op::kTexObjectCreate, a, tex));
  EXPECT_EQ(t.reply().result(), CUDA_SUCCESS) << t.reply().message();
  tex.back() = 0;  // a mipmapped resource without its array
  EXPECT_EQ(Result(alice.get(), Call(47, Op::kTexObjectCreate, a, tex)), CUDA_ERROR_INVALID_VALUE);
  // Destroying the big one makes room again; its level goes with it.
  EXPECT_EQ(Result(alice.get(), Call(48, Op::kMipmappedArrayDestroy, a, {mips[0]})), CUDA_SUCCESS);
  EXPECT_NE(CopyIn(alice.get(), a, level1, 0, 0, 4, 1, "mmmm"), CUDA_SUCCESS);
  EXPECT_EQ(make(alice.get(), a, 4096, 4096, 13).reply().result(), CUDA_SUCCESS);
}

}  // namespace
}  // namespace rgpu
