// Peer access between contexts on different devices (cuDeviceCanAccessPeer,
// cuDeviceGetP2PAttribute, cuCtxEnablePeerAccess, cuCtxDisablePeerAccess) and copies between the
// memory of two contexts (cuMemcpyPeer, cuMemcpyPeerAsync).
//
// All devices live in one host, so any device can reach any other's memory: once a context has
// enabled access to a peer, its kernels' global and generic accesses that miss its own address
// space are looked up in the peer's (exec_memory.cc, TranslateSlow), and its copies and memsets
// reach the peer's memory too (api_memory.cc). Access is one way, as in CUDA, and exists only
// where it was enabled: a context that has not enabled access faults on (and cannot copy) the
// peer's memory, which is what keeps tenants of rgpu-server apart. Peers are held weakly
// (AddressSpace::EnablePeer): a peer destroyed or reset is no longer reached.
#include <cuda.h>

#include <cstring>
#include <memory>
#include <vector>

#include "softgpu/api_util.h"

using namespace softgpu;

namespace {

CUresult FindContext(CUcontext handle, std::shared_ptr<Context>* out) {
  std::shared_ptr<Context> ctx = GetDriver().contexts.Find(handle);
  if (ctx == nullptr || !ctx->alive()) return CUDA_ERROR_INVALID_CONTEXT;
  *out = std::move(ctx);
  return CUDA_SUCCESS;
}

// The peer's address space, sharing the context's lifetime (what AddressSpace holds weakly).
std::shared_ptr<const AddressSpace> SpaceOf(const std::shared_ptr<Context>& ctx) {
  return std::shared_ptr<const AddressSpace>(ctx, &ctx->memory());
}

// The two contexts of a peer copy and the allocations holding its ranges, each checked against
// its own context's memory (not its peers').
struct PeerCopy {
  std::shared_ptr<Context> dst_ctx, src_ctx;
  std::shared_ptr<Allocation> dst, src;
  uint8_t* dst_host = nullptr;
  const uint8_t* src_host = nullptr;
};

CUresult ResolvePeerCopy(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                         size_t bytes, PeerCopy* out) {
  if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
  if (CUresult r = FindContext(dst_ctx, &out->dst_ctx); r != CUDA_SUCCESS) return r;
  if (CUresult r = FindContext(src_ctx, &out->src_ctx); r != CUDA_SUCCESS) return r;
  if (CUresult r = out->dst_ctx->sticky_error(); r != CUDA_SUCCESS) return r;
  if (CUresult r = out->src_ctx->sticky_error(); r != CUDA_SUCCESS) return r;
  if (bytes == 0) return CUDA_SUCCESS;
  out->dst = out->dst_ctx->memory().Find(dst, bytes);
  out->src = out->src_ctx->memory().Find(src, bytes);
  if (out->dst == nullptr || out->src == nullptr) return CUDA_ERROR_INVALID_VALUE;
  out->dst_host = out->dst->host + (dst - out->dst->base);
  out->src_host = out->src->host + (src - out->src->base);
  return CUDA_SUCCESS;
}

}  // namespace

SOFTGPU_EXPORT CUresult CUDAAPI cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev,
                                                      CUdevice peerDev) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (FindDevice(dev) == nullptr || FindDevice(peerDev) == nullptr) {
      return CUDA_ERROR_INVALID_DEVICE;
    }
    if (canAccessPeer == nullptr) return CUDA_ERROR_INVALID_VALUE;
    // A device is not its own peer (the driver answers 0); any two distinct devices are.
    *canAccessPeer = dev != peerDev ? 1 : 0;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuDeviceGetP2PAttribute(int* value, CUdevice_P2PAttribute attrib,
                                                        CUdevice srcDevice, CUdevice dstDevice) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (FindDevice(srcDevice) == nullptr || FindDevice(dstDevice) == nullptr ||
        srcDevice == dstDevice) {
      return CUDA_ERROR_INVALID_DEVICE;
    }
    if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    switch (attrib) {
      case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK:
        *value = 0;
        break;
      case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
        *value = 1;
        break;
      case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
        // Kernel atomics are host atomics on the shared bytes: atomic across devices too.
        *value = 1;
        break;
      case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED:
        // Texture and surface objects are looked up in the launching context only.
        *value = 0;
        break;
      case CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED:
        *value = 0;  // all of them are
        break;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<Context> peer;
    if (CUresult r = FindContext(peerContext, &peer); r != CUDA_SUCCESS) return r;
    if (peer == ctx) return CUDA_ERROR_INVALID_CONTEXT;  // as documented for the current context
    // Contexts on one device do not peer (cuDeviceCanAccessPeer answers 0 there).
    if (peer->device() == ctx->device()) return CUDA_ERROR_INVALID_DEVICE;
    switch (ctx->memory().EnablePeer(SpaceOf(peer))) {
      case AddressSpace::PeerResult::kOk:
        return CUDA_SUCCESS;
      case AddressSpace::PeerResult::kAlreadyEnabled:
        return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
      default:
        return CUDA_ERROR_UNKNOWN;
    }
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peerContext) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    std::shared_ptr<Context> peer;
    if (CUresult r = FindContext(peerContext, &peer); r != CUDA_SUCCESS) return r;
    // Work issued before this call ran with access; let it finish, so that exactly the work
    // issued afterwards runs without (as cuMemFree waits before memory goes).
    ctx->WaitForAllStreams();
    if (ctx->memory().DisablePeer(&peer->memory()) != AddressSpace::PeerResult::kOk) {
      return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    }
    return CUDA_SUCCESS;
  });
}

// Copies between memory of two contexts (any devices; peer access is not needed, as in CUDA).
// Ordering: like cuMemcpyDtoD in both contexts at once: it runs on the calling thread after all
// work that a legacy-default-stream operation issued now in either context would follow (each
// context's default stream and blocking streams), and returns once the bytes are copied.
SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext,
                                             CUdeviceptr srcDevice, CUcontext srcContext,
                                             size_t ByteCount) {
  return Guard([&] {
    PeerCopy c;
    if (CUresult r = ResolvePeerCopy(dstDevice, dstContext, srcDevice, srcContext, ByteCount, &c);
        r != CUDA_SUCCESS || ByteCount == 0) {
      return r;
    }
    c.dst_ctx->WaitForDefaultOrder();
    if (c.src_ctx != c.dst_ctx) c.src_ctx->WaitForDefaultOrder();
    if (CUresult r = c.dst_ctx->sticky_error(); r != CUDA_SUCCESS) return r;
    if (CUresult r = c.src_ctx->sticky_error(); r != CUDA_SUCCESS) return r;
    memmove(c.dst_host, c.src_host, ByteCount);
    c.dst_ctx->FlushPrintf();
    if (c.src_ctx != c.dst_ctx) c.src_ctx->FlushPrintf();
    return CUDA_SUCCESS;
  });
}

// The asynchronous form runs on `hStream`: a stream of either context, or NULL (also
// CU_STREAM_LEGACY / CU_STREAM_PER_THREAD) for the current context's legacy default stream. It
// follows that stream's order (with its context's legacy default-stream semantics) and, in each
// of the two contexts that is not the stream's, the work issued before this call that a
// legacy-default-stream operation would follow there (its default stream and blocking streams;
// not its non-blocking streams, which need an event, as in CUDA). So the copy never reads the
// source before the source context's earlier default-order work that writes it, nor writes the
// destination under such work. Work issued later in the other context does not wait for the
// copy: order that with an event recorded after it.
SOFTGPU_EXPORT CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
                                                  CUdeviceptr srcDevice, CUcontext srcContext,
                                                  size_t ByteCount, CUstream hStream) {
  return Guard([&] {
    PeerCopy c;
    if (CUresult r = ResolvePeerCopy(dstDevice, dstContext, srcDevice, srcContext, ByteCount, &c);
        r != CUDA_SUCCESS) {
      return r;
    }
    std::shared_ptr<Context> runner;  // the context whose stream runs the copy
    std::shared_ptr<Stream> s;
    if (hStream == nullptr || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD) {
      if (CUresult r = UsableContext(&runner); r != CUDA_SUCCESS) return r;
      s = runner->default_stream();
    } else {
      s = GetDriver().streams.Find(hStream);
      if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
      if (s->context() == c.dst_ctx.get()) {
        runner = c.dst_ctx;
      } else if (s->context() == c.src_ctx.get()) {
        runner = c.src_ctx;
      } else {
        return CUDA_ERROR_INVALID_HANDLE;
      }
    }
    if (ByteCount == 0) return CUDA_SUCCESS;
    std::vector<Dependency> deps;
    for (const std::shared_ptr<Context>& other : {c.dst_ctx, c.src_ctx}) {
      if (other == runner || (other == c.src_ctx && c.src_ctx == c.dst_ctx)) continue;
      for (Dependency& d : other->DefaultOrder()) deps.push_back(std::move(d));
    }
    // The allocations ride along: the bytes stay valid even if a context goes before the copy
    // runs (it then copies to or from memory nobody reaches any more).
    runner->Enqueue(
        s,
        [dst = c.dst, src = c.src, d = c.dst_host, h = c.src_host, n = ByteCount] {
          memmove(d, h, n);
        },
        std::move(deps));
    return CUDA_SUCCESS;
  });
}
