// channel_bench: rgpu's transport layer alone (Channel over UCX, no protocol, no backend), so
// that the cost of each layer above the floor can be told apart: the floor (ucx_perftest), this,
// and `rgpu bench` (the whole stack). An echo server runs in a child process (two processes, as
// the floor and rgpu have); the client sends a small message (the size of a call) and waits for
// a small reply, and sends large payloads that the server takes as rendezvous data. Prints a
// table and a JSON object of medians.
//   channel_bench [--transport tcp|shm|sock] [--quick] [--setups N]
// --setups N: instead, N connections one after another, each timed from the connect through its
// first round trip (a session's set-up at the transport), against one listener.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <csignal>
#include <vector>

#include "transport/channel.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The child: listens, tells the parent its port through `port_fd`, and echoes each message's
// header (payloads are received and dropped) until the client leaves, for `connections`
// connections one after another.
int EchoServer(const std::string& transport, int port_fd, const rgpu::ChannelOptions& options,
               int connections) {
  rgpu::TransportUrl url;
  std::unique_ptr<rgpu::Listener> listener;
  rgpu::Status s = rgpu::TransportUrl::Parse(transport + "://127.0.0.1:0", &url);
  if (s.ok()) s = rgpu::CreateListener(url, &listener);
  const uint16_t port = s.ok() ? listener->port() : 0;
  if (write(port_fd, &port, sizeof port) != sizeof port || port == 0) return 1;
  char pin[64] = {};  // tls://: the listener's key, which the client pins
  const std::string listener_pin = listener->pin();
  memcpy(pin, listener_pin.data(), std::min(listener_pin.size(), sizeof pin));
  if (write(port_fd, pin, sizeof pin) != sizeof pin) return 1;
  for (int i = 0; i < connections; ++i) {
    std::unique_ptr<rgpu::PendingConnection> pending;
    if (!listener->WaitConnection(10000, &pending).ok()) return 1;
    std::unique_ptr<rgpu::Channel> ch;
    if (!pending->Accept(options, &ch).ok()) return 1;
    rgpu::ReceivedMessage m;
    const std::string reply = "reply-08";  // about the size of a Reply envelope
    while (ch->Receive(10000, &m).ok()) {
      if (!ch->Send(reply, nullptr, 0).ok()) break;
    }
  }
  return 0;
}

// Each of `n` connections to `url`, timed: the connect, then the connect and the first round trip
// together (in milliseconds). The echo server serves them one after another.
int MeasureSetUps(const rgpu::TransportUrl& url, const rgpu::ChannelOptions& options, int n,
                  const std::string& transport) {
  std::vector<double> connect_ms, first_ms;
  const std::string request(24, 'c');
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    std::unique_ptr<rgpu::Channel> ch;
    rgpu::Status s = rgpu::ConnectChannel(url, options, &ch);
    const auto t1 = Clock::now();
    rgpu::ReceivedMessage m;
    if (s.ok()) s = ch->Send(request, nullptr, 0);
    if (s.ok()) s = ch->Receive(10000, &m);
    const auto t2 = Clock::now();
    if (!s.ok()) {
      fprintf(stderr, "channel_bench: set-up %d: %s\n", i, s.ToString().c_str());
      return 1;
    }
    connect_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    first_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
  }
  auto range = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    char text[64];
    snprintf(text, sizeof text, "%.2f [%.2f .. %.2f]", v[v.size() / 2], v.front(), v.back());
    return std::string(text);
  };
  printf("channel_bench over %s: %d set-ups (median [min .. max], ms)\n", transport.c_str(), n);
  printf("  %-36s %s\n", "connect", range(connect_ms).c_str());
  printf("  %-36s %s\n", "connect and first round trip", range(first_ms).c_str());
  printf("{\"transport\": \"%s\", \"connect_ms\": %.3f, \"setup_ms\": %.3f}\n", transport.c_str(),
         Median(connect_ms), Median(first_ms));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rgpu's transport layer alone: round trip and bulk bandwidth"};
  std::string transport = "shm";
  bool quick = false;
  app.add_option("--transport", transport, "tcp, shm, sock or tls")
      ->check(CLI::IsMember({"tcp", "shm", "sock", "tls"}));
  app.add_flag("--quick", quick, "fewer repetitions");
  int setups = 0;
  app.add_option("--setups", setups, "time N connections' set-up instead")
      ->check(CLI::Range(1, 10000));
  rgpu::ChannelOptions options;
  app.add_option("--poll-us", options.poll_us,
                 "microseconds each side busy-polls before it sleeps (rgpu-server --poll-us)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  // The server process is forked before this process starts UCX.
  int fds[2];
  if (pipe(fds) != 0) return 1;
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    _exit(EchoServer(transport, fds[1], options, setups > 0 ? setups : 1));
  }
  close(fds[1]);
  uint16_t port = 0;
  char pin[64] = {};
  if (child < 0 || read(fds[0], &port, sizeof port) != sizeof port || port == 0 ||
      read(fds[0], pin, sizeof pin) != sizeof pin) {
    fprintf(stderr, "channel_bench: the echo server did not start\n");
    return 1;
  }
  close(fds[0]);
  rgpu::TransportUrl url;
  rgpu::Status s = rgpu::TransportUrl::Parse(transport + "://127.0.0.1:0", &url);
  url.port = port;
  url.pin = std::string(pin, strnlen(pin, sizeof pin));
  if (s.ok() && setups > 0) {
    const int rc = MeasureSetUps(url, options, setups, transport);
    if (rc != 0) kill(child, SIGTERM);  // it would wait out its timeouts
    waitpid(child, nullptr, 0);
    return rc;
  }
  std::unique_ptr<rgpu::Channel> ch;
  if (s.ok()) s = rgpu::ConnectChannel(url, options, &ch);
  if (!s.ok()) {
    fprintf(stderr, "channel_bench: %s\n", s.ToString().c_str());
    kill(child, SIGTERM);
    waitpid(child, nullptr, 0);
    return 1;
  }
  const std::string request(24, 'c');  // about the size of a Call envelope
  rgpu::ReceivedMessage m;
  auto round_trip = [&](const void* payload, size_t size) {
    return ch->Send(request, payload, size).ok() && ch->Receive(10000, &m).ok();
  };

  const int reps = quick ? 3 : 5, n = quick ? 20000 : 200000;
  std::vector<double> rtt;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      if (!round_trip(nullptr, 0)) return 1;
    }
    rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n);
  }
  const size_t big = size_t{64} << 20;
  std::vector<char> payload(big, 1);
  std::vector<double> bw;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    if (!round_trip(payload.data(), big)) return 1;
    bw.push_back((big / double(1 << 20)) /
                 std::chrono::duration<double>(Clock::now() - t0).count());
  }
  ch.reset();
  waitpid(child, nullptr, 0);

  const double rtt_us = Median(rtt), bw_mibps = Median(bw);
  printf("channel_bench over %s (medians of %d runs)\n", transport.c_str(), reps);
  printf("  %-36s %10.2f\n", "small message round trip (us)", rtt_us);
  printf("  %-36s %10.0f\n", "64 MiB payload, sent and answered (MiB/s)", bw_mibps);
  printf("{\"transport\": \"%s\", \"channel_rtt_us\": %.4f, \"channel_64MiB_MiBps\": %.1f}\n",
         transport.c_str(), rtt_us, bw_mibps);
  return 0;
}
