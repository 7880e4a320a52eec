#include "cli/registry_commands.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>

#include "cli/json_text.h"
#include "proto/crypto.h"
#include "proto/signed_token.h"
#include "registry/channel.h"

namespace rgpu::cli {
namespace {

namespace reg = rgpu::registry;

std::string Env(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

// The first line of a key file, without surrounding whitespace; "" when it cannot be read.
std::string ReadKeyFile(const std::string& path) {
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return "";
  char line[4096] = {};
  const bool got = fgets(line, sizeof line, f) != nullptr;
  fclose(f);
  std::string key = got ? line : "";
  const size_t end = key.find_last_not_of(" \t\r\n");
  key.resize(end == std::string::npos ? 0 : end + 1);
  const size_t start = key.find_first_not_of(" \t");
  return start == std::string::npos ? "" : key.substr(start);
}

// False (with the reason printed) when a key file was named but holds no key.
bool Fill(RegistryAccess* a) {
  if (a->address.empty()) a->address = Env("RGPU_REGISTRY");
  // The operator key: --admin-key, --admin-key-file, RGPU_ADMIN_KEY, RGPU_ADMIN_KEY_FILE.
  if (a->tenant_only) {
    a->admin_key.clear();
    a->admin_key_file.clear();
  } else if (a->admin_key.empty() && a->admin_key_file.empty()) {
    a->admin_key = Env("RGPU_ADMIN_KEY");
  }
  if (!a->tenant_only && a->admin_key.empty() && a->admin_key_file.empty()) {
    a->admin_key_file = Env("RGPU_ADMIN_KEY_FILE");
  }
  if (a->admin_key.empty() && !a->admin_key_file.empty()) {
    a->admin_key = ReadKeyFile(a->admin_key_file);
    if (a->admin_key.empty()) {
      fprintf(stderr, "rgpu: cannot read an operator key from %s\n", a->admin_key_file.c_str());
      return false;
    }
  }
  if (a->api_key.empty()) a->api_key = Env("RGPU_API_KEY");
  if (a->provider_key.empty()) a->provider_key = Env("RGPU_PROVIDER_KEY");
  if (a->tls_ca.empty()) a->tls_ca = Env("RGPU_TLS_CA");
  return true;
}

// A stub, or an error printed with the command's name.
std::unique_ptr<reg::Registry::Stub> Connect(RegistryAccess* access, const char* command) {
  if (!Fill(access)) return nullptr;
  if (access->address.empty()) {
    fprintf(stderr, "rgpu %s: no registry: pass --registry HOST:PORT or set RGPU_REGISTRY\n",
            command);
    return nullptr;
  }
  std::shared_ptr<grpc::Channel> channel;
  Status s = reg::OpenChannel(access->address, access->tls_ca, &channel);
  if (!s.ok()) {
    fprintf(stderr, "rgpu %s: %s\n", command, s.message().c_str());
    return nullptr;
  }
  return reg::Registry::NewStub(channel);
}

void Authorize(const RegistryAccess& a, grpc::ClientContext* ctx, int seconds = 30) {
  if (!a.admin_key.empty()) ctx->AddMetadata("x-rgpu-admin-key", a.admin_key);
  if (!a.api_key.empty()) ctx->AddMetadata("x-rgpu-api-key", a.api_key);
  if (!a.provider_key.empty()) ctx->AddMetadata("x-rgpu-provider-key", a.provider_key);
  if (seconds > 0) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  }
}

int Failed(const char* command, const grpc::Status& g, const std::string& address) {
  Status s = reg::FromGrpc(g, address);
  fprintf(stderr, "rgpu %s: %s\n", command, s.message().c_str());
  return s.code() == Status::Code::kInvalidArgument ? 2 : 1;
}

std::string Num(double v) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

// UTC time of `unix_ms`; "never" for 0 when `zero_is_never`.
std::string Clock(int64_t unix_ms, bool zero_is_never = true) {
  if (unix_ms <= 0 && zero_is_never) return "never";
  time_t t = static_cast<time_t>(unix_ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool Range(const std::string& from, const std::string& to, reg::UsageQuery* q) {
  int64_t f = 0, t = 0;
  if (!from.empty() && !ParseTime(from, &f)) {
    fprintf(stderr, "rgpu: bad --from time '%s' (unix seconds, now, or YYYY-MM-DDTHH:MM:SSZ)\n",
            from.c_str());
    return false;
  }
  if (!to.empty() && !ParseTime(to, &t)) {
    fprintf(stderr, "rgpu: bad --to time '%s' (unix seconds, now, or YYYY-MM-DDTHH:MM:SSZ)\n",
            to.c_str());
    return false;
  }
  q->set_from_unix(f);
  q->set_to_unix(t);
  return true;
}

int KeyCommand(RegistryAccess access, const std::string& name, bool provider) {
  const char* command = provider ? "provider create" : "tenant create";
  auto stub = Connect(&access, command);
  if (!stub) return 2;
  reg::NameRequest request;
  request.set_name(name);
  reg::KeyReply reply;
  grpc::ClientContext ctx;
  Authorize(access, &ctx);
  grpc::Status g = provider ? stub->CreateProvider(&ctx, request, &reply)
                            : stub->CreateTenant(&ctx, request, &reply);
  if (!g.ok()) return Failed(command, g, access.address);
  if (access.json) {
    printf("{\"name\": %s, \"%s\": %s}\n", JsonString(reply.name()).c_str(),
           provider ? "provider_key" : "api_key", JsonString(reply.key()).c_str());
  } else {
    printf("%s %s created; its %s (shown once): %s\n", provider ? "provider" : "tenant",
           reply.name().c_str(), provider ? "provider key" : "API key", reply.key().c_str());
  }
  return 0;
}

void PrintInvoiceJson(const reg::Invoice& inv, bool earnings) {
  printf(
      "{\"%s\": %s, \"from_unix\": %lld, \"to_unix\": %lld, \"period\": %s, \"currency\": %s, "
      "\"lines\": [",
      earnings ? "provider" : "tenant", JsonString(inv.subject()).c_str(),
      (long long)inv.from_unix(), (long long)inv.to_unix(),
      inv.period().empty() ? "null" : JsonString(inv.period()).c_str(),
      JsonString(inv.currency()).c_str());
  for (int i = 0; i < inv.lines_size(); ++i) {
    const reg::InvoiceLine& l = inv.lines(i);
    printf(
        "%s\n  {\"tenant\": %s, \"provider\": %s, \"server\": %s, \"session\": %llu, \"model\": "
        "%s, "
        "\"gpu_ms\": %s, \"unit_price_per_ms\": %s, \"base_fee\": %s, \"bandwidth_gbps\": %s, "
        "\"included_gbps\": %s, \"burst_premium\": %s, \"queue_seconds\": %s, \"priority\": %d, "
        "\"priority_multiplier\": %s, \"priority_surcharge\": %s, \"lease\": %s, "
        "\"held_ms\": %s, \"hold_price_per_ms\": %s, \"hold_fee\": %s, \"job\": %s, "
        "\"reservation\": %s, \"reserved_ms\": %s, \"reservation_price_per_ms\": %s, "
        "\"reservation_fee\": %s, \"unavailable_ms\": %s, \"total\": %s}",
        i ? "," : "", JsonString(l.tenant()).c_str(), JsonString(l.provider()).c_str(),
        JsonString(l.server_name()).c_str(), (unsigned long long)l.session_id(),
        JsonString(l.model()).c_str(), Num(l.gpu_ms()).c_str(), Num(l.unit_price()).c_str(),
        Num(l.base_fee()).c_str(), Num(l.bandwidth_gbps()).c_str(), Num(l.included_gbps()).c_str(),
        Num(l.burst_premium()).c_str(), Num(l.queue_seconds()).c_str(), l.priority(),
        Num(l.priority_multiplier()).c_str(), Num(l.priority_surcharge()).c_str(),
        JsonString(l.lease_id()).c_str(), Num(l.held_ms()).c_str(),
        Num(l.hold_price_per_ms()).c_str(), Num(l.hold_fee()).c_str(),
        l.job().empty() ? "null" : JsonString(l.job()).c_str(),
        JsonString(l.reservation_id()).c_str(), Num(l.reserved_ms()).c_str(),
        Num(l.reservation_price_per_ms()).c_str(), Num(l.reservation_fee()).c_str(),
        Num(l.unavailable_ms()).c_str(), Num(l.total()).c_str());
  }
  printf(
      "],\n \"base_fee\": %s, \"burst_premium\": %s, \"priority_surcharge\": %s, "
      "\"hold_fee\": %s, \"reservation_fee\": %s, \"total\": %s",
      Num(inv.base_fee()).c_str(), Num(inv.burst_premium()).c_str(),
      Num(inv.priority_surcharge()).c_str(), Num(inv.hold_fee()).c_str(),
      Num(inv.reservation_fee()).c_str(), Num(inv.total()).c_str());
  if (earnings) {
    printf(", \"provider_share\": %s, \"earnings\": %s", Num(inv.provider_share()).c_str(),
           Num(inv.earnings()).c_str());
  }
  printf("}\n");
}

void PrintInvoiceText(const reg::Invoice& inv, bool earnings) {
  const std::string period =
      inv.period().empty() ? "" : ", the current " + inv.period() + " billing period";
  printf("%s for %s %s, %s to %s%s (%s)\n", earnings ? "Earnings" : "Invoice",
         earnings ? "provider" : "tenant", inv.subject().c_str(),
         Clock(inv.from_unix() * 1000, false).c_str(), Clock(inv.to_unix() * 1000, false).c_str(),
         period.c_str(), inv.currency().c_str());
  printf("%-24s %8s %-22s %12s %12s %12s %12s %12s\n", "server/session", "tenant", "model",
         "GPU ms", "base fee", "burst", "priority", "total");
  for (const auto& l : inv.lines()) {
    if (!l.reservation_id().empty()) {  // a reservation: the time it held its GPU
      const std::string where = l.server_name() + " (reserved)";
      printf("%-24s %8s %-22.22s %12.1f %12s %12s %12s %12.6f\n", where.c_str(), l.tenant().c_str(),
             l.model().c_str(), l.reserved_ms(), "", "", "", l.total());
      printf("%24s   reservation %s held its GPU %.0f ms, at %.3g/ms\n", "",
             l.reservation_id().c_str(), l.reserved_ms(), l.reservation_price_per_ms());
      if (l.unavailable_ms() > 0) {
        printf("%24s   not billed: %.0f ms its GPU's server was down\n", "", l.unavailable_ms());
      }
      if (!l.job().empty()) printf("%24s   job %s\n", "", l.job().c_str());
      continue;
    }
    if (!l.lease_id().empty()) {  // a hold: the time a lease held its GPU unused
      const std::string where = l.server_name() + " (held)";
      printf("%-24s %8s %-22.22s %12.1f %12s %12s %12s %12.6f\n", where.c_str(), l.tenant().c_str(),
             l.model().c_str(), l.held_ms(), "", "", "", l.total());
      printf("%24s   lease %s held its GPU %.0f ms before a session started, at %.3g/ms\n", "",
             l.lease_id().c_str(), l.held_ms(), l.hold_price_per_ms());
      if (!l.job().empty()) printf("%24s   job %s\n", "", l.job().c_str());
      continue;
    }
    const std::string where = l.server_name() + "/" + std::to_string(l.session_id());
    printf("%-24s %8s %-22.22s %12.1f %12.6f %12.6f %12.6f %12.6f\n", where.c_str(),
           l.tenant().c_str(), l.model().c_str(), l.gpu_ms(), l.base_fee(), l.burst_premium(),
           l.priority_surcharge(), l.total());
    printf(
        "%24s   unit price %.3g/GPU ms; %.4f GB/s (%.4g included); queued %.1f s at priority "
        "%d (x%.4f)\n",
        "", l.unit_price(), l.bandwidth_gbps(), l.included_gbps(), l.queue_seconds(), l.priority(),
        l.priority_multiplier());
    if (!l.job().empty()) printf("%24s   job %s\n", "", l.job().c_str());
  }
  if (inv.hold_fee() > 0) printf("held (unused) placements: %.6f\n", inv.hold_fee());
  if (inv.reservation_fee() > 0) printf("reservations: %.6f\n", inv.reservation_fee());
  printf("%-24s %8s %-22s %12s %12.6f %12.6f %12.6f %12.6f\n", "TOTAL", "", "", "", inv.base_fee(),
         inv.burst_premium(), inv.priority_surcharge(), inv.total());
  if (earnings) {
    printf("provider share %.0f%%: earnings %.6f %s\n", inv.provider_share() * 100, inv.earnings(),
           inv.currency().c_str());
  }
}

}  // namespace

bool ParseTime(const std::string& text, int64_t* unix_seconds) {
  if (text == "now") {
    *unix_seconds = static_cast<int64_t>(time(nullptr));
    return true;
  }
  char* end = nullptr;
  long long v = strtoll(text.c_str(), &end, 10);
  if (!text.empty() && *end == '\0') {
    *unix_seconds = v;
    return v >= 0;
  }
  for (const char* format : {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d"}) {
    struct tm tm = {};
    const char* rest = strptime(text.c_str(), format, &tm);
    if (rest != nullptr && (*rest == '\0' || (rest[0] == 'Z' && rest[1] == '\0'))) {
      *unix_seconds = static_cast<int64_t>(timegm(&tm));
      return true;
    }
  }
  return false;
}

bool ParseDuration(const std::string& text, uint32_t* seconds) {
  char* end = nullptr;
  const double amount = strtod(text.c_str(), &end);
  if (text.empty() || end == text.c_str() || !(amount >= 0)) return false;
  double scale = 1;
  if (*end != '\0') {
    if (end[1] != '\0') return false;
    switch (*end) {
      case 's':
        break;
      case 'm':
        scale = 60;
        break;
      case 'h':
        scale = 3600;
        break;
      case 'd':
        scale = 86400;
        break;
      default:
        return false;
    }
  }
  const double total = amount * scale;
  if (total > 366.0 * 86400) return false;
  *seconds = static_cast<uint32_t>(total);
  return true;
}

bool ParseSize(const std::string& text, uint64_t* bytes) {
  char* end = nullptr;
  const double amount = strtod(text.c_str(), &end);
  if (end == text.c_str() || amount < 0) return false;
  double scale = 1;
  switch (*end) {
    case '\0':
      break;
    case 'K':
      scale = 1024.0;
      break;
    case 'M':
      scale = 1048576.0;
      break;
    case 'G':
      scale = 1073741824.0;
      break;
    case 'T':
      scale = 1099511627776.0;
      break;
    default:
      return false;
  }
  if (*end != '\0' && end[1] != '\0' && !(end[1] == 'i' && end[2] == 'B' && end[3] == '\0') &&
      !(end[1] == 'B' && end[2] == '\0')) {
    return false;
  }
  *bytes = static_cast<uint64_t>(amount * scale);
  return true;
}

int TenantCreate(RegistryAccess access, const std::string& name) {
  return KeyCommand(std::move(access), name, false);
}

int ProviderCreate(RegistryAccess access, const std::string& name) {
  return KeyCommand(std::move(access), name, true);
}

int TenantList(RegistryAccess access) {
  auto stub = Connect(&access, "tenant list");
  if (!stub) return 2;
  reg::TenantList reply;
  grpc::ClientContext ctx;
  Authorize(access, &ctx);
  grpc::Status g = stub->ListTenants(&ctx, reg::Empty(), &reply);
  if (!g.ok()) return Failed("tenant list", g, access.address);
  if (access.json) {
    printf("[");
    for (int i = 0; i < reply.tenants_size(); ++i) {
      printf("%s{\"name\": %s, \"created_unix\": %lld}", i ? ", " : "",
             JsonString(reply.tenants(i).name()).c_str(),
             (long long)reply.tenants(i).created_unix());
    }
    printf("]\n");
    return 0;
  }
  printf("%-24s %s\n", "TENANT", "CREATED");
  for (const auto& t : reply.tenants()) {
    printf("%-24s %s\n", t.name().c_str(), Clock(t.created_unix() * 1000).c_str());
  }
  return 0;
}

int ProviderList(RegistryAccess access) {
  auto stub = Connect(&access, "provider list");
  if (!stub) return 2;
  reg::ProviderList reply;
  grpc::ClientContext ctx;
  Authorize(access, &ctx);
  grpc::Status g = stub->ListProviders(&ctx, reg::Empty(), &reply);
  if (!g.ok()) return Failed("provider list", g, access.address);
  if (access.json) {
    printf("[");
    for (int i = 0; i < reply.providers_size(); ++i) {
      const auto& p = reply.providers(i);
      printf("%s{\"name\": %s, \"revoked\": %s, \"gpus\": %u, \"created_unix\": %lld}",
             i ? ", " : "", JsonString(p.name()).c_str(), p.revoked() ? "true" : "false", p.gpus(),
             (long long)p.created_unix());
    }
    printf("]\n");
    return 0;
  }
  printf("%-24s %-8s %5s %s\n", "PROVIDER", "STATE", "GPUS", "CREATED");
  for (const auto& p : reply.providers()) {
    printf("%-24s %-8s %5u %s\n", p.name().c_str(), p.revoked() ? "revoked" : "active", p.gpus(),
           Clock(p.created_unix() * 1000).c_str());
  }
  return 0;
}

int ProviderRevoke(RegistryAccess access, const std::string& name) {
  auto stub = Connect(&access, "provider revoke");
  if (!stub) return 2;
  reg::NameRequest request;
  request.set_name(name);
  reg::Empty reply;
  grpc::ClientContext ctx;
  Authorize(access, &ctx);
  grpc::Status g = stub->RevokeProvider(&ctx, request, &reply);
  if (!g.ok()) return Failed("provider revoke", g, access.address);
  if (access.json) {
    printf("{\"name\": %s, \"revoked\": true}\n", JsonString(name).c_str());
  } else {
    printf("provider %s revoked: its GPUs take no new placements\n", name.c_str());
  }
  return 0;
}

int Gpus(RegistryAccess access) {
  auto stub = Connect(&access, "gpus");
  if (!stub) return 2;
  reg::GpuList reply;
  grpc::ClientContext ctx;
  Authorize(access, &ctx);
  grpc::Status g = stub->ListGpus(&ctx, reg::Empty(), &reply);
  if (!g.ok()) return Failed("gpus", g, access.address);
  if (access.json) {
    printf("[");
    for (int i = 0; i < reply.gpus_size(); ++i) {
      const auto& gpu = reply.gpus(i);
      const auto& s = gpu.spec();
      printf(
          "%s\n {\"gpu\": %s, \"provider\": %s, \"server\": %s, \"url\": %s, \"model\": %s, "
          "\"memory_bytes\": %llu, \"compute_capability\": \"%u.%u\", \"bandwidth_gbps\": %s, "
          "\"driver_version\": %d, \"backend\": %s, \"state\": %s, \"memory_committed\": %llu, "
          "\"share_committed\": %u, \"leases\": %u, \"last_heartbeat_ms\": %lld, "
          "\"state_reason\": %s, \"availability\": %s, \"lendable_until_unix\": %lld}",
          i ? "," : "", JsonString(gpu.gpu_id()).c_str(), JsonString(gpu.provider()).c_str(),
          JsonString(gpu.server_name()).c_str(), JsonString(gpu.server_url()).c_str(),
          JsonString(s.model()).c_str(), (unsigned long long)s.memory_bytes(), s.cc_major(),
          s.cc_minor(), Num(s.bandwidth_gbps()).c_str(), s.driver_version(),
          JsonString(s.backend()).c_str(), JsonString(gpu.state()).c_str(),
          (unsigned long long)gpu.memory_committed(), gpu.share_committed(), gpu.leases(),
          (long long)gpu.last_heartbeat_ms(), JsonString(gpu.state_reason()).c_str(),
          JsonString(gpu.availability()).c_str(), (long long)gpu.lendable_until_unix());
    }
    printf("]\n");
    return 0;
  }
  printf("%-20s %-12s %-22s %-9s %10s %6s %6s %s\n", "GPU", "PROVIDER", "MODEL", "STATE",
         "MEM USED", "SHARE", "LEASES", "LAST HEARTBEAT");
  for (const auto& gpu : reply.gpus()) {
    char mem[48];
    snprintf(mem, sizeof mem, "%llu/%lluM", (unsigned long long)(gpu.memory_committed() >> 20),
             (unsigned long long)(gpu.spec().memory_bytes() >> 20));
    printf("%-20s %-12s %-22.22s %-9s %10s %5u%% %6u %s\n", gpu.gpu_id().c_str(),
           gpu.provider().c_str(), gpu.spec().model().c_str(), gpu.state().c_str(), mem,
           gpu.share_committed(), gpu.leases(), Clock(gpu.last_heartbeat_ms()).c_str());
    if (!gpu.state_reason().empty()) printf("%20s   %s\n", "", gpu.state_reason().c_str());
    if (!gpu.availability().empty() && gpu.availability() != "always") {
      printf("%20s   lendable %s\n", "", gpu.availability().c_str());
    }
  }
  return 0;
}

int Usage(RegistryAccess access, const std::string& tenant, const std::string& provider,
          const std::string& from, const std::string& to, const std::string& job) {
  reg::UsageQuery query;
  if (!Range(from, to, &query)) return 2;
  query.set_tenant(tenant);
  query.set_provider(provider);
  query.set_job(job);
  auto stub = Connect(&access, "usage");
  if (!stub) return 2;
  reg::UsageReply reply;
  grpc::ClientContext ctx;
  Authorize(access, &ctx);
  grpc::Status g = stub->Usage(&ctx, query, &reply);
  if (!g.ok()) return Failed("usage", g, access.address);
  if (access.json) {
    printf("[");
    for (int i = 0; i < reply.sessions_size(); ++i) {
      const auto& u = reply.sessions(i);
      printf(
          "%s\n {\"tenant\": %s, \"provider\": %s, \"server\": %s, \"gpu_index\": %u, "
          "\"model\": %s, \"session\": %llu, \"start_ms\": %lld, \"end_ms\": %lld, \"gpu_ms\": %s, "
          "\"calls\": %llu, \"bytes_in\": %llu, \"bytes_out\": %llu, \"gpu_busy_ms\": %s, "
          "\"memory_gib_seconds\": %s, \"queue_ms\": %s, \"records\": %u, "
          "\"placement_queue_s\": %s, \"priority\": %d, \"job\": %s, \"calls_by_kind\": {",
          i ? "," : "", JsonString(u.tenant()).c_str(), JsonString(u.provider()).c_str(),
          JsonString(u.server_name()).c_str(), u.gpu_index(), JsonString(u.model()).c_str(),
          (unsigned long long)u.session_id(), (long long)u.start_ms(), (long long)u.end_ms(),
          Num(u.gpu_ms()).c_str(), (unsigned long long)u.calls(), (unsigned long long)u.bytes_in(),
          (unsigned long long)u.bytes_out(), Num(u.gpu_busy_ms()).c_str(),
          Num(u.memory_gib_seconds()).c_str(), Num(u.queue_ms()).c_str(), u.records(),
          Num(u.placement_queue_s()).c_str(), u.priority(),
          u.job().empty() ? "null" : JsonString(u.job()).c_str());
      std::map<std::string, uint64_t> kinds(u.calls_by_kind().begin(), u.calls_by_kind().end());
      const char* sep = "";
      for (const auto& [kind, n] : kinds) {
        printf("%s%s: %llu", sep, JsonString(kind).c_str(), (unsigned long long)n);
        sep = ", ";
      }
      printf("}}");
    }
    printf("]\n");
    return 0;
  }
  printf("%-10s %-24s %10s %8s %12s %12s %10s %10s\n", "TENANT", "server/session", "GPU ms",
         "calls", "bytes in", "bytes out", "busy ms", "GiB-s");
  for (const auto& u : reply.sessions()) {
    const std::string where = u.server_name() + "/" + std::to_string(u.session_id());
    printf("%-10s %-24s %10.0f %8llu %12llu %12llu %10.1f %10.4g\n", u.tenant().c_str(),
           where.c_str(), u.gpu_ms(), (unsigned long long)u.calls(),
           (unsigned long long)u.bytes_in(), (unsigned long long)u.bytes_out(), u.gpu_busy_ms(),
           u.memory_gib_seconds());
    std::map<std::string, uint64_t> kinds(u.calls_by_kind().begin(), u.calls_by_kind().end());
    std::string line;
    for (const auto& [kind, n] : kinds) line += " " + kind + "=" + std::to_string(n);
    if (!line.empty()) printf("%-10s   calls:%s\n", "", line.c_str());
    if (!u.job().empty()) printf("%-10s   job %s\n", "", u.job().c_str());
  }
  return 0;
}

int Bill(RegistryAccess access, const std::string& tenant, const std::string& from,
         const std::string& to, const std::string& job) {
  reg::UsageQuery query;
  if (!Range(from, to, &query)) return 2;
  query.set_current_period(from.empty() && to.empty());  // neither: the current billing period
  query.set_tenant(tenant);
  query.set_job(job);
  auto stub = Connect(&access, "bill");
  if (!stub) return 2;
  reg::Invoice reply;
  grpc::ClientContext ctx;
  Authorize(access, &ctx);
  grpc::Status g = stub->Bill(&ctx, query, &reply);
  if (!g.ok()) return Failed("bill", g, access.address);
  access.json ? PrintInvoiceJson(reply, false) : PrintInvoiceText(reply, false);
  return 0;
}

int Earnings(RegistryAccess access, const std::string& provider, const std::string& from,
             const std::string& to) {
  reg::UsageQuery query;
  if (!Range(from, to, &query)) return 2;
  query.set_current_period(from.empty() && to.empty());
  query.set_provider(provider);
  auto stub = Connect(&access, "earnings");
  if (!stub) return 2;
  reg::Invoice reply;
  grpc::ClientContext ctx;
  Authorize(access, &ctx);
  grpc::Status g = stub->Earnings(&ctx, query, &reply);
  if (!g.ok()) return Failed("earnings", g, access.address);
  access.json ? PrintInvoiceJson(reply, true) : PrintInvoiceText(reply, true);
  return 0;
}

int ReleaseLease(RegistryAccess access, const std::string& lease_id) {
  auto stub = Connect(&access, "lease release");
  if (!stub) return 2;
  reg::ReleaseLeaseRequest request;
  request.set_lease_id(lease_id);
  reg::Empty reply;
  grpc::ClientContext ctx;
  Authorize(access, &ctx);
  grpc::Status g = stub->ReleaseLease(&ctx, request, &reply);
  if (!g.ok()) return Failed("lease release", g, access.address);
  printf("lease %s released\n", lease_id.c_str());
  return 0;
}

// A tenant's command where an API key is given (flag or RGPU_API_KEY): the operator key, which
// the environment may hold too, is not sent, so that the tenant sees and acts on its own only.
void TenantWhenKeyed(RegistryAccess* access) {
  if (!access->api_key.empty() || !Env("RGPU_API_KEY").empty()) access->tenant_only = true;
}

int LeaseList(RegistryAccess access) {
  TenantWhenKeyed(&access);
  auto stub = Connect(&access, "lease list");
  if (!stub) return 2;
  reg::LeaseList reply;
  grpc::ClientContext ctx;
  Authorize(access, &ctx);
  grpc::Status g = stub->ListLeases(&ctx, reg::Empty(), &reply);
  if (!g.ok()) return Failed("lease list", g, access.address);
  if (access.json) {
    printf("[");
    for (int i = 0; i < reply.leases_size(); ++i) {
      const auto& l = reply.leases(i);
      printf(
          "%s\n {\"lease\": %s, \"tenant\": %s, \"gpu\": %s, \"memory_bytes\": %llu, "
          "\"share\": %u, \"priority\": %d, \"granted_ms\": %lld, \"expires_ms\": %lld, "
          "\"claimed_ms\": %lld, \"ending_ms\": %lld, \"end_reason\": %s, \"reservation\": %s, "
          "\"job\": %s}",
          i ? "," : "", JsonString(l.lease_id()).c_str(), JsonString(l.tenant()).c_str(),
          JsonString(l.gpu_id()).c_str(), (unsigned long long)l.memory_bytes(), l.compute_share(),
          l.priority(), (long long)l.granted_unix_ms(), (long long)l.expires_unix_ms(),
          (long long)l.claimed_unix_ms(), (long long)l.ending_unix_ms(),
          JsonString(l.end_reason()).c_str(), JsonString(l.reservation_id()).c_str(),
          l.job().empty() ? "null" : JsonString(l.job()).c_str());
    }
    printf("]\n");
    return 0;
  }
  printf("%-28s %-10s %-20s %6s %4s %-20s %s\n", "LEASE", "TENANT", "GPU", "SHARE", "PRIO",
         "EXPIRES", "ENDS");
  for (const auto& l : reply.leases()) {
    printf("%-28s %-10s %-20s %5u%% %4d %-20s %s\n", l.lease_id().c_str(), l.tenant().c_str(),
           l.gpu_id().c_str(), l.compute_share(), l.priority(), Clock(l.expires_unix_ms()).c_str(),
           l.ending_unix_ms() > 0 ? Clock(l.ending_unix_ms()).c_str() : "-");
    if (l.ending_unix_ms() > 0) printf("%28s   under notice: %s\n", "", l.end_reason().c_str());
    if (!l.reservation_id().empty()) {
      printf("%28s   under reservation %s\n", "", l.reservation_id().c_str());
    }
  }
  return 0;
}

namespace {

void PrintReservationJson(const reg::Reservation& r) {
  std::string gpus;
  for (const std::string& id : r.gpu_ids()) gpus += (gpus.empty() ? "" : ", ") + JsonString(id);
  printf(
      "{\"reservation\": %s, \"tenant\": %s, \"gpus\": [%s], \"memory_bytes\": %llu, "
      "\"share\": %u, \"start_unix\": %lld, \"end_unix\": %lld, \"created_unix\": %lld, "
      "\"cancelled_unix\": %lld, \"state\": %s, \"job\": %s}",
      JsonString(r.reservation_id()).c_str(), JsonString(r.tenant()).c_str(), gpus.c_str(),
      (unsigned long long)r.memory_bytes(), r.compute_share(), (long long)r.start_unix(),
      (long long)r.end_unix(), (long long)r.created_unix(), (long long)r.cancelled_unix(),
      JsonString(r.state()).c_str(), r.job().empty() ? "null" : JsonString(r.job()).c_str());
}

void PrintReservationText(const reg::Reservation& r) {
  std::string gpus;
  for (const std::string& id : r.gpu_ids()) gpus += (gpus.empty() ? "" : ",") + id;
  printf("%-28s %-10s %-9s %-20s %-20s %5u%% %s\n", r.reservation_id().c_str(), r.tenant().c_str(),
         r.state().c_str(), Clock(r.start_unix() * 1000).c_str(),
         Clock(r.end_unix() * 1000).c_str(), r.compute_share(), gpus.c_str());
}

}  // namespace

int Reserve(RegistryAccess access, const ReserveOptions& options) {
  reg::ReserveRequest request;
  int64_t start = 0;
  uint32_t duration = 0;
  uint64_t memory = 0;
  if (!ParseTime(options.start, &start)) {
    fprintf(stderr, "rgpu reserve: bad --start '%s' (unix seconds, now, or YYYY-MM-DDTHH:MM:SSZ)\n",
            options.start.c_str());
    return 2;
  }
  if (!ParseDuration(options.duration, &duration)) {
    fprintf(stderr, "rgpu reserve: bad --duration '%s' (seconds, or a number with s/m/h/d)\n",
            options.duration.c_str());
    return 2;
  }
  if (!ParseSize(options.memory, &memory)) {
    fprintf(stderr, "rgpu reserve: bad --memory '%s' (bytes with K/M/G/T suffixes)\n",
            options.memory.c_str());
    return 2;
  }
  if (options.gpus < 1 || options.gpus > 16 || options.compute_share < 1 ||
      options.compute_share > 100) {
    fprintf(stderr, "rgpu reserve: --gpus is 1-16, --share 1-100\n");
    return 2;
  }
  request.set_start_unix(start);
  request.set_duration_seconds(duration);
  request.set_gpus(static_cast<uint32_t>(options.gpus));
  request.set_gpu_type(options.gpu_type);
  request.set_backend(options.backend);
  request.set_memory_bytes(memory);
  request.set_compute_share(static_cast<uint32_t>(options.compute_share));
  request.set_job(options.job);
  access.tenant_only = true;  // a tenant's, by its API key
  auto stub = Connect(&access, "reserve");
  if (!stub) return 2;
  reg::Reservation reply;
  grpc::ClientContext ctx;
  Authorize(access, &ctx);
  grpc::Status g = stub->Reserve(&ctx, request, &reply);
  if (!g.ok()) return Failed("reserve", g, access.address);
  if (access.json) {
    PrintReservationJson(reply);
    printf("\n");
  } else {
    printf("reservation %s: %d GPU(s) from %s to %s (%s)\n", reply.reservation_id().c_str(),
           reply.gpu_ids_size(), Clock(reply.start_unix() * 1000).c_str(),
           Clock(reply.end_unix() * 1000).c_str(), reply.state().c_str());
  }
  return 0;
}

int ReservationList(RegistryAccess access, const std::string& tenant) {
  if (tenant.empty()) TenantWhenKeyed(&access);
  auto stub = Connect(&access, "reservation list");
  if (!stub) return 2;
  reg::ReservationQuery query;
  query.set_tenant(tenant);
  reg::ReservationList reply;
  grpc::ClientContext ctx;
  Authorize(access, &ctx);
  grpc::Status g = stub->ListReservations(&ctx, query, &reply);
  if (!g.ok()) return Failed("reservation list", g, access.address);
  if (access.json) {
    printf("[");
    for (int i = 0; i < reply.reservations_size(); ++i) {
      printf("%s\n ", i ? "," : "");
      PrintReservationJson(reply.reservations(i));
    }
    printf("]\n");
    return 0;
  }
  printf("%-28s %-10s %-9s %-20s %-20s %6s %s\n", "RESERVATION", "TENANT", "STATE", "START", "END",
         "SHARE", "GPUS");
  for (const auto& r : reply.reservations()) PrintReservationText(r);
  return 0;
}

int ReservationCancel(RegistryAccess access, const std::string& reservation_id) {
  TenantWhenKeyed(&access);
  auto stub = Connect(&access, "reservation cancel");
  if (!stub) return 2;
  reg::CancelReservationRequest request;
  request.set_reservation_id(reservation_id);
  reg::Reservation reply;
  grpc::ClientContext ctx;
  Authorize(access, &ctx);
  grpc::Status g = stub->CancelReservation(&ctx, request, &reply);
  if (!g.ok()) return Failed("reservation cancel", g, access.address);
  if (access.json) {
    PrintReservationJson(reply);
    printf("\n");
  } else {
    printf("reservation %s cancelled\n", reservation_id.c_str());
  }
  return 0;
}

int Place(RegistryAccess access, const PlaceOptions& options, const char* command,
          PlaceResult* result) {
  reg::PlaceRequest request;
  uint64_t memory = 0;
  if (!ParseSize(options.memory, &memory)) {
    fprintf(stderr, "rgpu %s: bad --memory '%s' (bytes with K/M/G/T suffixes)\n", command,
            options.memory.c_str());
    return 2;
  }
  if (options.compute_share < 1 || options.compute_share > 100 || options.priority < 0 ||
      options.priority > 9 || options.wait_seconds < 0 || options.ttl_seconds < 1) {
    fprintf(stderr, "rgpu %s: --share is 1-100, --priority 0-9, --wait >= 0, --ttl >= 1\n",
            command);
    return 2;
  }
  request.set_gpu_type(options.gpu_type);
  request.set_backend(options.backend);
  request.set_memory_bytes(memory);
  request.set_compute_share(static_cast<uint32_t>(options.compute_share));
  request.set_priority(options.priority);
  request.set_wait_seconds(static_cast<uint32_t>(options.wait_seconds));
  request.set_ttl_seconds(static_cast<uint32_t>(options.ttl_seconds));
  request.set_job(options.job);
  request.set_until_released(options.until_released);
  for (const std::string& id : options.excluded_gpus) request.add_excluded_gpus(id);
  if (!options.duration.empty()) {
    uint32_t seconds = 0;
    if (!ParseDuration(options.duration, &seconds)) {
      fprintf(stderr, "rgpu %s: bad --duration '%s' (seconds, or a number with s/m/h/d)\n", command,
              options.duration.c_str());
      return 2;
    }
    request.set_duration_seconds(seconds);
  }
  request.set_reservation_id(options.reservation_id);
  // The token binds this key pair's public half; only the program that holds the private half
  // (in its credential) can use it, so a token seen on the wire cannot be replayed.
  std::string holder_private, holder_public;
  if (Status k = GenerateEd25519(&holder_private, &holder_public); !k.ok()) {
    fprintf(stderr, "rgpu %s: cannot make a holder key: %s\n", command, k.message().c_str());
    return 1;
  }
  request.set_holder_key(holder_public);
  access.tenant_only = true;  // placements are a tenant's, by its API key
  auto stub = Connect(&access, command);
  if (!stub) return 2;
  if (access.api_key.empty()) {
    fprintf(stderr, "rgpu %s: --registry needs --api-key (or RGPU_API_KEY)\n", command);
    return 2;
  }
  grpc::ClientContext ctx;
  Authorize(access, &ctx, options.wait_seconds + 30);
  auto reader = stub->Place(&ctx, request);
  reg::PlaceUpdate update;
  bool placed = false;
  while (reader->Read(&update)) {
    if (update.has_queued()) {
      const reg::Queued& q = update.queued();
      if (q.preempting_gpu().empty()) {
        fprintf(stderr, "rgpu %s: no GPU free yet: queue position %u of %u\n", command,
                q.position(), q.length());
      } else {
        fprintf(stderr,
                "rgpu %s: no GPU free yet: queue position %u of %u; lower-priority work on %s "
                "was given notice and ends at %s\n",
                command, q.position(), q.length(), q.preempting_gpu().c_str(),
                Clock(q.preemption_ends_unix_ms()).c_str());
      }
    } else if (update.has_placement()) {
      const reg::Placement& p = update.placement();
      result->server_url = p.server_url();
      result->credential = MakeCredential(p.token(), holder_private);
      result->lease_id = p.lease_id();
      result->expires_unix = p.expires_unix();
      result->gpu_id = p.gpu_id();
      result->lendable_until_unix = p.lendable_until_unix();
      placed = true;
      if (p.lendable_until_unix() > 0) {
        // Said whatever RGPU_LOG is: the program may be ended then.
        fprintf(stderr,
                "rgpu %s: %s is lendable until %s; a session still running then ends %u s "
                "later\n",
                command, p.gpu_id().c_str(), Clock(p.lendable_until_unix() * 1000).c_str(),
                p.notice_seconds());
      }
      if (getenv("RGPU_LOG") != nullptr) {
        fprintf(stderr, "rgpu %s: placed on %s (%s) at %s, lease %s\n", command, p.gpu_id().c_str(),
                p.model().c_str(), p.server_url().c_str(), p.lease_id().c_str());
      }
    }
  }
  grpc::Status g = reader->Finish();
  if (!g.ok()) return Failed(command, g, access.address);
  if (!placed) {
    fprintf(stderr, "rgpu %s: the registry ended the request without a placement\n", command);
    return 1;
  }
  return 0;
}

namespace {

// A value printed as NAME=VALUE for a parser that splits at the first '=' and a shell that
// reads it unquoted: printable ASCII without spaces, quotes, backslashes or shell specials.
bool PlainValue(const std::string& v) {
  for (char c : v) {
    if (!isalnum(static_cast<unsigned char>(c)) && strchr("+-./:=@_,%", c) == nullptr) {
      return false;
    }
  }
  return !v.empty();
}

}  // namespace

std::string SlurmJobName() {
  const std::string job = Env("SLURM_JOB_ID");
  if (job.empty() || job.size() > 20 || job.find_first_not_of("0123456789") != std::string::npos) {
    return "";
  }
  std::string cluster = Env("SLURM_CLUSTER_NAME");
  if (cluster.empty() || cluster.size() > 64 || !PlainValue(cluster)) cluster = "slurm";
  return "slurm:" + cluster + ":" + job;
}

int PlaceCommand(RegistryAccess access, PlaceOptions options) {
  const bool json = access.json;
  options.until_released = true;  // the programs it serves start and end later, maybe several
  PlaceResult r;
  const int rc = Place(access, options, "place", &r);
  if (rc != 0) return rc;
  if (json) {
    printf(
        "{\"server\": %s, \"token\": %s, \"lease\": %s, \"expires_unix\": %lld, "
        "\"lendable_until_unix\": %lld}\n",
        JsonString(r.server_url).c_str(), JsonString(r.credential).c_str(),
        JsonString(r.lease_id).c_str(), (long long)r.expires_unix,
        (long long)r.lendable_until_unix);
    return 0;
  }
  if (!PlainValue(r.server_url) || !PlainValue(r.credential) || !PlainValue(r.lease_id)) {
    // The registry chose these; a value a shell would misread is refused, not printed.
    fprintf(stderr, "rgpu place: the placement holds characters it cannot print plainly\n");
    return 1;
  }
  printf("RGPU_SERVER=%s\nRGPU_TOKEN=%s\nRGPU_LEASE=%s\nRGPU_LEASE_EXPIRES=%lld\n",
         r.server_url.c_str(), r.credential.c_str(), r.lease_id.c_str(), (long long)r.expires_unix);
  return 0;
}

}  // namespace rgpu::cli
