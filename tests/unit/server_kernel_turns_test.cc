// Kernel turns under --fair-share (server/kernel_turns.h): a kernel waits for its turn on the GPU
// on the server, not on the session's thread, so the session's other calls are served while it
// runs; what the program queued behind it on its stream still runs after it; a kernel that faults
// gives its turn back; and its GPU time is metered on the device it ran on.
#include <chrono>
#include <cstring>
#include <thread>

#include "tests/unit/raw_peer.h"

namespace rgpu {
namespace {

using test::Call;
using test::Exchange;

// wait_flag(flag): spins until *flag != 0. fault(): stores to an address nobody owns.
const char kPtx[] =
    ".version 7.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry wait_flag(.param .u64 flag)\n{\n"
    "  .reg .u64 %rd<2>;\n  .reg .u32 %r<2>;\n  .reg .pred %p<2>;\n"
    "  ld.param.u64 %rd1, [flag];\n"
    "$L_top:\n  ld.volatile.global.u32 %r1, [%rd1];\n"
    "  setp.eq.u32 %p1, %r1, 0;\n  @%p1 bra.uni $L_top;\n  ret;\n}\n"
    ".visible .entry fault()\n{\n  .reg .u64 %rd<2>;\n  .reg .u32 %r<2>;\n"
    "  mov.u64 %rd1, 8;\n  mov.u32 %r1, 1;\n  st.global.u32 [%rd1], %r1;\n  ret;\n}\n"
    ".visible .entry quick()\n{\n  ret;\n}\n";

constexpr int kAnswerMs = 5000;  // far longer than any call here takes when it is not held up

class ServerKernelTurnsTest : public test::RawServerTest {
 protected:
  ServerKernelTurnsTest() {
    options_.fair_share = true;
    options_.max_kernel_ms = 0;  // the flag, not a bound, ends wait_flag
  }
  struct Tenant {
    std::unique_ptr<Channel> ch;
    uint64_t ctx = 0;
    uint64_t module = 0;
    uint64_t seq = 10;
  };
  Tenant Open() {
    Tenant t;
    t.ch = Connect();
    EXPECT_EQ(test::Handshake(t.ch.get(), "").welcome().status(), 0);
    t.ctx = Exchange(t.ch.get(), Call(1, Op::kCtxCreate, 0, {0, 0})).reply().values(0);
    wire::Envelope m = Exchange(t.ch.get(), Call(2, Op::kModuleLoadData, t.ctx, {}), kPtx);
    EXPECT_EQ(m.reply().result(), CUDA_SUCCESS) << m.reply().message();
    t.module = m.reply().values(0);
    return t;
  }
  static uint64_t Function(Tenant& t, const char* name) {
    wire::Envelope f =
        Exchange(t.ch.get(), Call(t.seq++, Op::kModuleGetFunction, t.ctx, {t.module}), name);
    EXPECT_EQ(f.reply().result(), CUDA_SUCCESS) << f.reply().message();
    return f.reply().values(0);
  }
  // A call's answer within kAnswerMs (an empty envelope when none came).
  static wire::Envelope Answer(Tenant& t, const wire::Envelope& call,
                               const std::string& payload = "", std::string* out = nullptr) {
    EXPECT_TRUE(t.ch->Send(call.SerializeAsString(), payload.data(), payload.size()).ok());
    return test::Next(t.ch.get(), out, kAnswerMs);
  }
  static uint64_t Alloc(Tenant& t, uint64_t bytes) {
    wire::Envelope r = Answer(t, Call(t.seq++, Op::kMemAlloc, t.ctx, {bytes}));
    EXPECT_EQ(r.body_case(), wire::Envelope::kReply) << "MemAlloc was not answered";
    return r.reply().values_size() > 0 ? r.reply().values(0) : 0;
  }
  // Posts a launch of `fn` (one warp) on `stream` with `params` packed.
  static void Launch(Tenant& t, uint64_t fn, uint64_t stream, const std::string& params = "") {
    wire::Envelope call =
        Call(t.seq++, Op::kLaunchKernel, t.ctx, {fn, 1, 1, 1, 32, 1, 1, 0, stream}, true);
    ASSERT_TRUE(t.ch->Send(call.SerializeAsString(), params.data(), params.size()).ok());
  }
  static std::string Pointer(uint64_t p) { return std::string(reinterpret_cast<char*>(&p), 8); }
  static uint32_t Read32(Tenant& t, uint64_t p) {
    std::string out;
    wire::Envelope r = Answer(t, Call(t.seq++, Op::kMemcpyDtoH, t.ctx, {p, 4, 0, 0}), "", &out);
    EXPECT_EQ(r.body_case(), wire::Envelope::kReply) << "MemcpyDtoH was not answered";
    uint32_t v = 0;
    if (out.size() == 4) memcpy(&v, out.data(), 4);
    return v;
  }
  static void Write32(Tenant& t, uint64_t p, uint32_t v) {
    wire::Envelope r = Answer(t, Call(t.seq++, Op::kMemcpyHtoD, t.ctx, {p, 4, 0, 0}),
                              std::string(reinterpret_cast<char*>(&v), 4));
    ASSERT_EQ(r.body_case(), wire::Envelope::kReply) << "MemcpyHtoD was not answered";
    EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
  }
  static uint64_t NonBlockingStream(Tenant& t) {
    wire::Envelope r = Answer(t, Call(t.seq++, Op::kStreamCreate, t.ctx, {1, 0, 0}));
    EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
    return r.reply().values(0);
  }
};

// The audit of issue 17: under --fair-share a launch held the session's thread until its kernel
// ended, so a thread's long kernel stalled every other call of the program. Here a kernel that
// runs until the program says so keeps its turn while the same session allocates, copies to and
// from the device and finally writes the flag that ends it; the memset queued behind it on its
// stream runs only after it.
TEST_F(ServerKernelTurnsTest, AKernelInItsTurnDoesNotHoldTheSessionsOtherCalls) {
  Tenant t = Open();
  const uint64_t wait_flag = Function(t, "wait_flag");
  const uint64_t flag = Alloc(t, 4);
  const uint64_t behind = Alloc(t, 4);
  Write32(t, flag, 0);
  Write32(t, behind, 0);
  const uint64_t stream = NonBlockingStream(t);
  const auto launched = std::chrono::steady_clock::now();
  Launch(t, wait_flag, stream, Pointer(flag));
  // Behind the kernel on its stream: behind := 7 (posted).
  ASSERT_TRUE(t.ch->Send(Call(t.seq++, Op::kMemset, t.ctx, {behind, 7, 4, 1, stream, 1}, true)
                             .SerializeAsString(),
                         nullptr, 0)
                  .ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the kernel has its turn
  const uint64_t other = Alloc(t, 64);
  ASSERT_NE(other, 0u);
  Write32(t, other, 1234);
  EXPECT_EQ(Read32(t, other), 1234u);
  EXPECT_EQ(Read32(t, behind), 0u) << "the memset behind the kernel ran before it";
  wire::Envelope q = Answer(t, Call(t.seq++, Op::kStreamQuery, t.ctx, {stream}));
  ASSERT_EQ(q.body_case(), wire::Envelope::kReply);
  EXPECT_EQ(q.reply().result(), CUDA_ERROR_NOT_READY);
  Write32(t, flag, 1);  // the kernel ends
  wire::Envelope s = Answer(t, Call(t.seq++, Op::kStreamSynchronize, t.ctx, {stream}));
  ASSERT_EQ(s.body_case(), wire::Envelope::kReply);
  EXPECT_EQ(s.reply().result(), CUDA_SUCCESS);
  EXPECT_EQ(Read32(t, behind), 7u);
  // Its GPU time is metered on device 0, where it ran: more than nothing and no more than the time
  // since its launch (its turn opens when the keeper gets to it, late on a loaded machine). The
  // keeper adds it when it sees the kernel's end, which may come just after the stream's
  // synchronize returned: the figure is awaited, up to kAnswerMs.
  wire::StatusReply status = server_.SessionsStatus();
  for (const auto deadline =
           std::chrono::steady_clock::now() + std::chrono::milliseconds(kAnswerMs);
       status.sessions_size() == 1 && status.sessions(0).gpu_busy_seconds() == 0 &&
       std::chrono::steady_clock::now() < deadline;
       status = server_.SessionsStatus()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(status.sessions_size(), 1);
  const wire::SessionStats& st = status.sessions(0);
  ASSERT_EQ(st.devices_size(), 1);
  ASSERT_EQ(st.device_gpu_busy_seconds_size(), 1);
  EXPECT_GT(st.device_gpu_busy_seconds(0), 0.0);
  EXPECT_LE(st.device_gpu_busy_seconds(0),
            std::chrono::duration<double>(std::chrono::steady_clock::now() - launched).count());
  EXPECT_DOUBLE_EQ(st.gpu_busy_seconds(), st.device_gpu_busy_seconds(0));
}

// A tenant's kernel that faults ends its turn with the fault: its stream reports it, and another
// tenant's kernel gets the GPU.
TEST_F(ServerKernelTurnsTest, AFaultingKernelGivesItsTurnBack) {
  Tenant hostile = Open();
  const uint64_t stream = NonBlockingStream(hostile);
  Launch(hostile, Function(hostile, "fault"), stream);
  wire::Envelope s =
      Answer(hostile, Call(hostile.seq++, Op::kStreamSynchronize, hostile.ctx, {stream}));
  ASSERT_EQ(s.body_case(), wire::Envelope::kReply);
  const int seen = s.reply().async_error() != 0 ? s.reply().async_error() : s.reply().result();
  EXPECT_EQ(seen, CUDA_ERROR_ILLEGAL_ADDRESS);
  // Work queued behind the faulted kernel's gate must not leave a gate closed for ever.
  Launch(hostile, Function(hostile, "quick"), stream);

  Tenant other = Open();
  Launch(other, Function(other, "quick"), 0);
  wire::Envelope r = Answer(other, Call(other.seq++, Op::kCtxSynchronize, other.ctx, {}));
  ASSERT_EQ(r.body_case(), wire::Envelope::kReply) << "the other tenant's kernel never ran";
  EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
  EXPECT_EQ(r.reply().async_error(), CUDA_SUCCESS);
}

}  // namespace
}  // namespace rgpu
