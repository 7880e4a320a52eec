// The kinds of field a forwarded call's arguments and results have (proto/calls.def), and how
// each travels on the wire: every field is one uint64 of Call.args or Reply.values. `Wire` is the
// field's type in the typed structs of proto/calls.h; Encode gives its uint64, and Decode checks
// that a received uint64 is one (a U32 fits 32 bits, a Bool is 0 or 1, ...) before anything uses
// it. Handle kinds (Ctx, Module, ...) travel as the session-local ids the server chose; the
// server resolves them (server/call_dispatch.h).
#pragma once

#include <cstdint>

namespace rgpu::calls {

// Ids a client chooses itself for what it creates with a posted call (no round trip): this range,
// which the ids a server chooses never reach (server/handle_table.h).
constexpr uint64_t kFirstClientId = uint64_t{1} << 32;
constexpr uint64_t kClientIdLimit = uint64_t{1} << 40;

// What a field means to a client with several servers (client/server_set.h): which server a call
// goes to and how the field is translated on the way. kCtx, kPool and kGraph are session-local ids
// the client keeps with its server's index in their top bits; kDevice is a device ordinal, the
// program's on the client and the session's on the wire. Every other kind travels unchanged.
enum class Route : uint8_t { kNone, kCtx, kPool, kGraph, kDevice };

// 64-bit values: device addresses, sizes, limits.
struct KindU64 {
  using Wire = uint64_t;
  static constexpr Route kRoute = Route::kNone;
  static uint64_t Encode(uint64_t v) { return v; }
  static bool Decode(uint64_t raw, uint64_t* v) {
    *v = raw;
    return true;
  }
};
struct KindDevPtr : KindU64 {};
struct KindBytes : KindU64 {};

struct KindU32 {
  static constexpr Route kRoute = Route::kNone;
  using Wire = uint32_t;
  static uint64_t Encode(uint32_t v) { return v; }
  static bool Decode(uint64_t raw, uint32_t* v) {
    if (raw > 0xffffffffull) return false;
    *v = static_cast<uint32_t>(raw);
    return true;
  }
};

// Signed 32-bit values, sign-extended to 64 bits.
struct KindI32 {
  static constexpr Route kRoute = Route::kNone;
  using Wire = int32_t;
  static uint64_t Encode(int32_t v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); }
  static bool Decode(uint64_t raw, int32_t* v) {
    const int64_t s = static_cast<int64_t>(raw);
    if (s < INT32_MIN || s > INT32_MAX) return false;
    *v = static_cast<int32_t>(s);
    return true;
  }
};

struct KindBool {
  static constexpr Route kRoute = Route::kNone;
  using Wire = bool;
  static uint64_t Encode(bool v) { return v ? 1 : 0; }
  static bool Decode(uint64_t raw, bool* v) {
    if (raw > 1) return false;
    *v = raw != 0;
    return true;
  }
};

// A device ordinal of the session.
struct KindDevice {
  static constexpr Route kRoute = Route::kDevice;
  using Wire = int;
  static uint64_t Encode(int v) { return static_cast<uint64_t>(v); }
  static bool Decode(uint64_t raw, int* v) {
    if (raw > 0x7fffffffull) return false;
    *v = static_cast<int>(raw);
    return true;
  }
};

// Session-local handle ids (0 is no handle; for Stream, the default stream).
struct KindHandle : KindU64 {};
struct KindCtx : KindHandle {
  static constexpr Route kRoute = Route::kCtx;
};
struct KindModule : KindHandle {};
struct KindFunction : KindHandle {};
struct KindEvent : KindHandle {};
struct KindSessionEvent : KindHandle {};
struct KindStream : KindHandle {};
struct KindOwnStream : KindHandle {};
struct KindPool : KindHandle {
  static constexpr Route kRoute = Route::kPool;
};
struct KindArray : KindHandle {};
struct KindOptArray : KindHandle {};
// Texture and surface objects travel as the backend's own values (kernels receive them).
struct KindTexture : KindHandle {};
struct KindSurface : KindHandle {};
struct KindLink : KindHandle {};
struct KindPhysicalMemory : KindHandle {};
struct KindGraph : KindHandle {
  static constexpr Route kRoute = Route::kGraph;
};
struct KindMipmappedArray : KindHandle {};
struct KindOptMipmappedArray : KindHandle {};

}  // namespace rgpu::calls
