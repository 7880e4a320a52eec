// The reachability probe: proof that whoever registered a server answers at the URL it gave.
// The registry connects to the URL with rgpu's own transport (transport/channel.h), sends
// wire::Envelope{reachability_probe{nonce}} with a fresh random nonce, and expects
// wire::Envelope{reachability_proof{mac}} with mac = HMAC-SHA256(secret, nonce), `secret` being
// what the server sent in its RegisterRequest (rgpu-server answers in Session::Handshake). A
// provider that names a URL where nothing listens, or where another party's server listens,
// cannot produce the proof.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"

namespace rgpu::registry {

// How the service probes (RegistryOptions::probe): OK once `url` answered with the right proof.
using ReachabilityProbe = std::function<Status(const std::string& url, const std::string& secret)>;

// Probes `url` over the transport. Connection attempts that fail are retried until
// `window_ms` has passed (a server may register before its accept loop runs); each attempt waits
// at most `attempt_ms` for the answer. kUnavailable when nothing answered, kPermissionDenied when
// the answer is not the proof. Blocks for at most about window_ms + attempt_ms.
Status ProbeReachability(const std::string& url, const std::string& secret, int window_ms = 10000,
                         int attempt_ms = 3000);

}  // namespace rgpu::registry
