// registry_bench: the registry's placement under load. An rgpu-registry service (SQLite store,
// in this process) on loopback gRPC with 6000 registered GPUs (750 servers x 8, four models),
// servers heartbeating every 2 s, and tenants asking for placements at a fixed rate (open loop:
// a request is sent on schedule whether or not earlier ones are answered); sessions end about
// a second after their placement, as servers report. Prints p50/p99 of the placement decision
// (time spent choosing the GPU) and of end-to-end allocation (request sent to token received).
//   registry_bench [--gpus 6000] [--rate 100] [--seconds 30] [--policy reach] [--json FILE]
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include <CLI/CLI.hpp>

#include "common/log.h"
#include "proto/signed_token.h"
#include "registry/keys.h"
#include "registry/service.h"

namespace reg = rgpu::registry;
using Clock = std::chrono::steady_clock;

namespace {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * (v.size() - 1) + 0.5));
  return v[i];
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  rgpu::InitLogging("registry_bench", rgpu::LogLevel::kError);
  int gpus = 6000, rate = 100, seconds = 30, tenants = 50;
  std::string json_path, policy = reg::kDefaultPlacementPolicy;
  CLI::App app{"registry_bench: placement decision and allocation latency under load"};
  app.add_option("--gpus", gpus, "GPUs to register (8 per server)")->capture_default_str();
  app.add_option("--rate", rate, "placement requests per second")->capture_default_str();
  app.add_option("--seconds", seconds, "how long to send requests")->capture_default_str();
  app.add_option("--policy", policy, "the registry's placement policy")->capture_default_str();
  app.add_option("--json", json_path, "write the figures as JSON here");
  CLI11_PARSE(app, argc, argv);

  std::string dir_template =
      (getenv("TMPDIR") ? std::string(getenv("TMPDIR")) : "/tmp") + "/rgpu-registry-bench-XXXXXX";
  std::vector<char> dir(dir_template.begin(), dir_template.end());
  dir.push_back(0);
  if (mkdtemp(dir.data()) == nullptr) return 1;
  const std::string work = dir.data();
  if (!rgpu::GenerateTokenKeys(work + "/key.pem", work + "/key.pub").ok()) return 1;
  reg::RegistryOptions options;
  options.signing_key_path = work + "/key.pem";
  options.heartbeat_ms = 2000;
  options.placement_policy = policy;
  options.admin_key = rgpu::registry::NewKey("bench-operator-");
  // The fleet is simulated: its servers do not exist, so their reachability is taken as proven
  // (an in-process option; rgpu-registry always probes).
  options.probe = [](const std::string&, const std::string&) { return rgpu::Status::Ok(); };
  std::unique_ptr<reg::Db> db;
  std::unique_ptr<reg::Store> store;
  std::unique_ptr<reg::RegistryService> service;
  rgpu::Status s = reg::OpenSqlite(work + "/registry.db", &db);
  if (s.ok()) s = reg::Store::Open(std::move(db), &store);
  if (s.ok()) s = reg::RegistryService::Create(std::move(store), options, &service);
  if (!s.ok()) {
    fprintf(stderr, "registry_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service.get());
  auto server = builder.BuildAndStart();
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  auto stub = reg::Registry::NewStub(channel);

  auto create = [&](bool provider, const std::string& name) {
    reg::NameRequest req;
    req.set_name(name);
    reg::KeyReply reply;
    grpc::ClientContext ctx;
    ctx.AddMetadata("x-rgpu-admin-key", options.admin_key);
    grpc::Status g =
        provider ? stub->CreateProvider(&ctx, req, &reply) : stub->CreateTenant(&ctx, req, &reply);
    if (!g.ok()) fprintf(stderr, "registry_bench: %s\n", g.error_message().c_str());
    return reply.key();
  };
  const std::string provider_key = create(true, "bench-provider");
  std::vector<std::string> tenant_keys, tenant_names;
  for (int i = 0; i < tenants; ++i) {
    tenant_names.push_back("tenant-" + std::to_string(i));
    tenant_keys.push_back(create(false, tenant_names.back()));
  }

  // Register the fleet.
  const char* models[] = {"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "NVIDIA L4",
                          "Tesla T4"};
  const uint64_t memory[] = {80ull << 30, 40ull << 30, 24ull << 30, 16ull << 30};
  const int servers = (gpus + 7) / 8;
  const auto register_start = Clock::now();
  for (int i = 0; i < servers; ++i) {
    reg::RegisterRequest req;
    req.set_server_name("srv-" + std::to_string(i));
    req.set_server_url("tcp://10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250) +
                       ":7000");
    req.set_reachability_secret(std::string(32, 's'));
    for (int j = 0; j < 8 && i * 8 + j < gpus; ++j) {
      reg::GpuSpec* g = req.add_gpus();
      g->set_index(static_cast<uint32_t>(j));
      g->set_model(models[i % 4]);
      g->set_memory_bytes(memory[i % 4]);
      g->set_cc_major(8);
      g->set_driver_version(12040);
      g->set_backend("cuda");
    }
    reg::RegisterReply reply;
    grpc::ClientContext ctx;
    ctx.AddMetadata("x-rgpu-provider-key", provider_key);
    grpc::Status g = stub->Register(&ctx, req, &reply);
    if (!g.ok()) {
      fprintf(stderr, "registry_bench: register: %s\n", g.error_message().c_str());
      return 1;
    }
  }
  service->WaitForProbes();
  const double register_s = std::chrono::duration<double>(Clock::now() - register_start).count();

  std::atomic<bool> stop{false};
  // Heartbeats from every server, spread over the interval; and the sweeper.
  std::vector<double> heartbeat_ms;  // a unary round trip on the same channel: the floor
  std::thread heartbeats([&] {
    int i = 0;
    while (!stop.load()) {
      const auto sent = Clock::now();
      reg::HeartbeatRequest req;
      req.set_server_name("srv-" + std::to_string(i));
      reg::HeartbeatReply reply;
      grpc::ClientContext ctx;
      ctx.AddMetadata("x-rgpu-provider-key", provider_key);
      if (stub->Heartbeat(&ctx, req, &reply).ok()) {
        heartbeat_ms.push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
      }
      i = (i + 1) % servers;
      std::this_thread::sleep_for(std::chrono::microseconds(2000000 / servers / 2));
    }
  });
  std::thread sweeper([&] {
    while (!stop.load()) {
      service->Sweep();
      std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    }
  });
  // Sessions end about a second after placement: the server reports their last usage record.
  std::mutex ended_mu;
  std::deque<std::pair<Clock::time_point, reg::UsageRecord>> ending;
  std::thread ender([&] {
    uint64_t n = 0;
    while (!stop.load() || !ending.empty()) {
      reg::ReportUsageRequest req;
      {
        std::lock_guard<std::mutex> lock(ended_mu);
        while (!ending.empty() && ending.front().first <= Clock::now()) {
          *req.add_records() = ending.front().second;
          req.mutable_records(req.records_size() - 1)->set_record_id("end-" + std::to_string(++n));
          ending.pop_front();
        }
      }
      if (req.records_size() > 0) {
        reg::ReportUsageReply reply;
        grpc::ClientContext ctx;
        ctx.AddMetadata("x-rgpu-provider-key", provider_key);
        stub->ReportUsage(&ctx, req, &reply);
      }
      if (stop.load() && ending.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  // Open-loop requests: request k is sent at start + k / rate, each on its own thread.
  const int total = rate * seconds;
  std::vector<double> decision_us(total, -1), e2e_ms(total, -1);
  std::atomic<int> failures{0};
  std::atomic<int> outstanding{0};  // requests sent and not yet answered
  const auto start = Clock::now();
  std::mt19937 rng(7);
  for (int k = 0; k < total; ++k) {
    std::this_thread::sleep_until(start + std::chrono::microseconds(1000000LL * k / rate));
    const int t = static_cast<int>(rng() % tenants);
    const uint64_t mem = (1 + rng() % 8) << 30;
    const uint32_t share = 10 + rng() % 41;
    outstanding++;
    std::thread([&, k, t, mem, share] {
      reg::PlaceRequest req;
      req.set_memory_bytes(mem);
      req.set_compute_share(share);
      req.set_wait_seconds(10);
      req.set_holder_key(std::string(32, 'h'));  // a token holder's public key (not used here)
      grpc::ClientContext ctx;
      ctx.AddMetadata("x-rgpu-api-key", tenant_keys[t]);
      const auto sent = Clock::now();
      auto reader = stub->Place(&ctx, req);
      reg::PlaceUpdate update;
      reg::Placement placement;
      while (reader->Read(&update)) {
        if (update.has_placement()) placement = update.placement();
      }
      const auto received = Clock::now();
      if (!reader->Finish().ok() || placement.token().empty()) {
        failures++;
        outstanding--;
        return;
      }
      e2e_ms[k] = std::chrono::duration<double, std::milli>(received - sent).count();
      if (getenv("BENCH_DEBUG") && e2e_ms[k] > 100) {
        fprintf(stderr, "slow %d: %.1f ms, queued %lld ms, decision %.0f us\n", k, e2e_ms[k],
                (long long)placement.queue_ms(), placement.decision_us());
      }
      decision_us[k] = placement.decision_us();
      reg::UsageRecord end;
      end.set_server_name(placement.server_name());
      end.set_gpu_index(placement.gpu_index());
      end.set_tenant(tenant_names[t]);
      end.set_lease_id(placement.lease_id());
      end.set_session_id(static_cast<uint64_t>(k));
      end.set_start_ms(NowMs());
      end.set_end_ms(NowMs());
      end.set_session_ended(true);
      {
        std::lock_guard<std::mutex> lock(ended_mu);
        ending.emplace_back(Clock::now() + std::chrono::seconds(1), end);
      }
      outstanding--;
    }).detach();
  }
  while (outstanding.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  stop.store(true);
  heartbeats.join();
  sweeper.join();
  ender.join();
  // Whatever the timing, no GPU may be promised beyond its memory or compute.
  int overcommitted = 0;
  {
    reg::GpuList list;
    grpc::ClientContext ctx;
    stub->ListGpus(&ctx, reg::Empty(), &list);
    for (const auto& g : list.gpus()) {
      if (g.memory_committed() > g.spec().memory_bytes() || g.share_committed() > 100) {
        ++overcommitted;
      }
    }
  }
  service->Shutdown();
  server->Shutdown();

  std::vector<double> d, e;
  for (int k = 0; k < total; ++k) {
    if (e2e_ms[k] >= 0) {
      d.push_back(decision_us[k]);
      e.push_back(e2e_ms[k]);
    }
  }
  printf(
      "registry_bench: %d GPUs on %d servers (registered in %.1f s), policy %s, %d requests at "
      "%d/s over %.1f s, %d failed, %d GPUs overcommitted\n",
      gpus, servers, register_s, policy.c_str(), total, rate, elapsed, failures.load(),
      overcommitted);
  printf("| measure | p50 | p99 | max |\n|---|---|---|---|\n");
  printf("| placement decision (choose the GPU) | %.0f us | %.0f us | %.0f us |\n",
         Percentile(d, 50), Percentile(d, 99), Percentile(d, 100));
  printf("| allocation, request to token (loopback gRPC) | %.2f ms | %.2f ms | %.2f ms |\n",
         Percentile(e, 50), Percentile(e, 99), Percentile(e, 100));
  printf(
      "| for scale: a heartbeat (unary gRPC round trip, same channel) | %.2f ms | %.2f ms | "
      "%.2f ms |\n",
      Percentile(heartbeat_ms, 50), Percentile(heartbeat_ms, 99), Percentile(heartbeat_ms, 100));
  if (!json_path.empty()) {
    FILE* f = fopen(json_path.c_str(), "w");
    if (f != nullptr) {
      fprintf(f,
              "{\"gpus\": %d, \"policy\": \"%s\", \"rate\": %d, \"requests\": %d, \"failed\": %d, "
              "\"decision_us\": {\"p50\": %.1f, \"p99\": %.1f, \"max\": %.1f}, "
              "\"allocation_ms\": {\"p50\": %.3f, \"p99\": %.3f, \"max\": %.3f}, "
              "\"heartbeat_ms\": {\"p50\": %.3f, \"p99\": %.3f}}\n",
              gpus, policy.c_str(), rate, total, failures.load(), Percentile(d, 50),
              Percentile(d, 99), Percentile(d, 100), Percentile(e, 50), Percentile(e, 99),
              Percentile(e, 100), Percentile(heartbeat_ms, 50), Percentile(heartbeat_ms, 99));
      fclose(f);
    }
  }
  std::string command = "rm -rf " + work;
  (void)!system(command.c_str());
  return failures.load() == 0 && overcommitted == 0 ? 0 : 1;
}
