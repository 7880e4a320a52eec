// Tokenizer for PTX assembly text. PTX is a line-insensitive, C-like assembly language: comments
// are // and /* */, identifiers may start with '.', '%' or '$' and (for opcodes, directives and
// special registers) contain dots, e.g. "ld.global.v4.f32", ".reg", "%tid.x", "$L__BB0_2".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace softgpu::ptx {

enum class TokenKind : uint8_t {
  kEnd,         // end of input
  kIdentifier,  // names, directives (".reg"), opcodes ("add.s32"), registers ("%r1")
  kInteger,     // decimal, 0x hex, 0b binary or 0-prefixed octal integer; value in `integer`
  kFloat32,     // 0fXXXXXXXX: exact IEEE single bits in `integer`
  kFloat64,     // 0dXXXXXXXXXXXXXXXX or a decimal literal with '.'/exponent: bits in `integer`
  kString,      // "..." (quotes stripped)
  kPunct,       // one of , ; : [ ] { } ( ) + - < > @ ! | = *
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string_view text;  // the source characters (for kString: without the quotes)
  uint64_t integer = 0;   // value of kInteger, or IEEE bits of kFloat32/kFloat64
  uint32_t line = 0;      // 1-based source line
  char punct() const { return kind == TokenKind::kPunct ? text[0] : '\0'; }
  bool Is(char c) const { return kind == TokenKind::kPunct && text[0] == c; }
  bool Is(std::string_view s) const { return kind == TokenKind::kIdentifier && text == s; }
};

// Splits `source` into tokens; the last token is always kEnd. Tokens point into `source`, which
// must outlive them. Returns an error naming the line for characters PTX does not allow.
rgpu::Status Tokenize(std::string_view source, std::vector<Token>* tokens);

}  // namespace softgpu::ptx
