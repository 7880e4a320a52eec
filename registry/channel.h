// Client side of the registry's gRPC service, shared by rgpu-server's agent and the rgpu CLI.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "proto/registry.grpc.pb.h"

namespace rgpu::registry {

// A channel to the registry at `address` (HOST:PORT). With `tls_ca_path` the channel uses TLS
// and trusts that CA certificate (PEM); without it, plaintext.
Status OpenChannel(const std::string& address, const std::string& tls_ca_path,
                   std::shared_ptr<grpc::Channel>* channel);

// A gRPC status as an rgpu::Status ("registry at ADDRESS: message" for connection failures).
Status FromGrpc(const grpc::Status& status, const std::string& address);

}  // namespace rgpu::registry
