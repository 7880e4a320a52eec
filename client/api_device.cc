// Initialization, versions and devices: answered locally from what the server described once.
#include <cstdio>
#include <cstring>

#include "client/impl.h"

using rgpu::client::ClientState;

RGPU_IMPL(cuInit)(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return ClientState::Get().Initialize();
}

RGPU_IMPL(cuDriverGetVersion)(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = ClientState::Get().driver_version();
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuDeviceGetCount)(int* count) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  *count = ClientState::Get().device_count();
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuDeviceGet)(CUdevice* device, int ordinal) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  if (ClientState::Get().device(ordinal) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

namespace {
// The description of `dev`, or an error for an uninitialized client or invalid ordinal.
CUresult Describe(CUdevice dev, const rgpu::wire::DeviceInfo** out) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  *out = ClientState::Get().device(dev);
  return *out == nullptr ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}
}  // namespace

RGPU_IMPL(cuDeviceGetName)(char* name, int len, CUdevice dev) {
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  const rgpu::wire::DeviceInfo* d;
  CUresult r = Describe(dev, &d);
  if (r != CUDA_SUCCESS) return r;
  size_t n = std::min<size_t>(d->name().size(), static_cast<size_t>(len) - 1);
  memcpy(name, d->name().data(), n);
  name[n] = '\0';
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuDeviceTotalMem_v2)(size_t* bytes, CUdevice dev) {
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const rgpu::wire::DeviceInfo* d;
  CUresult r = Describe(dev, &d);
  if (r != CUDA_SUCCESS) return r;
  *bytes = d->total_mem();
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuDeviceGetAttribute)(int* value, CUdevice_attribute attrib, CUdevice dev) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const rgpu::wire::DeviceInfo* d;
  CUresult r = Describe(dev, &d);
  if (r != CUDA_SUCCESS) return r;
  if (attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  *value = attrib < d->attributes_size() ? d->attributes(attrib) : 0;
  // Managed and mapped memory are this client's (client/managed_memory.h), whatever the server's
  // device does: CUDA's model without concurrent access (the host waits for the device before
  // it touches managed memory again), no host access to device memory in place, no atomics
  // between host and device, host memory mapped only when allocated mapped.
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    // Host registration is the client's: memory registered read-only for the device is kept as
    // any registered memory is.
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
      *value = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES:
    case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST:
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
    // Stream memory operations are forwarded as the backend offers them (64-bit words, NOR: its
    // answer), but not their flushes of remote writes, nor the v1 entry points
    // (client/api_stream_memops.cc).
    case CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V1:
      *value = 0;
      break;
    default:
      break;
  }
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuDeviceGetUuid)(CUuuid* uuid, CUdevice dev) {
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const rgpu::wire::DeviceInfo* d;
  CUresult r = Describe(dev, &d);
  if (r != CUDA_SUCCESS) return r;
  memset(uuid->bytes, 0, sizeof uuid->bytes);
  memcpy(uuid->bytes, d->uuid().data(), std::min(d->uuid().size(), sizeof uuid->bytes));
  return CUDA_SUCCESS;
}
RGPU_SAME_AS(cuDeviceGetUuid_v2, cuDeviceGetUuid)

RGPU_IMPL(cuDeviceGetPCIBusId)(char* bus_id, int len, CUdevice dev) {
  if (bus_id == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  const rgpu::wire::DeviceInfo* d;
  CUresult r = Describe(dev, &d);
  if (r != CUDA_SUCCESS) return r;
  size_t n = std::min<size_t>(d->pci_bus_id().size(), static_cast<size_t>(len) - 1);
  memcpy(bus_id, d->pci_bus_id().data(), n);
  bus_id[n] = '\0';
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuDeviceComputeCapability)(int* major, int* minor, CUdevice dev) {
  if (major == nullptr || minor == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r =
      rgpu_impl_cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  if (r != CUDA_SUCCESS) return r;
  return rgpu_impl_cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
}

RGPU_IMPL(cuDeviceGetByPCIBusId)(CUdevice* dev, const char* bus_id) {
  if (dev == nullptr || bus_id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  // "[domain:]bus:device[.function]", hexadecimal, compared by value.
  auto parse = [](const char* s, unsigned v[3]) {
    unsigned a = 0, b = 0, c = 0, f = 0;
    if (sscanf(s, "%x:%x:%x.%x", &a, &b, &c, &f) >= 3) {
      v[0] = a, v[1] = b, v[2] = c;
      return true;
    }
    if (sscanf(s, "%x:%x.%x", &b, &c, &f) >= 2) {
      v[0] = 0, v[1] = b, v[2] = c;
      return true;
    }
    return false;
  };
  unsigned want[3];
  if (!parse(bus_id, want)) return CUDA_ERROR_INVALID_VALUE;
  for (int d = 0; d < ClientState::Get().device_count(); ++d) {
    unsigned have[3];
    if (parse(ClientState::Get().device(d)->pci_bus_id().c_str(), have) && have[0] == want[0] &&
        have[1] == want[1] && have[2] == want[2]) {
      *dev = d;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_DEVICE;
}
