// rgpu-server: serves remote CUDA driver calls from tenants on a local backend.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <CLI/CLI.hpp>

#include "common/log.h"
#include "common/state_dir.h"
#include "registry/availability.h"
#include "server/server.h"
#include "server/session_host.h"
#include "server/session_sandbox.h"

namespace {
rgpu::server::Server* g_server = nullptr;
void OnSignal(int) {
  if (g_server) g_server->Stop();
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

// A session host's confinement (server/session_sandbox.h): the rgpu tree it runs from, the
// backend library's directory (NVIDIA's driver loads its companions from there as it goes) and
// the CA file of tls:// connections it makes.
rgpu::Status ConfineSessionHost(const rgpu::server::ServerOptions& options) {
  char exe[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  const std::string program_dir =
      n > 0 ? DirectoryOf(std::string(exe, static_cast<size_t>(n))) : "";
  std::vector<std::string> extra;
  if (char* real = options.driver_library.empty()
                       ? nullptr
                       : realpath(options.driver_library.c_str(), nullptr)) {
    extra.push_back(DirectoryOf(real));
    free(real);
  }
  const bool shared_memory = options.listen.rfind("shm://", 0) == 0;
  // The CA a tls:// connection to another server (a move, a copy) checks against, read then.
  if (const char* ca = getenv("RGPU_TLS_CA"); ca != nullptr && *ca != '\0') extra.push_back(ca);
  rgpu::server::Confinement applied;
  rgpu::Status s = rgpu::server::ConfineThisProcess(
      rgpu::server::SessionHostPolicy(program_dir, extra, shared_memory), &applied);
  if (s.ok()) RGPU_LOG_INFO("session host confined: %s", applied.ToString().c_str());
  return s;
}
}  // namespace

int main(int argc, char** argv) {
  rgpu::InitLogging("rgpu-server", rgpu::LogLevel::kInfo);
  rgpu::server::ServerOptions options;
  std::string port_file;
  CLI::App app{"rgpu-server: lends this machine's GPUs to remote tenants"};
  app.add_option("--listen", options.listen,
                 "URL to listen on: tcp://, shm://, sock:// or tls://HOST:PORT")
      ->capture_default_str();
  app.add_option("--tls-key", options.tls_key_file,
                 "tls://: this server's private key (PEM; default: a new key at every start, "
                 "pinned in the URL the server prints)");
  app.add_option("--tls-certificate", options.tls_certificate_file,
                 "tls://: the key's certificate chain (PEM; default: self-signed), for clients "
                 "that check certificates against their CAs instead of pinning the key");
  app.add_option("--backend", options.backend,
                 "cuda (NVIDIA's driver), hip (AMD GPUs through ROCm's HIP runtime) or softgpu "
                 "(the CPU)")
      ->check(CLI::IsMember({"cuda", "hip", "softgpu"}))
      ->capture_default_str();
  app.add_option("--cuda-library", options.driver_library,
                 "driver library to dlopen (default: libcuda.so.1, librgpu-backend-hip.so or "
                 "libsoftgpu-cuda.so by backend)");
  app.add_option("--poll-us", options.poll_us, "microseconds a session busy-polls before it sleeps")
      ->capture_default_str();
  app.add_option(
      "--tokens", options.tokens_path,
      "require a session token from this file (lines: TOKEN TENANT MEMORY_QUOTA WEIGHT)");
  app.add_option("--token-public-key", options.token_public_key,
                 "accept session tokens signed with the Ed25519 key whose public half is here");
  app.add_option("--operator-key-file", options.operator_key_file,
                 "the operator's key for `rgpu status`: read from this file, or created in it "
                 "(mode 0600) when missing (default: $RGPU_STATE_DIR or ~/.rgpu, "
                 "server-operator.key; \"none\": no operator key)");
  app.add_option("--name", options.name, "this server's name, as signed tokens name it")
      ->capture_default_str();
  app.add_option("--metrics-host", options.metrics_host,
                 "address to serve metrics on (default: the --listen host; metrics name tenants)");
  app.add_option("--metrics-port", options.metrics_port,
                 "serve Prometheus metrics on this port (0: off)");
  app.add_flag("--fair-share", options.fair_share,
               "tenants' kernels take turns on the GPU in proportion to their weights");
  app.add_option("--max-sessions", options.max_sessions,
                 "sessions at once, lanes included (0: no limit)")
      ->capture_default_str();
  app.add_option("--max-lanes", options.max_lanes,
                 "per session: connections its threads may wait on while its other threads' "
                 "calls go on (0: none)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--max-queued-calls", options.max_queued_calls,
                 "per session: requests waiting to be served before the session is closed")
      ->capture_default_str();
  app.add_option("--max-queued-mib", options.max_queued_mib,
                 "per session: MiB of requests waiting to be served before the session is closed")
      ->capture_default_str();
  app.add_option("--client-timeout-ms", options.client_timeout_ms,
                 "close a session whose client sent no keepalive for this long (0: never)")
      ->capture_default_str();
  app.add_option("--registry", options.registry,
                 "register this server's GPUs with the registry at HOST:PORT, heartbeat and "
                 "report usage; admit the session tokens it signs");
  app.add_option("--provider-key", options.provider_key,
                 "this provider's key for the registry (`rgpu provider create`; default "
                 "$RGPU_PROVIDER_KEY)");
  app.add_option("--registry-ca", options.registry_ca,
                 "CA certificate (PEM) to trust when the registry serves TLS");
  app.add_option("--advertise", options.advertise_url,
                 "URL tenants reach this server at (default: the bound listen URL, with this "
                 "host's name for 0.0.0.0)");
  app.add_option("--metering-spool", options.metering_spool,
                 "keep usage records the registry has not acknowledged in this file too, so that "
                 "a restarted server still delivers them");
  app.add_option("--available", options.available,
                 "when this server's GPUs may be lent, with --registry: always, or windows "
                 "HH:MM-HH:MM in this host's local time, comma-separated (20:00-08:00 wraps "
                 "past midnight); the registry places only inside them")
      ->capture_default_str();
  app.add_option("--notice-s", options.notice_seconds,
                 "a session still running when a lendable window closes goes on this many "
                 "seconds, then ends (at most 86400)")
      ->check(CLI::Range(0u, rgpu::registry::kMaxNoticeSeconds))
      ->capture_default_str();
  app.add_option("--interconnect-gbps", options.interconnect_gbps,
                 "host-to-GPU bandwidth to advertise to the registry, GB/s");
  app.add_option("--max-kernel-ms", options.max_kernel_ms,
                 "the longest one kernel may run before it is ended with a launch timeout (the "
                 "softgpu backend, and every backend's kernels in their --fair-share turn; 0: no "
                 "bound)")
      ->capture_default_str();
  uint64_t max_module_mib = options.session_limits.max_module_bytes >> 20;
  app.add_option("--max-module-mib", max_module_mib,
                 "per session: the largest module image, and what a fat binary may expand to")
      ->capture_default_str();
  app.add_option("--max-contexts", options.session_limits.max_contexts, "per session: contexts")
      ->capture_default_str();
  app.add_option("--max-modules", options.session_limits.max_modules, "per session: modules")
      ->capture_default_str();
  app.add_option("--max-streams", options.session_limits.max_streams, "per session: streams")
      ->capture_default_str();
  app.add_option("--max-events", options.session_limits.max_events, "per session: events")
      ->capture_default_str();
  app.add_option("--max-allocations", options.session_limits.max_allocations,
                 "per session: device allocations")
      ->capture_default_str();
  uint64_t max_staging_mib = options.session_limits.max_staging_bytes >> 20;
  app.add_option("--max-staging-mib", max_staging_mib,
                 "per session: pinned memory for asynchronous copies to busy streams, "
                 "which let the session serve its other streams meanwhile (0: none)")
      ->capture_default_str();
  app.add_option("--host-nvml", options.host_nvml,
                 "the host's NVML library, read for the GPUs' temperature, power, clocks and "
                 "driver version (devices matched by UUID; \"none\": not read)")
      ->capture_default_str();
  app.add_option("--drain-to", options.drain_to,
                 "on SIGTERM, first move every session to this server (docs/migration.md)");
  app.add_option("--drain-key-file", options.drain_key_file,
                 "the --drain-to server's operator key (default: this server's own)");
  app.add_option("--drain-timeout-ms", options.drain_timeout_ms,
                 "how long a session's client may take to make the call its move waits for")
      ->capture_default_str();
  app.add_option("--session-processes", options.session_processes,
                 "each session in a process of its own, so that a tenant's fault, device "
                 "assert or kernel never reaches another's (on NVIDIA's driver these are "
                 "per process): on, off, or auto (on for every backend but softgpu)")
      ->check(CLI::IsMember({"on", "off", "auto"}))
      ->capture_default_str();
  app.add_option("--session-host-spares", options.session_host_spares,
                 "with --session-processes: processes started ahead, ready for sessions")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  std::string session_sandbox = "on";
  app.add_option("--session-sandbox", session_sandbox,
                 "with --session-processes: each session's process confines itself before a "
                 "tenant reaches it (no programs, no other processes, no files but the system's "
                 "libraries and /dev; server/session_sandbox.h): on or off")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  bool no_backend_extensions = false;
  app.add_flag("--no-backend-extensions", no_backend_extensions,
               "serve the software GPU as NVIDIA's driver is served, without its extensions "
               "(for tests of the cuda backend's ways)");
  int session_host_fd = -1;
  app.add_option("--session-host", session_host_fd,
                 "(internal) serve one session for the server at the other end of this fd")
      ->group("");
  app.add_option("--port-file", port_file,
                 "write the bound URL to this file once listening (for scripts and tests)");
  CLI11_PARSE(app, argc, argv);
  for (int i = 0; i < argc; ++i) {
    // Hosts are started as this server was, less what makes a host.
    if (std::string(argv[i]) == "--session-host") {
      ++i;
      continue;
    }
    options.command_line.push_back(argv[i]);
  }
  if (options.operator_key_file.empty()) {
    std::string dir;
    rgpu::Status d = rgpu::UserStateDir(&dir);
    if (!d.ok()) {
      RGPU_LOG_ERROR("cannot keep the operator key: %s (--operator-key-file)", d.message().c_str());
      return 1;
    }
    options.operator_key_file = dir + "/server-operator.key";
  } else if (options.operator_key_file == "none") {
    options.operator_key_file.clear();
  }
  options.session_limits.max_module_bytes = max_module_mib << 20;
  options.session_limits.max_staging_bytes = max_staging_mib << 20;
  if (options.provider_key.empty() && getenv("RGPU_PROVIDER_KEY") != nullptr) {
    options.provider_key = getenv("RGPU_PROVIDER_KEY");
  }

  rgpu::registry::Availability availability;
  if (rgpu::Status a = rgpu::registry::ParseAvailability(options.available, &availability);
      !a.ok()) {
    RGPU_LOG_ERROR("--available: %s", a.message().c_str());
    return 1;
  }
  if (availability.windows_size() > 0 && options.registry.empty()) {
    RGPU_LOG_ERROR("--available says when the registry may place sessions: it needs --registry");
    return 1;
  }

  options.backend_extensions = !no_backend_extensions;
  if (session_host_fd >= 0) {
    return rgpu::server::RunSessionHost(
        options, session_host_fd, [&](const rgpu::server::ServerOptions& host) {
          if (session_sandbox == "off") {
            RGPU_LOG_WARN("session host: not confined (--session-sandbox off)");
            return rgpu::Status::Ok();
          }
          return ConfineSessionHost(host);
        });
  }

  rgpu::server::Server server;
  rgpu::Status s = server.Start(options);
  if (!s.ok()) {
    RGPU_LOG_ERROR("cannot start: %s", s.ToString().c_str());
    return 1;
  }
  // Where the kernel has no Landlock, only this keeps a confined host (the same user, no
  // capabilities: server/session_sandbox.h) from the server's memory, keys and tokens through
  // /proc, as hosts are kept from each other. Not over shm://, whose clients open the server's
  // shared memory through /proc.
  if (server.session_processes() && session_sandbox == "on" &&
      options.listen.rfind("shm://", 0) != 0) {
    if (rgpu::Status k = rgpu::server::KeepFromConfinedProcesses(); !k.ok()) {
      RGPU_LOG_ERROR("%s", k.ToString().c_str());
      return 1;
    }
  }
  if (!port_file.empty()) {
    std::string tmp = port_file + ".tmp";
    FILE* f = fopen(tmp.c_str(), "w");
    if (f == nullptr || fprintf(f, "%s\n", server.url().c_str()) < 0 || fclose(f) != 0 ||
        rename(tmp.c_str(), port_file.c_str()) != 0) {
      RGPU_LOG_ERROR("cannot write %s", port_file.c_str());
      return 1;
    }
  }
  g_server = &server;
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  server.Serve();
  RGPU_LOG_INFO("stopped");
  return 0;
}
