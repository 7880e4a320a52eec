// meter_load: stands in for N rgpu-servers streaming metering to a registry, through the real
// RegistryAgent (usage meter, pending list, retries). Each server answers the registry's
// reachability probe (ProbeResponder, as rgpu-server does); each session runs under a lease the
// registry granted to one of the tenants (placed with their API keys, as `rgpu run` does), so
// that the registry accepts its records. The sessions' counters grow while the registry may be
// killed and restarted; then the sessions end, every agent delivers everything, and the tool
// writes what the servers measured and what the registry acknowledged, for durability.sh to
// compare with the registry's usage and bill.
//   meter_load --registry ADDR --provider-key KEY --api-key TENANT=KEY... --servers N
//              --sessions S --seconds T --out FILE     (S sessions per server on average)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <CLI/CLI.hpp>

#include "common/log.h"
#include "proto/crypto.h"
#include "registry/channel.h"
#include "server/registry_agent.h"
#include "tests/registry/probe_responder.h"

namespace {

struct FakeServer {
  std::mutex mu;
  std::map<uint64_t, rgpu::wire::SessionStats> live;
  rgpu::registry::ProbeResponder responder;
  std::unique_ptr<rgpu::server::RegistryAgent> agent;
};

// A placement for the tenant with `api_key`, waiting until a server is placeable.
bool Place(rgpu::registry::Registry::Stub* stub, const std::string& api_key,
           rgpu::registry::Placement* placement) {
  rgpu::registry::PlaceRequest req;
  req.set_memory_bytes(1ull << 30);
  req.set_compute_share(10);
  req.set_wait_seconds(60);
  std::string holder_private, holder_public;
  if (!rgpu::GenerateEd25519(&holder_private, &holder_public).ok()) return false;
  req.set_holder_key(holder_public);
  grpc::ClientContext ctx;
  ctx.AddMetadata("x-rgpu-api-key", api_key);
  auto reader = stub->Place(&ctx, req);
  rgpu::registry::PlaceUpdate update;
  bool placed = false;
  while (reader->Read(&update)) {
    if (update.has_placement()) {
      *placement = update.placement();
      placed = true;
    }
  }
  grpc::Status g = reader->Finish();
  if (!g.ok()) fprintf(stderr, "meter_load: placement refused: %s\n", g.error_message().c_str());
  return g.ok() && placed;
}

}  // namespace

int main(int argc, char** argv) {
  rgpu::InitLogging("meter_load", rgpu::LogLevel::kWarn);
  std::string registry, provider_key, out_path;
  std::vector<std::string> api_keys;
  int servers = 4, sessions = 3, seconds = 5, report_ms = 50;
  CLI::App app{"meter_load: servers streaming metering to a registry"};
  app.add_option("--registry", registry)->required();
  app.add_option("--provider-key", provider_key)->required();
  app.add_option("--api-key", api_keys, "TENANT=KEY of a tenant whose sessions the servers run")
      ->required();
  app.add_option("--servers", servers);
  app.add_option("--sessions", sessions);
  app.add_option("--seconds", seconds);
  app.add_option("--report-ms", report_ms);
  app.add_option("--out", out_path)->required();
  CLI11_PARSE(app, argc, argv);

  std::mutex acked_mu;
  std::set<std::string> acked_ids;
  uint64_t acked_calls = 0, acked_bytes = 0, duplicate_acks = 0;
  double acked_gpu_ms = 0;
  std::vector<std::unique_ptr<FakeServer>> fleet;
  for (int i = 0; i < servers; ++i) {
    auto server = std::make_unique<FakeServer>();
    rgpu::server::RegistryAgentOptions options;
    options.address = registry;
    options.provider_key = provider_key;
    options.server_name = "load-" + std::to_string(i);
    options.server_url = server->responder.url();
    options.reachability_secret = server->responder.secret();
    options.report_ms = report_ms;
    options.observe_ms = report_ms;
    options.on_acknowledged = [&](const rgpu::registry::UsageRecord& r) {
      std::lock_guard<std::mutex> lock(acked_mu);
      if (!acked_ids.insert(r.record_id()).second) {
        ++duplicate_acks;  // acknowledged again after a retry: counted once
        return;
      }
      acked_calls += r.calls();
      acked_bytes += r.bytes_in() + r.bytes_out();
      acked_gpu_ms += static_cast<double>(r.end_ms() - r.start_ms());
    };
    rgpu::registry::GpuSpec gpu;
    gpu.set_model("load test GPU");
    gpu.set_memory_bytes(16ull << 30);
    gpu.set_cc_major(8);
    gpu.set_driver_version(12040);
    FakeServer* raw = server.get();
    server->agent = std::make_unique<rgpu::server::RegistryAgent>();
    rgpu::Status s = server->agent->Start(
        options, {gpu},
        [raw] {
          rgpu::wire::StatusReply reply;
          std::lock_guard<std::mutex> lock(raw->mu);
          for (const auto& [id, stats] : raw->live) *reply.add_sessions() = stats;
          return reply;
        },
        nullptr);
    if (!s.ok()) {
      fprintf(stderr, "meter_load: %s\n", s.ToString().c_str());
      return 1;
    }
    fleet.push_back(std::move(server));
  }
  // The sessions: each placed by the registry for a tenant, then run on the server it chose.
  std::shared_ptr<grpc::Channel> channel;
  if (!rgpu::registry::OpenChannel(registry, "", &channel).ok()) return 1;
  auto stub = rgpu::registry::Registry::NewStub(channel);
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < fleet.size(); ++i) by_name["load-" + std::to_string(i)] = i;
  for (int j = 0; j < servers * sessions; ++j) {
    const std::string& tenant_key = api_keys[static_cast<size_t>(j) % api_keys.size()];
    const size_t eq = tenant_key.find('=');
    if (eq == std::string::npos) {
      fprintf(stderr, "meter_load: --api-key takes TENANT=KEY\n");
      return 2;
    }
    rgpu::registry::Placement placement;
    if (!Place(stub.get(), tenant_key.substr(eq + 1), &placement)) return 1;
    auto server = by_name.find(placement.server_name());
    if (server == by_name.end()) {
      fprintf(stderr, "meter_load: placed on an unknown server %s\n",
              placement.server_name().c_str());
      return 1;
    }
    FakeServer* raw = fleet[server->second].get();
    rgpu::wire::SessionStats stats;
    stats.set_session_id(static_cast<uint64_t>(j + 1));
    stats.set_tenant(tenant_key.substr(0, eq));
    stats.set_lease_id(placement.lease_id());
    stats.set_memory_bytes(1ull << 30);
    raw->agent->SessionStarted(stats.session_id());
    std::lock_guard<std::mutex> lock(raw->mu);
    raw->live[stats.session_id()] = stats;
  }
  // The sessions work: counters grow at random while the registry comes and goes.
  std::mt19937_64 rng(12345);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    for (auto& server : fleet) {
      std::lock_guard<std::mutex> lock(server->mu);
      for (auto& [id, stats] : server->live) {
        stats.set_calls(stats.calls() + rng() % 100);
        stats.set_bytes_in(stats.bytes_in() + rng() % 100000);
        stats.set_bytes_out(stats.bytes_out() + rng() % 50000);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  uint64_t measured_calls = 0, measured_bytes = 0;
  for (auto& server : fleet) {
    std::map<uint64_t, rgpu::wire::SessionStats> ended;
    {
      std::lock_guard<std::mutex> lock(server->mu);
      ended.swap(server->live);
    }
    for (const auto& [id, stats] : ended) {
      measured_calls += stats.calls();
      measured_bytes += stats.bytes_in() + stats.bytes_out();
      server->agent->SessionEnded(stats);
    }
  }
  size_t undelivered = 0;
  for (auto& server : fleet) {
    server->agent->Stop(120000);
    undelivered += server->agent->pending();
  }
  FILE* out = fopen(out_path.c_str(), "w");
  if (out == nullptr) return 1;
  fprintf(out,
          "{\"measured_calls\": %llu, \"measured_bytes\": %llu, \"acked_records\": %zu, "
          "\"acked_calls\": %llu, \"acked_bytes\": %llu, \"acked_gpu_ms\": %.0f, "
          "\"duplicate_acks\": %llu, \"undelivered\": %zu}\n",
          (unsigned long long)measured_calls, (unsigned long long)measured_bytes, acked_ids.size(),
          (unsigned long long)acked_calls, (unsigned long long)acked_bytes, acked_gpu_ms,
          (unsigned long long)duplicate_acks, undelivered);
  fclose(out);
  return undelivered == 0 ? 0 : 1;
}
