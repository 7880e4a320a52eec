// Sharing between sessions (server/session_ipc.cc), spoken raw: memory, events, physical memory
// and pool pointers one session exports are opened by another session of the same tenant and
// are the same bytes; a key opens nothing for another tenant, for the exporting session itself,
// once revoked, or with one bit changed; opened memory is never freed by its opener, and memory
// its exporter freed under an opener stays charged to the tenant until the opener closes it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using namespace test;  // the raw protocol peer (raw_peer.h)

constexpr uint64_t kMiB = uint64_t{1} << 20;
using Key = std::vector<uint64_t>;

class ServerIpcTest : public test::RawServerTest {
 protected:
  ServerIpcTest() {
    setenv("RGPU_SOFTGPU_MEMORY_MB", "1024", 1);
    char dir[] = "/tmp/rgpu-ipc-XXXXXX";
    dir_ = mkdtemp(dir);
    std::ofstream(dir_ + "/tokens.txt")
        << "tok-alice alice 64M 1\ntok-alice2 alice2 64M 1\ntok-bob bob 64M 1\n";
    options_.tokens_path = dir_ + "/tokens.txt";
  }
  ~ServerIpcTest() override {
    unlink((dir_ + "/tokens.txt").c_str());
    rmdir(dir_.c_str());
  }
  // The four key words of a reply (values from `first` on).
  static Key KeyOf(const wire::Envelope& r, int first = 0) {
    Key k;
    for (int i = first; i < first + 4 && i < r.reply().values_size(); ++i) {
      k.push_back(r.reply().values(i));
    }
    return k;
  }
  static std::vector<uint64_t> With(Key key, std::vector<uint64_t> more) {
    key.insert(key.end(), more.begin(), more.end());
    return key;
  }
  static int Write(Channel* ch, uint64_t ctx, uint64_t p, const std::string& bytes) {
    return Result(ch, Call(30, Op::kMemcpyHtoD, ctx, {p, bytes.size(), 0, 0}), bytes);
  }
  static std::string Read(Channel* ch, uint64_t ctx, uint64_t p, uint64_t n) {
    std::string out;
    wire::Envelope r = Exchange(ch, Call(31, Op::kMemcpyDtoH, ctx, {p, n, 0, 0}), "", &out);
    EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
    return out;
  }
  // The device's free memory as the session sees it (its tenant's quota).
  static uint64_t FreeMemory(Channel* ch, uint64_t ctx) {
    wire::Envelope r = Exchange(ch, Call(32, Op::kMemGetInfo, ctx, {}));
    return r.reply().values_size() > 0 ? r.reply().values(0) : 0;
  }
  std::string dir_;
};

TEST_F(ServerIpcTest, MemoryIsSharedWithTheTenantsOtherSessionsOnly) {
  auto a = Connect(), b = Connect();
  const uint64_t ca = OpenSession(a.get(), "tok-alice");
  const uint64_t cb = OpenSession(b.get(), "tok-alice");
  const uint64_t p = Alloc(a.get(), ca, 4096);
  ASSERT_NE(p, 0u);
  ASSERT_EQ(Write(a.get(), ca, p, std::string(4096, 'a')), CUDA_SUCCESS);
  wire::Envelope got = Exchange(a.get(), Call(3, Op::kIpcGetMemHandle, ca, {p}));
  ASSERT_EQ(got.reply().result(), CUDA_SUCCESS);
  const Key key = KeyOf(got);
  ASSERT_EQ(key.size(), 4u);
  // The same handle again: the same key.
  EXPECT_EQ(KeyOf(Exchange(a.get(), Call(4, Op::kIpcGetMemHandle, ca, {p}))), key);

  wire::Envelope opened = Exchange(b.get(), Call(5, Op::kIpcOpenMemHandle, cb, With(key, {0})));
  ASSERT_EQ(opened.reply().result(), CUDA_SUCCESS) << opened.reply().message();
  const uint64_t q = opened.reply().values(0);
  EXPECT_EQ(opened.reply().values(1), 4096u);
  EXPECT_EQ(Read(b.get(), cb, q, 4096), std::string(4096, 'a'));
  ASSERT_EQ(Write(b.get(), cb, q, std::string(4096, 'b')), CUDA_SUCCESS);
  EXPECT_EQ(Read(a.get(), ca, p, 4096), std::string(4096, 'b'));
  // The opener cannot free it, nor reach past it.
  EXPECT_EQ(Result(b.get(), Call(6, Op::kMemFree, cb, {q})), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(b.get(), Call(7, Op::kMemcpyDtoH, cb, {q, 4097, 0, 0})),
            CUDA_ERROR_INVALID_VALUE);

  // Not for the exporter itself, another tenant, a changed key, or a made-up one.
  EXPECT_EQ(Result(a.get(), Call(8, Op::kIpcOpenMemHandle, ca, With(key, {0}))),
            CUDA_ERROR_INVALID_CONTEXT);
  auto c = Connect();
  const uint64_t cc = OpenSession(c.get(), "tok-bob");
  EXPECT_EQ(Result(c.get(), Call(9, Op::kIpcOpenMemHandle, cc, With(key, {0}))),
            CUDA_ERROR_INVALID_VALUE);
  Key flipped = key;
  flipped[2] ^= 1;
  EXPECT_EQ(Result(b.get(), Call(10, Op::kIpcOpenMemHandle, cb, With(flipped, {0}))),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(b.get(), Call(11, Op::kIpcOpenMemHandle, cb, {1, 2, 3, 4, 0})),
            CUDA_ERROR_INVALID_VALUE);
  // Neither does a key of memory that is not exported: a session's own pointer as a key.
  EXPECT_EQ(Result(b.get(), Call(12, Op::kIpcOpenMemHandle, cb, {p, 0, 0, 0, 0})),
            CUDA_ERROR_INVALID_VALUE);

  // Closed once per open; then no longer the session's memory.
  EXPECT_EQ(Result(b.get(), Call(13, Op::kIpcCloseMemHandle, cb, {q})), CUDA_SUCCESS);
  EXPECT_EQ(Result(b.get(), Call(14, Op::kIpcCloseMemHandle, cb, {q})), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(b.get(), Call(15, Op::kMemcpyDtoH, cb, {q, 16, 0, 0})),
            CUDA_ERROR_INVALID_VALUE);
  // A's own memory cannot be closed as if it were opened.
  EXPECT_EQ(Result(a.get(), Call(16, Op::kIpcCloseMemHandle, ca, {p})), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(ServerIpcTest, FreedExportsOpenNothingAndStayChargedWhileOpen) {
  auto a = Connect(), b = Connect();
  const uint64_t ca = OpenSession(a.get(), "tok-alice");
  const uint64_t cb = OpenSession(b.get(), "tok-alice");
  const uint64_t before = FreeMemory(a.get(), ca);
  const uint64_t p = Alloc(a.get(), ca, 16 * kMiB);
  ASSERT_NE(p, 0u);
  ASSERT_EQ(Write(a.get(), ca, p, std::string(4096, 'x')), CUDA_SUCCESS);
  const Key key = KeyOf(Exchange(a.get(), Call(3, Op::kIpcGetMemHandle, ca, {p})));
  wire::Envelope opened = Exchange(b.get(), Call(4, Op::kIpcOpenMemHandle, cb, With(key, {0})));
  ASSERT_EQ(opened.reply().result(), CUDA_SUCCESS);
  const uint64_t q = opened.reply().values(0);
  // Opened twice: the same memory, closed twice.
  wire::Envelope again = Exchange(b.get(), Call(5, Op::kIpcOpenMemHandle, cb, With(key, {0})));
  ASSERT_EQ(again.reply().result(), CUDA_SUCCESS);
  EXPECT_EQ(again.reply().values(0), q);
  EXPECT_EQ(Result(b.get(), Call(6, Op::kIpcCloseMemHandle, cb, {q})), CUDA_SUCCESS);

  // The exporter frees it: the key opens nothing more, the opener still has the bytes, and the
  // tenant is still charged for them.
  EXPECT_EQ(Result(a.get(), Call(7, Op::kMemFree, ca, {p})), CUDA_SUCCESS);
  auto a2 = Connect();
  const uint64_t ca2 = OpenSession(a2.get(), "tok-alice");
  EXPECT_EQ(Result(a2.get(), Call(8, Op::kIpcOpenMemHandle, ca2, With(key, {0}))),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Read(b.get(), cb, q, 4096), std::string(4096, 'x'));
  EXPECT_LE(FreeMemory(a.get(), ca), before - 16 * kMiB) << "freed under an opener: still held";
  EXPECT_EQ(Result(b.get(), Call(9, Op::kIpcCloseMemHandle, cb, {q})), CUDA_SUCCESS);
  EXPECT_EQ(FreeMemory(a.get(), ca), before) << "the last opener closed it";
}

TEST_F(ServerIpcTest, AnOpenerThatLeavesGivesBackWhatItOpened) {
  auto a = Connect();
  const uint64_t ca = OpenSession(a.get(), "tok-alice");
  const uint64_t before = FreeMemory(a.get(), ca);
  const uint64_t p = Alloc(a.get(), ca, 8 * kMiB);
  const Key key = KeyOf(Exchange(a.get(), Call(3, Op::kIpcGetMemHandle, ca, {p})));
  {
    auto b = Connect();
    const uint64_t cb = OpenSession(b.get(), "tok-alice");
    ASSERT_EQ(Result(b.get(), Call(4, Op::kIpcOpenMemHandle, cb, With(key, {0}))), CUDA_SUCCESS);
    EXPECT_EQ(Result(a.get(), Call(5, Op::kMemFree, ca, {p})), CUDA_SUCCESS);
  }  // b's connection goes: its session ends without closing
  for (int i = 0; i < 200 && FreeMemory(a.get(), ca) != before; ++i) usleep(20000);
  EXPECT_EQ(FreeMemory(a.get(), ca), before);
}

TEST_F(ServerIpcTest, EventsAreShared) {
  auto a = Connect(), b = Connect();
  const uint64_t ca = OpenSession(a.get(), "tok-alice");
  const uint64_t cb = OpenSession(b.get(), "tok-alice");
  wire::Envelope plain = Exchange(a.get(), Call(3, Op::kEventCreate, ca, {0, 0}));
  ASSERT_EQ(plain.reply().result(), CUDA_SUCCESS);
  EXPECT_NE(Result(a.get(), Call(4, Op::kIpcGetEventHandle, ca, {plain.reply().values(0)})),
            CUDA_SUCCESS)
      << "an event made without CU_EVENT_INTERPROCESS";
  wire::Envelope made = Exchange(
      a.get(), Call(5, Op::kEventCreate, ca, {CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING, 0}));
  ASSERT_EQ(made.reply().result(), CUDA_SUCCESS);
  const uint64_t ea = made.reply().values(0);
  wire::Envelope got = Exchange(a.get(), Call(6, Op::kIpcGetEventHandle, ca, {ea}));
  ASSERT_EQ(got.reply().result(), CUDA_SUCCESS) << got.reply().message();
  const Key key = KeyOf(got);
  EXPECT_EQ(Result(a.get(), Call(7, Op::kIpcOpenEventHandle, ca, key)), CUDA_ERROR_INVALID_CONTEXT);
  wire::Envelope opened = Exchange(b.get(), Call(8, Op::kIpcOpenEventHandle, cb, key));
  ASSERT_EQ(opened.reply().result(), CUDA_SUCCESS) << opened.reply().message();
  const uint64_t eb = opened.reply().values(0);
  // Recorded by B, waited for by A through its own handle; each destroys its own.
  EXPECT_EQ(Result(b.get(), Call(9, Op::kEventRecord, cb, {eb, 0})), CUDA_SUCCESS);
  EXPECT_EQ(Result(a.get(), Call(10, Op::kStreamWaitEvent, ca, {0, ea, 0})), CUDA_SUCCESS);
  EXPECT_EQ(Result(a.get(), Call(11, Op::kEventSynchronize, ca, {ea})), CUDA_SUCCESS);
  EXPECT_EQ(Result(a.get(), Call(12, Op::kEventQuery, ca, {ea})), CUDA_SUCCESS);
  EXPECT_EQ(Result(a.get(), Call(13, Op::kEventDestroy, ca, {ea})), CUDA_SUCCESS);
  EXPECT_EQ(Result(b.get(), Call(14, Op::kEventRecord, cb, {eb, 0})), CUDA_SUCCESS);
  EXPECT_EQ(Result(b.get(), Call(15, Op::kEventSynchronize, cb, {eb})), CUDA_SUCCESS);
  // Destroyed by its exporter: its key opens nothing more.
  auto b2 = Connect();
  const uint64_t cb2 = OpenSession(b2.get(), "tok-alice");
  EXPECT_EQ(Result(b2.get(), Call(16, Op::kIpcOpenEventHandle, cb2, key)),
            CUDA_ERROR_INVALID_VALUE);
  // Another tenant never could.
  auto c = Connect();
  const uint64_t cc = OpenSession(c.get(), "tok-bob");
  EXPECT_EQ(Result(c.get(), Call(17, Op::kIpcOpenEventHandle, cc, key)), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(ServerIpcTest, PhysicalMemoryIsSharedAndReleasedWithItsLastHolder) {
  auto a = Connect(), b = Connect();
  const uint64_t ca = OpenSession(a.get(), "tok-alice");
  const uint64_t cb = OpenSession(b.get(), "tok-alice");
  const uint64_t before = FreeMemory(a.get(), ca);
  wire::Envelope g = Exchange(a.get(), Call(3, Op::kMemGetAllocationGranularity, ca, {0}));
  ASSERT_EQ(g.reply().result(), CUDA_SUCCESS);
  const uint64_t size = std::max<uint64_t>(g.reply().values(0), 2 * kMiB);
  wire::Envelope made = Exchange(a.get(), Call(4, Op::kMemCreate, ca, {size}));
  ASSERT_EQ(made.reply().result(), CUDA_SUCCESS);
  const uint64_t ha = made.reply().values(0);
  // A maps it and writes.
  auto map = [&](Channel* ch, uint64_t ctx, uint64_t handle) {
    wire::Envelope va = Exchange(ch, Call(5, Op::kMemAddressReserve, ctx, {size, 0}));
    EXPECT_EQ(va.reply().result(), CUDA_SUCCESS);
    const uint64_t ptr = va.reply().values(0);
    EXPECT_EQ(Result(ch, Call(6, Op::kMemMap, ctx, {ptr, size, 0, handle})), CUDA_SUCCESS);
    EXPECT_EQ(Result(ch, Call(7, Op::kMemSetAccess, ctx, {ptr, size, 1})), CUDA_SUCCESS);
    return ptr;
  };
  const uint64_t pa = map(a.get(), ca, ha);
  ASSERT_EQ(Write(a.get(), ca, pa, std::string(4096, 'p')), CUDA_SUCCESS);
  wire::Envelope exported = Exchange(a.get(), Call(8, Op::kMemExportPhysical, ca, {ha}));
  ASSERT_EQ(exported.reply().result(), CUDA_SUCCESS) << exported.reply().message();
  const Key key = KeyOf(exported);
  EXPECT_EQ(Result(a.get(), Call(9, Op::kMemImportPhysical, ca, key)), CUDA_ERROR_INVALID_CONTEXT);
  auto c = Connect();
  const uint64_t cc = OpenSession(c.get(), "tok-bob");
  EXPECT_EQ(Result(c.get(), Call(10, Op::kMemImportPhysical, cc, key)), CUDA_ERROR_INVALID_VALUE);
  wire::Envelope imported = Exchange(b.get(), Call(11, Op::kMemImportPhysical, cb, key));
  ASSERT_EQ(imported.reply().result(), CUDA_SUCCESS) << imported.reply().message();
  const uint64_t hb = imported.reply().values(0);
  EXPECT_EQ(imported.reply().values(1), size);
  const uint64_t pb = map(b.get(), cb, hb);
  EXPECT_EQ(Read(b.get(), cb, pb, 4096), std::string(4096, 'p'));
  // A lets go of everything: B's mapping still holds the bytes, and the tenant pays for them.
  EXPECT_EQ(Result(a.get(), Call(12, Op::kMemUnmap, ca, {pa, size})), CUDA_SUCCESS);
  EXPECT_EQ(Result(a.get(), Call(13, Op::kMemRelease, ca, {ha})), CUDA_SUCCESS);
  EXPECT_EQ(Read(b.get(), cb, pb, 4096), std::string(4096, 'p'));
  EXPECT_LE(FreeMemory(a.get(), ca), before - size);
  EXPECT_EQ(Result(b.get(), Call(14, Op::kMemRelease, cb, {hb})), CUDA_SUCCESS);
  EXPECT_EQ(Read(b.get(), cb, pb, 16), std::string(16, 'p')) << "mapped: still there";
  EXPECT_LE(FreeMemory(a.get(), ca), before - size);
  EXPECT_EQ(Result(b.get(), Call(15, Op::kMemUnmap, cb, {pb, size})), CUDA_SUCCESS);
  EXPECT_EQ(FreeMemory(a.get(), ca), before) << "released with its last holder";
}

TEST_F(ServerIpcTest, PoolPointersAreSharedThroughImportedPools) {
  auto a = Connect(), b = Connect();
  const uint64_t ca = OpenSession(a.get(), "tok-alice");
  const uint64_t cb = OpenSession(b.get(), "tok-alice");
  // A pool made without a shareable handle type is not exported.
  wire::Envelope plain = Exchange(a.get(), Call(3, Op::kMemPoolCreate, 0, {0, 0, 0}));
  ASSERT_EQ(plain.reply().result(), CUDA_SUCCESS);
  EXPECT_EQ(Result(a.get(), Call(4, Op::kMemPoolExport, 0, {plain.reply().values(0)})),
            CUDA_ERROR_INVALID_VALUE);
  wire::Envelope made = Exchange(a.get(), Call(5, Op::kMemPoolCreate, 0, {0, 0, 1}));
  ASSERT_EQ(made.reply().result(), CUDA_SUCCESS);
  const uint64_t pool = made.reply().values(0);
  wire::Envelope exported = Exchange(a.get(), Call(6, Op::kMemPoolExport, 0, {pool}));
  ASSERT_EQ(exported.reply().result(), CUDA_SUCCESS) << exported.reply().message();
  const Key pool_key = KeyOf(exported);
  wire::Envelope p = Exchange(a.get(), Call(7, Op::kMemAllocFromPool, ca, {pool, kMiB, 0}));
  ASSERT_EQ(p.reply().result(), CUDA_SUCCESS);
  const uint64_t ptr = p.reply().values(0);
  ASSERT_EQ(Write(a.get(), ca, ptr, std::string(4096, 'q')), CUDA_SUCCESS);
  wire::Envelope pe = Exchange(a.get(), Call(8, Op::kMemPoolExportPointer, ca, {ptr}));
  ASSERT_EQ(pe.reply().result(), CUDA_SUCCESS) << pe.reply().message();
  const Key ptr_key = KeyOf(pe);

  wire::Envelope imported = Exchange(b.get(), Call(9, Op::kMemPoolImport, 0, pool_key));
  ASSERT_EQ(imported.reply().result(), CUDA_SUCCESS) << imported.reply().message();
  const uint64_t bpool = imported.reply().values(0);
  EXPECT_EQ(imported.reply().values(1), 0u) << "the session's device 0";
  // An imported pool allocates nothing.
  EXPECT_EQ(Result(b.get(), Call(10, Op::kMemAllocFromPool, cb, {bpool, kMiB, 0})),
            CUDA_ERROR_INVALID_VALUE);
  // A pointer key is not a memory key, nor a pool key.
  EXPECT_EQ(Result(b.get(), Call(11, Op::kIpcOpenMemHandle, cb, With(ptr_key, {0}))),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(b.get(), Call(12, Op::kMemPoolImportPointer, cb, With({bpool}, pool_key))),
            CUDA_ERROR_INVALID_VALUE);
  wire::Envelope q =
      Exchange(b.get(), Call(13, Op::kMemPoolImportPointer, cb, With({bpool}, ptr_key)));
  ASSERT_EQ(q.reply().result(), CUDA_SUCCESS) << q.reply().message();
  const uint64_t qptr = q.reply().values(0);
  EXPECT_EQ(Read(b.get(), cb, qptr, 4096), std::string(4096, 'q'));
  ASSERT_EQ(Write(b.get(), cb, qptr, std::string(4096, 'r')), CUDA_SUCCESS);
  EXPECT_EQ(Read(a.get(), ca, ptr, 4096), std::string(4096, 'r'));
  // B frees its import (closing it) and destroys the imported pool; A frees and destroys its own.
  EXPECT_EQ(Result(b.get(), Call(14, Op::kMemFreeAsync, cb, {qptr, 0})), CUDA_SUCCESS);
  EXPECT_EQ(Result(b.get(), Call(15, Op::kMemcpyDtoH, cb, {qptr, 16, 0, 0})),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(b.get(), Call(16, Op::kMemPoolDestroy, 0, {bpool})), CUDA_SUCCESS);
  EXPECT_EQ(Result(a.get(), Call(17, Op::kMemFreeAsync, ca, {ptr, 0})), CUDA_SUCCESS);
  // Freed by its exporter: the pointer key opens nothing more.
  wire::Envelope reimported = Exchange(b.get(), Call(18, Op::kMemPoolImport, 0, pool_key));
  ASSERT_EQ(reimported.reply().result(), CUDA_SUCCESS);
  EXPECT_EQ(Result(b.get(), Call(19, Op::kMemPoolImportPointer, cb,
                                 With({reimported.reply().values(0)}, ptr_key))),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(Result(a.get(), Call(20, Op::kMemPoolDestroy, 0, {pool})), CUDA_SUCCESS);
}

// A session of a server without tokens shares with the server's other sessions (which all hold
// the key only if a program handed it to them).
class ServerIpcOpenServerTest : public test::RawServerTest {};

TEST_F(ServerIpcOpenServerTest, SessionsWithoutTokensShareByKey) {
  auto a = Connect(), b = Connect();
  const uint64_t ca = OpenSession(a.get());
  const uint64_t cb = OpenSession(b.get());
  const uint64_t p = Alloc(a.get(), ca, 4096);
  wire::Envelope got = Exchange(a.get(), Call(3, Op::kIpcGetMemHandle, ca, {p}));
  ASSERT_EQ(got.reply().result(), CUDA_SUCCESS);
  std::vector<uint64_t> args(got.reply().values().begin(), got.reply().values().end());
  args.push_back(0);
  EXPECT_EQ(Result(b.get(), Call(4, Op::kIpcOpenMemHandle, cb, args)), CUDA_SUCCESS);
}

}  // namespace
}  // namespace rgpu
