// The kernel's TCP sockets: connecting, listening and accepting, shared by sock:// channels and
// by shm://, whose connection is set up over one (transport/ucx). Every descriptor returned is
// close-on-exec; the caller owns it and closes it.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "transport/channel.h"
#include "transport/url.h"

namespace rgpu {

// "host:port" ("[v6]:port") of a socket address; "?" if it cannot be told.
std::string DescribeSocketAddress(const sockaddr* address);

// TCP_NODELAY (every message goes out at once) and SO_KEEPALIVE on a connected socket.
void TuneTcpSocket(int fd);

// Connects to url's host and port (the scheme is not looked at) within timeout_ms. On success
// *fd is a connected, non-blocking, tuned socket and *peer the address it is connected to.
// kNotFound when the host does not resolve, kUnavailable when no address accepts.
Status ConnectTcpSocket(const TransportUrl& url, int timeout_ms, int* fd, std::string* peer);

// Listens on url's host and port (port 0: an ephemeral one): *fd is the listening socket and
// *port the port it is bound to.
Status ListenTcpSocket(const TransportUrl& url, int* fd, uint16_t* port);

// Waits up to timeout_ms (-1: without end) for a connection on the listening socket
// `listen_fd` and accepts it: *fd is non-blocking (not yet tuned), *peer its address.
// kTimeout when none came (or the wait was interrupted).
Status AcceptTcpSocket(int listen_fd, int timeout_ms, int* fd, std::string* peer);

// Makes a channel over `fd`, an accepted and tuned connection from `peer`, taking the socket over
// (closed with the channel, or at once on failure).
using TcpSocketChannelMaker = std::function<Status(
    int fd, const std::string& peer, const ChannelOptions& options, std::unique_ptr<Channel>* out)>;

// A Listener on url's host and port (port 0: an ephemeral one) whose connections become
// channels through `make` when accepted (TuneTcpSocket first); a connection never accepted is
// closed. sock:// and shm:// listen so.
Status CreateTcpSocketListener(const TransportUrl& url, TcpSocketChannelMaker make,
                               std::unique_ptr<Listener>* out);

// The user owning the other end of the connected TCP socket `fd`, when that end is on this host
// (in this network namespace): the kernel's table of TCP sockets (/proc/net/tcp, tcp6) lists it
// with its owner. kNotFound when no local socket is the other end (the peer is on another host,
// or has gone).
Status LocalPeerUser(int fd, uid_t* user);

}  // namespace rgpu
