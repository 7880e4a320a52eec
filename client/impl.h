// How the client runtime exports its driver-API implementations to the interposer shim:
// RGPU_IMPL(cuX) defines `rgpu_impl_cuX`, which the shim looks up by name and calls from its
// exported `cuX`. RGPU_SAME_AS(alias, cuX) makes another entry point (a _ptds variant) share an
// implementation; RGPU_PER_THREAD_SAME_AS(cuX_ptsz) defines a `_ptsz` variant as cuX with a NULL
// stream meaning the calling thread's default stream (generated from cuda.h's declaration,
// abi/per_thread_entries.inc). Signatures are checked against cuda.h at compile time.
#pragma once

#include <cuda.h>

#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "abi/per_thread_entries.inc"
#include "client/client_state.h"
#include "common/log.h"
#include "common/stream_mem_ops.h"

#define RGPU_IMPL(name)                                                                \
  extern "C" __attribute__((visibility("default"))) decltype(::name) rgpu_impl_##name; \
  static_assert(std::is_same_v<decltype(&rgpu_impl_##name), decltype(&::name)>);       \
  extern "C" __attribute__((visibility("default"))) CUresult rgpu_impl_##name

#define RGPU_SAME_AS(other, name)           \
  extern "C"                                \
      __attribute__((visibility("default"), \
                     alias("rgpu_impl_" #name))) decltype(rgpu_impl_##name) rgpu_impl_##other;

// A program built for per-thread default streams calls the `_ptsz` entry points, in which a NULL
// stream (and a NULL stream in a launch configuration) is the calling thread's default stream,
// CU_STREAM_PER_THREAD, not the legacy default stream. Its `_ptds` entry points (synchronous
// calls) share cuX as they are: on the legacy default stream they are ordered after the calling
// thread's stream too (it is a blocking stream), and after more, never less.
#define RGPU_PER_THREAD_SAME_AS(other) RGPU_PER_THREAD_##other
#define RGPU_PER_THREAD_DEFINE(other, name, params, args, prologue)                     \
  extern "C" __attribute__((visibility("default"))) CUresult rgpu_impl_##other params { \
    prologue return rgpu_impl_##name args;                                              \
  }

namespace rgpu::client {
// Called on the address of each parameter of a `_ptsz` entry point before the call goes on:
// a NULL stream becomes CU_STREAM_PER_THREAD; other parameters stay as they are.
template <typename T>
inline void DefaultToPerThread(T*) {}
inline void DefaultToPerThread(CUstream* stream) {
  if (*stream == nullptr) *stream = CU_STREAM_PER_THREAD;
}
// A launch configuration whose stream is NULL is replaced by a copy (the calling thread's, valid
// until its next `_ptsz` launch) naming CU_STREAM_PER_THREAD.
void DefaultToPerThread(const CUlaunchConfig** config);
}  // namespace rgpu::client

// Implementations that other files of the runtime call directly.
extern "C" CUresult rgpu_impl_cuStreamSynchronize(CUstream stream);
extern "C" CUresult rgpu_impl_cuCtxGetStreamPriorityRange(int* least, int* greatest);
extern "C" CUresult rgpu_impl_cuDeviceGetAttribute(int* value, CUdevice_attribute attrib,
                                                   CUdevice dev);
extern "C" CUresult rgpu_impl_cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize);
extern "C" CUresult rgpu_impl_cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                             unsigned int gz, unsigned int bx, unsigned int by,
                                             unsigned int bz, unsigned int shmem, CUstream stream,
                                             void** params, void** extra);
extern "C" CUresult rgpu_impl_cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f,
                                               void** params, void** extra);
extern "C" CUresult rgpu_impl_cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags);
extern "C" CUresult rgpu_impl_cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status);
extern "C" CUresult rgpu_impl_cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool);
extern "C" CUresult rgpu_impl_cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* copy, CUstream s);
extern "C" CUresult rgpu_impl_cuMemsetD2D8Async(CUdeviceptr dst, size_t pitch, unsigned char value,
                                                size_t width, size_t height, CUstream s);
extern "C" CUresult rgpu_impl_cuMemsetD2D16Async(CUdeviceptr dst, size_t pitch,
                                                 unsigned short value, size_t width, size_t height,
                                                 CUstream s);
extern "C" CUresult rgpu_impl_cuMemsetD2D32Async(CUdeviceptr dst, size_t pitch, unsigned int value,
                                                 size_t width, size_t height, CUstream s);
extern "C" CUresult rgpu_impl_cuLaunchHostFunc(CUstream stream, CUhostFn fn, void* data);
extern "C" CUresult rgpu_impl_cuEventRecord(CUevent e, CUstream s);
extern "C" CUresult rgpu_impl_cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev);
extern "C" CUresult rgpu_impl_cuGetErrorName(CUresult error, const char** name);
extern "C" CUresult rgpu_impl_cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags);
extern "C" CUresult rgpu_impl_cuEventSynchronize(CUevent e);
extern "C" CUresult rgpu_impl_cuDeviceCanAccessPeer(int* can_access, CUdevice dev, CUdevice peer);

namespace rgpu::client {

// Shorthand for the servers of an initialized client: calls made through it go to the server of
// what they name (client/server_set.h).
inline ServerSet& Server() { return ClientState::Get().servers(); }
// The same, for what stays in this process and sends nothing (registering pinned memory with the
// transports); docs/compatibility.md counts such entry points as local.
inline ServerSet& LocalTransport() { return ClientState::Get().servers(); }

// A fresh id of the client's own (in [calls::kFirstClientId, calls::kClientIdLimit)) for an
// object that a posted call creates, so that making it costs no round trip. Thread-safe.
uint64_t NewClientId();

// Device memory of `bytesize` bytes in `ctx` from the server (one round trip), never carved from
// a slab; `record`: entered in the memory map as a freeable allocation of the program's (a slab
// is not). Addresses that collide with another server's memory are refused and asked again.
CUresult AllocateDevice(CUctx_st* ctx, size_t bytesize, CUdeviceptr* dptr, bool record);
// Whether small cuMemAlloc sizes are carved from slabs (RGPU_SUBALLOCATE, default on; 0: every
// allocation is the server's own, one round trip each).
bool SuballocationOn();

// Maps the stream handle a program passes (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or a
// stream) to the context the work runs in and the stream's session id (0 = the context's
// default stream; CU_STREAM_PER_THREAD: the calling thread's per-thread stream).
CUresult ResolveStream(CUstream stream, CUctx_st** ctx, uint64_t* remote);
// True for the handles that name no stream object: NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD.
inline bool IsSpecialStream(CUstream s) {
  return s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}
// The calling thread's per-thread default stream in `ctx`, made on the server on first use.
CUresult PerThreadStream(CUctx_st* ctx, CUstream* out);
// The calling thread's per-thread stream in `ctx` if it has made one, else nullptr
// (objects_mutex held).
CUstream ExistingPerThreadStream(CUctx_st* ctx);
// Forgets the per-thread streams of `ctx` (its server context is gone; objects_mutex held).
void ForgetPerThreadStreams(CUctx_st* ctx);

// Before a synchronous copy to the device on `remote_stream` of `ctx` is posted: in a program
// whose waits go on lanes (ServerSet::HandsOffWaits), waits for the stream's earlier work, as
// CUDA's synchronous copies do, so that the server is not held behind that work while it
// serves the program's other threads. Nothing otherwise (the server then waits, in order).
CUresult WaitBeforeSynchronousCopy(CUctx_st* ctx, uint64_t remote_stream);
// Copies between host and device memory, ordered on `stream` (nullptr: the default stream).
CUresult CopyHtoD(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream, bool async);
CUresult CopyDtoH(void* dst, CUdeviceptr src, size_t bytes, CUstream stream, bool async);
CUresult CopyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream, bool async);
// Copies `bytes` from memory of `src_ctx` to memory of `dst_ctx` (cuMemcpyPeer; also a copy whose
// ends lie in different contexts): on `stream` when `async`, else in stream order of both
// contexts as the driver serializes it (client/api_peer.cc).
CUresult CopyBetweenContexts(CUdeviceptr dst, CUctx_st* dst_ctx, CUdeviceptr src, CUctx_st* src_ctx,
                             size_t bytes, CUstream stream, bool async);
// The function a launch or attribute query names: a CUfunction, or a CUkernel resolved in the
// current context.
CUresult ResolveFunction(CUfunction f, CUfunc_st** out);
// The kernels of module `m`, in the backend's order (cuModuleEnumerateFunctions, cuFFT's export
// table). Thread-safe.
CUresult ModuleFunctions(CUmodule m, std::vector<CUfunction>* out);
// The whole of the file at `path` in `out` (cuModuleLoad, cuLibraryLoadFromFile, cuLinkAddFile);
// false when it cannot be read.
bool ReadWholeFile(const char* path, std::string* out);
// Packs a launch's arguments (kernelParams, or the extra buffer) by `fn`'s parameter layout;
// CUDA_ERROR_INVALID_VALUE when they do not give every parameter.
CUresult PackArguments(CUfunc_st* fn, void** params, void** extra, std::string* args);

// Stream-ordered work that cannot run now: when `stream` is capturing into a graph, `replay`
// becomes a node of the graph; when the stream waits for a host function, `replay` waits in the
// client behind it and runs (on that stream) once the host function has. Returns true in both
// cases, and the caller must not execute the operation itself. `recordable`: `replay` only posts
// stream-ordered device work, so a graph node made of it may be kept by the server
// (client/graph_record.h).
bool Defer(CUstream stream, CUgraphNodeType type, std::function<CUresult(CUstream)> replay,
           bool recordable = false);

// Stream capture across streams. CaptureEventRecord: when `stream` is capturing, `event` now
// marks a point of that capture (no work is issued) and true is returned. CaptureStreamWait:
// when `event` marks a point of a capture, `stream` joins that capture and true is returned.
bool CaptureEventRecord(CUevent event, CUstream stream);
bool CaptureStreamWait(CUstream stream, CUevent event);

// Waits until no host function or held work remains on `stream` (nullptr and the special
// handles: the context's default stream), or in any stream of `ctx` for WaitContextDrained.
// They return the first failure of held work that ran meanwhile, if any.
CUresult WaitStreamDrained(CUstream stream);
CUresult WaitContextDrained(CUctx_st* ctx);
// Holds `stream`'s later work in the client, without blocking the caller, until `event` can be
// waited for: its held records (`event->held_records`) have been sent and then, for an event of
// another server (`same_server` false), it has completed; for one of the stream's own server the
// server's stream is then told to wait for it (StreamWaitEvent with `flags`). The wait runs on a
// thread of its own. The stream must not be held already (Defer first).
CUresult HoldUntilEvent(CUstream stream, CUevent event, bool same_server, unsigned flags);
// A held record of an event whose count is `held` has been sent (wakes the waits above).
void NoteRecordSent(const std::shared_ptr<std::atomic<int>>& held);
// True while `stream` has a host function that has not run yet.
bool StreamHeld(CUstream stream);
// True while `stream` is being captured into a graph (its work becomes nodes).
inline bool StreamCapturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return rgpu_impl_cuStreamIsCapturing(stream, &status) == CUDA_SUCCESS &&
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

// Checks and posts the stream memory operations of a cuStreamBatchMemOp (decoded by
// common/stream_mem_ops.h) on `stream`, in their order (client/api_stream_memops.cc): what a
// batch memory operation graph node runs.
CUresult SubmitStreamMemOps(CUstream stream, const std::vector<rgpu::StreamMemOp>& ops);

// Copies with a CUDA array on either side (client/api_array.cc): CopyNamesArray says whether `c`
// has one; CopyArray3D runs it on `stream` (a box with no width, height or depth copies nothing).
bool CopyNamesArray(const CUDA_MEMCPY3D& c);
CUresult CopyArray3D(const CUDA_MEMCPY3D& c, CUstream stream, bool async);
// The server's id of a live array of a live context; CUDA_ERROR_INVALID_HANDLE otherwise.
CUresult ArrayRemote(CUarray array, uint64_t* remote);
// The descriptor of a live array of `ctx`; CUDA_ERROR_INVALID_HANDLE for no live array,
// CUDA_ERROR_INVALID_VALUE for one of another context.
CUresult ArrayDescriptorIn(CUctx_st* ctx, CUarray array, CUDA_ARRAY3D_DESCRIPTOR* descriptor);

// True when `address` lies in device memory this client allocated or looked up.
bool IsDeviceAddress(uint64_t address);
// True when `address` lies in managed or mapped pinned memory (client/managed_memory.h).
bool IsManagedAddress(uint64_t address);
// Where the device has the byte at `address`: the same address, but for memory the program
// registered mapped from its own pages (cuMemHostRegister with DEVICEMAP), which the device has
// elsewhere.
uint64_t DeviceAddressOf(uint64_t address);

}  // namespace rgpu::client
