#include "registry/store.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace rgpu::registry {
namespace {

// Column types both engines understand (SQLite maps them to its affinities).
const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS providers (
  name TEXT PRIMARY KEY, key_hash TEXT NOT NULL, revoked INTEGER NOT NULL DEFAULT 0,
  created_unix BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS tenants (
  name TEXT PRIMARY KEY, key_hash TEXT NOT NULL, created_unix BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS gpus (
  gpu_id TEXT PRIMARY KEY, provider TEXT NOT NULL, server_name TEXT NOT NULL,
  server_url TEXT NOT NULL, idx INTEGER NOT NULL, uuid TEXT NOT NULL, model TEXT NOT NULL,
  memory_bytes BIGINT NOT NULL, cc_major INTEGER NOT NULL, cc_minor INTEGER NOT NULL,
  bandwidth_gbps DOUBLE PRECISION NOT NULL, driver_version INTEGER NOT NULL,
  backend TEXT NOT NULL, resource_token TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS leases (
  lease_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, gpu_id TEXT NOT NULL,
  server_name TEXT NOT NULL, memory_bytes BIGINT NOT NULL, share INTEGER NOT NULL,
  priority INTEGER NOT NULL, queue_ms BIGINT NOT NULL, granted_ms BIGINT NOT NULL,
  expires_ms BIGINT NOT NULL, released_ms BIGINT NOT NULL DEFAULT 0,
  claimed_ms BIGINT NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS usage (
  record_id TEXT PRIMARY KEY, server_name TEXT NOT NULL, gpu_index INTEGER NOT NULL,
  tenant TEXT NOT NULL, session_id BIGINT NOT NULL, start_ms BIGINT NOT NULL,
  end_ms BIGINT NOT NULL, calls BIGINT NOT NULL, bytes_in BIGINT NOT NULL,
  bytes_out BIGINT NOT NULL, gpu_busy_ms DOUBLE PRECISION NOT NULL,
  memory_gib_seconds DOUBLE PRECISION NOT NULL, queue_ms DOUBLE PRECISION NOT NULL,
  session_ended INTEGER NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL,
  calls_by_kind TEXT NOT NULL DEFAULT '', lease_id TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS usage_sessions (
  lease_id TEXT NOT NULL, server_name TEXT NOT NULL, session_id BIGINT NOT NULL,
  first_start_ms BIGINT NOT NULL, last_end_ms BIGINT NOT NULL, wall_ms BIGINT NOT NULL,
  calls TEXT NOT NULL, bytes TEXT NOT NULL, gpu_busy_ms DOUBLE PRECISION NOT NULL,
  memory_gib_seconds DOUBLE PRECISION NOT NULL, queue_ms DOUBLE PRECISION NOT NULL,
  ended INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (lease_id, server_name, session_id));
CREATE TABLE IF NOT EXISTS servers (
  server_name TEXT PRIMARY KEY, provider TEXT NOT NULL, url TEXT NOT NULL,
  verified_ms BIGINT NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS reservations (
  reservation_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, gpu_ids TEXT NOT NULL,
  gpu_type TEXT NOT NULL, backend TEXT NOT NULL, memory_bytes BIGINT NOT NULL,
  share INTEGER NOT NULL, start_ms BIGINT NOT NULL, end_ms BIGINT NOT NULL,
  created_ms BIGINT NOT NULL, cancelled_ms BIGINT NOT NULL DEFAULT 0,
  job TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS server_outages (
  server_name TEXT NOT NULL, start_ms BIGINT NOT NULL, end_ms BIGINT NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS outages_by_start ON server_outages (start_ms);
CREATE INDEX IF NOT EXISTS usage_by_tenant ON usage (tenant, end_ms);
CREATE INDEX IF NOT EXISTS usage_by_provider ON usage (provider, end_ms);
)sql";

// Columns added since the first schema: added to stores created before them (the error of a
// column that exists already is expected and ignored), then their indexes.
const char* kAddedColumns[] = {
    "ALTER TABLE leases ADD COLUMN claimed_ms BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE usage ADD COLUMN lease_id TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE leases ADD COLUMN job TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE leases ADD COLUMN until_released INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE leases ADD COLUMN ending_ms BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE leases ADD COLUMN end_reason TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE leases ADD COLUMN reservation_id TEXT NOT NULL DEFAULT ''",
    // The notice its server promised at the grant (seconds; 0 for leases from before windows).
    "ALTER TABLE leases ADD COLUMN notice_s BIGINT NOT NULL DEFAULT 0",
    // Hand-overs (docs/migration.md): the GPU it is moving to and since when, and its earlier
    // holders as "GPU_ID@UNTIL_MS,...".
    "ALTER TABLE leases ADD COLUMN moving_to TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE leases ADD COLUMN moving_since_ms BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE leases ADD COLUMN earlier TEXT NOT NULL DEFAULT ''",
    // A server's availability (rgpu-server --available): windows as "START-END,..." in minutes
    // of the day; none: always.
    "ALTER TABLE servers ADD COLUMN windows TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE servers ADD COLUMN utc_offset_s BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE servers ADD COLUMN zone TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE servers ADD COLUMN notice_s BIGINT NOT NULL DEFAULT 0",
    // Whether a session's latest record reported its end or move (an empty record is then
    // refused: usage_check.cc).
    "ALTER TABLE usage_sessions ADD COLUMN ended INTEGER NOT NULL DEFAULT 0",
    // Hand-overs' state kept across restarts: whether the session reached its new holder, and
    // the hand-overs dropped without completing.
    "ALTER TABLE leases ADD COLUMN handed_over_ms BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE leases ADD COLUMN holder_claimed INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE leases ADD COLUMN dropped_hand_overs BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE leases ADD COLUMN last_drop_ms BIGINT NOT NULL DEFAULT 0",
};
const char* kAddedIndexes = "CREATE INDEX IF NOT EXISTS usage_by_lease ON usage (lease_id)";

std::string Num(int64_t v) { return std::to_string(v); }
std::string Num(uint64_t v) { return std::to_string(v); }
std::string Real(double v) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
// Column values as numbers; never throw (a value that does not parse reads as 0, one out of
// range is clamped), since what a store holds is not trusted to be well formed.
double D(const std::string& s) {
  const double v = strtod(s.c_str(), nullptr);
  return std::isfinite(v) ? v : 0.0;
}
int64_t I(const std::string& s) {
  errno = 0;
  char* end = nullptr;
  const long long v = strtoll(s.c_str(), &end, 10);
  if (errno == 0 && end != s.c_str() && *end == '\0') return v;
  const double d = D(s);  // e.g. a sum PostgreSQL gives as numeric, or out of range
  if (d >= 9.2e18) return INT64_MAX;
  if (d <= -9.2e18) return INT64_MIN;
  return static_cast<int64_t>(d);
}
uint64_t U(const std::string& s) {
  errno = 0;
  char* end = nullptr;
  if (!s.empty() && s[0] != '-') {
    const unsigned long long v = strtoull(s.c_str(), &end, 10);
    if (errno == 0 && end != s.c_str() && *end == '\0') return v;
  }
  const double d = D(s);
  if (d <= 0) return 0;
  if (d >= 1.8e19) return UINT64_MAX;
  return static_cast<uint64_t>(d);
}

// Calls by kind as stored: "Name=count,Name=count" (operation names are identifiers).
std::string EncodeCalls(const google::protobuf::Map<std::string, uint64_t>& calls) {
  std::map<std::string, uint64_t> sorted(calls.begin(), calls.end());
  std::string out;
  for (const auto& [kind, n] : sorted) {
    if (!out.empty()) out += ',';
    out += kind + "=" + std::to_string(n);
  }
  return out;
}

void DecodeCalls(const std::string& text, google::protobuf::Map<std::string, uint64_t>* calls) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    const size_t eq = item.find('=');
    if (eq != std::string::npos) (*calls)[item.substr(0, eq)] = U(item.substr(eq + 1));
    start = end + 1;
  }
}

Status Taken(Status s, const std::string& what) {
  if (s.ok()) return s;
  if (s.message().find("UNIQUE") != std::string::npos ||
      s.message().find("duplicate key") != std::string::npos) {
    return InvalidArgument(what + " already exists");
  }
  return s;
}

const char* kLeaseColumns =
    "lease_id, tenant, gpu_id, server_name, memory_bytes, share, priority, queue_ms, granted_ms, "
    "expires_ms, released_ms, claimed_ms, job, until_released, ending_ms, end_reason, "
    "reservation_id, notice_s, moving_to, moving_since_ms, earlier, handed_over_ms, "
    "holder_claimed, dropped_hand_overs, last_drop_ms";
constexpr size_t kLeaseColumnCount = 25;
const char* kReservationColumns =
    "reservation_id, tenant, gpu_ids, gpu_type, backend, memory_bytes, share, start_ms, end_ms, "
    "created_ms, cancelled_ms, job";

// Lists of ids as stored: comma-separated (ids hold no commas: registry/service.cc makes them).
std::string JoinIds(const std::vector<std::string>& ids) {
  std::string out;
  for (const std::string& id : ids) out += (out.empty() ? "" : ",") + id;
  return out;
}
std::vector<std::string> SplitIds(const std::string& text) {
  std::vector<std::string> ids;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) ids.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return ids;
}

// Windows as stored: "START-END,..." in minutes of the day.
std::string EncodeWindows(const Availability& a) {
  std::string out;
  for (const LendableWindow& w : a.windows()) {
    out += (out.empty() ? "" : ",") + std::to_string(w.start_minute()) + "-" +
           std::to_string(w.end_minute());
  }
  return out;
}
void DecodeWindows(const std::string& text, Availability* a) {
  for (const std::string& item : SplitIds(text)) {
    const size_t dash = item.find('-');
    if (dash == std::string::npos) continue;
    LendableWindow* w = a->add_windows();
    w->set_start_minute(static_cast<uint32_t>(std::min<uint64_t>(U(item.substr(0, dash)), ~0u)));
    w->set_end_minute(static_cast<uint32_t>(std::min<uint64_t>(U(item.substr(dash + 1)), ~0u)));
  }
}

ReservationRow ParseReservation(const Row& r) {
  ReservationRow v;
  v.reservation_id = r[0];
  v.tenant = r[1];
  v.gpu_ids = SplitIds(r[2]);
  v.gpu_type = r[3];
  v.backend = r[4];
  v.memory_bytes = U(r[5]);
  v.share = static_cast<uint32_t>(std::min<uint64_t>(U(r[6]), ~0u));
  v.start_ms = I(r[7]);
  v.end_ms = I(r[8]);
  v.created_ms = I(r[9]);
  v.cancelled_ms = I(r[10]);
  v.job = r[11];
  return v;
}

// "$FIRST, $FIRST+1, ..." for `n` parameters.
std::string Placeholders(size_t n, size_t first = 1) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    out += "$" + std::to_string(first + i);
  }
  return out;
}

LeaseRow ParseLease(const Row& r) {
  LeaseRow l;
  l.lease_id = r[0];
  l.tenant = r[1];
  l.gpu_id = r[2];
  l.server_name = r[3];
  l.memory_bytes = U(r[4]);
  l.share = static_cast<uint32_t>(U(r[5]));
  l.priority = static_cast<int32_t>(I(r[6]));
  l.queue_ms = I(r[7]);
  l.granted_ms = I(r[8]);
  l.expires_ms = I(r[9]);
  l.released_ms = I(r[10]);
  l.claimed_ms = I(r[11]);
  l.job = r[12];
  l.until_released = I(r[13]) != 0;
  l.ending_ms = I(r[14]);
  l.end_reason = r[15];
  l.reservation_id = r[16];
  l.notice_s = static_cast<uint32_t>(std::min<uint64_t>(U(r[17]), ~0u));
  l.moving_to = r[18];
  l.moving_since_ms = I(r[19]);
  for (const std::string& item : SplitIds(r[20])) {
    const size_t at = item.rfind('@');
    if (at == std::string::npos) continue;
    l.earlier.push_back({item.substr(0, at), I(item.substr(at + 1))});
  }
  l.handed_over_ms = I(r[21]);
  l.holder_claimed = I(r[22]) != 0;
  l.dropped_hand_overs = static_cast<uint32_t>(std::min<uint64_t>(U(r[23]), ~0u));
  l.last_drop_ms = I(r[24]);
  return l;
}

// Earlier holders as stored (GPU ids hold neither ',' nor '@': server names are [A-Za-z0-9._-]).
std::string EncodeHolders(const std::vector<LeaseRow::Holder>& holders) {
  std::string out;
  for (const auto& h : holders) {
    out += (out.empty() ? "" : ",") + h.gpu_id + "@" + std::to_string(h.until_ms);
  }
  return out;
}

}  // namespace

Store::Store(std::unique_ptr<Db> db) : db_(std::move(db)) {
  writer_ = std::thread([this] { WriterLoop(); });
}

Store::~Store() {
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    stop_writer_ = true;
  }
  write_cv_.notify_all();
  writer_.join();
}

Status Store::Commit(Statement statement) {
  PendingWrite write{std::move(statement), Status(), false};
  std::unique_lock<std::mutex> lock(write_mu_);
  writes_.push_back(&write);
  write_cv_.notify_all();
  write_cv_.wait(lock, [&write] { return write.done; });
  return write.result;
}

void Store::WriterLoop() {
  std::unique_lock<std::mutex> lock(write_mu_);
  for (;;) {
    write_cv_.wait(lock, [this] { return stop_writer_ || !writes_.empty(); });
    if (writes_.empty()) return;  // stopping, nothing left
    std::deque<PendingWrite*> batch;
    batch.swap(writes_);
    lock.unlock();
    std::vector<Statement> statements;
    for (PendingWrite* w : batch) statements.push_back(w->statement);
    Status s = db_->Transaction(statements, nullptr);
    if (s.ok()) {
      for (PendingWrite* w : batch) w->result = s;
    } else {
      // One bad write must not fail the others: retry each on its own.
      for (PendingWrite* w : batch) w->result = db_->Transaction({w->statement}, nullptr);
    }
    lock.lock();
    for (PendingWrite* w : batch) w->done = true;
    write_cv_.notify_all();
  }
}

Status Store::Open(std::unique_ptr<Db> db, std::unique_ptr<Store>* out) {
  Status s = db->Exec(kSchema);
  if (!s.ok()) return s;
  for (const char* alter : kAddedColumns) {
    s = db->Exec(alter);
    if (!s.ok() && s.message().find("duplicate column") == std::string::npos &&
        s.message().find("already exists") == std::string::npos) {
      return s;
    }
  }
  s = db->Exec(kAddedIndexes);
  if (!s.ok()) return s;
  out->reset(new Store(std::move(db)));
  return Status::Ok();
}

Status Store::AddProvider(const ProviderRow& row) {
  return Taken(db_->Exec("INSERT INTO providers (name, key_hash, revoked, created_unix) "
                         "VALUES ($1, $2, $3, $4)",
                         {row.name, row.key_hash, row.revoked ? "1" : "0", Num(row.created_unix)}),
               "provider " + row.name);
}

Status Store::AddTenant(const TenantRow& row) {
  return Taken(db_->Exec("INSERT INTO tenants (name, key_hash, created_unix) VALUES ($1, $2, $3)",
                         {row.name, row.key_hash, Num(row.created_unix)}),
               "tenant " + row.name);
}

Status Store::SetProviderRevoked(const std::string& name, bool revoked) {
  int64_t changed = 0;
  Status s = db_->ExecCount("UPDATE providers SET revoked = $1 WHERE name = $2",
                            {revoked ? "1" : "0", name}, &changed);
  if (s.ok() && changed == 0) return NotFound("no provider named " + name);
  return s;
}

Status Store::PutGpus(const std::vector<GpuRow>& rows) {
  std::vector<Statement> statements;
  for (const GpuRow& g : rows) {
    const GpuSpec& s = g.spec;
    statements.push_back(
        {"INSERT INTO gpus (gpu_id, provider, server_name, server_url, idx, uuid, model, "
         "memory_bytes, cc_major, cc_minor, bandwidth_gbps, driver_version, backend, "
         "resource_token) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) "
         "ON CONFLICT (gpu_id) DO UPDATE SET provider = excluded.provider, "
         "server_name = excluded.server_name, server_url = excluded.server_url, "
         "idx = excluded.idx, uuid = excluded.uuid, model = excluded.model, "
         "memory_bytes = excluded.memory_bytes, cc_major = excluded.cc_major, "
         "cc_minor = excluded.cc_minor, bandwidth_gbps = excluded.bandwidth_gbps, "
         "driver_version = excluded.driver_version, backend = excluded.backend, "
         "resource_token = excluded.resource_token",
         {g.gpu_id, g.provider, g.server_name, g.server_url, Num(uint64_t{s.index()}), s.uuid(),
          s.model(), Num(s.memory_bytes()), Num(uint64_t{s.cc_major()}),
          Num(uint64_t{s.cc_minor()}), Real(s.bandwidth_gbps()), Num(int64_t{s.driver_version()}),
          s.backend(), g.resource_token}});
  }
  return db_->Transaction(statements, nullptr);
}

Status Store::AddLease(const LeaseRow& l) {
  return Commit({std::string("INSERT INTO leases (") + kLeaseColumns + ") VALUES (" +
                     Placeholders(kLeaseColumnCount) + ")",
                 {l.lease_id,
                  l.tenant,
                  l.gpu_id,
                  l.server_name,
                  Num(l.memory_bytes),
                  Num(uint64_t{l.share}),
                  Num(int64_t{l.priority}),
                  Num(l.queue_ms),
                  Num(l.granted_ms),
                  Num(l.expires_ms),
                  Num(l.released_ms),
                  Num(l.claimed_ms),
                  l.job,
                  Num(int64_t{l.until_released ? 1 : 0}),
                  Num(l.ending_ms),
                  l.end_reason,
                  l.reservation_id,
                  Num(uint64_t{l.notice_s}),
                  l.moving_to,
                  Num(l.moving_since_ms),
                  EncodeHolders(l.earlier),
                  Num(l.handed_over_ms),
                  Num(int64_t{l.holder_claimed ? 1 : 0}),
                  Num(uint64_t{l.dropped_hand_overs}),
                  Num(l.last_drop_ms)}});
}

Status Store::SetLeaseHolder(const LeaseRow& l) {
  return Commit(
      {"UPDATE leases SET gpu_id = $1, server_name = $2, moving_to = $3, "
       "moving_since_ms = $4, earlier = $5, handed_over_ms = $6, holder_claimed = $7, "
       "dropped_hand_overs = $8, last_drop_ms = $9 WHERE lease_id = $10",
       {l.gpu_id, l.server_name, l.moving_to, Num(l.moving_since_ms), EncodeHolders(l.earlier),
        Num(l.handed_over_ms), Num(int64_t{l.holder_claimed ? 1 : 0}),
        Num(uint64_t{l.dropped_hand_overs}), Num(l.last_drop_ms), l.lease_id}});
}

Status Store::GetLeases(const std::vector<std::string>& lease_ids, std::vector<LeaseRow>* out) {
  constexpr size_t kSlice = 50;  // as ExistingUsageIds
  for (size_t first = 0; first < lease_ids.size(); first += kSlice) {
    const std::vector<std::string> slice(
        lease_ids.begin() + static_cast<std::ptrdiff_t>(first),
        lease_ids.begin() +
            static_cast<std::ptrdiff_t>(std::min(lease_ids.size(), first + kSlice)));
    std::vector<Row> rows;
    Status s = db_->Query(std::string("SELECT ") + kLeaseColumns +
                              " FROM leases WHERE lease_id IN (" + Placeholders(slice.size()) + ")",
                          slice, &rows);
    if (!s.ok()) return s;
    for (const auto& r : rows) out->push_back(ParseLease(r));
  }
  return Status::Ok();
}

Status Store::LoadEndedLeases(int64_t now_ms, std::vector<LeaseRow>* out) {
  std::vector<Row> rows;
  Status s = db_->Query(std::string("SELECT ") + kLeaseColumns +
                            " FROM leases WHERE released_ms > 0 AND expires_ms > $1 "
                            "ORDER BY released_ms",
                        {Num(now_ms)}, &rows);
  for (const auto& r : rows) out->push_back(ParseLease(r));
  return s;
}

Status Store::AddOutage(const std::string& server_name, int64_t start_ms) {
  return Commit({"INSERT INTO server_outages (server_name, start_ms, end_ms) VALUES ($1, $2, 0)",
                 {server_name, Num(start_ms)}});
}

Status Store::EndOutage(const std::string& server_name, int64_t end_ms) {
  return Commit({"UPDATE server_outages SET end_ms = $1 WHERE server_name = $2 AND end_ms = 0",
                 {Num(end_ms), server_name}});
}

Status Store::QueryOutages(int64_t from_ms, int64_t to_ms, std::vector<OutageRow>* out) {
  std::vector<Row> rows;
  Status s = db_->Query(
      "SELECT server_name, start_ms, end_ms FROM server_outages "
      "WHERE start_ms < $2 AND (end_ms = 0 OR end_ms > $1) ORDER BY start_ms",
      {Num(from_ms), Num(to_ms)}, &rows);
  for (const auto& r : rows) out->push_back({r[0], I(r[1]), I(r[2])});
  return s;
}

Status Store::LoadOpenOutages(std::vector<OutageRow>* out) {
  std::vector<Row> rows;
  Status s = db_->Query("SELECT server_name, start_ms, end_ms FROM server_outages WHERE end_ms = 0",
                        {}, &rows);
  for (const auto& r : rows) out->push_back({r[0], I(r[1]), I(r[2])});
  return s;
}

Status Store::PutServer(const ServerRow& row) {
  const Availability& a = row.availability;
  return db_->Exec(
      "INSERT INTO servers (server_name, provider, url, verified_ms, windows, utc_offset_s, zone, "
      "notice_s) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
      "ON CONFLICT (server_name) DO UPDATE SET provider = excluded.provider, url = excluded.url, "
      "verified_ms = excluded.verified_ms, windows = excluded.windows, "
      "utc_offset_s = excluded.utc_offset_s, zone = excluded.zone, notice_s = excluded.notice_s",
      {row.name, row.provider, row.url, Num(row.verified_ms), EncodeWindows(a),
       Num(int64_t{a.utc_offset_seconds()}), a.zone(), Num(uint64_t{a.notice_seconds()})});
}

Status Store::LoadServers(std::vector<ServerRow>* out) {
  std::vector<Row> rows;
  Status s = db_->Query(
      "SELECT server_name, provider, url, verified_ms, windows, utc_offset_s, zone, notice_s "
      "FROM servers",
      {}, &rows);
  for (const auto& r : rows) {
    ServerRow row{r[0], r[1], r[2], I(r[3]), {}};
    DecodeWindows(r[4], &row.availability);
    // Out of range reads as a value the service's check refuses, never as a wrapped one.
    const int64_t offset = I(r[5]);
    row.availability.set_utc_offset_seconds(
        static_cast<int32_t>(std::clamp<int64_t>(offset, INT32_MIN, INT32_MAX)));
    row.availability.set_zone(r[6]);
    row.availability.set_notice_seconds(static_cast<uint32_t>(std::min<uint64_t>(U(r[7]), ~0u)));
    out->push_back(std::move(row));
  }
  return s;
}

Status Store::ReleaseLease(const std::string& lease_id, int64_t released_ms,
                           const std::string& reason) {
  if (reason.empty()) {
    return Commit(
        {"UPDATE leases SET released_ms = $1 WHERE lease_id = $2", {Num(released_ms), lease_id}});
  }
  return Commit({"UPDATE leases SET released_ms = $1, end_reason = $3 WHERE lease_id = $2",
                 {Num(released_ms), lease_id, reason}});
}

Status Store::SetLeaseEnding(const std::string& lease_id, int64_t ending_ms,
                             const std::string& reason) {
  return Commit({"UPDATE leases SET ending_ms = $1, end_reason = $2 WHERE lease_id = $3",
                 {Num(ending_ms), reason, lease_id}});
}

Status Store::AddReservation(const ReservationRow& v) {
  return Taken(Commit({std::string("INSERT INTO reservations (") + kReservationColumns +
                           ") VALUES (" + Placeholders(12) + ")",
                       {v.reservation_id, v.tenant, JoinIds(v.gpu_ids), v.gpu_type, v.backend,
                        Num(v.memory_bytes), Num(uint64_t{v.share}), Num(v.start_ms), Num(v.end_ms),
                        Num(v.created_ms), Num(v.cancelled_ms), v.job}}),
               "reservation " + v.reservation_id);
}

Status Store::CancelReservation(const std::string& reservation_id, int64_t cancelled_ms) {
  int64_t changed = 0;
  Status s = db_->ExecCount(
      "UPDATE reservations SET cancelled_ms = $1 WHERE reservation_id = $2 AND cancelled_ms = 0",
      {Num(cancelled_ms), reservation_id}, &changed);
  if (s.ok() && changed == 0) return NotFound("no reservation " + reservation_id + " to cancel");
  return s;
}

Status Store::LoadLiveReservations(int64_t now_ms, std::vector<ReservationRow>* out) {
  std::vector<Row> rows;
  Status s = db_->Query(std::string("SELECT ") + kReservationColumns +
                            " FROM reservations WHERE cancelled_ms = 0 AND end_ms > $1 "
                            "ORDER BY start_ms",
                        {Num(now_ms)}, &rows);
  for (const auto& r : rows) out->push_back(ParseReservation(r));
  return s;
}

Status Store::QueryReservations(const std::string& tenant, int64_t to_ms,
                                std::vector<ReservationRow>* out) {
  std::vector<Row> rows;
  Status s = db_->Query(std::string("SELECT ") + kReservationColumns +
                            " FROM reservations WHERE start_ms < $1 AND ($2 = '' OR tenant = $2) "
                            "ORDER BY start_ms, reservation_id",
                        {Num(to_ms), tenant}, &rows);
  for (const auto& r : rows) out->push_back(ParseReservation(r));
  return s;
}

Status Store::AddUsage(const std::vector<UsageRow>& rows, uint32_t* stored, uint32_t* duplicates,
                       std::vector<bool>* fresh, const UsageEffects* effects) {
  *stored = *duplicates = 0;
  if (rows.empty()) return Status::Ok();
  std::vector<Statement> statements;
  statements.reserve(rows.size());
  for (const auto& row : rows) {
    const UsageRecord& r = row.record;
    statements.push_back(
        {"INSERT INTO usage (record_id, server_name, gpu_index, tenant, session_id, start_ms, "
         "end_ms, calls, bytes_in, bytes_out, gpu_busy_ms, memory_gib_seconds, queue_ms, "
         "session_ended, provider, model, calls_by_kind, lease_id) VALUES ($1, $2, $3, $4, $5, "
         "$6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) "
         "ON CONFLICT (record_id) DO NOTHING",
         {r.record_id(), r.server_name(), Num(uint64_t{r.gpu_index()}), r.tenant(),
          Num(r.session_id()), Num(r.start_ms()), Num(r.end_ms()), Num(r.calls()),
          Num(r.bytes_in()), Num(r.bytes_out()), Real(r.gpu_busy_ms()),
          Real(r.memory_gib_seconds()), Real(r.queue_ms()), r.session_ended() ? "1" : "0",
          row.provider, row.model, EncodeCalls(r.calls_by_kind()), r.lease_id()}});
  }
  if (effects != nullptr) {
    for (const auto& [lease_id, start_ms] : effects->claims) {
      statements.push_back(
          {"UPDATE leases SET claimed_ms = $1 WHERE lease_id = $2 AND "
           "(claimed_ms = 0 OR claimed_ms > $1)",
           {Num(start_ms), lease_id}});
    }
    // 64-bit unsigned sums are kept as text: both engines' BIGINT is signed.
    for (const auto& [lease_id, t] : effects->sessions) {
      statements.push_back(
          {"INSERT INTO usage_sessions (lease_id, server_name, session_id, first_start_ms, "
           "last_end_ms, wall_ms, calls, bytes, gpu_busy_ms, memory_gib_seconds, queue_ms, "
           "ended) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT "
           "(lease_id, server_name, session_id) DO UPDATE SET first_start_ms = "
           "excluded.first_start_ms, last_end_ms = excluded.last_end_ms, wall_ms = "
           "excluded.wall_ms, calls = excluded.calls, bytes = excluded.bytes, gpu_busy_ms = "
           "excluded.gpu_busy_ms, memory_gib_seconds = excluded.memory_gib_seconds, queue_ms = "
           "excluded.queue_ms, ended = excluded.ended",
           {lease_id, t.server_name, Num(t.session_id), Num(t.first_start_ms), Num(t.last_end_ms),
            Num(t.wall_ms), Num(t.calls), Num(t.bytes), Real(t.gpu_busy_ms),
            Real(t.memory_gib_seconds), Real(t.queue_ms), Num(int64_t{t.ended ? 1 : 0})}});
    }
  }
  std::vector<int64_t> changed;
  Status s = db_->Transaction(statements, &changed);
  if (!s.ok()) return s;
  for (size_t i = 0; i < rows.size() && i < changed.size(); ++i) {
    (changed[i] > 0 ? *stored : *duplicates) += 1;
    if (fresh) fresh->push_back(changed[i] > 0);
  }
  return Status::Ok();
}

Status Store::ExistingUsageIds(const std::vector<std::string>& record_ids,
                               std::vector<std::string>* out) {
  if (record_ids.size() > 1000) return InvalidArgument("at most 1000 record ids at a time");
  // In slices: SQLite finds a named parameter by a linear search, so one statement with
  // hundreds of them costs their square.
  constexpr size_t kSlice = 50;
  for (size_t first = 0; first < record_ids.size(); first += kSlice) {
    const std::vector<std::string> slice(
        record_ids.begin() + static_cast<std::ptrdiff_t>(first),
        record_ids.begin() +
            static_cast<std::ptrdiff_t>(std::min(record_ids.size(), first + kSlice)));
    std::vector<Row> rows;
    Status s = db_->Query(
        "SELECT record_id FROM usage WHERE record_id IN (" + Placeholders(slice.size()) + ")",
        slice, &rows);
    if (!s.ok()) return s;
    for (const auto& r : rows) out->push_back(r[0]);
  }
  return Status::Ok();
}

Status Store::LeaseSessionTotals(const std::string& lease_id, std::vector<SessionTotals>* out) {
  std::vector<Row> rows;
  Status s = db_->Query(
      "SELECT server_name, session_id, first_start_ms, last_end_ms, wall_ms, calls, bytes, "
      "gpu_busy_ms, memory_gib_seconds, queue_ms, ended FROM usage_sessions WHERE lease_id = $1",
      {lease_id}, &rows);
  for (const auto& r : rows) {
    SessionTotals t;
    t.server_name = r[0];
    t.session_id = U(r[1]);
    t.first_start_ms = I(r[2]);
    t.last_end_ms = I(r[3]);
    t.wall_ms = I(r[4]);
    t.calls = U(r[5]);
    t.bytes = U(r[6]);
    t.gpu_busy_ms = D(r[7]);
    t.memory_gib_seconds = D(r[8]);
    t.queue_ms = D(r[9]);
    t.ended = I(r[10]) != 0;
    out->push_back(std::move(t));
  }
  return s;
}

Status Store::LoadProviders(std::vector<ProviderRow>* out) {
  std::vector<Row> rows;
  Status s = db_->Query("SELECT name, key_hash, revoked, created_unix FROM providers", {}, &rows);
  for (const auto& r : rows) out->push_back({r[0], r[1], I(r[2]) != 0, I(r[3])});
  return s;
}

Status Store::LoadTenants(std::vector<TenantRow>* out) {
  std::vector<Row> rows;
  Status s = db_->Query("SELECT name, key_hash, created_unix FROM tenants", {}, &rows);
  for (const auto& r : rows) out->push_back({r[0], r[1], I(r[2])});
  return s;
}

Status Store::LoadGpus(std::vector<GpuRow>* out) {
  std::vector<Row> rows;
  Status s = db_->Query(
      "SELECT gpu_id, provider, server_name, server_url, idx, uuid, model, memory_bytes, "
      "cc_major, cc_minor, bandwidth_gbps, driver_version, backend, resource_token FROM gpus",
      {}, &rows);
  for (const auto& r : rows) {
    GpuRow g;
    g.gpu_id = r[0];
    g.provider = r[1];
    g.server_name = r[2];
    g.server_url = r[3];
    g.spec.set_index(static_cast<uint32_t>(U(r[4])));
    g.spec.set_uuid(r[5]);
    g.spec.set_model(r[6]);
    g.spec.set_memory_bytes(U(r[7]));
    g.spec.set_cc_major(static_cast<uint32_t>(U(r[8])));
    g.spec.set_cc_minor(static_cast<uint32_t>(U(r[9])));
    g.spec.set_bandwidth_gbps(D(r[10]));
    g.spec.set_driver_version(static_cast<int32_t>(I(r[11])));
    g.spec.set_backend(r[12]);
    g.resource_token = r[13];
    out->push_back(std::move(g));
  }
  return s;
}

Status Store::LoadActiveLeases(int64_t now_ms, std::vector<LeaseRow>* out) {
  std::vector<Row> rows;
  Status s = db_->Query(std::string("SELECT ") + kLeaseColumns +
                            " FROM leases WHERE released_ms = 0 AND expires_ms > $1",
                        {Num(now_ms)}, &rows);
  for (const auto& r : rows) out->push_back(ParseLease(r));
  return s;
}

Status Store::QueryUsage(const std::string& tenant, const std::string& provider, int64_t from_ms,
                         int64_t to_ms, std::vector<UsageRow>* out) {
  std::vector<Row> rows;
  Status s = db_->Query(
      "SELECT record_id, server_name, gpu_index, tenant, session_id, start_ms, end_ms, calls, "
      "bytes_in, bytes_out, gpu_busy_ms, memory_gib_seconds, queue_ms, session_ended, provider, "
      "model, calls_by_kind, lease_id FROM usage WHERE end_ms >= $1 AND end_ms < $2 AND ($3 = '' "
      "OR tenant = "
      "$3) AND "
      "($4 = '' OR provider = $4) ORDER BY server_name, session_id, end_ms",
      {Num(from_ms), Num(to_ms), tenant, provider}, &rows);
  for (const auto& r : rows) {
    UsageRow u;
    UsageRecord& rec = u.record;
    rec.set_record_id(r[0]);
    rec.set_server_name(r[1]);
    rec.set_gpu_index(static_cast<uint32_t>(U(r[2])));
    rec.set_tenant(r[3]);
    rec.set_session_id(U(r[4]));
    rec.set_start_ms(I(r[5]));
    rec.set_end_ms(I(r[6]));
    rec.set_calls(U(r[7]));
    rec.set_bytes_in(U(r[8]));
    rec.set_bytes_out(U(r[9]));
    rec.set_gpu_busy_ms(D(r[10]));
    rec.set_memory_gib_seconds(D(r[11]));
    rec.set_queue_ms(D(r[12]));
    rec.set_session_ended(I(r[13]) != 0);
    u.provider = r[14];
    u.model = r[15];
    DecodeCalls(r[16], rec.mutable_calls_by_kind());
    rec.set_lease_id(r[17]);
    out->push_back(std::move(u));
  }
  return s;
}

Status Store::QueryLeases(const std::string& tenant, int64_t to_ms, std::vector<LeaseRow>* out) {
  std::vector<Row> rows;
  Status s = db_->Query(std::string("SELECT ") + kLeaseColumns +
                            " FROM leases WHERE granted_ms < $1 AND ($2 = '' OR tenant = $2) "
                            "ORDER BY granted_ms",
                        {Num(to_ms), tenant}, &rows);
  for (const auto& r : rows) out->push_back(ParseLease(r));
  return s;
}

}  // namespace rgpu::registry
