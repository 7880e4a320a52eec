// CUDA device-code images: fat-binary wrappers and containers, cubin ELF files and PTX text.
// Layouts are described in ../shared/notes/fatbin-format.md. Every parser here is bounds-checked:
// it never reads outside the bytes it is given and reports malformed input as a Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace rgpu::fatbin {

constexpr uint32_t kWrapperMagic = 0x466243B1;    // __fatBinC_Wrapper_t
constexpr uint32_t kContainerMagic = 0xBA55ED50;  // fat-binary container header
constexpr uint32_t kElfMagic = 0x464C457F;        // "\x7FELF"

enum class ImageKind { kWrapper, kContainer, kElf, kPtx };

enum class EntryKind : uint16_t { kPtx = 1, kElf = 2 };

// One entry of a fat-binary container, its payload decompressed.
struct Entry {
  EntryKind kind = EntryKind::kPtx;
  uint32_t sm_arch = 0;    // e.g. 75 for sm_75 / compute_75
  uint16_t ptx_major = 0;  // PTX ISA version (PTX entries)
  uint16_t ptx_minor = 0;
  uint64_t flags = 0;   // raw entry flags (compression bits etc.)
  std::string payload;  // decompressed bytes; PTX text has no trailing NUL
};

// Classifies the image that a driver call like cuModuleLoadData receives. The caller vouches that
// `image` points to readable memory of an image of some kind (as CUDA's API does); only the first
// bytes are inspected here.
ImageKind Classify(const void* image);

// Copies out the bytes that make up a module image given to cuModuleLoadData/cuLibraryLoadData in
// the caller's process, so that it can be sent elsewhere and loaded on its own: a wrapper becomes
// its container, a container is 16 + fat_size bytes, an ELF file spans up to the end of its
// furthest section/program/header table, PTX text is copied with its terminating NUL.
// Trusts the image as CUDA does (process-local memory handed over by the program).
Status CopyStandaloneImage(const void* image, std::string* out);

// Checks that an image received from elsewhere (`size` bytes at `data`) is self-contained, so a
// driver given only its address reads nothing outside it: a container must parse completely, an
// ELF file's tables, sections and segments must lie inside, a wrapper (which points into another
// process's memory) is refused. PTX is accepted as is (the caller NUL-terminates it). Sets
// *kind either way. A container whose entries expand to more than `max_expanded_bytes` is
// kResourceExhausted, found before anything is decompressed.
Status CheckImage(const void* data, size_t size, ImageKind* kind,
                  uint64_t max_expanded_bytes = UINT64_MAX);

// The end of an ELF64 file: the furthest byte of its header, its program and section header
// tables, and its sections and segments. With a `limit` (the bytes actually held) nothing past
// it is read, and a file whose tables or sections reach past it is an error; without one
// (UINT64_MAX) the file is trusted, as CUDA trusts a program's own memory.
Status ElfExtent(const void* elf, uint64_t limit, uint64_t* extent);

// Parses a container (not a wrapper) held in `size` bytes and returns its entries in order with
// payloads decompressed (ZSTD and LZ4 entries). Malformed or truncated input is an error; entries
// that expand to more than `max_expanded_bytes` together are kResourceExhausted, found from their
// headers before anything is decompressed (each entry is also bounded by 1 GiB).
Status ParseContainer(const void* data, size_t size, std::vector<Entry>* entries,
                      uint64_t max_expanded_bytes = UINT64_MAX);

}  // namespace rgpu::fatbin
