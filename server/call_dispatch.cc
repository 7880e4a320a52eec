// The server's side of proto/calls.def, generated: for each operation, Serve<Name> decodes its
// arguments (each checked to be of its kind), resolves its handles to the session's records
// (each checked to belong to the call's context), makes the checks the row lists (ranges of the
// session's memory, payload sizes, all overflow-checked), fetches a payload still waiting in the
// transport (Session::TakePayload), runs Handle<Name> and encodes its results. No handler sees a
// value the table did not vouch for, and no payload is read before its call was checked.
#include <cstring>

#include "common/log.h"
#include "server/checked_size.h"
#include "server/session.h"

namespace rgpu::server {

#define RGPU_ARG(kind, name)                                                       \
  if (CUresult r = Resolve(cs, calls::Kind##kind{}, raw.name, &in.name); r != 0) { \
    if (cs.detail.empty()) cs.detail = "argument " #name " is not the session's";  \
    return r;                                                                      \
  }
#define RGPU_RANGE(ptr, bytes) \
  if (!CheckRange(cs, in.ptr, in.bytes, #ptr)) return CUDA_ERROR_INVALID_VALUE;
#define RGPU_RANGE_IN(ptr, bytes, ctx) \
  if (!CheckRangeIn(cs, in.ctx.id, in.ptr, in.bytes, #ptr)) return CUDA_ERROR_INVALID_VALUE;
#define RGPU_ELEMENTS(ptr, count, size) \
  if (!CheckElements(cs, in.ptr, in.count, in.size, #ptr)) return CUDA_ERROR_INVALID_VALUE;
#define RGPU_PITCHED(ptr, pitch, width, height)                         \
  if (!CheckPitched(cs, in.ptr, in.pitch, in.width, in.height, #ptr)) { \
    return CUDA_ERROR_INVALID_VALUE;                                    \
  }
#define RGPU_PITCHED_ELEMENTS(ptr, pitch, width, size, height)                           \
  if (!CheckPitchedElements(cs, in.ptr, in.pitch, in.width, in.size, in.height, #ptr)) { \
    return CUDA_ERROR_INVALID_VALUE;                                                     \
  }
#define RGPU_PAYLOAD(bytes) \
  if (!CheckPayload(cs, in.bytes)) return CUDA_ERROR_INVALID_VALUE;
#define RGPU_PAYLOAD_ROWS(width, height) \
  if (!CheckPayloadRows(cs, in.width, in.height)) return CUDA_ERROR_INVALID_VALUE;
#define RGPU_PAYLOAD_BOX(width, height, depth) \
  if (!CheckPayloadBox(cs, in.width, in.height, in.depth)) return CUDA_ERROR_INVALID_VALUE;
#define RGPU_ARRAY_BOX(array, x, y, z, width, height, depth)                                \
  if (!CheckArrayBox(cs, *in.array.record, in.x, in.y, in.z, in.width, in.height, in.depth, \
                     #array)) {                                                             \
    return CUDA_ERROR_INVALID_VALUE;                                                        \
  }
#define RGPU_PITCHED_BOX(ptr, pitch, rows, width, height, depth)                              \
  if (!CheckPitchedBox(cs, in.ptr, in.pitch, in.rows, in.width, in.height, in.depth, #ptr)) { \
    return CUDA_ERROR_INVALID_VALUE;                                                          \
  }
#define RGPU_CALL(Name, mode, context, payload_in, payload_out, arg_list, result_list, checks)  \
  CUresult Session::Serve##Name(CallState& cs) {                                                \
    calls::Name::Args raw;                                                                      \
    if (!calls::DecodeArgs(cs.call->args().data(), &raw)) {                                     \
      cs.detail = "an argument of " #Name " is out of its range";                               \
      return CUDA_ERROR_INVALID_VALUE;                                                          \
    }                                                                                           \
    Name##In in;                                                                                \
    arg_list checks if (CUresult r = TakePayload(cs, Op::k##Name); r != CUDA_SUCCESS) return r; \
    calls::Name::Results out;                                                                   \
    const CUresult r = Handle##Name(cs, in, &out);                                              \
    if (r == CUDA_SUCCESS) calls::EncodeResults(out, cs.reply);                                 \
    return r;                                                                                   \
  }
#include "proto/calls.def"
#undef RGPU_CALL
#undef RGPU_PITCHED_BOX
#undef RGPU_ARRAY_BOX
#undef RGPU_PAYLOAD_BOX
#undef RGPU_PAYLOAD_ROWS
#undef RGPU_PAYLOAD
#undef RGPU_PITCHED_ELEMENTS
#undef RGPU_PITCHED
#undef RGPU_ELEMENTS
#undef RGPU_RANGE_IN
#undef RGPU_RANGE
#undef RGPU_ARG

CUresult Session::Dispatch(Op op, CallState& cs) {
  switch (op) {
#define RGPU_CALL(Name, mode, context, in, out, args, results, checks) \
  case Op::k##Name:                                                    \
    return Serve##Name(cs);
#include "proto/calls.def"
#undef RGPU_CALL
    default:
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

// ---- Resolvers ----

CUresult Session::Resolve(CallState& cs, calls::KindDevice, int raw, int* out) {
  if (!ServerDevice(static_cast<uint64_t>(raw), out)) {
    cs.detail = "no device " + std::to_string(raw) + " in this session";
    return CUDA_ERROR_INVALID_DEVICE;
  }
  return CUDA_SUCCESS;
}

CUresult Session::Resolve(CallState& cs, calls::KindCtx, uint64_t raw, Handle<ContextRecord>* out) {
  out->id = raw;
  out->record = contexts_.Find(raw);
  if (out->record == nullptr) {
    cs.detail = "no such context";
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  return CUDA_SUCCESS;
}

namespace {
// A record of `table` with id `raw` that lives in context `ctx`, or null.
template <typename Table>
auto* InContext(Table& table, uint64_t raw, uint64_t ctx) {
  auto* record = table.Find(raw);
  return record != nullptr && record->ctx == ctx ? record : nullptr;
}
}  // namespace

CUresult Session::Resolve(CallState& cs, calls::KindModule, uint64_t raw,
                          Handle<ModuleRecord>* out) {
  *out = {raw, InContext(modules_, raw, cs.ctx_id)};
  return out->record != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult Session::Resolve(CallState& cs, calls::KindFunction, uint64_t raw,
                          Handle<FunctionRecord>* out) {
  *out = {raw, InContext(functions_, raw, cs.ctx_id)};
  return out->record != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult Session::Resolve(CallState& cs, calls::KindEvent, uint64_t raw, Handle<EventRecord>* out) {
  *out = {raw, InContext(events_, raw, cs.ctx_id)};
  return out->record != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult Session::Resolve(CallState&, calls::KindSessionEvent, uint64_t raw,
                          Handle<EventRecord>* out) {
  *out = {raw, events_.Find(raw)};
  return out->record != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult Session::Resolve(CallState& cs, calls::KindOwnStream, uint64_t raw,
                          Handle<StreamRecord>* out) {
  *out = {raw, InContext(streams_, raw, cs.ctx_id)};
  return out->record != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult Session::Resolve(CallState& cs, calls::KindStream, uint64_t raw, StreamRef* out) {
  out->id = raw;
  out->stream = nullptr;
  if (raw == 0) return CUDA_SUCCESS;  // the context's default stream
  StreamRecord* s = InContext(streams_, raw, cs.ctx_id);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  out->stream = s->stream;
  return CUDA_SUCCESS;
}

CUresult Session::Resolve(CallState& cs, calls::KindPool, uint64_t raw, Handle<PoolRecord>* out) {
  *out = {raw, pools_.Find(raw)};
  if (out->record == nullptr || out->record->destroyed) {
    cs.detail = "no such memory pool in this session";
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult Session::Resolve(CallState& cs, calls::KindArray, uint64_t raw, Handle<ArrayRecord>* out) {
  *out = {raw, InContext(arrays_, raw, cs.ctx_id)};
  if (out->record != nullptr) return CUDA_SUCCESS;
  cs.detail = "no such array in this context";
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult Session::Resolve(CallState& cs, calls::KindMipmappedArray, uint64_t raw,
                          Handle<MipmapRecord>* out) {
  *out = {raw, InContext(mipmaps_, raw, cs.ctx_id)};
  if (out->record != nullptr) return CUDA_SUCCESS;
  cs.detail = "no such mipmapped array in this context";
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult Session::Resolve(CallState& cs, calls::KindOptMipmappedArray, uint64_t raw,
                          Handle<MipmapRecord>* out) {
  if (raw == 0) {
    *out = {};
    return CUDA_SUCCESS;
  }
  return Resolve(cs, calls::KindMipmappedArray{}, raw, out);
}

CUresult Session::Resolve(CallState& cs, calls::KindOptArray, uint64_t raw,
                          Handle<ArrayRecord>* out) {
  if (raw == 0) {
    *out = {};
    return CUDA_SUCCESS;
  }
  return Resolve(cs, calls::KindArray{}, raw, out);
}

namespace {
// The texture or surface object `raw` of `table` in context `ctx`.
Handle<SamplerRecord> Sampler(std::map<uint64_t, SamplerRecord>& table, uint64_t raw,
                              uint64_t ctx) {
  auto it = table.find(raw);
  if (it == table.end() || it->second.ctx != ctx) return {raw, nullptr};
  return {raw, &it->second};
}
}  // namespace

CUresult Session::Resolve(CallState& cs, calls::KindTexture, uint64_t raw,
                          Handle<SamplerRecord>* out) {
  *out = Sampler(textures_, raw, cs.ctx_id);
  if (out->record != nullptr) return CUDA_SUCCESS;
  cs.detail = "no such texture object in this context";
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult Session::Resolve(CallState& cs, calls::KindSurface, uint64_t raw,
                          Handle<SamplerRecord>* out) {
  *out = Sampler(surfaces_, raw, cs.ctx_id);
  if (out->record != nullptr) return CUDA_SUCCESS;
  cs.detail = "no such surface object in this context";
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult Session::Resolve(CallState& cs, calls::KindLink, uint64_t raw, Handle<LinkRecord>* out) {
  *out = {raw, InContext(links_, raw, cs.ctx_id)};
  if (out->record != nullptr) return CUDA_SUCCESS;
  cs.detail = "no such link state in this context";
  return CUDA_ERROR_INVALID_HANDLE;
}

CUresult Session::Resolve(CallState& cs, calls::KindGraph, uint64_t raw, Handle<GraphRecord>* out) {
  *out = {raw, graphs_.Find(raw)};
  if (out->record != nullptr) return CUDA_SUCCESS;
  cs.detail = "no such graph in this session";
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult Session::Resolve(CallState& cs, calls::KindPhysicalMemory, uint64_t raw,
                          Handle<PhysicalRecord>* out) {
  *out = {raw, physical_.Find(raw)};
  if (out->record != nullptr && !out->record->released) return CUDA_SUCCESS;
  cs.detail = "no such physical memory handle in this session";
  return CUDA_ERROR_INVALID_VALUE;
}

// ---- Checks ----

bool Session::CheckRange(CallState& cs, CUdeviceptr ptr, uint64_t bytes, const char* what) {
  if (bytes == 0 || OwnsRange(cs.ctx_id, ptr, bytes)) return true;
  cs.detail = std::string(what) + " range is not memory of this session";
  return false;
}

bool Session::CheckRangeIn(CallState& cs, uint64_t ctx_id, CUdeviceptr ptr, uint64_t bytes,
                           const char* what) {
  if (bytes == 0 || OwnsRange(ctx_id, ptr, bytes)) return true;
  cs.detail = std::string(what) + " range is not memory of that context of this session";
  return false;
}

bool Session::CheckElements(CallState& cs, CUdeviceptr ptr, uint64_t count, uint64_t size,
                            const char* what) {
  uint64_t bytes = 0;
  if ((size != 1 && size != 2 && size != 4) || !CheckedMul(count, size, &bytes)) {
    cs.detail = "invalid element size or count";
    return false;
  }
  return CheckRange(cs, ptr, bytes, what);
}

bool Session::CheckPitched(CallState& cs, CUdeviceptr ptr, uint64_t pitch, uint64_t width,
                           uint64_t height, const char* what) {
  uint64_t extent = 0, packed = 0;
  if (!PitchedShape(pitch, width, height, &extent, &packed)) {
    cs.detail = "invalid or overflowing 2D shape";
    return false;
  }
  if (OwnsRange(cs.ctx_id, ptr, extent)) return true;
  cs.detail = std::string(what) + " rows are not memory of this session";
  return false;
}

bool Session::CheckPitchedElements(CallState& cs, CUdeviceptr ptr, uint64_t pitch, uint64_t width,
                                   uint64_t size, uint64_t height, const char* what) {
  uint64_t row_bytes = 0;
  if ((size != 1 && size != 2 && size != 4) || !CheckedMul(width, size, &row_bytes)) {
    cs.detail = "invalid element size or row width";
    return false;
  }
  return CheckPitched(cs, ptr, pitch, row_bytes, height, what);
}

bool Session::CheckPayload(CallState& cs, uint64_t bytes) {
  if (cs.payload_size == bytes) return true;
  cs.detail = "payload of " + std::to_string(cs.payload_size) + " bytes, the call needs " +
              std::to_string(bytes);
  return false;
}

bool Session::CheckPayloadRows(CallState& cs, uint64_t width, uint64_t height) {
  uint64_t bytes = 0;
  if (!CheckedMul(width, height, &bytes)) {
    cs.detail = "overflowing row count";
    return false;
  }
  return CheckPayload(cs, bytes);
}

bool Session::CheckPayloadBox(CallState& cs, uint64_t width, uint64_t height, uint64_t depth) {
  uint64_t rows = 0, bytes = 0;
  if (!CheckedMul(height, depth, &rows) || !CheckedMul(width, rows, &bytes)) {
    cs.detail = "overflowing box";
    return false;
  }
  return CheckPayload(cs, bytes);
}

bool Session::CheckArrayBox(CallState& cs, const ArrayRecord& array, uint64_t x, uint64_t y,
                            uint64_t z, uint64_t width, uint64_t height, uint64_t depth,
                            const char* what) {
  uint64_t row_bytes = 0, x_end = 0, y_end = 0, z_end = 0;
  const bool inside = CheckedMul(array.width, array.element_bytes, &row_bytes) &&
                      CheckedAdd(x, width, &x_end) && CheckedAdd(y, height, &y_end) &&
                      CheckedAdd(z, depth, &z_end) && x_end <= row_bytes && y_end <= array.height &&
                      z_end <= array.depth;
  if (inside) return true;
  cs.detail = std::string(what) + " box is not inside the array";
  return false;
}

bool Session::CheckPitchedBox(CallState& cs, CUdeviceptr ptr, uint64_t pitch, uint64_t rows,
                              uint64_t width, uint64_t height, uint64_t depth, const char* what) {
  // The extent: depth-1 whole slices, then height-1 rows, then one row of width bytes.
  uint64_t slice = 0, extent = 0, last = 0, packed = 0;
  const bool fits = depth > 0 && height > 0 && height <= rows && CheckedMul(pitch, rows, &slice) &&
                    PitchedShape(pitch, width, height, &last, &packed) &&
                    CheckedMul(slice, depth - 1, &extent) && CheckedAdd(extent, last, &extent);
  if (!fits) {
    cs.detail = "invalid or overflowing 3D shape";
    return false;
  }
  if (OwnsRange(cs.ctx_id, ptr, extent)) return true;
  cs.detail = std::string(what) + " slices are not memory of this session";
  return false;
}

}  // namespace rgpu::server
