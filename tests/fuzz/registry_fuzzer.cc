// libFuzzer target: the registry's RPC handlers (registry/service.h), called in-process on a
// fresh SQLite store per input, with arbitrary requests and call metadata: registrations (names,
// URLs, secrets, GPU specs with any numbers), heartbeats with any cursor, usage reports of
// hostile records (naming real leases with impossible amounts, or parsed from raw bytes),
// placements, operator calls with and without the operator key, bills and earnings over odd
// periods, clock jumps, sweeps and restarts. Beyond "no crash, no sanitizer report", it checks
// the invariants the defences promise (docs/security.md):
//   - every reported record is answered once: stored, duplicate or refused;
//   - calls without the right credential never succeed;
//   - whatever is stored, every session lies inside one of its tenant's leases (give or take the
//     clock skew) and not in the future, its records do not overlap (their wall times add up to
//     at most its span), a tenant's billed GPU time never exceeds what its leases allow
//     (max_sessions_per_lease x each lease's interval), stored amounts are finite and within the
//     physical bounds, and invoices are finite.
// The reachability probe is simulated (an even first byte of the secret answers correctly).
#include <fuzzer/FuzzedDataProvider.h>
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/test/server_context_test_spouse.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/log.h"
#include "proto/signed_token.h"
#include "registry/service.h"

namespace {

namespace reg = rgpu::registry;

constexpr const char* kAdmin = "fuzz-operator-key-0123456789";
constexpr int64_t kStart = 1'800'000'000'000;

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "registry_fuzzer: invariant failed: %s\n", #cond); \
      abort();                                                           \
    }                                                                    \
  } while (0)

// How far the inputs got, printed at exit: records stored and refused, placements granted.
uint64_t g_stored = 0, g_refused = 0, g_placed = 0;

// A lease the fuzzer was granted, for records to name and for the billing bound.
struct Granted {
  reg::Placement placement;
  std::string tenant;
  int64_t granted_ms;
  int64_t expires_ms;
};

class Harness {
 public:
  explicit Harness(const std::string& dir) : dir_(dir) {}

  bool Start() {
    reg::RegistryOptions options;
    options.signing_key_path = dir_ + "/key.pem";
    options.admin_key = kAdmin;
    options.heartbeat_ms = 1000;
    options.claim_timeout_ms = 90000;
    options.now_ms = [this] { return now_; };
    options.probe = [](const std::string&, const std::string& secret) {
      return !secret.empty() && (static_cast<unsigned char>(secret[0]) & 1) == 0
                 ? rgpu::Status::Ok()
                 : rgpu::PermissionDenied("wrong reachability proof (simulated)");
    };
    if (!reg::PriceList::Parse("default_gpu 0.001 1\nburst_premium_per_gb 0.01\npriority 5 0.5\n"
                               "priority_cap 4\nhold_fraction 0.5\n",
                               &options.prices)
             .ok()) {
      return false;
    }
    limits_ = options.usage_limits;
    std::unique_ptr<reg::Db> db;
    std::unique_ptr<reg::Store> store;
    rgpu::Status s = reg::OpenSqlite(dir_ + "/registry.db", &db);
    if (s.ok()) s = reg::Store::Open(std::move(db), &store);
    if (s.ok()) s = reg::RegistryService::Create(std::move(store), options, &service_);
    return s.ok();
  }
  void Stop() { service_.reset(); }

  // A context with `who`'s credential: 0 none, 1 the operator, 2 the provider, 3 a tenant,
  // 4 garbage in every header, 5 a wrong operator key.
  struct Call {
    grpc::ServerContext ctx;
    grpc::testing::ServerContextTestSpouse spouse{&ctx};
  };
  std::unique_ptr<Call> As(int who, FuzzedDataProvider* in) {
    auto call = std::make_unique<Call>();
    switch (who) {
      case 1:
        call->spouse.AddClientMetadata("x-rgpu-admin-key", kAdmin);
        break;
      case 2:
        call->spouse.AddClientMetadata("x-rgpu-provider-key", provider_key_);
        break;
      case 3:
        call->spouse.AddClientMetadata("x-rgpu-api-key",
                                       tenant_keys_[in->ConsumeIntegralInRange<size_t>(0, 1)]);
        break;
      case 4: {
        const std::string junk = in->ConsumeRandomLengthString(64);
        call->spouse.AddClientMetadata("x-rgpu-admin-key", junk);
        call->spouse.AddClientMetadata("x-rgpu-provider-key", junk);
        call->spouse.AddClientMetadata("x-rgpu-api-key", junk);
        break;
      }
      case 5:
        call->spouse.AddClientMetadata("x-rgpu-admin-key", std::string(kAdmin) + "!");
        break;
      default:
        break;
    }
    return call;
  }

  void Setup() {
    auto admin = As(1, nullptr);
    reg::NameRequest name;
    reg::KeyReply key;
    name.set_name("acme");
    CHECK(service_->CreateProvider(&admin->ctx, &name, &key).ok());
    provider_key_ = key.key();
    for (const char* tenant : {"alice", "bob"}) {
      auto call = As(1, nullptr);
      name.set_name(tenant);
      CHECK(service_->CreateTenant(&call->ctx, &name, &key).ok());
      tenant_keys_.push_back(key.key());
    }
    reg::RegisterRequest req;
    req.set_server_name("host1");
    req.set_server_url("tcp://127.0.0.1:7000");
    req.set_reachability_secret(std::string(32, '\x02'));
    for (uint32_t i = 0; i < 2; ++i) {
      reg::GpuSpec* g = req.add_gpus();
      g->set_index(i);
      g->set_model("NVIDIA A100");
      g->set_memory_bytes(16ull << 30);
      g->set_cc_major(8);
      g->set_driver_version(12040);
      g->set_bandwidth_gbps(i == 0 ? 25 : 0);
    }
    auto provider = As(2, nullptr);
    reg::RegisterReply reply;
    CHECK(service_->Register(&provider->ctx, &req, &reply).ok());
    service_->WaitForProbes();
    // A lease for each tenant, so that every input has leases to name.
    for (size_t t = 0; t < 2; ++t) {
      reg::PlaceRequest place;
      place.set_memory_bytes(2ull << 30);
      place.set_ttl_seconds(t == 0 ? 3600 : 600);
      place.set_holder_key(std::string(32, 'k'));
      CHECK(PlaceAs(t, place).ok());
    }
  }

  // Places `req` for tenant `t` and remembers the lease.
  grpc::Status PlaceAs(size_t t, const reg::PlaceRequest& req) {
    auto call = std::make_unique<Call>();
    call->spouse.AddClientMetadata("x-rgpu-api-key", tenant_keys_[t]);
    reg::Placement placement;
    grpc::Status g = service_->PlaceWith(&call->ctx, &req, [&](const reg::PlaceUpdate& update) {
      if (update.has_placement()) placement = update.placement();
      return true;
    });
    if (g.ok()) {
      ++g_placed;
      CHECK(!placement.lease_id().empty());
      const uint32_t ttl = req.ttl_seconds() ? req.ttl_seconds() : 3600;
      granted_.push_back(
          {placement, t == 0 ? "alice" : "bob", now_, now_ + static_cast<int64_t>(ttl) * 1000});
    }
    return g;
  }

  void Register(FuzzedDataProvider* in, int who) {
    reg::RegisterRequest req;
    if (in->ConsumeBool()) {
      (void)req.ParseFromString(in->ConsumeRandomLengthString(512));
    } else {
      static const char* names[] = {"host1", "host2", "fake", "bad name", ""};
      static const char* urls[] = {"tcp://127.0.0.1:7000",
                                   "tcp://10.0.0.1:1",
                                   "shm://h:9",
                                   "tcp://h:0",
                                   "http://x",
                                   "tcp://[::1]:70000",
                                   ""};
      req.set_server_name(names[in->ConsumeIntegralInRange<size_t>(0, 4)]);
      req.set_server_url(urls[in->ConsumeIntegralInRange<size_t>(0, 6)]);
      req.set_reachability_secret(in->ConsumeRandomLengthString(80));
      const int gpus = in->ConsumeIntegralInRange(0, 4);
      for (int i = 0; i < gpus; ++i) {
        reg::GpuSpec* g = req.add_gpus();
        g->set_index(in->ConsumeIntegralInRange<uint32_t>(0, 3));
        g->set_model(in->ConsumeBool() ? "NVIDIA A100" : in->ConsumeRandomLengthString(16));
        g->set_memory_bytes(in->ConsumeIntegral<uint64_t>());
        g->set_cc_major(in->ConsumeIntegralInRange<uint32_t>(0, 12));
        g->set_cc_minor(in->ConsumeIntegral<uint32_t>());
        g->set_bandwidth_gbps(Double(in));
        g->set_driver_version(in->ConsumeIntegral<int32_t>());
        g->set_backend(in->ConsumeBool() ? "cuda" : "softgpu");
      }
    }
    auto call = As(who, in);
    reg::RegisterReply reply;
    grpc::Status g = service_->Register(&call->ctx, &req, &reply);
    if (who != 2) CHECK(!g.ok());
    service_->WaitForProbes();
  }

  void Heartbeat(FuzzedDataProvider* in, int who) {
    reg::HeartbeatRequest req;
    req.set_server_name(in->ConsumeBool() ? "host1" : in->ConsumeRandomLengthString(16));
    req.set_ended_cursor(in->ConsumeIntegral<uint64_t>());
    req.set_ended_epoch(in->ConsumeBool() ? "" : in->ConsumeRandomLengthString(16));
    auto call = As(who, in);
    reg::HeartbeatReply reply;
    grpc::Status g = service_->Heartbeat(&call->ctx, &req, &reply);
    if (who != 2) CHECK(!g.ok());
  }

  void Place(FuzzedDataProvider* in, int who) {
    reg::PlaceRequest req;
    const bool valid = in->ConsumeIntegralInRange(0, 3) != 3;  // mostly a request that can succeed
    req.set_gpu_type(valid || in->ConsumeBool() ? "" : in->ConsumeRandomLengthString(8));
    req.set_memory_bytes(valid ? in->ConsumeIntegralInRange<uint64_t>(0, 4ull << 30)
                               : in->ConsumeIntegral<uint64_t>());
    req.set_compute_share(in->ConsumeIntegralInRange<uint32_t>(0, valid ? 50 : 120));
    req.set_priority(in->ConsumeIntegralInRange<int32_t>(valid ? 0 : -2, valid ? 9 : 11));
    req.set_wait_seconds(0);  // never block the fuzzer
    req.set_ttl_seconds(valid ? in->ConsumeIntegralInRange<uint32_t>(0, 7200)
                              : in->ConsumeIntegral<uint32_t>());
    req.set_holder_key(valid ? std::string(32, 'k') : in->ConsumeRandomLengthString(40));
    const size_t tenant = in->ConsumeIntegralInRange<size_t>(0, 1);
    if (valid || who == 3) {
      (void)PlaceAs(tenant, req);
      return;
    }
    auto call = As(who, in);
    reg::Placement placement;
    grpc::Status g =
        service_->PlaceWith(&call->ctx, &req, [](const reg::PlaceUpdate&) { return true; });
    CHECK(!g.ok());  // no tenant's key
  }

  void Report(FuzzedDataProvider* in, int who) {
    now_ += 1000 + in->ConsumeIntegralInRange<int64_t>(0, 4000);  // servers report every second
    reg::ReportUsageRequest req;
    const int n = in->ConsumeIntegralInRange(1, 8);
    for (int i = 0; i < n; ++i) {
      reg::UsageRecord* r = req.add_records();
      // Choices default to the well-formed path (FuzzedDataProvider yields 0 once the input is
      // used up), so that short inputs reach the checks against leases.
      if (in->ConsumeIntegralInRange(0, 7) == 7) {
        (void)r->ParseFromString(in->ConsumeRandomLengthString(256));
        continue;
      }
      r->set_record_id("r" + std::to_string(in->ConsumeIntegralInRange(0, 300)));
      const bool plausible = !in->ConsumeBool();  // amounts a GPU could produce
      if (!granted_.empty() && in->ConsumeIntegralInRange(0, 3) != 3) {
        const Granted& l = granted_[in->ConsumeIntegralInRange<size_t>(0, granted_.size() - 1)];
        r->set_lease_id(l.placement.lease_id());
        r->set_server_name(l.placement.server_name());
        r->set_gpu_index(in->ConsumeIntegralInRange(0, 7) != 7 ? l.placement.gpu_index()
                                                               : 1 - l.placement.gpu_index());
        r->set_tenant(in->ConsumeIntegralInRange(0, 7) != 7 ? l.tenant : "bob");
        // Inside the lease's interval so far, or reaching past its start or its end (by up to
        // twice the clocks' skew), or anywhere in its lifetime and beyond.
        const int64_t until = std::max(l.granted_ms, std::min(l.expires_ms, now_));
        const int64_t edge = 2 * limits_.skew_ms;
        int64_t start = l.granted_ms, end = l.granted_ms;
        switch (in->ConsumeIntegralInRange(0, 3)) {
          case 0:  // by default all of it so far: records of a session then overlap
            start += in->ConsumeIntegralInRange<int64_t>(0, until - l.granted_ms);
            end = until - in->ConsumeIntegralInRange<int64_t>(0, until - start);
            break;
          case 1:  // by default twice the skew before the grant
            start -= edge - in->ConsumeIntegralInRange<int64_t>(0, edge);
            end = start + in->ConsumeIntegralInRange<int64_t>(0, until - start);
            break;
          case 2:  // by default twice the skew past the lease's end (or now)
            end = until + edge - in->ConsumeIntegralInRange<int64_t>(0, edge);
            start = end - in->ConsumeIntegralInRange<int64_t>(0, end - l.granted_ms);
            break;
          default:
            start += in->ConsumeIntegralInRange<int64_t>(-edge, l.expires_ms - l.granted_ms + edge);
            end = start + in->ConsumeIntegralInRange<int64_t>(-10, l.expires_ms - start + edge);
            break;
        }
        r->set_start_ms(start);
        r->set_end_ms(end);
      } else {
        r->set_lease_id(in->ConsumeRandomLengthString(20));
        r->set_server_name(in->ConsumeBool() ? "host1" : "fake");
        r->set_tenant(in->ConsumeBool() ? "alice" : "nobody");
        r->set_start_ms(in->ConsumeIntegral<int64_t>());
        r->set_end_ms(in->ConsumeIntegral<int64_t>());
      }
      // Ids begin with their server's name (usage_check.h), mostly.
      if (in->ConsumeIntegralInRange(0, 7) != 7) {
        r->set_record_id(r->server_name() + ":" + r->record_id());
      }
      r->set_session_id(in->ConsumeIntegralInRange<uint64_t>(0, 5));
      if (plausible) {
        r->set_calls(in->ConsumeIntegralInRange<uint64_t>(0, 1000));
        r->set_bytes_in(in->ConsumeIntegralInRange<uint64_t>(0, 1ull << 30));
        r->set_bytes_out(in->ConsumeIntegralInRange<uint64_t>(0, 1ull << 28));
        r->set_gpu_busy_ms(in->ConsumeFloatingPointInRange<double>(0, 1000));
        r->set_memory_gib_seconds(in->ConsumeFloatingPointInRange<double>(0, 2));
        r->set_queue_ms(in->ConsumeFloatingPointInRange<double>(0, 100));
      } else {
        r->set_calls(in->ConsumeIntegral<uint64_t>());
        r->set_bytes_in(in->ConsumeIntegral<uint64_t>());
        r->set_bytes_out(in->ConsumeIntegral<uint64_t>() >> in->ConsumeIntegralInRange(0, 63));
        r->set_gpu_busy_ms(Double(in));
        r->set_memory_gib_seconds(Double(in));
        r->set_queue_ms(Double(in));
      }
      r->set_session_ended(in->ConsumeBool());
      if (in->ConsumeBool()) {
        (*r->mutable_calls_by_kind())[in->ConsumeRandomLengthString(10)] =
            in->ConsumeIntegral<uint64_t>();
      }
    }
    auto call = As(who, in);
    reg::ReportUsageReply reply;
    grpc::Status g = service_->ReportUsage(&call->ctx, &req, &reply);
    if (who != 2) CHECK(!g.ok());
    if (g.ok()) {
      CHECK(reply.stored() + reply.duplicates() + reply.refused() ==
            static_cast<uint32_t>(req.records_size()));
      CHECK(reply.refusals_size() == static_cast<int>(reply.refused()));
      g_stored += reply.stored();
      g_refused += reply.refused();
      if (getenv("RGPU_FUZZ_DEBUG") != nullptr) {
        for (const auto& r : reply.refusals()) fprintf(stderr, "refused: %s\n", r.reason().c_str());
      }
    }
  }

  void Operator(FuzzedDataProvider* in, int who) {
    auto call = As(who, in);
    reg::NameRequest name;
    name.set_name(in->ConsumeBool() ? "carol" : in->ConsumeRandomLengthString(70));
    reg::KeyReply key;
    reg::Empty empty;
    grpc::Status g;
    switch (in->ConsumeIntegralInRange(0, 4)) {
      case 0:
        g = service_->CreateTenant(&call->ctx, &name, &key);
        break;
      case 1:
        g = service_->CreateProvider(&call->ctx, &name, &key);
        break;
      case 2:
        name.set_name(in->ConsumeBool() ? "acme" : name.name());
        g = service_->RevokeProvider(&call->ctx, &name, &empty);
        break;
      case 3: {
        reg::TenantList tenants;
        g = service_->ListTenants(&call->ctx, &empty, &tenants);
        break;
      }
      default: {
        reg::ProviderList providers;
        g = service_->ListProviders(&call->ctx, &empty, &providers);
        break;
      }
    }
    if (who != 1) CHECK(!g.ok());
  }

  void Query(FuzzedDataProvider* in, int who) {
    reg::UsageQuery q;
    q.set_tenant(in->ConsumeBool() ? "alice" : in->ConsumeRandomLengthString(10));
    q.set_provider(in->ConsumeBool() ? "acme" : "");
    q.set_from_unix(in->ConsumeBool() ? 0 : in->ConsumeIntegral<int64_t>());
    q.set_to_unix(in->ConsumeBool() ? 0 : in->ConsumeIntegral<int64_t>());
    auto call = As(who, in);
    reg::Invoice invoice;
    reg::UsageReply usage;
    reg::GpuList gpus;
    reg::Empty none;
    grpc::Status g;
    switch (in->ConsumeIntegralInRange(0, 3)) {
      case 0:
        g = service_->Bill(&call->ctx, &q, &invoice);
        break;
      case 1:
        g = service_->Earnings(&call->ctx, &q, &invoice);
        break;
      case 2:
        g = service_->Usage(&call->ctx, &q, &usage);
        break;
      default:
        g = service_->ListGpus(&call->ctx, &none, &gpus);
        break;
    }
    if (who == 0 || who == 4 || who == 5) CHECK(!g.ok());
    if (g.ok()) CHECK(std::isfinite(invoice.total()) && invoice.total() >= 0);
  }

  // What is stored obeys the bounds, whatever was sent.
  void CheckStored() {
    auto admin = As(1, nullptr);
    reg::UsageQuery q;
    reg::UsageReply usage;
    CHECK(service_->Usage(&admin->ctx, &q, &usage).ok());
    std::map<std::string, double> billed_ms;
    const double skew = static_cast<double>(limits_.skew_ms);
    for (const auto& u : usage.sessions()) {
      CHECK(std::isfinite(u.gpu_ms()) && u.gpu_ms() >= 0);
      // Inside one of its tenant's leases, and not in the future.
      bool inside = false;
      for (const Granted& l : granted_) {
        inside = inside || (l.tenant == u.tenant() && u.start_ms() >= l.granted_ms - skew &&
                            u.end_ms() <= l.expires_ms + skew);
      }
      if (!inside && getenv("RGPU_FUZZ_DEBUG") != nullptr) {
        fprintf(stderr, "outside: %s %lld..%lld\n", u.tenant().c_str(), (long long)u.start_ms(),
                (long long)u.end_ms());
      }
      CHECK(inside);
      CHECK(u.end_ms() <= now_ + limits_.skew_ms);
      // A session's records never overlap: their wall times add up to at most its span.
      CHECK(u.gpu_ms() <= static_cast<double>(u.end_ms() - u.start_ms()));
      CHECK(std::isfinite(u.gpu_busy_ms()) && u.gpu_busy_ms() <= u.gpu_ms() * 1.25 + 100);
      CHECK(static_cast<double>(u.bytes_in()) + static_cast<double>(u.bytes_out()) <=
            reg::kMaxAdvertisedBandwidthGbps * 1e6 * u.gpu_ms() * 1.25 + 256.0 * (1 << 20));
      billed_ms[u.tenant()] += u.gpu_ms();
    }
    std::map<std::string, double> allowed_ms;
    for (const Granted& l : granted_) {
      allowed_ms[l.tenant] += (static_cast<double>(l.expires_ms - l.granted_ms) + 2 * skew) *
                              limits_.max_sessions_per_lease;
    }
    for (const auto& [tenant, ms] : billed_ms) CHECK(ms <= allowed_ms[tenant]);
    for (const char* tenant : {"alice", "bob"}) {
      auto call = As(1, nullptr);
      reg::UsageQuery bq;
      bq.set_tenant(tenant);
      reg::Invoice invoice;
      CHECK(service_->Bill(&call->ctx, &bq, &invoice).ok());
      CHECK(std::isfinite(invoice.total()) && invoice.total() >= 0);
    }
  }

  void Run(FuzzedDataProvider* in) {
    Setup();
    bool restarted = false;
    // The caller whose credential each operation needs (mostly given; any other sometimes).
    static const int kRightCaller[] = {2, 2, 3, 2, 2, 1, 1, 1, 1};
    for (int op = 0; op < 48 && in->remaining_bytes() > 0; ++op) {
      const int kind = in->ConsumeIntegralInRange(0, 8);
      const int who = in->ConsumeIntegralInRange(0, 3) != 3 ? kRightCaller[kind]
                                                            : in->ConsumeIntegralInRange(0, 5);
      switch (kind) {
        case 0:
          Register(in, who);
          break;
        case 1:
          Heartbeat(in, who);
          break;
        case 2:
          Place(in, who);
          break;
        case 3:
        case 4:
          Report(in, who);
          break;
        case 5:
          Operator(in, who);
          break;
        case 6:
          Query(in, who);
          break;
        case 7:
          // Mostly seconds (servers stay online, leases live), sometimes days.
          now_ += !in->ConsumeBool() ? in->ConsumeIntegralInRange<int64_t>(0, 10000)
                                     : in->ConsumeIntegralInRange<int64_t>(0, 2 * 86400 * 1000);
          service_->Sweep();
          break;
        default:
          if (!restarted) {  // the store's state reloaded, as after a crash
            restarted = true;
            Stop();
            CHECK(Start());
          }
          break;
      }
    }
    CheckStored();
  }

 private:
  static double Double(FuzzedDataProvider* in) {
    switch (in->ConsumeIntegralInRange(0, 5)) {
      case 0:
        return std::nan("");
      case 1:
        return INFINITY;
      case 2:
        return -in->ConsumeFloatingPoint<double>();
      case 3:
        return in->ConsumeFloatingPointInRange<double>(0, 1000);
      default:
        return in->ConsumeFloatingPoint<double>();
    }
  }

  std::string dir_;
  int64_t now_ = kStart;
  reg::UsageLimits limits_;
  std::unique_ptr<reg::RegistryService> service_;
  std::string provider_key_;
  std::vector<std::string> tenant_keys_;
  std::vector<Granted> granted_;
};

std::string g_dir;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rgpu::InitLogging("registry_fuzzer", rgpu::LogLevel::kError);
  google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 in parsed requests is expected
  // A tmpfs when there is one: the store syncs every commit.
  const std::string base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  std::string dir = base + "/rgpu-registry-fuzz-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) abort();
  g_dir = dir;
  if (!rgpu::GenerateTokenKeys(g_dir + "/key.pem", g_dir + "/key.pub").ok()) abort();
  atexit([] {
    fprintf(stderr, "registry_fuzzer: %llu placements, %llu records stored, %llu refused\n",
            (unsigned long long)g_placed, (unsigned long long)g_stored,
            (unsigned long long)g_refused);
    const std::string command = "rm -rf " + g_dir;
    (void)!system(command.c_str());
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (const char* suffix : {"", "-wal", "-shm"}) unlink((g_dir + "/registry.db" + suffix).c_str());
  FuzzedDataProvider in(data, size);
  Harness harness(g_dir);
  if (!harness.Start()) abort();
  harness.Run(&in);
  return 0;
}
