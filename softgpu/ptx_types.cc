#include "softgpu/ptx_ast.h"

namespace softgpu::ptx {
namespace {

struct TypeInfo {
  const char* name;
  Type type;
  uint32_t size;
};

constexpr TypeInfo kTypes[] = {
    {"pred", Type::kPred, 0},   {"b8", Type::kB8, 1},     {"b16", Type::kB16, 2},
    {"b32", Type::kB32, 4},     {"b64", Type::kB64, 8},   {"b128", Type::kB128, 16},
    {"u8", Type::kU8, 1},       {"u16", Type::kU16, 2},   {"u32", Type::kU32, 4},
    {"u64", Type::kU64, 8},     {"s8", Type::kS8, 1},     {"s16", Type::kS16, 2},
    {"s32", Type::kS32, 4},     {"s64", Type::kS64, 8},   {"f16", Type::kF16, 2},
    {"f16x2", Type::kF16x2, 4}, {"bf16", Type::kBF16, 2}, {"bf16x2", Type::kBF16x2, 4},
    {"f32", Type::kF32, 4},     {"f64", Type::kF64, 8},   {"tf32", Type::kTF32, 4},
};

}  // namespace

Type TypeFromName(std::string_view name) {
  for (const TypeInfo& t : kTypes) {
    if (name == t.name) return t.type;
  }
  return Type::kNone;
}

const char* TypeName(Type type) {
  for (const TypeInfo& t : kTypes) {
    if (t.type == type) return t.name;
  }
  return "none";
}

uint32_t TypeSize(Type type) {
  for (const TypeInfo& t : kTypes) {
    if (t.type == type) return t.size;
  }
  return 0;
}

bool IsSignedInt(Type type) {
  return type == Type::kS8 || type == Type::kS16 || type == Type::kS32 || type == Type::kS64;
}

bool IsFloat(Type type) {
  switch (type) {
    case Type::kF16:
    case Type::kF16x2:
    case Type::kBF16:
    case Type::kBF16x2:
    case Type::kF32:
    case Type::kF64:
    case Type::kTF32:
      return true;
    default:
      return false;
  }
}

}  // namespace softgpu::ptx
