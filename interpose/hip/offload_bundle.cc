#include "interpose/hip/offload_bundle.h"

#include <string.h>

namespace rgpu::hip {
namespace {

constexpr char kMagic[] = "__CLANG_OFFLOAD_BUNDLE__";
constexpr size_t kMagicSize = sizeof kMagic - 1;
constexpr uint64_t kMaxEntries = 4096;
constexpr uint64_t kMaxIdLength = 4096;
constexpr uint64_t kMaxEntrySize = uint64_t{1} << 34;

uint64_t U64(const uint8_t* p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

bool IsOffloadBundle(const void* data) {
  return data != nullptr && memcmp(data, kMagic, kMagicSize) == 0;
}

bool IsAmdgpuCodeObject(const void* data) {
  if (data == nullptr) return false;
  const auto* p = static_cast<const uint8_t*>(data);
  uint16_t machine;
  memcpy(&machine, p + 18, sizeof machine);
  return memcmp(p,
                "\x7f"
                "ELF",
                4) == 0 &&
         p[4] == 2 /* ELFCLASS64 */ && machine == 224;
}

bool ParseOffloadBundle(const void* data, size_t limit, std::vector<CodeObject>* out,
                        std::string* error) {
  out->clear();
  if (!IsOffloadBundle(data)) {
    *error = "not a clang offload bundle (bad magic)";
    return false;
  }
  const auto* base = static_cast<const uint8_t*>(data);
  auto fits = [limit](uint64_t end) { return limit == 0 || end <= limit; };
  uint64_t pos = kMagicSize;
  if (!fits(pos + 8)) {
    *error = "offload bundle truncated in its header";
    return false;
  }
  const uint64_t count = U64(base + pos);
  pos += 8;
  if (count == 0 || count > kMaxEntries) {
    *error = "offload bundle has an implausible entry count " + std::to_string(count);
    return false;
  }
  for (uint64_t i = 0; i < count; ++i) {
    if (!fits(pos + 24)) {
      *error = "offload bundle truncated in entry " + std::to_string(i);
      return false;
    }
    const uint64_t offset = U64(base + pos), size = U64(base + pos + 8);
    const uint64_t id_length = U64(base + pos + 16);
    pos += 24;
    if (id_length > kMaxIdLength || !fits(pos + id_length)) {
      *error = "offload bundle entry " + std::to_string(i) + " has an implausible id length";
      return false;
    }
    std::string_view id(reinterpret_cast<const char*>(base + pos), id_length);
    pos += id_length;
    if (size > kMaxEntrySize || offset > kMaxEntrySize || !fits(offset + size)) {
      *error = "offload bundle entry " + std::string(id) + " lies outside the bundle";
      return false;
    }
    if (id.find("amdgcn-amd-amdhsa") == std::string_view::npos || size == 0) continue;
    if (size < 64 || !IsAmdgpuCodeObject(base + offset)) {
      *error = "offload bundle entry " + std::string(id) + " is not an AMDGPU code object";
      return false;
    }
    CodeObject c;
    const size_t dashes = id.find("--");
    c.target = std::string(dashes == std::string_view::npos ? id : id.substr(dashes + 2));
    c.data = base + offset;
    c.size = size;
    out->push_back(c);
  }
  if (out->empty()) {
    *error = "offload bundle holds no AMDGPU code object";
    return false;
  }
  return true;
}

}  // namespace rgpu::hip
