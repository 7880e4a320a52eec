// StdoutCapture: what a session host's backend writes to stdout (NVIDIA's driver writes device
// printf there, at synchronizations) is the session's device output, handed back to its program
// with the next reply instead of reaching the server's terminal (server/session_host.h).
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"

namespace rgpu::server {

class StdoutCapture {
 public:
  StdoutCapture() = default;
  ~StdoutCapture();
  StdoutCapture(const StdoutCapture&) = delete;
  StdoutCapture& operator=(const StdoutCapture&) = delete;

  // Points this process's fd 1 at a pipe (stdout unbuffered) and starts a thread that empties
  // it, so that a writer never blocks on a full pipe. Once, before the backend loads.
  Status Start();
  // Moves everything written to stdout so far into *out (appended): what was written before the
  // call began is always there. Any thread.
  void Drain(std::string* out);

 private:
  // Reads what the pipe holds now into captured_ (mu_ held).
  void ReadAvailable();
  int read_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread reader_;
  std::mutex mu_;
  std::string captured_;  // under mu_
};

}  // namespace rgpu::server
