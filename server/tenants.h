// Tenants admitted by a token file (`rgpu-server --tokens FILE`). Each line:
//   TOKEN TENANT MEMORY_QUOTA WEIGHT
// MEMORY_QUOTA is bytes with an optional K/M/G/T suffix (powers of 1024); WEIGHT is the tenant's
// share weight (positive). '#' starts a comment. A tenant's quota covers all its sessions.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/rgpu.pb.h"
#include "proto/signed_token.h"
#include "server/fair_scheduler.h"

namespace rgpu::server {

// Where a tenant's quota is kept when not in this process: a session host
// (server/session_host.h) reserves and releases on the server that admitted the tenant. Any thread.
class QuotaBroker {
 public:
  virtual ~QuotaBroker() = default;
  // Reserves `bytes` of the tenant's quota there; false (nothing reserved) when refused or the
  // server cannot be asked.
  virtual bool Reserve(uint64_t bytes) = 0;
  virtual void Release(uint64_t bytes) = 0;
};

struct Tenant {
  std::string name;
  uint64_t memory_quota = 0;  // bytes of device memory all its sessions may hold together
  double weight = 1.0;
  ShareAccount share;  // its account with the fair scheduler (weight = weight)
  std::atomic<uint64_t> memory_used{0};

  // Set before any session uses the tenant: the quota is kept by the broker (memory_used then
  // counts what this process holds, memory_quota is the whole quota, for reports).
  QuotaBroker* broker = nullptr;
  // Reserves `bytes` of the quota; false (nothing reserved) when it would exceed it.
  bool Reserve(uint64_t bytes);
  void Release(uint64_t bytes);
};

// What a credential admits: a tenant (with the registry lease its token was issued for and the
// GPUs it grants), or the server's operator.
struct Admission {
  bool operator_access = false;  // the operator's key: status of every session, no GPU work
  std::shared_ptr<Tenant> tenant;
  std::string lease_id;      // "" for tokens from a file or signed by an operator
  bool all_gpus = true;      // every device of the server
  std::vector<int> gpus;     // otherwise these device indices, in the order the token names them
  int64_t expires_unix = 0;  // a signed token's expiry (0: a file's token or the operator key)
};

// Who may open sessions: tokens listed in a file, and/or tokens signed by a registry whose public
// key the server holds (Ed25519, see proto/signed_token.h); and who may read the server's status
// (the operator's key, or a tenant about itself). Credentials are checked by proof of possession
// (proto/session_proof.h): a file token's or the operator key's HMAC over the server's nonce, a
// signed token's holder signature over it. Thread-safe.
// Why a TenantTable that RefuseEveryone()s refuses a session.
inline constexpr char kRefusesEveryoneReason[] =
    "this process serves one restored session and admits no other";

class TenantTable {
 public:
  // Parses a token file; a malformed line is an error naming the line.
  Status Load(const std::string& path);
  // Accepts signed tokens verified with the Ed25519 public key in `path`, valid for this
  // server (`server_name`; claims naming another server are refused).
  Status AcceptSigned(const std::string& public_key_path, const std::string& server_name);

  // Admits `token` (a file token's kind of credential) for `tenant`, to the devices `gpus` unless
  // `all_gpus` (a session host's one credential, server/session_host.h). Before sessions start.
  // With `once`, it admits one session and is refused after. `lease_id`: the registry lease the
  // session runs under (its server's admission's), "" for none.
  void AddToken(const std::string& token, std::shared_ptr<Tenant> tenant, bool all_gpus,
                std::vector<int> gpus, bool once, const std::string& lease_id = "");
  // The operator's key (rgpu-server --operator-key-file).
  void SetOperatorKey(const std::string& key) { operator_key_ = key; }
  // From now on every credential is refused: a session host that serves only the session
  // restored into it (which comes back by its resume credential, not through Admit) admits no
  // one else. Before sessions start.
  void RefuseEveryone() { refuse_everyone_ = true; }
  bool refuses_everyone() const { return refuse_everyone_; }
  // True when sessions must present a tenant's credential (a token file, a signing key, or none
  // at all being valid).
  bool requires_tokens() const {
    return refuse_everyone_ || !by_token_.empty() || verifier_ != nullptr;
  }

  // What `presented` admits, given the client's `proof` over the server's `nonce`, or the reason
  // it is refused (missing, unknown, malformed, forged, unproven, expired, for another server,
  // granting no GPU, or of a lease that ended).
  Status Admit(const wire::Credential& presented, const std::string& nonce,
               const std::string& proof, Admission* admission);
  // What a registry's hand-over of `lease_id` (TokenClaims.hand_over, registry HandOverLease)
  // admits: the restore of `tenant`'s session under that lease, on the GPUs it names, with the
  // lease's quota. Refused unless signed by the registry, for this server, unexpired, of that
  // lease and tenant, and the lease not ended.
  Status AdmitHandOver(const std::string& token, const std::string& lease_id,
                       const std::string& tenant, Admission* admission);
  // Whether `token` is a registry's hand-over for this server, unexpired, of a lease not ended
  // (its claims in `claims`): what admits a checkpoint the registry sends here.
  Status VerifyHandOver(const std::string& token, wire::TokenClaims* claims);
  // The tenant named `name` as this server knows it (from its token file, or from a signed token
  // it admitted), or null: whose quota a restored session is charged to (docs/migration.md).
  std::shared_ptr<Tenant> Find(const std::string& name);
  // True when the registry ended lease `lease_id`.
  bool LeaseEnded(const std::string& lease_id);
  // Tokens of these registry leases are refused from now on (the registry ended the leases).
  void EndLeases(const std::vector<std::string>& lease_ids);
  size_t size() const { return by_token_.size(); }

 private:
  struct FileToken {
    std::string token;
    std::shared_ptr<Tenant> tenant;
    bool all_gpus = true;
    std::vector<int> gpus;
    std::shared_ptr<std::atomic<bool>> used;  // a once token: set when it admitted a session
    std::string lease_id;                     // AddToken's; "" for a token file's
  };
  // A signed token's claims, verified and checked for this server (expiry, server, GPUs,
  // tenant and weight), or why not.
  Status VerifyClaims(const std::string& token, wire::TokenClaims* claims);
  // Admits verified claims: the lease must not have ended; the tenant gets their quota and weight.
  Status AdmitClaims(const wire::TokenClaims& claims, Admission* admission);

  std::map<std::string, std::shared_ptr<Tenant>> by_token_;
  std::map<std::string, FileToken> by_digest_;  // SHA-256 of each file token
  std::string operator_key_;
  bool refuse_everyone_ = false;
  std::unique_ptr<TokenVerifier> verifier_;
  std::string server_name_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Tenant>> signed_tenants_;  // by tenant name; under mu_
  std::set<std::string> ended_leases_;                             // under mu_
};

}  // namespace rgpu::server
