// LivenessService: a TCP echo port that tells clients this server process is still running, and
// tells the server which clients still are.
//
// A session admits its liveness key (a random 64-bit name) and secret (32 random bytes), which its
// Welcome gives the client, with Admit. The service sends each connection it accepts a fresh
// nonce (kKeepaliveNonceBytes); the client announces the key (8 bytes, little-endian) followed by
// KeepaliveProof of the nonce under the secret (proto/keepalive_proof.h), and then sends one byte
// every interval, which the service echoes at once. The port is never encrypted, so an observer
// learns the key and one nonce's proof, which no later connection accepts: it cannot take the
// session's place on the port (the secret itself crosses only the session's own connection,
// encrypted over tls://). The service runs on a thread of its own, so a
// session busy with a long call keeps answering; a server that is stopped (SIGSTOP) or gone stops
// answering as a whole, and its clients give up on it within their deadline. In the other
// direction the service records when each session's client last sent a keepalive, and tells the
// session when its client went away (the connection closed: the process died) or fell silent.
//
// The port is open to anyone, so it admits only peers that prove they hold a live session: a
// connection must announce an admitted key with its proof within kAnnounceMs, one connection per
// key (a wrong proof closes the connection); until then
// it is pending, and pending connections are bounded per source (SourceOf) and in all (the
// oldest pending one, of the source or of all, makes room for a new one), so idle connections
// cannot lock out a tenant: a tenant's fresh connection announces itself at once.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "common/status.h"

namespace rgpu::server {

// The source a connection from `address` counts under for the per-source bound: an IPv4 address,
// or the /64 prefix of an IPv6 one (a host is given a whole /64, so counting its addresses one by
// one would bound nothing), as text; an IPv4-mapped IPv6 address counts as its IPv4 address.
std::string SourceOf(const sockaddr_storage& address);

class LivenessService {
 public:
  // A pending connection has this long to announce an admitted key.
  static constexpr int kAnnounceMs = 2000;
  // Pending connections at once, from one source address and in all.
  static constexpr size_t kMaxPendingPerSource = 8;
  static constexpr size_t kMaxPending = 256;
  // A session's client is reported gone this long after its connection closed: what the client
  // sent just before it exited (work posted without waiting) is still being served meanwhile.
  static constexpr int kGoneGraceMs = 1000;

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
  // Lets a client that proves it holds `secret` announce `key` (a live session's); an empty
  // secret admits nobody. Any thread.
  void Admit(uint64_t key, const std::string& secret);
  // Milliseconds since the client holding liveness `key` last sent a keepalive; -1 when it never
  // announced itself (an old client, or one with keepalives turned off). Any thread.
  int64_t SilentMs(uint64_t key);
  // Watches admitted `key`: once its client has announced itself and then closed its connection
  // (kGoneGraceMs ago), or (with silent_timeout_ms > 0) sent nothing for longer than that, calls
  // on_lost(reason)
  // once, on the service's thread (which checks every 100 ms while anything is watched). For a
  // session whose thread may be inside a long wait: on_lost abandons the session's channel and
  // stops its work. on_lost must not call the service. Any thread.
  void Watch(uint64_t key, int64_t silent_timeout_ms, std::function<void(std::string)> on_lost);
  // Forgets a key whose session ended, its watch and its connection: once this returns, its
  // on_lost is not running and will not run. Any thread.
  void Forget(uint64_t key);
  // Connections that announced an admitted key, and pending ones (for tests and status).
  size_t connected();
  size_t pending();

 private:
  void Loop();
  // Calls the watches whose clients went away or fell silent. Service thread.
  void CheckWatches();

  struct WatchEntry {
    int64_t silent_timeout_ms = 0;
    std::function<void(std::string)> on_lost;
  };

  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd that ends Loop()
  uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::map<uint64_t, std::string> admitted_;                             // key to secret; under mu_
  std::set<uint64_t> connected_keys_;                                    // under mu_
  std::map<uint64_t, std::chrono::steady_clock::time_point> lost_;       // closed when; under mu_
  std::map<uint64_t, std::chrono::steady_clock::time_point> last_seen_;  // under mu_
  std::map<uint64_t, WatchEntry> watches_;                               // under mu_
  std::atomic<size_t> pending_{0};
};

}  // namespace rgpu::server
