// Db over SQLite (libsqlite3): one connection, serialized by a mutex.
#include <sqlite3.h>

#include <mutex>

#include "registry/db.h"

namespace rgpu::registry {
namespace {

class SqliteDb : public Db {
 public:
  explicit SqliteDb(sqlite3* db) : db_(db) {}
  ~SqliteDb() override { sqlite3_close_v2(db_); }

  Status Exec(const std::string& sql, const std::vector<std::string>& params) override {
    int64_t changed = 0;
    if (params.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      char* err = nullptr;
      if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        std::string message = err ? err : "unknown error";
        sqlite3_free(err);
        return Internal("sqlite: " + message);
      }
      return Status::Ok();
    }
    return ExecCount(sql, params, &changed);
  }

  Status ExecCount(const std::string& sql, const std::vector<std::string>& params,
                   int64_t* changed) override {
    std::lock_guard<std::mutex> lock(mu_);
    Status s = Run(sql, params, nullptr);
    *changed = s.ok() ? sqlite3_changes(db_) : 0;
    return s;
  }

  Status Query(const std::string& sql, const std::vector<std::string>& params,
               std::vector<Row>* rows) override {
    std::lock_guard<std::mutex> lock(mu_);
    return Run(sql, params, rows);
  }

  Status Transaction(const std::vector<Statement>& statements,
                     std::vector<int64_t>* changed) override {
    std::lock_guard<std::mutex> lock(mu_);
    Status s = Run("BEGIN IMMEDIATE", {}, nullptr);
    if (!s.ok()) return s;
    for (const auto& st : statements) {
      s = Run(st.sql, st.params, nullptr);
      if (!s.ok()) {
        Run("ROLLBACK", {}, nullptr);
        return s;
      }
      if (changed) changed->push_back(sqlite3_changes(db_));
    }
    s = Run("COMMIT", {}, nullptr);
    if (!s.ok()) Run("ROLLBACK", {}, nullptr);
    return s;
  }

  std::string engine() const override { return "sqlite"; }

 private:
  // Prepares, binds and steps one statement; rows (when wanted) are appended. Under mu_.
  Status Run(const std::string& sql, const std::vector<std::string>& params,
             std::vector<Row>* rows) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      return Internal("sqlite prepare: " + std::string(sqlite3_errmsg(db_)));
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string name = "$" + std::to_string(i + 1);
      const int index = sqlite3_bind_parameter_index(stmt, name.c_str());
      if (index == 0) continue;  // a parameter the statement does not use
      sqlite3_bind_text(stmt, index, params[i].data(), static_cast<int>(params[i].size()),
                        SQLITE_TRANSIENT);
    }
    Status status;
    for (;;) {
      int rc = sqlite3_step(stmt);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) {
        status = Internal("sqlite: " + std::string(sqlite3_errmsg(db_)));
        break;
      }
      if (rows == nullptr) continue;
      Row row;
      const int n = sqlite3_column_count(stmt);
      for (int c = 0; c < n; ++c) {
        const unsigned char* text = sqlite3_column_text(stmt, c);
        row.emplace_back(text ? reinterpret_cast<const char*>(text) : "");
      }
      rows->push_back(std::move(row));
    }
    sqlite3_finalize(stmt);
    return status;
  }

  sqlite3* db_;
  std::mutex mu_;
};

}  // namespace

Status OpenSqlite(const std::string& path, std::unique_ptr<Db>* db) {
  sqlite3* handle = nullptr;
  if (sqlite3_open_v2(path.c_str(), &handle,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string message = handle ? sqlite3_errmsg(handle) : "out of memory";
    sqlite3_close_v2(handle);
    return Unavailable("cannot open database " + path + ": " + message);
  }
  sqlite3_busy_timeout(handle, 5000);
  auto result = std::make_unique<SqliteDb>(handle);
  Status s = result->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", {});
  if (!s.ok()) return Unavailable("database " + path + ": " + s.message());
  *db = std::move(result);
  return Status::Ok();
}

}  // namespace rgpu::registry
