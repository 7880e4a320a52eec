// Managed (unified) memory and mapped pinned memory for a device on another machine: one address
// that the program uses on the host and in kernels, with CUDA's rules for devices without
// concurrent managed access (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 0): while device
// work is pending the host has no access; once the host touches a page again it is fetched back.
//
// Each allocation is device memory on the server at address A and, in this process, a shared
// memory object mapped twice: at A (the program's view, whose protection follows each page's
// state) and at a private address (the engine's view, always read-write: fetched bytes land
// there and flushed bytes are read from there, so no thread of the program ever sees a page
// half filled). A page is
//   kInvalid (no access): the device's copy is current; a host access faults, and the fault
//     handler waits for the device's pending work, fetches the page with read-ahead (16 pages,
//     doubling while faults walk forward, up to 32 MiB) and makes them kClean, or kDirty when the
//     fault is known to be a write;
//   kClean (read-only): both copies agree; a write faults and makes the page kDirty (with the
//     pages after it, a window growing the same way);
//   kDirty (read-write): the host's copy is newer; it travels before the next device work.
// A new allocation is kDirty and zero on both sides (the server's memory is scrubbed), so pages
// the host writes travel and pages it leaves alone do not. Before device work (BeforeDeviceWork:
// launches, copies, memsets, graph launches, prefetches) dirty pages travel in runs, one copy
// each, and every page becomes kInvalid.
//
// While managed memory exists the engine's fault handler is the process's SIGSEGV handler. A
// fault outside managed memory goes to the handler the program had, or installs later (before
// device work the engine checks the installed handler; if the program replaced it, the
// program's becomes the one faults are passed to and the engine's is put back), called as the
// kernel would have called it. No rgpu code acts on those faults.
//
// Thread-safe. The engine never touches the program's view itself, so a client call never
// faults inside the client.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>

namespace rgpu::client {

// Whether any managed or mapped allocation exists (the hooks below cost nothing until one does).
extern std::atomic<bool> g_managed_memory_exists;

// Allocates `bytes` of managed memory in `ctx` (cuMemAllocManaged; `host_mapped`: the mapped
// pinned memory of cuMemHostAlloc(CU_MEMHOSTALLOC_DEVICEMAP), host memory the device reaches at
// the same address). *address is the same on host and device; the range is in Memory() (type
// DEVICE, or HOST when host_mapped, `managed` set).
CUresult AllocateManaged(CUctx_st* ctx, size_t bytes, bool host_mapped, uint64_t* address);

// Makes the __managed__ variable of `ctx` at [address, address+bytes) (module memory the server
// placed on pages of its own) managed memory of this process at the same address, its pages
// invalid (the device holds the initial values). Adopting it again returns at once.
// CUDA_ERROR_NOT_SUPPORTED when the address is not page aligned or not free here.
CUresult AdoptManaged(CUctx_st* ctx, uint64_t address, size_t bytes);
// Forgets an adopted variable (its module is unloaded); nothing when `address` is none.
void ForgetAdopted(uint64_t address);

// Makes the program's own memory at [address, address+bytes) mapped host memory of `ctx`
// (cuMemHostRegister with CU_MEMHOSTREGISTER_DEVICEMAP, `flags` its flags): its pages become
// managed memory of this process at the same address, with their contents (swapped under the
// engine's lock: a thread writing them meanwhile waits and writes again), and device memory at
// another address. The range is in Memory() (type HOST, managed, not freeable, `device_shift` to
// its device address), and so is its device side (type DEVICE, not freeable).
// CUDA_ERROR_NOT_SUPPORTED, naming why, when the range does not begin and end on page
// boundaries (other data on its pages would be protected with it), when its pages are not the
// program's private writable memory (a shared or file mapping, the stack) or when they already
// hold pinned, registered or managed memory; the program's memory is then as it was.
CUresult RegisterMapped(CUctx_st* ctx, uint64_t address, size_t bytes, unsigned flags);
// Undoes RegisterMapped for the range starting at `address`: waits for the device's work, brings
// the device's bytes back and gives the program ordinary private pages at the same address with
// the current contents. CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED when there is no such range.
CUresult UnregisterMapped(uint64_t address);
// Unregisters every registered mapped range of `ctx` (the context is about to be destroyed or
// reset: its device's bytes are brought back first).
void UnregisterMappedOf(CUctx_st* ctx);

// Frees the managed allocation starting at `address` (stream-ordered on the server, like
// cuMemFree); CUDA_ERROR_INVALID_VALUE when there is none.
CUresult FreeManaged(uint64_t address);

// Forgets the managed allocations of `ctx` (the context is gone, and its memory with it).
void ForgetManaged(CUctx_st* ctx);

// What device work may do to memory it names.
enum class DeviceAccess { kReads, kReadsAndWrites };

// Before device work: dirty pages of every managed allocation travel to the device; when the
// work may write (`access`), every page also becomes inaccessible to the host until touched
// again. Reentrant calls (the engine's own copies) do nothing.
CUresult BeforeDeviceWorkSlow(DeviceAccess access);
inline CUresult BeforeDeviceWork(DeviceAccess access = DeviceAccess::kReadsAndWrites) {
  return g_managed_memory_exists.load(std::memory_order_acquire) ? BeforeDeviceWorkSlow(access)
                                                                 : CUDA_SUCCESS;
}

// cuMemPrefetchAsync: to the device (`to_host` false), the range's dirty pages travel now, in one
// copy per run, and its pages become kInvalid; to the host, the stream's work is waited for and
// the range is fetched whole (one copy) and becomes kClean. [address, address+bytes) must lie in
// one managed allocation.
CUresult PrefetchManaged(uint64_t address, size_t bytes, bool to_host, CUstream stream);

// Usage hints of cuMemAdvise, kept for cuMemRangeGetAttribute (they change where data lives on
// a GPU, not what the program reads). CUDA_ERROR_INVALID_VALUE outside managed memory.
CUresult AdviseManaged(uint64_t address, size_t bytes, CUmem_advise advice, CUmemLocation location);
// One attribute of cuMemRangeGetAttribute for [address, address+bytes) of managed memory.
CUresult ManagedRangeAttribute(void* data, size_t data_size, CUmem_range_attribute attribute,
                               uint64_t address, size_t bytes);

}  // namespace rgpu::client
