// spank_rgpu: Slurm's SPANK plugin for rgpu. `srun --rgpu ./app` (or `--rgpu=1`) runs each of
// the step's tasks on a remote GPU that rgpu's registry places for the job:
//
//   slurmstepd, before the tasks start (slurm_spank_user_init, as the job's user):
//     rgpu place --job slurm:CLUSTER:JOBID --memory M --ttl T --wait W [--backend B]
//     with the job's RGPU_API_KEY, RGPU_REGISTRY and RGPU_TLS_CA; one lease per step and node,
//     lasting until released, shared by the node's tasks of the step;
//   each task (slurm_spank_task_init): RGPU_SERVER, RGPU_TOKEN, RGPU_LEASE and RGPU_JOB in its
//     environment, rgpu's CUDA, HIP and NVML faces in LD_PRELOAD (before the job's own);
//   slurmstepd, once the tasks have ended (slurm_spank_exit): rgpu lease release LEASE, as the
//     job's user: the GPU is free at once and the lease's bill lines carry the job's identity.
//
// plugstack.conf: optional|required PATH/spank_rgpu.so [rgpu=PATH] [libdir=DIR] [registry=ADDR]
//   [memory=SIZE] [ttl=SECONDS] [wait=SECONDS] [backend=cuda|hip|softgpu]
// (slurm/README.md). A placement that fails fails the step, with rgpu's message on its stderr.
//
// Depends on Slurm's spank.h and libc only; no rgpu library is loaded into slurmstepd (the
// registry is reached through the `rgpu` command). Slurm calls each hook from one thread.
#define _GNU_SOURCE  // pipe2
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(rgpu, 1);

enum { kValueMax = 4096, kOutputMax = 16384 };

// Configuration (plugstack.conf arguments) and the step's state. slurmstepd runs one step; its
// hooks run one at a time.
static char rgpu_binary[kValueMax] = "/usr/bin/rgpu";
static char faces_dir[kValueMax] = "/usr/lib/rgpu";
static char default_registry[kValueMax] = "";
static char memory[64] = "1G";
static char backend[16] = "";
static unsigned ttl_seconds = 86400;
static unsigned wait_seconds = 60;

static int gpus_wanted = 0;  // --rgpu[=N]: 0 = not asked for
static char option_memory[64] = "";
static char api_key[kValueMax] = "";
static char registry[kValueMax] = "";
static char tls_ca[kValueMax] = "";
static char job_name[160] = "";
static char lease_id[kValueMax] = "";
static char server_url[kValueMax] = "";
static char credential[kValueMax] = "";
// Why no GPU was placed, said by each task (slurmstepd reports a failed user_init as a launch
// failure that srun and sacct count as success; a task that fails makes the step fail).
static char placement_error[kOutputMax + 256] = "";
static uid_t job_uid = 0;
static gid_t job_gid = 0;

// A size with an optional K/M/G/T suffix, as `rgpu place --memory` reads it.
static int valid_size(const char* text) {
  if (text == NULL || *text < '0' || *text > '9') return 0;
  char* end = NULL;
  errno = 0;
  const unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || v == 0) return 0;
  if (*end != '\0' && strchr("KMGT", *end) != NULL) ++end;
  return *end == '\0' && strlen(text) < sizeof option_memory;
}

static int parse_count(const char* text, unsigned max, unsigned* out) {
  if (text == NULL || *text < '0' || *text > '9') return 0;
  char* end = NULL;
  errno = 0;
  const unsigned long v = strtoul(text, &end, 10);
  if (errno != 0 || *end != '\0' || v > max) return 0;
  *out = (unsigned)v;
  return 1;
}

static int copy_value(char* out, size_t size, const char* value) {
  if (strlen(value) >= size) return 0;
  memcpy(out, value, strlen(value) + 1);
  return 1;
}

static int on_rgpu_option(int value, const char* arg, int remote) {
  (void)value;
  (void)remote;
  unsigned n = 1;
  // sbatch hands `--rgpu` without its optional argument on to the steps inside the job as the
  // text "(null)" (Slurm 22.05): the same as no argument.
  if (arg != NULL && strcmp(arg, "(null)") == 0) arg = NULL;
  if (arg != NULL && *arg != '\0' && !parse_count(arg, 64, &n)) {
    slurm_error("rgpu: --rgpu=%s: give a number of GPUs", arg);
    return -1;
  }
  if (n != 1) {
    slurm_error("rgpu: --rgpu=%u: a program gets one remote GPU from rgpu (--rgpu=1)", n);
    return -1;
  }
  gpus_wanted = (int)n;
  return 0;
}

static int on_memory_option(int value, const char* arg, int remote) {
  (void)value;
  (void)remote;
  if (!valid_size(arg)) {
    slurm_error("rgpu: --rgpu-memory=%s: give a size such as 512M or 4G", arg ? arg : "");
    return -1;
  }
  copy_value(option_memory, sizeof option_memory, arg);
  return 0;
}

// Registered from slurm_spank_init in every context (srun, sbatch/salloc and slurmstepd; the
// spank_options table would reach srun and slurmstepd only).
static struct spank_option rgpu_options[] = {
    {"rgpu", "[N]", "run each task on a remote GPU placed by rgpu's registry (N=1)", 2, 0,
     on_rgpu_option},
    {"rgpu-memory", "SIZE", "device memory to ask rgpu for (K/M/G suffixes; default 1G)", 1, 0,
     on_memory_option},
};

// The defaults, from where this plugin lies: PREFIX/lib/rgpu/slurm/spank_rgpu.so (a package, the
// tarball) has the faces in PREFIX/lib/rgpu and the command in PREFIX/bin; the build tree's
// lib/slurm/spank_rgpu.so has them in lib/ and bin/ beside it.
static void locate_installation(void) {
  Dl_info info;
  if (dladdr((void*)&locate_installation, &info) == 0 || info.dli_fname == NULL ||
      info.dli_fname[0] != '/') {
    return;
  }
  char dir[kValueMax];
  if (!copy_value(dir, sizeof dir, info.dli_fname)) return;
  for (int up = 0; up < 2; ++up) {  // strip the file name, then slurm/
    char* slash = strrchr(dir, '/');
    if (slash == NULL || slash == dir) return;
    *slash = '\0';
  }
  char candidate[kValueMax + 16];
  const char* layouts[] = {"/../../bin/rgpu", "/../bin/rgpu"};
  for (size_t i = 0; i < 2; ++i) {
    snprintf(candidate, sizeof candidate, "%s%s", dir, layouts[i]);
    if (access(candidate, X_OK) == 0 && copy_value(rgpu_binary, sizeof rgpu_binary, candidate)) {
      copy_value(faces_dir, sizeof faces_dir, dir);
      return;
    }
  }
}

// plugstack.conf's arguments; an unknown or malformed one fails the plugin's load, naming it.
static int parse_arguments(int ac, char** av) {
  for (int i = 0; i < ac; ++i) {
    const char* a = av[i];
    int ok = 0;
    if (strncmp(a, "rgpu=", 5) == 0) {
      ok = copy_value(rgpu_binary, sizeof rgpu_binary, a + 5) && a[5] == '/';
    } else if (strncmp(a, "libdir=", 7) == 0) {
      ok = copy_value(faces_dir, sizeof faces_dir, a + 7) && a[7] == '/' && !strchr(a + 7, ':');
    } else if (strncmp(a, "registry=", 9) == 0) {
      ok = copy_value(default_registry, sizeof default_registry, a + 9);
    } else if (strncmp(a, "memory=", 7) == 0) {
      ok = valid_size(a + 7) && copy_value(memory, sizeof memory, a + 7);
    } else if (strncmp(a, "ttl=", 4) == 0) {
      ok = parse_count(a + 4, 7 * 86400, &ttl_seconds) && ttl_seconds > 0;
    } else if (strncmp(a, "wait=", 5) == 0) {
      ok = parse_count(a + 5, 86400, &wait_seconds);
    } else if (strncmp(a, "backend=", 8) == 0) {
      ok = (strcmp(a + 8, "cuda") == 0 || strcmp(a + 8, "hip") == 0 ||
            strcmp(a + 8, "softgpu") == 0) &&
           copy_value(backend, sizeof backend, a + 8);
    }
    if (!ok) {
      slurm_error(
          "rgpu: bad plugstack.conf argument '%s' (rgpu=PATH libdir=DIR registry=ADDR "
          "memory=SIZE ttl=S wait=S backend=cuda|hip|softgpu)",
          a);
      return -1;
    }
  }
  return 0;
}

int slurm_spank_init(spank_t sp, int ac, char** av) {
  locate_installation();
  if (parse_arguments(ac, av) != 0) return -1;
  for (size_t i = 0; i < sizeof rgpu_options / sizeof rgpu_options[0]; ++i) {
    if (spank_option_register(sp, &rgpu_options[i]) != ESPANK_SUCCESS) {
      slurm_error("rgpu: cannot register --%s", rgpu_options[i].name);
      return -1;
    }
  }
  return 0;
}

// Runs `argv` as the job's user with only the given environment, its stdout and stderr in
// `output` (NUL-terminated, truncated at kOutputMax). Returns its exit status, or -1 when it could
// not run or was killed; ends it after `timeout_s`.
static int run_as_user(char* const argv[], char* const envp[], char* output, unsigned timeout_s) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    snprintf(output, kOutputMax, "pipe: %s", strerror(errno));
    return -1;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    snprintf(output, kOutputMax, "fork: %s", strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    // slurmstepd runs as root (Slurm 22.05 calls user_init and exit with root's ids, whatever
    // spank.h says of a temporary drop): the command runs as the job's user alone, real and
    // effective ids and groups, with no way back.
    if (getuid() == 0 || geteuid() == 0) {
      if (seteuid(0) != 0 || setgroups(1, &job_gid) != 0 || setgid(job_gid) != 0 ||
          setuid(job_uid) != 0) {
        _exit(126);
      }
    }
    if (getuid() != job_uid || geteuid() != job_uid) _exit(126);
    execve(argv[0], argv, envp);
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  size_t used = 0;
  const time_t deadline = time(NULL) + (time_t)timeout_s;
  for (;;) {
    struct pollfd p = {fds[0], POLLIN, 0};
    const int left = (int)(deadline - time(NULL));
    if (left <= 0) {
      kill(pid, SIGKILL);
      snprintf(output + used, kOutputMax - used, "\n(ended after %u s)", timeout_s);
      break;
    }
    const int ready = poll(&p, 1, left * 1000);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char scratch[512];
    char* into = used + 1 < kOutputMax ? output + used : scratch;
    const size_t room = used + 1 < kOutputMax ? kOutputMax - 1 - used : sizeof scratch;
    const ssize_t n = read(fds[0], into, room);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (into != scratch) used += (size_t)n;
  }
  output[used] = '\0';
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The value of NAME=... among `output`'s lines, copied into `out`; 0 when absent or too long.
static int line_value(const char* output, const char* name, char* out, size_t size) {
  const size_t len = strlen(name);
  for (const char* line = output; line != NULL && *line != '\0';) {
    const char* end = strchr(line, '\n');
    const size_t line_len = end ? (size_t)(end - line) : strlen(line);
    if (line_len > len && strncmp(line, name, len) == 0 && line[len] == '=') {
      const size_t value_len = line_len - len - 1;
      if (value_len == 0 || value_len >= size) return 0;
      memcpy(out, line + len + 1, value_len);
      out[value_len] = '\0';
      return 1;
    }
    line = end ? end + 1 : NULL;
  }
  return 0;
}

// The job's environment variable NAME into `out` ("" when absent); 0 when it does not fit.
static int job_env(spank_t sp, const char* name, char* out, int size) {
  out[0] = '\0';
  const spank_err_t rc = spank_getenv(sp, name, out, size);
  if (rc == ESPANK_ENV_NOEXIST) {
    out[0] = '\0';
    return 1;
  }
  return rc == ESPANK_SUCCESS;
}

// The environment `rgpu` runs with: the tenant's credentials and where the registry is, only.
static void rgpu_environment(char storage[4][kValueMax + 32], char* envp[5]) {
  int n = 0;
  snprintf(storage[n], sizeof storage[n], "RGPU_API_KEY=%s", api_key);
  envp[n] = storage[n];
  ++n;
  snprintf(storage[n], sizeof storage[n], "RGPU_REGISTRY=%s", registry);
  envp[n] = storage[n];
  ++n;
  if (tls_ca[0] != '\0') {
    snprintf(storage[n], sizeof storage[n], "RGPU_TLS_CA=%s", tls_ca);
    envp[n] = storage[n];
    ++n;
  }
  snprintf(storage[n], sizeof storage[n], "PATH=/usr/bin:/bin");
  envp[n] = storage[n];
  ++n;
  envp[n] = NULL;
}

// Records why the step gets no GPU; its tasks fail with it (slurm_spank_task_init).
__attribute__((format(printf, 1, 2))) static int refuse(const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(placement_error, sizeof placement_error, format, args);
  va_end(args);
  return 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  if (gpus_wanted == 0 || !spank_remote(sp)) return 0;
  uint32_t job_id = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_UID, &job_uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &job_gid) != ESPANK_SUCCESS) {
    return refuse("rgpu: cannot read the job's id and owner");
  }
  char cluster[64];
  if (!job_env(sp, "SLURM_CLUSTER_NAME", cluster, sizeof cluster) ||
      !job_env(sp, "RGPU_API_KEY", api_key, sizeof api_key) ||
      !job_env(sp, "RGPU_REGISTRY", registry, sizeof registry) ||
      !job_env(sp, "RGPU_TLS_CA", tls_ca, sizeof tls_ca)) {
    return refuse("rgpu: the job's RGPU_* environment is too long");
  }
  if (registry[0] == '\0') copy_value(registry, sizeof registry, default_registry);
  if (api_key[0] == '\0' || registry[0] == '\0') {
    return refuse(
        "rgpu: --rgpu needs the tenant's RGPU_API_KEY and RGPU_REGISTRY in the job's "
        "environment%s",
        default_registry[0] ? "" : " (or registry= in plugstack.conf)");
  }
  for (const char* c = cluster; *c; ++c) {
    if (*c <= ' ' || *c > '~') {
      return refuse("rgpu: the cluster name holds characters a job name cannot");
    }
  }
  snprintf(job_name, sizeof job_name, "slurm:%s:%u", cluster[0] ? cluster : "slurm", job_id);
  char ttl[16], wait[16];
  snprintf(ttl, sizeof ttl, "%u", ttl_seconds);
  snprintf(wait, sizeof wait, "%u", wait_seconds);
  char* argv[16];
  int n = 0;
  argv[n++] = rgpu_binary;
  argv[n++] = "place";
  argv[n++] = "--job";
  argv[n++] = job_name;
  argv[n++] = "--memory";
  argv[n++] = option_memory[0] ? option_memory : memory;
  argv[n++] = "--ttl";
  argv[n++] = ttl;
  argv[n++] = "--wait";
  argv[n++] = wait;
  if (backend[0] != '\0') {
    argv[n++] = "--backend";
    argv[n++] = backend;
  }
  argv[n] = NULL;
  char storage[4][kValueMax + 32];
  char* envp[5];
  rgpu_environment(storage, envp);
  static char output[kOutputMax];
  const int rc = run_as_user(argv, envp, output, wait_seconds + 60);
  if (rc != 0 || !line_value(output, "RGPU_SERVER", server_url, sizeof server_url) ||
      !line_value(output, "RGPU_TOKEN", credential, sizeof credential) ||
      !line_value(output, "RGPU_LEASE", lease_id, sizeof lease_id)) {
    lease_id[0] = '\0';
    return refuse("rgpu: no GPU placed for job %s: %s", job_name, output);
  }
  slurm_verbose("rgpu: job %s placed at %s, lease %s", job_name, server_url, lease_id);
  return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  if (gpus_wanted == 0) return 0;
  if (lease_id[0] == '\0') {
    slurm_error("%s", placement_error[0] ? placement_error : "rgpu: no GPU placed");
    return -1;
  }
  // The faces first, then whatever the job preloads itself.
  char preload[3 * kValueMax + 64];
  int len =
      snprintf(preload, sizeof preload, "%s/librgpu-cuda.so:%s/librgpu-hip.so:%s/librgpu-nvml.so",
               faces_dir, faces_dir, faces_dir);
  char existing[kValueMax];
  if (job_env(sp, "LD_PRELOAD", existing, sizeof existing) && existing[0] != '\0' && len > 0 &&
      (size_t)len + 1 + strlen(existing) < sizeof preload) {
    snprintf(preload + len, sizeof preload - (size_t)len, ":%s", existing);
  }
  if (spank_setenv(sp, "LD_PRELOAD", preload, 1) != ESPANK_SUCCESS ||
      spank_setenv(sp, "RGPU_SERVER", server_url, 1) != ESPANK_SUCCESS ||
      spank_setenv(sp, "RGPU_TOKEN", credential, 1) != ESPANK_SUCCESS ||
      spank_setenv(sp, "RGPU_LEASE", lease_id, 1) != ESPANK_SUCCESS ||
      spank_setenv(sp, "RGPU_JOB", job_name, 1) != ESPANK_SUCCESS) {
    slurm_error("rgpu: cannot set the task's environment");
    return -1;
  }
  return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  if (gpus_wanted == 0 || lease_id[0] == '\0' || !spank_remote(sp)) return 0;
  char* argv[] = {rgpu_binary, "lease", "release", lease_id, NULL};
  char storage[4][kValueMax + 32];
  char* envp[5];
  rgpu_environment(storage, envp);
  static char output[kOutputMax];
  const int rc = run_as_user(argv, envp, output, 60);
  if (rc != 0) {
    slurm_error("rgpu: lease %s of job %s not released (it ends at its ttl): %s", lease_id,
                job_name, output);
  }
  lease_id[0] = '\0';
  return 0;
}
