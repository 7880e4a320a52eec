#include "client/managed_memory.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "client/impl.h"
#include "client/memory_map.h"

namespace rgpu::client {

std::atomic<bool> g_managed_memory_exists{false};

namespace {

namespace calls = rgpu::calls;

constexpr uint64_t kPage = 4096;
// Pages a fault fetches (or, for a write to clean pages, opens for writing) from the faulting
// one on: starts here and doubles while faults walk forward, up to the maximum (a program
// streaming over its data then faults a few times per allocation, not once per window).
constexpr uint64_t kReadAheadPages = 16;
constexpr uint64_t kMaxReadAheadPages = 8192;  // 32 MiB
// How much of the engines' views may be registered with the transport at once (registration
// pins pages on RDMA transports); views beyond it are registered per transfer.
constexpr uint64_t kMaxRegisteredViews = 1ull << 30;
std::atomic<uint64_t> g_registered_view_bytes{0};
// Attempts to find a device address that is also free in this process.
constexpr int kPlacementAttempts = 8;

enum class PageState : uint8_t { kInvalid, kClean, kDirty };

// Usage hints per page (cuMemAdvise; cuMemPrefetchAsync's last target).
struct PageHints {
  bool read_mostly = false;
  int preferred = CU_DEVICE_INVALID;      // a device ordinal, CU_DEVICE_CPU or none
  int last_prefetch = CU_DEVICE_INVALID;  // the same
  uint64_t accessed_by = 0;               // bit d: device d; bit 63: the CPU
};

struct Allocation {
  uint64_t base = 0;         // the program's view (page aligned)
  uint64_t size = 0;         // bytes the program asked for (program pages: `mapped`)
  uint64_t mapped = 0;       // bytes of both views (whole pages)
  uint64_t device = 0;       // the device's address of `base`: `base` but for program pages
  uint64_t device_base = 0;  // what the server allocated (freed with it)
  uint64_t range_base = 0;   // where its range in Memory() starts
  // The program's own pages, registered mapped (RegisterMapped): given back, not unmapped.
  bool program_pages = false;
  CUctx_st* ctx = nullptr;
  int fd = -1;
  uint8_t* view = nullptr;  // the engine's read-write view of the same pages
  bool registered = false;  // the view is registered with the transport (MakeView)
  std::vector<PageState> state;
  std::vector<bool> device_zero;  // the device's copy of the page is known to be all zero
  std::vector<PageHints> hints;
  bool host_mapped = false;
  bool adopted = false;         // a module's __managed__ variable: the module frees it
  bool host_accessible = true;  // some page is not kInvalid
  // The window of the last fault of each kind (fetches; writes to clean pages), kept apart so
  // that a program reading then writing each element walks forward in both.
  struct Window {
    uint64_t next_pages = kReadAheadPages;
    uint64_t last_page = ~0ull;
    // The size of the window starting at `page`: doubled when `page` follows the last one.
    uint64_t Next(uint64_t page) {
      if (last_page != ~0ull && page > last_page && page <= last_page + next_pages) {
        next_pages = std::min(next_pages * 2, kMaxReadAheadPages);
      } else if (page != last_page) {
        next_pages = kReadAheadPages;
      }
      last_page = page;
      return next_pages;
    }
  };
  Window fetch_window, write_window;
};

class Engine {
 public:
  static Engine& Get() {
    static Engine* engine = new Engine();  // lives as long as the process (handlers run late)
    return *engine;
  }

  CUresult Allocate(CUctx_st* ctx, size_t bytes, bool host_mapped, uint64_t* address);
  CUresult RegisterProgramPages(CUctx_st* ctx, uint64_t address, size_t bytes, unsigned flags);
  CUresult UnregisterProgramPages(uint64_t address);
  void UnregisterProgramPagesOf(CUctx_st* ctx);
  CUresult Adopt(CUctx_st* ctx, uint64_t address, size_t bytes);
  void ForgetAdopted(uint64_t address);
  CUresult Free(uint64_t address);
  void ForgetContext(CUctx_st* ctx);
  CUresult BeforeDeviceWork(DeviceAccess access);
  CUresult Prefetch(uint64_t address, size_t bytes, bool to_host, CUstream stream);
  CUresult Advise(uint64_t address, size_t bytes, CUmem_advise advice, CUmemLocation location);
  CUresult RangeAttribute(void* data, size_t data_size, CUmem_range_attribute attribute,
                          uint64_t address, size_t bytes);
  // The fault handler's work: true when `address` is managed memory and the access may now be
  // retried. `write`: the access is known to be a write (the page may then be made writable at
  // once instead of faulting again).
  bool HandleFault(uint64_t address, bool write);
  // The handler the program had for SIGSEGV, to pass other faults to.
  struct sigaction previous() {
    std::lock_guard<std::mutex> lock(handler_mu_);
    return previous_;
  }
  void ResetPrevious() {
    std::lock_guard<std::mutex> lock(handler_mu_);
    previous_ = {};
    previous_.sa_handler = SIG_DFL;
  }

 private:
  // The allocation containing [address, address+bytes), or null (mu_ held).
  Allocation* Find(uint64_t address, uint64_t bytes = 1);
  // Pushes the dirty pages of pages [first, last) of `a` to the device and makes them kClean,
  // read-only (`then_invalid`: inaccessible at once, for the caller invalidates the range next)
  // (mu_ held).
  CUresult Flush(Allocation& a, uint64_t first, uint64_t last, bool then_invalid);
  // Makes pages [first, last) of `a` inaccessible to the host (mu_ held). Fails (the pages as
  // they were) when the kernel cannot change their protection.
  CUresult Invalidate(Allocation& a, uint64_t first, uint64_t last);
  // Fetches pages [first, last) of `a` from the device into the engine's view and makes them
  // readable (mu_ held; the device's work is done).
  CUresult Fetch(Allocation& a, uint64_t first, uint64_t last);
  // Waits for the device work that may still write managed memory of `ctx` (mu_ held).
  CUresult WaitForDevice(CUctx_st* ctx);
  // Installs the fault handler, or installs it again when the program has replaced it
  // (remembering the program's).
  void ArmHandler();
  static void OnFault(int sig, siginfo_t* info, void* context);
  void Release(Allocation& a);
  // Gives the program ordinary private pages in place of program pages `a`, with the bytes of the
  // engine's view, and drops the view (mu_ held). A thread touching them meanwhile waits for mu_
  // and then retries its access once (returned_).
  void ReturnProgramPages(Allocation& a);
  // Makes `a`'s shared memory object of `mapped` bytes and the engine's view of it, registered
  // with the transport.
  static CUresult MakeView(const char* name, uint64_t mapped, Allocation* a);
  // Undoes MakeView.
  static void DropView(Allocation& a);
  // Gives `a` (base, size, mapped and ctx set) its pages, all in `initial` state (`device_zero`:
  // the device's copy is known zero), records it and its range in Memory(), and arms the fault
  // handler.
  void Register(std::unique_ptr<Allocation> a, PageState initial, bool device_zero,
                CUmemorytype type, unsigned host_flags, bool freeable);

  std::mutex mu_;
  std::map<uint64_t, std::unique_ptr<Allocation>> allocations_;  // by base
  // Program pages given back lately, [base, end) and when (a count): a fault in one is retried
  // once per thread, for a thread that faulted while they were being given back (mu_ held).
  struct Returned {
    uint64_t base, end, generation;
  };
  std::vector<Returned> returned_;
  uint64_t returns_ = 0;
  // Device work was submitted since the device was last waited for.
  bool device_busy_ = false;
  std::mutex handler_mu_;
  struct sigaction previous_ = {};
  bool armed_ = false;
};

// Bytes to copy for pages [first, last) of `a`: whole pages, except that an adopted variable's
// last page ends at the variable (the server knows the variable's bytes as the session's, not
// the padding after them).
uint64_t CopyBytes(const Allocation& a, uint64_t first, uint64_t last) {
  const uint64_t end = a.adopted ? std::min(last * kPage, a.size) : last * kPage;
  return end - first * kPage;
}

// Says on stderr why the page at `address` cannot be given to the host (async-signal-safe: the
// fault handler's last word before the fault goes on to the program's handler or the default
// action). A kernel ended for running too long while the host waited for it is most likely one
// that waits for the host itself: with no concurrent managed access it cannot finish.
void ReportFetchFailure(uint64_t address, CUresult r) {
  const char* name = nullptr;
  rgpu_impl_cuGetErrorName(r, &name);
  const char* why =
      r == CUDA_ERROR_LAUNCH_TIMEOUT
          ? "; the host waited for a kernel that ran past the server's time limit: this device "
            "has no concurrent managed access (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 0, "
            "HOST_NATIVE_ATOMIC_SUPPORTED = 0), so the host touches managed memory only after the "
            "device's work, and a kernel that waits for the host (a flag or system-wide atomics "
            "shared with host code while it runs) cannot finish"
          : "";
  char msg[640];
  const int n = snprintf(msg, sizeof msg,
                         "rgpu: managed memory at %#llx could not be fetched from the GPU (%s)%s; "
                         "the program cannot go on\n",
                         static_cast<unsigned long long>(address), name ? name : "?", why);
  if (n > 0) (void)!write(2, msg, std::min<size_t>(n, sizeof msg - 1));
}

// Whether the fault in `context` was a write, where the processor says (x86-64: the page-fault
// error code's write bit); false where it is not known (the write then faults once more).
bool FaultIsWrite(const void* context) {
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(context);
  return context != nullptr && (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
  (void)context;
  return false;
#endif
}

// Why the pages [base, end) cannot become managed memory in place, or null when they can: every
// page must be mapped, readable and writable, and private to the process (replacing a shared
// mapping would cut it off from its file or its other users), and not the main thread's stack
// (a mapping that grows down).
const char* WhyNotProgramPages(uint64_t base, uint64_t end) {
  FILE* maps = fopen("/proc/self/maps", "re");
  if (maps == nullptr) return "/proc/self/maps cannot be read";
  const char* why = nullptr;
  uint64_t covered = base;  // [base, covered) is fine
  char* line = nullptr;
  size_t capacity = 0;
  while (covered < end && why == nullptr && getline(&line, &capacity, maps) > 0) {
    unsigned long long lo = 0, hi = 0;
    char perms[8] = {};
    int path_at = 0;
    if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &lo, &hi, perms, &path_at) < 3) continue;
    if (hi <= covered) continue;
    if (lo > covered || lo >= end) {
      why = "part of it is not mapped";
    } else if (perms[0] != 'r' || perms[1] != 'w') {
      why = "part of it is not readable and writable";
    } else if (perms[3] != 'p') {
      why = "part of it is shared memory or a shared file mapping";
    } else if (path_at > 0 && strncmp(line + path_at, "[stack", 6) == 0) {
      why = "it is on the main thread's stack";
    }
    covered = hi;
  }
  free(line);
  fclose(maps);
  if (why == nullptr && covered < end) why = "part of it is not mapped";
  return why;
}

// Moves the mapping at `from` to `to`, replacing what is there (mremap with MREMAP_FIXED). The
// system call itself: UCX's memory hooks, which may stand in for mremap in this process, pass
// mremap only its first four arguments.
bool MoveMapping(void* from, uint64_t bytes, void* to) {
  return reinterpret_cast<void*>(
             syscall(SYS_mremap, from, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, to)) == to;
}

// The engine's own copies must not come back into BeforeDeviceWork.
thread_local bool t_in_engine = false;

struct EngineScope {
  EngineScope() { t_in_engine = true; }
  ~EngineScope() { t_in_engine = false; }
};

Allocation* Engine::Find(uint64_t address, uint64_t bytes) {
  auto it = allocations_.upper_bound(address);
  if (it == allocations_.begin()) return nullptr;
  --it;
  Allocation& a = *it->second;
  if (address - a.base >= a.size || bytes > a.size - (address - a.base)) return nullptr;
  return &a;
}

CUresult Engine::Allocate(CUctx_st* ctx, size_t bytes, bool host_mapped, uint64_t* address) {
  if (bytes == 0 || bytes > (1ull << 46)) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t mapped = (bytes + kPage - 1) / kPage * kPage;
  // One page more than the mapping, so that a page-aligned start lies inside.
  const uint64_t device_bytes = mapped + kPage;
  auto a = std::make_unique<Allocation>();
  if (CUresult r = MakeView("rgpu-managed", mapped, a.get()); r != CUDA_SUCCESS) return r;
  // The device allocation's address must also be free here; the server never hands out an
  // address twice, so another allocation is another chance.
  std::vector<uint64_t> unusable;
  CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
  for (int attempt = 0; attempt < kPlacementAttempts; ++attempt) {
    calls::MemAlloc::Results allocated;
    r = Server().Call<calls::MemAlloc>(ctx->remote, {.bytesize = device_bytes}, &allocated);
    if (r != CUDA_SUCCESS) break;
    const uint64_t base = (allocated.dptr + kPage - 1) / kPage * kPage;
    void* at = mmap(reinterpret_cast<void*>(base), mapped, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_FIXED_NOREPLACE, a->fd, 0);
    if (at == reinterpret_cast<void*>(base)) {
      a->base = base;
      a->device = base;
      a->range_base = base;
      a->device_base = allocated.dptr;
      break;
    }
    if (at != MAP_FAILED) munmap(at, mapped);  // a kernel that took the address as a hint
    unusable.push_back(allocated.dptr);
    r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  for (uint64_t d : unusable) Server().Post<calls::MemFree>(ctx->remote, {.dptr = d});
  if (a->base == 0) {
    RGPU_LOG_WARN("cuMemAllocManaged: no device address of %llu bytes is free in this process",
                  static_cast<unsigned long long>(bytes));
    DropView(*a);
    return r != CUDA_SUCCESS ? r : CUDA_ERROR_OUT_OF_MEMORY;
  }
  a->size = bytes;
  a->mapped = mapped;
  a->ctx = ctx;
  a->host_mapped = host_mapped;
  *address = a->base;
  Register(std::move(a), PageState::kDirty, true,
           host_mapped ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE,
           host_mapped ? CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE : 0, true);
  return CUDA_SUCCESS;
}

CUresult Engine::MakeView(const char* name, uint64_t mapped, Allocation* a) {
  a->fd = memfd_create(name, MFD_CLOEXEC);
  if (a->fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  void* view = MAP_FAILED;
  if (ftruncate(a->fd, static_cast<off_t>(mapped)) == 0) {
    view = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
  }
  if (view == MAP_FAILED) {
    close(a->fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  a->view = static_cast<uint8_t*>(view);
  a->mapped = mapped;
  // Every transfer of the allocation's pages starts or ends in this view: registered with the
  // transport, as pinned memory is, they need no registration each (a failure only costs speed).
  // Registration pins the pages on RDMA transports, so only up to a budget (a program may ask
  // for more managed memory than the host has); the rest is registered per transfer.
  if (g_registered_view_bytes.fetch_add(mapped) + mapped > kMaxRegisteredViews) {
    g_registered_view_bytes.fetch_sub(mapped);
    return CUDA_SUCCESS;
  }
  Status s = LocalTransport().RegisterHostMemory(a->view, mapped);
  if (!s.ok()) {
    g_registered_view_bytes.fetch_sub(mapped);
    RGPU_LOG_DEBUG("managed memory not registered with the transport: %s", s.ToString().c_str());
    return CUDA_SUCCESS;
  }
  a->registered = true;
  return CUDA_SUCCESS;
}

void Engine::Register(std::unique_ptr<Allocation> a, PageState initial, bool device_zero,
                      CUmemorytype type, unsigned host_flags, bool freeable) {
  const uint64_t pages = a->mapped / kPage;
  a->state.assign(pages, initial);
  a->device_zero.assign(pages, device_zero);
  a->hints.assign(pages, PageHints{});
  a->host_accessible = initial != PageState::kInvalid;
  MemoryRange range;
  range.base = a->base;
  range.size = a->size;
  range.type = type;
  range.ctx = a->ctx;
  range.managed = true;
  range.freeable = freeable;
  range.host_flags = host_flags;
  {
    std::lock_guard<std::mutex> lock(mu_);
    allocations_[a->base] = std::move(a);
    g_managed_memory_exists.store(true, std::memory_order_release);
  }
  Memory().Erase(range.base);  // an adopted variable was known as a plain module global
  Memory().Insert(range);
  ArmHandler();
}

CUresult Engine::Adopt(CUctx_st* ctx, uint64_t address, size_t bytes) {
  if (bytes == 0 || address % kPage != 0) {
    RGPU_LOG_WARN("__managed__ variable at %#llx: not on pages of its own; not supported",
                  static_cast<unsigned long long>(address));
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = allocations_.find(address);
    if (it != allocations_.end())
      return it->second->adopted ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  }
  const uint64_t mapped = (bytes + kPage - 1) / kPage * kPage;
  auto a = std::make_unique<Allocation>();
  if (CUresult r = MakeView("rgpu-managed-variable", mapped, a.get()); r != CUDA_SUCCESS) return r;
  void* at = mmap(reinterpret_cast<void*>(address), mapped, PROT_NONE,
                  MAP_SHARED | MAP_FIXED_NOREPLACE, a->fd, 0);
  if (at != reinterpret_cast<void*>(address)) {
    if (at != MAP_FAILED) munmap(at, mapped);
    DropView(*a);
    RGPU_LOG_WARN("__managed__ variable at %#llx: the address is taken in this process",
                  static_cast<unsigned long long>(address));
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  a->base = address;
  a->device = address;
  a->range_base = address;
  a->size = bytes;
  a->mapped = mapped;
  a->ctx = ctx;
  a->adopted = true;
  // The device holds the variable's initial value: the host fetches it on first touch.
  Register(std::move(a), PageState::kInvalid, false, CU_MEMORYTYPE_DEVICE, 0, false);
  return CUDA_SUCCESS;
}

CUresult Engine::RegisterProgramPages(CUctx_st* ctx, uint64_t address, size_t bytes,
                                      unsigned flags) {
  if (bytes == 0 || bytes > (1ull << 46) || address > ~0ull - bytes - kPage)
    return CUDA_ERROR_INVALID_VALUE;
  const uint64_t base = address / kPage * kPage;
  const uint64_t mapped = (address + bytes + kPage - 1) / kPage * kPage - base;
  // A page is kept coherent whole, and protected whole while the device holds it: other data on
  // a page of the range (the allocator's own bookkeeping beside a heap buffer, say) would fault
  // in whatever touches it, the allocator included, and a fault served with the allocator's lock
  // held could never finish.
  const char* why = address != base || mapped != bytes
                        ? "it does not begin and end on page boundaries (4 KiB): a remote GPU "
                          "keeps mapped memory coherent a whole page at a time"
                        : WhyNotProgramPages(base, base + mapped);
  if (why == nullptr && Memory().Overlaps(base, mapped)) {
    why = "its pages hold other pinned, registered or managed memory";
  }
  if (why != nullptr) {
    RGPU_LOG_WARN("cuMemHostRegister(DEVICEMAP) of %llu bytes at %#llx: not supported, %s",
                  static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(address),
                  why);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  EngineScope scope;
  calls::MemAlloc::Results allocated;
  CUresult r = Server().Call<calls::MemAlloc>(ctx->remote, {.bytesize = mapped}, &allocated);
  if (r != CUDA_SUCCESS) return r;
  auto owned = std::make_unique<Allocation>();
  Allocation* a = owned.get();
  if ((r = MakeView("rgpu-registered", mapped, a)) != CUDA_SUCCESS) {
    Server().Post<calls::MemFree>(ctx->remote, {.dptr = allocated.dptr});
    return r;
  }
  a->base = base;
  a->size = mapped;
  a->device = allocated.dptr;
  a->device_base = allocated.dptr;
  a->range_base = address;
  a->ctx = ctx;
  a->host_mapped = true;
  a->program_pages = true;
  const uint64_t pages = mapped / kPage;
  a->state.assign(pages, PageState::kDirty);  // the host's bytes are newer; the device's are 0
  a->device_zero.assign(pages, true);
  a->hints.assign(pages, PageHints{});
  ArmHandler();
  {
    // The program's pages become the shared memory object with their bytes. Read-only while they
    // are copied: a thread writing them faults, waits for mu_, finds its page dirty and writes
    // again into the object.
    std::lock_guard<std::mutex> lock(mu_);
    void* at = reinterpret_cast<void*>(base);
    void* program_view = MAP_FAILED;
    if (mprotect(at, mapped, PROT_READ) == 0) {
      memcpy(a->view, at, mapped);
      program_view = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
    }
    if (program_view == MAP_FAILED || !MoveMapping(program_view, mapped, at)) {
      const int error = errno;
      if (program_view != MAP_FAILED) munmap(program_view, mapped);
      mprotect(at, mapped, PROT_READ | PROT_WRITE);
      if (returned_.size() >= 64) returned_.erase(returned_.begin());
      returned_.push_back({base, base + mapped, ++returns_});  // a writer that faulted retries
      DropView(*a);
      Server().Post<calls::MemFree>(ctx->remote, {.dptr = allocated.dptr});
      RGPU_LOG_WARN("cuMemHostRegister(DEVICEMAP) at %#llx: its pages cannot be shared (errno %d)",
                    static_cast<unsigned long long>(address), error);
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    allocations_[base] = std::move(owned);
    g_managed_memory_exists.store(true, std::memory_order_release);
  }
  MemoryRange host;
  host.base = address;
  host.size = bytes;
  host.type = CU_MEMORYTYPE_HOST;
  host.ctx = ctx;
  host.managed = true;
  host.freeable = false;
  host.host_flags = flags;
  host.device_shift = allocated.dptr - base;
  MemoryRange device;
  device.base = address + host.device_shift;
  device.size = bytes;
  device.type = CU_MEMORYTYPE_DEVICE;
  device.ctx = ctx;
  device.freeable = false;
  Memory().Insert(host);
  Memory().Insert(device);
  return CUDA_SUCCESS;
}

CUresult Engine::UnregisterProgramPages(uint64_t address) {
  EngineScope scope;
  std::unique_ptr<Allocation> a;
  CUresult r = CUDA_SUCCESS;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = allocations_.find(address / kPage * kPage);
    if (it == allocations_.end() || !it->second->program_pages ||
        it->second->range_base != address) {
      return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    }
    a = std::move(it->second);
    allocations_.erase(it);
    // The device's bytes come back (a failure keeps what the host has, and is returned).
    r = WaitForDevice(a->ctx);
    for (uint64_t p = 0; p < a->state.size() && r == CUDA_SUCCESS;) {
      uint64_t end = p;
      while (end < a->state.size() && a->state[end] == PageState::kInvalid) ++end;
      if (end > p) r = Fetch(*a, p, end);
      p = end + 1;
    }
    ReturnProgramPages(*a);
  }
  auto host = Memory().Erase(address);
  if (host) Memory().Erase(address + host->device_shift);
  // Stream-ordered after the work that may still use it, as cuMemFree is.
  const CUresult freed = Server().Post<calls::MemFree>(a->ctx->remote, {.dptr = a->device_base});
  return r != CUDA_SUCCESS ? r : freed;
}

void Engine::UnregisterProgramPagesOf(CUctx_st* ctx) {
  std::vector<uint64_t> ranges;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [base, a] : allocations_) {
      if (a->ctx == ctx && a->program_pages) ranges.push_back(a->range_base);
    }
  }
  for (uint64_t address : ranges) UnregisterProgramPages(address);
}

void Engine::ReturnProgramPages(Allocation& a) {
  void* at = reinterpret_cast<void*>(a.base);
  // Nobody writes them while their bytes are copied (a writer waits for mu_).
  mprotect(at, a.mapped, PROT_READ);
  void* fresh = mmap(nullptr, a.mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  bool returned = false;
  if (fresh != MAP_FAILED) {
    memcpy(fresh, a.view, a.mapped);
    returned = MoveMapping(fresh, a.mapped, at);
    if (!returned) munmap(fresh, a.mapped);
  }
  if (!returned) {
    // The program keeps the shared pages, with the same bytes: only they stay shared.
    RGPU_LOG_WARN("registered memory at %#llx: its pages stay shared (errno %d)",
                  static_cast<unsigned long long>(a.range_base), errno);
    mprotect(at, a.mapped, PROT_READ | PROT_WRITE);
  }
  if (returned_.size() >= 64) returned_.erase(returned_.begin());
  returned_.push_back({a.base, a.base + a.mapped, ++returns_});
  DropView(a);
}

void Engine::ForgetAdopted(uint64_t address) {
  std::unique_ptr<Allocation> a;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = allocations_.find(address);
    if (it == allocations_.end() || !it->second->adopted) return;
    a = std::move(it->second);
    allocations_.erase(it);
  }
  Release(*a);
}

void Engine::DropView(Allocation& a) {
  if (a.registered) {
    LocalTransport().UnregisterHostMemory(a.view);
    g_registered_view_bytes.fetch_sub(a.mapped);
    a.registered = false;
  }
  munmap(a.view, a.mapped);
  close(a.fd);
}

void Engine::Release(Allocation& a) {
  if (a.program_pages) {
    ReturnProgramPages(a);
    return;
  }
  munmap(reinterpret_cast<void*>(a.base), a.mapped);
  DropView(a);
}

CUresult Engine::Free(uint64_t address) {
  std::unique_ptr<Allocation> a;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = allocations_.find(address);
    if (it == allocations_.end() || it->second->adopted || it->second->program_pages)
      return CUDA_ERROR_INVALID_VALUE;
    a = std::move(it->second);
    allocations_.erase(it);
  }
  Memory().Erase(address);
  Release(*a);
  // Stream-ordered after the work that may still use it, as cuMemFree is.
  return Server().Post<calls::MemFree>(a->ctx->remote, {.dptr = a->device_base});
}

void Engine::ForgetContext(CUctx_st* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = allocations_.begin(); it != allocations_.end();) {
    if (it->second->ctx == ctx) {
      Memory().Erase(it->second->range_base);
      Release(*it->second);
      it = allocations_.erase(it);
    } else {
      ++it;
    }
  }
}

CUresult Engine::Flush(Allocation& a, uint64_t first, uint64_t last, bool then_invalid) {
  static const uint8_t kZero[kPage] = {};
  // Each run of dirty pages is protected before its bytes are read: a thread of the program
  // writing meanwhile faults, waits for mu_ and finds the page clean, so its write makes the page
  // dirty again instead of being lost between the copy and the protection. The transfer reads
  // the engine's view, which stays writable to nobody but the engine.
  const int prot = then_invalid ? PROT_NONE : PROT_READ;
  std::vector<std::pair<uint64_t, uint64_t>> runs;  // protected, their bytes on their way
  CUresult r = CUDA_SUCCESS;
  uint64_t p = first;
  while (p < last) {
    if (a.state[p] != PageState::kDirty) {
      ++p;
      continue;
    }
    uint64_t end = p;
    while (end < last && a.state[end] == PageState::kDirty) ++end;
    void* run = reinterpret_cast<void*>(a.base + p * kPage);
    const uint64_t run_bytes = (end - p) * kPage;
    if (mprotect(run, run_bytes, prot) != 0) {
      RGPU_LOG_WARN("managed memory: cannot protect %llu pages at %p (errno %d)",
                    static_cast<unsigned long long>(end - p), run, errno);
      r = CUDA_ERROR_UNKNOWN;
      break;
    }
    // Pages still zero on both sides need not travel.
    bool all_zero = true;
    for (uint64_t q = p; q < end && all_zero; ++q) {
      all_zero = a.device_zero[q] && memcmp(a.view + q * kPage, kZero, kPage) == 0;
    }
    if (!all_zero) {
      // Not asynchronous on the server: it copies before it reads the next call, so the work
      // that follows sees the bytes. The engine's view stays as it is until they have left
      // (WaitSent below, under mu_).
      const uint64_t bytes = CopyBytes(a, p, end);
      r = Server().Post<calls::MemcpyHtoD>(
          a.ctx->remote, {.dst = a.device + p * kPage, .bytes = bytes, .stream = 0, .async = false},
          a.view + p * kPage, bytes, true);
      if (r != CUDA_SUCCESS) {
        // Not sent: the run stays dirty and writable, as it was.
        mprotect(run, run_bytes, PROT_READ | PROT_WRITE);
        break;
      }
      for (uint64_t q = p; q < end; ++q) a.device_zero[q] = false;
    }
    runs.emplace_back(p, end);
    p = end;
  }
  const CUresult sent = Server().WaitSent();
  for (auto [from, to] : runs) {
    if (sent != CUDA_SUCCESS) {
      // Their bytes may not have left: they stay the host's, dirty and writable.
      mprotect(reinterpret_cast<void*>(a.base + from * kPage), (to - from) * kPage,
               PROT_READ | PROT_WRITE);
      continue;
    }
    for (uint64_t q = from; q < to; ++q) a.state[q] = PageState::kClean;
  }
  return r != CUDA_SUCCESS ? r : sent;
}

CUresult Engine::Invalidate(Allocation& a, uint64_t first, uint64_t last) {
  void* range = reinterpret_cast<void*>(a.base + first * kPage);
  if (mprotect(range, (last - first) * kPage, PROT_NONE) != 0) {
    RGPU_LOG_WARN("managed memory: cannot protect %llu pages at %p (errno %d)",
                  static_cast<unsigned long long>(last - first), range, errno);
    return CUDA_ERROR_UNKNOWN;
  }
  for (uint64_t p = first; p < last; ++p) {
    a.state[p] = PageState::kInvalid;
    a.device_zero[p] = false;  // the device may write it
  }
  if (first == 0 && last == a.state.size()) a.host_accessible = false;
  return CUDA_SUCCESS;
}

CUresult Engine::Fetch(Allocation& a, uint64_t first, uint64_t last) {
  const uint64_t bytes = CopyBytes(a, first, last);
  size_t got = 0;
  CUresult r = Server().Call<calls::MemcpyDtoH>(
      a.ctx->remote, {.src = a.device + first * kPage, .bytes = bytes, .stream = 0, .async = false},
      nullptr, nullptr, 0, ReplyBuffer{a.view + first * kPage, bytes}, &got);
  if (r == CUDA_SUCCESS && got != bytes) r = CUDA_ERROR_UNKNOWN;
  if (r != CUDA_SUCCESS) return r;
  // Readable once the bytes are in; pages that cannot be made so stay invalid (fetched again).
  if (mprotect(reinterpret_cast<void*>(a.base + first * kPage), (last - first) * kPage,
               PROT_READ) != 0) {
    return CUDA_ERROR_UNKNOWN;
  }
  for (uint64_t p = first; p < last; ++p) a.state[p] = PageState::kClean;
  a.host_accessible = true;
  return CUDA_SUCCESS;
}

CUresult Engine::WaitForDevice(CUctx_st* ctx) {
  if (!device_busy_) return CUDA_SUCCESS;
  CUresult r = Server().Call<calls::CtxSynchronize>(ctx->remote, {});
  if (r == CUDA_SUCCESS) device_busy_ = false;
  return r;
}

CUresult Engine::BeforeDeviceWork(DeviceAccess access) {
  if (t_in_engine) return CUDA_SUCCESS;
  EngineScope scope;
  ArmHandler();
  const bool writes = access == DeviceAccess::kReadsAndWrites;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [base, a] : allocations_) {
    if (!a->host_accessible) continue;
    CUresult r = Flush(*a, 0, a->state.size(), writes);
    if (r != CUDA_SUCCESS) return r;
    // Work that only reads leaves the host's (now clean) pages as they are.
    if (writes && (r = Invalidate(*a, 0, a->state.size())) != CUDA_SUCCESS) return r;
  }
  if (writes) device_busy_ = true;
  return CUDA_SUCCESS;
}

CUresult Engine::Prefetch(uint64_t address, size_t bytes, bool to_host, CUstream stream) {
  EngineScope scope;
  if (to_host) {
    // After the stream's work, as a prefetch on it (before the lock: a host function the stream
    // runs may touch managed memory).
    CUresult r = rgpu_impl_cuStreamSynchronize(stream);
    if (r != CUDA_SUCCESS) return r;
  }
  std::lock_guard<std::mutex> lock(mu_);
  Allocation* a = Find(address, std::max<size_t>(bytes, 1));
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t first = (address - a->base) / kPage;
  const uint64_t last = (address - a->base + bytes + kPage - 1) / kPage;
  int target = CU_DEVICE_CPU;
  if (!to_host) {
    CUresult r = Flush(*a, first, last, true);
    if (r != CUDA_SUCCESS) return r;
    if ((r = Invalidate(*a, first, last)) != CUDA_SUCCESS) return r;
    device_busy_ = true;
    target = a->ctx->device;
  } else {
    // The range arrives whole, in one copy per run of pages the host lacks.
    CUresult r = WaitForDevice(a->ctx);
    if (r != CUDA_SUCCESS) return r;
    uint64_t p = first;
    while (p < last) {
      if (a->state[p] != PageState::kInvalid) {
        ++p;
        continue;
      }
      uint64_t end = p;
      while (end < last && a->state[end] == PageState::kInvalid) ++end;
      if ((r = Fetch(*a, p, end)) != CUDA_SUCCESS) return r;
      p = end;
    }
  }
  for (uint64_t p = first; p < last; ++p) a->hints[p].last_prefetch = target;
  return CUDA_SUCCESS;
}

CUresult Engine::Advise(uint64_t address, size_t bytes, CUmem_advise advice,
                        CUmemLocation location) {
  std::lock_guard<std::mutex> lock(mu_);
  Allocation* a = Find(address, std::max<size_t>(bytes, 1));
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int where;
  if (location.type == CU_MEM_LOCATION_TYPE_HOST ||
      location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
      location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) {
    where = CU_DEVICE_CPU;
  } else if (location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    if (location.id < 0 || location.id >= 63) return CUDA_ERROR_INVALID_DEVICE;
    where = location.id;
  } else if (advice == CU_MEM_ADVISE_SET_READ_MOSTLY || advice == CU_MEM_ADVISE_UNSET_READ_MOSTLY ||
             advice == CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION) {
    where = CU_DEVICE_INVALID;  // these take no location
  } else {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const uint64_t first = (address - a->base) / kPage;
  const uint64_t last = (address - a->base + bytes + kPage - 1) / kPage;
  const uint64_t bit = where == CU_DEVICE_CPU ? 1ull << 63 : where >= 0 ? 1ull << where : 0;
  for (uint64_t p = first; p < last; ++p) {
    PageHints& h = a->hints[p];
    switch (advice) {
      case CU_MEM_ADVISE_SET_READ_MOSTLY:
        h.read_mostly = true;
        break;
      case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
        h.read_mostly = false;
        break;
      case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
        h.preferred = where;
        break;
      case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
        h.preferred = CU_DEVICE_INVALID;
        break;
      case CU_MEM_ADVISE_SET_ACCESSED_BY:
        h.accessed_by |= bit;
        break;
      case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
        h.accessed_by &= ~bit;
        break;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

CUresult Engine::RangeAttribute(void* data, size_t data_size, CUmem_range_attribute attribute,
                                uint64_t address, size_t bytes) {
  if (data == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(mu_);
  Allocation* a = Find(address, bytes);
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t first = (address - a->base) / kPage;
  const uint64_t last = (address - a->base + bytes + kPage - 1) / kPage;
  // A value the whole range shares, or `mixed` when its pages differ.
  auto uniform = [&](auto field, int mixed) {
    const int v = field(a->hints[first]);
    for (uint64_t p = first + 1; p < last; ++p) {
      if (field(a->hints[p]) != v) return mixed;
    }
    return v;
  };
  auto put_int = [&](int v) {
    if (data_size != sizeof(int)) return CUDA_ERROR_INVALID_VALUE;
    memcpy(data, &v, sizeof v);
    return CUDA_SUCCESS;
  };
  auto location_type = [](int where) {
    return where == CU_DEVICE_CPU       ? CU_MEM_LOCATION_TYPE_HOST
           : where == CU_DEVICE_INVALID ? CU_MEM_LOCATION_TYPE_INVALID
                                        : CU_MEM_LOCATION_TYPE_DEVICE;
  };
  const auto preferred = [](const PageHints& h) { return h.preferred; };
  const auto prefetched = [](const PageHints& h) { return h.last_prefetch; };
  switch (attribute) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
      return put_int(uniform([](const PageHints& h) { return h.read_mostly ? 1 : 0; }, 0));
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
      return put_int(uniform(preferred, CU_DEVICE_INVALID));
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
      return put_int(uniform(prefetched, CU_DEVICE_INVALID));
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
      return put_int(location_type(uniform(preferred, CU_DEVICE_INVALID)));
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID: {
      const int v = uniform(preferred, CU_DEVICE_INVALID);
      return put_int(v >= 0 ? v : CU_DEVICE_INVALID);
    }
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
      return put_int(location_type(uniform(prefetched, CU_DEVICE_INVALID)));
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID: {
      const int v = uniform(prefetched, CU_DEVICE_INVALID);
      return put_int(v >= 0 ? v : CU_DEVICE_INVALID);
    }
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
      // The processors every page of the range is advised to be accessed by, then
      // CU_DEVICE_INVALID to the end of the array (as many ints as fit).
      if (data_size % sizeof(int) != 0) return CUDA_ERROR_INVALID_VALUE;
      uint64_t all = ~0ull;
      for (uint64_t p = first; p < last; ++p) all &= a->hints[p].accessed_by;
      std::vector<int> out;
      if (all & (1ull << 63)) out.push_back(CU_DEVICE_CPU);
      for (int d = 0; d < 63; ++d) {
        if (all & (1ull << d)) out.push_back(d);
      }
      const size_t n = data_size / sizeof(int);
      int* ints = static_cast<int*>(data);
      for (size_t i = 0; i < n; ++i) ints[i] = i < out.size() ? out[i] : CU_DEVICE_INVALID;
      return CUDA_SUCCESS;
    }
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

bool Engine::HandleFault(uint64_t address, bool write) {
  EngineScope scope;
  std::lock_guard<std::mutex> lock(mu_);
  Allocation* a = Find(address);
  if (a == nullptr) {
    // The pages beyond the size asked for, up to the page end, are the allocation's too.
    auto it = allocations_.upper_bound(address);
    if (it != allocations_.begin() &&
        address - std::prev(it)->second->base < std::prev(it)->second->mapped) {
      a = std::prev(it)->second.get();
    } else {
      // Program pages given back while this thread waited: its access is retried, once.
      thread_local uint64_t retried = 0;
      for (const Returned& r : returned_) {
        if (address - r.base < r.end - r.base && retried != r.generation) {
          retried = r.generation;
          return true;
        }
      }
      return false;
    }
  }
  const uint64_t page = (address - a->base) / kPage;
  const PageState state = a->state[page];
  if (state == PageState::kDirty) {
    // Another thread got here first, or an earlier protection failed half way: a dirty page is
    // the host's to write, so it is made so (again); a page that cannot be is passed on rather
    // than faulting forever.
    return mprotect(reinterpret_cast<void*>(a->base + page * kPage), kPage,
                    PROT_READ | PROT_WRITE) == 0;
  }
  Allocation::Window& window = state == PageState::kClean ? a->write_window : a->fetch_window;
  const uint64_t limit = std::min<uint64_t>(a->state.size(), page + window.Next(page));
  uint64_t end = page;
  while (end < limit && a->state[end] == state) ++end;
  if (state == PageState::kInvalid) {
    CUresult r = WaitForDevice(a->ctx);
    if (r == CUDA_SUCCESS) r = Fetch(*a, page, end);
    if (r != CUDA_SUCCESS) {
      ReportFetchFailure(address, r);
      return false;  // passed on: the program's handler or the default action
    }
    if (!write) return true;
    // A write: the first pages fetched, as many as a write to clean pages would open, are open
    // for writing now without faulting again; the rest of the fetch stays clean (a write to a
    // page marks it dirty, and every dirty page travels before the next device work).
    end = std::min(end, page + a->write_window.Next(page));
  }
  // A write to pages the host may read: from now on the host's copy is newer, for this page and
  // the clean ones after it (a program writing forward then faults once per window, at the cost
  // of pushing pages it may leave unchanged, which is harmless).
  if (mprotect(reinterpret_cast<void*>(a->base + page * kPage), (end - page) * kPage,
               PROT_READ | PROT_WRITE) != 0) {
    RGPU_LOG_WARN("managed memory: cannot open %llu pages at %#llx for writing (errno %d)",
                  static_cast<unsigned long long>(end - page),
                  static_cast<unsigned long long>(a->base + page * kPage), errno);
    return false;
  }
  for (uint64_t p = page; p < end; ++p) a->state[p] = PageState::kDirty;
  return true;
}

void Engine::ArmHandler() {
  std::lock_guard<std::mutex> lock(handler_mu_);
  struct sigaction current = {};
  if (sigaction(SIGSEGV, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == &Engine::OnFault) return;
  // The program's handler (or the default) is the one other faults go to.
  previous_ = current;
  struct sigaction ours = {};
  ours.sa_sigaction = &Engine::OnFault;
  ours.sa_flags = SA_SIGINFO | (current.sa_flags & SA_ONSTACK);
  sigemptyset(&ours.sa_mask);
  if (sigaction(SIGSEGV, &ours, nullptr) == 0) armed_ = true;
}

void Engine::OnFault(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  Engine& engine = Get();
  const bool managed =
      engine.HandleFault(reinterpret_cast<uint64_t>(info->si_addr), FaultIsWrite(context));
  errno = saved_errno;
  if (managed) return;
  // Not rgpu's: to the program's handler, as the kernel would have delivered it.
  struct sigaction prev = engine.previous();
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction != nullptr) {
    if (prev.sa_flags & SA_RESETHAND) engine.ResetPrevious();
    prev.sa_sigaction(sig, info, context);
    return;
  }
  if (prev.sa_handler == SIG_DFL || prev.sa_handler == SIG_IGN) {
    // Returning re-runs the access, which now meets the default action (a core dump), as it
    // would have without rgpu (a fault is never ignored).
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGSEGV, &dfl, nullptr);
    return;
  }
  if (prev.sa_flags & SA_RESETHAND) engine.ResetPrevious();
  prev.sa_handler(sig);
}

}  // namespace

CUresult AllocateManaged(CUctx_st* ctx, size_t bytes, bool host_mapped, uint64_t* address) {
  return Engine::Get().Allocate(ctx, bytes, host_mapped, address);
}

CUresult FreeManaged(uint64_t address) { return Engine::Get().Free(address); }

CUresult RegisterMapped(CUctx_st* ctx, uint64_t address, size_t bytes, unsigned flags) {
  return Engine::Get().RegisterProgramPages(ctx, address, bytes, flags);
}

CUresult UnregisterMapped(uint64_t address) {
  return Engine::Get().UnregisterProgramPages(address);
}

void UnregisterMappedOf(CUctx_st* ctx) {
  if (g_managed_memory_exists.load(std::memory_order_acquire)) {
    Engine::Get().UnregisterProgramPagesOf(ctx);
  }
}

CUresult AdoptManaged(CUctx_st* ctx, uint64_t address, size_t bytes) {
  return Engine::Get().Adopt(ctx, address, bytes);
}

void ForgetAdopted(uint64_t address) {
  if (g_managed_memory_exists.load(std::memory_order_acquire)) {
    Engine::Get().ForgetAdopted(address);
  }
}

void ForgetManaged(CUctx_st* ctx) {
  if (g_managed_memory_exists.load(std::memory_order_acquire)) Engine::Get().ForgetContext(ctx);
}

CUresult BeforeDeviceWorkSlow(DeviceAccess access) {
  return Engine::Get().BeforeDeviceWork(access);
}

CUresult PrefetchManaged(uint64_t address, size_t bytes, bool to_host, CUstream stream) {
  return Engine::Get().Prefetch(address, bytes, to_host, stream);
}

CUresult AdviseManaged(uint64_t address, size_t bytes, CUmem_advise advice,
                       CUmemLocation location) {
  return Engine::Get().Advise(address, bytes, advice, location);
}

CUresult ManagedRangeAttribute(void* data, size_t data_size, CUmem_range_attribute attribute,
                               uint64_t address, size_t bytes) {
  return Engine::Get().RangeAttribute(data, data_size, attribute, address, bytes);
}

}  // namespace rgpu::client
