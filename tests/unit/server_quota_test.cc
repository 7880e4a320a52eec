// Everything a session makes the device hold counts against its tenant's quota (issue 13, item
// 5): allocations, module images and their global variables, the malloc heap, the stack and the
// printf buffer; and the server's own memory is bounded per session (item 10): module images and
// what fat binaries expand to, handle counts, and memory returns to its baseline after sessions.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zstd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using namespace test;  // the raw protocol peer (raw_peer.h)

constexpr uint64_t kMiB = uint64_t{1} << 20;

// PTX of a module with one global variable of `bytes` bytes and a kernel.
std::string ModuleWithGlobal(uint64_t bytes) {
  return ".version 7.0\n.target sm_75\n.address_size 64\n.visible .global .align 4 .b8 g[" +
         std::to_string(bytes) + "];\n.visible .entry k()\n{\n  ret;\n}\n";
}

class ServerQuotaTest : public test::RawServerTest {
 protected:
  ServerQuotaTest() {
    setenv("RGPU_SOFTGPU_MEMORY_MB", "4096", 1);
    char dir[] = "/tmp/rgpu-quota-XXXXXX";
    dir_ = mkdtemp(dir);
    std::ofstream(dir_ + "/tokens.txt") << "tok-alice alice 256M 1\ntok-bob bob 1G 1\n";
    options_.tokens_path = dir_ + "/tokens.txt";
  }
  ~ServerQuotaTest() override {
    unlink((dir_ + "/tokens.txt").c_str());
    rmdir(dir_.c_str());
  }
  // Free and total memory as the tenant sees them.
  static std::pair<uint64_t, uint64_t> Info(Channel* ch, uint64_t ctx) {
    wire::Envelope r = Exchange(ch, Call(50, Op::kMemGetInfo, ctx, {}));
    EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
    return {r.reply().values(0), r.reply().values(1)};
  }
  static wire::Envelope Load(Channel* ch, uint64_t ctx, const std::string& image) {
    return Exchange(ch, Call(51, Op::kModuleLoadData, ctx, {}), image);
  }

  std::string dir_;
};

// The audit: a 256 MiB tenant took 3.5 GiB through a module's .global, and another tenant's
// allocation then failed.
TEST_F(ServerQuotaTest, ModuleGlobalsCountAgainstTheQuota) {
  auto alice = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  wire::Envelope big = Load(alice.get(), a, ModuleWithGlobal(3584 * kMiB));
  EXPECT_EQ(big.reply().result(), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(big.reply().message().find("quota"), std::string::npos) << big.reply().message();
  auto bob = Connect();
  const uint64_t b = OpenSession(bob.get(), "tok-bob");
  EXPECT_NE(Alloc(bob.get(), b, 768 * kMiB), 0u) << "bob's allocation must fit on the device";

  // A module within the quota is charged while it lives: its image and its 64 MiB variable.
  const auto before = Info(alice.get(), a);
  wire::Envelope small = Load(alice.get(), a, ModuleWithGlobal(64 * kMiB));
  ASSERT_EQ(small.reply().result(), CUDA_SUCCESS) << small.reply().message();
  const auto during = Info(alice.get(), a);
  EXPECT_GE(before.first - during.first, 64 * kMiB);
  EXPECT_LE(before.first - during.first, 65 * kMiB);
  EXPECT_EQ(Result(alice.get(), Call(52, Op::kModuleUnload, a, {small.reply().values(0)})),
            CUDA_SUCCESS);
  EXPECT_EQ(Info(alice.get(), a).first, before.first);
}

// The same where the server measures what a load took from the device (the CUDA backend's way).
class ServerMeasuredQuotaTest : public ServerQuotaTest {
 protected:
  ServerMeasuredQuotaTest() { options_.backend_extensions = false; }
};

TEST_F(ServerMeasuredQuotaTest, MeasuredModuleMemoryCountsAgainstTheQuota) {
  auto alice = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  EXPECT_EQ(Load(alice.get(), a, ModuleWithGlobal(3584 * kMiB)).reply().result(),
            CUDA_ERROR_OUT_OF_MEMORY);
  const auto before = Info(alice.get(), a);
  wire::Envelope small = Load(alice.get(), a, ModuleWithGlobal(64 * kMiB));
  ASSERT_EQ(small.reply().result(), CUDA_SUCCESS) << small.reply().message();
  EXPECT_GE(before.first - Info(alice.get(), a).first, 64 * kMiB);
}

// The audit: the same tenant took 3.5 GiB through the device malloc heap (cuCtxSetLimit).
TEST_F(ServerQuotaTest, ContextLimitsCountAgainstTheQuota) {
  auto alice = Connect();
  const uint64_t a = OpenSession(alice.get(), "tok-alice");
  EXPECT_EQ(
      Result(alice.get(), Call(3, Op::kCtxSetLimit, a, {CU_LIMIT_MALLOC_HEAP_SIZE, 3584 * kMiB})),
      CUDA_ERROR_OUT_OF_MEMORY);
  // The stack is reserved for every thread the device holds at once: 1 MiB each is far too much.
  EXPECT_EQ(Result(alice.get(), Call(4, Op::kCtxSetLimit, a, {CU_LIMIT_STACK_SIZE, kMiB})),
            CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(
      Result(alice.get(), Call(5, Op::kCtxSetLimit, a, {CU_LIMIT_PRINTF_FIFO_SIZE, 1024 * kMiB})),
      CUDA_ERROR_OUT_OF_MEMORY);
  // A heap that fits is charged (beyond the default the context started with), and changing it
  // again charges only the difference.
  const auto before = Info(alice.get(), a);
  wire::Envelope limit =
      Exchange(alice.get(), Call(6, Op::kCtxGetLimit, a, {CU_LIMIT_MALLOC_HEAP_SIZE}));
  ASSERT_EQ(limit.reply().result(), CUDA_SUCCESS);
  const uint64_t default_heap = limit.reply().values(0);
  ASSERT_EQ(
      Result(alice.get(), Call(7, Op::kCtxSetLimit, a, {CU_LIMIT_MALLOC_HEAP_SIZE, 128 * kMiB})),
      CUDA_SUCCESS);
  EXPECT_EQ(before.first - Info(alice.get(), a).first, 128 * kMiB - default_heap);
  // What is left of the quota cannot be allocated twice.
  EXPECT_EQ(Alloc(alice.get(), a, 200 * kMiB), 0u);
}

// The audit: a 66 KB fat binary of four zstd entries declaring 512 MiB each raised the server's
// peak memory to 2.1 GB. Entries that expand past the bound are refused from their headers.
TEST_F(ServerQuotaTest, FatBinaryThatExpandsPastTheBoundIsRefusedBeforeDecompressing) {
  const uint64_t entry_bytes = 512 * kMiB;
  // A zstd frame of 512 MiB of zeros, made a MiB at a time.
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ASSERT_NE(cctx, nullptr);
  ZSTD_CCtx_setPledgedSrcSize(cctx, entry_bytes);
  std::string zeros(kMiB, '\0'), frame(ZSTD_compressBound(kMiB) * 2, '\0'), compressed;
  for (uint64_t done = 0; done < entry_bytes; done += kMiB) {
    ZSTD_inBuffer in{zeros.data(), zeros.size(), 0};
    const bool last = done + kMiB == entry_bytes;
    size_t left = 0;
    do {
      ZSTD_outBuffer out{frame.data(), frame.size(), 0};
      left = ZSTD_compressStream2(cctx, &out, &in, last ? ZSTD_e_end : ZSTD_e_continue);
      ASSERT_FALSE(ZSTD_isError(left));
      compressed.append(frame.data(), out.pos);
    } while (last ? left != 0 : in.pos < in.size);
  }
  ZSTD_freeCCtx(cctx);
  std::string body;
  for (int i = 0; i < 4; ++i) {
    char header[64] = {};
    const uint16_t kind = 1;  // PTX
    const uint32_t header_size = 64;
    const uint64_t payload_size = (compressed.size() + 7) & ~uint64_t{7};
    const uint32_t compressed_size = static_cast<uint32_t>(compressed.size());
    const uint32_t arch = 75;
    const uint64_t flags = 0x8000;  // zstd
    memcpy(header, &kind, 2);
    memcpy(header + 4, &header_size, 4);
    memcpy(header + 8, &payload_size, 8);
    memcpy(header + 16, &compressed_size, 4);
    memcpy(header + 28, &arch, 4);
    memcpy(header + 40, &flags, 8);
    memcpy(header + 56, &entry_bytes, 8);
    body +=
        std::string(header, 64) + compressed + std::string(payload_size - compressed.size(), '\0');
  }
  char container[16] = {};
  const uint32_t magic = 0xBA55ED50;
  const uint16_t version = 1, container_header = 16;
  const uint64_t fat_size = body.size();
  memcpy(container, &magic, 4);
  memcpy(container + 4, &version, 2);
  memcpy(container + 6, &container_header, 2);
  memcpy(container + 8, &fat_size, 8);
  const std::string image = std::string(container, 16) + body;
  ASSERT_LT(image.size(), 200 * 1024u);

  auto bob = Connect();
  const uint64_t b = OpenSession(bob.get(), "tok-bob");
  struct rusage usage = {};
  getrusage(RUSAGE_SELF, &usage);
  const long peak_before_kib = usage.ru_maxrss;
  wire::Envelope r = Load(bob.get(), b, image);
  EXPECT_EQ(r.reply().result(), CUDA_ERROR_INVALID_IMAGE);
  EXPECT_NE(r.reply().message().find("expand"), std::string::npos) << r.reply().message();
  getrusage(RUSAGE_SELF, &usage);
  EXPECT_LT(usage.ru_maxrss - peak_before_kib, 128 * 1024) << "KiB of peak memory the load took";
  // An image larger than the bound is refused as it is.
  EXPECT_EQ(Load(bob.get(), b, std::string(300 * kMiB, ' ')).reply().result(),
            CUDA_ERROR_INVALID_IMAGE);
}

class ServerHandleLimitsTest : public test::RawServerTest {
 protected:
  ServerHandleLimitsTest() {
    options_.session_limits.max_contexts = 2;
    options_.session_limits.max_streams = 2;
    options_.session_limits.max_events = 2;
    options_.session_limits.max_modules = 1;
    options_.session_limits.max_allocations = 2;
  }
};

// The audit made 186k contexts in 20 s. Each kind of handle is bounded per session; the session
// goes on, and handles freed make room again.
TEST_F(ServerHandleLimitsTest, HandleCountsAreBoundedPerSession) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  EXPECT_EQ(Result(ch.get(), Call(3, Op::kCtxCreate, 0, {0, 0})), CUDA_SUCCESS);
  EXPECT_EQ(Result(ch.get(), Call(4, Op::kCtxCreate, 0, {0, 0})), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(Result(ch.get(), Call(5, Op::kPrimaryCtxRetain, 0, {0, 0})), CUDA_ERROR_OUT_OF_MEMORY);
  for (Op op : {Op::kStreamCreate, Op::kEventCreate}) {
    const std::vector<uint64_t> args =
        op == Op::kStreamCreate ? std::vector<uint64_t>{0, 0, 0} : std::vector<uint64_t>{0, 0};
    EXPECT_EQ(Result(ch.get(), Call(6, op, ctx, args)), CUDA_SUCCESS);
    EXPECT_EQ(Result(ch.get(), Call(7, op, ctx, args)), CUDA_SUCCESS);
    EXPECT_EQ(Result(ch.get(), Call(8, op, ctx, args)), CUDA_ERROR_OUT_OF_MEMORY);
  }
  const uint64_t p = Alloc(ch.get(), ctx, 64);
  EXPECT_NE(p, 0u);
  EXPECT_NE(Alloc(ch.get(), ctx, 64), 0u);
  EXPECT_EQ(Alloc(ch.get(), ctx, 64), 0u);
  EXPECT_EQ(Result(ch.get(), Call(9, Op::kMemFree, ctx, {p})), CUDA_SUCCESS);
  EXPECT_NE(Alloc(ch.get(), ctx, 64), 0u);
  EXPECT_EQ(Result(ch.get(), Call(10, Op::kModuleLoadData, ctx, {}), ModuleWithGlobal(16)),
            CUDA_SUCCESS);
  EXPECT_EQ(Result(ch.get(), Call(11, Op::kModuleLoadData, ctx, {}), ModuleWithGlobal(16)),
            CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(Result(ch.get(), Call(12, Op::kMemGetInfo, ctx, {})), CUDA_SUCCESS);
}

// Resident memory of this process (the server runs in it).
uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// The audit saw the server's memory keep growing across sessions. After many sessions that each
// allocate, write, load a module, make streams and events and leave without cleaning up, the
// server's memory is back near where it was after the first few.
TEST_F(ServerQuotaTest, MemoryReturnsToItsBaselineAfterManySessions) {
  auto session = [&] {
    auto ch = Connect();
    const uint64_t ctx = OpenSession(ch.get(), "tok-bob");
    const uint64_t p = Alloc(ch.get(), ctx, 16 * kMiB);
    ASSERT_NE(p, 0u);
    ASSERT_EQ(Result(ch.get(), Call(3, Op::kMemcpyHtoD, ctx, {p, 4 * kMiB, 0, 0}),
                     std::string(4 * kMiB, 'x')),
              CUDA_SUCCESS);
    ASSERT_EQ(Load(ch.get(), ctx, ModuleWithGlobal(kMiB)).reply().result(), CUDA_SUCCESS);
    ASSERT_EQ(Result(ch.get(), Call(4, Op::kStreamCreate, ctx, {0, 0, 0})), CUDA_SUCCESS);
    ASSERT_EQ(Result(ch.get(), Call(5, Op::kEventCreate, ctx, {0, 0})), CUDA_SUCCESS);
    for (int c = 0; c < 10; ++c) {
      wire::Envelope r = Exchange(ch.get(), Call(6, Op::kCtxCreate, 0, {0, 0}));
      ASSERT_EQ(r.reply().result(), CUDA_SUCCESS);
      const uint64_t x = r.reply().values(0);
      ASSERT_EQ(Load(ch.get(), x, ModuleWithGlobal(4096 + c)).reply().result(), CUDA_SUCCESS);
      for (int k = 0; k < 10; ++k) {
        ASSERT_EQ(Result(ch.get(), Call(7, Op::kStreamCreate, x, {0, 0, 0})), CUDA_SUCCESS);
      }
    }
  };
  auto settle = [&] {
    for (int i = 0; i < 200 && server_.active_sessions() > 0; ++i) usleep(10000);
    ASSERT_EQ(server_.active_sessions(), 0u);
  };
  for (int i = 0; i < 5; ++i) session();
  settle();
  const uint64_t baseline = ResidentBytes();
  for (int i = 0; i < 40; ++i) session();
  settle();
  const uint64_t after = ResidentBytes();
  EXPECT_LT(after, baseline + 24 * kMiB) << "baseline " << baseline << " bytes, after " << after;
}

}  // namespace
}  // namespace rgpu
