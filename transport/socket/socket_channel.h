// The kernel's TCP sockets as a Channel (sock://HOST:PORT): one connection per channel, every
// message framed as a 12-byte prefix (header size, payload size) then the header and the
// payload, written with one writev and read straight into its destination. Set-up is one TCP
// connect (no transport negotiation), and a round trip is one send and one receive each way, so
// it suits links where UCX's connection set-up or per-message overhead shows (high latency,
// short-lived programs). Post writes what the socket takes at once and queues the rest (the
// payload stays the caller's until Flush); Send, Flush and every wait to receive write the
// queue out, so a receiver that does not read holds its sender back through TCP's own flow
// control. Drain returns once everything is written: the kernel delivers a closed socket's data.
//
// Threading as Channel's: one thread at a time; Abandon from any thread (it shuts the socket
// down, which ends every wait on it).
#pragma once

#include <memory>

#include "transport/channel.h"
#include "transport/socket/byte_stream.h"

namespace rgpu {

// Connects to url (scheme sock) within a bounded time.
Status ConnectSocketChannel(const TransportUrl& url, const ChannelOptions& options,
                            std::unique_ptr<Channel>* out);

// Listens on url (scheme sock; port 0: an ephemeral port).
Status CreateSocketListener(const TransportUrl& url, std::unique_ptr<Listener>* out);

// A channel with sock://'s framing over `stream` (TLS's, transport/tls), connected to `peer`;
// `scheme` names it in Describe.
std::unique_ptr<Channel> MakeStreamChannel(std::unique_ptr<ByteStream> stream,
                                           const ChannelOptions& options, const std::string& peer,
                                           const std::string& scheme);

}  // namespace rgpu
