// A connected, non-blocking stream of bytes under a socket channel: the kernel's TCP socket as it
// is (sock://) or TLS over it (tls://, transport/tls). The channel (socket_channel.cc) frames
// messages on it and waits on fd() with poll.
//
// Threading: one thread at a time, as the channel that owns it; fd() may be shut down from any
// thread to end every wait.
#pragma once

#include <poll.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <string>

namespace rgpu {

class ByteStream {
 public:
  virtual ~ByteStream() = default;

  // Writes from the first `count` parts of `parts` without waiting. Returns how many bytes went
  // (from the front), or -1 with errno set: EAGAIN when nothing can go now (then wait for
  // blocked_on() on fd() and call again with the same bytes), anything else when the stream is
  // broken (error() says why).
  virtual ssize_t Write(const iovec* parts, int count) = 0;

  // Reads up to `size` bytes into `to` without waiting. Returns how many (> 0), 0 when the peer
  // closed the stream, or -1 with errno: EAGAIN when nothing can be read before fd() shows
  // blocked_on(), anything else when the stream is broken (error() says why).
  virtual ssize_t Read(void* to, size_t size) = 0;

  // The poll events that the last Write or Read answered with EAGAIN waits for (TLS may need to
  // write before it can read, and the reverse).
  virtual short blocked_on() const = 0;

  // Whether fd()'s receive low-water mark (SO_RCVLOWAT) counts the bytes Read returns; false when
  // the socket carries more than the stream's bytes (TLS records), so that a mark would wait for
  // bytes that never come.
  virtual bool low_water_counts_bytes() const = 0;

  // Why the stream broke (after a -1 other than EAGAIN, or a 0), when it knows more than errno.
  virtual std::string error() const = 0;

  // What the stream is, for Channel::Describe ("a kernel TCP socket", "TLS 1.3 ...").
  virtual std::string Describe() const = 0;

  // The connected socket, owned by the stream (closed with it).
  virtual int fd() const = 0;
};

}  // namespace rgpu
