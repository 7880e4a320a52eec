// Op: the numeric id of each forwarded operation, and its static description, generated from
// proto/calls.def. Ids are positions in calls.def starting at 1; appending keeps old ids stable.
// The typed form of each operation is in proto/calls.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rgpu {

enum class Op : uint32_t {
  kInvalid = 0,
#define RGPU_CALL(name, mode, context, in, out, args, results, checks) k##name,
#include "proto/calls.def"
#undef RGPU_CALL
  kCount
};

enum class PayloadKind { kNone, kData, kImage, kName, kParams };
enum class CallMode { kSync, kAsync };
enum class ContextUse { kInContext, kNoContext };

struct OpInfo {
  const char* name;
  int arg_count;
  const char* arg_names;  // "name (Kind), ..."
  int result_count;       // Reply.values on success (at least, with has_result_list)
  bool has_result_list;
  const char* result_names;
  PayloadKind payload_in;
  PayloadKind payload_out;
  CallMode mode;
  ContextUse context;
  bool moves_memory;  // a copy or a memset (Memcpy*, Memset*): metered as memory time
};

// The most payload one Batch message carries, its calls' together (rgpu.proto, Batch): the client
// sends a call with a larger payload in a message of its own, and the server refuses a larger
// batch without reading its payload.
constexpr size_t kMaxBatchPayloadBytes = size_t{1} << 20;

// The description of `op`, or nullptr if `op` is not a known operation.
const OpInfo* FindOp(uint32_t op);

}  // namespace rgpu
