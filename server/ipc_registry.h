// IpcRegistry: what the sessions of one server share with each other, the way CUDA's IPC shares
// device memory, events and memory pools between the processes of one machine. A tenant's
// processes are sessions here; an exporting session registers an object under a key it hands its
// client, and another session opens it by presenting that key. The key is 32 random bytes (never
// guessed, never derived from anything a tenant knows) and opens the object only for a session of
// the exporting tenant (on a server without tokens: for any session) other than the exporter, and
// only while the export stands: until the exporter revokes it, and never past the object's life
// (the registry holds no reference: an object every session let go of cannot be opened).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace rgpu::server {

struct Tenant;

// The name of an export, as four little-endian words (how it travels in Call.args and
// Reply.values).
using IpcKey = std::array<uint64_t, 4>;

enum class IpcKind {
  kMemory,       // an ordinary allocation (cuIpcGetMemHandle)
  kEvent,        // an interprocess event (cuIpcGetEventHandle)
  kPhysical,     // physical memory of virtual memory management (cuMemExportToShareableHandle)
  kPool,         // a memory pool (cuMemPoolExportToShareableHandle)
  kPoolPointer,  // an allocation of an exported pool (cuMemPoolExportPointer)
};

// Device memory a tenant's quota was charged for, held by a shared object after the session that
// charged it let go while other sessions still use the memory; released when the object goes.
// Add() is called by the one session that charged the bytes, before it drops its reference.
class HeldCharge {
 public:
  HeldCharge() = default;
  HeldCharge(const HeldCharge&) = delete;
  HeldCharge& operator=(const HeldCharge&) = delete;
  ~HeldCharge();
  // Takes over `bytes` of `tenant`'s quota (nullptr: a session without a tenant; nothing held).
  void Add(std::shared_ptr<Tenant> tenant, uint64_t bytes);

 private:
  std::shared_ptr<Tenant> tenant_;
  uint64_t bytes_ = 0;
};

// Thread-safe: sessions export, open and revoke from their own threads.
class IpcRegistry {
 public:
  // Registers `object` (of `kind`), exported by session `exporter` of `tenant` (nullptr: a
  // session admitted without a token), under a fresh random key stored in *key; false when the
  // system's random generator failed (nothing registered). Exports whose objects are gone are
  // forgotten on the way.
  bool Export(IpcKind kind, std::shared_ptr<Tenant> tenant, uint64_t exporter,
              const std::shared_ptr<void>& object, IpcKey* key);
  // The object exported under `key` as `kind`, if session `opener` of `tenant` may open it; null
  // otherwise (no such export, or revoked, of another kind or another tenant). *own is set when
  // the export is `opener`'s own (which CUDA refuses: a process cannot open its own handle).
  std::shared_ptr<void> Open(const IpcKey& key, IpcKind kind, const Tenant* tenant, uint64_t opener,
                             bool* own) const;
  // Withdraws the export under `key` (nothing when there is none): it cannot be opened any more;
  // sessions that opened it keep what they have.
  void Revoke(const IpcKey& key);
  // Exports standing now (whose objects live).
  size_t size() const;

 private:
  struct Entry {
    IpcKind kind;
    std::shared_ptr<Tenant> tenant;
    uint64_t exporter = 0;
    std::weak_ptr<void> object;
  };
  mutable std::mutex mu_;
  std::map<IpcKey, Entry> entries_;  // GUARDED_BY(mu_)
};

}  // namespace rgpu::server
