// The typed form of every forwarded operation, generated from proto/calls.def: for each row a
// struct `calls::Name` with
//   kOp, kMode, kContext, kArgCount     the operation's id and static description;
//   Args, Results                       its fields, with the types their kinds give
//                                       (proto/call_kinds.h);
// and the wire encoding both sides use:
//   EncodeArgs(const Args&, uint64_t*)        -> the Call.args values (kArgCount of them)
//   DecodeArgs(const uint64_t*, Args*)        false when a value is not of its field's kind
//   EncodeResults(const Results&, Reply*)     appends the Reply.values
//   DecodeResults(const uint64_t*, n, Results*)  false when there are too few or too many
// Handle fields stay session-local ids here; the server resolves them (server/call_dispatch.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

#include "proto/call_kinds.h"
#include "proto/ops.h"
#include "proto/rgpu.pb.h"

namespace rgpu::calls {

// The structs.
#define RGPU_ARG(kind, name) Kind##kind::Wire name{};
#define RGPU_RES(kind, name) Kind##kind::Wire name{};
#define RGPU_RES_LIST(name) std::vector<uint64_t> name;
#define RGPU_CALL(Name, mode, context, in, out, args, results, checks) \
  struct Name {                                                        \
    static constexpr Op kOp = Op::k##Name;                             \
    static constexpr CallMode kMode = CallMode::mode;                  \
    static constexpr ContextUse kContext = ContextUse::context;        \
    struct Args {                                                      \
      args                                                             \
    };                                                                 \
    struct Results {                                                   \
      results                                                          \
    };                                                                 \
  };
#include "proto/calls.def"
#undef RGPU_CALL
#undef RGPU_RES_LIST
#undef RGPU_RES
#undef RGPU_ARG

// Argument counts.
#define RGPU_ARG(kind, name) +1
#define RGPU_CALL(Name, mode, context, in, out, args, results, checks) \
  inline constexpr size_t ArgCount(const Name::Args*) { return 0 args; }
#include "proto/calls.def"
#undef RGPU_CALL
#undef RGPU_ARG

// The most arguments any operation has.
#define RGPU_CALL(Name, mode, context, in, out, args, results, checks) \
  , ArgCount(static_cast<const Name::Args*>(nullptr))
inline constexpr size_t kMaxArgCount = std::max({size_t{0}
#include "proto/calls.def"
});
#undef RGPU_CALL

// Arguments to and from Call.args.
#define RGPU_ARG(kind, name) out[n++] = Kind##kind::Encode(a.name);
#define RGPU_CALL(Name, mode, context, in, out_kind, args, results, checks) \
  inline size_t EncodeArgs(const Name::Args& a, uint64_t* out) {            \
    size_t n = 0;                                                           \
    (void)a;                                                                \
    (void)out;                                                              \
    args return n;                                                          \
  }
#include "proto/calls.def"
#undef RGPU_CALL
#undef RGPU_ARG

#define RGPU_ARG(kind, name) \
  if (!Kind##kind::Decode(raw[n++], &a->name)) return false;
#define RGPU_CALL(Name, mode, context, in, out, args, results, checks) \
  inline bool DecodeArgs(const uint64_t* raw, Name::Args* a) {         \
    size_t n = 0;                                                      \
    (void)raw;                                                         \
    (void)a;                                                           \
    (void)n;                                                           \
    args return true;                                                  \
  }
#include "proto/calls.def"
#undef RGPU_CALL
#undef RGPU_ARG

// Results to and from Reply.values.
#define RGPU_RES(kind, name) reply->add_values(Kind##kind::Encode(r.name));
#define RGPU_RES_LIST(name) \
  for (uint64_t v : r.name) reply->add_values(v);
#define RGPU_CALL(Name, mode, context, in, out, args, results, checks)    \
  inline void EncodeResults(const Name::Results& r, wire::Reply* reply) { \
    (void)r;                                                              \
    (void)reply;                                                          \
    results                                                               \
  }
#include "proto/calls.def"
#undef RGPU_CALL
#undef RGPU_RES_LIST
#undef RGPU_RES

#define RGPU_RES(kind, name) \
  if (n >= count || !Kind##kind::Decode(values[n++], &r->name)) return false;
#define RGPU_RES_LIST(name)                   \
  r->name.assign(values + n, values + count); \
  n = count;
#define RGPU_CALL(Name, mode, context, in, out, args, results, checks)                \
  inline bool DecodeResults(const uint64_t* values, size_t count, Name::Results* r) { \
    size_t n = 0;                                                                     \
    (void)values;                                                                     \
    (void)r;                                                                          \
    results return n == count;                                                        \
  }
#include "proto/calls.def"
#undef RGPU_CALL
#undef RGPU_RES_LIST
#undef RGPU_RES

// How each field routes on a client with several servers (Route, proto/call_kinds.h): the kinds
// of an operation's arguments and results in wire order (a result list is not described).
struct Routes {
  const Route* args = nullptr;
  size_t arg_count = 0;
  const Route* results = nullptr;
  size_t result_count = 0;
};
namespace routes_detail {
#define RGPU_ARG(kind, name) Kind##kind::kRoute,
#define RGPU_RES(kind, name) Kind##kind::kRoute,
#define RGPU_RES_LIST(name)
#define RGPU_CALL(Name, mode, context, in, out, args, results, checks) \
  inline constexpr Route k##Name##Args[] = {Route::kNone, args};       \
  inline constexpr Route k##Name##Results[] = {Route::kNone, results};
#include "proto/calls.def"
#undef RGPU_CALL
#undef RGPU_RES_LIST
#undef RGPU_RES
#undef RGPU_ARG
}  // namespace routes_detail

// The routes of `op` (all empty for an unknown op).
inline Routes RoutesOf(Op op) {
  switch (op) {
#define RGPU_CALL(Name, mode, context, in, out, args, results, checks)                     \
  case Op::k##Name:                                                                        \
    return {routes_detail::k##Name##Args + 1, std::size(routes_detail::k##Name##Args) - 1, \
            routes_detail::k##Name##Results + 1, std::size(routes_detail::k##Name##Results) - 1};
#include "proto/calls.def"
#undef RGPU_CALL
    default:
      return {};
  }
}

}  // namespace rgpu::calls
