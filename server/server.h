// Server: accepts tenant connections and runs one Session per connection on its own thread, so
// that no session waits on another.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "server/cuda_driver.h"
#include "server/device_catalog.h"
#include "server/fair_scheduler.h"
#include "server/tenants.h"
#include "transport/channel.h"

namespace prometheus {
class Exposer;
class Collectable;
}  // namespace prometheus

namespace rgpu::server {

class Session;

struct ServerOptions {
  std::string listen = "tcp://0.0.0.0:0";
  std::string backend = "softgpu";   // "cuda" or "softgpu"
  std::string driver_library;        // empty: the backend's default
  int poll_us = 200;                 // busy-poll before sleeping, per session
  std::string tokens_path;           // when set, sessions need a token from this file
  std::string token_public_key;      // when set, sessions may present tokens signed for it
  std::string name = "rgpu-server";  // this server's name in signed tokens' claims
  int metrics_port = 0;              // serve Prometheus metrics here (0: off)
  int max_sessions = 0;              // sessions at once (0: no limit)
  bool fair_share = false;           // kernels take turns by weight (FairScheduler)
};

class Server {
 public:
  Server();
  ~Server();
  // Loads the backend, gathers its devices and starts listening.
  Status Start(const ServerOptions& options);
  // The bound listen URL (with the actual port).
  std::string url() const { return url_; }
  // Accepts connections until Stop() is called, then ends every session and returns.
  void Serve();
  // Asks Serve() to return; safe from a signal handler thread.
  void Stop() { stop_.store(true); }
  size_t active_sessions();
  // Every live session's figures, for `rgpu status` and the metrics endpoint. Any thread.
  wire::StatusReply SessionsStatus();

 private:
  ServerOptions options_;
  CudaDriver driver_;
  DeviceCatalog devices_;
  std::unique_ptr<TenantTable> tenants_;
  std::unique_ptr<FairScheduler> scheduler_;
  std::unique_ptr<Listener> listener_;
  std::string url_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> next_session_id_{1};
  std::mutex mu_;
  std::set<uint64_t> live_;                // ids of sessions still running
  std::map<uint64_t, Session*> sessions_;  // sessions past construction, by id (under mu_)
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Collectable> metrics_;
  std::atomic<int> running_threads_{0};
};

}  // namespace rgpu::server
