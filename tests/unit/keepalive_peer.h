// A client's side of the server's keepalive port, by hand (server/liveness_service.h), for server
// tests: connect, read the port's nonce, announce a session's key with its proof, see a
// connection closed.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "proto/keepalive_proof.h"

namespace rgpu::test {

// A TCP connection to 127.0.0.1:port from local address `source` (any 127.x.y.z); -1 on failure.
inline int ConnectFrom(const char* source, uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in local = {};
  local.sin_family = AF_INET;
  inet_pton(AF_INET, source, &local.sin_addr);
  sockaddr_in server = {};
  server.sin_family = AF_INET;
  server.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &server.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof server) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The nonce the keepalive port sends a connection first; empty when none came within 5 s.
inline std::string Nonce(int fd) {
  std::string nonce;
  while (nonce.size() < kKeepaliveNonceBytes) {
    pollfd p = {fd, POLLIN, 0};
    char buf[kKeepaliveNonceBytes];
    if (poll(&p, 1, 5000) <= 0) return "";
    const ssize_t n = read(fd, buf, kKeepaliveNonceBytes - nonce.size());
    if (n <= 0) return "";
    nonce.append(buf, n);
  }
  return nonce;
}

// Sends an announcement of `key` with `proof` (what an observer of the port could replay).
inline bool AnnounceWithProof(int fd, uint64_t key, const std::string& proof) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(key >> (8 * i)));
  bytes += proof;
  return write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
}

// Reads the connection's nonce and announces `key` with its proof under `secret`; the proof
// sent is stored in *proof when given.
inline bool Announce(int fd, uint64_t key, const std::string& secret,
                     std::string* proof = nullptr) {
  const std::string nonce = Nonce(fd);
  if (nonce.empty()) return false;
  const std::string sent = KeepaliveProof(secret, nonce, key);
  if (proof != nullptr) *proof = sent;
  return AnnounceWithProof(fd, key, sent);
}

// True once the server has closed `fd` (read returns 0 or an error), within `ms`; what it sent
// before (its nonce) is read past.
inline bool ClosedWithin(int fd, int ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd p = {fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char buf[64];
    if (read(fd, buf, sizeof buf) <= 0) return true;
  }
}

}  // namespace rgpu::test
