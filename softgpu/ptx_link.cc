#include "softgpu/ptx_link.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string_view>

#include "softgpu/ptx_lexer.h"

namespace softgpu {
namespace {

using ptx::Token;
using ptx::TokenKind;

// One module-scope declaration or definition.
struct Symbol {
  std::string name;
  bool is_function = false;
  bool is_visible = false, is_extern = false, is_weak = false, is_shared = false;
  bool defines = false;       // a function with a body, or a variable that is not .extern
  size_t begin = 0, end = 0;  // its source range (end: one past its ';' or '}')
};

// A text edit: replace [begin, end) of a module's source with `text`.
struct Edit {
  size_t begin = 0, end = 0;
  std::string text;
};

struct ModuleInfo {
  std::vector<Token> tokens;
  std::vector<Symbol> symbols;
  std::vector<Edit> edits;  // the header directives, blanked
  unsigned version_major = 0, version_minor = 0;
  unsigned sm = 0;
  std::string target;
};

size_t Offset(std::string_view source, const Token& t) {
  return static_cast<size_t>(t.text.data() - source.data());
}
size_t EndOffset(std::string_view source, const Token& t) {
  return Offset(source, t) + t.text.size();
}

bool IsName(const Token& t) {
  return t.kind == TokenKind::kIdentifier && !t.text.empty() && t.text[0] != '.' &&
         t.text[0] != '%';
}

// Reads the module-scope structure of one module: its header and its declarations.
rgpu::Status Scan(std::string_view source, size_t index, ModuleInfo* m) {
  if (rgpu::Status s = ptx::Tokenize(source, &m->tokens); !s.ok()) {
    return rgpu::InvalidArgument("input " + std::to_string(index) + ": " + s.message());
  }
  const std::vector<Token>& t = m->tokens;
  size_t i = 0;
  auto fail = [&](const std::string& why) {
    return rgpu::InvalidArgument("input " + std::to_string(index) + ", line " +
                                 std::to_string(t[std::min(i, t.size() - 1)].line) + ": " + why);
  };
  while (t[i].kind != TokenKind::kEnd) {
    const size_t start = i;
    if (t[i].Is(".version") && t[i + 1].kind != TokenKind::kEnd) {
      const std::string v(t[i + 1].text);
      m->version_major = static_cast<unsigned>(atoi(v.c_str()));
      const size_t dot = v.find('.');
      m->version_minor =
          dot == std::string::npos ? 0 : static_cast<unsigned>(atoi(v.c_str() + dot + 1));
      m->edits.push_back({Offset(source, t[i]), EndOffset(source, t[i + 1]), ""});
      i += 2;
      continue;
    }
    if (t[i].Is(".target")) {
      ++i;
      const size_t first = i;
      while (t[i].kind == TokenKind::kIdentifier && t[i + 1].Is(',')) i += 2;
      if (t[i].kind != TokenKind::kIdentifier) return fail("malformed .target");
      for (size_t k = first; k <= i; k += 2) {
        if (t[k].text.substr(0, 3) == "sm_") {
          m->sm = static_cast<unsigned>(atoi(std::string(t[k].text.substr(3)).c_str()));
          m->target = std::string(t[k].text);
        }
      }
      m->edits.push_back({Offset(source, t[start]), EndOffset(source, t[i]), ""});
      ++i;
      continue;
    }
    if (t[i].Is(".address_size")) {
      if (t[i + 1].kind != TokenKind::kInteger || t[i + 1].integer != 64) {
        return fail("only .address_size 64 can be linked");
      }
      m->edits.push_back({Offset(source, t[i]), EndOffset(source, t[i + 1]), ""});
      i += 2;
      continue;
    }
    if (t[i].Is(".file")) {  // .file N "name" [, timestamp, size]
      const uint32_t line = t[i].line;
      while (t[i].kind != TokenKind::kEnd && t[i].line == line) ++i;
      continue;
    }
    // A declaration: up to its ';' at depth 0, or the '}' closing its body.
    Symbol sym;
    while (t[i].Is(".visible") || t[i].Is(".extern") || t[i].Is(".weak") || t[i].Is(".common")) {
      sym.is_visible |= t[i].Is(".visible") || t[i].Is(".common");
      sym.is_extern |= t[i].Is(".extern");
      sym.is_weak |= t[i].Is(".weak");
      ++i;
    }
    if (t[i].Is(".entry") || t[i].Is(".func")) {
      sym.is_function = true;
      const bool entry = t[i].Is(".entry");
      ++i;
      if (!entry && t[i].Is('(')) {  // the return parameters
        int depth = 0;
        do {
          if (t[i].Is('(')) ++depth;
          if (t[i].Is(')')) --depth;
          ++i;
        } while (depth > 0 && t[i].kind != TokenKind::kEnd);
      }
      if (!IsName(t[i])) return fail("a function without a name");
      sym.name = std::string(t[i].text);
    } else {
      sym.is_shared = t[i].Is(".shared");
      for (size_t k = i; t[k].kind != TokenKind::kEnd && !t[k].Is(';') && !t[k].Is('=') &&
                         !t[k].Is('[') && !t[k].Is('{');
           ++k) {
        if (IsName(t[k])) {
          sym.name = std::string(t[k].text);
          break;
        }
      }
      if (sym.name.empty() && !t[i].Is(".pragma") && !t[i].Is(".alias") && !t[i].Is(".section")) {
        return fail("unexpected '" + std::string(t[i].text) + "' at module scope");
      }
    }
    int depth = 0;
    bool body = false;
    while (t[i].kind != TokenKind::kEnd) {
      if (t[i].Is('{')) {
        ++depth;
        body = true;
      } else if (t[i].Is('}')) {
        if (--depth == 0 && sym.is_function) break;
      } else if (t[i].Is(';') && depth == 0) {
        break;
      }
      ++i;
    }
    if (t[i].kind == TokenKind::kEnd) return fail("declaration runs past the end of the module");
    sym.begin = Offset(source, t[start]);
    sym.end = EndOffset(source, t[i]);
    sym.defines = !sym.is_extern && (!sym.is_function || body);
    ++i;
    if (!sym.name.empty()) m->symbols.push_back(std::move(sym));
  }
  return rgpu::Status::Ok();
}

// The device runtime calls softgpu implements itself.
bool Provided(const std::string& name) {
  return name == "vprintf" || name == "malloc" || name == "free" || name == "__assertfail" ||
         name == "cudaGraphSetConditional";
}

}  // namespace

rgpu::Status LinkPtx(const std::vector<std::string>& modules, std::string* linked) {
  if (modules.empty()) return rgpu::InvalidArgument("nothing to link");
  std::vector<ModuleInfo> info(modules.size());
  for (size_t i = 0; i < modules.size(); ++i) {
    if (rgpu::Status s = Scan(modules[i], i, &info[i]); !s.ok()) return s;
  }
  // Who defines what: visible definitions are shared by every module, internal ones are not.
  std::map<std::string, size_t> visible;          // name -> the defining module
  std::map<std::string, std::set<size_t>> named;  // name -> modules with it at module scope
  for (size_t i = 0; i < info.size(); ++i) {
    for (const Symbol& s : info[i].symbols) {
      named[s.name].insert(i);
      if (!s.defines || !(s.is_visible || s.is_weak)) continue;
      auto [it, fresh] = visible.emplace(s.name, i);
      if (!fresh && it->second != i && !s.is_weak) {
        return rgpu::InvalidArgument("multiple definition of '" + s.name + "' (inputs " +
                                     std::to_string(it->second) + " and " + std::to_string(i) +
                                     ")");
      }
    }
  }
  std::set<std::string> shared_declared;  // .extern .shared names already kept once
  for (size_t i = 0; i < info.size(); ++i) {
    ModuleInfo& m = info[i];
    std::set<std::string> internal;  // this module's own names the others also use
    for (const Symbol& s : m.symbols) {
      if (s.defines && !s.is_visible && !s.is_weak && named[s.name].size() > 1) {
        internal.insert(s.name);
      }
    }
    for (const Symbol& s : m.symbols) {
      if (!s.is_extern) continue;
      if (internal.count(s.name) != 0) continue;
      const bool defined = visible.count(s.name) != 0;
      if (s.is_shared) {
        // Dynamic shared memory: one declaration for all of them.
        if (!shared_declared.insert(s.name).second) m.edits.push_back({s.begin, s.end, ""});
      } else if (!defined && !(s.is_function && Provided(s.name))) {
        return rgpu::InvalidArgument("undefined reference to '" + s.name + "' (input " +
                                     std::to_string(i) + ")");
      } else if (!s.is_function && defined) {
        m.edits.push_back({s.begin, s.end, ""});  // the definition declares it
      }
      // An extern function stays a declaration: its definition elsewhere completes it.
    }
    if (!internal.empty()) {
      const std::string suffix = "_rgpu_link" + std::to_string(i);
      for (const Token& t : m.tokens) {
        if (IsName(t) && internal.count(std::string(t.text)) != 0) {
          m.edits.push_back(
              {Offset(modules[i], t), EndOffset(modules[i], t), std::string(t.text) + suffix});
        }
      }
    }
  }
  // One header: the newest PTX ISA version and the highest target of the inputs.
  const ModuleInfo* newest = &info[0];
  unsigned sm = 0;
  std::string target = info[0].target;
  for (const ModuleInfo& m : info) {
    if (m.version_major > newest->version_major ||
        (m.version_major == newest->version_major && m.version_minor > newest->version_minor)) {
      newest = &m;
    }
    if (m.sm > sm) {
      sm = m.sm;
      target = m.target;
    }
  }
  if (target.empty()) return rgpu::InvalidArgument("no input names a .target");
  std::string out = ".version " + std::to_string(newest->version_major) + "." +
                    std::to_string(newest->version_minor) + "\n.target " + target +
                    "\n.address_size 64\n";
  for (size_t i = 0; i < info.size(); ++i) {
    std::vector<Edit>& edits = info[i].edits;
    std::sort(edits.begin(), edits.end(),
              [](const Edit& a, const Edit& b) { return a.begin < b.begin; });
    const std::string& src = modules[i];
    size_t at = 0;
    out += "\n// ---- linked input " + std::to_string(i) + " ----\n";
    for (const Edit& e : edits) {
      if (e.begin < at) continue;  // inside a range already dropped
      out.append(src, at, e.begin - at);
      out += e.text;
      at = e.end;
    }
    out.append(src, at, std::string::npos);
  }
  *linked = std::move(out);
  return rgpu::Status::Ok();
}

}  // namespace softgpu
