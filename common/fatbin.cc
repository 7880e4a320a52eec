#include "common/fatbin.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>

#include <lz4.h>
#include <zstd.h>

#include "common/byte_reader.h"

namespace rgpu::fatbin {
namespace {

using bytes::ReadLe;
using bytes::Within;

constexpr size_t kContainerHeaderSize = 16;
constexpr size_t kEntryHeaderMinSize = 64;
constexpr uint64_t kFlagLz4 = 0x2000;
constexpr uint64_t kFlagZstd = 0x8000;
// Refuse to inflate an entry beyond this many bytes: real device code is far smaller, and a
// corrupt header must not make us allocate gigabytes.
constexpr uint64_t kMaxUncompressedSize = 1ull << 30;

// Sizes of the ELF64 structures we read; offsets follow the System V gABI.
constexpr size_t kElf64HeaderSize = 64;

Status Decompress(uint64_t flags, const uint8_t* data, size_t size, uint64_t uncompressed_size,
                  std::string* out) {
  if (uncompressed_size == 0 || uncompressed_size > kMaxUncompressedSize) {
    return InvalidArgument("fatbin: implausible uncompressed size " +
                           std::to_string(uncompressed_size));
  }
  if (flags & kFlagZstd) {
    // The frame header states the content size when the compressor knew it; trust neither
    // number more than the other.
    const unsigned long long frame = ZSTD_getFrameContentSize(data, size);
    if (frame == ZSTD_CONTENTSIZE_ERROR) return InvalidArgument("fatbin: zstd: not a zstd frame");
    if (frame != ZSTD_CONTENTSIZE_UNKNOWN && frame != uncompressed_size) {
      return InvalidArgument("fatbin: zstd frame size disagrees with the entry header");
    }
    // Streamed into a buffer that grows with what the frame really produces: the stated size is
    // only a bound, and a tiny frame stating a gigabyte must not cost a gigabyte of zeroed memory.
    std::unique_ptr<ZSTD_DStream, size_t (*)(ZSTD_DStream*)> stream(ZSTD_createDStream(),
                                                                    &ZSTD_freeDStream);
    if (stream == nullptr) return Internal("fatbin: zstd: no decompression context");
    const uint64_t limit = uncompressed_size + 1;  // one byte more tells "too long" from "done"
    out->resize(
        static_cast<size_t>(std::min<uint64_t>(limit, std::max<uint64_t>(size * 4, 64 << 10))));
    ZSTD_inBuffer in = {data, size, 0};
    size_t produced = 0;
    for (;;) {
      ZSTD_outBuffer o = {out->data(), out->size(), produced};
      const size_t r = ZSTD_decompressStream(stream.get(), &o, &in);
      if (ZSTD_isError(r)) {
        return InvalidArgument(std::string("fatbin: zstd: ") + ZSTD_getErrorName(r));
      }
      produced = o.pos;
      if (produced > uncompressed_size) {
        return InvalidArgument("fatbin: zstd: entry inflates past its stated size");
      }
      if (r == 0) break;  // the frame is complete
      if (produced == out->size()) {
        out->resize(static_cast<size_t>(std::min<uint64_t>(limit, 2 * out->size())));
      } else if (in.pos == in.size) {
        return InvalidArgument("fatbin: zstd: truncated frame");
      }
    }
    out->resize(produced);
    return Status::Ok();
  }
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return InvalidArgument("fatbin: lz4 entry too large");
  }
  // LZ4 cannot expand by more than 255x.
  if (uncompressed_size > 255 * static_cast<uint64_t>(size) + 16) {
    return InvalidArgument("fatbin: lz4 uncompressed size implausible");
  }
  out->resize(uncompressed_size);
  int n = LZ4_decompress_safe(reinterpret_cast<const char*>(data), out->data(),
                              static_cast<int>(size), static_cast<int>(out->size()));
  if (n < 0) return InvalidArgument("fatbin: lz4: corrupt compressed entry");
  out->resize(static_cast<size_t>(n));
  return Status::Ok();
}

}  // namespace

Status ElfExtent(const void* image, uint64_t limit, uint64_t* extent) {
  const auto* elf = static_cast<const uint8_t*>(image);
  if (limit < kElf64HeaderSize) return InvalidArgument("ELF: shorter than its header");
  if (elf[4] != 2) return InvalidArgument("ELF: not a 64-bit file");
  uint64_t end = kElf64HeaderSize;
  const uint64_t phoff = ReadLe<uint64_t>(elf + 0x20);
  const uint64_t shoff = ReadLe<uint64_t>(elf + 0x28);
  const uint16_t phentsize = ReadLe<uint16_t>(elf + 0x36);
  const uint16_t phnum = ReadLe<uint16_t>(elf + 0x38);
  const uint16_t shentsize = ReadLe<uint16_t>(elf + 0x3A);
  const uint16_t shnum = ReadLe<uint16_t>(elf + 0x3C);
  if (phoff != 0) {
    if (!Within(phoff, uint64_t{phentsize} * phnum, limit)) {
      return InvalidArgument("ELF: program headers lie outside the image");
    }
    end = std::max<uint64_t>(end, phoff + uint64_t{phentsize} * phnum);
  }
  if (shoff != 0) {
    if (!Within(shoff, uint64_t{shentsize} * shnum, limit)) {
      return InvalidArgument("ELF: section headers lie outside the image");
    }
    end = std::max<uint64_t>(end, shoff + uint64_t{shentsize} * shnum);
  }
  for (uint16_t i = 0; i < shnum && shoff != 0 && shentsize >= 64; ++i) {
    const uint8_t* sh = elf + shoff + uint64_t{i} * shentsize;
    const uint32_t type = ReadLe<uint32_t>(sh + 4);
    const uint64_t offset = ReadLe<uint64_t>(sh + 0x18);
    const uint64_t size = ReadLe<uint64_t>(sh + 0x20);
    constexpr uint32_t kShtNobits = 8;
    if (type == kShtNobits) continue;
    if (!Within(offset, size, limit))
      return InvalidArgument("ELF: a section lies outside the image");
    end = std::max(end, offset + size);
  }
  for (uint16_t i = 0; i < phnum && phoff != 0 && phentsize >= 56; ++i) {
    const uint8_t* ph = elf + phoff + uint64_t{i} * phentsize;
    const uint64_t offset = ReadLe<uint64_t>(ph + 0x08);
    const uint64_t filesz = ReadLe<uint64_t>(ph + 0x20);
    if (!Within(offset, filesz, limit))
      return InvalidArgument("ELF: a segment lies outside the image");
    end = std::max(end, offset + filesz);
  }
  *extent = end;
  return Status::Ok();
}

ImageKind Classify(const void* image) {
  uint32_t magic;
  memcpy(&magic, image, sizeof magic);
  if (magic == kWrapperMagic) return ImageKind::kWrapper;
  if (magic == kContainerMagic) return ImageKind::kContainer;
  if (magic == kElfMagic) return ImageKind::kElf;
  return ImageKind::kPtx;
}

Status CopyStandaloneImage(const void* image, std::string* out) {
  if (image == nullptr) return InvalidArgument("fatbin: null image");
  const auto* bytes = static_cast<const uint8_t*>(image);
  switch (Classify(image)) {
    case ImageKind::kWrapper: {
      const void* container = nullptr;
      memcpy(&container, bytes + 8, sizeof container);
      if (container == nullptr) return InvalidArgument("fatbin: wrapper has no container");
      if (Classify(container) != ImageKind::kContainer) {
        return InvalidArgument("fatbin: wrapper does not point at a fat-binary container");
      }
      return CopyStandaloneImage(container, out);
    }
    case ImageKind::kContainer: {
      const uint16_t header_size = ReadLe<uint16_t>(bytes + 6);
      const uint64_t fat_size = ReadLe<uint64_t>(bytes + 8);
      if (header_size < kContainerHeaderSize || fat_size > kMaxUncompressedSize) {
        return InvalidArgument("fatbin: implausible container header");
      }
      out->assign(reinterpret_cast<const char*>(bytes), header_size + fat_size);
      return Status::Ok();
    }
    case ImageKind::kElf: {
      uint64_t extent = 0;
      Status s = ElfExtent(bytes, UINT64_MAX, &extent);
      if (!s.ok()) return s;
      if (extent > kMaxUncompressedSize) return InvalidArgument("fatbin: implausible ELF size");
      out->assign(reinterpret_cast<const char*>(bytes), extent);
      return Status::Ok();
    }
    case ImageKind::kPtx: {
      const char* text = static_cast<const char*>(image);
      out->assign(text, strlen(text) + 1);
      return Status::Ok();
    }
  }
  return Internal("fatbin: unreachable image kind");
}

Status CheckImage(const void* data, size_t size, ImageKind* kind, uint64_t max_expanded_bytes) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  *kind = size >= 4 ? Classify(data) : ImageKind::kPtx;
  switch (*kind) {
    case ImageKind::kWrapper:
      return InvalidArgument(
          "fatbin: a wrapper points into the memory of the process that made it; send its "
          "container");
    case ImageKind::kContainer: {
      std::vector<Entry> entries;
      return ParseContainer(data, size, &entries, max_expanded_bytes);
    }
    case ImageKind::kElf: {
      uint64_t extent = 0;
      return ElfExtent(bytes, size, &extent);
    }
    case ImageKind::kPtx:
      return Status::Ok();
  }
  return InvalidArgument("fatbin: unknown image kind");
}

Status ParseContainer(const void* data, size_t size, std::vector<Entry>* entries,
                      uint64_t max_expanded_bytes) {
  entries->clear();
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (data == nullptr || size < kContainerHeaderSize) {
    return InvalidArgument("fatbin: container shorter than its header");
  }
  if (ReadLe<uint32_t>(bytes) != kContainerMagic) {
    return InvalidArgument("fatbin: bad container magic");
  }
  const uint16_t header_size = ReadLe<uint16_t>(bytes + 6);
  const uint64_t fat_size = ReadLe<uint64_t>(bytes + 8);
  if (header_size < kContainerHeaderSize || header_size > size) {
    return InvalidArgument("fatbin: bad container header size");
  }
  if (fat_size > size - header_size) {
    return InvalidArgument("fatbin: container truncated (" + std::to_string(size) +
                           " bytes, header says " + std::to_string(header_size + fat_size) + ")");
  }
  // First every entry header is checked and the bytes the entries expand to are added up, so that
  // a container declaring more than the limit is refused before anything is decompressed.
  struct Span {
    const uint8_t* header;
    const uint8_t* payload;
    uint64_t payload_size;
  };
  std::vector<Span> spans;
  uint64_t expanded = 0;
  const uint8_t* p = bytes + header_size;
  uint64_t left = fat_size;
  while (left > 0) {
    if (left < kEntryHeaderMinSize) return InvalidArgument("fatbin: truncated entry header");
    const uint16_t kind = ReadLe<uint16_t>(p);
    const uint32_t entry_header_size = ReadLe<uint32_t>(p + 4);
    const uint64_t payload_size = ReadLe<uint64_t>(p + 8);
    const uint32_t compressed_size = ReadLe<uint32_t>(p + 16);
    if (entry_header_size < kEntryHeaderMinSize || entry_header_size > left) {
      return InvalidArgument("fatbin: bad entry header size");
    }
    if (payload_size > left - entry_header_size) {
      return InvalidArgument("fatbin: entry payload runs past the container");
    }
    if (kind != static_cast<uint16_t>(EntryKind::kPtx) &&
        kind != static_cast<uint16_t>(EntryKind::kElf)) {
      return InvalidArgument("fatbin: unknown entry kind " + std::to_string(kind));
    }
    const uint64_t flags = ReadLe<uint64_t>(p + 40);
    uint64_t entry_bytes = payload_size;
    if (flags & (kFlagLz4 | kFlagZstd)) {
      if (compressed_size == 0 || compressed_size > payload_size) {
        return InvalidArgument("fatbin: bad compressed size");
      }
      entry_bytes = ReadLe<uint64_t>(p + 56);
    }
    if (entry_bytes > max_expanded_bytes - std::min(expanded, max_expanded_bytes)) {
      return ResourceExhausted("fatbin: the container's entries expand to more than " +
                               std::to_string(max_expanded_bytes) + " bytes");
    }
    expanded += entry_bytes;
    spans.push_back(Span{p, p + entry_header_size, payload_size});
    p += entry_header_size + payload_size;
    left -= entry_header_size + payload_size;
  }
  for (const Span& span : spans) {
    Entry entry;
    entry.kind = static_cast<EntryKind>(ReadLe<uint16_t>(span.header));
    entry.ptx_minor = ReadLe<uint16_t>(span.header + 24);
    entry.ptx_major = ReadLe<uint16_t>(span.header + 26);
    entry.sm_arch = ReadLe<uint32_t>(span.header + 28);
    entry.flags = ReadLe<uint64_t>(span.header + 40);
    if (entry.flags & (kFlagLz4 | kFlagZstd)) {
      Status s = Decompress(entry.flags, span.payload, ReadLe<uint32_t>(span.header + 16),
                            ReadLe<uint64_t>(span.header + 56), &entry.payload);
      if (!s.ok()) return s;
    } else {
      entry.payload.assign(reinterpret_cast<const char*>(span.payload), span.payload_size);
    }
    if (entry.kind == EntryKind::kPtx) {
      // PTX is NUL-terminated and padded; keep only the text.
      size_t n = entry.payload.find('\0');
      if (n != std::string::npos) entry.payload.resize(n);
    }
    entries->push_back(std::move(entry));
  }
  return Status::Ok();
}

}  // namespace rgpu::fatbin
