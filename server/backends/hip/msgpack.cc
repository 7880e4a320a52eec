#include "server/backends/hip/msgpack.h"

#include <string.h>

namespace rgpu::hipbackend {
namespace {

constexpr int kMaxDepth = 64;

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool Value(MsgValue* out, int depth) {
    if (depth > kMaxDepth) return Fail("nesting too deep");
    uint8_t tag = 0;
    if (!Byte(&tag)) return false;
    if (tag <= 0x7f) return Int(out, tag);
    if (tag >= 0xe0) return Int(out, static_cast<int8_t>(tag));
    if ((tag & 0xf0) == 0x80) return Map(out, tag & 0x0f, depth);
    if ((tag & 0xf0) == 0x90) return Array(out, tag & 0x0f, depth);
    if ((tag & 0xe0) == 0xa0) return Text(out, MsgValue::Kind::kString, tag & 0x1f);
    uint64_t n = 0;
    switch (tag) {
      case 0xc0:
        out->kind = MsgValue::Kind::kNil;
        return true;
      case 0xc2:
      case 0xc3:
        out->kind = MsgValue::Kind::kBool;
        out->boolean = tag == 0xc3;
        return true;
      case 0xc4:
      case 0xc5:
      case 0xc6:
        return Unsigned(1u << (tag - 0xc4), &n) && Text(out, MsgValue::Kind::kBytes, n);
      case 0xc7:
      case 0xc8:
      case 0xc9:  // ext: length, type, data
        return Unsigned(1u << (tag - 0xc7), &n) && Skip(1) && Text(out, MsgValue::Kind::kBytes, n);
      case 0xca: {
        uint64_t bits = 0;
        if (!Unsigned(4, &bits)) return false;
        float f;
        const uint32_t b32 = static_cast<uint32_t>(bits);
        memcpy(&f, &b32, 4);
        out->kind = MsgValue::Kind::kFloat;
        out->real = f;
        return true;
      }
      case 0xcb: {
        uint64_t bits = 0;
        if (!Unsigned(8, &bits)) return false;
        memcpy(&out->real, &bits, 8);
        out->kind = MsgValue::Kind::kFloat;
        return true;
      }
      case 0xcc:
      case 0xcd:
      case 0xce:
      case 0xcf:
        if (!Unsigned(1u << (tag - 0xcc), &n)) return false;
        if (n > static_cast<uint64_t>(INT64_MAX)) return Fail("integer out of range");
        return Int(out, static_cast<int64_t>(n));
      case 0xd0:
      case 0xd1:
      case 0xd2:
      case 0xd3: {
        const unsigned width = 1u << (tag - 0xd0);
        if (!Unsigned(width, &n)) return false;
        const int shift = 64 - 8 * static_cast<int>(width);
        return Int(out, static_cast<int64_t>(n << shift) >> shift);
      }
      case 0xd4:
      case 0xd5:
      case 0xd6:
      case 0xd7:
      case 0xd8:  // fixext: type, data
        return Skip(1) && Text(out, MsgValue::Kind::kBytes, 1u << (tag - 0xd4));
      case 0xd9:
      case 0xda:
      case 0xdb:
        return Unsigned(1u << (tag - 0xd9), &n) && Text(out, MsgValue::Kind::kString, n);
      case 0xdc:
      case 0xdd:
        return Unsigned(tag == 0xdc ? 2 : 4, &n) && Array(out, n, depth);
      case 0xde:
      case 0xdf:
        return Unsigned(tag == 0xde ? 2 : 4, &n) && Map(out, n, depth);
      default:
        return Fail("unknown type byte " + std::to_string(tag));
    }
  }

  const std::string& error() const { return error_; }

 private:
  bool Fail(const std::string& why) {
    if (error_.empty()) error_ = "msgpack: " + why + " at byte " + std::to_string(pos_);
    return false;
  }
  bool Byte(uint8_t* b) {
    if (pos_ >= size_) return Fail("truncated");
    *b = data_[pos_++];
    return true;
  }
  bool Skip(size_t n) {
    if (n > size_ - pos_) return Fail("truncated");
    pos_ += n;
    return true;
  }
  // A big-endian unsigned of `width` bytes.
  bool Unsigned(unsigned width, uint64_t* out) {
    if (width > size_ - pos_) return Fail("truncated");
    uint64_t v = 0;
    for (unsigned i = 0; i < width; ++i) v = (v << 8) | data_[pos_++];
    *out = v;
    return true;
  }
  bool Int(MsgValue* out, int64_t v) {
    out->kind = MsgValue::Kind::kInt;
    out->integer = v;
    return true;
  }
  bool Text(MsgValue* out, MsgValue::Kind kind, uint64_t n) {
    if (n > size_ - pos_) return Fail("string longer than the data");
    out->kind = kind;
    out->text.assign(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return true;
  }
  bool Array(MsgValue* out, uint64_t n, int depth) {
    // Each item takes at least a byte: a count beyond the data is a lie.
    if (n > size_ - pos_) return Fail("array longer than the data");
    out->kind = MsgValue::Kind::kArray;
    out->items.resize(n);
    for (auto& item : out->items) {
      if (!Value(&item, depth + 1)) return false;
    }
    return true;
  }
  bool Map(MsgValue* out, uint64_t n, int depth) {
    if (n > (size_ - pos_) / 2) return Fail("map longer than the data");
    out->kind = MsgValue::Kind::kMap;
    out->entries.resize(n);
    for (auto& [key, value] : out->entries) {
      if (!Value(&key, depth + 1) || !Value(&value, depth + 1)) return false;
    }
    return true;
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace

const MsgValue* MsgValue::Find(const std::string& key) const {
  for (const auto& [k, v] : entries) {
    if (k.kind == Kind::kString && k.text == key) return &v;
  }
  return nullptr;
}

bool ParseMsgPack(const uint8_t* data, size_t size, MsgValue* out, std::string* error) {
  Reader reader(data, size);
  if (reader.Value(out, 0)) return true;
  *error = reader.error();
  return false;
}

}  // namespace rgpu::hipbackend
