// `rgpu migrate`, `rgpu checkpoint` and `rgpu restore`: moving a running session between servers,
// or into a file and from it into another server (docs/migration.md). Each talks to the servers
// with their operator key (proven over each server's nonce, as `rgpu status` does).
//
//   rgpu migrate --server A --session ID --to B [--timeout-ms MS] [--json]
//   rgpu checkpoint --server A --session ID --file F [--timeout-ms MS]
//   rgpu restore --server B --file F --from A --session ID [--json]
#pragma once

#include <cstdint>
#include <string>

namespace rgpu::cli {

struct MoveOptions {
  std::string server;           // the server the command is about (migrate, checkpoint: the source)
  std::string to;               // migrate: the target
  std::string from;             // restore: the server whose parked session's client is to come
  std::string file;             // checkpoint, restore
  uint64_t session = 0;         // the session's id where it is (`rgpu status --json`'s "session")
  uint32_t timeout_ms = 30000;  // the longest wait for the client's next waited call
  std::string key;              // the operator's key (of every server talked to)
  bool json = false;
};

// Each returns the process's exit code (0: done; 1: refused or failed, the session where it was).
int RunMigrate(const MoveOptions& options);
int RunCheckpoint(const MoveOptions& options);
int RunRestore(const MoveOptions& options);

}  // namespace rgpu::cli
