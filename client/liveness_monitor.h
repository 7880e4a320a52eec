// LivenessMonitor: watches that the server process is still running, from a thread of its own.
// It connects to the server's liveness port (Welcome.liveness_port), answers the nonce the server
// sends first with the session's liveness key and its proof under the liveness secret
// (proto/keepalive_proof.h), and sends one byte every interval; the server echoes each at once.
// It never raises SIGPIPE in the program. When no echo has come for `timeout_ms` (the server is
// stopped, wedged as a whole, or its host is gone) it calls `on_silent` once, which abandons the
// connection so that every waiting and later call fails instead of hanging. The server in turn
// sees the client's keepalives. A connection the server closes before it ever echoed (its table
// of unannounced connections was full, or it refused the proof) is tried again a few times and
// then given up on without calling on_silent: only a server that took the connection and then
// stopped answering or closed it is reported.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"

namespace rgpu::client {

class LivenessMonitor {
 public:
  using SilentCallback = std::function<void(const std::string& why)>;
  // Connects to host:port and starts watching; the announcement is made on the monitor's
  // thread, so starting costs no round trip but the connection's. Fails when the port cannot be
  // reached or `secret` is empty.
  static Status Start(const std::string& host, uint16_t port, uint64_t key,
                      const std::string& secret, int timeout_ms, SilentCallback on_silent,
                      std::unique_ptr<LivenessMonitor>* out);
  // Stops the thread and closes the connection.
  ~LivenessMonitor();

 private:
  LivenessMonitor() = default;
  void Loop();

  static constexpr int kMaxReconnects = 5;
  int fd_ = -1;
  std::string host_;
  uint16_t port_ = 0;
  uint64_t key_ = 0;
  std::string secret_;
  int wake_fd_ = -1;  // eventfd that ends Loop()
  int timeout_ms_ = 0;
  SilentCallback on_silent_;
  std::thread thread_;
};

}  // namespace rgpu::client
