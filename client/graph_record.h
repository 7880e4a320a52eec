// Graphs kept by the server: an executable graph's runs of consecutive device-only nodes (kernels,
// memsets, device-to-device copies, event records and waits) are recorded once per launch stream
// as the calls they post (Connection::RecordPosts) and sent to the server (GraphRecord); every
// later launch of the run is one posted GraphLaunch, whatever its node count. Nodes that involve
// the host (host functions, copies from or to host memory, graph memory, conditional nodes) run
// from the client between those runs, as before. A run the server refuses (an operation it does
// not keep in graphs) is replayed node by node from then on.
#pragma once

#include <cuda.h>

#include "client/objects.h"

namespace rgpu::client {

// Launches `exec` on `stream` (not capturing).
CUresult LaunchExec(CUgraphExec_st* exec, CUstream stream);

// Forgets the server's recordings of `exec`'s runs (its nodes changed, or it is destroyed).
void ForgetServerGraphs(CUgraphExec_st* exec);

}  // namespace rgpu::client
