// The software GPU's JIT linker: several PTX modules made into one, as the driver's linker makes
// one cubin of several inputs. Visible functions and variables one module defines satisfy the
// `.extern` declarations of the others; internal (non-.visible) names are private to their
// module, renamed where another module uses the same name; a visible name defined twice (unless
// .weak) and an `.extern` that nothing defines (other than the device runtime calls softgpu
// provides: vprintf, malloc, free, __assertfail) are link errors.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace softgpu {

// Links `modules` (PTX texts) into one PTX text in *linked. The error's message says what could
// not be linked ("undefined reference to 'f'", "multiple definition of 'g'", a parse error).
rgpu::Status LinkPtx(const std::vector<std::string>& modules, std::string* linked);

}  // namespace softgpu
