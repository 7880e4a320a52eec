// What a session holds on the backend, one record per handle it gave its client (HandleTable),
// and the typed form a forwarded call's fields take once the server has resolved them
// (Resolved<Kind>): a handle of the session's, checked to belong to the call's context; a device
// index of the server; or the plain value.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "proto/call_kinds.h"

namespace rgpu::server {

// Limits whose device memory is charged to the tenant: the malloc heap, the per-thread stack
// (reserved for every thread the device can hold at once) and the printf buffer.
enum ChargedLimit { kHeapLimit, kStackLimit, kPrintfLimit, kChargedLimits };

struct ContextRecord {
  CUcontext context = nullptr;
  int device = 0;  // the server's device index
  bool primary = false;
  int primary_refs = 0;
  bool destroyed = false;  // to stop a kernel (Session::WaitForKernel): calls then fail
  uint64_t limit_default[kChargedLimits] = {};  // the backend's values at creation
  uint64_t limit_charge[kChargedLimits] = {};   // bytes charged for each
};

struct Allocation {
  size_t size = 0;
  uint64_t ctx = 0;
  bool freeable = true;  // false for module globals
  uint64_t module = 0;   // the module a global belongs to
};

struct ModuleRecord {
  CUmodule module = nullptr;
  uint64_t ctx = 0;
  uint64_t charged = 0;  // its image and the device memory its variables hold
};

struct ParamSlot {
  uint32_t offset = 0;
  uint32_t size = 0;
};

struct FunctionRecord {
  CUfunction function = nullptr;
  uint64_t module = 0;
  uint64_t ctx = 0;
  std::vector<ParamSlot> params;
  uint32_t params_bytes = 0;
};

struct StreamRecord {
  CUstream stream = nullptr;
  uint64_t ctx = 0;
};

struct EventRecord {
  CUevent event = nullptr;
  uint64_t ctx = 0;
};

// A resolved handle: the id the client named and the session's record of it.
template <typename Record>
struct Handle {
  uint64_t id = 0;
  Record* record = nullptr;
  Record* operator->() const { return record; }
};

// A resolved stream that may be the context's default one (id 0, stream null).
struct StreamRef {
  uint64_t id = 0;
  CUstream stream = nullptr;
};

// The type a field of kind K has once resolved.
template <typename K>
struct Resolved {
  using Type = typename K::Wire;  // plain values
};
template <>
struct Resolved<calls::KindCtx> {
  using Type = Handle<ContextRecord>;
};
template <>
struct Resolved<calls::KindModule> {
  using Type = Handle<ModuleRecord>;
};
template <>
struct Resolved<calls::KindFunction> {
  using Type = Handle<FunctionRecord>;
};
template <>
struct Resolved<calls::KindEvent> {
  using Type = Handle<EventRecord>;
};
template <>
struct Resolved<calls::KindOwnStream> {
  using Type = Handle<StreamRecord>;
};
template <>
struct Resolved<calls::KindStream> {
  using Type = StreamRef;
};

}  // namespace rgpu::server
