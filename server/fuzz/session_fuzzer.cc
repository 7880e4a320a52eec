// libFuzzer target: a server session fed with arbitrary messages, on the software GPU.
//
// Each input drives one session. After a valid Hello and a context, the input is read as a
// sequence of messages: either raw bytes as the message header (garbage, truncated or oversized
// envelopes), or a well-formed Call whose operation, context, arguments and payload are all taken
// from the input (so the fuzzer reaches every handler's validation). When the session ends, all
// device memory must be back: anything else is a leak and aborts.
#include <cuda.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>

#include "proto/ops.h"
#include "proto/protocol_version.h"
#include "proto/rgpu.pb.h"
#include "server/cuda_driver.h"
#include "server/device_catalog.h"
#include "server/session.h"
#include "transport/channel.h"

namespace {

using namespace rgpu;

// Delivers a fixed list of messages, then reports the peer gone; replies are discarded.
class ScriptedChannel final : public Channel {
 public:
  explicit ScriptedChannel(std::deque<std::pair<std::string, std::string>> messages)
      : messages_(std::move(messages)) {}
  Status Send(const std::string&, const void*, size_t) override { return Status::Ok(); }
  Status Post(std::string, const void*, size_t) override { return Status::Ok(); }
  Status Flush(size_t) override { return Status::Ok(); }
  Status Receive(int, ReceivedMessage* out) override {
    if (messages_.empty()) return Unavailable("script ended");
    auto [header, payload] = std::move(messages_.front());
    messages_.pop_front();
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
};

server::CudaDriver g_driver;
server::DeviceCatalog g_devices;

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

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Status s = server::CudaDriver::Load(RGPU_SOFTGPU_LIBRARY, &g_driver);
  if (!s.ok() || g_driver.cuInit(0) != CUDA_SUCCESS || !g_devices.Load(g_driver, "softgpu").ok()) {
    fprintf(stderr, "fuzzer: cannot start the software GPU: %s\n", s.ToString().c_str());
    abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  std::deque<std::pair<std::string, std::string>> script;
  wire::Envelope hello;
  hello.mutable_hello()->set_protocol_version(kProtocolVersion);
  script.emplace_back(Envelope(hello), "");
  wire::Envelope ctx;
  ctx.mutable_call()->set_seq(1);
  ctx.mutable_call()->set_op(static_cast<uint32_t>(Op::kCtxCreate));
  ctx.mutable_call()->add_args(0);
  ctx.mutable_call()->add_args(0);
  script.emplace_back(Envelope(ctx), "");
  while (in.left > 0 && script.size() < 64) {
    const uint8_t kind = static_cast<uint8_t>(in.Take(1));
    if (kind < 16) {  // raw header bytes
      std::string header = in.Bytes(in.Take(1));
      script.emplace_back(std::move(header), in.Bytes(in.Take(1)));
      continue;
    }
    wire::Envelope call;
    wire::Call* c = call.mutable_call();
    c->set_seq(script.size());
    c->set_op(static_cast<uint32_t>(in.Take(1)) % (static_cast<uint32_t>(Op::kCount) + 2));
    c->set_ctx(in.Take(1) % 3);  // 1 is the context made above
    c->set_posted(kind & 1);
    const int args = static_cast<int>(in.Take(1) % 10);
    for (int i = 0; i < args; ++i) {
      // Small values (sizes, ids) or whole 64-bit ones (addresses), as the input decides.
      c->add_args(in.Take(1) & 1 ? in.Take(8) : in.Take(2));
    }
    script.emplace_back(Envelope(call), in.Bytes(in.Take(2) % 4096));
  }
  size_t free_before = 0, total = 0;
  g_driver.cuMemGetInfo(&free_before, &total);
  {
    std::atomic<bool> stop{false};
    server::Session session(1, g_driver, g_devices,
                            std::make_unique<ScriptedChannel>(std::move(script)));
    session.Run(stop);
  }
  // Everything the session made is gone with it.
  CUcontext current = nullptr;
  g_driver.cuCtxSetCurrent(nullptr);
  (void)current;
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
