// Parser from PTX text to the syntax tree in ptx_ast.h.
#pragma once

#include <string_view>

#include "common/status.h"
#include "softgpu/ptx_ast.h"

namespace softgpu::ptx {

// Parses a whole PTX module. Errors name the offending line. The module keeps no references into
// `text`.
rgpu::Status ParseModule(std::string_view text, Module* module);

}  // namespace softgpu::ptx
