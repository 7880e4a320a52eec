// tls://HOST:PORT[#PIN]: sock://'s framing (socket/socket_channel.h) over TLS 1.3, so that a
// session's calls, data and keepalive key cross an untrusted network unread and unchanged.
//
// A client checks the server it reaches: with a PIN (the lowercase hex SHA-256 of the server's
// public key, as rgpu-server prints its URL) only that key is accepted; without one the server's
// certificate must chain to a CA of RGPU_TLS_CA (a PEM file) or of the system and name HOST. A
// server uses ListenerOptions' key and certificate, or a key of its own for its life.
//
// The TLS code (OpenSSL) is tls_openssl.cc: linked into programs that list rgpu_tls (the server,
// the registry, rgpu-tool), and otherwise loaded from librgpu-tls.so beside the library holding
// this code (the client runtime) when a process first uses tls://, so that programs on other
// transports never load OpenSSL.
#pragma once

#include <memory>

#include "transport/channel.h"

namespace rgpu {

// Connects to url (scheme tls) and completes the handshake within a bounded time.
// kPermissionDenied when the server fails the checks above.
Status ConnectTlsChannel(const TransportUrl& url, const ChannelOptions& options,
                         std::unique_ptr<Channel>* out);

// Listens on url (scheme tls; port 0: an ephemeral one). Each connection's handshake runs in
// PendingConnection::Accept, on the accepting thread, bounded by 10 s. The listener's pin() is
// its key's.
Status CreateTlsListener(const TransportUrl& url, const ListenerOptions& options,
                         std::unique_ptr<Listener>* out);

}  // namespace rgpu
