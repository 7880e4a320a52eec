#include "interpose/common/private_runtime.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

namespace rgpu::interpose {

namespace {

// Where the runtime is: $override_env, else `file_name` beside the library holding `anchor`
// (links resolved).
void RuntimePath(const char* override_env, const char* file_name, const void* anchor, char* out,
                 size_t size) {
  const char* override_path = getenv(override_env);
  if (override_path != nullptr && *override_path != '\0') {
    snprintf(out, size, "%s", override_path);
    return;
  }
  Dl_info info;
  if (dladdr(anchor, &info) != 0 && info.dli_fname != nullptr) {
    // The library's own folder, not a link's (lib/softgpu-local/libcuda.so.1 is one).
    char resolved[PATH_MAX];
    snprintf(out, size, "%s", realpath(info.dli_fname, resolved) ? resolved : info.dli_fname);
    char* slash = strrchr(out, '/');
    if (slash != nullptr) {
      snprintf(slash + 1, size - (slash + 1 - out), "%s", file_name);
      return;
    }
  }
  snprintf(out, size, "%s", file_name);
}

// Signals whose handlers UCX installs when it loads (its UCX_ERROR_SIGNALS default).
constexpr int kProgramSignals[] = {SIGILL, SIGSEGV, SIGBUS, SIGFPE};
constexpr size_t kSignalCount = sizeof kProgramSignals / sizeof kProgramSignals[0];

}  // namespace

bool LoggingEnabled() {
  const char* v = getenv("RGPU_LOG");
  return v != nullptr && *v != '\0' && strcmp(v, "off") != 0 && strcmp(v, "0") != 0;
}

namespace {

// A detached thread of the program's C library running fn(arg); pthread_create's result.
int StartProgramThread(void* (*fn)(void*), void* arg) {
  pthread_t thread;
  const int r = pthread_create(&thread, nullptr, fn, arg);
  if (r == 0) pthread_detach(thread);
  return r;
}

void* Nothing(void*) { return nullptr; }

// The runtime's threads are started by its own copy of the C library, which the program's copy
// does not count: a program that never started a thread itself keeps its C library in
// single-threaded mode, where malloc takes no lock. Yet the dynamic loader allocates those
// threads' thread-local storage with the program's malloc, so it ran in the runtime's threads
// and the program's at once, unlocked (heap corruption with -cudart shared and cuBLAS, in the
// batch-flush thread's first UCX call). One thread of the program's own, started and joined
// here, puts its C library in multi-threaded mode for good.
void LeaveSingleThreadedMode() {
  pthread_t thread;
  if (pthread_create(&thread, nullptr, &Nothing, nullptr) == 0) pthread_join(thread, nullptr);
}

}  // namespace

namespace {

constexpr const char* kNamespaceVariable = "RGPU_RUNTIME_NAMESPACE";

// The namespace another shared face of this process loaded its runtime into, if any.
bool SharedNamespace(Lmid_t* lmid) {
  const char* v = getenv(kNamespaceVariable);
  long pid = 0, id = 0;
  if (v == nullptr || sscanf(v, "%ld:%ld", &pid, &id) != 2 || pid != static_cast<long>(getpid())) {
    return false;
  }
  *lmid = static_cast<Lmid_t>(id);
  return true;
}

void PublishNamespace(void* runtime) {
  Lmid_t lmid = 0;
  if (dlinfo(runtime, RTLD_DI_LMID, &lmid) != 0) return;
  char value[64];
  snprintf(value, sizeof value, "%ld:%ld", static_cast<long>(getpid()), static_cast<long>(lmid));
  setenv(kNamespaceVariable, value, 1);
}

}  // namespace

void* LoadPrivateRuntime(const char* override_env, const char* file_name, const void* anchor,
                         const char* what, bool shared) {
  LeaveSingleThreadedMode();
  char path[4096];
  RuntimePath(override_env, file_name, anchor, path, sizeof path);
  struct sigaction saved[kSignalCount];
  for (size_t i = 0; i < kSignalCount; ++i) sigaction(kProgramSignals[i], nullptr, &saved[i]);
  const char* plain = getenv("RGPU_NO_DLMOPEN");
  const bool use_dlopen = plain != nullptr && *plain == '1';
  // Joined only where the runtime already is (RTLD_NOLOAD): a stale or foreign value (a process
  // that exec'ed keeps its pid) never loads it into some other namespace.
  Lmid_t lmid = LM_ID_NEWLM;
  void* runtime = nullptr;
  if (use_dlopen) {
    runtime = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  } else {
    if (shared && SharedNamespace(&lmid)) {
      runtime = dlmopen(lmid, path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    }
    if (runtime == nullptr) {
      // UCX loads every transport module it finds (InfiniBand, RDMA-CM, CMA, ...) when the
      // runtime makes its first context, though rgpu's transports use only UCX's built-in tcp,
      // posix and self: 5-10 ms of every program's start. UCX reads its module list once, when
      // its library is loaded with the runtime, so the list is empty for that moment only, and
      // only when the program's environment does not set one (the program and its children never
      // see it; its own UCX, if any, is another copy in another namespace).
      const bool limit_modules = getenv("UCX_MODULES") == nullptr;
      if (limit_modules) setenv("UCX_MODULES", "", 1);
      runtime = dlmopen(LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL);
      if (limit_modules) unsetenv("UCX_MODULES");
      if (runtime != nullptr && shared) PublishNamespace(runtime);
    }
  }
  for (size_t i = 0; i < kSignalCount; ++i) sigaction(kProgramSignals[i], &saved[i], nullptr);
  if (runtime == nullptr) {
    // Said even when logging is off: without the runtime no GPU call can work.
    fprintf(stderr, "rgpu: cannot load the %s %s: %s\n", what, path, dlerror());
    return nullptr;
  }
  // Threads on which the runtime runs the program's code (host functions) must be the
  // program's: the runtime starts them through this process's C library, not its own copy.
  using Setter = void (*)(int (*)(void* (*)(void*), void*));
  if (auto set = reinterpret_cast<Setter>(dlsym(runtime, "rgpu_client_set_thread_starter"))) {
    set(&StartProgramThread);
  }
  return runtime;
}

}  // namespace rgpu::interpose
