// rgpu-tool: the full command-line front end, which the `rgpu` binary (launcher.cc) execs for
// everything but a plain `rgpu run --server`. As `rgpu`:
//   rgpu run --server URL [--token T] -- PROGRAM ARGS...   run a program on a remote GPU
//                                       (--server and --token again: devices of several servers)
//   rgpu bench --transport tcp|shm|sock [--json FILE] [--png FILE]  measure against the floor
//   rgpu token keygen|sign ...                                  signed session tokens
//   rgpu status --server URL [--json]                           a server's live sessions
//   rgpu migrate --server A --session ID --to B                 a running session to another server
//   rgpu checkpoint --server A --session ID --file F            ... into a file (the program waits)
//   rgpu restore --server B --file F --from A --session ID      ... from it, its program resumed
//   rgpu run --registry ADDR --api-key KEY [--gpu-type T] [--memory SIZE] [--priority P]
//            -- PROGRAM ARGS...                                 placed by the registry
//   rgpu place --registry ADDR --api-key KEY [--job ID] [--json]   a placement for later
//   rgpu lease release LEASE | lease list                       end it early; with notices
//   rgpu reserve --start T --duration D [--gpus N] ...          GPUs held from T for D
//   rgpu reservation list | cancel ID                           the tenant's reservations
//   rgpu tenant create|list, rgpu provider create|list|revoke, rgpu gpus, rgpu usage,
//   rgpu bill --tenant NAME, rgpu earnings --provider NAME     the registry (all with --json)
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/bench.h"
#include "cli/migrate.h"
#include "cli/registry_commands.h"
#include "cli/run_program.h"
#include "cli/smi.h"
#include "cli/status.h"
#include "common/state_dir.h"
#include "proto/crypto.h"
#include "proto/signed_token.h"

using rgpu::cli::Exists;
using rgpu::cli::FindInterposer;

namespace {

// The operator's key in `path` (default: $RGPU_STATE_DIR or ~/.rgpu, server-operator.key); ""
// when there is none.
std::string ReadOperatorKey(std::string path) {
  std::string dir;
  if (path.empty() && rgpu::UserStateDir(&dir).ok()) path = dir + "/server-operator.key";
  std::ifstream in(path);
  std::string key;
  std::getline(in, key);
  while (!key.empty() && isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
  return key;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rgpu: run CUDA programs on remote GPUs"};
  app.require_subcommand(1);

  std::vector<std::string> servers, tokens;
  std::vector<std::string> program;
  CLI::App* run = app.add_subcommand("run", "run a program with its GPU calls sent to a server");
  run->add_option("--server", servers,
                  "server URL, e.g. tcp://host:port, or local: the software GPU inside the program "
                  "(default $RGPU_SERVER); again for devices of several servers, numbered in "
                  "this order")
      ->allow_extra_args(false);  // one value each time: "--" still ends the options
  run->add_option("--token", tokens,
                  "session token (default $RGPU_TOKEN); with several servers one per --server, "
                  "in the same order, or one for all")
      ->allow_extra_args(false);  // one value each time: "--" still ends the options
  rgpu::cli::RegistryAccess access;
  rgpu::cli::PlaceOptions place;
  run->add_option("--registry", access.address,
                  "ask the registry at HOST:PORT for a placement (default $RGPU_REGISTRY "
                  "when --server is not given)");
  run->add_option("--api-key", access.api_key, "the tenant's API key (default $RGPU_API_KEY)");
  // What a placement asks for, the same for `rgpu run --registry` and `rgpu place`.
  auto place_options = [&place](CLI::App* cmd) {
    cmd->add_option("--gpu-type", place.gpu_type, "GPU model to ask for (substring; default any)");
    cmd->add_option("--backend", place.backend,
                    "server backend to ask for: cuda, hip (HIP programs' kernels) or softgpu")
        ->check(CLI::IsMember({"cuda", "hip", "softgpu"}));
    cmd->add_option("--memory", place.memory, "device memory to ask for (K/M/G suffixes)")
        ->capture_default_str();
    cmd->add_option("--share", place.compute_share, "percent of a GPU's compute to ask for")
        ->capture_default_str();
    cmd->add_option("--priority", place.priority, "0 (lowest) to 9; higher is placed first")
        ->capture_default_str();
    cmd->add_option("--wait", place.wait_seconds, "seconds to wait in the queue for a GPU")
        ->capture_default_str();
    cmd->add_option("--ttl", place.ttl_seconds, "seconds the placement and its token last")
        ->capture_default_str();
    cmd->add_option("--job", place.job,
                    "the batch job it serves (e.g. slurm:CLUSTER:JOBID), shown on its bill lines");
    cmd->add_option("--duration", place.duration,
                    "how long the work needs the GPU (seconds, or 90m, 2h): only GPUs whose "
                    "lendable window lasts that long take it, while it waits shorter "
                    "requests of its priority go first (aged by the wait), and the lease ends "
                    "when it is over (a time limit)");
    cmd->add_option("--reservation", place.reservation_id,
                    "place under this reservation of yours (rgpu reserve), on its GPUs");
  };
  place_options(run);
  int gpu_count = 1;
  run->add_option("--gpus", gpu_count,
                  "with --registry: GPUs to place, each its own lease and token, possibly on "
                  "several servers; the program's devices 0..N-1 in placement order")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  run->add_option("program", program, "program and its arguments (after --)")->required();

  // The registry's commands share how they reach it.
  auto access_options = [&access](CLI::App* cmd) {
    cmd->add_option("--registry", access.address, "registry HOST:PORT (default $RGPU_REGISTRY)");
    cmd->add_option("--admin-key", access.admin_key, "operator key (default $RGPU_ADMIN_KEY)");
    cmd->add_option("--admin-key-file", access.admin_key_file,
                    "read the operator key from this file, the one rgpu-registry keeps it in "
                    "(default $RGPU_ADMIN_KEY_FILE)");
    cmd->add_option("--api-key", access.api_key, "tenant API key (default $RGPU_API_KEY)");
    cmd->add_option("--provider-key", access.provider_key,
                    "provider key (default $RGPU_PROVIDER_KEY)");
    cmd->add_option("--tls-ca", access.tls_ca, "CA certificate (PEM) when the registry uses TLS");
    cmd->add_flag("--json", access.json, "print JSON");
  };
  std::string subject, from, to;
  bool smi_json = false;
  CLI::App* smi = app.add_subcommand("smi", "nvidia-smi's table for the GPUs a server gives you");
  smi->add_option("--server", servers, "server URL (default $RGPU_SERVER; again: several)")
      ->allow_extra_args(false);  // one value each time: "--" still ends the options
  smi->add_option("--token", tokens, "session token (default $RGPU_TOKEN; again: one per server)")
      ->allow_extra_args(false);  // one value each time: "--" still ends the options
  smi->add_flag("--json", smi_json, "print JSON");

  CLI::App* tenant = app.add_subcommand("tenant", "the registry's tenants");
  tenant->require_subcommand(1);
  CLI::App* tenant_create = tenant->add_subcommand("create", "create a tenant; prints its API key");
  tenant_create->add_option("name", subject, "tenant name")->required();
  CLI::App* tenant_list = tenant->add_subcommand("list", "list tenants");
  CLI::App* provider = app.add_subcommand("provider", "the registry's providers");
  provider->require_subcommand(1);
  CLI::App* provider_create =
      provider->add_subcommand("create", "create a provider; prints its provider key");
  provider_create->add_option("name", subject, "provider name")->required();
  CLI::App* provider_list = provider->add_subcommand("list", "list providers");
  CLI::App* provider_revoke =
      provider->add_subcommand("revoke", "revoke a provider: its GPUs take no new placements");
  provider_revoke->add_option("name", subject, "provider name")->required();
  CLI::App* lease = app.add_subcommand("lease", "the tenant's leases");
  lease->require_subcommand(1);
  std::string lease_id;
  CLI::App* lease_release =
      lease->add_subcommand("release", "end one of your leases now (its GPU is free again)");
  lease_release->add_option("lease", lease_id, "the lease's id")->required();
  CLI::App* lease_list =
      lease->add_subcommand("list", "your active leases, and when and why those under notice end");
  rgpu::cli::ReserveOptions reserve;
  CLI::App* reserve_cmd = app.add_subcommand(
      "reserve", "hold GPUs from a start time for a duration (billed by the price list)");
  reserve_cmd->add_option("--start", reserve.start, "unix seconds, now, or YYYY-MM-DDTHH:MM:SSZ")
      ->required();
  reserve_cmd->add_option("--duration", reserve.duration, "seconds, or 90m, 2h, 1d")->required();
  reserve_cmd->add_option("--gpus", reserve.gpus, "GPUs to hold")->capture_default_str();
  reserve_cmd->add_option("--gpu-type", reserve.gpu_type, "GPU model (substring; default any)");
  reserve_cmd->add_option("--backend", reserve.backend, "server backend (default any)");
  reserve_cmd->add_option("--memory", reserve.memory, "device memory on each GPU")
      ->capture_default_str();
  reserve_cmd->add_option("--share", reserve.compute_share, "percent of each GPU's compute")
      ->capture_default_str();
  reserve_cmd->add_option("--job", reserve.job, "the batch job it serves");
  CLI::App* reservation = app.add_subcommand("reservation", "the tenant's reservations");
  reservation->require_subcommand(1);
  std::string reservation_tenant, reservation_id;
  CLI::App* reservation_list = reservation->add_subcommand("list", "list reservations");
  reservation_list->add_option("--tenant", reservation_tenant,
                               "the operator: only this tenant's (default all)");
  CLI::App* reservation_cancel =
      reservation->add_subcommand("cancel", "cancel a reservation (before its start: no charge)");
  reservation_cancel->add_option("reservation", reservation_id, "the reservation's id")->required();
  CLI::App* place_cmd = app.add_subcommand(
      "place",
      "take a placement for a program started later (a batch job's prolog): prints "
      "RGPU_SERVER, RGPU_TOKEN, RGPU_LEASE lines, or JSON");
  place_options(place_cmd);
  CLI::App* gpus = app.add_subcommand("gpus", "GPUs registered: state, load, last heartbeat");
  std::string usage_tenant, usage_provider;
  CLI::App* usage = app.add_subcommand("usage", "metered usage per session");
  usage->add_option("--tenant", usage_tenant, "only this tenant");
  usage->add_option("--provider", usage_provider, "only this provider's GPUs");
  CLI::App* bill = app.add_subcommand("bill", "a tenant's itemized invoice");
  bill->add_option("--tenant", subject, "tenant to bill (default: the API key's)");
  CLI::App* earnings = app.add_subcommand("earnings", "a provider's earnings");
  earnings->add_option("--provider", subject, "provider (default: the provider key's)");
  std::string job;
  for (CLI::App* cmd : {usage, bill}) {
    cmd->add_option("--job", job, "only this batch job's sessions and holds (rgpu place --job)");
  }
  for (CLI::App* cmd : {usage, bill, earnings}) {
    cmd->add_option("--from", from,
                    "start: unix seconds, now, or YYYY-MM-DDTHH:MM:SSZ (default: bill and "
                    "earnings without --to the current billing period, else 1970)");
    cmd->add_option("--to", to, "end (default now)");
  }
  for (CLI::App* cmd : {tenant_create, tenant_list, provider_create, provider_list, provider_revoke,
                        gpus, usage, bill, earnings, lease_release, lease_list, place_cmd,
                        reserve_cmd, reservation_list, reservation_cancel}) {
    access_options(cmd);
  }

  rgpu::cli::BenchOptions bench_options;
  CLI::App* bench = app.add_subcommand(
      "bench", "measure rgpu against the transport's floor and the in-process software GPU");
  bench->add_option("--transport", bench_options.transport, "tcp, shm, sock or tls")
      ->capture_default_str();
  bench->add_option("--json", bench_options.json_path, "write the results as JSON here");
  bench->add_option("--png", bench_options.png_path, "draw the copy-latency curve here (gnuplot)");
  bench->add_flag("--quick", bench_options.quick, "fewer repetitions (a smoke test)");
  bench->add_flag("--pin", bench_options.pin,
                  "rgpu-server on cpu 0 and the program on cpu 1, as the floor runs");

  CLI::App* token_cmd = app.add_subcommand("token", "session tokens signed with Ed25519");
  token_cmd->require_subcommand(1);
  std::string private_key, public_key;
  CLI::App* keygen = token_cmd->add_subcommand("keygen", "write a new signing key pair");
  keygen->add_option("--private", private_key, "private key (PEM) to write")->required();
  keygen->add_option("--public", public_key, "public key (PEM) to write")->required();
  rgpu::wire::TokenClaims claims;
  std::string memory = "1G", key_path, server_claim, tenant_claim;
  std::vector<uint32_t> gpu_claims;
  double weight = 1.0;
  long ttl = 3600;
  CLI::App* sign = token_cmd->add_subcommand(
      "sign",
      "print a credential: a token signed with a private key, bound to a new holder key, and "
      "that holder key's private half (keep it secret; give it as --token or RGPU_TOKEN)");
  sign->add_option("--key", key_path, "private key (PEM)")->required();
  sign->add_option("--tenant", tenant_claim, "tenant name")->required();
  sign->add_option("--memory", memory, "device memory quota (bytes, K/M/G suffixes)")
      ->capture_default_str();
  sign->add_option("--weight", weight, "share weight")->capture_default_str();
  sign->add_option("--ttl", ttl, "seconds until the token expires")->capture_default_str();
  sign->add_option("--server", server_claim, "the server it is valid for (default: any)");
  sign->add_option(
          "--gpu", gpu_claims,
          "the GPUs (device indices) it grants, e.g. 0,2 (default: every GPU of the server)")
      ->delimiter(',');

  std::string status_server;
  bool status_json = false;
  CLI::App* status = app.add_subcommand("status", "a server's live sessions");
  status->add_option("--server", status_server, "server URL (default $RGPU_SERVER)");
  status->add_flag("--json", status_json, "print JSON");
  std::string status_token, status_key_file;
  status->add_option("--token", status_token,
                     "a tenant's credential: only its sessions (default $RGPU_TOKEN)");
  status->add_option("--operator-key-file", status_key_file,
                     "the server's operator key: every session (default: "
                     "$RGPU_STATE_DIR or ~/.rgpu, server-operator.key, when there is no token)");

  // Moving sessions (docs/migration.md).
  rgpu::cli::MoveOptions move;
  std::string move_key_file;
  CLI::App* migrate = app.add_subcommand(
      "migrate", "move a running session to another server; its program does not notice");
  CLI::App* checkpoint = app.add_subcommand(
      "checkpoint", "move a running session into a file; its program waits for `rgpu restore`");
  CLI::App* restore = app.add_subcommand(
      "restore", "restore a checkpoint file on a server and send the waiting program there");
  for (CLI::App* c : {migrate, checkpoint, restore}) {
    c->add_option("--server", move.server,
                  c == restore ? "the server to restore it on" : "the server the session is on")
        ->required();
    c->add_option("--session", move.session,
                  c == restore ? "the session's id on --from (its `rgpu status --json` \"session\")"
                               : "the session's id (`rgpu status --json`'s \"session\")")
        ->required();
    c->add_option("--operator-key-file", move_key_file,
                  "the servers' operator key (default: $RGPU_STATE_DIR or ~/.rgpu, "
                  "server-operator.key)");
    c->add_flag("--json", move.json, "print JSON");
  }
  for (CLI::App* c : {migrate, checkpoint}) {
    c->add_option("--timeout-ms", move.timeout_ms,
                  "the longest wait for the program's next call it waits for")
        ->capture_default_str();
  }
  migrate->add_option("--to", move.to, "the server the session goes to")->required();
  checkpoint->add_option("--file", move.file, "the checkpoint file to write")->required();
  restore->add_option("--file", move.file, "the checkpoint file")->required();
  restore->add_option("--from", move.from, "the server where the session's program waits")
      ->required();

  CLI11_PARSE(app, argc, argv);
  if (migrate->parsed() || checkpoint->parsed() || restore->parsed()) {
    move.key = ReadOperatorKey(move_key_file);
    if (move.key.empty()) {
      fprintf(stderr, "rgpu: no operator key (--operator-key-file)\n");
      return 1;
    }
    if (migrate->parsed()) return rgpu::cli::RunMigrate(move);
    if (checkpoint->parsed()) return rgpu::cli::RunCheckpoint(move);
    return rgpu::cli::RunRestore(move);
  }
  if (status->parsed()) {
    if (status_server.empty() && getenv("RGPU_SERVER") != nullptr) {
      status_server = getenv("RGPU_SERVER");
    }
    std::string credential = status_token;
    if (credential.empty() && status_key_file.empty() && getenv("RGPU_TOKEN") != nullptr) {
      credential = getenv("RGPU_TOKEN");
    }
    if (credential.empty()) {
      std::string dir;
      if (status_key_file.empty() && rgpu::UserStateDir(&dir).ok()) {
        status_key_file = dir + "/server-operator.key";
      }
      std::ifstream in(status_key_file);
      std::getline(in, credential);
      while (!credential.empty() && isspace(static_cast<unsigned char>(credential.back()))) {
        credential.pop_back();
      }
      if (credential.empty()) {
        fprintf(stderr,
                "rgpu status: no credential: give --token, or --operator-key-file (%s "
                "holds no key)\n",
                status_key_file.c_str());
        return 1;
      }
    }
    return rgpu::cli::RunStatus(status_server, credential, status_json);
  }
  if (keygen->parsed()) {
    rgpu::Status s = rgpu::GenerateTokenKeys(private_key, public_key);
    if (!s.ok()) fprintf(stderr, "rgpu token keygen: %s\n", s.ToString().c_str());
    return s.ok() ? 0 : 1;
  }
  if (sign->parsed()) {
    char* end = nullptr;
    double amount = strtod(memory.c_str(), &end);
    const char unit = *end;
    const double scale = unit == 'K'   ? 1024.0
                         : unit == 'M' ? 1048576.0
                         : unit == 'G' ? 1073741824.0
                                       : 1.0;
    claims.set_tenant(tenant_claim);
    claims.set_memory_quota(static_cast<uint64_t>(amount * scale));
    claims.set_weight(weight);
    claims.set_expires_unix(static_cast<int64_t>(time(nullptr)) + ttl);
    claims.set_server(server_claim);
    for (uint32_t g : gpu_claims) claims.add_gpus(g);
    claims.set_all_gpus(gpu_claims.empty());
    // The token binds a new holder key; the credential carries its private half, which the
    // client uses to prove possession at the handshake and never sends.
    std::string holder_private, holder_public;
    rgpu::Status s = rgpu::GenerateEd25519(&holder_private, &holder_public);
    claims.set_holder_key(holder_public);
    std::string signed_token;
    if (s.ok()) s = rgpu::SignToken(claims, key_path, &signed_token);
    if (!s.ok()) {
      fprintf(stderr, "rgpu token sign: %s\n", s.ToString().c_str());
      return 1;
    }
    printf("%s\n", rgpu::MakeCredential(signed_token, holder_private).c_str());
    return 0;
  }
  if (tenant_create->parsed()) return rgpu::cli::TenantCreate(access, subject);
  if (tenant_list->parsed()) return rgpu::cli::TenantList(access);
  if (provider_create->parsed()) return rgpu::cli::ProviderCreate(access, subject);
  if (provider_list->parsed()) return rgpu::cli::ProviderList(access);
  if (provider_revoke->parsed()) return rgpu::cli::ProviderRevoke(access, subject);
  if (gpus->parsed()) return rgpu::cli::Gpus(access);
  if (place_cmd->parsed()) {
    if (place.job.empty()) place.job = rgpu::cli::SlurmJobName();
    return rgpu::cli::PlaceCommand(access, place);
  }
  // Several servers (and their tokens) travel to the program as one comma-separated list.
  std::string server = rgpu::cli::JoinList(servers), token = rgpu::cli::JoinList(tokens);
  if (lease_release->parsed()) return rgpu::cli::ReleaseLease(access, lease_id);
  if (lease_list->parsed()) return rgpu::cli::LeaseList(access);
  if (reserve_cmd->parsed()) {
    if (reserve.job.empty()) reserve.job = rgpu::cli::SlurmJobName();
    return rgpu::cli::Reserve(access, reserve);
  }
  if (reservation_list->parsed()) return rgpu::cli::ReservationList(access, reservation_tenant);
  if (reservation_cancel->parsed()) return rgpu::cli::ReservationCancel(access, reservation_id);
  if (usage->parsed()) return rgpu::cli::Usage(access, usage_tenant, usage_provider, from, to, job);
  if (bill->parsed()) return rgpu::cli::Bill(access, subject, from, to, job);
  if (earnings->parsed()) return rgpu::cli::Earnings(access, subject, from, to);
  if (smi->parsed()) {
    if (!server.empty()) setenv("RGPU_SERVER", server.c_str(), 1);
    if (!token.empty()) setenv("RGPU_TOKEN", token.c_str(), 1);
    if (getenv("RGPU_SERVER") == nullptr) {
      fprintf(stderr, "rgpu smi: no server: pass --server URL or set RGPU_SERVER\n");
      return 2;
    }
    const std::string lib = FindInterposer();
    return rgpu::cli::RunSmi(lib.substr(0, lib.rfind('/') + 1) + "librgpu-nvml.so", smi_json);
  }
  if (run->parsed()) {
    if (access.address.empty() && server.empty() && getenv("RGPU_SERVER") == nullptr &&
        getenv("RGPU_REGISTRY") != nullptr) {
      access.address = getenv("RGPU_REGISTRY");
    }
    if (!access.address.empty()) {
      if (!Exists(FindInterposer())) {  // before a placement is taken for nothing
        fprintf(stderr, "rgpu run: interposer library not found at %s\n", FindInterposer().c_str());
        return 2;
      }
      if (!server.empty() || !token.empty()) {
        fprintf(stderr, "rgpu run: give either --registry or --server/--token, not both\n");
        return 2;
      }
      // Inside a Slurm job (without the plugin's --rgpu), the job's identity, as the plugin sets
      // it.
      if (place.job.empty()) place.job = rgpu::cli::SlurmJobName();
      // One placement per GPU; if one cannot be had, those already granted are given back.
      std::vector<std::string> urls, credentials;
      std::vector<std::string> leases;
      for (int i = 0; i < gpu_count; ++i) {
        rgpu::cli::PlaceResult placed;
        const int rc = rgpu::cli::Place(access, place, "run", &placed);
        if (rc != 0) {
          for (const std::string& lease : leases) rgpu::cli::ReleaseLease(access, lease);
          return rc;
        }
        urls.push_back(placed.server_url);
        credentials.push_back(placed.credential);
        leases.push_back(placed.lease_id);
        place.excluded_gpus.push_back(placed.gpu_id);
      }
      server = rgpu::cli::JoinList(urls);
      token = rgpu::cli::JoinList(credentials);
    } else if (gpu_count != 1) {
      fprintf(stderr, "rgpu run: --gpus needs --registry (with --server, give --server again)\n");
      return 2;
    }
    return rgpu::cli::RunProgram(server, token, program);
  }
  if (bench->parsed()) return rgpu::cli::RunBench(bench_options);
  return 0;
}
