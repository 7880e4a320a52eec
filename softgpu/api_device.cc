// Device queries and primary contexts.
#include <cuda.h>

#include <cstring>

#include "softgpu/api_util.h"

using namespace softgpu;

namespace {

CUresult GetDevice(CUdevice dev, Device** out) {
  if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
  *out = FindDevice(dev);
  return *out == nullptr ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

void CopyString(const std::string& s, char* out, int len) {
  const size_t n = std::min(s.size(), static_cast<size_t>(len - 1));
  memcpy(out, s.data(), n);
  out[n] = '\0';
}

}  // namespace

SOFTGPU_EXPORT CUresult CUDAAPI cuDeviceGetCount(int* count) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *count = static_cast<int>(GetDriver().devices.size());
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (FindDevice(ordinal) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  return Guard([&] {
    Device* d;
    if (CUresult r = GetDevice(dev, &d); r != CUDA_SUCCESS) return r;
    if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    CopyString(d->name(), name, len);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice dev) {
  return Guard([&] {
    Device* d;
    if (CUresult r = GetDevice(dev, &d); r != CUDA_SUCCESS) return r;
    if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *bytes = d->budget().total();
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib,
                                                     CUdevice dev) {
  return Guard([&] {
    Device* d;
    if (CUresult r = GetDevice(dev, &d); r != CUDA_SUCCESS) return r;
    if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return d->Attribute(attrib, pi) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  return Guard([&] {
    Device* d;
    if (CUresult r = GetDevice(dev, &d); r != CUDA_SUCCESS) return r;
    if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *uuid = d->uuid();
    return CUDA_SUCCESS;
  });
}

// The pre-CUDA-11.4 name of the same call (cuda.h maps cuDeviceGetUuid to the _v2 symbol).
extern "C" SOFTGPU_EXPORT CUresult CUDAAPI
cuDeviceGetUuid_v1(CUuuid* uuid, CUdevice dev) __asm__("cuDeviceGetUuid");
extern "C" SOFTGPU_EXPORT CUresult CUDAAPI cuDeviceGetUuid_v1(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid_v2(uuid, dev);
}

SOFTGPU_EXPORT CUresult CUDAAPI cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  return Guard([&] {
    Device* d;
    if (CUresult r = GetDevice(dev, &d); r != CUDA_SUCCESS) return r;
    if (pciBusId == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    CopyString(d->pci_bus_id(), pciBusId, len);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuDeviceGetByPCIBusId(CUdevice* dev, const char* pciBusId) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (dev == nullptr || pciBusId == nullptr) return CUDA_ERROR_INVALID_VALUE;
    for (const auto& d : GetDriver().devices) {
      if (strcasecmp(d->pci_bus_id().c_str(), pciBusId) == 0 ||
          strcasecmp(d->pci_bus_id().c_str() + 5, pciBusId) == 0) {
        *dev = d->ordinal();
        return CUDA_SUCCESS;
      }
    }
    return CUDA_ERROR_INVALID_DEVICE;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  return Guard([&] {
    Device* d;
    if (CUresult r = GetDevice(dev, &d); r != CUDA_SUCCESS) return r;
    if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(d->primary_mu);
    if (d->primary == nullptr) {
      d->primary = std::make_shared<Context>(d, d->primary_flags, /*primary=*/true);
      GetDriver().contexts.Add(d->primary);
    } else if (!d->primary->alive()) {
      d->primary->Revive();
    }
    ++d->primary_refcount;
    *pctx = reinterpret_cast<CUcontext>(d->primary.get());
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  return Guard([&] {
    Device* d;
    if (CUresult r = GetDevice(dev, &d); r != CUDA_SUCCESS) return r;
    std::lock_guard lock(d->primary_mu);
    if (d->primary == nullptr || d->primary_refcount == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (--d->primary_refcount == 0) {
      DestroyContextResources(d->primary);
      ReleasePageLockedOf(reinterpret_cast<CUcontext>(d->primary.get()));
    }
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev) {
  return Guard([&] {
    Device* d;
    if (CUresult r = GetDevice(dev, &d); r != CUDA_SUCCESS) return r;
    std::lock_guard lock(d->primary_mu);
    if (d->primary != nullptr && d->primary->alive()) {
      DestroyContextResources(d->primary);
      ReleasePageLockedOf(reinterpret_cast<CUcontext>(d->primary.get()));
    }
    d->primary_refcount = 0;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags,
                                                           int* active) {
  return Guard([&] {
    Device* d;
    if (CUresult r = GetDevice(dev, &d); r != CUDA_SUCCESS) return r;
    if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(d->primary_mu);
    *flags = d->primary_flags;
    *active = d->primary != nullptr && d->primary->alive() && d->primary_refcount > 0;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  return Guard([&] {
    Device* d;
    if (CUresult r = GetDevice(dev, &d); r != CUDA_SUCCESS) return r;
    if (flags & ~0x1fu) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(d->primary_mu);
    d->primary_flags = flags;
    return CUDA_SUCCESS;
  });
}
