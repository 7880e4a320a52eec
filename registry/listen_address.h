// Whether a registry listen address is reachable from this machine only. rgpu-registry serves
// plaintext gRPC only there (tests, a registry beside its CLI); anywhere else it needs TLS
// (--tls-cert/--tls-key) or the explicit --insecure-plaintext, since credentials and tokens
// travel in its calls.
#pragma once

#include <string>

namespace rgpu::registry {

// True when `listen` (HOST:PORT as gRPC takes it, "[V6]:PORT", or "unix:PATH") names only
// loopback addresses: a unix socket, or a host every address of which is in 127.0.0.0/8 or ::1.
// "0.0.0.0", "[::]", an empty host and a host that does not resolve are not loopback.
bool IsLoopbackListen(const std::string& listen);

}  // namespace rgpu::registry
