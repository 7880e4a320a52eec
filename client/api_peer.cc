// Peer access between devices: which pairs of one server's devices can reach each other and their
// link attributes are the backend's (asked once per pair); devices of two servers never can (no
// kernel reaches another server's memory). Enabling access lets kernels of the current context use
// memory of a context on another device; cuMemcpyPeer copies between two contexts (so do
// unified-address copies whose ends lie in different contexts, client/api_memory.cc): on one
// server by the server, between two servers through this process (CopyAcrossServers).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "client/impl.h"
#include "client/sync_memops.h"
#include "client/managed_memory.h"
#include "client/memory_map.h"

using rgpu::client::ClientState;
using rgpu::client::Connection;
using rgpu::client::Server;
using rgpu::client::ServerSet;
namespace calls = rgpu::calls;

namespace {

CUresult CheckPair(CUdevice a, CUdevice b) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  const int n = ClientState::Get().device_count();
  if (a < 0 || a >= n || b < 0 || b >= n) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

// The backend's answers, by (device, peer) and by (attribute, device, peer): they never change.
struct Answers {
  std::mutex mu;
  std::map<std::pair<CUdevice, CUdevice>, int> can_access;        // GUARDED_BY(mu)
  std::map<std::tuple<int, CUdevice, CUdevice>, int> attributes;  // GUARDED_BY(mu)
};

Answers& State() {
  static Answers* answers = new Answers;  // never destroyed: used until the process ends
  return *answers;
}

// A context of the program to name in a peer call: live and active.
CUresult CheckPeer(CUcontext peer) {
  return rgpu::client::CheckContext(peer) == CUDA_SUCCESS ? CUDA_SUCCESS
                                                          : CUDA_ERROR_INVALID_CONTEXT;
}

// True when devices `a` and `b` are on one server.
bool SameServer(CUdevice a, CUdevice b) {
  const ServerSet& set = ClientState::Get().servers();
  return set.device(a) != nullptr && set.device(b) != nullptr &&
         set.device(a)->server == set.device(b)->server;
}

// Host staging for copies between servers: at most this much at a time.
constexpr size_t kRelayChunk = size_t{8} << 20;

// A copy between devices of two servers, server to server (server/session_peer.cc): the server
// of the stream it is ordered on (`ctx`, `remote_stream`; a synchronous copy: the destination's
// default stream) copies once the stream reaches it, to or from the range the other server
// granted a ticket for. RGPU_PEER_COPIES=0, or a stream on a third server, makes it
// RelayAcrossServers instead. A synchronous copy has ended when this returns.
CUresult CopyBetweenServers(CUdeviceptr dst, CUctx_st* dst_ctx, CUdeviceptr src, CUctx_st* src_ctx,
                            size_t bytes, CUctx_st* ctx, uint64_t remote_stream, bool async) {
  ServerSet& set = Server();
  const int here = ServerSet::ServerOfContext(ctx);
  const bool pull = here == ServerSet::ServerOfContext(dst_ctx);  // else it pushes
  CUctx_st* other_ctx = pull ? src_ctx : dst_ctx;
  Connection& other = set.at(ServerSet::ServerOfContext(other_ctx));
  calls::PeerGrant::Results ticket;
  CUresult r = set.Call<calls::PeerGrant>(
      other_ctx->remote, {.ptr = pull ? src : dst, .bytes = bytes, .write = !pull}, &ticket);
  if (r != CUDA_SUCCESS) return r;
  const std::string& url = other.url();
  RGPU_LOG_DEBUG("copy of %zu bytes between servers: server %d %s server %d's", bytes, here,
                 pull ? "fetches from" : "sends to", ServerSet::ServerOfContext(other_ctx));
  const calls::MemcpyPeerRemote::Args a{.local = pull ? dst : src,
                                        .bytes = bytes,
                                        .stream = remote_stream,
                                        .to_peer = !pull,
                                        .peer_session = other.welcome().session_id(),
                                        .ticket0 = ticket.ticket0,
                                        .ticket1 = ticket.ticket1};
  if (async) return set.Post<calls::MemcpyPeerRemote>(ctx->remote, a, url.c_str(), url.size() + 1);
  return set.Call<calls::MemcpyPeerRemote>(ctx->remote, a, nullptr, url.c_str(), url.size() + 1);
}

// A copy between devices of two servers made through this process: the work before it in its
// stream (for a synchronous copy, in both contexts' default streams) ends first, then each chunk
// is copied out of the source synchronously and into the destination synchronously, so that
// whatever the program sends next, on any stream, comes after the copy.
CUresult RelayAcrossServers(CUdeviceptr dst, CUctx_st* dst_ctx, CUdeviceptr src, CUctx_st* src_ctx,
                            size_t bytes, CUctx_st* ctx, uint64_t remote_stream, bool async) {
  if (async) {
    if (CUresult r =
            Server().Call<calls::StreamSynchronize>(ctx->remote, {.stream = remote_stream});
        r != CUDA_SUCCESS) {
      return r;
    }
  }
  std::vector<char> staging(std::min(bytes, kRelayChunk));
  for (size_t done = 0; done < bytes; done += staging.size()) {
    const size_t n = std::min(staging.size(), bytes - done);
    size_t got = 0;
    CUresult r = Server().Call<calls::MemcpyDtoH>(
        src_ctx->remote, {.src = src + done, .bytes = n, .stream = 0, .async = false}, nullptr,
        nullptr, 0, rgpu::client::ReplyBuffer{staging.data(), n}, &got);
    if (r == CUDA_SUCCESS && got != n) r = CUDA_ERROR_UNKNOWN;
    if (r != CUDA_SUCCESS) return r;
    // Not posted: the copy has been made on the destination's server when this returns.
    calls::MemcpyHtoD::Args a{.dst = dst + done, .bytes = n, .stream = 0, .async = false};
    r = Server().Post<calls::MemcpyHtoD>(dst_ctx->remote, a, staging.data(), n);
    if (r == CUDA_SUCCESS) r = Server().Call<calls::StreamQuery>(dst_ctx->remote, {.stream = 0});
    if (r == CUDA_ERROR_NOT_READY) r = CUDA_SUCCESS;
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

// Copies `bytes` from `src` (memory of `src_ctx`) to `dst` (memory of `dst_ctx`) on `stream`.
CUresult CopyPeer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                  size_t bytes, CUstream stream, bool async) {
  if (CUresult r = CheckPeer(dst_ctx); r != CUDA_SUCCESS) return r;
  if (CUresult r = CheckPeer(src_ctx); r != CUDA_SUCCESS) return r;
  // Managed memory either side may name: the host's writes first, the host's copy given up.
  if (CUresult r = rgpu::client::BeforeDeviceWork(); r != CUDA_SUCCESS) return r;
  CUctx_st* ctx;
  uint64_t remote_stream = 0;
  if (!async) stream = nullptr;
  if (async) {
    if (CUresult r = rgpu::client::ResolveStream(stream, &ctx, &remote_stream); r != CUDA_SUCCESS) {
      return r;
    }
  } else {
    ctx = dst_ctx;  // a synchronous copy runs in the destination's context
  }
  if (CUresult r = rgpu::client::CheckDeviceRange(dst_ctx, dst, bytes); r != CUDA_SUCCESS) return r;
  if (CUresult r = rgpu::client::CheckDeviceRange(src_ctx, src, bytes); r != CUDA_SUCCESS) return r;
  if (bytes == 0) return CUDA_SUCCESS;
  if (!SameServer(dst_ctx->device, src_ctx->device)) {
    // cuMemcpyPeer is serialized with all work of both contexts (the driver's documentation):
    // what they hold ends first, and the copy has ended when this returns.
    if (!async) {
      for (CUctx_st* c : {src_ctx, dst_ctx}) {
        if (CUresult r = Server().Call<calls::CtxSynchronize>(c->remote, {}); r != CUDA_SUCCESS) {
          return r;
        }
      }
    }
    static const bool direct = [] {
      const char* v = getenv("RGPU_PEER_COPIES");
      return v == nullptr || strcmp(v, "0") != 0;
    }();
    const int here = ServerSet::ServerOfContext(ctx);
    if (direct && (here == ServerSet::ServerOfContext(dst_ctx) ||
                   here == ServerSet::ServerOfContext(src_ctx))) {
      return CopyBetweenServers(dst, dst_ctx, src, src_ctx, bytes, ctx, remote_stream, async);
    }
    return RelayAcrossServers(dst, dst_ctx, src, src_ctx, bytes, ctx, remote_stream, async);
  }
  return Server().Post<calls::MemcpyPeer>(ctx->remote, {.dst = dst,
                                                        .dst_ctx = dst_ctx->remote,
                                                        .src = src,
                                                        .src_ctx = src_ctx->remote,
                                                        .bytes = bytes,
                                                        .stream = remote_stream,
                                                        .async = async});
}

}  // namespace

namespace rgpu::client {

CUresult CopyBetweenContexts(CUdeviceptr dst, CUctx_st* dst_ctx, CUdeviceptr src, CUctx_st* src_ctx,
                             size_t bytes, CUstream stream, bool async) {
  return CopyPeer(dst, dst_ctx, src, src_ctx, bytes, stream, async);
}

}  // namespace rgpu::client

RGPU_IMPL(cuDeviceCanAccessPeer)(int* can_access, CUdevice dev, CUdevice peer) {
  if (can_access == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckPair(dev, peer);
  if (r != CUDA_SUCCESS) return r;
  if (dev == peer || !SameServer(dev, peer)) {
    *can_access = 0;
    return CUDA_SUCCESS;
  }
  Answers& a = State();
  {
    std::lock_guard<std::mutex> lock(a.mu);
    auto it = a.can_access.find({dev, peer});
    if (it != a.can_access.end()) {
      *can_access = it->second;
      return CUDA_SUCCESS;
    }
  }
  calls::DeviceCanAccessPeer::Results got;
  r = Server().Call<calls::DeviceCanAccessPeer>(0, {.device = dev, .peer = peer}, &got);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(a.mu);
  a.can_access[{dev, peer}] = got.can_access;
  *can_access = got.can_access;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuDeviceGetP2PAttribute)
(int* value, CUdevice_P2PAttribute attrib, CUdevice src, CUdevice dst) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckPair(src, dst);
  if (r != CUDA_SUCCESS) return r;
  if (src == dst) return CUDA_ERROR_INVALID_DEVICE;
  switch (attrib) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK:
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED:
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  if (!SameServer(src, dst)) {  // no link between servers' devices: every attribute is 0
    *value = 0;
    return CUDA_SUCCESS;
  }
  Answers& a = State();
  const auto key = std::make_tuple(static_cast<int>(attrib), src, dst);
  {
    std::lock_guard<std::mutex> lock(a.mu);
    auto it = a.attributes.find(key);
    if (it != a.attributes.end()) {
      *value = it->second;
      return CUDA_SUCCESS;
    }
  }
  calls::DeviceGetP2PAttribute::Results got;
  r = Server().Call<calls::DeviceGetP2PAttribute>(
      0, {.attribute = static_cast<uint32_t>(attrib), .device = src, .peer = dst}, &got);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(a.mu);
  a.attributes[key] = got.value;
  *value = got.value;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuCtxEnablePeerAccess)(CUcontext peer, unsigned int flags) {
  CUctx_st* ctx;
  CUresult r = rgpu::client::RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if ((r = CheckPeer(peer)) != CUDA_SUCCESS) return r;
  int can = 0;
  if ((r = rgpu_impl_cuDeviceCanAccessPeer(&can, ctx->device, peer->device)) != CUDA_SUCCESS) {
    return r;
  }
  if (ctx->device == peer->device) return CUDA_ERROR_INVALID_DEVICE;
  if (!can) {
    RGPU_LOG_WARN("cuCtxEnablePeerAccess: devices %d and %d cannot reach each other%s", ctx->device,
                  peer->device,
                  SameServer(ctx->device, peer->device) ? "" : " (they are on two servers)");
    return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  }
  return Server().Call<calls::CtxEnablePeerAccess>(ctx->remote, {.peer = peer->remote});
}

RGPU_IMPL(cuCtxDisablePeerAccess)(CUcontext peer) {
  CUctx_st* ctx;
  CUresult r = rgpu::client::RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if ((r = CheckPeer(peer)) != CUDA_SUCCESS) return r;
  return Server().Call<calls::CtxDisablePeerAccess>(ctx->remote, {.peer = peer->remote});
}

RGPU_IMPL(cuMemcpyPeer)
(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t bytes) {
  return rgpu::client::FinishSynchronousMemop(
      CopyPeer(dst, dst_ctx, src, src_ctx, bytes, nullptr, false), {dst, src}, dst_ctx);
}
RGPU_SAME_AS(cuMemcpyPeer_ptds, cuMemcpyPeer)

RGPU_IMPL(cuMemcpyPeerAsync)
(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t bytes,
 CUstream stream) {
  if (rgpu::client::Defer(
          stream, CU_GRAPH_NODE_TYPE_MEMCPY,
          [=](CUstream s) { return CopyPeer(dst, dst_ctx, src, src_ctx, bytes, s, true); },
          /*recordable=*/true)) {
    return CUDA_SUCCESS;
  }
  return CopyPeer(dst, dst_ctx, src, src_ctx, bytes, stream, true);
}
RGPU_PER_THREAD_SAME_AS(cuMemcpyPeerAsync_ptsz)
