#include "server/stdout_capture.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace rgpu::server {

namespace {
constexpr size_t kMaxCaptured = 8 << 20;  // a program that never synchronizes loses the excess
}  // namespace

StdoutCapture::~StdoutCapture() {
  stopping_.store(true);
  if (reader_.joinable()) reader_.join();
  if (read_fd_ >= 0) close(read_fd_);
}

Status StdoutCapture::Start() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Internal(std::string("pipe: ") + strerror(errno));
  fflush(stdout);
  if (dup2(fds[1], STDOUT_FILENO) < 0) {
    close(fds[0]);
    close(fds[1]);
    return Internal(std::string("dup2: ") + strerror(errno));
  }
  close(fds[1]);
  setvbuf(stdout, nullptr, _IONBF, 0);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  read_fd_ = fds[0];
  reader_ = std::thread([this] {
    while (!stopping_.load()) {
      pollfd p = {read_fd_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      std::lock_guard<std::mutex> lock(mu_);
      ReadAvailable();
    }
  });
  return Status::Ok();
}

void StdoutCapture::ReadAvailable() {
  char buffer[65536];
  for (;;) {
    const ssize_t n = read(read_fd_, buffer, sizeof buffer);
    if (n <= 0) return;  // EAGAIN: nothing more now
    const size_t room = kMaxCaptured - std::min(kMaxCaptured, captured_.size());
    captured_.append(buffer, std::min(static_cast<size_t>(n), room));
  }
}

void StdoutCapture::Drain(std::string* out) {
  if (read_fd_ < 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  ReadAvailable();
  out->append(captured_);
  captured_.clear();
}

}  // namespace rgpu::server
