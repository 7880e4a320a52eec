// A raw protocol peer for server tests: an rgpu-server on the software GPU started in-process, and
// helpers that speak the wire protocol directly over a Channel (no client library), the way an
// attacker would.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "proto/ops.h"
#include "proto/protocol_version.h"
#include "proto/rgpu.pb.h"
#include "proto/session_proof.h"
#include "server/server.h"
#include "transport/channel.h"

namespace rgpu::test {

inline wire::Envelope Hello(uint32_t version = kProtocolVersion) {
  wire::Envelope e;
  e.mutable_hello()->set_protocol_version(version);
  e.mutable_hello()->set_client_name("protocol-test");
  return e;
}

inline wire::Envelope Call(uint64_t seq, Op op, uint64_t ctx, std::vector<uint64_t> args,
                           bool posted = false) {
  wire::Envelope e;
  e.mutable_call()->set_seq(seq);
  e.mutable_call()->set_op(static_cast<uint32_t>(op));
  e.mutable_call()->set_ctx(ctx);
  for (uint64_t a : args) e.mutable_call()->add_args(a);
  e.mutable_call()->set_posted(posted);
  return e;
}

// A batch under construction: calls and their payloads at 16-byte boundaries (rgpu.proto).
struct BatchBuilder {
  wire::Envelope envelope;
  std::string payload;
  void Add(const wire::Envelope& call, const std::string& data) {
    *envelope.mutable_batch()->add_calls() = call.call();
    envelope.mutable_batch()->add_payload_sizes(data.size());
    if (!data.empty()) payload.resize((payload.size() + 15) & ~size_t{15});
    payload += data;
  }
};

// The next message on `ch` (an empty envelope when none arrives within `timeout_ms`); `payload`
// (optional) receives its payload.
inline wire::Envelope Next(Channel* ch, std::string* payload = nullptr, int timeout_ms = 10000) {
  ReceivedMessage m;
  wire::Envelope in;
  if (!ch->Receive(timeout_ms, &m).ok()) return in;
  EXPECT_TRUE(in.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())));
  if (payload != nullptr) payload->assign(m.payload, m.payload_size);
  return in;
}

// Sends `out` with `payload` and returns the answer.
inline wire::Envelope Exchange(Channel* ch, const wire::Envelope& out,
                               const std::string& payload = "", std::string* received = nullptr) {
  EXPECT_TRUE(ch->Send(out.SerializeAsString(), payload.data(), payload.size()).ok());
  return Next(ch, received);
}

// The result of a call (-1 when the answer is not a Reply: the session was closed).
inline int Result(Channel* ch, const wire::Envelope& call, const std::string& payload = "") {
  wire::Envelope in = Exchange(ch, call, payload);
  return in.body_case() == wire::Envelope::kReply ? in.reply().result() : -1;
}

// The handshake with `credential` (none: ""), answering the server's challenge as the client
// library does; returns the Welcome (or whatever the server answered).
inline wire::Envelope Handshake(Channel* ch, const std::string& credential) {
  wire::Envelope hello = Hello();
  CredentialProver prover;
  if (!credential.empty()) {
    EXPECT_TRUE(CredentialProver::Parse(credential, &prover).ok());
    *hello.mutable_hello()->mutable_credential() = prover.presented();
  }
  wire::Envelope w = Exchange(ch, hello);
  EXPECT_TRUE(AnswerChallenge(ch, prover, 10000, &w).ok());
  return w;
}

// Handshake and a context on device 0; returns the context id.
inline uint64_t OpenSession(Channel* ch, const std::string& credential = "") {
  wire::Envelope w = Handshake(ch, credential);
  EXPECT_EQ(w.welcome().status(), 0) << w.welcome().error();
  EXPECT_GE(w.welcome().devices_size(), 1);
  wire::Envelope r = Exchange(ch, Call(1, Op::kCtxCreate, 0, {0, 0}));
  EXPECT_EQ(r.reply().result(), CUDA_SUCCESS);
  return r.reply().values_size() > 0 ? r.reply().values(0) : 0;
}

// Allocates `bytes` in `ctx`; 0 when refused.
inline uint64_t Alloc(Channel* ch, uint64_t ctx, uint64_t bytes) {
  wire::Envelope r = Exchange(ch, Call(2, Op::kMemAlloc, ctx, {bytes}));
  return r.reply().result() == CUDA_SUCCESS ? r.reply().values(0) : 0;
}

// A software-GPU server on loopback for the duration of a test (RGPU_TEST_BACKEND=cuda: on
// NVIDIA's driver, for the real-GPU script). A derived fixture sets options_ in its
// constructor, before SetUp starts the server.
class RawServerTest : public ::testing::Test {
 protected:
  RawServerTest() {
    options_.listen = "tcp://127.0.0.1:0";
    // The session itself, in the server's process, on every backend (these tests speak to it
    // directly; e2e_session_hosts tests the processes).
    options_.session_processes = "off";
    const char* backend = getenv("RGPU_TEST_BACKEND");
    if (backend != nullptr && std::string(backend) == "cuda") {
      options_.backend = "cuda";
    } else {
      options_.backend = "softgpu";
      options_.driver_library = RGPU_SOFTGPU_LIBRARY;
    }
  }
  void SetUp() override {
    Status s = server_.Start(options_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    thread_ = std::thread([this] { server_.Serve(); });
  }
  void TearDown() override {
    server_.Stop();
    if (thread_.joinable()) thread_.join();
  }
  std::unique_ptr<Channel> Connect() {
    TransportUrl url;
    EXPECT_TRUE(TransportUrl::Parse(server_.url(), &url).ok());
    std::unique_ptr<Channel> ch;
    EXPECT_TRUE(ConnectChannel(url, ChannelOptions(), &ch).ok());
    return ch;
  }

  server::ServerOptions options_;
  server::Server server_;
  std::thread thread_;
};

}  // namespace rgpu::test
