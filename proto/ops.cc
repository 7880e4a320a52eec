#include "proto/ops.h"

namespace rgpu {
namespace {

using enum PayloadKind;
using enum CallMode;

constexpr OpInfo kOps[] = {
    {"Invalid", 0, "", 0, "", kNone, kNone, kSync},
#define RGPU_OP(name, nargs, args, nres, res, in, out, mode) \
  {#name, nargs, args, nres, res, in, out, mode},
#include "proto/calls.def"
#undef RGPU_OP
};

}  // namespace

const OpInfo* FindOp(uint32_t op) {
  if (op == 0 || op >= static_cast<uint32_t>(Op::kCount)) return nullptr;
  return &kOps[op];
}

}  // namespace rgpu
