// libFuzzer target: the fat-binary container parser and the server's image check on arbitrary
// bytes (headers, entry sizes, ZSTD and LZ4 payloads, ELF tables). Malformed input must give an
// error, never a crash or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/fatbin.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<rgpu::fatbin::Entry> entries;
  (void)rgpu::fatbin::ParseContainer(data, size, &entries);
  rgpu::fatbin::ImageKind kind;
  (void)rgpu::fatbin::CheckImage(data, size, &kind);
  return 0;
}
