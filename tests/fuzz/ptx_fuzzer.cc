// libFuzzer target: softgpu's PTX front end (lexer, parser and decoder) on arbitrary text.
// Malformed PTX must give an error, never a crash, a hang or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "softgpu/program.h"
#include "softgpu/ptx_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  softgpu::Program program;
  (void)softgpu::CompilePtx(std::string_view(reinterpret_cast<const char*>(data), size), &program);
  return 0;
}
