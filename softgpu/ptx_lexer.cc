#include "softgpu/ptx_lexer.h"

#include <cstdlib>
#include <cstring>

namespace softgpu::ptx {
namespace {

bool IsIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c == '%' ||
         c == '.';
}

bool IsIdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$' || c == '.';
}

bool IsHexDigit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

}  // namespace

rgpu::Status Tokenize(std::string_view src, std::vector<Token>* tokens) {
  tokens->clear();
  uint32_t line = 1;
  size_t i = 0;
  const size_t n = src.size();
  auto error = [&](const std::string& what) {
    return rgpu::InvalidArgument("PTX line " + std::to_string(line) + ": " + what);
  };
  while (i < n) {
    const char c = src[i];
    if (c == '\n') {
      ++line;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ++i;
      continue;
    }
    if (c == '\0') break;  // PTX images handed over as C strings may carry their terminator
    if (c == '/' && i + 1 < n && src[i + 1] == '/') {
      while (i < n && src[i] != '\n') ++i;
      continue;
    }
    if (c == '/' && i + 1 < n && src[i + 1] == '*') {
      i += 2;
      while (i + 1 < n && !(src[i] == '*' && src[i + 1] == '/')) {
        if (src[i] == '\n') ++line;
        ++i;
      }
      if (i + 1 >= n) return error("unterminated comment");
      i += 2;
      continue;
    }
    Token t;
    t.line = line;
    const size_t start = i;
    if (IsIdentStart(c)) {
      ++i;
      while (i < n) {
        if (IsIdentChar(src[i])) {
          ++i;
        } else if (src[i] == ':' && i + 1 < n && src[i + 1] == ':') {
          i += 2;  // cache-hint qualifiers such as ".L2::cache_hint"
        } else {
          break;
        }
      }
      t.kind = TokenKind::kIdentifier;
      t.text = src.substr(start, i - start);
      if (c == '.') {
        // Directives may be written run together (".reg.b32"): one token per dotted part.
        std::string_view rest = t.text;
        size_t next;
        while ((next = rest.find('.', 1)) != std::string_view::npos) {
          Token part = t;
          part.text = rest.substr(0, next);
          tokens->push_back(part);
          rest = rest.substr(next);
        }
        t.text = rest;
      }
    } else if (c >= '0' && c <= '9') {
      if (c == '0' && i + 1 < n &&
          (src[i + 1] == 'f' || src[i + 1] == 'F' || src[i + 1] == 'd' || src[i + 1] == 'D')) {
        const bool is_double = src[i + 1] == 'd' || src[i + 1] == 'D';
        const size_t digits = is_double ? 16 : 8;
        i += 2;
        uint64_t bits = 0;
        for (size_t k = 0; k < digits; ++k, ++i) {
          if (i >= n || !IsHexDigit(src[i])) return error("malformed floating-point literal");
          bits = (bits << 4) | static_cast<uint64_t>(HexValue(src[i]));
        }
        t.kind = is_double ? TokenKind::kFloat64 : TokenKind::kFloat32;
        t.integer = bits;
      } else if (c == '0' && i + 1 < n && (src[i + 1] == 'x' || src[i + 1] == 'X')) {
        i += 2;
        uint64_t v = 0;
        if (i >= n || !IsHexDigit(src[i])) return error("malformed hex literal");
        while (i < n && IsHexDigit(src[i]))
          v = (v << 4) | static_cast<uint64_t>(HexValue(src[i++]));
        t.kind = TokenKind::kInteger;
        t.integer = v;
      } else if (c == '0' && i + 1 < n && (src[i + 1] == 'b' || src[i + 1] == 'B')) {
        i += 2;
        uint64_t v = 0;
        while (i < n && (src[i] == '0' || src[i] == '1')) v = (v << 1) | (src[i++] - '0');
        t.kind = TokenKind::kInteger;
        t.integer = v;
      } else {
        size_t j = i;
        while (j < n && src[j] >= '0' && src[j] <= '9') ++j;
        const bool is_float = j < n && (src[j] == '.' || src[j] == 'e' || src[j] == 'E');
        if (is_float) {
          std::string literal(src.substr(i, n - i > 64 ? 64 : n - i));
          char* end = nullptr;
          double d = strtod(literal.c_str(), &end);
          i += static_cast<size_t>(end - literal.c_str());
          uint64_t bits;
          memcpy(&bits, &d, sizeof bits);
          t.kind = TokenKind::kFloat64;
          t.integer = bits;
        } else {
          uint64_t v = 0;
          const bool octal = c == '0' && j - i > 1;
          for (size_t k = i; k < j; ++k) {
            const uint64_t digit = static_cast<uint64_t>(src[k] - '0');
            if (octal && digit > 7) return error("malformed octal literal");
            v = octal ? (v << 3) | digit : v * 10 + digit;
          }
          i = j;
          t.kind = TokenKind::kInteger;
          t.integer = v;
        }
      }
      if (i < n && (src[i] == 'U' || src[i] == 'u')) ++i;  // unsigned suffix
      t.text = src.substr(start, i - start);
    } else if (c == '"') {
      ++i;
      while (i < n && src[i] != '"') {
        if (src[i] == '\n') ++line;
        ++i;
      }
      if (i >= n) return error("unterminated string");
      t.kind = TokenKind::kString;
      t.text = src.substr(start + 1, i - start - 1);
      ++i;
    } else if (strchr(",;:[]{}()+-<>@!|=*", c) != nullptr) {
      t.kind = TokenKind::kPunct;
      t.text = src.substr(i, 1);
      ++i;
    } else {
      return error(std::string("unexpected character '") + c + "'");
    }
    tokens->push_back(t);
  }
  Token end;
  end.kind = TokenKind::kEnd;
  end.line = line;
  tokens->push_back(end);
  return rgpu::Status::Ok();
}

}  // namespace softgpu::ptx
