// Db over PostgreSQL (libpq): one connection, serialized by a mutex; text parameters and results.
#include <libpq-fe.h>

#include <mutex>

#include "registry/db.h"

namespace rgpu::registry {
namespace {

// libpq's messages end in a newline and may span lines; one line reads better in logs.
std::string OneLine(std::string m) {
  for (char& c : m) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  while (!m.empty() && m.back() == ' ') m.pop_back();
  return m;
}

class PgDb : public Db {
 public:
  explicit PgDb(PGconn* conn) : conn_(conn) {}
  ~PgDb() override { PQfinish(conn_); }

  Status Exec(const std::string& sql, const std::vector<std::string>& params) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (params.empty()) {
      PGresult* res = PQexec(conn_, sql.c_str());
      Status s = Check(res);
      PQclear(res);
      return s;
    }
    return Run(sql, params, nullptr, nullptr);
  }

  Status ExecCount(const std::string& sql, const std::vector<std::string>& params,
                   int64_t* changed) override {
    std::lock_guard<std::mutex> lock(mu_);
    return Run(sql, params, nullptr, changed);
  }

  Status Query(const std::string& sql, const std::vector<std::string>& params,
               std::vector<Row>* rows) override {
    std::lock_guard<std::mutex> lock(mu_);
    return Run(sql, params, rows, nullptr);
  }

  Status Transaction(const std::vector<Statement>& statements,
                     std::vector<int64_t>* changed) override {
    std::lock_guard<std::mutex> lock(mu_);
    Status s = Run("BEGIN", {}, nullptr, nullptr);
    if (!s.ok()) return s;
    for (const auto& st : statements) {
      int64_t n = 0;
      s = Run(st.sql, st.params, nullptr, &n);
      if (!s.ok()) {
        Run("ROLLBACK", {}, nullptr, nullptr);
        return s;
      }
      if (changed) changed->push_back(n);
    }
    s = Run("COMMIT", {}, nullptr, nullptr);
    if (!s.ok()) Run("ROLLBACK", {}, nullptr, nullptr);
    return s;
  }

  std::string engine() const override { return "postgresql"; }

 private:
  Status Check(PGresult* res) {
    const ExecStatusType st = PQresultStatus(res);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return Status::Ok();
    std::string message = OneLine(PQerrorMessage(conn_));
    if (PQstatus(conn_) != CONNECTION_OK) {
      PQreset(conn_);  // the next statement tries a fresh connection
      return Unavailable("postgresql: " + message);
    }
    return Internal("postgresql: " + message);
  }

  Status Run(const std::string& sql, const std::vector<std::string>& params, std::vector<Row>* rows,
             int64_t* changed) {
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p.c_str());
    PGresult* res = PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                                 values.data(), nullptr, nullptr, 0);
    Status s = Check(res);
    if (s.ok() && rows != nullptr) {
      const int n = PQntuples(res), m = PQnfields(res);
      for (int r = 0; r < n; ++r) {
        Row row;
        for (int c = 0; c < m; ++c) row.emplace_back(PQgetvalue(res, r, c));
        rows->push_back(std::move(row));
      }
    }
    if (s.ok() && changed != nullptr) {
      const char* count = PQcmdTuples(res);
      *changed = (count && *count) ? std::stoll(count) : 0;
    }
    PQclear(res);
    return s;
  }

  PGconn* conn_;
  std::mutex mu_;
};

}  // namespace

Status OpenPostgres(const std::string& conninfo, std::unique_ptr<Db>* db) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
    std::string message = conn ? OneLine(PQerrorMessage(conn)) : "out of memory";
    PQfinish(conn);
    return Unavailable("cannot connect to postgresql: " + message);
  }
  PGresult* res = PQexec(conn, "SET client_min_messages TO WARNING");
  PQclear(res);
  *db = std::make_unique<PgDb>(conn);
  return Status::Ok();
}

}  // namespace rgpu::registry
