// Peer access between the server's devices (hipDeviceEnablePeerAccess and its context form,
// hipMemcpyPeer, the P2P attributes; hipDeviceCanAccessPeer is in device.cc) and IPC between the
// program's processes (hipIpc*), on the driver's. A device's peer is its primary context, as
// HIP's runtime has it; IPC handles are the driver's 64 bytes.
#include "interpose/hip/runtime.h"

namespace h = rgpu::hip;
using h::Activate;
using h::Error;
using h::InContext;
using h::Ret;

static_assert(sizeof(h::OpaqueHandle) == sizeof(CUipcMemHandle) &&
              sizeof(h::OpaqueHandle) == sizeof(CUipcEventHandle));

namespace {

CUdeviceptr D(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

}  // namespace

HIP_API(hipDeviceEnablePeerAccess)(int peer, unsigned int flags)->Error {
  CUcontext peer_ctx;
  Error e = h::PrimaryContext(peer, &peer_ctx);
  if (e != h::hipSuccess) return Ret(e);
  return InContext([&] { return CU(cuCtxEnablePeerAccess)(peer_ctx, flags); });
}

HIP_API(hipDeviceDisablePeerAccess)(int peer)->Error {
  CUcontext peer_ctx;
  Error e = h::PrimaryContext(peer, &peer_ctx);
  if (e != h::hipSuccess) return Ret(e);
  return InContext([&] { return CU(cuCtxDisablePeerAccess)(peer_ctx); });
}

HIP_API(hipCtxEnablePeerAccess)(CUcontext peer, unsigned int flags)->Error {
  if (peer == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuCtxEnablePeerAccess)(peer, flags); });
}

HIP_API(hipCtxDisablePeerAccess)(CUcontext peer)->Error {
  if (peer == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuCtxDisablePeerAccess)(peer); });
}

HIP_API(hipDeviceGetP2PAttribute)(int* value, int attribute, int src, int dst)->Error {
  if (value == nullptr) return Ret(h::hipErrorInvalidValue);
  Error e = h::CheckDevice(src);
  if (e == h::hipSuccess) e = h::CheckDevice(dst);
  if (e != h::hipSuccess) return Ret(e);
  // hipDeviceP2PAttr counts from 0 (performance rank, access, atomics, arrays); the driver's
  // attributes from 1 in the same order.
  if (attribute < 0 || attribute > 3) return Ret(h::hipErrorInvalidValue);
  return Ret(CU(cuDeviceGetP2PAttribute)(value, static_cast<CUdevice_P2PAttribute>(attribute + 1),
                                         src, dst));
}

namespace {

Error CopyPeer(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
               CUstream stream, bool async) {
  CUcontext dst_ctx, src_ctx;
  Error e = h::PrimaryContext(dst_device, &dst_ctx);
  if (e == h::hipSuccess) e = h::PrimaryContext(src_device, &src_ctx);
  if (e == h::hipSuccess) e = Activate();
  if (e != h::hipSuccess) return e;
  return h::ToHip(async ? CU(cuMemcpyPeerAsync)(D(dst), dst_ctx, D(src), src_ctx, bytes, stream)
                        : CU(cuMemcpyPeer)(D(dst), dst_ctx, D(src), src_ctx, bytes));
}

}  // namespace

HIP_API(hipMemcpyPeer)
(void* dst, int dst_device, const void* src, int src_device, size_t bytes)->Error {
  return Ret(CopyPeer(dst, dst_device, src, src_device, bytes, nullptr, false));
}

HIP_API(hipMemcpyPeerAsync)
(void* dst, int dst_device, const void* src, int src_device, size_t bytes, CUstream stream)->Error {
  return Ret(CopyPeer(dst, dst_device, src, src_device, bytes, stream, true));
}

// IPC: each process of the program is a session of the same tenant on the server, which shares
// the memory or event. A process cannot open its own handle (hipErrorInvalidContext, as CUDA).

HIP_API(hipIpcGetMemHandle)(h::OpaqueHandle* handle, void* p)->Error {
  if (handle == nullptr || p == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext(
      [&] { return CU(cuIpcGetMemHandle)(reinterpret_cast<CUipcMemHandle*>(handle), D(p)); });
}

HIP_API(hipIpcOpenMemHandle)(void** out, h::OpaqueHandle handle, unsigned int flags)->Error {
  // HIP defines one flag, hipIpcMemLazyEnablePeerAccess, whose value is 0.
  if (out == nullptr || flags != h::kIpcMemLazyEnablePeerAccess) {
    return Ret(h::hipErrorInvalidValue);
  }
  Error e = Activate();
  if (e != h::hipSuccess) return Ret(e);
  CUipcMemHandle cu;
  static_assert(sizeof cu.reserved == sizeof handle.reserved);
  __builtin_memcpy(cu.reserved, handle.reserved, sizeof cu.reserved);
  CUdeviceptr p = 0;
  CUresult r = CU(cuIpcOpenMemHandle_v2)(&p, cu, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  *out = r == CUDA_SUCCESS ? reinterpret_cast<void*>(p) : nullptr;
  return Ret(r);
}

HIP_API(hipIpcCloseMemHandle)(void* p)->Error {
  if (p == nullptr) return Ret(h::hipErrorInvalidValue);
  return InContext([&] { return CU(cuIpcCloseMemHandle)(D(p)); });
}

HIP_API(hipIpcGetEventHandle)(h::OpaqueHandle* handle, CUevent event)->Error {
  if (handle == nullptr) return Ret(h::hipErrorInvalidValue);
  if (event == nullptr) return Ret(h::hipErrorInvalidHandle);
  return InContext(
      [&] { return CU(cuIpcGetEventHandle)(reinterpret_cast<CUipcEventHandle*>(handle), event); });
}

HIP_API(hipIpcOpenEventHandle)(CUevent* event, h::OpaqueHandle handle)->Error {
  if (event == nullptr) return Ret(h::hipErrorInvalidValue);
  CUipcEventHandle cu;
  static_assert(sizeof cu.reserved == sizeof handle.reserved);
  __builtin_memcpy(cu.reserved, handle.reserved, sizeof cu.reserved);
  return InContext([&] { return CU(cuIpcOpenEventHandle)(event, cu); });
}
