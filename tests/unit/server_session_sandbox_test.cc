// A session's process confines itself (server/session_sandbox.h): what a tenant who broke out of
// the driver into it can no longer do. Each case runs the same probes in a process that is not
// confined, which reach what they try (so the case fails without the confinement), and in one
// that is, from its first thread, from a thread that ran before the confinement and from one
// started after it.
#include "server/session_sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace rgpu::server {
namespace {

std::string Outcome(bool ok) { return ok ? "ok" : strerrorname_np(errno); }

// A file the server keeps (a token file, a key) outside the system's directories.
class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/rgpu-sandbox-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    std::ofstream(dir_ + "/tokens") << "tok-alice alice 1G 1\n";
    // A process of the same user without capabilities, as another tenant's confined host is (or
    // the server, run by a user without privileges): the kernel lets a process without
    // capabilities change such a one's CPUs and scheduling, so only the filter stands between.
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    peer_ = fork();
    if (peer_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives a test killed on its timeout
      close(ready[0]);
      __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
      __user_cap_data_struct data[2] = {};
      const char dropped = syscall(SYS_capset, &header, data) == 0 ? 'y' : 'n';
      (void)!write(ready[1], &dropped, 1);
      for (;;) pause();
    }
    close(ready[1]);
    char dropped = 0;
    const ssize_t got = read(ready[0], &dropped, 1);
    close(ready[0]);
    ASSERT_GT(peer_, 0);
    ASSERT_TRUE(got == 1 && dropped == 'y') << "the peer could not drop its capabilities";
  }
  void TearDown() override {
    if (peer_ > 0) {
      kill(peer_, SIGKILL);
      waitpid(peer_, nullptr, 0);
    }
    unlink((dir_ + "/tokens").c_str());
    unlink((dir_ + "/written").c_str());
    rmdir(dir_.c_str());
  }

  // What the calling thread reaches, one word per probe.
  // `confined`: the caller is confined, so probes that would change every process of the user
  // when allowed (renicing the user) may run: they must be refused.
  std::string Probe(bool confined = true) {
    std::ostringstream out;
    const int secret = open((dir_ + "/tokens").c_str(), O_RDONLY);
    out << "read-secret=" << Outcome(secret >= 0) << " ";
    if (secret >= 0) close(secret);
    const int written = open((dir_ + "/written").c_str(), O_WRONLY | O_CREAT, 0600);
    out << "write=" << Outcome(written >= 0) << " ";
    if (written >= 0) close(written);
    const int library = open("/usr/lib/os-release", O_RDONLY);
    out << "read-system=" << Outcome(library >= 0) << " ";
    if (library >= 0) close(library);
    const int null = open("/dev/null", O_WRONLY);
    out << "write-dev=" << Outcome(null >= 0) << " ";
    if (null >= 0) close(null);
    const pid_t parent = getppid();
    out << "signal-parent=" << Outcome(kill(parent, 0) == 0) << " ";
    out << "signal-self=" << Outcome(kill(getpid(), 0) == 0) << " ";
    out << "signal-group=" << Outcome(kill(0, 0) == 0) << " ";
    // Tracing the parent: attach, then let it go.
    const bool attached = ptrace(PTRACE_ATTACH, parent, nullptr, nullptr) == 0;
    out << "trace=" << Outcome(attached) << " ";
    if (attached) {
      waitpid(parent, nullptr, __WALL);
      ptrace(PTRACE_DETACH, parent, nullptr, nullptr);
    }
    char byte = 0;
    iovec local = {&byte, 1};
    iovec remote = {reinterpret_cast<void*>(&byte), 1};
    out << "read-memory=" << Outcome(process_vm_readv(parent, &local, 1, &remote, 1, 0) == 1)
        << " ";
    // SIGIO to the parent, by a pipe it owns.
    int fds[2];
    if (pipe(fds) == 0) {
      out << "sigio-owner=" << Outcome(fcntl(fds[0], F_SETOWN, parent) == 0) << " ";
      close(fds[0]);
      close(fds[1]);
    }
    const int unix_socket = socket(AF_UNIX, SOCK_STREAM, 0);
    out << "unix-socket=" << Outcome(unix_socket >= 0) << " ";
    if (unix_socket >= 0) close(unix_socket);
    out << "chmod-secret=" << Outcome(chmod((dir_ + "/tokens").c_str(), 0644) == 0) << " ";
    out << "renice-peer=" << Outcome(setpriority(PRIO_PROCESS, peer_, 0) == 0) << " ";
    if (confined) {
      // Every process of the user, named as who 0: refused, or it shows on the peer.
      const int before = getpriority(PRIO_PROCESS, peer_);
      const bool refused = setpriority(PRIO_USER, 0, before + 1) != 0;
      const int error = errno;
      const bool changed = getpriority(PRIO_PROCESS, peer_) != before;
      if (changed) setpriority(PRIO_PROCESS, peer_, before);
      out << "renice-user="
          << (changed   ? "changed-the-peer"
              : refused ? strerrorname_np(error)
                        : "ok")
          << " ";
    }
    // The peer's CPUs and scheduling, set to what they are (harmless when allowed), and this
    // thread's own, which stay allowed.
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    sched_getaffinity(peer_, sizeof cpus, &cpus);
    out << "pin-peer=" << Outcome(sched_setaffinity(peer_, sizeof cpus, &cpus) == 0) << " ";
    sched_param param = {};
    sched_getparam(peer_, &param);
    const int policy = sched_getscheduler(peer_);
    out << "schedule-peer=" << Outcome(sched_setscheduler(peer_, policy, &param) == 0) << " ";
    sched_getaffinity(0, sizeof cpus, &cpus);
    out << "pin-self=" << Outcome(sched_setaffinity(0, sizeof cpus, &cpus) == 0) << " ";
    const int kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
    out << "read-dev-kmsg=" << Outcome(kmsg >= 0) << " ";
    if (kmsg >= 0) close(kmsg);
    const int dumpable = prctl(PR_GET_DUMPABLE);
    out << "dumpable-again=" << Outcome(prctl(PR_SET_DUMPABLE, 1) == 0) << " ";
    prctl(PR_SET_DUMPABLE, dumpable);
    const pid_t child = fork();
    if (child == 0) _exit(0);
    out << "fork=" << Outcome(child > 0) << " ";
    if (child > 0) waitpid(child, nullptr, 0);
    // Running a program, in this process itself (a fork is refused above): a path that does not
    // exist, so that an unconfined process is told ENOENT (it looked) and a confined one EPERM
    // (the call itself is refused) without either being replaced.
    char* argv[] = {const_cast<char*>("/nonexistent/rgpu-program"), nullptr};
    out << "exec=" << Outcome(execv(argv[0], argv) == 0);
    return out.str();
  }

  // Runs `body` in a child process; returns what it printed.
  std::string InChild(const std::function<std::string()>& body) {
    int fds[2];
    if (pipe(fds) != 0) return "pipe";
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const std::string text = body();
      (void)!write(fds[1], text.data(), text.size());
      _exit(0);
    }
    close(fds[1]);
    std::string text;
    char buffer[4096];
    ssize_t n;
    while ((n = read(fds[0], buffer, sizeof(buffer))) > 0) text.append(buffer, n);
    close(fds[0]);
    waitpid(pid, nullptr, 0);
    return text;
  }

  std::string dir_;
  pid_t peer_ = -1;
};

ConfinementPolicy Policy() { return SessionHostPolicy("", {}, /*shared_memory=*/false); }

// A process holding a secret of 20 bytes at `at`, after `prepare` (run in it) succeeded, until
// Release.
struct Holder {
  pid_t pid = -1;
  uintptr_t at = 0;
  int done = -1;
};
Holder Hold(const std::function<bool()>& prepare) {
  static char secret[] = "alice's staged bytes";
  int address_pipe[2], done_pipe[2];
  if (pipe(address_pipe) != 0 || pipe(done_pipe) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    if (!prepare()) _exit(1);
    const uintptr_t at = reinterpret_cast<uintptr_t>(secret);
    (void)!write(address_pipe[1], &at, sizeof(at));
    char c;
    (void)!read(done_pipe[0], &c, 1);
    _exit(0);
  }
  close(address_pipe[1]);  // a holder that failed to prepare is read as an end
  close(done_pipe[0]);
  Holder holder;
  holder.pid = pid;
  holder.done = done_pipe[1];
  if (read(address_pipe[0], &holder.at, sizeof(holder.at)) != sizeof(holder.at)) holder.at = 0;
  return holder;
}
// True when the holder had prepared and ended well.
bool Release(const Holder& holder) {
  (void)!write(holder.done, "x", 1);
  int status = 0;
  waitpid(holder.pid, &status, 0);
  return holder.at != 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
// Its secret read through /proc/PID/mem, or why not.
std::string ReadSecret(const Holder& holder) {
  const int mem = open(("/proc/" + std::to_string(holder.pid) + "/mem").c_str(), O_RDONLY);
  if (mem < 0) return std::string("open: ") + strerrorname_np(errno);
  char buffer[21] = {};
  const ssize_t n = pread(mem, buffer, 20, static_cast<off_t>(holder.at));
  const int error = errno;
  close(mem);
  return n == 20 ? std::string(buffer) : std::string("read: ") + strerrorname_np(error);
}
// In a process of its own (the policy names the caller's /proc entries): confined, with or
// without file rules, then the holder's secret read.
std::string ConfinedThenRead(bool file_rules, const Holder& holder) {
  ConfinementPolicy policy = Policy();
  policy.file_rules = file_rules;
  Confinement applied;
  if (Status s = ConfineThisProcess(policy, &applied); !s.ok()) return s.ToString();
  return ReadSecret(holder);
}

TEST_F(SandboxTest, AConfinedProcessReachesOnlyTheSystemsFilesAndItself) {
  // Unconfined, as root (as tests run here and in CI; a user without privileges is refused some
  // of these by the kernel's own rules, /dev/kmsg under dmesg_restrict say), every probe reaches.
  const std::string open_process = InChild([&] { return Probe(/*confined=*/false); });
  if (geteuid() == 0) {
    EXPECT_EQ(open_process,
              "read-secret=ok write=ok read-system=ok write-dev=ok signal-parent=ok signal-self=ok "
              "signal-group=ok trace=ok read-memory=ok sigio-owner=ok unix-socket=ok "
              "chmod-secret=ok renice-peer=ok pin-peer=ok schedule-peer=ok pin-self=ok "
              "read-dev-kmsg=ok dumpable-again=ok fork=ok "
              "exec=ENOENT");
  }
  const std::string expected =
      "read-secret=EACCES write=EACCES read-system=ok write-dev=ok signal-parent=EPERM "
      "signal-self=ok signal-group=EPERM trace=EPERM read-memory=EPERM sigio-owner=EPERM "
      "unix-socket=EPERM chmod-secret=EPERM renice-peer=EPERM renice-user=EPERM pin-peer=EPERM "
      "schedule-peer=EPERM pin-self=ok read-dev-kmsg=EACCES "
      "dumpable-again=EPERM fork=EPERM exec=EPERM";
  const std::string confined = InChild([&] {
    // A thread that runs before the confinement (as the backend's and UCX's do) probes after it.
    int go[2];
    if (pipe(go) != 0) return std::string("pipe");
    std::string earlier;
    std::thread before([&] {
      char c;
      (void)!read(go[0], &c, 1);
      earlier = Probe();
    });
    Confinement applied;
    Status s = ConfineThisProcess(Policy(), &applied);
    if (!s.ok()) return "confine: " + s.ToString();
    (void)!write(go[1], "x", 1);
    before.join();
    std::string later;
    std::thread after([&] { later = Probe(); });
    after.join();
    return Probe() + "\n" + earlier + "\n" + later + "\n" + applied.ToString();
  });
  std::istringstream lines(confined);
  std::string first, earlier, later, applied;
  std::getline(lines, first);
  std::getline(lines, earlier);
  std::getline(lines, later);
  std::getline(lines, applied);
  EXPECT_EQ(first, expected) << confined;
  EXPECT_EQ(earlier, expected) << "a thread that ran before the confinement";
  EXPECT_EQ(later, expected) << "a thread started after it";
  EXPECT_NE(applied.find("threads 2 of 2"), std::string::npos) << applied;
}

// Every thread, the one that ran before the confinement included, shows no new privileges, the
// system-call filter and no capabilities.
TEST_F(SandboxTest, EveryThreadShowsTheFilterAndNoCapabilities) {
  auto fields = [] {
    std::string out;
    DIR* tasks = opendir("/proc/self/task");
    if (tasks == nullptr) return std::string("no /proc/self/task");
    while (dirent* e = readdir(tasks)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream status(std::string("/proc/self/task/") + e->d_name + "/status");
      std::string line, mine;
      while (std::getline(status, line)) {
        if (line.rfind("NoNewPrivs:", 0) == 0 || line.rfind("Seccomp:", 0) == 0 ||
            line.rfind("CapEff:", 0) == 0 || line.rfind("CapPrm:", 0) == 0) {
          mine += line + " ";
        }
      }
      out += mine + "\n";
    }
    closedir(tasks);
    return out;
  };
  const std::string open_process = InChild([&] { return fields(); });
  EXPECT_EQ(open_process.find("Seccomp:\t2"), std::string::npos) << open_process;
  const std::string confined = InChild([&] {
    int go[2];
    if (pipe(go) != 0) return std::string("pipe");
    std::thread before([&] {
      char c;
      (void)!read(go[0], &c, 1);
    });
    Confinement applied;
    Status s = ConfineThisProcess(Policy(), &applied);
    std::string out = s.ok() ? fields() : "confine: " + s.ToString();
    (void)!write(go[1], "x", 1);
    before.join();
    return out;
  });
  // Two threads, the fields in the order status lists them.
  const std::string each =
      "CapPrm:\t0000000000000000 CapEff:\t0000000000000000 NoNewPrivs:\t1 Seccomp:\t2 \n";
  EXPECT_EQ(confined, each + each) << confined;
}

// Another tenant's session process, confined as this one is, cannot read this one's memory
// through /proc/PID/mem, as an unconfined process of the same user can: Landlock keeps a process
// from tracing outside its domain, and where the kernel has no Landlock the holder is not
// dumpable and the reader holds no capability.
class SandboxMemoryTest : public SandboxTest, public ::testing::WithParamInterface<bool> {};

TEST_P(SandboxMemoryTest, AnotherSessionsProcessCannotReadThisOnesMemory) {
  const bool file_rules = GetParam();
  const Holder holder = Hold([&] {
    ConfinementPolicy policy = Policy();
    policy.file_rules = file_rules;
    Confinement applied;
    return ConfineThisProcess(policy, &applied).ok();
  });
  ASSERT_NE(holder.at, 0u);
  // Not confined, as root (what a host running as root could do without its confinement): it
  // reads. A process of another user, or of the same one without capabilities, would not.
  if (geteuid() == 0) {
    EXPECT_EQ(InChild([&] { return ReadSecret(holder); }), "alice's staged bytes");
  }
  // Another session's process, confined.
  EXPECT_EQ(InChild([&] { return ConfinedThenRead(file_rules, holder); }), "open: EACCES");
  EXPECT_TRUE(Release(holder));
}

INSTANTIATE_TEST_SUITE_P(WithAndWithoutFileRules, SandboxMemoryTest, ::testing::Bool());

// The server that starts hosts, when it runs without capabilities (not as root), keeps them
// from its memory where the kernel has no Landlock: a confined host, given no file rules here,
// reads the server's memory unless the server called KeepFromConfinedProcesses.
class ServerMemoryTest : public SandboxTest, public ::testing::WithParamInterface<bool> {};

TEST_P(ServerMemoryTest, AConfinedHostCannotReadTheServersMemory) {
  const bool kept = GetParam();
  const Holder server = Hold([&] {
    // A server not run as root holds no capability.
    __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct none[2] = {};
    if (syscall(SYS_capset, &header, none) != 0) return false;
    return !kept || KeepFromConfinedProcesses().ok();
  });
  ASSERT_NE(server.at, 0u);
  EXPECT_EQ(InChild([&] { return ConfinedThenRead(/*file_rules=*/false, server); }),
            kept ? "open: EACCES" : "alice's staged bytes");
  EXPECT_TRUE(Release(server));
}

INSTANTIATE_TEST_SUITE_P(KeptAndNot, ServerMemoryTest, ::testing::Bool());

}  // namespace
}  // namespace rgpu::server
