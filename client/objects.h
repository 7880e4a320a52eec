// The client's shadow objects: what CUcontext, CUmodule, CUfunction, CUlibrary, CUkernel,
// CUstream and CUevent point to in the tenant's process. cuda.h only forward-declares these
// structs; rgpu defines them. Each names its server-side counterpart by session-local id.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/suballocator.h"
#include "client/user_objects.h"

namespace rgpu::client {

enum class ObjectKind : uint32_t {
  kContext = 0x52435458,  // "RCTX"
  kModule,
  kFunction,
  kLibrary,
  kKernel,
  kStream,
  kEvent,
  kGraph,
  kGraphExec,
  kArray,
  kMipmappedArray,
  kUserObject,
};

struct ParamSlot {
  uint32_t offset = 0;
  uint32_t size = 0;
};

}  // namespace rgpu::client

namespace rgpu::client {
// Work on one stream that must wait in the client: while a host function enqueued on the stream
// has not run yet, later operations on it are held here, in order (guarded by
// ClientState::objects_mutex()).
struct StreamHold {
  bool blocked = false;
  std::deque<std::pair<CUstream, std::function<CUresult(CUstream)>>> held;
  int replaying = 0;  // held work taken from `held` and being sent right now
};

// A context-local-storage value and the destructor to run when the context goes away.
struct ClsEntry {
  void* value = nullptr;
  void (*destructor)(CUcontext, void* key, void* value) = nullptr;
};
}  // namespace rgpu::client

struct CUctx_st {
  rgpu::client::ObjectKind kind = rgpu::client::ObjectKind::kContext;
  uint64_t remote = 0;  // 0 while a primary context is inactive
  int device = 0;
  bool primary = false;
  unsigned flags = 0;
  int primary_refs = 0;
  // Bumped each time the context is (re)created on the server: modules and functions made in an
  // earlier generation died with it.
  uint64_t generation = 0;
  // Context-local storage (the runtime keeps its per-context state here), guarded by
  // ClientState::objects_mutex().
  std::map<void*, rgpu::client::ClsEntry> local_storage;
  // The default stream's held work, and how many host functions of this context's streams have
  // not finished (both guarded by objects_mutex()).
  rgpu::client::StreamHold default_hold;
  int host_work = 0;
  // The preferred split of L1 and shared memory (cuCtxSetCacheConfig), a preference the driver
  // may ignore; kept here and not forwarded, like functions' (guarded by objects_mutex()).
  CUfunc_cache cache_config = CU_FUNC_CACHE_PREFER_NONE;
  // The device's stream priorities (cuCtxGetStreamPriorityRange), asked once, when a stream is
  // first made with a priority other than 0 (guarded by objects_mutex()).
  bool priority_range_known = false;
  int priority_least = 0, priority_greatest = 0;
  // Each thread's per-thread default stream (CU_STREAM_PER_THREAD) in this context, a blocking
  // stream on the server made on the thread's first use (guarded by objects_mutex()).
  std::map<std::thread::id, CUstream_st*> per_thread_streams;
  // Small allocations carved from slabs of the context's (cuMemAlloc without a round trip).
  rgpu::client::Suballocator suballocator;
};

struct CUmod_st {
  rgpu::client::ObjectKind kind = rgpu::client::ObjectKind::kModule;
  uint64_t remote = 0;
  CUctx_st* ctx = nullptr;
  uint64_t generation = 0;                      // of ctx when loaded
  std::map<std::string, CUfunc_st*> functions;  // handles are stable per name
  // True when `functions` holds every kernel of the module (the load listed them): a name not
  // there names none.
  bool all_functions = false;
  std::vector<uint64_t> globals;  // device addresses of globals looked up
};

struct CUfunc_st {
  rgpu::client::ObjectKind kind = rgpu::client::ObjectKind::kFunction;
  uint64_t remote = 0;
  CUctx_st* ctx = nullptr;
  CUmod_st* module = nullptr;
  std::string name;
  std::vector<rgpu::client::ParamSlot> params;
  uint32_t params_bytes = 0;
  // Launch limits, from the server with the handle (guarded by objects_mutex()).
  uint32_t max_threads = 0;
  uint32_t static_shared = 0;
  uint32_t max_dynamic_shared = 0;
  // Attributes fetched from the server, by CUfunction_attribute (guarded by objects_mutex()).
  std::map<int, int> attributes;
};

// A library is context-independent: it loads as one module per context that uses it.
struct CUkern_st;
struct CUlib_st {
  rgpu::client::ObjectKind kind = rgpu::client::ObjectKind::kLibrary;
  std::string image;
  std::map<CUctx_st*, CUmod_st*> modules;
  // Its kernels by name, one handle per name, owned here and freed with the library (guarded
  // by objects_mutex()).
  std::map<std::string, CUkern_st*> kernels;
  bool unloading = false;  // cuLibraryUnload began: no more kernels (objects_mutex)
};

struct CUkern_st {
  rgpu::client::ObjectKind kind = rgpu::client::ObjectKind::kKernel;
  CUlib_st* library = nullptr;
  std::string name;
};

struct CUstream_st {
  rgpu::client::ObjectKind kind = rgpu::client::ObjectKind::kStream;
  uint64_t remote = 0;
  CUctx_st* ctx = nullptr;
  unsigned flags = 0;
  int priority = 0;
  CUgraph_st* capture = nullptr;  // the graph being captured from this stream, if any
  uint64_t capture_id = 0;
  rgpu::client::StreamHold hold;  // guarded by objects_mutex()
};

namespace rgpu::client {
class GraphAllocation;     // client/graph_memory.h
struct ConditionalBody;    // client/graph_conditional.h
struct ConditionalHandle;  // client/graph_conditional.h
// A kernel node's launch, as cuGraphAddKernelNode took it: the function, its shape and its
// arguments packed by value (kernelParams points into them for cuGraphKernelNodeGetParams).
// Immutable once made; setting new parameters makes a new one.
struct GraphKernel {
  CUDA_KERNEL_NODE_PARAMS params = {};  // kernelParams and extra rewritten to the copies below
  std::string args;                     // packed as the function's parameter layout
  std::vector<void*> arg_ptrs;          // each parameter's place in `args`
  CUctx_st* ctx = nullptr;              // the function's context (it may not change in an update)
  // Launch attributes set on the node (cuGraphKernelNodeSetAttribute), one per id: the node then
  // launches with cuLaunchKernelEx.
  std::vector<CUlaunchAttribute> attrs;
};
struct ChildGraph;  // client/graph_child.h
// Every node made gets its own id (copies keep it): an executable graph's node and a clone's
// node name the node they came from by it, which a later node at the same address cannot match.
inline uint64_t NewGraphNodeId() {
  static std::atomic<uint64_t> next{1};
  return next++;
}
}  // namespace rgpu::client

// One operation of a graph: replays it on the stream the graph is launched on, after the nodes
// it depends on. A captured node depends on the one captured before it; nodes added one by one
// name their dependencies. Nodes live in their graph's deque until it is destroyed; a destroyed
// node stays there as a tombstone so that no handle dangles.
struct CUgraphNode_st {
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  std::function<CUresult(CUstream)> replay;
  std::vector<CUgraphNode_st*> deps;  // nodes of the same graph
  CUgraph_st* graph = nullptr;        // the graph it belongs to (null in an executable graph)
  bool destroyed = false;
  std::shared_ptr<const rgpu::client::GraphKernel> kernel;  // kernel nodes added as nodes
  const CUgraphNode_st* origin = nullptr;  // in an executable graph: the node it came from
  // Memory alloc and free nodes: their allocation, kept while any graph holds the node.
  std::shared_ptr<rgpu::client::GraphAllocation> allocation;
  // Conditional nodes: their handle and body graphs, and the array of the bodies the driver
  // hands out (CUDA_CONDITIONAL_NODE_PARAMS::phGraph_out).
  std::shared_ptr<rgpu::client::ConditionalBody> conditional;
  std::vector<CUgraph_st*> conditional_graphs;
  // Its replay only posts stream-ordered device work (client/graph_record.h).
  bool recordable = false;
  uint64_t id = rgpu::client::NewGraphNodeId();
  uint64_t cloned_from = 0;  // in a clone (cuGraphClone): the id of the node it copies
  // Its parameters by value, as CUDA documents each type's (cuGraph*NodeGetParams), for nodes
  // made node by node; a captured node keeps only its replay (params_known false), except that a
  // kernel node's are in `kernel` when known.
  bool params_known = false;
  CUDA_MEMCPY3D copy = {};              // memcpy nodes
  CUDA_MEMSET_NODE_PARAMS memset = {};  // memset nodes
  CUcontext ctx = nullptr;              // memcpy and memset nodes: the context they run in
  CUDA_HOST_NODE_PARAMS host = {};      // host nodes
  CUevent event = nullptr;              // event record and wait nodes
  // Batch memory operation nodes: their operations (the context is `ctx`) and flags.
  std::vector<CUstreamBatchMemOpParams> mem_ops;
  unsigned mem_op_flags = 0;
  // Child graph nodes: the graph the node owns (an embedded copy of the graph it was given,
  // cuGraphChildGraphNodeGetGraph hands it out); in an executable graph, a private copy of it as
  // instantiated, which `replay` runs.
  std::shared_ptr<rgpu::client::ChildGraph> child;
  // In an executable graph (cuGraphNodeSetEnabled): a disabled node's replay does nothing and is
  // recordable; the work it does when enabled waits in disabled_replay, disabled_recordable.
  bool enabled = true;
  std::function<CUresult(CUstream)> disabled_replay;
  bool disabled_recordable = false;
};

namespace rgpu::client {
using GraphNode = CUgraphNode_st;
}  // namespace rgpu::client

// A captured graph: its operations in an order that respects every dependency of the capture
// (streams that joined it through events add theirs in issue order).
struct CUgraph_st {
  rgpu::client::ObjectKind kind = rgpu::client::ObjectKind::kGraph;
  std::deque<CUgraphNode_st> nodes;  // stable addresses: CUgraphNode handles point into it
  // While capturing: the streams capturing into it and the events recorded in it.
  std::vector<CUstream> streams;
  std::vector<CUevent> events;
  // While capturing: the nodes the next captured node depends on, when the program set them
  // (cuStreamBeginCaptureToGraph, cuStreamUpdateCaptureDependencies); otherwise the last node.
  bool next_deps_set = false;
  std::vector<CUgraphNode_st*> next_deps;
  std::vector<CUgraphNode_st*> info_deps;  // what cuStreamGetCaptureInfo last handed out
  bool captured_into = false;  // an existing graph a stream captures into: not ended as new
  // A conditional node's body or a child graph node's graph: it goes with its node only.
  bool body = false;
  // Conditional handles made for it (cuGraphConditionalHandleCreate).
  std::vector<std::shared_ptr<rgpu::client::ConditionalHandle>> conditional_handles;
  // The user objects it holds references to (client/user_objects.h; objects_mutex).
  rgpu::client::UserObjectRefs user_objects;
};

struct CUgraphExec_st {
  rgpu::client::ObjectKind kind = rgpu::client::ObjectKind::kGraphExec;
  std::vector<CUgraphNode_st> nodes;
  unsigned long long flags = 0;  // as instantiated (cuGraphExecGetFlags)
  // The conditional handles its nodes use (their defaults are assigned at every launch).
  std::vector<std::shared_ptr<rgpu::client::ConditionalHandle>> conditional_handles;
  // Its runs of recordable nodes as the server keeps them (client/graph_record.h).
  struct ServerRun {
    size_t first = 0, count = 0;  // nodes[first, first + count)
    bool refused = false;         // the server does not keep it: replayed node by node
    // The server's graph by launch stream: (the server's context id, its stream id).
    std::map<std::pair<uint64_t, uint64_t>, uint64_t> recorded;
  };
  std::mutex runs_mu;
  bool runs_made = false;       // GUARDED_BY(runs_mu)
  std::vector<ServerRun> runs;  // GUARDED_BY(runs_mu)
  // The streams it was launched on since it last settled (SettleLaunches): what it holds for
  // those launches (user object references, in it and its nodes' graphs) goes only after their
  // work. GUARDED_BY(runs_mu)
  std::vector<CUstream> launched_on;
  // The user objects it holds references to, taken from its graph (and the graphs of its child
  // and conditional nodes) when it was instantiated or updated.
  rgpu::client::UserObjectRefs user_objects;
};

// A user object (client/user_objects.h): the program's pointer and destructor, and the
// references the program and its graphs hold.
struct CUuserObject_st {
  rgpu::client::ObjectKind kind = rgpu::client::ObjectKind::kUserObject;
  void* ptr = nullptr;
  CUhostFn destroy = nullptr;
  std::atomic<uint64_t> refs{0};
};

struct CUevent_st {
  rgpu::client::ObjectKind kind = rgpu::client::ObjectKind::kEvent;
  uint64_t remote = 0;
  CUctx_st* ctx = nullptr;
  unsigned flags = 0;
  CUgraph_st* captured_in = nullptr;  // recorded in a capture still going on (objects_mutex)
  // Records of it held in the client (behind a host function or a wait for another server's
  // event), not yet sent; shared with the waits that must follow them (written under
  // objects_mutex, client/stream_hold.cc).
  std::shared_ptr<std::atomic<int>> held_records = std::make_shared<std::atomic<int>>(0);
};
