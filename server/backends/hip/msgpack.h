// A bounds-checked MessagePack reader, enough for AMDGPU code-object metadata (maps, arrays,
// strings, integers, booleans, floats, nil; binary and extension values are read and kept as
// bytes). Input is untrusted: every length is checked against the buffer and nesting is limited.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <utility>
#include <vector>

namespace rgpu::hipbackend {

struct MsgValue {
  enum class Kind { kNil, kBool, kInt, kFloat, kString, kBytes, kArray, kMap };
  Kind kind = Kind::kNil;
  bool boolean = false;
  int64_t integer = 0;  // kInt (unsigned values above INT64_MAX are refused)
  double real = 0;
  std::string text;                                    // kString and kBytes
  std::vector<MsgValue> items;                         // kArray
  std::vector<std::pair<MsgValue, MsgValue>> entries;  // kMap

  // The value of map entry `key` (a string key), or nullptr.
  const MsgValue* Find(const std::string& key) const;
};

// Parses one value from `data[0, size)`. Fails with a message in `*error` on truncation, unknown
// type bytes, implausible lengths, or nesting deeper than 64.
bool ParseMsgPack(const uint8_t* data, size_t size, MsgValue* out, std::string* error);

}  // namespace rgpu::hipbackend
