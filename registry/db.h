// Db: the few SQL operations the registry's store needs, over SQLite (sqlite_db.h) or PostgreSQL
// (pg_db.h). Statements use $1, $2, ... placeholders on both; parameters and results travel as
// text (NULL reads as ""), which both engines convert to and from the columns' types.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace rgpu::registry {

using Row = std::vector<std::string>;

struct Statement {
  std::string sql;
  std::vector<std::string> params;
};

class Db {
 public:
  virtual ~Db() = default;
  // Runs one statement (or, without parameters, several separated by ';').
  virtual Status Exec(const std::string& sql, const std::vector<std::string>& params = {}) = 0;
  // Runs a statement and appends its result rows to `rows`.
  virtual Status Query(const std::string& sql, const std::vector<std::string>& params,
                       std::vector<Row>* rows) = 0;
  // Like Exec, and reports how many rows the statement changed.
  virtual Status ExecCount(const std::string& sql, const std::vector<std::string>& params,
                           int64_t* changed) = 0;
  // Runs the statements in one transaction: all commit (durably) or none do. `changed`, when
  // given, receives each statement's changed-row count.
  virtual Status Transaction(const std::vector<Statement>& statements,
                             std::vector<int64_t>* changed) = 0;
  // "sqlite" or "postgresql", for logs.
  virtual std::string engine() const = 0;
};

// Opens a SQLite file in WAL mode with synchronous=FULL: a committed transaction survives a
// crash of the process or the machine.
Status OpenSqlite(const std::string& path, std::unique_ptr<Db>* db);

// Connects to PostgreSQL with a libpq connection string ("host=... dbname=...").
Status OpenPostgres(const std::string& conninfo, std::unique_ptr<Db>* db);

}  // namespace rgpu::registry
