// SessionLimits: bounds on what one session may make the server hold, beyond the device memory
// its tenant's quota covers: the size of a module image (and of what a fat binary's entries
// expand to), and the number of each kind of handle. A call past a bound fails with
// CUDA_ERROR_OUT_OF_MEMORY (modules: CUDA_ERROR_INVALID_IMAGE for an image too large) and a
// detail naming the bound; the session goes on.
#pragma once

#include <cstdint>

namespace rgpu::server {

struct SessionLimits {
  uint64_t max_module_bytes = uint64_t{256} << 20;  // rgpu-server --max-module-mib
  uint32_t max_contexts = 16;
  uint32_t max_modules = 1024;
  uint32_t max_functions = 1u << 16;
  uint32_t max_streams = 4096;
  uint32_t max_events = 1u << 16;
  uint32_t max_allocations = 1u << 20;  // pool allocations and their free blocks included
  uint32_t max_pools = 256;
  uint32_t max_arrays = 1u << 16;
  uint32_t max_samplers = 1u << 16;     // texture and surface objects together
  uint32_t max_links = 64;              // JIT link states
  uint32_t max_vmm_objects = 1u << 14;  // physical allocations, reservations, mappings each
  uint32_t max_graphs = 4096;           // graphs recorded on the server
  uint64_t max_graph_bytes = uint64_t{64} << 20;  // what they hold, all together
  // Pinned host memory for staging asynchronous copies to busy streams, all of a session's
  // contexts together (server/staging_buffers.h); rgpu-server --max-staging-mib. 0: never
  // staged.
  uint64_t max_staging_bytes = uint64_t{64} << 20;
  // A copy between servers (server/session_peer.cc): how long the other server has to answer;
  // a copy whose peer did not prove its ticket fails only once this much time has passed since
  // it began, whatever was (or was not) at the URL, so that failures do not tell a closed port
  // from a silent one.
  int peer_timeout_ms = 30000;
};

}  // namespace rgpu::server
