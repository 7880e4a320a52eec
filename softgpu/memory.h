// Device memory: a process-wide virtual address range handed out in 256-byte aligned pieces, each
// backed by host memory and allocated by one context's AddressSpace (other contexts see it only
// through a cuMemMap mapping or an IPC alias at the same address). Every access from a copy or a
// kernel goes through AddressSpace::Find, so a pointer that another context owns, that was freed,
// or that runs past the end of its allocation is refused instead of touching host memory.
//
// Native memory (managed memory, __managed__ variables, page-locked host memory) is host memory
// mapped at its own device address, so that host code and kernels use one pointer and really
// share the bytes at the same time. Managed memory belongs to a context's AddressSpace like any
// allocation; page-locked host memory is in the process-wide HostMappings, which every context's
// kernels and copies reach (unified addressing).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

namespace softgpu {

constexpr uint64_t kAllocationAlignment = 256;
// Device addresses lie at or above this; generic-address windows for shared and local memory lie
// below. Each process starts its device addresses at its own place above it (FirstDeviceAddress),
// so that two servers' devices in one program have addresses of their own, as one process's
// devices do under unified addressing.
constexpr uint64_t kGlobalAddressBase = 0x0000400000000000ull;
// Where this process's device addresses start: RGPU_SOFTGPU_ADDRESS_BASE (a number at or above
// kGlobalAddressBase and below 0x500000000000, aligned to 1 GiB) if set, else a random 1 GiB
// boundary in that range.
uint64_t FirstDeviceAddress();

class DeviceMemoryBudget;

// What an allocation is, for the calls that accept only some kinds.
enum class AllocationKind : uint8_t {
  kInternal,    // arrays, module variables, the device heap, grid workspaces
  kMemAlloc,    // cuMemAlloc / cuMemAllocPitch: the memory cuIpcGetMemHandle exports
  kMapping,     // physical memory mapped with cuMemMap
  kIpcAlias,    // another context's cuMemAlloc memory opened with cuIpcOpenMemHandle
  kManaged,     // cuMemAllocManaged
  kHostMapped,  // page-locked host memory (cuMemHostAlloc, cuMemAllocHost), in HostMappings
};

// Where a managed page's hint points (cuMemAdvise, cuMemPrefetchAsync): a device ordinal, or one
// of these. Values follow CU_DEVICE_CPU and CU_DEVICE_INVALID.
constexpr int kLocationHost = -1;
constexpr int kLocationNone = -2;

// The usage hints of one page of managed memory. They change nothing softgpu does (host and
// kernels always share the one copy); they are kept for cuMemRangeGetAttribute.
struct PageHints {
  bool read_mostly = false;
  bool accessed_by_host = false;
  int16_t preferred = kLocationNone;
  int16_t last_prefetch = kLocationNone;
  uint64_t accessed_by = 0;  // bit d: device d (RGPU_SOFTGPU_DEVICES is at most 64)
};

// The hints of a managed allocation, one entry per host page (created on first use).
struct ManagedHints {
  std::mutex mu;
  std::vector<PageHints> pages;  // guarded by mu
};

// One device allocation and its host backing store (zero-filled, or stale bytes under
// RGPU_SOFTGPU_STALE_MEMORY=1). Its `reserved` bytes stay charged to the device's budget until
// the last reference goes (an IPC alias in another context keeps them in use after cuMemFree).
struct Allocation {
  uint64_t base = 0;
  uint64_t size = 0;      // bytes requested
  uint64_t reserved = 0;  // bytes counted against the device (size rounded up to the alignment)
  uint8_t* host = nullptr;
  bool zeroed = true;   // false under RGPU_SOFTGPU_STALE_MEMORY
  bool native = false;  // host == base: host memory mapped at the device address
  // Set for managed memory (cuMemAllocManaged, native __managed__ variables): its usage hints.
  std::unique_ptr<ManagedHints> managed;
  AllocationKind kind = AllocationKind::kInternal;
  // Opens of an IPC alias in its context (cuIpcOpenMemHandle); guarded by the IPC tables' mutex.
  uint32_t ipc_opens = 0;
  // Set for a mapping of physical memory (cuMemMap) or an IPC alias: it owns `host`, which this
  // does not free.
  std::shared_ptr<void> owner;
  // Where `reserved` is released when this goes (null: nothing to release).
  DeviceMemoryBudget* budget = nullptr;
  // The start of the range of device addresses this allocation took (TakeAddresses or
  // ClaimAddresses), given back when it goes; 0: it took none (a mapping or an IPC alias lies in
  // a range someone else holds).
  uint64_t range = 0;
  Allocation() = default;
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
  ~Allocation();
};

// Byte budget of one device, shared by all contexts on it.
class DeviceMemoryBudget {
 public:
  explicit DeviceMemoryBudget(uint64_t total) : total_(total) {}
  uint64_t total() const { return total_; }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  // Reserves `bytes`; false when that would exceed the total.
  bool Reserve(uint64_t bytes);
  void Release(uint64_t bytes);

 private:
  const uint64_t total_;
  std::atomic<uint64_t> used_{0};
};

// True when `address` lies in the range device addresses have been handed out from so far
// (allocations and reservations of every context, live or gone), or claimed at fixed addresses.
bool IsDeviceAddress(uint64_t address);

// The process's table of device address ranges in use: every range handed out that has not been
// given back, and every range claimed at a fixed address. Fresh ranges come from a counter that
// never goes back (a use after free faults instead of reaching new memory) and skip the claimed
// ones; a claim succeeds only where nothing in use lies.
//
// A fresh range of `size` device addresses aligned to `alignment` (a power of two, or 0), never
// handed out again (cuMemAddressReserve); 0 when size or alignment is unreasonable. It stays in
// use until ReleaseAddresses.
uint64_t ReserveAddresses(uint64_t size, uint64_t alignment);
// Claims [base, base + size) at exactly that place (a session restored at the device addresses
// it had on another server or before a checkpoint): false when base is not 256-byte aligned, the
// range is not within the device address window [kGlobalAddressBase, kClaimLimit), or any part of
// it is in use in this process. It stays in use until ReleaseAddresses(base).
constexpr uint64_t kClaimLimit = 0x0000600000000000ull;
bool ClaimAddresses(uint64_t base, uint64_t size);
// Gives back the range in use that contains `address` (from ReserveAddresses or ClaimAddresses).
void ReleaseAddresses(uint64_t address);

// The host's page size (native memory is mapped in whole pages).
uint64_t HostPageSize();

// A fresh native allocation of `size` (> 0) bytes: host memory, zero-filled, mapped at a fresh
// device address (its host address too) in whole pages, unmapped when the last reference goes.
// Nothing is charged. Null when the size is unreasonable or the host cannot map memory there.
std::shared_ptr<Allocation> MapNative(uint64_t size);

// Whether __managed__ module variables of modules loaded from now on are native (host memory at
// their device address): true unless softgpuSetNativeManagedVariables(0) said otherwise (rgpu's
// server does, because rgpu's client maps such variables at their device addresses itself and
// needs those addresses free when the server runs inside the program).
bool NativeManagedVariables();
void SetNativeManagedVariables(bool native);

// Whether kernels reach page-locked host memory (cuMemHostAlloc's) at its address: true, as
// CUDA's unified addressing lets every context's kernels reach every context's, unless
// softgpuSetKernelHostAccess(0) said otherwise. rgpu's server does: contexts of different
// tenants share its process, and its page-locked memory is its own (copies it stages, the gates
// of kernel turns), which no tenant's kernel needs (tenants' host memory is in their own
// processes). Copies and stream memory operations reach it either way.
bool KernelHostAccess();
void SetKernelHostAccess(bool reach);

// Page-locked host memory that the kernels and copies of every context reach at its own address
// (CUDA's unified addressing: cuMemHostAlloc memory is accessible from all contexts).
// Thread-safe.
class HostMappings {
 public:
  void Insert(std::shared_ptr<Allocation> mapping);
  // Removes the mapping starting at `address`; returns it (null if none).
  std::shared_ptr<Allocation> Remove(uint64_t address);
  // The mapping containing [address, address + size), or null; the reference keeps it mapped.
  std::shared_ptr<Allocation> Find(uint64_t address, uint64_t size) const;

 private:
  mutable std::shared_mutex mu_;
  std::map<uint64_t, std::shared_ptr<Allocation>> mappings_;  // by base address
};
HostMappings& GlobalHostMappings();

// The allocations of one context. Thread-safe.
class AddressSpace {
 public:
  explicit AddressSpace(DeviceMemoryBudget* budget) : budget_(budget) {}
  ~AddressSpace();
  AddressSpace(const AddressSpace&) = delete;
  AddressSpace& operator=(const AddressSpace&) = delete;

  enum class Result { kOk, kOutOfMemory, kInvalid, kAddressInUse };

  // Allocates `size` (> 0) bytes and stores the device address in *address.
  Result Allocate(uint64_t size, uint64_t* address,
                  AllocationKind kind = AllocationKind::kInternal);
  // Allocates `size` (> 0) bytes at device address `address` exactly (ClaimAddresses):
  // kAddressInUse when that range is not free in this process, kInvalid when the address is not
  // one (unaligned, outside the window).
  Result AllocateAt(uint64_t address, uint64_t size,
                    AllocationKind kind = AllocationKind::kInternal);
  // Allocates `size` (> 0) bytes of native managed memory (MapNative, charged to the budget like
  // Allocate, usage hints attached) and stores its address in *address. kOutOfMemory also when
  // the host cannot map memory at a device address.
  Result AllocateManaged(uint64_t size, uint64_t* address,
                         AllocationKind kind = AllocationKind::kManaged);
  // Removes the allocation that starts exactly at `address` from this address space; its memory
  // (and its share of the budget) goes with the last reference to it.
  Result Free(uint64_t address);
  // Makes `mapping` (a range of physical memory at a reserved address, or an IPC alias; reserved
  // bytes 0: the memory is charged already) part of this address space; kInvalid if it overlaps.
  Result Insert(std::shared_ptr<Allocation> mapping);
  // Removes everything, peers included (context teardown), and starts a new generation: peers
  // that recorded the old one no longer reach this space (a reset primary context revives it).
  void FreeAll();
  uint64_t generation() const { return generation_.load(); }
  // Starts a new generation without freeing anything (a primary context revived after a reset:
  // access enabled while it was gone does not reach it either).
  void Renew() { generation_.fetch_add(1); }

  // The allocation containing [address, address + size), or null. The returned reference keeps
  // the host memory alive even if the allocation is freed meanwhile.
  std::shared_ptr<Allocation> Find(uint64_t address, uint64_t size) const;
  // Host pointer for [address, address + size) or null; valid only while the allocation lives
  // (callers hold the context's execution ordering, which keeps frees out).
  uint8_t* Translate(uint64_t address, uint64_t size) const;

  // Peer access (cuCtxEnablePeerAccess): address spaces of other contexts whose allocations this
  // context's kernels and copies may also reach, one way. Peers are held weakly and by
  // generation: a peer destroyed or reset later is simply no longer reached.
  enum class PeerResult { kOk, kAlreadyEnabled, kNotEnabled };
  PeerResult EnablePeer(const std::shared_ptr<const AddressSpace>& peer);
  PeerResult DisablePeer(const AddressSpace* peer);
  // The allocation containing [address, address + size) in one of the peers, or null. Like
  // Find, the reference keeps the host memory alive.
  std::shared_ptr<Allocation> FindInPeers(uint64_t address, uint64_t size) const;

 private:
  struct Peer {
    const AddressSpace* id = nullptr;  // identity only
    std::weak_ptr<const AddressSpace> space;
    uint64_t generation = 0;  // the peer's generation when access was enabled
    // The peer space while it lives in the generation access was given to, or null.
    std::shared_ptr<const AddressSpace> Live() const;
  };

  DeviceMemoryBudget* budget_;
  mutable std::shared_mutex mu_;
  std::map<uint64_t, std::shared_ptr<Allocation>> allocations_;  // by base address
  std::atomic<uint64_t> generation_{0};
  mutable std::mutex peers_mu_;
  std::vector<Peer> peers_;  // guarded by peers_mu_
};

}  // namespace softgpu
