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
#include <functional>
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
  // Watches `key`: once its client has announced itself and then sent nothing for more than
  // timeout_ms, calls on_silent(silent_ms) once, on the service's thread (which checks every
  // 100 ms). For a session whose thread may be inside a long wait on its client (a transfer):
  // on_silent abandons the session's channel, which ends every wait. Any thread.
  void Watch(uint64_t key, int64_t timeout_ms, std::function<void(int64_t)> on_silent);
  // Forgets a key whose session ended, and its watch: once this returns, its on_silent is not
  // running and will not run. Any thread.
  void Forget(uint64_t key);

 private:
  void Loop();
  // Calls the watches whose clients fell silent. Service thread.
  void CheckWatches();

  struct WatchEntry {
    int64_t timeout_ms = 0;
    std::function<void(int64_t)> on_silent;
  };

  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd that ends Loop()
  uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::map<uint64_t, std::chrono::steady_clock::time_point> last_seen_;  // under mu_
  std::map<uint64_t, WatchEntry> watches_;                               // under mu_
};

}  // namespace rgpu::server
