// Virtual memory management (cuMemCreate, cuMemAddressReserve, cuMemMap, cuMemSetAccess, ...):
// physical memory is a host block charged to its device's budget, named by a handle; address
// ranges are reserved from the process-wide device address space; a mapping places physical
// memory at reserved addresses, and access granted to a device makes it part of the address
// space of every context on that device (contexts made later do not see it; access is read-write
// or none: read-only access cannot be enforced and is refused). Granularity is 2 MiB, as on
// NVIDIA's GPUs. Shareable handles, compression and host-located memory are refused with
// CUDA_ERROR_NOT_SUPPORTED.
#include <cuda.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "softgpu/api_util.h"
#include "softgpu/driver.h"
#include "softgpu/memory.h"

namespace softgpu {
namespace {

constexpr uint64_t kGranularity = uint64_t{2} << 20;

struct Physical {
  uint8_t* host = nullptr;
  uint64_t size = 0;
  Device* device = nullptr;
  CUmemAllocationProp prop = {};
  ~Physical() {
    free(host);
    device->budget().Release(size);
  }
};

struct Mapping {
  uint64_t size = 0;
  uint64_t offset = 0;
  std::shared_ptr<Physical> physical;
  CUmemGenericAllocationHandle handle = 0;
  std::vector<int> devices;                      // the devices it is accessible from (read-write)
  std::vector<std::weak_ptr<Context>> contexts;  // whose address spaces hold it
};

struct HandleEntry {
  std::shared_ptr<Physical> physical;
  int refs = 0;
};

struct Vmm {
  std::mutex mu;
  uint64_t next_handle = 1;                                     // GUARDED_BY(mu)
  std::map<CUmemGenericAllocationHandle, HandleEntry> handles;  // GUARDED_BY(mu)
  std::map<uint64_t, uint64_t> reservations;                    // base -> size, GUARDED_BY(mu)
  std::map<uint64_t, Mapping> mappings;                         // by base, GUARDED_BY(mu)
};

Vmm& State() {
  static auto* vmm = new Vmm;  // never destroyed: used until the process ends
  return *vmm;
}

bool Aligned(uint64_t v) { return v % kGranularity == 0; }

// The reservation holding [ptr, ptr + size), or end.
std::map<uint64_t, uint64_t>::iterator Reservation(Vmm& v, uint64_t ptr, uint64_t size) {
  auto it = v.reservations.upper_bound(ptr);
  if (it == v.reservations.begin()) return v.reservations.end();
  --it;
  if (ptr - it->first > it->second || size > it->second - (ptr - it->first)) {
    return v.reservations.end();
  }
  return it;
}

// The mappings inside [ptr, ptr + size); false if the range also holds unmapped addresses or
// cuts a mapping.
bool MappingsCovering(Vmm& v, uint64_t ptr, uint64_t size,
                      std::vector<std::map<uint64_t, Mapping>::iterator>* out) {
  uint64_t at = ptr;
  for (auto it = v.mappings.find(ptr); it != v.mappings.end() && at < ptr + size; ++it) {
    if (it->first != at || it->second.size > ptr + size - at) return false;
    out->push_back(it);
    at += it->second.size;
  }
  return at == ptr + size;
}

void Withdraw(Mapping& m, uint64_t base) {
  for (auto& weak : m.contexts) {
    if (auto ctx = weak.lock()) ctx->memory().Free(base);
  }
  m.contexts.clear();
}

CUresult CheckDeviceLocation(const CUmemLocation& location, Device** device) {
  if (location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_NOT_SUPPORTED;
  *device = FindDevice(location.id);
  return *device != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

}  // namespace
}  // namespace softgpu

using softgpu::Guard;

extern "C" {

SOFTGPU_EXPORT CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* granularity,
                                                              const CUmemAllocationProp* prop,
                                                              CUmemAllocationGranularity_flags) {
  return Guard([&] {
    if (CUresult r = softgpu::CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
    softgpu::Device* device;
    if (CUresult r = softgpu::CheckDeviceLocation(prop->location, &device); r != CUDA_SUCCESS) {
      return r;
    }
    *granularity = softgpu::kGranularity;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                            const CUmemAllocationProp* prop,
                                            unsigned long long flags) {
  return Guard([&] {
    if (CUresult r = softgpu::CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (handle == nullptr || prop == nullptr || flags != 0 || size == 0 ||
        !softgpu::Aligned(size) || size > (1ull << 44)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE ||
        prop->allocFlags.compressionType != 0) {
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    softgpu::Device* device;
    if (CUresult r = softgpu::CheckDeviceLocation(prop->location, &device); r != CUDA_SUCCESS) {
      return r;
    }
    if (!device->budget().Reserve(size)) return CUDA_ERROR_OUT_OF_MEMORY;
    auto physical = std::make_shared<softgpu::Physical>();
    physical->device = device;
    physical->size = size;
    physical->prop = *prop;
    physical->host = static_cast<uint8_t*>(calloc(1, size));
    if (physical->host == nullptr) {
      physical->size = 0;
      device->budget().Release(size);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    const char* stale = getenv("RGPU_SOFTGPU_STALE_MEMORY");
    if (stale != nullptr && stale[0] == '1') memset(physical->host, 0xA5, size);
    softgpu::Vmm& v = softgpu::State();
    std::lock_guard lock(v.mu);
    const CUmemGenericAllocationHandle h = v.next_handle++;
    v.handles[h] = {std::move(physical), 1};
    *handle = h;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  return Guard([&] {
    if (CUresult r = softgpu::CheckInitialized(); r != CUDA_SUCCESS) return r;
    softgpu::Vmm& v = softgpu::State();
    std::lock_guard lock(v.mu);
    auto it = v.handles.find(handle);
    if (it == v.handles.end()) return CUDA_ERROR_INVALID_VALUE;
    // The memory itself lives on while a mapping holds it.
    if (--it->second.refs == 0) v.handles.erase(it);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                                    CUdeviceptr addr, unsigned long long flags) {
  return Guard([&] {
    if (CUresult r = softgpu::CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (ptr == nullptr || flags != 0 || size == 0 || !softgpu::Aligned(size)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const uint64_t align = std::max<uint64_t>(alignment, softgpu::kGranularity);
    // The address asked for, when it is free and aligned (as CUDA, a hint: elsewhere otherwise).
    uint64_t base = 0;
    if (addr != 0 && (align & (align - 1)) == 0 && addr % align == 0 &&
        softgpu::ClaimAddresses(addr, size)) {
      base = addr;
    }
    if (base == 0) base = softgpu::ReserveAddresses(size, align);
    if (base == 0) return CUDA_ERROR_INVALID_VALUE;
    softgpu::Vmm& v = softgpu::State();
    std::lock_guard lock(v.mu);
    v.reservations[base] = size;
    *ptr = base;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  return Guard([&] {
    if (CUresult r = softgpu::CheckInitialized(); r != CUDA_SUCCESS) return r;
    softgpu::Vmm& v = softgpu::State();
    std::lock_guard lock(v.mu);
    auto it = v.reservations.find(ptr);
    if (it == v.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
    auto m = v.mappings.lower_bound(ptr);
    if (m != v.mappings.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
    v.reservations.erase(it);
    softgpu::ReleaseAddresses(ptr);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                         CUmemGenericAllocationHandle handle,
                                         unsigned long long flags) {
  return Guard([&] {
    if (CUresult r = softgpu::CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (flags != 0 || size == 0 || !softgpu::Aligned(ptr) || !softgpu::Aligned(size) ||
        !softgpu::Aligned(offset)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    softgpu::Vmm& v = softgpu::State();
    std::lock_guard lock(v.mu);
    auto h = v.handles.find(handle);
    if (h == v.handles.end()) return CUDA_ERROR_INVALID_HANDLE;
    const softgpu::Physical& physical = *h->second.physical;
    if (offset > physical.size || size > physical.size - offset) return CUDA_ERROR_INVALID_VALUE;
    if (softgpu::Reservation(v, ptr, size) == v.reservations.end()) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    auto next = v.mappings.lower_bound(ptr);
    if (next != v.mappings.end() && next->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
    if (next != v.mappings.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second.size > ptr) return CUDA_ERROR_INVALID_VALUE;
    }
    softgpu::Mapping m;
    m.size = size;
    m.offset = offset;
    m.physical = h->second.physical;
    m.handle = handle;
    v.mappings.emplace(ptr, std::move(m));
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  return Guard([&] {
    if (CUresult r = softgpu::CheckInitialized(); r != CUDA_SUCCESS) return r;
    softgpu::Vmm& v = softgpu::State();
    std::lock_guard lock(v.mu);
    std::vector<std::map<uint64_t, softgpu::Mapping>::iterator> covered;
    if (size == 0 || !softgpu::MappingsCovering(v, ptr, size, &covered)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    for (auto it : covered) {
      softgpu::Withdraw(it->second, it->first);
      v.mappings.erase(it);
    }
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size,
                                               const CUmemAccessDesc* desc, size_t count) {
  return Guard([&] {
    if (CUresult r = softgpu::CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (desc == nullptr || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; ++i) {
      softgpu::Device* device;
      if (CUresult r = softgpu::CheckDeviceLocation(desc[i].location, &device); r != CUDA_SUCCESS) {
        return r;
      }
      if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ) return CUDA_ERROR_NOT_SUPPORTED;
      if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE &&
          desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE) {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    softgpu::Vmm& v = softgpu::State();
    std::lock_guard lock(v.mu);
    std::vector<std::map<uint64_t, softgpu::Mapping>::iterator> covered;
    if (!softgpu::MappingsCovering(v, ptr, size, &covered)) return CUDA_ERROR_INVALID_VALUE;
    for (auto it : covered) {
      softgpu::Mapping& m = it->second;
      for (size_t i = 0; i < count; ++i) {
        const int dev = desc[i].location.id;
        std::erase(m.devices, dev);
        if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) m.devices.push_back(dev);
      }
      // The address spaces that hold it: every live context of a device with access.
      softgpu::Withdraw(m, it->first);
      softgpu::GetDriver().contexts.ForEach([&](const std::shared_ptr<softgpu::Context>& ctx) {
        bool granted = false;
        for (int dev : m.devices) granted |= ctx->device() == softgpu::FindDevice(dev);
        if (!granted) return;
        auto a = std::make_shared<softgpu::Allocation>();
        a->base = it->first;
        a->size = m.size;
        a->reserved = 0;
        a->kind = softgpu::AllocationKind::kMapping;
        a->host = m.physical->host + m.offset;
        a->owner = m.physical;
        if (ctx->memory().Insert(std::move(a)) == softgpu::AddressSpace::Result::kOk) {
          m.contexts.push_back(ctx);
        }
      });
    }
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemGetAccess(unsigned long long* flags,
                                               const CUmemLocation* location, CUdeviceptr ptr) {
  return Guard([&] {
    if (CUresult r = softgpu::CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (flags == nullptr || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
    softgpu::Vmm& v = softgpu::State();
    std::lock_guard lock(v.mu);
    auto it = v.mappings.upper_bound(ptr);
    if (it == v.mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
    --it;
    if (ptr - it->first >= it->second.size) return CUDA_ERROR_INVALID_VALUE;
    bool granted = false;
    for (int dev : it->second.devices) {
      granted |= location->type == CU_MEM_LOCATION_TYPE_DEVICE && dev == location->id;
    }
    *flags = granted ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle,
                                                            void* address) {
  return Guard([&] {
    if (CUresult r = softgpu::CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const uint64_t ptr = reinterpret_cast<uintptr_t>(address);
    softgpu::Vmm& v = softgpu::State();
    std::lock_guard lock(v.mu);
    auto it = v.mappings.upper_bound(ptr);
    if (it == v.mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
    --it;
    if (ptr - it->first >= it->second.size) return CUDA_ERROR_INVALID_VALUE;
    softgpu::HandleEntry& e = v.handles[it->second.handle];
    if (e.physical == nullptr) e.physical = it->second.physical;  // released, still mapped
    ++e.refs;
    *handle = it->second.handle;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(
    CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) {
  return Guard([&] {
    if (CUresult r = softgpu::CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
    softgpu::Vmm& v = softgpu::State();
    std::lock_guard lock(v.mu);
    auto it = v.handles.find(handle);
    if (it == v.handles.end()) return CUDA_ERROR_INVALID_VALUE;
    *prop = it->second.physical->prop;
    return CUDA_SUCCESS;
  });
}

}  // extern "C"
