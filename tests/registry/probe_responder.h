// ProbeResponder: answers the registry's reachability probe (registry/reachability.h) the way
// rgpu-server does (Session::Handshake), over the real transport, for tests that register servers
// without starting one: it listens on tcp://127.0.0.1:PORT and answers each ReachabilityProbe
// with HMAC-SHA256(secret, nonce). Told to lie, it answers with a MAC under another secret, as a
// server that is not the one registering would.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "proto/crypto.h"
#include "proto/rgpu.pb.h"
#include "transport/channel.h"

namespace rgpu::registry {

class ProbeResponder {
 public:
  explicit ProbeResponder(std::string secret = RandomBytes(32)) : secret_(std::move(secret)) {
    TransportUrl url;
    url.host = "127.0.0.1";
    if (!CreateListener(url, &listener_).ok()) return;
    url.port = listener_->port();
    url_ = url.ToString();
    thread_ = std::thread([this] { Loop(); });
  }
  ~ProbeResponder() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  const std::string& url() const { return url_; }  // "" when it could not listen
  const std::string& secret() const { return secret_; }
  void set_lie(bool lie) { lie_.store(lie); }
  int answered() const { return answered_.load(); }

 private:
  void Loop() {
    while (!stop_.load()) {
      std::unique_ptr<PendingConnection> pending;
      if (!listener_->WaitConnection(100, &pending).ok()) continue;
      std::unique_ptr<Channel> channel;
      if (!pending->Accept(ChannelOptions(), &channel).ok()) continue;
      ReceivedMessage m;
      wire::Envelope in;
      if (!channel->Receive(5000, &m).ok() || !in.ParseFromString(m.header) ||
          !in.has_reachability_probe()) {
        continue;
      }
      wire::Envelope out;
      const std::string key = lie_.load() ? std::string(32, 'x') : secret_;
      out.mutable_reachability_proof()->set_mac(HmacSha256(key, in.reachability_probe().nonce()));
      channel->Send(out.SerializeAsString(), nullptr, 0);
      answered_++;
    }
  }

  std::string secret_;
  std::string url_;
  std::unique_ptr<Listener> listener_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> lie_{false};
  std::atomic<int> answered_{0};
  std::thread thread_;
};

}  // namespace rgpu::registry
