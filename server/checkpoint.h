// The checkpoint format (docs/migration.md): the same bytes in a file and on the wire.
//
//   "RGPUCKPT"  u32 version (1)  u32 0  u64 header length  header (wire::Checkpoint)
//   the device memory: every range the header lists, in its order, back to back
//   SHA-256 of everything before it (32 bytes)
//
// CheckpointWriter produces it piece by piece; CheckpointReader takes it piece by piece as it
// arrives (a stream's chunks, a file's blocks) and hands the header, then the memory, to its
// caller, so that a restore never holds the whole image. CheckCheckpoint bounds and checks every
// count, id, size, reference and range of a header before anything is made from it: a restore
// trusts a checkpoint no more than the server trusts a tenant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/rgpu.pb.h"
#include "server/session_limits.h"

namespace rgpu::server {

constexpr char kCheckpointMagic[8] = {'R', 'G', 'P', 'U', 'C', 'K', 'P', 'T'};
constexpr uint32_t kCheckpointVersion = 1;
// Bounds a reader applies before it reads what they bound.
constexpr uint64_t kMaxCheckpointHeaderBytes = uint64_t{1} << 30;
constexpr size_t kCheckpointDigestBytes = 32;
// The payload of one CheckpointChunk message.
constexpr size_t kCheckpointChunkBytes = size_t{8} << 20;
// Bounds CheckCheckpoint applies beyond the session limits.
constexpr size_t kMaxCheckpointDevices = 64;
constexpr size_t kMaxCheckpointNameBytes = 4096;
constexpr uint64_t kMaxModuleVariables = uint64_t{1} << 16;

// One device memory range of a checkpoint, in the order its bytes travel.
struct CheckpointRange {
  uint64_t ptr = 0;
  uint64_t size = 0;
  uint64_t ctx = 0;  // the session's context it belongs to
};

// The ranges whose bytes follow `header`: every allocation, then every module's variables, in the
// header's order. Assumes CheckCheckpoint passed (or the header is the server's own).
std::vector<CheckpointRange> CheckpointRanges(const wire::Checkpoint& header);

// What the restoring server can take.
struct CheckpointBounds {
  SessionLimits limits;
  size_t devices = 0;         // devices the target has
  uint64_t memory_bytes = 0;  // device memory the session may hold there (quota, device)
};

// Checks every count against `bounds`, every id against its range (server-chosen ids in
// [1, kFirstClientId), client-chosen streams' and events' below kClientIdLimit, none twice,
// below the table's next id), every reference (a context's device, a module's or stream's
// context, a function's module, an allocation's context and pool, a global's module and range)
// against what the header holds, every memory range against overflow and every other range, and
// memory_bytes against the ranges' sum and the bound. kInvalidArgument naming the first problem.
Status CheckCheckpoint(const wire::Checkpoint& header, const CheckpointBounds& bounds);

// Writes a checkpoint through `sink` (called with consecutive pieces of it).
class CheckpointWriter {
 public:
  using Sink = std::function<Status(const char* data, size_t size)>;
  explicit CheckpointWriter(Sink sink);
  ~CheckpointWriter();
  // The preamble and the header.
  Status Begin(const wire::Checkpoint& header);
  // The next bytes of device memory.
  Status Memory(const void* data, size_t size);
  // The digest; kInvalidArgument (nothing written) unless exactly header.memory_bytes bytes of
  // memory were written.
  Status Finish();

 private:
  struct Digest;
  Status Put(const void* data, size_t size);
  Sink sink_;
  std::unique_ptr<Digest> digest_;
  uint64_t memory_expected_ = 0, memory_written_ = 0;
};

// Reads a checkpoint fed to it in pieces of any size. `on_header` is called once, when the
// header is complete (its failure ends the read); `on_memory` with each piece of the memory and
// its offset from the memory's start. The header's length is bounded before it is read.
class CheckpointReader {
 public:
  using HeaderFn = std::function<Status(const wire::Checkpoint& header)>;
  using MemoryFn = std::function<Status(uint64_t offset, const char* data, size_t size)>;
  CheckpointReader(HeaderFn on_header, MemoryFn on_memory);
  ~CheckpointReader();
  // Consumes the next `size` bytes; fails (and fails every later call) on a malformed or
  // unreadable piece, a digest that does not match, or bytes past the end.
  Status Feed(const char* data, size_t size);
  // OK once the whole checkpoint was read and its digest matched; otherwise why not (truncated).
  Status Finish() const;

 private:
  enum class Stage { kPreamble, kHeader, kMemory, kDigest, kDone, kFailed };
  struct Digest;
  Status Fail(Status s);
  HeaderFn on_header_;
  MemoryFn on_memory_;
  std::unique_ptr<Digest> digest_;
  Stage stage_ = Stage::kPreamble;
  std::string buffer_;  // the preamble, header or digest being gathered
  uint64_t header_bytes_ = 0;
  uint64_t memory_bytes_ = 0, memory_read_ = 0;
  Status failure_;
};

}  // namespace rgpu::server
