// MemoryMap: the address ranges the client knows about (device allocations it made, module
// globals, pinned or registered host memory), so that unified-address calls (cuMemcpy,
// cuPointerGetAttribute) can tell what a pointer is without asking the server. Thread-safe.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

namespace rgpu::client {

struct MemoryRange {
  uint64_t base = 0;
  uint64_t size = 0;
  CUmemorytype type = CU_MEMORYTYPE_DEVICE;  // DEVICE or HOST
  CUctx_st* ctx = nullptr;
  uint64_t buffer_id = 0;   // unique per range, for CU_POINTER_ATTRIBUTE_BUFFER_ID
  bool freeable = true;     // false for module globals and registered host memory
  unsigned host_flags = 0;  // cuMemHostAlloc / cuMemHostRegister flags
  // Managed memory, or mapped pinned memory (HOST): one address for host and device, kept
  // coherent by client/managed_memory.h; copies treat it as device memory.
  bool managed = false;
  // Managed memory the program registered from its own pages (cuMemHostRegister with DEVICEMAP)
  // lies at another address on the device: that address minus this one (mod 2^64); 0 otherwise.
  uint64_t device_shift = 0;
  // A mapping of virtual memory management (cuMemMap): a copy may run on into the mapping that
  // adjoins it (side by side in one reservation), as it may on the driver; other ranges end a
  // copy at their end.
  bool mapping = false;
  // CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, set by cuPointerSetAttribute (client/sync_memops.h).
  bool sync_memops = false;
};

class MemoryMap {
 public:
  // Records [base, base+size). Ranges of one server never overlap; a range of a context that
  // overlaps one of another server's context (two servers chose the same device addresses,
  // client/server_set.h) is not recorded: false, and the caller must not hand it out.
  bool Insert(MemoryRange range);
  // Records freeable device memory of `ctx` at [base, base+size) (false as Insert).
  bool InsertDevice(uint64_t base, uint64_t size, CUctx_st* ctx);
  // True when some recorded range overlaps [base, base+size).
  bool Overlaps(uint64_t base, uint64_t size) const;
  // Forgets the range starting at `base`; returns it if there was one.
  std::optional<MemoryRange> Erase(uint64_t base);
  // The range containing `address`, if any.
  std::optional<MemoryRange> Find(uint64_t address) const;
  // Sets the sync_memops of the range containing `address` and returns the range, if any.
  std::optional<MemoryRange> SetSyncMemops(uint64_t address, bool on);
  // Forgets every range that belongs to `ctx` (the context is gone).
  void EraseContext(CUctx_st* ctx);

 private:
  mutable std::mutex mu_;
  std::map<uint64_t, MemoryRange> ranges_;
  uint64_t next_buffer_id_ = 1;
};

// The process's map.
MemoryMap& Memory();

// CUDA_SUCCESS when [address, address+bytes) lies inside device memory of `ctx` that this client
// knows (an allocation, a module global, managed or mapped memory), else CUDA_ERROR_INVALID_VALUE,
// which is what the driver answers for such a copy or memset.
CUresult CheckDeviceRange(CUctx_st* ctx, uint64_t address, uint64_t bytes);

}  // namespace rgpu::client
