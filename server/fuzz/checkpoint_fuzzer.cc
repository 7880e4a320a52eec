// libFuzzer target: a checkpoint stream from an adversary (server/checkpoint.h), as a restore
// reads it. Input: one mode byte, then either the raw stream (mode even) or the bytes of a
// header put behind a well-formed preamble (mode odd), so that CheckCheckpoint sees arbitrary
// headers. Nothing may crash, read out of bounds or allocate what the header merely claims.
#include <cstdint>
#include <cstring>
#include <string>

#include "server/checkpoint.h"

using namespace rgpu;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool wrap = (data[0] & 1) != 0;
  std::string stream;
  if (wrap) {
    stream.append(server::kCheckpointMagic, sizeof server::kCheckpointMagic);
    const uint32_t version = server::kCheckpointVersion, zero = 0;
    const uint64_t length = size - 1;
    stream.append(reinterpret_cast<const char*>(&version), 4);
    stream.append(reinterpret_cast<const char*>(&zero), 4);
    stream.append(reinterpret_cast<const char*>(&length), 8);
  }
  stream.append(reinterpret_cast<const char*>(data + 1), size - 1);
  server::CheckpointBounds bounds;
  bounds.devices = 2;
  bounds.memory_bytes = uint64_t{1} << 30;
  uint64_t memory_seen = 0;
  server::CheckpointReader reader(
      [&](const wire::Checkpoint& header) {
        Status s = server::CheckCheckpoint(header, bounds);
        if (s.ok()) server::CheckpointRanges(header);
        return s;
      },
      [&](uint64_t offset, const char*, size_t n) {
        if (offset != memory_seen) abort();  // the reader hands memory over in order
        memory_seen += n;
        return Status::Ok();
      });
  // In pieces of varying size, as chunks arrive.
  size_t at = 0, piece = 1;
  while (at < stream.size()) {
    const size_t n = std::min(piece, stream.size() - at);
    if (!reader.Feed(stream.data() + at, n).ok()) break;
    at += n;
    piece = piece * 3 + 1;
  }
  reader.Finish();
  return 0;
}
