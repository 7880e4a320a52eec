// The parsed form of a PTX module: what the text says, with register names already resolved to
// indices (PTX scopes them with braces) but nothing decoded into executable form yet. The decoder
// (ptx_decoder.h) turns this into a Program.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "softgpu/ptx_lexer.h"

namespace softgpu::ptx {

// Data types named by PTX type suffixes.
enum class Type : uint8_t {
  kNone,
  kPred,
  kB8,
  kB16,
  kB32,
  kB64,
  kB128,
  kU8,
  kU16,
  kU32,
  kU64,
  kS8,
  kS16,
  kS32,
  kS64,
  kF16,
  kF16x2,
  kBF16,
  kBF16x2,
  kF32,
  kF64,
  kTF32,
};

// Maps a suffix without its dot ("u32", "f16x2") to a Type; kNone when it is not a type.
Type TypeFromName(std::string_view name);
const char* TypeName(Type type);
// Size in bytes of one value (0 for kNone/kPred).
uint32_t TypeSize(Type type);
bool IsSignedInt(Type type);
bool IsFloat(Type type);  // f16, bf16, f32, f64 and their x2 forms, tf32

// State spaces.
enum class Space : uint8_t { kGeneric, kGlobal, kShared, kLocal, kConst, kParam };

struct InitItem {
  bool is_symbol = false;
  TokenKind number_kind = TokenKind::kInteger;  // kInteger, kFloat32 or kFloat64
  uint64_t bits = 0;                            // the number (two's complement for integers)
  std::string symbol;                           // address of this symbol ...
  int64_t addend = 0;                           // ... plus this
};

// A .global/.const/.shared/.local/.param variable.
struct Variable {
  std::string name;
  Space space = Space::kGlobal;
  Type type = Type::kB8;
  uint32_t align = 1;
  uint64_t size = 0;  // bytes; 0 for an unsized extern array (dynamic shared memory)
  bool is_extern = false;
  bool unsized = false;        // declared "name[]"
  bool managed = false;        // .attribute(.managed): a __managed__ variable
  std::vector<InitItem> init;  // one item per element of `type`, in order (may be shorter)
};

struct Operand {
  enum class Kind : uint8_t {
    kRegister,   // reg: register index (function-wide)
    kPredicate,  // reg: predicate index; negated for "!%p"
    kImmediate,  // imm_kind + imm_bits
    kSymbol,     // name (module/param/label/function) or var (body variable); plus offset
    kAddress,    // [base + offset]: base_kind says whether reg / symbol / nothing
    kVector,     // {a, b, ...}: elems
    kList,       // (a, b, ...): call argument lists
    kSink,       // "_"
    kSpecial,    // special register: name ("%tid.x")
  };
  enum class BaseKind : uint8_t { kNone, kRegister, kSymbol };
  Kind kind = Kind::kImmediate;
  BaseKind base_kind = BaseKind::kNone;  // kAddress only
  bool negated = false;
  uint32_t reg = 0;
  TokenKind imm_kind = TokenKind::kInteger;
  uint64_t imm_bits = 0;
  std::string name;
  int32_t var = -1;  // index into Function::vars for body-declared variables
  int64_t offset = 0;
  int32_t pred_out = -1;  // "%r|%p": second (predicate) destination
  std::vector<Operand> elems;
};

struct Instruction {
  std::string opcode;  // e.g. "ld.global.v2.f32"
  int32_t guard = -1;  // predicate index, or -1
  bool guard_negated = false;
  std::vector<Operand> operands;
  uint32_t line = 0;
};

struct Param {
  std::string name;
  Type type = Type::kB8;
  uint32_t size = 0;
  uint32_t align = 1;
};

struct Function {
  std::string name;
  bool is_entry = false;
  bool has_body = false;
  std::vector<Param> params;
  std::vector<Param> returns;
  std::vector<Type> reg_types;  // type of each register index
  uint32_t num_predicates = 0;
  std::vector<Variable> vars;  // variables declared in the body (.local/.shared/.param)
  std::vector<Instruction> insns;
  std::unordered_map<std::string, uint32_t> labels;  // label -> index of the next instruction
  // `NAME: .branchtargets L1, L2, ...;` lists (brx.idx's targets), by NAME.
  std::unordered_map<std::string, std::vector<std::string>> branch_target_lists;
  uint32_t max_threads = 0;              // from .maxntid/.reqntid (product), 0 if none
  uint32_t cluster_dims[3] = {0, 0, 0};  // from .reqnctapercluster (missing dims 1), 0s if none
  bool explicit_cluster = false;         // .explicitcluster: must be launched as clusters
  uint32_t max_cluster_rank = 0;         // from .maxclusterrank, 0 if none
  uint32_t line = 0;
};

struct Module {
  uint32_t version_major = 0, version_minor = 0;
  std::string target;  // e.g. "sm_75"
  uint32_t address_size = 64;
  std::vector<Variable> globals;  // module-scope .global/.const/.shared variables
  std::vector<Function> functions;
};

}  // namespace softgpu::ptx
