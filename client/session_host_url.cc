#include "client/session_host_url.h"

namespace rgpu::client {

Status SessionHostUrl(const TransportUrl& server, const wire::Welcome& w, TransportUrl* host) {
  if (w.redirect_port() == 0 || w.redirect_port() > 65535) {
    return ProtocolError("a redirect to port " + std::to_string(w.redirect_port()));
  }
  *host = server;
  host->port = static_cast<uint16_t>(w.redirect_port());
  if (server.scheme == TransportUrl::Scheme::kTls) {
    if (w.redirect_pin().empty()) {
      return ProtocolError("the server redirected to a session's process without its key's pin");
    }
    host->pin = w.redirect_pin();
  }
  return Status::Ok();
}

}  // namespace rgpu::client
