// Session's handlers for contexts and their limits (proto/calls.def: Contexts, context limits).
#include <algorithm>

#include "server/checked_size.h"
#include "server/device_catalog.h"
#include "server/require_fn.h"
#include "server/session.h"

namespace rgpu::server {

CUresult Session::HandleCtxCreate(CallState& cs, const CtxCreateIn& in,
                                  calls::CtxCreate::Results* out) {
  if (CUresult r = RoomFor(cs, contexts_.size(), limits_.max_contexts, "contexts");
      r != CUDA_SUCCESS) {
    return r;
  }
  return CreateContext(in.device, false, &out->ctx);
}

CUresult Session::HandleCtxDestroy(CallState& cs, const CtxDestroyIn& in,
                                   calls::CtxDestroy::Results*) {
  if (in.ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
  DestroyContext(in.ctx.id);
  return CUDA_SUCCESS;
}

CUresult Session::HandleCtxSynchronize(CallState& cs, const CtxSynchronizeIn&,
                                       calls::CtxSynchronize::Results*) {
  // The context's work has ended when its default stream's and every stream's of it has.
  if (drv_.cuStreamQuery != nullptr && HandOff(cs, [&] {
        CUresult q = drv_.cuStreamQuery(nullptr);
        if (q == CUDA_SUCCESS && DrainingStreamsBusy(cs.ctx_id)) q = CUDA_ERROR_NOT_READY;
        for (const auto& [id, stream] : streams_.records()) {
          if (q != CUDA_SUCCESS) break;
          if (stream.ctx == cs.ctx_id) q = drv_.cuStreamQuery(stream.stream);
        }
        return q;
      })) {
    return CUDA_SUCCESS;  // the client waits on a lane
  }
  const CUresult r = drv_.cuCtxSynchronize();
  if (r == CUDA_SUCCESS) TrimPoolsAfterSync();
  return r;
}

// Every earlier call of this session has been served once this runs: nothing else to do.
CUresult Session::HandleBarrier(CallState&, const BarrierIn&, calls::Barrier::Results*) {
  return CUDA_SUCCESS;
}

CUresult Session::HandlePrimaryCtxRetain(CallState& cs, const PrimaryCtxRetainIn& in,
                                         calls::PrimaryCtxRetain::Results* out) {
  auto it = primary_by_device_.find(in.device);
  uint64_t id = 0;
  if (it != primary_by_device_.end()) {
    id = it->second;
    if (in.id != 0 && in.id != id) {
      cs.detail = "the device's primary context has another id";
      return CUDA_ERROR_INVALID_VALUE;
    }
  } else {
    if (in.id != 0 && (in.id < calls::kFirstClientId || in.id >= calls::kClientIdLimit ||
                       contexts_.Find(in.id) != nullptr)) {
      cs.detail = "a context id the client chooses must be in [2^32, 2^40) and free";
      return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult r = RoomFor(cs, contexts_.size(), limits_.max_contexts, "contexts");
    if (r == CUDA_SUCCESS) r = CreateContext(in.device, true, &id, in.id);
    if (r != CUDA_SUCCESS) {
      if (in.id != 0) RememberUnmadeContext(in.id, r);
      return r;
    }
    primary_by_device_[in.device] = id;
  }
  contexts_.Find(id)->primary_refs++;
  out->ctx = id;
  return CUDA_SUCCESS;
}

void Session::RememberUnmadeContext(uint64_t id, CUresult r) {
  if (unmade_contexts_.emplace(id, r).second) unmade_order_.push_back(id);
  while (unmade_order_.size() > kMaxUnmadeContexts) {
    unmade_contexts_.erase(unmade_order_.front());
    unmade_order_.pop_front();
  }
}

CUresult Session::HandlePrimaryCtxRelease(CallState&, const PrimaryCtxReleaseIn& in,
                                          calls::PrimaryCtxRelease::Results*) {
  auto it = primary_by_device_.find(in.device);
  if (it == primary_by_device_.end()) return CUDA_ERROR_INVALID_CONTEXT;
  ContextRecord* rec = contexts_.Find(it->second);
  if (--rec->primary_refs <= 0) DestroyContext(it->second);
  return CUDA_SUCCESS;
}

CUresult Session::HandlePrimaryCtxReset(CallState&, const PrimaryCtxResetIn& in,
                                        calls::PrimaryCtxReset::Results*) {
  auto it = primary_by_device_.find(in.device);
  if (it != primary_by_device_.end()) DestroyContext(it->second);
  return CUDA_SUCCESS;
}

CUresult Session::HandleCtxGetLimit(CallState& cs, const CtxGetLimitIn& in,
                                    calls::CtxGetLimit::Results* out) {
  REQUIRE_FN(cuCtxGetLimit);
  size_t value = 0;
  CUresult r = drv_.cuCtxGetLimit(&value, static_cast<CUlimit>(in.limit));
  out->value = value;
  return r;
}

CUresult Session::HandleCtxSetLimit(CallState& cs, const CtxSetLimitIn& in,
                                    calls::CtxSetLimit::Results*) {
  REQUIRE_FN(cuCtxSetLimit);
  const CUlimit limit = static_cast<CUlimit>(in.limit);
  int charged = -1;
  uint64_t scale = 1;  // bytes of device memory per unit of the limit
  switch (limit) {
    case CU_LIMIT_MALLOC_HEAP_SIZE:
      charged = kHeapLimit;
      break;
    case CU_LIMIT_PRINTF_FIFO_SIZE:
      charged = kPrintfLimit;
      break;
    case CU_LIMIT_STACK_SIZE: {
      // A GPU reserves the stack for every thread it can hold at once.
      charged = kStackLimit;
      const wire::DeviceInfo& info = devices_.devices()[cs.ctx->device];
      auto attribute = [&](CUdevice_attribute a) -> uint64_t {
        const int v = a < info.attributes_size() ? info.attributes(a) : 0;
        return static_cast<uint64_t>(std::max(1, v));
      };
      scale = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) *
              attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
      break;
    }
    default:
      return drv_.cuCtxSetLimit(limit, in.value);
  }
  // Charged beyond what the context held at creation, which no tenant pays for.
  uint64_t bytes = 0, default_bytes = 0;
  if (!CheckedMul(in.value, scale, &bytes) ||
      !CheckedMul(cs.ctx->limit_default[charged], scale, &default_bytes)) {
    cs.detail = "limit too large";
    return CUDA_ERROR_INVALID_VALUE;
  }
  const uint64_t charge = bytes > default_bytes ? bytes - default_bytes : 0;
  const uint64_t before = cs.ctx->limit_charge[charged];
  if (charge > before && !Charge(cs, cs.ctx->device, charge - before, "the context limit")) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult r;
  {
    auto change = DeviceMemoryChange();
    r = drv_.cuCtxSetLimit(limit, in.value);
  }
  if (r != CUDA_SUCCESS) {
    if (charge > before) Uncharge(cs.ctx->device, charge - before);
    return r;
  }
  if (charge < before) Uncharge(cs.ctx->device, before - charge);
  cs.ctx->limit_charge[charged] = charge;
  return CUDA_SUCCESS;
}

CUresult Session::HandleCtxGetStreamPriorityRange(CallState& cs, const CtxGetStreamPriorityRangeIn&,
                                                  calls::CtxGetStreamPriorityRange::Results* out) {
  REQUIRE_FN(cuCtxGetStreamPriorityRange);
  int least = 0, greatest = 0;
  CUresult r = drv_.cuCtxGetStreamPriorityRange(&least, &greatest);
  out->least = least;
  out->greatest = greatest;
  return r;
}

// Peer access between devices of this server: a context of the session reaches memory of another
// of its contexts (on another device) once access is enabled; the backend decides which pairs can.
CUresult Session::HandleDeviceCanAccessPeer(CallState&, const DeviceCanAccessPeerIn& in,
                                            calls::DeviceCanAccessPeer::Results* out) {
  out->can_access = 0;
  if (in.device == in.peer || drv_.cuDeviceCanAccessPeer == nullptr ||
      drv_.cuCtxEnablePeerAccess == nullptr) {
    return CUDA_SUCCESS;
  }
  CUdevice dev = 0, peer = 0;
  CUresult r = drv_.cuDeviceGet(&dev, in.device);
  if (r == CUDA_SUCCESS) r = drv_.cuDeviceGet(&peer, in.peer);
  int can = 0;
  if (r == CUDA_SUCCESS) r = drv_.cuDeviceCanAccessPeer(&can, dev, peer);
  if (r == CUDA_SUCCESS) out->can_access = can != 0 ? 1 : 0;
  return r;
}

CUresult Session::HandleDeviceGetP2PAttribute(CallState& cs, const DeviceGetP2PAttributeIn& in,
                                              calls::DeviceGetP2PAttribute::Results* out) {
  if (in.device == in.peer) return CUDA_ERROR_INVALID_DEVICE;
  out->value = 0;
  if (drv_.cuDeviceGetP2PAttribute == nullptr || drv_.cuCtxEnablePeerAccess == nullptr) {
    return CUDA_SUCCESS;  // no peer access on this backend: every link attribute is 0
  }
  CUdevice dev = 0, peer = 0;
  CUresult r = drv_.cuDeviceGet(&dev, in.device);
  if (r == CUDA_SUCCESS) r = drv_.cuDeviceGet(&peer, in.peer);
  int value = 0;
  if (r == CUDA_SUCCESS) {
    r = drv_.cuDeviceGetP2PAttribute(&value, static_cast<CUdevice_P2PAttribute>(in.attribute), dev,
                                     peer);
  }
  if (r == CUDA_SUCCESS) out->value = value;
  return r;
}

CUresult Session::HandleCtxEnablePeerAccess(CallState& cs, const CtxEnablePeerAccessIn& in,
                                            calls::CtxEnablePeerAccess::Results*) {
  REQUIRE_FN(cuCtxEnablePeerAccess);
  if (in.peer.id == cs.ctx_id || in.peer->device == cs.ctx->device) {
    cs.detail = "peer access is between contexts of two devices";
    return CUDA_ERROR_INVALID_DEVICE;
  }
  const CUresult r = drv_.cuCtxEnablePeerAccess(in.peer->context, 0);
  if (r == CUDA_SUCCESS) cs.ctx->peer_access = true;  // such a session cannot move
  return r;
}

CUresult Session::HandleCtxDisablePeerAccess(CallState& cs, const CtxDisablePeerAccessIn& in,
                                             calls::CtxDisablePeerAccess::Results*) {
  REQUIRE_FN(cuCtxDisablePeerAccess);
  return drv_.cuCtxDisablePeerAccess(in.peer->context);
}

}  // namespace rgpu::server
