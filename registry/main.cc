// rgpu-registry: admits providers' GPUs, places tenants' sessions on them, signs the session
// tokens servers check, and turns the servers' metering into bills. See docs/registry.md.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>

#include "common/log.h"
#include "proto/signed_token.h"
#include "registry/listen_address.h"
#include "registry/operator_key.h"
#include "registry/service.h"

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream file(path);
  if (!file) return false;
  std::stringstream text;
  text << file.rdbuf();
  *out = text.str();
  return true;
}

bool WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr) return false;
  const bool ok = fputs(text.c_str(), f) >= 0;
  return fclose(f) == 0 && ok && rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  rgpu::InitLogging("rgpu-registry", rgpu::LogLevel::kInfo);
  std::string listen = "127.0.0.1:7070", db_path = "registry.db", postgres, signing_key, public_key;
  std::string prices_path, tls_cert, tls_key, port_file, admin_key_file;
  bool insecure_plaintext = false;
  int64_t claim_timeout_s = 90;
  rgpu::registry::RegistryOptions options;
  CLI::App app{"rgpu-registry: providers, GPUs, placement, session tokens, metering and billing"};
  app.add_option("--listen", listen,
                 "gRPC address to listen on (HOST:PORT; port 0 picks one); anything but loopback "
                 "needs --tls-cert/--tls-key or --insecure-plaintext")
      ->capture_default_str();
  app.add_flag("--insecure-plaintext", insecure_plaintext,
               "serve plaintext on a non-loopback address: every key and token crosses the "
               "network readable (only behind a network you trust, e.g. a TLS-terminating proxy)");
  app.add_option("--db", db_path, "SQLite database file (WAL; created when missing)")
      ->capture_default_str();
  app.add_option("--postgres", postgres,
                 "use PostgreSQL instead of SQLite (libpq connection string)");
  app.add_option("--signing-key", signing_key,
                 "Ed25519 private key (PEM) for session tokens; created with its public half "
                 "(--public-key) when neither exists")
      ->required();
  app.add_option("--public-key", public_key, "its public half (default: SIGNING_KEY.pub)");
  app.add_option("--admin-key", options.admin_key,
                 "operators' key for tenant/provider management and reports (default "
                 "$RGPU_ADMIN_KEY, else the key in --admin-key-file)");
  app.add_option("--admin-key-file", admin_key_file,
                 "where the operators' key is kept when --admin-key is not given: read, or "
                 "created (mode 0600) at first start (default: DB.admin-key beside the SQLite "
                 "database, SIGNING_KEY.admin-key with --postgres)");
  app.add_option("--claim-timeout-s", claim_timeout_s,
                 "a placement under which no session has started after this many seconds ends "
                 "(its hold until then is billed; 0: never)")
      ->capture_default_str();
  bool no_move_on_notice = false;
  app.add_flag("--no-move-on-notice", no_move_on_notice,
               "end a session whose lease is given notice (its server's window closes, a "
               "preemption) instead of moving it to another server with room");
  app.add_option("--usage-skew-ms", options.usage_limits.skew_ms,
                 "how far a server's clock may be from the registry's in usage records")
      ->capture_default_str();
  app.add_option("--max-sessions-per-lease", options.usage_limits.max_sessions_per_lease,
                 "client sessions one lease may be billed for")
      ->capture_default_str();
  app.add_option("--max-reservations-per-tenant", options.max_reservations_per_tenant,
                 "reservations a tenant may hold at once (rgpu reserve)")
      ->check(CLI::Range(0u, 100000u))
      ->capture_default_str();
  app.add_option("--heartbeat-ms", options.heartbeat_ms,
                 "servers heartbeat this often; three missed heartbeats mark a server offline")
      ->capture_default_str();
  app.add_option("--min-driver-version", options.min_driver_version,
                 "refuse GPUs whose driver is older (e.g. 12000)")
      ->capture_default_str();
  app.add_option("--min-compute-capability", options.min_compute_capability,
                 "refuse GPUs below this compute capability (e.g. 7.0)")
      ->capture_default_str();
  app.add_option("--prices", prices_path, "price list file (see docs/registry.md)");
  app.add_option("--placement-policy", options.placement_policy,
                 "how sessions are placed on GPUs: reach, fgd, best-fit, first-fit, dot-product or "
                 "random (see docs/registry.md)")
      ->capture_default_str();
  bool init_only = false;
  app.add_flag("--init", init_only,
               "create the signing keys and the operator's key file where missing, then exit "
               "(a package's installation does this)");
  app.add_option("--tls-cert", tls_cert, "serve TLS with this certificate chain (PEM)");
  app.add_option("--tls-key", tls_key, "the certificate's private key (PEM)");
  app.add_option("--port-file", port_file, "write HOST:PORT here once listening");
  CLI11_PARSE(app, argc, argv);

  if (tls_cert.empty() != tls_key.empty()) {
    RGPU_LOG_ERROR("TLS needs both --tls-cert and --tls-key");
    return 1;
  }
  if (tls_cert.empty() && !insecure_plaintext && !rgpu::registry::IsLoopbackListen(listen)) {
    RGPU_LOG_ERROR(
        "refusing to serve plaintext on %s, which is not a loopback address: keys and tokens "
        "would cross the network readable. Give --tls-cert and --tls-key, listen on 127.0.0.1, "
        "or pass --insecure-plaintext",
        listen.c_str());
    return 1;
  }
  if (claim_timeout_s < 0 || claim_timeout_s > 7 * 86400) {
    RGPU_LOG_ERROR("--claim-timeout-s must be 0 (never) to 604800");
    return 1;
  }
  if (public_key.empty()) public_key = signing_key + ".pub";
  if (access(signing_key.c_str(), F_OK) != 0 && access(public_key.c_str(), F_OK) != 0) {
    rgpu::Status s = rgpu::GenerateTokenKeys(signing_key, public_key);
    if (!s.ok()) {
      RGPU_LOG_ERROR("cannot create signing keys: %s", s.ToString().c_str());
      return 1;
    }
    RGPU_LOG_INFO("created signing key %s and public key %s", signing_key.c_str(),
                  public_key.c_str());
  }
  options.signing_key_path = signing_key;
  if (!ReadFile(public_key, &options.public_key_pem)) {
    RGPU_LOG_ERROR("cannot read public key %s", public_key.c_str());
    return 1;
  }
  if (!prices_path.empty()) {
    rgpu::Status s = rgpu::registry::PriceList::Load(prices_path, &options.prices);
    if (!s.ok()) {
      RGPU_LOG_ERROR("%s", s.ToString().c_str());
      return 1;
    }
  }
  options.claim_timeout_ms = claim_timeout_s * 1000;
  options.move_on_notice = !no_move_on_notice;
  if (options.admin_key.empty() && getenv("RGPU_ADMIN_KEY") != nullptr) {
    options.admin_key = getenv("RGPU_ADMIN_KEY");
  }
  if (options.admin_key.empty()) {
    if (admin_key_file.empty()) {
      admin_key_file = (postgres.empty() ? db_path : signing_key) + ".admin-key";
    }
    bool created = false;
    rgpu::Status k =
        rgpu::registry::LoadOrCreateOperatorKey(admin_key_file, &options.admin_key, &created);
    if (!k.ok()) {
      RGPU_LOG_ERROR("operator key: %s", k.message().c_str());
      return 1;
    }
    RGPU_LOG_INFO(
        "%s the operator key in %s (only its owner can read it); rgpu reads it with "
        "--admin-key-file %s or RGPU_ADMIN_KEY",
        created ? "created" : "using", admin_key_file.c_str(), admin_key_file.c_str());
  } else if (options.admin_key.size() < 16) {
    RGPU_LOG_ERROR("the operator key must have at least 16 characters");
    return 1;
  }
  if (init_only) return 0;

  std::unique_ptr<rgpu::registry::Db> db;
  rgpu::Status s = postgres.empty() ? rgpu::registry::OpenSqlite(db_path, &db)
                                    : rgpu::registry::OpenPostgres(postgres, &db);
  std::unique_ptr<rgpu::registry::Store> store;
  if (s.ok()) s = rgpu::registry::Store::Open(std::move(db), &store);
  std::unique_ptr<rgpu::registry::RegistryService> service;
  if (s.ok()) s = rgpu::registry::RegistryService::Create(std::move(store), options, &service);
  if (!s.ok()) {
    RGPU_LOG_ERROR("cannot start: %s", s.ToString().c_str());
    return 1;
  }

  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!tls_cert.empty()) {
    grpc::SslServerCredentialsOptions ssl;
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    if (!ReadFile(tls_cert, &pair.cert_chain) || !ReadFile(tls_key, &pair.private_key)) {
      RGPU_LOG_ERROR("cannot read %s or %s", tls_cert.c_str(), tls_key.c_str());
      return 1;
    }
    ssl.pem_key_cert_pairs.push_back(pair);
    credentials = grpc::SslServerCredentials(ssl);
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, credentials, &port);
  builder.RegisterService(service.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    RGPU_LOG_ERROR("cannot listen on %s", listen.c_str());
    return 1;
  }
  const std::string bound = listen.substr(0, listen.rfind(':')) + ":" + std::to_string(port);
  RGPU_LOG_INFO("listening on %s (%s)", bound.c_str(),
                !tls_cert.empty()                          ? "TLS"
                : rgpu::registry::IsLoopbackListen(listen) ? "plaintext, loopback only"
                                                           : "INSECURE plaintext");
  if (!port_file.empty() && !WriteFileAtomically(port_file, bound + "\n")) {
    RGPU_LOG_ERROR("cannot write %s", port_file.c_str());
    return 1;
  }
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  const auto sweep_every = std::chrono::milliseconds(std::max(1u, options.heartbeat_ms / 2));
  auto next_sweep = std::chrono::steady_clock::now() + sweep_every;
  while (!g_stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (std::chrono::steady_clock::now() >= next_sweep) {
      service->Sweep();
      next_sweep += sweep_every;
    }
  }
  service->Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  RGPU_LOG_INFO("stopped");
  return 0;
}
