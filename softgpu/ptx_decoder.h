// Decoder from the PTX syntax tree to an executable Program: lays out parameters, shared, local
// and global variables, resolves every operand and picks a specialised handler per instruction.
#pragma once

#include "common/status.h"
#include "softgpu/program.h"
#include "softgpu/ptx_ast.h"

namespace softgpu {

// Decodes `module`. Malformed PTX (unknown symbols or labels, bad operands) is an error.
// Instructions that are valid PTX but that the interpreter does not implement do not fail
// decoding: they are listed in Function::unsupported (with their source line) and make a launch
// of any kernel that can reach them fail.
rgpu::Status Decode(const ptx::Module& module, Program* program);

// Parses and decodes PTX text in one step.
rgpu::Status CompilePtx(std::string_view text, Program* program);

}  // namespace softgpu
