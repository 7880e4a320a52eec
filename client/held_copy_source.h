// The source of a pitched or 3D copy held behind a host function (client/stream_hold.cc): the
// driver reads a pageable source during the call, so the program may change or free it once the
// call returns, while the held copy runs later. Shared by the pitched copies
// (api_host_memory.cc) and the copies with arrays (api_array.cc).
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "client/impl.h"
#include "client/memory_map.h"

namespace rgpu::client {

// For an asynchronous copy `c` on `stream` that a host function holds (not captured: a captured
// copy reads its source when the graph runs) whose source is pageable host memory (not
// page-locked: the program leaves page-locked memory alone until it synchronizes): copies the
// source's box now into a buffer, points `c` at it (tightly packed) and returns the buffer, which
// the held copy must own; null otherwise. A managed source has already become the device's side.
template <typename Copy>
std::shared_ptr<std::vector<char>> KeepPageableSource(Copy* c, CUstream stream, bool async) {
  constexpr bool k3D = std::is_same_v<Copy, CUDA_MEMCPY3D>;
  if (!async || !StreamHeld(stream) || StreamCapturing(stream)) return nullptr;
  const char* host = nullptr;
  if (c->srcMemoryType == CU_MEMORYTYPE_HOST) {
    host = static_cast<const char*>(c->srcHost);
  } else if (c->srcMemoryType == CU_MEMORYTYPE_UNIFIED && !IsDeviceAddress(c->srcDevice)) {
    host = reinterpret_cast<const char*>(c->srcDevice);
  }
  if (host == nullptr) return nullptr;
  auto range = Memory().Find(reinterpret_cast<uint64_t>(host));
  if (range && range->type == CU_MEMORYTYPE_HOST) return nullptr;  // page-locked
  // The source's rows as the copy paths read them: a pitched copy (Copy2D) at srcY rows of the
  // pitch as given; a copy with an array (CopyArray3D, Side) with a pitch and rows per slice of
  // 0 meaning the box's. A copy those paths refuse is left to them.
  const size_t width = c->WidthInBytes, height = c->Height;
  size_t depth = 1, z = 0, pitch = c->srcPitch, rows_per_slice = height;
  if constexpr (k3D) {
    depth = c->Depth;
    z = c->srcZ;
    if (pitch == 0) pitch = width;
    if (c->srcHeight != 0) rows_per_slice = c->srcHeight;
    if (pitch < width || (depth > 1 && rows_per_slice < height)) return nullptr;
  } else if (height > 1 && pitch < width) {
    return nullptr;
  }
  size_t bytes;
  if (width == 0 || height == 0 || depth == 0 || __builtin_mul_overflow(width, height, &bytes) ||
      __builtin_mul_overflow(bytes, depth, &bytes)) {
    return nullptr;  // nothing to copy, or a copy its own checks refuse
  }
  std::shared_ptr<std::vector<char>> kept;
  try {
    kept = std::make_shared<std::vector<char>>(bytes);
  } catch (...) {
    return nullptr;  // the held copy reads the program's memory then
  }
  for (size_t slice = 0; slice < depth; ++slice) {
    for (size_t row = 0; row < height; ++row) {
      const size_t at = ((z + slice) * rows_per_slice + c->srcY + row) * pitch + c->srcXInBytes;
      memcpy(kept->data() + (slice * height + row) * width, host + at, width);
    }
  }
  c->srcMemoryType = CU_MEMORYTYPE_HOST;
  c->srcHost = kept->data();
  c->srcDevice = 0;
  c->srcXInBytes = 0;
  c->srcY = 0;
  c->srcPitch = width;
  if constexpr (k3D) {
    c->srcZ = 0;
    c->srcHeight = height;
  }
  return kept;
}

}  // namespace rgpu::client
