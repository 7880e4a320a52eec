// Op: the numeric id of each forwarded operation, and its static description, generated from
// proto/calls.def. Ids are positions in calls.def starting at 1; appending keeps old ids stable.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rgpu {

enum class Op : uint32_t {
  kInvalid = 0,
#define RGPU_OP(name, nargs, args, nres, res, in, out, mode) k##name,
#include "proto/calls.def"
#undef RGPU_OP
  kCount
};

enum class PayloadKind { kNone, kData, kImage, kName, kParams };
enum class CallMode { kSync, kAsync };

struct OpInfo {
  const char* name;
  int arg_count;
  const char* arg_names;
  int result_count;  // minimum number of Reply.values on success
  const char* result_names;
  PayloadKind payload_in;
  PayloadKind payload_out;
  CallMode mode;
};

// The description of `op`, or nullptr if `op` is not a known operation.
const OpInfo* FindOp(uint32_t op);

}  // namespace rgpu
