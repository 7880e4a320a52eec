#include "softgpu/memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>

namespace softgpu {
namespace {

constexpr uint64_t kFirstAddressLimit = 0x0000500000000000ull;
constexpr uint64_t kFirstAddressAlignment = uint64_t{1} << 30;

uint64_t ChooseFirstAddress() {
  if (const char* v = getenv("RGPU_SOFTGPU_ADDRESS_BASE"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const unsigned long long base = strtoull(v, &end, 0);
    if (end != nullptr && *end == '\0' && base >= kGlobalAddressBase && base < kFirstAddressLimit &&
        base % kFirstAddressAlignment == 0) {
      return base;
    }
    fprintf(stderr,
            "softgpu: RGPU_SOFTGPU_ADDRESS_BASE=%s is not a 1 GiB boundary in [0x%llx, 0x%llx); "
            "ignored\n",
            v, (unsigned long long)kGlobalAddressBase, (unsigned long long)kFirstAddressLimit);
  }
  std::random_device random;
  const uint64_t slots = (kFirstAddressLimit - kGlobalAddressBase) / kFirstAddressAlignment;
  const uint64_t slot = ((static_cast<uint64_t>(random()) << 32) | random()) % slots;
  return kGlobalAddressBase + slot * kFirstAddressAlignment;
}

constexpr uint64_t kGuardGap = 4096;
constexpr uint64_t kBaseAlignment = 512;

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Process-wide so that device addresses are unique across contexts and devices. Addresses are
// never handed out twice by the counter, which turns a use-after-free into a clean fault; a gap
// between allocations does the same for small overruns. 0 until the first reservation
// (constant-initialized, so that no other file's static initializer can run before it). Written
// under the ranges' mutex; read without it (IsDeviceAddress).
std::atomic<uint64_t> g_next_address{0};
// The lowest and highest addresses ever claimed at a fixed place (0, 0: none yet).
std::atomic<uint64_t> g_claimed_low{0}, g_claimed_high{0};

// The ranges in use (start -> end), under their mutex: heap-allocated and never destroyed, since
// allocations may go during the process's exit.
struct Ranges {
  std::mutex mu;
  std::map<uint64_t, uint64_t> in_use;
};
Ranges& InUse() {
  static auto* ranges = new Ranges();
  return *ranges;
}

// True when [start, end) overlaps a range in use (mu held).
bool OverlapsLocked(const Ranges& r, uint64_t start, uint64_t end) {
  auto it = r.in_use.upper_bound(start);
  if (it != r.in_use.begin() && std::prev(it)->second > start) return true;
  return it != r.in_use.end() && it->first < end;
}

// Takes `length` fresh addresses from the counter, past any claimed range in the way; returns the
// start (recorded in use).
uint64_t TakeAddresses(uint64_t length) {
  Ranges& r = InUse();
  std::lock_guard lock(r.mu);
  if (g_next_address.load(std::memory_order_relaxed) == 0) {
    g_next_address.store(FirstDeviceAddress(), std::memory_order_relaxed);
  }
  uint64_t start = g_next_address.load(std::memory_order_relaxed);
  for (;;) {
    start = RoundUp(start, kBaseAlignment);
    auto it = r.in_use.upper_bound(start);
    if (it != r.in_use.begin() && std::prev(it)->second > start) {
      start = std::prev(it)->second;
    } else if (it != r.in_use.end() && it->first < start + length) {
      start = it->second;
    } else {
      break;
    }
  }
  r.in_use.emplace(start, start + length);
  g_next_address.store(start + length, std::memory_order_release);
  return start;
}

// g_next_address, started at FirstDeviceAddress() on first use.
uint64_t NextAddress() {
  const uint64_t next = g_next_address.load(std::memory_order_acquire);
  return next != 0 ? next : FirstDeviceAddress();
}

}  // namespace

Allocation::~Allocation() {
  if (owner == nullptr) free(host);
  if (budget != nullptr) budget->Release(reserved);
  if (range != 0) ReleaseAddresses(range);
}

uint64_t HostPageSize() {
  static const uint64_t page = [] {
    const long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<uint64_t>(p) : 4096;
  }();
  return page;
}

std::shared_ptr<Allocation> MapNative(uint64_t size) {
  if (size == 0 || size > (1ull << 44)) return nullptr;
  const uint64_t page = HostPageSize();
  const uint64_t mapped = RoundUp(size, page);
  // A range of device addresses the host already uses elsewhere is skipped (a few tries: the
  // process's own mappings lie far above where device addresses start).
  for (int attempt = 0; attempt < 4; ++attempt) {
    const uint64_t base = ReserveAddresses(mapped, page);
    if (base == 0) return nullptr;
    void* want = reinterpret_cast<void*>(base);
    void* at = mmap(want, mapped, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (at == MAP_FAILED) {
      ReleaseAddresses(base);
      if (errno == EEXIST) continue;
      return nullptr;
    }
    if (at != want) {  // a kernel that takes MAP_FIXED_NOREPLACE as a mere hint
      munmap(at, mapped);
      ReleaseAddresses(base);
      continue;
    }
    auto a = std::make_shared<Allocation>();
    a->range = base;
    a->base = base;
    a->size = size;
    a->host = static_cast<uint8_t*>(at);
    a->native = true;
    a->owner = std::shared_ptr<void>(at, [mapped](void* p) { munmap(p, mapped); });
    return a;
  }
  return nullptr;
}

namespace {
std::atomic<bool> g_native_managed_variables{true};
std::atomic<bool> g_kernel_host_access{true};
}  // namespace

bool KernelHostAccess() { return g_kernel_host_access.load(std::memory_order_acquire); }

void SetKernelHostAccess(bool reach) {
  g_kernel_host_access.store(reach, std::memory_order_release);
}

bool NativeManagedVariables() { return g_native_managed_variables.load(std::memory_order_acquire); }

void SetNativeManagedVariables(bool native) {
  g_native_managed_variables.store(native, std::memory_order_release);
}

void HostMappings::Insert(std::shared_ptr<Allocation> mapping) {
  std::unique_lock lock(mu_);
  mappings_[mapping->base] = std::move(mapping);
}

std::shared_ptr<Allocation> HostMappings::Remove(uint64_t address) {
  std::unique_lock lock(mu_);
  auto it = mappings_.find(address);
  if (it == mappings_.end()) return nullptr;
  std::shared_ptr<Allocation> a = std::move(it->second);
  mappings_.erase(it);
  return a;
}

std::shared_ptr<Allocation> HostMappings::Find(uint64_t address, uint64_t size) const {
  std::shared_lock lock(mu_);
  auto it = mappings_.upper_bound(address);
  if (it == mappings_.begin()) return nullptr;
  --it;
  const Allocation& a = *it->second;
  if (address - a.base >= a.size || size > a.size - (address - a.base)) return nullptr;
  return it->second;
}

HostMappings& GlobalHostMappings() {
  static auto* mappings = new HostMappings();
  return *mappings;
}

uint64_t FirstDeviceAddress() {
  static const uint64_t first = ChooseFirstAddress();
  return first;
}

bool IsDeviceAddress(uint64_t address) {
  if (address >= FirstDeviceAddress() && address < NextAddress()) return true;
  return address >= g_claimed_low.load(std::memory_order_acquire) &&
         address < g_claimed_high.load(std::memory_order_acquire);
}

uint64_t ReserveAddresses(uint64_t size, uint64_t alignment) {
  if (size == 0 || size > (1ull << 44) || (alignment & (alignment - 1)) != 0 ||
      alignment > (1ull << 40)) {
    return 0;
  }
  const uint64_t align = std::max<uint64_t>(alignment, kBaseAlignment);
  // Over-reserve by the alignment so that an aligned start lies inside what was taken.
  const uint64_t start = TakeAddresses(RoundUp(size + align + kGuardGap, kBaseAlignment));
  return RoundUp(start, align);
}

bool ClaimAddresses(uint64_t base, uint64_t size) {
  if (base % kAllocationAlignment != 0 || size == 0 || size > (1ull << 44) ||
      base < kGlobalAddressBase || base >= kClaimLimit || size > kClaimLimit - base) {
    return false;
  }
  Ranges& r = InUse();
  std::lock_guard lock(r.mu);
  if (OverlapsLocked(r, base, base + size)) return false;
  r.in_use.emplace(base, base + size);
  uint64_t low = g_claimed_low.load(std::memory_order_relaxed);
  if (low == 0 || base < low) g_claimed_low.store(base, std::memory_order_release);
  if (base + size > g_claimed_high.load(std::memory_order_relaxed)) {
    g_claimed_high.store(base + size, std::memory_order_release);
  }
  return true;
}

void ReleaseAddresses(uint64_t address) {
  Ranges& r = InUse();
  std::lock_guard lock(r.mu);
  auto it = r.in_use.upper_bound(address);
  if (it == r.in_use.begin()) return;
  --it;
  if (address < it->second) r.in_use.erase(it);
}

bool DeviceMemoryBudget::Reserve(uint64_t bytes) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > total_ || used > total_ - bytes) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

void DeviceMemoryBudget::Release(uint64_t bytes) {
  used_.fetch_sub(bytes, std::memory_order_relaxed);
}

AddressSpace::~AddressSpace() { FreeAll(); }

AddressSpace::Result AddressSpace::Allocate(uint64_t size, uint64_t* address, AllocationKind kind) {
  if (size == 0) return Result::kInvalid;
  if (size > (1ull << 44)) return Result::kOutOfMemory;
  const uint64_t reserved = RoundUp(size, kAllocationAlignment);
  auto a = std::make_shared<Allocation>();
  if (!budget_->Reserve(reserved)) return Result::kOutOfMemory;
  // From here on the allocation's destructor gives the bytes back, whatever happens.
  a->reserved = reserved;
  a->budget = budget_;
  a->host = static_cast<uint8_t*>(calloc(1, reserved));
  if (a->host == nullptr) return Result::kOutOfMemory;
  // RGPU_SOFTGPU_STALE_MEMORY=1: fresh memory holds stale bytes, as a real GPU's holds what its
  // last user left there (for tests of a server that must scrub it).
  static const bool stale = [] {
    const char* v = getenv("RGPU_SOFTGPU_STALE_MEMORY");
    return v != nullptr && v[0] == '1';
  }();
  if (stale) memset(a->host, 0xA5, reserved);
  a->zeroed = !stale;
  a->size = size;
  a->kind = kind;
  // Bases are kBaseAlignment-aligned (as the real driver's are), so that any allocation can back
  // a linear or pitched texture (CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT).
  a->base = TakeAddresses(RoundUp(reserved + kGuardGap, kBaseAlignment));
  a->range = a->base;
  *address = a->base;
  std::unique_lock lock(mu_);
  allocations_.emplace(a->base, std::move(a));
  return Result::kOk;
}

AddressSpace::Result AddressSpace::AllocateAt(uint64_t address, uint64_t size,
                                              AllocationKind kind) {
  if (size == 0 || address % kAllocationAlignment != 0) return Result::kInvalid;
  if (size > (1ull << 44)) return Result::kOutOfMemory;
  const uint64_t reserved = RoundUp(size, kAllocationAlignment);
  if (address < kGlobalAddressBase || address >= kClaimLimit || reserved > kClaimLimit - address) {
    return Result::kInvalid;
  }
  auto a = std::make_shared<Allocation>();
  if (!budget_->Reserve(reserved)) return Result::kOutOfMemory;
  a->reserved = reserved;
  a->budget = budget_;
  a->host = static_cast<uint8_t*>(calloc(1, reserved));
  if (a->host == nullptr) return Result::kOutOfMemory;
  if (!ClaimAddresses(address, reserved)) return Result::kAddressInUse;
  a->range = address;
  a->base = address;
  a->size = size;
  a->kind = kind;
  std::unique_lock lock(mu_);
  allocations_.emplace(a->base, std::move(a));
  return Result::kOk;
}

AddressSpace::Result AddressSpace::AllocateManaged(uint64_t size, uint64_t* address,
                                                   AllocationKind kind) {
  if (size == 0) return Result::kInvalid;
  if (size > (1ull << 44)) return Result::kOutOfMemory;
  const uint64_t reserved = RoundUp(RoundUp(size, HostPageSize()), kAllocationAlignment);
  if (!budget_->Reserve(reserved)) return Result::kOutOfMemory;
  std::shared_ptr<Allocation> a = MapNative(size);
  if (a == nullptr) {
    budget_->Release(reserved);
    return Result::kOutOfMemory;
  }
  a->reserved = reserved;
  a->budget = budget_;
  a->kind = kind;
  a->managed = std::make_unique<ManagedHints>();
  *address = a->base;
  std::unique_lock lock(mu_);
  allocations_.emplace(a->base, std::move(a));
  return Result::kOk;
}

AddressSpace::Result AddressSpace::Insert(std::shared_ptr<Allocation> mapping) {
  if (mapping == nullptr || mapping->size == 0) return Result::kInvalid;
  std::unique_lock lock(mu_);
  auto next = allocations_.lower_bound(mapping->base);
  if (next != allocations_.end() && next->first < mapping->base + mapping->size) {
    return Result::kInvalid;
  }
  if (next != allocations_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second->size > mapping->base) return Result::kInvalid;
  }
  allocations_.emplace(mapping->base, std::move(mapping));
  return Result::kOk;
}

AddressSpace::Result AddressSpace::Free(uint64_t address) {
  std::shared_ptr<Allocation> victim;  // released after the lock (its destructor frees memory)
  {
    std::unique_lock lock(mu_);
    auto it = allocations_.find(address);
    if (it == allocations_.end()) return Result::kInvalid;
    victim = std::move(it->second);
    allocations_.erase(it);
  }
  return Result::kOk;
}

void AddressSpace::FreeAll() {
  // The generation first: a peer lookup that finds an allocation of the next generation sees the
  // change when it checks afterwards (FindInPeers).
  generation_.fetch_add(1);
  std::map<uint64_t, std::shared_ptr<Allocation>> all;
  std::vector<Peer> peers;
  {
    std::unique_lock lock(mu_);
    all.swap(allocations_);
  }
  {
    std::lock_guard lock(peers_mu_);
    peers.swap(peers_);
  }
}

std::shared_ptr<const AddressSpace> AddressSpace::Peer::Live() const {
  std::shared_ptr<const AddressSpace> s = space.lock();
  if (s == nullptr || s->generation() != generation) return nullptr;
  return s;
}

AddressSpace::PeerResult AddressSpace::EnablePeer(const std::shared_ptr<const AddressSpace>& peer) {
  // Declared before the lock, so released after it: the last reference to a peer that went may
  // be dropped here, and its context with it.
  std::vector<std::shared_ptr<const AddressSpace>> pinned;
  std::vector<Peer> gone;
  std::lock_guard lock(peers_mu_);
  // Forget peers that went (a new context may reuse a gone one's address).
  PeerResult result = PeerResult::kOk;
  for (auto it = peers_.begin(); it != peers_.end();) {
    pinned.push_back(it->Live());
    if (pinned.back() == nullptr) {
      gone.push_back(std::move(*it));
      it = peers_.erase(it);
    } else {
      if (it->id == peer.get()) result = PeerResult::kAlreadyEnabled;
      ++it;
    }
  }
  if (result == PeerResult::kOk) peers_.push_back(Peer{peer.get(), peer, peer->generation()});
  return result;
}

AddressSpace::PeerResult AddressSpace::DisablePeer(const AddressSpace* peer) {
  std::vector<std::shared_ptr<const AddressSpace>> pinned;  // released after the lock
  std::vector<Peer> gone;
  std::lock_guard lock(peers_mu_);
  PeerResult result = PeerResult::kNotEnabled;
  for (auto it = peers_.begin(); it != peers_.end();) {
    pinned.push_back(it->Live());
    const bool live = pinned.back() != nullptr;
    if (!live || it->id == peer) {
      if (live) result = PeerResult::kOk;
      gone.push_back(std::move(*it));
      it = peers_.erase(it);
    } else {
      ++it;
    }
  }
  return result;
}

std::shared_ptr<Allocation> AddressSpace::FindInPeers(uint64_t address, uint64_t size) const {
  std::vector<Peer> peers;
  {
    std::lock_guard lock(peers_mu_);
    if (peers_.empty()) return nullptr;
    peers = peers_;
  }
  // Outside the lock: the last reference to a peer may go here, taking its context with it.
  for (const Peer& p : peers) {
    std::shared_ptr<const AddressSpace> space = p.Live();
    if (space == nullptr) continue;
    std::shared_ptr<Allocation> a = space->Find(address, size);
    // A peer torn down (and revived) meanwhile must not hand out its next generation's memory.
    if (a != nullptr && space->generation() == p.generation) return a;
  }
  return nullptr;
}

std::shared_ptr<Allocation> AddressSpace::Find(uint64_t address, uint64_t size) const {
  std::shared_lock lock(mu_);
  auto it = allocations_.upper_bound(address);
  if (it == allocations_.begin()) return nullptr;
  --it;
  const Allocation& a = *it->second;
  if (address - a.base >= a.size || size > a.size - (address - a.base)) return nullptr;
  return it->second;
}

uint8_t* AddressSpace::Translate(uint64_t address, uint64_t size) const {
  std::shared_lock lock(mu_);
  auto it = allocations_.upper_bound(address);
  if (it == allocations_.begin()) return nullptr;
  --it;
  const Allocation& a = *it->second;
  if (address - a.base >= a.size || size > a.size - (address - a.base)) return nullptr;
  return a.host + (address - a.base);
}

}  // namespace softgpu
