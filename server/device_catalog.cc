#include "server/device_catalog.h"

#include <string>

namespace rgpu::server {

Status DeviceCatalog::Load(const CudaDriver& drv, const std::string& backend) {
  devices_.clear();
  backend_ = backend;
  if (drv.cuDriverGetVersion(&driver_version_) != CUDA_SUCCESS) driver_version_ = 0;
  int count = 0;
  CUresult r = drv.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) return Internal("cuDeviceGetCount failed: " + std::to_string(r));
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    if (drv.cuDeviceGet(&dev, i) != CUDA_SUCCESS) return Internal("cuDeviceGet failed");
    wire::DeviceInfo info;
    char name[256] = {};
    drv.cuDeviceGetName(name, sizeof name - 1, dev);
    info.set_name(name);
    size_t total = 0;
    drv.cuDeviceTotalMem(&total, dev);
    info.set_total_mem(total);
    CUuuid uuid = {};
    if (drv.cuDeviceGetUuid) drv.cuDeviceGetUuid(&uuid, dev);
    info.set_uuid(std::string(uuid.bytes, sizeof uuid.bytes));
    char bus[64] = {};
    if (drv.cuDeviceGetPCIBusId &&
        drv.cuDeviceGetPCIBusId(bus, sizeof bus - 1, dev) == CUDA_SUCCESS) {
      info.set_pci_bus_id(bus);
    }
    for (int a = 0; a < CU_DEVICE_ATTRIBUTE_MAX; ++a) {
      int value = 0;
      if (a == 0 || drv.cuDeviceGetAttribute(&value, static_cast<CUdevice_attribute>(a), dev) !=
                        CUDA_SUCCESS) {
        value = 0;
      }
      // Stream-ordered allocation is the server's own (session_pool.cc), on every backend; its
      // pools are shared between sessions (session_ipc.cc) through POSIX file descriptors where
      // the backend opens IPC memory handles.
      if (a == CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) value = 1;
      if (a == CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES) {
        value = drv.cuIpcOpenMemHandle != nullptr ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : 0;
      }
      if (a == CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED && drv.cuIpcOpenEventHandle == nullptr) {
        value = 0;
      }
      // Cooperative launches go through the backend's cuLaunchKernelEx.
      if (a == CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH && drv.cuLaunchKernelEx == nullptr) value = 0;
      if (a == CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH) value = 0;
      // Virtual memory management is forwarded (session_vmm.cc) without compression; its
      // physical memory is shared between sessions through POSIX file descriptors (the server
      // shares the backend's handle: session_ipc.cc).
      if (a == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED && drv.cuMemMap == nullptr) {
        value = 0;
      }
      if (a == CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) {
        value = drv.cuMemMap != nullptr ? 1 : 0;
      }
      if (a == CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED ||
          a == CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED ||
          a == CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED ||
          a == CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED) {
        value = 0;
      }
      info.add_attributes(value);
    }
    devices_.push_back(std::move(info));
  }
  return Status::Ok();
}

}  // namespace rgpu::server
