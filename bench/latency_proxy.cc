// latency_proxy: a TCP relay that adds a fixed delay in each direction, to measure programs as if
// their server were far away (issue 21: the chatty workload and samples at 1 ms and 10 ms round
// trips). Every connection accepted on --listen is relayed to --to; each chunk of bytes read on
// one side is written to the other --delay-ms after it was read (a round trip gains twice the
// delay). Bandwidth is not limited, but at most --window-mib are held per direction (a full
// window stops reading, as a real link's bandwidth-delay product would).
//
//   latency_proxy --listen 127.0.0.1:0 --to 127.0.0.1:7000 --delay-ms 5 [--port-file FILE]
//
// It relays byte streams only: a transport whose connections all go to the address it was given
// works through it (rgpu's sock://, LUPINE's HTTP/2); UCX's tcp:// does not (its data connections
// go to addresses the peers exchange, not through the relay). Runs until killed. Prints one line
// per connection to stderr when --verbose.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// HOST:PORT into its parts; false when malformed.
bool SplitHostPort(const std::string& text, std::string* host, std::string* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return false;
  *host = text.substr(0, colon);
  *port = text.substr(colon + 1);
  return true;
}

// A connected or listening TCP socket for HOST:PORT, or -1 (with the reason on stderr).
int OpenSocket(const std::string& address, bool listen_on) {
  std::string host, port;
  if (!SplitHostPort(address, &host, &port)) {
    fprintf(stderr, "latency_proxy: %s is not HOST:PORT\n", address.c_str());
    return -1;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = listen_on ? AI_PASSIVE : 0;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    fprintf(stderr, "latency_proxy: %s: %s\n", address.c_str(), gai_strerror(rc));
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    bool ok;
    if (listen_on) {
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      ok = bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 64) == 0;
    } else {
      ok = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    if (!ok) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0)
    fprintf(stderr, "latency_proxy: cannot %s %s\n", listen_on ? "listen on" : "reach",
            address.c_str());
  return fd;
}

// One direction of a relayed connection: a reader thread stamps what it reads, a writer thread
// writes each chunk once its time has come.
class DelayedPipe {
 public:
  DelayedPipe(int from, int to, Clock::duration delay, size_t window)
      : from_(from), to_(to), delay_(delay), window_(window) {}

  // Runs both threads; returns when the source has closed and everything has been written, or
  // either side failed. Then the destination's write side is shut down.
  void Run() {
    std::thread writer([this] { Write(); });
    Read();
    writer.join();
    shutdown(to_, SHUT_WR);
  }

 private:
  struct Chunk {
    Clock::time_point due;
    std::string bytes;
  };

  void Read() {
    std::vector<char> buffer(256 << 10);
    for (;;) {
      const ssize_t got = read(from_, buffer.data(), buffer.size());
      const auto now = Clock::now();
      std::unique_lock<std::mutex> lock(mu_);
      if (got <= 0 || failed_) {
        ended_ = true;
        if (got < 0) failed_ = true;
        cv_.notify_all();
        return;
      }
      chunks_.push_back({now + delay_, std::string(buffer.data(), static_cast<size_t>(got))});
      held_ += static_cast<size_t>(got);
      cv_.notify_all();
      cv_.wait(lock, [&] { return held_ < window_ || failed_; });
    }
  }

  void Write() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return !chunks_.empty() || ended_ || failed_; });
      if (failed_ || chunks_.empty()) return;  // failed, or ended with nothing left
      const Clock::time_point due = chunks_.front().due;
      if (Clock::now() < due) {
        cv_.wait_until(lock, due, [&] { return failed_; });
        if (failed_) return;
        continue;
      }
      Chunk chunk = std::move(chunks_.front());
      chunks_.pop_front();
      lock.unlock();
      size_t done = 0;
      while (done < chunk.bytes.size()) {
        const ssize_t put = write(to_, chunk.bytes.data() + done, chunk.bytes.size() - done);
        if (put <= 0) break;
        done += static_cast<size_t>(put);
      }
      lock.lock();
      held_ -= chunk.bytes.size();
      cv_.notify_all();
      if (done < chunk.bytes.size()) {
        failed_ = true;
        return;
      }
    }
  }

  const int from_, to_;
  const Clock::duration delay_;
  const size_t window_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Chunk> chunks_;  // GUARDED_BY(mu_)
  size_t held_ = 0;           // GUARDED_BY(mu_): bytes in chunks_ and being written
  bool ended_ = false;        // GUARDED_BY(mu_): the source closed
  bool failed_ = false;       // GUARDED_BY(mu_)
};

// Relays one accepted connection until both directions have ended.
void Relay(int client, std::string upstream, Clock::duration delay, size_t window, bool verbose) {
  const int server = OpenSocket(upstream, false);
  if (server < 0) {
    close(client);
    return;
  }
  const int one = 1;
  setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  DelayedPipe up(client, server, delay, window), down(server, client, delay, window);
  std::thread down_thread([&] { down.Run(); });
  up.Run();
  down_thread.join();
  if (verbose) fprintf(stderr, "latency_proxy: connection closed\n");
  close(client);
  close(server);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"a TCP relay adding a delay in each direction"};
  std::string listen_address = "127.0.0.1:0", upstream, port_file;
  double delay_ms = 0;
  size_t window_mib = 64;
  bool verbose = false;
  app.add_option("--listen", listen_address, "HOST:PORT to accept on (port 0: any)");
  app.add_option("--to", upstream, "HOST:PORT to relay to")->required();
  app.add_option("--delay-ms", delay_ms, "delay added in each direction, in milliseconds")
      ->check(CLI::Range(0.0, 60000.0));
  app.add_option("--window-mib", window_mib, "most bytes held per direction, in MiB")
      ->check(CLI::Range(1, 4096));
  app.add_option("--port-file", port_file, "write the listening HOST:PORT here once listening");
  app.add_flag("--verbose", verbose, "a line per closed connection");
  CLI11_PARSE(app, argc, argv);
  signal(SIGPIPE, SIG_IGN);

  const int listener = OpenSocket(listen_address, true);
  if (listener < 0) return 1;
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &length);
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (bound.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&bound);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (bound.ss_family == AF_INET6) {
    auto* in = reinterpret_cast<sockaddr_in6*>(&bound);
    inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof host);
    port = ntohs(in->sin6_port);
  }
  const std::string where = std::string(host) + ":" + std::to_string(port);
  if (!port_file.empty()) {
    const std::string temporary = port_file + ".part";
    FILE* f = fopen(temporary.c_str(), "w");
    if (f == nullptr || fprintf(f, "%s\n", where.c_str()) < 0 || fclose(f) != 0 ||
        rename(temporary.c_str(), port_file.c_str()) != 0) {
      fprintf(stderr, "latency_proxy: cannot write %s\n", port_file.c_str());
      return 1;
    }
  }
  if (verbose)
    fprintf(stderr, "latency_proxy: %s -> %s, %.3f ms each way\n", where.c_str(), upstream.c_str(),
            delay_ms);
  const auto delay = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(delay_ms));
  for (;;) {
    const int client = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      perror("latency_proxy: accept");
      return 1;
    }
    std::thread(Relay, client, upstream, delay, window_mib << 20, verbose).detach();
  }
}
