// ProbeQueue: runs reachability probes (registry/reachability.h) one at a time on its own thread,
// so that a slow or hostile URL never holds a gRPC thread, and reports each result. A server
// probed again before its previous probe ran is probed once, with the newest URL and secret.
// Probes take turns by owner (the server's provider): the next probe is the oldest waiting one of
// the owner served longest ago, so that one provider's queue of slow URLs delays another's server
// by at most the probe in progress and one more. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "registry/reachability.h"

namespace rgpu::registry {

class ProbeQueue {
 public:
  // Called on the queue's thread with each probe's outcome; `generation` is Submit's.
  using Done =
      std::function<void(const std::string& server, uint64_t generation, const Status& result)>;

  // At most `max_pending` probes wait at a time.
  ProbeQueue(ReachabilityProbe probe, Done done, size_t max_pending = 1000);
  // Stops after the probe in progress (waiting ones are dropped, unreported).
  ~ProbeQueue();

  // Queues a probe of `server` (of `owner`) at `url`; false when max_pending probes wait
  // already.
  bool Submit(const std::string& owner, const std::string& server, const std::string& url,
              const std::string& secret, uint64_t generation);
  // Blocks until no probe waits or runs (for tests and benchmarks).
  void WaitIdle();

 private:
  struct Job {
    std::string owner, server, url, secret;
    uint64_t generation;
  };
  void Loop();
  // The waiting job to run next (jobs_ not empty; mu_ held): see the class comment.
  std::deque<Job>::iterator NextJob();

  ReachabilityProbe probe_;
  Done done_;
  size_t max_pending_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;                    // in the order submitted (under mu_)
  std::map<std::string, uint64_t> served_;  // owner -> the turn it was last served (under mu_)
  uint64_t turns_ = 0;                      // probes started (under mu_)
  bool running_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace rgpu::registry
