// The in-process server (RGPU_SERVER=local): librgpu-local.so (server/local_server.h), loaded
// beside this runtime on first use, runs rgpu-server on the software GPU inside the tenant's
// process and hands out channels to it.
#pragma once

#include <memory>

#include "transport/channel.h"

namespace rgpu::client {

// What RGPU_SERVER says for the in-process server.
inline constexpr const char* kLocalServer = "local";

// Loads librgpu-local.so (RGPU_LOCAL_LIBRARY overrides its path; once per process), starts its
// server if it has not yet and connects a channel to it. kUnavailable with the reason when the
// library cannot be loaded or its server cannot start. Thread-safe.
Status ConnectLocalServer(const ChannelOptions& options, std::unique_ptr<Channel>* out);

}  // namespace rgpu::client
