// Confinement of a session's process (rgpu-server --session-host): what a tenant who broke out
// of the driver into the process that serves its session could still do.
//
// A session host runs one tenant's session under the server's user. Other tenants' session hosts
// run under the same user, beside the server itself, its keys and its token files. Once the host
// has loaded its backend and listens, it confines itself, before any tenant reaches it:
// - no new privileges (no setuid program, no file capability gives it more), and, when it runs
//   as root, no capabilities at all (bounding, ambient, permitted, effective), so that being
//   uid 0 no longer overrides other owners' permissions or lets it trace anything;
// - not dumpable: no other process of the same user (another tenant's host) may trace it or
//   read its memory through /proc;
// - files (Landlock, where the kernel has it): it reads only the system's libraries and the
//   configuration it needs (`ConfinementPolicy`), /sys and its own and the drivers' /proc
//   entries, and writes only /dev/shm, the GPUs' device nodes, the harmless ones (null, zero,
//   ...) and its own /proc entries: not the server's keys or token files, not the rgpu tree's
//   other files, not disks, terminals or input devices. Landlock also keeps it from tracing, or
//   reading through /proc the memory of, any process outside its own domain. As root it needs
//   Landlock (uid 0 without capabilities still owns root's files);
// - system calls (seccomp, every thread): it cannot run a program, trace or read another
//   process, signal any process but itself (by kill, sigqueue, or SIGIO through a file's
//   owner), type into a terminal, become dumpable again, make a local socket (a user manager's
//   bus starts programs), change a file's mode, owner, attributes, size or times by its path,
//   change another process's priority or limits, or another thread's or process's CPUs,
//   scheduling or memory placement (the calling thread's only), create a process (threads
//   only), or reach the
//   kernel's administration (modules, mounts, namespaces, BPF, keyrings, io_uring, ...). A
//   refused call fails with EPERM (io_uring and clone3 with ENOSYS), so a library that probes
//   gets an error, not a kill.
//
// Capabilities, no-new-privileges and Landlock are per thread in Linux; threads that already run
// (the backend's, UCX's) are confined by a signal each handles (like glibc's set*id broadcast).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace rgpu::server {

// What a confined process may still reach in the file system. Paths that do not exist are
// skipped.
struct ConfinementPolicy {
  std::vector<std::string> readable;  // files and directory trees it may read (and map)
  std::vector<std::string> writable;  // trees it may read, write, create and remove in
  // False: no file rules even where the kernel has Landlock (as on a kernel without it; tests of
  // what the other layers hold alone).
  bool file_rules = true;
  bool not_dumpable = true;
  bool drop_capabilities = true;  // when it holds any (it runs as root)
  // Local (AF_UNIX) sockets it may make: UCX's shared memory signals its peer through one.
  bool unix_sockets = false;
};

// The session host's: reads the system's libraries (/usr, /lib*, /opt/rocm), the configuration the
// dynamic loader and a resolver read (not the rest of /etc), /sys and /proc, the directories of
// this executable and its libraries (`program_dir`: the install tree's bin/, whose ../lib is
// added) and `extra_readable` (the backend library's directory); writes its own /proc entries
// and /dev (device nodes, shared-memory segments).
//
// `shared_memory` (a host serving shm://): UCX's shared memory has each side open the other's
// segments as /proc/PID/fd links, which only a process that may trace the other can: Landlock
// refuses that outside its domain, a host that is not dumpable refuses it to its client, and a
// host without the capabilities of a root client cannot reach it. Such a host keeps its files,
// stays dumpable and keeps its capabilities: shm:// serves programs of the server's own user on
// its own machine (the transport checks the peer's user), which reach that user's processes
// anyway; it may also make local sockets (UCX signals its peer through one). No new privileges
// and the system-call filter apply to every host.
ConfinementPolicy SessionHostPolicy(const std::string& program_dir,
                                    const std::vector<std::string>& extra_readable,
                                    bool shared_memory);

// What ConfineThisProcess applied (for the host's log and tests).
struct Confinement {
  bool no_new_privileges = false;
  bool not_dumpable = false;
  bool capabilities_dropped = false;  // false also when there were none to drop
  bool system_call_filter = false;    // on every thread
  int landlock_abi = 0;               // 0: the kernel has no Landlock
  int threads = 0;                    // threads when the confinement was applied
  int threads_confined = 0;           // of those, with capabilities and file rules applied
  std::string ToString() const;
};

// Confines the calling process as the header says. Any thread, once; the process stays confined
// for its life. Fails (and the caller must not serve) when no-new-privileges, the capability drop
// or the system-call filter cannot be applied, when a thread could not be confined within a few
// seconds, or when the policy asks for file rules, the kernel has no Landlock and the process
// runs as root; otherwise a kernel without Landlock is not a failure (`landlock_abi` 0: files
// are then as open as the user's).
Status ConfineThisProcess(const ConfinementPolicy& policy, Confinement* applied);

// The server's side, once it starts session hosts: makes the calling process not dumpable, so
// that a confined host (which holds no capability) cannot trace it or read its memory, keys and
// tokens through /proc where the kernel has no Landlock (Landlock keeps hosts from tracing
// outside their domain anyway) or where the server does not run as root (a root server's
// capabilities, which hosts lack, keep them out too).
Status KeepFromConfinedProcesses();

}  // namespace rgpu::server
