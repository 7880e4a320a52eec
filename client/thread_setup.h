// Per-thread set-up of the client runtime's private link namespace, for the faces' runtimes too.
#pragma once

// Sets up the calling thread's ctype tables (isspace, toupper, ...) in this link namespace's
// libc, once per thread. glibc does that only in the libc that started a thread and for the
// thread that loads a namespace, so a program thread that reaches the runtime later would crash
// in the first library call that needs them (UCX's configuration parser does). Cheap after the
// first call on a thread; any thread.
extern "C" __attribute__((visibility("default"))) void rgpu_client_prepare_thread();
