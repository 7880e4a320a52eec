// AMDGPU code objects (ELF64, e_machine EM_AMDGPU = 224): the target and the kernels with their
// explicit arguments, from the NT_AMDGPU_METADATA note (owner "AMDGPU", type 32), a MessagePack
// map whose "amdhsa.kernels" array lists each kernel's ".name", ".symbol" and ".args" (each with
// ".offset", ".size" and ".value_kind"; kinds starting with "hidden_" are filled by the runtime,
// not passed by the program), and whose "amdhsa.target" names the processor.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

namespace rgpu::hipbackend {

struct KernelArgument {
  uint32_t offset = 0;
  uint32_t size = 0;
};

struct KernelInfo {
  std::string name;                       // as the program names it ("vecAdd", mangled if C++)
  std::vector<KernelArgument> arguments;  // explicit ones, in order
  uint32_t kernarg_size = 0;              // the whole kernarg segment, hidden arguments included
};

struct CodeObjectInfo {
  std::string target;  // e.g. "amdgcn-amd-amdhsa--gfx90a:xnack-"
  std::vector<KernelInfo> kernels;

  // The processor alone: "gfx90a" from the target above ("" when the target is unknown).
  std::string Processor() const;
  // The kernel named `name`, or nullptr.
  const KernelInfo* Find(const std::string& name) const;
};

// True when `data` starts like an AMDGPU ELF64 code object.
bool IsAmdgpuElf(const uint8_t* data, size_t size);

// Reads the metadata of the code object `data[0, size)`. Fails with a message in `*error` when
// it is not an AMDGPU ELF, has no metadata note, or the metadata is malformed.
bool ParseCodeObject(const uint8_t* data, size_t size, CodeObjectInfo* out, std::string* error);

}  // namespace rgpu::hipbackend
