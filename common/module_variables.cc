#include "common/module_variables.h"

#include <cstring>
#include <set>

#include "common/byte_reader.h"
#include "common/fatbin.h"

namespace rgpu::fatbin {
namespace {

using bytes::ReadLe;
using bytes::Within;

constexpr size_t kMaxNameBytes = 4096;

// Adds `name` once.
Status Add(std::string name, bool constant, std::set<std::string>* seen,
           std::vector<ModuleVariable>* out) {
  if (name.empty() || name.size() > kMaxNameBytes) {
    return InvalidArgument("a module variable's name of " + std::to_string(name.size()) + " bytes");
  }
  if (seen->insert(name).second) out->push_back({std::move(name), constant});
  return Status::Ok();
}

// A NUL-terminated string at `offset` of the string table [table, table + size).
bool StringAt(const uint8_t* table, uint64_t size, uint64_t offset, std::string* out) {
  if (offset >= size) return false;
  const void* nul = memchr(table + offset, '\0', size - offset);
  if (nul == nullptr) return false;
  out->assign(reinterpret_cast<const char*>(table + offset),
              static_cast<const uint8_t*>(nul) - (table + offset));
  return true;
}

Status ElfVariables(const uint8_t* elf, uint64_t size, std::set<std::string>* seen,
                    std::vector<ModuleVariable>* out) {
  uint64_t extent = 0;
  if (Status s = ElfExtent(elf, size, &extent); !s.ok()) return s;
  const uint64_t shoff = ReadLe<uint64_t>(elf + 0x28);
  const uint16_t shentsize = ReadLe<uint16_t>(elf + 0x3A);
  const uint16_t shnum = ReadLe<uint16_t>(elf + 0x3C);
  const uint16_t shstrndx = ReadLe<uint16_t>(elf + 0x3E);
  if (shoff == 0 || shnum == 0) return Status::Ok();  // no sections: no variables
  if (shentsize < 64 || shstrndx >= shnum) return InvalidArgument("ELF: malformed section table");
  struct Section {
    uint32_t name, type, link;
    uint64_t offset, size, entsize;
  };
  auto section = [&](uint16_t i) {
    const uint8_t* sh = elf + shoff + uint64_t{i} * shentsize;  // inside: ElfExtent checked
    return Section{ReadLe<uint32_t>(sh),        ReadLe<uint32_t>(sh + 4),
                   ReadLe<uint32_t>(sh + 0x28), ReadLe<uint64_t>(sh + 0x18),
                   ReadLe<uint64_t>(sh + 0x20), ReadLe<uint64_t>(sh + 0x38)};
  };
  constexpr uint32_t kShtSymtab = 2, kShtNobits = 8;
  constexpr uint8_t kSttObject = 1;
  const Section names = section(shstrndx);
  if (names.type == kShtNobits || !Within(names.offset, names.size, size)) {
    return InvalidArgument("ELF: malformed section names");
  }
  for (uint16_t i = 0; i < shnum; ++i) {
    const Section symtab = section(i);
    if (symtab.type != kShtSymtab) continue;
    if (symtab.entsize < 24 || symtab.link >= shnum || !Within(symtab.offset, symtab.size, size)) {
      return InvalidArgument("ELF: malformed symbol table");
    }
    const Section strings = section(static_cast<uint16_t>(symtab.link));
    if (strings.type == kShtNobits || !Within(strings.offset, strings.size, size)) {
      return InvalidArgument("ELF: malformed symbol names");
    }
    for (uint64_t at = 0; at + symtab.entsize <= symtab.size; at += symtab.entsize) {
      const uint8_t* sym = elf + symtab.offset + at;
      const uint8_t info = sym[4];
      const uint16_t shndx = ReadLe<uint16_t>(sym + 6);
      if ((info & 0xf) != kSttObject || shndx == 0 || shndx >= shnum) continue;
      std::string where;
      if (!StringAt(elf + names.offset, names.size, section(shndx).name, &where)) {
        return InvalidArgument("ELF: a section without a name");
      }
      const bool global = where.rfind(".nv.global", 0) == 0;
      const bool constant =
          where.rfind(".nv.constant", 0) == 0 && where.rfind(".nv.constant0", 0) != 0;
      if (!global && !constant) continue;
      std::string name;
      if (!StringAt(elf + strings.offset, strings.size, ReadLe<uint32_t>(sym), &name)) {
        return InvalidArgument("ELF: a symbol without a name");
      }
      if (Status s = Add(std::move(name), constant, seen, out); !s.ok()) return s;
    }
  }
  return Status::Ok();
}

bool IdentifierChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$' || c == '%';
}

// PTX: module-scope statements whose leading directives hold .global or .const (and neither
// .extern nor a function's .entry/.func). The name is the first token after those directives.
Status PtxVariables(const char* text, size_t size, std::set<std::string>* seen,
                    std::vector<ModuleVariable>* out) {
  size_t i = 0;
  int depth = 0;
  // The statement at module scope being read.
  bool leading = true;  // still reading its leading directives
  bool variable = false, constant = false, excluded = false, named = false, initialised = false;
  auto end_statement = [&] {
    leading = true;
    variable = constant = excluded = named = initialised = false;
  };
  auto skip_line = [&] {
    while (i < size && text[i] != '\n') ++i;
  };
  while (i < size) {
    const char c = text[i];
    if (c == '\0') break;  // the text's terminating NUL
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      ++i;
      continue;
    }
    if (c == '/' && i + 1 < size && text[i + 1] == '/') {
      skip_line();
      continue;
    }
    if (c == '/' && i + 1 < size && text[i + 1] == '*') {
      const char* close = nullptr;
      for (size_t j = i + 2; j + 1 < size; ++j) {
        if (text[j] == '*' && text[j + 1] == '/') {
          close = text + j;
          break;
        }
      }
      if (close == nullptr) return InvalidArgument("PTX: an unterminated comment");
      i = static_cast<size_t>(close - text) + 2;
      continue;
    }
    if (c == '"') {
      size_t j = i + 1;
      while (j < size && text[j] != '"' && text[j] != '\n') j += text[j] == '\\' ? 2 : 1;
      if (j >= size || text[j] != '"') return InvalidArgument("PTX: an unterminated string");
      i = j + 1;
      continue;
    }
    if (c == '{') {
      ++depth;
      ++i;
      continue;
    }
    if (c == '}') {
      if (depth == 0) return InvalidArgument("PTX: an unbalanced brace");
      --depth;
      ++i;
      // A function's body or a section's contents end their statement; an initialiser does not.
      if (depth == 0 && !initialised) end_statement();
      continue;
    }
    if (depth > 0) {
      ++i;
      continue;
    }
    if (c == ';') {
      end_statement();
      ++i;
      continue;
    }
    if (c == '=') initialised = true;
    if (c == '.' && leading) {
      size_t j = i + 1;
      while (j < size && IdentifierChar(text[j])) ++j;
      const std::string directive(text + i, j - i);
      i = j;
      if (directive == ".version" || directive == ".target" || directive == ".address_size" ||
          directive == ".file" || directive == ".loc" || directive == ".pragma") {
        skip_line();  // line directives: no ';'
        end_statement();
        continue;
      }
      if (directive == ".global") variable = true;
      if (directive == ".const") variable = constant = true;
      if (directive == ".extern" || directive == ".entry" || directive == ".func" ||
          directive == ".texref" || directive == ".samplerref" || directive == ".surfref") {
        excluded = true;
      }
      continue;
    }
    if (c >= '0' && c <= '9') {  // a number: part of a directive (.align 4) or an initialiser
      while (i < size && (IdentifierChar(text[i]) || text[i] == '.')) ++i;
      continue;
    }
    if (IdentifierChar(c)) {
      size_t j = i;
      while (j < size && IdentifierChar(text[j])) ++j;
      if (leading && variable && !excluded && !named) {
        if (Status s = Add(std::string(text + i, j - i), constant, seen, out); !s.ok()) return s;
        named = true;
      }
      leading = false;
      i = j;
      continue;
    }
    leading = false;  // punctuation: '(' of a function, '[' of an array, '<' ...
    ++i;
  }
  return Status::Ok();
}

}  // namespace

Status ListModuleVariables(const void* data, size_t size, std::vector<ModuleVariable>* out,
                           uint64_t max_expanded_bytes) {
  out->clear();
  std::set<std::string> seen;
  if (size >= 4) {
    uint32_t magic = 0;
    memcpy(&magic, data, sizeof magic);
    if (magic == kWrapperMagic) return InvalidArgument("a wrapper names memory of its process");
    if (magic == kElfMagic) {
      Status s = ElfVariables(static_cast<const uint8_t*>(data), size, &seen, out);
      if (!s.ok()) out->clear();
      return s;
    }
    if (magic == kContainerMagic) {
      std::vector<Entry> entries;
      Status s = ParseContainer(data, size, &entries, max_expanded_bytes);
      for (size_t e = 0; s.ok() && e < entries.size(); ++e) {
        const std::string& p = entries[e].payload;
        s = entries[e].kind == EntryKind::kElf
                ? ElfVariables(reinterpret_cast<const uint8_t*>(p.data()), p.size(), &seen, out)
                : PtxVariables(p.data(), p.size(), &seen, out);
      }
      if (!s.ok()) out->clear();
      return s;
    }
  }
  Status s = PtxVariables(static_cast<const char*>(data), size, &seen, out);
  if (!s.ok()) out->clear();
  return s;
}

}  // namespace rgpu::fatbin
