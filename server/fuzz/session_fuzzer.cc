// libFuzzer target: server sessions fed with arbitrary messages, on the software GPU.
//
// The first byte of an input picks how the session starts: an open server (Hello, context), a
// server that requires tokens (a Hello whose credential is taken from the input, answered with
// the right proof of a known token, a proof taken from the input, or nothing), a status request
// or a reachability probe with fuzzed credentials and nonces. The rest is read as a sequence of
// messages: raw bytes as the message header (garbage, truncated or oversized envelopes), a
// well-formed Call, a compact call (its word count sometimes wrong), or a Batch of calls with
// fuzzed payload sizes, whose operations, contexts, arguments (small, full 64-bit, or near a
// power of two or 2^64, where size arithmetic overflows) and payloads all come from the input,
// so the fuzzer reaches every handler's validation. Some inputs run two sessions at once on
// halves of the script. When the sessions end, all device memory must be back: anything else is
// a leak and aborts.
#include <cuda.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>

#include <unistd.h>

#include "proto/compact_frame.h"
#include "proto/ops.h"
#include "proto/protocol_version.h"
#include "proto/rgpu.pb.h"
#include "proto/session_proof.h"
#include "server/cuda_driver.h"
#include "server/device_catalog.h"
#include "server/session.h"
#include "server/tenants.h"
#include "transport/channel.h"

namespace {

using namespace rgpu;

// A script entry whose header is this marker is replaced, when the session reads it, by the
// right proof of kKnownToken for the last challenge the session sent.
const char kProveMarker[] = "\x01prove";
const char kKnownToken[] = "fuzz-token-secret";

// Delivers a fixed list of messages, then reports the peer gone; replies are discarded except
// the nonce of the last Challenge (for kProveMarker).
class ScriptedChannel final : public Channel {
 public:
  explicit ScriptedChannel(std::deque<std::pair<std::string, std::string>> messages)
      : messages_(std::move(messages)) {}
  Status Send(const std::string& header, const void*, size_t) override {
    wire::Envelope e;
    if (e.ParseFromString(header) && e.body_case() == wire::Envelope::kChallenge) {
      nonce_ = e.challenge().nonce();
    }
    return Status::Ok();
  }
  Status Post(std::string, const void*, size_t) override { return Status::Ok(); }
  Status Flush(size_t) override { return Status::Ok(); }
  Status Receive(int, ReceivedMessage* out) override {
    if (messages_.empty()) return Unavailable("script ended");
    auto [header, payload] = std::move(messages_.front());
    messages_.pop_front();
    if (header == kProveMarker) {
      CredentialProver prover;
      CredentialProver::Parse(kKnownToken, &prover);
      wire::Envelope answer;
      prover.Prove(nonce_, answer.mutable_challenge_response()->mutable_proof());
      header = answer.SerializeAsString();
    }
    out->header = std::move(header);
    out->payload_size = payload.size();
    out->owned = PayloadBuffer(new char[payload.size() + 1], [](char* p) { delete[] p; });
    memcpy(out->owned.get(), payload.data(), payload.size());
    out->payload = out->owned.get();
    return Status::Ok();
  }
  void SetPayloadPlacer(PayloadPlacer) override {}
  Status RegisterMemory(void*, size_t) override { return Status::Ok(); }
  void UnregisterMemory(void*) override {}
  bool broken() const override { return messages_.empty(); }
  void Abandon(const std::string&) override { messages_.clear(); }
  std::string peer() const override { return "fuzzer"; }
  size_t queued() const override { return messages_.size(); }
  std::string Describe() override { return "scripted"; }

 private:
  std::deque<std::pair<std::string, std::string>> messages_;
  std::string nonce_;
};

server::CudaDriver g_driver;
server::DeviceCatalog g_devices;
server::TenantTable* g_tenants =
    nullptr;  // kKnownToken (tenant "fuzz", 64 MiB) and an operator key

// Reads little pieces of the input in order.
struct Input {
  const uint8_t* p;
  size_t left;
  uint64_t Take(size_t bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < bytes && left > 0; ++i, --left) v |= uint64_t{*p++} << (8 * i);
    return v;
  }
  std::string Bytes(size_t n) {
    n = std::min(n, left);
    std::string s(reinterpret_cast<const char*>(p), n);
    p += n;
    left -= n;
    return s;
  }
};

std::string Envelope(const wire::Envelope& e) { return e.SerializeAsString(); }

// An argument: small, whole 64-bit, or near a power of two or the top of the range.
uint64_t Argument(Input& in) {
  switch (in.Take(1) % 4) {
    case 0:
      return in.Take(2);
    case 1:
      return in.Take(8);
    case 2:
      return (uint64_t{1} << (in.Take(1) % 64)) + (in.Take(1) % 5) - 2;
    default:
      return ~uint64_t{0} - in.Take(1);
  }
}

wire::Call FuzzedCall(Input& in, uint64_t seq, bool posted) {
  wire::Call c;
  c.set_seq(seq);
  c.set_op(static_cast<uint32_t>(in.Take(1)) % (static_cast<uint32_t>(Op::kCount) + 2));
  c.set_ctx(in.Take(1) % 3);  // 1 is the context made first
  c.set_posted(posted);
  const int args = static_cast<int>(in.Take(1) % 10);
  for (int i = 0; i < args; ++i) c.add_args(Argument(in));
  return c;
}

// The start of a session: how it begins, from the input's first byte.
void Start(Input& in, std::deque<std::pair<std::string, std::string>>* script, bool* tokens) {
  const uint8_t mode = static_cast<uint8_t>(in.Take(1)) % 5;
  *tokens = mode != 0;
  wire::Envelope hello;
  hello.mutable_hello()->set_protocol_version(kProtocolVersion);
  if (mode == 3) {  // status, with a fuzzed credential and proof
    wire::Envelope status;
    wire::Credential* c = status.mutable_status_request()->mutable_credential();
    if (in.Take(1) & 1) c->set_token_digest(in.Bytes(in.Take(1) % 40));
    if (in.Take(1) & 1) c->set_token(in.Bytes(in.Take(1)));
    script->emplace_back(Envelope(status), "");
    script->emplace_back(in.Bytes(in.Take(1)), "");
    return;
  }
  if (mode == 4) {  // a reachability probe
    wire::Envelope probe;
    probe.mutable_reachability_probe()->set_nonce(in.Bytes(in.Take(1)));
    script->emplace_back(Envelope(probe), "");
    return;
  }
  if (mode == 1) {  // the known token, proven
    CredentialProver prover;
    CredentialProver::Parse(kKnownToken, &prover);
    *hello.mutable_hello()->mutable_credential() = prover.presented();
    script->emplace_back(Envelope(hello), "");
    script->emplace_back(kProveMarker, "");
  } else if (mode == 2) {  // a fuzzed credential and proof
    wire::Credential* c = hello.mutable_hello()->mutable_credential();
    if (in.Take(1) & 1) c->set_token_digest(in.Bytes(in.Take(1) % 40));
    if (in.Take(1) & 1) c->set_token(in.Bytes(in.Take(1)));
    script->emplace_back(Envelope(hello), "");
    script->emplace_back(in.Bytes(in.Take(1)), "");
  } else {
    script->emplace_back(Envelope(hello), "");
  }
  wire::Envelope ctx;
  ctx.mutable_call()->set_seq(1);
  ctx.mutable_call()->set_op(static_cast<uint32_t>(Op::kCtxCreate));
  ctx.mutable_call()->add_args(0);
  ctx.mutable_call()->add_args(0);
  script->emplace_back(Envelope(ctx), "");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Status s = server::CudaDriver::Load(RGPU_SOFTGPU_LIBRARY, &g_driver);
  if (!s.ok() || g_driver.cuInit(0) != CUDA_SUCCESS || !g_devices.Load(g_driver, "softgpu").ok()) {
    fprintf(stderr, "fuzzer: cannot start the software GPU: %s\n", s.ToString().c_str());
    abort();
  }
  char path[] = "/tmp/rgpu-session-fuzzer-XXXXXX";
  const int fd = mkstemp(path);
  const std::string line = std::string(kKnownToken) + " fuzz 64M 1\n";
  if (fd < 0 || write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) abort();
  close(fd);
  g_tenants = new server::TenantTable();
  if (!g_tenants->Load(path).ok()) abort();
  unlink(path);
  g_tenants->SetOperatorKey("fuzz-operator-key-0123456789");
  return 0;
}

// Runs one session on `script` to its end.
void RunSession(std::deque<std::pair<std::string, std::string>> script, bool tokens, uint64_t id) {
  // Exports are drawn at random keys, which a fuzzed session cannot present: opens are refused,
  // exports and their revocation still run.
  static server::IpcRegistry ipc;
  std::atomic<bool> stop{false};
  server::Session session(id, g_driver, g_devices,
                          std::make_unique<ScriptedChannel>(std::move(script)),
                          tokens ? g_tenants : nullptr);
  session.SetStatusProvider([] { return wire::StatusReply(); });
  static const std::string secret = "fuzz-reachability-secret";
  session.SetReachabilitySecret(&secret);
  session.SetIpcRegistry(&ipc);
  session.Run(stop);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  std::deque<std::pair<std::string, std::string>> script;
  bool tokens = false;
  Start(in, &script, &tokens);
  const bool concurrent = in.Take(1) % 4 == 0;
  while (in.left > 0 && script.size() < 64) {
    const uint8_t kind = static_cast<uint8_t>(in.Take(1));
    if (kind < 16) {  // raw header bytes
      std::string header = in.Bytes(in.Take(1));
      script.emplace_back(std::move(header), in.Bytes(in.Take(1)));
      continue;
    }
    if (kind < 48) {  // a batch of calls with fuzzed payload sizes
      wire::Envelope batch;
      wire::Batch* b = batch.mutable_batch();
      const int calls = 1 + static_cast<int>(in.Take(1) % 6);
      for (int i = 0; i < calls; ++i) {
        *b->add_calls() = FuzzedCall(in, script.size() * 8 + i, i + 1 < calls || (kind & 1));
        b->add_payload_sizes(in.Take(1) & 1 ? Argument(in) : in.Take(1) % 64);
      }
      script.emplace_back(Envelope(batch), in.Bytes(in.Take(2) % 4096));
      continue;
    }
    if (kind < 64) {  // a compact call (proto/compact_frame.h), its word count sometimes wrong
      const wire::Call c = FuzzedCall(in, script.size(), false);
      std::string frame;
      compact::EncodeCall(c.op(), c.seq(), c.ctx(), {c.args().data(), size_t(c.args_size())},
                          &frame);
      if (kind & 1) frame[2] = static_cast<char>(in.Take(1));
      script.emplace_back(std::move(frame), in.Bytes(in.Take(2) % 4096));
      continue;
    }
    wire::Envelope call;
    *call.mutable_call() = FuzzedCall(in, script.size(), kind & 1);
    script.emplace_back(Envelope(call), in.Bytes(in.Take(2) % 4096));
  }
  size_t free_before = 0, total = 0;
  g_driver.cuMemGetInfo(&free_before, &total);
  if (concurrent && script.size() > 4) {
    // Two sessions at once: the second half of the script as a session of its own.
    std::deque<std::pair<std::string, std::string>> second(script.begin() + script.size() / 2,
                                                           script.end());
    script.resize(script.size() / 2);
    std::deque<std::pair<std::string, std::string>> start;
    Input none{nullptr, 0};
    bool unused = false;
    Start(none, &start, &unused);
    second.insert(second.begin(), start.begin(), start.end());
    std::thread other(RunSession, std::move(second), false, 2);
    RunSession(std::move(script), tokens, 1);
    other.join();
  } else {
    RunSession(std::move(script), tokens, 1);
  }
  // Everything the sessions made is gone with them.
  g_driver.cuCtxSetCurrent(nullptr);
  size_t free_after = 0;
  CUdevice dev;
  CUcontext probe;
  if (g_driver.cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
      g_driver.cuCtxCreate(&probe, nullptr, 0, dev) == CUDA_SUCCESS) {
    g_driver.cuMemGetInfo(&free_after, &total);
    g_driver.cuCtxDestroy(probe);
    if (free_after != total) {
      fprintf(stderr, "fuzzer: %zu bytes of device memory leaked by a session\n",
              total - free_after);
      abort();
    }
  }
  return 0;
}
