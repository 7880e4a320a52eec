// Clang offload bundles, the container hipcc embeds device code in (.hipFatBinSegment's wrapper
// points at one): "__CLANG_OFFLOAD_BUNDLE__", u64 entry count, then per entry u64 offset (from
// the bundle's start), u64 size, u64 id length and the id, e.g. "hipv4-amdgcn-amd-amdhsa--gfx90a".
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <string_view>
#include <vector>

namespace rgpu::hip {

struct CodeObject {
  std::string target;  // the id's target after "--", e.g. "gfx90a" or "gfx90a:xnack-"
  const uint8_t* data = nullptr;
  size_t size = 0;
};

// True when `data` starts with the bundle magic.
bool IsOffloadBundle(const void* data);

// The AMDGPU code objects (entries whose id names amdgcn-amd-amdhsa; the host entry and others
// are skipped) of the bundle at `data`, which lies in this process's memory. `limit`, when not
// zero, is how many bytes the bundle may span. Fails with a message in `*error` when the header
// is implausible (entry count, id lengths, entries past `limit`) or an entry is not an ELF.
bool ParseOffloadBundle(const void* data, size_t limit, std::vector<CodeObject>* out,
                        std::string* error);

// True when `data` is an AMDGPU ELF code object (ELF64, e_machine EM_AMDGPU = 224).
bool IsAmdgpuCodeObject(const void* data);

}  // namespace rgpu::hip
