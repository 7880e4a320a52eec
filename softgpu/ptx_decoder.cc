#include "softgpu/ptx_decoder.h"

#include <bit>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_set>

#include "softgpu/exec.h"
#include "softgpu/handlers.h"
#include "softgpu/ptx_parser.h"
#include "softgpu/tensor_map.h"

namespace softgpu {
namespace {

using ptx::Operand;
using ptx::Space;
using ptx::Type;
using rgpu::Status;

uint32_t AlignUp(uint32_t v, uint32_t a) { return a <= 1 ? v : (v + a - 1) / a * a; }

// An opcode split into its base and dot-separated modifiers; type modifiers kept in order.
struct Mods {
  std::string base;
  std::vector<Type> types;
  std::vector<std::string> flags;

  bool Has(std::string_view f) const {
    for (const std::string& s : flags) {
      if (s == f) return true;
    }
    return false;
  }
  Type type(size_t i = 0) const { return i < types.size() ? types[i] : Type::kNone; }
  // The vector width (.v2/.v4), 1 if none.
  uint32_t Vector() const {
    if (Has("v2")) return 2;
    if (Has("v4")) return 4;
    if (Has("v8")) return 8;
    return 1;
  }
};

// The operation of an atom, red or reducing bulk copy (its .add, .min, ... modifier).
bool AtomOpOf(const Mods& m, AtomOp* op) {
  static const std::pair<const char*, AtomOp> kOps[] = {
      {"add", AtomOp::kAdd}, {"min", AtomOp::kMin}, {"max", AtomOp::kMax}, {"exch", AtomOp::kExch},
      {"cas", AtomOp::kCas}, {"and", AtomOp::kAnd}, {"or", AtomOp::kOr},   {"xor", AtomOp::kXor},
      {"inc", AtomOp::kInc}, {"dec", AtomOp::kDec}};
  for (const auto& [name, o] : kOps) {
    if (m.Has(name)) {
      *op = o;
      return true;
    }
  }
  return false;
}

Mods SplitOpcode(const std::string& opcode) {
  Mods m;
  size_t start = 0;
  bool first = true;
  while (start <= opcode.size()) {
    size_t dot = opcode.find('.', start);
    if (dot == std::string::npos) dot = opcode.size();
    std::string part = opcode.substr(start, dot - start);
    if (first) {
      m.base = part;
      first = false;
    } else if (!part.empty()) {
      if (part == "shared::cta") part = "shared";  // the CTA's own shared memory, as .shared
      Type t = ptx::TypeFromName(part);
      if (t != Type::kNone)
        m.types.push_back(t);
      else
        m.flags.push_back(part);
    }
    start = dot + 1;
  }
  return m;
}

// Layout of one function's parameters and body variables.
struct VarLayout {
  Space space = Space::kLocal;
  uint32_t offset = 0;
  uint32_t size = 0;
};
struct FunctionLayout {
  std::vector<VarLayout> vars;
  std::unordered_map<std::string, uint32_t> params;   // name -> index
  std::unordered_map<std::string, uint32_t> returns;  // name -> index
};

class ProgramDecoder;

class FunctionDecoder {
 public:
  FunctionDecoder(ProgramDecoder& pd, const ptx::Function& src, uint32_t index);
  Status Run();

 private:
  struct PendingBranch {
    uint32_t insn;
    std::string label;
    uint32_t line;
  };
  // brx.idx's list `list`, resolved into branch_tables[table] once the labels are known.
  struct PendingTable {
    uint32_t table;
    std::string list;
    uint32_t line;
  };

  Insn& Emit(const ptx::Instruction& src, Handler h);
  // Marks the current instruction unsupported; returns true so callers can `return Unsupported()`.
  bool Unsupported(const ptx::Instruction& src, const std::string& why);
  Status Error(const ptx::Instruction& src, const std::string& why) const {
    return rgpu::InvalidArgument("PTX line " + std::to_string(src.line) + ": " + why + " in '" +
                                 src.opcode + "'");
  }
  uint32_t NewTemp() { return out_.num_regs++; }
  uint32_t Scratch() {
    if (scratch_ == kNoOperand) scratch_ = NewTemp();
    return scratch_;
  }
  uint32_t Carry() {
    if (carry_ == kNoOperand) carry_ = NewTemp();
    return carry_;
  }

  // Operand helpers. Each returns false (after recording why) when the operand cannot be used.
  bool Src(const ptx::Instruction& src, const Operand& op, Type type, uint32_t* slot);
  bool Dst(const ptx::Instruction& src, const Operand& op, uint32_t* slot);
  bool Pred(const ptx::Instruction& src, const Operand& op, uint32_t* index, bool* negated);
  bool SymbolAddress(const ptx::Instruction& src, const Operand& op, uint32_t* slot);
  bool Address(const ptx::Instruction& src, const Operand& op, MemSpace* space, uint32_t* base,
               int64_t* imm);
  bool SpecialRegister(const std::string& name, Special* reg) const;

  bool DecodeInstruction(const ptx::Instruction& src);
  bool DecodeArith(const ptx::Instruction& src, const Mods& m);
  bool DecodeMov(const ptx::Instruction& src, const Mods& m);
  bool DecodeMemory(const ptx::Instruction& src, const Mods& m);
  bool DecodeAtom(const ptx::Instruction& src, const Mods& m);
  bool DecodeCall(const ptx::Instruction& src, const Mods& m);
  bool DecodeWarp(const ptx::Instruction& src, const Mods& m);
  bool DecodeCompare(const ptx::Instruction& src, const Mods& m);
  bool DecodeCvt(const ptx::Instruction& src, const Mods& m);
  // cp.async (4/8/16 bytes to shared memory), cp.async.mbarrier.arrive, and cp.async.bulk
  // (global or shared to shared::cluster with an mbarrier, multicast to several blocks of the
  // cluster, shared to global in bulk groups; cp.reduce.async.bulk combining into the
  // destination).
  bool DecodeCpAsync(const ptx::Instruction& src, const Mods& m);
  bool DecodeCpAsyncBulk(const ptx::Instruction& src, const Mods& m);
  // cp.async.bulk.tensor, cp.reduce.async.bulk.tensor and cp.async.bulk.prefetch.tensor in
  // tile mode (Program::tensor_sites).
  bool DecodeCpAsyncBulkTensor(const ptx::Instruction& src, const Mods& m);
  // [tensorMap, {coordinates}]: the map's generic address and `rank` .s32 coordinates.
  bool TensorMapOperand(const ptx::Instruction& src, const Operand& op, uint32_t rank,
                        TensorSite* site);
  // st.async and red.async: a store or reduction into (another block's) shared memory that
  // completes that block's mbarrier.
  bool DecodeAsyncStore(const ptx::Instruction& src, const Mods& m);
  // mbarrier.{init,inval,arrive,arrive_drop,expect_tx,complete_tx,test_wait,try_wait,
  // pending_count}, with transaction counts; cluster scope and shared::cluster name the block's
  // own barrier (clusters are of one block).
  bool DecodeMbarrier(const ptx::Instruction& src, const Mods& m);
  // tex, tld4, txq, suld, sust, suq (texture and surface objects; Program::texture_sites).
  bool DecodeTexture(const ptx::Instruction& src, const Mods& m);
  // mma.sync and wmma.load/store/mma (Program::matrix_sites); shapes and types it cannot run
  // are refused by name.
  bool DecodeMatrix(const ptx::Instruction& src, const Mods& m);
  // A register holding base + offset of an address operand (emitting an add when needed).
  bool AddressRegister(const ptx::Instruction& src, const Operand& op, MemSpace space,
                       uint32_t* reg);

  ProgramDecoder& pd_;
  const ptx::Function& src_;
  const uint32_t index_;
  Function& out_;
  const FunctionLayout& layout_;
  std::vector<PendingBranch> branches_;
  std::vector<PendingTable> tables_;
  uint32_t scratch_ = kNoOperand;
  uint32_t carry_ = kNoOperand;
  std::string why_;         // reason for the last operand failure
  std::string hard_error_;  // malformed PTX: fails the whole decode
  uint32_t current_line_ = 0;
};

class ProgramDecoder {
 public:
  ProgramDecoder(const ptx::Module& module, Program* program) : module_(module), p_(program) {}

  Status Run() {
    p_->target = module_.target;
    if (module_.target.rfind("sm_", 0) == 0) {
      p_->target_arch = static_cast<uint32_t>(strtoul(module_.target.c_str() + 3, nullptr, 10));
    }
    if (Status s = LayoutGlobals(); !s.ok()) return s;
    // .shared variables declared inside a .func (nvcc moves demoted block-scope arrays into the
    // function that uses them) get fixed module-wide offsets after the module-scope ones, since
    // the same function code runs for every kernel that calls it.
    module_level_shared_bytes_ = module_shared_bytes_;
    for (const ptx::Function& f : module_.functions) {
      if (f.is_entry) continue;
      for (const ptx::Variable& v : f.vars) {
        if (v.space != Space::kShared) continue;
        if (v.size > (1u << 30))
          return rgpu::InvalidArgument("variable '" + v.name + "' too large");
        module_shared_bytes_ = AlignUp(module_shared_bytes_, v.align);
        function_shared_[&v] = module_shared_bytes_;
        module_shared_bytes_ += static_cast<uint32_t>(v.size);
        functions_with_shared_.insert(f.name);
      }
    }
    for (uint32_t i = 0; i < module_.functions.size(); ++i) {
      const ptx::Function& f = module_.functions[i];
      p_->function_index[f.name] = i;
      p_->functions.emplace_back();
      layouts_.emplace_back();
      if (Status s = LayoutFunction(f, &p_->functions.back(), &layouts_.back()); !s.ok()) {
        return s;
      }
    }
    for (uint32_t i = 0; i < module_.functions.size(); ++i) {
      if (!module_.functions[i].has_body) continue;
      FunctionDecoder fd(*this, module_.functions[i], i);
      if (Status s = fd.Run(); !s.ok()) return s;
    }
    return Status::Ok();
  }

  uint32_t Const(uint64_t value) {
    auto it = const_index_.find(value);
    if (it != const_index_.end()) return it->second | kConstOperand;
    const uint32_t index = static_cast<uint32_t>(p_->consts.size() / kWarpSize);
    p_->consts.insert(p_->consts.end(), kWarpSize, value);
    const_index_.emplace(value, index);
    return index | kConstOperand;
  }

  uint32_t RelocatedConst(uint32_t global, int64_t addend) {
    auto key = std::make_pair(global, addend);
    auto it = reloc_index_.find(key);
    if (it != reloc_index_.end()) return it->second | kConstOperand;
    const uint32_t index = static_cast<uint32_t>(p_->consts.size() / kWarpSize);
    p_->consts.insert(p_->consts.end(), kWarpSize, 0);
    p_->relocations.push_back(Relocation{index, global, addend});
    reloc_index_.emplace(key, index);
    return index | kConstOperand;
  }

  const ptx::Module& module() const { return module_; }
  Program& program() { return *p_; }
  const FunctionLayout& layout(uint32_t f) const { return layouts_[f]; }
  // Module-scope shared variables: name -> offset; dynamic shared is any unsized extern one.
  const std::unordered_map<std::string, uint32_t>& shared_offsets() const { return shared_; }
  bool IsDynamicShared(const std::string& name) const { return dynamic_shared_.count(name) != 0; }
  uint32_t module_shared_bytes() const { return module_shared_bytes_; }
  // Where dynamic shared memory starts after `static_bytes` of static shared variables: rounded
  // up to 16 bytes, or to the largest alignment an extern .shared declaration asks for.
  uint32_t DynamicSharedBase(uint32_t static_bytes) const {
    return AlignUp(static_bytes, dynamic_shared_align_);
  }

 private:
  Status LayoutGlobals() {
    uint32_t shared_end = 0;
    for (const ptx::Variable& v : module_.globals) {
      if (v.space == Space::kShared) {
        if (v.unsized || (v.is_extern && v.size == 0)) {
          dynamic_shared_.insert(v.name);
          if (v.align > (1u << 16)) {
            return rgpu::InvalidArgument("alignment of '" + v.name + "' too large");
          }
          dynamic_shared_align_ = std::max(dynamic_shared_align_, v.align);
          continue;
        }
        shared_end = AlignUp(shared_end, v.align);
        shared_[v.name] = shared_end;
        shared_end += static_cast<uint32_t>(v.size);
        continue;
      }
      if (v.space != Space::kGlobal && v.space != Space::kConst) {
        return rgpu::InvalidArgument("module-scope variable '" + v.name +
                                     "' in an unsupported state space");
      }
      GlobalVariable g;
      g.name = v.name;
      g.space = v.space;
      g.size = std::max<uint64_t>(v.size, 1);
      g.align = std::max<uint32_t>(v.align, 1);
      g.managed = v.managed;
      const uint32_t elem = std::max<uint32_t>(ptx::TypeSize(v.type), 1);
      // Only the initialised prefix is kept: the rest is zero, as fresh device memory is (a
      // large zero-initialised variable costs no host memory until it is written).
      g.init.assign(std::min<uint64_t>(g.size, uint64_t{v.init.size()} * elem), 0);
      for (size_t i = 0; i < v.init.size(); ++i) {
        const uint64_t offset = i * elem;
        if (offset + elem > g.size) break;
        const ptx::InitItem& item = v.init[i];
        if (item.is_symbol) {
          if (elem != 8)
            return rgpu::InvalidArgument("address initializer in a non-64-bit variable");
          g.pointer_inits.push_back({offset, 0, item.addend});
          pending_pointer_names_.push_back(
              {static_cast<uint32_t>(p_->globals.size()), g.pointer_inits.size() - 1, item.symbol});
          continue;
        }
        uint64_t bits = item.bits;
        if (ptx::IsFloat(v.type) || item.number_kind != ptx::TokenKind::kInteger) {
          bits = ConvertNumber(item.number_kind, item.bits, v.type);
        }
        memcpy(g.init.data() + offset, &bits, elem);
      }
      p_->global_index[g.name] = static_cast<uint32_t>(p_->globals.size());
      p_->globals.push_back(std::move(g));
    }
    for (const PendingPointer& pp : pending_pointer_names_) {
      GlobalVariable& g = p_->globals[pp.global];
      GlobalVariable::PointerInit& init = g.pointer_inits[pp.init];
      auto it = p_->global_index.find(pp.symbol);
      if (it != p_->global_index.end()) {
        init.target = it->second;
        continue;
      }
      // A function's address (vtables, tables of function pointers) is known now.
      bool found = false;
      for (size_t f = 0; f < module_.functions.size(); ++f) {
        if (module_.functions[f].name != pp.symbol) continue;
        const uint64_t value = kFunctionAddressBase + f * 16 + static_cast<uint64_t>(init.addend);
        memcpy(g.init.data() + init.offset, &value, 8);
        init.target = kNoOperand;
        found = true;
        break;
      }
      if (!found) {
        return rgpu::InvalidArgument("initializer names unknown or unsupported symbol '" +
                                     pp.symbol + "'");
      }
    }
    for (GlobalVariable& g : p_->globals) {
      std::erase_if(g.pointer_inits,
                    [](const GlobalVariable::PointerInit& i) { return i.target == kNoOperand; });
    }
    module_shared_bytes_ = shared_end;
    return Status::Ok();
  }

 public:
  // Converts a literal to the bit pattern of `type` (numbers keep their value across int/float).
  static uint64_t ConvertNumber(ptx::TokenKind kind, uint64_t bits, Type type) {
    double value;
    if (kind == ptx::TokenKind::kFloat32)
      value = std::bit_cast<float>(static_cast<uint32_t>(bits));
    else if (kind == ptx::TokenKind::kFloat64)
      value = std::bit_cast<double>(bits);
    else
      value = static_cast<double>(static_cast<int64_t>(bits));
    switch (type) {
      case Type::kF32:
        return std::bit_cast<uint32_t>(static_cast<float>(value));
      case Type::kF64:
        return std::bit_cast<uint64_t>(value);
      case Type::kF16:
        return std::bit_cast<uint16_t>(static_cast<_Float16>(value));
      default:
        // Bit types take a float literal's bits as written.
        if (kind == ptx::TokenKind::kFloat32) return bits & 0xffffffffu;
        return bits;
    }
  }

 private:
  Status LayoutFunction(const ptx::Function& f, Function* out, FunctionLayout* layout) {
    out->name = f.name;
    out->is_entry = f.is_entry;
    out->has_body = f.has_body;
    out->max_threads = f.max_threads;
    for (int i = 0; i < 3; ++i) out->cluster_dims[i] = f.cluster_dims[i];
    out->explicit_cluster = f.explicit_cluster || f.cluster_dims[0] != 0;
    out->max_cluster_rank = f.max_cluster_rank;
    out->num_regs = static_cast<uint32_t>(f.reg_types.size());
    out->num_preds = f.num_predicates;
    uint32_t frame = 0;
    if (f.is_entry) {
      uint32_t offset = 0;
      for (uint32_t i = 0; i < f.params.size(); ++i) {
        const ptx::Param& p = f.params[i];
        offset = AlignUp(offset, std::max<uint32_t>(p.align, 1));
        out->params.push_back({offset, p.size});
        layout->params[p.name] = i;
        offset += p.size;
      }
      out->param_bytes = offset;
    } else {
      for (uint32_t i = 0; i < f.params.size(); ++i) {
        const ptx::Param& p = f.params[i];
        frame = AlignUp(frame, std::max<uint32_t>(p.align, 1));
        out->params.push_back({frame, p.size});
        layout->params[p.name] = i;
        frame += p.size;
      }
      for (uint32_t i = 0; i < f.returns.size(); ++i) {
        const ptx::Param& p = f.returns[i];
        frame = AlignUp(frame, std::max<uint32_t>(p.align, 1));
        out->returns.push_back({frame, p.size});
        layout->returns[p.name] = i;
        frame += p.size;
      }
    }
    uint32_t local = 0;
    // A kernel needs room for the functions' shared variables only if it can call one of them.
    uint32_t shared =
        f.is_entry && !ReachesFunctionShared(f) ? module_level_shared_bytes_ : module_shared_bytes_;
    for (const ptx::Variable& v : f.vars) {
      VarLayout vl;
      vl.space = v.space;
      vl.size = static_cast<uint32_t>(v.size);
      if (v.size > (1u << 30)) return rgpu::InvalidArgument("variable '" + v.name + "' too large");
      switch (v.space) {
        case Space::kLocal:
          local = AlignUp(local, v.align);
          vl.offset = local;
          local += vl.size;
          break;
        case Space::kShared:
          if (auto it = function_shared_.find(&v); it != function_shared_.end()) {
            vl.offset = it->second;  // a .func's variable (laid out module-wide)
            break;
          }
          shared = AlignUp(shared, v.align);
          vl.offset = shared;
          shared += vl.size;
          break;
        case Space::kParam:
          frame = AlignUp(frame, v.align);
          vl.offset = frame;
          frame += vl.size;
          break;
        default:
          return rgpu::InvalidArgument("variable '" + v.name + "' in unsupported state space");
      }
      layout->vars.push_back(vl);
    }
    out->frame_bytes = AlignUp(frame, 8);
    out->local_bytes = AlignUp(local, 16);
    out->shared_bytes = shared;
    out->dynamic_shared_offset = DynamicSharedBase(shared);
    return Status::Ok();
  }

  struct PendingPointer {
    uint32_t global;
    size_t init;
    std::string symbol;
  };

  const ptx::Module& module_;
  Program* p_;
  std::vector<FunctionLayout> layouts_;
  std::map<uint64_t, uint32_t> const_index_;
  std::map<std::pair<uint32_t, int64_t>, uint32_t> reloc_index_;
  std::unordered_map<std::string, uint32_t> shared_;
  std::unordered_set<std::string> dynamic_shared_;
  uint32_t dynamic_shared_align_ = 16;
  std::unordered_map<const ptx::Variable*, uint32_t> function_shared_;
  std::unordered_set<std::string> functions_with_shared_;
  uint32_t module_level_shared_bytes_ = 0;

  // True when `f` can call (directly, transitively or through a pointer) a function that
  // declares .shared variables.
  bool ReachesFunctionShared(const ptx::Function& f) const {
    if (functions_with_shared_.empty()) return false;
    std::unordered_set<std::string> seen{f.name};
    std::vector<const ptx::Function*> todo{&f};
    while (!todo.empty()) {
      const ptx::Function* cur = todo.back();
      todo.pop_back();
      for (const ptx::Instruction& in : cur->insns) {
        if (in.opcode.compare(0, 4, "call") != 0) continue;
        const ptx::Operand* callee = nullptr;
        for (const ptx::Operand& op : in.operands) {
          if (op.kind == ptx::Operand::Kind::kList) continue;
          callee = &op;
          break;
        }
        if (callee == nullptr || callee->kind != ptx::Operand::Kind::kSymbol) return true;
        if (functions_with_shared_.count(callee->name) != 0) return true;
        if (!seen.insert(callee->name).second) continue;
        for (const ptx::Function& g : module_.functions) {
          if (g.name == callee->name) todo.push_back(&g);
        }
      }
    }
    return false;
  }
  std::vector<PendingPointer> pending_pointer_names_;
  uint32_t module_shared_bytes_ = 0;
};

FunctionDecoder::FunctionDecoder(ProgramDecoder& pd, const ptx::Function& src, uint32_t index)
    : pd_(pd),
      src_(src),
      index_(index),
      out_(pd.program().functions[index]),
      layout_(pd.layout(index)) {}

Insn& FunctionDecoder::Emit(const ptx::Instruction& src, Handler h) {
  out_.insns.emplace_back();
  Insn& in = out_.insns.back();
  in.exec = h;
  in.guard = src.guard;
  in.guard_negated = src.guard_negated;
  in.line = src.line;
  return in;
}

bool FunctionDecoder::Unsupported(const ptx::Instruction& src, const std::string& why) {
  std::string text = "'" + src.opcode + "' at PTX line " + std::to_string(src.line);
  if (!why.empty()) text += " (" + why + ")";
  out_.unsupported.push_back(text);
  Insn& in = Emit(src, nullptr);
  in.control = Control::kTrap;
  in.aux = 1;  // unsupported, not a user trap
  return true;
}

bool FunctionDecoder::SpecialRegister(const std::string& name, Special* reg) const {
  static const std::pair<const char*, Special> kTable[] = {
      {"%tid.x", Special::kTidX},
      {"%tid.y", Special::kTidY},
      {"%tid.z", Special::kTidZ},
      {"%ntid.x", Special::kNtidX},
      {"%ntid.y", Special::kNtidY},
      {"%ntid.z", Special::kNtidZ},
      {"%ctaid.x", Special::kCtaidX},
      {"%ctaid.y", Special::kCtaidY},
      {"%ctaid.z", Special::kCtaidZ},
      {"%nctaid.x", Special::kNctaidX},
      {"%nctaid.y", Special::kNctaidY},
      {"%nctaid.z", Special::kNctaidZ},
      {"%laneid", Special::kLaneId},
      {"%warpid", Special::kWarpId},
      {"%nwarpid", Special::kNWarpId},
      {"%smid", Special::kSmId},
      {"%nsmid", Special::kNSmId},
      {"%gridid", Special::kGridId},
      {"%lanemask_eq", Special::kLanemaskEq},
      {"%lanemask_le", Special::kLanemaskLe},
      {"%lanemask_lt", Special::kLanemaskLt},
      {"%lanemask_ge", Special::kLanemaskGe},
      {"%lanemask_gt", Special::kLanemaskGt},
      {"%clock", Special::kClock},
      {"%clock64", Special::kClock64},
      {"%globaltimer", Special::kGlobalTimer},
      {"%globaltimer_lo", Special::kGlobalTimerLo},
      {"%globaltimer_hi", Special::kGlobalTimerHi},
      {"%dynamic_smem_size", Special::kDynamicSmemSize},
      {"%total_smem_size", Special::kTotalSmemSize},
      {"%clock_hi", Special::kZero},
      {"%clusterid.x", Special::kClusterIdX},
      {"%clusterid.y", Special::kClusterIdY},
      {"%clusterid.z", Special::kClusterIdZ},
      {"%nclusterid.x", Special::kNClusterIdX},
      {"%nclusterid.y", Special::kNClusterIdY},
      {"%nclusterid.z", Special::kNClusterIdZ},
      {"%cluster_ctaid.x", Special::kClusterCtaidX},
      {"%cluster_ctaid.y", Special::kClusterCtaidY},
      {"%cluster_ctaid.z", Special::kClusterCtaidZ},
      {"%cluster_nctaid.x", Special::kClusterNctaidX},
      {"%cluster_nctaid.y", Special::kClusterNctaidY},
      {"%cluster_nctaid.z", Special::kClusterNctaidZ},
      {"%cluster_ctarank", Special::kClusterCtarank},
      {"%cluster_nctarank", Special::kClusterNctarank},
      {"%is_explicit_cluster", Special::kIsExplicitCluster},
  };
  for (const auto& [n, r] : kTable) {
    if (name == n) {
      *reg = r;
      return true;
    }
  }
  // %envreg0..%envreg31: the driver's per-launch environment. Only the grid workspace address
  // (1: high half, 2: low half) is provided; the rest read zero, as on a GPU.
  constexpr std::string_view kEnv = "%envreg";
  if (name.starts_with(kEnv) && name.size() > kEnv.size() && name.size() <= kEnv.size() + 2) {
    int n = 0;
    for (size_t i = kEnv.size(); i < name.size(); ++i) {
      if (name[i] < '0' || name[i] > '9') return false;
      n = n * 10 + (name[i] - '0');
    }
    if (n > 31) return false;
    *reg = n == 1 ? Special::kEnvReg1 : n == 2 ? Special::kEnvReg2 : Special::kZero;
    return true;
  }
  return false;
}

bool FunctionDecoder::SymbolAddress(const ptx::Instruction& src, const Operand& op,
                                    uint32_t* slot) {
  if (op.var >= 0) {
    const VarLayout& v = layout_.vars[static_cast<size_t>(op.var)];
    if (v.space == Space::kShared) {
      *slot = pd_.Const(v.offset + static_cast<uint64_t>(op.offset));
      return true;
    }
    if (v.space == Space::kLocal) {
      const uint32_t t = NewTemp();
      Insn& in = Emit(src, LocalAddressHandler());
      in.guard = -1;
      in.a[0] = t;
      in.imm = static_cast<int64_t>(v.offset) + op.offset;
      *slot = t;
      return true;
    }
    why_ = "address of a parameter variable";
    return false;
  }
  const Program& p = pd_.program();
  if (auto g = p.global_index.find(op.name); g != p.global_index.end()) {
    *slot = pd_.RelocatedConst(g->second, op.offset);
    return true;
  }
  if (auto s = pd_.shared_offsets().find(op.name); s != pd_.shared_offsets().end()) {
    *slot = pd_.Const(s->second + static_cast<uint64_t>(op.offset));
    return true;
  }
  if (pd_.IsDynamicShared(op.name)) {
    const uint32_t base =
        pd_.DynamicSharedBase(out_.is_entry ? out_.shared_bytes : pd_.module_shared_bytes());
    *slot = pd_.Const(base + static_cast<uint64_t>(op.offset));
    return true;
  }
  if (auto p = layout_.params.find(op.name); p != layout_.params.end() && out_.is_entry) {
    // A kernel parameter's address in the parameter state space is its buffer offset.
    *slot = pd_.Const(out_.params[p->second].offset + static_cast<uint64_t>(op.offset));
    return true;
  }
  if (layout_.params.count(op.name) != 0 || layout_.returns.count(op.name) != 0) {
    why_ = "address of a function parameter";
    return false;
  }
  if (auto f = p.function_index.find(op.name); f != p.function_index.end()) {
    *slot = pd_.Const(kFunctionAddressBase + uint64_t{f->second} * 16 +
                      static_cast<uint64_t>(op.offset));
    return true;
  }
  hard_error_ = "unknown symbol '" + op.name + "'";
  return false;
}

bool FunctionDecoder::Src(const ptx::Instruction& src, const Operand& op, Type type,
                          uint32_t* slot) {
  switch (op.kind) {
    case Operand::Kind::kRegister:
      *slot = op.reg;
      return true;
    case Operand::Kind::kImmediate: {
      uint64_t bits;
      if (op.imm_kind == ptx::TokenKind::kInteger && !ptx::IsFloat(type)) {
        bits = op.imm_bits;
      } else {
        bits = ProgramDecoder::ConvertNumber(op.imm_kind, op.imm_bits, type);
      }
      const uint32_t size = ptx::TypeSize(type);
      if (size > 0 && size < 8) bits &= (1ull << (8 * size)) - 1;
      *slot = pd_.Const(bits);
      return true;
    }
    case Operand::Kind::kSpecial: {
      Special reg;
      if (!SpecialRegister(op.name, &reg)) {
        why_ = "special register " + op.name;
        return false;
      }
      const uint32_t t = NewTemp();
      Insn& in = Emit(src, SpecialHandler(reg));
      in.guard = -1;
      in.a[0] = t;
      *slot = t;
      return true;
    }
    case Operand::Kind::kSymbol:
      // WARP_SZ: PTX's predefined identifier for the warp size, a constant where it is used.
      if (op.name == "WARP_SZ") {
        *slot = pd_.Const(kWarpSize + static_cast<uint64_t>(op.offset));
        return true;
      }
      return SymbolAddress(src, op, slot);
    case Operand::Kind::kSink:
      *slot = Scratch();
      return true;
    default:
      why_ = "operand kind";
      return false;
  }
}

bool FunctionDecoder::Dst(const ptx::Instruction& src, const Operand& op, uint32_t* slot) {
  if (op.kind == Operand::Kind::kRegister) {
    *slot = op.reg;
    return true;
  }
  if (op.kind == Operand::Kind::kSink) {
    *slot = Scratch();
    return true;
  }
  why_ = "destination must be a register";
  return false;
}

bool FunctionDecoder::Pred(const ptx::Instruction& src, const Operand& op, uint32_t* index,
                           bool* negated) {
  if (op.kind != Operand::Kind::kPredicate) {
    why_ = "expected a predicate";
    return false;
  }
  *index = op.reg;
  if (negated != nullptr) *negated = op.negated;
  return true;
}

bool FunctionDecoder::Address(const ptx::Instruction& src, const Operand& op, MemSpace* space,
                              uint32_t* base, int64_t* imm) {
  if (op.kind != Operand::Kind::kAddress) {
    why_ = "expected an address";
    return false;
  }
  *imm = op.offset;
  *base = kNoOperand;
  switch (op.base_kind) {
    case Operand::BaseKind::kNone:
      return true;
    case Operand::BaseKind::kRegister:
      *base = op.reg;
      if (*space == MemSpace::kKernelParam && !out_.is_entry) {
        why_ = "function parameter access through a register";
        return false;
      }
      return true;
    case Operand::BaseKind::kSymbol:
      break;
  }
  // [symbol + offset]
  if (op.var >= 0) {
    const VarLayout& v = layout_.vars[static_cast<size_t>(op.var)];
    if (v.space == Space::kParam) {
      *space = MemSpace::kFrameParam;
      *imm = v.offset + op.offset;
      return true;
    }
    if (v.space == Space::kShared) {
      *imm = v.offset + op.offset;
      if (*space == MemSpace::kGeneric) *imm += static_cast<int64_t>(kSharedWindowBase);
      return true;
    }
    if (v.space == Space::kLocal) {
      Operand sym = op;
      sym.kind = Operand::Kind::kSymbol;
      sym.offset = 0;
      if (!SymbolAddress(src, sym, base)) return false;
      *imm = op.offset;
      if (*space == MemSpace::kGeneric) *imm += static_cast<int64_t>(kLocalWindowBase);
      return true;
    }
  }
  if (auto p = layout_.params.find(op.name); p != layout_.params.end()) {
    const ParamSlot& slot = out_.params[p->second];
    *space = out_.is_entry ? MemSpace::kKernelParam : MemSpace::kFrameParam;
    *imm = slot.offset + op.offset;
    return true;
  }
  if (auto r = layout_.returns.find(op.name); r != layout_.returns.end()) {
    *space = MemSpace::kFrameParam;
    *imm = out_.returns[r->second].offset + op.offset;
    return true;
  }
  if (auto s = pd_.shared_offsets().find(op.name); s != pd_.shared_offsets().end()) {
    *imm = s->second + op.offset;
    if (*space == MemSpace::kGeneric) *imm += static_cast<int64_t>(kSharedWindowBase);
    return true;
  }
  if (pd_.IsDynamicShared(op.name)) {
    const uint32_t dyn =
        pd_.DynamicSharedBase(out_.is_entry ? out_.shared_bytes : pd_.module_shared_bytes());
    *imm = dyn + op.offset;
    if (*space == MemSpace::kGeneric) *imm += static_cast<int64_t>(kSharedWindowBase);
    return true;
  }
  const Program& prog = pd_.program();
  if (auto g = prog.global_index.find(op.name); g != prog.global_index.end()) {
    *base = pd_.RelocatedConst(g->second, 0);
    return true;
  }
  hard_error_ = "unknown symbol '" + op.name + "'";
  return false;
}

Status FunctionDecoder::Run() {
  std::vector<uint32_t> first_of_source(src_.insns.size() + 1, 0);
  for (size_t i = 0; i < src_.insns.size(); ++i) {
    first_of_source[i] = static_cast<uint32_t>(out_.insns.size());
    const ptx::Instruction& in = src_.insns[i];
    current_line_ = in.line;
    why_.clear();
    const size_t before = out_.insns.size();
    if (!DecodeInstruction(in)) {
      if (!hard_error_.empty()) return Error(in, hard_error_);
      out_.insns.resize(before);
      Unsupported(in, why_);
    }
    if (!hard_error_.empty()) return Error(in, hard_error_);
  }
  first_of_source[src_.insns.size()] = static_cast<uint32_t>(out_.insns.size());
  // Falling off the end of a function returns.
  {
    out_.insns.emplace_back();
    Insn& end = out_.insns.back();
    end.control = out_.is_entry ? Control::kExit : Control::kReturn;
    end.line = src_.insns.empty() ? src_.line : src_.insns.back().line;
  }
  for (const PendingBranch& b : branches_) {
    auto it = src_.labels.find(b.label);
    if (it == src_.labels.end()) {
      return rgpu::InvalidArgument("PTX line " + std::to_string(b.line) + ": unknown label '" +
                                   b.label + "'");
    }
    out_.insns[b.insn].target = first_of_source[it->second];
  }
  for (const PendingTable& t : tables_) {
    auto list = src_.branch_target_lists.find(t.list);
    if (list == src_.branch_target_lists.end()) {
      return rgpu::InvalidArgument("PTX line " + std::to_string(t.line) +
                                   ": unknown .branchtargets list '" + t.list + "'");
    }
    std::vector<uint32_t>& table = out_.branch_tables[t.table];
    for (const std::string& label : list->second) {
      auto it = src_.labels.find(label);
      if (it == src_.labels.end()) {
        return rgpu::InvalidArgument("PTX line " + std::to_string(t.line) + ": unknown label '" +
                                     label + "' in .branchtargets '" + t.list + "'");
      }
      table.push_back(first_of_source[it->second]);
    }
  }
  return Status::Ok();
}

bool FunctionDecoder::DecodeInstruction(const ptx::Instruction& src) {
  const Mods m = SplitOpcode(src.opcode);
  const std::string& b = m.base;
  const auto& ops = src.operands;

  if (b == "bra" || b == "brx") {
    if (b == "brx") {
      // brx.idx{.uni} index, list: to the index-th label of a .branchtargets list (an index past
      // its end faults, where PTX leaves it undefined).
      if (!m.Has("idx") || ops.size() != 2 || ops[1].kind != Operand::Kind::kSymbol) {
        hard_error_ = "bad brx.idx operands";
        return false;
      }
      uint32_t index;
      if (!Src(src, ops[0], Type::kU32, &index)) return false;
      Insn& in = Emit(src, nullptr);
      in.control = Control::kIndirect;
      in.a[0] = index;
      in.aux = static_cast<uint32_t>(out_.branch_tables.size());
      out_.branch_tables.emplace_back();
      tables_.push_back({in.aux, ops[1].name, src.line});
      return true;
    }
    if (ops.size() != 1 || ops[0].kind != Operand::Kind::kSymbol) {
      hard_error_ = "bad branch target";
      return false;
    }
    Insn& in = Emit(src, nullptr);
    in.control = Control::kBranch;
    branches_.push_back({static_cast<uint32_t>(out_.insns.size() - 1), ops[0].name, src.line});
    return true;
  }
  if (b == "ret" || b == "exit") {
    Insn& in = Emit(src, nullptr);
    in.control = (b == "exit" || out_.is_entry) ? Control::kExit : Control::kReturn;
    return true;
  }
  if (b == "trap" || b == "brkpt") {
    Insn& in = Emit(src, nullptr);
    in.control = Control::kTrap;
    return true;
  }
  if (b == "call") return DecodeCall(src, m);
  if (b == "bar" || b == "barrier") {
    if (m.Has("warp")) {  // bar.warp.sync: lanes of a warp already execute together
      Emit(src, NopHandler());
      return true;
    }
    const bool red = m.Has("red");
    if (b == "barrier" && m.Has("cluster")) {
      // barrier.cluster.arrive{.release,.relaxed}{.aligned} / barrier.cluster.wait{.acquire}
      // {.aligned}: every thread of the cluster not exited arrives before any waiter goes on.
      if (!ops.empty()) return false;
      if (m.Has("arrive")) {
        Emit(src, ClusterArriveHandler());
        return true;
      }
      if (!m.Has("wait")) return false;
      Insn& in = Emit(src, ClusterWaitHandler());
      in.control = Control::kWait;
      return true;
    }
    if (m.Has("arrive")) {
      // Arriving without waiting: the block-wide barrier model below already makes every
      // bar.sync wait for the arriving warps' earlier work, so there is nothing to do.
      Emit(src, NopHandler());
      return true;
    }
    if (red) {
      // bar.red.op.type d, a{, b}, {!}c
      if (ops.size() < 3) return false;
      Insn& in = Emit(src, BarRedHandler());
      in.control = Control::kBarrier;
      in.aux = m.Has("popc") ? 0 : (m.Has("and") ? 1 : 2);
      bool neg = false;
      uint32_t p;
      if (!Pred(src, ops.back(), &p, &neg)) return false;
      Insn& again = out_.insns.back();
      again.a[1] = p;
      again.aux2 = neg ? 1 : 0;
      if (again.aux == 0) {
        if (!Dst(src, ops[0], &again.a[0])) return false;
      } else {
        if (!Pred(src, ops[0], &again.a[0], nullptr)) return false;
      }
      again.imm = 1;  // has a result to deliver after the barrier
      return true;
    }
    Insn& in = Emit(src, nullptr);
    in.control = Control::kBarrier;
    return true;
  }
  if (b == "nanosleep") {
    // The thread may sleep up to about the given time: the warp lets the block's other warps
    // (and, in a cooperative launch, other blocks) run instead.
    Insn& in = Emit(src, nullptr);
    in.control = Control::kYield;
    // The requested time, when it is a constant (0: unknown, a register's).
    if (ops.size() == 1 && ops[0].kind == ptx::Operand::Kind::kImmediate &&
        ops[0].imm_kind == ptx::TokenKind::kInteger) {
      in.imm = static_cast<int64_t>(std::min<uint64_t>(ops[0].imm_bits, 1000000));
    }
    return true;
  }
  if (b == "mbarrier") return DecodeMbarrier(src, m);
  if (b == "mma" || b == "wmma" || b == "ldmatrix" || b == "stmatrix" || b == "movmatrix") {
    return DecodeMatrix(src, m);
  }
  if (b == "membar" || b == "fence" || b == "prefetch" || b == "prefetchu" || b == "pmevent" ||
      b == "griddepcontrol" || b == "discard" || b == "applypriority" || b == "createpolicy") {
    if (b == "createpolicy") {
      why_ = "createpolicy";
      return false;
    }
    Emit(src, NopHandler());
    return true;
  }
  if (b == "cp" && m.Has("async")) return DecodeCpAsync(src, m);
  if (b == "mov") return DecodeMov(src, m);
  if (b == "ld" || b == "ldu" || b == "st") return DecodeMemory(src, m);
  if (b == "atom" || b == "red") return DecodeAtom(src, m);
  if (b == "cvt") return DecodeCvt(src, m);
  if (b == "setp" || b == "set" || b == "selp" || b == "slct" || b == "testp") {
    return DecodeCompare(src, m);
  }
  if (b == "elect") {
    // elect.sync d|p, membermask (d may be the sink _)
    uint32_t d = kNoOperand, members;
    if (!m.Has("sync") || ops.size() != 2 || !Src(src, ops[1], Type::kU32, &members)) return false;
    if (ops[0].kind != Operand::Kind::kSink && !Dst(src, ops[0], &d)) return false;
    Insn& in = Emit(src, ElectHandler());
    in.a[0] = d;
    in.a[1] = ops[0].pred_out >= 0 ? static_cast<uint32_t>(ops[0].pred_out) : kNoOperand;
    in.a[2] = members;
    return true;
  }
  if (b == "shfl" || b == "vote" || b == "match" || b == "redux" || b == "activemask") {
    return DecodeWarp(src, m);
  }
  if (b == "cvta") {
    if (ops.size() != 2) return false;
    MemSpace space = MemSpace::kGlobal;
    if (m.Has("shared") || m.Has("shared::cluster"))  // the same window (exec.h)
      space = MemSpace::kShared;
    else if (m.Has("local"))
      space = MemSpace::kLocal;
    else if (m.Has("const"))
      space = MemSpace::kConst;
    else if (m.Has("param") && out_.is_entry)
      space = MemSpace::kKernelParam;
    else if (!m.Has("global")) {
      why_ = "cvta space";
      return false;
    }
    Handler h = CvtaHandler(space, !m.Has("to"));
    if (h == nullptr) return false;
    uint32_t d, a;
    if (!Src(src, ops[1], Type::kU64, &a) || !Dst(src, ops[0], &d)) return false;
    Insn& in = Emit(src, h);
    in.a[0] = d;
    in.a[1] = a;
    return true;
  }
  if (b == "isspacep") {
    MemSpace space = m.Has("shared")            ? MemSpace::kShared
                     : m.Has("shared::cluster") ? MemSpace::kSharedCluster
                     : m.Has("local")           ? MemSpace::kLocal
                     : m.Has("param")           ? MemSpace::kKernelParam
                                                : MemSpace::kGlobal;
    if (ops.size() != 2) return false;
    uint32_t p, a;
    if (!Pred(src, ops[0], &p, nullptr) || !Src(src, ops[1], Type::kU64, &a)) return false;
    Insn& in = Emit(src, IsspacepHandler(space));
    in.a[0] = p;
    in.a[1] = a;
    return true;
  }
  if (b == "mapa" || b == "getctarank") {
    // mapa{.shared::cluster}.{u32,u64} d, a, rank / getctarank{.shared::cluster}.{u32,u64} d,
    // a: the type is the address's (generic addresses are 64-bit here).
    const bool mapa = b == "mapa";
    const bool generic = !m.Has("shared::cluster");
    const Type t = m.type();
    if (ops.size() != (mapa ? 3u : 2u) || (t != Type::kU32 && t != Type::kU64) ||
        (generic && t != Type::kU64)) {
      why_ = "this form of " + b;
      return false;
    }
    uint32_t d, a, rank = kNoOperand;
    if (!Src(src, ops[1], t, &a)) return false;
    if (mapa && !Src(src, ops[2], Type::kU32, &rank)) return false;
    if (!Dst(src, ops[0], &d)) return false;
    Insn& in = Emit(src, mapa ? MapaHandler(generic) : GetctarankHandler(generic));
    in.a[0] = d;
    in.a[1] = a;
    in.a[2] = rank;
    return true;
  }
  if (b == "tex" || b == "tld4" || b == "txq" || b == "suld" || b == "sust" || b == "suq") {
    return DecodeTexture(src, m);
  }
  return DecodeArith(src, m);
}

bool FunctionDecoder::DecodeTexture(const ptx::Instruction& src, const Mods& m) {
  const auto& ops = src.operands;
  const std::string& b = m.base;
  const bool surface = b == "suld" || b == "sust" || b == "suq";
  TextureSite site;
  static const std::pair<const char*, TexGeometry> kGeometries[] = {
      {"1d", TexGeometry::k1D},      {"2d", TexGeometry::k2D},   {"3d", TexGeometry::k3D},
      {"a1d", TexGeometry::kA1D},    {"a2d", TexGeometry::kA2D}, {"cube", TexGeometry::kCube},
      {"acube", TexGeometry::kACube}};
  bool has_geometry = false;
  for (const auto& [name, g] : kGeometries) {
    if (m.Has(name)) {
      site.geometry = g;
      has_geometry = true;
    }
  }
  const bool layer_first = site.geometry == TexGeometry::kA1D ||
                           site.geometry == TexGeometry::kA2D ||
                           site.geometry == TexGeometry::kACube;
  // [handle] or [handle, {coordinates}]; the handle is a register (texture/surface objects).
  auto handle_and_coords = [&](const Operand& op, bool coords, Type ctype) -> bool {
    if (op.kind != Operand::Kind::kAddress || op.base_kind != Operand::BaseKind::kRegister ||
        op.offset != 0) {
      why_ = "texture or surface references (only objects are supported)";
      return false;
    }
    site.handle = op.reg;
    if (!coords) return op.elems.empty();
    if (op.elems.size() != 1 || op.elems[0].kind != Operand::Kind::kVector) {
      why_ = op.elems.size() > 1 ? "independent texture mode (separate sampler)"
                                 : "missing coordinates";
      return false;
    }
    const auto& v = op.elems[0].elems;
    if (v.empty() || v.size() > 4) return false;
    for (size_t k = 0; k < v.size(); ++k) {
      const Type t = (k == 0 && layer_first) ? Type::kS32 : ctype;
      if (!Src(src, v[k], t, &site.coords[k])) return false;
    }
    return true;
  };
  // Destinations: a vector of `count` registers ("_" allowed) or one register.
  auto destinations = [&](const Operand& op, uint32_t count) -> bool {
    if (op.kind != Operand::Kind::kVector) {
      if (count != 1 || op.pred_out >= 0) return false;
      return Dst(src, op, &site.values[0]);
    }
    if (op.elems.size() != count || op.pred_out >= 0) {
      why_ = "result operand";
      return false;
    }
    for (uint32_t k = 0; k < count; ++k) {
      if (op.elems[k].kind == Operand::Kind::kSink) continue;
      if (!Dst(src, op.elems[k], &site.values[k])) return false;
    }
    return true;
  };
  auto emit = [&](Handler h) {
    Program& p = pd_.program();
    p.texture_sites.push_back(site);
    Insn& in = Emit(src, h);
    in.aux = static_cast<uint32_t>(p.texture_sites.size() - 1);
    return true;
  };
  if (b == "txq" || b == "suq") {
    static const std::pair<const char*, TexQuery> kQueries[] = {
        {"width", TexQuery::kWidth},
        {"height", TexQuery::kHeight},
        {"depth", TexQuery::kDepth},
        {"array_size", TexQuery::kArraySize},
        {"num_mipmap_levels", TexQuery::kMipmapLevels},
        {"normalized_coords", TexQuery::kNormalizedCoords},
        {"filter_mode", TexQuery::kFilterMode},
        {"addr_mode_0", TexQuery::kAddrMode0},
        {"addr_mode_1", TexQuery::kAddrMode1},
        {"addr_mode_2", TexQuery::kAddrMode2}};
    bool found = false;
    for (const auto& [name, q] : kQueries) {
      if (m.Has(name)) {
        site.query = q;
        found = true;
      }
    }
    const bool level = m.Has("level");
    // txq.level: width, height and depth of the level its lod operand names.
    const bool level_query = site.query == TexQuery::kWidth || site.query == TexQuery::kHeight ||
                             site.query == TexQuery::kDepth;
    if (!found || (surface && site.query > TexQuery::kArraySize) ||
        ops.size() != (level ? 3u : 2u) || (level && (surface || !level_query))) {
      why_ = "query attribute";
      return false;
    }
    if (!Dst(src, ops[0], &site.values[0])) return false;
    if (!handle_and_coords(ops[1], false, Type::kNone)) return false;
    if (level && !Src(src, ops[2], Type::kS32, &site.lod)) return false;
    return emit(surface ? SurfaceQueryHandler() : TextureQueryHandler());
  }
  if (!has_geometry) {
    why_ = "geometry";
    return false;
  }
  if (b == "tex" || b == "tld4") {
    const Type dtype = m.type(0), ctype = m.type(1);
    if ((dtype != Type::kF32 && dtype != Type::kS32 && dtype != Type::kU32) ||
        (ctype != Type::kF32 && ctype != Type::kS32) || m.Vector() != 4) {
      why_ = "result or coordinate type";
      return false;
    }
    site.integer_coords = ctype == Type::kS32;
    size_t expected = 2;
    if (b == "tld4") {
      if ((site.geometry != TexGeometry::k2D && site.geometry != TexGeometry::kA2D) ||
          site.integer_coords) {
        why_ = "gather geometry";
        return false;
      }
      site.component = m.Has("g") ? 1 : m.Has("b") ? 2 : m.Has("a") ? 3 : 0;
    } else {
      // .base (or no mode): LOD 0; .level: an lod operand of the coordinates' type; .grad: dPdx
      // and dPdy, .f32 vectors of 1 (1d, a1d), 2 (2d, a2d) or 4 (3d, cube, acube) elements.
      if (m.Has("level")) {
        expected = 3;
        site.lod_mode = TexLodMode::kLevel;
      }
      if (m.Has("grad")) {
        expected = 4;
        site.lod_mode = TexLodMode::kGrad;
        if (site.integer_coords) {
          why_ = "gradients with integer coordinates";
          return false;
        }
      }
      if ((site.geometry == TexGeometry::kCube || site.geometry == TexGeometry::kACube) &&
          site.integer_coords) {
        why_ = "integer cubemap coordinates";
        return false;
      }
    }
    if (ops.size() != expected) {
      why_ = "texture offsets or depth compare";
      return false;
    }
    if (!destinations(ops[0], 4) || !handle_and_coords(ops[1], true, ctype)) return false;
    if (site.lod_mode == TexLodMode::kLevel && !Src(src, ops[2], ctype, &site.lod)) return false;
    if (site.lod_mode == TexLodMode::kGrad) {
      const size_t dims =
          (site.geometry == TexGeometry::k1D || site.geometry == TexGeometry::kA1D)   ? 1
          : (site.geometry == TexGeometry::k2D || site.geometry == TexGeometry::kA2D) ? 2
                                                                                      : 4;
      for (int k = 0; k < 2; ++k) {
        const Operand& g = ops[2 + k];
        if (g.kind != Operand::Kind::kVector) {
          // A singleton may be written without braces.
          if (dims != 1 || !Src(src, g, Type::kF32, &site.grad[k][0])) {
            why_ = "gradient operand";
            return false;
          }
          continue;
        }
        if (g.elems.size() != dims) {
          why_ = "gradient operand";
          return false;
        }
        for (size_t d = 0; d < dims && d < 3; ++d) {
          if (!Src(src, g.elems[d], Type::kF32, &site.grad[k][d])) return false;
        }
      }
    }
    return emit(b == "tld4" ? GatherHandler() : TextureHandler());
  }
  // suld.b / sust.b / sust.p
  if (site.geometry == TexGeometry::kCube || site.geometry == TexGeometry::kACube) {
    why_ = "surface geometry";
    return false;
  }
  const Type t = m.type(0);
  const bool formatted = m.Has("p");
  if ((!m.Has("b") && !(formatted && b == "sust")) ||
      (t != Type::kB8 && t != Type::kB16 && t != Type::kB32 && t != Type::kB64) ||
      (formatted && t != Type::kB32)) {
    why_ = "surface access type";
    return false;
  }
  site.formatted = formatted;
  site.access_bytes = static_cast<uint8_t>(ptx::TypeSize(t));
  site.count = static_cast<uint8_t>(m.Vector());
  if (site.count > 4) return false;
  site.clamp = m.Has("clamp")  ? SurfaceClamp::kClamp
               : m.Has("zero") ? SurfaceClamp::kZero
                               : SurfaceClamp::kTrap;
  if (ops.size() != 2) return false;
  if (b == "suld") {
    if (!destinations(ops[0], site.count) || !handle_and_coords(ops[1], true, Type::kS32)) {
      return false;
    }
    return emit(SurfaceLoadHandler());
  }
  if (!handle_and_coords(ops[0], true, Type::kS32)) return false;
  const Operand& v = ops[1];
  if (v.kind == Operand::Kind::kVector) {
    if (v.elems.size() != site.count) return false;
    for (uint32_t k = 0; k < site.count; ++k) {
      if (!Src(src, v.elems[k], t, &site.values[k])) return false;
    }
  } else if (site.count != 1 || !Src(src, v, t, &site.values[0])) {
    return false;
  }
  return emit(SurfaceStoreHandler());
}

bool FunctionDecoder::DecodeMov(const ptx::Instruction& src, const Mods& m) {
  const auto& ops = src.operands;
  if (ops.size() != 2) return false;
  const Type t = m.type();
  if (t == Type::kPred) {
    uint32_t d, a;
    bool neg = false;
    if (!Pred(src, ops[0], &d, nullptr)) return false;
    if (ops[1].kind == Operand::Kind::kSpecial && ops[1].name == "%is_explicit_cluster") {
      Insn& in = Emit(src, ExplicitClusterPredHandler());
      in.a[0] = d;
      return true;
    }
    if (ops[1].kind == Operand::Kind::kImmediate) {
      Insn& in = Emit(src, PredConstHandler());
      in.a[0] = d;
      in.aux = ops[1].imm_bits != 0 ? 1 : 0;
      return true;
    }
    if (!Pred(src, ops[1], &a, &neg)) return false;
    Insn& in = Emit(src, PredHandler(PredOp::kMov));
    in.a[0] = d;
    in.a[1] = a;
    in.aux = neg ? 1 : 0;
    return true;
  }
  const uint32_t size = ptx::TypeSize(t);
  if (ops[1].kind == Operand::Kind::kVector) {
    const uint32_t count = static_cast<uint32_t>(ops[1].elems.size());
    if (count == 0 || size % count != 0) return false;
    const uint32_t part = size / count;
    Handler h = PackHandler(part, count);
    if (h == nullptr) return false;
    const Type part_type = part == 1   ? Type::kB8
                           : part == 2 ? Type::kB16
                           : part == 4 ? Type::kB32
                                       : Type::kB64;
    uint32_t parts[4];
    for (uint32_t i = 0; i < count; ++i) {
      if (!Src(src, ops[1].elems[i], part_type, &parts[i])) return false;
    }
    uint32_t d;
    if (!Dst(src, ops[0], &d)) return false;
    Insn& in = Emit(src, h);
    in.a[0] = d;
    for (uint32_t i = 0; i < count; ++i) in.a[1 + i] = parts[i];
    return true;
  }
  if (ops[0].kind == Operand::Kind::kVector) {
    const uint32_t count = static_cast<uint32_t>(ops[0].elems.size());
    if (count == 0 || size % count != 0) return false;
    Handler h = UnpackHandler(size / count, count);
    if (h == nullptr) return false;
    uint32_t s;
    if (!Src(src, ops[1], t, &s)) return false;
    uint32_t parts[4];
    for (uint32_t i = 0; i < count; ++i) {
      if (ops[0].elems[i].kind == Operand::Kind::kSink) {
        parts[i] = kNoOperand;
      } else if (!Dst(src, ops[0].elems[i], &parts[i])) {
        return false;
      }
    }
    Insn& in = Emit(src, h);
    for (uint32_t i = 0; i < count; ++i) in.a[i] = parts[i];
    in.a[5] = s;
    return true;
  }
  uint32_t d;
  if (!Dst(src, ops[0], &d)) return false;
  if (ops[1].kind == Operand::Kind::kSpecial) {
    Special reg;
    if (!SpecialRegister(ops[1].name, &reg)) {
      why_ = "special register " + ops[1].name;
      return false;
    }
    Insn& in = Emit(src, SpecialHandler(reg));
    in.a[0] = d;
    return true;
  }
  if (ops[1].kind == Operand::Kind::kSymbol && ops[1].var >= 0 &&
      layout_.vars[static_cast<size_t>(ops[1].var)].space == Space::kLocal) {
    Insn& in = Emit(src, LocalAddressHandler());
    in.a[0] = d;
    in.imm =
        static_cast<int64_t>(layout_.vars[static_cast<size_t>(ops[1].var)].offset) + ops[1].offset;
    return true;
  }
  uint32_t a;
  if (!Src(src, ops[1], t, &a)) return false;
  Insn& in = Emit(src, MovHandler());
  in.a[0] = d;
  in.a[1] = a;
  return true;
}

bool FunctionDecoder::DecodeMemory(const ptx::Instruction& src, const Mods& m) {
  if (m.base == "st" && m.Has("async")) return DecodeAsyncStore(src, m);
  const auto& ops = src.operands;
  const bool store = m.base == "st";
  if (ops.size() != 2) return false;
  MemSpace space = MemSpace::kGeneric;
  if (m.Has("global"))
    space = MemSpace::kGlobal;
  else if (m.Has("shared") || m.Has("shared::cluster"))  // the cluster's: exec.h's addresses
    space = MemSpace::kShared;
  else if (m.Has("local"))
    space = MemSpace::kLocal;
  else if (m.Has("const"))
    space = MemSpace::kConst;
  else if (m.Has("param"))
    space = MemSpace::kKernelParam;  // refined by the address
  const Type t = m.type();
  const uint32_t count = m.Vector();
  if (t == Type::kNone || t == Type::kPred || t == Type::kB128) {
    why_ = "type";
    return false;
  }
  const Operand& addr = store ? ops[0] : ops[1];
  const Operand& value = store ? ops[1] : ops[0];
  uint32_t base;
  int64_t imm;
  const bool param = space == MemSpace::kKernelParam;
  if (!Address(src, addr, &space, &base, &imm)) return false;
  if (param && space != MemSpace::kKernelParam && space != MemSpace::kFrameParam) {
    why_ = "parameter address";
    return false;
  }
  if (store && space == MemSpace::kKernelParam) {
    why_ = "store to kernel parameters";
    return false;
  }
  uint32_t regs[4] = {kNoOperand, kNoOperand, kNoOperand, kNoOperand};
  if (count == 1) {
    if (value.kind == Operand::Kind::kVector) return false;
    if (store) {
      if (!Src(src, value, t, &regs[0])) return false;
    } else if (!Dst(src, value, &regs[0])) {
      return false;
    }
  } else {
    if (value.kind != Operand::Kind::kVector || value.elems.size() != count || count > 4) {
      why_ = "vector operand";
      return false;
    }
    for (uint32_t i = 0; i < count; ++i) {
      if (store) {
        if (!Src(src, value.elems[i], t, &regs[i])) return false;
      } else if (value.elems[i].kind == Operand::Kind::kSink) {
        regs[i] = kNoOperand;
      } else if (!Dst(src, value.elems[i], &regs[i])) {
        return false;
      }
    }
  }
  Handler h = store ? StoreHandler(space, t, count) : LoadHandler(space, t, count);
  if (h == nullptr) return false;
  Insn& in = Emit(src, h);
  for (uint32_t i = 0; i < 4; ++i) in.a[i] = regs[i];
  in.a[4] = base;
  in.imm = imm;
  return true;
}

bool FunctionDecoder::DecodeAtom(const ptx::Instruction& src, const Mods& m) {
  if (m.Has("async")) return DecodeAsyncStore(src, m);
  const auto& ops = src.operands;
  const bool red = m.base == "red";
  MemSpace space = MemSpace::kGeneric;
  if (m.Has("global"))
    space = MemSpace::kGlobal;
  else if (m.Has("shared") || m.Has("shared::cluster"))
    space = MemSpace::kShared;
  AtomOp op;
  if (!AtomOpOf(m, &op)) return false;
  if (m.Vector() != 1) {
    why_ = "vector atomics";
    return false;
  }
  const Type t = m.type();
  const size_t first = red ? 0 : 1;
  const size_t needed = first + (op == AtomOp::kCas ? 3 : 2);
  if (ops.size() != needed) return false;
  uint32_t base, b, c = kNoOperand, d = kNoOperand;
  int64_t imm;
  if (!Address(src, ops[first], &space, &base, &imm)) return false;
  if (!Src(src, ops[first + 1], t, &b)) return false;
  if (op == AtomOp::kCas && !Src(src, ops[first + 2], t, &c)) return false;
  if (!red && !Dst(src, ops[0], &d)) return false;
  Handler h = AtomHandler(space, op, t);
  if (h == nullptr) return false;
  Insn& in = Emit(src, h);
  in.a[0] = d;
  in.a[1] = b;
  in.a[2] = c;
  in.a[4] = base;
  in.imm = imm;
  return true;
}

bool FunctionDecoder::DecodeMbarrier(const ptx::Instruction& src, const Mods& m) {
  const auto& ops = src.operands;
  const MemSpace space = m.Has("shared") || m.Has("shared::cta") || m.Has("shared::cluster")
                             ? MemSpace::kShared
                             : MemSpace::kGeneric;
  // Operands are resolved before the instruction is emitted (resolving may emit helpers).
  uint32_t base = kNoOperand;
  int64_t imm = 0;
  auto address = [&](const Operand& op) {
    MemSpace resolved = space;
    if (!Address(src, op, &resolved, &base, &imm)) return false;
    if (resolved != space) {
      why_ = "mbarrier address space";
      return false;
    }
    return true;
  };
  auto emit = [&](MbarrierOp op, uint32_t a0, uint32_t a1) -> Insn& {
    Insn& in = Emit(src, MbarrierHandler(op, space));
    in.a[0] = a0;
    in.a[1] = a1;
    in.a[4] = base;
    in.imm = imm;
    return in;
  };
  const std::string what = m.flags.empty() ? std::string() : m.flags.front();
  if (what == "init") {
    uint32_t count;
    if (ops.size() != 2 || !address(ops[0]) || !Src(src, ops[1], Type::kU32, &count)) return false;
    emit(MbarrierOp::kInit, kNoOperand, count);
    return true;
  }
  if (what == "inval") {
    if (ops.size() != 1 || !address(ops[0])) return false;
    emit(MbarrierOp::kInval, kNoOperand, kNoOperand);
    return true;
  }
  if (what == "expect_tx" || what == "complete_tx") {
    // mbarrier.{expect,complete}_tx{.sem}{.scope}{.space}.b64 [addr], txCount
    uint32_t bytes;
    if (ops.size() != 2 || !address(ops[0]) || !Src(src, ops[1], Type::kU32, &bytes)) return false;
    emit(what == "expect_tx" ? MbarrierOp::kExpectTx : MbarrierOp::kCompleteTx, kNoOperand, bytes);
    return true;
  }
  if (what == "arrive" && m.Has("expect_tx")) {
    // mbarrier.arrive.expect_tx{.sem}{.scope}{.space}.b64 state, [addr], txCount
    uint32_t d, bytes;
    if (ops.size() != 3 || !Dst(src, ops[0], &d) || !address(ops[1]) ||
        !Src(src, ops[2], Type::kU32, &bytes)) {
      return false;
    }
    emit(MbarrierOp::kArriveExpectTx, d, bytes);
    return true;
  }
  if (what == "arrive" || what == "arrive_drop") {
    // mbarrier.arrive{_drop}{.noComplete}... state, [addr]{, count}
    if (ops.size() != 2 && ops.size() != 3) return false;
    if (m.Has("noComplete") && ops.size() != 3) return false;
    uint32_t d, count = kNoOperand;
    if (!Dst(src, ops[0], &d) || !address(ops[1])) return false;
    if (ops.size() == 3 && !Src(src, ops[2], Type::kU32, &count)) return false;
    emit(what == "arrive" ? MbarrierOp::kArrive : MbarrierOp::kArriveDrop, d, count);
    return true;
  }
  if (what == "test_wait" || what == "try_wait") {
    // waitComplete, [addr], state|phaseParity{, suspendTimeHint}
    if (ops.size() != 3 && !(what == "try_wait" && ops.size() == 4)) return false;
    const bool parity = m.Has("parity");
    uint32_t p, state;
    if (!Pred(src, ops[0], &p, nullptr) || !address(ops[1])) return false;
    if (!Src(src, ops[2], parity ? Type::kU32 : Type::kB64, &state)) return false;
    Insn& in = emit(parity ? MbarrierOp::kTestWaitParity : MbarrierOp::kTestWait, p, state);
    // try_wait may suspend the thread until the phase completes: the warp lets others run.
    if (what == "try_wait") in.control = Control::kYield;
    return true;
  }
  if (what == "pending_count") {
    uint32_t d, state;
    if (ops.size() != 2 || !Dst(src, ops[0], &d) || !Src(src, ops[1], Type::kB64, &state)) {
      return false;
    }
    emit(MbarrierOp::kPendingCount, d, state);
    return true;
  }
  why_ = "mbarrier operation";
  return false;
}

bool FunctionDecoder::AddressRegister(const ptx::Instruction& src, const Operand& op,
                                      MemSpace space, uint32_t* reg) {
  MemSpace resolved = space;
  uint32_t base;
  int64_t imm;
  if (!Address(src, op, &resolved, &base, &imm)) return false;
  if (resolved != space) {
    why_ = "address space";
    return false;
  }
  if (imm == 0 && base != kNoOperand) {
    *reg = base;
    return true;
  }
  const uint32_t t = NewTemp();
  Insn& in = Emit(src, IntHandler(IntOp::kAdd, Type::kU64));
  in.guard = -1;
  in.a[0] = t;
  in.a[1] = base == kNoOperand ? pd_.Const(0) : base;
  in.a[2] = pd_.Const(static_cast<uint64_t>(imm));
  *reg = t;
  return true;
}

bool FunctionDecoder::DecodeMatrix(const ptx::Instruction& src, const Mods& m) {
  const auto& ops = src.operands;
  MatrixSite site;
  std::string shape_name;  // the shape as the opcode spells it ("m16n8k16"), if it has one
  for (const std::string& f : m.flags) {
    unsigned mm, nn, kk;
    char tail;
    if (sscanf(f.c_str(), "m%un%uk%u%c", &mm, &nn, &kk, &tail) == 3 && mm < 256 && nn < 256 &&
        kk < 256) {
      site.m = static_cast<uint8_t>(mm);
      site.n = static_cast<uint8_t>(nn);
      site.k = static_cast<uint8_t>(kk);
      shape_name = f;
    }
  }
  const bool fragment_move = m.base == "ldmatrix" || m.base == "stmatrix" || m.base == "movmatrix";
  if (!fragment_move && (shape_name.empty() || !m.Has("sync") || !m.Has("aligned"))) {
    why_ = "matrix shape";
    return false;
  }
  site.satfinite = m.Has("satfinite");
  auto regs = [&](const Operand& op, bool dst, std::vector<uint32_t>* out) {
    std::vector<Operand> elems;
    if (op.kind == Operand::Kind::kVector) {
      elems = op.elems;
    } else {
      elems.push_back(op);
    }
    for (const Operand& e : elems) {
      uint32_t slot;
      if (dst ? !Dst(src, e, &slot) : !Src(src, e, Type::kB64, &slot)) return false;
      out->push_back(slot);
    }
    return true;
  };
  // A fragment of `elements` matrix elements spread over 32 lanes.
  auto fits = [&](const std::vector<uint32_t>& r, Type t, uint32_t elements, bool exact) {
    const uint32_t slots = static_cast<uint32_t>(r.size()) * FragmentElementsPerRegister(t) * 32;
    return exact ? slots == elements : (slots >= elements && slots % elements == 0);
  };
  auto emit = [&](MatrixOp op) {
    site.op = op;
    Program& p = pd_.program();
    p.matrix_sites.push_back(std::move(site));
    Insn& in = Emit(src, MatrixHandler(op));
    in.aux = static_cast<uint32_t>(p.matrix_sites.size() - 1);
    return true;
  };
  if (fragment_move) {
    // .m8n8 .b16 only (not .m16n16/.m8n16 .b8 and the sub-byte forms of newer targets).
    if (!m.Has("sync") || !m.Has("aligned") || !m.Has("m8n8") || m.types.size() != 1 ||
        m.type(0) != Type::kB16) {
      why_ = "this form of " + m.base;
      return false;
    }
    site.row_major = !m.Has("trans");
    if (m.base == "movmatrix") {
      if (site.row_major || ops.size() != 2) {
        why_ = "this form of movmatrix";
        return false;
      }
      uint32_t d, a;
      if (!Dst(src, ops[0], &d) || !Src(src, ops[1], Type::kB32, &a)) return false;
      site.d.push_back(d);
      site.a.push_back(a);
      return emit(MatrixOp::kMovmatrix);
    }
    site.matrix = m.Has("x1") ? 1 : m.Has("x2") ? 2 : m.Has("x4") ? 4 : 0;
    const bool load = m.base == "ldmatrix";
    if (site.matrix == 0 || ops.size() != 2) {
      why_ = "this form of " + m.base;
      return false;
    }
    MemSpace space = m.Has("shared") ? MemSpace::kShared : MemSpace::kGeneric;
    if (!Address(src, load ? ops[1] : ops[0], &space, &site.base, &site.imm)) return false;
    if (space != MemSpace::kShared && space != MemSpace::kGeneric) {
      why_ = m.base + " address space";
      return false;
    }
    site.space = space == MemSpace::kShared ? ptx::Space::kShared : ptx::Space::kGeneric;
    if (!regs(load ? ops[0] : ops[1], load, load ? &site.d : &site.c)) return false;
    if ((load ? site.d : site.c).size() != site.matrix) {
      why_ = m.base + " register count";
      return false;
    }
    return emit(load ? MatrixOp::kLdmatrix : MatrixOp::kStmatrix);
  }
  const uint32_t mk = site.m * site.k, kn = site.k * site.n, mn = site.m * site.n;
  auto is_int8 = [](Type t) { return t == Type::kS8 || t == Type::kU8; };
  if (m.base == "mma") {
    if (m.types.size() != 4 || ops.size() != 4 || !m.Has("row") || !m.Has("col")) {
      why_ = "this form of mma";
      return false;
    }
    site.d_type = m.type(0);
    site.a_type = m.type(1);
    site.b_type = m.type(2);
    site.c_type = m.type(3);
    const Type a = site.a_type, c = site.c_type, d = site.d_type;
    const bool f16 = a == Type::kF16 && site.b_type == a;
    const bool bf16 = a == Type::kBF16 && site.b_type == a;
    const bool tf32 = a == Type::kTF32 && site.b_type == a;
    const bool int8 = is_int8(a) && is_int8(site.b_type);
    const bool f32acc = c == Type::kF32 && d == Type::kF32;
    const bool f16acc = c == Type::kF16 && d == Type::kF16;
    bool ok = false;
    if (shape_name == "m8n8k4") {
      ok = a == Type::kF64 && site.b_type == a && c == a && d == a;  // not Volta's .f16 form
    } else if (shape_name == "m16n8k4") {
      ok = tf32 && f32acc;
    } else if (shape_name == "m16n8k8") {
      ok = ((f16 || bf16) && (f32acc || (f16 && f16acc))) || (tf32 && f32acc);
    } else if (shape_name == "m16n8k16") {
      ok = ((f16 || bf16) && (f32acc || (f16 && f16acc))) ||
           (int8 && c == Type::kS32 && d == Type::kS32);
    } else if (shape_name == "m8n8k16" || shape_name == "m16n8k32") {
      ok = int8 && c == Type::kS32 && d == Type::kS32;
    }
    if (!ok || (site.satfinite && !int8)) {
      why_ = "this shape or type of mma";
      return false;
    }
    if (!regs(ops[0], true, &site.d) || !regs(ops[1], false, &site.a) ||
        !regs(ops[2], false, &site.b) || !regs(ops[3], false, &site.c)) {
      return false;
    }
    if (!fits(site.a, a, mk, true) || !fits(site.b, site.b_type, kn, true) ||
        !fits(site.c, c, mn, true) || !fits(site.d, d, mn, true)) {
      why_ = "mma fragment sizes";
      return false;
    }
    return emit(MatrixOp::kMma);
  }
  // wmma
  const bool load = m.Has("load"), store = m.Has("store"), mma = m.Has("mma");
  auto supported_shape = [&](Type t) {
    if (t == Type::kF16 || t == Type::kBF16 || is_int8(t) || t == Type::kF32 || t == Type::kS32) {
      if (shape_name == "m16n16k16" || shape_name == "m32n8k16" || shape_name == "m8n32k16")
        return true;
    }
    if (t == Type::kTF32 || t == Type::kF32) {
      if (shape_name == "m16n16k8") return true;
    }
    return t == Type::kF64 && shape_name == "m8n8k4";
  };
  if (load || store) {
    if (m.types.size() != 1 || ops.size() < 2 || ops.size() > 3 ||
        (!m.Has("row") && !m.Has("col"))) {
      why_ = "this form of wmma.load/store";
      return false;
    }
    site.a_type = m.type(0);
    site.row_major = m.Has("row");
    site.matrix = m.Has("a") ? 0 : m.Has("b") ? 1 : 2;
    if (load == m.Has("d") || (store && !m.Has("d")) || !supported_shape(site.a_type)) {
      why_ = "this matrix, shape or type of wmma.load/store";
      return false;
    }
    MemSpace space = m.Has("shared")   ? MemSpace::kShared
                     : m.Has("global") ? MemSpace::kGlobal
                                       : MemSpace::kGeneric;
    if (!Address(src, load ? ops[1] : ops[0], &space, &site.base, &site.imm)) return false;
    site.space = space == MemSpace::kShared   ? ptx::Space::kShared
                 : space == MemSpace::kGlobal ? ptx::Space::kGlobal
                                              : ptx::Space::kGeneric;
    if (space != MemSpace::kShared && space != MemSpace::kGlobal && space != MemSpace::kGeneric) {
      why_ = "wmma address space";
      return false;
    }
    uint32_t rows = site.matrix == 1 ? site.k : site.m;
    uint32_t cols = site.matrix == 0 ? site.k : site.n;
    if (ops.size() == 3) {
      if (!Src(src, ops[2], Type::kU32, &site.stride)) return false;
    } else {
      site.stride = pd_.Const(site.row_major ? cols : rows);
    }
    // A tf32 fragment is loaded from f32 memory; the register holds the f32 bits.
    Type frag = site.a_type == Type::kTF32 ? Type::kF32 : site.a_type;
    if (load) {
      if (!regs(ops[0], true, &site.d)) return false;
      if (!fits(site.d, frag, rows * cols, false)) {
        why_ = "wmma fragment size";
        return false;
      }
      if (site.a_type == Type::kTF32) site.a_type = Type::kF32;
      return emit(MatrixOp::kWmmaLoad);
    }
    if (!regs(ops[1], false, &site.c)) return false;
    if (!fits(site.c, frag, rows * cols, false)) {
      why_ = "wmma fragment size";
      return false;
    }
    return emit(MatrixOp::kWmmaStore);
  }
  if (!mma || ops.size() != 4) {
    why_ = "this form of wmma";
    return false;
  }
  if (m.types.size() == 2) {  // .dtype.ctype with .f16 multiplicands
    site.d_type = m.type(0);
    site.c_type = m.type(1);
    site.a_type = site.b_type = Type::kF16;
  } else if (m.types.size() == 4) {
    site.d_type = m.type(0);
    site.a_type = m.type(1);
    site.b_type = m.type(2);
    site.c_type = m.type(3);
  } else {
    why_ = "wmma.mma types";
    return false;
  }
  const bool fp_acc = (site.d_type == Type::kF32 || site.d_type == Type::kF16) &&
                      (site.c_type == Type::kF32 || site.c_type == Type::kF16);
  bool ok = false;
  if (site.a_type == Type::kF16) ok = fp_acc;
  if (site.a_type == Type::kBF16 || site.a_type == Type::kTF32)
    ok = site.d_type == Type::kF32 && site.c_type == Type::kF32;
  if (is_int8(site.a_type)) ok = site.d_type == Type::kS32 && site.c_type == Type::kS32;
  if (site.a_type == Type::kF64) ok = site.d_type == Type::kF64 && site.c_type == Type::kF64;
  if (!ok || site.b_type != site.a_type || !supported_shape(site.a_type) ||
      (site.satfinite && !is_int8(site.a_type))) {
    why_ = "this shape or type of wmma.mma";
    return false;
  }
  if (!regs(ops[0], true, &site.d) || !regs(ops[1], false, &site.a) ||
      !regs(ops[2], false, &site.b) || !regs(ops[3], false, &site.c)) {
    return false;
  }
  const Type frag_a = site.a_type == Type::kTF32 ? Type::kF32 : site.a_type;
  if (!fits(site.a, frag_a, mk, false) || !fits(site.b, frag_a, kn, false) ||
      !fits(site.c, site.c_type, mn, false) || !fits(site.d, site.d_type, mn, false)) {
    why_ = "wmma fragment sizes";
    return false;
  }
  return emit(MatrixOp::kWmmaMma);
}

bool FunctionDecoder::DecodeCpAsync(const ptx::Instruction& src, const Mods& m) {
  const auto& ops = src.operands;
  if (m.Has("commit_group") || m.Has("wait_group") || m.Has("wait_all")) {
    Emit(src, NopHandler());  // copies complete when issued
    return true;
  }
  if (m.Has("bulk")) return DecodeCpAsyncBulk(src, m);
  if (m.Has("mbarrier") && m.Has("arrive")) {
    // cp.async.mbarrier.arrive{.noinc}{.shared{::cta}}.b64 [addr]: an arrival once the thread's
    // earlier cp.async copies complete, which they did when issued. Without .noinc the pending
    // count is raised by one first, so the two cancel out.
    if (ops.size() != 1) return false;
    if (!m.Has("noinc")) {
      Emit(src, NopHandler());
      return true;
    }
    const MemSpace space =
        m.Has("shared") || m.Has("shared::cta") ? MemSpace::kShared : MemSpace::kGeneric;
    uint32_t base = kNoOperand;
    int64_t imm = 0;
    MemSpace resolved = space;
    if (!Address(src, ops[0], &resolved, &base, &imm) || resolved != space) return false;
    Insn& in = Emit(src, MbarrierHandler(MbarrierOp::kArrive, space));
    in.a[0] = kNoOperand;
    in.a[1] = kNoOperand;
    in.a[4] = base;
    in.imm = imm;
    return true;
  }
  if (m.Has("mbarrier") || !m.Has("shared") || !m.Has("global") || ops.size() < 3 ||
      ops[2].kind != Operand::Kind::kImmediate) {
    why_ = "this form of cp.async";
    return false;
  }
  const uint64_t size = ops[2].imm_bits;
  if (size != 4 && size != 8 && size != 16) return false;
  uint32_t dst, from, src_size = kNoOperand;
  if (!AddressRegister(src, ops[0], MemSpace::kShared, &dst) ||
      !AddressRegister(src, ops[1], MemSpace::kGlobal, &from)) {
    return false;
  }
  // An optional source size, then an optional cache-policy operand (ignored).
  if (ops.size() >= 4 && !m.Has("L2::cache_hint") && !Src(src, ops[3], Type::kU32, &src_size)) {
    return false;
  }
  if (ops.size() >= 5 && !Src(src, ops[3], Type::kU32, &src_size)) return false;
  Insn& in = Emit(src, CpAsyncHandler());
  in.a[0] = dst;
  in.a[1] = from;
  in.a[2] = src_size;
  in.aux = static_cast<uint32_t>(size);
  return true;
}

bool FunctionDecoder::DecodeCpAsyncBulk(const ptx::Instruction& src, const Mods& m) {
  const auto& ops = src.operands;
  if (m.Has("tensor")) return DecodeCpAsyncBulkTensor(src, m);
  if (m.Has("prefetch")) {  // cp.async.bulk.prefetch.L2.global [src], size: a hint
    Emit(src, NopHandler());
    return true;
  }
  // The destination's space comes first, then the source's.
  std::vector<std::string> spaces;
  for (const std::string& f : m.flags) {
    if (f == "global" || f == "shared" || f == "shared::cluster") spaces.push_back(f);
  }
  const bool with_mbarrier = m.Has("mbarrier::complete_tx::bytes");
  const bool multicast = m.Has("multicast::cluster");
  const bool reduce = m.Has("reduce");
  CpBulkDirection direction;
  if (spaces.size() == 2 && spaces[0] != "global" && spaces[1] == "global" && with_mbarrier &&
      !reduce) {
    direction = CpBulkDirection::kGlobalToShared;
  } else if (spaces.size() == 2 && spaces[0] == "shared::cluster" && spaces[1] == "shared" &&
             with_mbarrier && !multicast) {
    direction = CpBulkDirection::kSharedToShared;
  } else if (spaces.size() == 2 && spaces[0] == "global" && spaces[1] != "global" &&
             m.Has("bulk_group") && !multicast) {
    direction = CpBulkDirection::kSharedToGlobal;
  } else {
    why_ = "this form of cp.async.bulk";
    return false;
  }
  CpBulkMode mode;
  mode.direction = direction;
  mode.multicast = multicast;
  if (reduce) {
    if (!AtomOpOf(m, &mode.op) || mode.op == AtomOp::kExch || mode.op == AtomOp::kCas ||
        m.types.size() != 1 || !BulkReduceSupported(mode.op, m.type())) {
      why_ = "this operation or type of cp.reduce.async.bulk";
      return false;
    }
    mode.reduce = true;
    mode.type = m.type();
  }
  // [dst], [src], size{, [mbar]}{, ctaMask}{, cache-policy}
  const size_t needed =
      3 + (with_mbarrier ? 1 : 0) + (multicast ? 1 : 0) + (m.Has("L2::cache_hint") ? 1 : 0);
  if (ops.size() != needed) return false;
  const MemSpace to =
      direction == CpBulkDirection::kSharedToGlobal ? MemSpace::kGlobal : MemSpace::kShared;
  const MemSpace from =
      direction == CpBulkDirection::kGlobalToShared ? MemSpace::kGlobal : MemSpace::kShared;
  uint32_t dst, from_reg, size, mbar = kNoOperand, mask = kNoOperand;
  if (!AddressRegister(src, ops[0], to, &dst) || !AddressRegister(src, ops[1], from, &from_reg) ||
      !Src(src, ops[2], Type::kU32, &size)) {
    return false;
  }
  if (with_mbarrier && !AddressRegister(src, ops[3], MemSpace::kShared, &mbar)) return false;
  if (multicast && !Src(src, ops[4], Type::kU16, &mask)) return false;
  Insn& in = Emit(src, CpAsyncBulkHandler());
  in.a[0] = dst;
  in.a[1] = from_reg;
  in.a[2] = size;
  in.a[3] = mbar;
  in.a[4] = mask;
  in.aux = mode.Pack();
  return true;
}

bool FunctionDecoder::TensorMapOperand(const ptx::Instruction& src, const Operand& op,
                                       uint32_t rank, TensorSite* site) {
  if (op.kind != Operand::Kind::kAddress || op.elems.size() != 1 ||
      op.elems[0].kind != Operand::Kind::kVector || op.elems[0].elems.size() != rank) {
    why_ = "tensor-map operand (a map and one coordinate per dimension)";
    return false;
  }
  // The map: a generic address (a register, or a global or const variable), or the name of a
  // kernel parameter (a __grid_constant__ CUtensorMap), which reads through the parameter window.
  MemSpace space = MemSpace::kGeneric;
  uint32_t base;
  int64_t imm;
  if (!Address(src, op, &space, &base, &imm)) return false;
  if (space == MemSpace::kKernelParam) {
    site->map = pd_.Const(kParamWindowBase + static_cast<uint64_t>(imm));
  } else if (space != MemSpace::kGeneric || !AddressRegister(src, op, space, &site->map)) {
    why_ = "a tensor map in this state space";
    return false;
  }
  for (uint32_t k = 0; k < rank; ++k) {
    if (!Src(src, op.elems[0].elems[k], Type::kS32, &site->coords[k])) return false;
  }
  return true;
}

bool FunctionDecoder::DecodeCpAsyncBulkTensor(const ptx::Instruction& src, const Mods& m) {
  const auto& ops = src.operands;
  static const char* const kModes[] = {"im2col",         "im2col_no_offs", "im2col::w",
                                       "im2col::w::128", "tile::gather4",  "tile::scatter4"};
  for (const char* mode : kModes) {
    if (m.Has(mode)) {
      why_ = std::string("cp.async.bulk.tensor in .") + mode + " mode (only .tile is supported)";
      return false;
    }
  }
  for (const std::string& f : m.flags) {
    if (f.compare(0, 10, "cta_group:") == 0) {
      why_ = "cp.async.bulk.tensor with ." + f;
      return false;
    }
  }
  TensorSite site;
  for (uint32_t r = 1; r <= kTensorMapMaxRank; ++r) {
    if (m.Has(std::to_string(r) + "d")) site.rank = static_cast<uint8_t>(r);
  }
  if (site.rank == 0) {
    why_ = "cp.async.bulk.tensor dimensionality";
    return false;
  }
  std::vector<std::string> spaces;
  for (const std::string& f : m.flags) {
    if (f == "global" || f == "shared" || f == "shared::cluster") spaces.push_back(f);
  }
  const bool hint = m.Has("L2::cache_hint");
  size_t needed;
  if (m.Has("prefetch")) {  // cp.async.bulk.prefetch.tensor.Nd.L2.global [map, {c}]
    site.op = TensorCopy::kPrefetch;
    needed = 1;
  } else if (spaces.size() == 2 && spaces[0] != "global" && spaces[1] == "global" &&
             m.Has("mbarrier::complete_tx::bytes") && !m.Has("reduce")) {
    site.op = TensorCopy::kLoad;  // [dst], [map, {c}], [mbar]{, ctaMask}
    needed = 3 + (m.Has("multicast::cluster") ? 1 : 0);
  } else if (spaces.size() == 2 && spaces[0] == "global" && spaces[1] == "shared" &&
             m.Has("bulk_group") && !m.Has("multicast::cluster")) {
    site.op = m.Has("reduce") ? TensorCopy::kReduce : TensorCopy::kStore;  // [map, {c}], [src]
    needed = 2;
    if (site.op == TensorCopy::kReduce &&
        (!AtomOpOf(m, &site.reduce) || site.reduce == AtomOp::kExch ||
         site.reduce == AtomOp::kCas)) {
      why_ = "this operation of cp.reduce.async.bulk.tensor";
      return false;
    }
  } else {
    why_ = "this form of cp.async.bulk.tensor";
    return false;
  }
  if (ops.size() != needed + (hint ? 1 : 0)) return false;
  switch (site.op) {
    case TensorCopy::kPrefetch:
      if (!TensorMapOperand(src, ops[0], site.rank, &site)) return false;
      break;
    case TensorCopy::kLoad:
      if (!AddressRegister(src, ops[0], MemSpace::kShared, &site.shared) ||
          !TensorMapOperand(src, ops[1], site.rank, &site) ||
          !AddressRegister(src, ops[2], MemSpace::kShared, &site.mbarrier)) {
        return false;
      }
      if (needed == 4 && !Src(src, ops[3], Type::kU16, &site.cta_mask)) return false;
      break;
    case TensorCopy::kStore:
    case TensorCopy::kReduce:
      if (!TensorMapOperand(src, ops[0], site.rank, &site) ||
          !AddressRegister(src, ops[1], MemSpace::kShared, &site.shared)) {
        return false;
      }
      break;
  }
  if (site.op == TensorCopy::kPrefetch) {  // a hint: nothing to do once the operands are valid
    Emit(src, NopHandler());
    return true;
  }
  Program& p = pd_.program();
  p.tensor_sites.push_back(site);
  Insn& in = Emit(src, TensorCopyHandler());
  in.aux = static_cast<uint32_t>(p.tensor_sites.size() - 1);
  return true;
}

bool FunctionDecoder::DecodeAsyncStore(const ptx::Instruction& src, const Mods& m) {
  // st.async{.weak}{.shared::cluster}.mbarrier::complete_tx::bytes{.v2,.v4}.type [a], b, [mbar]
  // red.async.relaxed.cluster{.shared::cluster}.mbarrier::complete_tx::bytes.op.type [a], b,
  // [mbar]
  const auto& ops = src.operands;
  const bool red = m.base == "red";
  AsyncStoreMode mode;
  mode.type = m.type();
  mode.count = m.Vector();
  if (!m.Has("mbarrier::complete_tx::bytes") || m.types.size() != 1 || ops.size() != 3 ||
      m.Has("global") || mode.count > 4 || (red && mode.count != 1) ||
      (ptx::TypeSize(mode.type) != 4 && ptx::TypeSize(mode.type) != 8) ||
      (mode.count == 4 && ptx::TypeSize(mode.type) != 4)) {
    why_ = red ? "this form of red.async" : "this form of st.async";
    return false;
  }
  if (red) {
    if (!AtomOpOf(m, &mode.op) || mode.op == AtomOp::kExch || mode.op == AtomOp::kCas ||
        !BulkReduceSupported(mode.op, mode.type)) {
      why_ = "this operation or type of red.async";
      return false;
    }
    mode.reduce = true;
  }
  uint32_t address, mbar;
  uint32_t values[4] = {kNoOperand, kNoOperand, kNoOperand, kNoOperand};
  if (!AddressRegister(src, ops[0], MemSpace::kShared, &address)) return false;
  if (mode.count == 1) {
    if (!Src(src, ops[1], mode.type, &values[0])) return false;
  } else {
    if (ops[1].kind != Operand::Kind::kVector || ops[1].elems.size() != mode.count) return false;
    for (uint32_t i = 0; i < mode.count; ++i) {
      if (!Src(src, ops[1].elems[i], mode.type, &values[i])) return false;
    }
  }
  if (!AddressRegister(src, ops[2], MemSpace::kShared, &mbar)) return false;
  Insn& in = Emit(src, AsyncStoreHandler());
  in.a[0] = address;
  for (uint32_t i = 0; i < 4; ++i) in.a[1 + i] = values[i];
  in.a[5] = mbar;
  in.aux = mode.Pack();
  return true;
}

bool FunctionDecoder::DecodeCvt(const ptx::Instruction& src, const Mods& m) {
  const auto& ops = src.operands;
  if (m.type(0) == Type::kTF32) {  // cvt.{rna,rn,rz}.tf32.f32 (mma's tf32 multiplicands)
    const int rounding = m.Has("rna") ? 0 : m.Has("rn") ? 1 : m.Has("rz") ? 2 : -1;
    uint32_t d, a;
    if (rounding < 0 || m.flags.size() != 1 || m.type(1) != Type::kF32 || ops.size() != 2 ||
        !Dst(src, ops[0], &d) || !Src(src, ops[1], Type::kF32, &a)) {
      why_ = "this form of cvt.tf32";
      return false;
    }
    Insn& in = Emit(src, CvtTf32Handler());
    in.a[0] = d;
    in.a[1] = a;
    in.aux = static_cast<uint32_t>(rounding);
    return true;
  }
  FloatMode mode;
  bool integer_rounding = false;
  for (const std::string& f : m.flags) {
    if (f == "rn")
      mode.rounding = kRoundNearest;
    else if (f == "rz")
      mode.rounding = kRoundZero;
    else if (f == "rm")
      mode.rounding = kRoundDown;
    else if (f == "rp")
      mode.rounding = kRoundUp;
    else if (f == "rni") {
      mode.rounding = kRoundNearest;
      integer_rounding = true;
    } else if (f == "rzi") {
      mode.rounding = kRoundZero;
      integer_rounding = true;
    } else if (f == "rmi") {
      mode.rounding = kRoundDown;
      integer_rounding = true;
    } else if (f == "rpi") {
      mode.rounding = kRoundUp;
      integer_rounding = true;
    } else if (f == "ftz")
      mode.ftz = true;
    else if (f == "sat")
      mode.sat = true;
    else if (f == "relu")
      mode.relu = true;
    else {
      why_ = "modifier ." + f;
      return false;
    }
  }
  if (m.types.size() != 2) return false;
  const Type dst = m.types[0], srct = m.types[1];
  const uint32_t aux =
      mode.rounding | (mode.ftz ? 4 : 0) | (mode.sat ? 8 : 0) | (mode.relu ? 16 : 0);
  if (dst == Type::kF16x2 || dst == Type::kBF16x2) {
    if (ops.size() != 3 || srct != Type::kF32) return false;
    uint32_t d, a, b;
    if (!Dst(src, ops[0], &d) || !Src(src, ops[1], srct, &a) || !Src(src, ops[2], srct, &b)) {
      return false;
    }
    Handler h = CvtPackHandler(dst, mode);
    if (h == nullptr) return false;
    Insn& in = Emit(src, h);
    in.a[0] = d;
    in.a[1] = a;
    in.a[2] = b;
    in.aux = aux;
    return true;
  }
  if (ops.size() != 2) return false;
  Handler h = CvtHandler(dst, srct, mode, integer_rounding);
  if (h == nullptr) return false;
  uint32_t d, a;
  if (!Dst(src, ops[0], &d) || !Src(src, ops[1], srct, &a)) return false;
  Insn& in = Emit(src, h);
  in.a[0] = d;
  in.a[1] = a;
  in.aux = aux;
  in.aux2 = integer_rounding ? 1 : 0;
  return true;
}

bool ParseCmp(const Mods& m, CmpOp* op) {
  static const std::pair<const char*, CmpOp> kOps[] = {
      {"eq", CmpOp::kEq},   {"ne", CmpOp::kNe},   {"lt", CmpOp::kLt},   {"le", CmpOp::kLe},
      {"gt", CmpOp::kGt},   {"ge", CmpOp::kGe},   {"lo", CmpOp::kLo},   {"ls", CmpOp::kLs},
      {"hi", CmpOp::kHi},   {"hs", CmpOp::kHs},   {"equ", CmpOp::kEqu}, {"neu", CmpOp::kNeu},
      {"ltu", CmpOp::kLtu}, {"leu", CmpOp::kLeu}, {"gtu", CmpOp::kGtu}, {"geu", CmpOp::kGeu},
      {"num", CmpOp::kNum}, {"nan", CmpOp::kNan},
  };
  for (const auto& [name, value] : kOps) {
    if (m.Has(name)) {
      *op = value;
      return true;
    }
  }
  return false;
}

bool FunctionDecoder::DecodeCompare(const ptx::Instruction& src, const Mods& m) {
  const auto& ops = src.operands;
  if (m.base == "selp") {
    if (ops.size() != 4) return false;
    const Type t = m.type();
    Handler h = SelpHandler(t);
    if (h == nullptr) return false;
    uint32_t d, a, b, c;
    if (!Src(src, ops[1], t, &a) || !Src(src, ops[2], t, &b) || !Pred(src, ops[3], &c, nullptr) ||
        !Dst(src, ops[0], &d)) {
      return false;
    }
    if (ops[3].negated) return false;
    Insn& in = Emit(src, h);
    in.a[0] = d;
    in.a[1] = a;
    in.a[2] = b;
    in.a[3] = c;
    return true;
  }
  if (m.base == "slct") {
    if (ops.size() != 4 || m.types.size() != 2) return false;
    Handler h = SlctHandler(m.types[0], m.types[1]);
    if (h == nullptr) return false;
    uint32_t d, a, b, c;
    if (!Src(src, ops[1], m.types[0], &a) || !Src(src, ops[2], m.types[0], &b) ||
        !Src(src, ops[3], m.types[1], &c) || !Dst(src, ops[0], &d)) {
      return false;
    }
    Insn& in = Emit(src, h);
    in.a[0] = d;
    in.a[1] = a;
    in.a[2] = b;
    in.a[3] = c;
    return true;
  }
  if (m.base == "testp") {
    static const char* kKinds[] = {"finite",     "infinite", "number",
                                   "notanumber", "normal",   "subnormal"};
    int kind = -1;
    for (int i = 0; i < 6; ++i) {
      if (m.Has(kKinds[i])) kind = i;
    }
    Handler h = TestpHandler(kind, m.type());
    if (h == nullptr || ops.size() != 2) return false;
    uint32_t p, a;
    if (!Pred(src, ops[0], &p, nullptr) || !Src(src, ops[1], m.type(), &a)) return false;
    Insn& in = Emit(src, h);
    in.a[0] = p;
    in.a[1] = a;
    return true;
  }
  // setp / set
  CmpOp cmp;
  if (!ParseCmp(m, &cmp)) return false;
  BoolOp bop = BoolOp::kNone;
  if (m.Has("and"))
    bop = BoolOp::kAnd;
  else if (m.Has("or"))
    bop = BoolOp::kOr;
  else if (m.Has("xor"))
    bop = BoolOp::kXor;
  const bool is_set = m.base == "set";
  const Type stype = is_set ? m.type(1) : m.type(0);
  if (m.Has("ftz") && stype != Type::kF32) return false;
  const size_t want = bop == BoolOp::kNone ? 3 : 4;
  if (ops.size() != want) return false;
  Handler h = is_set ? SetHandler(cmp, m.type(0), stype) : SetpHandler(cmp, stype);
  if (h == nullptr) return false;
  uint32_t a, b, c = kNoOperand, d, d2 = kNoOperand;
  bool c_neg = false;
  if (!Src(src, ops[1], stype, &a) || !Src(src, ops[2], stype, &b)) return false;
  if (bop != BoolOp::kNone && !Pred(src, ops[3], &c, &c_neg)) return false;
  if (is_set) {
    if (!Dst(src, ops[0], &d)) return false;
  } else {
    if (!Pred(src, ops[0], &d, nullptr)) return false;
    if (ops[0].pred_out >= 0) d2 = static_cast<uint32_t>(ops[0].pred_out);
  }
  Insn& in = Emit(src, h);
  in.a[0] = d;
  in.a[1] = a;
  in.a[2] = b;
  in.a[3] = d2;
  in.a[4] = c;
  in.aux = static_cast<uint32_t>(bop);
  in.aux2 = c_neg ? 1 : 0;
  if (is_set) {
    in.aux |= static_cast<uint32_t>(cmp) << 8;
    const Type dtype = m.type(0);
    uint64_t true_bits;
    switch (dtype) {
      case Type::kF32:
        true_bits = 0x3f800000u;
        break;
      case Type::kF64:
        true_bits = 0x3ff0000000000000ull;
        break;
      case Type::kF16:
        true_bits = 0x3c00u;
        break;
      case Type::kBF16:
        true_bits = 0x3f80u;
        break;
      default: {
        const uint32_t size = ptx::TypeSize(dtype);
        true_bits = size >= 8 ? ~0ull : ((1ull << (8 * size)) - 1);
      }
    }
    in.imm = static_cast<int64_t>(true_bits);
  }
  return true;
}

bool FunctionDecoder::DecodeWarp(const ptx::Instruction& src, const Mods& m) {
  const auto& ops = src.operands;
  if (m.base == "activemask") {
    uint32_t d;
    if (ops.size() != 1 || !Dst(src, ops[0], &d)) return false;
    Insn& in = Emit(src, ActivemaskHandler());
    in.a[0] = d;
    return true;
  }
  if (m.base == "shfl") {
    ShflMode mode;
    if (m.Has("up"))
      mode = ShflMode::kUp;
    else if (m.Has("down"))
      mode = ShflMode::kDown;
    else if (m.Has("bfly"))
      mode = ShflMode::kBfly;
    else if (m.Has("idx"))
      mode = ShflMode::kIdx;
    else
      return false;
    const bool sync = m.Has("sync");
    if (ops.size() != (sync ? 5u : 4u)) return false;
    uint32_t d, a, b, c;
    if (!Src(src, ops[1], Type::kB32, &a) || !Src(src, ops[2], Type::kB32, &b) ||
        !Src(src, ops[3], Type::kB32, &c) || !Dst(src, ops[0], &d)) {
      return false;
    }
    Insn& in = Emit(src, ShflHandler(mode));
    in.a[0] = d;
    in.a[1] = a;
    in.a[2] = b;
    in.a[3] = c;
    in.a[5] = ops[0].pred_out >= 0 ? static_cast<uint32_t>(ops[0].pred_out) : kNoOperand;
    return true;
  }
  if (m.base == "vote") {
    VoteMode mode;
    if (m.Has("all"))
      mode = VoteMode::kAll;
    else if (m.Has("any"))
      mode = VoteMode::kAny;
    else if (m.Has("uni"))
      mode = VoteMode::kUni;
    else if (m.Has("ballot"))
      mode = VoteMode::kBallot;
    else
      return false;
    if (ops.size() < 2) return false;
    uint32_t d, p;
    bool neg = false;
    if (!Pred(src, ops[1], &p, &neg)) return false;
    if (mode == VoteMode::kBallot) {
      if (!Dst(src, ops[0], &d)) return false;
    } else if (!Pred(src, ops[0], &d, nullptr)) {
      return false;
    }
    Insn& in = Emit(src, VoteHandler(mode));
    in.a[0] = d;
    in.a[1] = p;
    in.aux2 = neg ? 1 : 0;
    return true;
  }
  if (m.base == "match") {
    const bool all = m.Has("all");
    Handler h = MatchHandler(all, m.type());
    if (h == nullptr || ops.size() != 3) return false;
    uint32_t d, a;
    if (!Src(src, ops[1], m.type(), &a) || !Dst(src, ops[0], &d)) return false;
    Insn& in = Emit(src, h);
    in.a[0] = d;
    in.a[1] = a;
    in.a[5] = ops[0].pred_out >= 0 ? static_cast<uint32_t>(ops[0].pred_out) : kNoOperand;
    return true;
  }
  if (m.base == "redux") {
    static const char* kOps[] = {"add", "min", "max", "and", "or", "xor"};
    int op = -1;
    for (int i = 0; i < 6; ++i) {
      if (m.Has(kOps[i])) op = i;
    }
    Handler h = ReduxHandler(op, m.type());
    if (h == nullptr || ops.size() != 3) return false;
    uint32_t d, a;
    if (!Src(src, ops[1], m.type(), &a) || !Dst(src, ops[0], &d)) return false;
    Insn& in = Emit(src, h);
    in.a[0] = d;
    in.a[1] = a;
    return true;
  }
  return false;
}

bool FunctionDecoder::DecodeCall(const ptx::Instruction& src, const Mods& m) {
  const auto& ops = src.operands;
  // call{.uni} {(ret),} func{, (args)}{, prototype};
  size_t i = 0;
  const Operand* rets = nullptr;
  const Operand* args = nullptr;
  if (i < ops.size() && ops[i].kind == Operand::Kind::kList) rets = &ops[i++];
  auto frame_slot = [&](const Operand& op, ParamSlot* slot) {
    if (op.kind != Operand::Kind::kSymbol || op.var < 0) return false;
    const VarLayout& v = layout_.vars[static_cast<size_t>(op.var)];
    if (v.space != Space::kParam) return false;
    slot->offset = v.offset;
    slot->size = v.size;
    return true;
  };
  if (i < ops.size() && ops[i].kind == Operand::Kind::kRegister) {
    // call (ret), %target, (args), prototype: callee resolved per lane at run time.
    CallSite site;
    site.target_register = ops[i++].reg;
    if (i < ops.size() && ops[i].kind == Operand::Kind::kList) args = &ops[i++];
    for (const Operand* list : {args, rets}) {
      if (list == nullptr) continue;
      for (const Operand& e : list->elems) {
        ParamSlot slot;
        if (!frame_slot(e, &slot)) {
          why_ = "call operand that is not a .param variable";
          return false;
        }
        (list == args ? site.indirect_args : site.indirect_results).push_back(slot);
      }
    }
    Insn& in = Emit(src, nullptr);
    in.control = Control::kCall;
    in.target = kNoOperand;
    in.aux = static_cast<uint32_t>(out_.call_sites.size());
    out_.call_sites.push_back(std::move(site));
    return true;
  }
  if (i >= ops.size() || ops[i].kind != Operand::Kind::kSymbol) return false;
  const std::string& name = ops[i++].name;
  if (i < ops.size() && ops[i].kind == Operand::Kind::kList) args = &ops[i++];
  const Program& prog = pd_.program();
  auto it = prog.function_index.find(name);
  if (it == prog.function_index.end()) {
    hard_error_ = "call of unknown function '" + name + "'";
    return false;
  }
  const uint32_t callee_index = it->second;
  const Function& callee = prog.functions[callee_index];
  CallSite site;
  auto frame_offset = [&](const Operand& op, uint32_t* offset, uint32_t* size) {
    if (op.kind != Operand::Kind::kSymbol || op.var < 0) return false;
    const VarLayout& v = layout_.vars[static_cast<size_t>(op.var)];
    if (v.space != Space::kParam) return false;
    *offset = v.offset;
    *size = v.size;
    return true;
  };
  if (!callee.has_body) {
    struct Known {
      const char* name;
      CallSite::Builtin builtin;
      size_t args;
    };
    static const Known kBuiltins[] = {
        {"vprintf", CallSite::Builtin::kPrintf, 2},
        {"malloc", CallSite::Builtin::kMalloc, 1},
        {"free", CallSite::Builtin::kFree, 1},
        {"__assertfail", CallSite::Builtin::kAssert, 5},
        {"cudaGraphSetConditional", CallSite::Builtin::kSetConditional, 2},
    };
    const Known* known = nullptr;
    for (const Known& k : kBuiltins) {
      if (name == k.name) known = &k;
    }
    if (known == nullptr) {
      // The device runtime's launch calls are dynamic parallelism (kernels launching kernels,
      // cudadevrt): named as such, since a program built with -rdc=true may carry their PTX.
      why_ = name.rfind("cuda", 0) == 0
                 ? "call of the device runtime's '" + name +
                       "' (dynamic parallelism: kernels launching kernels or using the CUDA "
                       "runtime on the device, which the software GPU does not run)"
                 : "call of external function '" + name + "'";
      return false;
    }
    if (args == nullptr || args->elems.size() != known->args) {
      hard_error_ = "call of '" + name + "' with the wrong number of arguments";
      return false;
    }
    uint32_t size;
    for (const Operand& a : args->elems) {
      uint32_t offset;
      if (!frame_offset(a, &offset, &size)) return false;
      site.builtin_args.push_back(offset);
    }
    if (rets != nullptr && rets->elems.size() == 1 &&
        !frame_offset(rets->elems[0], &site.builtin_result, &size)) {
      return false;
    }
    site.builtin = known->builtin;
  } else {
    const size_t nargs = args == nullptr ? 0 : args->elems.size();
    const size_t nrets = rets == nullptr ? 0 : rets->elems.size();
    if (nargs != callee.params.size() || nrets > callee.returns.size()) {
      hard_error_ = "call of '" + name + "' with the wrong number of arguments";
      return false;
    }
    for (size_t k = 0; k < nargs; ++k) {
      uint32_t offset, size;
      if (!frame_offset(args->elems[k], &offset, &size)) {
        why_ = "call argument that is not a .param variable";
        return false;
      }
      site.args.push_back({offset, callee.params[k].offset, std::min(size, callee.params[k].size)});
    }
    for (size_t k = 0; k < nrets; ++k) {
      uint32_t offset, size;
      if (!frame_offset(rets->elems[k], &offset, &size)) {
        why_ = "call result that is not a .param variable";
        return false;
      }
      site.results.push_back(
          {offset, callee.returns[k].offset, std::min(size, callee.returns[k].size)});
    }
  }
  Insn& in = Emit(src, nullptr);
  in.control = Control::kCall;
  in.target = callee_index;
  in.aux = static_cast<uint32_t>(out_.call_sites.size());
  out_.call_sites.push_back(std::move(site));
  return true;
}

bool FunctionDecoder::DecodeArith(const ptx::Instruction& src, const Mods& m) {
  const auto& ops = src.operands;
  const std::string& b = m.base;
  const Type t = m.type();
  // Predicate logic.
  if (t == Type::kPred) {
    PredOp op;
    size_t arity = 3;
    if (b == "and")
      op = PredOp::kAnd;
    else if (b == "or")
      op = PredOp::kOr;
    else if (b == "xor")
      op = PredOp::kXor;
    else if (b == "not") {
      op = PredOp::kNot;
      arity = 2;
    } else if (b == "cnot") {
      op = PredOp::kCnot;
      arity = 2;
    } else
      return false;
    if (ops.size() != arity) return false;
    uint32_t d, a, c = 0;
    bool na = false, nc = false;
    if (!Pred(src, ops[0], &d, nullptr) || !Pred(src, ops[1], &a, &na)) return false;
    if (arity == 3 && !Pred(src, ops[2], &c, &nc)) return false;
    Insn& in = Emit(src, PredHandler(op));
    in.a[0] = d;
    in.a[1] = a;
    in.a[2] = c;
    in.aux = (na ? 1 : 0) | (nc ? 2 : 0);
    return true;
  }
  if (t == Type::kNone) {
    why_ = "missing type";
    return false;
  }
  const bool is_float = ptx::IsFloat(t);
  Handler h = nullptr;
  size_t nsrc = 2;
  Type src_type = t;  // type of source operands
  uint32_t aux = 0;
  bool carry = false;
  uint32_t extra = kNoOperand;  // bfi length operand

  FloatMode mode;
  for (const std::string& f : m.flags) {
    if (f == "rz")
      mode.rounding = kRoundZero;
    else if (f == "rm")
      mode.rounding = kRoundDown;
    else if (f == "rp")
      mode.rounding = kRoundUp;
    else if (f == "ftz")
      mode.ftz = true;
    else if (f == "sat")
      mode.sat = true;
    else if (f == "relu")
      mode.relu = true;
  }
  const uint32_t faux =
      mode.rounding | (mode.ftz ? 4 : 0) | (mode.sat ? 8 : 0) | (mode.relu ? 16 : 0);

  if (is_float) {
    FloatOp op;
    if (b == "add")
      op = FloatOp::kAdd;
    else if (b == "sub")
      op = FloatOp::kSub;
    else if (b == "mul")
      op = FloatOp::kMul;
    else if (b == "fma" || b == "mad") {
      op = FloatOp::kFma;
      nsrc = 3;
    } else if (b == "div")
      op = FloatOp::kDiv;
    else if (b == "rcp") {
      op = FloatOp::kRcp;
      nsrc = 1;
    } else if (b == "sqrt") {
      op = FloatOp::kSqrt;
      nsrc = 1;
    } else if (b == "rsqrt") {
      op = FloatOp::kRsqrt;
      nsrc = 1;
    } else if (b == "sin") {
      op = FloatOp::kSin;
      nsrc = 1;
    } else if (b == "cos") {
      op = FloatOp::kCos;
      nsrc = 1;
    } else if (b == "lg2") {
      op = FloatOp::kLg2;
      nsrc = 1;
    } else if (b == "ex2") {
      op = FloatOp::kEx2;
      nsrc = 1;
    } else if (b == "tanh") {
      op = FloatOp::kTanh;
      nsrc = 1;
    } else if (b == "abs") {
      op = FloatOp::kAbs;
      nsrc = 1;
    } else if (b == "neg") {
      op = FloatOp::kNeg;
      nsrc = 1;
    } else if (b == "min")
      op = m.Has("NaN") ? FloatOp::kMinNaN : FloatOp::kMin;
    else if (b == "max")
      op = m.Has("NaN") ? FloatOp::kMaxNaN : FloatOp::kMax;
    else if (b == "copysign")
      op = FloatOp::kCopysign;
    else {
      why_ = "";
      return false;
    }
    if (m.Has("xorsign") || m.Has("abs") || m.Has("oob")) {
      why_ = "modifier";
      return false;
    }
    h = FloatHandler(op, t, mode);
    aux = faux;
  } else {
    IntOp op;
    const bool lo = m.Has("lo"), hi = m.Has("hi"), wide = m.Has("wide"), cc = m.Has("cc");
    if (b == "add")
      op = cc ? IntOp::kAddCC : (m.Has("sat") ? IntOp::kAddSat : IntOp::kAdd);
    else if (b == "addc")
      op = cc ? IntOp::kAddCCC : IntOp::kAddC;
    else if (b == "sub")
      op = cc ? IntOp::kSubCC : (m.Has("sat") ? IntOp::kSubSat : IntOp::kSub);
    else if (b == "subc")
      op = cc ? IntOp::kSubCCC : IntOp::kSubC;
    else if (b == "mul")
      op = wide ? IntOp::kMulWide : hi ? IntOp::kMulHi : IntOp::kMulLo;
    else if (b == "mad") {
      nsrc = 3;
      if (cc)
        op = hi ? IntOp::kMadHiCC : IntOp::kMadLoCC;
      else
        op = wide ? IntOp::kMadWide : hi ? IntOp::kMadHi : IntOp::kMadLo;
    } else if (b == "madc") {
      nsrc = 3;
      op = hi ? (cc ? IntOp::kMadCHiCC : IntOp::kMadCHi) : (cc ? IntOp::kMadCLoCC : IntOp::kMadCLo);
    } else if (b == "mul24")
      op = hi ? IntOp::kMul24Hi : IntOp::kMul24Lo;
    else if (b == "mad24") {
      op = hi ? IntOp::kMad24Hi : IntOp::kMad24Lo;
      nsrc = 3;
    } else if (b == "sad") {
      op = IntOp::kSad;
      nsrc = 3;
    } else if (b == "div")
      op = IntOp::kDiv;
    else if (b == "rem")
      op = IntOp::kRem;
    else if (b == "abs") {
      op = IntOp::kAbs;
      nsrc = 1;
    } else if (b == "neg") {
      op = IntOp::kNeg;
      nsrc = 1;
    } else if (b == "min")
      op = IntOp::kMin;
    else if (b == "max")
      op = IntOp::kMax;
    else if (b == "popc") {
      op = IntOp::kPopc;
      nsrc = 1;
    } else if (b == "clz") {
      op = IntOp::kClz;
      nsrc = 1;
    } else if (b == "bfind") {
      op = m.Has("shiftamt") ? IntOp::kBfindShiftAmount : IntOp::kBfind;
      nsrc = 1;
    } else if (b == "brev") {
      op = IntOp::kBrev;
      nsrc = 1;
    } else if (b == "bfe") {
      op = IntOp::kBfe;
      nsrc = 3;
    } else if (b == "bfi") {
      op = IntOp::kBfi;
      nsrc = 4;
    } else if (b == "shl")
      op = IntOp::kShl;
    else if (b == "shr")
      op = IntOp::kShr;
    else if (b == "and")
      op = IntOp::kAnd;
    else if (b == "or")
      op = IntOp::kOr;
    else if (b == "xor")
      op = IntOp::kXor;
    else if (b == "not") {
      op = IntOp::kNot;
      nsrc = 1;
    } else if (b == "cnot") {
      op = IntOp::kCnot;
      nsrc = 1;
    } else if (b == "lop3") {
      op = IntOp::kLop3;
      nsrc = 3;
      if (ops.size() != 5 || ops[4].kind != Operand::Kind::kImmediate) return false;
      aux = static_cast<uint32_t>(ops[4].imm_bits & 0xff);
    } else if (b == "prmt") {
      op = IntOp::kPrmt;
      nsrc = 3;
      static const char* kModes[] = {"", "f4e", "b4e", "rc8", "ecl", "ecr", "rc16"};
      for (uint32_t k = 1; k < 7; ++k) {
        if (m.Has(kModes[k])) aux = k;
      }
    } else if (b == "shf") {
      nsrc = 3;
      const bool left = m.Has("l");
      const bool clamp = m.Has("clamp");
      op = left ? (clamp ? IntOp::kShfLClamp : IntOp::kShfLWrap)
                : (clamp ? IntOp::kShfRClamp : IntOp::kShfRWrap);
    } else if (b == "bmsk") {
      nsrc = 2;
      op = m.Has("clamp") ? IntOp::kBmskClamp : IntOp::kBmskWrap;
    } else if (b == "dp4a" || b == "dp2a") {
      nsrc = 3;
      op = b == "dp4a" ? IntOp::kDp4a : (m.Has("hi") ? IntOp::kDp2aHi : IntOp::kDp2aLo);
      if (m.types.size() != 2) return false;
      aux = (ptx::IsSignedInt(m.types[0]) ? 1 : 0) | (ptx::IsSignedInt(m.types[1]) ? 2 : 0);
    } else {
      why_ = "";
      return false;
    }
    (void)lo;
    carry = op >= IntOp::kAddCC && op <= IntOp::kMadCHiCC;
    h = IntHandler(op, t);
    if (op == IntOp::kShl || op == IntOp::kShr) {
      // Shift amounts are u32 operands.
    }
    if (op == IntOp::kMadWide && nsrc == 3) src_type = t;
  }
  if (h == nullptr) {
    why_ = "type ." + std::string(ptx::TypeName(t));
    return false;
  }
  const size_t expected = (b == "lop3") ? 5 : nsrc + 1;
  if (ops.size() != expected) {
    hard_error_ = "wrong number of operands";
    return false;
  }
  uint32_t s[4] = {kNoOperand, kNoOperand, kNoOperand, kNoOperand};
  for (size_t k = 0; k < nsrc; ++k) {
    Type ot = src_type;
    if (!is_float) {
      if ((b == "shl" || b == "shr") && k == 1) ot = Type::kU32;
      if ((b == "bfe" && k >= 1) || (b == "bfi" && k >= 2)) ot = Type::kU32;
      if ((b == "mad" && m.Has("wide")) && k == 2) {
        ot = ptx::TypeSize(t) == 2 ? (ptx::IsSignedInt(t) ? Type::kS32 : Type::kU32)
                                   : (ptx::IsSignedInt(t) ? Type::kS64 : Type::kU64);
      }
      if (b == "dp4a" || b == "dp2a") ot = Type::kB32;
    }
    if (!Src(src, ops[1 + k], ot, &s[k])) return false;
  }
  uint32_t d;
  if (!Dst(src, ops[0], &d)) return false;
  if (b == "bfi") extra = s[3];
  Insn& in = Emit(src, h);
  in.a[0] = d;
  in.a[1] = s[0];
  in.a[2] = s[1];
  in.a[3] = s[2];
  in.a[5] = extra;
  in.aux = aux;
  if (carry) in.a[4] = Carry();
  return true;
}

}  // namespace

rgpu::Status Decode(const ptx::Module& module, Program* program) {
  *program = Program();
  ProgramDecoder decoder(module, program);
  return decoder.Run();
}

rgpu::Status CompilePtx(std::string_view text, Program* program) {
  ptx::Module module;
  if (rgpu::Status s = ptx::ParseModule(text, &module); !s.ok()) return s;
  return Decode(module, program);
}

}  // namespace softgpu
