// Transport addresses. Three schemes:
//   tcp://HOST:PORT  UCX over TCP sockets.
//   shm://HOST:PORT  client and server on one host: the connection is set up over a loopback
//                    socket and the data then moves through shared memory (UCX sm transports).
//   sock://HOST:PORT the kernel's TCP sockets directly (transport/socket): one connect to set up,
//                    one send and one receive per message.
//   tls://HOST:PORT[#PIN]  sock://'s framing over TLS 1.3 (transport/tls); PIN, 64 hex digits,
//                    is the SHA-256 of the server's public key, the only key a client accepts.
//   local://NAME     client and server in one process (transport/local): NAME is the listener's
//                    name, kept in `host`; there is no port.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace rgpu {

struct TransportUrl {
  enum class Scheme { kTcp, kShm, kSock, kLocal, kTls };
  Scheme scheme = Scheme::kTcp;
  std::string host;
  uint16_t port = 0;  // 0 on a listener: pick an ephemeral port
  std::string pin;    // tls://: the server key's SHA-256, lowercase hex ("": none pinned)

  // Parses "tcp://host:port", "shm://host:port", "sock://host:port", "tls://host:port" with an
  // optional "#pin" ("[v6addr]:port" is accepted for the host) or "local://name" (letters,
  // digits, "-", "_" and ".").
  static Status Parse(const std::string& text, TransportUrl* out);
  std::string ToString() const;
};

}  // namespace rgpu
