// The variables a module image defines in device memory (the global and constant state spaces),
// by name, read from its PTX text or its cubins' symbol tables. A server that checkpoints a
// module on a backend that cannot list them itself (NVIDIA's driver, whose cuModuleGetGlobal
// takes a name) finds each one's address and size with these names (docs/migration.md).
// Every parser here is bounds-checked like common/fatbin.h's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace rgpu::fatbin {

struct ModuleVariable {
  std::string name;       // as cuModuleGetGlobal takes it (mangled where the source was C++)
  bool constant = false;  // constant state space: kernels cannot write it
};

// The variables that `size` bytes at `data` define: a cubin ELF file (its STT_OBJECT symbols in
// .nv.global* and .nv.constant* sections other than bank 0, which holds kernel parameters), PTX
// text (its module-scope .global and .const declarations that are not .extern; no NUL needed),
// or a container (the union over its entries, each name once). The caller has checked the image
// (CheckImage); a wrapper is refused. Names come in the order first seen. Malformed input is an
// error, never a partial list.
Status ListModuleVariables(const void* data, size_t size, std::vector<ModuleVariable>* out,
                           uint64_t max_expanded_bytes = UINT64_MAX);

}  // namespace rgpu::fatbin
