#include "server/session_sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>

// Rights of later Landlock ABIs than Debian 12's kernel headers know (the kernel's UAPI values);
// used only where the running kernel reports that ABI.
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

namespace rgpu::server {
namespace {

// --- Landlock (no library in Debian: its three system calls) ---

int LandlockAbi() {
  const long abi =
      syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : static_cast<int>(abi);
}

// The file-system rights Landlock knows at `abi`: all of them are handled (denied unless a rule
// allows them).
uint64_t HandledRights(int abi) {
  uint64_t rights =
      LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
      LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
      LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
      LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
      LANDLOCK_ACCESS_FS_MAKE_SYM;
  if (abi >= 2) rights |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) rights |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
  return rights;
}

constexpr uint64_t kFileOnlyRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                     LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |
                                     LANDLOCK_ACCESS_FS_IOCTL_DEV;

// Adds a rule allowing `rights` beneath `path` (a file: the file-only ones). False when the path
// exists but the rule could not be added; a missing path is skipped.
bool AllowBeneath(int ruleset, const std::string& path, uint64_t rights) {
  const int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ENOTDIR || errno == EACCES;
  struct stat st = {};
  if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) rights &= kFileOnlyRights;
  landlock_path_beneath_attr rule = {};
  rule.allowed_access = rights;
  rule.parent_fd = fd;
  const long r = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
  close(fd);
  return r == 0;
}

Status MakeRuleset(int abi, const ConfinementPolicy& policy, int* out) {
  const uint64_t handled = HandledRights(abi);
  landlock_ruleset_attr attr = {};
  attr.handled_access_fs = handled;
  const int ruleset = static_cast<int>(
      syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr.handled_access_fs), 0));
  if (ruleset < 0) return Internal(std::string("landlock_create_ruleset: ") + strerror(errno));
  const uint64_t read = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
  const uint64_t write = handled & ~LANDLOCK_ACCESS_FS_EXECUTE;
  // A path and, where it is a symbolic link (/etc/resolv.conf often is), what it names.
  std::vector<std::string> readable;
  for (const std::string& path : policy.readable) {
    readable.push_back(path);
    if (char* real = realpath(path.c_str(), nullptr)) {
      if (path != real) readable.push_back(real);
      free(real);
    }
  }
  for (const std::string& path : readable) {
    if (!AllowBeneath(ruleset, path, read)) {
      close(ruleset);
      return Internal("landlock_add_rule " + path + ": " + strerror(errno));
    }
  }
  for (const std::string& path : policy.writable) {
    if (!AllowBeneath(ruleset, path, write)) {
      close(ruleset);
      return Internal("landlock_add_rule " + path + ": " + strerror(errno));
    }
  }
  *out = ruleset;
  return Status::Ok();
}

// --- Per-thread state, applied by each thread to itself ---

// Set before the broadcast, read by the handler (async-signal-safe: plain loads and syscalls).
int g_ruleset = -1;        // -1: no Landlock
bool g_drop_caps = false;  // the process held capabilities
constexpr int kMaxThreads = 4096;
std::atomic<int> g_answers{0};
std::atomic<pid_t> g_answered[kMaxThreads];  // tid, negated when it failed

// Applies the per-thread parts to the calling thread, once. Async-signal-safe.
thread_local bool t_confined = false;
bool ConfineThisThread() {
  if (t_confined) return true;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  if (g_drop_caps) {
    for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (syscall(SYS_capset, &header, data) != 0) return false;
  }
  if (g_ruleset >= 0 && syscall(SYS_landlock_restrict_self, g_ruleset, 0) != 0) return false;
  t_confined = true;
  return true;
}

void OnConfineSignal(int) {
  const int saved = errno;
  const bool ok = ConfineThisThread();
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  const int slot = g_answers.fetch_add(1);
  if (slot < kMaxThreads) g_answered[slot].store(ok ? tid : -tid);
  errno = saved;
}

// The process's threads; empty when /proc/self/task cannot be read (never so otherwise: the
// caller is one).
std::set<pid_t> ThreadsOfThisProcess() {
  std::set<pid_t> tids;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] != '.') tids.insert(static_cast<pid_t>(atoi(e->d_name)));
    }
    closedir(dir);
  }
  return tids;
}

// Checks, from /proc, that every thread has no new privileges and, when `no_capabilities`, no
// effective or permitted capability.
Status CheckEveryThread(bool no_capabilities) {
  const std::set<pid_t> tids = ThreadsOfThisProcess();
  if (tids.empty()) return Internal("cannot read /proc/self/task");
  for (pid_t tid : tids) {
    FILE* f = fopen(("/proc/self/task/" + std::to_string(tid) + "/status").c_str(), "r");
    if (f == nullptr) continue;  // it ended
    bool no_new_privileges = false, capable = false;
    char line[256];
    while (fgets(line, sizeof(line), f) != nullptr) {
      if (strncmp(line, "NoNewPrivs:\t1", 13) == 0) no_new_privileges = true;
      if ((strncmp(line, "CapEff:", 7) == 0 || strncmp(line, "CapPrm:", 7) == 0) &&
          strtoull(line + 7, nullptr, 16) != 0) {
        capable = true;
      }
    }
    fclose(f);
    if (!no_new_privileges || (no_capabilities && capable)) {
      return Internal("thread " + std::to_string(tid) + " is not confined");
    }
  }
  return Status::Ok();
}

// Has every other thread of the process confine itself (a signal each), until none is left or
// `deadline` passes. Threads a confined thread starts inherit its confinement; threads an
// unconfined one starts meanwhile are found by the next look at /proc/self/task.
Status ConfineOtherThreads(int* threads, int* confined) {
  const int signal_number = SIGRTMAX - 1;
  struct sigaction action = {};
  action.sa_handler = OnConfineSignal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  if (sigaction(signal_number, &action, nullptr) != 0) {
    return Internal(std::string("sigaction: ") + strerror(errno));
  }
  const pid_t pid = getpid();
  const pid_t self = static_cast<pid_t>(syscall(SYS_gettid));
  std::set<pid_t> done = {self};
  std::set<pid_t> failed;
  std::map<pid_t, std::chrono::steady_clock::time_point> signalled;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int seen = 0;
  int seen_confined = 0;
  Status result = Status::Ok();
  for (;;) {
    std::set<pid_t> live = ThreadsOfThisProcess();
    if (live.empty()) {
      result = Internal("cannot read /proc/self/task");
      break;
    }
    std::set<pid_t> pending;
    for (pid_t tid : live) {
      if (done.count(tid) == 0 && failed.count(tid) == 0) pending.insert(tid);
    }
    seen = static_cast<int>(live.size());
    seen_confined = 0;
    for (pid_t tid : live) seen_confined += done.count(tid) > 0 ? 1 : 0;
    if (pending.empty()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      result = Internal(std::to_string(pending.size()) + " of the process's " +
                        std::to_string(live.size()) + " threads did not confine themselves");
      break;
    }
    // Asked again every 250 ms: a signal is lost when its thread ended and its id was reused.
    const auto now = std::chrono::steady_clock::now();
    for (pid_t tid : pending) {
      auto [at, first] = signalled.emplace(tid, now);
      if (first || now - at->second > std::chrono::milliseconds(250)) {
        at->second = now;
        syscall(SYS_tgkill, pid, tid, signal_number);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const int answers = std::min(g_answers.load(), kMaxThreads);
    for (int i = 0; i < answers; ++i) {
      const pid_t answer = g_answered[i].load();
      if (answer > 0) done.insert(answer);
      if (answer < 0) failed.insert(-answer);
    }
  }
  // A signal still on its way is dropped (its thread is confined already); its default action
  // would end the process.
  action.sa_handler = SIG_IGN;
  sigaction(signal_number, &action, nullptr);
  if (!failed.empty() && result.ok()) {
    result = Internal(std::to_string(failed.size()) + " threads could not confine themselves");
  }
  *threads = seen;
  *confined = seen_confined;
  return result;
}

// --- seccomp, through libseccomp ---

Status LoadSystemCallFilter(bool unix_sockets) {
  scmp_filter_ctx filter = seccomp_init(SCMP_ACT_ALLOW);
  if (filter == nullptr) return Internal("seccomp_init failed");
  const uint32_t refuse = SCMP_ACT_ERRNO(EPERM);
  int rc = 0;
  auto deny = [&](int call) {
    if (rc == 0 && call >= 0) rc = seccomp_rule_add(filter, refuse, call, 0);
  };
  // Running programs, tracing or reading other processes.
  for (int call : {SCMP_SYS(execve), SCMP_SYS(execveat), SCMP_SYS(ptrace),
                   SCMP_SYS(process_vm_readv), SCMP_SYS(process_vm_writev), SCMP_SYS(pidfd_open),
                   SCMP_SYS(pidfd_getfd), SCMP_SYS(pidfd_send_signal), SCMP_SYS(kcmp),
                   SCMP_SYS(tkill), SCMP_SYS(fork), SCMP_SYS(vfork)}) {
    deny(call);
  }
  // The kernel's administration.
  for (int call : {SCMP_SYS(mount),
                   SCMP_SYS(umount2),
                   SCMP_SYS(pivot_root),
                   SCMP_SYS(chroot),
                   SCMP_SYS(unshare),
                   SCMP_SYS(setns),
                   SCMP_SYS(move_mount),
                   SCMP_SYS(open_tree),
                   SCMP_SYS(fsopen),
                   SCMP_SYS(fsconfig),
                   SCMP_SYS(fsmount),
                   SCMP_SYS(fspick),
                   SCMP_SYS(mount_setattr),
                   SCMP_SYS(init_module),
                   SCMP_SYS(finit_module),
                   SCMP_SYS(delete_module),
                   SCMP_SYS(kexec_load),
                   SCMP_SYS(kexec_file_load),
                   SCMP_SYS(reboot),
                   SCMP_SYS(swapon),
                   SCMP_SYS(swapoff),
                   SCMP_SYS(acct),
                   SCMP_SYS(quotactl),
                   SCMP_SYS(bpf),
                   SCMP_SYS(userfaultfd),
                   SCMP_SYS(perf_event_open),
                   SCMP_SYS(keyctl),
                   SCMP_SYS(add_key),
                   SCMP_SYS(request_key),
                   SCMP_SYS(open_by_handle_at),
                   SCMP_SYS(name_to_handle_at),
                   SCMP_SYS(iopl),
                   SCMP_SYS(ioperm),
                   SCMP_SYS(syslog),
                   SCMP_SYS(settimeofday),
                   SCMP_SYS(clock_settime),
                   SCMP_SYS(clock_adjtime),
                   SCMP_SYS(adjtimex),
                   SCMP_SYS(fanotify_init),
                   SCMP_SYS(vhangup)}) {
    deny(call);
  }
  // io_uring runs file operations the filter would not see; clone3's flags are behind a pointer
  // it cannot read (ENOSYS: the C library falls back to clone, whose flags it can).
  for (int call : {SCMP_SYS(io_uring_setup), SCMP_SYS(io_uring_enter), SCMP_SYS(io_uring_register),
                   SCMP_SYS(clone3)}) {
    if (rc == 0) rc = seccomp_rule_add(filter, SCMP_ACT_ERRNO(ENOSYS), call, 0);
  }
  // Threads only: a clone without CLONE_THREAD would make a process.
  if (rc == 0) {
    rc = seccomp_rule_add(filter, refuse, SCMP_SYS(clone), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
  }
  // Signals to itself only (kill(0, ...) would reach the server's process group).
  const auto self = static_cast<scmp_datum_t>(getpid());
  for (int call :
       {SCMP_SYS(kill), SCMP_SYS(tgkill), SCMP_SYS(rt_sigqueueinfo), SCMP_SYS(rt_tgsigqueueinfo)}) {
    if (rc == 0) rc = seccomp_rule_add(filter, refuse, call, 1, SCMP_A0(SCMP_CMP_NE, self));
  }
  // Another process's resource limits (its own are pid 0's, as the C library asks), and another
  // process's (or user's) priorities.
  if (rc == 0) {
    rc = seccomp_rule_add(filter, refuse, SCMP_SYS(prlimit64), 1, SCMP_A0(SCMP_CMP_NE, 0));
  }
  for (int call : {SCMP_SYS(setpriority), SCMP_SYS(ioprio_set)}) {
    if (rc == 0) rc = seccomp_rule_add(filter, refuse, call, 1, SCMP_A1(SCMP_CMP_NE, 0));
  }
  // ... and with who 0, every process of its user (PRIO_USER, IOPRIO_WHO_USER: 0 is the caller's
  // user there, not the caller). A process group of 0 is its own: a host leads a session and group
  // of its own.
  if (rc == 0) {
    rc =
        seccomp_rule_add(filter, refuse, SCMP_SYS(setpriority), 1, SCMP_A0(SCMP_CMP_EQ, PRIO_USER));
  }
  if (rc == 0) {
    constexpr scmp_datum_t kIoprioWhoUser = 3;  // linux/ioprio.h's IOPRIO_WHO_USER
    rc = seccomp_rule_add(filter, refuse, SCMP_SYS(ioprio_set), 1,
                          SCMP_A0(SCMP_CMP_EQ, kIoprioWhoUser));
  }
  // Another process's CPUs, scheduling policy and memory placement (a host could pin the server
  // or another tenant's host to one CPU, or make it SCHED_IDLE): the calling thread's (0; for
  // migrate_pages and move_pages the calling process) only, as for priorities above. A thread of
  // its own named by its id is refused too (pthread_setaffinity_np, pthread_setschedparam, and a
  // pthread_create whose attributes set CPUs or a policy, which then fails): the filter cannot
  // tell its threads from other processes (libseccomp takes one comparison per argument, so not
  // even the main thread's id can be let through beside 0).
  for (int call :
       {SCMP_SYS(sched_setaffinity), SCMP_SYS(sched_setscheduler), SCMP_SYS(sched_setparam),
        SCMP_SYS(sched_setattr), SCMP_SYS(migrate_pages), SCMP_SYS(move_pages)}) {
    if (rc == 0) rc = seccomp_rule_add(filter, refuse, call, 1, SCMP_A0(SCMP_CMP_NE, 0));
  }
  // Signals by another way: a file whose owner (F_SETOWN, FIOSETOWN, SIOCSPGRP) is another
  // process or group gets SIGIO, or the signal F_SETSIG names, when it is ready.
  constexpr scmp_datum_t kLow32 = 0xffffffffu;
  if (rc == 0) {
    rc =
        seccomp_rule_add(filter, refuse, SCMP_SYS(fcntl), 2,
                         SCMP_A1(SCMP_CMP_MASKED_EQ, kLow32, F_SETOWN), SCMP_A2(SCMP_CMP_NE, self));
  }
  if (rc == 0) {
    rc = seccomp_rule_add(filter, refuse, SCMP_SYS(fcntl), 1,
                          SCMP_A1(SCMP_CMP_MASKED_EQ, kLow32, F_SETOWN_EX));
  }
  // ... and a terminal's input (TIOCSTI, TIOCLINUX: typed into the operator's shell).
  for (scmp_datum_t request : {scmp_datum_t{FIOSETOWN}, scmp_datum_t{SIOCSPGRP},
                               scmp_datum_t{TIOCSTI}, scmp_datum_t{TIOCLINUX}}) {
    if (rc == 0) {
      rc = seccomp_rule_add(filter, refuse, SCMP_SYS(ioctl), 1,
                            SCMP_A1(SCMP_CMP_MASKED_EQ, kLow32, request));
    }
  }
  // Dumpable again (core dumps through a core_pattern pipe, tracing by its user).
  if (rc == 0) {
    rc = seccomp_rule_add(filter, refuse, SCMP_SYS(prctl), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, kLow32, PR_SET_DUMPABLE));
  }
  // Local services of the server's user (a user manager's bus starts programs; an agent's
  // socket): Landlock does not cover connecting to a socket by its path.
  if (rc == 0 && !unix_sockets) {
    rc = seccomp_rule_add(filter, refuse, SCMP_SYS(socket), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, kLow32, AF_UNIX));
  }
  // Files' modes, owners, attributes, sizes and times by path (Landlock checks opening, not
  // these, or truncation only from its ABI 3).
  for (int call : {SCMP_SYS(chmod), SCMP_SYS(fchmodat), SCMP_SYS(chown), SCMP_SYS(lchown),
                   SCMP_SYS(fchownat), SCMP_SYS(setxattr), SCMP_SYS(lsetxattr),
                   SCMP_SYS(removexattr), SCMP_SYS(lremovexattr), SCMP_SYS(truncate),
                   SCMP_SYS(utime), SCMP_SYS(utimes), SCMP_SYS(utimensat), SCMP_SYS(futimesat)}) {
    deny(call);
  }
  // Every thread, with no-new-privileges.
  if (rc == 0) rc = seccomp_attr_set(filter, SCMP_FLTATR_CTL_TSYNC, 1);
  if (rc == 0) rc = seccomp_load(filter);
  seccomp_release(filter);
  if (rc != 0) return Internal(std::string("seccomp: ") + strerror(-rc));
  return Status::Ok();
}

bool HoldsCapabilities() {
  __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return true;  // assume so: drop them
  return (data[0].permitted | data[1].permitted | data[0].effective | data[1].effective) != 0;
}

}  // namespace

ConfinementPolicy SessionHostPolicy(const std::string& program_dir,
                                    const std::vector<std::string>& extra_readable,
                                    bool shared_memory) {
  ConfinementPolicy policy;
  policy.file_rules = !shared_memory;
  policy.not_dumpable = !shared_memory;
  policy.drop_capabilities = !shared_memory;
  policy.unix_sockets = shared_memory;
  policy.readable = {"/usr", "/lib", "/lib32", "/lib64", "/libx32", "/sys",
                     // ROCm's libraries (not the rest of /opt, where a tree may keep its keys)
                     "/opt/rocm",
                     // the dynamic loader's and a resolver's configuration
                     "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/hosts",
                     "/etc/resolv.conf", "/etc/nsswitch.conf", "/etc/gai.conf", "/etc/host.conf",
                     "/etc/localtime", "/etc/ssl/certs", "/etc/ssl/openssl.cnf",
                     // its own /proc entries (/proc/self) and the system's that drivers read
                     "/proc/" + std::to_string(getpid()), "/proc/driver", "/proc/sys",
                     "/proc/devices", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat",
                     "/proc/filesystems", "/proc/loadavg", "/proc/uptime", "/proc/version"};
  if (!program_dir.empty()) {
    policy.readable.push_back(program_dir);
    policy.readable.push_back(program_dir + "/../lib");
  }
  for (const std::string& path : extra_readable) {
    if (!path.empty()) policy.readable.push_back(path);
  }
  // Its own /proc entries (threads' names), shared-memory segments, the GPUs' device nodes and
  // the harmless ones: not disks, terminals or input devices.
  policy.writable = {"/proc/" + std::to_string(getpid()),
                     "/dev/shm",
                     "/dev/null",
                     "/dev/zero",
                     "/dev/full",
                     "/dev/random",
                     "/dev/urandom"};
  if (DIR* dev = opendir("/dev")) {
    while (dirent* e = readdir(dev)) {
      const std::string name = e->d_name;
      if (name.rfind("nvidia", 0) == 0 || name == "dri" || name == "kfd") {
        policy.writable.push_back("/dev/" + name);
      }
    }
    closedir(dev);
  }
  return policy;
}

std::string Confinement::ToString() const {
  std::string s = std::string("no new privileges ") + (no_new_privileges ? "yes" : "no") +
                  ", not dumpable " + (not_dumpable ? "yes" : "no") + ", capabilities " +
                  (capabilities_dropped ? "dropped" : "kept or none held") +
                  ", system-call filter " + (system_call_filter ? "yes" : "no") + ", files: ";
  s += landlock_abi > 0 ? "Landlock ABI " + std::to_string(landlock_abi)
                        : std::string("no rules (none asked for, or no Landlock in this kernel)");
  s += ", threads " + std::to_string(threads_confined) + " of " + std::to_string(threads);
  return s;
}

Status ConfineThisProcess(const ConfinementPolicy& policy, Confinement* applied) {
  *applied = Confinement();
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return Internal(std::string("no_new_privs: ") + strerror(errno));
  }
  applied->no_new_privileges = true;
  if (policy.not_dumpable) {
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
      return Internal(std::string("PR_SET_DUMPABLE: ") + strerror(errno));
    }
    applied->not_dumpable = true;
  }
  g_drop_caps = policy.drop_capabilities && HoldsCapabilities();
  applied->landlock_abi = policy.file_rules ? LandlockAbi() : 0;
  g_ruleset = -1;
  // As root without file rules, no capabilities still leave it the owner of root's files.
  if (policy.file_rules && applied->landlock_abi == 0 && geteuid() == 0) {
    return PermissionDenied(
        "this kernel has no Landlock: a session host running as root would keep root's files "
        "(run rgpu-server as a user of its own, or --session-sandbox off)");
  }
  if (applied->landlock_abi > 0) {
    if (Status s = MakeRuleset(applied->landlock_abi, policy, &g_ruleset); !s.ok()) return s;
  }
  g_answers.store(0);
  Status s = ConfineThisThread() ? Status::Ok()
                                 : Internal(std::string("confining a thread: ") + strerror(errno));
  if (s.ok()) s = ConfineOtherThreads(&applied->threads, &applied->threads_confined);
  if (g_ruleset >= 0) close(g_ruleset);
  g_ruleset = -1;
  if (s.ok()) s = CheckEveryThread(g_drop_caps);
  if (!s.ok()) return s;
  applied->capabilities_dropped = g_drop_caps;
  if (Status f = LoadSystemCallFilter(policy.unix_sockets); !f.ok()) return f;
  applied->system_call_filter = true;
  return Status::Ok();
}

Status KeepFromConfinedProcesses() {
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    return Internal(std::string("PR_SET_DUMPABLE: ") + strerror(errno));
  }
  return Status::Ok();
}

}  // namespace rgpu::server
