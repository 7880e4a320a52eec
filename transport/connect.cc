// ConnectChannel and CreateListener: the transport a URL's scheme names.
#include "transport/channel.h"
#include "transport/local/local_channel.h"
#include "transport/socket/socket_channel.h"
#include "transport/tls/tls_channel.h"
#include "transport/ucx/ucx_channel.h"

namespace rgpu {

Status ConnectChannel(const TransportUrl& url, const ChannelOptions& options,
                      std::unique_ptr<Channel>* out) {
  if (url.scheme == TransportUrl::Scheme::kLocal) return ConnectLocalChannel(url, options, out);
  if (url.scheme == TransportUrl::Scheme::kSock) return ConnectSocketChannel(url, options, out);
  if (url.scheme == TransportUrl::Scheme::kTls) return ConnectTlsChannel(url, options, out);
  return ucx::ConnectChannel(url, options, out);
}

Status CreateListener(const TransportUrl& url, const ListenerOptions& options,
                      std::unique_ptr<Listener>* out) {
  if (url.scheme == TransportUrl::Scheme::kLocal) return CreateLocalListener(url, out);
  if (url.scheme == TransportUrl::Scheme::kSock) return CreateSocketListener(url, out);
  if (url.scheme == TransportUrl::Scheme::kTls) return CreateTlsListener(url, options, out);
  return ucx::CreateListener(url, out);
}

}  // namespace rgpu
