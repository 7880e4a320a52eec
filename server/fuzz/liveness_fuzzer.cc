// libFuzzer target: the server's keepalive port (LivenessService) against arbitrary peers.
//
// One service runs for the whole fuzzing run with a few admitted session keys. Each input is a
// script of steps: open a connection (from one of several loopback source addresses), send
// bytes taken from the input (or an announcement of an admitted key, or of a key of a session
// that ended, with the proof of the connection's nonce or a wrong one), close a connection, admit
// or forget a key, watch one. After each input a tenant with a fresh admitted key must still get
// its keepalive echoed, and every connection is closed.
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

#include "proto/crypto.h"
#include "proto/keepalive_proof.h"
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

// The secret the fuzzer's sessions prove on the port.
std::string SecretOf(uint64_t key) { return std::string(rgpu::kKeepaliveSecretBytes, 'a' + key); }

// The nonce the service sent on `fd`, waiting up to `ms` for it; as much as came when it is late.
std::string ReadNonce(int fd, int ms) {
  std::string nonce;
  while (nonce.size() < rgpu::kKeepaliveNonceBytes) {
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, ms) != 1) break;
    char buf[rgpu::kKeepaliveNonceBytes];
    const ssize_t n = read(fd, buf, rgpu::kKeepaliveNonceBytes - nonce.size());
    if (n <= 0) break;
    nonce.append(buf, n);
  }
  return nonce;
}

// A connection and the nonce read from it (empty until a step announces on it).
struct Connection {
  int fd = -1;
  std::string nonce;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  signal(SIGPIPE, SIG_IGN);  // writes to connections the service closed
  g_service = new rgpu::server::LivenessService();
  if (!g_service->Start("127.0.0.1").ok()) abort();
  for (uint64_t k = 1; k <= 4; ++k) g_service->Admit(k, SecretOf(k));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<Connection> fds;
  size_t i = 0;
  auto take = [&]() -> uint8_t { return i < size ? data[i++] : 0; };
  while (i < size && fds.size() < 64) {
    const uint8_t op = take() % 6;
    switch (op) {
      case 0: {
        const int fd = ConnectFrom(take() % 4);
        if (fd >= 0) fds.push_back({fd, ""});
        break;
      }
      case 1: {  // raw bytes on a connection
        if (fds.empty()) break;
        const int fd = fds[take() % fds.size()].fd;
        const size_t n = std::min<size_t>(take() % 48, size - i);
        if (n > 0) (void)!write(fd, data + i, n);
        i += n;
        break;
      }
      case 2: {  // a key (admitted, ended or unknown) with its proof, or a wrong one
        if (fds.empty()) break;
        Connection& c = fds[take() % fds.size()];
        if (c.nonce.size() < rgpu::kKeepaliveNonceBytes) c.nonce += ReadNonce(c.fd, 200);
        const uint64_t key = take() % 8;
        const uint8_t how = take();
        const std::string proof = how % 3 == 0 ? rgpu::KeepaliveProof(SecretOf(key), c.nonce, key)
                                  : how % 3 == 1
                                      ? rgpu::KeepaliveProof(SecretOf(key + 1), c.nonce, key)
                                      : std::string(how % 40, 'k');
        const std::string announce = KeyBytes(key) + proof;
        (void)!write(c.fd, announce.data(), announce.size());
        break;
      }
      case 3: {
        if (fds.empty()) break;
        const size_t k = take() % fds.size();
        CloseNow(fds[k].fd);
        fds.erase(fds.begin() + k);
        break;
      }
      case 4: {
        const uint64_t key = 1 + take() % 6;
        if (take() & 1) {
          g_service->Admit(key, SecretOf(key));
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
  // A tenant still gets in and is answered. Its key and secret are fresh and random, as a
  // session's are: the input cannot know them.
  std::random_device random;
  const uint64_t tenant_key = (uint64_t{random()} << 32) | random() | (uint64_t{1} << 63);
  const std::string tenant_secret = rgpu::RandomBytes(rgpu::kKeepaliveSecretBytes);
  g_service->Admit(tenant_key, tenant_secret);
  const int tenant = ConnectFrom(0);
  if (tenant < 0) {
    perror("liveness fuzzer: tenant connect");
    abort();
  }
  const std::string nonce = ReadNonce(tenant, 5000);
  if (nonce.size() != rgpu::kKeepaliveNonceBytes) {
    fprintf(stderr, "liveness fuzzer: the tenant's connection got no nonce\n");
    abort();
  }
  const std::string announce =
      KeyBytes(tenant_key) + rgpu::KeepaliveProof(tenant_secret, nonce, tenant_key) + "k";
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
  for (const Connection& c : fds) CloseNow(c.fd);
  // Let the service see the tenant's close before the next input announces the key again.
  for (int n = 0; n < 100 && g_service->connected() > 0; ++n) usleep(1000);
  return 0;
}
