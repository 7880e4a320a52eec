#include "softgpu/ptx_parser.h"

#include <cstring>
#include <unordered_map>

namespace softgpu::ptx {
namespace {

using rgpu::Status;

// A name visible in a function body scope.
struct ScopedName {
  enum class Kind : uint8_t { kRegister, kPredicate, kVariable } kind;
  uint32_t index;
};

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, Module* module) : toks_(tokens), module_(module) {}

  Status Run() {
    while (Peek().kind != TokenKind::kEnd) {
      Status s = ParseTopLevel();
      if (!s.ok()) return s;
    }
    return Status::Ok();
  }

 private:
  const Token& Peek(size_t ahead = 0) const {
    size_t i = pos_ + ahead;
    return i < toks_.size() ? toks_[i] : toks_.back();
  }
  const Token& Next() {
    const Token& t = Peek();
    if (pos_ < toks_.size() - 1) ++pos_;
    return t;
  }
  bool Accept(char c) {
    if (Peek().Is(c)) {
      Next();
      return true;
    }
    return false;
  }
  Status Error(const std::string& what) const {
    return rgpu::InvalidArgument("PTX line " + std::to_string(Peek().line) + ": " + what);
  }
  Status Expect(char c) {
    if (Accept(c)) return Status::Ok();
    return Error(std::string("expected '") + c + "' but found '" + std::string(Peek().text) + "'");
  }
  Status ExpectIdentifier(std::string* out) {
    if (Peek().kind != TokenKind::kIdentifier) {
      return Error("expected a name but found '" + std::string(Peek().text) + "'");
    }
    *out = std::string(Next().text);
    return Status::Ok();
  }
  Status ExpectUnsigned(uint64_t* out) {
    if (Peek().kind != TokenKind::kInteger) {
      return Error("expected an integer but found '" + std::string(Peek().text) + "'");
    }
    *out = Next().integer;
    return Status::Ok();
  }
  // Skips a directive that ends at the end of its line (.loc, .file).
  void SkipLine() {
    const uint32_t line = Peek().line;
    Next();
    while (Peek().kind != TokenKind::kEnd && Peek().line == line) Next();
  }
  Status SkipPast(char c) {
    while (Peek().kind != TokenKind::kEnd && !Peek().Is(c)) Next();
    return Expect(c);
  }
  Status SkipBraces() {
    while (Peek().kind != TokenKind::kEnd && !Peek().Is('{')) Next();
    int depth = 0;
    do {
      if (Peek().kind == TokenKind::kEnd) return Error("unbalanced braces");
      if (Peek().Is('{')) ++depth;
      if (Peek().Is('}')) --depth;
      Next();
    } while (depth > 0);
    return Status::Ok();
  }

  Status ParseTopLevel() {
    const Token& t = Peek();
    if (t.Is(';')) {
      Next();
      return Status::Ok();
    }
    if (t.kind != TokenKind::kIdentifier) {
      return Error("unexpected '" + std::string(t.text) + "' at module scope");
    }
    if (t.Is(".version")) {
      Next();
      std::string_view v = Next().text;
      size_t dot = v.find('.');
      module_->version_major = static_cast<uint32_t>(atoi(std::string(v.substr(0, dot)).c_str()));
      if (dot != std::string_view::npos) {
        module_->version_minor =
            static_cast<uint32_t>(atoi(std::string(v.substr(dot + 1)).c_str()));
      }
      return Status::Ok();
    }
    if (t.Is(".target")) {
      Next();
      std::string target;
      if (Status s = ExpectIdentifier(&target); !s.ok()) return s;
      module_->target = target;
      while (Accept(',')) Next();  // texmode_*, debug, map_f64_to_f32
      return Status::Ok();
    }
    if (t.Is(".address_size")) {
      Next();
      uint64_t v;
      if (Status s = ExpectUnsigned(&v); !s.ok()) return s;
      if (v != 64) return Error("only .address_size 64 is supported");
      return Status::Ok();
    }
    if (t.Is(".file") || t.Is(".loc")) {
      SkipLine();
      return Status::Ok();
    }
    if (t.Is(".section")) return SkipBraces();
    if (t.Is(".pragma") || t.Is(".alias")) return SkipPast(';');
    bool is_extern = false;
    while (Peek().Is(".visible") || Peek().Is(".extern") || Peek().Is(".weak") ||
           Peek().Is(".common")) {
      if (Peek().Is(".extern")) is_extern = true;
      Next();
    }
    if (Peek().Is(".entry") || Peek().Is(".func")) return ParseFunction();
    Space space;
    if (ParseSpace(Peek().text, &space)) {
      Next();
      return ParseVariables(space, is_extern, &module_->globals, /*scoped=*/false);
    }
    return Error("unsupported module directive '" + std::string(Peek().text) + "'");
  }

  static bool ParseSpace(std::string_view s, Space* space) {
    if (s == ".global")
      *space = Space::kGlobal;
    else if (s == ".const")
      *space = Space::kConst;
    else if (s == ".shared")
      *space = Space::kShared;
    else if (s == ".local")
      *space = Space::kLocal;
    else if (s == ".param")
      *space = Space::kParam;
    else
      return false;
    return true;
  }

  // Parses the attributes, name, dimensions and initializer of one or more variables after the
  // state-space directive, up to and including ';'.
  Status ParseVariables(Space space, bool is_extern, std::vector<Variable>* out, bool scoped) {
    Variable proto;
    proto.space = space;
    proto.is_extern = is_extern;
    uint32_t vector = 1;
    while (Peek().kind == TokenKind::kIdentifier && Peek().text[0] == '.') {
      std::string_view a = Next().text;
      if (a == ".align") {
        uint64_t v;
        if (Status s = ExpectUnsigned(&v); !s.ok()) return s;
        if (v == 0 || (v & (v - 1)) != 0 || v > 4096) return Error("bad alignment");
        proto.align = static_cast<uint32_t>(v);
      } else if (a == ".v2" || a == ".v4" || a == ".v8") {
        vector = static_cast<uint32_t>(a[2] - '0');
      } else if (a == ".attribute") {
        // .attribute(.managed) (a __managed__ variable) or .attribute(.unified(...)).
        while (!Peek().Is(')')) {
          if (Peek().kind == TokenKind::kEnd) return Error("unterminated .attribute");
          if (Next().text == ".managed") proto.managed = true;
        }
        Next();
      } else if (a == ".ptr" || a == ".global" || a == ".shared" || a == ".const" ||
                 a == ".local") {
        // pointer attributes on parameters: ignored
      } else {
        Type type = TypeFromName(a.substr(1));
        if (type == Type::kNone) return Error("unsupported attribute '" + std::string(a) + "'");
        proto.type = type;
      }
    }
    if (proto.align == 1) proto.align = std::max<uint32_t>(1, TypeSize(proto.type) * vector);
    for (;;) {
      Variable v = proto;
      if (Status s = ExpectIdentifier(&v.name); !s.ok()) return s;
      uint64_t count = vector;
      while (Accept('[')) {
        if (Peek().Is(']')) {
          v.unsized = true;
        } else {
          uint64_t dim;
          if (Status s = ExpectUnsigned(&dim); !s.ok()) return s;
          if (dim > (1ull << 34)) return Error("array too large");
          count *= dim;
        }
        if (Status s = Expect(']'); !s.ok()) return s;
      }
      v.size = v.unsized ? 0 : count * TypeSize(v.type);
      if (Accept('=')) {
        if (Status s = ParseInitializer(&v.init); !s.ok()) return s;
        if (v.unsized) {
          v.unsized = false;
          v.size = v.init.size() * TypeSize(v.type);
        }
      }
      if (scoped) Declare(v.name, ScopedName::Kind::kVariable, static_cast<uint32_t>(out->size()));
      out->push_back(std::move(v));
      if (!Accept(',')) break;
    }
    return Expect(';');
  }

  Status ParseInitValue(std::vector<InitItem>* items) {
    InitItem item;
    if (Peek().Is('{')) return ParseInitializer(items);
    bool negative = Accept('-');
    const Token& t = Peek();
    if (t.kind == TokenKind::kInteger || t.kind == TokenKind::kFloat32 ||
        t.kind == TokenKind::kFloat64) {
      Next();
      item.number_kind = t.kind;
      item.bits = t.integer;
      if (negative) {
        if (t.kind == TokenKind::kInteger)
          item.bits = ~item.bits + 1;
        else if (t.kind == TokenKind::kFloat32)
          item.bits ^= 0x80000000u;
        else
          item.bits ^= 0x8000000000000000ull;
      }
      items->push_back(item);
      return Status::Ok();
    }
    if (t.kind == TokenKind::kIdentifier) {
      std::string name(Next().text);
      if ((name == "generic" || name == "mask") && Accept('(')) {
        if (Status s = ExpectIdentifier(&name); !s.ok()) return s;
        if (Status s = Expect(')'); !s.ok()) return s;
      }
      item.is_symbol = true;
      item.symbol = name;
      if (Peek().Is('+') && Peek(1).kind == TokenKind::kInteger) {
        Next();
        item.addend = static_cast<int64_t>(Next().integer);
      }
      items->push_back(item);
      return Status::Ok();
    }
    return Error("bad initializer");
  }

  Status ParseInitializer(std::vector<InitItem>* items) {
    if (!Accept('{')) return ParseInitValue(items);
    if (Accept('}')) return Status::Ok();
    for (;;) {
      if (Status s = ParseInitValue(items); !s.ok()) return s;
      if (Accept('}')) return Status::Ok();
      if (Status s = Expect(','); !s.ok()) return s;
    }
  }

  Status ParseParam(Param* p) {
    if (!Peek().Is(".param") && !Peek().Is(".reg")) {
      return Error("expected .param but found '" + std::string(Peek().text) + "'");
    }
    if (Peek().Is(".reg")) return Error(".reg parameters are not supported");
    Next();
    p->align = 0;
    while (Peek().kind == TokenKind::kIdentifier && Peek().text[0] == '.') {
      std::string_view a = Next().text;
      if (a == ".align") {
        uint64_t v;
        if (Status s = ExpectUnsigned(&v); !s.ok()) return s;
        p->align = static_cast<uint32_t>(v);
      } else if (a == ".ptr" || a == ".global" || a == ".shared" || a == ".const" ||
                 a == ".local") {
      } else {
        Type type = TypeFromName(a.substr(1));
        if (type == Type::kNone) return Error("unsupported parameter attribute");
        p->type = type;
      }
    }
    if (Status s = ExpectIdentifier(&p->name); !s.ok()) return s;
    uint64_t count = 1;
    while (Accept('[')) {
      uint64_t dim;
      if (Status s = ExpectUnsigned(&dim); !s.ok()) return s;
      if (dim > (1u << 20)) return Error("parameter too large");
      count *= dim;
      if (Status s = Expect(']'); !s.ok()) return s;
    }
    if (p->type == Type::kPred || p->type == Type::kNone) return Error("bad parameter type");
    p->size = static_cast<uint32_t>(count * TypeSize(p->type));
    if (p->align == 0) p->align = TypeSize(p->type);
    return Status::Ok();
  }

  Status ParseParamList(std::vector<Param>* params) {
    if (Status s = Expect('('); !s.ok()) return s;
    if (Accept(')')) return Status::Ok();
    for (;;) {
      Param p;
      if (Status s = ParseParam(&p); !s.ok()) return s;
      params->push_back(std::move(p));
      if (Accept(')')) return Status::Ok();
      if (Status s = Expect(','); !s.ok()) return s;
    }
  }

  Status ParseFunction() {
    Function f;
    f.is_entry = Next().Is(".entry");
    f.line = Peek().line;
    if (!f.is_entry && Peek().Is('(')) {
      if (Status s = ParseParamList(&f.returns); !s.ok()) return s;
    }
    if (Status s = ExpectIdentifier(&f.name); !s.ok()) return s;
    if (Peek().Is('(')) {
      if (Status s = ParseParamList(&f.params); !s.ok()) return s;
    }
    // Performance directives and attributes between the signature and the body.
    while (Peek().kind == TokenKind::kIdentifier) {
      std::string_view d = Next().text;
      if (d == ".maxntid" || d == ".reqntid") {
        uint64_t product = 1;
        do {
          uint64_t v;
          if (Status s = ExpectUnsigned(&v); !s.ok()) return s;
          product *= v;
        } while (Accept(','));
        f.max_threads = static_cast<uint32_t>(std::min<uint64_t>(product, 1u << 20));
      } else if (d == ".reqnctapercluster") {
        // x{, y{, z}}: the cluster shape the kernel must be launched with.
        int i = 0;
        do {
          uint64_t v;
          if (Status s = ExpectUnsigned(&v); !s.ok()) return s;
          if (i >= 3 || v == 0 || v > 1024) return Error("bad .reqnctapercluster");
          f.cluster_dims[i++] = static_cast<uint32_t>(v);
        } while (Accept(','));
        for (; i < 3; ++i) f.cluster_dims[i] = 1;
      } else if (d == ".maxclusterrank") {
        uint64_t v;
        if (Status s = ExpectUnsigned(&v); !s.ok()) return s;
        f.max_cluster_rank = static_cast<uint32_t>(std::min<uint64_t>(v, 1u << 20));
      } else if (d == ".explicitcluster") {
        f.explicit_cluster = true;
      } else if (d == ".noreturn") {
      } else if (d == ".pragma") {
        if (Status s = SkipPast(';'); !s.ok()) return s;
      } else {
        // .minnctapersm N, .maxnreg N, .maxnctapersm N ...
        while (Peek().kind == TokenKind::kInteger || Peek().Is(',')) Next();
      }
    }
    if (Accept(';')) {
      AddFunction(std::move(f));
      return Status::Ok();
    }
    if (!Peek().Is('{')) return Error("expected function body");
    f.has_body = true;
    function_ = &f;
    scopes_.clear();
    Status s = ParseBody();
    function_ = nullptr;
    scopes_.clear();
    if (!s.ok()) return s;
    AddFunction(std::move(f));
    return Status::Ok();
  }

  void AddFunction(Function f) {
    for (Function& g : module_->functions) {
      if (g.name == f.name) {
        if (f.has_body) g = std::move(f);
        return;
      }
    }
    module_->functions.push_back(std::move(f));
  }

  void Declare(const std::string& name, ScopedName::Kind kind, uint32_t index) {
    scopes_.back()[name] = ScopedName{kind, index};
  }

  const ScopedName* Lookup(std::string_view name) const {
    std::string key(name);
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(key);
      if (found != it->end()) return &found->second;
    }
    return nullptr;
  }

  Status DeclareRegister(const std::string& name, Type type) {
    if (type == Type::kPred) {
      Declare(name, ScopedName::Kind::kPredicate, function_->num_predicates++);
    } else {
      Declare(name, ScopedName::Kind::kRegister,
              static_cast<uint32_t>(function_->reg_types.size()));
      function_->reg_types.push_back(type);
    }
    if (function_->reg_types.size() > (1u << 20) || function_->num_predicates > (1u << 16)) {
      return Error("too many registers");
    }
    return Status::Ok();
  }

  Status ParseRegisterDecl() {
    Next();  // .reg
    Type type = Type::kNone;
    uint32_t vector = 1;
    while (Peek().kind == TokenKind::kIdentifier && Peek().text[0] == '.') {
      std::string_view a = Next().text;
      if (a == ".v2" || a == ".v4") {
        vector = static_cast<uint32_t>(a[2] - '0');
      } else if (a == ".align") {
        Next();
      } else {
        type = TypeFromName(a.substr(1));
        if (type == Type::kNone) return Error("bad register type '" + std::string(a) + "'");
      }
    }
    if (vector != 1) return Error("vector registers are not supported");
    for (;;) {
      std::string name;
      if (Status s = ExpectIdentifier(&name); !s.ok()) return s;
      if (Accept('<')) {
        uint64_t count;
        if (Status s = ExpectUnsigned(&count); !s.ok()) return s;
        if (Status s = Expect('>'); !s.ok()) return s;
        if (count > (1u << 20)) return Error("register range too large");
        for (uint64_t i = 0; i < count; ++i) {
          if (Status s = DeclareRegister(name + std::to_string(i), type); !s.ok()) return s;
        }
      } else {
        if (Status s = DeclareRegister(name, type); !s.ok()) return s;
      }
      if (!Accept(',')) break;
    }
    return Expect(';');
  }

  Status ParseBody() {
    if (Status s = Expect('{'); !s.ok()) return s;
    scopes_.emplace_back();
    // Parameters are visible by name in the body but are resolved by the decoder.
    while (!scopes_.empty()) {
      const Token& t = Peek();
      if (t.kind == TokenKind::kEnd) return Error("unterminated function body");
      if (t.Is('{')) {
        Next();
        scopes_.emplace_back();
        continue;
      }
      if (t.Is('}')) {
        Next();
        scopes_.pop_back();
        continue;
      }
      if (t.Is(';')) {
        Next();
        continue;
      }
      if (t.kind == TokenKind::kIdentifier && Peek(1).Is(':')) {
        std::string label(t.text);
        Next();
        Next();
        if (Peek().Is(".callprototype")) {
          if (Status s = SkipPast(';'); !s.ok()) return s;
          continue;
        }
        if (Peek().Is(".branchtargets")) {
          if (Status s = ParseBranchTargets(label); !s.ok()) return s;
          continue;
        }
        function_->labels[label] = static_cast<uint32_t>(function_->insns.size());
        continue;
      }
      if (t.kind == TokenKind::kIdentifier && t.text[0] == '.') {
        if (t.Is(".reg")) {
          if (Status s = ParseRegisterDecl(); !s.ok()) return s;
          continue;
        }
        if (t.Is(".loc") || t.Is(".file")) {
          SkipLine();
          continue;
        }
        if (t.Is(".pragma")) {
          if (Status s = SkipPast(';'); !s.ok()) return s;
          continue;
        }
        Space space;
        if (ParseSpace(t.text, &space)) {
          Next();
          if (Status s = ParseVariables(space, false, &function_->vars, /*scoped=*/true); !s.ok()) {
            return s;
          }
          continue;
        }
        return Error("unsupported directive '" + std::string(t.text) + "' in function body");
      }
      if (Status s = ParseInstruction(); !s.ok()) return s;
    }
    return Status::Ok();
  }

  // `.branchtargets L1, L2, ...;` after `name:` (the label is consumed): brx.idx's list `name`.
  Status ParseBranchTargets(const std::string& name) {
    Next();  // .branchtargets
    std::vector<std::string> targets;
    for (;;) {
      const Token& t = Peek();
      if (t.kind != TokenKind::kIdentifier || t.text[0] == '.') {
        return Error("expected a label in .branchtargets");
      }
      targets.emplace_back(t.text);
      Next();
      if (!Accept(',')) break;
    }
    if (targets.size() > (1u << 16)) return Error(".branchtargets list too long");
    if (!function_->branch_target_lists.emplace(name, std::move(targets)).second) {
      return Error("branch target list '" + name + "' declared twice");
    }
    return Expect(';');
  }

  Status ParseInstruction() {
    Instruction insn;
    insn.line = Peek().line;
    if (Accept('@')) {
      bool negated = Accept('!');
      std::string name;
      if (Status s = ExpectIdentifier(&name); !s.ok()) return s;
      const ScopedName* n = Lookup(name);
      if (n == nullptr || n->kind != ScopedName::Kind::kPredicate) {
        return Error("guard '" + name + "' is not a predicate register");
      }
      insn.guard = static_cast<int32_t>(n->index);
      insn.guard_negated = negated;
    }
    if (Status s = ExpectIdentifier(&insn.opcode); !s.ok()) return s;
    if (!Peek().Is(';')) {
      for (;;) {
        Operand op;
        if (Status s = ParseOperand(&op); !s.ok()) return s;
        insn.operands.push_back(std::move(op));
        if (!Accept(',')) break;
      }
    }
    if (Status s = Expect(';'); !s.ok()) return s;
    function_->insns.push_back(std::move(insn));
    return Status::Ok();
  }

  Status ParseImmediate(Operand* op) {
    bool negative = Accept('-');
    const Token& t = Peek();
    if (t.kind != TokenKind::kInteger && t.kind != TokenKind::kFloat32 &&
        t.kind != TokenKind::kFloat64) {
      return Error("expected a number but found '" + std::string(t.text) + "'");
    }
    Next();
    op->kind = Operand::Kind::kImmediate;
    op->imm_kind = t.kind;
    op->imm_bits = t.integer;
    if (negative) {
      if (t.kind == TokenKind::kInteger)
        op->imm_bits = ~op->imm_bits + 1;
      else if (t.kind == TokenKind::kFloat32)
        op->imm_bits ^= 0x80000000u;
      else
        op->imm_bits ^= 0x8000000000000000ull;
    }
    return Status::Ok();
  }

  // A name in operand position: register, predicate, body variable, special register or a
  // module-level symbol / label / function (left for the decoder).
  Status ResolveName(std::string_view name, Operand* op) {
    if (name == "_") {
      op->kind = Operand::Kind::kSink;
      return Status::Ok();
    }
    if (const ScopedName* n = Lookup(name)) {
      switch (n->kind) {
        case ScopedName::Kind::kRegister:
          op->kind = Operand::Kind::kRegister;
          op->reg = n->index;
          return Status::Ok();
        case ScopedName::Kind::kPredicate:
          op->kind = Operand::Kind::kPredicate;
          op->reg = n->index;
          return Status::Ok();
        case ScopedName::Kind::kVariable:
          op->kind = Operand::Kind::kSymbol;
          op->var = static_cast<int32_t>(n->index);
          op->name = std::string(name);
          return Status::Ok();
      }
    }
    if (name[0] == '%') {
      op->kind = Operand::Kind::kSpecial;
      op->name = std::string(name);
      return Status::Ok();
    }
    op->kind = Operand::Kind::kSymbol;
    op->name = std::string(name);
    return Status::Ok();
  }

  Status ParseOperand(Operand* op) {
    const Token& t = Peek();
    if (t.Is('{') || t.Is('(')) {
      const char close = t.Is('{') ? '}' : ')';
      op->kind = t.Is('{') ? Operand::Kind::kVector : Operand::Kind::kList;
      Next();
      if (Accept(close)) return Status::Ok();
      for (;;) {
        Operand e;
        if (Status s = ParseOperand(&e); !s.ok()) return s;
        op->elems.push_back(std::move(e));
        if (Accept(close)) return Status::Ok();
        if (Status s = Expect(','); !s.ok()) return s;
      }
    }
    if (t.Is('[')) {
      Next();
      op->kind = Operand::Kind::kAddress;
      if (Peek().kind == TokenKind::kIdentifier) {
        Operand base;
        if (Status s = ResolveName(Next().text, &base); !s.ok()) return s;
        if (base.kind == Operand::Kind::kRegister) {
          op->base_kind = Operand::BaseKind::kRegister;
          op->reg = base.reg;
        } else if (base.kind == Operand::Kind::kSymbol) {
          op->base_kind = Operand::BaseKind::kSymbol;
          op->name = base.name;
          op->var = base.var;
        } else {
          return Error("bad address base");
        }
        if (Peek().Is('+') || Peek().Is('-')) {
          const bool minus = Next().Is('-');
          Operand off;
          if (Status s = ParseImmediate(&off); !s.ok()) return s;
          if (off.imm_kind != TokenKind::kInteger) return Error("bad address offset");
          op->offset = static_cast<int64_t>(off.imm_bits);
          if (minus) op->offset = -op->offset;
        }
      } else {
        Operand abs;
        if (Status s = ParseImmediate(&abs); !s.ok()) return s;
        if (abs.imm_kind != TokenKind::kInteger) return Error("bad absolute address");
        op->offset = static_cast<int64_t>(abs.imm_bits);
      }
      // Texture and surface operands: [handle, {coordinates}] (or [tex, sampler, {...}]).
      while (Accept(',')) {
        Operand e;
        if (Status s = ParseOperand(&e); !s.ok()) return s;
        op->elems.push_back(std::move(e));
      }
      return Expect(']');
    }
    if (t.Is('!')) {
      Next();
      std::string name;
      if (Status s = ExpectIdentifier(&name); !s.ok()) return s;
      if (Status s = ResolveName(name, op); !s.ok()) return s;
      if (op->kind != Operand::Kind::kPredicate) return Error("'!' applies to predicates only");
      op->negated = true;
      return Status::Ok();
    }
    if (t.kind == TokenKind::kIdentifier) {
      std::string_view name = Next().text;
      if (Status s = ResolveName(name, op); !s.ok()) return s;
      if ((op->kind == Operand::Kind::kRegister || op->kind == Operand::Kind::kPredicate) &&
          Peek().Is('|')) {
        Next();
        std::string pname;
        if (Status s = ExpectIdentifier(&pname); !s.ok()) return s;
        const ScopedName* n = Lookup(pname);
        if (n == nullptr || n->kind != ScopedName::Kind::kPredicate) {
          return Error("expected a predicate after '|'");
        }
        op->pred_out = static_cast<int32_t>(n->index);
      } else if (op->kind == Operand::Kind::kSymbol && Peek().Is('+') &&
                 Peek(1).kind == TokenKind::kInteger) {
        Next();
        op->offset = static_cast<int64_t>(Next().integer);
      }
      return Status::Ok();
    }
    return ParseImmediate(op);
  }

  const std::vector<Token>& toks_;
  size_t pos_ = 0;
  Module* module_;
  Function* function_ = nullptr;
  std::vector<std::unordered_map<std::string, ScopedName>> scopes_;
};

}  // namespace

rgpu::Status ParseModule(std::string_view text, Module* module) {
  *module = Module();
  std::vector<Token> tokens;
  if (rgpu::Status s = Tokenize(text, &tokens); !s.ok()) return s;
  Parser parser(tokens, module);
  return parser.Run();
}

}  // namespace softgpu::ptx
