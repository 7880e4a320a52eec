// A restore into a process of its own (docs/migration.md): on a server whose sessions only
// processes keep apart, a checkpoint is not restored in the server's process but relayed to a
// session host, which restores it and waits for its client; this session keeps the tenant's
// quota, the figures and the end, as for a session redirected there at its handshake.
#include <chrono>

#include "common/log.h"
#include "server/session.h"
#include "server/session_host.h"

namespace rgpu::server {

Status Session::StartHostedRestore(const wire::Checkpoint& header, std::shared_ptr<Tenant> tenant,
                                   const std::vector<int>& onto, const std::string& host_token) {
  if (hosts_ == nullptr) return Internal("no session hosts");
  std::unique_ptr<SessionHost> host;
  if (Status s = hosts_->Take(&host); !s.ok()) return s;
  {
    std::lock_guard<std::mutex> lock(name_mu_);
    tenant_ = std::move(tenant);
    lease_id_ = header.lease_id();
    client_name_ = header.client_name();
    visible_ = onto;
  }
  client_pid_ = header.pid();
  wire::HostAssign assign = HostAssignment(host_token);
  assign.set_restore(true);
  if (Status s = host->Assign(assign); !s.ok()) return s;
  {
    std::lock_guard<std::mutex> lock(move_mu_);
    host_ = std::move(host);
  }
  restore_in_host_ = true;
  hosted_.store(true);
  hosts_->RefillSoon();
  return Status::Ok();
}

Status Session::RelayRestore(const char* data, size_t size, bool last) {
  std::lock_guard<std::mutex> lock(move_mu_);  // SuperviseHost lets go of host_ under it
  if (host_ == nullptr) return Unavailable("the session's process ended");
  return host_->SendRestorePiece(data, size, last);
}

Status Session::AwaitHostedRestore(int timeout_ms) {
  std::unique_lock<std::mutex> lock(restore_mu_);
  if (!restore_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                            [&] { return restore_answer_.has_value(); })) {
    return Status(Status::Code::kTimeout, "the session's process did not restore it in time");
  }
  if (restore_answer_->empty()) return Status::Ok();
  return InvalidArgument(*restore_answer_);
}

uint16_t Session::host_port(std::string* pin) {
  std::lock_guard<std::mutex> lock(move_mu_);
  *pin = host_ != nullptr ? host_->pin() : "";
  return host_ != nullptr ? host_->port() : 0;
}

void Session::NoteResumedInHost() {
  {
    std::lock_guard<std::mutex> lock(name_mu_);  // Stats reads admitted_at_ once admitted
    admitted_at_ = std::chrono::steady_clock::now();
  }
  admitted_.store(true);
}

}  // namespace rgpu::server
