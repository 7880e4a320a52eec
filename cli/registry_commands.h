// The rgpu subcommands that talk to the registry: tenant, provider, gpus, usage, bill, earnings,
// lease, reserve and reservation, and the placement step of `rgpu run --registry`. Each prints a
// table, or JSON with --json, and returns the process exit status (0 ok, 1 refused/failed, 2 bad
// input).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rgpu::cli {

// How to reach the registry and who is asking. Empty fields fall back to RGPU_REGISTRY,
// RGPU_ADMIN_KEY, RGPU_API_KEY, RGPU_PROVIDER_KEY and RGPU_TLS_CA; without an admin key, the
// operator key is read from admin_key_file (or RGPU_ADMIN_KEY_FILE), the file rgpu-registry keeps
// it in (rgpu-registry --admin-key-file).
struct RegistryAccess {
  std::string address;
  std::string admin_key;
  std::string admin_key_file;
  std::string api_key;
  std::string provider_key;
  std::string tls_ca;
  bool json = false;
  bool tenant_only = false;  // send no operator key, read no key file (placements)
};

// Parses a time for --from/--to: unix seconds, "now", or UTC "YYYY-MM-DD[THH:MM[:SS]][Z]".
bool ParseTime(const std::string& text, int64_t* unix_seconds);
// Parses a size with an optional K/M/G/T suffix (powers of 1024).
bool ParseSize(const std::string& text, uint64_t* bytes);
// Parses a duration: seconds, or a number with an s, m, h or d suffix ("90m"); at most a year.
bool ParseDuration(const std::string& text, uint32_t* seconds);

int TenantCreate(RegistryAccess access, const std::string& name);
int TenantList(RegistryAccess access);
int ProviderCreate(RegistryAccess access, const std::string& name);
int ProviderList(RegistryAccess access);
int ProviderRevoke(RegistryAccess access, const std::string& name);
int Gpus(RegistryAccess access);
// `job`, when not empty, keeps only the sessions and holds of that batch job's leases.
int Usage(RegistryAccess access, const std::string& tenant, const std::string& provider,
          const std::string& from, const std::string& to, const std::string& job);
int Bill(RegistryAccess access, const std::string& tenant, const std::string& from,
         const std::string& to, const std::string& job);
int Earnings(RegistryAccess access, const std::string& provider, const std::string& from,
             const std::string& to);
// `rgpu lease release LEASE`: ends one of the tenant's own leases (its API key) before its
// lifetime is over, as a batch job's epilog does.
int ReleaseLease(RegistryAccess access, const std::string& lease_id);
// `rgpu lease list`: the tenant's active leases (with an API key; the operator without one:
// everyone's), with the end and its reason of those under notice (a lendable window closed, a
// preemption).
int LeaseList(RegistryAccess access);

// What `rgpu reserve` asks for.
struct ReserveOptions {
  std::string start;     // as ParseTime reads it
  std::string duration;  // as ParseDuration reads it
  int gpus = 1;
  std::string gpu_type;
  std::string backend;
  std::string memory = "1G";
  int compute_share = 25;
  std::string job;
};
// `rgpu reserve`: GPUs held for the tenant from a start time for a duration, billed as the
// price list's reservation_fraction says; prints the reservation (its id is what
// `rgpu run --reservation` and `rgpu reservation cancel` take).
int Reserve(RegistryAccess access, const ReserveOptions& options);
// `rgpu reservation list`: the tenant's reservations (with an API key and no `tenant`; the
// operator: `tenant`'s, or all).
int ReservationList(RegistryAccess access, const std::string& tenant);
// `rgpu reservation cancel ID`: ends it now (before its start it costs nothing); with an API key
// only the tenant's own, without one (the operator) any.
int ReservationCancel(RegistryAccess access, const std::string& reservation_id);

struct PlaceOptions {
  std::string gpu_type;
  std::string backend;  // "" = any
  std::string memory = "1G";
  int compute_share = 25;
  int priority = 0;
  int wait_seconds = 60;
  int ttl_seconds = 3600;
  std::string job;  // the batch job it serves ("" = none), kept on the lease and its bill lines
  // The lease outlives the sessions under it, until `rgpu lease release` or its ttl (rgpu place).
  bool until_released = false;
  // GPUs it must not go to (the program's other placements: rgpu run --gpus N).
  std::vector<std::string> excluded_gpus;
  // How long the work needs its GPU ("" = not said): only GPUs lendable that long take it.
  std::string duration;
  std::string reservation_id;  // place under this reservation of the tenant's ("" = none)
};

// What a placement gives the program.
struct PlaceResult {
  std::string server_url;
  std::string credential;  // MakeCredential(token, holder's private key): RGPU_TOKEN
  std::string lease_id;
  int64_t expires_unix = 0;
  std::string gpu_id;               // the GPU placed on
  int64_t lendable_until_unix = 0;  // its server stops lending then (0: always lends)
};

// Asks the registry for a placement, printing queue positions to stderr while it waits (as
// `command`). A new Ed25519 holder key pair is made for it: the registry binds its public half
// into the token, and the credential carries the private half (proto/credential.h). Returns 0
// with the result filled in, else the exit status.
int Place(RegistryAccess access, const PlaceOptions& options, const char* command,
          PlaceResult* result);

// "slurm:CLUSTER:JOBID" inside a Slurm job (SLURM_JOB_ID, SLURM_CLUSTER_NAME), the name the
// SPANK plugin gives its placements; "" elsewhere.
std::string SlurmJobName();

// `rgpu place`: a placement for a program started later (a batch system's prolog). Prints
// RGPU_SERVER=URL, RGPU_TOKEN=CREDENTIAL, RGPU_LEASE=ID and RGPU_LEASE_EXPIRES=UNIX lines (the
// values hold no spaces or quotes, so a shell or a parser can read them as they are), or JSON
// with access.json. The credential's private key is printed: the output is the job's secret.
// The lease lasts until released (`rgpu lease release`) or its ttl, however many programs
// start and end under it.
int PlaceCommand(RegistryAccess access, PlaceOptions options);

}  // namespace rgpu::cli
