// The device-side malloc heap of one context: a single device allocation, made on first use and
// carved up first-fit. Blocks outlive the launch that allocated them, as in CUDA.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>

#include "softgpu/memory.h"

namespace softgpu {

class DeviceHeap {
 public:
  explicit DeviceHeap(AddressSpace* memory) : memory_(memory) {}
  DeviceHeap(const DeviceHeap&) = delete;
  DeviceHeap& operator=(const DeviceHeap&) = delete;

  // Sets the size used when the heap is first needed (CU_LIMIT_MALLOC_HEAP_SIZE); false once the
  // heap exists.
  bool SetSize(uint64_t bytes);
  uint64_t size() const;

  // Device address of `size` fresh bytes (16-byte aligned), or 0 when the heap is exhausted.
  // Thread-safe.
  uint64_t Allocate(uint64_t size);
  // Returns a block from Allocate; other addresses (including 0) are ignored.
  void Free(uint64_t address);
  // Forgets everything (the address space is being torn down).
  void Reset();

 private:
  AddressSpace* const memory_;
  mutable std::mutex mu_;
  uint64_t size_ = 8 << 20;
  uint64_t base_ = 0;                            // 0 until created
  std::map<uint64_t, uint64_t> free_;            // offset -> size
  std::unordered_map<uint64_t, uint64_t> used_;  // offset -> size
};

}  // namespace softgpu
