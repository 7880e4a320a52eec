// Peer access between devices. rgpu does not yet let one device of a server read another's
// memory, and devices of different servers never can, so every pair answers that it cannot:
// cuDeviceCanAccessPeer gives 0 and the link attributes 0 (programs then stage copies through
// the host, as on a machine without peer links), and enabling peer access is refused with
// CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, naming itself at warn level.
#include "client/impl.h"

using rgpu::client::ClientState;

namespace {

CUresult CheckPair(CUdevice a, CUdevice b) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  const int n = ClientState::Get().device_count();
  if (a < 0 || a >= n || b < 0 || b >= n) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

}  // namespace

RGPU_IMPL(cuDeviceCanAccessPeer)(int* can_access, CUdevice dev, CUdevice peer) {
  if (can_access == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CheckPair(dev, peer);
  if (r != CUDA_SUCCESS) return r;
  *can_access = 0;
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
      *value = 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

RGPU_IMPL(cuCtxEnablePeerAccess)(CUcontext peer, unsigned int flags) {
  CUctx_st* ctx;
  CUresult r = rgpu::client::RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (rgpu::client::CheckContext(peer) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
  RGPU_LOG_WARN("cuCtxEnablePeerAccess: peer access between devices is not supported yet");
  return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
}

RGPU_IMPL(cuCtxDisablePeerAccess)(CUcontext peer) {
  CUctx_st* ctx;
  CUresult r = rgpu::client::RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (rgpu::client::CheckContext(peer) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;  // it never was
}
