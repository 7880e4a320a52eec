#include "server/session_host.h"

#include <algorithm>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "common/hex.h"
#include "common/log.h"
#include "proto/crypto.h"
#include "server/hosted_turns.h"

extern char** environ;

namespace rgpu::server {
namespace {

constexpr size_t kMaxControlBytes = 256 << 10;  // a message; longer ones are cut, refused
constexpr int kReadyTimeoutMs = 120000;         // a host's start: the backend's load and init

// A host's pin: "" (not tls://) or a key's SHA-256 in lowercase hex.
bool IsPin(const std::string& pin) {
  return pin.empty() ||
         (pin.size() == 64 && pin.find_first_not_of("0123456789abcdef") == std::string::npos);
}

}  // namespace

bool SendControl(int fd, const wire::HostControl& message) {
  const std::string bytes = message.SerializeAsString();
  return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

bool ReceiveControl(int fd, int timeout_ms, wire::HostControl* message) {
  pollfd p = {fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return false;
  // Once per thread: a host's every reservation waits here.
  thread_local std::vector<char> buffer(kMaxControlBytes);
  // MSG_TRUNC: the packet's whole length, so that a cut packet is never parsed.
  const ssize_t n = recv(fd, buffer.data(), buffer.size(), MSG_TRUNC);
  if (n <= 0 || static_cast<size_t>(n) > buffer.size()) return false;
  return message->ParseFromArray(buffer.data(), static_cast<int>(n));
}

namespace {

std::string DescribeWait(int status) {
  if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "ended";
}

}  // namespace

std::string MakeHostToken() { return HexText(RandomBytes(32)); }

SessionHost::SessionHost(pid_t pid, int control_fd, uint16_t port, std::string pin)
    : pid_(pid), fd_(control_fd), port_(port), pin_(std::move(pin)) {}

SessionHost::~SessionHost() {
  if (!reaped_) {
    kill(pid_, SIGKILL);
    Reap(-1);
  }
  close(fd_);
}

bool SessionHost::Reap(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!reaped_) {
    const pid_t r = waitpid(pid_, &wait_status_, timeout_ms < 0 ? 0 : WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      reaped_ = true;
      break;
    }
    if (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

Status SessionHost::Assign(const wire::HostAssign& assign) {
  wire::HostControl message;
  *message.mutable_assign() = assign;
  if (!SendControl(fd_, message)) return Unavailable("the session's host process is gone");
  return Status::Ok();
}

Status SessionHost::Move(const wire::HostMove& move) {
  wire::HostControl message;
  *message.mutable_move() = move;
  if (!SendControl(fd_, message)) return Unavailable("the session's host process is gone");
  return Status::Ok();
}

bool SendChunks(int fd, wire::HostCheckpointChunk* (wire::HostControl::*field)(), const char* data,
                size_t size, bool last) {
  constexpr size_t kPiece = 192 << 10;  // within a control message
  do {
    const size_t n = std::min(size, kPiece);
    wire::HostControl piece;
    (piece.*field)()->set_data(data, n);
    (piece.*field)()->set_last(last && n == size);
    if (!SendControl(fd, piece)) return false;
    data += n;
    size -= n;
  } while (size > 0);
  return true;
}

Status SessionHost::SendRestorePiece(const char* data, size_t size, bool last) {
  return SendChunks(fd_, &wire::HostControl::mutable_restore_chunk, data, size, last)
             ? Status::Ok()
             : Unavailable("the session's host process is gone");
}

uint32_t SessionHost::Supervise(
    Tenant* tenant, FairSchedulers* schedulers, const std::function<bool()>& should_stop,
    const std::function<void(const wire::SessionStats&)>& on_stats,
    const std::function<void(const wire::HostMoveResult&)>& on_move_result,
    const std::function<void(const wire::HostCheckpointChunk&)>& on_piece,
    const std::function<void(const std::string&)>& on_restore_result, std::string* how) {
  uint32_t end = 0;
  bool told_to_end = false;
  auto told_at = std::chrono::steady_clock::now();
  std::string buffer(kMaxControlBytes, '\0');
  ShareAccount own_account;  // without tenants, the host's own
  HostedTurns turns(schedulers, tenant != nullptr ? &tenant->share : &own_account,
                    [fd = fd_](const wire::HostControl& m) { return SendControl(fd, m); });
  for (;;) {
    if (!told_to_end && should_stop()) {
      kill(pid_, SIGTERM);
      told_to_end = true;
      told_at = std::chrono::steady_clock::now();
    }
    if (told_to_end && std::chrono::steady_clock::now() - told_at > std::chrono::seconds(5)) {
      kill(pid_, SIGKILL);
    }
    pollfd p = {fd_, POLLIN, 0};
    const int ready = poll(&p, 1, 200);
    if (ready == 0) continue;
    if (ready < 0 && errno == EINTR) continue;
    const ssize_t n =
        ready < 0 ? -1 : recv(fd_, buffer.data(), buffer.size(), MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) break;  // the host closed its end: it is ending
    wire::HostControl message;
    if (static_cast<size_t>(n) > buffer.size() ||
        !message.ParseFromArray(buffer.data(), static_cast<int>(n))) {
      RGPU_LOG_WARN("session host %d: malformed control message; ending it", (int)pid_);
      kill(pid_, SIGKILL);
      break;
    }
    switch (message.body_case()) {
      case wire::HostControl::kReserve: {
        const uint64_t bytes = message.reserve();
        const bool granted = tenant == nullptr || tenant->Reserve(bytes);
        if (granted && reserved_ + bytes >= reserved_) reserved_ += bytes;
        wire::HostControl answer;
        answer.set_reserved(granted);
        SendControl(fd_, answer);
        break;
      }
      case wire::HostControl::kRelease: {
        // Never more than it holds: a host's numbers touch only its own tenant's quota.
        const uint64_t bytes = std::min<uint64_t>(message.release(), reserved_);
        reserved_ -= bytes;
        if (tenant != nullptr) tenant->Release(bytes);
        break;
      }
      case wire::HostControl::kStats:
        on_stats(message.stats());
        break;
      case wire::HostControl::kEnded:
        end = message.ended();
        break;
      case wire::HostControl::kMoveResult:
        on_move_result(message.move_result());
        break;
      case wire::HostControl::kTurn:
        turns.Handle(message.turn());
        break;
      case wire::HostControl::kCheckpointChunk:
        on_piece(message.checkpoint_chunk());
        break;
      case wire::HostControl::kRestoreResult:
        on_restore_result(message.restore_result());
        break;
      default:
        break;
    }
  }
  turns.End();  // what it held or waited for goes back to the device's scheduler
  if (!Reap(5000)) {
    kill(pid_, SIGKILL);
    Reap(-1);
  }
  if (tenant != nullptr && reserved_ > 0) tenant->Release(reserved_);
  reserved_ = 0;
  *how = DescribeWait(wait_status_);
  return end;
}

SessionHostPool::SessionHostPool(std::vector<std::string> argv, int spares, std::string program)
    : argv_(std::move(argv)),
      spares_wanted_(spares),
      program_(program.empty() ? "/proc/self/exe" : std::move(program)) {}

SessionHostPool::~SessionHostPool() {
  if (refiller_.joinable()) refiller_.join();
  // Spares are killed and reaped with their handles.
}

void SessionHostPool::RefillSoon() {
  std::lock_guard<std::mutex> lock(mu_);
  if (refilling_) return;
  refilling_ = true;
  if (refiller_.joinable()) refiller_.join();  // it has finished: refilling_ was false
  refiller_ = std::thread([this] {
    Refill();
    std::lock_guard<std::mutex> lock(mu_);
    refilling_ = false;
  });
}

Status SessionHostPool::Spawn(std::unique_ptr<SessionHost>* out) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return Internal(std::string("socketpair: ") + strerror(errno));
  }
  // The host's end becomes its fd 3 (dup2 clears close-on-exec; never from 3 itself).
  if (sv[1] == 3) {
    const int moved = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
    close(sv[1]);
    sv[1] = moved;
  }
  // The server's command line and environment, less the provider's key (a host never speaks to
  // the registry) and the paths of the server's TLS key and certificate (a tls:// host makes a key
  // of its own, whose pin the server passes on to the client): a tenant who broke into a host
  // must find neither there.
  constexpr const char* kNotForHosts[] = {"--provider-key", "--tls-key", "--tls-certificate"};
  std::vector<std::string> args;
  for (size_t i = 0; i < argv_.size(); ++i) {
    const std::string& arg = argv_[i];
    const auto names = [&arg](const char* option) {
      return arg == option || arg.rfind(std::string(option) + "=", 0) == 0;
    };
    if (std::none_of(std::begin(kNotForHosts), std::end(kNotForHosts), names)) {
      args.push_back(arg);
    } else if (arg.find('=') == std::string::npos) {
      ++i;  // its value, the next argument
    }
  }
  args.push_back("--session-host");
  args.push_back("3");
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  std::vector<char*> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (strncmp(*e, "RGPU_PROVIDER_KEY=", 18) != 0) env.push_back(*e);
  }
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, sv[1], 3);
  posix_spawn_file_actions_addclosefrom_np(&actions, 4);  // none of the server's sockets
  // Not the operator's terminal (which it could type into or read), in a session of its own (not
  // the server's process group, which a signal to a group would reach).
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID);
  pid_t pid = 0;
  const int r =
      posix_spawn(&pid, program_.c_str(), &actions, &attributes, cargs.data(), env.data());
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  close(sv[1]);
  if (r != 0) {
    close(sv[0]);
    return Internal(std::string("cannot start a session host: ") + strerror(r));
  }
  wire::HostControl ready;
  if (!ReceiveControl(sv[0], kReadyTimeoutMs, &ready) ||
      ready.body_case() != wire::HostControl::kReadyPort || ready.ready_port() == 0 ||
      ready.ready_port() > 65535 || !IsPin(ready.ready_pin())) {
    SessionHost failed(pid, sv[0], 0);  // killed and reaped
    return Unavailable("a session host did not start (its log says why)");
  }
  *out = std::make_unique<SessionHost>(pid, sv[0], static_cast<uint16_t>(ready.ready_port()),
                                       ready.ready_pin());
  return Status::Ok();
}

Status SessionHostPool::Take(std::unique_ptr<SessionHost>* out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!spares_.empty()) {
      *out = std::move(spares_.back());
      spares_.pop_back();
      return Status::Ok();
    }
  }
  return Spawn(out);
}

void SessionHostPool::Refill() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (static_cast<int>(spares_.size()) + starting_ >= spares_wanted_) return;
      ++starting_;
    }
    std::unique_ptr<SessionHost> host;
    Status s = Spawn(&host);
    std::lock_guard<std::mutex> lock(mu_);
    --starting_;
    if (!s.ok()) {
      RGPU_LOG_WARN("no spare session host: %s", s.message().c_str());
      return;
    }
    spares_.push_back(std::move(host));
  }
}

}  // namespace rgpu::server
