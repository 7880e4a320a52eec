// Instruction handlers: one specialised function per (operation, type, mode) variant. The decoder
// picks a handler once per instruction with the selectors below and fills the Insn operand slots
// as each selector's comment says; a selector returns nullptr for a combination it does not
// implement, and the decoder then reports the instruction as unsupported.
//
// Slot notation: a0..a5 are Insn::a[0..5]. "reg" slots are register/constant operands (Warp::R),
// "pred" slots are predicate indices (Warp::preds).
#pragma once

#include <cstdint>

#include "softgpu/program.h"
#include "softgpu/ptx_ast.h"

namespace softgpu {

// ---- integer arithmetic and logic (exec_int.cc) ----
enum class IntOp : uint8_t {
  kAdd,
  kSub,
  kAddSat,
  kSubSat,
  kMulLo,
  kMulHi,
  kMulWide,
  kMadLo,
  kMadHi,
  kMadWide,
  kMul24Lo,
  kMul24Hi,
  kMad24Lo,
  kMad24Hi,
  kSad,
  kDiv,
  kRem,
  kAbs,
  kNeg,
  kMin,
  kMax,
  kPopc,
  kClz,
  kBfind,
  kBfindShiftAmount,
  kBrev,
  kBfe,
  kBfi,
  kShl,
  kShr,
  kAnd,
  kOr,
  kXor,
  kNot,
  kCnot,
  kLop3,  // a4 holds nothing; Insn::aux = immLut
  kPrmt,  // Insn::aux = mode (0 default, 1 f4e, 2 b4e, 3 rc8, 4 ecl, 5 ecr, 6 rc16)
  kShfLWrap,
  kShfLClamp,
  kShfRWrap,
  kShfRClamp,
  kBmskWrap,  // bmsk.wrap.b32 / bmsk.clamp.b32: a mask of b bits from bit a
  kBmskClamp,
  // Extended-precision: a4 = carry-flag register (a hidden per-function register).
  kAddCC,
  kAddC,
  kAddCCC,
  kSubCC,
  kSubC,
  kSubCCC,
  kMadLoCC,
  kMadHiCC,
  kMadCLo,
  kMadCHi,
  kMadCLoCC,
  kMadCHiCC,
  kDp4a,
  kDp2aLo,
  kDp2aHi,  // Insn::aux bit0: a signed, bit1: b signed
};
// a0 = d, a1 = a, a2 = b, a3 = c (bfi: a1 = f, a2 = b, a3 = pos, a5 = len). Wide forms take
// `type` as the source type. popc/clz/bfind write a u32.
Handler IntHandler(IntOp op, ptx::Type type);

// ---- floating point (exec_float.cc) ----
enum class FloatOp : uint8_t {
  kAdd,
  kSub,
  kMul,
  kFma,
  kDiv,
  kRcp,
  kSqrt,
  kRsqrt,
  kSin,
  kCos,
  kLg2,
  kEx2,
  kTanh,
  kAbs,
  kNeg,
  kMin,
  kMax,
  kMinNaN,
  kMaxNaN,
  kCopysign,
};
enum Rounding : uint8_t { kRoundNearest = 0, kRoundZero = 1, kRoundDown = 2, kRoundUp = 3 };
struct FloatMode {
  uint8_t rounding = kRoundNearest;
  bool ftz = false;
  bool sat = false;
  bool relu = false;
};
// a0 = d, a1 = a, a2 = b, a3 = c. Types: f32, f64, f16, bf16, f16x2, bf16x2.
Handler FloatHandler(FloatOp op, ptx::Type type, FloatMode mode);
// testp.<kind>: a0 = pred d, a1 = a. kind: 0 finite, 1 infinite, 2 number, 3 notanumber,
// 4 normal, 5 subnormal.
Handler TestpHandler(int kind, ptx::Type type);

// ---- comparison and selection (exec_compare.cc) ----
enum class CmpOp : uint8_t {
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kLo,
  kLs,
  kHi,
  kHs,
  kEqu,
  kNeu,
  kLtu,
  kLeu,
  kGtu,
  kGeu,
  kNum,
  kNan,
};
enum class BoolOp : uint8_t { kNone, kAnd, kOr, kXor };
// setp: a0 = pred d, a1 = a, a2 = b, a3 = pred second result (or kNoOperand), a4 = pred c (or
// kNoOperand); Insn::aux = BoolOp, Insn::aux2 = 1 when c is negated.
Handler SetpHandler(CmpOp op, ptx::Type type);
// set.<cmp>.<dtype>.<stype>: a0 = d, a1/a2/a4 as setp; Insn::aux = BoolOp | CmpOp << 8,
// Insn::aux2 = c negated, Insn::imm = the bits of "true" in dtype (1.0 or all ones).
Handler SetHandler(CmpOp op, ptx::Type dtype, ptx::Type stype);
// selp: a0 = d, a1 = a, a2 = b, a3 = pred c.
Handler SelpHandler(ptx::Type type);
// slct.<dtype>.<ctype>: a0 = d, a1 = a, a2 = b, a3 = c (d = c >= 0 ? a : b).
Handler SlctHandler(ptx::Type dtype, ptx::Type ctype);
// Predicate logic: a0 = pred d, a1 = pred a, a2 = pred b; Insn::aux bit0/bit1: a/b negated.
enum class PredOp : uint8_t { kAnd, kOr, kXor, kNot, kMov, kCnot };
Handler PredHandler(PredOp op);
// Predicate from a constant: a0 = pred d; Insn::aux = 0 or 1.
Handler PredConstHandler();
// Register <-> predicate: a0 = d, a1 = pred (selp-like 1/0) or a0 = pred, a1 = reg (non-zero).
Handler PredToRegHandler();
Handler RegToPredHandler();

// ---- moves and conversions (exec_convert.cc) ----
// mov/plain copy: a0 = d, a1 = a. Works for every non-predicate type.
Handler MovHandler();
// mov.bN d, {a, b, ...}: a0 = d, a1.. = parts (count elements of `part_size` bytes).
Handler PackHandler(uint32_t part_size, uint32_t count);
// mov.bN {a, b, ...}, d: a0.. = parts (kNoOperand for "_"), a5 = source.
Handler UnpackHandler(uint32_t part_size, uint32_t count);
// cvt.<dst>.<src>: a0 = d, a1 = a. mode.rounding applies to float results; `integer_rounding`
// (for .rni/.rzi/.rmi/.rpi) applies to float->int and float->float rounding to integral.
Handler CvtHandler(ptx::Type dst, ptx::Type src, FloatMode mode, bool integer_rounding);
// cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32 d, a, b: pack two converted floats (a high, b low).
Handler CvtPackHandler(ptx::Type dst, FloatMode mode);

// Special registers (read into a0).
enum class Special : uint8_t {
  kTidX,
  kTidY,
  kTidZ,
  kNtidX,
  kNtidY,
  kNtidZ,
  kCtaidX,
  kCtaidY,
  kCtaidZ,
  kNctaidX,
  kNctaidY,
  kNctaidZ,
  kLaneId,
  kWarpId,
  kNWarpId,
  kSmId,
  kNSmId,
  kGridId,
  kLanemaskEq,
  kLanemaskLe,
  kLanemaskLt,
  kLanemaskGe,
  kLanemaskGt,
  kClock,
  kClock64,
  kGlobalTimer,
  kGlobalTimerLo,
  kGlobalTimerHi,
  kDynamicSmemSize,
  kTotalSmemSize,
  // %envreg1 / %envreg2: high and low halves of the grid workspace address a cooperative launch
  // provides (cooperative_groups' grid barrier lives there); 0 in other launches. Other
  // %envreg<n> read kZero.
  kEnvReg1,
  kEnvReg2,
  kZero,
  // Thread-block clusters (a launch without clusters: each block its own cluster of one).
  kClusterIdX,  // %clusterid: the cluster's index in the grid of clusters
  kClusterIdY,
  kClusterIdZ,
  kNClusterIdX,  // %nclusterid
  kNClusterIdY,
  kNClusterIdZ,
  kClusterCtaidX,  // %cluster_ctaid: the block's index in its cluster
  kClusterCtaidY,
  kClusterCtaidZ,
  kClusterNctaidX,  // %cluster_nctaid: the cluster's shape
  kClusterNctaidY,
  kClusterNctaidZ,
  kClusterCtarank,     // %cluster_ctarank: x + y*nx + z*nx*ny of %cluster_ctaid
  kClusterNctarank,    // %cluster_nctarank: blocks in the cluster
  kIsExplicitCluster,  // %is_explicit_cluster
};
Handler SpecialHandler(Special reg);
// d = Warp::local_base + Insn::imm (address of a .local variable of the current activation).
Handler LocalAddressHandler();

// ---- memory (exec_memory.cc) ----
enum class MemSpace : uint8_t {
  kGeneric,
  kGlobal,
  kShared,
  kLocal,
  kConst,
  kKernelParam,    // kernel parameter buffer (uniform)
  kFrameParam,     // per-lane parameter frame of a .func activation / call site
  kSharedCluster,  // isspacep.shared::cluster only (other instructions name it kShared)
};
// ld: a0..a3 = destinations (vector `count`, kNoOperand for "_"), a4 = address register or
// kNoOperand for an absolute/symbolic address, Insn::imm = displacement.
Handler LoadHandler(MemSpace space, ptx::Type type, uint32_t count);
// st: a0..a3 = sources, a4/imm as ld.
Handler StoreHandler(MemSpace space, ptx::Type type, uint32_t count);
// atom: a0 = d (or kNoOperand for red), a4/imm = address, a1 = b, a2 = c (cas new value).
Handler AtomHandler(MemSpace space, AtomOp op, ptx::Type type);
// cvta.<space> (to_generic) / cvta.to.<space>: a0 = d, a1 = a.
Handler CvtaHandler(MemSpace space, bool to_generic);
// isspacep.<space>: a0 = pred d, a1 = a.
Handler IsspacepHandler(MemSpace space);
// No-op for prefetch, membar, fence and similar.
Handler NopHandler();
// cp.async.{ca,cg}.shared.global, done synchronously (commit/wait are then no-ops): a0 = shared
// destination address register, a1 = global source address register, a2 = source size register
// (bytes actually read; the rest is zero-filled) or kNoOperand; Insn::aux = copy size (4/8/16).
Handler CpAsyncHandler();

// ---- textures and surfaces (exec_texture.cc) ----
// Insn::aux indexes Program::texture_sites. A handle that is not a live object of the launching
// context, storage that was freed, or an out-of-range .trap surface access faults with an
// illegal address.
Handler TextureHandler();       // tex, tex.level, tex.grad
Handler GatherHandler();        // tld4 (level 0)
Handler TextureQueryHandler();  // txq, txq.level
Handler SurfaceQueryHandler();  // suq
Handler SurfaceLoadHandler();   // suld.b
Handler SurfaceStoreHandler();  // sust.b, sust.p

// ---- warp-level (exec_warp.cc) ----
enum class ShflMode : uint8_t { kUp, kDown, kBfly, kIdx };
// shfl.sync: a0 = d, a1 = a, a2 = b (lane/offset), a3 = c (clamp/segment mask), a5 = pred out.
Handler ShflHandler(ShflMode mode);
// vote: a0 = d (pred for all/any/uni, reg for ballot), a1 = pred a; Insn::aux2 = 1 if negated.
enum class VoteMode : uint8_t { kAll, kAny, kUni, kBallot };
Handler VoteHandler(VoteMode mode);
// match.any/all.b32/b64: a0 = d, a1 = a, a5 = pred out (all only).
Handler MatchHandler(bool all, ptx::Type type);
// redux.sync.<op>.<type>: a0 = d, a1 = a. op: 0 add, 1 min, 2 max, 3 and, 4 or, 5 xor.
Handler ReduxHandler(int op, ptx::Type type);
// activemask.b32: a0 = d.
Handler ActivemaskHandler();
// bar.red.<op> before the barrier: a1 = pred a (aux2 = negated); aux = 0 popc, 1 and, 2 or.
// The scheduler writes the block-wide result to a0 after the barrier.
Handler BarRedHandler();

// ---- mbarrier objects (exec_mbarrier.cc) ----
// A 64-bit mbarrier object in memory: bits 0-19 the arrivals still pending in the current phase,
// bits 20-39 the arrivals expected per phase, bits 40-63 the phase number. The opaque state an
// arrive returns holds the phase it arrived in, the expected count and the pending count after
// the arrival.
enum class MbarrierOp : uint8_t {
  kInit,            // mbarrier.init [a], a1 = count
  kInval,           // mbarrier.inval [a]
  kArrive,          // a0 = state (d), [a], a1 = count (or kNoOperand: 1)
  kArriveDrop,      // the same, and the expected count of later phases drops by count
  kTestWait,        // a0 = pred d, [a], a1 = state: d = the state's phase has completed
  kTestWaitParity,  // a0 = pred d, [a], a1 = parity: d = the phase of that parity has completed
  kPendingCount,    // a0 = d, a1 = state: d = the pending count the state records
  kExpectTx,        // mbarrier.expect_tx [a], a1 = bytes: the phase also waits for that many
  kCompleteTx,      // mbarrier.complete_tx [a], a1 = bytes: that many have arrived
  kArriveExpectTx,  // mbarrier.arrive.expect_tx: a0 = state, [a], a1 = bytes; then one arrival
};
// mbarrier.*: address in a4 (register or kNoOperand) plus Insn::imm, in `space` (shared or
// generic); misaligned or unowned addresses fault like any access. A phase completes when its
// pending arrivals and its transaction count (bytes expected less bytes completed, which may go
// below zero for a while) are both zero.
Handler MbarrierHandler(MbarrierOp op, MemSpace space);

// Completes `bytes` of transactions on the mbarrier object at `object` (the bulk copies'
// mbarrier::complete_tx::bytes), completing its phase if nothing else is pending.
void MbarrierCompleteTx(uint64_t* object, uint64_t bytes);

// ---- the asynchronous proxy: bulk copies, tensor-map copies, st.async (exec_async.cc) ----
// Every copy is done when issued, so commit and wait of bulk groups have nothing to wait for,
// and an mbarrier's transactions complete at once.

// cp.async.bulk / cp.reduce.async.bulk without tensor maps: a0 = destination address, a1 =
// source address, a2 = bytes (a multiple of 16, both addresses 16-byte aligned), a3 = the shared
// mbarrier whose transaction count the copy completes (kNoOperand for bulk groups), a4 = the
// .multicast::cluster mask (a load into the same offset of each block it names, completing each
// one's mbarrier at the mbarrier's offset); aux = CpBulkMode::Pack().
enum class CpBulkDirection : uint8_t { kGlobalToShared, kSharedToShared, kSharedToGlobal };
struct CpBulkMode {
  CpBulkDirection direction = CpBulkDirection::kGlobalToShared;
  bool multicast = false;
  bool reduce = false;  // cp.reduce.async.bulk: each element of `type` combined with `op`
  AtomOp op = AtomOp::kAdd;
  ptx::Type type = ptx::Type::kNone;

  uint32_t Pack() const {
    return static_cast<uint32_t>(direction) | (multicast ? 1u << 8 : 0) | (reduce ? 1u << 9 : 0) |
           static_cast<uint32_t>(op) << 16 | static_cast<uint32_t>(type) << 24;
  }
  static CpBulkMode Unpack(uint32_t v) {
    CpBulkMode m;
    m.direction = static_cast<CpBulkDirection>(v & 0xff);
    m.multicast = (v >> 8) & 1;
    m.reduce = (v >> 9) & 1;
    m.op = static_cast<AtomOp>((v >> 16) & 0xff);
    m.type = static_cast<ptx::Type>(v >> 24);
    return m;
  }
};
Handler CpAsyncBulkHandler();
// True when the reducing copies and red.async can combine elements of `type` with `op`: add,
// min and max (32- and 64-bit integers, f16, bf16, f32, f64), inc and dec (u32), and, or and xor
// (32- and 64-bit bit and integer types).
bool BulkReduceSupported(AtomOp op, ptx::Type type);

// cp.async.bulk.tensor (tile mode) and its reducing form (a prefetch decodes to a no-op): Insn::aux
// indexes Program::tensor_sites. The tensor map (tensor_map.h) is read and checked at every copy:
// bytes that are no map softgpu made, a rank other than the instruction's, or a box the shared
// memory cannot hold fault the kernel (CUDA_ERROR_ILLEGAL_ADDRESS), as do elements of the map's
// global range that are not the context's memory. Loads fill elements outside the tensor with
// zeros, complete box-bytes of transactions on the mbarrier (of each block with
// .multicast::cluster) and lay the box out in shared memory with the map's swizzle; stores and
// reductions write only the elements inside the tensor. The shared address must be 128-byte
// aligned.
Handler TensorCopyHandler();

// st.async / red.async: a0 = shared::cluster address, a1..a4 = values (vector count), a5 = the
// mbarrier (in the same block as the address) whose transactions the store's bytes complete;
// aux = AsyncStoreMode::Pack().
struct AsyncStoreMode {
  ptx::Type type = ptx::Type::kNone;
  uint32_t count = 1;
  bool reduce = false;  // red.async: combined with `op`
  AtomOp op = AtomOp::kAdd;

  uint32_t Pack() const {
    return static_cast<uint32_t>(type) | count << 8 | (reduce ? 1u << 12 : 0) |
           static_cast<uint32_t>(op) << 16;
  }
  static AsyncStoreMode Unpack(uint32_t v) {
    AsyncStoreMode m;
    m.type = static_cast<ptx::Type>(v & 0xff);
    m.count = (v >> 8) & 0xf;
    m.reduce = (v >> 12) & 1;
    m.op = static_cast<AtomOp>((v >> 16) & 0xff);
    return m;
  }
};
Handler AsyncStoreHandler();

// ---- thread-block clusters (exec_cluster.cc) ----
// barrier.cluster.arrive: the lanes arrive at their cluster's barrier (Block::cluster).
Handler ClusterArriveHandler();
// barrier.cluster.wait (Control::kYield): sets Warp::stall while any lane's arrival's phase is
// not complete (every thread of the cluster not exited has arrived); then the lanes go on.
Handler ClusterWaitHandler();
// mapa{.shared::cluster}.{u32,u64} d, a, rank: a0 = d, a1 = a, a2 = rank register. `generic`:
// a is a generic address in the shared window and so is d; otherwise shared::cluster addresses.
// A rank outside the cluster or an address that is not shared memory faults.
Handler MapaHandler(bool generic);
// getctarank{.shared::cluster}.{u32,u64} d, a: a0 = d (32-bit), a1 = a; the rank of the block
// whose shared memory a names.
Handler GetctarankHandler(bool generic);
// mov.pred d, %is_explicit_cluster: a0 = pred d.
Handler ExplicitClusterPredHandler();

// elect.sync d|p, membermask: the lowest lane of membermask that executes the instruction is the
// leader; a0 = d (its lane id, in every lane), a1 = p (true in the leader only; kNoOperand when
// absent), a2 = membermask.
Handler ElectHandler();

// Warp-level matrix instructions; Insn::aux indexes Program::matrix_sites. mma.sync uses the
// PTX ISA's fragment layouts exactly (m8n8k4 .f64; m16n8k4, m16n8k8 .tf32; m16n8k8, m16n8k16
// .f16/.bf16; m8n8k16, m16n8k16, m16n8k32 .s8/.u8); wmma fragments are opaque to programs, and
// softgpu's own layout spreads a matrix's elements over the lanes in order (replicated where the
// fragment has more slots than the matrix elements). ldmatrix/stmatrix (m8n8 .b16, x1/x2/x4,
// .trans) and movmatrix follow the ISA: lanes 8i..8i+7 address the rows of matrix i, and lane t
// holds row t/4, columns 2(t%4) and 2(t%4)+1. Every lane of the warp must take part.
Handler MatrixHandler(MatrixOp op);
// Elements of type `t` one register of a matrix fragment holds (2 for .f16/.bf16, 4 for
// .s8/.u8, else 1).
uint32_t FragmentElementsPerRegister(ptx::Type t);
// cvt.tf32.f32: a0 = d, a1 = a; Insn::aux = rounding (0 .rna, 1 .rn, 2 .rz). The result is an
// f32 whose low 13 mantissa bits are zero.
Handler CvtTf32Handler();

}  // namespace softgpu
