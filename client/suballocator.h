// Suballocator: small device allocations carved by the client out of larger ones (slabs) that
// the server made, so that cuMemAlloc and cuMemFree of small sizes cost no round trip. One per
// context. The server only ever sees the slabs: they are what it charges to the tenant's quota
// and what it checks copies and kernels against; the client's memory map holds each piece as an
// allocation of its own (pointer attributes, address ranges, frees).
//
// Pieces are 512-byte aligned (as the driver's allocations are) and at most kLargestPiece bytes;
// a slab is kSlabBytes. Placement is first fit in address order within each slab.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace rgpu::client {

class Suballocator {
 public:
  static constexpr uint64_t kSlabBytes = uint64_t{2} << 20;
  static constexpr uint64_t kLargestPiece = uint64_t{256} << 10;
  static constexpr uint64_t kAlignment = 512;

  // True when an allocation of `bytes` is carved from slabs (0 < bytes <= kLargestPiece).
  static bool Carves(uint64_t bytes) { return bytes > 0 && bytes <= kLargestPiece; }

  // A piece of `bytes` from a slab already held, or 0 when none has room (the caller then adds
  // a slab and asks again). A piece the caller cannot use stays taken: it is never given out
  // again.
  uint64_t Take(uint64_t bytes);
  // Makes [base, base + kSlabBytes), a device allocation the server made, a slab.
  void AddSlab(uint64_t base);
  // Gives back the piece that starts at `address`; false when no piece starts there. When that
  // leaves its slab empty, the slab is forgotten and *emptied_slab is its base (the caller gives
  // it back to the server), else 0.
  bool Give(uint64_t address, uint64_t* emptied_slab);
  // The slab holding `address` and the piece starting at `address`: false when `address` is not
  // the start of a live piece.
  bool Find(uint64_t address, uint64_t* slab, uint64_t* piece_bytes) const;
  // The slabs held (for tests and for teardown).
  std::vector<uint64_t> Slabs() const;
  // Forgets every slab (their context is gone, and they with it).
  void Clear();

 private:
  struct Slab {
    std::map<uint64_t, uint64_t> free;   // offset -> bytes, no two adjacent
    std::map<uint64_t, uint64_t> taken;  // offset -> bytes
  };
  static uint64_t Rounded(uint64_t bytes) {
    return (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  mutable std::mutex mu_;
  std::map<uint64_t, Slab> slabs_;  // by base address (GUARDED_BY(mu_))
};

}  // namespace rgpu::client
