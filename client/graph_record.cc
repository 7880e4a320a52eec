#include "client/graph_record.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "client/impl.h"
#include "client/managed_memory.h"

namespace rgpu::client {
namespace {

namespace calls = rgpu::calls;

// Splits the nodes into runs: each maximal stretch of recordable nodes is one run; every other
// node is a run of its own that is never recorded.
void MakeRuns(CUgraphExec_st* exec) {
  exec->runs.clear();
  for (size_t i = 0; i < exec->nodes.size(); ++i) {
    const bool recordable = exec->nodes[i].recordable;
    if (recordable && !exec->runs.empty() && !exec->runs.back().refused &&
        exec->runs.back().first + exec->runs.back().count == i) {
      ++exec->runs.back().count;
      continue;
    }
    CUgraphExec_st::ServerRun run;
    run.first = i;
    run.count = 1;
    run.refused = !recordable;
    exec->runs.push_back(std::move(run));
  }
  exec->runs_made = true;
}

CUresult ReplayNodes(const CUgraphExec_st& exec, size_t first, size_t count, CUstream stream) {
  for (size_t i = first; i < first + count; ++i) {
    if (CUresult r = exec.nodes[i].replay(stream); r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

// Records `run` on `stream` and has the server keep it: its graph id, or 0 when the run cannot
// be kept (then it is marked refused and nothing was sent). *r is an error of the replay itself.
uint64_t Record(const CUgraphExec_st& exec, CUgraphExec_st::ServerRun& run, CUstream stream,
                CUresult* r) {
  PostRecording recording;
  Connection::RecordPosts(&recording);
  *r = ReplayNodes(exec, run.first, run.count, stream);
  Connection::RecordPosts(nullptr);
  if (*r != CUDA_SUCCESS || recording.batch.calls_size() == 0) return 0;
  if (recording.mixed) {  // work on devices of two servers: no one server can keep it
    run.refused = true;
    return 0;
  }
  const std::string batch = recording.batch.SerializeAsString();
  const uint32_t batch_bytes = static_cast<uint32_t>(batch.size());
  std::string payload(sizeof batch_bytes, '\0');
  memcpy(payload.data(), &batch_bytes, sizeof batch_bytes);
  payload += batch;
  payload += recording.payloads;
  calls::GraphRecord::Results got;
  const CUresult kept = Server().CallOn<calls::GraphRecord>(recording.server, 0, {}, &got,
                                                            payload.data(), payload.size());
  if (kept != CUDA_SUCCESS) {
    // Not for the server to keep (an operation it does not hold in graphs, or past its bounds):
    // this run goes node by node.
    RGPU_LOG_DEBUG("graph run of %zu nodes stays with the client (%d)", run.count, kept);
    run.refused = true;
    return 0;
  }
  return got.graph;
}

}  // namespace

// RGPU_SERVER_GRAPHS=0 replays every node from the client (for comparison and diagnosis).
bool ServerGraphsEnabled() {
  static const bool enabled = [] {
    const char* v = getenv("RGPU_SERVER_GRAPHS");
    return v == nullptr || strcmp(v, "0") != 0;
  }();
  return enabled;
}

CUresult LaunchExec(CUgraphExec_st* exec, CUstream stream) {
  if (CUresult r = BeforeDeviceWork(); r != CUDA_SUCCESS) return r;
  CUctx_st* ctx = nullptr;
  uint64_t remote_stream = 0;
  if (CUresult r = ResolveStream(stream, &ctx, &remote_stream); r != CUDA_SUCCESS) return r;
  // Server ids are never reused: a context made again (a reset) records again.
  const auto key = std::make_pair(ctx->remote, remote_stream);
  std::lock_guard<std::mutex> lock(exec->runs_mu);
  if (std::find(exec->launched_on.begin(), exec->launched_on.end(), stream) ==
      exec->launched_on.end()) {
    exec->launched_on.push_back(stream);
  }
  if (!exec->runs_made) MakeRuns(exec);
  for (CUgraphExec_st::ServerRun& run : exec->runs) {
    // Work held behind a host function on the stream (one of this graph's, too) is replayed
    // later by the client; a run launched on the server now would overtake it.
    if (run.refused || !ServerGraphsEnabled() || StreamHeld(stream)) {
      if (CUresult r = ReplayNodes(*exec, run.first, run.count, stream); r != CUDA_SUCCESS) {
        return r;
      }
      continue;
    }
    auto it = run.recorded.find(key);
    uint64_t graph = it != run.recorded.end() ? it->second : 0;
    if (graph == 0) {
      CUresult r = CUDA_SUCCESS;
      graph = Record(*exec, run, stream, &r);
      if (r != CUDA_SUCCESS) return r;
      if (graph == 0) {
        if (CUresult again = ReplayNodes(*exec, run.first, run.count, stream);
            again != CUDA_SUCCESS) {
          return again;
        }
        continue;
      }
      run.recorded[key] = graph;
    }
    if (CUresult r = Server().Post<calls::GraphLaunch>(0, {.graph = graph}); r != CUDA_SUCCESS) {
      return r;
    }
  }
  return CUDA_SUCCESS;
}

void ForgetServerGraphs(CUgraphExec_st* exec) {
  std::lock_guard<std::mutex> lock(exec->runs_mu);
  for (CUgraphExec_st::ServerRun& run : exec->runs) {
    for (const auto& [key, graph] : run.recorded) {
      Server().Post<calls::GraphDestroy>(0, {.graph = graph});
    }
  }
  exec->runs.clear();
  exec->runs_made = false;
}

}  // namespace rgpu::client
