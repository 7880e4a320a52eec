// The decoded, executable form of a PTX module. Decoding happens once per module load; the
// interpreter then only walks these arrays. Every operand is resolved to a register slot, a
// constant slot or an immediate, and every instruction to a handler specialised for its types.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "softgpu/ptx_ast.h"

namespace softgpu {

constexpr uint32_t kWarpSize = 32;
constexpr uint32_t kFullMask = 0xffffffffu;
// Operand slot encoding: a register index, or a constant-pool index with this bit set.
constexpr uint32_t kConstOperand = 0x80000000u;
// An absent optional operand.
constexpr uint32_t kNoOperand = 0xffffffffu;
// The value of a function's address (a function pointer) in device code: this base plus the
// function index times 16. Never a valid data address.
constexpr uint64_t kFunctionAddressBase = 0x0000400000000000ull;

struct Warp;
struct Insn;
// Executes the data part of one instruction for the lanes in `mask` (already filtered by the
// guard predicate). May record a fault in the warp; never throws.
using Handler = void (*)(Warp& warp, const Insn& insn, uint32_t mask);

// What an instruction does to control flow; the warp scheduler acts on it after the handler.
enum class Control : uint8_t {
  kNone,      // fall through
  kBranch,    // to `target` for lanes in the (guarded) mask
  kExit,      // lanes terminate (exit, or ret from the kernel's own body)
  kReturn,    // ret from a .func
  kBarrier,   // bar.sync: the warp waits for the rest of the block (handler runs first if any)
  kCall,      // call of function `target`; operands in Function::call_sites[aux]
  kTrap,      // trap/brkpt: the kernel fails
  kYield,     // nanosleep, mbarrier.try_wait: the handler runs, then the warp lets others run
  kWait,      // barrier.cluster.wait: the handler runs; while it sets Warp::stall, the warp stays
              // at the instruction and lets others run
  kIndirect,  // brx.idx: each lane in the mask to Function::branch_tables[aux][its a[0] (u32)]
};

struct Insn {
  Handler exec = nullptr;  // null for pure control instructions
  uint32_t a[6] = {kNoOperand, kNoOperand, kNoOperand, kNoOperand, kNoOperand, kNoOperand};
  int64_t imm = 0;
  uint32_t aux = 0;
  uint32_t aux2 = 0;
  int32_t guard = -1;  // predicate index
  bool guard_negated = false;
  Control control = Control::kNone;
  uint32_t target = 0;  // branch target instruction index or callee function index
  uint32_t line = 0;    // PTX source line, for messages
};

// Byte range of one parameter in a parameter buffer.
struct ParamSlot {
  uint32_t offset = 0;
  uint32_t size = 0;
};

// A call instruction's argument/return byte ranges in the caller's and callee's parameter frames.
struct CallSite {
  struct Copy {
    uint32_t caller_offset;
    uint32_t callee_offset;
    uint32_t size;
  };
  // Functions the interpreter provides itself (declared .extern in PTX).
  // kSetConditional: cudaGraphSetConditional(handle, value) stores value as a 32-bit word at the
  // handle, which for softgpu is a device address (rgpu's client makes conditional handles so).
  enum class Builtin : uint8_t { kNone, kPrintf, kMalloc, kFree, kAssert, kSetConditional };
  std::vector<Copy> args;     // caller -> callee before the call
  std::vector<Copy> results;  // callee -> caller after it returns
  Builtin builtin = Builtin::kNone;
  // Indirect calls (call through a register): the target register, and the caller-side byte
  // ranges of the arguments and results in order; the callee's side is matched at run time.
  uint32_t target_register = kNoOperand;
  std::vector<ParamSlot> indirect_args;
  std::vector<ParamSlot> indirect_results;
  // Builtins: caller frame offsets of the arguments (in order) and of the result (or kNoOperand).
  std::vector<uint32_t> builtin_args;
  uint32_t builtin_result = kNoOperand;
};

struct Function {
  std::string name;
  bool is_entry = false;
  bool has_body = false;
  std::vector<Insn> insns;
  uint32_t num_regs = 0;   // 64-bit register slots per lane
  uint32_t num_preds = 0;  // predicate registers (one 32-bit lane mask each)
  // Parameters. Kernels: offsets in the launch's parameter buffer (natural alignment);
  // functions: offsets in the per-lane parameter frame.
  std::vector<ParamSlot> params;
  uint32_t param_bytes = 0;        // kernels: size of the parameter buffer
  std::vector<ParamSlot> returns;  // functions: offsets in the per-lane frame
  uint32_t frame_bytes = 0;   // per-lane parameter frame (functions' params+returns, call args)
  uint32_t local_bytes = 0;   // per-thread .local bytes of one activation
  uint32_t shared_bytes = 0;  // kernels: static shared memory (module-level + own)
  // Kernels: where dynamic shared memory starts (shared_bytes rounded up to 16 bytes or to the
  // largest alignment an extern .shared declaration asks for).
  uint32_t dynamic_shared_offset = 0;
  uint32_t max_threads = 0;              // .maxntid/.reqntid product, 0 if unconstrained
  uint32_t cluster_dims[3] = {0, 0, 0};  // .reqnctapercluster, 0s if the launch chooses
  bool explicit_cluster = false;         // .explicitcluster: launched as clusters only
  uint32_t max_cluster_rank = 0;         // .maxclusterrank, 0 if unconstrained
  uint32_t max_call_depth = 0;  // functions reachable by nested calls; kUnbounded for recursion
  std::vector<CallSite> call_sites;
  std::vector<std::vector<uint32_t>> branch_tables;  // brx.idx target lists (instruction indices)
  std::vector<std::string> unsupported;  // instructions this function cannot run (with lines)
};

// A module-scope .global/.const variable: allocated in device memory per module instance.
struct GlobalVariable {
  std::string name;
  ptx::Space space = ptx::Space::kGlobal;
  uint64_t size = 0;
  uint32_t align = 1;
  // A __managed__ variable: placed on pages of its own (the page size is the host's), so that a
  // client can map it at the same address in the program's process.
  bool managed = false;
  std::vector<uint8_t> init;  // initial bytes of its first init.size() bytes; the rest is zero
  struct PointerInit {        // init bytes at `offset` (8 bytes) = address of `target` + addend
    uint64_t offset;
    uint32_t target;
    int64_t addend;
  };
  std::vector<PointerInit> pointer_inits;
};

// A constant-pool slot whose value is the device address of a global variable (plus addend),
// known only when a module instance is allocated.
struct Relocation {
  uint32_t const_index;
  uint32_t global;
  int64_t addend;
};

// Texture and surface instructions (tex, tld4, txq, suld, sust, suq) name more operands than an
// Insn holds; their Insn::aux indexes one of these in Program::texture_sites.
enum class TexGeometry : uint8_t { k1D, k2D, k3D, kA1D, kA2D, kCube, kACube };
// Out-of-range behaviour of surface accesses (.trap, .clamp, .zero).
enum class SurfaceClamp : uint8_t { kTrap, kClamp, kZero };
// txq/suq attributes.
enum class TexQuery : uint8_t {
  kWidth,
  kHeight,
  kDepth,
  kArraySize,
  kMipmapLevels,
  kNormalizedCoords,
  kFilterMode,
  kAddrMode0,
  kAddrMode1,
  kAddrMode2,
};
// How tex picks the mipmap level: .base (the default), .level (an lod operand), .grad (dPdx and
// dPdy operands).
enum class TexLodMode : uint8_t { kBase, kLevel, kGrad };
struct TextureSite {
  TexGeometry geometry = TexGeometry::k1D;
  TexLodMode lod_mode = TexLodMode::kBase;
  bool integer_coords = false;  // tex with .s32 coordinates (texel indices, tex1Dfetch)
  uint8_t component = 0;        // tld4: 0 r, 1 g, 2 b, 3 a
  TexQuery query = TexQuery::kWidth;
  SurfaceClamp clamp = SurfaceClamp::kTrap;
  bool formatted = false;        // sust.p: values are converted to the surface's format
  uint8_t access_bytes = 4;      // suld/sust.b: bytes of one vector element (1, 2, 4, 8)
  uint8_t count = 4;             // values read or written
  uint32_t handle = kNoOperand;  // register/constant holding the texture or surface object
  // Coordinates as the instruction lists them (layer first for a1d/a2d/acube); kNoOperand
  // where absent.
  uint32_t coords[4] = {kNoOperand, kNoOperand, kNoOperand, kNoOperand};
  // tex/tld4/suld/txq destinations or sust sources; kNoOperand for "_".
  uint32_t values[4] = {kNoOperand, kNoOperand, kNoOperand, kNoOperand};
  // tex.level and txq.level: the lod operand (.f32, or .s32 with integer coordinates and for
  // txq); tex.grad: dPdx and dPdy (x, y, z; kNoOperand where the geometry has fewer).
  uint32_t lod = kNoOperand;
  uint32_t grad[2][3] = {{kNoOperand, kNoOperand, kNoOperand},
                         {kNoOperand, kNoOperand, kNoOperand}};
};

// A warp-level matrix instruction (mma.sync, wmma.load/store/mma): more registers than an Insn
// holds; Insn::aux indexes one of these in Program::matrix_sites.
enum class MatrixOp : uint8_t {
  kMma,
  kWmmaLoad,
  kWmmaStore,
  kWmmaMma,
  kLdmatrix,
  kStmatrix,
  kMovmatrix
};
struct MatrixSite {
  MatrixOp op = MatrixOp::kMma;
  uint8_t m = 0, n = 0, k = 0;  // shape
  // Element types of D, A, B, C (mma, wmma.mma); for wmma.load/store `a` is the memory type.
  ptx::Type d_type = ptx::Type::kNone, a_type = ptx::Type::kNone, b_type = ptx::Type::kNone,
            c_type = ptx::Type::kNone;
  bool satfinite = false;
  // wmma.load/store: which matrix (0 a, 1 b, 2 c or d), its layout in memory, where it lies.
  uint8_t matrix = 0;     // ldmatrix/stmatrix: how many 8x8 matrices (1, 2, 4)
  bool row_major = true;  // ldmatrix/stmatrix: false with .trans
  ptx::Space space = ptx::Space::kGeneric;
  uint32_t base = kNoOperand;    // address register, or kNoOperand
  int64_t imm = 0;               // displacement (a symbol's offset included)
  uint32_t stride = kNoOperand;  // register/constant with the stride in elements
  // Register slots of each fragment (wmma.load: d = destinations; wmma.store: c = sources).
  std::vector<uint32_t> d, a, b, c;
};

// Tensor-map copies (cp.async.bulk.tensor, cp.reduce.async.bulk.tensor, their prefetch) name
// more operands than an Insn holds; their Insn::aux indexes one of these in
// Program::tensor_sites.
enum class TensorCopy : uint8_t {
  kLoad,      // global -> shared::cluster, completing an mbarrier's transactions
  kStore,     // shared::cta -> global (bulk group)
  kReduce,    // shared::cta -> global, each element combined with `reduce` (bulk group)
  kPrefetch,  // to L2: a hint
};
// The read-modify-write operations of atom, red and the reducing copies.
enum class AtomOp : uint8_t { kAdd, kMin, kMax, kExch, kCas, kAnd, kOr, kXor, kInc, kDec };
struct TensorSite {
  TensorCopy op = TensorCopy::kLoad;
  AtomOp reduce = AtomOp::kAdd;    // kReduce: how each element combines
  uint8_t rank = 0;                // the instruction's .1d to .5d
  uint32_t map = kNoOperand;       // generic address of the 128-byte tensor map
  uint32_t shared = kNoOperand;    // load: shared::cluster destination; store: shared source
  uint32_t mbarrier = kNoOperand;  // load: shared::cluster mbarrier
  uint32_t cta_mask = kNoOperand;  // load with .multicast::cluster: the destination blocks
  uint32_t coords[5] = {kNoOperand, kNoOperand, kNoOperand, kNoOperand, kNoOperand};  // .s32
};

struct Program {
  std::string target;        // e.g. "sm_75"
  uint32_t target_arch = 0;  // its number (75; 90 for "sm_90a"), 0 if it names none
  std::vector<Function> functions;
  std::vector<TextureSite> texture_sites;
  std::vector<MatrixSite> matrix_sites;
  std::vector<TensorSite> tensor_sites;
  std::unordered_map<std::string, uint32_t> function_index;
  std::vector<GlobalVariable> globals;
  std::unordered_map<std::string, uint32_t> global_index;
  // Constant pool: value of slot i repeated for 32 lanes at [i * 32, i * 32 + 32).
  std::vector<uint64_t> consts;
  std::vector<Relocation> relocations;
};

constexpr uint32_t kUnboundedCallDepth = 0xffffffffu;

}  // namespace softgpu
