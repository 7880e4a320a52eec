#include "transport/url.h"

#include <cctype>
#include <cstdlib>

namespace rgpu {

Status TransportUrl::Parse(const std::string& text, TransportUrl* out) {
  TransportUrl url;
  std::string rest;
  if (text.rfind("tcp://", 0) == 0) {
    url.scheme = Scheme::kTcp;
    rest = text.substr(6);
  } else if (text.rfind("shm://", 0) == 0) {
    url.scheme = Scheme::kShm;
    rest = text.substr(6);
  } else if (text.rfind("sock://", 0) == 0) {
    url.scheme = Scheme::kSock;
    rest = text.substr(7);
  } else if (text.rfind("tls://", 0) == 0) {
    url.scheme = Scheme::kTls;
    rest = text.substr(6);
    const size_t hash = rest.find('#');
    if (hash != std::string::npos) {
      url.pin = rest.substr(hash + 1);
      rest.resize(hash);
      if (url.pin.size() != 64) {
        return InvalidArgument("the pin of '" + text + "' is not 64 hexadecimal digits");
      }
      for (char& c : url.pin) {
        if (!isxdigit(static_cast<unsigned char>(c))) {
          return InvalidArgument("the pin of '" + text + "' is not 64 hexadecimal digits");
        }
        c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
      }
    }
  } else if (text.rfind("local://", 0) == 0) {
    url.scheme = Scheme::kLocal;
    url.host = text.substr(8);
    if (url.host.empty()) return InvalidArgument("missing name in '" + text + "'");
    for (char c : url.host) {
      if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
        return InvalidArgument("bad character in the name of '" + text + "'");
      }
    }
    *out = url;
    return Status::Ok();
  } else {
    return InvalidArgument("unknown transport in '" + text +
                           "' (expected tcp://, shm://, sock://, tls:// or local://)");
  }
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon + 1 >= rest.size()) {
    return InvalidArgument("missing port in '" + text + "'");
  }
  url.host = rest.substr(0, colon);
  if (url.host.size() >= 2 && url.host.front() == '[' && url.host.back() == ']') {
    url.host = url.host.substr(1, url.host.size() - 2);
  }
  if (url.host.empty()) return InvalidArgument("missing host in '" + text + "'");
  const std::string port_text = rest.substr(colon + 1);
  char* end = nullptr;
  long port = strtol(port_text.c_str(), &end, 10);
  if (*end != '\0' || port < 0 || port > 65535) {
    return InvalidArgument("bad port in '" + text + "'");
  }
  url.port = static_cast<uint16_t>(port);
  *out = url;
  return Status::Ok();
}

std::string TransportUrl::ToString() const {
  if (scheme == Scheme::kLocal) return "local://" + host;
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  const char* prefix = scheme == Scheme::kShm    ? "shm://"
                       : scheme == Scheme::kSock ? "sock://"
                       : scheme == Scheme::kTls  ? "tls://"
                                                 : "tcp://";
  return std::string(prefix) + h + ":" + std::to_string(port) + (pin.empty() ? "" : "#" + pin);
}

}  // namespace rgpu
