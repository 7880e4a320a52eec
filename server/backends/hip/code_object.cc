#include "server/backends/hip/code_object.h"

#include <string.h>

#include <algorithm>

#include "common/byte_reader.h"
#include "common/fatbin.h"
#include "server/backends/hip/msgpack.h"

namespace rgpu::hipbackend {
namespace {

constexpr uint16_t kEmAmdgpu = 224;
constexpr uint32_t kShtNote = 7;
constexpr uint32_t kShtNobits = 8;
constexpr uint32_t kNtAmdgpuMetadata = 32;

using bytes::ReadLe;

bool Fail(std::string* error, const std::string& why) {
  *error = why;
  return false;
}

// The NT_AMDGPU_METADATA descriptor among the notes of `[p, p + size)`.
bool FindMetadata(const uint8_t* p, size_t size, const uint8_t** desc, size_t* desc_size) {
  size_t pos = 0;
  while (size - pos >= 12) {
    const uint32_t namesz = ReadLe<uint32_t>(p + pos), descsz = ReadLe<uint32_t>(p + pos + 4);
    const uint32_t type = ReadLe<uint32_t>(p + pos + 8);
    pos += 12;
    const size_t name_padded = (static_cast<size_t>(namesz) + 3) & ~size_t{3};
    const size_t desc_padded = (static_cast<size_t>(descsz) + 3) & ~size_t{3};
    if (name_padded > size - pos || desc_padded > size - pos - name_padded) return false;
    const bool amdgpu = namesz == 7 && memcmp(p + pos, "AMDGPU", 7) == 0;
    pos += name_padded;
    if (amdgpu && type == kNtAmdgpuMetadata) {
      *desc = p + pos;
      *desc_size = descsz;
      return true;
    }
    pos += desc_padded;
  }
  return false;
}

uint32_t Number(const MsgValue* v) {
  return v != nullptr && v->kind == MsgValue::Kind::kInt && v->integer >= 0 &&
                 v->integer <= UINT32_MAX
             ? static_cast<uint32_t>(v->integer)
             : UINT32_MAX;
}

}  // namespace

std::string CodeObjectInfo::Processor() const {
  const size_t dashes = target.find("--");
  if (dashes == std::string::npos) return "";
  const std::string rest = target.substr(dashes + 2);
  return rest.substr(0, rest.find(':'));
}

const KernelInfo* CodeObjectInfo::Find(const std::string& name) const {
  for (const KernelInfo& k : kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

bool IsAmdgpuElf(const uint8_t* data, size_t size) {
  return data != nullptr && size >= 64 &&
         memcmp(data,
                "\x7f"
                "ELF",
                4) == 0 &&
         data[4] == 2 && ReadLe<uint16_t>(data + 18) == kEmAmdgpu;
}

bool ParseCodeObject(const uint8_t* data, size_t size, CodeObjectInfo* out, std::string* error) {
  *out = CodeObjectInfo();
  if (!IsAmdgpuElf(data, size)) return Fail(error, "not an AMDGPU ELF64 code object");
  uint64_t extent = 0;
  if (!rgpu::fatbin::ElfExtent(data, size, &extent).ok()) {
    return Fail(error, "code object headers lie outside it");
  }
  const uint64_t shoff = ReadLe<uint64_t>(data + 0x28);
  const uint16_t shentsize = ReadLe<uint16_t>(data + 0x3a), shnum = ReadLe<uint16_t>(data + 0x3c);
  const uint8_t* desc = nullptr;
  size_t desc_size = 0;
  for (uint16_t i = 0; i < shnum && desc == nullptr; ++i) {
    const uint8_t* sh = data + shoff + uint64_t{i} * shentsize;
    if (ReadLe<uint32_t>(sh + 4) != kShtNote) continue;
    const uint64_t offset = ReadLe<uint64_t>(sh + 0x18), bytes = ReadLe<uint64_t>(sh + 0x20);
    FindMetadata(data + offset, bytes, &desc, &desc_size);
  }
  if (desc == nullptr) return Fail(error, "code object has no NT_AMDGPU_METADATA note");
  MsgValue root;
  std::string why;
  if (!ParseMsgPack(desc, desc_size, &root, &why)) return Fail(error, "metadata: " + why);
  if (root.kind != MsgValue::Kind::kMap) return Fail(error, "metadata is not a map");
  if (const MsgValue* t = root.Find("amdhsa.target"); t && t->kind == MsgValue::Kind::kString) {
    out->target = t->text;
  }
  const MsgValue* kernels = root.Find("amdhsa.kernels");
  if (kernels == nullptr || kernels->kind != MsgValue::Kind::kArray) {
    return Fail(error, "metadata lists no amdhsa.kernels");
  }
  for (const MsgValue& k : kernels->items) {
    const MsgValue* name = k.Find(".name");
    if (k.kind != MsgValue::Kind::kMap || name == nullptr ||
        name->kind != MsgValue::Kind::kString) {
      return Fail(error, "metadata: a kernel without a .name");
    }
    KernelInfo info;
    info.name = name->text;
    info.kernarg_size = Number(k.Find(".kernarg_segment_size"));
    if (info.kernarg_size == UINT32_MAX) {
      return Fail(error, "metadata: kernel " + info.name + " has no .kernarg_segment_size");
    }
    if (const MsgValue* args = k.Find(".args")) {
      if (args->kind != MsgValue::Kind::kArray) {
        return Fail(error, "metadata: .args of " + info.name + " is not an array");
      }
      for (const MsgValue& a : args->items) {
        const MsgValue* kind = a.Find(".value_kind");
        if (kind == nullptr || kind->kind != MsgValue::Kind::kString) {
          return Fail(error, "metadata: an argument of " + info.name + " has no .value_kind");
        }
        const uint32_t offset = Number(a.Find(".offset")), bytes = Number(a.Find(".size"));
        if (offset == UINT32_MAX || bytes == UINT32_MAX ||
            offset + uint64_t{bytes} > info.kernarg_size) {
          return Fail(
              error, "metadata: an argument of " + info.name + " lies outside its kernarg segment");
        }
        if (kind->text.rfind("hidden_", 0) == 0) continue;
        info.arguments.push_back(KernelArgument{offset, bytes});
      }
    }
    out->kernels.push_back(std::move(info));
  }
  return true;
}

}  // namespace rgpu::hipbackend
