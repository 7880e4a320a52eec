// What the exported faces (librgpu-cuda.so, librgpu-hip.so) share: finding and loading their
// runtime library into a private link namespace, and the quiet-by-default logging switch.
// libc only: the faces must not bring any other dependency into the tenant's process.
#pragma once

namespace rgpu::interpose {

// True when RGPU_LOG asks for messages (set, and not "off" or "0").
bool LoggingEnabled();

// Loads the runtime library `file_name` that lives beside the library containing `anchor` (or the
// path in the environment variable `override_env`, when set) with dlmopen(LM_ID_NEWLM), so that
// its dependencies (protobuf, UCX, libstdc++) stay out of the program's namespace
// (RGPU_NO_DLMOPEN=1: plain dlopen, for debugging). The handlers of the signals UCX takes over
// when it loads (SIGILL, SIGSEGV, SIGBUS, SIGFPE) are put back: they belong to the program.
// A runtime exporting rgpu_client_set_thread_starter is given a way to start threads of the
// program's own C library (for running the program's callbacks).
// `shared`: faces that load the same runtime this way (the CUDA and NVML faces) share one
// namespace, and so one runtime and one server session, in a process: the first says where it
// is in RGPU_RUNTIME_NAMESPACE ("pid:namespace", ignored by a child that inherits it; joined
// only where the runtime is loaded). Two faces loading at the same moment on two threads may
// each make one (two sessions, both working).
// Returns the handle, or nullptr after saying why on stderr (`what` names the runtime there).
void* LoadPrivateRuntime(const char* override_env, const char* file_name, const void* anchor,
                         const char* what, bool shared = false);

}  // namespace rgpu::interpose
