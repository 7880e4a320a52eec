// Session's handlers for virtual memory management (proto/calls.def: Virtual memory
// management). The session keeps its own records of the physical memory, address reservations
// and mappings it made, checks every call against them before the backend sees it (a range must
// lie in one of its reservations, a handle must be its own, a mapping must fit its physical
// memory, all overflow-checked), charges physical memory to the tenant, zeroes it when it is made
// (on backends whose memory holds stale data) and makes a mapped range the context's memory
// (OwnsRange) only once access to it is granted. Shareable handles and
// compression are refused by the client; memory always lives on the call's context's device.
#include <vector>

#include "server/checked_size.h"
#include "server/require_fn.h"
#include "server/session.h"

namespace rgpu::server {

CUmemAllocationProp DevicePinnedProp(int device) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

namespace {

// The session's mappings exactly covering [ptr, ptr + size); false when the range holds
// addresses no mapping of the session covers, or cuts one.
bool Covering(std::map<CUdeviceptr, MappingRecord>& mappings, CUdeviceptr ptr, uint64_t size,
              std::vector<std::map<CUdeviceptr, MappingRecord>::iterator>* out) {
  uint64_t end = 0;
  if (size == 0 || !CheckedAdd(ptr, size, &end)) return false;
  uint64_t at = ptr;
  for (auto it = mappings.find(ptr); it != mappings.end() && at < end; ++it) {
    if (it->first != at || it->second.size > end - at) return false;
    out->push_back(it);
    at += it->second.size;
  }
  return at == end;
}

}  // namespace

CUresult Session::HandleMemGetAllocationGranularity(
    CallState& cs, const MemGetAllocationGranularityIn& in,
    calls::MemGetAllocationGranularity::Results* out) {
  REQUIRE_FN(cuMemGetAllocationGranularity);
  const CUmemAllocationProp prop = DevicePinnedProp(cs.ctx->device);
  size_t granularity = 0;
  CUresult r = drv_.cuMemGetAllocationGranularity(
      &granularity, &prop, static_cast<CUmemAllocationGranularity_flags>(in.option));
  if (r == CUDA_SUCCESS) out->granularity = granularity;
  return r;
}

CUresult Session::HandleMemCreate(CallState& cs, const MemCreateIn& in,
                                  calls::MemCreate::Results* out) {
  REQUIRE_FN(cuMemCreate);
  REQUIRE_FN(cuMemRelease);
  if (CUresult r = RoomFor(cs, physical_.size(), limits_.max_vmm_objects, "physical allocations");
      r != CUDA_SUCCESS) {
    return r;
  }
  if (in.size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (!Charge(cs, cs.ctx->device, in.size, "the physical allocation")) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUmemAllocationProp prop = DevicePinnedProp(cs.ctx->device);
  PhysicalRecord rec;
  rec.device = cs.ctx->device;
  rec.size = in.size;
  CUresult r;
  {
    auto change = DeviceMemoryChange();
    r = drv_.cuMemCreate(&rec.handle, in.size, &prop, 0);
  }
  if (r == CUDA_SUCCESS && scrub_allocations_) r = ZeroPhysical(rec);
  if (r != CUDA_SUCCESS) {
    if (rec.handle != 0) drv_.cuMemRelease(rec.handle);
    Uncharge(rec.device, in.size);
    return r;
  }
  out->handle = physical_.Insert(rec);
  return CUDA_SUCCESS;
}

CUresult Session::ZeroPhysical(const PhysicalRecord& rec) {
  // Physical memory holds what its last user left there: it is zeroed through a mapping of the
  // server's own, before the tenant can map it.
  if (drv_.cuMemAddressReserve == nullptr || drv_.cuMemMap == nullptr ||
      drv_.cuMemSetAccess == nullptr || drv_.cuMemUnmap == nullptr ||
      drv_.cuMemAddressFree == nullptr || drv_.cuMemsetD8 == nullptr) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  CUdeviceptr va = 0;
  CUresult r = drv_.cuMemAddressReserve(&va, rec.size, 0, 0, 0);
  if (r != CUDA_SUCCESS) return r;
  r = drv_.cuMemMap(va, rec.size, 0, rec.handle, 0);
  if (r == CUDA_SUCCESS) {
    CUmemAccessDesc desc = {};
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = rec.device;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = drv_.cuMemSetAccess(va, rec.size, &desc, 1);
    if (r == CUDA_SUCCESS) r = drv_.cuMemsetD8(va, 0, rec.size);
    if (r == CUDA_SUCCESS) r = drv_.cuStreamSynchronize(nullptr);
    const CUresult u = drv_.cuMemUnmap(va, rec.size);
    if (r == CUDA_SUCCESS) r = u;
  }
  drv_.cuMemAddressFree(va, rec.size);
  return r;
}

CUresult Session::HandleMemRelease(CallState&, const MemReleaseIn& in,
                                   calls::MemRelease::Results*) {
  // The backend keeps mapped memory alive; the charge stays with the session's mappings. Shared
  // memory's backend handle is released with its last holder (LetGoOfPhysical).
  if (in.handle->shared == nullptr) {
    const CUresult r = drv_.cuMemRelease(in.handle->handle);
    if (r != CUDA_SUCCESS) return r;
  }
  in.handle->released = true;
  ErasePhysicalIfDone(in.handle.id);
  return CUDA_SUCCESS;
}

void Session::ErasePhysicalIfDone(uint64_t id) {
  PhysicalRecord* p = physical_.Find(id);
  if (p == nullptr || !p->released || p->mappings > 0) return;
  LetGoOfPhysical(*p);
  physical_.Erase(id);
}

CUresult Session::HandleMemAddressReserve(CallState& cs, const MemAddressReserveIn& in,
                                          calls::MemAddressReserve::Results* out) {
  REQUIRE_FN(cuMemAddressReserve);
  REQUIRE_FN(cuMemAddressFree);
  if (CUresult r = RoomFor(cs, reservations_.size(), limits_.max_vmm_objects, "reservations");
      r != CUDA_SUCCESS) {
    return r;
  }
  if (in.size == 0) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr ptr = 0;
  // No address hint: the backend chooses, so that no session can aim at another's addresses.
  CUresult r = drv_.cuMemAddressReserve(&ptr, in.size, in.alignment, 0, 0);
  if (r != CUDA_SUCCESS) return r;
  uint64_t end = 0;
  if (!CheckedAdd(ptr, in.size, &end)) {
    drv_.cuMemAddressFree(ptr, in.size);
    return CUDA_ERROR_UNKNOWN;
  }
  reservations_[ptr] = in.size;
  out->ptr = ptr;
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemAddressFree(CallState& cs, const MemAddressFreeIn& in,
                                       calls::MemAddressFree::Results*) {
  auto it = reservations_.find(in.ptr);
  if (it == reservations_.end() || it->second != in.size) {
    cs.detail = "not an address range this session reserved";
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto m = mappings_.lower_bound(in.ptr);
  if (m != mappings_.end() && m->first - in.ptr < in.size) {
    cs.detail = "the range is still mapped";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = drv_.cuMemAddressFree(in.ptr, in.size); r != CUDA_SUCCESS) return r;
  reservations_.erase(it);
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemMap(CallState& cs, const MemMapIn& in, calls::MemMap::Results*) {
  REQUIRE_FN(cuMemMap);
  REQUIRE_FN(cuMemUnmap);
  if (CUresult r = RoomFor(cs, mappings_.size(), limits_.max_vmm_objects, "mappings");
      r != CUDA_SUCCESS) {
    return r;
  }
  uint64_t end = 0, phys_end = 0;
  if (in.size == 0 || !CheckedAdd(in.ptr, in.size, &end) ||
      !CheckedAdd(in.offset, in.size, &phys_end) || phys_end > in.handle->size) {
    cs.detail = "the mapping does not fit its physical memory";
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Inside one reservation of the session's.
  auto r_it = reservations_.upper_bound(in.ptr);
  bool inside = r_it != reservations_.begin();
  if (inside) {
    --r_it;
    const uint64_t into = in.ptr - r_it->first;
    inside = into < r_it->second && in.size <= r_it->second - into;
  }
  if (!inside) {
    cs.detail = "the range is not inside an address range this session reserved";
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto next = mappings_.lower_bound(in.ptr);
  const bool overlaps =
      (next != mappings_.end() && next->first < end) ||
      (next != mappings_.begin() && std::prev(next)->first + std::prev(next)->second.size > in.ptr);
  if (overlaps) {
    cs.detail = "the range is mapped already";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = drv_.cuMemMap(in.ptr, in.size, in.offset, in.handle->handle, 0);
      r != CUDA_SUCCESS) {
    return r;
  }
  ++in.handle->mappings;
  mappings_[in.ptr] = MappingRecord{in.size, in.handle.id, 0};
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemUnmap(CallState& cs, const MemUnmapIn& in, calls::MemUnmap::Results*) {
  std::vector<std::map<CUdeviceptr, MappingRecord>::iterator> covered;
  if (!Covering(mappings_, in.ptr, in.size, &covered)) {
    cs.detail = "the range is not exactly mappings of this session";
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Work in flight may still use the memory: the driver waits, and so does this.
  if (CUresult r = drv_.cuCtxSynchronize(); r != CUDA_SUCCESS) return r;
  if (CUresult r = drv_.cuMemUnmap(in.ptr, in.size); r != CUDA_SUCCESS) return r;
  for (auto it : covered) {
    allocations_.erase(it->first);  // no longer the context's memory
    const uint64_t physical = it->second.physical;
    mappings_.erase(it);
    if (PhysicalRecord* p = physical_.Find(physical); p != nullptr) --p->mappings;
    ErasePhysicalIfDone(physical);
  }
  return CUDA_SUCCESS;
}

CUresult Session::HandleMemSetAccess(CallState& cs, const MemSetAccessIn& in,
                                     calls::MemSetAccess::Results*) {
  REQUIRE_FN(cuMemSetAccess);
  std::vector<std::map<CUdeviceptr, MappingRecord>::iterator> covered;
  if (!Covering(mappings_, in.ptr, in.size, &covered)) {
    cs.detail = "the range is not exactly mappings of this session";
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUmemAccessDesc desc = {};
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = cs.ctx->device;
  desc.flags = in.read_write ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  if (CUresult r = drv_.cuMemSetAccess(in.ptr, in.size, &desc, 1); r != CUDA_SUCCESS) return r;
  for (auto it : covered) {
    MappingRecord& m = it->second;
    if (!in.read_write) {
      allocations_.erase(it->first);
      m.access_ctx = 0;
      continue;
    }
    m.access_ctx = cs.ctx_id;
    Allocation a;
    a.size = m.size;
    a.ctx = cs.ctx_id;
    a.freeable = false;  // unmapped, never cuMemFree'd
    allocations_[it->first] = a;
  }
  return CUDA_SUCCESS;
}

void Session::ReleaseVirtualMemory() {
  if (mappings_.empty() && reservations_.empty() && physical_.size() == 0) return;
  if (drv_.cuMemUnmap != nullptr) {
    for (auto& [ptr, m] : mappings_) {
      allocations_.erase(ptr);
      drv_.cuMemUnmap(ptr, m.size);
    }
  }
  mappings_.clear();
  if (drv_.cuMemAddressFree != nullptr) {
    for (auto& [ptr, size] : reservations_) drv_.cuMemAddressFree(ptr, size);
  }
  reservations_.clear();
  for (auto& [id, p] : physical_.records()) LetGoOfPhysical(p);
  physical_.records().clear();
}

}  // namespace rgpu::server
