// librgpu-tls.so: TLS 1.3 streams on OpenSSL for tls:// channels (tls_ops.h).
//
// The socket's bytes move through a BIO of our own that sends with MSG_NOSIGNAL (OpenSSL's socket
// BIO writes with write(), which raises SIGPIPE in the program when the peer has gone). Records
// are read ahead into a 64 KiB buffer. Every OpenSSL call clears the thread's error queue first,
// so a failure's reason is its own.
#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "transport/tls/tls_ops.h"

namespace rgpu::tls {
namespace {

using Clock = std::chrono::steady_clock;

// Small messages (a call and its payload, up to a record) go as one record.
constexpr size_t kCoalesceBytes = 16 << 10;

// The reason of the oldest error in this thread's OpenSSL queue, or `fallback`.
std::string OpenSslError(const std::string& fallback) {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return fallback;
  char text[256];
  ERR_error_string_n(e, text, sizeof text);
  return text;
}

// The BIO: the socket's fd in the BIO's data.
int FdOf(BIO* b) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(b))); }

int BioWrite(BIO* b, const char* data, int size) {
  BIO_clear_retry_flags(b);
  const ssize_t n = send(FdOf(b), data, static_cast<size_t>(size), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_write(b);
  return static_cast<int>(n);
}

int BioRead(BIO* b, char* to, int size) {
  BIO_clear_retry_flags(b);
  const ssize_t n = recv(FdOf(b), to, static_cast<size_t>(size), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_read(b);
  return static_cast<int>(n);  // 0: the peer closed its end
}

long BioControl(BIO*, int command, long, void*) { return command == BIO_CTRL_FLUSH ? 1 : 0; }

int BioCreate(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

BIO_METHOD* SocketMethod() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "rgpu socket");
    if (m == nullptr) return m;
    BIO_meth_set_write(m, BioWrite);
    BIO_meth_set_read(m, BioRead);
    BIO_meth_set_ctrl(m, BioControl);
    BIO_meth_set_create(m, BioCreate);
    return m;
  }();
  return method;
}

// Lowercase hex SHA-256 of `key`'s DER SubjectPublicKeyInfo.
std::string PinOf(EVP_PKEY* key) {
  unsigned char* der = nullptr;
  const int length = i2d_PUBKEY(key, &der);
  if (length <= 0) return "";
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_length = 0;
  const bool ok = EVP_Digest(der, static_cast<size_t>(length), digest, &digest_length, EVP_sha256(),
                             nullptr) == 1;
  OPENSSL_free(der);
  if (!ok) return "";
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < digest_length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

class TlsStream final : public ByteStream {
 public:
  TlsStream(SSL* ssl, int fd) : ssl_(ssl), fd_(fd) {}
  ~TlsStream() override {
    ERR_clear_error();
    if (!broken_) SSL_shutdown(ssl_);  // close_notify, if the socket takes it now
    SSL_free(ssl_);
    ERR_clear_error();
    close(fd_);
  }

  ssize_t Write(const iovec* parts, int count) override {
    const char* data = static_cast<const char*>(parts[0].iov_base);
    size_t size = parts[0].iov_len;
    size_t total = 0;
    for (int i = 0; i < count; ++i) total += parts[i].iov_len;
    if (count > 1 && total <= kCoalesceBytes) {
      // The same bytes in the same record when a write that could not go is made again.
      scratch_.clear();
      for (int i = 0; i < count; ++i) {
        const char* p = static_cast<const char*>(parts[i].iov_base);
        scratch_.insert(scratch_.end(), p, p + parts[i].iov_len);
      }
      data = scratch_.data();
      size = total;
    }
    ERR_clear_error();
    const int n = SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(size, INT_MAX)));
    if (n > 0) return n;
    return Failed(n);
  }

  ssize_t Read(void* to, size_t size) override {
    ERR_clear_error();
    const int n = SSL_read(ssl_, to, static_cast<int>(std::min<size_t>(size, INT_MAX)));
    if (n > 0) return n;
    return Failed(n);
  }

  short blocked_on() const override { return blocked_on_; }
  bool low_water_counts_bytes() const override { return false; }
  std::string error() const override { return error_; }
  std::string Describe() const override {
    return std::string(SSL_get_version(ssl_)) + " (" + SSL_get_cipher_name(ssl_) +
           ") over a kernel TCP socket";
  }
  int fd() const override { return fd_; }

 private:
  // The answer of a Read or Write that moved nothing: -1 with errno, or 0 at the peer's end.
  ssize_t Failed(int result) {
    const int saved_errno = errno;
    switch (SSL_get_error(ssl_, result)) {
      case SSL_ERROR_WANT_READ:
        blocked_on_ = POLLIN;
        errno = EAGAIN;
        return -1;
      case SSL_ERROR_WANT_WRITE:
        blocked_on_ = POLLOUT;
        errno = EAGAIN;
        return -1;
      case SSL_ERROR_ZERO_RETURN:
        error_ = "TLS: the peer ended the session";
        broken_ = true;
        return 0;
      case SSL_ERROR_SYSCALL:
        broken_ = true;
        if (ERR_peek_error() == 0) {
          if (result == 0 || saved_errno == 0) {
            error_ = "TLS: the connection ended inside a record";
            return 0;
          }
          error_ = std::string("TLS: ") + strerror(saved_errno);
          errno = saved_errno;
          return -1;
        }
        [[fallthrough]];
      default:
        // A record that fails its authentication (bytes changed on the way), a protocol error.
        broken_ = true;
        error_ = "TLS: " + OpenSslError("failure");
        errno = EPROTO;
        return -1;
    }
  }

  SSL* const ssl_;
  const int fd_;
  short blocked_on_ = POLLIN;
  bool broken_ = false;
  std::string error_;
  std::vector<char> scratch_;  // a small message's parts, joined
};

// Runs SSL_do_handshake on `ssl` (non-blocking) until done, failed or `deadline`.
Status Handshake(SSL* ssl, int fd, Clock::time_point deadline) {
  for (;;) {
    ERR_clear_error();
    const int r = SSL_do_handshake(ssl);
    if (r == 1) return Status::Ok();
    const int saved_errno = errno;
    short events = 0;
    switch (SSL_get_error(ssl, r)) {
      case SSL_ERROR_WANT_READ:
        events = POLLIN;
        break;
      case SSL_ERROR_WANT_WRITE:
        events = POLLOUT;
        break;
      case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() == 0) {
          return Unavailable(std::string("TLS handshake: ") +
                             (r == 0 || saved_errno == 0 ? "the peer closed the connection"
                                                         : strerror(saved_errno)));
        }
        [[fallthrough]];
      default:
        return PermissionDenied("TLS handshake: " + OpenSslError("failed"));
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return Timeout("TLS handshake: the peer did not finish it in time");
    pollfd p = {fd, events, 0};
    if (poll(&p, 1, static_cast<int>(std::min<long>(left, INT_MAX))) < 0 && errno != EINTR) {
      return Unavailable(std::string("TLS handshake: poll: ") + strerror(errno));
    }
  }
}

// An SSL on `fd` for `ctx`, or nullptr.
SSL* NewSsl(SSL_CTX* ctx, int fd) {
  BIO_METHOD* method = SocketMethod();
  if (method == nullptr) return nullptr;
  SSL* ssl = SSL_new(ctx);
  BIO* bio = ssl != nullptr ? BIO_new(method) : nullptr;
  if (bio == nullptr) {
    SSL_free(ssl);
    return nullptr;
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  SSL_set_bio(ssl, bio, bio);  // the SSL owns the BIO
  return ssl;
}

// Settings both sides share: TLS 1.3 only, AES-128-GCM first (a quarter faster than
// AES-256-GCM here: 4.1 against 3.4 GB/s a core, `openssl speed`), partial writes, records read
// ahead.
void Configure(SSL_CTX* ctx) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_ciphersuites(
      ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, 64 << 10);
}

struct CtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
using CtxPtr = std::unique_ptr<SSL_CTX, CtxFree>;

Status Connect(int fd, const ClientConfig& config, std::unique_ptr<ByteStream>* out) {
  ERR_clear_error();
  CtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (ctx == nullptr) {
    close(fd);
    return Internal("TLS: " + OpenSslError("cannot make a client context"));
  }
  Configure(ctx.get());
  if (config.pin.empty()) {
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    const int loaded = config.ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx.get())
                                              : SSL_CTX_load_verify_locations(
                                                    ctx.get(), config.ca_file.c_str(), nullptr);
    if (loaded != 1) {
      close(fd);
      return InvalidArgument(
          "TLS: cannot load the CA certificates " +
          (config.ca_file.empty() ? std::string("of the system") : "of " + config.ca_file) + ": " +
          OpenSslError("unknown error"));
    }
  } else {
    // The key is pinned: the handshake proves the server holds it, which is checked after.
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
  }
  SSL* ssl = NewSsl(ctx.get(), fd);
  if (ssl == nullptr) {
    close(fd);
    return Internal("TLS: " + OpenSslError("cannot make a connection"));
  }
  auto stream = std::make_unique<TlsStream>(ssl, fd);  // owns ssl and fd from here
  const bool is_address = [&] {
    unsigned char buffer[16];
    return inet_pton(AF_INET, config.host.c_str(), buffer) == 1 ||
           inet_pton(AF_INET6, config.host.c_str(), buffer) == 1;
  }();
  if (config.pin.empty()) {
    const int set = is_address
                        ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), config.host.c_str())
                        : SSL_set1_host(ssl, config.host.c_str());
    if (set != 1) return InvalidArgument("TLS: cannot check the name '" + config.host + "'");
  }
  if (!is_address) SSL_set_tlsext_host_name(ssl, config.host.c_str());
  SSL_set_connect_state(ssl);
  const auto deadline = Clock::now() + std::chrono::milliseconds(config.timeout_ms);
  if (Status s = Handshake(ssl, fd, deadline); !s.ok()) {
    if (s.code() == Status::Code::kPermissionDenied && config.pin.empty()) {
      const long verdict = SSL_get_verify_result(ssl);
      if (verdict != X509_V_OK) {
        return PermissionDenied("TLS: the server's certificate is not trusted: " +
                                std::string(X509_verify_cert_error_string(verdict)));
      }
    }
    return s;
  }
  if (!config.pin.empty()) {
    X509* certificate = SSL_get0_peer_certificate(ssl);
    EVP_PKEY* key = certificate != nullptr ? X509_get0_pubkey(certificate) : nullptr;
    const std::string pin = key != nullptr ? PinOf(key) : "";
    if (pin.size() != config.pin.size() ||
        CRYPTO_memcmp(pin.data(), config.pin.data(), pin.size()) != 0) {
      return PermissionDenied("TLS: the server's key is not the one pinned in the URL (it has " +
                              (pin.empty() ? std::string("none") : pin) + ")");
    }
  } else if (SSL_get_verify_result(ssl) != X509_V_OK) {
    return PermissionDenied("TLS: the server's certificate is not trusted");
  }
  *out = std::move(stream);
  return Status::Ok();
}

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertificateFree {
  void operator()(X509* c) const { X509_free(c); }
};

class OpenSslIdentity final : public ServerIdentity {
 public:
  OpenSslIdentity(CtxPtr ctx, std::string pin) : ctx_(std::move(ctx)), pin_(std::move(pin)) {}
  std::string pin() const override { return pin_; }
  SSL_CTX* ctx() const { return ctx_.get(); }

 private:
  CtxPtr ctx_;
  const std::string pin_;
};

// A self-signed certificate for `key`, valid from an hour ago for ten years.
X509* SelfSigned(EVP_PKEY* key) {
  std::unique_ptr<X509, CertificateFree> c(X509_new());
  if (c == nullptr) return nullptr;
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return nullptr;
  serial[0] &= 0x7f;  // positive
  BIGNUM* number = BN_bin2bn(serial, sizeof serial, nullptr);
  const bool ok = number != nullptr && BN_to_ASN1_INTEGER(number, X509_get_serialNumber(c.get()));
  BN_free(number);
  X509_NAME* name = X509_get_subject_name(c.get());
  if (!ok || X509_set_version(c.get(), 2) != 1 ||
      X509_gmtime_adj(X509_getm_notBefore(c.get()), -3600) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(c.get()), 10L * 365 * 24 * 3600) == nullptr ||
      X509_set_pubkey(c.get(), key) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("rgpu-server"), -1, -1,
                                 0) != 1 ||
      X509_set_issuer_name(c.get(), name) != 1 || X509_sign(c.get(), key, nullptr) <= 0) {
    return nullptr;
  }
  return c.release();
}

Status MakeIdentity(const ServerConfig& config, std::shared_ptr<ServerIdentity>* out) {
  ERR_clear_error();
  std::unique_ptr<EVP_PKEY, KeyFree> key;
  if (config.key_file.empty()) {
    if (!config.certificate_file.empty()) {
      return InvalidArgument("a TLS certificate needs its key (--tls-key)");
    }
    key.reset(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
    if (key == nullptr) return Internal("TLS: cannot make a key: " + OpenSslError("?"));
  } else {
    FILE* f = fopen(config.key_file.c_str(), "re");
    if (f == nullptr) {
      return InvalidArgument("cannot read the TLS key " + config.key_file + ": " + strerror(errno));
    }
    key.reset(PEM_read_PrivateKey(f, nullptr, nullptr, nullptr));
    fclose(f);
    if (key == nullptr) {
      return InvalidArgument("no PEM private key in " + config.key_file + ": " + OpenSslError("?"));
    }
  }
  CtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (ctx == nullptr) return Internal("TLS: " + OpenSslError("cannot make a server context"));
  Configure(ctx.get());
  SSL_CTX_set_num_tickets(ctx.get(), 0);  // no resumption: nothing written after the handshake
  if (config.certificate_file.empty()) {
    std::unique_ptr<X509, CertificateFree> certificate(SelfSigned(key.get()));
    if (certificate == nullptr || SSL_CTX_use_certificate(ctx.get(), certificate.get()) != 1) {
      return Internal("TLS: cannot make a certificate: " + OpenSslError("?"));
    }
  } else if (SSL_CTX_use_certificate_chain_file(ctx.get(), config.certificate_file.c_str()) != 1) {
    return InvalidArgument("cannot use the TLS certificate " + config.certificate_file + ": " +
                           OpenSslError("?"));
  }
  if (SSL_CTX_use_PrivateKey(ctx.get(), key.get()) != 1 ||
      SSL_CTX_check_private_key(ctx.get()) != 1) {
    return InvalidArgument("the TLS certificate is not the key's: " + OpenSslError("?"));
  }
  const std::string pin = PinOf(key.get());
  if (pin.empty()) return Internal("TLS: cannot digest the public key");
  *out = std::make_shared<OpenSslIdentity>(std::move(ctx), pin);
  return Status::Ok();
}

Status Accept(int fd, const ServerIdentity& identity, int timeout_ms,
              std::unique_ptr<ByteStream>* out) {
  ERR_clear_error();
  SSL* ssl = NewSsl(static_cast<const OpenSslIdentity&>(identity).ctx(), fd);
  if (ssl == nullptr) {
    close(fd);
    return Internal("TLS: " + OpenSslError("cannot make a connection"));
  }
  auto stream = std::make_unique<TlsStream>(ssl, fd);
  SSL_set_accept_state(ssl);
  if (Status s = Handshake(ssl, fd, Clock::now() + std::chrono::milliseconds(timeout_ms));
      !s.ok()) {
    return s;
  }
  *out = std::move(stream);
  return Status::Ok();
}

const Ops kOps = {kOpsVersion, &Connect, &MakeIdentity, &Accept};

}  // namespace
}  // namespace rgpu::tls

extern "C" __attribute__((visibility("default"))) const rgpu::tls::Ops* rgpu_tls_ops() {
  return &rgpu::tls::kOps;
}
