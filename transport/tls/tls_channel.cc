#include "transport/tls/tls_channel.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "common/library_path.h"
#include "transport/socket/socket_channel.h"
#include "transport/socket/tcp_socket.h"
#include "transport/tls/tls_ops.h"

// Defined when the program links rgpu_tls; otherwise the table comes from librgpu-tls.so.
extern "C" const rgpu::tls::Ops* rgpu_tls_ops() __attribute__((weak));

namespace rgpu {
namespace {

constexpr int kConnectTimeoutMs = 10000;
constexpr int kHandshakeTimeoutMs = 10000;
constexpr char kLibrary[] = "librgpu-tls.so";

// The TLS operations in *out, or kUnavailable saying what is missing. Thread-safe; loads once.
Status LoadOps(const tls::Ops** out) {
  static std::once_flag once;
  static const tls::Ops* ops = nullptr;
  static std::string error;
  std::call_once(once, [] {
    if (rgpu_tls_ops != nullptr) {
      ops = rgpu_tls_ops();
      return;
    }
    // Beside the library holding this code (the client runtime); for a program, in its
    // build tree's or install tree's library folder.
    const std::string beside = BesideLibraryOf(reinterpret_cast<const void*>(&LoadOps), kLibrary);
    const std::string folder = beside.substr(0, beside.size() - (sizeof kLibrary - 1));
    void* handle = nullptr;
    std::string tried;
    for (const std::string& path :
         {beside, folder + "../lib/" + kLibrary, folder + "../lib/rgpu/" + kLibrary}) {
      handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) break;
      tried += std::string(tried.empty() ? "" : "; ") + dlerror();
    }
    if (handle == nullptr) {
      error = std::string("tls:// needs ") + kLibrary + " (" + tried + ")";
      return;
    }
    using Get = const tls::Ops* (*)();
    auto get = reinterpret_cast<Get>(dlsym(handle, "rgpu_tls_ops"));
    const tls::Ops* table = get != nullptr ? get() : nullptr;
    if (table == nullptr || table->version != tls::kOpsVersion) {
      error = beside + " is not this build's TLS library";
      return;
    }
    ops = table;
  });
  *out = ops;
  return ops != nullptr ? Status::Ok() : Unavailable(error);
}

class TlsListener final : public Listener {
 public:
  TlsListener(std::unique_ptr<Listener> sockets, std::string pin)
      : sockets_(std::move(sockets)), pin_(std::move(pin)) {}
  Status WaitConnection(int timeout_ms, std::unique_ptr<PendingConnection>* out) override {
    return sockets_->WaitConnection(timeout_ms, out);
  }
  uint16_t port() const override { return sockets_->port(); }
  std::string pin() const override { return pin_; }

 private:
  const std::unique_ptr<Listener> sockets_;
  const std::string pin_;
};

}  // namespace

Status ConnectTlsChannel(const TransportUrl& url, const ChannelOptions& options,
                         std::unique_ptr<Channel>* out) {
  const tls::Ops* ops = nullptr;
  if (Status s = LoadOps(&ops); !s.ok()) return s;
  tls::ClientConfig config;
  config.host = url.host;
  config.pin = url.pin;
  if (const char* ca = getenv("RGPU_TLS_CA"); ca != nullptr) config.ca_file = ca;
  config.timeout_ms = kConnectTimeoutMs;
  int fd = -1;
  std::string peer;
  if (Status s = ConnectTcpSocket(url, kConnectTimeoutMs, &fd, &peer); !s.ok()) return s;
  std::unique_ptr<ByteStream> stream;
  if (Status s = ops->connect(fd, config, &stream); !s.ok()) {
    return Status(s.code(), peer + ": " + s.message());
  }
  *out = MakeStreamChannel(std::move(stream), options, peer, "tls");
  return Status::Ok();
}

Status CreateTlsListener(const TransportUrl& url, const ListenerOptions& options,
                         std::unique_ptr<Listener>* out) {
  const tls::Ops* ops = nullptr;
  if (Status s = LoadOps(&ops); !s.ok()) return s;
  tls::ServerConfig config;
  config.key_file = options.tls_key_file;
  config.certificate_file = options.tls_certificate_file;
  std::shared_ptr<tls::ServerIdentity> identity;
  if (Status s = ops->make_identity(config, &identity); !s.ok()) return s;
  std::unique_ptr<Listener> sockets;
  Status s = CreateTcpSocketListener(
      url,
      [ops, identity](int fd, const std::string& peer, const ChannelOptions& channel_options,
                      std::unique_ptr<Channel>* channel) {
        std::unique_ptr<ByteStream> stream;
        if (Status s = ops->accept(fd, *identity, kHandshakeTimeoutMs, &stream); !s.ok()) {
          return Status(s.code(), peer + ": " + s.message());
        }
        *channel = MakeStreamChannel(std::move(stream), channel_options, peer, "tls");
        return Status::Ok();
      },
      &sockets);
  if (!s.ok()) return s;
  *out = std::make_unique<TlsListener>(std::move(sockets), identity->pin());
  return Status::Ok();
}

}  // namespace rgpu
