// CUDA IPC (cuIpcGetMemHandle, cuIpcOpenMemHandle, cuIpcCloseMemHandle, cuIpcGetEventHandle,
// cuIpcOpenEventHandle) between the contexts of this process: each context plays the part CUDA
// gives a process, so that rgpu-server can share memory and events between two sessions of one
// tenant.
//
// Memory: opening a handle puts an alias of the exporter's cuMemAlloc allocation into the
// importing context's address space at the same device address (addresses are process-wide), over
// the same host bytes; the alias keeps the allocation alive, so freeing it in the exporter (or
// destroying the exporter) revokes the handle but leaves importers a valid mapping until they
// close it, and the bytes stay charged to the device until the last reference goes.
// Events: an opened handle is a new event of the importing context sharing the exported event's
// recorded state (EventState).
//
// Handles carry a random 128-bit nonce that must match this process's table of live exports, so a
// forged, altered or revoked handle is refused (CUDA_ERROR_INVALID_VALUE). Layout, 64 bytes,
// integers little-endian:
//   [0, 8)   magic: "sgpuIPCm" (memory) or "sgpuIPCe" (event)
//   [8, 12)  layout version, 1
//   [12, 16) ordinal of the exporting context's device
//   [16, 24) memory: the allocation's base address; event: the export's id
//   [24, 32) memory: the allocation's size in bytes; event: 0
//   [32, 48) the export's nonce
//   [48, 64) zero
#include <cuda.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "softgpu/api_util.h"
#include "softgpu/ipc.h"

namespace softgpu {
namespace {

constexpr char kMemMagic[8] = {'s', 'g', 'p', 'u', 'I', 'P', 'C', 'm'};
constexpr char kEventMagic[8] = {'s', 'g', 'p', 'u', 'I', 'P', 'C', 'e'};
constexpr uint32_t kLayoutVersion = 1;
static_assert(CU_IPC_HANDLE_SIZE == 64, "the handle layout assumes 64 bytes");

Nonce FreshNonce() {
  Nonce n;
  auto* bytes = reinterpret_cast<uint8_t*>(n.words);
  size_t have = 0;
  while (have < sizeof(n.words)) {
    const ssize_t got = getrandom(bytes + have, sizeof(n.words) - have, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("getrandom failed");
    }
    have += static_cast<size_t>(got);
  }
  return n;
}

struct HandleFields {
  uint32_t device = 0;
  uint64_t key = 0;   // memory: base address; event: export id
  uint64_t size = 0;  // memory: allocation size; event: 0
  Nonce nonce;
};

void Encode(const char (&magic)[8], const HandleFields& f, char (&out)[CU_IPC_HANDLE_SIZE]) {
  memset(out, 0, sizeof(out));
  memcpy(out, magic, 8);
  memcpy(out + 8, &kLayoutVersion, 4);
  memcpy(out + 12, &f.device, 4);
  memcpy(out + 16, &f.key, 8);
  memcpy(out + 24, &f.size, 8);
  memcpy(out + 32, f.nonce.words, 16);
}

bool Decode(const char (&magic)[8], const char (&in)[CU_IPC_HANDLE_SIZE], HandleFields* f) {
  uint32_t version;
  memcpy(&version, in + 8, 4);
  if (memcmp(in, magic, 8) != 0 || version != kLayoutVersion) return false;
  for (size_t i = 48; i < CU_IPC_HANDLE_SIZE; ++i) {
    if (in[i] != 0) return false;
  }
  memcpy(&f->device, in + 12, 4);
  memcpy(&f->key, in + 16, 8);
  memcpy(&f->size, in + 24, 8);
  memcpy(f->nonce.words, in + 32, 16);
  return true;
}

uint32_t Ordinal(const Context& ctx) { return static_cast<uint32_t>(ctx.device()->ordinal()); }

// The allocation an export names while it can still be opened (the exporter is alive and still
// holds it), or null.
std::shared_ptr<Allocation> Live(const MemExport& e, std::shared_ptr<Context>* exporter) {
  *exporter = e.exporter.lock();
  std::shared_ptr<Allocation> a = e.allocation.lock();
  if (*exporter == nullptr || !(*exporter)->alive() || a == nullptr) return nullptr;
  if ((*exporter)->memory().Find(a->base, 1) != a) return nullptr;
  return a;
}

// The alias of an open IPC mapping at exactly `dptr` in `ctx`, or null. Under IpcTables::mu.
std::shared_ptr<Allocation> OpenAlias(Context& ctx, CUdeviceptr dptr) {
  std::shared_ptr<Allocation> a = ctx.memory().Find(dptr, 1);
  if (a == nullptr || a->kind != AllocationKind::kIpcAlias || a->base != dptr ||
      a->ipc_opens == 0) {
    return nullptr;
  }
  return a;
}

}  // namespace

}  // namespace softgpu

using namespace softgpu;

SOFTGPU_EXPORT CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    if (pHandle == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<Allocation> a = ctx->memory().Find(dptr, 1);
    // Only the base of cuMemAlloc/cuMemAllocPitch memory (not an array, a module variable, a
    // cuMemMap mapping or memory opened from another context).
    if (a == nullptr || a->base != dptr || a->kind != AllocationKind::kMemAlloc) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    IpcTables& t = GetIpcTables();
    std::lock_guard lock(t.mu);
    auto it = t.memory.find(dptr);
    if (it == t.memory.end() || it->second.allocation.lock() != a) {
      // New export (exporting again returns the same handle while it lasts).
      MemExport e;
      e.nonce = FreshNonce();
      e.exporter_id = ctx.get();
      e.exporter = ctx;
      e.allocation = a;
      e.size = a->size;
      e.device = Ordinal(*ctx);
      it = t.memory.insert_or_assign(dptr, std::move(e)).first;
    }
    HandleFields f;
    f.device = it->second.device;
    f.key = dptr;
    f.size = it->second.size;
    f.nonce = it->second.nonce;
    Encode(kMemMagic, f, pHandle->reserved);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                                      unsigned int Flags) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    if (pdptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (Flags & ~static_cast<unsigned>(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    HandleFields f;
    if (!Decode(kMemMagic, handle.reserved, &f)) return CUDA_ERROR_INVALID_VALUE;
    IpcTables& t = GetIpcTables();
    std::lock_guard lock(t.mu);
    auto it = t.memory.find(f.key);
    if (it == t.memory.end() || !(it->second.nonce == f.nonce) || it->second.size != f.size ||
        it->second.device != f.device) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    // As the real driver refuses a handle in the process that made it.
    if (it->second.exporter_id == ctx.get()) return CUDA_ERROR_INVALID_CONTEXT;
    std::shared_ptr<Context> exporter;
    std::shared_ptr<Allocation> a = Live(it->second, &exporter);
    if (a == nullptr) {
      t.memory.erase(it);
      return CUDA_ERROR_INVALID_VALUE;
    }
    // Another device's memory is peer memory: reachable (all devices share the host), but only
    // when the caller asks for peer access with the flag (the exporter plays another process,
    // whose contexts cuCtxEnablePeerAccess does not name).
    if (exporter->device() != ctx->device() && !(Flags & CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) {
      return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    }
    if (std::shared_ptr<Allocation> open = OpenAlias(*ctx, a->base); open != nullptr) {
      if (open->owner.get() != static_cast<void*>(a.get())) return CUDA_ERROR_INVALID_VALUE;
      ++open->ipc_opens;  // opened again: one more reference, the same pointer
      *pdptr = a->base;
      return CUDA_SUCCESS;
    }
    auto alias = std::make_shared<Allocation>();
    alias->base = a->base;
    alias->size = a->size;
    alias->reserved = 0;  // the exporter's allocation stays charged while this keeps it
    alias->host = a->host;
    alias->zeroed = a->zeroed;
    alias->kind = AllocationKind::kIpcAlias;
    alias->ipc_opens = 1;
    alias->owner = a;
    if (ctx->memory().Insert(std::move(alias)) != AddressSpace::Result::kOk) {
      return CUDA_ERROR_MAP_FAILED;
    }
    *pdptr = a->base;
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    IpcTables& t = GetIpcTables();
    {
      std::lock_guard lock(t.mu);
      std::shared_ptr<Allocation> a = OpenAlias(*ctx, dptr);
      if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
      if (a->ipc_opens > 1) {
        --a->ipc_opens;
        return CUDA_SUCCESS;
      }
    }
    // The last reference: like cuMemFree, wait for the work that may still use the mapping
    // (outside the lock: other contexts' IPC calls must not wait for this one's kernels).
    ctx->WaitForAllStreams();
    std::lock_guard lock(t.mu);
    std::shared_ptr<Allocation> a = OpenAlias(*ctx, dptr);
    if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;  // a concurrent close took it
    if (--a->ipc_opens == 0) ctx->memory().Free(dptr);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuIpcGetEventHandle(CUipcEventHandle* pHandle, CUevent event) {
  return Guard([&] {
    if (CUresult r = CheckInitialized(); r != CUDA_SUCCESS) return r;
    if (pHandle == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::shared_ptr<Event> e = GetDriver().events.Find(event);
    if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    std::shared_ptr<Context> ctx = GetDriver().contexts.Find(e->context());
    if (ctx == nullptr || !ctx->alive()) return CUDA_ERROR_INVALID_CONTEXT;
    // cuEventCreate allows CU_EVENT_INTERPROCESS only with CU_EVENT_DISABLE_TIMING.
    if (!(e->flags() & CU_EVENT_INTERPROCESS)) return CUDA_ERROR_INVALID_VALUE;
    IpcTables& t = GetIpcTables();
    std::lock_guard lock(t.mu);
    auto it = t.events.find(e->ipc_export_id);
    if (it == t.events.end()) {
      EventExport x;
      x.nonce = FreshNonce();
      x.exporter_id = ctx.get();
      x.exporter = ctx;
      x.event = e;
      x.device = Ordinal(*ctx);
      const uint64_t id = t.next_event_id++;
      it = t.events.emplace(id, std::move(x)).first;
      e->ipc_export_id = id;
    }
    HandleFields f;
    f.device = it->second.device;
    f.key = it->first;
    f.nonce = it->second.nonce;
    Encode(kEventMagic, f, pHandle->reserved);
    return CUDA_SUCCESS;
  });
}

SOFTGPU_EXPORT CUresult CUDAAPI cuIpcOpenEventHandle(CUevent* phEvent, CUipcEventHandle handle) {
  return Guard([&] {
    std::shared_ptr<Context> ctx;
    if (CUresult r = UsableContext(&ctx); r != CUDA_SUCCESS) return r;
    if (phEvent == nullptr) return CUDA_ERROR_INVALID_VALUE;
    HandleFields f;
    if (!Decode(kEventMagic, handle.reserved, &f) || f.size != 0) return CUDA_ERROR_INVALID_VALUE;
    IpcTables& t = GetIpcTables();
    std::lock_guard lock(t.mu);
    auto it = t.events.find(f.key);
    if (it == t.events.end() || !(it->second.nonce == f.nonce) || it->second.device != f.device) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (it->second.exporter_id == ctx.get()) return CUDA_ERROR_INVALID_CONTEXT;
    std::shared_ptr<Context> exporter = it->second.exporter.lock();
    std::shared_ptr<Event> source = it->second.event.lock();
    if (exporter == nullptr || !exporter->alive() || source == nullptr ||
        GetDriver().events.Find(source.get()) != source) {
      t.events.erase(it);
      return CUDA_ERROR_INVALID_VALUE;
    }
    // Behaves like an event made here with CU_EVENT_DISABLE_TIMING (and may be exported again).
    auto opened = std::make_shared<Event>(
        ctx.get(), CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS, source->state());
    GetDriver().events.Add(opened);
    *phEvent = reinterpret_cast<CUevent>(opened.get());
    return CUDA_SUCCESS;
  });
}
