// What a session holds on the backend, one record per handle it gave its client (HandleTable),
// and the typed form a forwarded call's fields take once the server has resolved them
// (Resolved<Kind>): a handle of the session's, checked to belong to the call's context; a device
// index of the server; or the plain value.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/module_variables.h"
#include "proto/call_kinds.h"
#include "proto/rgpu.pb.h"
#include "server/ipc_registry.h"
#include "server/kernel_turns.h"
#include "server/staging_buffers.h"

namespace rgpu::server {

struct ExportedMemory;
struct ExportedPool;
struct ExportedEvent;
struct SharedPhysical;

// Limits whose device memory is charged to the tenant: the malloc heap, the per-thread stack
// (reserved for every thread the device can hold at once) and the printf buffer.
enum ChargedLimit { kHeapLimit, kStackLimit, kPrintfLimit, kChargedLimits };

struct ContextRecord {
  CUcontext context = nullptr;
  int device = 0;  // the server's device index
  bool primary = false;
  int primary_refs = 0;
  bool destroyed = false;    // to stop a kernel (Session::WaitForKernel): calls then fail
  bool peer_access = false;  // it was given access to another context's memory
  uint64_t limit_default[kChargedLimits] = {};  // the backend's values at creation
  uint64_t limit_charge[kChargedLimits] = {};   // bytes charged for each
  // Pinned buffers of asynchronous copies to busy streams, made on first use; they go with the
  // record, which outlives the backend context (DestroyContext).
  std::unique_ptr<StagingBuffers> staging;
  // Its kernels' turns on the device (--fair-share), made on first use; Stopped before the
  // backend context is destroyed, destroyed with the record.
  std::unique_ptr<KernelTurns> turns;
};

struct Allocation {
  size_t size = 0;
  uint64_t ctx = 0;
  bool freeable = true;  // false for module globals
  uint64_t module = 0;   // the module a global belongs to
  uint64_t pool = 0;     // the memory pool it came from (cuMemAllocAsync), 0: none
  // Memory another session exported that this one opened (cuIpcOpenMemHandle, or a pointer of
  // an imported pool: import_pool is the session's pool it was imported into). Never freed
  // here: closed, which gives the exporter's memory back (session_ipc.cc).
  std::shared_ptr<ExportedMemory> imported;
  uint32_t opens = 0;  // cuIpcOpenMemHandle calls not yet closed
  uint64_t import_pool = 0;
};

// Device memory a restore mapped at the addresses its checkpoint named, on a backend that cannot
// allocate at a chosen address (NVIDIA's driver): one reservation of `bytes` at its base, backed
// by one physical allocation, holding `users` allocations (pool blocks included).
struct RestoredSpan {
  uint64_t bytes = 0;
  uint64_t handle = 0;  // CUmemGenericAllocationHandle
  uint64_t ctx = 0;     // the context of its allocations, 0: several
  uint32_t users = 0;
  int device = -1;
  uint64_t overhead = 0;  // bytes charged for the granules its allocations do not fill
};

// Memory a pool holds that no allocation uses: free again once `ready` (recorded on the freeing
// stream) has completed, or at once for work on that same stream.
struct PoolBlock {
  CUdeviceptr ptr = 0;
  uint64_t size = 0;
  uint64_t ctx = 0;         // the context it was allocated in
  uint64_t stream = 0;      // the stream of the free (session id; 0: the default stream)
  CUevent ready = nullptr;  // null: free since a synchronization
};

// A stream-ordered memory pool (cuMemPoolCreate, or a device's default pool). Everything it
// reserves is charged to the tenant's quota until released.
struct PoolRecord {
  int device = 0;  // the server's device index
  bool is_default = false;
  bool destroyed = false;  // destroyed while allocations were outstanding: released with them
  uint64_t max_size = 0;   // 0: no bound but the quota
  uint64_t release_threshold = 0;
  bool reuse_follow_event_dependencies = true;
  bool reuse_allow_opportunistic = true;
  bool reuse_allow_internal_dependencies = true;
  uint64_t reserved = 0, reserved_high = 0, used = 0, used_high = 0;
  std::vector<PoolBlock> free;
  // Shared with other sessions (an export of this pool, or this pool imported from another
  // session). An imported pool holds no memory of its own: only the pointers imported into it.
  std::shared_ptr<ExportedPool> shared;
  bool shareable = false;  // made with a shareable handle type (it may be exported)
  bool imported = false;
  uint32_t imported_pointers = 0;
};

struct ModuleRecord {
  CUmodule module = nullptr;
  uint64_t ctx = 0;
  uint64_t charged = 0;  // its image and the device memory its variables hold
  // The image it was loaded from (NUL-terminated past its size), for a checkpoint.
  std::shared_ptr<const std::string> image;
  // Its variables by name, where the backend cannot list them itself: read from the image at its
  // first checkpoint (Session::CaptureVariablesByName), or from the checkpoint it was restored
  // from. Null: not read yet.
  std::shared_ptr<const std::vector<rgpu::fatbin::ModuleVariable>> variables;
};

struct ParamSlot {
  uint32_t offset = 0;
  uint32_t size = 0;
};

struct FunctionRecord {
  CUfunction function = nullptr;
  uint64_t module = 0;
  uint64_t ctx = 0;
  std::string name;  // the kernel's, for a checkpoint
  std::vector<ParamSlot> params;
  uint32_t params_bytes = 0;
};

struct StreamRecord {
  CUstream stream = nullptr;
  uint64_t ctx = 0;
  unsigned flags = 0;  // as created, for a checkpoint
  int priority = 0;
};

struct EventRecord {
  CUevent event = nullptr;
  uint64_t ctx = 0;
  unsigned flags = 0;     // as created, for a checkpoint
  bool recorded = false;  // cuEventRecord has been called on it
  bool imported = false;  // opened from another session's export (cuIpcOpenEventHandle)
  // Once exported (cuIpcGetEventHandle): what other sessions open, standing in the server's
  // IpcRegistry under ipc_key until the event goes.
  std::shared_ptr<ExportedEvent> exported;
  IpcKey ipc_key = {};
};

// A CUDA array (cuArray3DCreate) and the shape the session checks copies against: `width` in
// elements, `height` rows (1 for a 1D array) and `depth` slices (layers, cube faces; 1 for 2D).
struct ArrayRecord {
  CUarray array = nullptr;
  uint64_t ctx = 0;
  uint64_t width = 0, height = 0, depth = 0;
  uint32_t element_bytes = 0;  // channels x the format's size
  uint32_t flags = 0;
  uint64_t charged = 0;
  uint64_t mipmap = 0;  // a level of this mipmapped array (goes with it, never alone)
};

// A mipmapped array (cuMipmappedArrayCreate): its level-0 shape as ArrayRecord has it, and the
// session's array id of each level asked for (0: not yet).
struct MipmapRecord {
  CUmipmappedArray mipmap = nullptr;
  uint64_t ctx = 0;
  uint64_t width = 0, height = 0, depth = 0;  // level 0; height and depth at least 1
  uint32_t element_bytes = 0;
  uint32_t flags = 0;
  uint64_t charged = 0;  // every level
  std::vector<uint64_t> levels;
};

// A texture or surface object; the session names it by the backend's value.
struct SamplerRecord {
  uint64_t ctx = 0;
  uint64_t array = 0;  // the array it reads (0: device memory)
};

// A JIT link state (cuLinkCreate) and what the backend's linker writes into: the option arrays
// and log buffers it was given, which must live as long as the state.
struct LinkRecord {
  CUlinkState state = nullptr;
  uint64_t ctx = 0;
  std::vector<CUjit_option> options;
  std::vector<void*> values;
  std::vector<char> info_log, error_log;
  uint64_t input_bytes = 0;
  const void* image = nullptr;  // after LinkComplete: the backend's, valid until destroyed
  size_t image_bytes = 0;
};

// Physical memory (cuMemCreate): charged to the tenant while the client holds its handle or a
// mapping of it exists.
struct PhysicalRecord {
  CUmemGenericAllocationHandle handle = 0;
  int device = 0;  // the server's device index
  uint64_t size = 0;
  int mappings = 0;
  bool released = false;  // by the client; the record goes with its last mapping
  // Once exported or imported (cuMemExportToShareableHandle): the backend handle is the shared
  // one's, released with its last holder. `charged`: this session was charged for it (it made
  // it); the charge passes to the shared memory when this session lets go.
  std::shared_ptr<SharedPhysical> shared;
  bool charged = true;
};

// A mapping of physical memory at a reserved address (cuMemMap), by base address.
struct MappingRecord {
  uint64_t size = 0;
  uint64_t physical = 0;    // its PhysicalRecord's id
  uint64_t access_ctx = 0;  // the context it is memory of once access is granted (0: none)
};

// A graph the session recorded (GraphRecord): the calls of one launch in order, their payloads
// in one buffer (call i's at offsets[i], sizes[i] bytes); each call is checked anew every time
// it runs.
struct GraphRecord {
  std::vector<wire::Call> calls;
  std::vector<size_t> offsets, sizes;
  std::string payload;
  uint64_t bytes = 0;  // what it holds in the server's memory, against the session's bound
};

// Parses a graph record (the GraphRecord call's payload: a u32 length, a Batch of posted calls of
// work a graph may hold, their payloads at 16-byte boundaries) into *rec:
// CUDA_ERROR_INVALID_VALUE, with *why, when it is not one a session may keep,
// CUDA_ERROR_OUT_OF_MEMORY when it would hold more than `room` bytes (nothing copied then)
// (server/session_graph.cc).
CUresult ParseGraphRecord(const char* data, size_t size, uint64_t room, GraphRecord* rec,
                          std::string* why);
// The record's bytes as the GraphRecord call carried them (a checkpoint keeps them).
std::string GraphRecordBytes(const GraphRecord& rec);

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
struct Resolved<calls::KindSessionEvent> {
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
template <>
struct Resolved<calls::KindPool> {
  using Type = Handle<PoolRecord>;
};

template <>
struct Resolved<calls::KindArray> {
  using Type = Handle<ArrayRecord>;
};
template <>
struct Resolved<calls::KindOptArray> {
  using Type = Handle<ArrayRecord>;  // record null for 0
};
template <>
struct Resolved<calls::KindPhysicalMemory> {
  using Type = Handle<PhysicalRecord>;
};
template <>
struct Resolved<calls::KindLink> {
  using Type = Handle<LinkRecord>;
};
template <>
struct Resolved<calls::KindTexture> {
  using Type = Handle<SamplerRecord>;
};
template <>
struct Resolved<calls::KindSurface> {
  using Type = Handle<SamplerRecord>;
};
template <>
struct Resolved<calls::KindGraph> {
  using Type = Handle<GraphRecord>;
};
template <>
struct Resolved<calls::KindMipmappedArray> {
  using Type = Handle<MipmapRecord>;
};
template <>
struct Resolved<calls::KindOptMipmappedArray> {
  using Type = Handle<MipmapRecord>;  // record null for 0
};

}  // namespace rgpu::server
