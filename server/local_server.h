// librgpu-local.so: rgpu-server inside the tenant's own process, on the software GPU, for
// RGPU_SERVER=local (and lib/softgpu-local/libcuda.so.1, whose default that is). The client
// runtime loads it with dlopen into its own link namespace and talks to it over the in-process
// transport (transport/local), so a program runs on softgpu with every entry point, check and
// behaviour of rgpu's driver face, and no network, no server process and no token.
//
// The server is the same Server as rgpu-server's (backend softgpu, libsoftgpu-cuda.so beside
// this library), without keepalives, metrics or registry, and with no bound on a kernel's time
// (a local GPU has none); RGPU_SOFTGPU_* configure the software GPU as usual.
#pragma once

#include <cstddef>

#include "transport/channel.h"

// Starts the in-process server on the first call (later calls reuse it; thread-safe), then
// connects a channel to it with `options`. Returns 0 and sets *out (the caller owns the channel:
// deleting it ends the session), or -1 with the reason in `error` (NUL-terminated, at most
// error_size bytes). Both sides of the call must be built from the same sources and compiler
// (the channel is a C++ object), as rgpu's client runtime and this library are.
extern "C" int rgpu_local_connect(const rgpu::ChannelOptions* options, rgpu::Channel** out,
                                  char* error, size_t error_size);
