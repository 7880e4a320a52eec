// The client's keepalive monitor (client/liveness_monitor.h) against a keepalive port that
// misbehaves: it is a guest in the tenant's process, so nothing the port does may raise a
// signal there or declare the server dead before the server ever took the connection.
#include "client/liveness_monitor.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "proto/keepalive_proof.h"

namespace rgpu::client {
namespace {

// A TCP listener on 127.0.0.1 with an ephemeral port.
struct Listener {
  int fd = -1;
  uint16_t port = 0;
  Listener() {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "cannot listen";
    }
    port = ntohs(a.sin_port);
  }
  ~Listener() { close(fd); }
};

// The audit of 2026-12-06: a keepalive port that closes a connection it has not taken yet (its
// table of connections waiting to announce themselves was full: 32 tenants starting at once on
// one host) made the monitor write its announcement and first keepalive to a closed socket, and
// the second write raised SIGPIPE in the program, which died (exit 141). Now the monitor writes
// without signals, tries again and then goes on without keepalives, and does not call the server
// dead.
TEST(LivenessMonitorTest, APortThatClosesBeforeTakingTheConnectionRaisesNoSignal) {
  ASSERT_EQ(signal(SIGPIPE, SIG_DFL), SIG_DFL) << "the test needs SIGPIPE's default action";
  Listener port;
  std::atomic<int> accepted{0};
  std::atomic<bool> stop{false};
  std::thread server([&] {
    while (!stop.load()) {
      const int fd = accept4(port.fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      ++accepted;
      const std::string nonce(kKeepaliveNonceBytes, 'n');
      (void)!write(fd, nonce.data(), nonce.size());
      close(fd);  // before reading anything: the connection was never taken
    }
  });
  std::atomic<int> silent{0};
  std::unique_ptr<LivenessMonitor> monitor;
  ASSERT_TRUE(LivenessMonitor::Start(
                  "127.0.0.1", port.port, 42, std::string(kKeepaliveSecretBytes, 's'), 100,
                  [&](const std::string&) { ++silent; }, &monitor)
                  .ok());
  // The monitor tries a few times (50 ms more each) and then gives up; 2 s covers all of it.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  monitor.reset();
  stop = true;
  shutdown(port.fd, SHUT_RDWR);
  server.join();
  EXPECT_GE(accepted.load(), 2) << "the monitor did not try again";
  EXPECT_EQ(silent.load(), 0) << "a connection never taken called the server dead";
}

}  // namespace
}  // namespace rgpu::client
