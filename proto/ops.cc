#include "proto/ops.h"

namespace rgpu {
namespace {

using enum PayloadKind;
using enum CallMode;
using enum ContextUse;

// Field counts and names, from the rows' RGPU_ARG / RGPU_RES lists.
#define RGPU_ARG(kind, name) +1
#define RGPU_RES(kind, name) +1
#define RGPU_RES_LIST(name) +0
#define RGPU_CALL(name, mode, context, in, out, args, results, checks) \
  constexpr int k##name##Args = 0 args;                                \
  constexpr int k##name##Results = 0 results;
#include "proto/calls.def"
#undef RGPU_CALL
#undef RGPU_RES_LIST
#undef RGPU_RES
#undef RGPU_ARG

#define RGPU_ARG(kind, name) #name " (" #kind "), "
#define RGPU_RES(kind, name) #name " (" #kind "), "
#define RGPU_RES_LIST(name) #name " (list), "
#define RGPU_CALL(name, mode, context, in, out, args, results, checks) \
  constexpr const char* k##name##ArgNames = "" args;                   \
  constexpr const char* k##name##ResultNames = "" results;
#include "proto/calls.def"
#undef RGPU_CALL
#undef RGPU_RES_LIST
#undef RGPU_RES
#undef RGPU_ARG

#define RGPU_ARG(kind, name)
#define RGPU_RES(kind, name)
#define RGPU_RES_LIST(name) || true
#define RGPU_CALL(name, mode, context, in, out, args, results, checks) \
  constexpr bool k##name##HasList = false results;
#include "proto/calls.def"
#undef RGPU_CALL
#undef RGPU_RES_LIST
#undef RGPU_RES
#undef RGPU_ARG

constexpr bool StartsWith(const char* s, const char* prefix) {
  for (; *prefix != '\0'; ++s, ++prefix) {
    if (*s != *prefix) return false;
  }
  return true;
}

constexpr OpInfo kOps[] = {
    {"Invalid", 0, "", 0, false, "", kNone, kNone, kSync, kNoContext, false},
#define RGPU_CALL(name, mode, context, in, out, args, results, checks) \
  {#name,                                                              \
   k##name##Args,                                                      \
   k##name##ArgNames,                                                  \
   k##name##Results,                                                   \
   k##name##HasList,                                                   \
   k##name##ResultNames,                                               \
   in,                                                                 \
   out,                                                                \
   mode,                                                               \
   context,                                                            \
   StartsWith(#name, "Memcpy") || StartsWith(#name, "Memset")},
#include "proto/calls.def"
#undef RGPU_CALL
};

}  // namespace

const OpInfo* FindOp(uint32_t op) {
  if (op == 0 || op >= static_cast<uint32_t>(Op::kCount)) return nullptr;
  return &kOps[op];
}

}  // namespace rgpu
