// libFuzzer target: the server's keepalive port (LivenessService) against arbitrary peers.
//
// One service runs for the whole fuzzing run with a few admitted session keys. Each input is a
// script of steps: open a connection (from one of several loopback source addresses), send
// bytes taken from the input (or an admitted key, or a key of a session that ended), close a
// connection, admit or forget a key, watch one. After each input a tenant with a fresh admitted
// key must still get its keepalive echoed, and every connection is closed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "server/liveness_service.h"

namespace {

rgpu::server::LivenessService* g_service = nullptr;

int ConnectFrom(int source) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in local = {};
  local.sin_family = AF_INET;
  local.sin_addr.s_addr = htonl(0x7f000001u + static_cast<uint32_t>(source));
  sockaddr_in server = {};
  server.sin_family = AF_INET;
  server.sin_port = htons(g_service->port());
  server.sin_addr.s_addr = htonl(0x7f000001u);
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof server) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Closes with a reset, leaving no TIME_WAIT behind (a long run would use up loopback's ports).
void CloseNow(int fd) {
  linger l = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  close(fd);
}

std::string KeyBytes(uint64_t key) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(key >> (8 * i));
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  signal(SIGPIPE, SIG_IGN);  // writes to connections the service closed
  g_service = new rgpu::server::LivenessService();
  if (!g_service->Start("127.0.0.1").ok()) abort();
  for (uint64_t k = 1; k <= 4; ++k) g_service->Admit(k);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<int> fds;
  size_t i = 0;
  auto take = [&]() -> uint8_t { return i < size ? data[i++] : 0; };
  while (i < size && fds.size() < 64) {
    const uint8_t op = take() % 6;
    switch (op) {
      case 0: {
        const int fd = ConnectFrom(take() % 4);
        if (fd >= 0) fds.push_back(fd);
        break;
      }
      case 1: {  // raw bytes on a connection
        if (fds.empty()) break;
        const int fd = fds[take() % fds.size()];
        const size_t n = std::min<size_t>(take() % 32, size - i);
        if (n > 0) (void)!write(fd, data + i, n);
        i += n;
        break;
      }
      case 2: {  // a key: admitted, ended or unknown
        if (fds.empty()) break;
        const int fd = fds[take() % fds.size()];
        const std::string key = KeyBytes(take() % 8);
        (void)!write(fd, key.data(), key.size());
        break;
      }
      case 3: {
        if (fds.empty()) break;
        const size_t k = take() % fds.size();
        CloseNow(fds[k]);
        fds.erase(fds.begin() + k);
        break;
      }
      case 4: {
        const uint64_t key = 1 + take() % 6;
        if (take() & 1) {
          g_service->Admit(key);
        } else {
          g_service->Forget(key);
        }
        break;
      }
      default:
        g_service->Watch(1 + take() % 6, take() % 3 * 50, [](const std::string&) {});
        break;
    }
  }
  // A tenant still gets in and is answered. Its key is fresh and random, as a session's is: the
  // input cannot know it (a peer that knows a live session's key can take its place first, which
  // docs/security.md states).
  std::random_device random;
  const uint64_t tenant_key = (uint64_t{random()} << 32) | random() | (uint64_t{1} << 63);
  g_service->Admit(tenant_key);
  const int tenant = ConnectFrom(0);
  if (tenant < 0) {
    perror("liveness fuzzer: tenant connect");
    abort();
  }
  const std::string announce = KeyBytes(tenant_key) + "k";
  if (write(tenant, announce.data(), announce.size()) != static_cast<ssize_t>(announce.size())) {
    abort();
  }
  pollfd p = {tenant, POLLIN, 0};
  char c = 0;
  if (poll(&p, 1, 5000) != 1 || read(tenant, &c, 1) != 1 || c != 'k') {
    fprintf(stderr, "liveness fuzzer: the tenant's keepalive was not answered\n");
    abort();
  }
  CloseNow(tenant);
  g_service->Forget(tenant_key);
  for (int fd : fds) CloseNow(fd);
  // Let the service see the tenant's close before the next input announces the key again.
  for (int n = 0; n < 100 && g_service->connected() > 0; ++n) usleep(1000);
  return 0;
}
