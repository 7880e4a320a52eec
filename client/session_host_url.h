// Where a server's redirect to a session's process (server/session_host.h) sends the client.
#pragma once

#include "common/status.h"
#include "proto/rgpu.pb.h"
#include "transport/url.h"

namespace rgpu::client {

// The URL of the session's process that `w` (a Welcome with redirect_port) names, into *host: the
// server's host and scheme (`server`) at the host's port. Over tls:// the host proves a key of its
// own, never the server's, and the client requires exactly that key: its pin (redirect_pin)
// came over the connection that proved the server's. A tls:// redirect that names no key is
// refused (kProtocol), and so is a port of 0 or past 65535.
Status SessionHostUrl(const TransportUrl& server, const wire::Welcome& w, TransportUrl* host);

}  // namespace rgpu::client
