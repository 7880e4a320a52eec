// Hostile sizes against rgpu-server (issue 13, item 1): every size a handler derives from a
// call's arguments is overflow-checked before any ownership check, buffer or backend call sees
// it, and a payload whose size does not match what the call needs is refused. Each case was a
// crash or a partial write before the checks existed.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using namespace test;  // the raw protocol peer (raw_peer.h)

constexpr uint64_t kGiB = uint64_t{1} << 30;

class ServerSizesTest : public test::RawServerTest {
 protected:
  // Room for a 4 GiB allocation: the software GPU's memory is only touched where written.
  ServerSizesTest() { setenv("RGPU_SOFTGPU_MEMORY_MB", "8192", 1); }

  // Reads `bytes` at `ptr` (which must succeed).
  static std::string Read(Channel* ch, uint64_t ctx, uint64_t ptr, uint64_t bytes) {
    std::string data;
    wire::Envelope r = Exchange(ch, Call(90, Op::kMemcpyDtoH, ctx, {ptr, bytes, 0, 0}), "", &data);
    EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
    return data;
  }
  // The session still answers.
  static void ExpectAlive(Channel* ch, uint64_t ctx) {
    EXPECT_EQ(Result(ch, Call(91, Op::kMemGetInfo, ctx, {})), CUDA_SUCCESS);
  }
};

// The audit's crash: pitch 2^32+1, width 2^32, height 2^32 wraps the extent to 2^32-1 (inside a
// 4 GiB allocation) and width*height to 0, after which 4 GiB were copied into a 64-byte reply
// buffer.
TEST_F(ServerSizesTest, TwoDimensionalReadWhoseExtentWrapsIsRefused) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  const uint64_t big = Alloc(ch.get(), ctx, 4 * kGiB);
  ASSERT_NE(big, 0u);
  Read(ch.get(), ctx, big, 64);  // the reply buffer is now 64 bytes
  const uint64_t w = uint64_t{1} << 32;
  EXPECT_EQ(Result(ch.get(), Call(3, Op::kMemcpy2DDtoH, ctx, {big, w + 1, w, w, 0, 0})),
            CUDA_ERROR_INVALID_VALUE);
  ExpectAlive(ch.get(), ctx);
}

// The same shape as a posted host-to-device copy with an empty payload inside a batch (its
// packed size wraps to 0, which the empty payload matched).
TEST_F(ServerSizesTest, TwoDimensionalWriteWithWrappedSizeInABatchIsRefused) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  const uint64_t big = Alloc(ch.get(), ctx, 4 * kGiB);
  ASSERT_NE(big, 0u);
  const uint64_t w = uint64_t{1} << 32;
  BatchBuilder batch;
  // A call with a payload first, so that the empty one points into real memory.
  batch.Add(Call(2, Op::kMemcpyHtoD, ctx, {big, 16, 0, 1}, true), std::string(16, 'x'));
  batch.Add(Call(3, Op::kMemcpy2DHtoD, ctx, {big, w + 1, w, w, 0, 1}, true), "");
  batch.Add(Call(4, Op::kMemGetInfo, ctx, {}), "");
  wire::Envelope r = Exchange(ch.get(), batch.envelope, batch.payload);
  ASSERT_EQ(r.body_case(), wire::Envelope::kReply);
  EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
  EXPECT_EQ(r.reply().async_error(), CUDA_ERROR_INVALID_VALUE);
  ExpectAlive(ch.get(), ctx);
}

// Height 2^24+1 rows 2^40 apart wrap the extent to the width alone: the ownership check passed
// and the first row was written before the backend refused the second (on a real GPU only the
// driver would have stood in the way). Now nothing is written.
TEST_F(ServerSizesTest, RowsWhoseExtentWrapsWriteNothing) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  const uint64_t src = Alloc(ch.get(), ctx, 64), dst = Alloc(ch.get(), ctx, 64);
  ASSERT_NE(src, 0u);
  ASSERT_NE(dst, 0u);
  ASSERT_EQ(Result(ch.get(), Call(3, Op::kMemset, ctx, {src, 0x41, 1, 64, 0, 0})), CUDA_SUCCESS);
  ASSERT_EQ(Result(ch.get(), Call(4, Op::kMemset, ctx, {dst, 0, 1, 64, 0, 0})), CUDA_SUCCESS);
  const uint64_t pitch = uint64_t{1} << 40, height = (uint64_t{1} << 24) + 1;
  EXPECT_EQ(
      Result(ch.get(), Call(5, Op::kMemcpy2DDtoD, ctx, {dst, pitch, src, pitch, 16, height, 0, 0})),
      CUDA_ERROR_INVALID_VALUE);
  // A 2D memset of the same shape, in 4-byte elements.
  EXPECT_EQ(Result(ch.get(), Call(6, Op::kMemset2D, ctx, {dst, pitch, 0x42, 4, 4, height, 0, 0})),
            CUDA_ERROR_INVALID_VALUE);
  // Host-to-device: the payload holds the first row only (the packed size does not wrap here, so
  // it is refused as a mismatch either way); with rows that fit it would be accepted.
  EXPECT_EQ(Result(ch.get(), Call(7, Op::kMemcpy2DHtoD, ctx, {dst, pitch, 16, height, 0, 0}),
                   std::string(16, 'x')),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Read(ch.get(), ctx, dst, 64), std::string(64, '\0'));
  ExpectAlive(ch.get(), ctx);
}

// A 2D memset whose element count times element size overflows.
TEST_F(ServerSizesTest, MemsetWhoseByteWidthOverflowsIsRefused) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  const uint64_t dst = Alloc(ch.get(), ctx, 64);
  ASSERT_NE(dst, 0u);
  const uint64_t width = (uint64_t{1} << 62) + 4;  // * 4 wraps to 16
  EXPECT_EQ(Result(ch.get(), Call(3, Op::kMemset2D, ctx, {dst, 64, 0x42, 4, width, 1, 0, 0})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(ch.get(), Call(4, Op::kMemset, ctx, {dst, 0x42, 4, width, 0, 0})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Read(ch.get(), ctx, dst, 64), std::string(64, '\0'));
}

// Payloads must be exactly what the call needs: none for calls that take none, exactly the
// rows for a 2D copy, exactly the kernel's parameters for a launch.
TEST_F(ServerSizesTest, PayloadsThatDoNotMatchTheCallAreRefused) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  EXPECT_EQ(Result(ch.get(), Call(3, Op::kMemAlloc, ctx, {64}), "unexpected"),
            CUDA_ERROR_INVALID_VALUE);
  const uint64_t dst = Alloc(ch.get(), ctx, 256);
  ASSERT_NE(dst, 0u);
  EXPECT_EQ(Result(ch.get(), Call(4, Op::kMemcpy2DHtoD, ctx, {dst, 32, 16, 4, 0, 0}),
                   std::string(65, 'x')),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(ch.get(), Call(5, Op::kMemcpy2DHtoD, ctx, {dst, 32, 16, 4, 0, 0}),
                   std::string(64, 'x')),
            CUDA_SUCCESS);
  const std::string ptx =
      ".version 7.0\n.target sm_75\n.address_size 64\n"
      ".visible .entry k(.param .u64 p)\n{\n  ret;\n}\n";
  wire::Envelope load = Exchange(ch.get(), Call(6, Op::kModuleLoadData, ctx, {}), ptx);
  ASSERT_EQ(load.reply().result(), CUDA_SUCCESS) << load.reply().message();
  wire::Envelope fn =
      Exchange(ch.get(), Call(7, Op::kModuleGetFunction, ctx, {load.reply().values(0)}), "k");
  ASSERT_EQ(fn.reply().result(), CUDA_SUCCESS) << fn.reply().message();
  const uint64_t f = fn.reply().values(0);
  const std::vector<uint64_t> launch = {f, 1, 1, 1, 1, 1, 1, 0, 0};
  EXPECT_EQ(Result(ch.get(), Call(8, Op::kLaunchKernel, ctx, launch), std::string(4, 'p')),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(ch.get(), Call(9, Op::kLaunchKernel, ctx, launch), std::string(9, 'p')),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(ch.get(), Call(10, Op::kLaunchKernel, ctx, launch), std::string(8, 0)),
            CUDA_SUCCESS);
  EXPECT_EQ(Result(ch.get(), Call(11, Op::kCtxSynchronize, ctx, {})), CUDA_SUCCESS);
}

// The most memory this process (in which the server runs) has held since the last
// ResetPeakResident, in bytes: what a payload read whole and freed again leaves behind.
uint64_t PeakResident() {
  uint64_t kib = 0;
  FILE* f = fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  while (fgets(line, sizeof line, f) != nullptr) {
    if (sscanf(line, "VmHWM: %" SCNu64 " kB", &kib) == 1) break;
  }
  fclose(f);
  return kib * 1024;
}
void ResetPeakResident() {
  FILE* f = fopen("/proc/self/clear_refs", "w");
  ASSERT_NE(f, nullptr);
  fputs("5", f);
  fclose(f);
}

// A large payload beside a call that cannot take it is not read into the server's memory: it is
// dropped where it waits in the transport, and the call fails. (It was fetched whole first, up to
// a device's memory per message, and only then refused.)
void ExpectUntakablePayloadsAreNotRead(Channel* ch, uint64_t ctx) {
  const std::string big(size_t{256} << 20, 'x');
  ResetPeakResident();
  const uint64_t before = PeakResident();
  wire::Envelope r = Exchange(ch, Call(3, Op::kCtxSynchronize, ctx, {}), big);
  EXPECT_EQ(r.reply().result(), CUDA_ERROR_INVALID_VALUE);
  EXPECT_NE(r.reply().message().find("payload"), std::string::npos) << r.reply().message();
  r = Exchange(ch, Call(4, Op::kModuleGetFunction, ctx, {0}), big);
  EXPECT_EQ(r.reply().result(), CUDA_ERROR_INVALID_VALUE);
  // The server runs in this process: it never grew by anything like one of the payloads.
  EXPECT_LT(PeakResident(), before + (uint64_t{64} << 20));
}

TEST_F(ServerSizesTest, APayloadACallCannotTakeIsNotReadIntoMemory) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  ExpectUntakablePayloadsAreNotRead(ch.get(), ctx);
  ExpectAlive(ch.get(), ctx);
}

// The same on a backend whose device memory the server cannot address (as NVIDIA's): payloads
// there were read whole as they arrived, since only copies into addressable device memory
// waited in the transport.
class ServerSizesNoExtensionsTest : public ServerSizesTest {
 protected:
  ServerSizesNoExtensionsTest() { options_.backend_extensions = false; }
};

TEST_F(ServerSizesNoExtensionsTest, APayloadACallCannotTakeIsNotReadIntoMemory) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  ExpectUntakablePayloadsAreNotRead(ch.get(), ctx);
  ExpectAlive(ch.get(), ctx);
  // A copy's large payload is still taken, through a buffer.
  const uint64_t dst = Alloc(ch.get(), ctx, 4 << 20);
  ASSERT_NE(dst, 0u);
  std::string data(4 << 20, 0);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + (i >> 12));
  EXPECT_EQ(Result(ch.get(), Call(5, Op::kMemcpyHtoD, ctx, {dst, data.size(), 0, 0}), data),
            CUDA_SUCCESS);
  EXPECT_EQ(Read(ch.get(), ctx, dst, data.size()), data);
}

// The data a call takes (a copy's bytes, a link input, a recorded graph) is read only once its
// call has been checked: against its arguments (a copy's rows, its array, a link state) or its
// bound (a graph: --max-graph-mib). Each was read whole first, up to a device's memory.
TEST_F(ServerSizesNoExtensionsTest, DataIsReadOnlyOnceItsCallWasChecked) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  const uint64_t dst = Alloc(ch.get(), ctx, 256);
  ASSERT_NE(dst, 0u);
  const std::string big(size_t{256} << 20, 'd');
  ResetPeakResident();
  const uint64_t before = PeakResident();
  EXPECT_EQ(Result(ch.get(), Call(3, Op::kMemcpy2DHtoD, ctx, {dst, 32, 16, 4, 0, 0}), big),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_NE(Result(ch.get(), Call(4, Op::kMemcpyHtoArray, ctx, {77, 0, 0, 0, 16, 1, 1, 0}), big),
            CUDA_SUCCESS);
  EXPECT_NE(Result(ch.get(), Call(5, Op::kLinkAddData, ctx, {77, 0}), big), CUDA_SUCCESS);
  EXPECT_NE(Result(ch.get(), Call(6, Op::kGraphRecord, 0, {}), big), CUDA_SUCCESS);
  EXPECT_LT(PeakResident(), before + (uint64_t{64} << 20));
  ExpectAlive(ch.get(), ctx);
  // Checked, a row's data is taken.
  EXPECT_EQ(Result(ch.get(), Call(7, Op::kMemcpy2DHtoD, ctx, {dst, 32, 16, 4, 0, 0}),
                   std::string(64, 'r')),
            CUDA_SUCCESS);
  EXPECT_EQ(Read(ch.get(), ctx, dst + 32, 16), std::string(16, 'r'));
}

// A batch's payload is fetched only within the bound the client keeps (kMaxBatchPayloadBytes): a
// larger one (a posted copy of 256 MiB) closes the session, unread. It was read whole first.
TEST_F(ServerSizesNoExtensionsTest, ABatchPastItsBoundIsNotReadIntoMemory) {
  auto ch = Connect();
  const uint64_t ctx = OpenSession(ch.get());
  const uint64_t dst = Alloc(ch.get(), ctx, 256 << 20);
  ASSERT_NE(dst, 0u);
  const std::string big(size_t{256} << 20, 'x');
  BatchBuilder batch;
  batch.Add(Call(3, Op::kMemcpyHtoD, ctx, {dst, big.size(), 0, 0}, true), big);
  batch.Add(Call(4, Op::kCtxSynchronize, ctx, {}), "");
  ResetPeakResident();
  const uint64_t before = PeakResident();
  const wire::Envelope bye = Exchange(ch.get(), batch.envelope, batch.payload);
  EXPECT_LT(PeakResident(), before + (uint64_t{64} << 20));
  ASSERT_EQ(bye.body_case(), wire::Envelope::kGoodbye);
  EXPECT_NE(bye.goodbye().reason().find("batch"), std::string::npos) << bye.goodbye().reason();
  // Within the bound, a batch is served.
  auto ok = Connect();
  const uint64_t ok_ctx = OpenSession(ok.get());
  const uint64_t small = Alloc(ok.get(), ok_ctx, 4096);
  BatchBuilder fits;
  fits.Add(Call(3, Op::kMemcpyHtoD, ok_ctx, {small, 4096, 0, 0}, true), std::string(4096, 'y'));
  fits.Add(Call(4, Op::kCtxSynchronize, ok_ctx, {}), "");
  EXPECT_EQ(Exchange(ok.get(), fits.envelope, fits.payload).reply().result(), CUDA_SUCCESS);
  EXPECT_EQ(Read(ok.get(), ok_ctx, small, 4096), std::string(4096, 'y'));
}

}  // namespace
}  // namespace rgpu
