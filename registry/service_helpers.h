// Small helpers the registry service's files share (registry/service.cc, lease_hand_over.cc).
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <string>

#include "common/status.h"
#include "registry/placement.h"
#include "registry/store.h"

namespace rgpu::registry {

// A Status as the gRPC status an RPC answers.
grpc::Status ToGrpc(const Status& s);
// Names of tenants, providers and servers: 1..64 characters of [A-Za-z0-9._-].
bool ValidName(const std::string& name);
// A GPU's registry id: "SERVER/INDEX".
std::string GpuId(const std::string& server, uint32_t index);
// What a lease holds of its GPU, as a placement request.
PlacementAsk LeaseAsk(const LeaseRow& lease);

}  // namespace rgpu::registry
