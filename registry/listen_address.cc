#include "registry/listen_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

namespace rgpu::registry {

bool IsLoopbackListen(const std::string& listen) {
  if (listen.rfind("unix:", 0) == 0) return true;
  std::string host;
  if (!listen.empty() && listen[0] == '[') {
    const size_t close = listen.find(']');
    if (close == std::string::npos) return false;
    host = listen.substr(1, close - 1);
  } else {
    const size_t colon = listen.rfind(':');
    host = colon == std::string::npos ? listen : listen.substr(0, colon);
  }
  if (host.empty()) return false;
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return false;
  bool loopback = true;
  for (const addrinfo* a = res; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      loopback = loopback && (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
      loopback = loopback && IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    } else {
      loopback = false;
    }
  }
  freeaddrinfo(res);
  return loopback;
}

}  // namespace rgpu::registry
