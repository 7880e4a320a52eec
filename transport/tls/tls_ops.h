// The table of TLS operations that librgpu-tls.so exports (rgpu_tls_ops), TLS 1.3 on OpenSSL.
// The library is loaded by the first tls:// connection or listener of a process
// (tls_channel.cc), so that programs using other transports never load OpenSSL (about 1 ms of
// every start). Both sides are built from this tree with the same compiler: the table passes C++
// types.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "transport/socket/byte_stream.h"

namespace rgpu::tls {

// What a client checks of the server it reaches.
struct ClientConfig {
  std::string host;  // the URL's host: the name (or address) the certificate must carry
  std::string pin;   // lowercase hex SHA-256 of the server's public key (DER SubjectPublicKeyInfo);
                     // when set, only that key is accepted and certificates are not checked
  std::string ca_file;     // without a pin: PEM certificates of the CAs to trust ("": the system's)
  int timeout_ms = 10000;  // for the handshake
};

// A server's key and certificate, shared by its connections. Thread-safe.
class ServerIdentity {
 public:
  virtual ~ServerIdentity() = default;
  // The pin of the server's public key, as ClientConfig::pin.
  virtual std::string pin() const = 0;
};

// key_file: a PEM private key ("": a new Ed25519 key for this process's life); certificate_file:
// its PEM certificate chain ("": a self-signed certificate made for the key).
struct ServerConfig {
  std::string key_file;
  std::string certificate_file;
};

inline constexpr int kOpsVersion = 1;

struct Ops {
  int version;  // kOpsVersion
  // Runs the client's handshake on the connected non-blocking socket `fd` and checks the server
  // (pin, or certificate chain and host name). Takes `fd` over: it belongs to *out, or is closed
  // on failure (kUnavailable for the network, kPermissionDenied for a server that fails the
  // checks).
  Status (*connect)(int fd, const ClientConfig& config, std::unique_ptr<ByteStream>* out);
  // Loads or makes a server's identity.
  Status (*make_identity)(const ServerConfig& config, std::shared_ptr<ServerIdentity>* out);
  // Runs the server's handshake on the accepted non-blocking socket `fd` within timeout_ms.
  // Takes `fd` over as connect does.
  Status (*accept)(int fd, const ServerIdentity& identity, int timeout_ms,
                   std::unique_ptr<ByteStream>* out);
};

}  // namespace rgpu::tls

// The library's one export.
extern "C" const rgpu::tls::Ops* rgpu_tls_ops();
