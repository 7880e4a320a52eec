// LivenessService: a TCP echo port that tells clients this server process is still running, and
// tells the server which clients still are.
//
// A client connects, announces its session's liveness key (8 bytes, little-endian; a random number
// the Welcome gave it, so a client cannot speak for another session) and then sends one byte
// every interval, which the service echoes at once. The service runs on a thread of its own, so a
// session busy with a long call keeps answering; a server that is stopped (SIGSTOP) or gone stops
// answering as a whole, and its clients give up on it within their deadline. In the other
// direction the service records when each session's client last sent a keepalive.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"

namespace rgpu::server {

class LivenessService {
 public:
  LivenessService() = default;
  ~LivenessService();
  LivenessService(const LivenessService&) = delete;
  LivenessService& operator=(const LivenessService&) = delete;

  // Listens on an ephemeral TCP port on `host` (a numeric address or name; "" or "0.0.0.0": all)
  // and starts the echo thread.
  Status Start(const std::string& host);
  uint16_t port() const { return port_; }
  // Stops the thread and closes every connection. Idempotent.
  void Stop();
  // Milliseconds since the client holding liveness `key` last sent a keepalive; -1 when it never
  // announced itself (an old client, or one with keepalives turned off). Any thread.
  int64_t SilentMs(uint64_t key);
  // Forgets a key whose session ended. Any thread.
  void Forget(uint64_t key);

 private:
  void Loop();

  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd that ends Loop()
  uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::map<uint64_t, std::chrono::steady_clock::time_point> last_seen_;  // under mu_
};

}  // namespace rgpu::server
